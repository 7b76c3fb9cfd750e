/* Unit tests of model/model: backprop on the device against central finite differences of the
 * device's own loss, for every activation with every loss, and with a dropout layer (whose mask
 * stays fixed between two updates); then a few optimizer steps must lower the loss, and export
 * must hand out each weight transposed. Convolutional models: shapes, a gradient check of whole
 * models through every layer kind (conv same/valid/stride 2 with and without bias, max/avg/global
 * pooling, batchnorm after conv and after dense, flatten, dropout, dense), a toy CNN that learns,
 * and a save/load of the state mid-training that continues bit for bit. */
#include "model/model.h"

#include <string.h>
#include "model/export.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"

#define ROWS   7
#define INPUTS 5
#define HIDDEN 4

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* A job whose hidden layers are dense(HIDDEN, act) and optionally dropout(0.3); model_new adds
 * the output layer. */
static job_spec *make_job(int act, int dropout, int optimizer)
{
    job_spec *j = calloc(1, sizeof *j);
    j->layers[0] = (job_layer){.type = JOB_LAYER_DENSE, .units = HIDDEN, .activation = act};
    j->n_layers = 1;
    if (dropout)
        j->layers[j->n_layers++] = (job_layer){.type = JOB_LAYER_DROPOUT, .rate = 0.3};
    j->optimizer = optimizer;
    j->learning_rate = optimizer == JOB_OPT_SGD ? 0.2 : 0.05;
    j->momentum = optimizer == JOB_OPT_SGD ? 0.9 : 0.0;
    j->beta1 = 0.9;
    j->beta2 = 0.999;
    j->epsilon = 1e-7;
    j->seed = 42;
    return j;
}

/* The mean training loss of a backprop over rows of x (gradients left in m->grads). */
static double batch_loss(model *m, int rows, cl_mem x, cl_mem t)
{
    char err[ERR_LEN];
    double tot[MODEL_TOTALS];
    CHECK(model_reset_totals(m, err) == 0);
    CHECK(model_backprop(m, rows, x, t, err) == 0);
    CHECK(model_read_totals(m, tot, err) == 0);
    return tot[MODEL_TRAIN_LOSS] / rows;
}

static double train_loss(model *m, cl_mem x, cl_mem t)
{
    return batch_loss(m, ROWS, x, t);
}

static void upload_targets(cltest *t, int loss, int outputs, cl_mem *out, uint64_t *s)
{
    char err[ERR_LEN];
    float f[ROWS * 3];
    int32_t cls[ROWS];
    for (int i = 0; i < ROWS * outputs; i++)
        f[i] = loss == MODEL_LOSS_BCE ? (float)(i % 2) : frand(s);
    for (int i = 0; i < ROWS; i++)
        cls[i] = i % outputs;
    CHECK(ocl_buffer_new(t->c, sizeof f, out, err) == 0);
    CHECK(ocl_write(t->c, *out, 0, loss == MODEL_LOSS_SOFTMAX_XENT ? sizeof cls : sizeof f,
                    loss == MODEL_LOSS_SOFTMAX_XENT ? (void *)cls : (void *)f, err) == 0);
}

