/* Unit tests of the image families (kernels/conv.c): conv2d forward, backward-data and
 * backward-weights, max/avg pooling, batchnorm and the image batch, each against its plain-C
 * reference in kernels/ref_conv.c, plus finite-difference checks of the references' gradients.
 *
 * Shapes are chosen to be awkward: 1×1 kernels, stride 2, `same` padding on odd sizes (padding
 * by the Keras rule), a batch of 1, channel counts that are not multiples of 4, non-square
 * images and kernels, and the seed's two layers at batch 2.
 *
 * Tolerances (relative, per element):
 * - conv: |got − ref| ≤ 2e-6·sqrt(K)·Σ|a||b| + 1e-30, the budget of a K-term float sum against
 *   the sum of magnitudes (ref run on |x|, |w|), K the reduction length of the call;
 * - conv + max pool in one kernel, forward (with bias and each activation) and weight gradient:
 *   bit-exact, argmax equal, against the conv, pool and bias-activation calls;
 * - pooling: max forward bit-exact (it only selects) and argmax equal; avg forward 1e-6
 *   relative + 1e-7; backward (sums of dy shares) 1e-5 relative + 1e-6;
 * - batchnorm: y 1e-4 relative + 1e-4 (float statistics over up to 1.2·10⁵ rows against double
 *   ones), saved and moving statistics 1e-4..1e-5 relative; backward dx 1e-3 relative + 1e-4 of
 *   its largest value, dgamma and dbeta 1e-4 relative + 1e-4·sqrt(rows);
 * - image batch: 1e-5 relative + 1e-5 (the kernel does the reference's float operations but
 *   multiplies by 1/std, and the device may fuse a multiply-add);
 * - finite differences (central, in double over the references' float outputs, of the random
 *   linear functional L = Σ r·out): linear ops 1e-3 of the largest gradient checked, batchnorm
 *   1e-2 (h 1e-2, its curvature).
 * Determinism: a repeated call gives the same bits. The convolutions run through both the direct
 * kernels and the im2col + GEMM path (TRAINYARD_CONV). Exits 77 without an OpenCL device. */
#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"

#include "kernels/kern_priv.h"
#include "kernels/ref.h"

static cltest T;
static uint64_t rng_state = 0xc0417;

static uint32_t rng_u32(void)
{
    return cltest_rng_u32(&rng_state);
}

static float rng_float(float lo, float hi)
{
    return cltest_rng_float(&rng_state, lo, hi);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes < 16 ? 16 : bytes); /* cltest_buf reads at least 4 bytes */
    if (!p)
        cltest_die("malloc", "out of memory");
    return p;
}

static float *floats(size_t n, float lo, float hi)
{
    float *a = xmalloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = rng_float(lo, hi);
    return a;
}

static float *absolute(const float *a, size_t n)
{
    float *b = xmalloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i] = fabsf(a[i]);
    return b;
}

/* Output size and leading padding of one axis, Keras rules. */
static void pad_axis(int in, int k, int s, int same, int *out, int *pad)
{
    if (same) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + k - in;
        *pad = total > 0 ? total / 2 : 0;
    } else {
        *out = (in - k) / s + 1;
        *pad = 0;
    }
}

/* |got − want| ≤ tol·bound + 1e-30 everywhere. */
static int near_bound(const char *what, const float *got, const float *want, const float *bound,
                      size_t n, double tol)
{
    size_t bad = 0, worst = 0;
    double worst_x = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]), lim = tol * bound[i] + 1e-30;
        double x = isnan(d) ? INFINITY : d - lim;
        if (x > 0)
            bad++;
        if (x > worst_x)
            worst_x = x, worst = i;
    }
    if (!bad)
        return 1;
    fprintf(stderr, "%s: %zu of %zu values off; worst [%zu] got %.9g want %.9g bound %g\n", what,
            bad, n, worst, (double)got[worst], (double)want[worst], (double)bound[worst]);
    check_failures++;
    return 0;
}

struct conv_case {
    int n, h, w, c, f, kh, kw, sh, sw, same;
};

static kern_conv conv_geom(const struct conv_case *t)
{
    kern_conv g = {t->n, t->h, t->w, t->c, t->f, t->kh, t->kw, t->sh, t->sw, 0, 0, 0, 0};
    pad_axis(t->h, t->kh, t->sh, t->same, &g.oh, &g.pt);
    pad_axis(t->w, t->kw, t->sw, t->same, &g.ow, &g.pl);
    return g;
}

/* kern_conv2d_fwd_maxpool against kern_conv2d_fwd + kern_pool2d_fwd on the same kern: the same
 * bits and argmax (with and without argmax), and y near the reference; then
 * kern_conv2d_bwd_weights_maxpool against kern_pool2d_bwd + kern_conv2d_bwd_weights, bit for bit. Y
 * holds the conv output of x and w already. */
