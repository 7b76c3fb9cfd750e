/* fetch: dataset downloads into memory, as promised in fetch.h.
 *
 * http and https go through one libcurl easy handle restricted to those two protocols. Redirects
 * are followed by hand, at most 5, each target's scheme and host checked against the allow list
 * before it is requested; every socket curl opens passes fetch_open_socket, which refuses
 * private addresses that no pattern allows (so a DNS answer cannot sneak one in). With a proxy
 * from the environment the socket is the proxy's: the address rule then judges the proxy (a
 * private one must be allowed by address) and only the host rule judges the target.
 * s3:// becomes a signed GET of the endpoint's path-style URL through the same function, with
 * no redirects and the S3 error code taken from the body of a failed answer (fetch_s3.c).
 * file:// never reaches curl: the path is resolved with realpath(), checked against the resolved
 * root and read directly, so that what is checked is what is read. Both paths feed the same sink,
 * which hashes the bytes as they come into a dynbuf capped at max_bytes (util/dynbuf.h); gunzip and
 * the checksum check follow. A header callback keeps the validators (ETag, Last-Modified) and Date
 * of each answer, starting afresh at each status line, so that what is left is the final answer's;
 * a conditional request answered 304 ends there.
 *
 * Invariants: the sink's bytes never pass max_bytes, and are NUL-terminated (dynbuf). */
#include "data/fetch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/err.h"
#include "util/allow.h"
#include "util/dynbuf.h"
#include "data/fetch_priv.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "util/url.h"

#define FETCH_DEFAULT_CONNECT 10
#define FETCH_DEFAULT_TOTAL   600
#define FETCH_DEFAULT_LOW     30
#define FETCH_LOW_SPEED       1024 /* bytes per second */
#define FETCH_MAX_REDIRS      5
#define FETCH_GUNZIP_CHUNK    (64u << 10) /* bytes inflated at a time */
#define FETCH_SHOWN           204         /* URL bytes in messages, with "..." and NUL */

/* Where downloaded bytes go. */
typedef struct fetch_sink {
    dynbuf b;     /* capped at max; owned until handed to the caller */
    uint64_t max; /* the most bytes, as messages show it */
    int too_big;  /* set when max would have been passed */
    int oom;
    sha256_ctx sha;
} fetch_sink;

/* Appends n bytes; 0 or -EFBIG / -ENOMEM, flagged for the messages. */
static int fetch_sink_put(fetch_sink *s, const void *data, size_t n)
{
    int rc = dynbuf_add(&s->b, data, n);
    if (rc == -EFBIG)
        s->too_big = 1;
    if (rc == -ENOMEM)
        s->oom = 1;
    if (rc < 0)
        return rc;
    sha256_update(&s->sha, data, n);
    return 0;
}

/* The headers of an answer that dscache.h revalidates with. */
typedef struct fetch_headers {
    char etag[FETCH_HEADER_MAX];
    char last_modified[FETCH_HEADER_MAX];
    char date[FETCH_HEADER_MAX];
} fetch_headers;

/* Copies the value of header line (name: value CRLF) into out when it is name, trimmed, shorter
 * than FETCH_HEADER_MAX and printable ASCII; otherwise leaves out empty. */
static void fetch_header_value(const char *line, size_t n, const char *name,
                               char out[FETCH_HEADER_MAX])
{
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    out[0] = '\0';
    if ((size_t)(end - v) >= FETCH_HEADER_MAX)
        return;
    for (const char *p = v; p < end; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return;
    memcpy(out, v, (size_t)(end - v));
    out[end - v] = '\0';
}

/* curl's header callback: one line at a time, status lines included. */
static size_t fetch_header(char *data, size_t size, size_t nmemb, void *user)
{
    fetch_headers *h = user;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        memset(h, 0, sizeof *h);
        return n;
    }
    fetch_header_value(data, n, "ETag", h->etag);
    fetch_header_value(data, n, "Last-Modified", h->last_modified);
    fetch_header_value(data, n, "Date", h->date);
    return n;
}

