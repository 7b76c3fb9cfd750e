/* bundle: the streaming reader of users' code bundles (.tar.gz) and every check on them;
 * see bundle.h for the rules. bundle_unpack.c writes what this reads, bundle_pack.c packs.
 *
 * Design: one streaming walker. gzip is inflated 64 KiB at a time and the bytes pushed into a
 * tar state machine (header → data → padding, with pax/GNU extension members collected into a
 * bounded buffer), which hands each member to callbacks: none for bundle_check, the file
 * writers for bundle_unpack. What must be known about the whole archive (duplicates, members
 * beneath a symlink, symlink targets that step back out of another symlink) is decided at the
 * end from the list of member paths, which the caps bound (BOOK_MAX bytes of paths).
 * bundle_unpack runs the whole check first and writes only when it passed, then walks again,
 * opening every folder with O_NOFOLLOW so nothing it writes can land outside dir even if a check
 * were wrong.
 *
 * Caps: lim->max_files counts members of every kind (files, folders, links); bundle_info.files
 * counts regular files; max_unpacked_bytes is the sum of the regular files' sizes, refused at
 * the header that passes it, before its data is inflated. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "script/bundle_priv.h"
#include "util/array.h"
#include "util/err.h"

#define EXT_MAX  (64 * 1024) /* a pax header or GNU long name member */
#define BOOK_MAX (16u << 20) /* bytes of remembered paths and targets */

enum { S_HEADER, S_DATA, S_EXT, S_SKIP, S_PAD, S_END };

/* Normalises a member path ("./a//b/" → "a/b"): 0, 1 for the root itself ("./"), or -EINVAL
 * with the reason. */
static int norm_path(const char *in, char *out, size_t cap, char *err)
{
    if (in[0] == '/')
        return err_set(err, -EINVAL, "member \"%s\" has an absolute path", in);
    size_t o = 0;
    const char *p = in;
    while (*p) {
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - s);
        while (*p == '/')
            p++;
        if (len == 0 || (len == 1 && s[0] == '.'))
            continue;
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return err_set(err, -EINVAL, "member \"%s\" has a \"..\" component", in);
        if (len > 255)
            return err_set(err, -EINVAL, "member \"%.64s...\" has a name over 255 bytes", in);
        if (o + len + 2 > cap)
            return err_set(err, -EINVAL, "member \"%.64s...\" has a path over %d bytes", in,
                           PATH_CAP - 1);
        if (o)
            out[o++] = '/';
        memcpy(out + o, s, len);
        o += len;
    }
    out[o] = '\0';
    return o == 0 ? 1 : 0;
}

/* An octal field, or GNU base-256 when its first byte has the high bit. */
static int parse_num(const unsigned char *f, size_t len, uint64_t *v)
{
    uint64_t x = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative or too large */
        for (size_t i = 1; i < len; i++) {
            if (x >> 56)
                return -1;
            x = x << 8 | f[i];
        }
        *v = x;
        return 0;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    int digits = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (x >> 60)
            return -1;
        x = x * 8 + (uint64_t)(f[i] - '0');
    }
    if (i < len && f[i] != ' ' && f[i] != '\0')
        return -1;
    *v = x;
    return 0;
}

static void field_str(const unsigned char *f, size_t len, char *out)
{
    size_t n = strnlen((const char *)f, len);
    memcpy(out, f, n);
    out[n] = '\0';
}

static int remember(walker *w, const char *path, int type, const char *target, char *err)
{
    size_t need = strlen(path) + 1 + (target ? strlen(target) + 1 : 0);
    if (w->book + need > BOOK_MAX)
        return err_set(err, -EFBIG, "the bundle's paths pass %u MiB in all", BOOK_MAX >> 20);
    if (ARRAY_GROW(w->m, w->cap, w->n + 1, ARRAY_NO_MAX) < 0) /* bounded by BOOK_MAX above */
        return err_set(err, -ENOMEM, "out of memory reading the bundle");
    member *e = &w->m[w->n];
    e->path = strdup(path);
    e->target = target ? strdup(target) : NULL;
    e->type = type;
    if (!e->path || (target && !e->target)) {
        free(e->path);
        free(e->target);
        return err_set(err, -ENOMEM, "out of memory reading the bundle");
    }
    w->n++;
    w->book += need;
    return 0;
}

