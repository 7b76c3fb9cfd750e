/* test_http: the HTTP layer against a real server on a loopback port, driven with libcurl.
 *
 * Covers routing (parameters, decoding, 404, 405 with Allow), body caps (Content-Length and
 * chunked), body_to_file, http_body_json's refusals, the error table, files with ranges and
 * ETags, parking (a raise from another thread answers promptly, a timeout answers through the
 * timeout path, a raise between the handler's look and its park is not lost), streams (each
 * line goes out promptly after its raise, END ends cleanly, a client that leaves gets its
 * state freed), hostile requests over a raw socket, and http_stop with parked requests and live
 * streams. Time-bound checks use generous margins except where the promptness is the point. */
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

static void test_log(void *app, const char *line)
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

static int h_echo(http_req *r, void *app)
{
    const char *q = http_query(r, "q");
    (void)app;
    return http_reply_json(r, 200,
                           json_pack("{s:s, s:s, s:s?, s:s}", "a", http_param(r, "a"), "b",
                                     http_param(r, "b"), "q", q, "method", http_method(r)));
}

static int h_item_delete(http_req *r, void *app)
{
    (void)app;
    return http_reply_empty(r, 204);
}

static int h_small(http_req *r, void *app)
{
    size_t len;
    const char *b = http_body(r, &len);
    (void)app;
    return http_reply_bytes(r, 200, "text/plain", b, len);
}

static int h_json(http_req *r, void *app)
{
    json_t *doc;
    int rc = http_body_json(r, &doc);
    (void)app;
    if (rc < 0)
        return rc;
    return http_reply_json(r, 200, doc);
}

static int h_upload(http_req *r, void *app)
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
static int body_has_sha256(const char *answer, const void *data, size_t len)
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
static int test_authorize(http_req *r, void *app, unsigned access)
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

static int h_whoami(http_req *r, void *app)
{
    (void)app;
    return http_reply_json(r, 200, json_pack("{s:s}", "caller", (char *)http_auth(r)));
}

static int h_error(http_req *r, void *app)
{
    int code = atoi(http_param(r, "code"));
    const char *d = http_query(r, "d");
    (void)app;
    return err_set(http_errbuf(r), -code, "detail for %d%s", -code, d ? d : "");
}

static int h_file(http_req *r, void *app)
{
    (void)app;
    return http_reply_file(r, file_path, "text/plain", "abc123");
}

static int h_nothing(http_req *r, void *app)
{
    (void)r;
    (void)app;
    return 0;
}

/* long poll: answers 200 once `ready`, 204 on timeout */
static atomic_int poll_ready, poll_calls;

static int h_poll(http_req *r, void *app)
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

static void *raise_thread(void *arg)
{
    atomic_store(&race_flag, 1);
    http_signal_raise(arg);
    return NULL;
}

static int h_race(http_req *r, void *app)
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

static ssize_t pull_lines(void *state, char *buf, size_t cap)
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

static void free_state(void *p)
{
    atomic_fetch_add(&stream_frees, 1);
    free(p);
}

static int h_stream(http_req *r, void *app)
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

static size_t on_body(char *p, size_t size, size_t n, void *arg)
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

static size_t on_header(char *p, size_t size, size_t n, void *arg)
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
static const char *hdr(const resp *r, const char *name)
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

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
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

static void do_req(const req_opts *o, resp *out)
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

