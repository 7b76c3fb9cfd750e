/* Unit tests of the OpenCL kernels but GEMM: each wrapper in kernels/kernels.h against its
 * plain-C twin in kernels/ref.h, on seeded random inputs, with a tolerance per kernel.
 *
 * Shapes include 1, 7, 33 and 257 (odd against every local size), zero-sized calls, small
 * batches and tall full-batch matrices (100003 rows) so that both launch paths of the two-pass
 * reductions run. Dropout is compared bit for bit, and the counter-based uniform is pinned to
 * the published splitmix64 outputs. Bias + activation run in both their forms (the CPU one and
 * the one for other devices, switched through kern_priv.h). Without an OpenCL device the test
 * skips (exit 77). */
#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"

#include "kernels/kern_priv.h"
#include "kernels/ref.h"

static cltest T;
static uint64_t rng_state = 0x5eed;

static uint32_t rng_u32(void)
{
    return cltest_rng_u32(&rng_state);
}

static float rng_float(float lo, float hi)
{
    return cltest_rng_float(&rng_state, lo, hi);
}

static float *floats(size_t n, float lo, float hi)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    if (!a)
        cltest_die("malloc", "out of memory");
    for (size_t i = 0; i < n; i++)
        a[i] = rng_float(lo, hi);
    return a;
}

static const char *act_name(int act)
{
    static const char *names[] = {"linear", "relu", "tanh", "sigmoid"};
    return names[act];
}

struct shape {
    int rows, cols;
};