/* Whether v may go into a request header: printable ASCII, shorter than FETCH_HEADER_MAX. */
static int fetch_header_ok(const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return 0;
    return n > 0 && n < FETCH_HEADER_MAX;
}

/* curl's write callback: a short count aborts the transfer with CURLE_WRITE_ERROR. */
static size_t fetch_write(char *data, size_t size, size_t nmemb, void *user)
{
    size_t n = size * nmemb;
    return fetch_sink_put(user, data, n) < 0 ? 0 : n;
}

int fetch_global_init(char *err)
{
    static int done;
    if (done)
        return 0;
    CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (c != CURLE_OK)
        return err_set(err, -EIO, "libcurl failed to initialise: %s", curl_easy_strerror(c));
    done = 1;
    return 0;
}

static void fetch_shown_url(const char *url, char shown[FETCH_SHOWN]);

/* What the socket callback needs to judge an address. */
typedef struct fetch_guard {
    const allow_list *allow;
    int allow_private;
    char host[256];            /* host of the URL being fetched now */
    int refused;               /* set when an address was turned away */
    char addr[ALLOW_ADDR_LEN]; /* the last one turned away */
} fetch_guard;

/* curl's open-socket callback: runs for every address curl is about to connect to, after DNS,
 * for the first URL and for redirects alike. CURL_SOCKET_BAD makes curl skip the address. */
