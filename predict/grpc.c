/* predict/grpc: TensorFlow Serving's PredictionService on gRPC's C core (see grpc.h).
 *
 * One thread of ours drives one completion queue, which serves both as the server's queue for
 * new calls and as every call's queue. Calls are requested generically and dispatched on the
 * method path. Each call has exactly one tag outstanding at a time, so its state says what a
 * completion means:
 *
 *   NEW    --request_call completes--> READ    (RECV_MESSAGE started)
 *   READ   --message in, answered now--> FINISH  (initial metadata, message, status, close)
 *   READ   --Predict submitted to the engine--> WAIT  (no gRPC op in flight)
 *   WAIT   --notify posts the call's tag--> FINISH  (the answer or the engine's error)
 *   FINISH --the batch completes--> freed
 *
 * The hand-back: the engine thread's notify starts an EMPTY batch on the call, which gRPC
 * documents as putting the tag on the call's completion queue at once; it does not block, and
 * a per-call mutex orders it against our own start_batch on that call. The call is referenced
 * until its tag comes back, so notify never sees a freed call, and the queue is shut down only
 * after every call is freed, so the tag always has a queue to land on.
 *
 * Stop: a flag, grpc_server_shutdown_and_notify and grpc_server_cancel_all_calls from the
 * stopping thread; our thread stops asking for new calls, frees each call as its tag returns
 * (calls waiting on the engine are answered by the engine first: it is still running, as
 * grpc.h requires), and when the server's shutdown tag has come and no call is left, shuts the
 * queue down, drains it and returns. */
#include "predict/grpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "predict/tfs_msg.h"
#include "util/err.h"

#define GRPC_MAX_RECEIVE (64 << 20)  /* bytes of one request message */
#define GRPC_MAX_VALUES  (64u << 20) /* input values of one request */
#define GRPC_MAX_ROWS    (64u << 20) /* bytes of one request's prepared rows */
#define GRPC_TOKEN_MAX   4096

#define METHOD_PREDICT  "/tensorflow.serving.PredictionService/Predict"
#define METHOD_METADATA "/tensorflow.serving.PredictionService/GetModelMetadata"

enum call_state { ST_NEW, ST_READ, ST_WAIT, ST_FINISH };

typedef struct gcall {
    predict_grpc *g;
    struct gcall *prev, *next; /* g->calls: every call not yet freed */
    enum call_state state;
    pthread_mutex_t mu; /* orders notify's empty batch against our start_batch */
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv, *send;
    grpc_slice status_details;
    int cancelled;         /* RECV_CLOSE_ON_SERVER: the client cancelled or went away */
    grpc_status_code code; /* the status sent, for the log line */
    const char *method;    /* for the log line */
    char model[256];
    int64_t version;
    predict_target t;
    predict_model *m;
    predict_req *req;
    size_t rows;
    struct timespec t0;
} gcall;

struct predict_grpc {
    predict_grpc_opts o;
    char *cert, *key;
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    int thread_started;
    int port;
    atomic_int stopping;
    int server_down; /* the shutdown tag came back */
    int shutdown_tag;
    gcall *calls;
};

