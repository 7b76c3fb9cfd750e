/* warmup: kern_warmup — every kernel of a kern's families launched once at each local size its
 * wrapper can choose, so that PoCL compiles those work-group functions now rather than inside a
 * job's first batch, and ocl_ctx_save() can keep them in the kernel cache.
 *
 * The shapes follow the launch rules in kernels.c: a rows kernel's work-group is lx columns (the
 * next power of two ≥ cols, at most 32) by local/lx rows, so cols 1, 2, 4, 8, 16 and 32 reach
 * every lx; kern_bias_act_bwd and kern_reduce_sum take a second pass past one work-group's
 * worth of rows, reached with 32·local_red + 1 rows (more than any pass of one group walks).
 * Element-wise and per-row kernels have one local size. GEMM's split-K sum leaves its local size
 * to the driver, which picks it from the shape; it is not covered and compiles on first use.
 *
 * Buffers are zero-filled so that every index is in range and no value traps; results are
 * discarded. Families outside the kern's mask are skipped, and so are families this file has
 * no lines for (a new family until its wrappers are added here): they compile on first launch. */
#include <stdlib.h>

#include "kernels/kern_priv.h"

static int warm_rows(kern *k, cl_mem a, cl_mem b, cl_mem c, cl_mem idx, int big)
{
    static const int widths[] = {1, 2, 4, 8, 16, 32};
    int rc = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0] && rc == 0; i++) {
        int cols = widths[i];
        if (k->families & KERN_FAM_ACTIVATION) {
            rc = kern_bias_act_fwd(k, 1, cols, KERN_ACT_RELU, a, c);
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
    if (rc == 0 && (k->families & KERN_FAM_DROPOUT))
        rc = kern_dropout(k, 1, 0.5f, 1, 0, a, b);
    if (rc == 0 && (k->families & KERN_FAM_REDUCE)) {
        rc = kern_reduce_sum(k, 1, a, c, 0, 0);
        if (rc == 0)
            rc = kern_reduce_sum(k, big, a, c, 0, 0);
    }
    if (rc == 0 && (k->families & KERN_FAM_OPTIM)) {
        rc = kern_sgd(k, 1, 0.1f, 0.9f, a, b, c);
        if (rc == 0)
            rc = kern_adam(k, 1, 0.1f, 0.9f, 0.999f, 1e-7f, 0.1f, 0.001f, a, b, c, a);
    }
    if (rc == 0 && (k->families & KERN_FAM_GEMM))
        rc = kern_gemm(k, 0, 0, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8);
    return rc;
}

int kern_warmup(kern *k, char *err)
{
    int big = 32 * (int)k->local_red + 1;
    size_t floats = (size_t)big * 32, small = 4096;
    cl_mem a = NULL, b = NULL, c = NULL, idx = NULL;
    float *zeros = calloc(floats, sizeof *zeros);
    int rc = zeros ? 0 : err_set(err, -ENOMEM, "out of memory warming up the kernels");
    if (rc == 0)
        rc = ocl_buffer_new(k->c, floats * sizeof(float), &a, err);
    if (rc == 0)
        rc = ocl_buffer_new(k->c, floats * sizeof(float), &b, err);
    if (rc == 0)
        rc = ocl_buffer_new(k->c, small * sizeof(float), &c, err);
    if (rc == 0)
        rc = ocl_buffer_new(k->c, small * sizeof(int), &idx, err);
    cl_mem all[] = {a, b, c, idx};
    size_t bytes[] = {floats * 4, floats * 4, small * 4, small * 4};
    for (size_t i = 0; i < 4 && rc == 0; i++)
        rc = ocl_write(k->c, all[i], 0, bytes[i], zeros, err);
    if (rc == 0) {
        int wrc = warm_rows(k, a, b, c, idx, big);
        if (wrc == 0)
            wrc = warm_flat(k, a, b, c, idx, big);
        if (wrc < 0)
            rc = err_set(err, wrc, "warming up the kernels: %s", kern_last_error(k));
    }
    if (rc == 0)
        rc = ocl_finish(k->c, err);
    for (size_t i = 0; i < 4; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    free(zeros);
    return rc;
}
