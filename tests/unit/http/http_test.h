/* http_test: the fixture of the HTTP layer's tests (test_http_routing.c, test_http_park.c,
 * test_http_hostile.c): a real server on a loopback port with every route they use and its
 * handlers (echo, bodies and uploads, JSON, errors, files, long polls, streams, an authorize
 * hook), and the libcurl client that drives it. Header-only: each test executable includes it
 * once, and gets a server of its own from http_test_begin(). */
#ifndef TRAINYARD_TESTS_UNIT_HTTP_HTTP_TEST_H
#define TRAINYARD_TESTS_UNIT_HTTP_HTTP_TEST_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http_error.h"
#include "http/http.h"
#include "tests/unit/check.h"
#include "util/sha256.h"
#include "util/timeutil.h"

static http_server *srv;
static http_signal *sig_poll, *sig_stream;
static char tmp_dir[256];
static char upload_dir[280];
static char file_path[300];
static char last_upload[512];
static char kept_path[512];

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];

static inline void test_log(void *app, const char *line)
{
    (void)app;
    pthread_mutex_lock(&log_lock);
    if (strlen(log_text) + strlen(line) + 2 < sizeof(log_text)) {
        strcat(log_text, line);
        strcat(log_text, "\n");
    }
    pthread_mutex_unlock(&log_lock);
}

/* ---- handlers ------------------------------------------------------------------------------- */

static inline int h_echo(http_req *r, void *app)
{
    const char *q = http_query(r, "q");
    (void)app;
    return http_reply_json(r, 200,
                           json_pack("{s:s, s:s, s:s?, s:s}", "a", http_param(r, "a"), "b",
                                     http_param(r, "b"), "q", q, "method", http_method(r)));
}

static inline int h_item_delete(http_req *r, void *app)
{
    (void)app;
    return http_reply_empty(r, 204);
}

static inline int h_small(http_req *r, void *app)
{
    size_t len;
    const char *b = http_body(r, &len);
    (void)app;
    return http_reply_bytes(r, 200, "text/plain", b, len);
}

static inline int h_json(http_req *r, void *app)
{
    json_t *doc;
    int rc = http_body_json(r, &doc);
    (void)app;
    if (rc < 0)
        return rc;
    return http_reply_json(r, 200, doc);
}

static inline int h_upload(http_req *r, void *app)
{
    uint64_t len;
    const char *path = http_body_file(r, &len);
    struct stat st;
    (void)app;
    if (!path || stat(path, &st) != 0 || (uint64_t)st.st_size != len)
        return err_set(http_errbuf(r), -EIO, "the upload file is missing");
    snprintf(last_upload, sizeof(last_upload), "%s", path);
    if (http_query(r, "keep") && rename(path, kept_path) != 0)
        return err_set(http_errbuf(r), -EIO, "rename failed");
    return http_reply_json(
        r, 201, json_pack("{s:I, s:s?}", "size", (json_int_t)len, "sha256", http_body_sha256(r)));
}

/* 1 when the answer's "sha256" is the digest of the len bytes at data. */
static inline int body_has_sha256(const char *answer, const void *data, size_t len)
{
    sha256_ctx c;
    uint8_t digest[32];
    char hex[65], want[80];

    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, digest);
    sha256_hex(digest, hex);
    snprintf(want, sizeof want, "\"sha256\":\"%s\"", hex);
    return answer && strstr(answer, want) != NULL;
}

/* The authorize hook of these tests: routes with access 1 need "Bearer good" ("Bearer other" is
 * a valid caller without the right: 403); the caller is noted in http_auth for the handler. */
static inline int test_authorize(http_req *r, void *app, unsigned access)
{
    const char *h = http_header(r, "Authorization");
    (void)app;
    if (access == 0)
        return 0;
    if (h && !strcmp(h, "Bearer other"))
        return err_set(http_errbuf(r), -EACCES, "other may not");
    if (!h || strcmp(h, "Bearer good") != 0)
        return err_set(http_errbuf(r), -EPERM, "no good token");
    strcpy(http_auth(r), "good");
    return 0;
}

