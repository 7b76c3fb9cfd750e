/* predict/grpc: TensorFlow Serving's gRPC PredictionService (Predict and GetModelMetadata) over
 * gRPC's C core library, the messages encoded with protobuf-c from our own .proto files
 * (predict/tf_serving.proto: field numbers as TensorFlow Serving defines them).
 *
 * A client asks by model_spec (name, version or none for the newest available); the resolve
 * callback, given the call's bearer token (metadata `authorization: Bearer ...`, NULL when
 * absent), says which model that is and whether the caller may use it. Inputs: the signature
 * "serving_default" (or none) with one input tensor of DT_FLOAT/DT_DOUBLE/DT_INT32/DT_INT64/
 * DT_UINT8 values, [N, features] or [N, H, W, C]; the output "outputs" is DT_FLOAT [N, outputs]
 * (predict.h says what the values are).
 *
 * Status codes: UNAUTHENTICATED (no or bad token), PERMISSION_DENIED, NOT_FOUND (no model, no
 * such version), INVALID_ARGUMENT (a wrong shape, dtype or input name: the message names it),
 * UNAVAILABLE (the engine is stopping or its device failed), INTERNAL.
 *
 * Threads: one thread of its own drives the completion queue; inference answers arrive from the
 * engine's thread. predict_grpc_stop() cancels calls in flight and joins; call it BEFORE
 * predict_engine_free(). */
#ifndef TRAINYARD_PREDICT_GRPC_H
#define TRAINYARD_PREDICT_GRPC_H

#include <stdint.h>

#include "predict/predict.h"

typedef struct predict_target {
    char key[64];    /* the engine's key (the publishing job's id) */
    char path[4096]; /* its model.safetensors */
    char name[513];  /* the model's name (a job name: 128 characters of UTF-8) */
    int64_t version; /* the version resolved */
} predict_target;

/* Resolves (name, version; 0 = the newest available) for the caller with token. Returns 0 and
 * fills t, or -EPERM (UNAUTHENTICATED), -EACCES (PERMISSION_DENIED), -ENOENT (NOT_FOUND),
 * another code (INTERNAL), with a sentence in err (ERR_LEN). Runs on the gRPC thread; may block
 * briefly (SQLite). */
typedef int (*predict_resolve_fn)(void *user, const char *token, const char *name, int64_t version,
                                  predict_target *t, char *err);

typedef struct predict_grpc_opts {
    const char *bind;               /* "127.0.0.1" when NULL */
    int port;                       /* 0 picks a free one */
    const char *cert_pem, *key_pem; /* TLS when both are set (copied) */
    predict_engine *engine;         /* borrowed */
    predict_resolve_fn resolve;
    void *user;
    void (*log)(void *user, const char *line); /* a line per call (method, model, status, ms);
                                                  NULL: stderr */
    void *log_user;
} predict_grpc_opts;

typedef struct predict_grpc predict_grpc;

int predict_grpc_start(const predict_grpc_opts *o, predict_grpc **out, char *err);
/* The port it listens on. */
int predict_grpc_port(const predict_grpc *g);
/* Cancels calls in flight, shuts the server down and joins its thread; accepts NULL. */
void predict_grpc_stop(predict_grpc *g);

#endif