static void gradcheck(cltest *t, int act, int loss, int dropout)
{
    char err[ERR_LEN];
    int outputs = loss == MODEL_LOSS_SOFTMAX_XENT ? 3 : loss == MODEL_LOSS_BCE ? 1 : 2;
    job_spec *job = make_job(act, dropout, JOB_OPT_SGD);
    model *m = NULL;
    int rc = model_new(t->c, t->k, job, INPUTS, outputs, loss, ROWS, 0, &m, err);
    CHECK(rc == 0);
    if (rc < 0) {
        fprintf(stderr, "model_new: %s\n", err);
        free(job);
        return;
    }
    uint64_t s = 99 + (uint64_t)act * 7 + (uint64_t)loss;
    float xs[ROWS * INPUTS];
    for (int i = 0; i < ROWS * INPUTS; i++)
        xs[i] = frand(&s);
    cl_mem x, tg;
    CHECK(ocl_buffer_new(t->c, sizeof xs, &x, err) == 0);
    CHECK(ocl_write(t->c, x, 0, sizeof xs, xs, err) == 0);
    upload_targets(t, loss, outputs, &tg, &s);

    size_t n = m->n_params;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    train_loss(m, x, tg);
    CHECK(ocl_read(t->c, m->params, 0, n * sizeof *p, p, err) == 0);
    CHECK(ocl_read(t->c, m->grads, 0, n * sizeof *g, g, err) == 0);

    const float h = 1e-3f;
    double worst = 0;
    size_t checked = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        const model_layer *ly = &m->layers[l];
        if (ly->type != JOB_LAYER_DENSE)
            continue;
        size_t ranges[2][2] = {{ly->w_off, (size_t)ly->in * (size_t)ly->out},
                               {ly->b_off, (size_t)ly->out}};
        for (int r = 0; r < 2; r++) {
            for (size_t i = ranges[r][0]; i < ranges[r][0] + ranges[r][1]; i++) {
                float keep = p[i];
                p[i] = keep + h;
                ocl_write(t->c, m->params, 0, n * sizeof *p, p, err);
                double up = train_loss(m, x, tg);
                p[i] = keep - h;
                ocl_write(t->c, m->params, 0, n * sizeof *p, p, err);
                double down = train_loss(m, x, tg);
                p[i] = keep;
                double num = (up - down) / (2.0 * h), ana = g[i];
                double diff = fabs(num - ana) / (1e-3 + 1e-2 * fmax(fabs(num), fabs(ana)));
                if (diff > worst)
                    worst = diff;
                if (diff > 1.0)
                    fprintf(stderr,
                            "act %d loss %d dropout %d param %zu: backprop %g, finite "
                            "differences %g\n",
                            act, loss, dropout, i, ana, num);
                checked++;
            }
        }
    }
    ocl_write(t->c, m->params, 0, n * sizeof *p, p, err);
    CHECK(checked == m->n_weights);
    CHECK(worst <= 1.0);
    printf("gradcheck act=%s loss=%d dropout=%d: %zu parameters, worst %.3f of tolerance\n",
           job_activation_name(act), loss, dropout, checked, worst);

    free(p);
    free(g);
    clReleaseMemObject(x);
    clReleaseMemObject(tg);
    model_free(m);
    free(job);
}

/* Training steps lower the loss, with both optimizers. */
static void descends(cltest *t, int optimizer)
{
    char err[ERR_LEN];
    job_spec *job = make_job(JOB_ACT_RELU, 0, optimizer);
    model *m = NULL;
    CHECK(model_new(t->c, t->k, job, INPUTS, 3, MODEL_LOSS_SOFTMAX_XENT, ROWS, 0, &m, err) == 0);
    uint64_t s = 5;
    float xs[ROWS * INPUTS];
    for (int i = 0; i < ROWS * INPUTS; i++)
        xs[i] = frand(&s);
    cl_mem x, tg;
    CHECK(ocl_buffer_new(t->c, sizeof xs, &x, err) == 0);
    CHECK(ocl_write(t->c, x, 0, sizeof xs, xs, err) == 0);
    upload_targets(t, MODEL_LOSS_SOFTMAX_XENT, 3, &tg, &s);
    double first = train_loss(m, x, tg), last = first;
    for (int i = 0; i < 50; i++) {
        double tot[MODEL_TOTALS];
        CHECK(model_reset_totals(m, err) == 0);
        CHECK(model_train_step(m, ROWS, x, tg, err) == 0);
        CHECK(model_read_totals(m, tot, err) == 0);
        last = tot[MODEL_TRAIN_LOSS] / ROWS;
    }
    printf("optimizer %d: loss %.4f after 0 steps, %.4f after 50\n", optimizer, first, last);
    CHECK(m->step == 50);
    CHECK(last < 0.5 * first);

    /* Export: weight of layer 0 transposed to out×in, then its bias. */
    float *raw = NULL, *stats = NULL;
    export_set *e = NULL;
    CHECK(model_read_params(m, &raw, &stats, err) == 0);
    CHECK(stats == NULL);
    CHECK(export_build(m, raw, stats, &e, err) == 0);
    const model_layer *l0 = &m->layers[0];
    const float *w = e->tensors[0].data;
    CHECK(!strcmp(e->tensors[0].name, "0.weight") && !strcmp(e->tensors[1].name, "0.bias"));
    for (int o = 0; o < l0->out; o++)
        for (int in = 0; in < l0->in; in++)
            CHECK(w[o * l0->in + in] == raw[l0->w_off + (size_t)in * (size_t)l0->out + (size_t)o]);
    CHECK(e->tensors[1].data[0] == raw[l0->b_off]);
    export_free(e);
    free(raw);
    clReleaseMemObject(x);
    clReleaseMemObject(tg);
    model_free(m);
    free(job);
}