static const struct shape shapes[] = {
    {1, 1},   {1, 7},   {7, 1},    {7, 3},     {33, 33},    {64, 128},    {257, 7},
    {7, 257}, {64, 10}, {300, 33}, {1000, 64}, {100003, 3}, {100000, 64}, {100003, 1},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void test_bias_act_fwd(void)
{
    for (size_t s = 0; s < NSHAPES; s++)
        for (int act = 0; act <= KERN_ACT_SIGMOID; act++) {
            int rows = shapes[s].rows, cols = shapes[s].cols;
            size_t n = (size_t)rows * cols;
            float *y = floats(n, -4, 4), *b = floats(cols, -1, 1), *got = malloc(n * 4);
            cl_mem dy = cltest_buf(&T, n * 4, y), db = cltest_buf(&T, cols * 4, b);
            cltest_ok(&T, kern_bias_act_fwd(T.k, rows, cols, act, dy, db), "kern_bias_act_fwd");
            cltest_read(&T, dy, n * 4, got);
            ref_bias_act_fwd(rows, cols, act, y, b);
            char what[96];
            snprintf(what, sizeof what, "bias_act_fwd %s %dx%d", act_name(act), rows, cols);
            cltest_near(what, got, y, n, 1e-5, 1e-6);
            free(y), free(b), free(got);
            cltest_bufs_free(&T);
        }
}

/* One backward case; positive makes every dy ≥ 0 so that the column sums cannot hide a long
 * serial float sum's drift behind cancellation. */
static void bwd_case(int rows, int cols, int act, int positive)
{
    size_t n = (size_t)rows * cols;
    float *y = floats(n, -3, 3), *dy = floats(n, positive ? 0 : -1, 1);
    float *zero = calloc(cols, 4);
    ref_bias_act_fwd(rows, cols, act, y, zero); /* y as the forward pass leaves it */
    float *got_dy = malloc(n * 4 + 4), *got_db = malloc(cols * 4), *want_db = malloc(cols * 4);
    float *nan_db = malloc(cols * 4);
    for (int c = 0; c < cols; c++)
        nan_db[c] = NAN; /* dbias must be overwritten, whatever it held */
    cl_mem by = cltest_buf(&T, n * 4, y), bdy = cltest_buf(&T, n * 4, dy);
    cl_mem bdb = cltest_buf(&T, cols * 4, nan_db);
    cltest_ok(&T, kern_bias_act_bwd(T.k, rows, cols, act, by, bdy, bdb), "kern_bias_act_bwd");
    cltest_read(&T, bdy, n * 4, got_dy);
    cltest_read(&T, bdb, cols * 4, got_db);
    ref_bias_act_bwd(rows, cols, act, y, dy, want_db);

    /* The sum's error bound scales with Σ|dy|, not with the (possibly cancelled) sum. */
    double abs_max = 0;
    for (int c = 0; c < cols; c++) {
        double a = 0;
        for (int r = 0; r < rows; r++)
            a += fabs(dy[(size_t)r * cols + c]);
        abs_max = a > abs_max ? a : abs_max;
    }
    char what[96];
    snprintf(what, sizeof what, "bias_act_bwd %s %dx%d dy", act_name(act), rows, cols);
    cltest_near(what, got_dy, dy, n, 1e-5, 1e-7);
    snprintf(what, sizeof what, "bias_act_bwd %s %dx%d%s dbias", act_name(act), rows, cols,
             positive ? " positive" : "");
    /* Positive data: a relative bound on the sum itself, tight enough to fail a single
     * work-item's serial float sum down 100000 rows (~1e-5 off). */
    if (positive)
        cltest_near(what, got_db, want_db, cols, 2e-6, 1e-7);
    else
        cltest_near(what, got_db, want_db, cols, 1e-6, 1e-6 * abs_max + 1e-7);
    free(y), free(dy), free(zero), free(got_dy), free(got_db), free(want_db), free(nan_db);
    cltest_bufs_free(&T);
}

static void test_bias_act_bwd(void)
{
    for (size_t s = 0; s < NSHAPES; s++)
        for (int act = 0; act <= KERN_ACT_SIGMOID; act++)
            bwd_case(shapes[s].rows, shapes[s].cols, act, 0);
    bwd_case(100003, 3, KERN_ACT_LINEAR, 1);
    bwd_case(100000, 1, KERN_ACT_LINEAR, 1);
    bwd_case(4099, 257, KERN_ACT_LINEAR, 1);

    /* No rows: dbias is the sum of nothing, zeros. */
    float nan5[5] = {NAN, NAN, NAN, NAN, NAN}, got[5], zero[5] = {0};
    cl_mem b = cltest_buf(&T, 4, NULL), db = cltest_buf(&T, sizeof nan5, nan5);
    cltest_ok(&T, kern_bias_act_bwd(T.k, 0, 5, KERN_ACT_RELU, b, b, db),
              "kern_bias_act_bwd 0 rows");
    cltest_read(&T, db, sizeof got, got);
    cltest_near("bias_act_bwd 0x5 dbias", got, zero, 5, 0, 0);
    cltest_bufs_free(&T);
}

/* Softmax cross-entropy on one shape; some labels are out of range on purpose. */
static void xent_case(int rows, int cols, float spread)
{
    size_t n = (size_t)rows * cols;
    float *z = floats(n, -spread, spread), scale = 1.0f / rows;
    int32_t *lab = malloc(rows * 4);
    for (int r = 0; r < rows; r++)
        lab[r] = (int32_t)(rng_u32() % (uint32_t)cols);
    if (rows >= 7) {
        lab[3] = -1;
        lab[5] = cols;
    }
    float *dl = malloc(n * 4), *loss = malloc(rows * 4), *cor = malloc(rows * 4);
    float *gdl = malloc(n * 4), *gloss = malloc(rows * 4), *gcor = malloc(rows * 4);
    float *gloss2 = malloc(rows * 4), *gcor2 = malloc(rows * 4), *gdl3 = malloc(n * 4);
    ref_softmax_xent(rows, cols, z, lab, scale, dl, loss, cor);

    cl_mem bz = cltest_buf(&T, n * 4, z), bl = cltest_buf(&T, rows * 4, lab);
    cl_mem bdl = cltest_buf(&T, n * 4, NULL), bloss = cltest_buf(&T, rows * 4, NULL);
    cl_mem bcor = cltest_buf(&T, rows * 4, NULL);
    cltest_ok(&T, kern_softmax_xent(T.k, rows, cols, bz, bl, scale, bdl, bloss, bcor),
              "kern_softmax_xent");
    cltest_read(&T, bdl, n * 4, gdl);
    cltest_read(&T, bloss, rows * 4, gloss);
    cltest_read(&T, bcor, rows * 4, gcor);

    char what[96];
    snprintf(what, sizeof what, "softmax_xent %dx%d spread %g", rows, cols, (double)spread);
    cltest_near(what, gloss, loss, rows, 1e-5, 2e-6);
    cltest_near(what, gcor, cor, rows, 0, 0);
    cltest_near(what, gdl, dl, n, 1e-5, 1e-6 * scale);

    /* Each valid row of dlogits sums to (Σ softmax − 1)·scale = 0. */
    for (int r = 0; r < rows; r++) {
        double sum = 0;
        for (int c = 0; c < cols; c++)
            sum += gdl[(size_t)r * cols + c];
        if (fabs(sum) > 1e-5 * scale * (1 + cols / 64.0)) {
            fprintf(stderr, "%s: row %d of dlogits sums to %g\n", what, r, sum);
            check_failures++;
            break;
        }
    }

    /* The validation path: no dlogits, the same loss and correct bits. */
    cltest_ok(&T, kern_softmax_xent(T.k, rows, cols, bz, bl, scale, NULL, bloss, bcor),
              "kern_softmax_xent without dlogits");
    cltest_read(&T, bloss, rows * 4, gloss2);
    cltest_read(&T, bcor, rows * 4, gcor2);
    CHECK(memcmp(gloss, gloss2, rows * 4) == 0);
    CHECK(memcmp(gcor, gcor2, rows * 4) == 0);

    /* In place: dlogits written over the logits. */
    cltest_ok(&T, kern_softmax_xent(T.k, rows, cols, bz, bl, scale, bz, bloss, bcor),
              "kern_softmax_xent in place");
    cltest_read(&T, bz, n * 4, gdl3);
    CHECK(memcmp(gdl3, gdl, n * 4) == 0);

    free(z), free(lab), free(dl), free(loss), free(cor), free(gdl), free(gloss), free(gcor);
    free(gloss2), free(gcor2), free(gdl3);
    cltest_bufs_free(&T);
}

static void test_softmax_xent(void)
{
    static const struct shape s[] = {{1, 1},   {1, 2},    {7, 10},    {33, 7},
                                     {64, 10}, {257, 33}, {100, 257}, {100003, 3}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        xent_case(s[i].rows, s[i].cols, 5);
        xent_case(s[i].rows, s[i].cols, 1e4f); /* exp would overflow without the max shift */
    }

    /* Ties take the first maximum; bad labels give the documented loss and a zero gradient. */
    float z[2 * 3] = {2, 2, 1, 0, 0, 0}, loss[4], cor[4], dl[6];
    int32_t lab_a[2] = {0, 1}, lab_b[2] = {1, 3};
    cl_mem bz = cltest_buf(&T, sizeof z, z), bdl = cltest_buf(&T, sizeof dl, NULL);
    cl_mem bla = cltest_buf(&T, 8, lab_a), blb = cltest_buf(&T, 8, lab_b);
    cl_mem bloss = cltest_buf(&T, 8, NULL), bcor = cltest_buf(&T, 8, NULL);
    cltest_ok(&T, kern_softmax_xent(T.k, 2, 3, bz, bla, 1, bdl, bloss, bcor), "xent ties");
    cltest_read(&T, bcor, 8, cor);
    CHECK(cor[0] == 1.0f && cor[1] == 0.0f); /* row 1 is all ties: argmax 0, label 1 */
    cltest_ok(&T, kern_softmax_xent(T.k, 2, 3, bz, blb, 1, bdl, bloss, bcor), "xent labels");
    cltest_read(&T, bcor, 8, cor);
    cltest_read(&T, bloss, 8, loss);
    cltest_read(&T, bdl, sizeof dl, dl);
    CHECK(cor[0] == 0.0f && cor[1] == 0.0f);
    CHECK_NEAR(loss[1], 87.336544750553, 1e-4);
    CHECK(dl[3] == 0.0f && dl[4] == 0.0f && dl[5] == 0.0f);
    CHECK_NEAR(loss[0], log(2 * exp(2.0) + exp(1.0)) - 2, 1e-6);
    cltest_bufs_free(&T);
}

static void test_bce(void)
{
    static const int sizes[] = {1, 7, 33, 257, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int rows = sizes[s];
        float *z = floats(rows, -20, 20), *y = floats(rows, 0, 1), scale = 0.5f / rows;
        for (int r = 0; r < rows; r++)
            y[r] = r % 5 == 4 ? y[r] : y[r] > 0.5f; /* mostly 0/1, some soft targets */
        if (rows >= 7) {
            z[0] = 100, z[1] = -100, z[2] = 1e4f, z[3] = -1e4f, z[4] = 0;
        }
        float *dl = malloc(rows * 4), *loss = malloc(rows * 4), *cor = malloc(rows * 4);
        float *g[3] = {malloc(rows * 4), malloc(rows * 4), malloc(rows * 4)};
        float *loss2 = malloc(rows * 4);
        ref_bce(rows, z, y, scale, dl, loss, cor);
        cl_mem bz = cltest_buf(&T, rows * 4, z), by = cltest_buf(&T, rows * 4, y);
        cl_mem b[3] = {cltest_buf(&T, rows * 4, NULL), cltest_buf(&T, rows * 4, NULL),
                       cltest_buf(&T, rows * 4, NULL)};
        cltest_ok(&T, kern_bce(T.k, rows, bz, by, scale, b[0], b[1], b[2]), "kern_bce");
        for (int i = 0; i < 3; i++)
            cltest_read(&T, b[i], rows * 4, g[i]);
        char what[64];
        snprintf(what, sizeof what, "bce %d", rows);
        cltest_near(what, g[0], dl, rows, 1e-5, 1e-6 * scale);
        cltest_near(what, g[1], loss, rows, 1e-5, 1e-6);
        cltest_near(what, g[2], cor, rows, 0, 0);
        cltest_ok(&T, kern_bce(T.k, rows, bz, by, scale, NULL, b[1], b[2]), "kern_bce no grad");
        cltest_read(&T, b[1], rows * 4, loss2);
        CHECK(memcmp(loss2, g[1], rows * 4) == 0);
        free(z), free(y), free(dl), free(loss), free(cor), free(loss2);
        for (int i = 0; i < 3; i++)
            free(g[i]);
        cltest_bufs_free(&T);
    }
}

static void test_mse(void)
{
    static const struct shape s[] = {{1, 1}, {7, 1}, {33, 7}, {257, 3}, {64, 257}, {100003, 1}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        int rows = s[i].rows, cols = s[i].cols;
        size_t n = (size_t)rows * cols;
        float *p = floats(n, -3, 3), *t = floats(n, -3, 3), scale = 1.0f / rows;
        float *dp = malloc(n * 4), *loss = malloc(rows * 4), *gdp = malloc(n * 4);
        float *gloss = malloc(rows * 4), *gloss2 = malloc(rows * 4);
        ref_mse(rows, cols, p, t, scale, dp, loss);
        cl_mem bp = cltest_buf(&T, n * 4, p), bt = cltest_buf(&T, n * 4, t);
        cl_mem bdp = cltest_buf(&T, n * 4, NULL), bl = cltest_buf(&T, rows * 4, NULL);
        cltest_ok(&T, kern_mse(T.k, rows, cols, bp, bt, scale, bdp, bl), "kern_mse");
        cltest_read(&T, bdp, n * 4, gdp);
        cltest_read(&T, bl, rows * 4, gloss);
        char what[64];
        snprintf(what, sizeof what, "mse %dx%d", rows, cols);
        cltest_near(what, gdp, dp, n, 1e-5, 1e-6 * scale);
        cltest_near(what, gloss, loss, rows, 2e-5, 1e-6);
        cltest_ok(&T, kern_mse(T.k, rows, cols, bp, bt, scale, NULL, bl), "kern_mse no grad");
        cltest_read(&T, bl, rows * 4, gloss2);
        CHECK(memcmp(gloss, gloss2, rows * 4) == 0);
        free(p), free(t), free(dp), free(loss), free(gdp), free(gloss), free(gloss2);
        cltest_bufs_free(&T);
    }
}

static void test_uniform_known_answers(void)
{
    /* uniform(0, c) is the top 24 bits of the c-th splitmix64 output from state 0, whose
     * published sequence starts 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f. */
    CHECK(ref_uniform(0, 0) == 0xe220a8 / 16777216.0f);
    CHECK(ref_uniform(0, 1) == 0x6e789e / 16777216.0f);
    CHECK(ref_uniform(0, 2) == 0x06c45d / 16777216.0f);
    CHECK(ref_uniform(42, 0) == 10001215 / 16777216.0f);
    CHECK(ref_uniform(42, 12345678901ULL) == 5725572 / 16777216.0f);
    double sum = 0;
    for (int i = 0; i < 100000; i++)
        sum += ref_uniform(7, (uint64_t)i);
    CHECK_NEAR(sum / 100000, 0.5, 0.005);
}

static void test_dropout(void)
{
    static const int sizes[] = {1, 7, 33, 257, 100003};
    static const float rates[] = {0, 0.1f, 0.5f, 0.9f, 1};
    const uint64_t seed = 0x1234abcd5678ULL, offset = 1ULL << 33; /* past 32 bits on purpose */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++) {
            int n = sizes[s];
            float rate = rates[ri];
            float *x = floats(n, 0.5f, 2), *dy = floats(n, -2, 2), *want = malloc(n * 4);
            float *got = malloc(n * 4), *dx = malloc(n * 4), *want_dx = malloc(n * 4);
            cl_mem bx = cltest_buf(&T, n * 4, x), by = cltest_buf(&T, n * 4, NULL);
            cl_mem bdy = cltest_buf(&T, n * 4, dy);
            cltest_ok(&T, kern_dropout(T.k, n, rate, seed, offset, bx, by), "kern_dropout");
            cltest_ok(&T, kern_dropout(T.k, n, rate, seed, offset, bdy, bdy), "dropout in place");
            cltest_read(&T, by, n * 4, got);
            cltest_read(&T, bdy, n * 4, dx);
            ref_dropout(n, rate, seed, offset, x, want);
            ref_dropout(n, rate, seed, offset, dy, want_dx);
            char what[64];
            snprintf(what, sizeof what, "dropout n %d rate %g", n, (double)rate);
            if (memcmp(got, want, n * 4) != 0 || memcmp(dx, want_dx, n * 4) != 0) {
                fprintf(stderr, "%s: not bit-identical to ref_dropout\n", what);
                check_failures++;
            }
            int kept = 0, mask_ok = 1;
            for (int i = 0; i < n; i++) {
                kept += got[i] != 0;
                mask_ok &= (got[i] != 0) == (dx[i] != 0) || dy[i] == 0;
            }
            CHECK(mask_ok); /* dX reuses the forward mask */
            if (n >= 100000)
                CHECK_NEAR((double)kept / n, 1.0 - rate, 0.01);
            if (rate == 0.0f)
                CHECK(memcmp(got, x, n * 4) == 0);
            free(x), free(dy), free(want), free(got), free(dx), free(want_dx);
            cltest_bufs_free(&T);
        }

    /* The counter is offset + i: starting 5 later shifts the mask by 5 elements. */
    enum { N = 300 };
    float x[N], a[N], b[N];
    for (int i = 0; i < N; i++)
        x[i] = 1;
    cl_mem bx = cltest_buf(&T, sizeof x, x), ba = cltest_buf(&T, sizeof a, NULL);
    cl_mem bb = cltest_buf(&T, sizeof b, NULL);
    cltest_ok(&T, kern_dropout(T.k, N, 0.5f, 99, 0, bx, ba), "dropout offset 0");
    cltest_ok(&T, kern_dropout(T.k, N, 0.5f, 99, 5, bx, bb), "dropout offset 5");
    cltest_read(&T, ba, sizeof a, a);
    cltest_read(&T, bb, sizeof b, b);
    CHECK(memcmp(a + 5, b, (N - 5) * 4) == 0);
    cltest_bufs_free(&T);
}

