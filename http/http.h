/* http: trainyard's HTTP layer over libmicrohttpd, a library of its own (http/).
 *
 * It knows nothing of jobs: the API (api/) hands it a route table and an opaque app pointer,
 * and the limits that depend on the API's documents (the JSON nesting depth) come in through
 * http_config.
 *
 * A server is a libmicrohttpd daemon with a thread pool and a route table. For each request the
 * framework matches the route (method + pattern with {params}), reads the body within the
 * route's cap (413 past it), and calls the route's handler once the whole body is in. A handler
 * answers with exactly one http_reply_*() call and returns 0, or returns a negative errno-style
 * code and leaves the answer to the error table (http_error.c: -ENOENT → 404, -EINVAL → 400,
 * -EEXIST/-EBUSY → 409, -EFBIG → 413, -ENOSPC → 507, ...), which writes problem+json with the
 * handler's sentence from http_errbuf() as `detail`. Unknown paths are 404 and known paths with
 * another method 405 (with Allow), both problem+json.
 *
 * HTTP threads never wait (STYLE 9). A handler with nothing to answer yet *parks* the request
 * on a signal (http_park): the connection is suspended, no thread is held, and the handler is
 * called again when the signal is raised or the timeout passes. Streams (log follow, SSE) are
 * pulled: the pull function returns bytes, HTTP_PULL_WAIT (the stream parks on its signal) or
 * HTTP_PULL_END. Signals are broadcast: raising one wakes every request and stream parked on it;
 * a woken one rechecks its state (SQLite) and parks again if it still has nothing.
 *
 * Every request is logged as one line to the server's log: method, path, status, bytes, ms.
 *
 * Ownership: the framework owns http_req; json bodies handed to http_reply_json are stolen;
 * state set with http_state_set is freed with its destructor when the request ends.
 *
 * Threads: handlers run on the pool's threads, several at once; everything taking an http_req
 * is for the handler's own call only (not another thread, not after it returned). Signals may
 * be raised from any thread until http_stop(), which frees them: stop whatever raises first. */
#ifndef TRAINYARD_HTTP_HTTP_H
#define TRAINYARD_HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "util/err.h"

#define HTTP_MAX_PARAMS     4
#define HTTP_JSON_MAX_BODY  (1u << 20) /* JSON request bodies: 1 MiB */
#define HTTP_JSON_MAX_DEPTH 32         /* http_body_json's nesting limit when the config has 0 */

typedef struct http_server http_server;
typedef struct http_req http_req;
typedef struct http_signal http_signal;

/* Answers one request (see above). app is http_config.app. */
typedef int (*http_handler)(http_req *r, void *app);

typedef struct http_route {
    const char *method;  /* "GET", "POST", "PUT", "DELETE" */
    const char *pattern; /* "/jobs/{id}/artifacts/{name}": literal segments and {params}; a
                            {param} may end its segment with a literal ("/m/{name}:predict") */
    http_handler handler;
    uint64_t max_body; /* 0: a body is refused (413); else its cap in bytes */
    int body_to_file;  /* 1: the body is streamed to a temporary file (http_body_file) */
    unsigned access;   /* who may call it: passed as is to http_config.authorize */
} http_route;

typedef struct http_config {
    const char *bind; /* address to listen on, "127.0.0.1" by default */
    int port;         /* 0 picks a free port; http_port() tells which */
    unsigned threads; /* thread pool size, default 4 */
    const http_route *routes;
    size_t n_routes;
    void *app;
    const char *tmp_dir; /* where body_to_file bodies go; must exist */
    /* Called once per request, on its first call, before any of its body is read, with the
     * route's access; NULL lets every request through. Returns 0 to go on, or a negative code
     * (-EPERM: 401, -EACCES: 403) with a sentence in http_errbuf(r): the request is answered
     * with that problem at once, its body unread. It may add headers to that answer
     * (WWW-Authenticate) and note who is calling in http_auth(r). */
    int (*authorize)(http_req *r, void *app, unsigned access);
    /* Called with each request's log line (and the server's own complaints), from any pool
     * thread at once; NULL prints it to stderr. */
    void (*log)(void *app, const char *line);
    /* HTTPS: the PEM text of the certificate (chain, leaf first) and of its private key; both
     * NULL serves plain HTTP. Copied by http_start. */
    const char *tls_cert_pem, *tls_key_pem;
    /* Open connections at most; 0 sizes it from the open-file limit (RLIMIT_NOFILE: two
     * descriptors a connection, for an upload's or a download's file, 128 kept aside), at
     * most HTTP_MAX_CONNECTIONS. The last eighth is kept for light clients (http_conn.c). */
    unsigned max_connections;
    /* Open connections one client address may hold; 0: no limit. */
    unsigned max_per_client;
    /* The deepest nesting of arrays and objects http_body_json accepts (400 past it, before
     * jansson's recursive parser sees the text); 0: HTTP_JSON_MAX_DEPTH. The API sets its job
     * document's limit. */
    unsigned json_max_depth;
} http_config;

