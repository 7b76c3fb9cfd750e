/* kern_priv: the inside of a `kern`, shared by kernels.c (every family but GEMM) and gemm.c.
 * Not for use outside kernels/. */
#ifndef TRAINYARD_KERNELS_KERN_PRIV_H
#define TRAINYARD_KERNELS_KERN_PRIV_H

#include "kernels/kernels.h"
#include "util/err.h"

struct gemm_kernels; /* owned by gemm.c */

struct kern {
    ocl_ctx *c;
    char err[ERR_LEN];
    struct gemm_kernels *gemm;
    cl_kernel bias_act_fwd, bias_act_bwd, softmax_xent, bce, mse, dropout, reduce_sum, sgd, adam,
        gather_rows;
    /* Second passes of the two-pass reductions (reduce_sum is the first pass of the sum). */
    cl_kernel bias_act_bwd_sum, reduce_sum_final;
    size_t local_1d;    /* local size of the element-wise kernels */
    size_t local_red;   /* work-group size of the reductions: a power of two, at most 256 */
    size_t max_item[2]; /* CL_DEVICE_MAX_WORK_ITEM_SIZES in dimensions 0 and 1 */
    /* Device scratch for the partial sums between two passes; grows, never shrinks. It is safe
     * to reuse across calls because the context's queue is in order. */
    cl_mem scratch;
    size_t scratch_bytes;
};

/* Creates the GEMM kernels of k->c's program into k->gemm (gemm.c). */
int gemm_kernels_new(kern *k, char *err);
/* Releases them; accepts NULL. */
void gemm_kernels_free(struct gemm_kernels *g);

#endif