static inline int h_whoami(http_req *r, void *app)
{
    (void)app;
    return http_reply_json(r, 200, json_pack("{s:s}", "caller", (char *)http_auth(r)));
}

static inline int h_error(http_req *r, void *app)
{
    int code = atoi(http_param(r, "code"));
    const char *d = http_query(r, "d");
    (void)app;
    return err_set(http_errbuf(r), -code, "detail for %d%s", -code, d ? d : "");
}

static inline int h_file(http_req *r, void *app)
{
    (void)app;
    return http_reply_file(r, file_path, "text/plain", "abc123");
}

static inline int h_nothing(http_req *r, void *app)
{
    (void)r;
    (void)app;
    return 0;
}

/* long poll: answers 200 once `ready`, 204 on timeout */
static atomic_int poll_ready, poll_calls;

static inline int h_poll(http_req *r, void *app)
{
    const char *ms = http_query(r, "ms");
    (void)app;
    atomic_fetch_add(&poll_calls, 1);
    if (atomic_load(&poll_ready))
        return http_reply_json(r, 200, json_pack("{s:i}", "wakeups", http_wakeups(r)));
    if (http_parked_timeout(r))
        return http_reply_empty(r, 204);
    return http_park(r, sig_poll, ms ? atoi(ms) : 5000);
}

/* the lost-wakeup race: the producer's raise lands between the look and the park */
static atomic_int race_flag;

static inline void *raise_thread(void *arg)
{
    atomic_store(&race_flag, 1);
    http_signal_raise(arg);
    return NULL;
}

static inline int h_race(http_req *r, void *app)
{
    pthread_t t;
    (void)app;
    if (atomic_load(&race_flag))
        return http_reply_json(r, 200, json_pack("{s:i}", "wakeups", http_wakeups(r)));
    pthread_create(&t, NULL, raise_thread, sig_poll);
    pthread_join(t, NULL);
    return http_park(r, sig_poll, 5000);
}

/* streams: lines pushed by the test, END once `stream_end` */
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static char lines[8][32];
static int n_lines, stream_end;
static atomic_int stream_frees, stream_pulls;

typedef struct stream_state {
    int next;
    int once; /* the "leaving client" stream: one line, then waits forever */
} stream_state;

static inline ssize_t pull_lines(void *state, char *buf, size_t cap)
{
    stream_state *st = state;
    ssize_t n = HTTP_PULL_WAIT;

    atomic_fetch_add(&stream_pulls, 1);
    pthread_mutex_lock(&lines_lock);
    if (st->once) {
        if (st->next++ == 0) {
            memcpy(buf, "hello\n", 6);
            n = 6;
        }
    } else if (st->next < n_lines) {
        n = (ssize_t)strlen(lines[st->next]);
        if ((size_t)n > cap)
            n = (ssize_t)cap;
        memcpy(buf, lines[st->next++], (size_t)n);
    } else if (stream_end) {
        n = HTTP_PULL_END;
    }
    pthread_mutex_unlock(&lines_lock);
    return n;
}

static inline void free_state(void *p)
{
    atomic_fetch_add(&stream_frees, 1);
    free(p);
}

static inline int h_stream(http_req *r, void *app)
{
    stream_state *st = calloc(1, sizeof(*st));
    const char *hb = http_query(r, "hb");
    (void)app;
    if (!st)
        return -ENOMEM;
    st->once = http_query(r, "once") != NULL;
    return http_reply_stream(r, 200, "text/plain", pull_lines, st, free_state, sig_stream,
                             hb ? atoi(hb) : 5000);
}