/* ---- convolutional models ------------------------------------------------------------- */

#define CNN_ROWS 3

static job_layer conv(int filters, int k, int stride, int padding, int act, int use_bias)
{
    return (job_layer){.type = JOB_LAYER_CONV2D,
                       .filters = filters,
                       .kh = k,
                       .kw = k,
                       .sh = stride,
                       .sw = stride,
                       .padding = padding,
                       .activation = act,
                       .use_bias = use_bias};
}

static job_layer pool(int type, int k, int stride, int padding)
{
    return (job_layer){
        .type = type, .kh = k, .kw = k, .sh = stride, .sw = stride, .padding = padding};
}

static job_layer plain(int type)
{
    return (job_layer){.type = type, .rate = 0.25, .bn_momentum = 0.9, .bn_epsilon = 1e-3};
}

static job_spec *cnn_job(int h, int w, int c, const job_layer *layers, size_t n)
{
    job_spec *j = make_job(JOB_ACT_TANH, 0, JOB_OPT_ADAM);
    j->in_h = h;
    j->in_w = w;
    j->in_c = c;
    j->n_layers = n;
    for (size_t i = 0; i < n; i++)
        j->layers[i] = layers[i];
    return j;
}

/* Backprop of a whole model against central differences of its loss, over every parameter. */
static void cnn_gradcheck(cltest *t, const char *what, job_spec *job)
{
    char err[ERR_LEN];
    int inputs = job->in_h * job->in_w * job->in_c, classes = 3;
    model *m = NULL;
    int rc =
        model_new(t->c, t->k, job, inputs, classes, MODEL_LOSS_SOFTMAX_XENT, CNN_ROWS, 0, &m, err);
    CHECK(rc == 0);
    if (rc < 0) {
        fprintf(stderr, "%s: model_new: %s\n", what, err);
        free(job);
        return;
    }
    uint64_t s = 17;
    size_t nx = (size_t)CNN_ROWS * (size_t)inputs;
    float *xs = malloc(nx * sizeof *xs);
    for (size_t i = 0; i < nx; i++)
        xs[i] = frand(&s);
    int32_t cls[CNN_ROWS] = {0, 2, 1};
    cl_mem x = cltest_buf(t, nx * sizeof *xs, xs), tg = cltest_buf(t, sizeof cls, cls);

    size_t n = m->n_params;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    batch_loss(m, CNN_ROWS, x, tg);
    cltest_read(t, m->params, n * sizeof *p, p);
    cltest_read(t, m->grads, n * sizeof *g, g);
    const float h = 1e-3f; /* small enough that no max pooling window changes its winner */
    double worst = 0;
    size_t checked = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        const model_layer *ly = &m->layers[l];
        size_t ranges[2][2] = {{ly->w_off, ly->n_w}, {ly->b_off, ly->n_b}};
        for (int r = 0; r < 2; r++) {
            for (size_t i = ranges[r][0]; i < ranges[r][0] + ranges[r][1]; i++) {
                float keep = p[i];
                p[i] = keep + h;
                cltest_write(t, m->params, n * sizeof *p, p);
                double up = batch_loss(m, CNN_ROWS, x, tg);
                p[i] = keep - h;
                cltest_write(t, m->params, n * sizeof *p, p);
                double down = batch_loss(m, CNN_ROWS, x, tg);
                p[i] = keep;
                double num = (up - down) / (2.0 * h), ana = g[i];
                double diff = fabs(num - ana) / (1e-3 + 1e-2 * fmax(fabs(num), fabs(ana)));
                if (diff > worst)
                    worst = diff;
                if (diff > 1.0)
                    fprintf(stderr, "%s: layer %zu (%d) param %zu: backprop %g, differences %g\n",
                            what, l, ly->type, i, ana, num);
                checked++;
            }
        }
    }
    cltest_write(t, m->params, n * sizeof *p, p);
    CHECK(checked == m->n_weights);
    CHECK(worst <= 1.0);
    printf("gradcheck %s: %zu parameters, worst %.3f of tolerance\n", what, checked, worst);
    free(xs);
    free(p);
    free(g);
    cltest_bufs_free(t);
    model_free(m);
    free(job);
}

