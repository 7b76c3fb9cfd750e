/* gemm: the host side of kern_gemm — picks the kernel for the device and its blocking, checks
 * the arguments, and enqueues the work.
 *
 * CPU devices run gemm_cpu (kernels/gemm.cl): one work-item per work-group, each group an mb×nb
 * tile of C, K walked in blocks of kc with both operands packed into __local memory. The tile
 * starts as large as the matrix allows (up to mb_max×nb_max) and shrinks until the groups share
 * out evenly over the compute units (PoCL runs one work-group at a time per unit). When C is too
 * small for that but K is long (a weight gradient over a whole data set), K is split instead: each
 * part writes a partial product to a scratch buffer and gemm_cpu_sum adds the parts into C in a
 * fixed order. Every other device type runs gemm_tiled, the shared-memory GPU kernel: one
 * 16×16 work-group per 64×64 tile of C. It splits K the same way, into the same scratch and sum,
 * when C has fewer tiles than the device has compute units (a conv weight gradient, 27×32 from
 * 123,008 pixels, is one tile: one work-group on one SM of a GPU). The rule: parts =
 * ceil(GEMM_TILED_GROUPS·units / tiles), a few work-groups per compute unit, but no part shorter
 * than GEMM_TILED_KPART_MIN (a K under twice that is never split); kpart is rounded up to the
 * kernel's K slice and parts recounted from it. The parts, and so the bits of C, depend only on the
 * shape and the device's compute units, never on scheduling. TRAINYARD_GEMM=cpu|tiled forces one
 * (tests and benchmarks use it to reach both on one machine).
 *
 * Invariant: a call enqueues one kernel (two when K is split) and returns 0, or enqueues nothing
 * and returns a negative code with the reason in k->err. The scratch buffer belongs to the
 * gemm_kernels and grows on demand; the in-order queue keeps calls from overlapping on it. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_priv.h"

enum gemm_variant { GEMM_CPU = 0, GEMM_TILED = 1 };

/* Must match gemm.cl. */
#define GEMM_MR  8
#define GEMM_NR  32
#define GEMM_TS  64
#define GEMM_RTS 16
#define GEMM_TK  16

/* gemm_tiled's split K: work-groups aimed at per compute unit, and the shortest K range of a part
 * (a part then runs at least 16 K slices, each a barrier pair and 16 FMAs per work-item). */
#define GEMM_TILED_GROUPS    4
#define GEMM_TILED_KPART_MIN 256

/* CPU blocking, measured on a 2-core Zen 4 under PoCL (bench/README.md): the packed B panel
 * (kc×nb) and A block (mb×kc) fit L2 and __local memory together, one kc×GEMM_NR micro-panel of
 * B is reused from L1 across the A panels. */
#define GEMM_MB_MAX 512
#define GEMM_NB_MAX 256
#define GEMM_KC_MAX 256
/* The narrow kernels: C with at most GEMM_NARROW columns (TN) or a K that short (NT), in about
 * GEMM_NARROW_GROUPS work-groups per compute unit. */
#define GEMM_NARROW        16
#define GEMM_NARROW_GROUPS 4
/* Split K only when a part still has this much work (M·N·K multiply-adds per call). */
#define GEMM_SPLIT_MIN_WORK (1L << 22)

struct gemm_kernels {
    cl_kernel cpu, cpu_sum, tiled, tn_narrow, nt_narrow, nn_narrow;
    enum gemm_variant variant;
    int narrow;                 /* CPU variant: the narrow kernels take their shapes */
    int units;                  /* compute units: worker threads on a CPU device */
    int mb_max, nb_max, kc_max; /* gemm_cpu blocking that fits the device's local memory */
    uint64_t local_mem;         /* bytes of __local memory a work-group may use */
    cl_mem scratch;             /* split-K partial products, or NULL */
    size_t scratch_bytes;
};

/* One call's gemm_cpu launch: tile, K block, K parts and the k-range of each part. */
struct gemm_plan {
    int mb, nb, kc, parts, kpart;
};

