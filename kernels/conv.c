/* conv: the host side of the image families — convolution (conv.cl), pooling (pool.cl),
 * batch normalisation (batchnorm.cl) and the image batch (image.cl).
 *
 * Layout: activations NHWC, so a conv output [N·OH·OW][F] is a plain row-major matrix; weights
 * HWIO [KH][KW][C][F]. A convolution is a GEMM over the patch matrix col[N·OH·OW][KH·KW·C]
 * (conv.cl explains): forward writes col into the caller's workspace with conv_im2col and runs
 * kern_gemm(col, W); backward-weights the same im2col then kern_gemm(colᵀ, dy), whose split-K
 * path adds the long N·OH·OW sum in fixed parts and a fixed order; backward-data runs
 * kern_gemm(dy, Wᵀ) into the workspace and conv_col2im gathers it into dx. A 1×1 kernel with
 * stride 1 and no padding needs no patch matrix: x is col, and its workspace is 0 bytes.
 *
 * Every cl_kernel of these families is created by conv_kernel_create from k->c->program, the one
 * place that knows where programs come from. Wrappers check sizes and buffer extents, enqueue on
 * the in-order queue and never wait; they return 0, -EINVAL (with k->err) before enqueueing
 * anything, or -EIO. Sizes are int on the device: every tensor must stay below INT_MAX − 4096
 * elements. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

#include "kernels/kern_priv.h"

#define BN_CHUNK 128 /* rows one work-item of bn_part adds */

struct conv_kernels {
    cl_kernel im2col, col2im, pool_fwd, pool_bwd, bn_part, bn_stats, bn_grads, bn_apply,
        bn_bwd_apply, image;
};

static const struct {
    const char *name;
    size_t offset;
} conv_table[] = {
    {"conv_im2col", offsetof(struct conv_kernels, im2col)},
    {"conv_col2im", offsetof(struct conv_kernels, col2im)},
    {"pool_fwd", offsetof(struct conv_kernels, pool_fwd)},
    {"pool_bwd", offsetof(struct conv_kernels, pool_bwd)},
    {"bn_part", offsetof(struct conv_kernels, bn_part)},
    {"bn_stats", offsetof(struct conv_kernels, bn_stats)},
    {"bn_grads", offsetof(struct conv_kernels, bn_grads)},
    {"bn_apply", offsetof(struct conv_kernels, bn_apply)},
    {"bn_bwd_apply", offsetof(struct conv_kernels, bn_bwd_apply)},
    {"image_batch", offsetof(struct conv_kernels, image)},
};
#define CONV_KERNEL_COUNT (sizeof conv_table / sizeof conv_table[0])

static cl_kernel *conv_slot(struct conv_kernels *g, size_t i)
{
    return (cl_kernel *)((char *)g + conv_table[i].offset);
}

/* The one place these families create a kernel from the context's program. */
static int conv_kernel_create(kern *k, const char *name, cl_kernel *out, char *err)
{
    cl_int rc;
    cl_kernel kl = clCreateKernel(k->c->program, name, &rc);
    if (rc != CL_SUCCESS)
        return err_set(err, -EIO, "clCreateKernel(%s): %s", name, ocl_strerror(rc));
    *out = kl;
    return 0;
}

int conv_kernels_new(kern *k, char *err)
{
    struct conv_kernels *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(err, -ENOMEM, "out of memory for the conv kernels");
    for (size_t i = 0; i < CONV_KERNEL_COUNT; i++) {
        int rc = conv_kernel_create(k, conv_table[i].name, conv_slot(g, i), err);
        if (rc < 0) {
            conv_kernels_free(g);
            return rc;
        }
    }
    k->conv = g;
    return 0;
}

void conv_kernels_free(struct conv_kernels *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < CONV_KERNEL_COUNT; i++)
        if (*conv_slot(g, i))
            clReleaseKernel(*conv_slot(g, i));
    free(g);
}