static void reduce_case(int n, float lo, float hi)
{
    float *x = floats(n, lo, hi), out[5] = {NAN, 1.5f, NAN, 2.5f, NAN}, got[5], want[5];
    double abs_sum = 0;
    for (int i = 0; i < n; i++)
        abs_sum += fabs(x[i]);
    cl_mem bx = cltest_buf(&T, (size_t)n * 4, x), bo = cltest_buf(&T, sizeof out, out);
    cltest_ok(&T, kern_reduce_sum(T.k, n, bx, bo, 2, 0), "kern_reduce_sum");
    cltest_ok(&T, kern_reduce_sum(T.k, n, bx, bo, 3, 1), "kern_reduce_sum accumulate");
    cltest_read(&T, bo, sizeof got, got);
    memcpy(want, out, sizeof want);
    ref_reduce_sum(n, x, want, 2, 0);
    ref_reduce_sum(n, x, want, 3, 1);
    char what[64];
    snprintf(what, sizeof what, "reduce_sum n %d in [%g, %g)", n, (double)lo, (double)hi);
    /* Positive data: relative accuracy of the sum itself. Mixed signs: against Σ|x|. */
    cltest_near(what, got, want, 5, lo >= 0 ? 4e-6 : 1e-6, lo >= 0 ? 1e-6 : 1e-6 * abs_sum);
    free(x);
    cltest_bufs_free(&T);
}

