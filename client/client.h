/* client: a small libcurl client of trainyard's own API, used by the worker process and the CLI
 * commands that talk to a server. One client keeps one curl handle, so consecutive requests
 * reuse the connection. Not thread-safe: one client per thread.
 *
 * Every call returns 0 when an HTTP answer arrived (whatever its status, in *status) and a
 * negative code when none did (-ECONNREFUSED, -ETIMEDOUT, -EIO; -EKEYREJECTED when the
 * server's certificate failed verification or the CA file is unusable), with the reason in err.
 * For an answer with a problem+json or JSON body, *reply holds it (new reference) when reply is not
 * NULL; client_problem() turns a problem body into one sentence.
 *
 * Ownership: client_free() accepts NULL; replies are the caller's to json_decref. */
#ifndef TRAINYARD_CLIENT_CLIENT_H
#define TRAINYARD_CLIENT_CLIENT_H

#include <signal.h>
#include <stdint.h>

#include <jansson.h>

typedef struct client client;

/* A client of the server at base_url ("http://127.0.0.1:8080"); token may be NULL. */
int client_new(const char *base_url, const char *token, client **out, char *err);
/* Releases the client; accepts NULL. */
void client_free(client *c);
/* Verifies https servers against the PEM bundle ca_file instead of the system store (NULL: the
 * system store). pinned: ca_file is the server's own certificate, trusted as the one anchor;
 * then, and only then, the host name is not checked (serve's local workers, see serve/serve.c). */
void client_set_ca(client *c, const char *ca_file, int pinned);
/* Bounds the next requests: a whole request may take at most timeout_s seconds. */
void client_set_timeout(client *c, long timeout_s);

/* Aborts requests in flight (with -EINTR) once *flag becomes nonzero, e.g. from a signal
 * handler; NULL turns that off. */
void client_set_abort(client *c, volatile sig_atomic_t *flag);

/* GET path; a JSON body lands in *reply. */
int client_get_json(client *c, const char *path, long *status, json_t **reply, char *err);
/* DELETE path; a JSON body of the answer lands in *reply. */
int client_delete(client *c, const char *path, long *status, json_t **reply, char *err);
/* POST path with a JSON body (borrowed; NULL sends no body). */
int client_post_json(client *c, const char *path, const json_t *body, long *status, json_t **reply,
                     char *err);
/* PUT path with the bytes of a file as application/octet-stream. */
int client_put_file(client *c, const char *path, const char *file, long *status, json_t **reply,
                    char *err);
/* POST file as the body, with that Content-Type (POST /code's .tar.gz). */
int client_post_file(client *c, const char *path, const char *file, const char *content_type,
                     long *status, json_t **reply, char *err);
/* GET path into a file (created or truncated). */
int client_download(client *c, const char *path, const char *file, long *status, char *err);

/* Adds one header line ("Idempotency-Key: k", "Range: bytes=10-") to the next request only. */
void client_next_header(client *c, const char *line);

/* Takes the body of a 2xx answer (status: 200, 206, ...) piece by piece as it arrives: 0 goes
 * on, a positive value ends the transfer early (not an error), a negative code ends it as a
 * failure. */
typedef int (*client_sink)(void *ctx, long status, const char *data, size_t len);
/* GET path without a time limit (streams, large downloads), handing a 2xx answer's body to
 * sink as it arrives; any other answer's JSON body lands in *reply instead. Returns 0 when an
 * answer arrived (also when sink ended it early), sink's negative code, or a transfer failure
 * as the other calls. */
int client_get_stream(client *c, const char *path, client_sink sink, void *ctx, long *status,
                      json_t **reply, char *err);

/* One sentence from a problem+json reply ("404 Not found: no job abc"), written into out. */
void client_problem(long status, const json_t *reply, char *out, size_t cap);

#endif
