/* kernels: host wrappers around the OpenCL kernels in kernels/\*.cl.
 *
 * A `kern` holds one cl_kernel per entry point, created from an ocl_ctx's program. Every wrapper
 * sets its arguments and enqueues on the context's in-order queue without waiting: the caller
 * decides when to synchronise (the trainer reads back once per epoch). A kern is not thread-safe;
 * use one per thread. All matrices are row-major float32; sizes are in elements.
 *
 * Each wrapper returns 0, or -EIO if OpenCL refused the enqueue (kern_last_error() says why).
 * Arguments no kernel can honour (a negative size, more than INT_MAX − 4096 elements in one call,
 * an unknown activation) give -EINVAL, also with a sentence; nothing is enqueued then. A call with
 * nothing to do (zero rows or elements) enqueues nothing and returns 0, except where the result is
 * a sum, which is then written as 0. Each kernel has a plain-C twin in kernels/ref.h with the same
 * meaning, used by the tests. */
#ifndef TRAINYARD_KERNELS_KERNELS_H
#define TRAINYARD_KERNELS_KERNELS_H

#include <stdint.h>

#include "kernels/ocl.h"

enum kern_act { KERN_ACT_LINEAR = 0, KERN_ACT_RELU = 1, KERN_ACT_TANH = 2, KERN_ACT_SIGMOID = 3 };

typedef struct kern kern;

/* Kernel families, one per kernels/\*.cl file, for kern_new_for(). A family whose file this build
 * does not embed is skipped. */
enum kern_family {
    KERN_FAM_GEMM = 1u << 0,
    KERN_FAM_ACTIVATION = 1u << 1,
    KERN_FAM_LOSS = 1u << 2,
    KERN_FAM_DROPOUT = 1u << 3,
    KERN_FAM_REDUCE = 1u << 4,
    KERN_FAM_OPTIM = 1u << 5,
    KERN_FAM_GATHER = 1u << 6,
    KERN_FAM_CONV = 1u << 7,
    KERN_FAM_POOL = 1u << 8,
    KERN_FAM_BATCHNORM = 1u << 9,
    KERN_FAM_IMAGE = 1u << 10,
    KERN_FAM_ALL = (1u << 11) - 1,
};
/* What a dense network's training step uses (add KERN_FAM_DROPOUT for dropout layers). */
#define KERN_FAM_DENSE                                                                             \
    (KERN_FAM_GEMM | KERN_FAM_ACTIVATION | KERN_FAM_LOSS | KERN_FAM_REDUCE | KERN_FAM_OPTIM |      \
     KERN_FAM_GATHER)

/* The class of device the kernels are chosen for. KERN_CLASS_CPU takes the CPU forms: one
 * work-item per work-group walking rows in float16 with large __local tables (gemm_cpu and the
 * narrow GEMMs, the *_cpu bias + activation and Adam kernels, the direct convolutions and the
 * fused conv + max pool). KERN_CLASS_GPU takes one work-item per element, the tiled GEMM and
 * im2col + GEMM convolutions. Every such choice consults the kern's class, nothing else. */
enum kern_class { KERN_CLASS_CPU = 0, KERN_CLASS_GPU = 1 };
/* The class of dev into *out: KERN_CLASS_CPU for a CPU device, KERN_CLASS_GPU for any other;
 * TRAINYARD_DEVICE_CLASS=cpu|gpu overrides it (PoCL then runs every GPU choice at once). The
 * per-family forces TRAINYARD_GEMM and TRAINYARD_CONV still win over the class. -EINVAL for
 * another value of the variable. */
int kern_device_class(const ocl_device *dev, enum kern_class *out, char *err);
/* The class k was made with. */
enum kern_class kern_class_of(const kern *k);
/* 1 when the CPU forms are meant for k's device (its class is KERN_CLASS_CPU), else 0. A GPU may
 * run them out of its resources (NVIDIA reports their faults as CL_OUT_OF_RESOURCES and the
 * queue is lost): tests check this before forcing one. */
int kern_cpu_forms_fit(const kern *k);

/* kern_new_for(c, KERN_FAM_ALL, out, err). */
int kern_new(ocl_ctx *c, kern **out, char *err);
/* Builds the programs of the families in the mask (enum kern_family) that c has not built yet,
 * from the disk cache or compiled, and creates their kernels; *out is freed with kern_free(), and
 * c must outlive it. A wrapper of a family outside the mask returns -EIO saying so. */
