/* model: layout of the parameter buffer, Glorot initialisation, and the enqueue sequence of a
 * training step (see model.h for the shape of the whole).
 *
 * A step for layers L0..Ln (Ln the output layer) enqueues:
 *   forward   per dense layer: gemm NN (y = x·W) + bias_act_fwd; per dropout: dropout
 *   loss      softmax_xent | bce | mse, then two reduce_sum into the totals
 *   backward  per dense layer, last to first: bias_act_bwd (dZ, db), gemm TN (dW = xᵀ·dZ) and,
 *             except for the first layer, gemm NT (dx = dZ·Wᵀ); per dropout: dropout on dy
 *   update    one sgd or adam over the whole parameter buffer
 * Nothing in a step reads back from the device. */
#include "worker/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [-limit, limit) from 24 random bits, as float. */
static float uniform_sym(uint64_t *s, float limit)
{
    float u = (float)(splitmix64(s) >> 40) * (1.0f / 16777216.0f);
    return (2.0f * u - 1.0f) * limit;
}

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

/* Fills m->layers from the job: hidden layers, then the output layer. */
/* The kernels' activation for a job's; the job validated it, so anything else cannot occur. */
static int model_kern_act(int job_act)
{
    switch (job_act) {
    case JOB_ACT_RELU:
        return KERN_ACT_RELU;
    case JOB_ACT_TANH:
        return KERN_ACT_TANH;
    case JOB_ACT_SIGMOID:
        return KERN_ACT_SIGMOID;
    default:
        return KERN_ACT_LINEAR;
    }
}

static void layers_plan(model *m, const job_spec *job, int inputs, int outputs)
{
    int width = inputs;
    m->n_layers = 0;
    for (size_t i = 0; i < job->n_layers; i++) {
        model_layer *l = &m->layers[m->n_layers++];
        l->type = job->layers[i].type;
        l->in = width;
        if (l->type == JOB_LAYER_DENSE) {
            l->out = job->layers[i].units;
            l->job_act = job->layers[i].activation;
            l->act = model_kern_act(l->job_act);
        } else {
            l->out = width;
            l->rate = (float)job->layers[i].rate;
        }
        width = l->out;
    }
    model_layer *o = &m->layers[m->n_layers++];
    o->type = JOB_LAYER_DENSE;
    o->in = width;
    o->out = outputs;
    o->act = KERN_ACT_LINEAR;
    o->job_act = JOB_ACT_LINEAR;
}

uint64_t model_device_bytes(const job_spec *job, int inputs, int outputs, int capacity)
{
    model plan;
    memset(&plan, 0, sizeof plan);
    layers_plan(&plan, job, inputs, outputs);
    uint64_t params = 0, acts = 0;
    int widest = inputs;
    for (size_t i = 0; i < plan.n_layers; i++) {
        const model_layer *l = &plan.layers[i];
        if (l->type == JOB_LAYER_DENSE)
            params += (uint64_t)l->in * (uint64_t)l->out + (uint64_t)l->out + 256;
        acts += (uint64_t)l->out;
        if (l->out > widest)
            widest = l->out;
    }
    /* params, grads, two moments; one output per layer and two gradient buffers per row. */
    return 4 * (4 * params + (uint64_t)capacity * (acts + 2 * (uint64_t)widest + 2));
}

static int buffer_zeroed(model *m, size_t bytes, cl_mem *out, char *err)
{
    int rc = ocl_buffer_new(m->c, bytes, out, err);
    if (rc < 0)
        return rc;
    float zero = 0.0f;
    cl_int cl = clEnqueueFillBuffer(m->c->queue, *out, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return err_set(err, -EIO, "clearing a device buffer failed: %s", ocl_strerror(cl));
    return 0;
}

static int sub_buffer(cl_mem parent, size_t off_floats, size_t n_floats, cl_mem *out, char *err)
{
    cl_buffer_region r = {off_floats * sizeof(float), n_floats * sizeof(float)};
    cl_int cl;
    *out = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &cl);
    if (cl != CL_SUCCESS)
        return err_set(err, -EIO, "clCreateSubBuffer failed: %s", ocl_strerror(cl));
    return 0;
}

