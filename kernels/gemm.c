/* gemm: the host side of kern_gemm — picks the kernel for the device and its blocking, checks
 * the arguments, and enqueues ONE kernel per call.
 *
 * CPU devices run gemm_cpu (kernels/gemm.cl): one work-item per work-group, each group an mb×nb
 * tile of C, K walked in blocks of kc with both operands packed into __local memory. The tile is
 * as large as GEMM_MB_MAX×GEMM_NB_MAX but shrinks until there are enough groups to keep every
 * compute unit busy. Every other device type runs gemm_tiled, the shared-memory GPU kernel.
 *
 * Invariant: a call either enqueues exactly one kernel and returns 0, or enqueues nothing and
 * returns a negative code with the reason in k->err. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_priv.h"

enum gemm_variant { GEMM_CPU = 0, GEMM_TILED = 1 };

/* Must match gemm.cl. */
#define GEMM_MR  8
#define GEMM_NR  32
#define GEMM_TS  64
#define GEMM_RTS 16

/* CPU blocking: a tile of C per work-group, and the K block whose packed panels fit the caches:
 * kc·GEMM_NR floats of B (one micro-panel) in L1, mb·kc + kc·nb floats in L2. */
#define GEMM_MB_MAX 256
#define GEMM_NB_MAX 256
#define GEMM_KC_MAX 256

struct gemm_kernels {
    cl_kernel cpu, tiled;
    enum gemm_variant variant;
    unsigned groups_wanted; /* work-groups that keep every compute unit busy */
};

static int gemm_kernel_create(kern *k, const char *name, cl_kernel *out, char *err)
{
    cl_int rc;
    cl_kernel kl = clCreateKernel(k->c->program, name, &rc);
    if (rc != CL_SUCCESS)
        return err_set(err, -EIO, "clCreateKernel(%s): %s", name, ocl_strerror(rc));
    *out = kl;
    return 0;
}

int gemm_kernels_new(kern *k, char *err)
{
    struct gemm_kernels *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(err, -ENOMEM, "out of memory for the GEMM kernels");
    int rc = gemm_kernel_create(k, "gemm_cpu", &g->cpu, err);
    if (rc < 0)
        goto out;
    rc = gemm_kernel_create(k, "gemm_tiled", &g->tiled, err);
    if (rc < 0)
        goto out;
    g->variant = k->c->dev.type & CL_DEVICE_TYPE_CPU ? GEMM_CPU : GEMM_TILED;
    g->groups_wanted = 2 * (k->c->dev.compute_units ? k->c->dev.compute_units : 1);
    const char *force = getenv("TRAINYARD_GEMM");
    if (force && strcmp(force, "cpu") == 0)
        g->variant = GEMM_CPU;
    else if (force && strcmp(force, "tiled") == 0)
        g->variant = GEMM_TILED;
out:
    if (rc < 0) {
        gemm_kernels_free(g);
        return rc;
    }
    k->gemm = g;
    return 0;
}

void gemm_kernels_free(struct gemm_kernels *g)
{
    if (!g)
        return;
    if (g->cpu)
        clReleaseKernel(g->cpu);
    if (g->tiled)
        clReleaseKernel(g->tiled);
    free(g);
}

static int round_up(int x, int m)
{
    return (x + m - 1) / m * m;
}

static int ceil_div(int x, int m)
{
    return (x + m - 1) / m;
}

/* The CPU blocking for one call: kc splits K into equal blocks no larger than GEMM_KC_MAX; the
 * tile starts at the largest that the matrix fills and halves its longer side while there are
 * too few tiles for the compute units (not below one micro-tile per side). */
static void gemm_cpu_blocking(const struct gemm_kernels *g, int M, int N, int K, int *mb, int *nb,
                              int *kc)
{
    int kblocks = K > 0 ? ceil_div(K, GEMM_KC_MAX) : 1;
    *kc = K > 0 ? ceil_div(K, kblocks) : 1;
    int m = round_up(M, GEMM_MR), n = round_up(N, GEMM_NR);
    m = m < GEMM_MB_MAX ? m : GEMM_MB_MAX;
    n = n < GEMM_NB_MAX ? n : GEMM_NB_MAX;
    while ((unsigned)(ceil_div(M, m) * ceil_div(N, n)) < g->groups_wanted) {
        int can_m = m > GEMM_MR, can_n = n > GEMM_NR;
        if (can_m && (m >= n || !can_n))
            m = round_up(m / 2, GEMM_MR);
        else if (can_n)
            n = round_up(n / 2, GEMM_NR);
        else
            break;
    }
    *mb = m;
    *nb = n;
}