int kern_new_for(ocl_ctx *c, unsigned families, kern **out, char *err);
/* Launches every kernel of k's families once at each local size its wrapper can choose, on tiny
 * buffers, and waits: PoCL compiles a work-group function per kernel and local size on first
 * launch, so afterwards no launch compiles, and ocl_ctx_save() keeps them for the next process.
 * For a process that will run many jobs (the worker); a single job compiles the few it uses. */
int kern_warmup(kern *k, char *err);
/* The families of the mask whose programs c has built or its disk cache holds. */
unsigned kern_families_cached(ocl_ctx *c, unsigned families);
/* The families of the mask that c compiled and has not written to the disk cache yet. */
unsigned kern_families_unsaved(ocl_ctx *c, unsigned families);
/* on 1: a wrapper whose kernels belong to a family outside k's mask enqueues nothing and returns
 * 0 instead of -EIO, so that a whole training step can run to compile the kernels of k's
 * families alone (train/kbuild.c); its results are then meaningless. */
void kern_set_dry(kern *k, int on);
/* Releases the kernels; accepts NULL. */
void kern_free(kern *k);
/* The sentence describing the last failed enqueue. */
const char *kern_last_error(const kern *k);

/* C = alpha·op(A)·op(B) + beta·C. op(A) is M×K (A is stored K×M when ta), op(B) is K×N (B is
 * stored N×K when tb); lda, ldb, ldc are row strides. beta 0 overwrites C (NaNs there vanish). */
int kern_gemm(kern *k, int ta, int tb, int M, int N, int K, float alpha, cl_mem A, int lda,
              cl_mem B, int ldb, float beta, cl_mem C, int ldc);

/* y[r][c] = act(y[r][c] + bias[c]) in place over rows×cols. */
int kern_bias_act_fwd(kern *k, int rows, int cols, int act, cl_mem y, cl_mem bias);

/* Backward of bias_act_fwd, given its output y: dy ← dy ⊙ act'(y) in place, then
 * dbias[c] = Σ_r dy[r][c] (overwritten; zeros when rows is 0). act' from the output: relu y > 0,
 * tanh 1 − y², sigmoid y·(1 − y), linear 1. One enqueue up to a few hundred rows (how many
 * depends on cols and the device), two beyond; deterministic, no atomics. */
int kern_bias_act_bwd(kern *k, int rows, int cols, int act, cl_mem y, cl_mem dy, cl_mem dbias);

/* Softmax + sparse categorical cross-entropy over rows×cols logits and int32 labels:
 * loss[r] = −log softmax(logits[r])[labels[r]], correct[r] = 1 if argmax == label else 0,
 * dlogits = (softmax − onehot)·scale. dlogits may be NULL (validation), or the logits buffer
 * itself (overwritten). Argmax ties go to the first maximum. A label outside [0, cols) is never
 * used as an index: that row gets loss −ln(FLT_MIN) ≈ 87.34, correct 0 and a zero dlogits row. */
int kern_softmax_xent(kern *k, int rows, int cols, cl_mem logits, cl_mem labels, float scale,
                      cl_mem dlogits, cl_mem loss, cl_mem correct);

/* Sigmoid + binary cross-entropy on one logit per row and float 0/1 labels:
 * loss[r] = BCE(sigmoid(z), y), correct[r] = (z > 0) == (y > 0.5), dlogits = (σ(z) − y)·scale.
 * dlogits may be NULL. The loss is computed as max(z, 0) − z·y + log(1 + e^−|z|), finite for
 * any finite z; y between 0 and 1 (soft targets) is allowed. */
int kern_bce(kern *k, int rows, cl_mem logits, cl_mem labels, float scale, cl_mem dlogits,
             cl_mem loss, cl_mem correct);

/* Mean squared error over rows×cols: loss[r] = Σ_c (p−t)² / cols,
 * dpred = 2·(p − t)·scale / cols. dpred may be NULL, or the pred buffer itself. cols ≥ 1. */
int kern_mse(kern *k, int rows, int cols, cl_mem pred, cl_mem target, float scale, cl_mem dpred,
             cl_mem loss);

/* Inverted dropout over n floats: y[i] = keep(i) ? x[i] / (1 − rate) : 0, where keep(i) comes
 * from a counter-based random stream: uniform(seed, offset + i) ≥ rate. x and y may be the same
 * buffer. The same call with the same seed and offset on dY gives dX. uniform is ref_uniform()
 * (splitmix64, defined in kernels/dropout.cl), bit-identical on host and device; the scale is
 * the float 1/(1 − rate), so y matches ref_dropout bit for bit. rate ≤ 0 copies x, rate ≥ 1
 * gives zeros. Give each dropout layer and step its own offset range (or seed). */