static void test_conv_maxpool(const kern_conv *g, const char *what, cl_mem X, cl_mem W, cl_mem Y,
                              cl_mem WORK, const float *x, const float *w, const float *ax,
                              const float *aw)
{
    if (!kern_conv2d_fwd_maxpool_ok(T.k) || g->oh < 2 || g->ow < 2 || g->n == 0)
        return;
    kern_pool p = {g->n, g->oh, g->ow, g->f, 2, 2, 2, 2, 0, 0, g->oh / 2, g->ow / 2};
    size_t nc = (size_t)g->n * g->oh * g->ow * g->f, np = (size_t)g->n * p.oh * p.ow * g->f;
    float *want = xmalloc(np * 4), *got = xmalloc(np * 4), *bound = xmalloc(np * 4);
    float *tmp = xmalloc(nc * 4);
    int32_t *arg_want = xmalloc(np * 4), *arg_got = xmalloc(np * 4);
    cl_mem P = cltest_buf(&T, np * 4, NULL), A = cltest_buf(&T, np * 4, NULL);
    cl_mem P2 = cltest_buf(&T, np * 4, NULL), A2 = cltest_buf(&T, np * 4, NULL);
    cltest_ok(&T, kern_pool2d_fwd(T.k, KERN_POOL_MAX, &p, Y, P, A), what);
    cltest_read(&T, P, np * 4, want);
    cltest_read(&T, A, np * 4, arg_want);
    cltest_ok(&T, kern_conv2d_fwd_maxpool(T.k, g, X, W, P2, A2, WORK), what);
    cltest_read(&T, P2, np * 4, got);
    cltest_read(&T, A2, np * 4, arg_got);
    if (memcmp(got, want, np * 4) || memcmp(arg_got, arg_want, np * 4)) {
        fprintf(stderr, "%s: conv + 2x2 max pool in one kernel differs from the two calls\n", what);
        check_failures++;
    }
    cltest_ok(&T, kern_conv2d_fwd_maxpool(T.k, g, X, W, P2, NULL, WORK), what);
    cltest_read(&T, P2, np * 4, got);
    CHECK(memcmp(got, want, np * 4) == 0);
    ref_conv2d_fwd_maxpool(g, x, w, tmp, want, NULL);
    ref_conv2d_fwd_maxpool(g, ax, aw, tmp, bound, NULL);
    near_bound(what, got, want, bound, np, 2e-6 * sqrt((double)g->kh * g->kw * g->c));
    /* with the conv's bias and activation after the pool: kern_bias_act_fwd's bits */
    float *b = floats((size_t)g->f, -1, 1);
    cl_mem B = cltest_buf(&T, (size_t)g->f * 4, b);
    for (int act = KERN_ACT_LINEAR; act <= KERN_ACT_SIGMOID; act++) {
        cltest_ok(&T, kern_pool2d_fwd(T.k, KERN_POOL_MAX, &p, Y, P, NULL), what);
        cltest_ok(&T, kern_bias_act_fwd(T.k, (int)(np / g->f), g->f, act, P, B), what);
        cltest_read(&T, P, np * 4, want);
        cltest_ok(&T, kern_conv2d_fwd_maxpool_act(T.k, g, X, W, P2, A2, act, B, WORK), what);
        cltest_read(&T, P2, np * 4, got);
        if (memcmp(got, want, np * 4)) {
            fprintf(stderr, "%s: conv + pool + bias + activation %d differs\n", what, act);
            check_failures++;
        }
    }
    cltest_read(&T, A, np * 4, arg_want);
    free(b);

    /* the weight gradient through the pool: pool_bwd + bwd_weights, the same bits */
    size_t nw = (size_t)g->kh * g->kw * g->c * g->f;
    float *dq = floats(np, -1, 1), *dw0 = floats(nw, -1, 1);
    float *dw_want = xmalloc(nw * 4), *dw_got = xmalloc(nw * 4);
    cl_mem DQ = cltest_buf(&T, np * 4, dq), DC = cltest_buf(&T, nc * 4, NULL);
    cl_mem DW = cltest_buf(&T, nw * 4, dw0);
    for (int acc = 0; acc < 2; acc++) {
        cltest_ok(&T, kern_pool2d_bwd(T.k, KERN_POOL_MAX, &p, DQ, A, DC), what);
        cltest_write(&T, DW, nw * 4, dw0);
        cltest_ok(&T, kern_conv2d_bwd_weights(T.k, g, X, DC, DW, acc, WORK), what);
        cltest_read(&T, DW, nw * 4, dw_want);
        cltest_write(&T, DW, nw * 4, dw0);
        cltest_ok(&T, kern_conv2d_bwd_weights_maxpool(T.k, g, X, DQ, A, DW, acc, WORK), what);
        cltest_read(&T, DW, nw * 4, dw_got);
        if (memcmp(dw_got, dw_want, nw * 4)) {
            fprintf(stderr, "%s: the weight gradient through the pool differs (accumulate %d)\n",
                    what, acc);
            check_failures++;
        }
    }
    free(dq), free(dw0), free(dw_want), free(dw_got);
    free(want), free(got), free(bound), free(tmp), free(arg_want), free(arg_got);
}