/* 0 when a rows×cols matrix with row stride ld fits in buf; -EINVAL with a message otherwise. */
static int gemm_check_extent(kern *k, const char *name, cl_mem buf, int rows, int cols, int ld)
{
    if (ld < (cols > 1 ? cols : 1))
        return err_set(k->err, -EINVAL, "gemm: ld%s = %d is less than its %d columns", name, ld,
                       cols);
    if (!buf)
        return err_set(k->err, -EINVAL, "gemm: %s is NULL", name);
    size_t bytes = 0;
    cl_int rc = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    if (rc != CL_SUCCESS)
        return err_set(k->err, -EINVAL, "gemm: %s is not a buffer (%s)", name, ocl_strerror(rc));
    size_t need = ((size_t)(rows - 1) * (size_t)ld + (size_t)cols) * sizeof(float);
    if (need > bytes)
        return err_set(k->err, -EINVAL, "gemm: %s needs %zu bytes, its buffer has %zu", name, need,
                       bytes);
    return 0;
}

static int gemm_args(kern *k, cl_kernel kl, int ta, int tb, int M, int N, int K, float alpha,
                     cl_mem A, int lda, cl_mem B, int ldb, float beta, cl_mem C, int ldc)
{
    cl_int rc = 0;
    rc |= clSetKernelArg(kl, 0, sizeof(int), &ta);
    rc |= clSetKernelArg(kl, 1, sizeof(int), &tb);
    rc |= clSetKernelArg(kl, 2, sizeof(int), &M);
    rc |= clSetKernelArg(kl, 3, sizeof(int), &N);
    rc |= clSetKernelArg(kl, 4, sizeof(int), &K);
    rc |= clSetKernelArg(kl, 5, sizeof(float), &alpha);
    rc |= clSetKernelArg(kl, 6, sizeof(cl_mem), &A);
    rc |= clSetKernelArg(kl, 7, sizeof(int), &lda);
    rc |= clSetKernelArg(kl, 8, sizeof(cl_mem), &B);
    rc |= clSetKernelArg(kl, 9, sizeof(int), &ldb);
    rc |= clSetKernelArg(kl, 10, sizeof(float), &beta);
    rc |= clSetKernelArg(kl, 11, sizeof(cl_mem), &C);
    rc |= clSetKernelArg(kl, 12, sizeof(int), &ldc);
    if (rc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm: clSetKernelArg failed");
    return 0;
}

int kern_gemm(kern *k, int ta, int tb, int M, int N, int K, float alpha, cl_mem A, int lda,
              cl_mem B, int ldb, float beta, cl_mem C, int ldc)
{
    struct gemm_kernels *g = k->gemm;
    int rc;
    ta = ta != 0;
    tb = tb != 0;
    if (M < 0 || N < 0 || K < 0)
        return err_set(k->err, -EINVAL, "gemm: negative size %dx%dx%d", M, N, K);
    if (M == 0 || N == 0)
        return 0;
    if (K > 0) {
        rc = gemm_check_extent(k, "a", A, ta ? K : M, ta ? M : K, lda);
        if (rc < 0)
            return rc;
        rc = gemm_check_extent(k, "b", B, tb ? N : K, tb ? K : N, ldb);
        if (rc < 0)
            return rc;
    }
    rc = gemm_check_extent(k, "c", C, M, N, ldc);
    if (rc < 0)
        return rc;

    cl_kernel kl = g->variant == GEMM_CPU ? g->cpu : g->tiled;
    rc = gemm_args(k, kl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (rc < 0)
        return rc;
    size_t global[2], local[2];
    if (g->variant == GEMM_CPU) {
        int mb, nb, kc;
        gemm_cpu_blocking(g, M, N, K, &mb, &nb, &kc);
        cl_int crc = 0;
        crc |= clSetKernelArg(kl, 13, sizeof(int), &mb);
        crc |= clSetKernelArg(kl, 14, sizeof(int), &nb);
        crc |= clSetKernelArg(kl, 15, sizeof(int), &kc);
        crc |= clSetKernelArg(kl, 16, (size_t)mb * kc * sizeof(float), NULL);
        crc |= clSetKernelArg(kl, 17, (size_t)kc * nb * sizeof(float), NULL);
        if (crc != CL_SUCCESS)
            return err_set(k->err, -EIO, "gemm: clSetKernelArg (blocking) failed");
        global[0] = (size_t)ceil_div(N, nb);
        global[1] = (size_t)ceil_div(M, mb);
        local[0] = local[1] = 1;
    } else {
        global[0] = (size_t)ceil_div(N, GEMM_TS) * GEMM_RTS;
        global[1] = (size_t)ceil_div(M, GEMM_TS) * GEMM_RTS;
        local[0] = local[1] = GEMM_RTS;
    }
    cl_int erc = clEnqueueNDRangeKernel(k->c->queue, kl, 2, NULL, global, local, 0, NULL, NULL);
    if (erc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm %dx%dx%d: clEnqueueNDRangeKernel: %s", M, N, K,
                       ocl_strerror(erc));
    return 0;
}
