/* conv: the host side of the image families — convolution (conv.cl), pooling (pool.cl),
 * batch normalisation (batchnorm.cl) and the image batch (image.cl).
 *
 * Layout: activations NHWC, so a conv output [N·OH·OW][F] is a plain row-major matrix; weights
 * HWIO [KH][KW][C][F]. Two paths, chosen by the kern's device class (kern_device_class;
 * TRAINYARD_CONV=direct|gemm forces one):
 * - direct (the CPU class; conv.cl explains): the workspace holds the weights packed in 32-column
 *   panels and, when the geometry needs it, the input padded so every window lies inside;
 *   conv_fwd then runs the implicit GEMM in place. Backward-data packs the flipped, transposed
 *   weights, pads dy dilated by the strides, and runs conv_fwd. Backward-weights pads x (and dy
 *   to 32 columns when F is not a multiple of 32) and runs conv_dw over a fixed number of parts
 *   of the pixel sum, which conv_dw_sum adds in order into dw.
 * - gemm (the GPU class): conv_im2col writes the patch matrix col[N·OH·OW][KH·KW·C] into the
 *   workspace and kern_gemm does the rest: y = col·W, dW = colᵀ·dy (split K, fixed order), and
 *   dcol = dy·Wᵀ which conv_col2im gathers into dx. A pointwise conv (1×1, stride 1, no padding)
 *   uses x as col and needs no workspace.
 * kern_conv_workspace is the largest need of the three calls on the kern's path; the direct
 * kernels take its regions as (buffer, offset) pairs, so the workspace may be any buffer.
 *
 * Pooling, batchnorm and the image batch have one path: one work-item per work-group walking
 * rows, as their .cl files explain; batchnorm's partial sums use k->scratch.
 *
 * Every cl_kernel of these families is created by conv_kernel_create through kern_cl_kernel
 * (kern_priv.h), which knows which program holds which family. Wrappers check sizes and buffer
 * extents, enqueue on the in-order queue and never wait; they return 0, -EINVAL (with k->err)
 * before enqueueing anything, or -EIO. Sizes are int on the device: every tensor must stay below
 * INT_MAX − 4096 elements. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_priv.h"

/* Rows per batchnorm work-group: enough groups for the compute units to share out evenly, no
 * more than BN_CHUNK_MAX so that each float partial sum stays short. */
#define BN_GROUPS_PER_UNIT 16
#define BN_CHUNK_MIN       64
#define BN_CHUNK_MAX       1024

#define POOL_BAND 16 /* input rows per pool_bwd work-group */

/* Direct-path blocking; CONV_MB_MAX must match conv.cl (the size of conv_fwd's __local table). */
#define CONV_ALIGN           4096 /* workspace regions start on page boundaries */
#define CONV_MB_MAX          256  /* output pixels per conv_fwd work-group, at most */
#define CONV_NB_MAX          128  /* output columns per conv_fwd work-group, at most */
#define CONV_GROUPS_PER_UNIT 8    /* conv_fwd work-groups per compute unit, at least */
#define CONV_DW_MIN_PART     1024 /* pixels in one part of the weight-gradient sum, at least */
#define CONV_DW_CHUNK        64   /* pixels conv_dw walks per pass: CONV_CHUNK in conv.cl */
#define CONV_NARROW_C        8 /* backward-data through dy·Wᵀ and a gather up to this many c */

enum conv_variant { CONV_DIRECT = 0, CONV_GEMM = 1 };

struct conv_kernels {
    enum conv_variant variant;
    int units;          /* compute units */
    uint64_t local_mem; /* bytes of __local memory a work-group may use */
    cl_kernel pad, pack_w, fwd, fwd_pool, dw, dw_pool, dw_sum, col2im_rows, im2col, col2im,
        pool_fwd, pool_bwd, bn_part, bn_stats, bn_grads, bn_apply, bn_bwd_apply, image,
        pool_fwd_gpu, pool_bwd_gpu, image_gpu;
};

static const struct {
    const char *name;
    size_t offset;
} conv_table[] = {
    {"conv_pad", offsetof(struct conv_kernels, pad)},
    {"conv_pack_w", offsetof(struct conv_kernels, pack_w)},
    {"conv_fwd", offsetof(struct conv_kernels, fwd)},
    {"conv_fwd_pool", offsetof(struct conv_kernels, fwd_pool)},
    {"conv_dw", offsetof(struct conv_kernels, dw)},
    {"conv_dw_pool", offsetof(struct conv_kernels, dw_pool)},
    {"conv_dw_sum", offsetof(struct conv_kernels, dw_sum)},
    {"conv_col2im_rows", offsetof(struct conv_kernels, col2im_rows)},
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
    {"pool_fwd_gpu", offsetof(struct conv_kernels, pool_fwd_gpu)},
    {"pool_bwd_gpu", offsetof(struct conv_kernels, pool_bwd_gpu)},
    {"image_batch_gpu", offsetof(struct conv_kernels, image_gpu)},
};
#define CONV_KERNEL_COUNT (sizeof conv_table / sizeof conv_table[0])

