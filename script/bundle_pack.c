/* bundle_pack: a folder as a deterministic .tar.gz (see bundle.h).
 *
 * Design: the tree is listed first (collect: openat with O_NOFOLLOW from the root down, so a
 * tree that changes meanwhile cannot swap a folder for a link), the entries sorted by path, then
 * written as ustar headers with mtime 0, uid/gid 0 and modes 0755/0644 by the owner-exec bit,
 * a pax record only for a name or target that does not fit ustar's fields. The output goes to
 * a fresh temporary (O_EXCL) beside out_path, is synced and renamed over it. The listing is
 * bounded by the same caps as the reader (members, bytes of regular files). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "script/bundle_priv.h"
#include "util/array.h"
#include "util/err.h"

#define OCTAL12_MAX 077777777777ull /* the largest size an octal size field holds */

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
        if (ARRAY_GROW(p->e, p->cap, p->n + 1, ARRAY_NO_MAX) < 0) {
            free(e.path);
            free(e.target);
            rc = err_set(err, -ENOMEM, "out of memory packing %s", root);
            break;
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
    snprintf((char *)h + 148, 8, "%06o", tar_checksum(h));
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
