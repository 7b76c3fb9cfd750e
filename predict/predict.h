/* predict: trained models answering predictions — a model.safetensors loaded onto serve's own
 * OpenCL device, the same preprocessing as training, and dynamic batching.
 *
 * Layer: api/ (REST) and the gRPC front end (predict/grpc.h) use it; it uses model/model.h
 * (the forward pass) and kernels/; it knows nothing of HTTP, tokens or the database: its callers
 * resolve a model name and version to a key and a file.
 *
 * The engine owns one OpenCL context and queue and ONE thread that does every device call
 * (OpenCL objects are never touched from two threads). Callers on any thread:
 *   1. predict_model_get(key, path): the model's description (predict_info) from the file's
 *      header and tensors, read on the calling thread (no device work); the engine keeps it by
 *      key, so a second get is a lookup. Keys are the publishing job's id: one key, one file.
 *   2. predict_prepare(): request values → model rows, preprocessed as training did
 *      (standardised features; images resized, scaled, standardised). Pure host code.
 *   3. predict_submit(): queues the rows; the engine thread copies the model to the device the
 *      first time it is needed (LRU under a byte cap), gathers queued rows of one model into a
 *      batch (up to max_batch rows; when the device was idle it waits up to window_us for more),
 *      runs one forward, and finishes each request: predict_req_done() turns 1 and notify runs.
 *
 * Bit-identical answers: every forward of a model runs at one shape, max_batch rows, the rows
 * past the real ones zero (the kernels' plans depend on the shape; no layer mixes rows at
 * inference), so a row's outputs never depend on which other rows share its batch, nor on their
 * number.
 *
 * Outputs per row (predict_info.outputs values): classification: softmax probabilities in class
 * order; binary: one sigmoid probability (of classes[1]); regression: the value. These are the
 * numbers `trainyard train --val-outputs` writes, PyTorch's Sequential from model.safetensors
 * gives on preprocessed input, and onnxruntime gives on model.onnx fed the same raw values.
 *
 * Ownership: predict_model and predict_req are reference-counted handles (get/put,
 * submit/release); the engine outlives them all: predict_engine_free() finishes every queued
 * request with -ECANCELED (notify runs) before it returns, and callers release their handles. */
#ifndef TRAINYARD_PREDICT_PREDICT_H
#define TRAINYARD_PREDICT_PREDICT_H

#include <stddef.h>
#include <stdint.h>

enum predict_task { PREDICT_CLASSIFY = 0, PREDICT_BINARY = 1, PREDICT_REGRESS = 2 };

typedef struct predict_info {
    int image;            /* 1: an instance is an image (h×w×c); 0: a row of features */
    int in_h, in_w, in_c; /* the model's input shape (features: 1, 1, n) */
    int inputs;           /* in_h·in_w·in_c: floats per prepared row */
    int outputs;          /* floats per answer row */
    int task;             /* enum predict_task */
    size_t n_classes;     /* classification and binary; 0 for regression */
    const char *const *classes;
    size_t n_features; /* CSV models: the feature columns, in order; 0 for images */
    const char *const *features;
    const char *label;     /* the label column ("label" for images) */
    float pixel_scale;     /* images: a pixel value is multiplied by this first (1/255 when the
                              training images were 8-bit, 1 when float) */
    const float *mean;     /* standardisation: per feature (CSV) or per channel (images); */
    const float *std;      /* NULL when the job did not standardise */
    uint64_t device_bytes; /* what the model takes on the device at max_batch rows (a
                              forward-only copy and its input rows), counted against
                              memory_cap */
    const char *job;       /* the resolved job document (JSON text) */
} predict_info;

typedef struct predict_opts {
    const char *device;  /* "any" (a GPU when there is one; NULL means this), "gpu", "cpu", or
                            a device index as `trainyard devices` numbers them */
    uint64_t memory_cap; /* device bytes all loaded models may take together; 0: 1 GiB */
    int max_batch;       /* rows per forward, 1..1024; 0: 32. 1 turns batching off */
    int window_us;       /* 0..100000; -1: the default, 250 */
    void (*log)(void *user, const char *line); /* the engine's lines (device, loads, evictions);
                                                  NULL: stderr */
    void *log_user;
} predict_opts;