static void cnn_gradchecks(cltest *t)
{
    /* conv same stride 1 + batchnorm + maxpool valid + flatten + dense + batchnorm (features). */
    job_layer a[] = {conv(3, 3, 1, JOB_PAD_SAME, JOB_ACT_TANH, 1),
                     plain(JOB_LAYER_BATCHNORM),
                     pool(JOB_LAYER_MAXPOOL2D, 2, 2, JOB_PAD_VALID),
                     plain(JOB_LAYER_FLATTEN),
                     (job_layer){.type = JOB_LAYER_DENSE, .units = 4, .activation = JOB_ACT_TANH},
                     plain(JOB_LAYER_BATCHNORM)};
    cnn_gradcheck(t, "conv-same/batchnorm/maxpool/flatten/dense/batchnorm",
                  cnn_job(7, 7, 2, a, sizeof a / sizeof a[0]));
    /* conv stride 2 without bias + avgpool same (asymmetric) + conv valid + global pool. */
    job_layer b[] = {
        conv(3, 3, 2, JOB_PAD_SAME, JOB_ACT_TANH, 0), pool(JOB_LAYER_AVGPOOL2D, 2, 1, JOB_PAD_SAME),
        conv(2, 2, 1, JOB_PAD_VALID, JOB_ACT_LINEAR, 1), plain(JOB_LAYER_GLOBAL_AVGPOOL2D)};
    cnn_gradcheck(t, "conv-stride2-nobias/avgpool-same/conv-valid/global-avgpool",
                  cnn_job(7, 7, 2, b, sizeof b / sizeof b[0]));
    /* conv valid stride 2 + maxpool same + flatten + dropout + dense; odd non-square input. */
    job_layer c[] = {conv(2, 3, 2, JOB_PAD_VALID, JOB_ACT_SIGMOID, 1),
                     pool(JOB_LAYER_MAXPOOL2D, 2, 2, JOB_PAD_SAME), plain(JOB_LAYER_FLATTEN),
                     plain(JOB_LAYER_DROPOUT)};
    cnn_gradcheck(t, "conv-valid-stride2/maxpool-same/flatten/dropout",
                  cnn_job(7, 9, 1, c, sizeof c / sizeof c[0]));
    /* A leading pool: backward ends at the batchnorm, the first layer with parameters. */
    job_layer d[] = {pool(JOB_LAYER_AVGPOOL2D, 2, 2, JOB_PAD_VALID), plain(JOB_LAYER_BATCHNORM),
                     conv(2, 3, 1, JOB_PAD_SAME, JOB_ACT_TANH, 1), plain(JOB_LAYER_FLATTEN)};
    cnn_gradcheck(t, "avgpool/batchnorm/conv-same/flatten",
                  cnn_job(8, 8, 2, d, sizeof d / sizeof d[0]));
    /* The seed's shape: conv + 2×2 max pool as one kernel forward and backward (an odd conv
     * output: a row and a column no window takes). */
    job_layer e[] = {conv(3, 3, 1, JOB_PAD_VALID, JOB_ACT_RELU, 1),
                     pool(JOB_LAYER_MAXPOOL2D, 2, 2, JOB_PAD_VALID), plain(JOB_LAYER_FLATTEN),
                     (job_layer){.type = JOB_LAYER_DENSE, .units = 4, .activation = JOB_ACT_TANH}};
    cnn_gradcheck(t, "conv-valid/maxpool-fused/flatten/dense",
                  cnn_job(9, 8, 2, e, sizeof e / sizeof e[0]));
    /* A fused conv + pool that is not the first layer: the pool's backward writes dx again. */
    job_layer f[] = {conv(2, 3, 1, JOB_PAD_SAME, JOB_ACT_TANH, 1),
                     conv(3, 3, 1, JOB_PAD_SAME, JOB_ACT_LINEAR, 0),
                     pool(JOB_LAYER_MAXPOOL2D, 2, 2, JOB_PAD_VALID), plain(JOB_LAYER_FLATTEN)};
    cnn_gradcheck(t, "conv-same/conv-nobias/maxpool-fused/flatten",
                  cnn_job(6, 6, 1, f, sizeof f / sizeof f[0]));
}