static curl_socket_t fetch_open_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a)
{
    fetch_guard *g = user;
    (void)purpose;
    if (!g->allow_private && allow_addr_is_private(&a->addr) &&
        !allow_list_match_addr(g->allow, &a->addr) && !allow_list_match_host(g->allow, g->host)) {
        g->refused = 1;
        allow_addr_str(&a->addr, g->addr);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

/* Checks that url (the first one or a redirect target) is http(s) and that its host is in the
 * allow list when there is one; copies the host into g->host. */
static int fetch_check_url(const char *url, const char *first, fetch_guard *g, char *err)
{
    char shown[FETCH_SHOWN], *scheme = NULL, *host = NULL;
    int rc = 0;
    fetch_shown_url(url, shown);
    CURLU *u = curl_url();
    if (!u)
        return err_set(err, -ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        rc = first ? err_set(err, -EIO, "%s redirected to a bad URL %s", first, shown)
                   : err_set(err, -EINVAL, "bad URL %s", shown);
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        rc = err_set(err, -EACCES,
                     "%s redirected to a URL that is not http or https, which is refused: %s",
                     first ? first : shown, shown);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        rc = first ? err_set(err, -EIO, "%s redirected to a URL without a host: %s", first, shown)
                   : err_set(err, -EINVAL, "bad URL %s: no host", shown);
        goto out;
    }
    /* IPv6 literals come back in brackets; messages and patterns write them without. */
    size_t hn = strlen(host);
    if (hn >= 2 && host[0] == '[' && host[hn - 1] == ']')
        snprintf(g->host, sizeof g->host, "%.*s", (int)(hn - 2), host + 1);
    else
        snprintf(g->host, sizeof g->host, "%s", host);
    if (g->allow->n > 0 && !allow_list_match_host(g->allow, g->host)) {
        rc = err_set(err, -EACCES,
                     "%s%s%s: host %s is not in --dataset-allow; add it (--dataset-allow %s) "
                     "or use a listed host",
                     first ? first : "", first ? " redirected to " : "", shown, g->host, g->host);
        goto out;
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

/* Maps a failed transfer of the URL shown as shown to a code and message. */
static int fetch_http_error(CURL *h, CURLcode c, const char *cerr, const char *shown,
                            const fetch_guard *g, const fetch_sink *s, long connect, long total,
                            long low, char *err)
{
    const char *why = cerr[0] ? cerr : curl_easy_strerror(c);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (g->refused && (c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST))
        return err_set(err, -EACCES,
                       "%s: host %s resolves to a private address %s, which is refused; allow it "
                       "with --dataset-allow %s (or the address, or its CIDR block)",
                       shown, g->host, g->addr, g->host);
    switch (c) {
    case CURLE_HTTP_RETURNED_ERROR:
        return err_set(err, -EIO, "HTTP %ld from %s", status, shown);
    case CURLE_FILESIZE_EXCEEDED:
        return err_set(err, -EFBIG, "%s is larger than the limit of %llu bytes", shown,
                       (unsigned long long)s->max);
    case CURLE_WRITE_ERROR:
        if (s->too_big)
            return err_set(err, -EFBIG, "%s is larger than the limit of %llu bytes", shown,
                           (unsigned long long)s->max);
        if (s->oom)
            return err_set(err, -ENOMEM, "out of memory after %zu bytes of %s", dynbuf_len(&s->b),
                           shown);
        return err_set(err, -EIO, "downloading %s: %s", shown, why);
    case CURLE_OPERATION_TIMEDOUT:
        return err_set(err, -ETIMEDOUT,
                       "downloading %s timed out (connect %lds, total %lds, below %d B/s for "
                       "%lds): %s",
                       shown, connect, total, FETCH_LOW_SPEED, low, why);
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return err_set(err, -EINVAL, "bad URL %s: %s", shown, why);
    case CURLE_OUT_OF_MEMORY:
        return err_set(err, -ENOMEM, "out of memory downloading %s", shown);
    case CURLE_PEER_FAILED_VERIFICATION:
        return err_set(err, -EKEYREJECTED,
                       "%s: the host's certificate failed verification (%s); if a private CA "
                       "signed it, give that CA's certificate with --dataset-ca FILE",
                       shown, why);
    case CURLE_SSL_CACERT_BADFILE:
        return err_set(err, -EKEYREJECTED, "%s: cannot use the dataset CA file: %s", shown, why);
    case CURLE_ABORTED_BY_CALLBACK:
        return err_set(err, -EINTR, "downloading %s: stopped (the worker is stopping)", shown);
    default:
        return err_set(err, -EIO, "downloading %s: %s", shown, why);
    }
}

/* curl's progress callback: nonzero (the stop flag is set) aborts the transfer. */
static int fetch_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                          curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    volatile sig_atomic_t *stop = user;
    return *stop != 0;
}

/* The conditional request's headers (NULL when neither is set) into *list; 0 or -EINVAL. */
static int fetch_conditional(const fetch_opts *o, struct curl_slist **list, char *err)
{
    const struct {
        const char *name, *value;
    } cond[] = {{"If-None-Match", o->if_none_match}, {"If-Modified-Since", o->if_modified_since}};
    char line[FETCH_HEADER_MAX + 32];
    for (size_t i = 0; i < sizeof cond / sizeof cond[0]; i++) {
        if (!cond[i].value)
            continue;
        if (!fetch_header_ok(cond[i].value))
            return err_set(err, -EINVAL, "%s must be printable ASCII of 1 to %d bytes",
                           cond[i].name, FETCH_HEADER_MAX - 1);
        snprintf(line, sizeof line, "%s: %s", cond[i].name, cond[i].value);
        struct curl_slist *more = curl_slist_append(*list, line);
        if (!more)
            return err_set(err, -ENOMEM, "out of memory");
        *list = more;
    }
    return 0;
}

/* Downloads an http(s) URL into the sink; messages show the URL as shown. Redirects are
 * followed here rather than by curl, so that each target's scheme and host are checked before
 * anything is sent to it; the sink is emptied between hops (a redirect's own body is not data).
 * The conditional headers go with every hop; a final 304 returns FETCH_NOT_MODIFIED. With s3
 * (the URL is then an S3 endpoint's) the request is signed, redirects and error answers end the
 * fetch with the S3 error, and the host and address rules do not apply (fetch.h). */
static int fetch_http(const char *url, const char *shown, const fetch_opts *o,
                      const allow_list *allow, const fetch_s3 *s3, fetch_sink *s, fetch_headers *hd,
                      char *err)
{
    static const allow_list anyone;
    char cerr[CURL_ERROR_SIZE] = "", hop_shown[FETCH_SHOWN], sigv4[64];
    char *cur = NULL;
    /* the S3 endpoint's host is the operator's choice: no host or address rule for it */
    fetch_guard g = {.allow = s3 ? &anyone : allow, .allow_private = s3 ? 1 : o->allow_private};
    struct curl_slist *hdrs = NULL;
    int rc = 0;
    CURL *h = curl_easy_init();
    if (!h)
        return err_set(err, -ENOMEM, "could not create a curl handle");
    rc = fetch_conditional(o, &hdrs, err);
    if (rc == 0 && s3)
        rc = fetch_s3_headers(s3, &hdrs, err);
    if (rc < 0)
        goto out;
    long connect = o->connect_timeout_s > 0 ? o->connect_timeout_s : FETCH_DEFAULT_CONNECT;
    long total = o->total_timeout_s > 0 ? o->total_timeout_s : FETCH_DEFAULT_TOTAL;
    long low = o->low_speed_timeout_s > 0 ? o->low_speed_timeout_s : FETCH_DEFAULT_LOW;

#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, connect);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, total);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)FETCH_LOW_SPEED);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, low);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->max);
    /* S3 errors carry their code in the body, which FAILONERROR would throw away */
    curl_easy_setopt(h, CURLOPT_FAILONERROR, s3 ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trainyard/" TRAINYARD_VERSION);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fetch_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, fetch_open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &g);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, fetch_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, hd);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (o->ca_file) {
        /* this bundle alone: Debian's libcurl would also read /etc/ssl/certs */
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca_file);
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (s3) {
        snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", fetch_s3_region(s3));
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, s3->access_key);
        curl_easy_setopt(h, CURLOPT_PASSWORD, s3->secret_key);
        curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* the path signed is the path sent */
    }
    if (o->stop) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, fetch_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)o->stop);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }

    cur = strdup(url);
    if (!cur) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    snprintf(hop_shown, sizeof hop_shown, "%s", shown);
    for (int hop = 0;; hop++) {
        rc = fetch_check_url(cur, hop ? shown : NULL, &g, err);
        if (rc < 0)
            goto out;
        dynbuf_reset(&s->b);
        s->too_big = 0;
        sha256_init(&s->sha);
        cerr[0] = '\0';
        g.refused = 0;
        curl_easy_setopt(h, CURLOPT_URL, cur);
        CURLcode c = curl_easy_perform(h);
        if (c != CURLE_OK) {
            rc = fetch_http_error(h, c, cerr, hop_shown, &g, s, connect, total, low, err);
            goto out;
        }
        long status = 0;
        char *next = NULL;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &next);
        if (status == 304 && (o->if_none_match || o->if_modified_since)) {
            rc = FETCH_NOT_MODIFIED;
            goto out;
        }
        if (s3 && status >= 300) { /* a signed request is never sent on to another host */
            rc = fetch_s3_error(status, dynbuf_str(&s->b), dynbuf_len(&s->b), hop_shown, err);
            goto out;
        }
        if (status < 300 || status > 399 || !next)
            break;
        if (hop == FETCH_MAX_REDIRS) {
            rc = err_set(err, -EIO, "%s redirected more than %d times", shown, FETCH_MAX_REDIRS);
            goto out;
        }
        char *copy = strdup(next); /* next belongs to h and changes with the next request */
        if (!copy) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        free(cur);
        cur = copy;
        fetch_shown_url(cur, hop_shown);
    }
