/* model: a Sequential multi-layer perceptron living on one OpenCL device.
 *
 * The hidden layers come from the job (dense with an activation, dropout); the output layer and
 * the loss follow from the task: classification → dense(n_classes) + softmax cross-entropy
 * (or dense(1) + sigmoid binary cross-entropy when binary), regression → dense(1) + MSE.
 *
 * Every parameter lives in ONE device buffer (each weight and bias a sub-buffer of it), and so
 * do the gradients and optimizer moments: one optimizer enqueue updates the whole model. Padding
 * between sub-buffers (for the device's alignment) holds zeros in every buffer and stays zero.
 * Weights are stored in×out row-major (y = x·W + b); model_export() hands them out transposed,
 * out×in, as PyTorch's nn.Linear keeps them.
 *
 * A step never waits on the device: loss and correct counts accumulate into a small device
 * buffer that the caller reads once per epoch (model_read_totals()).
 *
 * Ownership: the model borrows the ocl_ctx and kern (which must outlive it); model_free()
 * releases every buffer it made and accepts NULL. */
#ifndef TRAINYARD_WORKER_MODEL_H
#define TRAINYARD_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "job/job.h"

enum model_loss { MODEL_LOSS_SOFTMAX_XENT = 0, MODEL_LOSS_BCE = 1, MODEL_LOSS_MSE = 2 };

/* Indices into the device totals buffer. */
enum model_total {
    MODEL_TRAIN_LOSS = 0,
    MODEL_TRAIN_CORRECT,
    MODEL_VAL_LOSS,
    MODEL_VAL_CORRECT,
    MODEL_TOTALS
};

typedef struct model_layer {
    int type;            /* enum job_layer_type */
    int in, out;         /* widths: for dropout in == out */
    int act;             /* dense: enum kern_act (the output layer is linear; the loss applies
                            softmax or sigmoid) */
    int job_act;         /* dense: the same as the job's enum job_activation, for the model's
                            metadata */
    float rate;          /* dropout */
    size_t w_off, b_off; /* dense: offsets in floats into the parameter buffer */
    cl_mem w, b, gw, gb; /* dense: sub-buffers of params and grads */
    cl_mem y;            /* this layer's output for the current batch, capacity rows */
} model_layer;

typedef struct model {
    ocl_ctx *c;
    kern *k;
    int inputs, outputs;
    int loss;      /* enum model_loss */
    int optimizer; /* enum job_optimizer */
    float lr, momentum, beta1, beta2, eps;
    uint64_t seed;
    int64_t step; /* optimizer steps taken */
    size_t n_layers;
    model_layer layers[JOB_MAX_LAYERS + 1];
    size_t n_params;  /* floats in the parameter buffer, padding included */
    size_t n_weights; /* trainable values, padding excluded */
    int capacity;     /* rows the activation buffers hold */
    cl_mem params, grads, moment1, moment2;
    cl_mem dbuf[2]; /* ping-pong gradient buffers, capacity × widest layer */
    cl_mem loss_rows, correct_rows, totals;
    int fresh[MODEL_TOTALS]; /* 1: the next sum into totals[i] overwrites (set by reset) */
} model;

/* Builds the model for `inputs` features and `outputs` outputs (classes, or 1), allocates its
 * buffers for batches of up to capacity rows, and initialises weights Glorot-uniform from
 * job->seed (biases 0). Checks the memory it needs against the device first. */
int model_new(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
              int capacity, model **out, char *err);
/* Releases everything; accepts NULL. */
void model_free(model *m);
/* Bytes of device memory the model needs with this capacity (parameters, optimizer state,
 * activations and gradients), for the check before training. */
uint64_t model_device_bytes(const job_spec *job, int inputs, int outputs, int capacity);

/* One training step on rows (≤ capacity) of input x (rows × inputs, device) and targets
 * (int32 class indices for softmax, float otherwise): forward with dropout, loss, backward,
 * optimizer update. Adds the batch's loss sum and correct count to the training totals. */
int model_train_step(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* The first half of a step: forward with dropout, loss, backward, leaving the gradients in
 * m->grads and adding to the training totals; no update. Dropout masks depend on m->step, so
 * calls between two updates see the same masks (what a gradient check needs). */
int model_backprop(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* Forward without dropout, adding loss sum and correct count to the validation totals. */
int model_evaluate(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* Forward without dropout, leaving the output (logits or predictions) in *out (borrowed:
 * valid until the next call). */
int model_forward(model *m, int rows, cl_mem x, cl_mem *out, char *err);

/* Starts the totals afresh (start of an epoch): the next sum into each overwrites it, so this
 * enqueues nothing. */
int model_reset_totals(model *m, char *err);
/* Waits for the device and reads the totals into t[MODEL_TOTALS]. */
int model_read_totals(model *m, double t[MODEL_TOTALS], char *err);

/* Reads the trainable parameters back: *w is malloc'd, n_weights floats, layer by layer, each
 * dense layer's weight out×in (transposed from the device layout) then its bias. */
int model_export(model *m, float **w, char *err);
/* Reads every buffer that training state consists of (params, moment1, moment2; each
 * n_params floats, padding included) into malloc'd arrays, for checkpoints. */
int model_state_save(model *m, float **params, float **m1, float **m2, char *err);
/* Restores what model_state_save() read, and the step counter. */
int model_state_load(model *m, const float *params, const float *m1, const float *m2, int64_t step,
                     char *err);

#endif
