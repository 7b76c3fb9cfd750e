/* warmup: kern_warmup — every kernel of a kern's families launched once at each local size its
 * wrapper can choose, so that PoCL compiles those work-group functions now rather than inside a
 * job's first batch, and ocl_ctx_save() can keep them in the kernel cache.
 *
 * PoCL specialises a work-group function on the local size and on whether every dimension of the
 * grid is narrower than 65535 work-items ("smallgrid"); a launch that differs in either compiles
 * again. So each kernel runs at each local size its wrapper can pick and, where a training step
 * can reach it, also on a grid at least WARM_WIDE wide: the optimisers and dropout over a whole
 * model (n_params past 65535), bias + activation over a conv layer's rows (GPU form), the
 * split weight-gradient sum of a large conv, and the patch kernels of the GEMM conv path.
 *
 * The shapes follow the launch rules in kernels.c and conv.c: a rows kernel's work-group is lx
 * columns (the next power of two ≥ cols, at most 32) by local/lx rows, so cols 1, 2, 4, 8, 16
 * and 32 reach every lx; kern_bias_act_bwd and kern_reduce_sum take a second pass past one
 * work-group's worth of rows, reached with 32·local_red + 1 rows. The conv geometries reach
 * both backward-data forms (few input channels or many), padding, the dilated dy, the split
 * weight-gradient sum and its padded dy; the image families run max and average pooling,
 * batchnorm in training, inference and backward, and the image batch from uint8 and float. Most
 * of those kernels run one work-item per work-group and have a single local size, as has
 * GEMM's split-K sum, reached by a product long enough to split. Losses, gathers and reductions
 * never reach a wide grid in a step (their rows are a batch or a validation chunk) and are
 * warmed on small ones.
 *
 * Buffers are zero-filled so that every index is in range and no value traps; results are
 * discarded. Families outside the kern's mask are skipped, and so are families this file has
 * no lines for (a new family until its wrappers are added here): they compile on first launch. */
#include <stdlib.h>

#include "kernels/kern_priv.h"

/* A grid this wide in one dimension gets PoCL's general (not "smallgrid") work-group function. */
#define WARM_WIDE 65536

/* A zero-filled device buffer of floats floats (at least one). */
static int warm_buf(kern *k, size_t floats, cl_mem *out, char *err)
{
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    cl_mem m;
    int rc = ocl_buffer_new(k->c, bytes, &m, err);
    if (rc < 0)
        return rc;
    float zero = 0.0f;
    cl_int cl = clEnqueueFillBuffer(k->c->queue, m, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        clReleaseMemObject(m);
        return err_set(err, -EIO, "warming up the kernels: clEnqueueFillBuffer: %s",
                       ocl_strerror(cl));
    }
    *out = m;
    return 0;
}

static void warm_release(cl_mem *bufs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bufs[i])
            clReleaseMemObject(bufs[i]);
}

static int warm_rows(kern *k, cl_mem a, cl_mem b, cl_mem c, cl_mem idx, int big)
{
    static const int widths[] = {1, 2, 4, 8, 16, 32};
    int rc = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0] && rc == 0; i++) {
        int cols = widths[i];
        if (k->families & KERN_FAM_ACTIVATION) {
            rc = kern_bias_act_fwd(k, 1, cols, KERN_ACT_RELU, a, c);
            if (rc == 0)
                rc = kern_bias_act_fwd(k, WARM_WIDE, cols, KERN_ACT_RELU, a, c);
            if (rc == 0)
                rc = kern_bias_act_bwd(k, 1, cols, KERN_ACT_RELU, a, b, c);
            if (rc == 0)
                rc = kern_bias_act_bwd(k, big, cols, KERN_ACT_RELU, a, b, c);
        }
        if (rc == 0 && (k->families & KERN_FAM_GATHER))
            rc = kern_gather_rows(k, 1, cols, a, idx, 0, b);
    }
    return rc;
}