static const char *const status_names[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static void log_line(predict_grpc *g, const char *line)
{
    if (g->o.log)
        g->o.log(g->o.log_user, line);
    else
        fprintf(stderr, "%s\n", line);
}

/* The call's log line: method, model, version, status, rows or why not, time; and whether the
 * client was gone by the time the answer went out. */
static void call_log(gcall *c, grpc_status_code code, const char *detail)
{
    char line[ERR_LEN + 512];
    const char *name = (unsigned)code < sizeof status_names / sizeof *status_names
                           ? status_names[code]
                           : "UNKNOWN";
    int n = snprintf(line, sizeof line, "grpc %s", c->method ? c->method : "(unknown method)");
    if (c->model[0] && n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s", c->model);
    if (c->t.version > 0 && n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " v%lld", (long long)c->t.version);
    if (n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ": %s", name);
    if (code == GRPC_STATUS_OK && c->rows && n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ", %zu row%s", c->rows,
                      c->rows == 1 ? "" : "s");
    if (code != GRPC_STATUS_OK && detail && detail[0] && n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " (%s)", detail);
    if (n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " in %.1f ms", ms_since(&c->t0));
    if (c->cancelled && n >= 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, "; the client had cancelled or gone");
    log_line(c->g, line);
}

/* ---- calls: creation, freeing, the final batch ---- */

static void call_free(gcall *c)
{
    predict_grpc *g = c->g;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    predict_req_release(c->req);
    if (c->m)
        predict_model_put(c->m);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    if (c->send)
        grpc_byte_buffer_destroy(c->send);
    grpc_slice_unref(c->status_details);
    grpc_metadata_array_destroy(&c->md);
    grpc_call_details_destroy(&c->details);
    if (c->call)
        grpc_call_unref(c->call);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Asks the server for the next call (the queue's ST_NEW tag). */
static void call_request(predict_grpc *g)
{
    gcall *c = calloc(1, sizeof *c);
    if (!c) {
        log_line(g, "grpc: out of memory for a new call; no further calls are accepted");
        return;
    }
    c->g = g;
    c->state = ST_NEW;
    c->status_details = grpc_empty_slice();
    pthread_mutex_init(&c->mu, NULL);
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    c->next = g->calls;
    if (g->calls)
        g->calls->prev = c;
    g->calls = c;
    grpc_call_error e =
        grpc_server_request_call(g->server, &c->call, &c->details, &c->md, g->cq, g->cq, c);
    if (e != GRPC_CALL_OK) {
        char line[128];
        snprintf(line, sizeof line, "grpc: request_call failed (%d)", (int)e);
        log_line(g, line);
        call_free(c);
    }
}

/* Answers the call: status code with detail, and payload (taken; NULL: none) when code is OK.
 * The call is freed when the batch completes. */
static void call_reply(gcall *c, grpc_status_code code, const char *detail, uint8_t *payload,
                       size_t len)
{
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    n++;
    if (payload) {
        grpc_slice s = grpc_slice_new(payload, len, free);
        c->send = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = c->send;
        n++;
    }
    grpc_slice_unref(c->status_details);
    c->status_details = grpc_slice_from_copied_string(detail ? detail : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n].data.send_status_from_server.status_details = detail ? &c->status_details : NULL;
    n++;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
    n++;
    c->code = code;
    c->state = ST_FINISH;
    pthread_mutex_lock(&c->mu);
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, c, NULL);
    pthread_mutex_unlock(&c->mu);
    if (e != GRPC_CALL_OK) {
        char line[128];
        snprintf(line, sizeof line, "the answer could not be sent (start_batch: %d)", (int)e);
        call_log(c, code, line);
        call_free(c);
    }
}

/* ---- requests ---- */

/* The bearer token of the call's `authorization` metadata into tok; NULL when there is none. */
static const char *call_token(const gcall *c, char *tok, size_t cap)
{
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_metadata *md = &c->md.metadata[i];
        if (grpc_slice_str_cmp(md->key, "authorization") != 0)
            continue;
        size_t len = GRPC_SLICE_LENGTH(md->value);
        const char *v = (const char *)GRPC_SLICE_START_PTR(md->value);
        if (len < 7 || strncasecmp(v, "Bearer ", 7) != 0)
            return NULL;
        v += 7;
        len -= 7;
        while (len > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            len--;
        }
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
            len--;
        if (len == 0 || len >= cap || memchr(v, '\0', len))
            return NULL;
        memcpy(tok, v, len);
        tok[len] = '\0';
        return tok;
    }
    return NULL;
}

/* Checks model_spec and resolves it for the caller: 0 and c->t, or a status with err. */
static grpc_status_code call_resolve(gcall *c, const Tensorflow__Serving__ModelSpec *spec,
                                     char *err)
{
    predict_grpc *g = c->g;
    if (!spec || !spec->name || !spec->name[0]) {
        err_set(err, -EINVAL, "model_spec.name is required");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    snprintf(c->model, sizeof c->model, "%s", spec->name);
    if (spec->signature_name && spec->signature_name[0] &&
        strcmp(spec->signature_name, TFS_SIGNATURE) != 0) {
        err_set(err, -EINVAL, "model_spec.signature_name \"%.100s\" is not served; use \"%s\"",
                spec->signature_name, TFS_SIGNATURE);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    int64_t version = 0;
    if (spec->version_choice_case ==
        TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
        err_set(err, -EINVAL, "model_spec.version_label is not supported; give model_spec.version");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
        spec->version) {
        version = spec->version->value;
        if (version < 1) {
            err_set(err, -EINVAL, "model_spec.version is %lld; versions start at 1",
                    (long long)version);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    char tokbuf[GRPC_TOKEN_MAX];
    const char *token = call_token(c, tokbuf, sizeof tokbuf);
    predict_target t;
    memset(&t, 0, sizeof t);
    err[0] = '\0';
    int rc = g->o.resolve(g->o.user, token, spec->name, version, &t, err);
    if (rc == -EPERM && !err[0])
        err_set(err, rc, "a token is needed: send `authorization: Bearer <token>` metadata");
    if (rc == -EPERM)
        return GRPC_STATUS_UNAUTHENTICATED;
    if (rc == -EACCES)
        return GRPC_STATUS_PERMISSION_DENIED;
    if (rc == -ENOENT)
        return GRPC_STATUS_NOT_FOUND;
    if (rc < 0 && !err[0])
        err_set(err, rc, "the model could not be resolved (%s)", strerror(-rc));
    if (rc < 0)
        return GRPC_STATUS_INTERNAL;
    c->t = t;
    return GRPC_STATUS_OK;
}

/* The model of c->t from the engine into c->m. */
static grpc_status_code call_model(gcall *c, char *err)
{
    int rc = predict_model_get(c->g->o.engine, c->t.key, c->t.path, &c->m, err);
    if (rc == -ENOENT)
        return GRPC_STATUS_NOT_FOUND;
    if (rc == -ENOTSUP)
        return GRPC_STATUS_FAILED_PRECONDITION;
    if (rc == -E2BIG)
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    if (rc == -ECANCELED)
        return GRPC_STATUS_UNAVAILABLE;
    if (rc < 0)
        return GRPC_STATUS_INTERNAL;
    return GRPC_STATUS_OK;
}

static void call_metadata(gcall *c, const uint8_t *msg, size_t len)
{
    char err[ERR_LEN] = "";
    Tensorflow__Serving__GetModelMetadataRequest *req =
        tensorflow__serving__get_model_metadata_request__unpack(NULL, len, msg);
    if (!req) {
        call_reply(c, GRPC_STATUS_INVALID_ARGUMENT,
                   "the request is not a GetModelMetadataRequest message", NULL, 0);
        return;
    }
    grpc_status_code code = GRPC_STATUS_OK;
    if (req->n_metadata_field == 0) {
        err_set(err, -EINVAL, "metadata_field is empty; ask for \"signature_def\"");
        code = GRPC_STATUS_INVALID_ARGUMENT;
    }
    for (size_t i = 0; code == GRPC_STATUS_OK && i < req->n_metadata_field; i++) {
        if (strcmp(req->metadata_field[i], "signature_def") != 0) {
            err_set(err, -EINVAL,
                    "metadata_field \"%.100s\" is not supported; ask for "
                    "\"signature_def\"",
                    req->metadata_field[i]);
            code = GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    if (code == GRPC_STATUS_OK)
        code = call_resolve(c, req->model_spec, err);
    tensorflow__serving__get_model_metadata_request__free_unpacked(req, NULL);
    if (code == GRPC_STATUS_OK)
        code = call_model(c, err);
    if (code != GRPC_STATUS_OK) {
        call_reply(c, code, err, NULL, 0);
        return;
    }
    uint8_t *buf;
    size_t n;
    if (tfs_metadata_response(c->t.name, c->t.version, predict_model_info(c->m), &buf, &n) < 0) {
        call_reply(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the response", NULL, 0);
        return;
    }
    call_reply(c, GRPC_STATUS_OK, NULL, buf, n);
}

/* Runs on the engine thread: hands the finished request back to ours (see the top). */
static void call_notify(void *arg)
{
    gcall *c = arg;
    pthread_mutex_lock(&c->mu);
    grpc_call_start_batch(c->call, NULL, 0, c, NULL);
    pthread_mutex_unlock(&c->mu);
}

/* The input tensor of a PredictRequest: the only one, under any name. */
static const Tensorflow__Serving__PredictRequest__InputsEntry *
predict_input(const Tensorflow__Serving__PredictRequest *req, char *err)
{
    if (req->n_inputs == 1)
        return req->inputs[0];
    if (req->n_inputs == 0)
        err_set(err, -EINVAL, "inputs is empty; give one tensor, \"%s\"", TFS_INPUT);
    else
        err_set(err, -EINVAL, "inputs holds %zu tensors; the model takes one, \"%s\"",
                req->n_inputs, TFS_INPUT);
    return NULL;
}

/* Decodes, checks and prepares the request's rows, and submits them: ST_WAIT, or a status. */
static grpc_status_code predict_start(gcall *c, const Tensorflow__Serving__PredictRequest *req,
                                      char *err)
{
    for (size_t i = 0; i < req->n_output_filter; i++) {
        if (strcmp(req->output_filter[i], TFS_OUTPUT) != 0) {
            err_set(err, -EINVAL, "output_filter names \"%.100s\"; the only output is \"%s\"",
                    req->output_filter[i], TFS_OUTPUT);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    grpc_status_code code = call_resolve(c, req->model_spec, err);
    if (code != GRPC_STATUS_OK)
        return code;
    const Tensorflow__Serving__PredictRequest__InputsEntry *in = predict_input(req, err);
    if (!in)
        return GRPC_STATUS_INVALID_ARGUMENT;
    code = call_model(c, err);
    if (code != GRPC_STATUS_OK)
        return code;
    const predict_info *info = predict_model_info(c->m);

    float *vals = NULL, *rows = NULL;
    int64_t dims[TFS_MAX_DIMS];
    int ndim = 0;
    int rc = tfs_tensor_floats(in->value, in->key, GRPC_MAX_VALUES, &vals, dims, &ndim, err);
    if (rc < 0) {
        code = rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    size_t n = (size_t)dims[0];
    size_t per_row = (size_t)info->inputs * sizeof(float);
    if (per_row == 0 || n > GRPC_MAX_ROWS / per_row) {
        err_set(err, -EINVAL,
                "inputs[\"%s\"] has %zu instances; this model takes at most %zu "
                "in one request",
                in->key, n, per_row ? GRPC_MAX_ROWS / per_row : 0);
        code = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    rows = malloc(n * per_row);
    if (!rows) {
        err_set(err, -ENOMEM, "out of memory for %zu rows", n);
        code = GRPC_STATUS_RESOURCE_EXHAUSTED;
        goto out;
    }
    char perr[ERR_LEN] = "";
    rc = predict_prepare(info, vals, n, dims + 1, ndim - 1, rows, perr);
    if (rc < 0) {
        err_set(err, rc, "inputs[\"%s\"]: %s", in->key, perr);
        code = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    c->rows = n;
    c->state = ST_WAIT; /* before submit: notify may run before it returns */
    rc = predict_submit(c->g->o.engine, c->m, rows, n, call_notify, c, &c->req, err);
    if (rc < 0) {
        c->state = ST_READ;
        code = rc == -ECANCELED ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
out:
    free(vals);
    free(rows);
    return code;
}

static void call_predict(gcall *c, const uint8_t *msg, size_t len)
{
    char err[ERR_LEN] = "";
    Tensorflow__Serving__PredictRequest *req =
        tensorflow__serving__predict_request__unpack(NULL, len, msg);
    if (!req) {
        call_reply(c, GRPC_STATUS_INVALID_ARGUMENT, "the request is not a PredictRequest message",
                   NULL, 0);
        return;
    }
    grpc_status_code code = predict_start(c, req, err);
    tensorflow__serving__predict_request__free_unpacked(req, NULL);
    if (code != GRPC_STATUS_OK)
        call_reply(c, code, err, NULL, 0);
}

/* The engine finished c's request (ST_WAIT's tag): the answer, or why not. */
static void call_predict_done(gcall *c)
{
    char err[ERR_LEN] = "";
    const float *out;
    int rc = predict_req_result(c->req, &out, err);
    if (rc < 0) {
        call_reply(c, rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_UNAVAILABLE, err,
                   NULL, 0);
        return;
    }
    uint8_t *buf;
    size_t n;
    int k = predict_model_info(c->m)->outputs;
    if (tfs_predict_response(c->t.name, c->t.version, out, c->rows, k, &buf, &n) < 0) {
        call_reply(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the response", NULL, 0);
        return;
    }
    call_reply(c, GRPC_STATUS_OK, NULL, buf, n);
}

/* The request message arrived (ST_READ's tag): dispatch on the method (known since ST_NEW). */
static void call_read(gcall *c)
{
    if (!c->method) {
        char *m = grpc_slice_to_c_string(c->details.method);
        char detail[300];
        snprintf(detail, sizeof detail, "the method %.200s is not served", m ? m : "?");
        gpr_free(m);
        call_reply(c, GRPC_STATUS_UNIMPLEMENTED, detail, NULL, 0);
        return;
    }
    if (!c->recv) {
        call_reply(c, GRPC_STATUS_INVALID_ARGUMENT, "the call carried no request message", NULL, 0);
        return;
    }
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, c->recv)) {
        call_reply(c, GRPC_STATUS_INVALID_ARGUMENT, "the request message could not be read", NULL,
                   0);
        return;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(c->recv);
    c->recv = NULL;
    if (strcmp(c->method, "Predict") == 0)
        call_predict(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
    else
        call_metadata(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
    grpc_slice_unref(s);
}

/* ---- the thread ---- */

static void on_tag(predict_grpc *g, gcall *c, int ok)
{
    int stopping = atomic_load(&g->stopping);
    switch (c->state) {
    case ST_NEW: {
        if (!ok || stopping) {
            call_free(c);
            return;
        }
        call_request(g);
        clock_gettime(CLOCK_MONOTONIC, &c->t0);
        if (grpc_slice_str_cmp(c->details.method, METHOD_PREDICT) == 0)
            c->method = "Predict";
        else if (grpc_slice_str_cmp(c->details.method, METHOD_METADATA) == 0)
            c->method = "GetModelMetadata";
        grpc_op op;
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &c->recv;
        c->state = ST_READ;
        pthread_mutex_lock(&c->mu);
        grpc_call_error e = grpc_call_start_batch(c->call, &op, 1, c, NULL);
        pthread_mutex_unlock(&c->mu);
        if (e != GRPC_CALL_OK)
            call_free(c);
        return;
    }
    case ST_READ:
        if (!ok || stopping) {
            call_log(c, GRPC_STATUS_CANCELLED,
                     stopping ? "the server is stopping"
                              : "no request message: too large, or the client went away");
            call_free(c);
            return;
        }
        call_read(c);
        return;
    case ST_WAIT:
        if (stopping) {
            call_log(c, GRPC_STATUS_CANCELLED, "the server is stopping");
            call_free(c);
            return;
        }
        call_predict_done(c);
        return;
    case ST_FINISH: {
        char *detail = grpc_slice_to_c_string(c->status_details);
        call_log(c, c->code, detail);
        gpr_free(detail);
        call_free(c);
        return;
    }
    }
}

static void *grpc_thread(void *arg)
{
    predict_grpc *g = arg;
    int queue_down = 0;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &g->shutdown_tag)
            g->server_down = 1;
        else
            on_tag(g, ev.tag, ev.success);
        if (g->server_down && !g->calls && !queue_down) {
            grpc_completion_queue_shutdown(g->cq);
            queue_down = 1;
        }
    }
    return NULL;
}

/* ---- start and stop ---- */

static void grpc_free(predict_grpc *g)
{
    if (g->server)
        grpc_server_destroy(g->server);
    if (g->cq)
        grpc_completion_queue_destroy(g->cq);
    free(g->cert);
    free(g->key);
    free(g);
    grpc_shutdown();
}

int predict_grpc_start(const predict_grpc_opts *o, predict_grpc **out, char *err)
{
    if (!o || !o->engine || !o->resolve || o->port < 0 || o->port > 65535)
        return err_set(err, -EINVAL,
                       "predict_grpc_start: an engine, a resolve callback and a "
                       "port in 0..65535 are needed");
    if (!o->cert_pem != !o->key_pem)
        return err_set(err, -EINVAL, "gRPC TLS needs both a certificate and its key");
    grpc_init();
    predict_grpc *g = calloc(1, sizeof *g);
    if (!g) {
        grpc_shutdown();
        return err_set(err, -ENOMEM, "out of memory");
    }
    g->o = *o;
    int rc = 0;
    if (o->cert_pem) {
        g->cert = strdup(o->cert_pem);
        g->key = strdup(o->key_pem);
        if (!g->cert || !g->key) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
    }
    g->o.cert_pem = g->cert;
    g->o.key_pem = g->key;
    g->o.bind = NULL; /* not kept: borrowed */

    grpc_arg args[2];
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = GRPC_MAX_RECEIVE;
    args[1].type = GRPC_ARG_INTEGER; /* a port in use is an error, not shared */
    args[1].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[1].value.integer = 0;
    grpc_channel_args cargs = {2, args};
    g->cq = grpc_completion_queue_create_for_next(NULL);
    g->server = grpc_server_create(&cargs, NULL);
    if (!g->cq || !g->server) {
        rc = err_set(err, -ENOMEM, "could not create the gRPC server");
        goto fail;
    }
    grpc_server_register_completion_queue(g->server, g->cq, NULL);

    const char *bind = o->bind ? o->bind : "127.0.0.1";
    char addr[300];
    snprintf(addr, sizeof addr, strchr(bind, ':') ? "[%s]:%d" : "%s:%d", bind, o->port);
    grpc_server_credentials *creds;
    if (g->cert) {
        grpc_ssl_pem_key_cert_pair pair = {g->key, g->cert};
        creds = grpc_ssl_server_credentials_create(NULL, &pair, 1, 0, NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    if (!creds) {
        rc = err_set(err, -EINVAL, "the TLS certificate or key was not accepted by gRPC");
        goto fail;
    }
    g->port = grpc_server_add_http2_port(g->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (g->port <= 0) {
        rc = err_set(err, -EADDRINUSE,
                     "the gRPC port %s could not be bound (in use, or a bad "
                     "address%s)",
                     addr, g->cert ? ", or a certificate gRPC refused" : "");
        goto fail;
    }
    grpc_server_start(g->server);
    call_request(g);
    if (pthread_create(&g->thread, NULL, grpc_thread, g) != 0) {
        rc = err_set(err, -EAGAIN, "could not start the gRPC thread");
        atomic_store(&g->stopping, 1);
        grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
        grpc_server_cancel_all_calls(g->server);
        grpc_thread(g); /* drains the queue on this thread instead */
        goto fail;
    }
    g->thread_started = 1;
    *out = g;
    return 0;
fail:
    grpc_free(g);
    return rc;
}

int predict_grpc_port(const predict_grpc *g)
{
    return g->port;
}

void predict_grpc_stop(predict_grpc *g)
{
    if (!g)
        return;
    atomic_store(&g->stopping, 1);
    grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
    grpc_server_cancel_all_calls(g->server);
    pthread_join(g->thread, NULL);
    grpc_free(g);
}