static int gemm_kernel_create(kern *k, const char *name, cl_kernel *out, char *err)
{
    cl_int rc;
    cl_kernel kl = kern_cl_kernel(k, name, &rc);
    if (rc != CL_SUCCESS)
        return err_set(err, -EIO, "clCreateKernel(%s): %s", name, ocl_strerror(rc));
    *out = kl;
    return 0;
}

/* Shrinks the CPU blocking until its two panels fit local memory; 0 if even the smallest does not
 * (then the device runs gemm_tiled). */
static int gemm_cpu_fit(struct gemm_kernels *g, uint64_t local_mem)
{
    g->mb_max = GEMM_MB_MAX;
    g->nb_max = GEMM_NB_MAX;
    g->kc_max = GEMM_KC_MAX;
    while ((uint64_t)(g->mb_max + g->nb_max) * g->kc_max * sizeof(float) > local_mem) {
        if (g->mb_max > 2 * GEMM_NR && g->mb_max >= g->nb_max)
            g->mb_max /= 2;
        else if (g->nb_max > 2 * GEMM_NR)
            g->nb_max /= 2;
        else if (g->kc_max > 16)
            g->kc_max /= 2;
        else
            return 0;
    }
    return 1;
}

int gemm_kernels_new(kern *k, char *err)
{
    struct gemm_kernels *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(err, -ENOMEM, "out of memory for the GEMM kernels");
    int rc = gemm_kernel_create(k, "gemm_cpu", &g->cpu, err);
    if (rc == 0)
        rc = gemm_kernel_create(k, "gemm_cpu_sum", &g->cpu_sum, err);
    if (rc == 0)
        rc = gemm_kernel_create(k, "gemm_tiled", &g->tiled, err);
    if (rc == 0)
        rc = gemm_kernel_create(k, "gemm_tn_narrow", &g->tn_narrow, err);
    if (rc == 0)
        rc = gemm_kernel_create(k, "gemm_nt_narrow", &g->nt_narrow, err);
    if (rc == 0)
        rc = gemm_kernel_create(k, "gemm_nn_narrow", &g->nn_narrow, err);
    if (rc < 0)
        goto out;
    const ocl_device *d = &k->c->dev;
    g->variant = k->cls == KERN_CLASS_CPU ? GEMM_CPU : GEMM_TILED;
    g->units = d->compute_units ? (int)d->compute_units : 1;
    const char *force = getenv("TRAINYARD_GEMM");
    g->narrow = 1;
    if (force && strcmp(force, "cpu-packed") == 0) {
        g->variant = GEMM_CPU;
        g->narrow = 0;
    } else if (force && strcmp(force, "cpu") == 0)
        g->variant = GEMM_CPU;
    else if (force && strcmp(force, "tiled") == 0)
        g->variant = GEMM_TILED;
    g->local_mem = d->local_mem;
    if (!gemm_cpu_fit(g, d->local_mem))
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
    if (g->cpu_sum)
        clReleaseKernel(g->cpu_sum);
    if (g->tiled)
        clReleaseKernel(g->tiled);
    if (g->tn_narrow)
        clReleaseKernel(g->tn_narrow);
    if (g->nt_narrow)
        clReleaseKernel(g->nt_narrow);
    if (g->nn_narrow)
        clReleaseKernel(g->nn_narrow);
    if (g->scratch)
        clReleaseMemObject(g->scratch);
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

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* The gemm_cpu launch for one call. C is cut into tm×tn tiles of equal size (PoCL hands out
 * work-groups dynamically, so a ragged last tile or an extra one leaves a core idle at the end),
 * as few as the size limits allow: big tiles repack less. With fewer tiles than compute units, a
 * long K is split into one part per unit instead; otherwise the tile count grows along the longer
 * tile side until every unit has a tile and the tiles share out evenly, or there are four per
 * unit (never below one micro-tile). kc cuts each part's K range into equal blocks no larger
 * than kc_max. */
static struct gemm_plan gemm_cpu_plan(const struct gemm_kernels *g, int M, int N, int K)
{
    struct gemm_plan p = {0};
    int tm = ceil_div(M, g->mb_max), tn = ceil_div(N, g->nb_max);
    int maxm = ceil_div(M, GEMM_MR), maxn = ceil_div(N, GEMM_NR);
    p.parts = 1;
    p.kpart = K;
    if (tm * tn < g->units && K >= 2 * g->kc_max &&
        (long)M * N * K >= GEMM_SPLIT_MIN_WORK * g->units) {
        int parts = min_int(ceil_div(g->units, tm * tn), K / g->kc_max);
        p.kpart = ceil_div(K, parts);
        p.parts = ceil_div(K, p.kpart);
    } else {
        while (tm * tn < g->units || (tm * tn % g->units && tm * tn < 4 * g->units)) {
            int grow_m = tm < maxm, grow_n = tn < maxn;
            if (grow_m && (ceil_div(M, tm) >= ceil_div(N, tn) || !grow_n))
                tm++;
            else if (grow_n)
                tn++;
            else
                break;
        }
    }
    p.mb = round_up(ceil_div(M, tm), GEMM_MR);
    p.nb = round_up(ceil_div(N, tn), GEMM_NR);
    p.kc = p.kpart > 0 ? ceil_div(p.kpart, ceil_div(p.kpart, g->kc_max)) : 1;
    return p;
}

/* Makes the scratch buffer hold at least bytes. */
static int gemm_scratch_reserve(kern *k, size_t bytes)
{
    struct gemm_kernels *g = k->gemm;
    if (g->scratch_bytes >= bytes)
        return 0;
    cl_mem m;
    int rc = ocl_buffer_new(k->c, bytes, &m, k->err);
    if (rc < 0)
        return rc;
    if (g->scratch)
        clReleaseMemObject(g->scratch); /* queued work that uses it keeps it alive */
    g->scratch = m;
    g->scratch_bytes = bytes;
    return 0;
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

static int gemm_enqueue(kern *k, cl_kernel kl, cl_uint dims, const size_t *global,
                        const size_t *local, int M, int N, int K)
{
    cl_int rc = kern_enqueue(k, kl, dims, global, local);
    if (rc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm %dx%dx%d: clEnqueueNDRangeKernel: %s", M, N, K,
                       ocl_strerror(rc));
    return 0;
}

/* C = alpha·Σ W[s] + beta·C over the parts of a split K, in order (gemm_cpu_sum). */
static int gemm_sum_enqueue(kern *k, int M, int N, int K, int parts, float alpha, float beta,
                            cl_mem C, int ldc)
{
    struct gemm_kernels *g = k->gemm;
    cl_int crc = 0;
    crc |= clSetKernelArg(g->cpu_sum, 0, sizeof(int), &M);
    crc |= clSetKernelArg(g->cpu_sum, 1, sizeof(int), &N);
    crc |= clSetKernelArg(g->cpu_sum, 2, sizeof(int), &parts);
    crc |= clSetKernelArg(g->cpu_sum, 3, sizeof(float), &alpha);
    crc |= clSetKernelArg(g->cpu_sum, 4, sizeof(cl_mem), &g->scratch);
    crc |= clSetKernelArg(g->cpu_sum, 5, sizeof(float), &beta);
    crc |= clSetKernelArg(g->cpu_sum, 6, sizeof(cl_mem), &C);
    crc |= clSetKernelArg(g->cpu_sum, 7, sizeof(int), &ldc);
    if (crc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm: clSetKernelArg (split-K sum) failed");
    /* An explicit local size (32 columns by local_1d/32 rows; the kernel checks bounds): left
     * to the driver, PoCL picks one from each shape and compiles a work-group function for it
     * on first use, which no warm-up could foresee. */
    size_t lx = k->local_1d < 32 ? k->local_1d : 32, ly = k->local_1d / lx;
    if (ly > k->max_item[1])
        ly = kern_pow2_floor(k->max_item[1]);
    size_t sum_local[2] = {lx, ly};
    size_t sum_global[2] = {kern_round_up((size_t)N, lx), kern_round_up((size_t)M, ly)};
    return gemm_enqueue(k, g->cpu_sum, 2, sum_global, sum_local, M, N, K);
}

/* Sets gemm_cpu's blocking arguments (its first 13 are set) and enqueues it, then gemm_cpu_sum
 * when K is split. */
static int gemm_cpu_enqueue(kern *k, int narrow, int M, int N, int K, float alpha, float beta,
                            cl_mem C, int ldc)
{
    struct gemm_kernels *g = k->gemm;
    struct gemm_plan p = gemm_cpu_plan(g, M, N, K);
    cl_kernel kl = g->cpu;
    size_t ap_bytes = (size_t)p.mb * p.kc * sizeof(float), bp_bytes = (size_t)p.kc * p.nb * 4;
    if (narrow) { /* gemm_nn_narrow: the same plan but for its tiles, 16 columns, a few rows */
        kl = g->nn_narrow;
        p.nb = GEMM_NARROW;
        p.mb = round_up(ceil_div(M, GEMM_NARROW_GROUPS * g->units), GEMM_MR);
        p.mb = p.mb < 8 * GEMM_MR ? 8 * GEMM_MR : p.mb;
        ap_bytes = sizeof(float);
        bp_bytes = (size_t)p.kc * GEMM_NARROW * sizeof(float);
    }
    cl_mem W = C; /* unused with one part, but the argument must be a buffer */
    if (p.parts > 1) {
        int rc = gemm_scratch_reserve(k, (size_t)p.parts * M * N * sizeof(float));
        if (rc < 0)
            return rc;
        W = g->scratch;
    }
    cl_int crc = 0;
    crc |= clSetKernelArg(kl, 13, sizeof(int), &p.mb);
    crc |= clSetKernelArg(kl, 14, sizeof(int), &p.nb);
    crc |= clSetKernelArg(kl, 15, sizeof(int), &p.kc);
    crc |= clSetKernelArg(kl, 16, sizeof(int), &p.kpart);
    crc |= clSetKernelArg(kl, 17, sizeof(cl_mem), &W);
    crc |= clSetKernelArg(kl, 18, ap_bytes, NULL);
    crc |= clSetKernelArg(kl, 19, bp_bytes, NULL);
    if (crc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm: clSetKernelArg (blocking) failed");
    size_t global[3] = {(size_t)ceil_div(N, p.nb), (size_t)ceil_div(M, p.mb), (size_t)p.parts};
    size_t local[3] = {1, 1, 1};
    int rc = gemm_enqueue(k, kl, 3, global, local, M, N, K);
    if (rc < 0 || p.parts == 1)
        return rc;
    return gemm_sum_enqueue(k, M, N, K, p.parts, alpha, beta, C, ldc);
}

/* gemm_tiled's K parts for an M×N×K call (the rule in the header); *kpart the K range of each. */
static int gemm_tiled_parts(const struct gemm_kernels *g, int M, int N, int K, int *kpart)
{
    int tiles = ceil_div(M, GEMM_TS) * ceil_div(N, GEMM_TS);
    int parts = 1;
    *kpart = K;
    if (tiles < g->units && K >= 2 * GEMM_TILED_KPART_MIN) {
        parts = min_int(ceil_div(GEMM_TILED_GROUPS * g->units, tiles), K / GEMM_TILED_KPART_MIN);
        *kpart = round_up(ceil_div(K, parts), GEMM_TK);
        parts = ceil_div(K, *kpart);
    }
    return parts;
}

/* Sets gemm_tiled's split arguments (its first 13 are set) and enqueues it, then gemm_cpu_sum
 * when K is split. */
static int gemm_tiled_enqueue(kern *k, int M, int N, int K, float alpha, float beta, cl_mem C,
                              int ldc)
{
    struct gemm_kernels *g = k->gemm;
    int kpart, parts = gemm_tiled_parts(g, M, N, K, &kpart);
    cl_mem W = C; /* unused with one part, but the argument must be a buffer */
    if (parts > 1) {
        int rc = gemm_scratch_reserve(k, (size_t)parts * M * N * sizeof(float));
        if (rc < 0)
            return rc;
        W = g->scratch;
    }
    cl_int crc = clSetKernelArg(g->tiled, 13, sizeof(int), &kpart);
    crc |= clSetKernelArg(g->tiled, 14, sizeof(cl_mem), &W);
    if (crc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm: clSetKernelArg (tiled split) failed");
    size_t global[3] = {(size_t)ceil_div(N, GEMM_TS) * GEMM_RTS,
                        (size_t)ceil_div(M, GEMM_TS) * GEMM_RTS, (size_t)parts};
    size_t local[3] = {GEMM_RTS, GEMM_RTS, 1};
    int rc = gemm_enqueue(k, g->tiled, 3, global, local, M, N, K);
    if (rc < 0 || parts == 1)
        return rc;
    return gemm_sum_enqueue(k, M, N, K, parts, alpha, beta, C, ldc);
}

/* gemm_tn_narrow (ta) or gemm_nt_narrow: the long side of C (M for TN, N for NT) cut into a few
 * runs of 16-multiples per compute unit. */
static int gemm_narrow_enqueue(kern *k, int ta, int M, int N, int K, float alpha, cl_mem A, int lda,
                               cl_mem B, int ldb, float beta, cl_mem C, int ldc)
{
    struct gemm_kernels *g = k->gemm;
    int len = ta ? M : N;
    int per = round_up(ceil_div(len, GEMM_NARROW_GROUPS * g->units), GEMM_NARROW);
    /* NT holds its run of B transposed in local memory: at most half of it */
    while (!ta && per > GEMM_NARROW && (size_t)K * per * sizeof(float) > g->local_mem / 2)
        per = round_up(per / 2, GEMM_NARROW);
    cl_kernel kl = ta ? g->tn_narrow : g->nt_narrow;
    int tb = !ta;
    int rc = gemm_args(k, kl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (rc < 0)
        return rc;
    cl_int crc = clSetKernelArg(kl, 13, sizeof(int), &per);
    crc |= clSetKernelArg(kl, 14, (size_t)K * (ta ? GEMM_NARROW : per) * sizeof(float), NULL);
    if (crc != CL_SUCCESS)
        return err_set(k->err, -EIO, "gemm: clSetKernelArg (narrow) failed");
    size_t global = (size_t)ceil_div(len, per), local = 1;
    return gemm_enqueue(k, kl, 1, &global, &local, M, N, K);
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

    if (g->variant == GEMM_CPU && g->narrow && K > 0 && g->tn_narrow &&
        ((ta && !tb && N <= GEMM_NARROW && K <= g->kc_max) || (!ta && tb && K <= GEMM_NARROW)))
        return gemm_narrow_enqueue(k, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cl_kernel kl = g->variant == GEMM_CPU ? g->cpu : g->tiled;
    if (!kl && k->dry)
        return 0;
    if (!kl)
        return err_set(k->err, -EIO, "gemm: this kern was made without the gemm family");
    rc = gemm_args(k, kl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (rc < 0)
        return rc;
    if (g->variant == GEMM_CPU) {
        int narrow = g->narrow && !ta && !tb && N <= GEMM_NARROW && K > 0;
        if (narrow)
            rc = gemm_args(k, g->nn_narrow, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return rc < 0 ? rc : gemm_cpu_enqueue(k, narrow, M, N, K, alpha, beta, C, ldc);
    }
    return gemm_tiled_enqueue(k, M, N, K, alpha, beta, C, ldc);
}