/* pax records "LEN key=value\n": path, linkpath and size apply to the next member. */
static int pax_parse(walker *w, char *err)
{
    size_t pos = 0;
    while (pos < w->ext_len) {
        char *rec = w->ext + pos;
        char *end;
        unsigned long len = strtoul(rec, &end, 10);
        if (end == rec || *end != ' ' || len < 5 || len > w->ext_len - pos || rec[len - 1] != '\n')
            return err_set(err, -EINVAL, "a pax header of the bundle is malformed");
        char *key = end + 1, *eq = memchr(key, '=', (size_t)(rec + len - 1 - key));
        if (!eq)
            return err_set(err, -EINVAL, "a pax header of the bundle is malformed");
        size_t klen = (size_t)(eq - key), vlen = (size_t)(rec + len - 1 - (eq + 1));
        const char *val = eq + 1;
        if ((klen == 4 && !memcmp(key, "path", 4)) || (klen == 8 && !memcmp(key, "linkpath", 8))) {
            char *dst = klen == 4 ? w->longname : w->longlink;
            if (vlen >= PATH_CAP || memchr(val, '\0', vlen))
                return err_set(err, -EINVAL, "a pax %s record is over %d bytes or holds a NUL",
                               klen == 4 ? "path" : "linkpath", PATH_CAP - 1);
            memcpy(dst, val, vlen);
            dst[vlen] = '\0';
            if (klen == 4)
                w->has_longname = 1;
            else
                w->has_longlink = 1;
        } else if (klen == 4 && !memcmp(key, "size", 4)) {
            char num[32];
            if (vlen == 0 || vlen >= sizeof num)
                return err_set(err, -EINVAL, "a pax size record is malformed");
            memcpy(num, val, vlen);
            num[vlen] = '\0';
            char *e2;
            errno = 0;
            unsigned long long v = strtoull(num, &e2, 10);
            if (*e2 || errno)
                return err_set(err, -EINVAL, "a pax size record is malformed");
            w->pax_size = v;
            w->has_pax_size = 1;
        }
        pos += len;
    }
    return 0;
}

static int ext_done(walker *w, char *err)
{
    if (w->ext_type == 'x')
        return pax_parse(w, err);
    char *dst = w->ext_type == 'L' ? w->longname : w->longlink;
    size_t n = strnlen(w->ext, w->ext_len);
    if (n >= PATH_CAP)
        return err_set(err, -EINVAL, "a GNU long %s is over %d bytes",
                       w->ext_type == 'L' ? "name" : "link target", PATH_CAP - 1);
    memcpy(dst, w->ext, n);
    dst[n] = '\0';
    if (w->ext_type == 'L')
        w->has_longname = 1;
    else
        w->has_longlink = 1;
    return 0;
}

static void after_data(walker *w, uint64_t size)
{
    w->pad = (BLOCK - size % BLOCK) % BLOCK;
    w->state = w->pad ? S_PAD : S_HEADER;
}

