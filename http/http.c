/* http: trainyard's HTTP layer over libmicrohttpd — the daemon and each request's life.
 *
 * Design. One daemon with an internal thread pool (poll(): see below) calls on_access()
 * several times per request: once when the headers are in (we match the route and
 * refuse what we can before reading: 404, 405, 413 by Content-Length), once per piece of body
 * (kept in memory or written to a temporary file, within the route's cap), and once when the
 * body is complete, where the route's handler runs. A handler either answers (one
 * http_reply_*), fails (a negative code, answered through http_error's table), or parks
 * (http_park.c suspends the connection; libmicrohttpd calls on_access() again on resume and the
 * handler runs again). on_completed() logs the request's line and frees it.
 *
 * Files: http.c (this: daemon, request life, bodies, log), http_route.c (matching and what a
 * handler reads), http_reply.c (answers, problem+json, http_body_json), http_file.c (files with
 * ranges), http_park.c (signals, parking, streams), http_conn.c (admission, head deadline).
 * Shared structures: http_priv.h.
 *
 * Invariants: every request gets exactly one answer or its connection is closed; a handler
 * returning 0 without answering or parking is a bug answered with 500 and logged; a 413, 404
 * or 405 never reaches a handler. Answers are queued only from the libmicrohttpd thread that is
 * calling us for that request (the handler's own call). A refusal found before the body is
 * read is answered at once when a body was announced (libmicrohttpd then closes the connection
 * rather than read it); one found while the body arrives is answered when it ends, the rest
 * being read and dropped up to HTTP_DISCARD_MAX, past which the connection is closed.
 *
 * Poll, not epoll: libmicrohttpd 0.9.75's epoll loop is edge-triggered and clears its
 * read-ready mark on any short read, so a client's FIN that arrived with its last bytes is never
 * read: a client that sent half a request and hung up held its connection until the idle
 * timeout (then 120 s), and a thousand of them filled the limit. poll() reports the end again
 * until it is read. The idle timeout (HTTP_IDLE_TIMEOUT_S, restarted by every byte) bounds a
 * stalled body or a client that stopped reading; suspended connections are exempt from it.
 *
 * Slow clients (http_conn.c): a connection has HTTP_HEAD_TIMEOUT_S from opening, or from its
 * last answer, to deliver a whole request head, or it is cut (slowloris trickles header lines
 * to defeat the idle timeout). Connections per client address are capped (max_per_client),
 * and the last eighth of the connection limit is a reserve that only light clients (fewer than
 * HTTP_LIGHT_CONNS connections open) may take, so workers and people still get in while a few
 * heavy addresses hold the rest. The limit is sized from RLIMIT_NOFILE (conn_limit below).
 *
 * TLS: with a certificate and key in the config the daemon speaks only HTTPS (GnuTLS inside
 * libmicrohttpd); nothing above the daemon changes: suspend/resume, streams and the pool work
 * on the decrypted side. Only the client-gone check looks at the socket itself (http_park.c).
 *
 * Threads: handlers run on the pool threads, several at once; an http_req is touched only by
 * the thread that libmicrohttpd is calling for it. The log callback is called from every pool
 * thread (and the timer's never). Parking's locking is described in http_priv.h. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http_error.h"
#include "http/http_priv.h"
#include "util/timeutil.h"

#define HTTP_IDLE_TIMEOUT_S 15         /* no byte in or out this long: closed (not if parked) */
#define HTTP_CONN_MEMORY    (32 << 10) /* per connection: request line + headers must fit */
#define HTTP_DISCARD_MAX    (1 << 20)  /* body bytes read and dropped past a cap, then close */
#define HTTP_FDS_ASIDE      128        /* descriptors not for connections: SQLite, logs, workers */

/* ---- small helpers ------------------------------------------------------------------------ */

double http_now(void)
{
    return time_mono();
}

void http_log_line(http_server *s, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (s->cfg.log)
        s->cfg.log(s->cfg.app, line);
    else
        fprintf(stderr, "%s\n", line);
}

/* ---- the request's life --------------------------------------------------------------------- */

