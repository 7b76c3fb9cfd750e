/* fake_http: the api/http.h functions the handlers call, over the fake request of fake_http.h.
 * It keeps the contract's observable rules: one answer per call (a second is counted as a test
 * failure), bodies stolen by http_reply_json, problem+json bodies with type/title/status/detail
 * and errors, state freed with its destructor, streams pulled until WAIT or END. */
#include "tests/unit/api/fake_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/unit/check.h"

/* ---- the test's side -------------------------------------------------------------------- */

void fake_req_init(http_req *r, const char *method, const char *path)
{
    memset(r, 0, sizeof *r);
    r->method = method;
    r->path = path;
}

static void fake_set(const char *pairs[FAKE_MAX_PAIRS][2], const char *name, const char *value)
{
    for (int i = 0; i < FAKE_MAX_PAIRS; i++) {
        if (!pairs[i][0]) {
            pairs[i][0] = name;
            pairs[i][1] = value;
            return;
        }
    }
}

void fake_param(http_req *r, const char *name, const char *value)
{
    fake_set(r->params, name, value);
}

void fake_query(http_req *r, const char *name, const char *value)
{
    fake_set(r->query, name, value);
}

void fake_header(http_req *r, const char *name, const char *value)
{
    fake_set(r->headers, name, value);
}

int fake_status_of(int code)
{
    switch (code) {
    case -ENOENT:
        return 404;
    case -EINVAL:
        return 400;
    case -EEXIST:
    case -EBUSY:
        return 409;
    case -EFBIG:
        return 413;
    case -ENOSPC:
        return 507;
    default:
        return 500;
    }
}

/* Resets the answer (not the state) before a call. */
static void fake_answer_reset(http_req *r)
{
    free(r->bytes);
    json_decref(r->json);
    r->bytes = NULL;
    r->json = NULL;
    r->len = 0;
    r->answered = r->status = r->parked = 0;
    r->content_type[0] = r->file[0] = r->etag[0] = '\0';
    memset(r->resp_headers, 0, sizeof r->resp_headers);
    r->errbuf[0] = '\0';
}

int fake_call(http_req *r, http_handler h, void *ctx)
{
    fake_answer_reset(r);
    int rc = h(r, ctx);
    if (rc < 0 && !r->answered)
        http_reply_error(r, rc);
    if (rc == 0 && !r->answered) {
        fprintf(stderr, "handler for %s %s returned 0 without answering\n", r->method, r->path);
        check_failures++;
    }
    return r->status;
}

int fake_wake(http_req *r, http_handler h, void *ctx, int timed_out)
{
    r->wakeups++;
    r->parked_timeout = timed_out;
    return fake_call(r, h, ctx);
}

int fake_drain(http_req *r)
{
    char buf[1000];
    for (int i = 0; i < 100000; i++) {
        ssize_t n = r->pull(r->pull_state, buf, sizeof buf);
        if (n < 0)
            return (int)n;
        char *p = realloc(r->bytes, r->len + (size_t)n + 1);
        if (!p)
            return HTTP_PULL_ERROR;
        memcpy(p + r->len, buf, (size_t)n);
        r->len += (size_t)n;
        p[r->len] = '\0';
        r->bytes = p;
    }
    return HTTP_PULL_ERROR;
}

const char *fake_resp_header(const http_req *r, const char *name)
{
    for (int i = 0; i < FAKE_MAX_PAIRS; i++) {
        if (strcasecmp(r->resp_headers[i][0], name) == 0)
            return r->resp_headers[i][1];
    }
    return NULL;
}

void fake_req_free(http_req *r)
{
    fake_answer_reset(r);
    if (r->state_free)
        r->state_free(r->state);
    if (r->pull_free)
        r->pull_free(r->pull_state);
    r->state = r->pull_state = NULL;
    r->state_free = r->pull_free = NULL;
}

/* ---- the handlers' side: api/http.h ----------------------------------------------------- */

static const char *fake_get(const char *const pairs[FAKE_MAX_PAIRS][2], const char *name,
                            int nocase)
{
    for (int i = 0; i < FAKE_MAX_PAIRS && pairs[i][0]; i++) {
        if ((nocase ? strcasecmp(pairs[i][0], name) : strcmp(pairs[i][0], name)) == 0)
            return pairs[i][1];
    }
    return NULL;
}

const char *http_method(const http_req *r)
{
    return r->method;
}

const char *http_path(const http_req *r)
{
    return r->path;
}

const char *http_param(const http_req *r, const char *name)
{
    return fake_get(r->params, name, 0);
}

const char *http_query(const http_req *r, const char *name)
{
    return fake_get(r->query, name, 0);
}