static int header(walker *w, char *err)
{
    const unsigned char *h = w->hdr;
    int zero = 1;
    for (size_t i = 0; i < BLOCK && zero; i++)
        zero = h[i] == 0;
    if (zero) {
        if (++w->zero_blocks == 2)
            w->state = S_END;
        return 0;
    }
    w->zero_blocks = 0;
    uint64_t sum_field;
    if (parse_num(h + 148, 8, &sum_field) < 0)
        return err_set(err, -EINVAL, "not a tar.gz: a tar header's checksum is unreadable");
    unsigned long usum = 0;
    long ssum = 0;
    for (size_t i = 0; i < BLOCK; i++) {
        unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
        usum += c;
        ssum += (signed char)c;
    }
    if (sum_field != usum && (long)sum_field != ssum)
        return err_set(err, -EINVAL, "not a tar.gz: a tar header's checksum is wrong");
    int posix = !memcmp(h + 257, "ustar\0", 6), gnu = !memcmp(h + 257, "ustar ", 6);
    if (!posix && !gnu)
        return err_set(err, -EINVAL, "not a tar.gz: a header is neither ustar, pax nor GNU tar");
    uint64_t size, mode;
    if (parse_num(h + 124, 12, &size) < 0 || parse_num(h + 100, 8, &mode) < 0)
        return err_set(err, -EINVAL, "not a tar.gz: a tar header's size or mode is unreadable");
    char type = (char)h[156];

    if (type == 'x' || type == 'L' || type == 'K') {
        if (size > EXT_MAX)
            return err_set(err, -EINVAL, "an extended header of the bundle is over %d bytes",
                           EXT_MAX);
        w->ext_type = type;
        w->ext_len = 0;
        w->remaining = size;
        w->pad = (BLOCK - size % BLOCK) % BLOCK;
        w->state = size ? S_EXT : S_HEADER;
        if (!size)
            return ext_done(w, err);
        return 0;
    }
    if (type == 'g') { /* global pax header: nothing in it applies to safety */
        w->remaining = size;
        w->pad = (BLOCK - size % BLOCK) % BLOCK;
        w->state = size ? S_SKIP : S_HEADER;
        return 0;
    }

    char raw[PATH_CAP + 160];
    if (w->has_longname) {
        snprintf(raw, sizeof raw, "%s", w->longname);
    } else {
        char name[101], prefix[156];
        field_str(h, 100, name);
        field_str(h + 345, 155, prefix);
        if (posix && prefix[0])
            snprintf(raw, sizeof raw, "%s/%s", prefix, name);
        else
            snprintf(raw, sizeof raw, "%s", name);
    }
    char target[PATH_CAP];
    if (w->has_longlink)
        snprintf(target, sizeof target, "%s", w->longlink);
    else
        field_str(h + 157, 100, target);
    if (w->has_pax_size)
        size = w->pax_size;
    w->has_longname = w->has_longlink = w->has_pax_size = 0;

    int rc = norm_path(raw, w->path, sizeof w->path, err);
    if (rc < 0)
        return rc;
    int root = rc == 1;
    int mtype;
    switch (type) {
    case '0':
    case '\0':
    case '7':
        mtype = M_FILE;
        if (root)
            return err_set(err, -EINVAL, "a file member of the bundle has an empty path");
        break;
    case '5':
        mtype = M_DIR;
        break;
    case '2':
        mtype = M_LINK;
        if (root)
            return err_set(err, -EINVAL, "a symlink member of the bundle has an empty path");
        if (!target[0])
            return err_set(err, -EINVAL, "symlink \"%s\" has an empty target", w->path);
        if (target[0] == '/')
            return err_set(err, -EINVAL, "symlink \"%s\" points to the absolute path \"%s\"",
                           w->path, target);
        break;
    case '1':
        return err_set(err, -EINVAL,
                       "member \"%s\" is a hard link; a bundle may hold only files, folders and "
                       "symlinks",
                       w->path);
    case '3':
    case '4':
        return err_set(err, -EINVAL,
                       "member \"%s\" is a device; a bundle may hold only files, "
                       "folders and symlinks",
                       w->path);
    case '6':
        return err_set(err, -EINVAL,
                       "member \"%s\" is a FIFO; a bundle may hold only files, "
                       "folders and symlinks",
                       w->path);
    default:
        return err_set(err, -EINVAL, "member \"%s\" has the unsupported tar type '%c'", w->path,
                       type >= 32 && type < 127 ? type : '?');
    }

    if (root) { /* "./": the tree itself */
        w->remaining = 0;
        after_data(w, 0);
        return 0;
    }
    if (++w->members > w->max_files)
        return err_set(err, -EFBIG, "the bundle has more than %llu members (at \"%s\")",
                       (unsigned long long)w->max_files, w->path);
    if (mtype == M_FILE) {
        w->files++;
        if (size > w->max_bytes - w->bytes)
            return err_set(err, -EFBIG, "the bundle unpacks to more than %llu bytes (at \"%s\")",
                           (unsigned long long)w->max_bytes, w->path);
        w->bytes += size;
    } else {
        size = mtype == M_DIR ? size : 0; /* a directory's data, if any, is skipped */
    }
    rc = remember(w, w->path, mtype, mtype == M_LINK ? target : NULL, err);
    if (rc < 0)
        return rc;
    if (w->cb) {
        rc = w->cb->begin(w, w->path, mtype, (unsigned)mode, target, err);
        if (rc < 0)
            return rc;
    }
    w->remaining = w->size = size;
    if (mtype == M_FILE) {
        w->state = S_DATA;
        if (size == 0) {
            if (w->cb) {
                rc = w->cb->end(w, err);
                if (rc < 0)
                    return rc;
            }
            w->state = S_HEADER;
        }
    } else {
        w->pad = (BLOCK - size % BLOCK) % BLOCK;
        w->state = size ? S_SKIP : S_HEADER;
    }
    return 0;
}

