/* Unit tests of kern_gemm against ref_gemm, for both kernels (gemm_cpu, gemm_tiled) whatever the
 * device: every transpose combination over a cube of awkward sizes, alpha/beta other than 1/0,
 * beta 0 over a NaN-filled C, row strides longer than the rows, K = 0, the trainer's shapes, and
 * argument checks; some shapes (small C, long K) make gemm_cpu and gemm_tiled split K, and
 * gemm_check_tiled_split goes through gemm_tiled's split on its own. TRAINYARD_GEMM=cpu-packed
 * runs gemm_cpu alone; with plain cpu the narrow kernels take their shapes, and those must give
 * gemm_cpu's bits exactly.
 * An element passes when |got − ref| ≤ 1e-4·sqrt(K)·(|alpha|·Σ|a||b| + |beta·c|), plus a hair
 * for exact zeros: the error budget of a K-term float sum, relative to its size. The split-K
 * cases use 1e-6 (about 8 float epsilons) instead: at K = 10^5 and more, Σ|a||b| grows like K and
 * the result like sqrt(K), and 1e-4 would let a lost part through.
 * Exits 77 without an OpenCL device. */
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "util/err.h"

#include "tests/unit/check.h"

struct gemm_case {
    int ta, tb, M, N, K;
    float alpha, beta;
    int pad; /* added to every minimal row stride */
};

/* The tolerances' factors of sqrt(K) (the header says why two). */
#define GEMM_REL       1e-4
#define GEMM_REL_SPLIT 1e-6

static ocl_ctx *ctx;

static void fill(float *x, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static cl_mem upload(const float *h, size_t n)
{
    char err[ERR_LEN];
    cl_mem m = NULL;
    if (ocl_buffer_new(ctx, n * sizeof(float), &m, err) < 0 ||
        ocl_write(ctx, m, 0, n * sizeof(float), h, err) < 0) {
        fprintf(stderr, "upload: %s\n", err);
        exit(1);
    }
    return m;
}

/* Runs one case on k and compares every element of C, padding included (which must not move),
 * at rel·sqrt(K) of the bound; keep, when not NULL, receives C (M·ldc floats). */
static int gemm_case_check(kern *k, const char *variant, const struct gemm_case *t, double rel,
                           float *keep)
{
    int ar = t->ta ? t->K : t->M, ac = t->ta ? t->M : t->K;
    int br = t->tb ? t->N : t->K, bc = t->tb ? t->K : t->N;
    int lda = (ac > 0 ? ac : 1) + t->pad, ldb = (bc > 0 ? bc : 1) + t->pad, ldc = t->N + t->pad;
    size_t na = (size_t)(ar > 0 ? ar : 1) * lda, nb = (size_t)(br > 0 ? br : 1) * ldb;
    size_t nc = (size_t)t->M * ldc;
    float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
    float *c0 = malloc(nc * sizeof(float)), *want = malloc(nc * sizeof(float));
    float *got = malloc(nc * sizeof(float)), *bound = malloc(nc * sizeof(float));
    float *aa = malloc(na * sizeof(float)), *ab = malloc(nb * sizeof(float));
    unsigned seed = (unsigned)(t->M * 131 + t->N * 17 + t->K * 7 + t->ta * 2 + t->tb);
    fill(a, na, &seed);
    fill(b, nb, &seed);
    fill(c0, nc, &seed);
    if (t->beta == 0.0f)
        for (size_t i = 0; i < nc; i++)
            c0[i] = NAN; /* beta 0 must overwrite, never read */
    for (size_t i = 0; i < nc; i++)
        if ((int)(i % ldc) >= t->N)
            c0[i] = 12345.0f; /* the stride padding of C must be left alone */
    for (size_t i = 0; i < na; i++)
        aa[i] = fabsf(a[i]);
    for (size_t i = 0; i < nb; i++)
        ab[i] = fabsf(b[i]);
    memcpy(want, c0, nc * sizeof(float));
    ref_gemm(t->ta, t->tb, t->M, t->N, t->K, t->alpha, a, lda, b, ldb, t->beta, want, ldc);
    for (size_t i = 0; i < nc; i++)
        bound[i] = t->beta == 0.0f ? 0.0f : fabsf(t->beta * c0[i]);
    ref_gemm(t->ta, t->tb, t->M, t->N, t->K, fabsf(t->alpha), aa, lda, ab, ldb, 1.0f, bound, ldc);

    cl_mem A = upload(a, na), B = upload(b, nb), C = upload(c0, nc);
    char err[ERR_LEN];
    int rc =
        kern_gemm(k, t->ta, t->tb, t->M, t->N, t->K, t->alpha, A, lda, B, ldb, t->beta, C, ldc);
    if (rc == 0)
        rc = ocl_read(ctx, C, 0, nc * sizeof(float), got, err);
    else
        snprintf(err, sizeof err, "%s", kern_last_error(k));
    int bad = 0;
    if (rc < 0) {
        fprintf(stderr, "%s %c%c %dx%dx%d: %s\n", variant, t->ta ? 'T' : 'N', t->tb ? 'T' : 'N',
                t->M, t->N, t->K, err);
        bad = 1;
    }
    double tol = rel * sqrt(t->K > 1 ? (double)t->K : 1.0);
    for (size_t i = 0; i < nc && rc == 0; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= tol * bound[i] + 1e-30)) {
            if (bad < 3)
                fprintf(stderr,
                        "%s %c%c %dx%dx%d alpha %g beta %g pad %d: C[%zu][%zu] = %.9g, want "
                        "%.9g (bound %g)\n",
                        variant, t->ta ? 'T' : 'N', t->tb ? 'T' : 'N', t->M, t->N, t->K, t->alpha,
                        t->beta, t->pad, i / ldc, i % ldc, got[i], want[i], bound[i]);
            bad++;
        }
    }
    if (keep && rc == 0)
        memcpy(keep, got, nc * sizeof(float));
    clReleaseMemObject(A);
    clReleaseMemObject(B);
    clReleaseMemObject(C);
    free(a);
    free(b);
    free(c0);
    free(want);
    free(got);
    free(bound);
    free(aa);
    free(ab);
    CHECK(bad == 0);
    return bad == 0;
}