static void test_reduce_sum(void)
{
    static const int sizes[] = {0, 1, 7, 33, 257, 4096, 4097, 65537, 100003, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        reduce_case(sizes[s], 0, 1);
        reduce_case(sizes[s], -1, 1);
    }
    /* Deterministic: the same input gives the same bits. */
    int n = 1000003;
    float *x = floats(n, -1, 1), a, b;
    cl_mem bx = cltest_buf(&T, (size_t)n * 4, x), bo = cltest_buf(&T, 4, NULL);
    cltest_ok(&T, kern_reduce_sum(T.k, n, bx, bo, 0, 0), "reduce 1");
    cltest_read(&T, bo, 4, &a);
    cltest_ok(&T, kern_reduce_sum(T.k, n, bx, bo, 0, 0), "reduce 2");
    cltest_read(&T, bo, 4, &b);
    CHECK(memcmp(&a, &b, 4) == 0);
    free(x);
    cltest_bufs_free(&T);
}

static void test_sgd(void)
{
    static const int sizes[] = {1, 7, 33, 257, 100003};
    static const float momenta[] = {0, 0.9f};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t mi = 0; mi < 2; mi++) {
            int n = sizes[s];
            float mom = momenta[mi], lr = 0.01f;
            float *w = floats(n, -1, 1), *v = calloc(n, 4), *g = floats(n, -1, 1);
            cl_mem bw = cltest_buf(&T, n * 4, w), bg = cltest_buf(&T, n * 4, g);
            cl_mem bv = mom != 0 ? cltest_buf(&T, n * 4, v) : NULL;
            for (int step = 0; step < 5; step++) {
                for (int i = 0; i < n; i++)
                    g[i] = rng_float(-1, 1);
                cltest_write(&T, bg, n * 4, g);
                cltest_ok(&T, kern_sgd(T.k, n, lr, mom, bw, bg, bv), "kern_sgd");
                ref_sgd(n, lr, mom, w, g, v);
            }
            float *gw = malloc(n * 4), *gv = malloc(n * 4);
            cltest_read(&T, bw, n * 4, gw);
            char what[64];
            snprintf(what, sizeof what, "sgd n %d momentum %g", n, (double)mom);
            cltest_near(what, gw, w, n, 1e-6, 1e-7);
            if (bv) {
                cltest_read(&T, bv, n * 4, gv);
                cltest_near(what, gv, v, n, 1e-6, 1e-7);
            }
            free(w), free(v), free(g), free(gw), free(gv);
            cltest_bufs_free(&T);
        }
}