static int init_weights(model *m, char *err)
{
    float *host = calloc(m->n_params, sizeof *host);
    if (!host)
        return err_set(err, -ENOMEM, "out of memory initialising %zu weights", m->n_params);
    uint64_t s = m->seed ^ 0x5eed5eed5eed5eedULL;
    for (size_t i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        if (l->type != JOB_LAYER_DENSE)
            continue;
        /* Glorot uniform, as Keras: limit = sqrt(6 / (fan_in + fan_out)); biases start at 0. */
        float limit = sqrtf(6.0f / (float)(l->in + l->out));
        size_t n = (size_t)l->in * (size_t)l->out;
        for (size_t j = 0; j < n; j++)
            host[l->w_off + j] = uniform_sym(&s, limit);
    }
    int rc = ocl_write(m->c, m->params, 0, m->n_params * sizeof *host, host, err);
    free(host);
    return rc;
}

int model_new(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
              int capacity, model **out, char *err)
{
    int rc = 0;
    if (inputs < 1 || outputs < 1 || capacity < 1)
        return err_set(err, -EINVAL, "a model needs at least one input, output and row");
    uint64_t need = model_device_bytes(job, inputs, outputs, capacity);
    if (need > c->dev.global_mem)
        return err_set(err, -ENOMEM,
                       "the model needs %.1f MiB of device memory for batches of %d rows, more "
                       "than %s has (%.1f MiB): use fewer or smaller layers or a smaller "
                       "batch_size",
                       (double)need / (1 << 20), capacity, c->dev.name,
                       (double)c->dev.global_mem / (1 << 20));

    model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(err, -ENOMEM, "out of memory");
    m->c = c;
    m->k = k;
    m->inputs = inputs;
    m->outputs = outputs;
    m->loss = loss;
    m->optimizer = job->optimizer;
    m->lr = (float)job->learning_rate;
    m->momentum = (float)job->momentum;
    m->beta1 = (float)job->beta1;
    m->beta2 = (float)job->beta2;
    m->eps = (float)job->epsilon;
    m->seed = job->seed;
    m->capacity = capacity;
    layers_plan(m, job, inputs, outputs);

    /* Parameter layout: each weight and bias starts on the device's sub-buffer alignment. */
    size_t align = c->dev.base_align_bytes / sizeof(float);
    if (align < 1)
        align = 1;
    size_t off = 0;
    int widest = inputs;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        if (l->out > widest)
            widest = l->out;
        if (l->type != JOB_LAYER_DENSE)
            continue;
        l->w_off = off;
        off = round_up(off + (size_t)l->in * (size_t)l->out, align);
        l->b_off = off;
        off = round_up(off + (size_t)l->out, align);
        m->n_weights += (size_t)l->in * (size_t)l->out + (size_t)l->out;
    }
    m->n_params = off;

    size_t pbytes = m->n_params * sizeof(float);
    size_t rows = (size_t)capacity;
    rc = buffer_zeroed(m, pbytes, &m->params, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->grads, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->moment1, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->moment2, err);
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = ocl_buffer_new(c, rows * (size_t)widest * sizeof(float), &m->dbuf[i], err);
    if (rc == 0)
        rc = ocl_buffer_new(c, rows * sizeof(float), &m->loss_rows, err);
    if (rc == 0)
        rc = ocl_buffer_new(c, rows * sizeof(float), &m->correct_rows, err);
    if (rc == 0)
        rc = buffer_zeroed(m, MODEL_TOTALS * sizeof(float), &m->totals, err);
    for (size_t i = 0; i < m->n_layers && rc == 0; i++) {
        model_layer *l = &m->layers[i];
        rc = ocl_buffer_new(c, rows * (size_t)l->out * sizeof(float), &l->y, err);
        if (rc < 0 || l->type != JOB_LAYER_DENSE)
            continue;
        size_t nw = (size_t)l->in * (size_t)l->out, nb = (size_t)l->out;
        rc = sub_buffer(m->params, l->w_off, nw, &l->w, err);
        if (rc == 0)
            rc = sub_buffer(m->params, l->b_off, nb, &l->b, err);
        if (rc == 0)
            rc = sub_buffer(m->grads, l->w_off, nw, &l->gw, err);
        if (rc == 0)
            rc = sub_buffer(m->grads, l->b_off, nb, &l->gb, err);
    }
    if (rc == 0)
        rc = init_weights(m, err);
    if (rc < 0) {
        model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

static void release(cl_mem *b)
{
    if (*b)
        clReleaseMemObject(*b);
    *b = NULL;
}

void model_free(model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        release(&l->w);
        release(&l->b);
        release(&l->gw);
        release(&l->gb);
        release(&l->y);
    }
    release(&m->dbuf[0]);
    release(&m->dbuf[1]);
    release(&m->loss_rows);
    release(&m->correct_rows);
    release(&m->totals);
    release(&m->params);
    release(&m->grads);
    release(&m->moment1);
    release(&m->moment2);
    free(m);
}

