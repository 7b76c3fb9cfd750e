/* Unit tests of worker/model: backprop on the device against central finite differences of the
 * device's own loss, for every activation with every loss, and with a dropout layer (whose mask
 * stays fixed between two updates); then a few optimizer steps must lower the loss, and export
 * must hand out each weight transposed. */
#include "worker/model.h"

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

static double train_loss(model *m, cl_mem x, cl_mem t)
{
    char err[ERR_LEN];
    double tot[MODEL_TOTALS];
    CHECK(model_reset_totals(m, err) == 0);
    CHECK(model_backprop(m, ROWS, x, t, err) == 0);
    CHECK(model_read_totals(m, tot, err) == 0);
    return tot[MODEL_TRAIN_LOSS] / ROWS;
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
    int rc = model_new(t->c, t->k, job, INPUTS, outputs, loss, ROWS, &m, err);
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
    CHECK(model_new(t->c, t->k, job, INPUTS, 3, MODEL_LOSS_SOFTMAX_XENT, ROWS, &m, err) == 0);
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
    float *w = NULL, *raw = malloc(m->n_params * sizeof *raw);
    CHECK(model_export(m, &w, err) == 0);
    CHECK(ocl_read(t->c, m->params, 0, m->n_params * sizeof *raw, raw, err) == 0);
    const model_layer *l0 = &m->layers[0];
    for (int o = 0; o < l0->out; o++)
        for (int in = 0; in < l0->in; in++)
            CHECK(w[o * l0->in + in] == raw[l0->w_off + (size_t)in * (size_t)l0->out + (size_t)o]);
    CHECK(w[l0->in * l0->out] == raw[l0->b_off]);
    free(w);
    free(raw);
    clReleaseMemObject(x);
    clReleaseMemObject(tg);
    model_free(m);
    free(job);
}

int main(void)
{
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
    cltest_close(&t);
    return check_exit();
}