static void test_conv_case(const struct conv_case *t)
{
    kern_conv g = conv_geom(t);
    char what[160];
    snprintf(what, sizeof what, "conv n%d %dx%dx%d f%d k%dx%d s%dx%d %s", t->n, t->h, t->w, t->c,
             t->f, t->kh, t->kw, t->sh, t->sw, t->same ? "same" : "valid");
    size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.f;
    size_t nw = (size_t)g.kh * g.kw * g.c * g.f;
    float *x = floats(nx, -1, 1), *w = floats(nw, -1, 1), *dy = floats(ny, -1, 1);
    float *dw0 = floats(nw, -1, 1);
    float *ax = absolute(x, nx), *aw = absolute(w, nw), *ady = absolute(dy, ny);
    float *want = xmalloc((nx + ny + nw) * sizeof(float)), *got = xmalloc((nx + ny + nw) * 4);
    float *bound = xmalloc((nx + ny + nw) * sizeof(float)), *again = xmalloc((nx + ny + nw) * 4);
    size_t ws = kern_conv_workspace(T.k, &g);
    cl_mem X = cltest_buf(&T, nx * 4, x), W = cltest_buf(&T, nw * 4, w);
    cl_mem DY = cltest_buf(&T, ny * 4, dy), Y = cltest_buf(&T, ny * 4, NULL);
    cl_mem DX = cltest_buf(&T, nx * 4, NULL), DW = cltest_buf(&T, nw * 4, dw0);
    /* the workspace is a sub-buffer 4 KiB into a larger one, as a caller carving one allocation
     * would pass it */
    cl_mem WHOLE = cltest_buf(&T, 4096 + (ws ? ws : 4), NULL), WORK;
    cl_buffer_region region = {4096, ws ? ws : 4};
    cl_int sub_rc;
    WORK =
        clCreateSubBuffer(WHOLE, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &sub_rc);
    if (sub_rc != CL_SUCCESS)
        cltest_die("clCreateSubBuffer", ocl_strerror(sub_rc));
    double kf = (double)g.kh * g.kw * g.c, kd = (double)g.kh * g.kw * g.f;
    double kw_ = (double)g.n * g.oh * g.ow;

    cltest_ok(&T, kern_conv2d_fwd(T.k, &g, X, W, Y, WORK), what);
    cltest_read(&T, Y, ny * 4, got);
    ref_conv2d_fwd(&g, x, w, want);
    ref_conv2d_fwd(&g, ax, aw, bound);
    near_bound(what, got, want, bound, ny, 2e-6 * sqrt(kf));
    cltest_ok(&T, kern_conv2d_fwd(T.k, &g, X, W, Y, WORK), what);
    cltest_read(&T, Y, ny * 4, again);
    CHECK(memcmp(got, again, ny * 4) == 0);
    test_conv_maxpool(&g, what, X, W, Y, WORK, x, w, ax, aw);

    cltest_ok(&T, kern_conv2d_bwd_data(T.k, &g, DY, W, DX, WORK), what);
    cltest_read(&T, DX, nx * 4, got);
    ref_conv2d_bwd_data(&g, dy, w, want);
    ref_conv2d_bwd_data(&g, ady, aw, bound);
    near_bound(what, got, want, bound, nx, 2e-6 * sqrt(kd));

    for (int acc = 0; acc < 2; acc++) {
        cltest_write(&T, DW, nw * 4, dw0);
        cltest_ok(&T, kern_conv2d_bwd_weights(T.k, &g, X, DY, DW, acc, WORK), what);
        cltest_read(&T, DW, nw * 4, got);
        memcpy(want, dw0, nw * 4);
        ref_conv2d_bwd_weights(&g, x, dy, want, acc);
        float *adw = absolute(dw0, nw);
        ref_conv2d_bwd_weights(&g, ax, ady, adw, acc);
        if (!acc)
            ref_conv2d_bwd_weights(&g, ax, ady, adw, 0);
        near_bound(what, got, want, adw, nw, 2e-6 * sqrt(kw_ + 1));
        free(adw);
        cltest_write(&T, DW, nw * 4, dw0);
        cltest_ok(&T, kern_conv2d_bwd_weights(T.k, &g, X, DY, DW, acc, WORK), what);
        cltest_read(&T, DW, nw * 4, again);
        CHECK(memcmp(got, again, nw * 4) == 0);
    }
    clReleaseMemObject(WORK);
    cltest_bufs_free(&T);
    free(x), free(w), free(dy), free(dw0), free(ax), free(aw), free(ady);
    free(want), free(got), free(bound), free(again);
}

static const struct conv_case conv_cases[] = {
    /* n, h, w, c, f, kh, kw, sh, sw, same */
    {1, 5, 5, 1, 1, 1, 1, 1, 1, 0},
    {2, 7, 5, 3, 5, 1, 1, 1, 1, 1},
    {2, 7, 5, 3, 5, 1, 1, 2, 2, 0},
    {1, 9, 9, 3, 7, 3, 3, 1, 1, 0},
    {3, 9, 11, 5, 6, 3, 3, 1, 1, 1},
    {2, 9, 9, 5, 6, 3, 3, 2, 2, 1},
    {2, 10, 7, 6, 3, 3, 3, 2, 2, 0},
    {1, 8, 8, 2, 9, 2, 2, 2, 2, 1},
    {2, 11, 6, 7, 5, 5, 3, 2, 1, 1},
    {1, 6, 13, 3, 4, 2, 5, 1, 3, 0},
    {2, 4, 4, 3, 2, 5, 5, 1, 1, 1},
    {1, 3, 3, 33, 65, 3, 3, 1, 1, 1},
    {2, 64, 64, 3, 32, 3, 3, 1, 1, 0},
    {2, 31, 31, 32, 64, 3, 3, 1, 1, 1},
    {1, 17, 17, 16, 40, 3, 3, 2, 2, 1},
    {0, 5, 5, 3, 4, 3, 3, 1, 1, 0},
    /* a weight gradient too tall for one work-group's local memory: conv_dw splits its rows */
    {1, 6, 6, 64, 256, 3, 3, 1, 1, 1},
    /* conv + max pool in one kernel: odd outputs (a row and a column no window takes), an odd
     * count of pooled pixels, 33 filters (a partial 32-column tile) */
    {3, 9, 12, 3, 33, 3, 3, 1, 1, 0},
    {1, 7, 7, 4, 8, 2, 2, 1, 1, 1},
    {1, 20, 19, 3, 16, 3, 3, 1, 1, 0},
};

