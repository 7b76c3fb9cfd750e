/* model_priv.h: what the parts of model/ share and nothing outside model/ may include: the
 * plan (model_plan.c: shapes, layout, sizes), used by the buffers (model.c) and the steps
 * (model_step.c). The public contract is model.h. */
#ifndef TRAINYARD_MODEL_MODEL_PRIV_H
#define TRAINYARD_MODEL_MODEL_PRIV_H

#include "model/model.h"

/* Device bytes of the buffers besides the four parameter-sized ones, for a planned model. */
typedef struct model_sizes {
    size_t widest;     /* floats per row of the widest activation (the gradient buffers) */
    size_t widest_c;   /* the most filters of a conv layer */
    size_t work;       /* conv workspace bytes */
    uint64_t per_rows; /* bytes per row of the batch: outputs, argmax, gradients, loss rows */
    uint64_t fixed;    /* the rest: batchnorm saves, zeros, totals */
} model_sizes;

/* ---- model_plan.c ---- */

/* Fills m->layers from the job (hidden layers, then the output layer) with every shape and the
 * fusions (defer, fuse_pool) and m's input shape, checking that each layer fits the one before. */
int model_layers_plan(model *m, const job_spec *job, int inputs, int outputs, char *err);
/* Lays the parameters and stats out, each tensor on align floats; sets n_params, n_weights,
 * n_stats and first_param. */
void model_layers_layout(model *m, size_t align);
/* The kernels' geometry of conv layer l over rows rows. */
void model_conv_geom(const model_layer *l, int rows, kern_conv *g);
/* The kernels' geometry of pool layer l over rows rows. */
void model_pool_geom(const model_layer *l, int rows, kern_pool *g);
/* The sizes of a planned model's buffers besides the parameter-sized ones. */
model_sizes model_sizes_of(const model *m, kern *k, int capacity);
/* Device bytes of a training model (model_new) of this capacity. */
uint64_t model_bytes(const model *m, kern *k, int capacity);
/* Device bytes of an inference model (model_new_inference) of this capacity. */
uint64_t model_bytes_inference(const model *m, kern *k, int capacity);

/* ---- model.c ---- */

/* -EINVAL with a message for an inference model: training, evaluation and the state functions
 * need what it lacks. */
int model_check_training(const model *m, char *err);

#endif