out:
    free(cur);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return rc;
}

/* Fetches an s3:// URL with o->s3's endpoint and credentials (fetch.h, fetch_s3.c). */
static int fetch_s3_get(const char *url, const char *shown, const fetch_opts *o, fetch_sink *s,
                        fetch_headers *hd, char *err)
{
    const fetch_s3 *s3 = o->s3;
    char *http_url = NULL;
    if (!s3)
        return err_set(err, -EACCES, "%s: s3:// URLs are not fetched here", shown);
    if (!s3->access_key || !*s3->access_key || !s3->secret_key || !*s3->secret_key)
        return err_set(err, -EACCES,
                       "%s: s3:// needs credentials: set AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones) in the "
                       "environment of the worker (or of serve, which hands it to its local "
                       "workers)",
                       shown);
    int rc = fetch_s3_url(url, s3, &http_url, err);
    if (rc == 0)
        rc = fetch_global_init(err);
    if (rc == 0)
        rc = fetch_http(http_url, shown, o, NULL, s3, s, hd, err);
    free(http_url);
    return rc;
}

/* Decodes the path of a file:// URL into *path (malloc'd). Only an empty host or localhost. */
static int fetch_file_path(const char *url, const char *shown, char **path, char *err)
{
    char *host = NULL, *p = NULL;
    int rc = 0;
    CURLU *u = curl_url();
    if (!u)
        return err_set(err, -ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        rc = err_set(err, -EINVAL, "bad file URL %s; write local files as file:///path", shown);
        goto out;
    }
    /* A missing host is fine: file:///path. */
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    if (host && host[0] != '\0' && strcasecmp(host, "localhost") != 0) {
        rc = err_set(err, -EINVAL, "file URL %s names host '%s'; only local files can be read",
                     shown, host);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_PATH, &p, CURLU_URLDECODE) != CURLUE_OK || !p) {
        rc = err_set(err, -EINVAL, "file URL %s has no usable path", shown);
        goto out;
    }
    *path = strdup(p);
    if (!*path)
        rc = err_set(err, -ENOMEM, "out of memory");