/* Every geometry through both paths: the direct kernels (the CPU class) and im2col + kern_gemm
 * (the GPU class), forced in turn with TRAINYARD_CONV on a fresh kern. The direct kernels are
 * CPU forms: where kern_cpu_forms_fit says they are not meant for the device, they are skipped
 * (and with them the fused conv + max pool), saying so. */
static void test_conv(void)
{
    static const char *variants[] = {"direct", "gemm"};
    for (int v = 0; v < 2; v++) {
        char err[ERR_LEN];
        if (v == 0 && !kern_cpu_forms_fit(T.k)) {
            printf("conv direct: skipped, the CPU forms are not meant for a device of the GPU "
                   "class (kern_cpu_forms_fit)\n");
            continue;
        }
        setenv("TRAINYARD_CONV", variants[v], 1);
        kern_free(T.k);
        if (kern_new(T.c, &T.k, err) < 0)
            cltest_die("creating the kernels", err);
        for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
            test_conv_case(&conv_cases[i]);
        printf("conv %s: %zu geometries\n", variants[v], sizeof conv_cases / sizeof conv_cases[0]);
    }
    unsetenv("TRAINYARD_CONV");
}

/* Wrong sizes are refused before anything runs. */
static void test_conv_args(void)
{
    kern_conv g = {1, 5, 5, 2, 3, 3, 3, 1, 1, 0, 0, 3, 3};
    cl_mem small = cltest_buf(&T, 16, NULL);
    kern_conv bad = g;
    bad.kh = 0;
    CHECK_INT(kern_conv2d_fwd(T.k, &bad, small, small, small, small), -EINVAL);
    CHECK_INT(kern_conv2d_fwd(T.k, &g, small, small, small, small), -EINVAL);
    CHECK(strlen(kern_last_error(T.k)) > 0);
    kern_pool p = {1, 4, 4, 2, 2, 2, 2, 2, 0, 0, 2, 2};
    CHECK_INT(kern_pool2d_fwd(T.k, 7, &p, small, small, NULL), -EINVAL);
    kern_conv one = {1, 3, 3, 2, 3, 3, 3, 1, 1, 0, 0, 1, 1};
    CHECK_INT(kern_conv2d_fwd_maxpool(T.k, &one, small, small, small, NULL, small), -EINVAL);
    CHECK_INT(kern_conv2d_fwd_maxpool(T.k, &g, small, small, small, NULL, small), -EINVAL);
    CHECK_INT(kern_conv2d_bwd_weights_maxpool(T.k, &one, small, small, small, small, 0, small),
              -EINVAL);
    CHECK_INT(kern_batchnorm_fwd_infer(T.k, 10, 0, 1e-3f, small, small, small, small, small, small),
              -EINVAL);
    cltest_bufs_free(&T);
}

/* Central difference of L = Σ r·f(x) at x[i] with step h, in double. */
typedef void (*fn_t)(const void *ctx, const float *in, float *out);

static double fd_at(fn_t f, const void *ctx, float *in, size_t i, const float *r, size_t nout,
                    float h, float *out)
{
    float keep = in[i];
    double l[2];
    for (int s = 0; s < 2; s++) {
        in[i] = keep + (s ? -h : h);
        f(ctx, in, out);
        double sum = 0;
        for (size_t o = 0; o < nout; o++)
            sum += (double)r[o] * out[o];
        l[s] = sum;
    }
    in[i] = keep;
    double dh = (double)(keep + h) - (double)(keep - h);
    return (l[0] - l[1]) / dh;
}

/* Compares an analytic gradient with finite differences at up to 40 coordinates. */
static void fd_check(const char *what, fn_t f, const void *ctx, float *in, size_t nin,
                     const float *r, size_t nout, const float *grad, float h, double tol)
{
    float *out = xmalloc(nout * sizeof(float));
    size_t pick[40];
    int np = 0;
    double gmax = 0;
    for (; np < 40 && (size_t)np < nin; np++) {
        pick[np] = nin <= 40 ? (size_t)np : rng_u32() % nin;
        gmax = fmax(gmax, fabs(grad[pick[np]]));
    }
    int bad = 0;
    for (int p = 0; p < np; p++) {
        double fd = fd_at(f, ctx, in, pick[p], r, nout, h, out);
        if (!(fabs(fd - grad[pick[p]]) <= tol * fmax(gmax, 1e-3))) {
            if (bad++ < 3)
                fprintf(stderr, "%s: d/d[%zu] finite difference %.7g, gradient %.7g\n", what,
                        pick[p], fd, (double)grad[pick[p]]);
        }
    }
    if (bad)
        check_failures++;
    free(out);
}

struct conv_fd {
    const kern_conv *g;
    const float *x, *w;
};

static void conv_fwd_x(const void *ctx, const float *in, float *out)
{
    const struct conv_fd *c = ctx;
    ref_conv2d_fwd(c->g, in, c->w, out);
}

static void conv_fwd_w(const void *ctx, const float *in, float *out)
{
    const struct conv_fd *c = ctx;
    ref_conv2d_fwd(c->g, c->x, in, out);
}