static int warm_flat(kern *k, cl_mem a, cl_mem b, cl_mem c, cl_mem idx, int big)
{
    int rc = 0;
    if (k->families & KERN_FAM_LOSS) {
        rc = kern_softmax_xent(k, 1, 2, a, idx, 1.0f, b, c, c);
        if (rc == 0)
            rc = kern_bce(k, 1, a, a, 1.0f, b, c, c);
        if (rc == 0)
            rc = kern_mse(k, 1, 1, a, a, 1.0f, b, c);
    }
    static const int sizes[] = {1, WARM_WIDE};
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        int n = sizes[i];
        if (k->families & KERN_FAM_DROPOUT)
            rc = kern_dropout(k, n, 0.5f, 1, 0, a, b);
        if (rc == 0 && (k->families & KERN_FAM_OPTIM)) {
            rc = kern_sgd(k, n, 0.1f, 0.9f, a, b, c);
            if (rc == 0)
                rc = kern_adam(k, n, 0.1f, 0.9f, 0.999f, 1e-7f, 0.1f, 0.001f, a, b, c, a);
        }
    }
    if (rc == 0 && (k->families & KERN_FAM_REDUCE)) {
        rc = kern_reduce_sum(k, 1, a, c, 0, 0);
        if (rc == 0)
            rc = kern_reduce_sum(k, big, a, c, 0, 0);
    }
    /* NN with at most 16 columns (gemm_nn_narrow) and with more (gemm_cpu); TN with at most 16
     * columns (gemm_tn_narrow) and NT with a K of at most 16 (gemm_nt_narrow): a dense layer's
     * three products at a few outputs, as a classifier's last layer has */
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = kern_gemm(k, 0, 0, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8);
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = kern_gemm(k, 0, 0, 8, 32, 32, 1.0f, a, 32, b, 32, 0.0f, c, 32);
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = kern_gemm(k, 1, 0, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8);
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = kern_gemm(k, 0, 1, 8, 32, 8, 1.0f, a, 8, b, 8, 0.0f, c, 32);
    return rc;
}

/* A 64×64 product over a K long enough for gemm.c to split it over the compute units (its
 * GEMM_SPLIT_MIN_WORK per unit, and two K blocks at least), so that gemm_cpu_sum runs too. */
static int warm_gemm_split(kern *k, char *err)
{
    enum { MN = 64 };
    int units = k->c->dev.compute_units ? (int)k->c->dev.compute_units : 1;
    long long need = ((1LL << 22) * units + MN * MN - 1) / (MN * MN);
    int depth = need < 512 ? 512 : need > (1 << 24) ? (1 << 24) : (int)need;
    cl_mem a = NULL, b = NULL, c = NULL;
    int rc = warm_buf(k, (size_t)MN * depth, &a, err);
    if (rc == 0)
        rc = warm_buf(k, (size_t)MN * depth, &b, err);
    if (rc == 0)
        rc = warm_buf(k, MN * MN, &c, err);
    if (rc == 0 && kern_gemm(k, 0, 0, MN, MN, depth, 1.0f, a, depth, b, MN, 0.0f, c, MN) < 0)
        rc = err_set(err, -EIO, "warming up the GEMM split: %s", kern_last_error(k));
    cl_mem all[] = {a, b, c};
    warm_release(all, 3);
    return rc;
}

/* One conv geometry: forward, backward-weights (split when the pixels allow) and backward-data,
 * on zero buffers of their sizes. Square images and kernels; same padding when same. */
static int warm_conv_one(kern *k, int n, int hw, int c, int f, int kk, int stride, int same,
                         char *err)
{
    kern_conv g = {.n = n, .h = hw, .w = hw, .c = c, .f = f, .kh = kk, .kw = kk};
    g.sh = g.sw = stride;
    int out = same ? (hw + stride - 1) / stride : (hw - kk) / stride + 1;
    int pad = same ? ((out - 1) * stride + kk - hw) : 0;
    g.pt = g.pl = pad > 0 ? pad / 2 : 0;
    g.oh = g.ow = out;
    size_t xs = (size_t)n * hw * hw * c, ys = (size_t)n * out * out * f,
           ws = (size_t)kk * kk * c * f;
    size_t work = kern_conv_workspace(k, &g) / sizeof(float) + 1;
    cl_mem b[5] = {NULL};
    int rc = warm_buf(k, xs, &b[0], err);
    if (rc == 0)
        rc = warm_buf(k, ys, &b[1], err);
    if (rc == 0)
        rc = warm_buf(k, ws, &b[2], err);
    if (rc == 0)
        rc = warm_buf(k, work, &b[3], err);
    if (rc == 0)
        rc = warm_buf(k, xs > ys ? xs : ys, &b[4], err);
    int wrc = 0;
    if (rc == 0)
        wrc = kern_conv2d_fwd(k, &g, b[0], b[2], b[1], b[3]);
    if (rc == 0 && wrc == 0)
        wrc = kern_conv2d_bwd_weights(k, &g, b[0], b[1], b[2], 0, b[3]);
    if (rc == 0 && wrc == 0)
        wrc = kern_conv2d_bwd_data(k, &g, b[1], b[2], b[4], b[3]);
    /* a conv followed by a 2×2 max pool, fused (direct path): forward with and without the
     * deferred bias and activation, and the weight gradient through the pool's argmax (int32, in
     * b[4]) and pooled dy (b[1]) */
    if (rc == 0 && wrc == 0 && kern_conv2d_fwd_maxpool_ok(k) && out >= 2) {
        wrc = kern_conv2d_fwd_maxpool_act(k, &g, b[0], b[2], b[1], b[4], KERN_ACT_RELU, b[2], b[3]);
        if (wrc == 0)
            wrc = kern_conv2d_fwd_maxpool(k, &g, b[0], b[2], b[1], b[4], b[3]);
        if (wrc == 0)
            wrc = kern_conv2d_bwd_weights_maxpool(k, &g, b[0], b[1], b[4], b[2], 0, b[3]);
    }
    if (wrc < 0)
        rc = err_set(err, wrc, "warming up the conv kernels: %s", kern_last_error(k));
    /* the queue is in order and OpenCL keeps a released buffer until its commands ran */
    warm_release(b, 5);
    return rc;
}

