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
};

/* Creates the GEMM kernels of k->c's program into k->gemm (gemm.c). */
int gemm_kernels_new(kern *k, char *err);
/* Releases them; accepts NULL. */
void gemm_kernels_free(struct gemm_kernels *g);

#endif