out:
    curl_free(host);
    curl_free(p);
    curl_url_cleanup(u);
    return rc;
}

/* Whether path names dir itself or something under it; trailing slashes of dir are ignored. */
static int fetch_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 0 && dir[n - 1] == '/')
        n--;
    if (n == 0)
        return path[0] == '/'; /* dir is "/" */
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* Reads a file:// URL under file_root into the sink. The path is first checked as written (so
 * that nothing outside the root is even looked up), then again once symlinks are resolved. */
static int fetch_file(const char *url, const char *shown, const fetch_opts *o, fetch_sink *s,
                      char *err)
{
    char *path = NULL, *real = NULL, *root = NULL;
    int fd = -1, rc;
    if (!o->file_root) {
        return err_set(err, -EACCES,
                       "file:// URLs are turned off; pass --dataset-root DIR to allow reading "
                       "files under DIR");
    }
    rc = fetch_file_path(url, shown, &path, err);
    if (rc < 0)
        goto out;
    root = realpath(o->file_root, NULL);
    if (!root) {
        rc = err_set(err, -errno, "dataset root %s: %s", o->file_root, strerror(errno));
        goto out;
    }
    if (!fetch_under(path, root) && !fetch_under(path, o->file_root)) {
        rc = err_set(err, -EACCES,
                     "%s is outside the dataset root %s; move it under the root or pass a "
                     "different --dataset-root",
                     path, root);
        goto out;
    }
    real = realpath(path, NULL);
    if (!real) {
        rc = err_set(err, -errno, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!fetch_under(real, root)) {
        rc = err_set(err, -EACCES,
                     "%s is outside the dataset root %s; move it under the root or pass a "
                     "different --dataset-root",
                     path, root);
        goto out;
    }
    /* real has no symlinks left; O_NOFOLLOW keeps a swapped-in last one out, and O_NONBLOCK
     * keeps a FIFO from blocking before fstat turns it away. */
    fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        rc = err_set(err, -errno, "%s: %s", real, strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = err_set(err, -EINVAL, "%s is not a regular file", real);
        goto out;
    }
    if ((uint64_t)st.st_size > s->max) {
        rc = err_set(err, -EFBIG, "%s is larger than the limit of %llu bytes", real,
                     (unsigned long long)s->max);
        goto out;
    }
    char chunk[1 << 16];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = err_set(err, -EIO, "reading %s: %s", real, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        rc = fetch_sink_put(s, chunk, (size_t)n);
        if (rc == -EFBIG) {
            rc = err_set(err, rc, "%s is larger than the limit of %llu bytes", real,
                         (unsigned long long)s->max);
            goto out;
        }
        if (rc < 0) {
            rc = err_set(err, rc, "out of memory reading %s", real);
            goto out;
        }
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(path);
    free(real);
    free(root);
    return rc;
}

/* Gunzips in[0..in_len) (one or more concatenated members) into a malloc'd, NUL-terminated
 * *out of at most max bytes. */
static int fetch_gunzip(const char *in, size_t in_len, uint64_t max, const char *shown, char **out,
                        size_t *out_len, char *err)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return err_set(err, -ENOMEM, "could not start gunzip");
    dynbuf b;
    dynbuf_init(&b, (size_t)max);
    char chunk[FETCH_GUNZIP_CHUNK];
    size_t used_in = 0;
    int rc = 0;
    for (;;) {
        /* zlib counts in uInt; feed at most 1 GiB at a time. */
        size_t in_left = in_len - used_in;
        z.next_in = (Bytef *)(in + used_in);
        z.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
        z.next_out = (Bytef *)chunk;
        z.avail_out = (uInt)sizeof chunk;
        uInt avail_in = z.avail_in;
        int zr = inflate(&z, Z_NO_FLUSH);
        used_in += avail_in - z.avail_in;
        rc = dynbuf_add(&b, chunk, sizeof chunk - z.avail_out);
        if (rc == -EFBIG) {
            rc = err_set(err, -EFBIG, "%s is larger than the limit of %llu bytes once decompressed",
                         shown, (unsigned long long)max);
            goto out;
        }
        if (rc < 0) {
            rc = err_set(err, -ENOMEM, "out of memory for gunzip");
            goto out;
        }
        if (zr == Z_STREAM_END) {
            if (used_in == in_len)
                break;
            /* Another member follows; anything else after a member is corruption. */
            if (in_len - used_in < 2 || (unsigned char)in[used_in] != 0x1f ||
                (unsigned char)in[used_in + 1] != 0x8b) {
                rc = err_set(err, -EBADMSG,
                             "corrupt gzip data from %s: %zu unexpected bytes after the "
                             "compressed data",
                             shown, in_len - used_in);
                goto out;
            }
            inflateReset(&z);
            continue;
        }
        if (zr == Z_OK)
            continue;
        if (zr == Z_BUF_ERROR && z.avail_out == 0)
            continue; /* the chunk was full: go on */
        if (zr == Z_BUF_ERROR) {
            rc = err_set(err, -EBADMSG, "corrupt gzip data from %s: it ends before the stream does",
                         shown);
            goto out;
        }
        if (zr == Z_MEM_ERROR) {
            rc = err_set(err, -ENOMEM, "out of memory for gunzip");
            goto out;
        }
        rc = err_set(err, -EBADMSG, "corrupt gzip data from %s: %s", shown,
                     z.msg ? z.msg : "inflate failed");
        goto out;
    }
    *out = dynbuf_take(&b, out_len);
    if (!*out)
        rc = err_set(err, -ENOMEM, "out of memory for gunzip");
out:
    inflateEnd(&z);
    dynbuf_free(&b);
    return rc;
}

/* Writes url as messages show it into shown[FETCH_SHOWN]: without user:password@, query or
 * fragment (signed URLs carry secrets there), and at most 200 bytes. */
static void fetch_shown_url(const char *url, char shown[FETCH_SHOWN])
{
    size_t n = 0, at, len;
    const char *p = url;
    if (url_userinfo_span(url, &at, &len)) {
        n = at > 16 ? 16 : at;
        memcpy(shown, url, n);
        p = url + at + len + 1;
    }
    while (*p && *p != '?' && *p != '#' && n < FETCH_SHOWN - 4) {
        unsigned char c = (unsigned char)*p++;
        shown[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (*p && *p != '?' && *p != '#') {
        memcpy(shown + n, "...", 4);
        return;
    }
    shown[n] = '\0';
}

/* Checks and lowercases a hex digest into want[65]. */
static int fetch_parse_sha256(const char *hex, char want[65], char *err)
{
    size_t n = strlen(hex);
    if (n != 64)
        return err_set(err, -EINVAL, "the expected sha256 must be 64 hex digits, not %zu", n);
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)hex[i]))
            return err_set(err, -EINVAL, "the expected sha256 has a non-hex character at %zu",
                           i + 1);
        want[i] = (char)tolower((unsigned char)hex[i]);
    }
    want[64] = '\0';
    return 0;
}