static int warm_conv(kern *k, char *err)
{
    /* 3 input channels: backward-data through dy·Wᵀ and conv_col2im_rows; 16 filters: dy padded
     * to 32 columns; 48×48 pixels: the weight gradient split in parts and summed */
    int rc = warm_conv_one(k, 1, 48, 3, 16, 3, 1, 1, err);
    /* many channels, valid, stride 2: backward-data as a conv of the dilated, padded dy */
    if (rc == 0)
        rc = warm_conv_one(k, 2, 9, 16, 32, 3, 2, 0, err);
    /* 73,728 weights with a split sum: conv_dw_sum on a wide grid */
    if (rc == 0)
        rc = warm_conv_one(k, 1, 48, 64, 128, 3, 1, 1, err);
    /* 1×1 with stride 2 on 1..32 channels: every column block of the GEMM path's patch kernels;
     * then 65,536 output pixels: those kernels on a wide grid, with 9 patch columns (16-wide
     * blocks) and 27 (32-wide: an RGB image's 3×3 windows, the seed CNN's first layer) */
    for (int c = 1; c <= 32 && rc == 0; c *= 2)
        rc = warm_conv_one(k, 1, 8, c, 4, 1, 2, 0, err);
    if (rc == 0)
        rc = warm_conv_one(k, 1, 256, 1, 1, 3, 1, 1, err);
    if (rc == 0)
        rc = warm_conv_one(k, 1, 256, 3, 1, 3, 1, 1, err);
    return rc;
}

/* Max and average pooling forward and backward, 2×2 on 8×8×4, and global average pooling. */
static int warm_pool(kern *k, char *err)
{
    cl_mem b[3] = {NULL};
    int rc = warm_buf(k, 2 * 8 * 8 * 4, &b[0], err);
    if (rc == 0)
        rc = warm_buf(k, 2 * 8 * 8 * 4, &b[1], err);
    if (rc == 0)
        rc = warm_buf(k, 2 * 8 * 8 * 4, &b[2], err);
    kern_pool g = {
        .n = 2, .h = 8, .w = 8, .c = 4, .kh = 2, .kw = 2, .sh = 2, .sw = 2, .oh = 4, .ow = 4};
    kern_pool gl = {
        .n = 2, .h = 8, .w = 8, .c = 4, .kh = 8, .kw = 8, .sh = 8, .sw = 8, .oh = 1, .ow = 1};
    const kern_pool *gs[] = {&g, &gl};
    int wrc = 0;
    for (int mode = KERN_POOL_MAX; mode <= KERN_POOL_AVG && rc == 0 && wrc == 0; mode++)
        for (size_t i = 0; i < 2 && wrc == 0; i++) {
            cl_mem arg = mode == KERN_POOL_MAX ? b[2] : NULL;
            wrc = kern_pool2d_fwd(k, mode, gs[i], b[0], b[1], arg);
            if (wrc == 0)
                wrc = kern_pool2d_bwd(k, mode, gs[i], b[1], arg, b[0]);
        }
    if (wrc < 0)
        rc = err_set(err, wrc, "warming up the pooling kernels: %s", kern_last_error(k));
    warm_release(b, 3);
    return rc;
}