static const http_route routes[] = {
    {"GET", "/echo/{a}/x/{b}", h_echo, 0, 0, 0},
    {"GET", "/items/{id}", h_echo, 0, 0, 0},
    {"GET", "/verb/{a}:go/x/{b}", h_echo, 0, 0, 0},
    {"DELETE", "/verb/{a}/x/{b}", h_item_delete, 0, 0, 0},
    {"DELETE", "/items/{id}", h_item_delete, 0, 0, 0},
    {"POST", "/small", h_small, 16, 0, 0},
    {"POST", "/json", h_json, HTTP_JSON_MAX_BODY, 0, 0},
    {"PUT", "/upload", h_upload, 1 << 20, 1, 0},
    {"PUT", "/upload-small", h_upload, 100, 1, 0},
    {"GET", "/error/{code}", h_error, 0, 0, 0},
    {"GET", "/file", h_file, 0, 0, 0},
    {"GET", "/nothing", h_nothing, 0, 0, 0},
    {"GET", "/poll", h_poll, 0, 0, 0},
    {"GET", "/race", h_race, 0, 0, 0},
    {"GET", "/stream", h_stream, 0, 0, 0},
    {"GET", "/", h_item_delete, 0, 0, 0},
    {"GET", "/guarded", h_whoami, 0, 0, 1},
    {"PUT", "/guarded-upload", h_upload, 1 << 20, 1, 1},
};

/* ---- the client ----------------------------------------------------------------------------- */

typedef struct resp {
    long status;
    char *body;
    size_t len;
    char headers[8192];
    /* stream timing */
    int n_chunks;
    double chunk_t[16];
    int abort_after; /* >0: abort the transfer after this many bytes */
    double t_done;
    CURLcode cc;
} resp;

static inline size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    resp *r = arg;
    size_t len = size * n;
    char *nb = realloc(r->body, r->len + len + 1);
    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    if (r->n_chunks < 16)
        r->chunk_t[r->n_chunks++] = time_mono();
    if (r->abort_after && r->len >= (size_t)r->abort_after)
        return 0;
    return len;
}

static inline size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    resp *r = arg;
    size_t len = size * n, have = strlen(r->headers);
    if (have + len + 1 < sizeof(r->headers)) {
        memcpy(r->headers + have, p, len);
        r->headers[have + len] = '\0';
    }
    return len;
}

/* The value of header name in r (first one), or NULL; in a static buffer. */
static inline const char *hdr(const resp *r, const char *name)
{
    static __thread char val[512];
    size_t n = strlen(name);
    for (const char *p = r->headers; p && *p;
         p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL) {
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1, *e = strstr(v, "\r\n");
            v += strspn(v, " ");
            snprintf(val, sizeof(val), "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
            return val;
        }
    }
    return NULL;
}

typedef struct upload {
    const char *data;
    size_t len, off;
} upload;

static inline size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    upload *u = arg;
    size_t len = size * n;
    if (len > u->len - u->off)
        len = u->len - u->off;
    if (len > 7)
        len = 7; /* several chunks */
    memcpy(buf, u->data + u->off, len);
    u->off += len;
    return len;
}

typedef struct req_opts {
    const char *method;
    const char *path;
    const char *headers[4];
    const char *body;
    long body_len; /* -1: none */
    int chunked;
} req_opts;

static inline void do_req(const req_opts *o, resp *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hl = NULL;
    char url[1024];
    upload u = {o->body, o->body_len > 0 ? (size_t)o->body_len : 0, 0};

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", http_port(srv), o->path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    if (o->method && strcmp(o->method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (o->method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, o->method);
    for (int i = 0; i < 4 && o->headers[i]; i++)
        hl = curl_slist_append(hl, o->headers[i]);
    if (o->chunked) {
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &u);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, o->method);
    } else if (o->body_len >= 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, o->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, o->body_len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    out->cc = curl_easy_perform(c);
    out->t_done = time_mono();
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (!out->body)
        out->body = calloc(1, 1);
}