const char *http_header(const http_req *r, const char *name)
{
    return fake_get(r->headers, name, 1);
}

const char *http_body(const http_req *r, size_t *len)
{
    *len = r->body ? strlen(r->body) : 0;
    return r->body ? r->body : "";
}

const char *http_body_file(const http_req *r, uint64_t *len)
{
    if (!r->body_file)
        return NULL;
    FILE *f = fopen(r->body_file, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (uint64_t)ftell(f);
    fclose(f);
    return r->body_file;
}

int http_body_json(http_req *r, json_t **out)
{
    json_error_t e;
    json_t *v = json_loads(r->body ? r->body : "", JSON_REJECT_DUPLICATES, &e);
    if (!v || !json_is_object(v)) {
        json_decref(v);
        http_reply_problem(r, 400, "Invalid JSON", e.text, NULL);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

char *http_errbuf(http_req *r)
{
    return r->errbuf;
}

void http_state_set(http_req *r, void *state, void (*free_fn)(void *))
{
    r->state = state;
    r->state_free = free_fn;
}

void *http_state(const http_req *r)
{
    return r->state;
}

int http_header_add(http_req *r, const char *name, const char *value)
{
    for (int i = 0; i < FAKE_MAX_PAIRS; i++) {
        if (!r->resp_headers[i][0][0]) {
            snprintf(r->resp_headers[i][0], 256, "%s", name);
            snprintf(r->resp_headers[i][1], 256, "%s", value);
            return 0;
        }
    }
    return -ENOSPC;
}

/* Marks the request answered, failing the test on a second answer. */
static void fake_answer(http_req *r, int status, const char *content_type)
{
    if (r->answered) {
        fprintf(stderr, "%s %s answered twice\n", r->method, r->path);
        check_failures++;
    }
    r->answered = 1;
    r->status = status;
    snprintf(r->content_type, sizeof r->content_type, "%s", content_type ? content_type : "");
}

int http_reply_json(http_req *r, int status, json_t *body)
{
    fake_answer(r, status, "application/json");
    r->bytes = json_dumps(body, JSON_COMPACT);
    r->len = r->bytes ? strlen(r->bytes) : 0;
    r->json = body; /* stolen */
    return 0;
}

int http_reply_bytes(http_req *r, int status, const char *content_type, const void *data,
                     size_t len)
{
    fake_answer(r, status, content_type);
    r->bytes = malloc(len + 1);
    memcpy(r->bytes, data, len);
    r->bytes[len] = '\0';
    r->len = len;
    return 0;
}

int http_reply_empty(http_req *r, int status)
{
    fake_answer(r, status, NULL);
    return 0;
}

int http_reply_file(http_req *r, const char *path, const char *content_type, const char *etag)
{
    fake_answer(r, 200, content_type);
    snprintf(r->file, sizeof r->file, "%s", path);
    snprintf(r->etag, sizeof r->etag, "%s", etag ? etag : "");
    return 0;
}

int http_reply_problem(http_req *r, int status, const char *title, const char *detail,
                       const job_errors *errs)
{
    json_t *p = json_pack("{s:s, s:s, s:i, s:s}", "type", "about:blank", "title", title, "status",
                          status, "detail", detail ? detail : "");
    if (errs && errs->count) {
        json_t *list = json_array();
        for (size_t i = 0; i < errs->count; i++)
            json_array_append_new(list, json_pack("{s:s, s:s}", "field", errs->items[i].field,
                                                  "message", errs->items[i].message));
        json_object_set_new(p, "errors", list);
    }
    int rc = http_reply_json(r, status, p);
    snprintf(r->content_type, sizeof r->content_type, "application/problem+json");
    return rc;
}

int http_reply_error(http_req *r, int code)
{
    return http_reply_problem(r, fake_status_of(code), "Error", r->errbuf, NULL);
}

int http_park(http_req *r, http_signal *sig, int timeout_ms)
{
    fake_answer(r, 0, NULL);
    r->parked = 1;
    r->park_sig = sig;
    r->park_ms = timeout_ms;
    return 0;
}

int http_parked_timeout(const http_req *r)
{
    return r->parked_timeout;
}

int http_wakeups(const http_req *r)
{
    return r->wakeups;
}

int http_reply_stream(http_req *r, int status, const char *content_type, http_pull pull,
                      void *state, void (*free_fn)(void *), http_signal *sig, int heartbeat_ms)
{
    (void)heartbeat_ms;
    fake_answer(r, status, content_type);
    r->pull = pull;
    r->pull_state = state;
    r->pull_free = free_fn;
    r->stream_sig = sig;
    return 0;
}

void http_signal_raise(http_signal *sig)
{
    sig->raised++;
}