static void get(const char *path, resp *out)
{
    req_opts o = {"GET", path, {NULL}, NULL, -1, 0};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static void get_h(const char *path, const char *h1, resp *out)
{
    req_opts o = {"GET", path, {h1, NULL}, NULL, -1, 0};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static void send_body(const char *method, const char *path, const char *ctype, const char *body,
                      long len, int chunked, resp *out)
{
    req_opts o = {method, path, {ctype, "Expect:", NULL}, body, len, chunked};
    memset(out, 0, sizeof(*out));
    do_req(&o, out);
}

static void resp_free(resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* Checks a problem+json answer: status, title, and that detail contains `has` (if given). */
static void check_problem(const resp *r, long status, const char *title, const char *has)
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

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_routing(void)
{
    resp r;
    json_t *doc;

    get("/echo/caf%C3%A9/x/%252F?q=a+b%2Bc", &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(hdr(&r, "Content-Type"), "application/json");
    doc = json_loads(r.body, 0, NULL);
    CHECK(doc != NULL);
    CHECK_STR(json_string_value(json_object_get(doc, "a")), "caf\xc3\xa9");
    CHECK_STR(json_string_value(json_object_get(doc, "b")), "%2F"); /* decoded once */
    CHECK_STR(json_string_value(json_object_get(doc, "q")), "a b+c");
    json_decref(doc);
    resp_free(&r);

    /* a parameter followed by a literal in its segment: the literal is not the param's */
    const char *verbs[][2] = {
        {"/verb/abc:go/x/1", "abc"}, {"/verb/a:go:go/x/1", "a:go"}, {"/verb/abc%3Ago/x/1", "abc"}};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        get(verbs[i][0], &r);
        CHECK_INT(r.status, 200);
        doc = json_loads(r.body, 0, NULL);
        CHECK(doc != NULL);
        CHECK_STR(json_string_value(json_object_get(doc, "a")), verbs[i][1]);
        json_decref(doc);
        resp_free(&r);
    }

    /* the pattern with the literal is the more specific: it alone decides method and Allow */
    req_opts del = {"DELETE", "/verb/abc:go/x/1", {NULL}, NULL, -1, 0};
    memset(&r, 0, sizeof(r));
    do_req(&del, &r);
    check_problem(&r, 405, "Method not allowed", NULL);
    CHECK_STR(hdr(&r, "Allow"), "GET, HEAD");
    resp_free(&r);
    del.path = "/verb/abc/x/1"; /* without the literal, the plain pattern */
    memset(&r, 0, sizeof(r));
    do_req(&del, &r);
    CHECK_INT(r.status, 204);
    resp_free(&r);
    get("/verb/abc/x/1", &r);
    CHECK_INT(r.status, 405);
    resp_free(&r);

    const char *not_found[] = {"/verb/x:go",    "/echo/a%2Fb/x/y", "/echo//x/y",    "/echo/a/x/b/c",
                               "/echo/%zz/x/y", "/echo/a%00/x/y",  "/echo/%FF/x/y", "/nope",
                               "/echo/a/x/",    "/echo/a%0A/x/y"};
    for (size_t i = 0; i < sizeof(not_found) / sizeof(not_found[0]); i++) {
        get(not_found[i], &r);
        check_problem(&r, 404, "Not found", NULL);
        resp_free(&r);
    }

    req_opts o = {"POST", "/items/7", {NULL}, NULL, -1, 0};
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    check_problem(&r, 405, "Method not allowed", NULL);
    CHECK_STR(hdr(&r, "Allow"), "GET, HEAD, DELETE");
    resp_free(&r);

    o.method = "DELETE";
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK_INT(r.status, 204);
    resp_free(&r);

    o.method = "HEAD";
    o.path = "/echo/a/x/b";
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK_INT(r.status, 200);
    CHECK_INT(r.len, 0);
    resp_free(&r);

    get("/", &r);
    CHECK_INT(r.status, 204);
    resp_free(&r);

    pthread_mutex_lock(&log_lock);
    CHECK(strstr(log_text, "GET /echo/caf%C3%A9/x/%252F 200 ") != NULL);
    CHECK(strstr(log_text, "POST /items/7 405 ") != NULL);
    pthread_mutex_unlock(&log_lock);
}

/* Whether dir is empty, or becomes so within a second (requests end after their answer). */
/* Waits up to 5 s (a loaded sanitizer run can take a while to end a connection) for dir to
 * hold no file. */
static int dir_empty_soon(const char *dir)
{
    for (int i = 0; i < 5000; i++) {
        DIR *d = opendir(dir);
        struct dirent *e;
        int n = 0;
        while (d && (e = readdir(d)))
            n += e->d_name[0] != '.';
        if (d)
            closedir(d);
        if (n == 0)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void test_bodies(void)
{
    resp r;
    char big[64];
    struct stat st;
    static char blob[100000];

    send_body("POST", "/small", NULL, "0123456789abcdef", 16, 0, &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.body, "0123456789abcdef");
    resp_free(&r);

    memset(big, 'x', sizeof(big));
    send_body("POST", "/small", NULL, big, 17, 0, &r);
    check_problem(&r, 413, "Payload too large", NULL);
    resp_free(&r);

    send_body("POST", "/small", NULL, "0123456789", 10, 1, &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.body, "0123456789");
    resp_free(&r);

    send_body("POST", "/small", NULL, big, sizeof(big), 1, &r);
    check_problem(&r, 413, "Payload too large", NULL);
    resp_free(&r);

    /* a body announced past the cap with Expect: 100-continue is refused before it is sent */
    static char over[100000];
    req_opts ox = {"POST", "/small", {NULL}, over, sizeof(over), 0};
    double t0 = time_mono();
    memset(&r, 0, sizeof(r));
    do_req(&ox, &r);
    check_problem(&r, 413, "Payload too large", NULL);
    CHECK(r.t_done - t0 < 0.9); /* curl would send the body after waiting 1 s for a 100 */
    resp_free(&r);

    send_body("DELETE", "/items/3", NULL, "abc", 3, 0, &r); /* max_body 0 */
    check_problem(&r, 413, NULL, NULL);
    resp_free(&r);

    /* a huge Content-Length is refused before anything is read */
    req_opts o = {"POST", "/small", {"Content-Length: 99999999999999999999", NULL}, NULL, -1, 0};
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK(r.status == 413 || r.status == 400);
    resp_free(&r);

    for (size_t i = 0; i < sizeof(blob); i++)
        blob[i] = (char)(i % 251);
    send_body("PUT", "/upload", NULL, blob, sizeof(blob), 0, &r);
    CHECK_INT(r.status, 201);
    CHECK(strstr(r.body, "\"size\":100000") != NULL);
    CHECK(body_has_sha256(r.body, blob, sizeof(blob))); /* hashed as it streamed in */
    /* removed when the request ends, which may be just after the client has the answer */
    for (int i = 0; i < 1000 && last_upload[0] && stat(last_upload, &st) == 0; i++)
        usleep(1000);
    CHECK(last_upload[0] && stat(last_upload, &st) != 0);
    resp_free(&r);

    send_body("PUT", "/upload?keep=1", NULL, blob, 1234, 1, &r);
    CHECK_INT(r.status, 201);
    CHECK(stat(kept_path, &st) == 0 && st.st_size == 1234);
    CHECK(body_has_sha256(r.body, blob, 1234)); /* chunked */
    unlink(kept_path);
    resp_free(&r);

    send_body("PUT", "/upload", NULL, "", 0, 0, &r);
    CHECK_INT(r.status, 201);
    CHECK(strstr(r.body, "\"size\":0") != NULL);
    CHECK(body_has_sha256(r.body, "", 0));
    resp_free(&r);

    /* the upload directory gone: the server's fault (500), not the client's. The last upload's
     * file goes when its request ends, which may be just after the client has its answer: wait
     * for that, or the file would be moved away with the directory and back. */
    CHECK(dir_empty_soon(upload_dir));
    char moved[300];
    snprintf(moved, sizeof(moved), "%s.moved", upload_dir);
    CHECK(rename(upload_dir, moved) == 0);
    send_body("PUT", "/upload", NULL, blob, 5000, 0, &r);
    check_problem(&r, 500, "Internal error", "cannot store the upload");
    resp_free(&r);
    send_body("PUT", "/upload", NULL, blob, 5000, 1, &r);
    check_problem(&r, 500, "Internal error", "cannot store the upload");
    resp_free(&r);
    CHECK(rename(moved, upload_dir) == 0);

    /* an upload past the cap, chunked: 413, and no temporary file left behind */
    send_body("PUT", "/upload-small", NULL, blob, 500, 1, &r);
    check_problem(&r, 413, "Payload too large", NULL);
    resp_free(&r);
    CHECK(dir_empty_soon(upload_dir));
}

/* The authorize hook runs before the body is read: a refused upload leaves no file behind and
 * its handler never runs; 401 carries WWW-Authenticate. */
static void test_authorize_hook(void)
{
    resp r;
    static char blob[200000];

    get("/guarded", &r);
    check_problem(&r, 401, "Unauthorized", "no good token");
    CHECK(hdr(&r, "WWW-Authenticate") != NULL);
    resp_free(&r);
    get_h("/guarded", "Authorization: Bearer other", &r);
    check_problem(&r, 403, "Forbidden", "other may not");
    resp_free(&r);
    get_h("/guarded", "Authorization: Bearer good", &r);
    CHECK_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, "\"caller\":\"good\"") != NULL);
    resp_free(&r);

    /* Sent as libcurl sends a large body, asking to continue first: the 401 comes instead of
     * "100 Continue" and the body is never sent. (A client that sends it all unasked may see the
     * connection reset instead: the server closes with the body unread, and TCP then drops the
     * answer the client had not read yet. Not the server's choice, so not tested here.) */
    last_upload[0] = '\0';
    req_opts big = {"PUT", "/guarded-upload", {"Expect: 100-continue", NULL},
                    blob,  sizeof(blob),      0};
    memset(&r, 0, sizeof(r));
    do_req(&big, &r);
    check_problem(&r, 401, "Unauthorized", NULL);
    resp_free(&r);
    CHECK(last_upload[0] == '\0');
    CHECK(dir_empty_soon(upload_dir));
    req_opts o = {"PUT", "/guarded-upload", {"Authorization: Bearer good", NULL}, blob, 5000, 0};
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK_INT(r.status, 201);
    resp_free(&r);
}

static void test_json(void)
{
    resp r;
    const char *ct = "Content-Type: application/json; charset=utf-8";
    char deep[128] = "{\"a\":";

    const char *ok = "{\"a\": [1, {\"b\": \"c\"}]}";

    send_body("POST", "/json", ct, ok, (long)strlen(ok), 0, &r);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.body, "{\"a\":[1,{\"b\":\"c\"}]}\n");
    resp_free(&r);

    send_body("POST", "/json", "Content-Type: text/plain", "{}", 2, 0, &r);
    check_problem(&r, 415, "Unsupported media type", "application/json");
    resp_free(&r);

    for (int i = 0; i < 16; i++)
        strcat(deep, "[");
    send_body("POST", "/json", ct, deep, (long)strlen(deep), 0, &r);
    check_problem(&r, 400, "Invalid request", "nested more than 8 levels");
    resp_free(&r);

    send_body("POST", "/json", ct, "{\n\"a\": }", 8, 0, &r);
    check_problem(&r, 400, "Invalid request", "line 2");
    resp_free(&r);

    send_body("POST", "/json", ct, "{\"a\":1,\"a\":2}", 13, 0, &r);
    check_problem(&r, 400, NULL, "duplicate");
    resp_free(&r);

    send_body("POST", "/json", ct, "[1]", 3, 0, &r);
    check_problem(&r, 400, NULL, "object");
    resp_free(&r);

    send_body("POST", "/json", ct, "{\"a\":\"\xff\xfe\"}", 10, 0, &r);
    check_problem(&r, 400, NULL, NULL); /* the detail echoes bad bytes: it must still be UTF-8 */
    resp_free(&r);

    send_body("POST", "/json", ct, "", 0, 0, &r);
    check_problem(&r, 400, NULL, NULL);
    resp_free(&r);
}

static void test_errors(void)
{
    static const struct {
        int code, status;
        const char *title;
    } cases[] = {
        {EINVAL, 400, "Invalid request"},
        {ENOENT, 404, "Not found"},
        {EEXIST, 409, "Conflict"},
        {EBUSY, 409, "Conflict"},
        {EFBIG, 413, "Payload too large"},
        {E2BIG, 413, "Payload too large"},
        {ENOSPC, 507, "Insufficient storage"},
        {EACCES, 403, "Forbidden"},
        {EPERM, 401, "Unauthorized"},
        {ENOSYS, 501, "Not implemented"},
        {EIO, 500, "Internal error"},
        {EMEDIUMTYPE, 415, "Unsupported media type"},
    };
    resp r;
    char path[64];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK_INT(http_error_status(-cases[i].code), cases[i].status);
        CHECK_STR(http_error_title(-cases[i].code), cases[i].title);
        snprintf(path, sizeof(path), "/error/%d", cases[i].code);
        get(path, &r);
        snprintf(path, sizeof(path), "detail for %d", -cases[i].code);
        check_problem(&r, cases[i].status, cases[i].title, path);
        if (cases[i].status == 401)
            CHECK_STR(hdr(&r, "WWW-Authenticate"), "Bearer");
        resp_free(&r);
    }
    CHECK_INT(http_error_status(-EHWPOISON), 500);
    CHECK_INT(http_error_status(0), 500);
    CHECK_INT(http_error_status(22), 500);

    /* invalid UTF-8 in the detail is cleaned, the body stays valid JSON */
    get("/error/22?d=%FF%FE%C3", &r);
    check_problem(&r, 400, NULL, "detail for -22???");
    resp_free(&r);

    get("/nothing", &r);
    check_problem(&r, 500, "Internal error", NULL);
    resp_free(&r);
}

static void test_file(void)
{
    char data[1000];
    FILE *f = fopen(file_path, "wb");
    resp r;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)('a' + i % 26);
    fwrite(data, 1, sizeof(data), f);
    fclose(f);

    get("/file", &r);
    CHECK_INT(r.status, 200);
    CHECK_INT(r.len, 1000);
    CHECK(r.len == 1000 && memcmp(r.body, data, 1000) == 0);
    CHECK_STR(hdr(&r, "Accept-Ranges"), "bytes");
    CHECK_STR(hdr(&r, "ETag"), "\"abc123\"");
    CHECK_STR(hdr(&r, "Content-Type"), "text/plain");
    resp_free(&r);

    get_h("/file", "Range: bytes=10-19", &r);
    CHECK_INT(r.status, 206);
    CHECK_STR(hdr(&r, "Content-Range"), "bytes 10-19/1000");
    CHECK(r.len == 10 && memcmp(r.body, data + 10, 10) == 0);
    resp_free(&r);

    get_h("/file", "Range: bytes=990-", &r);
    CHECK_INT(r.status, 206);
    CHECK_STR(hdr(&r, "Content-Range"), "bytes 990-999/1000");
    CHECK(r.len == 10 && memcmp(r.body, data + 990, 10) == 0);
    resp_free(&r);

    get_h("/file", "Range: bytes=-5", &r);
    CHECK_INT(r.status, 206);
    CHECK_STR(hdr(&r, "Content-Range"), "bytes 995-999/1000");
    CHECK(r.len == 5 && memcmp(r.body, data + 995, 5) == 0);
    resp_free(&r);

    get_h("/file", "Range: bytes=500-99999", &r);
    CHECK_INT(r.status, 206);
    CHECK_STR(hdr(&r, "Content-Range"), "bytes 500-999/1000");
    resp_free(&r);

    get_h("/file", "Range: bytes=1000-", &r);
    check_problem(&r, 416, "Range not satisfiable", NULL);
    CHECK_STR(hdr(&r, "Content-Range"), "bytes */1000");
    resp_free(&r);

    get_h("/file", "Range: bytes=-0", &r);
    CHECK_INT(r.status, 416);
    resp_free(&r);

    const char *whole[] = {"Range: bytes=0-1,5-6", "Range: bytes=5-2", "Range: pages=1-2",
                           "Range: bytes=x-", "Range: bytes=99999999999999999999999-"};
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
        get_h("/file", whole[i], &r);
        CHECK_INT(r.status, 200);
        CHECK_INT(r.len, 1000);
        resp_free(&r);
    }

    req_opts head = {"HEAD", "/file", {"Range: bytes=1-2", NULL}, NULL, -1, 0};
    memset(&r, 0, sizeof(r));
    do_req(&head, &r);
    CHECK_INT(r.status, 206);
    CHECK_INT(r.len, 0);
    CHECK_STR(hdr(&r, "Content-Length"), "2");
    resp_free(&r);

    get_h("/file", "If-None-Match: \"abc123\"", &r);
    CHECK_INT(r.status, 304);
    CHECK_INT(r.len, 0);
    CHECK_STR(hdr(&r, "ETag"), "\"abc123\"");
    resp_free(&r);

    get_h("/file", "If-None-Match: \"x\", W/\"abc123\"", &r);
    CHECK_INT(r.status, 304);
    resp_free(&r);

    get_h("/file", "If-None-Match: \"other\"", &r);
    CHECK_INT(r.status, 200);
    resp_free(&r);

    req_opts o = {"GET", "/file", {"Range: bytes=0-9", "If-Range: \"old\"", NULL}, NULL, -1, 0};
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK_INT(r.status, 200);
    resp_free(&r);
    o.headers[1] = "If-Range: \"abc123\"";
    memset(&r, 0, sizeof(r));
    do_req(&o, &r);
    CHECK_INT(r.status, 206);
    resp_free(&r);
}

