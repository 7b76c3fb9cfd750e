/* model: the device side of a model (see model.h for the shape of the whole): its buffers,
 * Glorot initialisation, the inference-only variant, and the training state read back and
 * written again (parameters, optimizer moments, batchnorm statistics) for exports and
 * checkpoints. The layers and the buffers' layout come from model_plan.c; a step's enqueue
 * sequence is model_step.c's.
 *
 * Ownership: model_new/model_new_inference own every buffer they make (model_free releases
 * them, the layers' sub-buffers before their parents); the ocl_ctx and kern are borrowed. */
#include "model/model_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

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

static int buffer_filled(model *m, size_t bytes, float value, cl_mem *out, char *err)
{
    int rc = ocl_buffer_new(m->c, bytes, out, err);
    if (rc < 0)
        return rc;
    cl_int cl =
        clEnqueueFillBuffer(m->c->queue, *out, &value, sizeof value, 0, bytes, 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return err_set(err, -EIO, "clearing a device buffer failed: %s", ocl_strerror(cl));
    return 0;
}

static int buffer_zeroed(model *m, size_t bytes, cl_mem *out, char *err)
{
    return buffer_filled(m, bytes, 0.0f, out, err);
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

/* Glorot uniform, as Keras: limit = sqrt(6 / (fan_in + fan_out)), a conv's fans counting its
 * window (kh·kw·c in, kh·kw·f out); biases and beta 0, gamma 1; moving mean 0, variance 1.
 * The draws go layer by layer in one stream, so a dense model gets the weights it always got. */
static int init_weights(model *m, char *err)
{
    float *host = calloc(m->n_params, sizeof *host);
    float *stats = calloc(m->n_stats ? m->n_stats : 1, sizeof *stats);
    int rc = 0;
    if (!host || !stats) {
        rc = err_set(err, -ENOMEM, "out of memory initialising %zu weights", m->n_params);
        goto out;
    }
    uint64_t s = m->seed ^ 0x5eed5eed5eed5eedULL;
    for (size_t i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        if (l->type == JOB_LAYER_BATCHNORM) {
            for (int j = 0; j < l->oc; j++) {
                host[l->w_off + (size_t)j] = 1.0f;
                stats[l->v_off + (size_t)j] = 1.0f;
            }
            continue;
        }
        if (l->type != JOB_LAYER_DENSE && l->type != JOB_LAYER_CONV2D)
            continue;
        float window = l->type == JOB_LAYER_CONV2D ? (float)(l->kh * l->kw) : 1.0f;
        float fan_in = l->type == JOB_LAYER_CONV2D ? window * (float)l->ic : (float)l->in;
        float limit = sqrtf(6.0f / (fan_in + window * (float)l->oc));
        for (size_t j = 0; j < l->n_w; j++)
            host[l->w_off + j] = uniform_sym(&s, limit);
    }
    rc = ocl_write(m->c, m->params, 0, m->n_params * sizeof *host, host, err);
    if (rc == 0 && m->n_stats)
        rc = ocl_write(m->c, m->stats, 0, m->n_stats * sizeof *stats, stats, err);
out:
    free(host);
    free(stats);
    return rc;
}

/* The buffers of one layer: its output, its parameters' sub-buffers, and what its kind keeps. */
static int layer_buffers(model *m, model_layer *l, char *err)
{
    size_t rows = (size_t)m->capacity;
    int rc = 0;
    if (l->type != JOB_LAYER_FLATTEN)
        rc = ocl_buffer_new(m->c, rows * (size_t)l->out * sizeof(float), &l->y, err);
    if (rc == 0 && l->n_w)
        rc = sub_buffer(m->params, l->w_off, l->n_w, &l->w, err);
    if (rc == 0 && l->n_w && !m->inference)
        rc = sub_buffer(m->grads, l->w_off, l->n_w, &l->gw, err);
    if (rc == 0 && l->n_b)
        rc = sub_buffer(m->params, l->b_off, l->n_b, &l->b, err);
    if (rc == 0 && l->n_b && !m->inference)
        rc = sub_buffer(m->grads, l->b_off, l->n_b, &l->gb, err);
    if (rc == 0 && l->type == JOB_LAYER_MAXPOOL2D && !m->inference)
        rc = ocl_buffer_new(m->c, rows * (size_t)l->out * sizeof(int32_t), &l->argmax, err);
    if (rc == 0 && l->type == JOB_LAYER_BATCHNORM) {
        size_t c = (size_t)l->oc;
        rc = sub_buffer(m->stats, l->s_off, c, &l->mmean, err);
        if (rc == 0)
            rc = sub_buffer(m->stats, l->v_off, c, &l->mvar, err);
        if (rc == 0 && !m->inference)
            rc = buffer_zeroed(m, c * sizeof(float), &l->save_mean, err);
        if (rc == 0 && !m->inference)
            rc = buffer_zeroed(m, c * sizeof(float), &l->save_invstd, err);
    }
    return rc;
}

int model_new(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
              int capacity, uint64_t extra_bytes, model **out, char *err)
{
    int rc = 0;
    if (inputs < 1 || outputs < 1 || capacity < 1)
        return err_set(err, -EINVAL, "a model needs at least one input, output and row");
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
    rc = model_layers_plan(m, job, inputs, outputs, err);
    if (rc < 0)
        goto fail;
    for (size_t i = 0; i < m->n_layers; i++)
        m->layers[i].fuse_pool = m->layers[i].fuse_pool && kern_conv2d_fwd_maxpool_ok(k);
    /* Parameter layout: each tensor starts on the device's sub-buffer alignment. */
    size_t align = c->dev.base_align_bytes / sizeof(float);
    model_layers_layout(m, align < 1 ? 1 : align);

    uint64_t need = model_bytes(m, k, capacity) + extra_bytes;
    if (need > c->dev.global_mem) {
        rc = err_set(err, -ENOMEM,
                     "the model%s needs %.1f MiB of device memory for batches of %d rows, more "
                     "than %s has (%.1f MiB): use fewer or smaller layers or a smaller "
                     "batch_size",
                     extra_bytes ? " and the dataset" : "", (double)need / (1 << 20), capacity,
                     c->dev.name, (double)c->dev.global_mem / (1 << 20));
        goto fail;
    }
    model_sizes z = model_sizes_of(m, k, capacity);
    size_t pbytes = m->n_params * sizeof(float);
    size_t rows = (size_t)capacity;
    rc = buffer_zeroed(m, pbytes, &m->params, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->grads, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->moment1, err);
    if (rc == 0)
        rc = buffer_zeroed(m, pbytes, &m->moment2, err);
    if (rc == 0 && m->n_stats)
        rc = buffer_zeroed(m, m->n_stats * sizeof(float), &m->stats, err);
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = ocl_buffer_new(c, rows * z.widest * sizeof(float), &m->dbuf[i], err);
    if (rc == 0 && z.work)
        rc = ocl_buffer_new(c, z.work, &m->work, err);
    if (rc == 0 && z.widest_c) {
        rc = buffer_zeroed(m, z.widest_c * sizeof(float), &m->zeros, err);
        if (rc == 0)
            rc = ocl_buffer_new(c, z.widest_c * sizeof(float), &m->discard, err);
    }
    if (rc == 0)
        rc = ocl_buffer_new(c, rows * sizeof(float), &m->loss_rows, err);
    if (rc == 0)
        rc = ocl_buffer_new(c, rows * sizeof(float), &m->correct_rows, err);
    if (rc == 0)
        rc = buffer_zeroed(m, MODEL_TOTALS * sizeof(float), &m->totals, err);
    for (size_t i = 0; i < m->n_layers && rc == 0; i++)
        rc = layer_buffers(m, &m->layers[i], err);
    if (rc == 0)
        rc = init_weights(m, err);
    if (rc < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    model_free(m);
    return rc;
}

int model_new_inference(ocl_ctx *c, kern *k, const job_spec *job, int inputs, int outputs, int loss,
                        int capacity, model **out, char *err)
{
    if (inputs < 1 || outputs < 1 || capacity < 1)
        return err_set(err, -EINVAL, "a model needs at least one input, output and row");
    model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(err, -ENOMEM, "out of memory");
    *m = (model){.c = c,
                 .k = k,
                 .inputs = inputs,
                 .outputs = outputs,
                 .loss = loss,
                 .seed = job->seed,
                 .capacity = capacity,
                 .inference = 1};
    int rc = model_layers_plan(m, job, inputs, outputs, err);
    if (rc < 0)
        goto fail;
    for (size_t i = 0; i < m->n_layers; i++)
        m->layers[i].fuse_pool = m->layers[i].fuse_pool && kern_conv2d_fwd_maxpool_ok(k);
    size_t align = c->dev.base_align_bytes / sizeof(float);
    model_layers_layout(m, align < 1 ? 1 : align);
    uint64_t need = model_bytes_inference(m, k, capacity);
    if (need > c->dev.global_mem) {
        rc = err_set(err, -ENOMEM,
                     "the model needs %.1f MiB of device memory for batches of %d rows, more "
                     "than %s has (%.1f MiB)",
                     (double)need / (1 << 20), capacity, c->dev.name,
                     (double)c->dev.global_mem / (1 << 20));
        goto fail;
    }
    model_sizes z = model_sizes_of(m, k, capacity);
    rc = buffer_zeroed(m, m->n_params * sizeof(float), &m->params, err);
    if (rc == 0 && m->n_stats)
        rc = buffer_zeroed(m, m->n_stats * sizeof(float), &m->stats, err);
    if (rc == 0 && z.work)
        rc = ocl_buffer_new(c, z.work, &m->work, err);
    if (rc == 0 && z.widest_c)
        rc = buffer_zeroed(m, z.widest_c * sizeof(float), &m->zeros, err);
    for (size_t i = 0; i < m->n_layers && rc == 0; i++)
        rc = layer_buffers(m, &m->layers[i], err);
    if (rc < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    model_free(m);
    return rc;
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
        cl_mem *mine[] = {&l->w,    &l->b,         &l->gw,          &l->gb,     &l->mmean,
                          &l->mvar, &l->save_mean, &l->save_invstd, &l->argmax, &l->y};
        for (size_t j = 0; j < sizeof mine / sizeof mine[0]; j++)
            release(mine[j]);
    }
    cl_mem *own[] = {&m->dbuf[0],   &m->dbuf[1],      &m->work,   &m->zeros,  &m->discard,
                     &m->loss_rows, &m->correct_rows, &m->totals, &m->params, &m->grads,
                     &m->moment1,   &m->moment2,      &m->stats};
    for (size_t j = 0; j < sizeof own / sizeof own[0]; j++)
        release(own[j]);
    free(m);
}

/* Training, evaluation and the state functions need what an inference model lacks. */
int model_check_training(const model *m, char *err)
{
    if (m->inference)
        return err_set(err, -EINVAL, "an inference model can only run forwards");
    return 0;
}

/* Reads n floats of buf into a new array at *out (NULL when n is 0). */
static int read_new(model *m, cl_mem buf, size_t n, float **out, char *err)
{
    *out = NULL;
    if (n == 0)
        return 0;
    float *v = malloc(n * sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory reading %zu floats from the device", n);
    int rc = ocl_read(m->c, buf, 0, n * sizeof *v, v, err);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int model_read_params(model *m, float **params, float **stats, char *err)
{
    float *p = NULL, *s = NULL;
    int rc = read_new(m, m->params, m->n_params, &p, err);
    if (rc == 0)
        rc = read_new(m, m->stats, m->n_stats, &s, err);
    if (rc < 0) {
        free(p);
        return rc;
    }
    *params = p;
    *stats = s;
    return 0;
}

int model_state_save(model *m, float **params, float **m1, float **m2, float **stats, char *err)
{
    if (model_check_training(m, err) < 0)
        return -EINVAL;
    float *bufs[4] = {0};
    cl_mem src[4] = {m->params, m->moment1, m->moment2, m->stats};
    size_t n[4] = {m->n_params, m->n_params, m->n_params, m->n_stats};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = read_new(m, src[i], n[i], &bufs[i], err);
    if (rc < 0) {
        for (int i = 0; i < 4; i++)
            free(bufs[i]);
        return rc;
    }
    *params = bufs[0];
    *m1 = bufs[1];
    *m2 = bufs[2];
    *stats = bufs[3];
    return 0;
}

int model_state_load(model *m, const float *params, const float *m1, const float *m2,
                     const float *stats, int64_t step, char *err)
{
    if (model_check_training(m, err) < 0)
        return -EINVAL;
    size_t bytes = m->n_params * sizeof(float);
    int rc = ocl_write(m->c, m->params, 0, bytes, params, err);
    if (rc == 0)
        rc = ocl_write(m->c, m->moment1, 0, bytes, m1, err);
    if (rc == 0)
        rc = ocl_write(m->c, m->moment2, 0, bytes, m2, err);
    if (rc == 0 && m->n_stats)
        rc = ocl_write(m->c, m->stats, 0, m->n_stats * sizeof(float), stats, err);
    if (rc == 0)
        m->step = step;
    return rc;
}
