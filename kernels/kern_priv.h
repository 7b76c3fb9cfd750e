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
    unsigned families; /* enum kern_family mask this kern was made with */
    uint32_t built;    /* bit i: family i of kernels_sources is built and its kernels exist */
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

/* Creates kernel `name` from the program of the family that defines it, as clCreateKernel does;
 * a kernel of a family outside k's mask gives NULL with *rc CL_SUCCESS (its wrappers then fail
 * with -EIO), an unknown name NULL with CL_INVALID_KERNEL_NAME. */
cl_kernel kern_cl_kernel(kern *k, const char *name, cl_int *rc);

/* Creates the GEMM kernels of k->c's program into k->gemm (gemm.c). */
int gemm_kernels_new(kern *k, char *err);
/* Releases them; accepts NULL. */
void gemm_kernels_free(struct gemm_kernels *g);

#endif