typedef struct client {
    pthread_t t;
    char path[128];
    resp r;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    req_opts o = {"GET", c->path, {NULL}, NULL, -1, 0};
    do_req(&o, &c->r);
    return NULL;
}

static void client_start(client *c, const char *path, int abort_after)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->path, sizeof(c->path), "%s", path);
    c->r.abort_after = abort_after;
    pthread_create(&c->t, NULL, client_main, c);
}

static void wait_for(atomic_int *v, int at_least, double seconds)
{
    double end = time_mono() + seconds;
    while (atomic_load(v) < at_least && time_mono() < end)
        usleep(1000);
}

static void test_park(void)
{
    client c;
    double t_raise;
    resp r;

    /* a raise from another thread answers a parked request promptly */
    atomic_store(&poll_ready, 0);
    atomic_store(&poll_calls, 0);
    client_start(&c, "/poll?ms=5000", 0);
    wait_for(&poll_calls, 1, 5);
    usleep(50000); /* let it be suspended */
    atomic_store(&poll_ready, 1);
    t_raise = time_mono();
    http_signal_raise(sig_poll);
    pthread_join(c.t, NULL);
    CHECK_INT(c.r.status, 200);
    CHECK(strstr(c.r.body, "\"wakeups\":1") != NULL);
    /* The park lasts 5 s: an answer well before that came from the raise. The bound is loose
     * so that a loaded machine does not fail it; the typical figure is printed when slow. */
    CHECK(c.r.t_done - t_raise < 2.0);
    if (c.r.t_done - t_raise >= 0.1)
        fprintf(stderr, "  answered %.3f s after the raise\n", c.r.t_done - t_raise);
    resp_free(&c.r);

    /* a park that times out answers through the timeout path */
    atomic_store(&poll_ready, 0);
    double t0 = time_mono();
    get("/poll?ms=100", &r);
    CHECK_INT(r.status, 204);
    CHECK(r.t_done - t0 >= 0.09 && r.t_done - t0 < 1.0);
    resp_free(&r);

    /* a raise between the handler's look and its park is not lost */
    atomic_store(&race_flag, 0);
    t0 = time_mono();
    get("/race", &r);
    CHECK_INT(r.status, 200);
    CHECK(strstr(r.body, "\"wakeups\":1") != NULL);
    CHECK(r.t_done - t0 < 1.0);
    resp_free(&r);

    /* many parked at once, all woken by one raise */
    client many[8];
    atomic_store(&poll_calls, 0);
    for (int i = 0; i < 8; i++)
        client_start(&many[i], "/poll?ms=5000", 0);
    wait_for(&poll_calls, 8, 5);
    usleep(50000);
    atomic_store(&poll_ready, 1);
    t_raise = time_mono();
    http_signal_raise(sig_poll);
    for (int i = 0; i < 8; i++) {
        pthread_join(many[i].t, NULL);
        CHECK_INT(many[i].r.status, 200);
        CHECK(many[i].r.t_done - t_raise < 2.0); /* parks last 5 s */
        resp_free(&many[i].r);
    }
}