/* Every transpose over the cube of sizes; alternating cases get alpha/beta and padded strides. */
static void gemm_check_all(kern *k, const char *variant)
{
    static const int dims[] = {1, 7, 33, 64, 257};
    const int nd = sizeof dims / sizeof *dims;
    int n = 0, ok = 0;
    for (int op = 0; op < 4; op++)
        for (int i = 0; i < nd; i++)
            for (int j = 0; j < nd; j++)
                for (int l = 0; l < nd; l++) {
                    struct gemm_case t = {op >> 1, op & 1, dims[i], dims[j],
                                          dims[l], 1.0f,   0.0f,    0};
                    if ((i + j + l + op) % 2) {
                        t.alpha = -0.75f;
                        t.beta = 1.5f;
                        t.pad = 3 + l;
                    }
                    ok += gemm_case_check(k, variant, &t, GEMM_REL, NULL);
                    n++;
                }
    static const struct gemm_case extra[] = {
        {0, 0, 300, 200, 513, 1.0f, 0.0f, 0},  {1, 1, 300, 200, 513, 0.5f, -1.0f, 16},
        {1, 0, 300, 200, 513, 2.0f, 1.0f, 5},  {0, 1, 300, 200, 513, 1.0f, 0.25f, 1},
        {0, 0, 7, 33, 0, 1.0f, 0.5f, 2},       {0, 0, 7, 33, 0, 1.0f, 0.0f, 0},
        {0, 0, 64, 128, 784, 1.0f, 0.0f, 0},   {1, 0, 784, 128, 64, 1.0f, 0.0f, 0},
        {0, 1, 64, 784, 128, 1.0f, 0.0f, 0},   {0, 0, 64, 10, 128, 1.0f, 0.0f, 0},
        {1, 0, 128, 10, 64, 1.0f, 1.0f, 0},    {0, 1, 64, 128, 10, 1.0f, 0.0f, 0},
        {0, 0, 20000, 64, 10, 1.0f, 0.0f, 0},  {1, 0, 10, 64, 100000, 1.0f, 0.0f, 0},
        {0, 0, 1000, 1, 1, 1.0f, 0.0f, 0},     {1, 1, 1, 1000, 1, 1.0f, 0.0f, 0},
        {0, 0, 512, 512, 512, 1.0f, 0.0f, 0},  {0, 0, 1024, 64, 1024, 1.0f, 0.0f, 0},
        {1, 1, 40, 50, 30001, 0.5f, -2.0f, 7}, {0, 0, 33, 70, 20000, 1.0f, 1.0f, 0},
    };
    for (size_t e = 0; e < sizeof extra / sizeof *extra; e++) {
        ok += gemm_case_check(k, variant, &extra[e], GEMM_REL, NULL);
        n++;
    }
    printf("%s: %d/%d cases pass\n", variant, ok, n);
}

