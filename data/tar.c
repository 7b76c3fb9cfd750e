/* tar: the reader described in tar.h.
 *
 * Layout of a 512-byte header (POSIX.1-1988 ustar): name[100] at 0, size[12] at 124 (octal, or
 * GNU base-256 when the first byte has its high bit set), chksum[8] at 148 (the sum of the
 * header's bytes with the checksum field read as spaces), typeflag at 156, magic[6] at 257,
 * version[2] at 263, prefix[155] at 345 (POSIX only: GNU keeps times there). A member's data
 * follows its header, padded to a multiple of 512.
 *
 * Invariant: pos is a multiple of 512 and pos <= len; has_longname is set only between a 'L' or
 * 'x' header and the header it applies to. */
#include "data/tar.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "util/err.h"

#define TAR_BLOCK 512

int tar_probe(const char *data, size_t len)
{
    if (len < TAR_BLOCK)
        return 0;
    const unsigned char *h = (const unsigned char *)data;
    if (memcmp(h + 257, "ustar", 5) != 0)
        return 0;
    unsigned long sum = 0, want = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    int i = 148;
    while (i < 156 && h[i] == ' ')
        i++;
    int digits = 0;
    for (; i < 156 && h[i] >= '0' && h[i] <= '7'; i++, digits++)
        want = want * 8 + (unsigned long)(h[i] - '0');
    return digits > 0 && sum == want;
}

void tar_reader_init(tar_reader *r, const char *data, size_t len)
{
    memset(r, 0, sizeof *r);
    r->data = data;
    r->len = len;
}

