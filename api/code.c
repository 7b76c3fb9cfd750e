/* code: POST /code and GET /code/{address} — users' code for script jobs, stored by content.
 *
 * An upload is a .tar.gz of the code's folder. It streams to a temporary file (body_to_file,
 * hashed on the way in: http_body_sha256), is capped by app->max_code_bytes (413), and is
 * checked by bundle_check (script/bundle.h) from a read-only mapping of that file, without
 * anything being unpacked: a member that could write outside its folder, a link out, a device,
 * or caps passed make a 400 naming the member on field "body". A bundle that passes is renamed
 * to <data-dir>/code/<sha256>.tar.gz (util/datadir.h): the address is the SHA-256 of the bytes
 * as uploaded, so the same bytes always get the same address and a second upload of them
 * stores nothing (200 rather than 201). Files are written once and never change, which makes
 * the address a strong ETag for GET.
 *
 * Who may: uploads need an admin token or a user token with the scripts right (the right that
 * submitting a script job needs); downloads are for admin and worker tokens (a worker fetches
 * the code of the script job it leased, by the path the lease names). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "script/bundle.h"
#include "util/datadir.h"

#define API_CODE_PREFIX "sha256:"

/* 1 when the request's Content-Type is application/gzip or application/octet-stream (any
 * parameters after them). */
static int api_code_ctype_ok(http_req *r)
{
    static const char *const ok[] = {"application/gzip", "application/octet-stream"};
    const char *ct = http_header(r, "Content-Type");
    for (size_t i = 0; ct && i < 2; i++) {
        size_t n = strlen(ok[i]);
        if (strncasecmp(ct, ok[i], n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return 1;
    }
    return 0;
}

/* bundle_check of the file at path, len bytes, mapped read-only. */
static int api_code_check(const char *path, uint64_t len, bundle_info *info, char *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, -EIO, "cannot read the upload: %s", strerror(errno));
    void *map = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return err_set(err, -EIO, "cannot map the upload: %s", strerror(errno));
    bundle_limits lim = {0, 0}; /* the defaults: 10,000 files, 1 GiB unpacked */
    int rc = bundle_check(map, (size_t)len, &lim, info, err);
    munmap(map, (size_t)len);
    return rc;
}

/* Makes the stored bundle durable: the file's bytes, then its folder's entry. Best effort
 * beyond an error code: the caller answers 500 on failure and the address is not handed out. */
static int api_code_sync(const char *path, const char *dir, char *err)
{
    int rc = 0;
    const char *paths[] = {path, dir};
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) != 0)
            rc = err_set(err, -EIO, "cannot sync %s: %s", paths[i], strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    return rc;
}

int api_code_upload(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    if (!api_may_run_scripts(r))
        return err_set(err, -EACCES,
                       "this token may not upload code: it needs the scripts right (an admin can "
                       "create a user token with scripts: true)");
    if (!api_code_ctype_ok(r))
        return err_set(err, -EMEDIUMTYPE,
                       "the body must be a .tar.gz, sent as Content-Type: application/gzip (or "
                       "application/octet-stream)");
    uint64_t len = 0, cap = a->max_code_bytes ? a->max_code_bytes : API_CODE_MAX_DEFAULT;
    const char *tmp = http_body_file(r, &len);
    if (!tmp || len == 0)
        return api_reply_bad_param(r, "body", "is empty: send the .tar.gz of the code's folder");
    if (len > cap)
        return err_set(err, -EFBIG,
                       "the code is %llu bytes; this server takes at most %llu (serve "
                       "--max-code-bytes)",
                       (unsigned long long)len, (unsigned long long)cap);
    const char *hex = http_body_sha256(r); /* hashed while it streamed in */
    if (!hex)
        return err_set(err, -EIO, "the upload's digest is missing");
    bundle_info info = {0, 0};
    int rc = api_code_check(tmp, len, &info, err);
    if (rc == -EINVAL || rc == -EFBIG)
        return api_reply_bad_param(r, "body", err);
    if (rc < 0)
        return rc;

    char dir[DATADIR_PATH_MAX], path[DATADIR_PATH_MAX];
    rc = datadir_path(a->data_dir, DATADIR_CODE, dir);
    if (rc == 0)
        rc = datadir_code_file(a->data_dir, hex, path);
    if (rc < 0)
        return err_set(err, rc, "the code's path is too long");
    int status = 200;
    if (access(path, F_OK) != 0) { /* new: the same address is always the same bytes */
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return err_set(err, errno == ENOSPC ? -ENOSPC : -EIO, "cannot create %s: %s", dir,
                           strerror(errno));
        if (rename(tmp, path) != 0)
            return err_set(err, errno == ENOSPC ? -ENOSPC : -EIO, "cannot store the code: %s",
                           strerror(errno));
        rc = api_code_sync(path, dir, err);
        if (rc < 0) {
            unlink(path);
            return rc;
        }
        status = 201;
    }
    char address[sizeof API_CODE_PREFIX + 64];
    snprintf(address, sizeof address, API_CODE_PREFIX "%s", hex);
    app_log(a, "code %s %s: %llu bytes, %llu files", address, status == 201 ? "stored" : "exists",
            (unsigned long long)len, (unsigned long long)info.files);
    json_t *body =
        json_pack("{s:s, s:I, s:I, s:I}", "code", address, "bytes", (json_int_t)len, "files",
                  (json_int_t)info.files, "unpacked_bytes", (json_int_t)info.unpacked_bytes);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, status, body);
}

int api_code_get(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *address = http_param(r, "address");
    size_t plen = strlen(API_CODE_PREFIX);
    const char *hex = address + plen;
    if (strncmp(address, API_CODE_PREFIX, plen) != 0 || strlen(hex) != 64 ||
        strspn(hex, "0123456789abcdef") != 64)
        return api_reply_bad_param(r, "address",
                                   "must be \"sha256:\" and 64 lower-case hexadecimal digits, "
                                   "as POST /code answered");
    char path[DATADIR_PATH_MAX], etag[70];
    if (datadir_code_file(a->data_dir, hex, path) < 0)
        return err_set(err, -ENAMETOOLONG, "the code's path is too long");
    if (access(path, F_OK) != 0)
        return err_set(err, -ENOENT, "no code is stored under %s: upload it with POST /code",
                       address);
    snprintf(etag, sizeof etag, "\"%s\"", hex);
    return http_reply_file(r, path, "application/gzip", etag);
}
