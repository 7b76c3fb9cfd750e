/* bundle: check, unpack and pack users' code bundles (.tar.gz); see bundle.h for the rules.
 *
 * Design: one streaming walker. gzip is inflated 64 KiB at a time and the bytes pushed into a
 * tar state machine (header → data → padding, with pax/GNU extension members collected into a
 * bounded buffer), which hands each member to callbacks: none for bundle_check, the file
 * writers for bundle_unpack. What must be known about the whole archive (duplicates, members
 * beneath a symlink, symlink targets that step back out of another symlink) is decided at the
 * end from the list of member paths, which the caps bound (BUNDLE_BOOK_MAX bytes of paths).
 * bundle_unpack runs the whole check first and writes only when it passed, then walks again,
 * opening every folder with O_NOFOLLOW so nothing it writes can land outside dir even if a check
 * were wrong.
 *
 * Caps: lim->max_files counts members of every kind (files, folders, links); bundle_info.files
 * counts regular files; max_unpacked_bytes is the sum of the regular files' sizes, refused at
 * the header that passes it, before its data is inflated. */
#include "script/bundle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "util/err.h"

#define BLOCK         512
#define PATH_CAP      4096        /* bytes in a member's path or a symlink target */
#define EXT_MAX       (64 * 1024) /* a pax header or GNU long name member */
#define BOOK_MAX      (16u << 20) /* bytes of remembered paths and targets */
#define CHUNK         (64 * 1024) /* inflate/deflate buffer */
#define DEF_MAX_FILES 10000u
#define DEF_MAX_BYTES (1024ull << 20)
#define OCTAL12_MAX   077777777777ull /* the largest size an octal size field holds */

enum { M_FILE, M_DIR, M_LINK };
enum { S_HEADER, S_DATA, S_EXT, S_SKIP, S_PAD, S_END };

typedef struct member {
    char *path, *target; /* target: symlinks only */
    int type;
} member;

typedef struct walker walker;
typedef struct walk_cb {
    int (*begin)(walker *w, const char *path, int type, unsigned mode, const char *target,
                 char *err);
    int (*data)(walker *w, const unsigned char *p, size_t n, char *err);
    int (*end)(walker *w, char *err);
} walk_cb;

struct walker {
    uint64_t max_files, max_bytes;
    const walk_cb *cb; /* NULL: check only */
    void *ctx;
    int state;
    unsigned char hdr[BLOCK];
    size_t hdr_fill;
    uint64_t remaining, pad, size; /* size: the current file member's */
    uint64_t fed;                  /* tar bytes seen */
    int zero_blocks;
    char ext_type; /* 'x', 'L' or 'K' while collecting */
    char *ext;
    size_t ext_len;
    char longname[PATH_CAP], longlink[PATH_CAP];
    int has_longname, has_longlink;
    uint64_t pax_size;
    int has_pax_size;
    char path[PATH_CAP]; /* the current member's normalised path */
    member *m;
    size_t n, cap, book;
    uint64_t members, files, bytes;
};

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
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        member *m = realloc(w->m, cap * sizeof *m);
        if (!m)
            return err_set(err, -ENOMEM, "out of memory reading the bundle");
        w->m = m;
        w->cap = cap;
    }
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

static void walker_free(walker *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->m[i].path);
        free(w->m[i].target);
    }
    free(w->m);
    free(w->ext);
}

/* Inflates gz and pushes it through the tar walker; then the end-of-archive rules. */
static int walk(walker *w, const void *gz, size_t len, char *err)
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

static void walker_init(walker *w, const bundle_limits *lim)
{
    memset(w, 0, sizeof *w);
    w->max_files = lim && lim->max_files ? lim->max_files : DEF_MAX_FILES;
    w->max_bytes = lim && lim->max_unpacked_bytes ? lim->max_unpacked_bytes : DEF_MAX_BYTES;
    w->state = S_HEADER;
}

int bundle_check(const void *gz, size_t len, const bundle_limits *lim, bundle_info *info, char *err)
{
    walker w;
    walker_init(&w, lim);
    int rc = walk(&w, gz, len, err);
    if (rc == 0 && info) {
        info->files = w.files;
        info->unpacked_bytes = w.bytes;
    }
    walker_free(&w);
    return rc;
}

/* ---- unpack ---- */

typedef struct unpacker {
    int root; /* the target folder, O_DIRECTORY */
    int fd;   /* the file being written, or -1 */
    const char *path;
} unpacker;