/* Shapes follow Keras's rules, and a layer that does not fit is refused with both shapes. */
static void cnn_shapes(cltest *t)
{
    char err[ERR_LEN];
    job_layer a[] = {conv(4, 3, 2, JOB_PAD_SAME, JOB_ACT_RELU, 1),
                     pool(JOB_LAYER_MAXPOOL2D, 3, 2, JOB_PAD_VALID), plain(JOB_LAYER_FLATTEN)};
    job_spec *job = cnn_job(9, 8, 3, a, 3);
    model *m = NULL;
    CHECK(model_new(t->c, t->k, job, 9 * 8 * 3, 5, MODEL_LOSS_SOFTMAX_XENT, 4, 0, &m, err) == 0);
    if (m) {
        const model_layer *l = m->layers;
        CHECK(l[0].oh == 5 && l[0].ow == 4 && l[0].oc == 4); /* ceil(9/2), ceil(8/2) */
        CHECK(l[0].pt == 1 && l[0].pb == 1 && l[0].pl == 0 && l[0].pr == 1);
        CHECK(l[1].oh == 2 && l[1].ow == 1 && l[1].oc == 4); /* floor((5-3)/2)+1, (4-3)/2+1 */
        CHECK(l[0].defer && !l[1].defer); /* the pool applies the conv's bias and relu */
        CHECK(l[2].out == 8 && l[2].oh == 1);
        CHECK(l[3].in == 8 && l[3].oc == 5 && l[3].src_h == 2 && l[3].src_c == 4);
        CHECK(m->n_weights == 3 * 3 * 3 * 4 + 4 + 8 * 5 + 5);
    }
    model_free(m);
    job->layers[1] = pool(JOB_LAYER_MAXPOOL2D, 6, 1, JOB_PAD_VALID);
    m = NULL;
    CHECK(model_new(t->c, t->k, job, 9 * 8 * 3, 5, MODEL_LOSS_SOFTMAX_XENT, 4, 0, &m, err) ==
          -EINVAL);
    CHECK(strstr(err, "model.layers[1]") && strstr(err, "5×4×4"));
    job->n_layers = 1;
    CHECK(model_new(t->c, t->k, job, 9 * 8 * 3, 5, MODEL_LOSS_SOFTMAX_XENT, 4, 0, &m, err) ==
          -EINVAL);
    CHECK(strstr(err, "flatten"));
    job->n_layers = 3;
    job->layers[1] = pool(JOB_LAYER_MAXPOOL2D, 3, 2, JOB_PAD_VALID);
    job->output_given = 1;
    job->output_units = 10;
    CHECK(model_new(t->c, t->k, job, 9 * 8 * 3, 5, MODEL_LOSS_SOFTMAX_XENT, 4, 0, &m, err) ==
          -EINVAL);
    CHECK(strstr(err, "10 units") && strstr(err, "5 classes"));
    free(job);
}