static void test_adam(void)
{
    static const int sizes[] = {1, 7, 33, 257, 100003};
    const float lr = 0.001f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *w = floats(n, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4), *g = floats(n, -1, 1);
        cl_mem bw = cltest_buf(&T, n * 4, w), bg = cltest_buf(&T, n * 4, g);
        cl_mem bm = cltest_buf(&T, n * 4, m), bv = cltest_buf(&T, n * 4, v);
        for (int t = 1; t <= 6; t++) {
            for (int i = 0; i < n; i++)
                g[i] = rng_float(-1, 1) * (i % 3 ? 1.0f : 1e-3f);
            float bc1 = 1 - powf(b1, (float)t), bc2 = 1 - powf(b2, (float)t);
            cltest_write(&T, bg, n * 4, g);
            cltest_ok(&T, kern_adam(T.k, n, lr, b1, b2, eps, bc1, bc2, bw, bg, bm, bv),
                      "kern_adam");
            ref_adam(n, lr, b1, b2, eps, bc1, bc2, w, g, m, v);
        }
        float *gw = malloc(n * 4), *gm = malloc(n * 4), *gv = malloc(n * 4);
        cltest_read(&T, bw, n * 4, gw);
        cltest_read(&T, bm, n * 4, gm);
        cltest_read(&T, bv, n * 4, gv);
        char what[64];
        snprintf(what, sizeof what, "adam n %d", n);
        cltest_near(what, gw, w, n, 1e-6, 1e-7); /* the steps themselves are ~1e-3 */
        /* m adds terms of both signs up to 1 and may cancel to ~0: its error is ~eps·1. */
        cltest_near(what, gm, m, n, 1e-5, 2e-7);
        cltest_near(what, gv, v, n, 1e-5, 1e-12);
        free(w), free(m), free(v), free(g), free(gw), free(gm), free(gv);
        cltest_bufs_free(&T);
    }
}