static http_req *req_new(http_server *s, struct MHD_Connection *conn, const char *url,
                         const char *method)
{
    http_req *r = calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    /* absolute-form ("GET http://host/path"): route on the path */
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        const char *p = strchr(strstr(url, "://") + 3, '/');
        url = p ? p : "/";
    }
    r->s = s;
    r->conn = conn;
    r->method = method;
    r->path = url;
    r->body_fd = -1;
    r->t0 = http_now();
    r->phase = HTTP_PHASE_READ;
    atomic_fetch_add(&s->live, 1);
    return r;
}

static void req_free(http_req *r)
{
    if (r->state_free)
        r->state_free(r->state);
    if (r->body_fd >= 0)
        close(r->body_fd);
    if (r->body_path) {
        (void)unlink(r->body_path); /* ENOENT: the handler renamed it away */
        free(r->body_path);
    }
    dynbuf_free(&r->body);
    for (int i = 0; i < r->n_params; i++)
        free(r->param_value[i]);
    for (int i = 0; i < r->n_query; i++) {
        free(r->query[i].name);
        free(r->query[i].value);
    }
    for (int i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    atomic_fetch_sub(&r->s->live, 1);
    free(r);
}

static void req_headers_clear(http_req *r)
{
    for (int i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    r->n_headers = 0;
}

/* Whether the client announced a body (so an answer now means the connection must close). */
static int req_has_body(http_req *r)
{
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Transfer-Encoding");
    return te != NULL || (cl != NULL && strspn(cl, " 0") != strlen(cl));
}

static void req_reject(http_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void req_reject(http_req *r, int status, const char *fmt, ...)
{
    va_list ap;

    if (r->reject_status)
        return;
    r->reject_status = status;
    va_start(ap, fmt);
    vsnprintf(r->reject_detail, sizeof(r->reject_detail), fmt, ap);
    va_end(ap);
    /* A refused request's body is never used: its temporary file goes now, not when the
     * connection is done with, which may be much later. */
    if (r->body_fd >= 0) {
        close(r->body_fd);
        r->body_fd = -1;
    }
    if (r->body_path) {
        (void)unlink(r->body_path);
        free(r->body_path);
        r->body_path = NULL;
    }
}

static int req_answer_reject(http_req *r)
{
    int rc = http_reply_problem(r, r->reject_status, NULL, r->reject_detail, NULL, 0);
    if (rc == 0)
        r->phase = HTTP_PHASE_DONE;
    return rc;
}

/* First call: route, and refuse a body announced past the cap. */
static void req_begin(http_req *r)
{
    const char *cl, *te;
    uint64_t max;

    if (r->path[0] != '/') {
        req_reject(r, 404, "no such path");
        return;
    }
    http_route_find(r);
    if (!r->route)
        return;
    dynbuf_init(&r->body, r->route->max_body < SIZE_MAX ? (size_t)r->route->max_body : SIZE_MAX);
    if (r->s->cfg.authorize) {
        r->errbuf[0] = '\0';
        int rc = r->s->cfg.authorize(r, r->s->cfg.app, r->route->access);
        if (rc < 0) {
            req_reject(r, http_error_status(rc), "%s", r->errbuf);
            return;
        }
    }
    max = r->route->max_body;
    cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Transfer-Encoding");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno == ERANGE || v > max)
            req_reject(r, 413, "the body is larger than this endpoint accepts (%llu bytes)",
                       (unsigned long long)max);
    } else if (te && max == 0) {
        req_reject(r, 413, "this endpoint takes no body");
    }
}

static int body_file_open(http_req *r)
{
    const char *dir = r->s->tmp_dir ? r->s->tmp_dir : "/tmp";
    size_t n = strlen(dir) + sizeof("/upload-XXXXXX");
    char *path = malloc(n);

    if (!path)
        return -ENOMEM;
    snprintf(path, n, "%s/upload-XXXXXX", dir);
    r->body_fd = mkostemp(path, O_CLOEXEC);
    if (r->body_fd < 0) {
        int rc = -errno;
        http_log_line(r->s, "http: cannot create a temporary file in %s: %s", dir, strerror(-rc));
        free(path);
        return rc;
    }
    r->body_path = path;
    sha256_init(&r->body_hash);
    return 0;
}

/* The status for failing to store an upload: the server's disk or setup, never the client.
 * EFBIG here is the server's own file-size limit (ulimit -f; the client's cap is checked
 * before), so it is a storage problem like a full disk. */
static int store_status(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG ? 507 : rc == -ENOMEM ? 503 : 500;
}

/* Takes n more body bytes: counts them, enforces the cap, stores them. MHD_NO closes. */
static enum MHD_Result body_take(http_req *r, const char *data, size_t n)
{
    uint64_t max = r->route ? r->route->max_body : 0;
    int rc;

    r->body_seen += n;
    if (r->reject_status)
        goto discard;
    if (r->body_seen > max) {
        req_reject(r, 413, "the body is larger than this endpoint accepts (%llu bytes)",
                   (unsigned long long)max);
        goto discard;
    }
    if (r->route->body_to_file) {
        if (r->body_fd < 0) {
            rc = body_file_open(r);
            if (rc < 0) {
                req_reject(r, store_status(rc), "cannot store the upload");
                goto discard;
            }
        }
        sha256_update(&r->body_hash, data, n); /* hashed as it streams, never read back */
        while (n > 0) {
            ssize_t w = write(r->body_fd, data, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = -errno;
                http_log_line(r->s, "http: writing %s: %s", r->body_path, strerror(-rc));
                req_reject(r, store_status(rc), "cannot store the upload: %s", strerror(-rc));
                goto discard;
            }
            data += w;
            n -= (size_t)w;
        }
        return MHD_YES;
    }
    rc = dynbuf_add(&r->body, data, n); /* capped at max_body too (http_route_find) */
    if (rc < 0) {
        req_reject(r, rc == -EFBIG ? 413 : 503, "%s",
                   rc == -EFBIG ? "the body is larger than this endpoint accepts"
                                : "out of memory for the body");
        goto discard;
    }
    return MHD_YES;
discard:
    /* libmicrohttpd 0.9.75 refuses an answer queued while the body is still arriving, so read
     * and drop what follows, up to a bound, and answer when the body ends; past the bound,
     * close the connection. */
    if (r->body_seen > max + HTTP_DISCARD_MAX)
        return MHD_NO;
    return MHD_YES;
}

/* The body is complete: close the file (the handler may rename it) and finish its digest, or
 * terminate the text. */
static int body_finish(http_req *r)
{
    uint8_t digest[32];
    int rc = 0;

    if (r->route->body_to_file) {
        if (r->body_fd < 0)
            rc = body_file_open(r);
        if (r->body_fd >= 0) {
            close(r->body_fd);
            r->body_fd = -1;
            sha256_final(&r->body_hash, digest);
            sha256_hex(digest, r->body_sha256);
        }
    }
    return rc;
}

static enum MHD_Result req_answered(http_req *r)
{
    if (!r->answered)
        return MHD_NO; /* nothing could be queued: close the connection */
    r->phase = HTTP_PHASE_DONE;
    return MHD_YES;
}

/* Calls the handler until it answers or parks. */
static enum MHD_Result req_run(http_req *r)
{
    http_server *s = r->s;

    if (!r->answered && http_query_check(r) != 0)
        return req_answered(r);

    for (;;) {
        int rc, prc;
        r->seq0 = http_park_seq(s);
        r->park_asked = 0;
        r->errbuf[0] = '\0';
        req_headers_clear(r);
        r->phase = HTTP_PHASE_RUN;
        rc = r->route->handler(r, s->cfg.app);
        if (r->answered) {
            if (r->park_asked)
                http_log_line(s, "http: %s %s: handler answered and parked; park ignored",
                              r->method, r->route->pattern);
            return req_answered(r);
        }
        if (rc < 0) {
            http_reply_error(r, rc);
            return req_answered(r);
        }
        if (!r->park_asked) {
            http_log_line(s, "http: %s %s: handler returned %d without answering (a bug)",
                          r->method, r->route->pattern, rc);
            r->errbuf[0] = '\0';
            http_reply_problem(r, 500, NULL, "the handler gave no answer", NULL, 0);
            return req_answered(r);
        }
        prc = http_park_commit(r);
        if (prc == 1) {
            r->phase = HTTP_PHASE_PARKED;
            return MHD_YES;
        }
        if (prc < 0) {
            snprintf(r->errbuf, sizeof(r->errbuf), "the server is stopping");
            http_reply_error(r, prc);
            return req_answered(r);
        }
        /* its signal was raised after this call began: look again at once */
        r->wakeups++;
        r->timed_out = 0;
    }
}

/* The last call for a request (body complete), or the call after a park's resume. */
static enum MHD_Result req_final(http_req *r)
{
    int rc;

    switch (r->phase) {
    case HTTP_PHASE_READ:
        if (r->reject_status) {
            req_answer_reject(r);
            return req_answered(r);
        }
        rc = body_finish(r);
        if (rc < 0) {
            http_reply_problem(r, store_status(rc), NULL, "cannot store the upload", NULL, 0);
            return req_answered(r);
        }
        return req_run(r);
    case HTTP_PHASE_PARKED:
        pthread_mutex_lock(&r->s->lock);
        r->timed_out = r->park.timed_out;
        pthread_mutex_unlock(&r->s->lock);
        r->wakeups++;
        return req_run(r);
    case HTTP_PHASE_DONE:
        return MHD_YES;
    default:
        http_log_line(r->s, "http: %s %s called again while running", r->method, r->path);
        return MHD_NO;
    }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    http_server *s = cls;
    http_req *r = *con_cls;

    (void)version;
    if (!r) {
        r = req_new(s, conn, url, method);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        http_conn_waiting(s, conn, 0);
        req_begin(r);
        if (r->reject_status && req_has_body(r)) {
            /* answer before reading: libmicrohttpd then closes instead of reading the body */
            req_answer_reject(r);
            return req_answered(r);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->phase != HTTP_PHASE_READ)
            return MHD_YES;
        return body_take(r, upload_data, n);
    }
    return req_final(r);
}

static const char *toe_word(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return "";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return " (timeout)";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return " (shutdown)";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return " (client gone)";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return " (read error)";
    default:
        return " (error)";
    }
}

/* Writes s for a log line: printable ASCII kept, other bytes as %XX, at most cap-4 bytes. */
static void log_clean(char *dst, size_t cap, const char *s)
{
    size_t o = 0;

    for (; *s && o + 7 <= cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c > 0x20 && c < 0x7F) {
            dst[o++] = (char)c;
        } else {
            snprintf(dst + o, 4, "%%%02X", c);
            o += 3;
        }
    }
    memcpy(dst + o, *s ? "..." : "", *s ? 4 : 1);
}