/* 0 when m holds at least floats·4 bytes; -EINVAL naming the buffer otherwise. */
static int need_floats(kern *k, const char *who, const char *name, cl_mem m, long long floats)
{
    size_t have = kern_mem_bytes(m);
    if (!m || (unsigned long long)have < (unsigned long long)floats * 4)
        return err_set(k->err, -EINVAL, "%s: %s needs %lld bytes, its buffer has %zu", who, name,
                       floats * 4, have);
    return 0;
}

/* Element count of an n×a×b×c tensor, or -1 past what the int indices allow. */
static long long tensor_elems(long long n, long long a, long long b, long long c)
{
    long long e = n * a * b;
    if (e > INT_MAX || e * c > INT_MAX - 4096)
        return -1;
    return e * c;
}

/* Checks a geometry: positive sizes (n may be 0), and every tensor, the patch matrix included,
 * small enough for int indices. */
static int conv_check(kern *k, const char *who, const kern_conv *g)
{
    if (!g || g->n < 0 || g->h < 1 || g->w < 1 || g->c < 1 || g->f < 1 || g->kh < 1 || g->kw < 1 ||
        g->sh < 1 || g->sw < 1 || g->pt < 0 || g->pl < 0 || g->oh < 1 || g->ow < 1)
        return err_set(k->err, -EINVAL, "%s: bad geometry", who);
    if (tensor_elems(g->n, g->h, g->w, g->c) < 0 || tensor_elems(g->n, g->oh, g->ow, g->f) < 0 ||
        tensor_elems(g->n, g->oh, g->ow, (long long)g->kh * g->kw * g->c) < 0 ||
        (long long)g->kh * g->kw * g->c * g->f > INT_MAX - 4096)
        return err_set(k->err, -EINVAL, "%s: %d images of %dx%dx%d are more than one call handles",
                       who, g->n, g->h, g->w, g->c);
    return 0;
}

/* x is its own patch matrix: 1×1, stride 1, no padding, same size out. */
static int conv_is_pointwise(const kern_conv *g)
{
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
           g->oh == g->h && g->ow == g->w;
}

size_t kern_conv_workspace(kern *k, const kern_conv *g)
{
    (void)k;
    if (!g || conv_is_pointwise(g))
        return 0;
    return (size_t)g->n * g->oh * g->ow * g->kh * g->kw * g->c * sizeof(float);
}

/* The patch matrix of x: x itself for a pointwise conv, else written into work by conv_im2col.
 * *col is set on success. */
static int conv_patches(kern *k, const char *who, const kern_conv *g, cl_mem x, cl_mem work,
                        cl_mem *col)
{
    if (conv_is_pointwise(g)) {
        *col = x;
        return 0;
    }
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c;
    karg a[] = {ARG(g->h),  ARG(g->w),  ARG(g->c),  ARG(g->kh),   ARG(g->kw),
                ARG(g->sh), ARG(g->sw), ARG(g->pt), ARG(g->pl),   ARG(g->oh),
                ARG(g->ow), ARG(rows),  ARG_MEM(x), ARG_MEM(work)};
    int rc = kern_launch_rows(k, who, k->conv->im2col, a, NARGS(a), rows, kkc);
    if (rc == 0)
        *col = work;
    return rc;
}

/* The common checks of the three conv calls: geometry, the workspace, and in, out and weights
 * of their sizes. */
static int conv_args(kern *k, const char *who, const kern_conv *g, cl_mem in, long long in_n,
                     const char *in_name, cl_mem out, long long out_n, const char *out_name,
                     cl_mem wt, cl_mem work)
{
    int rc = conv_check(k, who, g);
    if (rc < 0)
        return rc;
    if (g->n == 0)
        return 0;
    size_t ws = kern_conv_workspace(k, g);
    if (ws && kern_mem_bytes(work) < ws)
        return err_set(k->err, -EINVAL, "%s: the workspace needs %zu bytes, its buffer has %zu",
                       who, ws, kern_mem_bytes(work));
    rc = need_floats(k, who, in_name, in, in_n);
    if (rc == 0)
        rc = need_floats(k, who, out_name, out, out_n);
    if (rc == 0)
        rc = need_floats(k, who, "w", wt, (long long)g->kh * g->kw * g->c * g->f);
    return rc;
}

