/* model: a Sequential network living on one OpenCL device: dense, dropout, conv2d, max/avg and
 * global average pooling, flatten and batch normalisation layers, then the output layer.
 *
 * The hidden layers come from the job; the output layer and the loss follow from the task:
 * classification → dense(n_classes) + softmax cross-entropy (or dense(1) + sigmoid binary
 * cross-entropy when binary), regression → dense(1) + MSE. A job may also name the output layer
 * itself (job->output_given: its last dense, softmax or sigmoid): its units must then equal the
 * outputs the data has.
 *
 * Shapes: the input is h×w×c per row (1×1×inputs for CSV features); every layer has an input
 * and an output shape (flat layers h = w = 1), computed here from the job's layer parameters and
 * the padding rules (valid: OH = floor((H − k)/s) + 1; same: OH = ceil(H/s), total padding
 * max((OH − 1)·s + k − H, 0), top = total/2, the rest at the bottom, as Keras/TensorFlow).
 * Activations are NHWC: a batch of one layer is rows·OH·OW rows of OC floats, so a conv's output
 * is a plain matrix on which kern_bias_act_fwd/bwd do bias and activation as for a dense layer.
 * Flatten moves nothing (the NHWC batch already is rows × (H·W·C) in (h, w, c) order).
 *
 * Every trainable parameter lives in ONE device buffer (each weight and bias a sub-buffer of it),
 * and so do the gradients and optimizer moments: one optimizer enqueue updates the whole model.
 * Layouts: dense W in×out (y = x·W + b); conv W HWIO [kh][kw][c][f], bias [f] (none without
 * use_bias); batchnorm gamma then beta, [c] each. Batchnorm's moving mean and variance are NOT
 * trained: they live in a second buffer, `stats` (mean then variance per batchnorm layer), which
 * the optimizer never sees; training forwards update it, evaluation and model_forward use it.
 * Padding between sub-buffers (for the device's alignment) holds zeros and stays zero.
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
    int type;           /* enum job_layer_type */
    int ih, iw, ic;     /* input shape per row (flat: 1, 1, width) */
    int oh, ow, oc;     /* output shape per row */
    int in, out;        /* ih·iw·ic and oh·ow·oc */
    int act;            /* dense, conv2d: enum kern_act (the output layer is linear; the
                           loss applies softmax or sigmoid) */
    int job_act;        /* the same as the job's enum job_activation, for the metadata */
    float rate;         /* dropout */
    int kh, kw, sh, sw; /* conv2d and pools: window and strides */
    int pt, pl, pb, pr; /* conv2d and pools: padding top, left, bottom, right */
    int same;           /* conv2d and pools: padding "same" (else valid) */
    int use_bias;       /* dense: 1; conv2d: the job's use_bias */
    int defer;          /* conv2d before a max pool: the pool applies bias and activation */
    int fuse_pool;      /* conv2d before a 2×2/2 valid max pool: one kernel writes the pool's y */
    float bn_momentum, bn_eps;
    int src_h, src_w, src_c; /* flat layers: the spatial shape their features were flattened
                                from, in (h, w, c) order; 1, 1, width when not flattened */
    size_t w_off, b_off;     /* floats into params: weight (gamma) and bias (beta) */
    size_t s_off, v_off;     /* batchnorm: floats into stats of the moving mean and variance */
    size_t n_w, n_b;         /* floats of weight and bias (0: none) */
    cl_mem w, b, gw, gb;     /* sub-buffers of params and grads */
    cl_mem mmean, mvar;      /* batchnorm: sub-buffers of stats */
    cl_mem save_mean, save_invstd; /* batchnorm: the last training batch's statistics */
    cl_mem argmax;                 /* maxpool2d: the input index of each output, capacity rows */
    cl_mem y;                      /* this layer's own output buffer (NULL for flatten) */
    cl_mem x_cur, y_cur;           /* borrowed: input and output of the last forward */
} model_layer;

typedef struct model {
    ocl_ctx *c;
    kern *k;
    int inputs, outputs;
    int in_h, in_w, in_c; /* input shape (1, 1, inputs for features) */
    int image_input;      /* the job has a model.input_shape: rows are h×w×c images */
    int loss;             /* enum model_loss */
    int optimizer;        /* enum job_optimizer */
    float lr, momentum, beta1, beta2, eps;
    uint64_t seed;
    int64_t step; /* optimizer steps taken */
    size_t n_layers;
    model_layer layers[JOB_MAX_LAYERS + 1];
    size_t n_params;    /* floats in the parameter buffer, padding included */
    size_t n_weights;   /* trainable values, padding excluded */
    size_t n_stats;     /* floats in the stats buffer (0 without batchnorm) */
    size_t first_param; /* the first layer with parameters: backward ends there */
    int capacity;       /* rows the activation buffers hold */
    int inference;      /* 1: made by model_new_inference (forward only) */
    int row0;           /* the first row of the batch this step's rows are (dropout's stream) */
    cl_mem params, grads, moment1, moment2, stats;
    cl_mem dbuf[2]; /* ping-pong gradient buffers, capacity × widest layer */
    cl_mem work;    /* conv scratch, the largest any conv layer needs (NULL if none) */
    cl_mem zeros;   /* a zero bias for conv layers without one (widest filters) */
    cl_mem discard; /* where the bias gradient of a conv without bias goes */
    cl_mem loss_rows, correct_rows, totals;
    int fresh[MODEL_TOTALS]; /* 1: the next sum into totals[i] overwrites (set by reset) */
} model;