/* Pushes n bytes of the tar stream. */
static int tar_feed(walker *w, const unsigned char *p, size_t n, char *err)
{
    w->fed += n;
    while (n > 0 && w->state != S_END) {
        size_t take;
        int rc = 0;
        switch (w->state) {
        case S_HEADER:
            take = BLOCK - w->hdr_fill < n ? BLOCK - w->hdr_fill : n;
            memcpy(w->hdr + w->hdr_fill, p, take);
            w->hdr_fill += take;
            if (w->hdr_fill == BLOCK) {
                w->hdr_fill = 0;
                rc = header(w, err);
            }
            break;
        case S_DATA:
            take = w->remaining < n ? (size_t)w->remaining : n;
            if (w->cb)
                rc = w->cb->data(w, p, take, err);
            w->remaining -= take;
            if (rc == 0 && w->remaining == 0) {
                if (w->cb)
                    rc = w->cb->end(w, err);
                after_data(w, w->size);
            }
            break;
        case S_EXT:
            take = w->remaining < n ? (size_t)w->remaining : n;
            if (!w->ext) {
                w->ext = malloc(EXT_MAX + 1);
                if (!w->ext)
                    return err_set(err, -ENOMEM, "out of memory reading the bundle");
            }
            memcpy(w->ext + w->ext_len, p, take);
            w->ext_len += take;
            w->remaining -= take;
            if (w->remaining == 0) {
                w->ext[w->ext_len] = '\0';
                rc = ext_done(w, err);
                w->state = w->pad ? S_PAD : S_HEADER;
            }
            break;
        case S_SKIP:
            take = w->remaining < n ? (size_t)w->remaining : n;
            w->remaining -= take;
            if (w->remaining == 0)
                w->state = w->pad ? S_PAD : S_HEADER;
            break;
        default: /* S_PAD */
            take = w->pad < n ? (size_t)w->pad : n;
            w->pad -= take;
            if (w->pad == 0)
                w->state = S_HEADER;
            break;
        }
        if (rc < 0)
            return rc;
        p += take;
        n -= take;
    }
    return 0;
}

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const member *)a)->path, ((const member *)b)->path);
}

static const member *find(const walker *w, const char *path)
{
    member key = {.path = (char *)path};
    return bsearch(&key, w->m, w->n, sizeof *w->m, cmp_member);
}

/* The whole-archive rules: duplicates, members beneath a symlink or a file, link targets. */
static int finish_checks(walker *w, char *err)
{
    qsort(w->m, w->n, sizeof *w->m, cmp_member);
    char buf[2 * PATH_CAP];
    for (size_t i = 0; i < w->n; i++) {
        const member *e = &w->m[i];
        if (i > 0 && !strcmp(e->path, w->m[i - 1].path)) {
            if (e->type == M_DIR && w->m[i - 1].type == M_DIR)
                continue;
            return err_set(err, -EINVAL, "member \"%s\" appears twice in the bundle", e->path);
        }
        snprintf(buf, sizeof buf, "%s", e->path);
        for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
            *s = '\0';
            const member *up = find(w, buf);
            if (up && up->type != M_DIR)
                return err_set(err, -EINVAL, "member \"%s\" lies beneath the %s \"%s\"", e->path,
                               up->type == M_LINK ? "symlink" : "file", buf);
            *s = '/';
        }
        if (e->type != M_LINK)
            continue;
        /* resolve the target from the link's folder, lexically; a ".." may not leave the tree
         * nor step back out of a symlink (whose real place lexical steps do not know) */
        snprintf(buf, sizeof buf, "%s", e->path);
        char *slash = strrchr(buf, '/');
        size_t len = slash ? (size_t)(slash - buf) : 0;
        buf[len] = '\0';
        const char *t = e->target;
        while (*t) {
            const char *s = t;
            while (*t && *t != '/')
                t++;
            size_t cl = (size_t)(t - s);
            while (*t == '/')
                t++;
            if (cl == 0 || (cl == 1 && s[0] == '.'))
                continue;
            if (cl == 2 && s[0] == '.' && s[1] == '.') {
                if (len == 0)
                    return err_set(err, -EINVAL,
                                   "symlink \"%s\" points outside the bundle (\"%s\")", e->path,
                                   e->target);
                const member *up = find(w, buf);
                if (up && up->type == M_LINK)
                    return err_set(err, -EINVAL,
                                   "symlink \"%s\" steps back out of the symlink \"%s\" (\"%s\")",
                                   e->path, buf, e->target);
                char *back = strrchr(buf, '/');
                len = back ? (size_t)(back - buf) : 0;
                buf[len] = '\0';
                continue;
            }
            if (len + cl + 2 > sizeof buf)
                return err_set(err, -EINVAL, "symlink \"%s\" has a target too long", e->path);
            if (len)
                buf[len++] = '/';
            memcpy(buf + len, s, cl);
            len += cl;
            buf[len] = '\0';
        }
    }
    return 0;
}