static void test_gather_rows(void)
{
    enum { SRC_ROWS = 1000 };
    static const int widths[] = {1, 3, 7, 33};
    static const struct shape windows[] = {{1, 0}, {7, 3}, {33, 100}, {257, 743}, {1000, 0}};
    int32_t *idx = malloc(SRC_ROWS * 4);
    for (int i = 0; i < SRC_ROWS; i++)
        idx[i] = i;
    for (int i = SRC_ROWS - 1; i > 0; i--) { /* a seeded shuffle, as the trainer does */
        int j = (int)(rng_u32() % (uint32_t)(i + 1)), t = idx[i];
        idx[i] = idx[j], idx[j] = t;
    }
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (size_t s = 0; s < sizeof windows / sizeof windows[0]; s++) {
            int cols = widths[wi], rows = windows[s].rows, start = windows[s].cols;
            size_t n = (size_t)rows * cols;
            uint32_t *src = malloc(SRC_ROWS * cols * 4), *want = malloc(n * 4);
            uint32_t *got = malloc(n * 4);
            for (int i = 0; i < SRC_ROWS * cols; i++)
                src[i] = rng_u32();
            ref_gather_rows(rows, cols, src, idx, start, want);
            cl_mem bs = cltest_buf(&T, SRC_ROWS * cols * 4, src);
            cl_mem bi = cltest_buf(&T, SRC_ROWS * 4, idx), bd = cltest_buf(&T, n * 4, NULL);
            cltest_ok(&T, kern_gather_rows(T.k, rows, cols, bs, bi, start, bd), "gather_rows");
            cltest_read(&T, bd, n * 4, got);
            if (memcmp(got, want, n * 4) != 0) {
                fprintf(stderr, "gather_rows %dx%d from %d: differs from ref\n", rows, cols, start);
                check_failures++;
            }
            free(src), free(want), free(got);
            cltest_bufs_free(&T);
        }
    free(idx);

    /* Indices outside the source give zero rows instead of reading past it; an index window
     * outside the index buffer is refused on the host. */
    uint32_t src[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8}, got[4 * 2];
    int32_t bad[4] = {3, -1, 4, 1000000};
    cl_mem bs = cltest_buf(&T, sizeof src, src), bi = cltest_buf(&T, sizeof bad, bad);
    cl_mem bd = cltest_buf(&T, sizeof got, NULL);
    cltest_ok(&T, kern_gather_rows(T.k, 4, 2, bs, bi, 0, bd), "gather_rows bad indices");
    cltest_read(&T, bd, sizeof got, got);
    uint32_t want[8] = {7, 8, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(got, want, sizeof want) == 0);
    CHECK_INT(kern_gather_rows(T.k, 4, 2, bs, bi, 1, bd), -EINVAL);
    CHECK(strstr(kern_last_error(T.k), "index buffer") != NULL);
    cltest_bufs_free(&T);
}