int kern_conv2d_fwd(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y, cl_mem work)
{
    const char *who = "kern_conv2d_fwd";
    int rc = conv_args(k, who, g, x, tensor_elems(g->n, g->h, g->w, g->c), "x", y,
                       tensor_elems(g->n, g->oh, g->ow, g->f), "y", w, work);
    if (rc < 0 || g->n == 0)
        return rc;
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c;
    cl_mem col = x;
    rc = conv_patches(k, who, g, x, work, &col);
    if (rc < 0)
        return rc;
    return kern_gemm(k, 0, 0, rows, g->f, kkc, 1.0f, col, kkc, w, g->f, 0.0f, y, g->f);
}

int kern_conv2d_bwd_data(kern *k, const kern_conv *g, cl_mem dy, cl_mem w, cl_mem dx, cl_mem work)
{
    const char *who = "kern_conv2d_bwd_data";
    int rc = conv_args(k, who, g, dy, tensor_elems(g->n, g->oh, g->ow, g->f), "dy", dx,
                       tensor_elems(g->n, g->h, g->w, g->c), "dx", w, work);
    if (rc < 0 || g->n == 0)
        return rc;
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c;
    if (conv_is_pointwise(g))
        return kern_gemm(k, 0, 1, rows, kkc, g->f, 1.0f, dy, g->f, w, g->f, 0.0f, dx, kkc);
    rc = kern_gemm(k, 0, 1, rows, kkc, g->f, 1.0f, dy, g->f, w, g->f, 0.0f, work, kkc);
    if (rc < 0)
        return rc;
    int npix = g->n * g->h * g->w;
    karg a[] = {ARG(npix),  ARG(g->h),  ARG(g->w),     ARG(g->c),  ARG(g->kh),
                ARG(g->kw), ARG(g->sh), ARG(g->sw),    ARG(g->pt), ARG(g->pl),
                ARG(g->oh), ARG(g->ow), ARG_MEM(work), ARG_MEM(dx)};
    return kern_launch_rows(k, who, k->conv->col2im, a, NARGS(a), npix, g->c);
}

int kern_conv2d_bwd_weights(kern *k, const kern_conv *g, cl_mem x, cl_mem dy, cl_mem dw,
                            int accumulate, cl_mem work)
{
    const char *who = "kern_conv2d_bwd_weights";
    int rc = conv_args(k, who, g, x, tensor_elems(g->n, g->h, g->w, g->c), "x", dy,
                       tensor_elems(g->n, g->oh, g->ow, g->f), "dy", dw, work);
    if (rc < 0)
        return rc;
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c;
    float beta = accumulate ? 1.0f : 0.0f;
    if (g->n == 0) /* the sum of nothing: kern_gemm with K = 0 scales dw by beta */
        return kern_gemm(k, 1, 0, kkc, g->f, 0, 1.0f, x, kkc, dy, g->f, beta, dw, g->f);
    cl_mem col = x;
    rc = conv_patches(k, who, g, x, work, &col);
    if (rc < 0)
        return rc;
    return kern_gemm(k, 1, 0, kkc, g->f, rows, 1.0f, col, kkc, dy, g->f, beta, dw, g->f);
}

/* Pooling: a known mode, a geometry whose tensors stay int-indexable, and buffers that hold them:
 * in (N·H·W·C floats), out (N·OH·OW·C) and, when not NULL, argmax (as out). */