/* Images of 8×8×1: class 0 vertical stripes, class 1 horizontal ones, with noise. */
static void stripes(float *x, int32_t *cls, int n, uint64_t *s)
{
    for (int i = 0; i < n; i++) {
        cls[i] = i % 2;
        int phase = (int)(frand(s) > 0);
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                int on = ((cls[i] ? r : c) + phase) % 2;
                x[(i * 8 + r) * 8 + c] = (float)on + 0.3f * frand(s);
            }
    }
}

static job_spec *toy_job(void)
{
    job_layer a[] = {conv(4, 3, 1, JOB_PAD_SAME, JOB_ACT_RELU, 1), plain(JOB_LAYER_BATCHNORM),
                     pool(JOB_LAYER_MAXPOOL2D, 2, 2, JOB_PAD_VALID), plain(JOB_LAYER_FLATTEN),
                     plain(JOB_LAYER_DROPOUT)};
    job_spec *j = cnn_job(8, 8, 1, a, sizeof a / sizeof a[0]);
    j->learning_rate = 0.01;
    return j;
}

#define TOY_ROWS 32

/* A small CNN learns the stripes; evaluation (moving statistics, no dropout) agrees. */
static void cnn_learns(cltest *t)
{
    char err[ERR_LEN];
    job_spec *job = toy_job();
    model *m = NULL;
    CHECK(model_new(t->c, t->k, job, 64, 2, MODEL_LOSS_SOFTMAX_XENT, TOY_ROWS, 0, &m, err) == 0);
    float xs[TOY_ROWS * 64];
    int32_t cls[TOY_ROWS];
    uint64_t s = 3;
    stripes(xs, cls, TOY_ROWS, &s);
    cl_mem x = cltest_buf(t, sizeof xs, xs), tg = cltest_buf(t, sizeof cls, cls);
    double tot[MODEL_TOTALS], first = 0;
    for (int i = 0; i < 60; i++) {
        CHECK(model_reset_totals(m, err) == 0);
        CHECK(model_train_step(m, TOY_ROWS, x, tg, err) == 0);
        CHECK(model_read_totals(m, tot, err) == 0);
        if (i == 0)
            first = tot[MODEL_TRAIN_LOSS] / TOY_ROWS;
    }
    stripes(xs, cls, TOY_ROWS, &s); /* fresh images */
    cltest_write(t, x, sizeof xs, xs);
    CHECK(model_reset_totals(m, err) == 0);
    CHECK(model_evaluate(m, TOY_ROWS, x, tg, err) == 0);
    CHECK(model_read_totals(m, tot, err) == 0);
    double acc = tot[MODEL_VAL_CORRECT] / TOY_ROWS;
    printf("toy CNN: loss %.4f at the first step, validation loss %.4f, accuracy %.3f\n", first,
           tot[MODEL_VAL_LOSS] / TOY_ROWS, acc);
    CHECK(acc >= 0.9);
    CHECK(tot[MODEL_VAL_LOSS] / TOY_ROWS < 0.5 * first);
    cltest_bufs_free(t);
    model_free(m);
    free(job);
}

static float *train_and_read(cltest *t, model *m, cl_mem x, cl_mem tg, int steps)
{
    char err[ERR_LEN];
    for (int i = 0; i < steps; i++)
        CHECK(model_train_step(m, TOY_ROWS, x, tg, err) == 0);
    float *p = NULL, *st = NULL;
    CHECK(model_read_params(m, &p, &st, err) == 0);
    float *both = malloc((m->n_params + m->n_stats) * sizeof *both);
    memcpy(both, p, m->n_params * sizeof *p);
    memcpy(both + m->n_params, st, m->n_stats * sizeof *st);
    free(p);
    free(st);
    (void)t;
    return both;
}

/* Saving the state mid-way and loading it into a new model continues bit for bit: parameters,
 * both moments, batchnorm's moving statistics and the step (dropout masks follow from it). */