/* Builds the model for `inputs` values per row (job->in_h·in_w·in_c when the job has an
 * input_shape) and `outputs` outputs (classes, or 1), allocates its buffers for batches of up
 * to capacity rows, and initialises weights Glorot-uniform from job->seed (biases and beta 0,
 * gamma 1, moving mean 0, moving variance 1). Checks first that the model and extra_bytes (what
 * the caller keeps on the device beside it: the dataset) fit the device's memory. */
int model_new(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
              int capacity, uint64_t extra_bytes, model **out, char *err);
/* A model for model_forward alone (serving): parameters, moving statistics, activations, the
 * conv workspace; no gradients, optimizer moments, pooling indices, batch statistics or loss
 * buffers. Parameters and stats are zero: the caller writes them (layouts as above). Training,
 * evaluation and the state functions refuse it with -EINVAL. */
int model_new_inference(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
                        int capacity, model **out, char *err);
/* Releases everything; accepts NULL. */
void model_free(model *m);
/* Bytes of device memory the model needs with this capacity (parameters, optimizer state,
 * moving statistics, activations, gradients, pooling indices and conv workspace), for the
 * check before training; 0 when the layers do not fit the input (model_new says why). */
uint64_t model_device_bytes(kern *k, const job_spec *job, int inputs, int outputs, int capacity);

/* What model_new_inference allocates (the same terms as model_device_bytes). k may be NULL
 * when the job has no conv2d layer. */
uint64_t model_device_bytes_inference(kern *k, const job_spec *job, int inputs, int outputs,
                                      int capacity);
/* The layers model_new would build for this job (shapes, parameter sizes, offsets into
 * parameters and stats packed without alignment padding), on the host alone: no device, no
 * buffer. For readers of a trained model (predict/) that lay tensors out before a device is
 * at hand. *out is free()d. */
int model_plan(const job_spec *job, int inputs, int outputs, int loss, model **out, char *err);

/* One training step on rows (≤ capacity) of input x (rows × inputs, device) and targets
 * (int32 class indices for softmax, float otherwise): forward with dropout, loss, backward,
 * optimizer update. Adds the batch's loss sum and correct count to the training totals. */
int model_train_step(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* The first half of a step: forward with dropout, loss, backward, leaving the gradients in
 * m->grads and adding to the training totals; no update. Dropout masks depend on m->step, so
 * calls between two updates see the same masks (what a gradient check needs). */
int model_backprop(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* model_backprop for a share of a batch: rows rows that are rows row0.. of a batch of of_rows
 * (≤ capacity), as a data-parallel rank computes them. The loss gradient is scaled by
 * 1/of_rows and dropout draws the masks of those rows of the batch, so the ranks' gradients
 * sum to the whole batch's. */
int model_backprop_share(model *m, int rows, int of_rows, int row0, cl_mem x, cl_mem targets,
                         char *err);
/* The second half of a step: the optimizer update from m->grads (step + 1). */
int model_update(model *m, char *err);
/* Forward without dropout, adding loss sum and correct count to the validation totals. */
int model_evaluate(model *m, int rows, cl_mem x, cl_mem targets, char *err);
/* Forward without dropout, leaving the output (logits or predictions) in *out (borrowed:
 * valid until the next call). */
int model_forward(model *m, int rows, cl_mem x, cl_mem *out, char *err);

/* One row of k outputs of model_forward (logits) as the loss reads them: class probabilities
 * for softmax cross-entropy (a softmax in double, shifted by the row's largest logit), the
 * positive class's probability for binary cross-entropy (sigmoid); MSE's predictions stay. In
 * place; what the trainer's --val-outputs and predict/ answer. */
void model_row_probabilities(int loss, float *row, int k);

/* Starts the totals afresh (start of an epoch): the next sum into each overwrites it, so this
 * enqueues nothing. */
int model_reset_totals(model *m, char *err);
/* Waits for the device and reads the totals into t[MODEL_TOTALS]. */
int model_read_totals(model *m, double t[MODEL_TOTALS], char *err);

/* Reads the parameter buffer (n_params floats, padding included, device layouts) and the stats
 * buffer (n_stats floats; *stats NULL when there are none) into malloc'd arrays; the offsets in
 * m->layers say where each tensor is. export.h turns them into PyTorch's layouts. */
int model_read_params(model *m, float **params, float **stats, char *err);
/* Reads every buffer that training state consists of (params, moment1, moment2; each
 * n_params floats, padding included; stats, n_stats floats, NULL when none) into malloc'd
 * arrays, for checkpoints. */
int model_state_save(model *m, float **params, float **m1, float **m2, float **stats, char *err);
/* Restores what model_state_save() read (stats ignored when the model has none), and the step
 * counter. */
int model_state_load(model *m, const float *params, const float *m1, const float *m2,
                     const float *stats, int64_t step, char *err);

#endif
