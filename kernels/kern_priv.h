/* kern_priv: the inside of a `kern`, shared by kernels.c (the kern object and the element-wise
 * families), gemm.c and conv.c (conv, pool, batchnorm, image), and the launch helpers kernels.c
 * defines for all of them. Not for use outside kernels/. */
#ifndef TRAINYARD_KERNELS_KERN_PRIV_H
#define TRAINYARD_KERNELS_KERN_PRIV_H

#include "kernels/kernels.h"
#include "util/err.h"

struct gemm_kernels; /* owned by gemm.c */
struct conv_kernels; /* owned by conv.c */
struct kern_prof;    /* owned by prof.c */

struct kern {
    ocl_ctx *c;
    char err[ERR_LEN];
    unsigned families; /* enum kern_family mask this kern was made with */
    uint32_t built;    /* bit i: family i of kernels_sources is built and its kernels exist */
    int dry;           /* kern_set_dry: launches of kernels outside the mask are skipped */
    struct gemm_kernels *gemm;
    struct conv_kernels *conv;
    cl_kernel bias_act_fwd, bias_act_bwd, softmax_xent, bce, mse, dropout, reduce_sum, sgd, adam,
        gather_rows;
    /* Second passes of the two-pass reductions (reduce_sum is the first pass of the sum). */
    cl_kernel bias_act_bwd_sum, reduce_sum_final;
    /* CPU forms of bias + activation (activation.cl), used when cpu is set. */
    cl_kernel bias_act_fwd_cpu, bias_act_bwd_cpu, adam_cpu;
    enum kern_class cls; /* kern_device_class: decides every per-device choice */
    int cpu;             /* the *_cpu kernels run; cls == KERN_CLASS_CPU unless a test flips it */
    int units;           /* compute units */
    size_t local_1d;     /* local size of the element-wise kernels */
    size_t local_red;    /* work-group size of the reductions: a power of two, at most 256 */
    size_t max_item[2];  /* CL_DEVICE_MAX_WORK_ITEM_SIZES in dimensions 0 and 1 */
    /* Device scratch for the partial sums between two passes; grows, never shrinks. It is safe
     * to reuse across calls because the context's queue is in order. */
    cl_mem scratch;
    size_t scratch_bytes;
    struct kern_prof *prof; /* TRAINYARD_PROFILE's per-kernel times, or NULL (prof.c) */
};

/* Creates kernel `name` from the program of the family that defines it, as clCreateKernel does;
 * a kernel of a family outside k's mask gives NULL with *rc CL_SUCCESS (its wrappers then fail
 * with -EIO), an unknown name NULL with CL_INVALID_KERNEL_NAME. */
cl_kernel kern_cl_kernel(kern *k, const char *name, cl_int *rc);

/* Creates the GEMM kernels of k->c's program into k->gemm (gemm.c). */
int gemm_kernels_new(kern *k, char *err);
/* Releases them; accepts NULL. */
void gemm_kernels_free(struct gemm_kernels *g);

/* Creates the conv, pool, batchnorm and image kernels into k->conv (conv.c). */
int conv_kernels_new(kern *k, char *err);
/* Releases them; accepts NULL. */
void conv_kernels_free(struct conv_kernels *g);

/* One kernel argument: a value of `size` bytes, or a NULL buffer / local memory when value is
 * NULL. */
typedef struct karg {
    size_t size;
    const void *value;
} karg;

#define ARG(v)           ((karg){sizeof(v), &(v)})
#define ARG_MEM(m)       ((karg){sizeof(cl_mem), (m) ? (const void *)&(m) : NULL})
#define ARG_LOCAL(bytes) ((karg){(bytes), NULL})
#define NARGS(a)         ((cl_uint)(sizeof(a) / sizeof((a)[0])))

/* Reads TRAINYARD_PROFILE: when set, k->prof counts every launch (prof.c). */
void kern_prof_init(kern *k);
/* Prints the per-kernel times to stderr and frees them; nothing when profiling is off. */
void kern_prof_print(kern *k);
/* clEnqueueNDRangeKernel of kn on k's queue, timed when profiling. */
cl_int kern_enqueue(kern *k, cl_kernel kn, cl_uint dims, const size_t *global, const size_t *local);

/* Sets the arguments of kn and enqueues it; who names the wrapper in the error sentence. */
int kern_launch(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, cl_uint dims,
                const size_t *global, const size_t *local);
/* One work-item per index below n (n > 0), in work-groups of k->local_1d. */
int kern_launch_1d(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, size_t n);
/* One work-item per element of a rows×cols matrix on a 2-D range (columns, rows). */
int kern_launch_rows(kern *k, const char *who, cl_kernel kn, const karg *a, cl_uint na, int rows,
                     int cols);
/* rows·cols into *n, or -EINVAL when a size is negative or the product passes the int indices. */
int kern_elements(kern *k, const char *who, int rows, int cols, int *n);
/* Makes k->scratch hold at least bytes. */
int kern_scratch_need(kern *k, const char *who, size_t bytes);
/* Size of a buffer in bytes, 0 when OpenCL cannot say. */
size_t kern_mem_bytes(cl_mem m);
/* The largest power of two ≤ v; v rounded up to a multiple of m. */
size_t kern_pow2_floor(size_t v);
size_t kern_round_up(size_t v, size_t m);

#endif