static int pool_check(kern *k, const char *who, int mode, const kern_pool *g, cl_mem in,
                      const char *in_name, cl_mem out, const char *out_name, cl_mem argmax)
{
    if (mode != KERN_POOL_MAX && mode != KERN_POOL_AVG)
        return err_set(k->err, -EINVAL, "%s: unknown pooling mode %d", who, mode);
    if (!g || g->n < 0 || g->h < 1 || g->w < 1 || g->c < 1 || g->kh < 1 || g->kw < 1 || g->sh < 1 ||
        g->sw < 1 || g->pt < 0 || g->pl < 0 || g->oh < 1 || g->ow < 1)
        return err_set(k->err, -EINVAL, "%s: bad geometry", who);
    long long in_n = tensor_elems(g->n, g->h, g->w, g->c);
    long long out_n = tensor_elems(g->n, g->oh, g->ow, g->c);
    if (in_n < 0 || out_n < 0)
        return err_set(k->err, -EINVAL, "%s: %d images of %dx%dx%d are more than one call handles",
                       who, g->n, g->h, g->w, g->c);
    if (g->n == 0)
        return 0;
    int rc = need_floats(k, who, in_name, in, in_n);
    if (rc == 0)
        rc = need_floats(k, who, out_name, out, out_n);
    if (rc == 0 && argmax)
        rc = need_floats(k, who, "argmax", argmax, out_n);
    return rc;
}

/* The geometry arguments both pooling kernels take after their count. */
#define POOL_GEOM_ARGS(g)                                                                          \
    ARG((g)->h), ARG((g)->w), ARG((g)->c), ARG((g)->kh), ARG((g)->kw), ARG((g)->sh), ARG((g)->sw), \
        ARG((g)->pt), ARG((g)->pl), ARG((g)->oh), ARG((g)->ow)

int kern_pool2d_fwd(kern *k, int mode, const kern_pool *g, cl_mem x, cl_mem y, cl_mem argmax)
{
    const char *who = "kern_pool2d_fwd";
    int has_arg = argmax != NULL && mode == KERN_POOL_MAX;
    int rc = pool_check(k, who, mode, g, x, "x", y, "y", has_arg ? argmax : NULL);
    if (rc < 0 || g->n == 0)
        return rc;
    int nout = g->n * g->oh * g->ow;
    cl_mem arg = has_arg ? argmax : y; /* a buffer the kernel never writes when has_arg is 0 */
    karg a[] = {ARG(mode),  ARG(nout),    POOL_GEOM_ARGS(g), ARG_MEM(x),
                ARG_MEM(y), ARG(has_arg), ARG_MEM(arg)};
    return kern_launch_rows(k, who, k->conv->pool_fwd, a, NARGS(a), nout, g->c);
}

int kern_pool2d_bwd(kern *k, int mode, const kern_pool *g, cl_mem dy, cl_mem argmax, cl_mem dx)
{
    const char *who = "kern_pool2d_bwd";
    int is_max = mode == KERN_POOL_MAX;
    if (is_max && !argmax)
        return err_set(k->err, -EINVAL, "%s: max pooling needs the argmax of its forward", who);
    int rc = pool_check(k, who, mode, g, dx, "dx", dy, "dy", is_max ? argmax : NULL);
    if (rc < 0 || g->n == 0)
        return rc;
    int npix = g->n * g->h * g->w;
    cl_mem arg = is_max ? argmax : dy;
    karg a[] = {ARG(mode), ARG(npix), POOL_GEOM_ARGS(g), ARG_MEM(dy), ARG_MEM(arg), ARG_MEM(dx)};
    return kern_launch_rows(k, who, k->conv->pool_bwd, a, NARGS(a), npix, g->c);
}

/* Batchnorm: rows × c with c ≥ 1, and each named buffer at least that big. */
static int bn_check(kern *k, const char *who, int rows, int c, cl_mem x, cl_mem y)
{
    int n = 0, rc = kern_elements(k, who, rows, c, &n);
    if (rc < 0)
        return rc;
    if (c < 1)
        return err_set(k->err, -EINVAL, "%s: batchnorm needs at least one channel", who);
    if (rows == 0)
        return 0;
    rc = need_floats(k, who, "x", x, n);
    if (rc == 0)
        rc = need_floats(k, who, "y", y, n);
    return rc;
}