/* The gradients the kernels are compared against are themselves checked against central finite
 * differences of the references' own losses and forward pass, so a sign or scale slip in a
 * reference cannot hide behind kernel == reference. Float losses limit the match to ~1e-3. */
static double fd_total(int kind, int rows, int cols, const float *z, const void *target,
                       float scale)
{
    float loss[8], cor[8];
    double t = 0;
    if (kind == 0)
        ref_softmax_xent(rows, cols, z, target, scale, NULL, loss, cor);
    else if (kind == 1)
        ref_bce(rows, z, target, scale, NULL, loss, cor);
    else
        ref_mse(rows, cols, z, target, scale, NULL, loss);
    for (int r = 0; r < rows; r++)
        t += (double)loss[r] * scale;
    return t;
}

static void test_finite_differences(void)
{
    enum { R = 4, C = 5 };
    int32_t lab[R] = {0, 4, 2, 2};
    float *z = floats(R * C, -2, 2), *t = floats(R * C, 0, 1), grad[R * C], loss[R], cor[R];
    for (int r = 0; r < R; r++)
        t[r] = r % 2; /* BCE uses the first R as 0/1 labels */
    const float scale = 0.25f, h = 1e-2f;
    for (int kind = 0; kind < 3; kind++) {
        int cols = kind == 1 ? 1 : C;
        const void *target = kind == 0 ? (const void *)lab : t;
        if (kind == 0)
            ref_softmax_xent(R, cols, z, lab, scale, grad, loss, cor);
        else if (kind == 1)
            ref_bce(R, z, t, scale, grad, loss, cor);
        else
            ref_mse(R, cols, z, t, scale, grad, loss);
        for (int i = 0; i < R * cols; i++) {
            float keep = z[i];
            z[i] = keep + h;
            double up = fd_total(kind, R, cols, z, target, scale);
            z[i] = keep - h;
            double down = fd_total(kind, R, cols, z, target, scale);
            z[i] = keep;
            double fd = (up - down) / (2 * h);
            if (fabs(fd - grad[i]) > 2e-3 + 1e-2 * fabs(fd)) {
                fprintf(stderr, "finite differences, loss %d, [%d]: analytic %g, numeric %g\n",
                        kind, i, (double)grad[i], fd);
                check_failures++;
            }
        }
    }
    /* act'(y) from the output, against d act(x)/dx by finite differences of the forward. */
    for (int act = 0; act <= KERN_ACT_SIGMOID; act++)
        for (float x = -2.5f; x <= 2.5f; x += 0.37f) {
            float zero = 0, a = x + h, b = x - h, y = x, dy = 1, db;
            ref_bias_act_fwd(1, 1, act, &a, &zero);
            ref_bias_act_fwd(1, 1, act, &b, &zero);
            ref_bias_act_fwd(1, 1, act, &y, &zero);
            ref_bias_act_bwd(1, 1, act, &y, &dy, &db);
            double fd = ((double)a - b) / (2 * h);
            if (fabs(fd - dy) > 2e-3 + 1e-2 * fabs(fd) || db != dy) {
                fprintf(stderr, "finite differences, %s at %g: analytic %g, numeric %g\n",
                        act_name(act), (double)x, (double)dy, fd);
                check_failures++;
            }
        }
    free(z), free(t);
}