static void cnn_resume(cltest *t)
{
    char err[ERR_LEN];
    job_spec *job = toy_job();
    float xs[TOY_ROWS * 64];
    int32_t cls[TOY_ROWS];
    uint64_t s = 5;
    stripes(xs, cls, TOY_ROWS, &s);
    cl_mem x = cltest_buf(t, sizeof xs, xs), tg = cltest_buf(t, sizeof cls, cls);
    model *a = NULL, *b = NULL;
    CHECK(model_new(t->c, t->k, job, 64, 2, MODEL_LOSS_SOFTMAX_XENT, TOY_ROWS, 0, &a, err) == 0);
    CHECK(model_new(t->c, t->k, job, 64, 2, MODEL_LOSS_SOFTMAX_XENT, TOY_ROWS, 0, &b, err) == 0);
    CHECK(a->n_stats >= 8);
    free(train_and_read(t, a, x, tg, 5));
    float *p, *m1, *m2, *st;
    CHECK(model_state_save(a, &p, &m1, &m2, &st, err) == 0);
    float *straight = train_and_read(t, a, x, tg, 5);
    CHECK(model_state_load(b, p, m1, m2, st, a->step - 5, err) == 0);
    float *resumed = train_and_read(t, b, x, tg, 5);
    CHECK(memcmp(straight, resumed, (a->n_params + a->n_stats) * sizeof(float)) == 0);
    CHECK(a->step == b->step);
    free(p);
    free(m1);
    free(m2);
    free(st);
    free(straight);
    free(resumed);
    cltest_bufs_free(t);
    model_free(a);
    model_free(b);
    free(job);
}

/* A data-parallel step: the gradients of rows 0..2 and 3..6 of a batch of ROWS, each taken as a
 * share of it (model_backprop_share: the loss scaled by the whole batch, dropout's masks drawn
 * at the rows' places), add up to the gradient of the whole batch, and their losses to its. */
static void shares_add_up(cltest *t)
{
    char err[ERR_LEN];
    job_spec *job = make_job(JOB_ACT_RELU, 1, JOB_OPT_ADAM);
    model *m = NULL;
    CHECK(model_new(t->c, t->k, job, INPUTS, 3, MODEL_LOSS_SOFTMAX_XENT, ROWS, 0, &m, err) == 0);
    uint64_t s = 5;
    float xs[ROWS * INPUTS];
    for (int i = 0; i < ROWS * INPUTS; i++)
        xs[i] = frand(&s);
    cl_mem x, tg, x2, tg2;
    CHECK(ocl_buffer_new(t->c, sizeof xs, &x, err) == 0);
    CHECK(ocl_write(t->c, x, 0, sizeof xs, xs, err) == 0);
    upload_targets(t, MODEL_LOSS_SOFTMAX_XENT, 3, &tg, &s);
    size_t n = m->n_params;
    float *whole = malloc(n * sizeof *whole), *sum = calloc(n, sizeof *sum),
          *part = malloc(n * sizeof *part);
    double loss_whole = batch_loss(m, ROWS, x, tg) * ROWS, loss_parts = 0;
    CHECK(ocl_read(t->c, m->grads, 0, n * sizeof *whole, whole, err) == 0);
    const int cut = 3;
    for (int share = 0; share < 2; share++) {
        int row0 = share ? cut : 0, rows = share ? ROWS - cut : cut;
        /* The share's rows and targets on their own, as a rank holds them. */
        int32_t cls[ROWS];
        for (int i = 0; i < ROWS; i++)
            cls[i] = i % 3; /* upload_targets' classes */
        CHECK(ocl_buffer_new(t->c, (size_t)rows * INPUTS * sizeof(float), &x2, err) == 0);
        CHECK(ocl_write(t->c, x2, 0, (size_t)rows * INPUTS * sizeof(float), xs + row0 * INPUTS,
                        err) == 0);
        CHECK(ocl_buffer_new(t->c, (size_t)rows * sizeof(int32_t), &tg2, err) == 0);
        CHECK(ocl_write(t->c, tg2, 0, (size_t)rows * sizeof(int32_t), cls + row0, err) == 0);
        double tot[MODEL_TOTALS];
        CHECK(model_reset_totals(m, err) == 0);
        CHECK(model_backprop_share(m, rows, ROWS, row0, x2, tg2, err) == 0);
        CHECK(model_read_totals(m, tot, err) == 0);
        loss_parts += tot[MODEL_TRAIN_LOSS];
        CHECK(ocl_read(t->c, m->grads, 0, n * sizeof *part, part, err) == 0);
        for (size_t i = 0; i < n; i++)
            sum[i] += part[i];
        clReleaseMemObject(x2);
        clReleaseMemObject(tg2);
    }
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)sum[i] - whole[i]) / (fabs(whole[i]) + 1e-6);
        worst = d > worst ? d : worst;
    }
    CHECK(worst < 1e-4);
    CHECK(fabs(loss_parts - loss_whole) < 1e-4 * fabs(loss_whole));
    /* Not a share of the batch: refused. */
    CHECK(model_backprop_share(m, 4, ROWS, 4, x, tg, err) == -EINVAL);
    printf("shares_add_up: worst relative difference %.2g\n", worst);
    free(whole);
    free(sum);
    free(part);
    clReleaseMemObject(x);
    clReleaseMemObject(tg);
    model_free(m);
    free(job);
}