/* Parses a numeric field of n bytes (octal, space or NUL terminated, or base-256). */
static int tar_number(const unsigned char *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative, or more than 64 bits */
        for (size_t i = 1; i < n; i++) {
            if (v >> 56)
                return -1;
            v = (v << 8) | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    size_t start = i;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    if (i == start && !(i < n && f[i] == '\0'))
        return -1;
    if (i < n && f[i] != ' ' && f[i] != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Writes the normalised form of path[0..len) into out[TAR_NAME_MAX]; -1 when it is absolute,
 * has a ".." component, is empty once normalised, or holds a NUL. */
static int tar_normalise(const char *path, size_t len, char *out)
{
    size_t o = 0, i = 0;
    if (len == 0 || path[0] == '/' || memchr(path, '\0', len))
        return -1;
    while (i < len) {
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 2 && path[i] == '.' && path[i + 1] == '.')
            return -1;
        if (n > 0 && !(n == 1 && path[i] == '.')) {
            if (o + (o > 0) + n >= TAR_NAME_MAX)
                return -1;
            if (o > 0)
                out[o++] = '/';
            memcpy(out + o, path + i, n);
            o += n;
        }
        i = j + 1;
    }
    if (o == 0)
        return -1;
    out[o] = '\0';
    return 0;
}

/* Reads a pax extended header's records (each "LEN key=value\n") and keeps "path". */
static int tar_pax(tar_reader *r, const char *p, size_t size, size_t at, char *err)
{
    size_t i = 0;
    while (i < size) {
        size_t n = 0, k = i;
        while (k < size && p[k] >= '0' && p[k] <= '9' && n < size)
            n = n * 10 + (size_t)(p[k++] - '0');
        if (k == i || k >= size || p[k] != ' ' || n <= k - i + 1 || n > size - i ||
            p[i + n - 1] != '\n')
            return err_set(err, -EINVAL, "bad tar archive: malformed pax header at offset %zu", at);
        const char *rec = p + k + 1, *end = p + i + n - 1;
        if ((size_t)(end - rec) >= 5 && memcmp(rec, "path=", 5) == 0) {
            size_t len = (size_t)(end - rec) - 5;
            if (len >= TAR_NAME_MAX)
                return err_set(err, -EINVAL, "bad tar archive: a path of %zu bytes at offset %zu",
                               len, at);
            memcpy(r->longname, rec + 5, len);
            r->longname[len] = '\0';
            r->has_longname = 1;
        }
        i += n;
    }
    return 0;
}

int tar_reader_next(tar_reader *r, tar_entry *e, char *err)
{
    for (;;) {
        size_t at = r->pos;
        if (at >= r->len)
            return 0;
        if (r->len - at < TAR_BLOCK)
            return err_set(err, -EINVAL,
                           "truncated tar archive: the header at offset %zu has %zu of 512 bytes",
                           at, r->len - at);
        const unsigned char *h = (const unsigned char *)r->data + at;
        size_t zero = 0;
        while (zero < TAR_BLOCK && h[zero] == 0)
            zero++;
        if (zero == TAR_BLOCK)
            return 0;
        if (!tar_probe((const char *)h, TAR_BLOCK))
            return err_set(err, -EINVAL,
                           "bad tar archive: no ustar header with a right checksum at offset %zu",
                           at);
        uint64_t size;
        if (tar_number(h + 124, 12, &size) < 0)
            return err_set(err, -EINVAL, "bad tar archive: bad size field at offset %zu", at);
        size_t data_at = at + TAR_BLOCK, left = r->len - data_at;
        char raw[256];
        size_t raw_len = 0;
        if (!r->has_longname && memcmp(h + 257, "ustar\0", 6) == 0 && h[345]) {
            size_t pn = strnlen((const char *)h + 345, 155);
            memcpy(raw, h + 345, pn);
            raw[pn] = '/';
            raw_len = pn + 1;
        }
        size_t nn = strnlen((const char *)h, 100);
        memcpy(raw + raw_len, h, nn);
        raw_len += nn;
        const char *shown = r->has_longname ? r->longname : raw;
        int shown_len = r->has_longname ? (int)strlen(r->longname) : (int)raw_len;
        if (size > left)
            return err_set(err, -EINVAL,
                           "truncated tar archive: %.*s needs %llu bytes at offset %zu, %zu are "
                           "left",
                           shown_len > 200 ? 200 : shown_len, shown, (unsigned long long)size,
                           data_at, left);
        size_t padded = (size_t)size + (TAR_BLOCK - 1 - ((size_t)size + TAR_BLOCK - 1) % TAR_BLOCK);
        r->pos = padded >= left ? r->len : data_at + padded;
        const char *d = r->data + data_at;
        char type = (char)h[156];
        int rc;
        switch (type) {
        case 'L':
            if (size >= TAR_NAME_MAX)
                return err_set(err, -EINVAL,
                               "bad tar archive: a long name of %llu bytes at offset %zu",
                               (unsigned long long)size, at);
            memcpy(r->longname, d, (size_t)size);
            r->longname[size] = '\0';
            r->has_longname = 1;
            continue;
        case 'x':
            rc = tar_pax(r, d, (size_t)size, at, err);
            if (rc < 0)
                return rc;
            continue;
        case 'g':
        case 'K':
        case 'V': /* a volume label */
            continue;
        case '5':
            r->has_longname = 0;
            continue;
        case '0':
        case '\0':
        case '7':
            break;
        case '1':
        case '2':
            return err_set(err, -EINVAL,
                           "tar member %.*s is a link; only regular files are read from an archive",
                           shown_len > 200 ? 200 : shown_len, shown);
        default:
            return err_set(err, -EINVAL,
                           "tar member %.*s has type 0x%02x, not a regular file or a directory",
                           shown_len > 200 ? 200 : shown_len, shown, (unsigned char)type);
        }
        const char *path = r->has_longname ? r->longname : raw;
        size_t path_len = r->has_longname ? strlen(r->longname) : raw_len;
        r->has_longname = 0;
        if (tar_normalise(path, path_len, r->name) < 0)
            return err_set(err, -EINVAL,
                           "tar member %.*s: an absolute path, a '..' component or an empty name "
                           "is refused",
                           (int)(path_len > 200 ? 200 : path_len), path);
        e->name = r->name;
        e->data = d;
        e->size = (size_t)size;
        return 1;
    }
}