#define HTTP_MAX_CONNECTIONS 4096

/* Starts listening and serving. bind must be a numeric IPv4 address ("0.0.0.0" for all);
 * -EINVAL for a bad config (a certificate without a key or the reverse, or TLS material that
 * libmicrohttpd refuses: unparsable, or a key that does not match the certificate), -ENOTSUP
 * for TLS when libmicrohttpd was built without it, -ENOENT when a body_to_file route has no
 * tmp_dir, -errno when the address cannot be bound (-EADDRINUSE, ...). */
int http_start(const http_config *cfg, http_server **out, char *err);
/* The port the server listens on. */
int http_port(const http_server *s);
/* Stops accepting, ends parked requests and streams, and releases the server; accepts NULL.
 * Parked requests are woken as if timed out (a handler that would park again gets 503),
 * streams are cut (the client sees an unfinished chunked body and may reconnect); the woken
 * get up to a second to go out before the daemon stops. */
void http_stop(http_server *s);

/* ---- counters ------------------------------------------------------------------------------ */

/* How many of each status are counted on their own; others share one count (status -1). */
#define HTTP_STAT_CODES 24

/* What one route has answered since start. */
typedef struct http_route_stats {
    const http_route *route; /* NULL: the requests that matched no route */
    uint64_t bytes;          /* sent in its answers, in all */
    size_t n;                /* statuses answered at least once, in by_status */
    struct {
        int status; /* 0: the request ended unanswered (the client left, the server stopped);
                       -1: the statuses not counted on their own */
        uint64_t count;
    } by_status[HTTP_STAT_CODES + 1];
} http_route_stats;

/* Called once per route that has had a request since start. */
typedef void (*http_stat_fn)(void *ctx, const http_route_stats *rs);
/* Walks the counters (atomic reads: a concurrent request may or may not be counted yet). */
void http_stats(http_server *s, http_stat_fn fn, void *ctx);

/* ---- signals: what parked requests and streams wait on ------------------------------------ */

/* A new signal belonging to s (freed by http_stop); NULL when out of memory. */
http_signal *http_signal_new(http_server *s);
/* Wakes every request and stream parked on sig. Safe from any thread, never blocks on I/O.
 * A raise that lands between a handler's look at its state and its park is not lost: the
 * handler is called again at once instead of parking. Accepts NULL. */
void http_signal_raise(http_signal *sig);
/* A number that changes whenever any signal of s is raised (an atomic read, no lock). Taken
 * before reading some state, it tells later whether a raise, and so a change, came since. */
uint64_t http_signal_generation(http_server *s);

/* ---- the request ---------------------------------------------------------------------------- */

/* The request's method ("HEAD" stays "HEAD" on a GET route). */
const char *http_method(const http_req *r);
/* The path as sent (still percent-encoded), without the query string. */
const char *http_path(const http_req *r);
/* A path parameter by name ({id}), URL-decoded once; NULL when the route has none of that
 * name. Never empty; holds no '/', no control character, only valid UTF-8 (else: 404). */
const char *http_param(const http_req *r, const char *name);
/* A query-string argument, URL-decoded ('+' is a space); NULL when absent; the first of a
 * repeated name. */
const char *http_query(const http_req *r, const char *name);
/* A request header (case-insensitive name); NULL when absent. */
const char *http_header(const http_req *r, const char *name);
/* The body read into memory (NUL-terminated, not counted in *len); "" when empty. */
const char *http_body(const http_req *r, size_t *len);
/* The path of the temporary file holding a body_to_file body, and its size. The handler may
 * rename() it away; otherwise it is removed when the request ends. */
const char *http_body_file(const http_req *r, uint64_t *len);
/* The SHA-256 (64 lowercase hex digits) of that file's bytes, computed while they were written,
 * so a handler never reads an upload back to hash it; NULL for a body kept in memory. */
const char *http_body_sha256(const http_req *r);
/* Parses the body as a JSON object: Content-Type must be application/json (415), depth at most
 * http_config.json_max_depth, syntax errors 400 with line and column, duplicate keys and invalid
 * UTF-8 400, anything but an object 400. On failure it has already answered with problem+json and
 * returns the negative code (-EMEDIUMTYPE, -EINVAL); the handler returns it as is. On success
 * *out is a new reference. For in-memory bodies (not body_to_file routes). */
int http_body_json(http_req *r, json_t **out);
/* 1 when the request says its body is JSON (Content-Type: application/json, parameters
 * allowed), as http_body_json requires; for a handler that reads the bytes itself. */
int http_body_is_json(const http_req *r);
/* The caller's buffer (ERR_LEN bytes) for the failure sentence that becomes `detail`; emptied
 * before each handler call. */
char *http_errbuf(http_req *r);

/* HTTP_AUTH_BYTES zeroed bytes per request, aligned for any type, for http_config.authorize to
 * note who is calling; the handlers read them back. */
#define HTTP_AUTH_BYTES 64
void *http_auth(http_req *r);