static void push_line(const char *s)
{
    pthread_mutex_lock(&lines_lock);
    snprintf(lines[n_lines++], sizeof(lines[0]), "%s", s);
    pthread_mutex_unlock(&lines_lock);
    http_signal_raise(sig_stream);
}

static void test_stream(void)
{
    client c;
    double t_push[3];
    int frees0 = atomic_load(&stream_frees);

    n_lines = 0;
    stream_end = 0;
    atomic_store(&stream_pulls, 0);
    client_start(&c, "/stream?hb=5000", 0);
    wait_for(&stream_pulls, 1, 5);
    usleep(50000);
    for (int i = 0; i < 3; i++) {
        char line[32];
        snprintf(line, sizeof(line), "line %d\n", i);
        t_push[i] = time_mono();
        push_line(line);
        usleep(150000);
    }
    pthread_mutex_lock(&lines_lock);
    stream_end = 1;
    pthread_mutex_unlock(&lines_lock);
    http_signal_raise(sig_stream);
    pthread_join(c.t, NULL);
    CHECK_INT(c.r.cc, CURLE_OK);
    CHECK_INT(c.r.status, 200);
    CHECK_STR(c.r.body, "line 0\nline 1\nline 2\n");
    CHECK_INT(c.r.n_chunks, 3);
    for (int i = 0; i < 3 && i < c.r.n_chunks; i++) {
        CHECK(c.r.chunk_t[i] - t_push[i] < 2.0); /* the stream's heartbeat is 5 s */
        if (c.r.chunk_t[i] - t_push[i] >= 0.1)
            fprintf(stderr, "  line %d came %.3f s after its raise\n", i,
                    c.r.chunk_t[i] - t_push[i]);
    }
    CHECK_STR(hdr(&c.r, "Transfer-Encoding"), "chunked");
    resp_free(&c.r);
    wait_for(&stream_frees, frees0 + 1, 2);
    CHECK_INT(atomic_load(&stream_frees), frees0 + 1);

    /* HEAD of a stream: headers only, and the state is still freed */
    req_opts head = {"HEAD", "/stream?hb=5000", {NULL}, NULL, -1, 0};
    memset(&c.r, 0, sizeof(c.r));
    do_req(&head, &c.r);
    CHECK_INT(c.r.status, 200);
    CHECK_INT(c.r.len, 0);
    resp_free(&c.r);
    frees0++;
    wait_for(&stream_frees, frees0 + 1, 2);
    CHECK_INT(atomic_load(&stream_frees), frees0 + 1);

    /* a client that leaves mid-stream: its state is freed by the next heartbeat */
    client_start(&c, "/stream?hb=50&once=1", 6);
    pthread_join(c.t, NULL);
    CHECK(c.r.len >= 6 && strncmp(c.r.body, "hello\n", 6) == 0);
    resp_free(&c.r);
    wait_for(&stream_frees, frees0 + 2, 2);
    CHECK_INT(atomic_load(&stream_frees), frees0 + 2);
}