int kern_dropout(kern *k, int n, float rate, uint64_t seed, uint64_t offset, cl_mem x, cl_mem y);

/* out[index] = Σ_{i<n} x[i], or out[index] += Σ x[i] when accumulate. A tree of partial sums
 * (error ~ a few dozen roundings, not n), deterministic for a given n and device; one enqueue up
 * to a few thousand floats, two beyond. n = 0 stores 0 (or leaves out[index] when accumulating).
 */
int kern_reduce_sum(kern *k, int n, cl_mem x, cl_mem out, int index, int accumulate);

/* SGD with momentum, Keras form: v = momentum·v − lr·g; w += v. With momentum 0, v is unused
 * (may be NULL) and w −= lr·g. */
int kern_sgd(kern *k, int n, float lr, float momentum, cl_mem w, cl_mem g, cl_mem v);

/* Adam: m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; w −= lr·(m/bc1) / (sqrt(v/bc2) + eps), with
 * the bias corrections bc1 = 1 − β1^t and bc2 = 1 − β2^t computed by the caller. */
int kern_adam(kern *k, int n, float lr, float beta1, float beta2, float eps, float bc1, float bc2,
              cl_mem w, cl_mem g, cl_mem m, cl_mem v);

/* Row gather of 32-bit words: dst[i][:] = src[idx[start + i]][:] for i < rows, cols words per
 * row; idx is int32. Used for shuffled mini-batches of features (float) and labels (int/float).
 * An index outside the rows that src's buffer holds gives a zero row (never an out-of-bounds
 * read); an index window or destination that does not fit its buffer is -EINVAL. */
int kern_gather_rows(kern *k, int rows, int cols, cl_mem src, cl_mem idx, int start, cl_mem dst);

/* Convolution geometry, NHWC activations and HWIO weights [kh][kw][c][f]. */
typedef struct kern_conv {
    int n, h, w, c; /* input NHWC */
    int f, kh, kw;  /* filters, kernel */
    int sh, sw;     /* strides */
    int pt, pl;     /* top/left padding (bottom/right follow from oh/ow) */
    int oh, ow;     /* output size (caller computes from padding rules) */
} kern_conv;

/* Bytes of scratch the conv wrappers need for this geometry (0 if none); the caller owns one
 * buffer of at least that size and passes it to every conv call of that geometry. */
size_t kern_conv_workspace(kern *k, const kern_conv *g);

/* y[n,oh,ow,f] = Σ x[n, oh·sh−pt+i, ow·sw−pl+j, c]·w[i][j][c][f] (outside the image: 0),
 * overwriting y. Bias and activation are NOT applied (kern_bias_act_fwd does). */
int kern_conv2d_fwd(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y, cl_mem work);

/* Whether kern_conv2d_fwd_maxpool runs on this kern (the direct conv path, CPU devices): 1 or 0. */
int kern_conv2d_fwd_maxpool_ok(kern *k);

/* kern_conv2d_fwd followed by kern_pool2d_fwd(KERN_POOL_MAX) with a 2×2 window, stride 2 and no
 * padding over its output, without writing that output: y (N·(OH/2)·(OW/2)·F) and argmax (may
 * be NULL; flat indices into the N·OH·OW·F conv output) are the bits the two calls give. -EINVAL
 * where kern_conv2d_fwd_maxpool_ok is 0. */
int kern_conv2d_fwd_maxpool(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y,
                            cl_mem argmax, cl_mem work);
/* The same, then y = act(y + bias[f]) (enum kern_act; bias F floats) as kern_bias_act_fwd gives
 * it: a conv's bias and activation after its max pool. act < 0 applies nothing (bias unused). */
int kern_conv2d_fwd_maxpool_act(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y,
                                cl_mem argmax, int act, cl_mem bias, cl_mem work);

/* dx = conv backward-data of dy (N·OH·OW × F) with w; overwrites dx (N·H·W·C). */
int kern_conv2d_bwd_data(kern *k, const kern_conv *g, cl_mem dy, cl_mem w, cl_mem dx, cl_mem work);

/* dw[i][j][c][f] = Σ_{n,oh,ow} x[…]·dy[n,oh,ow,f]; overwrites dw (beta 0), or adds when
 * accumulate. Deterministic: the long sum is split in a fixed way and added in a fixed order. */