int fetch_url(const char *url, const fetch_opts *opts, char **out, size_t *len, fetch_stats *stats,
              char *err)
{
    static const fetch_opts none;
    const fetch_opts *o = opts ? opts : &none;
    fetch_sink s;
    char *buf = NULL, want[65], got[65], shown[FETCH_SHOWN];
    uint8_t digest[32];
    allow_list allow = {0};
    fetch_headers hd = {0};
    double t0 = time_mono();
    int rc;

    size_t len_got;

    memset(&s, 0, sizeof s);
    s.max = o->max_bytes ? o->max_bytes : FETCH_DEFAULT_MAX_BYTES;
    if (s.max > SIZE_MAX - 2)
        s.max = SIZE_MAX - 2;
    dynbuf_init(&s.b, (size_t)s.max);
    sha256_init(&s.sha);
    if (!url) {
        rc = err_set(err, -EINVAL, "no URL given");
        goto out;
    }
    fetch_shown_url(url, shown);
    if (o->sha256) {
        rc = fetch_parse_sha256(o->sha256, want, err);
        if (rc < 0)
            goto out;
    }
    rc = allow_list_parse(o->allow, &allow, err);
    if (rc < 0)
        goto out;
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        rc = fetch_global_init(err);
        if (rc < 0)
            goto out;
        rc = fetch_http(url, shown, o, &allow, NULL, &s, &hd, err);
    } else if (strncasecmp(url, "file://", 7) == 0) {
        rc = fetch_file(url, shown, o, &s, err);
    } else if (strncmp(url, "s3://", 5) == 0) {
        rc = fetch_s3_get(url, shown, o, &s, &hd, err);
    } else {
        rc = err_set(err, -EINVAL, "unsupported URL '%s': use http://, https://, file:// or s3://",
                     shown);
    }
    if (rc < 0)
        goto out;
    if (rc == FETCH_NOT_MODIFIED) {
        if (stats) { /* a 304 has no body: the stats describe the answer */
            memset(stats, 0, sizeof *stats);
            sha256_init(&s.sha);
            sha256_final(&s.sha, digest);
            sha256_hex(digest, stats->sha256);
            stats->seconds = time_mono() - t0;
            memcpy(stats->etag, hd.etag, sizeof hd.etag);
            memcpy(stats->last_modified, hd.last_modified, sizeof hd.last_modified);
            memcpy(stats->date, hd.date, sizeof hd.date);
        }
        goto out; /* rc stays FETCH_NOT_MODIFIED; *out and *len untouched */
    }
    buf = dynbuf_take(&s.b, &len_got); /* NUL-terminated */
    if (!buf) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }

    sha256_final(&s.sha, digest);
    sha256_hex(digest, got);
    if (o->sha256 && strcmp(got, want) != 0) {
        rc = err_set(err, -EBADMSG, "checksum mismatch for %s: expected sha256 %s, got %s", shown,
                     want, got);
        goto out;
    }

    uint64_t downloaded = len_got;
    int was_gzip = len_got >= 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b;
    if (was_gzip && !o->keep_gzip) {
        char *plain = NULL;
        size_t plain_len = 0;
        rc = fetch_gunzip(buf, len_got, s.max, shown, &plain, &plain_len, err);
        if (rc < 0)
            goto out;
        free(buf);
        buf = plain;
        len_got = plain_len;
    }
    if (stats) {
        stats->downloaded = downloaded;
        stats->decompressed = len_got;
        stats->was_gzip = was_gzip;
        stats->seconds = time_mono() - t0;
        memcpy(stats->sha256, got, sizeof stats->sha256);
        memcpy(stats->etag, hd.etag, sizeof hd.etag);
        memcpy(stats->last_modified, hd.last_modified, sizeof hd.last_modified);
        memcpy(stats->date, hd.date, sizeof hd.date);
    }
    *out = buf;
    *len = len_got;
    buf = NULL;
    rc = 0;
out:
    allow_list_free(&allow);
    dynbuf_free(&s.b);
    free(buf);
    return rc;
}
