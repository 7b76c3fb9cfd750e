/* client: requests to a trainyard server with libcurl (see client.h). Answers are read into a
 * growing buffer capped at CLIENT_MAX_REPLY (API answers are small JSON; artifacts go through
 * client_download, which streams to a file, and streams through client_get_stream, which hands
 * the body to the caller as it arrives and keeps only an error answer's body). */
#include "client/client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/dynbuf.h"
#include "util/err.h"
#include "util/json_out.h"

#define CLIENT_MAX_REPLY (8u << 20)

struct client {
    CURL *curl;
    char *base;
    char auth[512];
    char cerr[CURL_ERROR_SIZE]; /* curl's own sentence for the last failure */
    long timeout_s;
    volatile sig_atomic_t *abort_flag;
    char next[512]; /* a header line for the next request only (client_next_header) */
};

typedef struct reply_buf {
    dynbuf body; /* capped at CLIENT_MAX_REPLY (reply_buf_init) */
    int too_big;
} reply_buf;

static void reply_buf_init(reply_buf *b)
{
    dynbuf_init(&b->body, CLIENT_MAX_REPLY);
    b->too_big = 0;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *user)
{
    reply_buf *b = user;
    size_t add = size * n;
    int rc = dynbuf_add(&b->body, ptr, add);
    if (rc == -EFBIG)
        b->too_big = 1;
    return rc < 0 ? 0 : add; /* a short count ends the transfer */
}

int client_new(const char *base_url, const char *token, client **out, char *err)
{
    client *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(err, -ENOMEM, "out of memory");
    c->curl = curl_easy_init();
    c->base = strdup(base_url);
    if (!c->curl || !c->base) {
        client_free(c);
        return err_set(err, -ENOMEM, "cannot create an HTTP client");
    }
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/')
        c->base[--n] = '\0';
    if (token)
        snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", token);
    c->timeout_s = 120;
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->cerr);
    *out = c;
    return 0;
}

void client_set_ca(client *c, const char *ca_file, int pinned)
{
    if (!ca_file)
        return;
    /* Exactly this bundle: Debian's libcurl also reads /etc/ssl/certs unless told not to. */
    curl_easy_setopt(c->curl, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(c->curl, CURLOPT_CAPATH, NULL);
    /* Pinned: the file is the server's own leaf certificate, the only trust anchor (OpenSSL
     * accepts a non-self-signed anchor: curl sets X509_V_FLAG_PARTIAL_CHAIN), so the chain
     * proves the peer holds that certificate's key whatever name it carries. Only then is the
     * name not checked; with a CA bundle it always is. */
    curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, pinned ? 0L : 2L);
}

void client_free(client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base);
    free(c);
}

void client_set_timeout(client *c, long timeout_s)
{
    c->timeout_s = timeout_s;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    const client *c = user;
    return c->abort_flag && *c->abort_flag; /* nonzero aborts the transfer */
}

void client_set_abort(client *c, volatile sig_atomic_t *flag)
{
    c->abort_flag = flag;
    curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, flag ? on_progress : NULL);
    curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
    curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, flag ? 0L : 1L);
}

static int curl_failure(const client *c, CURLcode cc, const char *url, char *err)
{
    int code = cc == CURLE_ABORTED_BY_CALLBACK  ? -EINTR
               : cc == CURLE_COULDNT_CONNECT    ? -ECONNREFUSED
               : cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                                                : -EIO;
    const char *why = c->cerr[0] ? c->cerr : curl_easy_strerror(cc);
    if (cc == CURLE_PEER_FAILED_VERIFICATION)
        return err_set(err, -EKEYREJECTED,
                       "%s: the server's certificate failed verification (%s); if a private CA "
                       "signed it, give that CA's certificate with --ca FILE",
                       url, why);
    if (cc == CURLE_SSL_CACERT_BADFILE)
        return err_set(err, -EKEYREJECTED, "%s: cannot use the CA file: %s", url, why);
    return err_set(err, code, "%s: %s", url, why);
}

/* The URL of path into url, and the headers every request carries (the token, a line from
 * client_next_header, which is used up) added to *headers. On failure *headers is freed. */
static int request_start(client *c, const char *path, char url[4096], struct curl_slist **headers,
                         char *err)
{
    if ((size_t)snprintf(url, 4096, "%s%s", c->base, path) >= 4096) {
        curl_slist_free_all(*headers);
        *headers = NULL;
        return err_set(err, -EINVAL, "URL too long: %s%s", c->base, path);
    }
    if (*c->auth)
        *headers = curl_slist_append(*headers, c->auth);
    if (*c->next)
        *headers = curl_slist_append(*headers, c->next);
    c->next[0] = '\0';
    return 0;
}

/* Performs one request on the prepared handle; fills status and a parsed JSON reply. */
static int perform(client *c, const char *method, const char *path, struct curl_slist *headers,
                   long *status, json_t **reply, char *err)
{
    char url[4096];
    reply_buf b;
    reply_buf_init(&b);
    int rc = request_start(c, path, url, &headers, err);
    if (rc < 0)
        return rc;
    CURL *h = c->curl;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trainyard/" TRAINYARD_VERSION);
    c->cerr[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        rc = b.too_big ? err_set(err, -EFBIG, "%s: the answer is larger than %u bytes", url,
                                 CLIENT_MAX_REPLY)
                       : curl_failure(c, cc, url, err);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (reply) {
        *reply = NULL;
        if (dynbuf_len(&b.body) > 0) /* NULL when not JSON */
            *reply = json_loadb(dynbuf_str(&b.body), dynbuf_len(&b.body), 0, NULL);
    }
out:
    /* Leave the handle clean for the next request: no body, no upload. */
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, -1L);
    curl_easy_setopt(h, CURLOPT_UPLOAD, 0L);
    curl_easy_setopt(h, CURLOPT_READDATA, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    curl_slist_free_all(headers);
    dynbuf_free(&b.body);
    return rc;
}

int client_get_json(client *c, const char *path, long *status, json_t **reply, char *err)
{
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    return perform(c, "GET", path, NULL, status, reply, err);
}

int client_delete(client *c, const char *path, long *status, json_t **reply, char *err)
{
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L); /* no body; the method is set by perform */
    return perform(c, "DELETE", path, NULL, status, reply, err);
}