typedef struct predict_stats {
    uint64_t requests, rows, forwards; /* since start */
    uint64_t loads, evictions;
    uint64_t loaded_bytes; /* device bytes of the models loaded now */
    size_t loaded;         /* models loaded now */
} predict_stats;

typedef struct predict_engine predict_engine;
typedef struct predict_model predict_model;
typedef struct predict_req predict_req;

/* Starts the engine and its thread, which opens the device and builds the kernels at the first
 * use (the first request, or predict_model_get of a conv model, waits for that). -EINVAL for
 * bad options. */
int predict_engine_new(const predict_opts *o, predict_engine **out, char *err);
/* Stops taking requests (predict_submit and predict_model_get answer -ECANCELED from then on),
 * finishes every queued request with -ECANCELED (notify runs), and joins the thread; the engine
 * stays valid for the handles and calls still in hand. Accepts NULL; a second call does
 * nothing. */
void predict_engine_stop(predict_engine *e);
/* Stops (as predict_engine_stop) and frees the device side and the engine; accepts NULL.
 * Handles still held stay valid until put/released. */
void predict_engine_free(predict_engine *e);
/* A snapshot of the counters. */
void predict_engine_stats(predict_engine *e, predict_stats *s);
/* The device's name ("" until opened) and whether opening it failed (the sentence in err). */
int predict_engine_device(predict_engine *e, char *name, size_t cap, char *err);

/* The model kept under key, or a new one read from path (model.safetensors). Errors: -ENOENT
 * (no file), -ENOTSUP (a safetensors file trainyard did not train: no trainyard.job metadata,
 * as a script job's), -EINVAL (a damaged file), -E2BIG (it cannot fit memory_cap even alone),
 * each with a sentence in err. A model with conv2d layers waits for the device to be open
 * (its workspace depends on the device's conv path) and gets the device's error if opening
 * failed. The engine lets go of a model no caller holds once it is off the device (a later
 * get reads the file again). */
int predict_model_get(predict_engine *e, const char *key, const char *path, predict_model **out,
                      char *err);
const predict_info *predict_model_info(const predict_model *m);
void predict_model_put(predict_model *m);

/* Instances → prepared rows. vals holds n instances of per-instance shape dims[0..ndim-1]
 * (row-major, the instance count not included): features: [F] with F == n_features (or
 * inputs); images: [H, W, C] with C == in_c, or [H, W] when in_c == 1, any H, W in 1..4096
 * (resized bilinearly to in_h×in_w as training's image batch does). rows receives n·inputs
 * floats. -EINVAL with a sentence naming the expected shape when the shape does not fit, or
 * the instance when a value is not finite (training refuses those too). */
int predict_prepare(const predict_info *in, const float *vals, size_t n, const int64_t *dims,
                    int ndim, float *rows, char *err);

/* Queues n prepared rows (copied; n ≥ 1, any count: more than max_batch go in several
 * forwards) for m. notify(arg) runs once on the engine thread after the request finished (done
 * set); it must not block (raise a signal, queue a completion). -ECANCELED when the engine is
 * stopping, -ENOMEM. */
int predict_submit(predict_engine *e, predict_model *m, const float *rows, size_t n,
                   void (*notify)(void *arg), void *arg, predict_req **out, char *err);
/* 1 once the request finished (an atomic read; any thread). */
int predict_req_done(const predict_req *q);
/* After done: 0 and *out = n·outputs floats (valid until release), or the run's negative code
 * with its sentence copied to err (ERR_LEN). */
int predict_req_result(const predict_req *q, const float **out, char *err);
/* Drops the caller's reference (a request not yet finished still runs; its answer is
 * dropped). Accepts NULL. */
void predict_req_release(predict_req *q);

#endif
