/* http_reply: answers — JSON, bytes, empty, problem+json through the error table — and
 * http_body_json, which answers its own refusals.
 *
 * Every answer goes through http_queue(): the headers the handler added, then the response is
 * queued on the connection and our reference dropped. At most one answer per handler call; a
 * second is refused (-EALREADY) and logged. problem+json bodies are {type, title, status,
 * detail?, errors?}; every string in them is made valid UTF-8 first (jansson refuses anything
 * else), so a detail that echoes a client's bytes cannot turn an answer into a failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_error.h"
#include "http/http.h"
#include "http/http_priv.h"
#include "util/json_depth.h"
#include "util/json_out.h"
#include "util/utf8.h"

#define HTTP_DETAIL_MAX 1024 /* bytes of a problem's detail or message kept */

static int ctype_is_json(const char *ct)
{
    size_t n = strlen("application/json");

    if (!ct)
        return 0;
    ct += strspn(ct, " \t");
    return strncasecmp(ct, "application/json", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

int http_body_is_json(const http_req *r)
{
    return ctype_is_json(http_header(r, "Content-Type"));
}

int http_body_json(http_req *r, json_t **out)
{
    size_t len;
    const char *body = http_body(r, &len);
    json_error_t jerr;
    json_t *doc;
    char detail[300];
    unsigned max_depth = r->s->cfg.json_max_depth ? r->s->cfg.json_max_depth : HTTP_JSON_MAX_DEPTH;

    if (!ctype_is_json(http_header(r, "Content-Type"))) {
        http_reply_problem(
            r, 415, NULL, "the body must be JSON, sent as Content-Type: application/json", NULL, 0);
        return -EMEDIUMTYPE;
    }
    if (json_text_depth(body, len, max_depth) > max_depth) {
        snprintf(detail, sizeof(detail), "the JSON is nested more than %u levels deep", max_depth);
        http_reply_problem(r, 400, NULL, detail, NULL, 0);
        return -EINVAL;
    }
    doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        snprintf(detail, sizeof(detail), "invalid JSON at line %d, column %d: %s", jerr.line,
                 jerr.column, jerr.text);
        http_reply_problem(r, 400, NULL, detail, NULL, 0);
        return -EINVAL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        http_reply_problem(r, 400, NULL, "the body must be a JSON object", NULL, 0);
        return -EINVAL;
    }
    *out = doc;
    return 0;
}

/* ---- answers -------------------------------------------------------------------------------- */

static int token_char(unsigned char c)
{
    return c > 0x20 && c < 0x7F && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

int http_header_add(http_req *r, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);

    if (nl == 0 || nl > 64 || vl > 4096)
        return -EINVAL;
    for (size_t i = 0; i < nl; i++)
        if (!token_char((unsigned char)name[i]))
            return -EINVAL;
    for (size_t i = 0; i < vl; i++)
        if (((unsigned char)value[i] < 0x20 && value[i] != '\t') || value[i] == 0x7F)
            return -EINVAL;
    if (r->n_headers >= HTTP_MAX_HEADERS)
        return -E2BIG;
    r->headers[r->n_headers].name = strdup(name);
    r->headers[r->n_headers].value = strdup(value);
    if (!r->headers[r->n_headers].name || !r->headers[r->n_headers].value) {
        free(r->headers[r->n_headers].name);
        free(r->headers[r->n_headers].value);
        return -ENOMEM;
    }
    r->n_headers++;
    return 0;
}

static int header_added(const http_req *r, const char *name)
{
    for (int i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return 1;
    return 0;
}

/* Whether an answer may be made now; logs the bug when not. */
static int reply_allowed(http_req *r, int status)
{
    if (r->answered) {
        http_log_line(r->s, "http: %s %s: a second answer (%d) ignored (a bug)", r->method, r->path,
                      status);
        return -EALREADY;
    }
    if (r->phase == HTTP_PHASE_PARKED || r->phase == HTTP_PHASE_DONE || status < 200 ||
        status > 599)
        return -EINVAL;
    return 0;
}

int http_queue(http_req *r, int status, struct MHD_Response *resp, uint64_t body_len)
{
    enum MHD_Result ok;

    for (int i = 0; i < r->n_headers; i++)
        if (MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value) != MHD_YES)
            http_log_line(r->s, "http: header %s refused", r->headers[i].name);
    ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ok != MHD_YES) {
        http_log_line(r->s, "http: %s %s: the %d answer could not be queued", r->method, r->path,
                      status);
        return -EIO;
    }
    r->answered = 1;
    r->status = status;
    r->bytes_out = strcmp(r->method, "HEAD") == 0 ? 0 : body_len;
    return 0;
}