static int kfail(model *m, char *err)
{
    err_set(err, -EIO, "%s", kern_last_error(m->k));
    return -EIO; /* a constant the compiler sees: callers' outputs are set whenever this is not */
}

/* The stream offset of a dropout layer for the current step: distinct per step and layer. */
static uint64_t dropout_offset(const model *m, size_t layer)
{
    return ((uint64_t)m->step * (JOB_MAX_LAYERS + 1) + layer) * (uint64_t)m->capacity *
           (uint64_t)m->layers[layer].out;
}

/* Forward over rows of x; train enables dropout. *out is the output layer's buffer. */
static int forward(model *m, int rows, cl_mem x, int train, cl_mem *out, char *err)
{
    kern *k = m->k;
    cl_mem cur = x;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        int rc;
        if (l->type == JOB_LAYER_DENSE) {
            rc = kern_gemm(k, 0, 0, rows, l->out, l->in, 1.0f, cur, l->in, l->w, l->out, 0.0f, l->y,
                           l->out);
            if (rc == 0)
                rc = kern_bias_act_fwd(k, rows, l->out, l->act, l->y, l->b);
            cur = l->y;
        } else if (train && l->rate > 0.0f) {
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, i), cur, l->y);
            cur = l->y;
        } else {
            rc = 0; /* dropout is the identity outside training */
        }
        if (rc < 0)
            return kfail(m, err);
    }
    *out = cur;
    return 0;
}

/* Loss over rows: per-row loss and correct flags, gradient into dlogits when not NULL, sums
 * added to totals[loss_at] and totals[loss_at + 1]. */
static int loss(model *m, int rows, cl_mem logits, cl_mem targets, cl_mem dlogits, int loss_at,
                char *err)
{
    kern *k = m->k;
    float scale = 1.0f / (float)rows;
    int rc;
    if (m->loss == MODEL_LOSS_SOFTMAX_XENT)
        rc = kern_softmax_xent(k, rows, m->outputs, logits, targets, scale, dlogits, m->loss_rows,
                               m->correct_rows);
    else if (m->loss == MODEL_LOSS_BCE)
        rc = kern_bce(k, rows, logits, targets, scale, dlogits, m->loss_rows, m->correct_rows);
    else
        rc = kern_mse(k, rows, m->outputs, logits, targets, scale, dlogits, m->loss_rows);
    if (rc == 0)
        rc = kern_reduce_sum(k, rows, m->loss_rows, m->totals, loss_at, !m->fresh[loss_at]);
    if (rc == 0 && m->loss != MODEL_LOSS_MSE)
        rc = kern_reduce_sum(k, rows, m->correct_rows, m->totals, loss_at + 1,
                             !m->fresh[loss_at + 1]);
    m->fresh[loss_at] = m->fresh[loss_at + 1] = 0;
    return rc < 0 ? kfail(m, err) : 0;
}

static int backward(model *m, int rows, cl_mem x, char *err)
{
    kern *k = m->k;
    int cur = 0; /* dbuf[cur] holds the gradient of the current layer's output */
    for (size_t n = m->n_layers; n-- > 0;) {
        model_layer *l = &m->layers[n];
        cl_mem input = n ? m->layers[n - 1].y : x;
        cl_mem dy = m->dbuf[cur];
        int rc;
        if (l->type == JOB_LAYER_DENSE) {
            rc = kern_bias_act_bwd(k, rows, l->out, l->act, l->y, dy, l->gb);
            if (rc == 0)
                rc = kern_gemm(k, 1, 0, l->in, l->out, rows, 1.0f, input, l->in, dy, l->out, 0.0f,
                               l->gw, l->out);
            if (rc == 0 && n > 0) {
                rc = kern_gemm(k, 0, 1, rows, l->in, l->out, 1.0f, dy, l->out, l->w, l->out, 0.0f,
                               m->dbuf[1 - cur], l->in);
                cur = 1 - cur;
            }
        } else if (l->rate > 0.0f && n > 0) {
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, n), dy, dy);
        } else {
            rc = 0;
        }
        if (rc < 0)
            return kfail(m, err);
    }
    return 0;
}

static int update(model *m, char *err)
{
    int n = (int)m->n_params;
    int rc;
    m->step++;
    if (m->optimizer == JOB_OPT_SGD) {
        rc = kern_sgd(m->k, n, m->lr, m->momentum, m->params, m->grads,
                      m->momentum > 0.0f ? m->moment1 : NULL);
    } else {
        float bc1 = 1.0f - (float)pow(m->beta1, (double)m->step);
        float bc2 = 1.0f - (float)pow(m->beta2, (double)m->step);
        rc = kern_adam(m->k, n, m->lr, m->beta1, m->beta2, m->eps, bc1, bc2, m->params, m->grads,
                       m->moment1, m->moment2);
    }
    return rc < 0 ? kfail(m, err) : 0;
}

