/* bench-gemm: kern_gemm against CLBlast's SGEMM on the default OpenCL device.
 *
 * Prints one JSON object per line: first the FMA peak (bench/fma_peak.h: this CPU's, and on a
 * device that is not a CPU the device's own, which "of_peak" refers to; printed again at the end),
 * then the square sizes (NN, alpha 1, beta 0)
 *   {"size": N, "ours_gflops": x, "of_peak": x/p, "cpus": u, "clblast_gflops": y,
 *    "max_rel_err": e, "checked": "clblast"}
 * then the shapes the trainer runs every step, {"shape": "MxNxK", "op": "NN", ...} and the same
 * fields. cpus is this process's CPU seconds per second while ours was timed: on a CPU device,
 * how many cores the kernel keeps busy.
 * Before timing, both results are compared: max_rel_err is max|ours − clblast| / max|clblast|,
 * and a "warning" field appears when it exceeds 1e-4·sqrt(K). Built without CLBlast (meson finds
 * none), clblast_gflops is null and ours is checked against ref_gemm on up to 8 rows of C instead
 * ("checked": "ref_gemm"). GFLOP/s = 2·M·N·K / t, t the best of at least five timed batches
 * (up to ~2 s of them): on a shared machine the best is what the kernel can do, a median mostly
 * measures the neighbours. A batch is enough back-to-back calls to last ~20 ms, ended by one
 * clFinish, so small shapes include the launch overhead the trainer pays. Warm-up calls (which also
 * compile kernels) come first and are not timed.
 *
 * Run: ./build/bench/bench-gemm [--quick] [--device-peak]   (--device-peak as in bench-conv;
 * TRAINYARD_DEVICE=<index> picks another device, TRAINYARD_GEMM=tiled the GPU kernel on a CPU
 * device; --quick skips 2048 and the shapes of 100,000 rows and more). */
#ifdef BENCH_HAVE_CLBLAST
#include <clblast_c.h>
#endif
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/fma_peak.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "util/err.h"
#include "util/timeutil.h"

#define BENCH_BATCH_SECONDS 0.02
#define BENCH_MIN_BATCHES   5
#define BENCH_MAX_SECONDS   2.0

struct bench_case {
    int ta, tb, M, N, K;
};

struct bench {
    ocl_ctx *c;
    kern *k;
    double peak; /* fma_peak_print's, GFLOP/s; 0 when unknown */
};

typedef int (*gemm_fn)(struct bench *b, const struct bench_case *s, cl_mem A, cl_mem B, cl_mem C);

static int run_ours(struct bench *b, const struct bench_case *s, cl_mem A, cl_mem B, cl_mem C)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    return kern_gemm(b->k, s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
}

#ifdef BENCH_HAVE_CLBLAST
static int run_clblast(struct bench *b, const struct bench_case *s, cl_mem A, cl_mem B, cl_mem C)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    CLBlastStatusCode st = CLBlastSgemm(
        CLBlastLayoutRowMajor, s->ta ? CLBlastTransposeYes : CLBlastTransposeNo,
        s->tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)s->M, (size_t)s->N, (size_t)s->K,
        1.0f, A, 0, (size_t)lda, B, 0, (size_t)ldb, 0.0f, C, 0, (size_t)s->N, &b->c->queue, NULL);
    return st == CLBlastSuccess ? 0 : -EIO;
}
#endif

/* CPU seconds this process (PoCL's worker threads included) has used. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per call, the best batch; negative when a call fails. *cpus: CPU seconds per second
 * over all the timed batches (on a CPU device, the cores the kernel keeps busy). */
static double time_gemm(struct bench *b, gemm_fn fn, const struct bench_case *s, cl_mem A, cl_mem B,
                        cl_mem C, double *cpus)
{
    /* Warm up, and size a batch from the second call. */
    if (fn(b, s, A, B, C) < 0 || clFinish(b->c->queue) != CL_SUCCESS)
        return -1;
    double t0 = time_mono();
    if (fn(b, s, A, B, C) < 0 || clFinish(b->c->queue) != CL_SUCCESS)
        return -1;
    double one = time_mono() - t0;
    int calls = one > 0 ? (int)(BENCH_BATCH_SECONDS / one) : 1000;
    calls = calls < 1 ? 1 : calls > 1000 ? 1000 : calls;
    double best = -1;
    int n = 0;
    double start = time_mono(), cpu0 = cpu_seconds();
    while (n < 64 && (n < BENCH_MIN_BATCHES || time_mono() - start < BENCH_MAX_SECONDS)) {
        t0 = time_mono();
        for (int i = 0; i < calls; i++)
            if (fn(b, s, A, B, C) < 0)
                return -1;
        if (clFinish(b->c->queue) != CL_SUCCESS)
            return -1;
        double t = (time_mono() - t0) / calls;
        best = n++ == 0 || t < best ? t : best;
    }
    double wall = time_mono() - start;
    *cpus = wall > 0 ? (cpu_seconds() - cpu0) / wall : 0;
    return best;
}