static void test_conv_fd(void)
{
    static const struct conv_case cases[] = {{2, 7, 6, 3, 4, 3, 3, 2, 2, 1},
                                             {1, 5, 8, 2, 3, 1, 1, 1, 1, 0},
                                             {2, 6, 6, 3, 2, 2, 3, 1, 2, 0},
                                             {1, 9, 7, 5, 3, 5, 5, 2, 1, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        kern_conv g = conv_geom(&cases[t]);
        size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.f;
        size_t nw = (size_t)g.kh * g.kw * g.c * g.f;
        float *x = floats(nx, -1, 1), *w = floats(nw, -1, 1), *r = floats(ny, -1, 1);
        float *dx = xmalloc(nx * 4), *dw = xmalloc(nw * 4);
        ref_conv2d_bwd_data(&g, r, w, dx);
        ref_conv2d_bwd_weights(&g, x, r, dw, 0);
        struct conv_fd c = {&g, x, w};
        fd_check("conv fd dx", conv_fwd_x, &c, x, nx, r, ny, dx, 0.0625f, 1e-3);
        fd_check("conv fd dw", conv_fwd_w, &c, w, nw, r, ny, dw, 0.0625f, 1e-3);
        free(x), free(w), free(r), free(dx), free(dw);
    }
}

struct pool_case {
    int mode, n, h, w, c, kh, kw, sh, sw, same;
};

static kern_pool pool_geom(const struct pool_case *t)
{
    kern_pool g = {t->n, t->h, t->w, t->c, t->kh, t->kw, t->sh, t->sw, 0, 0, 0, 0};
    pad_axis(t->h, t->kh, t->sh, t->same, &g.oh, &g.pt);
    pad_axis(t->w, t->kw, t->sw, t->same, &g.ow, &g.pl);
    return g;
}

static const struct pool_case pool_cases[] = {
    /* mode, n, h, w, c, kh, kw, sh, sw, same */
    {0, 2, 8, 8, 3, 2, 2, 2, 2, 0},    {1, 2, 8, 8, 3, 2, 2, 2, 2, 0},
    {0, 1, 7, 9, 5, 2, 2, 2, 2, 0},    {1, 1, 7, 9, 5, 2, 2, 2, 2, 1},
    {0, 2, 7, 7, 6, 3, 3, 2, 2, 1},    {1, 2, 7, 7, 6, 3, 3, 2, 2, 1},
    {0, 1, 5, 6, 3, 3, 3, 1, 1, 1},    {1, 1, 5, 6, 3, 3, 3, 1, 1, 1},
    {0, 1, 6, 5, 2, 1, 1, 1, 1, 0},    {1, 3, 6, 5, 7, 3, 2, 1, 2, 0},
    {1, 2, 7, 5, 9, 7, 5, 1, 1, 0},    {0, 2, 7, 5, 9, 7, 5, 1, 1, 0},
    {0, 4, 62, 62, 32, 2, 2, 2, 2, 0}, {1, 2, 31, 31, 64, 31, 31, 1, 1, 0},
    {0, 2, 9, 7, 21, 3, 3, 2, 2, 1},   {1, 2, 9, 7, 21, 3, 3, 2, 2, 1},
};

/* Max-pool inputs: distinct multiples of 1/8 in a random order, so no window has a tie and a
 * finite difference of 1/64 never changes which cell wins. */
static float *distinct(size_t n)
{
    float *a = xmalloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)((long)i - (long)n / 2) * 0.125f;
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_u32() % i;
        float t = a[i - 1];
        a[i - 1] = a[j], a[j] = t;
    }
    return a;
}

static void test_pool_case(const struct pool_case *t)
{
    kern_pool g = pool_geom(t);
    char what[128];
    snprintf(what, sizeof what, "%s pool n%d %dx%dx%d k%dx%d s%dx%d %s", t->mode ? "avg" : "max",
             t->n, t->h, t->w, t->c, t->kh, t->kw, t->sh, t->sw, t->same ? "same" : "valid");
    size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.c;
    float *x = t->mode ? floats(nx, -1, 1) : distinct(nx), *dy = floats(ny, -1, 1);
    /* a few ties in the max case: the first cell in window order must win */
    if (!t->mode && nx > 8)
        x[1] = x[0], x[g.c] = x[0];
    float *want = xmalloc((nx + ny) * 4), *got = xmalloc((nx + ny) * 4);
    int32_t *arg_want = xmalloc(ny * 4), *arg_got = xmalloc(ny * 4);
    cl_mem X = cltest_buf(&T, nx * 4, x), Y = cltest_buf(&T, ny * 4, NULL);
    cl_mem A = cltest_buf(&T, ny * 4, NULL), DY = cltest_buf(&T, ny * 4, dy);
    cl_mem DX = cltest_buf(&T, nx * 4, NULL);
    cltest_ok(&T, kern_pool2d_fwd(T.k, t->mode, &g, X, Y, A), what);
    cltest_read(&T, Y, ny * 4, got);
    ref_pool2d_fwd(t->mode, &g, x, want, arg_want);
    if (t->mode) {
        cltest_near(what, got, want, ny, 1e-6, 1e-7);
    } else {
        CHECK(memcmp(got, want, ny * 4) == 0);
        cltest_read(&T, A, ny * 4, arg_got);
        CHECK(memcmp(arg_got, arg_want, ny * 4) == 0);
        cltest_ok(&T, kern_pool2d_fwd(T.k, t->mode, &g, X, Y, NULL), what);
    }
    cltest_ok(&T, kern_pool2d_bwd(T.k, t->mode, &g, DY, A, DX), what);
    cltest_read(&T, DX, nx * 4, got);
    ref_pool2d_bwd(t->mode, &g, dy, arg_want, want);
    cltest_near(what, got, want, nx, 1e-5, 1e-6);
    cltest_bufs_free(&T);
    free(x), free(dy), free(want), free(got), free(arg_want), free(arg_got);
}

