/* bundle: the streaming reader of users' code bundles (.tar.gz) and every check on them;
 * see bundle.h for the rules. bundle_unpack.c writes what this reads, bundle_pack.c packs.
 *
 * Design: one streaming walker. gzip is inflated 64 KiB at a time and the bytes pushed into
 * util/tar.c's reader (the format: headers, pax and GNU extensions, the end), which stops at
 * each member; the rules here (types, paths, links, caps) run on it and hand it to callbacks:
 * none for bundle_check, the file writers for bundle_unpack. What must be known about the whole
 * archive (duplicates, members beneath a symlink, symlink targets that step back out of another
 * symlink) is decided at the end from the list of member paths, which the caps bound (BOOK_MAX
 * bytes of paths). bundle_unpack runs the whole check first and writes only when it passed, then
 * walks again, opening every folder with O_NOFOLLOW so nothing it writes can land outside dir even
 * if a check were wrong.
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

#define BOOK_MAX (16u << 20) /* bytes of remembered paths and targets */

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

/* The rules on the member the reader stopped at, then its callbacks' begin (and end, when it
 * has no data). */
static int walk_member(walker *w, char *err)
{
    const tar_member *t = &w->tar.m;
    const char *target = t->link;
    uint64_t size = t->size;
    char type = t->type;
    int rc = norm_path(t->path, w->path, sizeof w->path, err);
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

    if (root) /* "./": the tree itself */
        return 0;
    if (++w->members > w->max_files)
        return err_set(err, -EFBIG, "the bundle has more than %llu members (at \"%s\")",
                       (unsigned long long)w->max_files, w->path);
    if (mtype == M_FILE) {
        w->files++;
        if (size > w->max_bytes - w->bytes)
            return err_set(err, -EFBIG, "the bundle unpacks to more than %llu bytes (at \"%s\")",
                           (unsigned long long)w->max_bytes, w->path);
        w->bytes += size;
    }
    rc = remember(w, w->path, mtype, mtype == M_LINK ? target : NULL, err);
    if (rc < 0)
        return rc;
    if (w->cb) {
        rc = w->cb->begin(w, w->path, mtype, (unsigned)t->mode, target, err);
        if (rc < 0)
            return rc;
    }
    w->remaining = size;
    w->in_file = mtype == M_FILE && size > 0;
    if (mtype == M_FILE && size == 0 && w->cb)
        return w->cb->end(w, err);
    return 0;
}

/* A piece of the current member's data: the file's callbacks; other members' data is passed. */
static int walk_data(walker *w, const unsigned char *p, size_t n, char *err)
{
    if (!w->in_file)
        return 0;
    int rc = w->cb ? w->cb->data(w, p, n, err) : 0;
    w->remaining -= n;
    if (rc == 0 && w->remaining == 0) {
        w->in_file = 0;
        if (w->cb)
            rc = w->cb->end(w, err);
    }
    return rc;
}

/* Pushes n bytes of the tar stream through the reader. */
static int walk_feed(walker *w, const unsigned char *p, size_t n, char *err)
{
    w->fed += n;
    for (;;) {
        size_t used, len;
        const void *d;
        int ev = tar_stream_next(&w->tar, p, n, &used, &d, &len, err);
        if (ev < 0)
            return ev;
        p += used;
        n -= used;
        int rc = 0;
        if (ev == TAR_MEMBER)
            rc = walk_member(w, err);
        else if (ev == TAR_DATA)
            rc = walk_data(w, d, len, err);
        else if (ev == TAR_END)
            w->ended = 1;
        if (rc < 0)
            return rc;
        if (ev == TAR_END || ev == TAR_MORE)
            return 0;
    }
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
    while (!w->ended) {
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
        rc = walk_feed(w, out, CHUNK - z.avail_out, err);
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
    rc = tar_stream_end(&w->tar, err);
    if (rc < 0)
        goto out;
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
    tar_stream_init(&w->tar);
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
