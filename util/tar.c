/* tar: the streaming reader described in tar.h.
 *
 * Layout of a 512-byte header (POSIX.1-1988 ustar): name[100] at 0, mode[8] at 100, size[12] at
 * 124, chksum[8] at 148, typeflag at 156, linkname[100] at 157, magic[6] at 257, version[2] at
 * 263, prefix[155] at 345 (POSIX only).
 *
 * States: HEADER (collecting 512 bytes) → DATA (a member's data, handed out in the caller's own
 * pieces) or EXT (an extension member's data, parsed byte by byte) → PAD (to the next 512) →
 * HEADER; a zero block → END. A pax record is parsed as it arrives: LEN digits, a space, the key
 * up to '=', the value up to the record's last byte, which must be '\n'; the values kept go
 * straight into the member's path or link (or num), so nothing is buffered.
 *
 * Invariants: at counts the bytes taken; has_path / has_link / has_size are set only between an
 * extension member and the header they apply to, and cleared at that header. */
#include "util/tar.h"

#include <string.h>

#include "util/err.h"

enum { S_HEADER, S_DATA, S_EXT, S_PAD, S_END };
enum { P_LEN, P_KEY, P_VAL };            /* where a pax record is */
enum { V_NONE, V_PATH, V_LINK, V_SIZE }; /* where its value goes */

#define PAX_DIGITS 18 /* a record length or a pax size: below 10^18, so below 2^63 */

/* A numeric field of n bytes (see tar.h for the rules): 0, or -1 when unreadable. */
static int tar_number(const unsigned char *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] == 0x80) { /* GNU base-256, positive */
        for (size_t i = 1; i < n; i++) {
            if (v >> 55)
                return -1; /* past 2^63 - 1 */
            v = v << 8 | f[i];
        }
        *out = v;
        return 0;
    }
    if (f[0] & 0x80)
        return -1; /* negative base-256, or junk */
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    if (i == n)
        return -1; /* all spaces */
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    if (i < n && f[i] != ' ' && f[i] != '\0')
        return -1;
    *out = v;
    return 0;
}

unsigned tar_checksum(const void *block)
{
    const unsigned char *h = block;
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return sum;
}

/* 0 for a good header, -1 when the magic is not ustar's or GNU's, -2 for a bad checksum. */
static int tar_header_check(const unsigned char *h)
{
    if (memcmp(h + 257, "ustar", 5) != 0 || (h[262] != '\0' && h[262] != ' '))
        return -1;
    uint64_t want;
    if (tar_number(h + 148, 8, &want) < 0 || want == 0) /* no header sums to 0 */
        return -2;
    long ssum = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        ssum += (i >= 148 && i < 156) ? ' ' : (signed char)h[i];
    return want == tar_checksum(h) || (int64_t)want == ssum ? 0 : -2;
}

int tar_is_header(const void *block)
{
    return tar_header_check(block) == 0;
}

void tar_stream_init(tar_stream *t)
{
    memset(t, 0, sizeof *t);
    t->state = S_HEADER;
}

static int tar_pax_bad(const tar_stream *t, char *err)
{
    return err_set(err, -EINVAL, "bad tar archive: malformed pax header at offset %llu",
                   (unsigned long long)t->ext_at);
}

/* Appends c to a path or link target being collected (len bytes so far). */
static int tar_put(tar_stream *t, char *dst, size_t *len, unsigned char c, char *err)
{
    if (*len + 1 >= TAR_PATH_MAX)
        return err_set(err, -EINVAL,
                       "bad tar archive: a path or link target over %d bytes in the extended "
                       "header at offset %llu",
                       TAR_PATH_MAX - 1, (unsigned long long)t->ext_at);
    dst[(*len)++] = (char)c;
    return 0;
}

/* The record's last byte has come: applies its value. */
static void tar_pax_commit(tar_stream *t)
{
    switch (t->rec_val) {
    case V_PATH:
        t->m.path[t->val_len] = '\0';
        t->has_path = t->val_len > 0;
        break;
    case V_LINK:
        t->m.link[t->val_len] = '\0';
        t->has_link = t->val_len > 0;
        break;
    case V_SIZE:
        t->pax_size = 0;
        for (size_t i = 0; i < t->val_len; i++)
            t->pax_size = t->pax_size * 10 + (uint64_t)(t->num[i] - '0');
        t->has_size = t->val_len > 0;
        break;
    }
}