static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static int buffer_from(struct bench *b, const float *h, size_t n, cl_mem *out)
{
    char err[ERR_LEN];
    int rc = ocl_buffer_new(b->c, n * sizeof(float), out, err);
    if (rc == 0 && h)
        rc = ocl_write(b->c, *out, 0, n * sizeof(float), h, err);
    if (rc < 0)
        fprintf(stderr, "bench-gemm: %s\n", err);
    return rc;
}

/* Fills C with NaN so that neither result can pass for the other's leftovers. */
static int poison(struct bench *b, cl_mem C, size_t n)
{
    float nan = NAN;
    cl_int rc =
        clEnqueueFillBuffer(b->c->queue, C, &nan, sizeof nan, 0, n * sizeof(float), 0, NULL, NULL);
    return rc == CL_SUCCESS ? 0 : -EIO;
}

/* max|got − want| / max|want| over n values (NaN in got counts as the largest). */
static double max_rel_err(const float *got, const float *want, size_t n)
{
    double dmax = 0, rmax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        dmax = d > dmax || isnan(d) ? d : dmax;
        rmax = fabs(want[i]) > rmax ? fabs(want[i]) : rmax;
    }
    return rmax > 0 ? dmax / rmax : dmax;
}

/* max_rel_err of ours against ref_gemm on up to 8 rows of C spread over M (the whole of C would
 * take minutes in plain C at 2048); NaN when out of memory. */
static double ref_rows_rel_err(const struct bench_case *s, const float *ha, const float *hb,
                               const float *ours)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    int rows = s->M < 8 ? s->M : 8;
    float *got = malloc((size_t)rows * s->N * sizeof(float));
    float *want = malloc((size_t)rows * s->N * sizeof(float));
    double rel = NAN;
    if (got && want) {
        for (int r = 0; r < rows; r++) {
            int i = rows > 1 ? (int)((long)r * (s->M - 1) / (rows - 1)) : 0;
            const float *arow = s->ta ? ha + i : ha + (size_t)i * lda;
            ref_gemm(s->ta, s->tb, 1, s->N, s->K, 1.0f, arow, lda, hb, ldb, 0.0f,
                     want + (size_t)r * s->N, s->N);
            memcpy(got + (size_t)r * s->N, ours + (size_t)i * s->N, (size_t)s->N * sizeof(float));
        }
        rel = max_rel_err(got, want, (size_t)rows * s->N);
    }
    free(got);
    free(want);
    return rel;
}

/* Runs one case and prints its line; prefix is the JSON text before "ours_gflops". */
static int bench_case_run(struct bench *b, const struct bench_case *s, const char *prefix)
{
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
    float *ha = malloc(na * sizeof(float)), *hb = malloc(nb * sizeof(float));
    float *ours = malloc(nc * sizeof(float)), *theirs = malloc(nc * sizeof(float));
    cl_mem A = NULL, B = NULL, C = NULL;
    int rc = -ENOMEM;
    if (!ha || !hb || !ours || !theirs)
        goto out;
    fill(ha, na, 1);
    fill(hb, nb, 2);
    rc = buffer_from(b, ha, na, &A);
    if (rc == 0)
        rc = buffer_from(b, hb, nb, &B);
    if (rc == 0)
        rc = buffer_from(b, NULL, nc, &C);
    if (rc < 0)
        goto out;

    char err[ERR_LEN];
    const char *warning = NULL, *checked = "clblast";
    int have_theirs = 0;
#ifdef BENCH_HAVE_CLBLAST
    have_theirs = poison(b, C, nc) == 0 && run_clblast(b, s, A, B, C) == 0 &&
                  ocl_read(b->c, C, 0, nc * sizeof(float), theirs, err) == 0;
    if (!have_theirs)
        warning = "CLBlast failed on this device";
#endif
    rc = poison(b, C, nc);
    if (rc == 0)
        rc = run_ours(b, s, A, B, C);
    if (rc == 0)
        rc = ocl_read(b->c, C, 0, nc * sizeof(float), ours, err);
    if (rc < 0) {
        fprintf(stderr, "bench-gemm: ours failed: %s\n", kern_last_error(b->k));
        goto out;
    }
    double rel;
    if (have_theirs) {
        rel = max_rel_err(ours, theirs, nc);
    } else {
        checked = "ref_gemm";
        rel = ref_rows_rel_err(s, ha, hb, ours);
    }
    if (!(rel <= 1e-4 * sqrt((double)s->K)))
        warning = have_theirs ? "ours and CLBlast disagree" : "ours and ref_gemm disagree";

    double flops = 2.0 * s->M * s->N * s->K;
    double cpus = 0;
    double t_ours = time_gemm(b, run_ours, s, A, B, C, &cpus);
    double t_theirs = -1;
#ifdef BENCH_HAVE_CLBLAST
    if (have_theirs)
        t_theirs = time_gemm(b, run_clblast, s, A, B, C, &(double){0});
#endif
    double ours_gflops = t_ours > 0 ? flops / t_ours / 1e9 : 0.0;
    printf("{%s\"ours_gflops\": %.1f, ", prefix, ours_gflops);
    printf(b->peak > 0 ? "\"of_peak\": %.3f, " : "\"of_peak\": null, ",
           b->peak > 0 ? ours_gflops / b->peak : 0.0);
    printf("\"cpus\": %.2f, ", cpus);
    if (t_theirs > 0)
        printf("\"clblast_gflops\": %.1f, ", flops / t_theirs / 1e9);
    else
        printf("\"clblast_gflops\": null, ");
    printf(isnan(rel) ? "\"max_rel_err\": null" : "\"max_rel_err\": %.2g", rel);
    printf(", \"checked\": \"%s\"", checked);
    if (warning)
        printf(", \"warning\": \"%s\"", warning);
    printf("}\n");
    fflush(stdout);
    rc = 0;
out:
    if (A)
        clReleaseMemObject(A);
    if (B)
        clReleaseMemObject(B);
    if (C)
        clReleaseMemObject(C);
    free(ha);
    free(hb);
    free(ours);
    free(theirs);
    return rc;
}

