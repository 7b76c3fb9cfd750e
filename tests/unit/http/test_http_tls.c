/* test_http_tls: the HTTP layer over TLS, against a certificate made here with the openssl
 * command (the test skips where there is none).
 *
 * Covers http_start's refusals (a certificate without a key, a key of another certificate,
 * text that is not PEM), an answer over HTTPS verified against the private CA, a long poll
 * that parks and is woken by a raise from another thread, a stream that parks between lines,
 * and a client that left while parked, seen gone when the request wakes: by libmicrohttpd, which
 * reads the end and ends the request unanswered, or by the handler's http_client_gone(), which
 * over TLS must see it although its close_notify record still waits unread on the socket. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "tests/unit/check.h"
#include "util/timeutil.h"

static char dir[256];
static http_signal *sig;
static atomic_int ready, gone_seen, lines_sent, poll_calls;
static atomic_int poll_unanswered; /* /poll requests that ended without an answer */

static void on_log(void *app, const char *line)
{
    (void)app;
    if (strncmp(line, "GET /poll 0 ", 12) == 0)
        atomic_fetch_add(&poll_unanswered, 1);
    fprintf(stderr, "%s\n", line);
}

static int h_poll(http_req *r, void *app)
{
    (void)app;
    atomic_fetch_add(&poll_calls, 1);
    if (atomic_load(&ready) || http_parked_timeout(r)) {
        if (http_wakeups(r) > 0 && http_client_gone(r))
            atomic_store(&gone_seen, 1);
        return http_reply_json(r, 200, json_pack("{s:i}", "wakeups", http_wakeups(r)));
    }
    return http_park(r, sig, 5000);
}

static ssize_t pull(void *state, char *buf, size_t cap)
{
    int *next = state;
    (void)cap;
    if (*next >= 3)
        return HTTP_PULL_END;
    if (*next >= atomic_load(&lines_sent))
        return HTTP_PULL_WAIT;
    buf[0] = (char)('a' + (*next)++);
    return 1;
}

static int h_stream(http_req *r, void *app)
{
    int *next = calloc(1, sizeof *next);
    (void)app;
    if (!next)
        return -ENOMEM;
    return http_reply_stream(r, 200, "text/plain", pull, next, free, sig, 5000);
}

static const http_route routes[] = {
    {"GET", "/poll", h_poll, 0, 0, 0},
    {"GET", "/stream", h_stream, 0, 0, 0},
};

/* Reads dir/name whole (malloc'd), or NULL. */
static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    char *buf = f ? calloc(1, 1 << 16) : NULL;
    if (buf)
        fread(buf, 1, (1 << 16) - 1, f);
    if (f)
        fclose(f);
    return buf;
}

static int make_certs(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && E='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
             "openssl req -x509 $E -days 2 -subj /CN=ca -keyout ca.key -out ca.pem && "
             "openssl req $E -subj /CN=localhost -keyout key.pem -out s.csr && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > ext && "
             "openssl x509 -req -in s.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
             "-extfile ext -out cert.pem && "
             "openssl req $E -subj /CN=other -keyout other.pem -out o.csr",
             dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct call {
    char url[128];
    long timeout_ms;
    pthread_t t;
    long status;
    char body[256];
    size_t len;
    CURLcode cc;
    double t_done;
} call;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    call *c = arg;
    size_t len = size * n;
    if (c->len + len < sizeof c->body) {
        memcpy(c->body + c->len, p, len);
        c->len += len;
    }
    return len;
}

static void *do_call(void *arg)
{
    call *c = arg;
    char ca[300];
    CURL *h = curl_easy_init();
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    c->cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
    c->t_done = time_mono();
    curl_easy_cleanup(h);
    return NULL;
}