void bundle_walker_free(walker *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->m[i].path);
        free(w->m[i].target);
    }
    free(w->m);
    free(w->ext);
}

/* Inflates gz and pushes it through the tar walker; then the end-of-archive rules. */
int bundle_walk(walker *w, const void *gz, size_t len, char *err)
{
    const unsigned char *in = gz;
    if (len < 18 || in[0] != 0x1f || in[1] != 0x8b)
        return err_set(err, -EINVAL, "not a tar.gz: the data is not gzip");
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return err_set(err, -ENOMEM, "out of memory starting zlib");
    unsigned char *out = malloc(CHUNK);
    int rc = 0;
    if (!out) {
        rc = err_set(err, -ENOMEM, "out of memory reading the bundle");
        goto out;
    }
    size_t pos = 0;
    int zr = Z_OK;
    while (w->state != S_END) {
        if (z.avail_in == 0 && pos < len) {
            size_t take = len - pos > (1u << 30) ? (1u << 30) : len - pos;
            z.next_in = (unsigned char *)in + pos;
            z.avail_in = (uInt)take;
            pos += take;
        }
        z.next_out = out;
        z.avail_out = CHUNK;
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            rc = err_set(err, -EINVAL, "not a tar.gz: the gzip data is corrupt (%s)",
                         z.msg ? z.msg : "inflate failed");
            goto out;
        }
        rc = tar_feed(w, out, CHUNK - z.avail_out, err);
        if (rc < 0)
            goto out;
        if (zr == Z_STREAM_END) {
            /* another gzip member may follow (concatenated .gz files are one stream) */
            if (z.avail_in == 0 && pos == len)
                break;
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            break; /* trailing bytes after the archive: ignored */
        }
        if (zr == Z_BUF_ERROR && z.avail_in == 0 && pos == len) {
            rc = err_set(err, -EINVAL, "not a tar.gz: the gzip data ends early");
            goto out;
        }
    }
    if (w->state != S_END && !(w->state == S_HEADER && w->hdr_fill == 0)) {
        rc = err_set(err, -EINVAL, "not a tar.gz: the tar archive is truncated%s%s%s",
                     w->path[0] ? " (in \"" : "", w->path, w->path[0] ? "\")" : "");
        goto out;
    }
    if (w->fed == 0) {
        rc = err_set(err, -EINVAL, "not a tar.gz: the gzip data is empty");
        goto out;
    }
    rc = finish_checks(w, err);
out:
    free(out);
    inflateEnd(&z);
    return rc;
}

void bundle_walker_init(walker *w, const bundle_limits *lim)
{
    memset(w, 0, sizeof *w);
    w->max_files = lim && lim->max_files ? lim->max_files : DEF_MAX_FILES;
    w->max_bytes = lim && lim->max_unpacked_bytes ? lim->max_unpacked_bytes : DEF_MAX_BYTES;
    w->state = S_HEADER;
}

int bundle_check(const void *gz, size_t len, const bundle_limits *lim, bundle_info *info, char *err)
{
    walker w;
    bundle_walker_init(&w, lim);
    int rc = bundle_walk(&w, gz, len, err);
    if (rc == 0 && info) {
        info->files = w.files;
        info->unpacked_bytes = w.bytes;
    }
    bundle_walker_free(&w);
    return rc;
}