/* gemm_tiled with K split over work-groups (C with fewer 64×64 tiles than the compute units, K
 * of 512 and more; kernels/gemm.c): every transpose, odd sizes, alpha/beta with beta applied once,
 * the trainer's long products (a conv weight gradient, 27×32 over 123,007 pixels; a dense forward,
 * 32×10 from 30,752), K = 10^6 onto a 3×5 C, shapes too small to split, and the same call twice
 * giving the same bits (the parts are added in a fixed order). */
static void gemm_check_tiled_split(kern *k)
{
    static const struct gemm_case cases[] = {
        {0, 0, 33, 17, 5001, -0.75f, 1.5f, 3}, {0, 1, 33, 17, 5001, 1.0f, 0.0f, 0},
        {1, 0, 33, 17, 5001, 0.5f, -1.0f, 2},  {1, 1, 33, 17, 5001, 2.0f, 0.25f, 1},
        {1, 0, 27, 32, 123007, 1.0f, 0.0f, 0}, {1, 0, 27, 32, 123007, -0.75f, 1.5f, 5},
        {0, 0, 32, 10, 30752, 1.0f, 0.0f, 0},  {1, 0, 3, 5, 1000000, 1.0f, 0.5f, 1},
        {0, 1, 1, 33, 1, 1.0f, 0.0f, 0},       {0, 0, 1, 33, 1, -0.75f, 1.5f, 2},
        {1, 1, 65, 1, 511, 1.0f, 1.0f, 0},     {0, 0, 1, 1, 513, 1.0f, 0.0f, 0},
    };
    int ok = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int e = 0; e < n; e++)
        ok += gemm_case_check(k, "tiled split", &cases[e], GEMM_REL_SPLIT, NULL);
    printf("tiled split: %d/%d cases pass\n", ok, n);

    static const struct gemm_case twice = {1, 0, 27, 32, 123007, 0.5f, 1.0f, 1};
    size_t nc = (size_t)twice.M * (twice.N + twice.pad);
    float *first = malloc(nc * sizeof(float)), *second = malloc(nc * sizeof(float));
    int same = first && second &&
               gemm_case_check(k, "tiled split", &twice, GEMM_REL_SPLIT, first) &&
               gemm_case_check(k, "tiled split", &twice, GEMM_REL_SPLIT, second) &&
               memcmp(first, second, nc * sizeof(float)) == 0;
    CHECK(same);
    printf("tiled split twice: %s\n", same ? "the same bits" : "failed");
    free(first);
    free(second);
}

/* Bad arguments are refused with -EINVAL before anything is enqueued. */
static void gemm_check_args(kern *k)
{
    char err[ERR_LEN];
    cl_mem small = NULL;
    if (ocl_buffer_new(ctx, 16 * sizeof(float), &small, err) < 0)
        return;
    CHECK_INT(kern_gemm(k, 0, 0, -1, 4, 4, 1, small, 4, small, 4, 0, small, 4), -EINVAL);
    CHECK_INT(kern_gemm(k, 0, 0, 4, 4, 4, 1, small, 3, small, 4, 0, small, 4), -EINVAL);
    CHECK_INT(kern_gemm(k, 0, 0, 4, 4, 8, 1, small, 8, small, 4, 0, small, 4), -EINVAL);
    CHECK_INT(kern_gemm(k, 0, 0, 4, 4, 4, 1, small, 4, small, 4, 0, small, 4), 0);
    CHECK_INT(kern_gemm(k, 0, 0, 0, 4, 4, 1, NULL, 4, NULL, 4, 0, NULL, 4), 0);
    CHECK(strlen(kern_last_error(k)) > 0);
    clReleaseMemObject(small);
}

/* The narrow CPU kernels (NN and TN with N ≤ 16, NT with K ≤ 16) give gemm_cpu's bits: each shape
 * on k (narrow kernels on) and on packed (TRAINYARD_GEMM=cpu-packed, gemm_cpu only), compared. */