static cl_kernel *conv_slot(struct conv_kernels *g, size_t i)
{
    return (cl_kernel *)((char *)g + conv_table[i].offset);
}

/* The one place these families create a kernel: NULL (and 0) for a family the kern was not made
 * for; the wrappers then refuse with -EIO. */
static int conv_kernel_create(kern *k, const char *name, cl_kernel *out, char *err)
{
    cl_int rc;
    cl_kernel kl = kern_cl_kernel(k, name, &rc);
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
    const ocl_device *d = &k->c->dev;
    g->units = d->compute_units ? (int)d->compute_units : 1;
    g->local_mem = d->local_mem;
    g->variant = k->cls == KERN_CLASS_CPU ? CONV_DIRECT : CONV_GEMM;
    const char *force = getenv("TRAINYARD_CONV");
    if (force && strcmp(force, "direct") == 0)
        g->variant = CONV_DIRECT;
    else if (force && strcmp(force, "gemm") == 0)
        g->variant = CONV_GEMM;
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

/* Checks a geometry: positive sizes (n may be 0), and every tensor either path makes small
 * enough for int indices. */
static int conv_check(kern *k, const char *who, const kern_conv *g)
{
    if (!g || g->n < 0 || g->h < 1 || g->w < 1 || g->c < 1 || g->f < 1 || g->kh < 1 || g->kw < 1 ||
        g->sh < 1 || g->sw < 1 || g->pt < 0 || g->pl < 0 || g->oh < 1 || g->ow < 1)
        return err_set(k->err, -EINVAL, "%s: bad geometry", who);
    /* x, y, the patch matrix (rows padded to 32 on the narrow path), the padded x and the
     * padded, dilated dy of the direct path, and the weights */
    long long kkc = (long long)g->kh * g->kw * g->c;
    long long hp = (long long)(g->oh - 1) * g->sh + g->kh,
              wp = (long long)(g->ow - 1) * g->sw + g->kw;
    if (tensor_elems(g->n, g->h, g->w, g->c) < 0 || tensor_elems(g->n, g->oh, g->ow, g->f) < 0 ||
        tensor_elems(g->n, g->oh, g->ow, (kkc + 31) / 32 * 32) < 0 ||
        tensor_elems(g->n, hp > g->h ? hp : g->h, wp > g->w ? wp : g->w, g->c) < 0 ||
        tensor_elems(g->n, (long long)g->h + g->kh - 1, (long long)g->w + g->kw - 1, g->f) < 0 ||
        kkc * g->f > INT_MAX - 4096)
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

static size_t round_bytes(size_t v)
{
    return (v + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN;
}

static int round32(int v)
{
    return (v + 31) / 32 * 32;
}

/* The direct path's view of the input: the padded size every window fits in; 0 when x itself
 * will do (no padding, and the windows stay inside). */
static int conv_fwd_pad(const kern_conv *g, int *hp, int *wp)
{
    *hp = (g->oh - 1) * g->sh + g->kh;
    *wp = (g->ow - 1) * g->sw + g->kw;
    if (g->pt == 0 && g->pl == 0 && *hp <= g->h && *wp <= g->w) {
        *hp = g->h;
        *wp = g->w;
        return 0;
    }
    return 1;
}

/* Parts of the backward-weights sum: a few per compute unit so that PoCL's dynamic hand-out
 * evens them out, none shorter than CONV_DW_MIN_PART pixels. Fixed for a device and geometry. */
static int conv_dw_parts(const struct conv_kernels *ck, const kern_conv *g)
{
    long long m = (long long)g->n * g->oh * g->ow;
    long long parts = 4LL * ck->units, most = m / CONV_DW_MIN_PART;
    parts = parts < most ? parts : most;
    return parts < 1 ? 1 : (int)parts;
}

/* Backward-data with few input channels: most of a 32-column tile over C would be padding, so
 * the patch gradients dy·Wᵀ (KH·KW·C columns) are computed instead and gathered into dx. */
static int conv_bwd_narrow(const kern_conv *g)
{
    return g->c <= CONV_NARROW_C && (long long)g->kh * g->kw * g->c > g->c;
}

/* Workspace regions of the direct path, byte offsets and sizes per call. */
struct conv_ws {
    size_t w_off, w_bytes;     /* packed weights (fwd, bwd_data) */
    size_t in_off, in_bytes;   /* padded x (fwd, bwd_weights) or dilated dy (bwd_data) */
    size_t dy_off, dy_bytes;   /* dy with rows padded to 32 columns (bwd_weights) */
    size_t scr_off, scr_bytes; /* per-part weight gradients (bwd_weights) */
};

enum conv_op { CONV_OP_FWD, CONV_OP_BWD_DATA, CONV_OP_BWD_WEIGHTS };

static struct conv_ws conv_ws_plan(const struct conv_kernels *ck, const kern_conv *g, int op)
{
    struct conv_ws w = {0};
    size_t kk = (size_t)g->kh * g->kw, f = (size_t)g->f, c = (size_t)g->c;
    int hp, wp;
    int pad = conv_fwd_pad(g, &hp, &wp);
    if (op == CONV_OP_FWD) {
        w.w_bytes = kk * c * round32(g->f) * 4;
        w.in_bytes = pad ? (size_t)g->n * hp * wp * c * 4 : 0;
    } else if (op == CONV_OP_BWD_DATA && conv_bwd_narrow(g)) {
        w.w_bytes = f * round32((int)(kk * c)) * 4;
        w.in_bytes = (size_t)g->n * g->oh * g->ow * round32((int)(kk * c)) * 4;
    } else if (op == CONV_OP_BWD_DATA) {
        w.w_bytes = kk * f * round32(g->c) * 4;
        w.in_bytes = (size_t)g->n * (g->h + g->kh - 1) * (g->w + g->kw - 1) * f * 4;
    } else {
        w.in_bytes = pad ? (size_t)g->n * hp * wp * c * 4 : 0;
        w.dy_bytes = g->f % 32 ? (size_t)g->n * g->oh * g->ow * round32(g->f) * 4 : 0;
        int parts = conv_dw_parts(ck, g);
        w.scr_bytes = parts > 1 ? (size_t)parts * kk * c * f * 4 : 0;
    }
    w.in_off = round_bytes(w.w_bytes);
    w.dy_off = w.in_off + round_bytes(w.in_bytes);
    w.scr_off = w.dy_off + round_bytes(w.dy_bytes);
    return w;
}

static size_t conv_ws_total(const struct conv_ws *w)
{
    return w->scr_off + round_bytes(w->scr_bytes);
}

size_t kern_conv_workspace(kern *k, const kern_conv *g)
{
    if (!g || g->n < 1)
        return 0;
    if (k->conv->variant == CONV_GEMM)
        return conv_is_pointwise(g)
                   ? 0
                   : (size_t)g->n * g->oh * g->ow * g->kh * g->kw * g->c * sizeof(float);
    size_t most = 0;
    for (int op = CONV_OP_FWD; op <= CONV_OP_BWD_WEIGHTS; op++) {
        struct conv_ws w = conv_ws_plan(k->conv, g, op);
        size_t t = conv_ws_total(&w);
        most = t > most ? t : most;
    }
    return most;
}

/* A buffer and an offset into it in floats: a caller's tensor (offset 0) or a region of the
 * workspace. The direct kernels take each such argument as a (buffer, offset) pair. */
struct conv_buf {
    cl_mem m;
    cl_ulong off;
};

#define ARG_BUF(b) ARG_MEM((b).m), ARG((b).off)

static struct conv_buf conv_whole(cl_mem m)
{
    return (struct conv_buf){m, 0};
}

static struct conv_buf conv_region(cl_mem work, size_t off_bytes)
{
    return (struct conv_buf){work, off_bytes / sizeof(float)};
}

/* conv_pad of src (n images hs × ws × cs) into dst (hp × wp × cd), dilated by (dh, dw) and
 * shifted by (pt, pl). */
static int conv_pad(kern *k, const char *who, int n, int hs, int ws, int cs, int dh, int dw, int pt,
                    int pl, int hp, int wp, int cd, cl_mem src, struct conv_buf dst)
{
    karg a[] = {ARG(hs), ARG(ws), ARG(cs), ARG(dh), ARG(dw),      ARG(pt),
                ARG(pl), ARG(hp), ARG(wp), ARG(cd), ARG_MEM(src), ARG_BUF(dst)};
    size_t global = (size_t)n * hp, local = 1;
    return kern_launch(k, who, k->conv->pad, a, NARGS(a), 1, &global, &local);
}

static int conv_pack_w(kern *k, const char *who, const kern_conv *g, int mode, int ldo, cl_mem w,
                       struct conv_buf out)
{
    karg a[] = {ARG(g->kh), ARG(g->kw), ARG(g->c),  ARG(g->f),
                ARG(mode),  ARG(ldo),   ARG_MEM(w), ARG_BUF(out)};
    int rows = mode == 2 ? g->f : g->kh * g->kw * (mode == 1 ? g->f : g->c);
    return kern_launch_rows(k, who, k->conv->pack_w, a, NARGS(a), rows, ldo);
}

/* One conv_fwd: m output pixels (ow per row, ohw per image) of f_out columns from the padded
 * input xp (hp × wp × c), packed weights wpk (ldw columns), strides (sh, sw). */
static int conv_fwd_run(kern *k, const char *who, int m, int ow, int ohw, int hp, int wp, int c,
                        int kh, int kw, int sh, int sw, int f_out, int ldw, struct conv_buf xp,
                        struct conv_buf wpk, struct conv_buf y)
{
    struct conv_kernels *ck = k->conv;
    int kwc = kw * c, nb = ldw <= CONV_NB_MAX ? ldw : CONV_NB_MAX;
    /* as many pixels per group as leaves CONV_GROUPS_PER_UNIT groups per compute unit */
    long long per =
        ((long long)m + CONV_GROUPS_PER_UNIT * ck->units - 1) / (CONV_GROUPS_PER_UNIT * ck->units);
    int mb = (int)((per + 7) / 8 * 8);
    mb = mb < 8 ? 8 : mb > CONV_MB_MAX ? CONV_MB_MAX : mb;
    karg a[] = {ARG(m),      ARG(ow),      ARG(ohw),   ARG(hp), ARG(wp),    ARG(c),
                ARG(kh),     ARG(kwc),     ARG(sh),    ARG(sw), ARG(f_out), ARG(ldw),
                ARG_BUF(xp), ARG_BUF(wpk), ARG_BUF(y), ARG(mb), ARG(nb)};
    size_t global[2] = {(size_t)((ldw + nb - 1) / nb), (size_t)((m + mb - 1) / mb)};
    size_t local[2] = {1, 1};
    return kern_launch(k, who, ck->fwd, a, NARGS(a), 2, global, local);
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

/* The patch matrix of x for the GEMM path: x itself for a pointwise conv, else written into work
 * by conv_im2col. *col is set on success. */
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

/* The direct forward's operands: w packed into the workspace (*wpk, *ldw columns) and the input
 * *in, x itself or its padded copy (*hp × *wp per image) in the workspace. */
static int conv_fwd_prepare(kern *k, const char *who, const kern_conv *g, cl_mem x, cl_mem w,
                            cl_mem work, struct conv_buf *wpk, struct conv_buf *in, int *hp,
                            int *wp, int *ldw)
{
    struct conv_ws ws = conv_ws_plan(k->conv, g, CONV_OP_FWD);
    struct conv_buf xp = conv_region(work, ws.in_off);
    int pad = conv_fwd_pad(g, hp, wp);
    *ldw = round32(g->f);
    *wpk = conv_region(work, ws.w_off);
    *in = pad ? xp : conv_whole(x);
    int rc = 0;
    if (g->f == 32) /* one panel of 32 columns: the packed layout is w's own */
        *wpk = conv_whole(w);
    else
        rc = conv_pack_w(k, who, g, 0, *ldw, w, *wpk);
    if (rc == 0 && pad)
        rc = conv_pad(k, who, g->n, g->h, g->w, g->c, 1, 1, g->pt, g->pl, *hp, *wp, g->c, x, xp);
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
    if (k->conv->variant == CONV_GEMM) {
        cl_mem col = x;
        rc = conv_patches(k, who, g, x, work, &col);
        if (rc < 0)
            return rc;
        return kern_gemm(k, 0, 0, rows, g->f, kkc, 1.0f, col, kkc, w, g->f, 0.0f, y, g->f);
    }
    struct conv_buf wpk, in;
    int hp, wp, ldw;
    rc = conv_fwd_prepare(k, who, g, x, w, work, &wpk, &in, &hp, &wp, &ldw);
    if (rc == 0)
        rc = conv_fwd_run(k, who, rows, g->ow, g->oh * g->ow, hp, wp, g->c, g->kh, g->kw, g->sh,
                          g->sw, g->f, ldw, in, wpk, conv_whole(y));
    return rc;
}

int kern_conv2d_fwd_maxpool_ok(kern *k)
{
    return k->conv->variant == CONV_DIRECT && k->conv->fwd_pool != NULL;
}

/* conv_args for the calls fused with a 2×2/2 max pool: the path, a conv output with a window,
 * and the pool-sized tensor q (and argmax, unless NULL) of N·(OH/2)·(OW/2)·F. */
static int conv_pool_args(kern *k, const char *who, const kern_conv *g, cl_mem x, cl_mem q,
                          const char *q_name, cl_mem argmax, cl_mem wt, cl_mem work)
{
    if (!kern_conv2d_fwd_maxpool_ok(k))
        return err_set(k->err, -EINVAL, "%s: only the direct conv path pools in place", who);
    if (g->oh < 2 || g->ow < 2)
        return err_set(k->err, -EINVAL, "%s: a %dx%d conv output has no 2x2 window", who, g->oh,
                       g->ow);
    long long nq = tensor_elems(g->n, g->oh / 2, g->ow / 2, g->f);
    int rc =
        conv_args(k, who, g, x, tensor_elems(g->n, g->h, g->w, g->c), "x", q, nq, q_name, wt, work);
    if (rc == 0 && argmax && g->n > 0)
        rc = need_floats(k, who, "argmax", argmax, nq);
    return rc;
}

int kern_conv2d_fwd_maxpool(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y,
                            cl_mem argmax, cl_mem work)
{
    return kern_conv2d_fwd_maxpool_act(k, g, x, w, y, argmax, -1, NULL, work);
}

int kern_conv2d_fwd_maxpool_act(kern *k, const kern_conv *g, cl_mem x, cl_mem w, cl_mem y,
                                cl_mem argmax, int act, cl_mem bias, cl_mem work)
{
    const char *who = "kern_conv2d_fwd_maxpool";
    int rc = conv_pool_args(k, who, g, x, y, "y", argmax, w, work);
    int has_act = act >= 0;
    if (rc == 0 && has_act && g->n > 0)
        rc = need_floats(k, who, "bias", bias, g->f);
    if (rc < 0 || g->n == 0)
        return rc;
    struct conv_kernels *ck = k->conv;
    struct conv_buf wpk, in;
    int hp, wp, ldw;
    rc = conv_fwd_prepare(k, who, g, x, w, work, &wpk, &in, &hp, &wp, &ldw);
    if (rc < 0)
        return rc;
    int pw = g->ow / 2, phw = g->oh / 2 * pw, mq = g->n * phw, kwc = g->kw * g->c;
    int nb = ldw <= CONV_NB_MAX ? ldw : CONV_NB_MAX, has_arg = argmax != NULL;
    /* pooled pixels per group: even, at most CONV_MB_MAX / 4 (four conv pixels each), as many as
     * leaves CONV_GROUPS_PER_UNIT groups per compute unit */
    long long per =
        ((long long)mq + CONV_GROUPS_PER_UNIT * ck->units - 1) / (CONV_GROUPS_PER_UNIT * ck->units);
    int mb = (int)((per + 1) / 2 * 2);
    mb = mb < 2 ? 2 : mb > CONV_MB_MAX / 4 ? CONV_MB_MAX / 4 : mb;
    cl_mem arg = has_arg ? argmax : y; /* never written when has_arg is 0 */
    bias = has_act ? bias : y;         /* never read without an activation */
    act = has_act ? act : 0;
    karg a[] = {ARG(mq),      ARG(pw),   ARG(phw),    ARG(g->ow),   ARG(g->oh), ARG(hp),
                ARG(wp),      ARG(g->c), ARG(g->kh),  ARG(kwc),     ARG(g->sh), ARG(g->sw),
                ARG(g->f),    ARG(ldw),  ARG_BUF(in), ARG_BUF(wpk), ARG_MEM(y), ARG(has_arg),
                ARG_MEM(arg), ARG(mb),   ARG(nb),     ARG(has_act), ARG(act),   ARG_MEM(bias)};
    size_t global[2] = {(size_t)((ldw + nb - 1) / nb), (size_t)((mq + mb - 1) / mb)};
    size_t local[2] = {1, 1};
    return kern_launch(k, who, ck->fwd_pool, a, NARGS(a), 2, global, local);
}

int kern_conv2d_bwd_data(kern *k, const kern_conv *g, cl_mem dy, cl_mem w, cl_mem dx, cl_mem work)
{
    const char *who = "kern_conv2d_bwd_data";
    int rc = conv_args(k, who, g, dy, tensor_elems(g->n, g->oh, g->ow, g->f), "dy", dx,
                       tensor_elems(g->n, g->h, g->w, g->c), "dx", w, work);
    if (rc < 0 || g->n == 0)
        return rc;
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c;
    if (k->conv->variant == CONV_GEMM) {
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
    /* dx = the stride-1 convolution of dy dilated by the strides and padded by kh − 1 − pt,
     * with the flipped, transposed weights (conv.cl); with few input channels, the patch
     * gradients dy·Wᵀ (conv_fwd as a 1×1 conv over dy, rows padded to 32 columns so its tiles
     * store whole) gathered by conv_col2im_rows. */
    struct conv_ws ws = conv_ws_plan(k->conv, g, CONV_OP_BWD_DATA);
    struct conv_buf wpk = conv_region(work, ws.w_off), in = conv_region(work, ws.in_off);
    if (conv_bwd_narrow(g)) {
        int ldq = round32(kkc);
        rc = conv_pack_w(k, who, g, 2, ldq, w, wpk);
        if (rc == 0)
            rc = conv_fwd_run(k, who, rows, g->ow, g->oh * g->ow, g->oh, g->ow, g->f, 1, 1, 1, 1,
                              ldq, ldq, conv_whole(dy), wpk, in);
        if (rc < 0)
            return rc;
        karg a[] = {ARG(g->h),  ARG(g->w),  ARG(g->c),   ARG(g->kh), ARG(g->kw),
                    ARG(g->sh), ARG(g->sw), ARG(g->pt),  ARG(g->pl), ARG(g->oh),
                    ARG(g->ow), ARG(ldq),   ARG_BUF(in), ARG_MEM(dx)};
        size_t global = (size_t)g->n * g->h, local = 1;
        return kern_launch(k, who, k->conv->col2im_rows, a, NARGS(a), 1, &global, &local);
    }
    int hp = g->h + g->kh - 1, wp = g->w + g->kw - 1, ldc = round32(g->c);
    rc = conv_pack_w(k, who, g, 1, ldc, w, wpk);
    if (rc == 0)
        rc = conv_pad(k, who, g->n, g->oh, g->ow, g->f, g->sh, g->sw, g->kh - 1 - g->pt,
                      g->kw - 1 - g->pl, hp, wp, g->f, dy, in);
    if (rc == 0)
        rc = conv_fwd_run(k, who, g->n * g->h * g->w, g->w, g->h * g->w, hp, wp, g->f, g->kh, g->kw,
                          1, 1, g->c, ldc, in, wpk, conv_whole(dx));
    return rc;
}

static int conv_dw_launch(kern *k, const char *who, const kern_conv *g, cl_mem x, cl_mem dy,
                          cl_mem argq, cl_mem dw, int accumulate, cl_mem work);

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
    if (k->conv->variant == CONV_GEMM) {
        cl_mem col = x;
        rc = conv_patches(k, who, g, x, work, &col);
        if (rc < 0)
            return rc;
        return kern_gemm(k, 1, 0, kkc, g->f, rows, 1.0f, col, kkc, dy, g->f, beta, dw, g->f);
    }
    return conv_dw_launch(k, who, g, x, dy, NULL, dw, accumulate, work);
}

/* The direct path's weight gradient: conv_dw over dy, or conv_dw_pool over a 2×2/2 max pool's
 * dy and argmax when argq is not NULL (then dy is the pool's N·(OH/2)·(OW/2)·F), then
 * conv_dw_sum when the pixel sum is split. */
static int conv_dw_launch(kern *k, const char *who, const kern_conv *g, cl_mem x, cl_mem dy,
                          cl_mem argq, cl_mem dw, int accumulate, cl_mem work)
{
    struct conv_kernels *ck = k->conv;
    struct conv_ws ws = conv_ws_plan(ck, g, CONV_OP_BWD_WEIGHTS);
    int rows = g->n * g->oh * g->ow, kkc = g->kh * g->kw * g->c, rc = 0;
    int hp, wp, ldd = round32(g->f), parts = conv_dw_parts(ck, g);
    int pad = conv_fwd_pad(g, &hp, &wp), pad_dy = ws.dy_bytes && !argq;
    struct conv_buf xp = pad ? conv_region(work, ws.in_off) : conv_whole(x);
    struct conv_buf dyp = pad_dy ? conv_region(work, ws.dy_off) : conv_whole(dy);
    struct conv_buf scr = parts > 1 ? conv_region(work, ws.scr_off) : conv_whole(dw);
    if (pad)
        rc = conv_pad(k, who, g->n, g->h, g->w, g->c, 1, 1, g->pt, g->pl, hp, wp, g->c, x, xp);
    if (rc == 0 && pad_dy)
        rc = conv_pad(k, who, g->n, g->oh, g->ow, g->f, 1, 1, 0, 0, g->oh, g->ow, ldd, dy, dyp);
    if (rc < 0)
        return rc;
    /* Rows of dw per group: all of them when their partial sums fit local memory (beside the
     * expanded dy chunk of conv_dw_pool). */
    size_t chunk_bytes = argq ? (size_t)CONV_DW_CHUNK * ldd * sizeof(float) : 0;
    size_t avail = ck->local_mem / 2;
    if (argq && ck->local_mem - avail < chunk_bytes)
        avail = ck->local_mem > chunk_bytes ? ck->local_mem - chunk_bytes : 0;
    int mb = (int)(avail / ((size_t)ldd * sizeof(float))) / 8 * 8;
    mb = mb > (kkc + 7) / 8 * 8 ? (kkc + 7) / 8 * 8 : mb;
    if (mb < 8)
        return err_set(k->err, -EINVAL, "%s: %d filters are more than local memory holds", who,
                       g->f);
    int ppart = (rows + parts - 1) / parts, kwc = g->kw * g->c, ohw = g->oh * g->ow;
    int pw = g->ow / 2, phw = g->oh / 2 * pw;
    size_t global[2] = {(size_t)((kkc + mb - 1) / mb), (size_t)parts}, local[2] = {1, 1};
    if (argq) {
        karg a[] = {ARG(rows),
                    ARG(g->ow),
                    ARG(ohw),
                    ARG(hp),
                    ARG(wp),
                    ARG(g->c),
                    ARG(kwc),
                    ARG(kkc),
                    ARG(g->sh),
                    ARG(g->sw),
                    ARG(g->f),
                    ARG(ldd),
                    ARG(ppart),
                    ARG_BUF(xp),
                    ARG_MEM(dy),
                    ARG_MEM(argq),
                    ARG(pw),
                    ARG(phw),
                    ARG_BUF(scr),
                    ARG_MEM(dw),
                    ARG(accumulate),
                    ARG(mb),
                    ARG_LOCAL((size_t)mb * ldd * sizeof(float)),
                    ARG_LOCAL(chunk_bytes)};
        rc = kern_launch(k, who, ck->dw_pool, a, NARGS(a), 2, global, local);
    } else {
        karg a[] = {ARG(rows),    ARG(g->ow),
                    ARG(ohw),     ARG(hp),
                    ARG(wp),      ARG(g->c),
                    ARG(kwc),     ARG(kkc),
                    ARG(g->sh),   ARG(g->sw),
                    ARG(g->f),    ARG(ldd),
                    ARG(ppart),   ARG_BUF(xp),
                    ARG_BUF(dyp), ARG_BUF(scr),
                    ARG_MEM(dw),  ARG(accumulate),
                    ARG(mb),      ARG_LOCAL((size_t)mb * ldd * sizeof(float))};
        rc = kern_launch(k, who, ck->dw, a, NARGS(a), 2, global, local);
    }
    if (rc == 0 && parts > 1) {
        int n = kkc * g->f;
        karg b[] = {ARG(n), ARG(parts), ARG(accumulate), ARG_BUF(scr), ARG_MEM(dw)};
        rc = kern_launch_1d(k, who, ck->dw_sum, b, NARGS(b), (size_t)n);
    }
    return rc;
}

int kern_conv2d_bwd_weights_maxpool(kern *k, const kern_conv *g, cl_mem x, cl_mem dy, cl_mem argmax,
                                    cl_mem dw, int accumulate, cl_mem work)
{
    const char *who = "kern_conv2d_bwd_weights_maxpool";
    if (!argmax)
        return err_set(k->err, -EINVAL, "%s: the pool's argmax is needed", who);
    int rc = conv_pool_args(k, who, g, x, dy, "dy", argmax, dw, work);
    if (rc < 0)
        return rc;
    if (g->n == 0)
        return kern_conv2d_bwd_weights(k, g, x, dy, dw, accumulate, work);
    return conv_dw_launch(k, who, g, x, dy, argmax, dw, accumulate, work);
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
    cl_mem arg = has_arg ? argmax : y; /* a buffer the kernel never writes when has_arg is 0 */
    if (!k->cpu) {                     /* one work-item per output element */
        int total = (int)tensor_elems(g->n, g->oh, g->ow, g->c);
        karg b[] = {ARG(mode),  POOL_GEOM_ARGS(g), ARG(total),  ARG_MEM(x),
                    ARG_MEM(y), ARG(has_arg),      ARG_MEM(arg)};
        return kern_launch_1d(k, who, k->conv->pool_fwd_gpu, b, NARGS(b), (size_t)total);
    }
    karg a[] = {ARG(mode), POOL_GEOM_ARGS(g), ARG_MEM(x), ARG_MEM(y), ARG(has_arg), ARG_MEM(arg)};
    size_t global = (size_t)g->n * g->oh, local = 1;
    return kern_launch(k, who, k->conv->pool_fwd, a, NARGS(a), 1, &global, &local);
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
    cl_mem arg = is_max ? argmax : dy;
    if (!k->cpu) { /* one work-item per input element */
        int total = (int)tensor_elems(g->n, g->h, g->w, g->c);
        karg b[] = {ARG(mode),   POOL_GEOM_ARGS(g), ARG(total),
                    ARG_MEM(dy), ARG_MEM(arg),      ARG_MEM(dx)};
        return kern_launch_1d(k, who, k->conv->pool_bwd_gpu, b, NARGS(b), (size_t)total);
    }
    int band = POOL_BAND, bands = (g->h + band - 1) / band;
    karg a[] = {ARG(mode),
                POOL_GEOM_ARGS(g),
                ARG(band),
                ARG_MEM(dy),
                ARG_MEM(arg),
                ARG_MEM(dx),
                ARG_LOCAL((size_t)2 * g->w * sizeof(int))};
    size_t global = (size_t)g->n * bands, local = 1;
    return kern_launch(k, who, k->conv->pool_bwd, a, NARGS(a), 1, &global, &local);
}

/* Batchnorm: rows × c with c ≥ 1, and each named buffer at least that big. */
static int bn_check(kern *k, const char *who, int rows, int c, cl_mem x, cl_mem y)
{
    int n = 0, rc = kern_elements(k, who, rows, c, &n);
    if (rc < 0)
        return rc;
    if (c < 1)
        return err_set(k->err, -EINVAL, "%s: batchnorm needs at least one channel", who);
    if ((uint64_t)c * 2 * sizeof(float) > k->conv->local_mem)
        return err_set(k->err, -EINVAL, "%s: %d channels are more than local memory holds", who, c);
    if (rows == 0)
        return 0;
    rc = need_floats(k, who, "x", x, n);
    if (rc == 0)
        rc = need_floats(k, who, "y", y, n);
    return rc;
}

/* Rows per batchnorm work-group for this device (so the parts, and the sums, are fixed). */
static int bn_chunk(kern *k, int rows)
{
    long long per = ((long long)rows + BN_GROUPS_PER_UNIT * k->conv->units - 1) /
                    (BN_GROUPS_PER_UNIT * k->conv->units);
    per = (per + BN_CHUNK_MIN - 1) / BN_CHUNK_MIN * BN_CHUNK_MIN;
    return per < BN_CHUNK_MIN ? BN_CHUNK_MIN : per > BN_CHUNK_MAX ? BN_CHUNK_MAX : (int)per;
}

/* bn_part over rows × c into k->scratch (2·nparts·c floats); *nparts set. */
static int bn_parts(kern *k, const char *who, int mode, int rows, int c, cl_mem x, cl_mem dy,
                    cl_mem mean, cl_mem invstd, int *nparts)
{
    int chunk = bn_chunk(k, rows), np = (rows + chunk - 1) / chunk;
    *nparts = np;
    int rc = kern_scratch_need(k, who, (size_t)2 * (np ? np : 1) * c * sizeof(float));
    if (rc < 0 || np == 0)
        return rc;
    cl_mem part = k->scratch;
    karg a[] = {ARG(mode),
                ARG(rows),
                ARG(c),
                ARG(chunk),
                ARG(np),
                ARG_MEM(x),
                ARG_MEM(dy),
                ARG_MEM(mean),
                ARG_MEM(invstd),
                ARG_MEM(part),
                ARG_LOCAL((size_t)2 * c * sizeof(float))};
    size_t global = (size_t)np, local = 1;
    return kern_launch(k, who, k->conv->bn_part, a, NARGS(a), 1, &global, &local);
}

static int bn_apply(kern *k, const char *who, int rows, int c, int stat_is_var, float eps, cl_mem x,
                    cl_mem gamma, cl_mem beta, cl_mem mean, cl_mem stat, cl_mem y)
{
    int chunk = bn_chunk(k, rows);
    karg a[] = {ARG(rows),     ARG(c),        ARG(chunk),     ARG(stat_is_var),
                ARG(eps),      ARG_MEM(x),    ARG_MEM(gamma), ARG_MEM(beta),
                ARG_MEM(mean), ARG_MEM(stat), ARG_MEM(y),     ARG_LOCAL((size_t)c * sizeof(float))};
    size_t global = (size_t)((rows + chunk - 1) / chunk), local = 1;
    return kern_launch(k, who, k->conv->bn_apply, a, NARGS(a), 1, &global, &local);
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
    int chunk = bn_chunk(k, rows);
    karg b[] = {ARG(rows),       ARG(c),         ARG(chunk),         ARG_MEM(x),
                ARG_MEM(dy),     ARG_MEM(gamma), ARG_MEM(save_mean), ARG_MEM(save_invstd),
                ARG_MEM(dgamma), ARG_MEM(dbeta), ARG_MEM(dx)};
    size_t global = (size_t)((rows + chunk - 1) / chunk), local = 1;
    return kern_launch(k, who, k->conv->bn_bwd_apply, b, NARGS(b), 1, &global, &local);
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
    if (!k->cpu) { /* one work-item per output float */
        int total = (int)out_n;
        karg b[] = {ARG(src_u8),  ARG(g->n_src), ARG(g->sh),    ARG(g->sw),    ARG(g->c),
                    ARG(g->dh),   ARG(g->dw),    ARG(g->scale), ARG(ry),       ARG(rx),
                    ARG(flip),    ARG(g->crop),  ARG(seed),     ARG(ebase),    ARG(total),
                    ARG_MEM(src), ARG_MEM(idx),  ARG(start),    ARG(has_norm), ARG_MEM(m),
                    ARG_MEM(s),   ARG_MEM(dst)};
        return kern_launch_1d(k, who, k->conv->image_gpu, b, NARGS(b), (size_t)total);
    }
    size_t cols = (size_t)g->dw, row = cols * g->c * sizeof(float);
    if (4 * row + 3 * cols * 4 > k->conv->local_mem)
        return err_set(k->err, -EINVAL, "%s: rows of %d×%d floats are more than local memory holds",
                       who, g->dw, g->c);
    karg a[] = {ARG(src_u8),
                ARG(g->n_src),
                ARG(g->sh),
                ARG(g->sw),
                ARG(g->c),
                ARG(g->dh),
                ARG(g->dw),
                ARG(g->scale),
                ARG(ry),
                ARG(rx),
                ARG(flip),
                ARG(g->crop),
                ARG(seed),
                ARG(ebase),
                ARG(rows),
                ARG_MEM(src),
                ARG_MEM(idx),
                ARG(start),
                ARG(has_norm),
                ARG_MEM(m),
                ARG_MEM(s),
                ARG_MEM(dst),
                ARG_LOCAL(cols * sizeof(int)),
                ARG_LOCAL(cols * sizeof(int)),
                ARG_LOCAL(cols * sizeof(float)),
                ARG_LOCAL(row),
                ARG_LOCAL(row),
                ARG_LOCAL(row),
                ARG_LOCAL(row)};
    size_t global = (size_t)rows, local = 1;
    return kern_launch(k, who, k->conv->image, a, NARGS(a), 1, &global, &local);
}