/* The statuses counted on their own (HTTP_STAT_CODES of them); 0 is "no answer". */
static const int http_stat_codes[HTTP_STAT_CODES] = {0,   200, 201, 202, 204, 206, 304, 400,
                                                     401, 403, 404, 405, 409, 411, 413, 414,
                                                     415, 416, 429, 431, 500, 501, 503, 507};

static void stats_count(http_server *s, const http_req *r)
{
    size_t row = r->route ? (size_t)(r->route - s->cfg.routes) : s->cfg.n_routes;
    int status = r->answered ? r->status : 0, col = HTTP_STAT_CODES;
    for (int i = 0; i < HTTP_STAT_CODES; i++)
        if (http_stat_codes[i] == status)
            col = i;
    atomic_fetch_add_explicit(&s->stat_count[row][col], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stat_bytes[row], r->bytes_out, memory_order_relaxed);
}

void http_stats(http_server *s, http_stat_fn fn, void *ctx)
{
    for (size_t row = 0; row <= s->cfg.n_routes; row++) {
        http_route_stats rs = {.route = row < s->cfg.n_routes ? &s->cfg.routes[row] : NULL};
        rs.bytes = atomic_load_explicit(&s->stat_bytes[row], memory_order_relaxed);
        for (int col = 0; col <= HTTP_STAT_CODES; col++) {
            uint64_t n = atomic_load_explicit(&s->stat_count[row][col], memory_order_relaxed);
            if (!n)
                continue;
            rs.by_status[rs.n].status = col < HTTP_STAT_CODES ? http_stat_codes[col] : -1;
            rs.by_status[rs.n++].count = n;
        }
        if (rs.n)
            fn(ctx, &rs);
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    http_req *r = *con_cls;
    char method[24], path[240];

    http_conn_waiting(s, conn, 1);
    if (!r)
        return;
    log_clean(method, sizeof(method), r->method ? r->method : "-");
    log_clean(path, sizeof(path), r->path ? r->path : "-");
    http_log_line(s, "%s %s %d %lluB %.1fms%s", method, path, r->answered ? r->status : 0,
                  (unsigned long long)r->bytes_out, (http_now() - r->t0) * 1e3, toe_word(toe));
    stats_count(s, r);
    *con_cls = NULL;
    req_free(r);
}

/* Leaves every path and query string as sent; routing and http_query decode them once. */
static size_t unescape_none(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    return strlen(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *s = cls;
    char msg[512];
    size_t n;

    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    pthread_mutex_lock(&s->lock);
    if (s->starting && !s->start_msg[0]) /* http_start reports why it failed (a wrong key) */
        snprintf(s->start_msg, sizeof(s->start_msg), "%s", msg);
    pthread_mutex_unlock(&s->lock);
    http_log_line(s, "http: libmicrohttpd: %s", msg);
}

/* ---- the server ----------------------------------------------------------------------------- */

/* The connection limit: the config's, else what the open-file limit allows (a connection may
 * hold a second descriptor, an upload's or a download's file), within 16..HTTP_MAX_CONNECTIONS. */
static unsigned conn_limit(const http_config *cfg)
{
    struct rlimit rl;
    rlim_t n = HTTP_MAX_CONNECTIONS;

    if (cfg->max_connections)
        n = cfg->max_connections;
    else if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = rl.rlim_cur > 2 * HTTP_FDS_ASIDE ? (rl.rlim_cur - HTTP_FDS_ASIDE) / 2 : 16;
    return n > HTTP_MAX_CONNECTIONS ? HTTP_MAX_CONNECTIONS : n < 16 ? 16 : (unsigned)n;
}

static int config_check(const http_config *cfg, char *err)
{
    int need_tmp = 0;
    struct stat st;

    if (cfg->n_routes && !cfg->routes)
        return err_set(err, -EINVAL, "the route table is missing");
    for (size_t i = 0; i < cfg->n_routes; i++) {
        const http_route *rt = &cfg->routes[i];
        int params = 0;
        if (!rt->method || !rt->pattern || !rt->handler || rt->pattern[0] != '/')
            return err_set(err, -EINVAL, "route %zu is incomplete", i);
        for (const char *p = rt->pattern; (p = strchr(p, '{')); p++) {
            const char *close = strchr(p, '}');
            const char *next = close ? strchr(close, '/') : NULL;
            if (p[-1] != '/' || !close || close == p + 1 ||
                memchr(close + 1, '{', next ? (size_t)(next - close - 1) : strlen(close + 1)))
                return err_set(err, -EINVAL, "route %s: bad parameter syntax", rt->pattern);
            params++;
        }
        if (params > HTTP_MAX_PARAMS)
            return err_set(err, -EINVAL, "route %s: more than %d parameters", rt->pattern,
                           HTTP_MAX_PARAMS);
        need_tmp |= rt->body_to_file;
    }
    if (need_tmp && (!cfg->tmp_dir || stat(cfg->tmp_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return err_set(err, -ENOENT, "the upload directory %s does not exist",
                       cfg->tmp_dir ? cfg->tmp_dir : "(none)");
    if (!cfg->tls_cert_pem != !cfg->tls_key_pem)
        return err_set(err, -EINVAL, "TLS needs both a certificate and its private key");
    if (cfg->tls_cert_pem && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return err_set(err, -ENOTSUP, "this libmicrohttpd was built without TLS support");
    return 0;
}

/* Forgets a PEM copy; a private key is wiped first. */
static void pem_free(char *pem)
{
    if (pem)
        explicit_bzero(pem, strlen(pem));
    free(pem);
}

static void server_free(http_server *s)
{
    free((void *)s->stat_count);
    free((void *)s->stat_bytes);
    free(s->tmp_dir);
    pem_free(s->tls_cert);
    pem_free(s->tls_key);
    free(s);
}

int http_start(const http_config *cfg, http_server **out, char *err)
{
    http_server *s = NULL;
    struct sockaddr_in sa;
    const char *bind = cfg->bind && cfg->bind[0] ? cfg->bind : "127.0.0.1";
    unsigned threads = cfg->threads ? cfg->threads : 4;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    unsigned max_conns = conn_limit(cfg);
    const union MHD_DaemonInfo *info;
    int rc;

    rc = config_check(cfg, err);
    if (rc < 0)
        goto out;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    if (cfg->port < 0 || cfg->port > 65535 || inet_pton(AF_INET, bind, &sa.sin_addr) != 1) {
        rc = err_set(err, -EINVAL, "cannot listen on %s:%d: give a numeric IPv4 address", bind,
                     cfg->port);
        goto out;
    }
    sa.sin_port = htons((uint16_t)cfg->port);
    if (threads > 64)
        threads = 64;
    s = calloc(1, sizeof(*s));
    if (!s) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->stat_count = calloc(cfg->n_routes + 1, sizeof *s->stat_count);
    s->stat_bytes = calloc(cfg->n_routes + 1, sizeof *s->stat_bytes);
    if (!s->stat_count || !s->stat_bytes) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (cfg->tmp_dir) {
        s->tmp_dir = strdup(cfg->tmp_dir);
        if (!s->tmp_dir) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    if (cfg->tls_cert_pem) {
        s->tls_cert = strdup(cfg->tls_cert_pem);
        s->tls_key = strdup(cfg->tls_key_pem);
        if (!s->tls_cert || !s->tls_key) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    s->cfg.tmp_dir = s->tmp_dir;
    s->cfg.tls_cert_pem = s->tls_cert;
    s->cfg.tls_key_pem = s->tls_key;
    s->cfg.bind = NULL;
    pthread_mutex_init(&s->lock, NULL);
    rc = http_park_start(s);
    if (rc < 0) {
        err_set(err, rc, "cannot start the park timer: %s", strerror(-rc));
        pthread_mutex_destroy(&s->lock);
        goto out;
    }
    rc = http_conn_start(s, max_conns);
    if (rc < 0) {
        err_set(err, rc, "cannot start the connection watcher: %s", strerror(-rc));
        http_park_stop(s);
        pthread_mutex_destroy(&s->lock);
        goto out;
    }
    /* TLS rides in an option array, so that plain HTTP passes an empty one. */
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key},
                                   {MHD_OPTION_END, 0, NULL}};
    if (s->tls_cert)
        flags |= MHD_USE_TLS;
    else
        tls[0].option = MHD_OPTION_END;
    s->starting = 1;
    errno = 0;
    s->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, http_conn_admit, s, on_access, s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
        MHD_OPTION_NOTIFY_CONNECTION, http_conn_notify, s, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, s, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    int start_errno = errno;
    pthread_mutex_lock(&s->lock);
    s->starting = 0;
    pthread_mutex_unlock(&s->lock);
    errno = start_errno;
    if (!s->d && s->tls_cert && errno != EADDRINUSE && errno != EACCES && errno != EADDRNOTAVAIL) {
        /* GnuTLS refused the certificate or the key; libmicrohttpd said why in its log. */
        rc = err_set(err, -EINVAL, "cannot serve TLS with this certificate and key: %s",
                     s->start_msg[0] ? s->start_msg : "libmicrohttpd refused them");
        http_conn_stop(s);
        http_park_stop(s);
        pthread_mutex_destroy(&s->lock);
        goto out;
    }
    if (!s->d) {
        rc = errno ? -errno : -EIO;
        err_set(err, rc, "cannot listen on %s:%d: %s", bind, cfg->port, strerror(-rc));
        http_conn_stop(s);
        http_park_stop(s);
        pthread_mutex_destroy(&s->lock);
        goto out;
    }
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    *out = s;
    return 0;
out:
    if (s)
        server_free(s);
    return rc;
}

void *http_auth(http_req *r)
{
    return r->auth;
}

int http_port(const http_server *s)
{
    return s ? s->port : -1;
}

void http_stop(http_server *s)
{
    if (!s)
        return;
    /* Stop accepting, wake everything parked (each answers its timeout, or 503 if it would park
     * again; streams end), give them a moment to go out, then stop the daemon. */
    s->listen_fd = (int)MHD_quiesce_daemon(s->d);
    http_park_resume_all(s);
    for (int waited = 0; atomic_load(&s->live) > 0 && waited < HTTP_STOP_GRACE_MS; waited += 2)
        usleep(2000);
    MHD_stop_daemon(s->d); /* notifies every connection CLOSED */
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    http_conn_stop(s);
    http_park_stop(s);
    pthread_mutex_destroy(&s->lock);
    server_free(s);
}
