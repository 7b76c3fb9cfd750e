/* kernels.c: the kern object, the host wrappers of the element-wise families (GEMM is gemm.c;
 * conv, pool, batchnorm and image are conv.c), and the launch helpers they all share
 * (kern_priv.h).
 *
 * A wrapper checks its sizes, sets the kernel's arguments and enqueues on the context's in-order
 * queue; it never waits. One enqueue per call, except where a reduction is too long for one
 * work-group (kern_reduce_sum past a few thousand floats, kern_bias_act_bwd past a few hundred
 * rows): then a first pass writes partial sums into k->scratch and a second adds them.
 *
 * Launch shapes. Element-wise kernels run one work-item per element in work-groups of
 * k->local_1d, with the global size rounded up to a multiple of the local size; the kernels check
 * bounds. Per-row kernels (losses) and flat vectors (dropout, optimisers) use a 1-D range; the
 * matrix kernels (bias+act forward, gather) a 2-D range (columns, rows), which spares a division
 * per element. An explicit local size keeps GPUs from falling back to tiny work-groups on prime
 * sizes, and keeps PoCL, which compiles a work-group function per local size on first use, to a
 * handful of variants (one per power-of-two column block) instead of one per global size. The
 * reductions use k->local_red work-items (256 where the device allows), a power of two that their
 * local-memory trees rely on.
 *
 * Device class. Every per-device choice (here the *_cpu forms; in gemm.c the GEMM kernel; in
 * conv.c the convolution path, which also decides the fused conv + max pool the model uses)
 * follows k->cls, set once by kern_device_class: the device's type unless
 * TRAINYARD_DEVICE_CLASS says otherwise, so that PoCL can run a GPU's whole combination.
 *
 * On CPU devices bias + activation run act_bias_*_cpu instead: one work-item per work-group over
 * a chunk of whole rows in float16, 4–5× faster under PoCL on a conv layer's 123008×32 output
 * (bench/bench_conv.c); the backward's column sums then come one row per chunk, added by
 * act_bias_bwd_sum as on other devices.
 *
 * Sizes are int in the API and in the kernels (rows·cols included), so every wrapper refuses a
 * matrix past INT_MAX elements with -EINVAL rather than letting an index wrap. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_priv.h"

#define LOCAL_1D            256  /* element-wise work-group size, capped by the device */
#define LOCAL_RED_MAX       256  /* reduction work-group size, capped by the device */
#define REDUCE_PER_ITEM     16   /* values one work-item adds serially in the reduce passes */
#define BWD_ROWS_PER_ITEM   32   /* rows one work-item walks down in act_bias_bwd */
#define BWD_COLS_MAX        32   /* widest column block of an act_bias_bwd work-group */
#define CPU_GROUPS_PER_UNIT 16   /* work-groups per compute unit of the *_cpu kernels */
#define CPU_CHUNK_MIN       64   /* rows per work-group of the *_cpu kernels, at least */
#define CPU_CHUNK_MAX       2048 /* and at most */

static const struct {
    const char *name;
    size_t offset;
} kernel_table[] = {
    {"act_bias_fwd", offsetof(struct kern, bias_act_fwd)},
    {"act_bias_bwd", offsetof(struct kern, bias_act_bwd)},
    {"act_bias_bwd_sum", offsetof(struct kern, bias_act_bwd_sum)},
    {"act_bias_fwd_cpu", offsetof(struct kern, bias_act_fwd_cpu)},
    {"act_bias_bwd_cpu", offsetof(struct kern, bias_act_bwd_cpu)},
    {"loss_softmax_xent", offsetof(struct kern, softmax_xent)},
    {"loss_bce", offsetof(struct kern, bce)},
    {"loss_mse", offsetof(struct kern, mse)},
    {"dropout_fwd", offsetof(struct kern, dropout)},
    {"reduce_sum_part", offsetof(struct kern, reduce_sum)},
    {"reduce_sum_final", offsetof(struct kern, reduce_sum_final)},
    {"optim_sgd", offsetof(struct kern, sgd)},
    {"optim_adam", offsetof(struct kern, adam)},
    {"optim_adam_cpu", offsetof(struct kern, adam_cpu)},
    {"gather_rows", offsetof(struct kern, gather_rows)},
};
#define KERNEL_COUNT (sizeof kernel_table / sizeof kernel_table[0])