/* Opens the folder that holds path's last component, making the folders on the way; each one
 * opened with O_NOFOLLOW, so a symlink on the way is an error, never followed. */
static int open_parent(int root, const char *path, const char **last, char *err)
{
    char buf[PATH_CAP];
    snprintf(buf, sizeof buf, "%s", path);
    int dfd = dup(root);
    if (dfd < 0)
        return err_set(err, -errno, "cannot unpack \"%s\": %s", path, strerror(errno));
    char *s = buf;
    for (char *slash = strchr(s, '/'); slash; slash = strchr(s, '/')) {
        *slash = '\0';
        if (mkdirat(dfd, s, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            close(dfd);
            return err_set(err, -e, "cannot make the folder of \"%s\": %s", path, strerror(e));
        }
        int next = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(dfd);
        if (next < 0)
            return err_set(err, -e, "cannot open the folder of \"%s\": %s", path, strerror(e));
        dfd = next;
        s = slash + 1;
    }
    *last = path + (s - buf);
    return dfd;
}

static int up_begin(walker *w, const char *path, int type, unsigned mode, const char *target,
                    char *err)
{
    unpacker *u = w->ctx;
    const char *last;
    int dfd = open_parent(u->root, path, &last, err);
    if (dfd < 0)
        return dfd;
    int rc = 0;
    if (type == M_DIR) {
        if (mkdirat(dfd, last, 0755) < 0 && errno != EEXIST)
            rc = err_set(err, -errno, "cannot make the folder \"%s\": %s", path, strerror(errno));
        else if (fchmodat(dfd, last, 0755, 0) < 0)
            rc = err_set(err, -errno, "cannot set the mode of \"%s\": %s", path, strerror(errno));
    } else if (type == M_LINK) {
        if (symlinkat(target, dfd, last) < 0)
            rc = err_set(err, -errno, "cannot make the symlink \"%s\": %s", path, strerror(errno));
    } else {
        unsigned m = mode & 0100 ? 0755 : 0644;
        u->fd = openat(dfd, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, m);
        if (u->fd < 0)
            rc = err_set(err, -errno, "cannot write \"%s\": %s", path, strerror(errno));
        else if (fchmod(u->fd, m) < 0)
            rc = err_set(err, -errno, "cannot set the mode of \"%s\": %s", path, strerror(errno));
        u->path = path;
    }
    close(dfd);
    return rc;
}

static int up_data(walker *w, const unsigned char *p, size_t n, char *err)
{
    unpacker *u = w->ctx;
    while (n > 0) {
        ssize_t k = write(u->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return err_set(err, -errno, "cannot write \"%s\": %s", w->path, strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int up_end(walker *w, char *err)
{
    unpacker *u = w->ctx;
    int rc = 0;
    if (u->fd >= 0 && close(u->fd) < 0)
        rc = err_set(err, -errno, "cannot write \"%s\": %s", w->path, strerror(errno));
    u->fd = -1;
    return rc;
}

static const walk_cb unpack_cb = {up_begin, up_data, up_end};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

/* Removes what is inside dir (not dir itself), never following symlinks. */
static void empty_dir(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

int bundle_unpack(const void *gz, size_t len, const char *dir, const bundle_limits *lim,
                  bundle_info *info, char *err)
{
    bundle_info got;
    int rc = bundle_check(gz, len, lim, &got, err);
    if (rc < 0)
        return rc;
    int made = 0;
    if (mkdir(dir, 0755) == 0)
        made = 1;
    else if (errno != EEXIST)
        return err_set(err, -errno, "cannot make %s: %s", dir, strerror(errno));
    else if (!dir_is_empty(dir))
        return err_set(err, -EEXIST, "cannot unpack into %s: it is not an empty folder", dir);
    unpacker u = {.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .fd = -1};
    if (u.root < 0) {
        rc = err_set(err, -errno, "cannot open %s: %s", dir, strerror(errno));
        goto fail;
    }
    walker w;
    walker_init(&w, lim);
    w.cb = &unpack_cb;
    w.ctx = &u;
    rc = walk(&w, gz, len, err);
    walker_free(&w);
    if (u.fd >= 0)
        close(u.fd);
    close(u.root);
    if (rc < 0)
        goto fail;
    if (info)
        *info = got;
    return 0;
fail:
    empty_dir(dir);
    if (made)
        rmdir(dir);
    return rc;
}

/* ---- pack ---- */

typedef struct entry {
    char *path; /* relative, no trailing slash */
    int type;
    uint64_t size;
    unsigned exec;
    char *target;
} entry;

typedef struct packer {
    entry *e;
    size_t n, cap;
    uint64_t members, files, bytes, max_files, max_bytes;
    int root_fd; /* the folder packed */
    z_stream z;
    FILE *f;
    unsigned char *out;
} packer;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->path, ((const entry *)b)->path);
}

/* Lists the folder dfd (rel below the root; dfd is closed here) into p->e. Everything is
 * opened relative to its folder and without following symlinks, so a tree that changes while it
 * is packed (a script's checkpoint/) cannot swap a folder for a link and have a file outside
 * read into the pack. */
static int collect(packer *p, int dfd, const char *root, const char *rel, char *err)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return err_set(err, -errno, "cannot read the folder %s/%s: %s", root, rel, strerror(errno));
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char path[PATH_CAP];
        int len = snprintf(path, sizeof path, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (len < 0 || (size_t)len >= sizeof path) {
            rc =
                err_set(err, -ENAMETOOLONG, "a path under %s is over %d bytes", root, PATH_CAP - 1);
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* gone meanwhile */
            rc = err_set(err, -errno, "cannot stat %s/%s: %s", root, path, strerror(errno));
            break;
        }
        int type;
        if (S_ISREG(st.st_mode))
            type = M_FILE;
        else if (S_ISDIR(st.st_mode))
            type = M_DIR;
        else if (S_ISLNK(st.st_mode))
            type = M_LINK;
        else
            continue; /* sockets, FIFOs, devices: skipped */
        if (++p->members > p->max_files) {
            rc = err_set(err, -EFBIG, "%s has more than %llu files and folders", root,
                         (unsigned long long)p->max_files);
            break;
        }
        entry e = {.type = type, .exec = (st.st_mode & 0100) != 0};
        if (type == M_FILE) {
            p->files++;
            e.size = (uint64_t)st.st_size;
            if (e.size > p->max_bytes - p->bytes) {
                rc = err_set(err, -EFBIG, "%s holds more than %llu bytes", root,
                             (unsigned long long)p->max_bytes);
                break;
            }
            p->bytes += e.size;
        }
        if (type == M_LINK) {
            char t[PATH_CAP];
            ssize_t k = readlinkat(dirfd(d), de->d_name, t, sizeof t - 1);
            if (k < 0) {
                rc = err_set(err, -errno, "cannot read the symlink %s/%s: %s", root, path,
                             strerror(errno));
                break;
            }
            t[k] = '\0';
            e.target = strdup(t);
        }
        e.path = strdup(path);
        if (p->n == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 64;
            entry *ne = realloc(p->e, cap * sizeof *ne);
            if (!ne) {
                free(e.path);
                free(e.target);
                rc = err_set(err, -ENOMEM, "out of memory packing %s", root);
                break;
            }
            p->e = ne;
            p->cap = cap;
        }
        p->e[p->n++] = e;
        if (!e.path || (type == M_LINK && !e.target)) {
            rc = err_set(err, -ENOMEM, "out of memory packing %s", root);
            break;
        }
        if (type == M_DIR) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                rc = err_set(err, -errno, "cannot open the folder %s/%s: %s", root, path,
                             strerror(errno));
                break;
            }
            rc = collect(p, sub, root, path, err);
            if (rc < 0)
                break;
        }
    }
    closedir(d);
    return rc;
}

/* Opens the regular file rel below the folder root_fd, following no symlink on the way. */
static int open_beneath(int root_fd, const char *rel)
{
    char buf[PATH_CAP];
    snprintf(buf, sizeof buf, "%s", rel);
    int dfd = dup(root_fd);
    char *s = buf;
    for (char *slash = strchr(s, '/'); dfd >= 0 && slash; slash = strchr(s, '/')) {
        *slash = '\0';
        int next = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        dfd = next;
        s = slash + 1;
    }
    if (dfd < 0)
        return -errno;
    /* O_NONBLOCK: a FIFO put in the file's place must not block the open */
    int fd = openat(dfd, s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int e = errno;
    close(dfd);
    if (fd < 0)
        return -e;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EAGAIN;
    }
    return fd;
}

static int gz_write(packer *p, const void *data, size_t n, int flush, char *err)
{
    p->z.next_in = (unsigned char *)data;
    p->z.avail_in = (uInt)n;
    do {
        p->z.next_out = p->out;
        p->z.avail_out = CHUNK;
        int zr = deflate(&p->z, flush);
        if (zr == Z_STREAM_ERROR)
            return err_set(err, -EIO, "zlib failed while packing");
        size_t have = CHUNK - p->z.avail_out;
        if (have && fwrite(p->out, 1, have, p->f) != have)
            return err_set(err, -errno, "cannot write the bundle: %s", strerror(errno));
    } while (p->z.avail_out == 0 || (flush == Z_FINISH && p->z.avail_in > 0));
    return 0;
}

static void put_octal(unsigned char *f, size_t len, uint64_t v)
{
    /* len - 1 digits and a NUL; base-256 when the value does not fit */
    if (len == 12 && v > OCTAL12_MAX) {
        memset(f, 0, len);
        f[0] = 0x80;
        for (size_t i = len - 1; i > 0 && v; i--, v >>= 8)
            f[i] = (unsigned char)(v & 0xff);
        return;
    }
    snprintf((char *)f, len, "%0*llo", (int)len - 1, (unsigned long long)v);
}

static int put_block(packer *p, char type, const char *name, uint64_t size, unsigned mode,
                     const char *link, char *err)
{
    unsigned char h[BLOCK];
    memset(h, 0, sizeof h);
    size_t nl = strlen(name);
    if (nl <= 100) {
        memcpy(h, name, nl);
    } else {
        /* ustar's prefix: split at a '/' so that name ≤ 100 and prefix ≤ 155 (callers ensure
         * it fits or a pax path record precedes, in which case a cut name is fine) */
        const char *cut = NULL;
        for (const char *s = name; (s = strchr(s, '/')); s++)
            if ((size_t)(s - name) <= 155 && nl - (size_t)(s - name) - 1 <= 100 && s[1] != '\0') {
                cut = s;
                break;
            }
        if (cut) {
            memcpy(h + 345, name, (size_t)(cut - name));
            memcpy(h, cut + 1, nl - (size_t)(cut - name) - 1);
        } else {
            memcpy(h, name, 100);
        }
    }
    put_octal(h + 100, 8, mode);
    put_octal(h + 108, 8, 0);
    put_octal(h + 116, 8, 0);
    put_octal(h + 124, 12, size);
    put_octal(h + 136, 12, 0);
    h[156] = (unsigned char)type;
    if (link)
        memcpy(h + 157, link, strlen(link) > 100 ? 100 : strlen(link));
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    return gz_write(p, h, BLOCK, Z_NO_FLUSH, err);
}

static int fits_ustar(const char *name)
{
    size_t nl = strlen(name);
    if (nl <= 100)
        return 1;
    for (const char *s = name; (s = strchr(s, '/')); s++)
        if ((size_t)(s - name) <= 155 && nl - (size_t)(s - name) - 1 <= 100 && s[1] != '\0')
            return 1;
    return 0;
}

/* Appends "LEN key=value\n" (LEN counting itself) to buf. */
static size_t pax_record(char *buf, size_t at, const char *key, const char *val)
{
    size_t body = 1 + strlen(key) + 1 + strlen(val) + 1; /* ' ' key '=' val '\n' */
    size_t len = body + 1;
    while (snprintf(NULL, 0, "%zu", len) + body != len)
        len++;
    return at + (size_t)sprintf(buf + at, "%zu %s=%s\n", len, key, val);
}

static int put_member(packer *p, const entry *e, char *err)
{
    char name[PATH_CAP + 2];
    snprintf(name, sizeof name, "%s%s", e->path, e->type == M_DIR ? "/" : "");
    uint64_t size = e->type == M_FILE ? e->size : 0;
    int need_path = !fits_ustar(name), need_link = e->target && strlen(e->target) > 100;
    if (need_path || need_link) {
        char pax[2 * PATH_CAP + 64];
        size_t n = 0;
        if (need_path)
            n = pax_record(pax, n, "path", name);
        if (need_link)
            n = pax_record(pax, n, "linkpath", e->target);
        int rc = put_block(p, 'x', "././@PaxHeader", n, 0644, NULL, err);
        if (rc == 0)
            rc = gz_write(p, pax, n, Z_NO_FLUSH, err);
        static const unsigned char zeros[BLOCK];
        if (rc == 0 && n % BLOCK)
            rc = gz_write(p, zeros, BLOCK - n % BLOCK, Z_NO_FLUSH, err);
        if (rc < 0)
            return rc;
    }
    char type = e->type == M_DIR ? '5' : e->type == M_LINK ? '2' : '0';
    unsigned mode = e->type == M_LINK ? 0777 : (e->type == M_DIR || e->exec) ? 0755 : 0644;
    return put_block(p, type, name, size, mode, e->target, err);
}

static int put_data(packer *p, const char *root, const entry *e, char *err)
{
    char full[PATH_CAP * 2];
    snprintf(full, sizeof full, "%s/%s", root, e->path);
    int fd = open_beneath(p->root_fd, e->path);
    if (fd == -EAGAIN)
        return err_set(err, -EAGAIN, "%s changed while it was packed", full);
    if (fd < 0)
        return err_set(err, fd, "cannot read %s: %s", full, strerror(-fd));
    uint64_t left = e->size;
    int rc = 0;
    while (left > 0 && rc == 0) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        ssize_t k = read(fd, p->out + CHUNK, want);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            rc = err_set(err, -errno, "cannot read %s: %s", full, strerror(errno));
            break;
        }
        if (k == 0) { /* shrank since it was listed: pad with zeros to the size in the header */
            memset(p->out + CHUNK, 0, want);
            k = (ssize_t)want;
        }
        rc = gz_write(p, p->out + CHUNK, (size_t)k, Z_NO_FLUSH, err);
        left -= (uint64_t)k;
    }
    close(fd);
    static const unsigned char zeros[BLOCK];
    if (rc == 0 && e->size % BLOCK)
        rc = gz_write(p, zeros, BLOCK - e->size % BLOCK, Z_NO_FLUSH, err);
    return rc;
}