/* One byte of a pax record ("LEN key=value\n"); t->left already counts it taken. */
static int tar_pax_byte(tar_stream *t, unsigned char c, char *err)
{
    t->rec_seen++;
    switch (t->rec_phase) {
    case P_LEN:
        if (c >= '0' && c <= '9' && t->rec_seen <= PAX_DIGITS) {
            t->rec_len = t->rec_len * 10 + (uint64_t)(c - '0');
            return 0;
        }
        /* after the space: at least a key byte, '=' and '\n', all inside the member */
        if (c != ' ' || t->rec_seen == 1 || t->rec_len < t->rec_seen + 3 ||
            t->rec_len - t->rec_seen > t->left)
            return tar_pax_bad(t, err);
        t->rec_phase = P_KEY;
        t->key_len = 0;
        return 0;
    case P_KEY:
        if (t->rec_seen >= t->rec_len)
            return tar_pax_bad(t, err); /* no '=' before the record's end */
        if (c != '=') {
            if (t->key_len < sizeof t->key)
                t->key[t->key_len] = (char)c;
            t->key_len++;
            return 0;
        }
        if (t->key_len == 0)
            return tar_pax_bad(t, err);
        t->rec_val = V_NONE;
        if (t->key_len == 4 && memcmp(t->key, "path", 4) == 0)
            t->rec_val = V_PATH;
        else if (t->key_len == 8 && memcmp(t->key, "linkpath", 8) == 0)
            t->rec_val = V_LINK;
        else if (t->key_len == 4 && memcmp(t->key, "size", 4) == 0)
            t->rec_val = V_SIZE;
        t->val_len = 0;
        t->rec_phase = P_VAL;
        return 0;
    default: /* P_VAL */
        if (t->rec_seen == t->rec_len) {
            if (c != '\n')
                return tar_pax_bad(t, err);
            tar_pax_commit(t);
            t->rec_phase = P_LEN;
            t->rec_len = t->rec_seen = 0;
            return 0;
        }
        if ((t->rec_val == V_PATH || t->rec_val == V_LINK) && c == '\0')
            return err_set(err, -EINVAL,
                           "bad tar archive: a pax path or linkpath holding a NUL at offset %llu",
                           (unsigned long long)t->ext_at);
        if (t->rec_val == V_PATH)
            return tar_put(t, t->m.path, &t->val_len, c, err);
        if (t->rec_val == V_LINK)
            return tar_put(t, t->m.link, &t->val_len, c, err);
        if (t->rec_val == V_SIZE) {
            if (c < '0' || c > '9' || t->val_len == PAX_DIGITS)
                return tar_pax_bad(t, err);
            t->num[t->val_len++] = (char)c;
        }
        return 0;
    }
}

