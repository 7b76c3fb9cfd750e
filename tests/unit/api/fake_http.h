/* fake_http: a stand-in for http/http.c that lets the unit tests call the API handlers directly.
 *
 * A test builds a request (method, path, parameters, query, headers, body or body file), calls
 * a handler with fake_call(), and reads what the handler answered: status, headers, body (JSON
 * parsed), a file to send, a park, or a stream to pull. A handler that returns a negative code
 * without answering is answered the way http/http.h describes the error table (fake_status_of).
 * Signals count how often they were raised. Everything is single-threaded and synchronous.
 * A test #includes fake_http.c (so both share check.h's failure count) instead of linking the
 * real framework. */
#ifndef TRAINYARD_TESTS_FAKE_HTTP_H
#define TRAINYARD_TESTS_FAKE_HTTP_H

#include "http/http.h"

#define FAKE_MAX_PAIRS 8

struct http_signal {
    int raised;
};

struct http_req {
    /* the request */
    const char *method, *path;
    const char *params[FAKE_MAX_PAIRS][2];
    const char *query[FAKE_MAX_PAIRS][2];
    const char *headers[FAKE_MAX_PAIRS][2];
    const char *body;
    const char *body_file;
    char errbuf[ERR_LEN];
    void *state;
    void (*state_free)(void *);
    int wakeups, parked_timeout;
    /* the answer */
    int answered, status;
    char content_type[64];
    char resp_headers[FAKE_MAX_PAIRS][2][256];
    char *bytes; /* body bytes, NUL-terminated */
    size_t len;
    json_t *json; /* the body parsed, for JSON answers */
    char file[4608], etag[128];
    int parked, park_ms;
    http_signal *park_sig;
    http_pull pull;
    void *pull_state;
    void (*pull_free)(void *);
    http_signal *stream_sig;
};

/* A fresh request. */
void fake_req_init(http_req *r, const char *method, const char *path);
/* Adds a path parameter, query argument or request header (the strings are borrowed). */
void fake_param(http_req *r, const char *name, const char *value);
void fake_query(http_req *r, const char *name, const char *value);
void fake_header(http_req *r, const char *name, const char *value);
/* Calls h; answers a negative return through the error table. Returns the status. */
int fake_call(http_req *r, http_handler h, void *ctx);
/* Calls h again as after a park (wakeups + 1, parked_timeout as given), keeping the state. */
int fake_wake(http_req *r, http_handler h, void *ctx, int timed_out);
/* Pulls a stream answer until it returns WAIT or END (or max bytes); appends to r->bytes.
 * Returns the last pull result (HTTP_PULL_WAIT / HTTP_PULL_END / HTTP_PULL_ERROR). */
int fake_drain(http_req *r);
/* A response header's value, or NULL. */
const char *fake_resp_header(const http_req *r, const char *name);
/* Frees what the request holds (answer, state, stream). */
void fake_req_free(http_req *r);
/* The status the error table gives a code. */
int fake_status_of(int code);

#endif