int bundle_pack(const char *dir, const char *out_path, const bundle_limits *lim, bundle_info *info,
                char *err)
{
    packer p;
    memset(&p, 0, sizeof p);
    p.max_files = lim && lim->max_files ? lim->max_files : DEF_MAX_FILES;
    p.max_bytes = lim && lim->max_unpacked_bytes ? lim->max_unpacked_bytes : DEF_MAX_BYTES;
    char tmp[PATH_CAP + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", out_path);
    int zinit = 0, made_tmp = 0, rc = 0;
    p.root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int list_fd = p.root_fd < 0 ? -1 : dup(p.root_fd);
    if (list_fd < 0) {
        rc = err_set(err, -errno, "cannot open the folder %s: %s", dir, strerror(errno));
        goto out;
    }
    rc = collect(&p, list_fd, dir, "", err);
    if (rc < 0)
        goto out;
    qsort(p.e, p.n, sizeof *p.e, cmp_entry);
    p.out = malloc(2 * CHUNK); /* deflate's output, then a read buffer */
    if (!p.out) {
        rc = err_set(err, -ENOMEM, "out of memory packing %s", dir);
        goto out;
    }
    if (deflateInit2(&p.z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        rc = err_set(err, -ENOMEM, "out of memory starting zlib");
        goto out;
    }
    zinit = 1;
    /* a fresh name (O_EXCL): a link put there beforehand is never written through */
    int tfd = mkostemp(tmp, O_CLOEXEC);
    if (tfd < 0) {
        rc = err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    made_tmp = 1;
    p.f = fdopen(tfd, "wb");
    if (!p.f || fchmod(tfd, 0644) < 0) {
        if (!p.f)
            close(tfd);
        rc = err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < p.n && rc == 0; i++) {
        rc = put_member(&p, &p.e[i], err);
        if (rc == 0 && p.e[i].type == M_FILE)
            rc = put_data(&p, dir, &p.e[i], err);
    }
    static const unsigned char end[2 * BLOCK];
    if (rc == 0)
        rc = gz_write(&p, end, sizeof end, Z_NO_FLUSH, err);
    if (rc == 0)
        rc = gz_write(&p, NULL, 0, Z_FINISH, err);
    if (rc < 0)
        goto out;
    if (fflush(p.f) != 0 || fsync(fileno(p.f)) < 0) {
        rc = err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fclose(p.f) != 0) {
        p.f = NULL;
        rc = err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    p.f = NULL;
    if (rename(tmp, out_path) < 0) {
        rc = err_set(err, -errno, "cannot rename %s to %s: %s", tmp, out_path, strerror(errno));
        goto out;
    }
    if (info) {
        info->files = p.files;
        info->unpacked_bytes = p.bytes;
    }
out:
    if (p.root_fd >= 0)
        close(p.root_fd);
    if (p.f)
        fclose(p.f);
    if (rc < 0 && made_tmp)
        unlink(tmp);
    if (zinit)
        deflateEnd(&p.z);
    free(p.out);
    for (size_t i = 0; i < p.n; i++) {
        free(p.e[i].path);
        free(p.e[i].target);
    }
    free(p.e);
    return rc;
}