/* n bytes of an extension member's data. */
static int tar_ext(tar_stream *t, const unsigned char *p, size_t n, char *err)
{
    for (size_t i = 0; i < n; i++) {
        t->left--;
        int rc = 0;
        if (t->ext_type == 'x')
            rc = tar_pax_byte(t, p[i], err);
        else if (t->ext_type == 'g' || t->ext_nul)
            continue;
        else if (p[i] == '\0')
            t->ext_nul = 1; /* a GNU long name ends at its NUL */
        else
            rc = tar_put(t, t->ext_type == 'L' ? t->m.path : t->m.link, &t->val_len, p[i], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The extension member's data is all read: applies it. */
static int tar_ext_done(tar_stream *t, char *err)
{
    if (t->ext_type == 'x' && (t->rec_phase != P_LEN || t->rec_seen != 0))
        return tar_pax_bad(t, err); /* a record runs past the member */
    if (t->ext_type == 'L') {
        t->m.path[t->val_len] = '\0';
        t->has_path = 1;
    } else if (t->ext_type == 'K') {
        t->m.link[t->val_len] = '\0';
        t->has_link = 1;
    }
    t->state = t->pad ? S_PAD : S_HEADER;
    return 0;
}

static uint64_t tar_padding(uint64_t size)
{
    return (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
}

/* A full header block in t->hdr: TAR_MEMBER, TAR_END, TAR_MORE (an extension), or -EINVAL. */
static int tar_header(tar_stream *t, char *err)
{
    const unsigned char *h = t->hdr;
    unsigned long long at = t->at - TAR_BLOCK;
    size_t zero = 0;
    while (zero < TAR_BLOCK && h[zero] == 0)
        zero++;
    if (zero == TAR_BLOCK) {
        t->state = S_END;
        return TAR_END;
    }
    int bad = tar_header_check(h);
    if (bad == -1)
        return err_set(err, -EINVAL,
                       "bad tar archive: the block at offset %llu is not a ustar or GNU tar header",
                       at);
    if (bad < 0)
        return err_set(err, -EINVAL,
                       "bad tar archive: the header at offset %llu has a wrong checksum", at);
    uint64_t size, mode;
    if (tar_number(h + 124, 12, &size) < 0 || tar_number(h + 100, 8, &mode) < 0)
        return err_set(err, -EINVAL,
                       "bad tar archive: the header at offset %llu has an unreadable size or mode",
                       at);
    char type = (char)h[156];
    t->left = size;
    t->pad = tar_padding(size);
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
        t->ext_type = type;
        t->ext_at = at;
        t->ext_size = size;
        t->ext_nul = 0;
        t->val_len = 0;
        t->rec_phase = P_LEN;
        t->rec_len = t->rec_seen = 0;
        t->state = S_EXT;
        return size ? TAR_MORE : tar_ext_done(t, err);
    }
    if (!t->has_path) { /* POSIX: prefix "/" name; GNU keeps times where the prefix is */
        size_t o = 0;
        if (h[262] == '\0' && h[345]) {
            o = strnlen((const char *)h + 345, 155);
            memcpy(t->m.path, h + 345, o);
            t->m.path[o++] = '/';
        }
        size_t nn = strnlen((const char *)h, 100);
        memcpy(t->m.path + o, h, nn);
        t->m.path[o + nn] = '\0';
    }
    if (!t->has_link) {
        size_t ln = strnlen((const char *)h + 157, 100);
        memcpy(t->m.link, h + 157, ln);
        t->m.link[ln] = '\0';
    }
    if (t->has_size)
        size = t->pax_size;
    if (type >= '1' && type <= '6')
        size = 0; /* links, devices, directories, FIFOs: no data */
    t->has_path = t->has_link = t->has_size = 0;
    t->m.type = type;
    t->m.mode = mode;
    t->m.size = size;
    t->m.at = at;
    t->left = size;
    t->pad = tar_padding(size);
    t->state = size ? S_DATA : S_HEADER;
    return TAR_MEMBER;
}

int tar_stream_next(tar_stream *t, const void *p, size_t n, size_t *used, const void **data,
                    size_t *len, char *err)
{
    const unsigned char *q = p;
    size_t i = 0;
    int ev = TAR_MORE;
    while (ev == TAR_MORE && i < n && t->state != S_END) {
        size_t k = n - i;
        switch (t->state) {
        case S_HEADER:
            k = k < TAR_BLOCK - t->fill ? k : TAR_BLOCK - t->fill;
            memcpy(t->hdr + t->fill, q + i, k);
            t->fill += k;
            t->at += k;
            if (t->fill == TAR_BLOCK) {
                t->fill = 0;
                ev = tar_header(t, err);
            }
            break;
        case S_DATA:
            k = k < t->left ? k : (size_t)t->left;
            *data = q + i;
            *len = k;
            t->at += k;
            t->left -= k;
            if (t->left == 0)
                t->state = t->pad ? S_PAD : S_HEADER;
            ev = TAR_DATA;
            break;
        case S_EXT:
            k = k < t->left ? k : (size_t)t->left;
            t->at += k;
            ev = tar_ext(t, q + i, k, err);
            if (ev == 0 && t->left == 0)
                ev = tar_ext_done(t, err);
            break;
        default: /* S_PAD */
            k = k < t->pad ? k : (size_t)t->pad;
            t->at += k;
            t->pad -= k;
            if (t->pad == 0)
                t->state = S_HEADER;
            break;
        }
        if (ev < 0)
            return ev;
        i += k;
    }
    *used = i;
    return t->state == S_END && ev == TAR_MORE ? TAR_END : ev;
}

int tar_stream_end(const tar_stream *t, char *err)
{
    switch (t->state) {
    case S_END:
        return 0;
    case S_HEADER:
        if (t->fill == 0)
            return 0;
        return err_set(err, -EINVAL,
                       "truncated tar archive: the header at offset %llu has %zu of 512 bytes",
                       (unsigned long long)(t->at - t->fill), t->fill);
    case S_DATA:
        return err_set(err, -EINVAL,
                       "truncated tar archive: %.200s needs %llu bytes at offset %llu, %llu are "
                       "left",
                       t->m.path, (unsigned long long)t->m.size,
                       (unsigned long long)(t->m.at + TAR_BLOCK),
                       (unsigned long long)(t->m.size - t->left));
    case S_EXT:
        return err_set(err, -EINVAL,
                       "truncated tar archive: the extended header at offset %llu needs %llu "
                       "bytes, %llu are left",
                       (unsigned long long)t->ext_at, (unsigned long long)t->ext_size,
                       (unsigned long long)(t->ext_size - t->left));
    default:
        return err_set(err, -EINVAL,
                       "truncated tar archive: it ends inside a member's padding at offset %llu",
                       (unsigned long long)t->at);
    }
}