int client_post_json(client *c, const char *path, const json_t *body, long *status, json_t **reply,
                     char *err)
{
    char *text = body ? json_out_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return err_set(err, -ENOMEM, "out of memory encoding a request");
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text ? text : "");
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)(text ? strlen(text) : 0));
    int rc = perform(c, "POST", path, headers, status, reply, err);
    free(text);
    return rc;
}

/* Sends file as the body of method (PUT, POST) with content_type. */
static int send_file(client *c, const char *method, const char *path, const char *file,
                     const char *content_type, long *status, json_t **reply, char *err)
{
    FILE *f = fopen(file, "rb");
    struct stat st;
    if (!f)
        return err_set(err, -errno, "cannot open %s: %s", file, strerror(errno));
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return err_set(err, -errno, "cannot stat %s: %s", file, strerror(errno));
    }
    struct curl_slist *headers = NULL;
    char type[128];
    snprintf(type, sizeof type, "Content-Type: %s", content_type);
    headers = curl_slist_append(headers, type);
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, f);
    curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
    int rc = perform(c, method, path, headers, status, reply, err);
    fclose(f);
    return rc;
}

int client_put_file(client *c, const char *path, const char *file, long *status, json_t **reply,
                    char *err)
{
    return send_file(c, "PUT", path, file, "application/octet-stream", status, reply, err);
}

int client_post_file(client *c, const char *path, const char *file, const char *content_type,
                     long *status, json_t **reply, char *err)
{
    return send_file(c, "POST", path, file, content_type, status, reply, err);
}

int client_download(client *c, const char *path, const char *file, long *status, char *err)
{
    char url[4096];
    if ((size_t)snprintf(url, sizeof url, "%s%s", c->base, path) >= sizeof url)
        return err_set(err, -EINVAL, "URL too long");
    FILE *f = fopen(file, "wb");
    if (!f)
        return err_set(err, -errno, "cannot write %s: %s", file, strerror(errno));
    struct curl_slist *headers = NULL;
    if (*c->auth)
        headers = curl_slist_append(headers, c->auth);
    CURL *h = c->curl;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, NULL); /* fwrite */
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 0L);
    c->cerr[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    if (cc != CURLE_OK)
        rc = curl_failure(c, cc, url, err);
    else
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    if (fclose(f) != 0 && rc == 0)
        rc = err_set(err, -EIO, "writing %s failed", file);
    return rc;
}

void client_next_header(client *c, const char *line)
{
    snprintf(c->next, sizeof c->next, "%s", line);
}

typedef struct stream_state {
    client *c;
    client_sink sink;
    void *ctx;
    long status;   /* read once the first piece of the body arrives */
    int stopped;   /* sink's nonzero answer */
    reply_buf bad; /* the body of a non-2xx answer */
} stream_state;

static size_t on_stream(char *ptr, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    if (s->status == 0)
        curl_easy_getinfo(s->c->curl, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status > 299)
        return on_data(ptr, size, n, &s->bad);
    int r = s->sink(s->ctx, s->status, ptr, size * n);
    if (r != 0) {
        s->stopped = r;
        return 0; /* short count: curl ends the transfer */
    }
    return size * n;
}

int client_get_stream(client *c, const char *path, client_sink sink, void *ctx, long *status,
                      json_t **reply, char *err)
{
    char url[4096];
    stream_state s = {.c = c, .sink = sink, .ctx = ctx};
    struct curl_slist *headers = NULL;
    reply_buf_init(&s.bad);
    int rc = request_start(c, path, url, &headers, err);
    if (rc < 0)
        return rc;
    CURL *h = c->curl;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trainyard/" TRAINYARD_VERSION);
    c->cerr[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    if (s.stopped < 0) {
        rc = err_set(err, s.stopped, "%s: the transfer stopped", url);
        goto out;
    }
    if (cc != CURLE_OK && !s.stopped) {
        rc = curl_failure(c, cc, url, err);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (reply) {
        *reply = NULL;
        if (dynbuf_len(&s.bad.body) > 0)
            *reply = json_loadb(dynbuf_str(&s.bad.body), dynbuf_len(&s.bad.body), 0, NULL);
    }
out:
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    dynbuf_free(&s.bad.body);
    return rc;
}

void client_problem(long status, const json_t *reply, char *out, size_t cap)
{
    const char *title = json_string_value(json_object_get(reply, "title"));
    const char *detail = json_string_value(json_object_get(reply, "detail"));
    int n = snprintf(out, cap, "%ld %s", status, title ? title : "error");
    if (detail && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, ": %s", detail);
    const json_t *errs = json_object_get(reply, "errors");
    size_t i;
    const json_t *e;
    json_array_foreach (errs, i, e) {
        if (n < 0 || (size_t)n >= cap)
            break;
        n += snprintf(out + n, cap - (size_t)n, "%s %s: %s", i ? ";" : " —",
                      json_string_value(json_object_get(e, "field")),
                      json_string_value(json_object_get(e, "message")));
    }
}