static void gemm_check_narrow(kern *k, kern *packed)
{
    static const struct gemm_case cases[] = {
        {1, 0, 30752, 10, 32, 1.0f, 0.0f, 0}, {0, 1, 32, 30752, 10, 1.0f, 0.0f, 0},
        {1, 0, 37, 16, 7, -0.75f, 1.5f, 3},   {1, 0, 15, 1, 256, 1.0f, 0.0f, 0},
        {0, 1, 5, 33, 16, 0.5f, -1.0f, 2},    {0, 1, 1, 7, 1, 1.0f, 0.0f, 0},
        {1, 0, 128, 10, 64, 1.0f, 1.0f, 0},   {0, 1, 64, 128, 10, 1.0f, 0.0f, 1},
        {0, 0, 32, 10, 30752, 1.0f, 0.0f, 0}, {0, 0, 64, 10, 128, 1.0f, 0.0f, 0},
        {0, 0, 7, 16, 600, -0.75f, 1.5f, 3},  {0, 0, 100, 3, 300, 0.5f, 0.0f, 1},
        {0, 0, 1000, 1, 1, 1.0f, 0.0f, 0},    {0, 0, 33, 9, 20000, 2.0f, -1.0f, 0},
    };
    int ok = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int e = 0; e < n; e++) {
        const struct gemm_case *t = &cases[e];
        int ar = t->ta ? t->K : t->M, ac = t->ta ? t->M : t->K;
        int br = t->tb ? t->N : t->K, bc = t->tb ? t->K : t->N;
        int lda = ac + t->pad, ldb = bc + t->pad, ldc = t->N + t->pad;
        size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)t->M * ldc;
        float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4);
        float *got = malloc(nc * 4), *want = malloc(nc * 4);
        unsigned seed = (unsigned)(e * 977 + 5);
        fill(a, na, &seed);
        fill(b, nb, &seed);
        fill(c0, nc, &seed);
        cl_mem A = upload(a, na), B = upload(b, nb), C = upload(c0, nc);
        char err[ERR_LEN];
        int rc = kern_gemm(packed, t->ta, t->tb, t->M, t->N, t->K, t->alpha, A, lda, B, ldb,
                           t->beta, C, ldc);
        if (rc == 0)
            rc = ocl_read(ctx, C, 0, nc * 4, want, err);
        if (rc == 0)
            rc = ocl_write(ctx, C, 0, nc * 4, c0, err);
        if (rc == 0)
            rc = kern_gemm(k, t->ta, t->tb, t->M, t->N, t->K, t->alpha, A, lda, B, ldb, t->beta, C,
                           ldc);
        if (rc == 0)
            rc = ocl_read(ctx, C, 0, nc * 4, got, err);
        if (rc == 0 && memcmp(got, want, nc * 4) == 0)
            ok++;
        else
            fprintf(stderr, "narrow %c%c %dx%dx%d: not gemm_cpu's bits (rc %d)\n",
                    t->ta ? 'T' : 'N', t->tb ? 'T' : 'N', t->M, t->N, t->K, rc);
        clReleaseMemObject(A);
        clReleaseMemObject(B);
        clReleaseMemObject(C);
        free(a), free(b), free(c0), free(got), free(want);
    }
    CHECK(ok == n);
    printf("narrow = gemm_cpu: %d/%d shapes\n", ok, n);
}

int main(void)
{
    char err[ERR_LEN];
    ocl_device dev;
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV)
        check_skip("no OpenCL device");
    if (rc < 0 || ocl_ctx_new(&dev, NULL, &ctx, err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    static const char *variants[] = {"cpu", "tiled", "cpu-packed"};
    for (int v = 0; v < 3; v++) {
        kern *k = NULL;
        setenv("TRAINYARD_GEMM", variants[v], 1);
        if (kern_new(ctx, &k, err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        if (v != 1 && !kern_cpu_forms_fit(k)) {
            /* a GPU may run them out of its resources and lose the queue for what follows */
            printf("%s: skipped, the CPU forms are not meant for this device's class\n",
                   variants[v]);
            kern_free(k);
            continue;
        }
        gemm_check_all(k, variants[v]);
        if (v == 0)
            gemm_check_args(k);
        if (v == 1)
            gemm_check_tiled_split(k);
        kern_free(k);
    }
    kern *k = NULL, *packed = NULL;
    setenv("TRAINYARD_GEMM", "cpu-packed", 1);
    rc = kern_new(ctx, &packed, err);
    setenv("TRAINYARD_GEMM", "cpu", 1); /* gemm_cpu with the narrow kernels, whatever the class */
    if (rc == 0)
        rc = kern_new(ctx, &k, err);
    unsetenv("TRAINYARD_GEMM");
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (kern_cpu_forms_fit(k))
        gemm_check_narrow(k, packed);
    else
        printf("narrow: skipped, the CPU forms are not meant for this device's class\n");
    kern_free(k);
    kern_free(packed);
    ocl_ctx_free(ctx);
    return check_exit();
}
