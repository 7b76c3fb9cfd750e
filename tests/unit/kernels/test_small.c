/* Every kernel a GPU runs, once each on small shapes, against the references (kernels/ref.h):
 * the tiled GEMM in the four transpositions (partial tiles, one product short of splitting K),
 * the im2col convolution path forward and backward, max and average pooling, batchnorm, the
 * image batch, bias + activation in their per-element forms, the losses, the reduction in one
 * and two passes, dropout, the optimisers and the row gather. The kern takes the GPU class
 * (TRAINYARD_DEVICE_CLASS=gpu unless the environment says otherwise), so PoCL runs a GPU's
 * choices. Small enough for Oclgrind: tests/unit/kernels/oclgrind.sh runs this program under it
 * so that an out-of-bounds access, a data race, an uninitialised read or a divergent barrier in
 * any of these kernels fails the unit suite. Outputs stay uninitialised on the device where the
 * API says they are overwritten, so reading one is reported there. Exits 77 without a device. */
#include "tests/unit/check.h"

#include "kernels/ref.h"
#include "tests/unit/kernels/cltest.h"

static cltest T;
static uint64_t rng = 0x5a11;

static float *floats(size_t n, float lo, float hi)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    if (!a)
        cltest_die("malloc", "out of memory");
    for (size_t i = 0; i < n; i++)
        a[i] = cltest_rng_float(&rng, lo, hi);
    return a;
}

/* Reads n floats of m and compares them with want. */
static void expect(const char *what, cl_mem m, const float *want, size_t n, double rtol,
                   double atol)
{
    float *got = floats(n, 0, 0);
    cltest_read(&T, m, n * 4, got);
    cltest_near(what, got, want, n, rtol, atol);
    free(got);
}