struct pool_fd {
    int mode;
    const kern_pool *g;
};

static void pool_fwd_x(const void *ctx, const float *in, float *out)
{
    const struct pool_fd *p = ctx;
    ref_pool2d_fwd(p->mode, p->g, in, out, NULL);
}

static void test_pool(void)
{
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
        test_pool_case(&pool_cases[i]);
    /* on a CPU device, the GPU forms (one work-item per element) too */
    if (T.k->cpu) {
        T.k->cpu = 0;
        for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
            test_pool_case(&pool_cases[i]);
        T.k->cpu = 1;
    }
    for (size_t i = 0; i < 12; i++) {
        kern_pool g = pool_geom(&pool_cases[i]);
        int mode = pool_cases[i].mode;
        size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.c;
        float *x = distinct(nx), *r = floats(ny, -1, 1), *dx = xmalloc(nx * 4);
        int32_t *arg = xmalloc(ny * 4);
        float *y = xmalloc(ny * 4);
        ref_pool2d_fwd(mode, &g, x, y, arg);
        ref_pool2d_bwd(mode, &g, r, arg, dx);
        struct pool_fd p = {mode, &g};
        fd_check(mode ? "avg pool fd" : "max pool fd", pool_fwd_x, &p, x, nx, r, ny, dx, 0.015625f,
                 1e-3);
        free(x), free(r), free(dx), free(arg), free(y);
    }
    printf("pool: %zu geometries\n", sizeof pool_cases / sizeof pool_cases[0]);
}

static void test_batchnorm_case(int rows, int c)
{
    char what[64];
    snprintf(what, sizeof what, "batchnorm %dx%d", rows, c);
    size_t n = (size_t)rows * c;
    float *x = floats(n, -2, 3), *dy = floats(n, -1, 1);
    for (size_t i = 0; i < n; i++)
        x[i] += 10.0f * (float)(i % c); /* columns with means far from 0 */
    float *gamma = floats(c, 0.5f, 1.5f), *beta = floats(c, -1, 1);
    float *mm = floats(c, -1, 1), *mv = floats(c, 0.5f, 2);
    float *mm_w = xmalloc(c * 4), *mv_w = xmalloc(c * 4), *sm_w = xmalloc(c * 4);
    float *si_w = xmalloc(c * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4);
    float *cg = xmalloc(c * 4), *dg_w = xmalloc(c * 4), *db_w = xmalloc(c * 4);
    memcpy(mm_w, mm, c * 4), memcpy(mv_w, mv, c * 4);
    cl_mem X = cltest_buf(&T, n * 4, x), DY = cltest_buf(&T, n * 4, dy);
    cl_mem G = cltest_buf(&T, c * 4, gamma), B = cltest_buf(&T, c * 4, beta);
    cl_mem MM = cltest_buf(&T, c * 4, mm), MV = cltest_buf(&T, c * 4, mv);
    cl_mem SM = cltest_buf(&T, c * 4, NULL), SI = cltest_buf(&T, c * 4, NULL);
    cl_mem Y = cltest_buf(&T, n * 4, NULL), DG = cltest_buf(&T, c * 4, NULL);
    cl_mem DB = cltest_buf(&T, c * 4, NULL);
    cltest_ok(&T, kern_batchnorm_fwd_train(T.k, rows, c, 0.99f, 1e-3f, X, G, B, MM, MV, SM, SI, Y),
              what);
    ref_batchnorm_fwd_train(rows, c, 0.99f, 1e-3f, x, gamma, beta, mm_w, mv_w, sm_w, si_w, want);
    cltest_read(&T, Y, n * 4, got);
    cltest_near(what, got, want, n, 1e-4, 1e-4);
    cltest_read(&T, SM, c * 4, cg);
    cltest_near(what, cg, sm_w, c, 1e-5, 1e-5);
    cltest_read(&T, SI, c * 4, cg);
    cltest_near(what, cg, si_w, c, 1e-4, 1e-6);
    cltest_read(&T, MM, c * 4, cg);
    cltest_near(what, cg, mm_w, c, 1e-5, 1e-6);
    cltest_read(&T, MV, c * 4, cg);
    cltest_near(what, cg, mv_w, c, 1e-4, 1e-6);

    /* backward from the reference's saved statistics */
    cltest_write(&T, SM, c * 4, sm_w);
    cltest_write(&T, SI, c * 4, si_w);
    cltest_ok(&T, kern_batchnorm_bwd(T.k, rows, c, X, DY, G, SM, SI, DY, DG, DB), what);
    ref_batchnorm_bwd(rows, c, x, dy, gamma, sm_w, si_w, want, dg_w, db_w);
    cltest_read(&T, DY, n * 4, got);
    double gscale = 0;
    for (size_t i = 0; i < n; i++)
        gscale = fmax(gscale, fabs(want[i]));
    cltest_near(what, got, want, n, 1e-3, 1e-4 * gscale + 1e-6);
    cltest_read(&T, DG, c * 4, cg);
    cltest_near(what, cg, dg_w, c, 1e-4, 1e-4 * sqrt((double)rows));
    cltest_read(&T, DB, c * 4, cg);
    cltest_near(what, cg, db_w, c, 1e-4, 1e-4 * sqrt((double)rows));

    /* inference, in place */
    cltest_ok(&T, kern_batchnorm_fwd_infer(T.k, rows, c, 1e-3f, X, G, B, MM, MV, X), what);
    ref_batchnorm_fwd_infer(rows, c, 1e-3f, x, gamma, beta, mm_w, mv_w, want);
    cltest_read(&T, X, n * 4, got);
    cltest_near(what, got, want, n, 1e-4, 1e-4);
    cltest_bufs_free(&T);
    free(x), free(dy), free(gamma), free(beta), free(mm), free(mv), free(mm_w), free(mv_w);
    free(sm_w), free(si_w), free(got), free(want), free(cg), free(dg_w), free(db_w);
}