/* model_row_probabilities: softmax rows sum to 1 in the logits' order and are unchanged by a
 * shift of every logit (large ones included, which a softmax without the shift overflows);
 * binary rows are the sigmoid; regression rows stay as they are. */
static void row_probabilities(void)
{
    float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {1001.0f, 1002.0f, 1003.0f};
    model_row_probabilities(MODEL_LOSS_SOFTMAX_XENT, a, 3);
    model_row_probabilities(MODEL_LOSS_SOFTMAX_XENT, b, 3);
    double sum = (double)a[0] + a[1] + a[2];
    CHECK(fabs(sum - 1.0) < 1e-6);
    CHECK(a[0] < a[1] && a[1] < a[2]);
    CHECK(fabs(a[2] / a[1] - exp(1.0)) < 1e-5 && fabs(a[1] / a[0] - exp(1.0)) < 1e-5);
    for (int j = 0; j < 3; j++)
        CHECK(isfinite(b[j]) && fabs(b[j] - a[j]) < 1e-6);
    float p[1] = {0.0f}, q[1] = {2.0f};
    model_row_probabilities(MODEL_LOSS_BCE, p, 1);
    model_row_probabilities(MODEL_LOSS_BCE, q, 1);
    CHECK(p[0] == 0.5f && fabs(q[0] - 1.0 / (1.0 + exp(-2.0))) < 1e-7);
    float y[2] = {-3.5f, 7.25f};
    model_row_probabilities(MODEL_LOSS_MSE, y, 2);
    CHECK(y[0] == -3.5f && y[1] == 7.25f);
}

int main(void)
{
    row_probabilities();
    cltest t;
    cltest_open(&t);
    const int acts[] = {JOB_ACT_RELU, JOB_ACT_TANH, JOB_ACT_SIGMOID, JOB_ACT_LINEAR};
    const int losses[] = {MODEL_LOSS_SOFTMAX_XENT, MODEL_LOSS_BCE, MODEL_LOSS_MSE};
    for (int a = 0; a < 4; a++)
        for (int l = 0; l < 3; l++)
            gradcheck(&t, acts[a], losses[l], 0);
    gradcheck(&t, JOB_ACT_TANH, MODEL_LOSS_SOFTMAX_XENT, 1);
    descends(&t, JOB_OPT_SGD);
    descends(&t, JOB_OPT_ADAM);
    cnn_shapes(&t);
    cnn_gradchecks(&t);
    cnn_learns(&t);
    cnn_resume(&t);
    shares_add_up(&t);
    cltest_close(&t);
    return check_exit();
}