/* Starts a request to path on its own thread; timeout_ms bounds it (the client then leaves). */
static void call_start(call *c, int port, const char *path, long timeout_ms)
{
    memset(c, 0, sizeof *c);
    snprintf(c->url, sizeof c->url, "https://127.0.0.1:%d%s", port, path);
    c->timeout_ms = timeout_ms;
    pthread_create(&c->t, NULL, do_call, c);
}

/* Waits (up to 10 s) until h_poll has been called n times in all. */
static void wait_calls(int n)
{
    for (int i = 0; i < 500 && atomic_load(&poll_calls) < n; i++)
        usleep(20000);
}

static http_server *start(const char *cert, const char *key, int *rc, char *err)
{
    http_config cfg = {.bind = "127.0.0.1",
                       .threads = 2,
                       .routes = routes,
                       .n_routes = sizeof routes / sizeof routes[0],
                       .log = on_log,
                       .tls_cert_pem = cert,
                       .tls_key_pem = key};
    http_server *s = NULL;
    *rc = http_start(&cfg, &s, err);
    return s;
}

int main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char err[ERR_LEN] = "";
    int rc;

    snprintf(dir, sizeof dir, "%s/test-http-tls-XXXXXX", base);
    if (!mkdtemp(dir) || make_certs() < 0) {
        fprintf(stderr, "no openssl command to make a certificate: skipped\n");
        return 77;
    }
    char *cert = slurp("cert.pem"), *key = slurp("key.pem"), *other = slurp("other.pem");
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* refusals */
    CHECK(start(cert, NULL, &rc, err) == NULL);
    CHECK_INT(rc, -EINVAL);
    CHECK(start(cert, other, &rc, err) == NULL);
    CHECK_INT(rc, -EINVAL);
    CHECK(strstr(err, "do not match") != NULL);
    CHECK(start("not a certificate", key, &rc, err) == NULL);
    CHECK_INT(rc, -EINVAL);

    http_server *s = start(cert, key, &rc, err);
    CHECK_INT(rc, 0);
    if (!s) {
        fprintf(stderr, "http_start: %s\n", err);
        return check_exit();
    }
    sig = http_signal_new(s);
    int port = http_port(s);

    /* a parked long poll is answered promptly when another thread raises its signal */
    call c;
    call_start(&c, port, "/poll", 20000);
    wait_calls(1);
    usleep(100000);
    double t0 = time_mono();
    atomic_store(&ready, 1);
    http_signal_raise(sig);
    pthread_join(c.t, NULL);
    CHECK_INT(c.cc, CURLE_OK);
    CHECK_INT(c.status, 200);
    CHECK(strstr(c.body, "\"wakeups\":1") != NULL);
    CHECK(c.t_done - t0 < 1.0);

    /* a stream parks between lines and goes on at each raise, then ends */
    call_start(&c, port, "/stream", 20000);
    for (int i = 1; i <= 3; i++) {
        usleep(150000);
        atomic_store(&lines_sent, i);
        http_signal_raise(sig);
    }
    pthread_join(c.t, NULL);
    CHECK_INT(c.cc, CURLE_OK);
    CHECK_STR(c.body, "abc");

    /* a client that leaves while parked is seen gone when the request wakes */
    atomic_store(&ready, 0);
    int calls = atomic_load(&poll_calls);
    call_start(&c, port, "/poll", 1000);
    wait_calls(calls + 1);
    pthread_join(c.t, NULL);
    CHECK_INT(c.cc, CURLE_OPERATION_TIMEDOUT);
    int unanswered = atomic_load(&poll_unanswered);
    usleep(200000);
    atomic_store(&ready, 1);
    http_signal_raise(sig);
    for (int i = 0;
         i < 100 && !atomic_load(&gone_seen) && atomic_load(&poll_unanswered) == unanswered; i++)
        usleep(20000);
    CHECK(atomic_load(&gone_seen) || atomic_load(&poll_unanswered) > unanswered);

    http_stop(s);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(cert);
    free(key);
    free(other);
    curl_global_cleanup();
    return check_exit();
}