/* Batchnorm over 4096 rows of 8 channels (several parts) and over one row. */
static int warm_batchnorm(kern *k, char *err)
{
    enum { ROWS = 4096, C = 8 };
    cl_mem x = NULL, y = NULL, v[6] = {NULL};
    int rc = warm_buf(k, ROWS * C, &x, err);
    if (rc == 0)
        rc = warm_buf(k, ROWS * C, &y, err);
    for (int i = 0; i < 6 && rc == 0; i++)
        rc = warm_buf(k, C, &v[i], err);
    static const int rows[] = {1, ROWS};
    int wrc = 0;
    for (size_t i = 0; i < 2 && rc == 0 && wrc == 0; i++) {
        wrc = kern_batchnorm_fwd_train(k, rows[i], C, 0.99f, 1e-3f, x, v[0], v[1], v[2], v[3], v[4],
                                       v[5], y);
        if (wrc == 0)
            wrc = kern_batchnorm_fwd_infer(k, rows[i], C, 1e-3f, x, v[0], v[1], v[2], v[3], y);
        if (wrc == 0)
            wrc = kern_batchnorm_bwd(k, rows[i], C, x, y, v[0], v[4], v[5], y, v[0], v[1]);
    }
    if (wrc < 0)
        rc = err_set(err, wrc, "warming up the batchnorm kernels: %s", kern_last_error(k));
    cl_mem all[] = {x, y};
    warm_release(all, 2);
    warm_release(v, 6);
    return rc;
}

/* The image batch from uint8 and from float sources, resized, standardised and augmented. */
static int warm_image(kern *k, char *err)
{
    cl_mem src = NULL, dst = NULL, idx = NULL, ms = NULL;
    int rc = warm_buf(k, 2 * 8 * 8 * 3, &src, err);
    if (rc == 0)
        rc = warm_buf(k, 2 * 16 * 16 * 3, &dst, err);
    if (rc == 0)
        rc = warm_buf(k, 2, &idx, err);
    if (rc == 0)
        rc = warm_buf(k, 3, &ms, err);
    int wrc = 0;
    for (int u8 = 0; u8 < 2 && rc == 0 && wrc == 0; u8++) {
        kern_image g = {.src_u8 = u8,
                        .n_src = 2,
                        .sh = 8,
                        .sw = 8,
                        .c = 3,
                        .dh = 16,
                        .dw = 16,
                        .scale = 1.0f,
                        .flip = 1,
                        .crop = 2,
                        .seed = 1};
        wrc = kern_image_batch(k, &g, 2, src, idx, 0, ms, ms, dst);
    }
    if (wrc < 0)
        rc = err_set(err, wrc, "warming up the image kernel: %s", kern_last_error(k));
    cl_mem all[] = {src, dst, idx, ms};
    warm_release(all, 4);
    return rc;
}

int kern_warmup(kern *k, char *err)
{
    int big = 32 * (int)k->local_red + 1;
    size_t floats = (size_t)WARM_WIDE * 32, small = WARM_WIDE;
    cl_mem all[4] = {NULL};
    int rc = warm_buf(k, floats, &all[0], err);
    if (rc == 0)
        rc = warm_buf(k, floats, &all[1], err);
    if (rc == 0)
        rc = warm_buf(k, small, &all[2], err);
    if (rc == 0)
        rc = warm_buf(k, small, &all[3], err);
    if (rc == 0) {
        int wrc = warm_rows(k, all[0], all[1], all[2], all[3], big);
        if (wrc == 0)
            wrc = warm_flat(k, all[0], all[1], all[2], all[3], big);
        if (wrc < 0)
            rc = err_set(err, wrc, "warming up the kernels: %s", kern_last_error(k));
    }
    warm_release(all, 4);
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = warm_gemm_split(k, err);
    if (rc == 0 && (k->families & KERN_FAM_CONV))
        rc = warm_conv(k, err);
    if (rc == 0 && (k->families & KERN_FAM_POOL))
        rc = warm_pool(k, err);
    if (rc == 0 && (k->families & KERN_FAM_BATCHNORM))
        rc = warm_batchnorm(k, err);
    if (rc == 0 && (k->families & KERN_FAM_IMAGE))
        rc = warm_image(k, err);
    if (rc == 0)
        rc = ocl_finish(k->c, err);
    return rc;
}