static cl_kernel *kernel_slot(kern *k, size_t i)
{
    return (cl_kernel *)((char *)k + kernel_table[i].offset);
}

size_t kern_pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

size_t kern_round_up(size_t v, size_t m)
{
    return (v + m - 1) / m * m;
}

/* The largest work-group kernel kn accepts on k's device. */
static size_t kernel_wg(kern *k, cl_kernel kn)
{
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(kn, k->c->dev.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg,
                                 NULL) != CL_SUCCESS ||
        wg == 0)
        wg = 1;
    return wg;
}

/* The file of each enum kern_family bit, in bit order. */
static const char *const family_files[] = {"gemm.cl",   "activation.cl", "loss.cl",   "dropout.cl",
                                           "reduce.cl", "optim.cl",      "gather.cl", "conv.cl",
                                           "pool.cl",   "batchnorm.cl",  "image.cl"};

cl_kernel kern_cl_kernel(kern *k, const char *name, cl_int *rc)
{
    int f = ocl_kernel_family(name);
    if (f < 0) {
        *rc = CL_INVALID_KERNEL_NAME;
        return NULL;
    }
    *rc = CL_SUCCESS;
    if (!(k->built & (1u << f)) || !k->c->programs[f])
        return NULL;
    return clCreateKernel(k->c->programs[f], name, rc);
}

unsigned kern_families_cached(ocl_ctx *c, unsigned families)
{
    unsigned have = 0;
    for (size_t i = 0; i < sizeof family_files / sizeof family_files[0]; i++) {
        int f = (families & (1u << i)) ? ocl_family_find(family_files[i]) : -ENOENT;
        if (f > 0 && ocl_ctx_cached(c, f))
            have |= 1u << i;
    }
    return have;
}

unsigned kern_families_unsaved(ocl_ctx *c, unsigned families)
{
    unsigned mask = 0;
    for (size_t i = 0; i < sizeof family_files / sizeof family_files[0]; i++) {
        int f = (families & (1u << i)) ? ocl_family_find(family_files[i]) : -ENOENT;
        if (f > 0 && c->programs[f] && c->unsaved[f])
            mask |= 1u << i;
    }
    return mask;
}

int kern_device_class(const ocl_device *dev, enum kern_class *out, char *err)
{
    const char *force = getenv("TRAINYARD_DEVICE_CLASS");
    if (!force || !*force)
        *out = dev->type & CL_DEVICE_TYPE_CPU ? KERN_CLASS_CPU : KERN_CLASS_GPU;
    else if (strcmp(force, "cpu") == 0)
        *out = KERN_CLASS_CPU;
    else if (strcmp(force, "gpu") == 0)
        *out = KERN_CLASS_GPU;
    else
        return err_set(err, -EINVAL, "TRAINYARD_DEVICE_CLASS=%s: expected cpu or gpu", force);
    return 0;
}

enum kern_class kern_class_of(const kern *k)
{
    return k->cls;
}

int kern_cpu_forms_fit(const kern *k)
{
    return k->cls == KERN_CLASS_CPU;
}

void kern_set_dry(kern *k, int on)
{
    k->dry = on != 0;
}

int kern_new(ocl_ctx *c, kern **out, char *err)
{
    return kern_new_for(c, KERN_FAM_ALL, out, err);
}