static inline void get(const char *path, resp *out)
{
    req_opts o = {"GET", path, {NULL}, NULL, -1, 0};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static inline void get_h(const char *path, const char *h1, resp *out)
{
    req_opts o = {"GET", path, {h1, NULL}, NULL, -1, 0};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static inline void send_body(const char *method, const char *path, const char *ctype,
                             const char *body, long len, int chunked, resp *out)
{
    req_opts o = {method, path, {ctype, "Expect:", NULL}, body, len, chunked};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static inline void resp_free(resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* Checks a problem+json answer: status, title, and that detail contains `has` (if given). */
static inline void check_problem(const resp *r, long status, const char *title, const char *has)
{
    json_error_t e;
    json_t *doc = json_loads(r->body, 0, &e);
    const char *ct = hdr(r, "Content-Type");

    CHECK_INT(r->status, status);
    CHECK(ct && strcmp(ct, "application/problem+json") == 0);
    CHECK(doc != NULL);
    if (!doc) {
        fprintf(stderr, "  body: %s\n", r->body);
        return;
    }
    CHECK_STR(json_string_value(json_object_get(doc, "type")), "about:blank");
    CHECK_INT(json_integer_value(json_object_get(doc, "status")), status);
    if (title)
        CHECK_STR(json_string_value(json_object_get(doc, "title")), title);
    if (has) {
        const char *d = json_string_value(json_object_get(doc, "detail"));
        CHECK(d && strstr(d, has));
        if (!d || !strstr(d, has))
            fprintf(stderr, "  detail: %s\n", d ? d : "(none)");
    }
    json_decref(doc);
}

/* ---- the server's life ---------------------------------------------------------------------- */

/* Makes tmp_dir (its uploads/ folder the server's tmp_dir) and starts the server on every route
 * above on a free loopback port: 0, or -1 (a check failed and the reason was printed). */
static inline int http_test_begin(void)
{
    char err[ERR_LEN] = "";
    http_config cfg = {0};
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/test-http-XXXXXX", base);
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(file_path, sizeof(file_path), "%s/file.txt", tmp_dir);
    snprintf(kept_path, sizeof(kept_path), "%s/kept", tmp_dir);
    snprintf(upload_dir, sizeof(upload_dir), "%s/uploads", tmp_dir);
    mkdir(upload_dir, 0700);

    cfg.bind = "127.0.0.1";
    cfg.port = 0;
    cfg.threads = 2;
    cfg.routes = routes;
    cfg.n_routes = sizeof(routes) / sizeof(routes[0]);
    cfg.tmp_dir = upload_dir;
    cfg.log = test_log;
    cfg.authorize = test_authorize;
    cfg.json_max_depth = 8; /* below the 16 levels test_json sends */
    rc = http_start(&cfg, &srv, err);
    CHECK_INT(rc, 0);
    if (rc < 0) {
        fprintf(stderr, "http_start: %s\n", err);
        return -1;
    }
    CHECK(http_port(srv) > 0);
    sig_poll = http_signal_new(srv);
    sig_stream = http_signal_new(srv);
    /* No line to stream yet. Written here so that the compiler cannot take n_lines for a
     * constant 0 in a test that pushes none (and warn about lines[st->next] in pull_lines). */
    pthread_mutex_lock(&lines_lock);
    n_lines = 0;
    stream_end = 0;
    pthread_mutex_unlock(&lines_lock);
    return 0;
}

/* Stops the server unless a test did, shows its log when a check failed (or TEST_HTTP_LOG is
 * set), and removes tmp_dir. */
static inline void http_test_end(void)
{
    if (srv)
        http_stop(srv);
    srv = NULL;
    if (check_failures || getenv("TEST_HTTP_LOG")) {
        pthread_mutex_lock(&log_lock);
        fprintf(stderr, "--- server log ---\n%s", log_text);
        pthread_mutex_unlock(&log_lock);
    }
    unlink(file_path);
    rmdir(upload_dir);
    rmdir(tmp_dir);
    curl_global_cleanup();
}

#endif
