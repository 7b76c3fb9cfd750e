/* bundle_unpack: a checked bundle written out under a folder (see bundle.h).
 *
 * Design: bundle_check runs first, on the whole archive, and nothing is written unless it
 * passed; then the same walk runs again with the writers below as its callbacks. Every folder
 * on a member's way is opened with O_NOFOLLOW relative to the one above it, and every file is
 * made with O_EXCL, so nothing written can land outside dir even if a check were wrong. On
 * failure what was made is removed (dir itself only when this call made it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "script/bundle_priv.h"
#include "util/err.h"

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
    bundle_walker_init(&w, lim);
    w.cb = &unpack_cb;
    w.ctx = &u;
    rc = bundle_walk(&w, gz, len, err);
    bundle_walker_free(&w);
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