int kern_new_for(ocl_ctx *c, unsigned families, kern **out, char *err)
{
    int rc = 0;
    kern *k = calloc(1, sizeof *k);
    if (!k)
        return err_set(err, -ENOMEM, "out of memory creating the kernels");
    k->c = c;
    rc = kern_device_class(&c->dev, &k->cls, err);
    if (rc < 0)
        goto out;
    kern_prof_init(k);
    k->families = families & KERN_FAM_ALL;
    int want[sizeof family_files / sizeof family_files[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof family_files / sizeof family_files[0]; i++) {
        int f = (k->families & (1u << i)) ? ocl_family_find(family_files[i]) : -ENOENT;
        if (f < 0)
            continue; /* not asked for, or not in this build */
        want[n++] = f;
        k->built |= 1u << f;
    }
    rc = ocl_ctx_build(c, want, n, err);
    if (rc < 0)
        goto out;
    for (size_t i = 0; i < KERNEL_COUNT; i++) {
        cl_int cl;
        *kernel_slot(k, i) = kern_cl_kernel(k, kernel_table[i].name, &cl);
        if (cl != CL_SUCCESS) {
            rc = err_set(err, -EIO,
                         "the OpenCL program for %s has no usable kernel '%s' (%s): the "
                         "embedded kernels/*.cl sources and kernels.c disagree",
                         c->dev.name, kernel_table[i].name, ocl_strerror(cl));
            goto out;
        }
    }

    k->cpu = k->cls == KERN_CLASS_CPU;
    k->units = c->dev.compute_units ? (int)c->dev.compute_units : 1;
    size_t items[3] = {1, 1, 1};
    if (clGetDeviceInfo(c->dev.id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL) !=
        CL_SUCCESS)
        items[0] = items[1] = 1;
    k->max_item[0] = items[0];
    k->max_item[1] = items[1];

    /* Kernels of families outside the mask are NULL and do not limit the sizes. */
    size_t red = LOCAL_RED_MAX;
    cl_kernel reds[] = {k->bias_act_bwd, k->bias_act_bwd_sum, k->reduce_sum, k->reduce_sum_final};
    for (size_t i = 0; i < sizeof reds / sizeof reds[0]; i++)
        if (reds[i] && kernel_wg(k, reds[i]) < red)
            red = kernel_wg(k, reds[i]);
    if (red > items[0])
        red = items[0];
    k->local_red = kern_pow2_floor(red);

    size_t one = LOCAL_1D;
    cl_kernel ews[] = {k->bias_act_fwd, k->softmax_xent, k->bce,  k->mse,
                       k->dropout,      k->sgd,          k->adam, k->gather_rows};
    for (size_t i = 0; i < sizeof ews / sizeof ews[0]; i++)
        if (ews[i] && kernel_wg(k, ews[i]) < one)
            one = kernel_wg(k, ews[i]);
    if (one > items[0])
        one = items[0];
    k->local_1d = kern_pow2_floor(one);

    rc = gemm_kernels_new(k, err);
    if (rc == 0)
        rc = conv_kernels_new(k, err);
out:
    if (rc < 0) {
        kern_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

void kern_free(kern *k)
{
    if (!k)
        return;
    kern_prof_print(k);
    gemm_kernels_free(k->gemm);
    conv_kernels_free(k->conv);
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        if (*kernel_slot(k, i))
            clReleaseKernel(*kernel_slot(k, i));
    if (k->scratch)
        clReleaseMemObject(k->scratch);
    free(k);
}

const char *kern_last_error(const kern *k)
{
    return k->err;
}

/* Sets the arguments of kn and enqueues it; who names the wrapper in the error sentence. */
int kern_launch(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, cl_uint dims,
                const size_t *global, const size_t *local)
{
    if (!kn && k->dry)
        return 0;
    if (!kn)
        return err_set(k->err, -EIO,
                       "%s: this kern was made without that kernel's family "
                       "(kern_new_for)",
                       who);
    for (cl_uint i = 0; i < na; i++) {
        cl_int rc = clSetKernelArg(kn, i, a[i].size, a[i].value);
        if (rc != CL_SUCCESS)
            return err_set(k->err, -EIO, "%s: clSetKernelArg(%u) failed: %s (%d)", who, i,
                           ocl_strerror(rc), rc);
    }
    cl_int rc = kern_enqueue(k, kn, dims, global, local);
    if (rc != CL_SUCCESS) {
        char note[ERR_LEN];
        int has = ocl_ctx_driver_message(k->c, note, sizeof note);
        return err_set(k->err, -EIO, "%s: clEnqueueNDRangeKernel failed: %s (%d)%s%s", who,
                       ocl_strerror(rc), rc, has ? "; the driver said: " : "", note);
    }
    return 0;
}

/* One work-item per index below n (n > 0), in work-groups of k->local_1d. */
int kern_launch_1d(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, size_t n)
{
    size_t local = k->local_1d, global = kern_round_up(n, local);
    return kern_launch(k, who, kn, a, na, 1, &global, &local);
}

/* One work-item per element of a rows×cols matrix on a 2-D range (columns, rows), in work-groups
 * of k->local_1d: lx columns (the next power of two ≥ cols, at most 32, so a narrow matrix wastes
 * few work-items and a wide one reads 32 consecutive floats) by local_1d / lx rows. */
int kern_launch_rows(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, int rows,
                     int cols)
{
    size_t lx = 1;
    while (lx < (size_t)cols && lx < 32 && lx * 2 <= k->local_1d)
        lx *= 2;
    size_t ly = k->local_1d / lx;
    if (ly > k->max_item[1])
        ly = kern_pow2_floor(k->max_item[1]);
    size_t local[2] = {lx, ly};
    size_t global[2] = {kern_round_up((size_t)cols, lx), kern_round_up((size_t)rows, ly)};
    return kern_launch(k, who, kn, a, na, 2, global, local);
}

/* rows·cols as a count of elements, or -EINVAL when a size is negative or the product does not
 * fit the int indices the kernels use. */
int kern_elements(kern *k, const char *who, int rows, int cols, int *n)
{
    if (rows < 0 || cols < 0)
        return err_set(k->err, -EINVAL, "%s: negative size %d×%d", who, rows, cols);
    long long e = (long long)rows * cols;
    if (e > INT_MAX - 4096)
        return err_set(k->err, -EINVAL, "%s: %d×%d elements is more than one call handles", who,
                       rows, cols);
    *n = (int)e;
    return 0;
}

/* Makes k->scratch hold at least bytes. The old buffer is released at once: OpenCL keeps it
 * alive until the commands already queued on it have run. */
int kern_scratch_need(kern *k, const char *who, size_t bytes)
{
    if (bytes <= k->scratch_bytes)
        return 0;
    size_t want = bytes < 65536 ? 65536 : bytes + bytes / 2;
    cl_int rc;
    cl_mem m = clCreateBuffer(k->c->context, CL_MEM_READ_WRITE, want, NULL, &rc);
    if (rc != CL_SUCCESS)
        return err_set(k->err, -EIO, "%s: allocating %zu bytes of scratch failed: %s (%d)", who,
                       want, ocl_strerror(rc), rc);
    if (k->scratch)
        clReleaseMemObject(k->scratch);
    k->scratch = m;
    k->scratch_bytes = want;
    return 0;
}

/* Rows per work-group of a *_cpu kernel: CPU_GROUPS_PER_UNIT groups per compute unit, between
 * CPU_CHUNK_MIN and CPU_CHUNK_MAX rows. */
#define ADAM_GROUPS_PER_UNIT 4 /* optim_adam_cpu work-groups per compute unit */

static int cpu_chunk(kern *k, int rows)
{
    long long per =
        ((long long)rows + CPU_GROUPS_PER_UNIT * k->units - 1) / (CPU_GROUPS_PER_UNIT * k->units);
    return per < CPU_CHUNK_MIN ? CPU_CHUNK_MIN : per > CPU_CHUNK_MAX ? CPU_CHUNK_MAX : (int)per;
}

int kern_bias_act_fwd(kern *k, int rows, int cols, int act, cl_mem y, cl_mem bias)
{
    int n = 0, rc = kern_elements(k, "kern_bias_act_fwd", rows, cols, &n);
    if (rc < 0)
        return rc;
    if (act < KERN_ACT_LINEAR || act > KERN_ACT_SIGMOID)
        return err_set(k->err, -EINVAL, "kern_bias_act_fwd: unknown activation %d", act);
    if (n == 0)
        return 0;
    if (k->cpu) {
        int chunk = cpu_chunk(k, rows);
        karg a[] = {ARG(rows), ARG(cols), ARG(act), ARG(chunk), ARG_MEM(y), ARG_MEM(bias)};
        size_t global = (size_t)((rows + chunk - 1) / chunk), local = 1;
        return kern_launch(k, "kern_bias_act_fwd", k->bias_act_fwd_cpu, a, NARGS(a), 1, &global,
                           &local);
    }
    karg a[] = {ARG(rows), ARG(cols), ARG(act), ARG_MEM(y), ARG_MEM(bias)};
    return kern_launch_rows(k, "kern_bias_act_fwd", k->bias_act_fwd, a, NARGS(a), rows, cols);
}

int kern_bias_act_bwd(kern *k, int rows, int cols, int act, cl_mem y, cl_mem dy, cl_mem dbias)
{
    const char *who = "kern_bias_act_bwd";
    int n = 0, rc = kern_elements(k, who, rows, cols, &n);
    if (rc < 0)
        return rc;
    if (act < KERN_ACT_LINEAR || act > KERN_ACT_SIGMOID)
        return err_set(k->err, -EINVAL, "%s: unknown activation %d", who, act);
    if (cols == 0)
        return 0;

    /* Work-group: lx columns (the next power of two ≥ cols, at most 32) × ly rows. */
    size_t lx = 1;
    while (lx < (size_t)cols && lx < BWD_COLS_MAX && lx * 2 <= k->local_red)
        lx *= 2;
    size_t ly = k->local_red / lx;
    if (ly > k->max_item[1])
        ly = kern_pow2_floor(k->max_item[1]);
    size_t local[2] = {lx, ly};
    size_t global[2] = {kern_round_up((size_t)cols, lx), ly};
    karg local_mem = ARG_LOCAL(lx * ly * sizeof(float));

    /* the CPU form keeps two rows of column sums in local memory */
    int cpu = k->cpu && (uint64_t)cols * 2 * sizeof(float) <= k->c->dev.local_mem;
    int chunk = cpu ? cpu_chunk(k, rows) : (int)ly * BWD_ROWS_PER_ITEM;
    int nparts = rows == 0 ? 0 : (rows - 1) / chunk + 1;
    if (cpu && nparts > 0) {
        if (nparts > 1) {
            rc = kern_scratch_need(k, who, (size_t)nparts * cols * sizeof(float));
            if (rc < 0)
                return rc;
        }
        cl_mem out = nparts == 1 ? dbias : k->scratch;
        karg col_mem = ARG_LOCAL((size_t)cols * sizeof(float));
        karg a[] = {ARG(rows),   ARG(cols),    ARG(act), ARG(chunk), ARG_MEM(y),
                    ARG_MEM(dy), ARG_MEM(out), col_mem,  col_mem};
        size_t g1 = (size_t)nparts, l1 = 1;
        rc = kern_launch(k, who, k->bias_act_bwd_cpu, a, NARGS(a), 1, &g1, &l1);
        if (rc < 0 || nparts == 1)
            return rc;
    } else if (nparts == 1) {
        karg a[] = {ARG(rows),  ARG(cols),   ARG(act),       ARG(chunk),
                    ARG_MEM(y), ARG_MEM(dy), ARG_MEM(dbias), local_mem};
        return kern_launch(k, who, k->bias_act_bwd, a, NARGS(a), 2, global, local);
    } else if (nparts > 1) {
        rc = kern_scratch_need(k, who, (size_t)nparts * cols * sizeof(float));
        if (rc < 0)
            return rc;
        size_t global_all[2] = {global[0], ly * (size_t)nparts};
        karg a[] = {ARG(rows),   ARG(cols),           ARG(act), ARG(chunk), ARG_MEM(y),
                    ARG_MEM(dy), ARG_MEM(k->scratch), local_mem};
        rc = kern_launch(k, who, k->bias_act_bwd, a, NARGS(a), 2, global_all, local);
        if (rc < 0)
            return rc;
    }
    /* nparts == 0 (no rows) also lands here: the sum of nothing writes zeros into dbias. */
    cl_mem part = k->scratch;
    karg b[] = {ARG(nparts), ARG(cols), ARG_MEM(part), ARG_MEM(dbias), local_mem};
    return kern_launch(k, who, k->bias_act_bwd_sum, b, NARGS(b), 2, global, local);
}

int kern_softmax_xent(kern *k, int rows, int cols, cl_mem logits, cl_mem labels, float scale,
                      cl_mem dlogits, cl_mem loss, cl_mem correct)
{
    int n = 0, rc = kern_elements(k, "kern_softmax_xent", rows, cols, &n);
    if (rc < 0)
        return rc;
    if (rows == 0)
        return 0;
    if (cols == 0)
        return err_set(k->err, -EINVAL, "kern_softmax_xent: a softmax needs at least one class");
    int has = dlogits != NULL;
    karg a[] = {ARG(rows), ARG(cols),        ARG_MEM(logits), ARG_MEM(labels), ARG(scale),
                ARG(has),  ARG_MEM(dlogits), ARG_MEM(loss),   ARG_MEM(correct)};
    return kern_launch_1d(k, "kern_softmax_xent", k->softmax_xent, a, NARGS(a), (size_t)rows);
}

int kern_bce(kern *k, int rows, cl_mem logits, cl_mem labels, float scale, cl_mem dlogits,
             cl_mem loss, cl_mem correct)
{
    if (rows < 0)
        return err_set(k->err, -EINVAL, "kern_bce: negative row count %d", rows);
    if (rows == 0)
        return 0;
    int has = dlogits != NULL;
    karg a[] = {ARG(rows), ARG_MEM(logits),  ARG_MEM(labels), ARG(scale),
                ARG(has),  ARG_MEM(dlogits), ARG_MEM(loss),   ARG_MEM(correct)};
    return kern_launch_1d(k, "kern_bce", k->bce, a, NARGS(a), (size_t)rows);
}

int kern_mse(kern *k, int rows, int cols, cl_mem pred, cl_mem target, float scale, cl_mem dpred,
             cl_mem loss)
{
    int n = 0, rc = kern_elements(k, "kern_mse", rows, cols, &n);
    if (rc < 0)
        return rc;
    if (rows == 0)
        return 0;
    if (cols == 0)
        return err_set(k->err, -EINVAL, "kern_mse: rows of zero columns have no mean");
    float k2 = 2.0f * scale / (float)cols;
    int has = dpred != NULL;
    karg a[] = {ARG(rows), ARG(cols), ARG_MEM(pred),  ARG_MEM(target),
                ARG(k2),   ARG(has),  ARG_MEM(dpred), ARG_MEM(loss)};
    return kern_launch_1d(k, "kern_mse", k->mse, a, NARGS(a), (size_t)rows);
}

int kern_dropout(kern *k, int n, float rate, uint64_t seed, uint64_t offset, cl_mem x, cl_mem y)
{
    int count = 0, rc = kern_elements(k, "kern_dropout", n, 1, &count);
    if (rc < 0)
        return rc;
    if (n == 0)
        return 0;
    /* Same expression as ref_dropout, in float, so that both sides scale by the same bits. */
    float scale = rate <= 0.0f ? 1.0f : rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
    cl_ulong s = seed, o = offset;
    karg a[] = {ARG(n), ARG(rate), ARG(scale), ARG(s), ARG(o), ARG_MEM(x), ARG_MEM(y)};
    return kern_launch_1d(k, "kern_dropout", k->dropout, a, NARGS(a), (size_t)n);
}

int kern_reduce_sum(kern *k, int n, cl_mem x, cl_mem out, int index, int accumulate)
{
    const char *who = "kern_reduce_sum";
    int count = 0, rc = kern_elements(k, who, n, 1, &count);
    if (rc < 0)
        return rc;
    if (index < 0)
        return err_set(k->err, -EINVAL, "%s: negative index %d", who, index);
    if (n == 0 && accumulate)
        return 0; /* adding nothing; without accumulate the final pass stores 0 */
    size_t wg = k->local_red;
    karg local_mem = ARG_LOCAL(wg * sizeof(float));
    cl_mem src = x;
    int m = n;
    if ((size_t)n > wg * REDUCE_PER_ITEM) {
        /* At most 4·wg partial sums, so the final work-group adds at most 4 per work-item. */
        size_t per = wg * REDUCE_PER_ITEM;
        size_t parts = ((size_t)n + per - 1) / per;
        if (parts > 4 * wg)
            parts = 4 * wg;
        size_t chunk = kern_round_up(((size_t)n + parts - 1) / parts, wg);
        parts = ((size_t)n + chunk - 1) / chunk;
        rc = kern_scratch_need(k, who, parts * sizeof(float));
        if (rc < 0)
            return rc;
        int chunk_i = (int)chunk;
        karg a[] = {ARG(n), ARG(chunk_i), ARG_MEM(x), ARG_MEM(k->scratch), local_mem};
        size_t global = parts * wg;
        rc = kern_launch(k, who, k->reduce_sum, a, NARGS(a), 1, &global, &wg);
        if (rc < 0)
            return rc;
        src = k->scratch;
        m = (int)parts;
    }
    karg b[] = {ARG(m), ARG_MEM(src), ARG_MEM(out), ARG(index), ARG(accumulate), local_mem};
    return kern_launch(k, who, k->reduce_sum_final, b, NARGS(b), 1, &wg, &wg);
}

int kern_sgd(kern *k, int n, float lr, float momentum, cl_mem w, cl_mem g, cl_mem v)
{
    int count = 0, rc = kern_elements(k, "kern_sgd", n, 1, &count);
    if (rc < 0)
        return rc;
    if (n == 0)
        return 0;
    int has_v = momentum != 0.0f;
    if (has_v && !v)
        return err_set(k->err, -EINVAL, "kern_sgd: momentum %g needs a velocity buffer",
                       (double)momentum);
    karg a[] = {ARG(n), ARG(lr), ARG(momentum), ARG(has_v), ARG_MEM(w), ARG_MEM(g), ARG_MEM(v)};
    return kern_launch_1d(k, "kern_sgd", k->sgd, a, NARGS(a), (size_t)n);
}

int kern_adam(kern *k, int n, float lr, float beta1, float beta2, float eps, float bc1, float bc2,
              cl_mem w, cl_mem g, cl_mem m, cl_mem v)
{
    int count = 0, rc = kern_elements(k, "kern_adam", n, 1, &count);
    if (rc < 0)
        return rc;
    if (n == 0)
        return 0;
    if (k->cpu) { /* chunks of whole float16 runs, a few per compute unit */
        int chunk = (int)kern_round_up((size_t)(n + ADAM_GROUPS_PER_UNIT * k->units - 1) /
                                           (size_t)(ADAM_GROUPS_PER_UNIT * k->units),
                                       16);
        karg a[] = {ARG(n),   ARG(chunk), ARG(lr),    ARG(beta1), ARG(beta2), ARG(eps),
                    ARG(bc1), ARG(bc2),   ARG_MEM(w), ARG_MEM(g), ARG_MEM(m), ARG_MEM(v)};
        size_t global = (size_t)((n + chunk - 1) / chunk), local = 1;
        return kern_launch(k, "kern_adam", k->adam_cpu, a, NARGS(a), 1, &global, &local);
    }
    karg a[] = {ARG(n),   ARG(lr),    ARG(beta1), ARG(beta2), ARG(eps),  ARG(bc1),
                ARG(bc2), ARG_MEM(w), ARG_MEM(g), ARG_MEM(m), ARG_MEM(v)};
    return kern_launch_1d(k, "kern_adam", k->adam, a, NARGS(a), (size_t)n);
}

/* Size of a buffer in bytes, 0 when OpenCL cannot say. */
size_t kern_mem_bytes(cl_mem m)
{
    size_t size = 0;
    if (!m || clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS)
        return 0;
    return size;
}

int kern_gather_rows(kern *k, int rows, int cols, cl_mem src, cl_mem idx, int start, cl_mem dst)
{
    const char *who = "kern_gather_rows";
    int n = 0, rc = kern_elements(k, who, rows, cols, &n);
    if (rc < 0)
        return rc;
    if (n == 0)
        return 0;
    /* Host-side bounds: the index window and the destination must lie inside their buffers;
     * indices themselves are checked on the device against the source's row count. */
    if (start < 0 || ((size_t)start + rows) * 4 > kern_mem_bytes(idx))
        return err_set(k->err, -EINVAL, "%s: indices [%d, %lld) lie outside the index buffer", who,
                       start, (long long)start + rows);
    if ((size_t)n * 4 > kern_mem_bytes(dst))
        return err_set(k->err, -EINVAL, "%s: %d×%d words do not fit the destination", who, rows,
                       cols);
    size_t src_rows = kern_mem_bytes(src) / ((size_t)cols * 4);
    int src_rows_i = src_rows > INT_MAX ? INT_MAX : (int)src_rows;
    karg a[] = {ARG(rows),    ARG(cols),  ARG_MEM(src), ARG(src_rows_i),
                ARG_MEM(idx), ARG(start), ARG_MEM(dst)};
    return kern_launch_rows(k, who, k->gather_rows, a, NARGS(a), rows, cols);
}