int kern_conv2d_bwd_weights(kern *k, const kern_conv *g, cl_mem x, cl_mem dy, cl_mem dw,
                            int accumulate, cl_mem work);

/* kern_conv2d_bwd_weights with dy given by the 2×2 stride-2 max pool kern_conv2d_fwd_maxpool
 * feeds: dy and argmax are the pool's (N·(OH/2)·(OW/2)·F), and dw is what kern_pool2d_bwd then
 * kern_conv2d_bwd_weights give, bit for bit, without the conv-sized gradient. -EINVAL where
 * kern_conv2d_fwd_maxpool_ok is 0. */
int kern_conv2d_bwd_weights_maxpool(kern *k, const kern_conv *g, cl_mem x, cl_mem dy, cl_mem argmax,
                                    cl_mem dw, int accumulate, cl_mem work);

enum kern_pool_mode { KERN_POOL_MAX = 0, KERN_POOL_AVG = 1 };

/* Pooling geometry, NHWC; a window with no cell inside the image gives 0 (and argmax −1). */
typedef struct kern_pool {
    int n, h, w, c, kh, kw, sh, sw, pt, pl, oh, ow;
} kern_pool;

/* Max: y = max over the window's cells inside the image; argmax (int32, N·OH·OW·C, may be NULL
 * for inference) records the flat input index hit (ties: first in row-major window order).
 * Avg: mean over the cells inside the image. Global average pooling = a window of h×w. */
int kern_pool2d_fwd(kern *k, int mode, const kern_pool *g, cl_mem x, cl_mem y, cl_mem argmax);

/* dx overwritten: max routes dy to argmax, avg spreads dy/count. */
int kern_pool2d_bwd(kern *k, int mode, const kern_pool *g, cl_mem dy, cl_mem argmax, cl_mem dx);

/* Batch normalisation over rows × c (NHWC flattened; per column c). Training: batch mean and
 * biased variance → y = gamma·(x−mean)·invstd + beta; saves mean and invstd (c floats each) for
 * backward and updates moving_mean/moving_var (moving = momentum·moving + (1−momentum)·batch).
 * y may be x. */
int kern_batchnorm_fwd_train(kern *k, int rows, int c, float momentum, float eps, cl_mem x,
                             cl_mem gamma, cl_mem beta, cl_mem moving_mean, cl_mem moving_var,
                             cl_mem save_mean, cl_mem save_invstd, cl_mem y);

/* Inference: y = gamma·(x − moving_mean)/sqrt(moving_var + eps) + beta. y may be x. */
int kern_batchnorm_fwd_infer(kern *k, int rows, int c, float eps, cl_mem x, cl_mem gamma,
                             cl_mem beta, cl_mem moving_mean, cl_mem moving_var, cl_mem y);

/* Backward given x (the forward input), dy, gamma and the saved statistics: dx (overwritten, may
 * be dy), dgamma and dbeta (overwritten). */
int kern_batchnorm_bwd(kern *k, int rows, int c, cl_mem x, cl_mem dy, cl_mem gamma,
                       cl_mem save_mean, cl_mem save_invstd, cl_mem dx, cl_mem dgamma,
                       cl_mem dbeta);

/* The image batch: for i < rows, image idx[start+i] of src (n_src images of sh×sw×c NHWC, uint8
 * when src_u8 else float32) → dst[i] (dh×dw×c float32): bilinear resize with half-pixel centres
 * (TensorFlow's resize / PyTorch interpolate align_corners=False, no antialias; identity when
 * sizes are equal), value·scale, then (v − mean[ch]) / std[ch] (mean/std c floats, may be NULL
 * for none), then augmentation when flip or crop: the output is the crop at offsets (oy, ox) of
 * the image zero-padded by crop pixels on each side, mirrored left-right when flipped. With
 * u_d = ref_uniform(seed, (((uint64)epoch << 32) + image index)·4 + d): flipped when u_0 < 1/2
 * (only when flip), oy = floor(u_1·(2·crop + 1)) and ox = floor(u_2·(2·crop + 1)) (crop > 0), so
 * the same job, epoch and image always get the same transform. An index outside [0, n_src)
 * gives a zero image. */
typedef struct kern_image {
    int src_u8, n_src, sh, sw, c, dh, dw;
    float scale;
    int flip, crop; /* augmentation; both 0: none */
    uint64_t seed;
    int epoch;
} kern_image;

int kern_image_batch(kern *k, const kern_image *g, int rows, cl_mem src, cl_mem idx, int start,
                     cl_mem mean, cl_mem std, cl_mem dst);

#endif
