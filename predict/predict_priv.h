/* predict_priv: what the engine (predict.c) and the loader (load.c) share: a model's host side,
 * read from its file once, and its device side, which only the engine thread touches.
 *
 * A predict_model's host fields are written by predict_model_read() before anyone else sees the
 * model and never change afterwards, so any thread may read them. `queued` belongs to the
 * engine's mutex; dev, x, used and the LRU fields to the engine thread alone. */
#ifndef TRAINYARD_PREDICT_PREDICT_PRIV_H
#define TRAINYARD_PREDICT_PREDICT_PRIV_H

#include <stdatomic.h>

#include "job/job.h"
#include "predict/predict.h"
#include "model/model.h"

struct predict_model {
    atomic_int refs;
    char *key;
    predict_info info;
    /* storage behind info */
    char **classes, **features;
    size_t n_class_names, n_feature_names; /* entries of classes and features */
    char *label, *job_text;
    float *mean, *std;
    job_spec *job;
    int loss;              /* enum model_loss */
    model *plan;           /* host-only plan: layers, packed offsets (model_plan) */
    float *params, *stats; /* the trained tensors in our layouts, at the plan's offsets */
    /* the engine's mutex */
    size_t queued;              /* rows queued and not yet in a forward */
    struct predict_model *next; /* the engine's table */
    /* the engine thread alone */
    model *dev;    /* the device copy, or NULL */
    cl_mem x;      /* its input rows, capacity × inputs */
    uint64_t used; /* the engine's tick of its last forward (LRU) */
};

/* Reads path into a new model with one reference (key copied); device_bytes is left 0 for the
 * engine to fill. Errors as predict_model_get's (-ENOENT, -ENOTSUP, -EINVAL, -ENOMEM). */
int predict_model_read(const char *key, const char *path, predict_model **out, char *err);
/* Frees the host side (the device side must be gone); accepts NULL. */
void predict_model_destroy(predict_model *m);
/* Engine thread: the device copy for batches of capacity rows (model_new_inference, then the
 * trained tensors written over its initial ones, and the input buffer). */
int predict_model_upload(predict_model *m, ocl_ctx *c, kern *k, int capacity, char *err);
/* Engine thread: frees the device copy; accepts a model without one. */
void predict_model_unload(predict_model *m);

#endif
