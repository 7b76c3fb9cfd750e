/* Unit tests of data/fetch against a real local HTTP server (fetch_server.py, started here on
 * a port the kernel picks) and real files: plain and gzip bodies, checksums, HTTP errors, size
 * caps, timeouts, redirects, file:// confinement to the dataset root, and s3:// URLs: their
 * mapping, the AWS_* environment, and signed GETs that the server checks. */
#include "data/fetch.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/unit/check.h"
#include "util/err.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "util/allow.h"
#include "data/dscache.h"

static char base[64];  /* http://127.0.0.1:PORT */
static char tmp[256];  /* scratch directory */
static char root[300]; /* tmp/root: the served directory and the dataset root */

static const char plain[] = "a,b,label\n1,2,x\n3,4,y\n";

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_INT(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Gzips data as one member into out (cap bytes); returns the compressed length. */
static size_t gzip_of(const void *data, size_t len, unsigned char *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK_INT(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t n = z.total_out;
    deflateEnd(&z);
    return n;
}

/* Starts the server on tmp/root; returns its pid, or -1. */
static pid_t server_start(void)
{
    const char *src = getenv("TRAINYARD_SOURCE_ROOT");
    char script[512];
    snprintf(script, sizeof script, "%s/tests/unit/data/fetch_server.py", src ? src : "..");
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "cannot find %s; set TRAINYARD_SOURCE_ROOT\n", script);
        return -1;
    }
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan server if the test dies */
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", script, root, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[32] = "";
    size_t used = 0;
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    while (used < sizeof line - 1 && !strchr(line, '\n') && poll(&p, 1, 10000) > 0) {
        ssize_t n = read(fds[0], line + used, sizeof line - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        line[used] = '\0';
    }
    close(fds[0]);
    int port = atoi(line);
    if (port <= 0) {
        fprintf(stderr, "the server did not print its port\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    /* Wait until it answers. */
    char url[128], err[ERR_LEN];
    snprintf(url, sizeof url, "%s/health", base);
    for (int i = 0; i < 100; i++) {
        char *out = NULL;
        size_t len = 0;
        fetch_opts o = {.connect_timeout_s = 1, .total_timeout_s = 2, .allow_private = 1};
        if (fetch_url(url, &o, &out, &len, NULL, err) == 0) {
            free(out);
            return pid;
        }
        usleep(50000);
    }
    fprintf(stderr, "the server never answered: %s\n", err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Fetches base + path, or path itself when it does not start with '/', with o. */
static int get(const char *path, const fetch_opts *o, char **out, size_t *len, fetch_stats *st,
               char *err)
{
    char url[1024];
    if (path[0] == '/')
        snprintf(url, sizeof url, "%s%s", base, path);
    else
        snprintf(url, sizeof url, "%s", path);
    err[0] = '\0';
    return fetch_url(url, o, out, len, st, err);
}

/* Expects failure with code and want in the message, and the outputs untouched. */
static void expect_fail(const char *path, const fetch_opts *o, int code, const char *want, int line)
{
    char err[ERR_LEN];
    char *out = (char *)"untouched";
    size_t len = 12345;
    int rc = get(path, o, &out, &len, NULL, err);
    if (rc != code || !strstr(err, want)) {
        fprintf(stderr, "%s:%d: %s gave %d \"%s\", expected %d with \"%s\"\n", __FILE__, line, path,
                rc, err, code, want);
        check_failures++;
    }
    CHECK_STR(out, "untouched");
    CHECK_INT(len, 12345);
}

/* Expects success with exactly the bytes want. */
static void expect_body(const char *path, const fetch_opts *o, const void *want, size_t want_len,
                        int gz, int line)
{
    char err[ERR_LEN];
    char *out = NULL;
    size_t len = 0;
    fetch_stats st;
    memset(&st, 0xff, sizeof st);
    int rc = get(path, o, &out, &len, &st, err);
    if (rc != 0 || len != want_len || memcmp(out, want, len) != 0 || out[len] != '\0' ||
        st.was_gzip != gz || st.decompressed != len) {
        fprintf(stderr, "%s:%d: %s gave %d \"%s\", %zu bytes, gzip %d\n", __FILE__, line, path, rc,
                err, len, st.was_gzip);
        check_failures++;
    }
    CHECK(rc != 0 || (st.seconds >= 0 && st.seconds < 60));
    free(out);
}

static void test_bodies(void)
{
    fetch_opts o = {.allow_private = 1};
    size_t n = strlen(plain);
    expect_body("/plain.csv", &o, plain, n, 0, __LINE__);
    /* NULL opts: defaults, which refuse private addresses such as the test server's. */
    expect_fail("/plain.csv", NULL, -EACCES, "--dataset-allow 127.0.0.1", __LINE__);
    expect_body("/data.csv.gz", &o, plain, n, 1, __LINE__);
    expect_body("/data.bin", &o, plain, n, 1, __LINE__); /* gzip by magic, not by name */
    char both[256];
    snprintf(both, sizeof both, "%s%s", plain, "5,6,z\n");
    expect_body("/two.gz", &o, both, strlen(both), 1, __LINE__);
    expect_body("/empty.csv", &o, "", 0, 0, __LINE__);
    expect_body("/redirect?to=/plain.csv", &o, plain, n, 0, __LINE__);
    const char *ua = "trainyard/" TRAINYARD_VERSION;
    expect_body("/ua", &o, ua, strlen(ua), 0, __LINE__);

    /* downloaded counts the wire bytes. */
    char err[ERR_LEN], *out = NULL;
    size_t len = 0;
    fetch_stats st;
    CHECK_INT(get("/data.csv.gz", &o, &out, &len, &st, err), 0);
    unsigned char gz[512];
    CHECK_INT(st.downloaded, gzip_of(plain, n, gz, sizeof gz));
    CHECK_INT(st.decompressed, n);
    free(out);

    expect_fail("/bad.gz", &o, -EBADMSG, "corrupt gzip", __LINE__);
    expect_fail("/truncated.gz", &o, -EBADMSG, "corrupt gzip", __LINE__);
    expect_fail("/trailing.gz", &o, -EBADMSG, "unexpected bytes", __LINE__);
}

static void test_checksums(void)
{
    char hex[65], upper[65], err[ERR_LEN];
    unsigned char gz[512];
    size_t gz_len = gzip_of(plain, strlen(plain), gz, sizeof gz);
    /* The digest is of the downloaded (compressed) bytes; case does not matter. */
    sha256_buf_hex(gz, gz_len, hex);
    for (int i = 0; i < 65; i++)
        upper[i] = (char)toupper((unsigned char)hex[i]);
    fetch_opts o = {.sha256 = upper, .allow_private = 1};
    expect_body("/data.csv.gz", &o, plain, strlen(plain), 1, __LINE__);

    char plain_hex[65];
    sha256_buf_hex(plain, strlen(plain), plain_hex);
    o.sha256 = plain_hex;
    char want[256];
    snprintf(want, sizeof want, "expected sha256 %s, got %s", plain_hex, hex);
    expect_fail("/data.csv.gz", &o, -EBADMSG, want, __LINE__);
    o.sha256 = "abc";
    expect_fail("/plain.csv", &o, -EINVAL, "64 hex digits", __LINE__);
    o.sha256 = "zz00000000000000000000000000000000000000000000000000000000000000";
    expect_fail("/plain.csv", &o, -EINVAL, "non-hex", __LINE__);
    (void)err;
}

/* Validators come back in the stats; a conditional request answered 304 is FETCH_NOT_MODIFIED
 * with the outputs untouched, one answered 200 is a plain fetch. */
static void test_conditional(void)
{
    fetch_opts o = {.allow_private = 1};
    char err[ERR_LEN], *out = NULL;
    size_t len = 0;
    fetch_stats st;
    CHECK_INT(get("/etag?v=one", &o, &out, &len, &st, err), 0);
    CHECK_STR(st.etag, "\"one\"");
    CHECK_STR(st.last_modified, "Tue, 01 Jan 2030 00:00:00 GMT");
    CHECK(st.date[0] != '\0');
    free(out);

    o.if_none_match = "\"one\"";
    out = (char *)"untouched";
    len = 7;
    CHECK_INT(get("/etag?v=one", &o, &out, &len, &st, err), FETCH_NOT_MODIFIED);
    CHECK_STR(out, "untouched");
    CHECK_INT(len, 7);
    CHECK_STR(st.etag, "\"one\"");
    CHECK_INT(st.downloaded, 0);
    /* through a redirect too: the headers go with every hop */
    CHECK_INT(get("/redirect?to=/etag%3Fv%3Done", &o, &out, &len, &st, err), FETCH_NOT_MODIFIED);
    expect_body("/etag?v=two", &o, "etag,body\n1,2\n", 14, 0, __LINE__);

    /* a file: Last-Modified from its mtime, and If-Modified-Since with it answers 304 */
    o.if_none_match = NULL;
    CHECK_INT(get("/plain.csv", &o, &out, &len, &st, err), 0);
    free(out);
    CHECK(st.last_modified[0] != '\0' && st.etag[0] == '\0');
    char since[FETCH_HEADER_MAX];
    memcpy(since, st.last_modified, sizeof since);
    o.if_modified_since = since;
    CHECK_INT(get("/plain.csv", &o, &out, &len, &st, err), FETCH_NOT_MODIFIED);
    o.if_modified_since = "Thu, 01 Jan 1970 00:00:00 GMT";
    expect_body("/plain.csv", &o, plain, strlen(plain), 0, __LINE__);

    o.if_modified_since = "bad\r\nX-Injected: 1";
    expect_fail("/plain.csv", &o, -EINVAL, "If-Modified-Since must be printable", __LINE__);
}

static void test_http_errors(void)
{
    fetch_opts o = {.allow_private = 1};
    char want[256];
    snprintf(want, sizeof want, "HTTP 404 from %s/missing.csv", base);
    expect_fail("/missing.csv", &o, -EIO, want, __LINE__);
    expect_fail("/status/500", &o, -EIO, "HTTP 500 from", __LINE__);

    /* Credentials and query strings stay out of messages. */
    char url[256], err[ERR_LEN], *out = NULL;
    size_t len = 0;
    snprintf(url, sizeof url, "http://user:hunter2@%s/missing.csv?sig=SECRET#frag",
             base + strlen("http://"));
    CHECK_INT(fetch_url(url, &o, &out, &len, NULL, err), -EIO);
    CHECK(strstr(err, want) != NULL);
    CHECK(strstr(err, "hunter2") == NULL && strstr(err, "SECRET") == NULL);
    expect_fail("/loop", &o, -EIO, "more than 5", __LINE__);
    expect_fail("/redirect?to=file:///etc/passwd", &o, -EACCES, "not http or https", __LINE__);
    expect_fail("ftp://127.0.0.1/x", &o, -EINVAL, "use http://, https://, file:// or s3://",
                __LINE__);
    expect_fail("", &o, -EINVAL, "unsupported URL", __LINE__);
    expect_fail("http://127.0.0.1:1/refused", &o, -EIO, "127.0.0.1:1", __LINE__);
}

static void test_limits(void)
{
    fetch_opts o = {.max_bytes = 10, .allow_private = 1};
    /* Announced length over the cap; a body without a length over the cap. */
    expect_fail("/plain.csv", &o, -EFBIG, "larger than the limit of 10 bytes", __LINE__);
    o.max_bytes = 100000;
    expect_fail("/nolength?n=300000", &o, -EFBIG, "larger than the limit", __LINE__);
    static char zs[100000];
    memset(zs, 'z', sizeof zs);
    expect_body("/nolength?n=100000", &o, zs, sizeof zs, 0, __LINE__);
    /* A small gzip file that inflates past the cap. */
    expect_fail("/bomb.gz", &o, -EFBIG, "once decompressed", __LINE__);
    /* Exactly at the cap is fine, before and after gunzip. */
    o.max_bytes = strlen(plain);
    expect_body("/plain.csv", &o, plain, strlen(plain), 0, __LINE__);
    static char zeros[1 << 20];
    o.max_bytes = sizeof zeros;
    expect_body("/bomb.gz", &o, zeros, sizeof zeros, 1, __LINE__);
    o.max_bytes = sizeof zeros - 1;
    expect_fail("/bomb.gz", &o, -EFBIG, "once decompressed", __LINE__);
}

static void test_timeouts(void)
{
    /* Stalled: the low-speed check trips after about 1 s. */
    fetch_opts o = {.low_speed_timeout_s = 1, .total_timeout_s = 30, .allow_private = 1};
    double t0 = time_mono();
    expect_fail("/stall", &o, -ETIMEDOUT, "timed out", __LINE__);
    double t = time_mono() - t0;
    CHECK(t >= 0.9 && t < 8);
    /* Steady but slow: only the total timeout trips. */
    fetch_opts d = {.low_speed_timeout_s = 30, .total_timeout_s = 1, .allow_private = 1};
    t0 = time_mono();
    expect_fail("/drip", &d, -ETIMEDOUT, "timed out", __LINE__);
    t = time_mono() - t0;
    CHECK(t >= 0.9 && t < 8);
}

/* Whether host matches the pattern list spec. */
static int host_ok(const char *spec, const char *host)
{
    allow_list l = {0};
    char err[ERR_LEN];
    CHECK_INT(allow_list_parse(spec, &l, err), 0);
    int m = allow_list_match_host(&l, host);
    allow_list_free(&l);
    return m;
}

/* Whether the address text a is private. */
static int private_ip(const char *a)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, a, &v4.sin_addr) == 1)
        return allow_addr_is_private((struct sockaddr *)&v4);
    CHECK_INT(inet_pton(AF_INET6, a, &v6.sin6_addr), 1);
    return allow_addr_is_private((struct sockaddr *)&v6);
}

static void test_patterns(void)
{
    /* Names: exact, case-insensitive, a trailing dot ignored; wildcards match subdomains only. */
    CHECK(host_ok("data.example.com", "DATA.Example.com"));
    CHECK(host_ok("data.example.com.", "data.example.com"));
    CHECK(!host_ok("data.example.com", "x.data.example.com"));
    CHECK(!host_ok("data.example.com", "data.example.com.evil.net"));
    CHECK(host_ok("*.example.com", "a.example.com"));
    CHECK(host_ok("*.example.com", "a.b.Example.COM"));
    CHECK(!host_ok("*.example.com", "example.com"));
    CHECK(!host_ok("*.example.com", "badexample.com"));
    /* Addresses and CIDR blocks, IPv4 and IPv6, with spaces and empty items in the list. */
    CHECK(host_ok(" a.org , 127.0.0.1,,", "127.0.0.1"));
    CHECK(!host_ok("127.0.0.1", "127.0.0.2"));
    CHECK(host_ok("127.0.0.0/8", "127.9.9.9"));
    CHECK(host_ok("10.0.0.0/8", "10.1.2.3") && !host_ok("10.0.0.0/8", "11.0.0.1"));
    CHECK(host_ok("172.16.0.0/12", "172.31.255.255") && !host_ok("172.16.0.0/12", "172.32.0.0"));
    CHECK(host_ok("0.0.0.0/0", "8.8.8.8"));
    CHECK(host_ok("::1", "[::1]") && host_ok("::1", "::1"));
    CHECK(host_ok("fd00::/8", "[fd12::1]") && !host_ok("fd00::/8", "[fe80::1]"));
    CHECK(host_ok("10.0.0.0/8", "[::ffff:10.0.0.1]")); /* mapped IPv4 counts as IPv4 */
    CHECK(!host_ok("127.0.0.1", "localhost"));         /* names are not resolved to match */
    CHECK(!host_ok("", "127.0.0.1"));

    /* Bad patterns are refused when parsed. */
    static const char *const bad[] = {"10.0.0.0/33",  "10.0.0.0/", "10.0.0.0/x",
                                      "ex.com/8",     "::1/129",   "*",
                                      "*example.com", "a b",       "http://x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        allow_list l = {0};
        char err[ERR_LEN] = "";
        int rc = allow_list_parse(bad[i], &l, err);
        if (rc != -EINVAL || !strstr(err, "--dataset-allow")) {
            fprintf(stderr, "%s:%d: '%s' gave %d \"%s\"\n", __FILE__, __LINE__, bad[i], rc, err);
            check_failures++;
        }
        CHECK_INT(l.n, 0);
    }

    /* The private ranges, and their edges. */
    static const char *const priv[] = {
        "10.0.0.1",    "127.0.0.1",        "127.255.0.3",    "172.16.0.1",
        "172.31.9.9",  "192.168.1.1",      "169.254.1.1",    "100.64.0.1",
        "100.127.0.1", "0.0.0.0",          "224.0.0.1",      "::1",
        "::",          "fc00::1",          "fd00::5",        "fe80::1",
        "ff02::1",     "::ffff:127.0.0.1", "::ffff:10.1.1.1"};
    for (size_t i = 0; i < sizeof priv / sizeof priv[0]; i++) {
        if (!private_ip(priv[i])) {
            fprintf(stderr, "%s:%d: %s should be private\n", __FILE__, __LINE__, priv[i]);
            check_failures++;
        }
    }
    static const char *const pub[] = {"8.8.8.8",     "172.32.0.1",      "172.15.255.255",
                                      "100.128.0.1", "11.0.0.1",        "192.169.0.1",
                                      "2001:db8::1", "2606:4700::1111", "::ffff:8.8.8.8"};
    for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++) {
        if (private_ip(pub[i])) {
            fprintf(stderr, "%s:%d: %s should be public\n", __FILE__, __LINE__, pub[i]);
            check_failures++;
        }
    }
}

/* The allow list and the private-address rule against the real server on 127.0.0.1. */
static void test_allow(void)
{
    size_t n = strlen(plain);
    fetch_opts o = {0};
    expect_fail("/plain.csv", &o, -EACCES, "resolves to a private address 127.0.0.1", __LINE__);
    expect_fail("/plain.csv", &o, -EACCES, "allow it with --dataset-allow 127.0.0.1", __LINE__);
    o.allow = "127.0.0.1";
    expect_body("/plain.csv", &o, plain, n, 0, __LINE__);
    o.allow = "127.0.0.0/8";
    expect_body("/plain.csv", &o, plain, n, 0, __LINE__);
    o.allow = "example.com, 127.0.0.1";
    expect_body("/redirect?to=/plain.csv", &o, plain, n, 0, __LINE__);

    /* A non-empty list refuses hosts not on it, whatever allow_private says. */
    o.allow = "*.example.com";
    o.allow_private = 1;
    expect_fail("/plain.csv", &o, -EACCES, "host 127.0.0.1 is not in --dataset-allow", __LINE__);
    o.allow = "data.example.com";
    expect_fail("/plain.csv", &o, -EACCES, "not in --dataset-allow", __LINE__);

    /* A redirect from an allowed host to one that is not: refused before it is requested. */
    char to[256];
    snprintf(to, sizeof to, "/redirect?to=http://localhost:%s/plain.csv", strrchr(base, ':') + 1);
    o.allow = "127.0.0.1";
    o.allow_private = 0;
    expect_fail(to, &o, -EACCES, "host localhost is not in --dataset-allow", __LINE__);
    /* Allowed by name, the private address behind localhost is allowed too. */
    o.allow = "127.0.0.1,localhost";
    expect_body(to, &o, plain, n, 0, __LINE__);
    /* Without a list, the redirect target's address is still checked. */
    o.allow = NULL;
    expect_fail(to, &o, -EACCES, "private address", __LINE__);

    /* A bad pattern is a bad option, before anything is fetched. */
    o.allow = "127.0.0.0/40";
    expect_fail("/plain.csv", &o, -EINVAL, "not a CIDR block", __LINE__);

    /* IPv6 loopback: refused before connecting, so no server on ::1 is needed; once allowed,
     * the connection is tried (and fails: nothing listens on port 1). */
    o.allow = NULL;
    expect_fail("http://[::1]:1/x", &o, -EACCES, "private address ::1", __LINE__);
    o.allow = "::1";
    expect_fail("http://[::1]:1/x", &o, -EIO, "[::1]:1", __LINE__);
    o.allow = "fc00::/8"; /* fd00::1 is in fc00::/7, not in fc00::/8 */
    expect_fail("http://[fd00::1]:1/x", &o, -EACCES, "host fd00::1 is not", __LINE__);
    /* file:// is governed by the dataset root alone. */
    char url[1024];
    fetch_opts f = {.file_root = root, .allow = "example.com"};
    snprintf(url, sizeof url, "file://%s/plain.csv", root);
    expect_body(url, &f, plain, n, 0, __LINE__);
}

static void test_files(void)
{
    char url[1024], want[1024];
    fetch_opts o = {.file_root = root};
    snprintf(url, sizeof url, "file://%s/plain.csv", root);
    expect_body(url, &o, plain, strlen(plain), 0, __LINE__);
    snprintf(url, sizeof url, "file://localhost%s/data.bin", root);
    expect_body(url, &o, plain, strlen(plain), 1, __LINE__);
    snprintf(url, sizeof url, "file://%s/sub%%20dir/inner.csv", root); /* percent-decoded */
    expect_body(url, &o, plain, strlen(plain), 0, __LINE__);

    /* Outside the root: directly, through "..", through a symlink. */
    snprintf(url, sizeof url, "file://%s/outside.csv", tmp);
    snprintf(want, sizeof want, "is outside the dataset root");
    expect_fail(url, &o, -EACCES, want, __LINE__);
    snprintf(url, sizeof url, "file://%s/../outside.csv", root);
    expect_fail(url, &o, -EACCES, want, __LINE__);
    snprintf(url, sizeof url, "file://%s/link.csv", root);
    expect_fail(url, &o, -EACCES, want, __LINE__);
    /* A sibling whose name starts with the root's is still outside. */
    snprintf(url, sizeof url, "file://%s2/plain.csv", root);
    expect_fail(url, &o, -EACCES, want, __LINE__);

    /* Whether a file outside exists is not revealed. */
    snprintf(url, sizeof url, "file://%s/no-such-file.csv", tmp);
    expect_fail(url, &o, -EACCES, want, __LINE__);
    /* A root given with a trailing slash works the same. */
    char slash[400];
    snprintf(slash, sizeof slash, "%s/", root);
    fetch_opts os = {.file_root = slash};
    snprintf(url, sizeof url, "file://%s/plain.csv", root);
    expect_body(url, &os, plain, strlen(plain), 0, __LINE__);

    snprintf(url, sizeof url, "file://%s/nope.csv", root);
    expect_fail(url, &o, -ENOENT, "nope.csv", __LINE__);
    /* A FIFO is refused instead of blocking the reader. */
    snprintf(url, sizeof url, "file://%s/fifo", root);
    expect_fail(url, &o, -EINVAL, "not a regular file", __LINE__);
    snprintf(url, sizeof url, "file://%s/sub%%20dir", root);
    expect_fail(url, &o, -EINVAL, "not a regular file", __LINE__);
    snprintf(url, sizeof url, "file://elsewhere%s/plain.csv", root);
    expect_fail(url, &o, -EINVAL, "bad file URL", __LINE__);
    fetch_opts small = {.file_root = root, .max_bytes = 5};
    snprintf(url, sizeof url, "file://%s/plain.csv", root);
    expect_fail(url, &small, -EFBIG, "larger than the limit of 5 bytes", __LINE__);
    fetch_opts none = {0};
    expect_fail(url, &none, -EACCES, "pass --dataset-root", __LINE__);
    expect_fail(url, NULL, -EACCES, "pass --dataset-root", __LINE__);
}

static void make_files(void)
{
    unsigned char gz[4096], gz2[512];
    size_t n = strlen(plain);
    size_t gz_len = gzip_of(plain, n, gz, sizeof gz);
    write_file(root, "plain.csv", plain, n);
    write_file(root, "empty.csv", "", 0);
    write_file(root, "data.csv.gz", gz, gz_len);
    write_file(root, "data.bin", gz, gz_len);
    write_file(root, "truncated.gz", gz, gz_len / 2);
    unsigned char trailing[4200];
    memcpy(trailing, gz, gz_len);
    memcpy(trailing + gz_len, "junk", 4);
    write_file(root, "trailing.gz", trailing, gz_len + 4);
    size_t gz2_len = gzip_of("5,6,z\n", 6, gz2, sizeof gz2);
    memcpy(gz + gz_len, gz2, gz2_len);
    write_file(root, "two.gz", gz, gz_len + gz2_len);
    unsigned char bad[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 'n', 'o', 't', ' ', 'g', 'z'};
    write_file(root, "bad.gz", bad, sizeof bad);
    static unsigned char zeros[1 << 20];
    unsigned char *bomb = malloc(1 << 16);
    CHECK(bomb != NULL);
    if (bomb) {
        write_file(root, "bomb.gz", bomb, gzip_of(zeros, sizeof zeros, bomb, 1 << 16));
        free(bomb);
    }
    write_file(tmp, "outside.csv", plain, n);
    char path[600], target[600];
    snprintf(path, sizeof path, "%s/link.csv", root);
    snprintf(target, sizeof target, "%s/outside.csv", tmp);
    CHECK_INT(symlink(target, path), 0);
    snprintf(path, sizeof path, "%s/fifo", root);
    CHECK_INT(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/sub dir", root);
    CHECK_INT(mkdir(path, 0755), 0);
    write_file(path, "inner.csv", plain, n);
    snprintf(path, sizeof path, "%s2", root);
    CHECK_INT(mkdir(path, 0755), 0);
    write_file(path, "plain.csv", plain, n);
}

/* s3:// URLs map to path-style endpoint URLs with the key encoded once; bad ones are refused. */
static void test_s3_urls(void)
{
    const struct {
        const char *url, *endpoint, *region, *want;
    } good[] = {
        {"s3://bkt/data.csv", "http://127.0.0.1:9000", NULL, "http://127.0.0.1:9000/bkt/data.csv"},
        {"s3://bkt/a/b.csv", "http://h:1//", NULL, "http://h:1/bkt/a/b.csv"},
        {"s3://my.bucket-1/k", NULL, NULL, "https://s3.us-east-1.amazonaws.com/my.bucket-1/k"},
        {"s3://bkt/k", NULL, "eu-west-3", "https://s3.eu-west-3.amazonaws.com/bkt/k"},
        {"s3://bkt/my%20file+x=y.csv", "http://h", NULL, "http://h/bkt/my%20file%2Bx%3Dy.csv"},
        {"s3://bkt/%7e~%2f_.-", "https://h/prefix", NULL, "https://h/prefix/bkt/~~/_.-"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        fetch_s3 s3 = {.endpoint = good[i].endpoint, .region = good[i].region};
        char err[ERR_LEN] = "", *url = NULL;
        int rc = fetch_s3_url(good[i].url, &s3, &url, err);
        CHECK_INT(rc, 0);
        if (rc == 0)
            CHECK_STR(url, good[i].want);
        free(url);
    }
    const struct {
        const char *url, *endpoint, *region, *want;
    } bad[] = {
        {"s3://Bkt/k", NULL, NULL, "a-z, 0-9"},
        {"s3://user:pw@bkt/k", NULL, NULL, "credentials come from"},
        {"s3://ab/k", NULL, NULL, "3 to 63"},
        {"s3://bkt", NULL, NULL, "no key"},
        {"s3://bkt/", NULL, NULL, "no key"},
        {"s3://bkt/a%zz", NULL, NULL, "%XX"},
        {"s3://bkt/a%0a", NULL, NULL, "control character"},
        {"s3://bkt/k", NULL, "us east", "not a region name"},
        {"s3://bkt/k", NULL, "us:east", "not a region name"},
        {"s3://bkt/k", "ftp://h", NULL, "not an http:// or https:// URL"},
        {"s3://bkt/k", "http://h/?x", NULL, "query or fragment"},
        {"http://bkt/k", NULL, NULL, "must start with s3://"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fetch_s3 s3 = {.endpoint = bad[i].endpoint, .region = bad[i].region};
        char err[ERR_LEN] = "", *url = (char *)"untouched";
        CHECK_INT(fetch_s3_url(bad[i].url, &s3, &url, err), -EINVAL);
        if (!strstr(err, bad[i].want)) {
            fprintf(stderr, "%s: \"%s\" does not say \"%s\"\n", bad[i].url, err, bad[i].want);
            check_failures++;
        }
        CHECK_STR(url, "untouched");
    }
}

/* The environment, then the flags over it; empty values count as unset. */
static void test_s3_env(void)
{
    const char *names[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",  "AWS_REGION",
                           "AWS_DEFAULT_REGION",  "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                           "AWS_SESSION_TOKEN"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
    fetch_s3 s3;
    fetch_s3_from_env(&s3, NULL, NULL);
    CHECK(!s3.endpoint && !s3.region && !s3.access_key && !s3.secret_key && !s3.session_token);
    setenv("AWS_ENDPOINT_URL", "http://generic", 1);
    setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
    setenv("AWS_ACCESS_KEY_ID", "AK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
    setenv("AWS_SESSION_TOKEN", "", 1);
    fetch_s3_from_env(&s3, NULL, "");
    CHECK_STR(s3.endpoint, "http://generic");
    CHECK_STR(s3.region, "eu-north-1");
    CHECK_STR(s3.access_key, "AK");
    CHECK_STR(s3.secret_key, "SK");
    CHECK(s3.session_token == NULL);
    setenv("AWS_ENDPOINT_URL_S3", "http://s3only", 1);
    setenv("AWS_REGION", "ap-south-1", 1);
    fetch_s3_from_env(&s3, NULL, NULL);
    CHECK_STR(s3.endpoint, "http://s3only");
    CHECK_STR(s3.region, "ap-south-1");
    fetch_s3_from_env(&s3, "http://flag", "us-west-2");
    CHECK_STR(s3.endpoint, "http://flag");
    CHECK_STR(s3.region, "us-west-2");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
}

/* Signed GETs against the test server's S3 (fetch_server.py checks the signature). */
static void test_s3_fetch(void)
{
    fetch_s3 s3 = {.endpoint = base, .access_key = "AKIDTEST", .secret_key = "s3cret/Key+1"};
    /* the endpoint is trusted: neither the allow list nor the private-address rule applies */
    fetch_opts o = {.s3 = &s3, .allow = "data.example.com"};
    expect_body("s3://bkt/plain.csv", &o, plain, strlen(plain), 0, __LINE__);
    expect_body("s3://bkt/sub%20dir/inner.csv", &o, plain, strlen(plain), 0, __LINE__);
    expect_body("s3://bkt/data.csv.gz", &o, plain, strlen(plain), 1, __LINE__);
    s3.region = "eu-central-1";
    expect_body("s3://bkt/plain.csv", &o, plain, strlen(plain), 0, __LINE__);

    /* conditional requests with the object's ETag */
    char err[ERR_LEN], *out = NULL, etag[FETCH_HEADER_MAX] = "";
    size_t len = 0;
    fetch_stats st;
    CHECK_INT(get("s3://bkt/plain.csv", &o, &out, &len, &st, err), 0);
    free(out);
    memcpy(etag, st.etag, sizeof etag);
    CHECK(etag[0] == '"');
    o.if_none_match = etag;
    CHECK_INT(get("s3://bkt/plain.csv", &o, &out, &len, &st, err), FETCH_NOT_MODIFIED);
    o.if_none_match = NULL;

    /* errors name the S3 code and never the secret */
    expect_fail("s3://bkt/missing.csv", &o, -ENOENT,
                "S3 error NoSuchKey (HTTP 404) for "
                "s3://bkt/missing.csv",
                __LINE__);
    expect_fail("s3://other/plain.csv", &o, -ENOENT, "NoSuchBucket", __LINE__);
    s3.secret_key = "wrong-secret";
    expect_fail("s3://bkt/plain.csv", &o, -EACCES, "SignatureDoesNotMatch", __LINE__);
    CHECK_INT(get("s3://bkt/plain.csv", &o, &out, &len, NULL, err), -EACCES);
    CHECK(strstr(err, "wrong-secret") == NULL);
    s3.access_key = "AKIDNOPE";
    expect_fail("s3://bkt/plain.csv", &o, -EACCES, "InvalidAccessKeyId", __LINE__);

    /* temporary credentials: the session token goes along, signed */
    s3.access_key = "ASIATEST";
    s3.secret_key = "tempSecret";
    expect_fail("s3://bkt/plain.csv", &o, -EACCES, "InvalidToken", __LINE__);
    s3.session_token = "tok/en+=";
    expect_body("s3://bkt/plain.csv", &o, plain, strlen(plain), 0, __LINE__);
    s3.session_token = "bad\r\ntoken";
    expect_fail("s3://bkt/plain.csv", &o, -EINVAL, "AWS_SESSION_TOKEN", __LINE__);

    /* no credentials, no S3 settings */
    s3.access_key = NULL;
    expect_fail("s3://bkt/plain.csv", &o, -EACCES, "s3:// needs credentials: set AWS_ACCESS_KEY_ID",
                __LINE__);
    o.s3 = NULL;
    expect_fail("s3://bkt/plain.csv", &o, -EACCES, "not fetched here", __LINE__);
    expect_fail("s3://bkt/plain.csv", NULL, -EACCES, "not fetched here", __LINE__);
}

/* Fetches url through cache c with o; returns how it came (enum dscache_how), or the error. */
static int cached(dscache *c, const char *url, const fetch_opts *o)
{
    char err[ERR_LEN], *out = NULL;
    size_t len = 0;
    dscache_result res;
    int rc = dscache_fetch(c, url, o, &out, &len, NULL, &res, err);
    if (rc == 0)
        CHECK(len == strlen(plain) && memcmp(out, plain, len) == 0);
    else
        fprintf(stderr, "dscache_fetch %s: %s\n", url, err);
    free(out);
    return rc < 0 ? rc : res.how;
}

/* s3:// entries: revalidated with the ETag; keyed by URL, endpoint, region and access key id,
 * not by the secret. */
static void test_s3_cache(void)
{
    char dir[400], err[ERR_LEN], other[80];
    dscache *c = NULL;
    snprintf(dir, sizeof dir, "%s/s3cache", tmp);
    CHECK_INT(dscache_open(dir, 0, &c, err), 0);
    if (!c)
        return;
    fetch_s3 s3 = {.endpoint = base, .access_key = "AKIDTEST", .secret_key = "s3cret/Key+1"};
    fetch_opts o = {.s3 = &s3};
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_FETCHED);
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_REVALIDATED);
    /* the same object through another spelling of the endpoint, or another region: its own */
    snprintf(other, sizeof other, "http://localhost:%s", strrchr(base, ':') + 1);
    s3.endpoint = other;
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_FETCHED);
    s3.endpoint = base;
    s3.region = "eu-west-1";
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_FETCHED);
    s3.region = NULL;
    /* other credentials never read what these fetched */
    s3.access_key = "ASIATEST";
    s3.secret_key = "tempSecret";
    s3.session_token = "tok/en+=";
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_FETCHED);
    /* pinned by sha256: a hit sends nothing, so even a wrong secret reads the entry the same key
     * id stored (the secret is not part of the key) */
    char sha[65];
    sha256_buf_hex(plain, strlen(plain), sha);
    o.sha256 = sha;
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_FETCHED);
    s3.secret_key = "changed";
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), DSCACHE_HIT);
    o.sha256 = NULL;
    CHECK_INT(cached(c, "s3://bkt/plain.csv", &o), -EACCES); /* revalidation is signed */
    dscache_free(c);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int main(void)
{
    char err[ERR_LEN];
    /* The server is local: keep any proxy settings of the environment out of the way. */
    setenv("NO_PROXY", "*", 1);
    setenv("no_proxy", "*", 1);
    CHECK_INT(fetch_global_init(err), 0);
    CHECK_INT(fetch_global_init(err), 0); /* idempotent */

    snprintf(tmp, sizeof tmp, "/tmp/trainyard-fetch-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(root, sizeof root, "%s/root", tmp);
    CHECK_INT(mkdir(root, 0755), 0);
    make_files();

    pid_t pid = server_start();
    CHECK(pid > 0);
    if (pid > 0) {
        test_bodies();
        test_checksums();
        test_conditional();
        test_http_errors();
        test_limits();
        test_timeouts();
        test_allow();
        test_s3_fetch();
        test_s3_cache();
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    test_files();
    test_patterns();
    test_s3_urls();
    test_s3_env();
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