static void test_bad_arguments(void)
{
    cl_mem b = cltest_buf(&T, 64, NULL);
    CHECK_INT(kern_bias_act_fwd(T.k, -1, 4, KERN_ACT_RELU, b, b), -EINVAL);
    CHECK(strstr(kern_last_error(T.k), "kern_bias_act_fwd") != NULL);
    CHECK_INT(kern_bias_act_fwd(T.k, 2, 2, 9, b, b), -EINVAL);
    CHECK_INT(kern_bias_act_bwd(T.k, 70000, 70000, KERN_ACT_RELU, b, b, b), -EINVAL);
    CHECK(strstr(kern_last_error(T.k), "70000") != NULL);
    CHECK_INT(kern_reduce_sum(T.k, 4, b, b, -1, 0), -EINVAL);
    CHECK_INT(kern_sgd(T.k, 4, 0.1f, 0.9f, b, b, NULL), -EINVAL);
    CHECK_INT(kern_dropout(T.k, 0, 0.5f, 1, 0, b, b), 0);
    CHECK_INT(kern_bias_act_fwd(T.k, 0, 5, KERN_ACT_RELU, b, b), 0);
    cltest_bufs_free(&T);
}

int main(void)
{
    cltest_open(&T);
    test_uniform_known_answers();
    test_finite_differences();
    /* bias + activation and Adam have a CPU form and a form for other devices (one work-item
     * per element): run both here, the CPU form only where it is meant for the device */
    for (int form = 0; form < 2; form++) {
        if (T.k->cpu && !kern_cpu_forms_fit(T.k))
            printf("bias + activation, Adam: CPU forms skipped, not meant for a device of the "
                   "GPU class (kern_cpu_forms_fit)\n");
        else {
            test_bias_act_fwd();
            test_bias_act_bwd();
            test_adam();
        }
        T.k->cpu = !T.k->cpu;
    }
    test_softmax_xent();
    test_bce();
    test_mse();
    test_dropout();
    test_reduce_sum();
    test_sgd();
    test_gather_rows();
    test_bad_arguments();
    cltest_close(&T);
    return check_exit();
}
