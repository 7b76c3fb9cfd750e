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
 * This file is the server, its thread and a call's life; predict/grpc_call.c decodes, checks
 * and answers the two methods' requests; predict/tfs_msg.c turns messages into floats and back.
 *
 * Stop: a flag, grpc_server_shutdown_and_notify and grpc_server_cancel_all_calls from the
 * stopping thread; our thread stops asking for new calls, frees each call as its tag returns
 * (calls waiting on the engine are answered by the engine first: it is still running, as
 * grpc.h requires), and when the server's shutdown tag has come and no call is left, shuts the
 * queue down, drains it and returns. */
#include "predict/grpc_priv.h"

#include <grpc/byte_buffer.h>
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
#include <time.h>

#include "util/err.h"

#define METHOD_PREDICT  "/tensorflow.serving.PredictionService/Predict"
#define METHOD_METADATA "/tensorflow.serving.PredictionService/GetModelMetadata"

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

void predict_grpc_call_reply(gcall *c, grpc_status_code code, const char *detail, uint8_t *payload,
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
        predict_grpc_call_read(c);
        return;
    case ST_WAIT:
        /* notify posted this tag holding c->mu, so taking it here orders everything the engine
         * thread wrote before notify (the answer) before what we read next, in our own code
         * rather than through gRPC's queue alone */
        pthread_mutex_lock(&c->mu);
        pthread_mutex_unlock(&c->mu);
        if (stopping) {
            call_log(c, GRPC_STATUS_CANCELLED, "the server is stopping");
            call_free(c);
            return;
        }
        predict_grpc_call_done(c);
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

static void *server_thread(void *arg)
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

static void server_free(predict_grpc *g)
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
    args[0].value.integer = PREDICT_GRPC_MAX_RECEIVE;
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
    if (pthread_create(&g->thread, NULL, server_thread, g) != 0) {
        rc = err_set(err, -EAGAIN, "could not start the gRPC thread");
        atomic_store(&g->stopping, 1);
        grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
        grpc_server_cancel_all_calls(g->server);
        server_thread(g); /* drains the queue on this thread instead */
        goto fail;
    }
    g->thread_started = 1;
    *out = g;
    return 0;
fail:
    server_free(g);
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
    server_free(g);
}