static void test_gemm(void)
{
    static const struct {
        int ta, tb, M, N, K, pad;
        float alpha, beta;
    } cases[] = {
        {0, 0, 1, 33, 1, 0, 1, 0},          {0, 0, 17, 5, 23, 0, 1, 0},
        {1, 0, 33, 33, 33, 0, 1, 1},        {0, 1, 16, 16, 16, 2, 0.5f, 0},
        {1, 1, 7, 40, 19, 3, -0.75f, 1.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ta = cases[i].ta, tb = cases[i].tb, M = cases[i].M, N = cases[i].N, K = cases[i].K;
        int lda = (ta ? M : K) + cases[i].pad, ldb = (tb ? K : N) + cases[i].pad;
        int ldc = N + cases[i].pad;
        size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
        size_t nc = (size_t)M * ldc;
        float *a = floats(na, -1, 1), *b = floats(nb, -1, 1), *c = floats(nc, -1, 1);
        cl_mem A = cltest_buf(&T, na * 4, a), B = cltest_buf(&T, nb * 4, b);
        cl_mem C = cltest_buf(&T, nc * 4, c);
        char what[64];
        snprintf(what, sizeof what, "gemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
        cltest_ok(
            &T,
            kern_gemm(T.k, ta, tb, M, N, K, cases[i].alpha, A, lda, B, ldb, cases[i].beta, C, ldc),
            what);
        ref_gemm(ta, tb, M, N, K, cases[i].alpha, a, lda, b, ldb, cases[i].beta, c, ldc);
        expect(what, C, c, nc, 1e-5, 1e-5);
        free(a), free(b), free(c);
        cltest_bufs_free(&T);
    }
}

static void test_conv(void)
{
    static const kern_conv cases[] = {
        /* n, h, w, c, f, kh, kw, sh, sw, pt, pl, oh, ow */
        {2, 6, 6, 3, 4, 3, 3, 1, 1, 1, 1, 6, 6}, /* same padding */
        {1, 7, 7, 2, 5, 3, 3, 2, 2, 0, 0, 3, 3}, /* valid, stride 2 */
        {2, 4, 4, 3, 2, 1, 1, 1, 1, 0, 0, 4, 4}, /* pointwise: x is the patch matrix */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kern_conv *g = &cases[i];
        size_t nx = (size_t)g->n * g->h * g->w * g->c, ny = (size_t)g->n * g->oh * g->ow * g->f;
        size_t nw = (size_t)g->kh * g->kw * g->c * g->f, ws = kern_conv_workspace(T.k, g);
        float *x = floats(nx, -1, 1), *w = floats(nw, -1, 1), *dy = floats(ny, -1, 1);
        float *y = floats(ny, 0, 0), *dx = floats(nx, 0, 0), *dw = floats(nw, -1, 1);
        cl_mem X = cltest_buf(&T, nx * 4, x), W = cltest_buf(&T, nw * 4, w);
        cl_mem DY = cltest_buf(&T, ny * 4, dy), Y = cltest_buf(&T, ny * 4, NULL);
        cl_mem DX = cltest_buf(&T, nx * 4, NULL), DW = cltest_buf(&T, nw * 4, dw);
        cl_mem WORK = cltest_buf(&T, ws ? ws : 4, NULL);
        char what[64];
        snprintf(what, sizeof what, "conv %dx%dx%d k%d s%d", g->h, g->w, g->c, g->kh, g->sh);
        cltest_ok(&T, kern_conv2d_fwd(T.k, g, X, W, Y, WORK), what);
        ref_conv2d_fwd(g, x, w, y);
        expect(what, Y, y, ny, 1e-5, 1e-5);
        cltest_ok(&T, kern_conv2d_bwd_data(T.k, g, DY, W, DX, WORK), what);
        ref_conv2d_bwd_data(g, dy, w, dx);
        expect(what, DX, dx, nx, 1e-5, 1e-5);
        cltest_ok(&T, kern_conv2d_bwd_weights(T.k, g, X, DY, DW, 1, WORK), what);
        ref_conv2d_bwd_weights(g, x, dy, dw, 1);
        expect(what, DW, dw, nw, 1e-5, 1e-5);
        free(x), free(w), free(dy), free(y), free(dx), free(dw);
        cltest_bufs_free(&T);
    }
}

static void test_pool(void)
{
    static const struct {
        int mode;
        kern_pool g;
    } cases[] = {
        /* n, h, w, c, kh, kw, sh, sw, pt, pl, oh, ow */
        {KERN_POOL_MAX, {2, 6, 6, 3, 2, 2, 2, 2, 0, 0, 3, 3}},
        {KERN_POOL_AVG, {1, 5, 6, 2, 3, 3, 1, 1, 1, 1, 5, 6}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kern_pool *g = &cases[i].g;
        int mode = cases[i].mode;
        size_t nx = (size_t)g->n * g->h * g->w * g->c, ny = (size_t)g->n * g->oh * g->ow * g->c;
        float *x = floats(nx, -1, 1), *dy = floats(ny, -1, 1), *y = floats(ny, 0, 0);
        float *dx = floats(nx, 0, 0);
        int32_t *arg = malloc(ny * 4);
        cl_mem X = cltest_buf(&T, nx * 4, x), Y = cltest_buf(&T, ny * 4, NULL);
        cl_mem A = cltest_buf(&T, ny * 4, NULL), DY = cltest_buf(&T, ny * 4, dy);
        cl_mem DX = cltest_buf(&T, nx * 4, NULL);
        const char *what = mode == KERN_POOL_MAX ? "max pool" : "avg pool";
        cl_mem AM = mode == KERN_POOL_MAX ? A : NULL;
        cltest_ok(&T, kern_pool2d_fwd(T.k, mode, g, X, Y, AM), what);
        ref_pool2d_fwd(mode, g, x, y, arg);
        expect(what, Y, y, ny, 1e-6, 1e-7);
        cltest_ok(&T, kern_pool2d_bwd(T.k, mode, g, DY, AM, DX), what);
        ref_pool2d_bwd(mode, g, dy, arg, dx);
        expect(what, DX, dx, nx, 1e-6, 1e-6);
        free(x), free(dy), free(y), free(dx), free(arg);
        cltest_bufs_free(&T);
    }
}

static void test_batchnorm(void)
{
    const int rows = 50, c = 3;
    size_t n = (size_t)rows * c;
    float *x = floats(n, -2, 3), *dy = floats(n, -1, 1), *g = floats(c, 0.5f, 1.5f);
    float *b = floats(c, -1, 1), *mm = floats(c, -1, 1), *mv = floats(c, 0.5f, 2);
    float *sm = floats(c, 0, 0), *si = floats(c, 0, 0), *y = floats(n, 0, 0);
    float *dx = floats(n, 0, 0), *dg = floats(c, 0, 0), *db = floats(c, 0, 0);
    cl_mem X = cltest_buf(&T, n * 4, x), DY = cltest_buf(&T, n * 4, dy);
    cl_mem G = cltest_buf(&T, c * 4, g), B = cltest_buf(&T, c * 4, b);
    cl_mem MM = cltest_buf(&T, c * 4, mm), MV = cltest_buf(&T, c * 4, mv);
    cl_mem SM = cltest_buf(&T, c * 4, NULL), SI = cltest_buf(&T, c * 4, NULL);
    cl_mem Y = cltest_buf(&T, n * 4, NULL), DX = cltest_buf(&T, n * 4, NULL);
    cl_mem DG = cltest_buf(&T, c * 4, NULL), DB = cltest_buf(&T, c * 4, NULL);
    cltest_ok(&T, kern_batchnorm_fwd_infer(T.k, rows, c, 1e-3f, X, G, B, MM, MV, Y), "bn infer");
    ref_batchnorm_fwd_infer(rows, c, 1e-3f, x, g, b, mm, mv, y);
    expect("batchnorm infer", Y, y, n, 1e-5, 1e-5);
    cltest_ok(&T, kern_batchnorm_fwd_train(T.k, rows, c, 0.9f, 1e-3f, X, G, B, MM, MV, SM, SI, Y),
              "bn train");
    ref_batchnorm_fwd_train(rows, c, 0.9f, 1e-3f, x, g, b, mm, mv, sm, si, y);
    expect("batchnorm train", Y, y, n, 1e-4, 1e-4);
    expect("batchnorm moving mean", MM, mm, c, 1e-5, 1e-6);
    cltest_ok(&T, kern_batchnorm_bwd(T.k, rows, c, X, DY, G, SM, SI, DX, DG, DB), "bn bwd");
    ref_batchnorm_bwd(rows, c, x, dy, g, sm, si, dx, dg, db);
    expect("batchnorm dx", DX, dx, n, 1e-3, 1e-4);
    expect("batchnorm dgamma", DG, dg, c, 1e-4, 1e-4);
    float *all[] = {x, dy, g, b, mm, mv, sm, si, y, dx, dg, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    cltest_bufs_free(&T);
}

static void test_image(void)
{
    kern_image g = {1, 3, 5, 5, 3, 4, 4, 1.0f / 255, 1, 1, 42, 2};
    size_t ns = (size_t)g.n_src * g.sh * g.sw * g.c;
    int rows = 4, start = 1;
    int32_t idx[5] = {0, 2, 0, 1, 3}; /* the last is out of range: zeros */
    uint8_t *src = malloc(ns);
    for (size_t i = 0; i < ns; i++)
        src[i] = (uint8_t)(cltest_rng_u32(&rng) >> 24);
    size_t nd = (size_t)rows * g.dh * g.dw * g.c;
    float *mean = floats(g.c, 0.2f, 0.6f), *std = floats(g.c, 0.2f, 0.4f), *dst = floats(nd, 0, 0);
    cl_mem S = cltest_buf(&T, ns, src), I = cltest_buf(&T, sizeof idx, idx);
    cl_mem M = cltest_buf(&T, g.c * 4, mean), SD = cltest_buf(&T, g.c * 4, std);
    cl_mem D = cltest_buf(&T, nd * 4, NULL);
    cltest_ok(&T, kern_image_batch(T.k, &g, rows, S, I, start, M, SD, D), "image batch");
    ref_image_batch(&g, rows, src, idx, start, mean, std, dst);
    expect("image batch", D, dst, nd, 1e-5, 1e-5);
    free(src), free(mean), free(std), free(dst);
    cltest_bufs_free(&T);
}

static void test_bias_act(void)
{
    static const int shapes[][2] = {{37, 5}, {300, 33}}; /* 300×33: a two-pass column sum */
    for (size_t s = 0; s < 2; s++)
        for (int act = KERN_ACT_LINEAR; act <= KERN_ACT_SIGMOID; act++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            size_t n = (size_t)rows * cols;
            float *y = floats(n, -2, 2), *bias = floats(cols, -1, 1), *dy = floats(n, -1, 1);
            float *db = floats(cols, 0, 0);
            cl_mem Y = cltest_buf(&T, n * 4, y), BI = cltest_buf(&T, cols * 4, bias);
            cl_mem DY = cltest_buf(&T, n * 4, dy), DB = cltest_buf(&T, cols * 4, NULL);
            char what[64];
            snprintf(what, sizeof what, "bias+act %d %dx%d", act, rows, cols);
            cltest_ok(&T, kern_bias_act_fwd(T.k, rows, cols, act, Y, BI), what);
            ref_bias_act_fwd(rows, cols, act, y, bias);
            expect(what, Y, y, n, 1e-5, 1e-6);
            cltest_write(&T, Y, n * 4, y); /* the backward from the reference's output */
            cltest_ok(&T, kern_bias_act_bwd(T.k, rows, cols, act, Y, DY, DB), what);
            ref_bias_act_bwd(rows, cols, act, y, dy, db);
            expect(what, DY, dy, n, 1e-5, 1e-6);
            expect(what, DB, db, cols, 1e-4, 1e-5);
            free(y), free(bias), free(dy), free(db);
            cltest_bufs_free(&T);
        }
}

static void test_losses(void)
{
    enum { ROWS = 9, COLS = 4 };
    float *z = floats(ROWS * COLS, -3, 3), *t = floats(ROWS * COLS, -1, 1);
    float *yb = floats(ROWS, 0, 1), dl[ROWS * COLS], loss[ROWS], cor[ROWS];
    int32_t lab[ROWS];
    for (int r = 0; r < ROWS; r++)
        lab[r] = r % COLS, yb[r] = yb[r] > 0.5f;
    cl_mem Z = cltest_buf(&T, sizeof dl, z), TT = cltest_buf(&T, sizeof dl, t);
    cl_mem L = cltest_buf(&T, sizeof lab, lab), YB = cltest_buf(&T, sizeof loss, yb);
    cl_mem DL = cltest_buf(&T, sizeof dl, NULL), LO = cltest_buf(&T, sizeof loss, NULL);
    cl_mem CO = cltest_buf(&T, sizeof cor, NULL);
    cltest_ok(&T, kern_softmax_xent(T.k, ROWS, COLS, Z, L, 0.5f, DL, LO, CO), "softmax_xent");
    ref_softmax_xent(ROWS, COLS, z, lab, 0.5f, dl, loss, cor);
    expect("softmax_xent dlogits", DL, dl, ROWS * COLS, 1e-5, 1e-6);
    expect("softmax_xent loss", LO, loss, ROWS, 1e-5, 1e-6);
    expect("softmax_xent correct", CO, cor, ROWS, 0, 0);
    cltest_ok(&T, kern_bce(T.k, ROWS, Z, YB, 0.5f, DL, LO, CO), "bce");
    ref_bce(ROWS, z, yb, 0.5f, dl, loss, cor);
    expect("bce dlogits", DL, dl, ROWS, 1e-5, 1e-6);
    expect("bce loss", LO, loss, ROWS, 1e-5, 1e-6);
    cltest_ok(&T, kern_mse(T.k, ROWS, COLS, Z, TT, 0.5f, DL, LO), "mse");
    ref_mse(ROWS, COLS, z, t, 0.5f, dl, loss);
    expect("mse dpred", DL, dl, ROWS * COLS, 1e-5, 1e-6);
    expect("mse loss", LO, loss, ROWS, 1e-5, 1e-6);
    free(z), free(t), free(yb);
    cltest_bufs_free(&T);
}

static void test_vectors(void)
{
    static const int sizes[] = {37, 5000}; /* 5000: the reduction's two passes */
    for (size_t s = 0; s < 2; s++) {
        int n = sizes[s];
        float *x = floats(n, -1, 1), *w = floats(n, -1, 1), *g = floats(n, -1, 1);
        float *m = floats(n, -0.1f, 0.1f), *v = floats(n, 0, 0.1f), *y = floats(n, 0, 0);
        float sum[2] = {0.5f, 0};
        cl_mem X = cltest_buf(&T, n * 4, x), W = cltest_buf(&T, n * 4, w);
        cl_mem G = cltest_buf(&T, n * 4, g), M = cltest_buf(&T, n * 4, m);
        cl_mem V = cltest_buf(&T, n * 4, v), Y = cltest_buf(&T, n * 4, NULL);
        cl_mem S = cltest_buf(&T, sizeof sum, sum);
        cltest_ok(&T, kern_reduce_sum(T.k, n, X, S, 1, 0), "reduce_sum");
        ref_reduce_sum(n, x, sum, 1, 0);
        expect("reduce_sum", S, sum, 2, 1e-5, 1e-5);
        cltest_ok(&T, kern_dropout(T.k, n, 0.3f, 7, 11, X, Y), "dropout");
        ref_dropout(n, 0.3f, 7, 11, x, y);
        expect("dropout", Y, y, n, 0, 0);
        cltest_ok(&T, kern_adam(T.k, n, 1e-3f, 0.9f, 0.999f, 1e-7f, 0.1f, 0.001f, W, G, M, V),
                  "adam");
        ref_adam(n, 1e-3f, 0.9f, 0.999f, 1e-7f, 0.1f, 0.001f, w, g, m, v);
        expect("adam w", W, w, n, 1e-5, 1e-6);
        expect("adam v", V, v, n, 1e-5, 1e-9);
        cltest_ok(&T, kern_sgd(T.k, n, 0.1f, 0.9f, W, G, M), "sgd");
        ref_sgd(n, 0.1f, 0.9f, w, g, m);
        expect("sgd w", W, w, n, 1e-5, 1e-6);
        free(x), free(w), free(g), free(m), free(v), free(y);
        cltest_bufs_free(&T);
    }
}

static void test_gather(void)
{
    enum { SRC = 20, COLS = 3, ROWS = 6 };
    uint32_t src[SRC * COLS], want[ROWS * COLS], got[ROWS * COLS];
    int32_t idx[ROWS + 2] = {0, 0, 19, 4, 11, 7, 0, 2};
    for (int i = 0; i < SRC * COLS; i++)
        src[i] = cltest_rng_u32(&rng);
    cl_mem S = cltest_buf(&T, sizeof src, src), I = cltest_buf(&T, sizeof idx, idx);
    cl_mem D = cltest_buf(&T, sizeof got, NULL);
    cltest_ok(&T, kern_gather_rows(T.k, ROWS, COLS, S, I, 2, D), "gather_rows");
    cltest_read(&T, D, sizeof got, got);
    ref_gather_rows(ROWS, COLS, src, idx, 2, want);
    CHECK(memcmp(got, want, sizeof got) == 0);
    cltest_bufs_free(&T);
}

int main(void)
{
    setenv("TRAINYARD_DEVICE_CLASS", "gpu", 0);
    cltest_open(&T);
    test_gemm();
    test_conv();
    test_pool();
    test_batchnorm();
    test_image();
    test_bias_act();
    test_losses();
    test_vectors();
    test_gather();
    cltest_close(&T);
    printf("small GPU-class kernels: done\n");
    return check_exit();
}