/* Sends raw bytes and returns the status of the answer: 0 when the server closed the connection
 * without one (end of stream or a reset), -1 when there was no server or no word from it within
 * 5 s, which no case accepts. */
static int raw_request(const char *data, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port(srv))};
    struct timeval tv = {5, 0};
    char buf[256];
    ssize_t n;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        for (size_t off = 0; off < len;) {
            n = send(fd, data + off, len - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            status = 0;
            sscanf(buf, "HTTP/1.%*d %d", &status);
        } else if (n == 0 || errno == ECONNRESET) {
            status = 0;
        }
    }
    close(fd);
    return status;
}

static void test_hostile(void)
{
    static char huge[100000];
    int st;

    st = raw_request("GARBAGE\r\n\r\n", 11);
    CHECK(st == 0 || (st >= 400 && st < 500)); /* libmicrohttpd closes on a line without a version */
    st = raw_request("FOO /echo/a/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 37);
    CHECK_INT(st, 405);
    st = raw_request("GET /echo/%%%%/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 41);
    CHECK_INT(st, 404);
    st = raw_request("GET http://x/echo/a/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 46);
    CHECK_INT(st, 200);
    st = raw_request("GET /echo/\xff\xfe/x/b HTTP/1.1\r\nHost: x\r\n\r\n", 38);
    CHECK(st == 404 || st == 400);

    memcpy(huge, "GET /file HTTP/1.1\r\nHost: x\r\nX-Big: ", 36);
    memset(huge + 36, 'a', sizeof(huge) - 40);
    memcpy(huge + sizeof(huge) - 4, "\r\n\r\n", 4);
    st = raw_request(huge, sizeof(huge));
    CHECK(st == 0 || st == 431 || st == 413);

    memset(huge, '/', sizeof(huge));
    memcpy(huge, "GET ", 4);
    memcpy(huge + sizeof(huge) - 15, " HTTP/1.1\r\n\r\n", 13);
    st = raw_request(huge, sizeof(huge) - 2);
    CHECK(st == 0 || st == 414 || st == 431 || st == 413 || st == 400);

    /* still serving */
    resp r;
    get("/echo/a/x/b", &r);
    CHECK_INT(r.status, 200);
    resp_free(&r);
}

static void test_stop(void)
{
    client polls[3], streams[2];
    double t0;
    int frees0 = atomic_load(&stream_frees);

    atomic_store(&poll_ready, 0);
    atomic_store(&poll_calls, 0);
    atomic_store(&stream_pulls, 0);
    pthread_mutex_lock(&lines_lock);
    n_lines = 0;
    stream_end = 0;
    pthread_mutex_unlock(&lines_lock);
    for (int i = 0; i < 3; i++)
        client_start(&polls[i], "/poll?ms=30000", 0);
    for (int i = 0; i < 2; i++)
        client_start(&streams[i], "/stream?hb=30000", 0);
    wait_for(&poll_calls, 3, 5);
    wait_for(&stream_pulls, 2, 5);
    usleep(50000);
    t0 = time_mono();
    http_stop(srv);
    if (getenv("TEST_HTTP_LOG"))
        fprintf(stderr, "http_stop took %.1f ms\n", (time_mono() - t0) * 1e3);
    CHECK(time_mono() - t0 < 1.5);
    for (int i = 0; i < 3; i++) {
        pthread_join(polls[i].t, NULL);
        CHECK(polls[i].r.status == 204 || polls[i].r.cc != CURLE_OK);
        CHECK(polls[i].r.t_done - t0 < 2.0);
        resp_free(&polls[i].r);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(streams[i].t, NULL);
        CHECK(streams[i].r.t_done - t0 < 2.0);
        resp_free(&streams[i].r);
    }
    CHECK_INT(atomic_load(&stream_frees), frees0 + 2);
    srv = NULL;
}

static void test_start_errors(void)
{
    http_config cfg = {.bind = "localhost", .routes = routes, .n_routes = 1};
    http_server *s = NULL;
    char err[ERR_LEN] = "";
    http_route bad = {"GET", "/a/{x", h_echo, 0, 0, 0};

    CHECK_INT(http_start(&cfg, &s, err), -EINVAL);
    CHECK(strstr(err, "numeric") != NULL);
    cfg.bind = "127.0.0.1";
    cfg.routes = &bad;
    CHECK_INT(http_start(&cfg, &s, err), -EINVAL);
    bad.pattern = "/a/{x}{y}"; /* one parameter per segment */
    CHECK_INT(http_start(&cfg, &s, err), -EINVAL);
    bad.pattern = "/a/{x}:{y}";
    CHECK_INT(http_start(&cfg, &s, err), -EINVAL);
    cfg.routes = routes;
    cfg.n_routes = sizeof(routes) / sizeof(routes[0]);
    cfg.tmp_dir = "/nonexistent/dir";
    CHECK_INT(http_start(&cfg, &s, err), -ENOENT);
    CHECK(s == NULL);
    http_stop(NULL);
}

int main(void)
{
    char err[ERR_LEN] = "";
    http_config cfg = {0};
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/test-http-XXXXXX", base);
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
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
        return check_exit();
    }
    CHECK(http_port(srv) > 0);
    sig_poll = http_signal_new(srv);
    sig_stream = http_signal_new(srv);

    test_start_errors();
    test_routing();
    test_bodies();
    test_json();
    test_authorize_hook();
    test_errors();
    test_file();
    test_park();
    test_stream();
    test_hostile();
    test_stop();

    if (check_failures || getenv("TEST_HTTP_LOG")) {
        pthread_mutex_lock(&log_lock);
        fprintf(stderr, "--- server log ---\n%s", log_text);
        pthread_mutex_unlock(&log_lock);
    }
    unlink(file_path);
    rmdir(upload_dir);
    rmdir(tmp_dir);
    curl_global_cleanup();
    return check_exit();
}