int main(int argc, char **argv)
{
    int quick, device_loop;
    if (fma_peak_args(argc, argv, "bench-gemm", &quick, &device_loop) < 0)
        return 2;
    /* Give every case fresh pages. glibc raises its mmap threshold after the 2048 case frees its
     * 16 MiB arrays, so later buffers come recycled from the heap, and on the machine in
     * bench/README.md the memory-bound trainer shapes then ran 40% slower, for both libraries.
     * Pinning the threshold keeps each line independent of the ones before it. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    char err[ERR_LEN];
    ocl_device dev;
    struct bench b = {0};
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == 0)
        rc = ocl_ctx_new(&dev, NULL, &b.c, err);
    if (rc == 0)
        rc = kern_new(b.c, &b.k, err);
    if (rc < 0) {
        fprintf(stderr, "bench-gemm: %s\n", err);
        ocl_ctx_free(b.c);
        return 1;
    }
    fprintf(stderr, "bench-gemm: device %s (%s)\n", dev.name, ocl_device_kind(&dev));
    b.peak = fma_peak_print(b.c, device_loop);

    static const int sizes[] = {64, 128, 256, 512, 1024, 2048};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && rc == 0; i++) {
        int n = sizes[i];
        if (quick && n > 1024)
            continue;
        struct bench_case s = {0, 0, n, n, n};
        char prefix[64];
        snprintf(prefix, sizeof prefix, "\"size\": %d, ", n);
        rc = bench_case_run(&b, &s, prefix);
    }

    /* (ta, tb, M, N, K): a 784-128-10 MLP at batch 64, forward and backward, and full-batch;
     * then the seed CNN's at batch 32 on the im2col path (Conv2D 32 3x3 on 64x64x3, pool, dense
     * 30752 -> 10): the conv's forward col·W, input gradient dy·Wᵀ and weight gradient colᵀ·dy,
     * the dense forward X·W, weight gradient Xᵀ·dZ and input gradient dZ·Wᵀ. */
    static const struct bench_case shapes[] = {
        {0, 0, 64, 128, 784},   {1, 0, 784, 128, 64},   {0, 1, 64, 784, 128},
        {0, 0, 64, 10, 128},    {1, 0, 128, 10, 64},    {0, 1, 64, 128, 10},
        {0, 0, 100000, 64, 10}, {1, 0, 10, 64, 100000}, {0, 0, 1000, 1, 1},
        {0, 0, 123008, 32, 27}, {0, 1, 123008, 27, 32}, {1, 0, 27, 32, 123008},
        {0, 0, 32, 10, 30752},  {1, 0, 30752, 10, 32},  {0, 1, 32, 30752, 10},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes && rc == 0; i++) {
        const struct bench_case *s = &shapes[i];
        if (quick && s->M >= 100000)
            continue;
        char prefix[96];
        snprintf(prefix, sizeof prefix, "\"shape\": \"%dx%dx%d\", \"op\": \"%c%c\", ", s->M, s->N,
                 s->K, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N');
        rc = bench_case_run(&b, s, prefix);
    }
    fma_peak_print(b.c, device_loop); /* the machine is shared: the peak again, at the end */
    kern_free(b.k);
    ocl_ctx_free(b.c);
    return rc < 0 ? 1 : 0;
}