/* bn_part over rows × c into k->scratch (2·nparts·c floats); *nparts set. */
static int bn_parts(kern *k, const char *who, int mode, int rows, int c, cl_mem x, cl_mem dy,
                    cl_mem mean, cl_mem invstd, int *nparts)
{
    int chunk = BN_CHUNK, np = (rows + chunk - 1) / chunk;
    *nparts = np;
    int rc = kern_scratch_need(k, who, (size_t)2 * (np ? np : 1) * c * sizeof(float));
    if (rc < 0 || np == 0)
        return rc;
    cl_mem part = k->scratch;
    karg a[] = {ARG(mode),  ARG(rows),   ARG(c),        ARG(chunk),      ARG(np),
                ARG_MEM(x), ARG_MEM(dy), ARG_MEM(mean), ARG_MEM(invstd), ARG_MEM(part)};
    return kern_launch_rows(k, who, k->conv->bn_part, a, NARGS(a), np, c);
}

static int bn_apply(kern *k, const char *who, int rows, int c, int stat_is_var, float eps, cl_mem x,
                    cl_mem gamma, cl_mem beta, cl_mem mean, cl_mem stat, cl_mem y)
{
    karg a[] = {ARG(rows),      ARG(c),        ARG(stat_is_var), ARG(eps),      ARG_MEM(x),
                ARG_MEM(gamma), ARG_MEM(beta), ARG_MEM(mean),    ARG_MEM(stat), ARG_MEM(y)};
    return kern_launch_rows(k, who, k->conv->bn_apply, a, NARGS(a), rows, c);
}

int kern_batchnorm_fwd_train(kern *k, int rows, int c, float momentum, float eps, cl_mem x,
                             cl_mem gamma, cl_mem beta, cl_mem moving_mean, cl_mem moving_var,
                             cl_mem save_mean, cl_mem save_invstd, cl_mem y)
{
    const char *who = "kern_batchnorm_fwd_train";
    int rc = bn_check(k, who, rows, c, x, y);
    if (rc < 0 || rows == 0)
        return rc;
    int np = 0;
    rc = bn_parts(k, who, 0, rows, c, x, x, x, x, &np);
    if (rc < 0)
        return rc;
    cl_mem part = k->scratch;
    karg a[] = {ARG(rows),
                ARG(c),
                ARG(np),
                ARG(momentum),
                ARG(eps),
                ARG_MEM(part),
                ARG_MEM(x),
                ARG_MEM(moving_mean),
                ARG_MEM(moving_var),
                ARG_MEM(save_mean),
                ARG_MEM(save_invstd)};
    rc = kern_launch_1d(k, who, k->conv->bn_stats, a, NARGS(a), (size_t)c);
    if (rc < 0)
        return rc;
    return bn_apply(k, who, rows, c, 0, eps, x, gamma, beta, save_mean, save_invstd, y);
}

int kern_batchnorm_fwd_infer(kern *k, int rows, int c, float eps, cl_mem x, cl_mem gamma,
                             cl_mem beta, cl_mem moving_mean, cl_mem moving_var, cl_mem y)
{
    const char *who = "kern_batchnorm_fwd_infer";
    int rc = bn_check(k, who, rows, c, x, y);
    if (rc < 0 || rows == 0)
        return rc;
    return bn_apply(k, who, rows, c, 1, eps, x, gamma, beta, moving_mean, moving_var, y);
}