/* Per-request state kept across parks; free_fn (may be NULL) runs when the request ends.
 * Setting another state frees the previous one with its free_fn. */
void http_state_set(http_req *r, void *state, void (*free_fn)(void *));
void *http_state(const http_req *r);

/* ---- answers (exactly one per handler call that returns 0) ---------------------------------- */
/* Each returns 0 once the answer is queued, or a negative code and the request is unanswered
 * (the handler may return that code); a second answer in one call is refused with -EALREADY.
 * HEAD requests get the headers of the GET answer without its body. */

/* Adds a header to the answer about to be made (name a token, value without control
 * characters: -EINVAL; at most 32: -E2BIG). Headers are forgotten at each new handler call. */
int http_header_add(http_req *r, const char *name, const char *value);
/* JSON answer ("application/json"); body is stolen (decref'd by the framework), even when the
 * call fails. */
int http_reply_json(http_req *r, int status, json_t *body);
/* Any bytes with a content type (copied). */
int http_reply_bytes(http_req *r, int status, const char *content_type, const void *data,
                     size_t len);
/* No body (204, 304). */
int http_reply_empty(http_req *r, int status);
/* A file on disk, answering Range (one range → 206 with Content-Range, unsatisfiable → 416,
 * several → the whole file), If-Range and If-None-Match (304) against etag. content_type
 * (default application/octet-stream) and etag may be NULL; etag is sent as given when quoted
 * ("\"...\"" or W/"..."), else quoted. A file that cannot be opened answers nothing and
 * returns the code for the handler to return: -ENOENT when missing (404), else -EIO (logged)
 * or -EMFILE/-ENFILE/-ENOMEM (503). */
int http_reply_file(http_req *r, const char *path, const char *content_type, const char *etag);
/* 1 when an If-None-Match list matches tag, a quoted ETag (weak comparison: W/ ignored on both
 * sides; "*" matches anything; a malformed list matches nothing). */
int http_etag_match(const char *list, const char *tag);
/* One entry of a problem's `errors` list. */
typedef struct http_field_error {
    const char *field;   /* a JSON path into the request ("model.layers[0].units"), "" for all */
    const char *message; /* what is wrong with it */
} http_field_error;

/* problem+json: type "about:blank"; title NULL takes the error table's title for status;
 * detail may be NULL; the n_errs entries of errs (NULL when 0) become the `errors` list. Every
 * string is made valid UTF-8 (invalid bytes become '?'). A 401 gets WWW-Authenticate: Bearer
 * unless the handler added its own, a 503 Retry-After: HTTP_RETRY_AFTER seconds. */
#define HTTP_RETRY_AFTER "5"
int http_reply_problem(http_req *r, int status, const char *title, const char *detail,
                       const http_field_error *errs, size_t n_errs);
/* problem+json for a negative code through the error table (http/http_error.h), detail from
 * http_errbuf(). 5xx answers are also logged. */
int http_reply_error(http_req *r, int code);

/* ---- parking and streams -------------------------------------------------------------------- */

/* Answers later: the connection is suspended until sig is raised or timeout_ms passes, then the
 * handler is called again (http_parked_timeout() says which woke it). The handler returns 0
 * right after this call. sig NULL waits for the timeout alone; timeout_ms is held to
 * 1..600000. A client that leaves while parked is noticed only when the request wakes. */
int http_park(http_req *r, http_signal *sig, int timeout_ms);
/* 1 when the handler is being called again because its park timed out (or the server is
 * stopping). */
int http_parked_timeout(const http_req *r);
/* How many times this request has been parked and woken so far (0 on the first call). */
int http_wakeups(const http_req *r);
/* 1 when the client has closed or reset its connection (a non-blocking peek; nothing is
 * consumed). A woken long poll checks it before taking anything it could not hand over. */
int http_client_gone(const http_req *r);

enum { HTTP_PULL_WAIT = -1, HTTP_PULL_END = -2, HTTP_PULL_ERROR = -3 };

/* Fills buf with at most cap bytes; returns the count (> 0), HTTP_PULL_WAIT when nothing is
 * ready (the stream parks on its signal), HTTP_PULL_END at the end, HTTP_PULL_ERROR to abort. */
typedef ssize_t (*http_pull)(void *state, char *buf, size_t cap);

/* A streamed answer of unknown length (chunked): pull is called until it returns END. The
 * stream re-pulls when sig is raised, and at least every heartbeat_ms (so it can notice a
 * client gone or send an SSE comment; <= 0: 15000, held to 10..600000). state is freed with
 * free_fn when the stream ends, however it ends; from this call on it belongs to the
 * framework, even when the call fails. pull runs on a pool thread and must not block; sig
 * NULL re-pulls on the heartbeat alone. A client gone is noticed, and state freed, at the next
 * WAIT or heartbeat. Adds Cache-Control: no-cache. */
int http_reply_stream(http_req *r, int status, const char *content_type, http_pull pull,
                      void *state, void (*free_fn)(void *), http_signal *sig, int heartbeat_ms);

#endif
