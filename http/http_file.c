/* http_file: answering with a file on disk — Range (one range), If-Range, If-None-Match.
 *
 * The file is sent by libmicrohttpd from its descriptor (sendfile where it can), so a large
 * artifact costs no copy and no memory. Rules (RFC 9110):
 *   - If-None-Match that matches the ETag (weak comparison, or "*") → 304 with the ETag;
 *   - Range "bytes=a-b", "bytes=a-", "bytes=-n" → 206 with Content-Range; a range past the
 *     end → 416 with "Content-Range: bytes *\/size"; several ranges, another unit or a
 *     malformed header → the whole file (200), as a server that ignores Range may;
 *   - If-Range must equal the ETag (strong comparison) for Range to apply; a date never does,
 *     since we send no Last-Modified.
 * Every 200 and 206 carries Accept-Ranges: bytes and the ETag when one is given. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http.h"
#include "http/http_priv.h"

enum { RANGE_IGNORE = 0, RANGE_OK = 1, RANGE_UNSAT = 2 };

/* Reads decimal digits at *p (at least one, no overflow) and moves *p past them. */
static int read_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

/* Parses one Range header against a file of size bytes. */
static int range_parse(const char *h, uint64_t size, uint64_t *first, uint64_t *last)
{
    uint64_t a, b = UINT64_MAX;

    h += strspn(h, " \t");
    if (strncasecmp(h, "bytes", 5) != 0)
        return RANGE_IGNORE;
    h += 5;
    h += strspn(h, " \t");
    if (*h++ != '=')
        return RANGE_IGNORE;
    h += strspn(h, " \t");
    if (strchr(h, ','))
        return RANGE_IGNORE; /* several ranges: the whole file instead */
    if (*h == '-') {
        h++;
        if (read_u64(&h, &b) < 0 || h[strspn(h, " \t")] != '\0')
            return RANGE_IGNORE;
        if (b == 0 || size == 0)
            return RANGE_UNSAT;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return RANGE_OK;
    }
    if (read_u64(&h, &a) < 0 || *h++ != '-')
        return RANGE_IGNORE;
    if (*h >= '0' && *h <= '9' && read_u64(&h, &b) < 0)
        return RANGE_IGNORE;
    if (h[strspn(h, " \t")] != '\0' || b < a)
        return RANGE_IGNORE;
    if (a >= size)
        return RANGE_UNSAT;
    *first = a;
    *last = b < size - 1 ? b : size - 1;
    return RANGE_OK;
}

int http_etag_match(const char *list, const char *tag)
{
    const char *t = strncmp(tag, "W/", 2) == 0 ? tag + 2 : tag;
    size_t tl = strlen(t);

    for (const char *p = list;;) {
        const char *end;
        p += strspn(p, " \t,");
        if (*p == '\0')
            return 0;
        if (*p == '*')
            return 1;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        if (*p != '"')
            return 0; /* malformed: no match */
        end = strchr(p + 1, '"');
        if (!end)
            return 0;
        if ((size_t)(end + 1 - p) == tl && memcmp(p, t, tl) == 0)
            return 1;
        p = end + 1;
    }
}

/* What a handler should answer for a file it cannot open: missing is 404; running out of
 * descriptors or memory is 503; anything else (permissions, I/O) is the server's fault, 500,
 * and logged — never a 403, which would blame the client. */
static int open_error(http_req *r, const char *path, int e)
{
    if (e == ENOENT || e == ENOTDIR)
        return -ENOENT;
    if (e == EMFILE || e == ENFILE || e == ENOMEM)
        return -e;
    http_log_line(r->s, "http: cannot open %s: %s", path, strerror(e));
    return -EIO;
}

int http_reply_file(http_req *r, const char *path, const char *content_type, const char *etag)
{
    char tag[256] = "", cr[96];
    const char *inm, *range, *if_range;
    struct MHD_Response *resp;
    struct stat st;
    uint64_t size, first = 0, last = 0;
    int fd, rc, kind = RANGE_IGNORE;

    if (r->answered || r->phase != HTTP_PHASE_RUN)
        return -EINVAL;
    if (etag && etag[0]) {
        if (etag[0] == '"' || strncmp(etag, "W/\"", 3) == 0)
            snprintf(tag, sizeof(tag), "%s", etag);
        else
            snprintf(tag, sizeof(tag), "\"%s\"", etag);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return open_error(r, path, errno);
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto fail;
    }
    rc = -ENOENT;
    if (!S_ISREG(st.st_mode))
        goto fail;
    size = (uint64_t)st.st_size;

    inm = http_header(r, "If-None-Match");
    if (tag[0] && inm && http_etag_match(inm, tag)) {
        close(fd);
        http_header_add(r, "ETag", tag);
        return http_reply_empty(r, 304);
    }
    range = http_header(r, "Range");
    if_range = http_header(r, "If-Range");
    if (range && (!if_range || (tag[0] && tag[0] == '"' && strcmp(if_range, tag) == 0)))
        kind = range_parse(range, size, &first, &last);
    if (kind == RANGE_UNSAT) {
        close(fd);
        snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
        http_header_add(r, "Content-Range", cr);
        snprintf(cr, sizeof(cr), "the range is outside the file's %llu bytes",
                 (unsigned long long)size);
        return http_reply_problem(r, 416, NULL, cr, NULL, 0);
    }
    if (kind != RANGE_OK) {
        first = 0;
        last = size ? size - 1 : 0;
    }
    resp = MHD_create_response_from_fd_at_offset64(size ? last - first + 1 : 0, fd, (int64_t)first);
    rc = -ENOMEM;
    if (!resp)
        goto fail;
    /* from here fd belongs to resp */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            content_type ? content_type : "application/octet-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    if (tag[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, tag);
    if (kind == RANGE_OK) {
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)first,
                 (unsigned long long)last, (unsigned long long)size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
        return http_queue(r, 206, resp, last - first + 1);
    }
    return http_queue(r, 200, resp, size);
fail:
    close(fd);
    return rc;
}