static int reply_mem(http_req *r, int status, const char *content_type, void *data, size_t len,
                     enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, mode);

    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        return -ENOMEM;
    }
    if (content_type &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
        MHD_destroy_response(resp);
        return -EINVAL;
    }
    return http_queue(r, status, resp, len);
}

static int reply_json_as(http_req *r, int status, json_t *body, const char *content_type)
{
    char *text = NULL, *buf;
    size_t n;
    int rc = reply_allowed(r, status);

    if (rc < 0)
        goto out;
    rc = -EINVAL;
    if (!body)
        goto out;
    text = json_out_dumps(body, JSON_COMPACT);
    rc = -ENOMEM;
    if (!text)
        goto out;
    n = strlen(text);
    buf = malloc(n + 2);
    if (!buf)
        goto out;
    memcpy(buf, text, n);
    buf[n++] = '\n';
    buf[n] = '\0';
    rc = reply_mem(r, status, content_type, buf, n, MHD_RESPMEM_MUST_FREE);
out:
    free(text);
    json_decref(body);
    return rc;
}

int http_reply_json(http_req *r, int status, json_t *body)
{
    return reply_json_as(r, status, body, "application/json");
}

int http_reply_bytes(http_req *r, int status, const char *content_type, const void *data,
                     size_t len)
{
    int rc = reply_allowed(r, status);

    if (rc < 0)
        return rc;
    if (!data && len)
        return -EINVAL;
    return reply_mem(r, status, content_type ? content_type : "application/octet-stream",
                     (void *)(data ? data : ""), len, MHD_RESPMEM_MUST_COPY);
}

int http_reply_empty(http_req *r, int status)
{
    int rc = reply_allowed(r, status);

    if (rc < 0)
        return rc;
    return reply_mem(r, status, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
}

static json_t *json_clean_string(const char *s)
{
    char buf[HTTP_DETAIL_MAX];

    utf8_clean(buf, sizeof(buf), s ? s : "");
    return json_string(buf);
}

int http_reply_problem(http_req *r, int status, const char *title, const char *detail,
                       const http_field_error *errs, size_t n_errs)
{
    json_t *doc = json_object(), *list = NULL;
    int rc = reply_allowed(r, status);

    if (rc < 0)
        goto fail;
    rc = -ENOMEM;
    if (!doc)
        goto fail;
    if (json_object_set_new(doc, "type", json_string("about:blank")) ||
        json_object_set_new(doc, "title",
                            json_clean_string(title ? title : http_error_status_title(status))) ||
        json_object_set_new(doc, "status", json_integer(status)))
        goto fail;
    if (detail && detail[0] && json_object_set_new(doc, "detail", json_clean_string(detail)))
        goto fail;
    if (errs && n_errs) {
        list = json_array();
        if (!list || json_object_set_new(doc, "errors", list))
            goto fail;
        for (size_t i = 0; i < n_errs; i++) {
            json_t *e = json_pack("{s:o, s:o}", "field", json_clean_string(errs[i].field),
                                  "message", json_clean_string(errs[i].message));
            if (!e || json_array_append_new(list, e))
                goto fail;
        }
    }
    if (status == 401 && !header_added(r, "WWW-Authenticate"))
        http_header_add(r, "WWW-Authenticate", "Bearer");
    if (status == 503 && !header_added(r, "Retry-After"))
        http_header_add(r, "Retry-After", HTTP_RETRY_AFTER);
    return reply_json_as(r, status, doc, "application/problem+json");
fail:
    json_decref(doc);
    return rc;
}

int http_reply_error(http_req *r, int code)
{
    int status;

    if (code >= 0) {
        http_log_line(r->s, "http: %s %s: an error answer for code %d (a bug)", r->method, r->path,
                      code);
        code = -EIO;
    }
    status = http_error_status(code);
    if (status >= 500)
        http_log_line(r->s, "http: %s %s: %d for %s%s%s", r->method, r->path, status,
                      strerror(-code), r->errbuf[0] ? ": " : "", r->errbuf);
    return http_reply_problem(r, status, http_error_title(code), r->errbuf, NULL, 0);
}