int kern_batchnorm_bwd(kern *k, int rows, int c, cl_mem x, cl_mem dy, cl_mem gamma,
                       cl_mem save_mean, cl_mem save_invstd, cl_mem dx, cl_mem dgamma, cl_mem dbeta)
{
    const char *who = "kern_batchnorm_bwd";
    int rc = bn_check(k, who, rows, c, x, dy);
    if (rc == 0 && rows > 0)
        rc = need_floats(k, who, "dx", dx, (long long)rows * c);
    if (rc < 0)
        return rc;
    int np = 0;
    rc = bn_parts(k, who, 1, rows, c, x, dy, save_mean, save_invstd, &np);
    if (rc < 0)
        return rc;
    cl_mem part = k->scratch;
    karg a[] = {ARG(c), ARG(np), ARG_MEM(part), ARG_MEM(dgamma), ARG_MEM(dbeta)};
    rc = kern_launch_1d(k, who, k->conv->bn_grads, a, NARGS(a), (size_t)c);
    if (rc < 0 || rows == 0)
        return rc;
    karg b[] = {ARG(rows),
                ARG(c),
                ARG_MEM(x),
                ARG_MEM(dy),
                ARG_MEM(gamma),
                ARG_MEM(save_mean),
                ARG_MEM(save_invstd),
                ARG_MEM(dgamma),
                ARG_MEM(dbeta),
                ARG_MEM(dx)};
    return kern_launch_rows(k, who, k->conv->bn_bwd_apply, b, NARGS(b), rows, c);
}

int kern_image_batch(kern *k, const kern_image *g, int rows, cl_mem src, cl_mem idx, int start,
                     cl_mem mean, cl_mem std, cl_mem dst)
{
    const char *who = "kern_image_batch";
    if (!g || g->n_src < 0 || g->sh < 1 || g->sw < 1 || g->c < 1 || g->dh < 1 || g->dw < 1 ||
        g->crop < 0 || rows < 0 || start < 0)
        return err_set(k->err, -EINVAL, "%s: bad geometry", who);
    long long out_n = tensor_elems(rows, g->dh, g->dw, g->c);
    long long src_n = tensor_elems(g->n_src, g->sh, g->sw, g->c);
    if (out_n < 0 || src_n < 0)
        return err_set(k->err, -EINVAL, "%s: %d images of %dx%dx%d are more than one call handles",
                       who, rows, g->dh, g->dw, g->c);
    if (rows == 0)
        return 0;
    if (((size_t)start + rows) * 4 > kern_mem_bytes(idx))
        return err_set(k->err, -EINVAL, "%s: indices [%d, %lld) lie outside the index buffer", who,
                       start, (long long)start + rows);
    if (kern_mem_bytes(src) < (size_t)src_n * (g->src_u8 ? 1 : 4))
        return err_set(k->err, -EINVAL, "%s: src holds fewer than %d images", who, g->n_src);
    int rc = need_floats(k, who, "dst", dst, out_n);
    if (rc < 0)
        return rc;
    int has_norm = mean && std;
    if (has_norm) {
        rc = need_floats(k, who, "mean", mean, g->c);
        if (rc == 0)
            rc = need_floats(k, who, "std", std, g->c);
        if (rc < 0)
            return rc;
    }
    cl_mem m = has_norm ? mean : dst, s = has_norm ? std : dst;
    int src_u8 = g->src_u8 != 0, flip = g->flip != 0;
    float ry = (float)g->sh / (float)g->dh, rx = (float)g->sw / (float)g->dw;
    cl_ulong seed = g->seed, ebase = (cl_ulong)(uint32_t)g->epoch << 32;
    karg a[] = {ARG(src_u8),   ARG(g->n_src), ARG(g->sh), ARG(g->sw),   ARG(g->c),    ARG(g->dh),
                ARG(g->dw),    ARG(g->scale), ARG(ry),    ARG(rx),      ARG(flip),    ARG(g->crop),
                ARG(seed),     ARG(ebase),    ARG(rows),  ARG_MEM(src), ARG_MEM(idx), ARG(start),
                ARG(has_norm), ARG_MEM(m),    ARG_MEM(s), ARG_MEM(dst)};
    return kern_launch_rows(k, who, k->conv->image, a, NARGS(a), rows * g->dh, g->dw * g->c);
}
