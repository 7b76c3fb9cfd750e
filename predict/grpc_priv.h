/* predict/grpc_priv: what predict/grpc.c (the server, its thread, a call's life) and
 * predict/grpc_call.c (the two methods' requests and answers) share. Everything here runs on
 * the gRPC thread, except call_notify (grpc_call.c), which the engine thread runs: it takes the
 * call's mutex and starts an empty batch (grpc.c says why). */
#ifndef TRAINYARD_PREDICT_GRPC_PRIV_H
#define TRAINYARD_PREDICT_GRPC_PRIV_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "predict/grpc.h"

#define PREDICT_GRPC_MAX_RECEIVE (64 << 20)  /* bytes of one request message */
#define PREDICT_GRPC_MAX_VALUES  (64u << 20) /* input values of one request */
#define PREDICT_GRPC_MAX_ROWS    (64u << 20) /* bytes of one request's prepared rows */
#define PREDICT_GRPC_TOKEN_MAX   4096

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

/* Answers the call: status code with detail, and payload (taken; NULL: none) when code is OK.
 * The call is freed when the batch completes (grpc.c). */
void predict_grpc_call_reply(gcall *c, grpc_status_code code, const char *detail, uint8_t *payload,
                             size_t len);
/* The request message arrived: decodes it and answers, or submits it to the engine (grpc_call.c).
 */
void predict_grpc_call_read(gcall *c);
/* The engine finished c's request: the answer, or why not (grpc_call.c). */
void predict_grpc_call_done(gcall *c);

#endif