struct bn_fd {
    int rows, c;
    const float *x, *gamma, *beta;
};

/* The training forward's y as a function of x, gamma or beta (which = 0, 1, 2). */
static void bn_fwd(const struct bn_fd *b, int which, const float *in, float *out)
{
    float *mm = xmalloc(b->c * 4), *mv = xmalloc(b->c * 4), *sm = xmalloc(b->c * 4);
    float *si = xmalloc(b->c * 4);
    memset(mm, 0, b->c * 4), memset(mv, 0, b->c * 4);
    ref_batchnorm_fwd_train(b->rows, b->c, 0.99f, 1e-3f, which == 0 ? in : b->x,
                            which == 1 ? in : b->gamma, which == 2 ? in : b->beta, mm, mv, sm, si,
                            out);
    free(mm), free(mv), free(sm), free(si);
}

static void bn_fwd_x(const void *ctx, const float *in, float *out)
{
    bn_fwd(ctx, 0, in, out);
}

static void bn_fwd_gamma(const void *ctx, const float *in, float *out)
{
    bn_fwd(ctx, 1, in, out);
}

static void bn_fwd_beta(const void *ctx, const float *in, float *out)
{
    bn_fwd(ctx, 2, in, out);
}

static void test_batchnorm(void)
{
    static const int shapes[][2] = {{1, 3},    {2, 1},    {7, 5},      {128, 8},
                                    {129, 33}, {300, 64}, {20000, 32}, {123008, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_batchnorm_case(shapes[i][0], shapes[i][1]);
    static const int fd_shapes[][2] = {{6, 3}, {17, 2}, {2, 4}};
    for (size_t i = 0; i < sizeof fd_shapes / sizeof fd_shapes[0]; i++) {
        int rows = fd_shapes[i][0], c = fd_shapes[i][1];
        size_t n = (size_t)rows * c;
        float *x = floats(n, -2, 2), *r = floats(n, -1, 1), *gamma = floats(c, 0.5f, 1.5f);
        float *beta = floats(c, -1, 1), *y = xmalloc(n * 4), *dx = xmalloc(n * 4);
        float *dg = xmalloc(c * 4), *db = xmalloc(c * 4), *sm = xmalloc(c * 4);
        float *si = xmalloc(c * 4), *mm = xmalloc(c * 4), *mv = xmalloc(c * 4);
        ref_batchnorm_fwd_train(rows, c, 0.99f, 1e-3f, x, gamma, beta, mm, mv, sm, si, y);
        ref_batchnorm_bwd(rows, c, x, r, gamma, sm, si, dx, dg, db);
        struct bn_fd b = {rows, c, x, gamma, beta};
        fd_check("batchnorm fd dx", bn_fwd_x, &b, x, n, r, n, dx, 1e-2f, 1e-2);
        fd_check("batchnorm fd dgamma", bn_fwd_gamma, &b, gamma, c, r, n, dg, 1e-2f, 1e-2);
        fd_check("batchnorm fd dbeta", bn_fwd_beta, &b, beta, c, r, n, db, 1e-2f, 1e-2);
        free(x), free(r), free(gamma), free(beta), free(y), free(dx), free(dg), free(db);
        free(sm), free(si), free(mm), free(mv);
    }
    /* no rows: the sums are zeros */
    cl_mem S = cltest_buf(&T, 16, NULL), DG = cltest_buf(&T, 12, NULL);
    float ones[3] = {1, 1, 1}, z[3];
    cltest_write(&T, DG, 12, ones);
    cltest_ok(&T, kern_batchnorm_bwd(T.k, 0, 3, S, S, S, S, S, S, DG, S), "batchnorm 0 rows");
    cltest_read(&T, DG, 12, z);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    cltest_bufs_free(&T);
    printf("batchnorm: ok\n");
}

struct image_case {
    int src_u8, n_src, sh, sw, c, dh, dw, flip, crop, norm;
};

static void image_run(const kern_image *g, int rows, cl_mem SRC, cl_mem IDX, int start, cl_mem M,
                      cl_mem S, float *out)
{
    cl_mem D = cltest_buf(&T, (size_t)rows * g->dh * g->dw * g->c * 4, NULL);
    cltest_ok(&T, kern_image_batch(T.k, g, rows, SRC, IDX, start, M, S, D), "kern_image_batch");
    cltest_read(&T, D, (size_t)rows * g->dh * g->dw * g->c * 4, out);
}

static void test_image_case(const struct image_case *t)
{
    char what[128];
    snprintf(what, sizeof what, "image %s %dx%dx%d -> %dx%d flip %d crop %d norm %d",
             t->src_u8 ? "u8" : "f32", t->sh, t->sw, t->c, t->dh, t->dw, t->flip, t->crop, t->norm);
    kern_image g = {t->src_u8, t->n_src, t->sh, t->sw,
                    t->c,      t->dh,    t->dw, t->src_u8 ? 1.0f / 255 : 1.0f,
                    t->flip,   t->crop,  42,    3};
    size_t ns = (size_t)t->n_src * t->sh * t->sw * t->c;
    void *src = xmalloc(ns * (t->src_u8 ? 1 : 4));
    for (size_t i = 0; i < ns; i++) {
        if (t->src_u8)
            ((uint8_t *)src)[i] = (uint8_t)(rng_u32() >> 24);
        else
            ((float *)src)[i] = rng_float(-1, 1);
    }
    /* a batch: two copies of each of a few images, and an index out of range */
    int rows = 2 * t->n_src + 1, start = 2;
    int32_t *idx = xmalloc((size_t)(rows + start) * 4);
    idx[0] = idx[1] = 0;
    for (int i = 0; i < t->n_src; i++)
        idx[start + i] = idx[start + t->n_src + i] = (i * 7 + 3) % t->n_src;
    idx[start + rows - 1] = t->n_src;
    float *mean = floats(t->c, 0.2f, 0.6f), *std = floats(t->c, 0.2f, 0.4f);
    size_t per = (size_t)t->dh * t->dw * t->c, nd = (size_t)rows * per;
    float *got = xmalloc(nd * 4), *want = xmalloc(nd * 4), *other = xmalloc(nd * 4);
    cl_mem SRC = cltest_buf(&T, ns * (t->src_u8 ? 1 : 4), src);
    cl_mem IDX = cltest_buf(&T, (size_t)(rows + start) * 4, idx);
    cl_mem M = t->norm ? cltest_buf(&T, t->c * 4, mean) : NULL;
    cl_mem S = t->norm ? cltest_buf(&T, t->c * 4, std) : NULL;
    image_run(&g, rows, SRC, IDX, start, M, S, got);
    ref_image_batch(&g, rows, src, idx, start, t->norm ? mean : NULL, t->norm ? std : NULL, want);
    cltest_near(what, got, want, nd, 1e-5, 1e-5);
    /* the same image in one batch gets the same transform; the index out of range zeros */
    for (int i = 0; i < t->n_src; i++)
        CHECK(memcmp(got + i * per, got + (t->n_src + i) * per, per * 4) == 0);
    for (size_t e = 0; e < per; e++)
        CHECK(got[(rows - 1) * per + e] == 0.0f);
    /* the same call again: the same bits; another epoch: another transform when augmenting */
    image_run(&g, rows, SRC, IDX, start, M, S, other);
    CHECK(memcmp(got, other, nd * 4) == 0);
    if ((t->flip || t->crop) && t->n_src >= 8) {
        g.epoch = 4;
        image_run(&g, rows, SRC, IDX, start, M, S, other);
        CHECK(memcmp(got, other, t->n_src * per * 4) != 0);
        ref_image_batch(&g, rows, src, idx, start, t->norm ? mean : NULL, t->norm ? std : NULL,
                        want);
        cltest_near(what, other, want, nd, 1e-5, 1e-5);
    }
    cltest_bufs_free(&T);
    free(src), free(idx), free(mean), free(std), free(got), free(want), free(other);
}

static void test_image(void)
{
    static const struct image_case cases[] = {
        /* u8, n_src, sh, sw, c, dh, dw, flip, crop, norm */
        {1, 5, 32, 32, 3, 32, 32, 0, 0, 0}, {1, 5, 32, 32, 3, 64, 64, 0, 0, 1},
        {0, 4, 33, 20, 3, 17, 9, 0, 0, 0},  {0, 3, 7, 9, 1, 21, 5, 0, 0, 1},
        {1, 9, 8, 8, 3, 8, 8, 1, 0, 0},     {1, 9, 8, 8, 3, 8, 8, 0, 2, 0},
        {0, 9, 28, 28, 1, 28, 28, 1, 4, 1}, {1, 12, 32, 32, 3, 64, 64, 1, 4, 1},
        {0, 8, 5, 6, 2, 11, 13, 1, 3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_image_case(&cases[i]);
    /* on a CPU device, the GPU form (one work-item per output float) too */
    if (T.k->cpu) {
        T.k->cpu = 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            test_image_case(&cases[i]);
        T.k->cpu = 1;
    }
    /* identity without augmentation: exactly the scaled pixels */
    uint8_t px[2 * 3 * 2] = {0, 255, 7, 9, 100, 200, 1, 2, 3, 4, 5, 6};
    int32_t idx[1] = {0};
    kern_image g = {1, 1, 2, 3, 2, 2, 3, 0.5f, 0, 0, 1, 0};
    float out[12];
    cl_mem SRC = cltest_buf(&T, sizeof px, px), IDX = cltest_buf(&T, 4, idx);
    image_run(&g, 1, SRC, IDX, 0, NULL, NULL, out);
    for (int i = 0; i < 12; i++)
        CHECK(out[i] == px[i] * 0.5f);
    cltest_bufs_free(&T);
    printf("image: %zu cases\n", sizeof cases / sizeof cases[0]);
}

int main(void)
{
    cltest_open(&T);
    test_conv();
    test_conv_args();
    test_conv_fd();
    test_pool();
    test_batchnorm();
    test_image();
    cltest_close(&T);
    return check_exit();
}