static int check_rows(const model *m, int rows, char *err)
{
    if (rows < 1 || rows > m->capacity)
        return err_set(err, -EINVAL, "%d rows do not fit the model's batches (1..%d)", rows,
                       m->capacity);
    return 0;
}

int model_backprop(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    cl_mem logits;
    int rc = check_rows(m, rows, err);
    if (rc < 0)
        return rc;
    rc = forward(m, rows, x, 1, &logits, err);
    if (rc < 0)
        return rc;
    /* The loss gradient goes straight into the first ping-pong buffer that backward reads. */
    rc = loss(m, rows, logits, targets, m->dbuf[0], MODEL_TRAIN_LOSS, err);
    if (rc < 0)
        return rc;
    return backward(m, rows, x, err);
}

int model_train_step(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    int rc = model_backprop(m, rows, x, targets, err);
    if (rc == 0)
        rc = update(m, err);
    return rc;
}

int model_evaluate(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    cl_mem logits;
    int rc = check_rows(m, rows, err);
    if (rc < 0)
        return rc;
    rc = forward(m, rows, x, 0, &logits, err);
    if (rc < 0)
        return rc;
    return loss(m, rows, logits, targets, NULL, MODEL_VAL_LOSS, err);
}

int model_forward(model *m, int rows, cl_mem x, cl_mem *out, char *err)
{
    int rc = check_rows(m, rows, err);
    if (rc == 0)
        rc = forward(m, rows, x, 0, out, err);
    return rc;
}

int model_reset_totals(model *m, char *err)
{
    (void)err;
    for (int i = 0; i < MODEL_TOTALS; i++)
        m->fresh[i] = 1;
    return 0;
}

int model_read_totals(model *m, double t[MODEL_TOTALS], char *err)
{
    float host[MODEL_TOTALS];
    int rc = ocl_read(m->c, m->totals, 0, sizeof host, host, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < MODEL_TOTALS; i++)
        t[i] = m->fresh[i] ? 0.0 : host[i]; /* nothing summed into it since the reset */
    return 0;
}

int model_export(model *m, float **w, char *err)
{
    float *all = malloc(m->n_params * sizeof *all);
    float *outw = malloc((m->n_weights ? m->n_weights : 1) * sizeof *outw);
    int rc = 0;
    if (!all || !outw) {
        rc = err_set(err, -ENOMEM, "out of memory reading the weights");
        goto out;
    }
    rc = ocl_read(m->c, m->params, 0, m->n_params * sizeof *all, all, err);
    if (rc < 0)
        goto out;
    float *p = outw;
    for (size_t i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        if (l->type != JOB_LAYER_DENSE)
            continue;
        for (int o = 0; o < l->out; o++)
            for (int in = 0; in < l->in; in++)
                *p++ = all[l->w_off + (size_t)in * (size_t)l->out + (size_t)o];
        memcpy(p, all + l->b_off, (size_t)l->out * sizeof *p);
        p += l->out;
    }
out:
    free(all);
    if (rc < 0) {
        free(outw);
        return rc;
    }
    *w = outw;
    return 0;
}

int model_state_save(model *m, float **params, float **m1, float **m2, char *err)
{
    size_t bytes = m->n_params * sizeof(float);
    float *bufs[3] = {malloc(bytes), malloc(bytes), malloc(bytes)};
    cl_mem src[3] = {m->params, m->moment1, m->moment2};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = bufs[i] ? ocl_read(m->c, src[i], 0, bytes, bufs[i], err)
                     : err_set(err, -ENOMEM, "out of memory saving the training state");
    if (rc < 0) {
        for (int i = 0; i < 3; i++)
            free(bufs[i]);
        return rc;
    }
    *params = bufs[0];
    *m1 = bufs[1];
    *m2 = bufs[2];
    return 0;
}

int model_state_load(model *m, const float *params, const float *m1, const float *m2, int64_t step,
                     char *err)
{
    size_t bytes = m->n_params * sizeof(float);
    int rc = ocl_write(m->c, m->params, 0, bytes, params, err);
    if (rc == 0)
        rc = ocl_write(m->c, m->moment1, 0, bytes, m1, err);
    if (rc == 0)
        rc = ocl_write(m->c, m->moment2, 0, bytes, m2, err);
    if (rc == 0)
        m->step = step;
    return rc;
}
