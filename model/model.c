/* model: layer shapes, the layout of the parameter and stats buffers, Glorot initialisation,
 * and the enqueue sequence of a training step (see model.h for the shape of the whole).
 *
 * A step for layers L0..Ln (Ln the output layer) enqueues:
 *   forward   dense: gemm NN (y = x·W) + bias_act_fwd; conv2d: conv2d_fwd + bias_act_fwd (skipped
 *             when there is neither bias nor activation, and moved after the pool when a max
 *             pool follows: 4× fewer elements for a 2×2 pool, the same numbers); a conv before
 *             a 2×2 stride-2 valid max pool on the direct conv path (fuse_pool): one
 *             conv2d_fwd_maxpool_act writes the pool's y and argmax with the bias and activation
 *             applied, and the pool enqueues nothing; pools: pool2d_fwd (max records its argmax
 *             while training); batchnorm: batchnorm_fwd_train (batch statistics, moving
 *             statistics updated) or _infer; dropout: dropout; flatten: nothing
 *   loss      softmax_xent | bce | mse, then two reduce_sum into the totals
 *   backward  last to first: dense: bias_act_bwd (dZ, db), gemm TN (dW = xᵀ·dZ) and gemm NT
 *             (dx = dZ·Wᵀ); conv2d: bias_act_bwd, conv2d_bwd_weights and conv2d_bwd_data; pools:
 *             pool2d_bwd, except after a fused conv that is the first layer with parameters:
 *             its conv2d_bwd_weights_maxpool reads the pool's dy and argmax; batchnorm:
 *             batchnorm_bwd (dx in place, dgamma, dbeta); dropout: dropout on dy in place.
 *             Backward stops at the first layer with parameters, which computes no dx:
 *             nothing reads it (a leading pool costs nothing).
 *   update    one sgd or adam over the whole parameter buffer (not the stats buffer)
 * Nothing in a step reads back from the device. Each layer remembers the buffers its last
 * forward read and wrote (x_cur, y_cur): flatten, and dropout outside training, pass their
 * input through, so "the previous layer's output" is not always a buffer of its own. */
#include "model/model.h"

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

static const char *layer_name(int type)
{
    static const char *const names[] = {"dense",     "dropout",          "conv2d",  "maxpool2d",
                                        "avgpool2d", "global_avgpool2d", "flatten", "batchnorm"};
    return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "layer";
}

/* One axis of a window (kernel k, stride s) over in cells: the output size and the padding
 * before and after, by Keras's rules. -1 when a valid window does not fit. */
static int axis_plan(int in, int k, int s, int same, int *out, int *lo, int *hi)
{
    if (k < 1 || s < 1)
        return -1;
    if (!same) {
        if (in < k)
            return -1;
        *out = (in - k) / s + 1;
        *lo = *hi = 0;
        return 0;
    }
    int o = (in + s - 1) / s;
    int total = (o - 1) * s + k - in;
    if (total < 0)
        total = 0;
    *out = o;
    *lo = total / 2;
    *hi = total - total / 2;
    return 0;
}

/* A window layer (conv2d or a pool) over the input shape already in l. */
static int window_plan(model_layer *l, const job_layer *jl, size_t index, char *err)
{
    l->kh = jl->kh;
    l->kw = jl->kw;
    l->sh = jl->sh;
    l->sw = jl->sw;
    l->same = jl->padding == JOB_PAD_SAME;
    if (axis_plan(l->ih, l->kh, l->sh, l->same, &l->oh, &l->pt, &l->pb) < 0 ||
        axis_plan(l->iw, l->kw, l->sw, l->same, &l->ow, &l->pl, &l->pr) < 0)
        return err_set(err, -EINVAL,
                       "model.layers[%zu]: %s with a %d×%d window (padding %s) does not fit its "
                       "input %d×%d×%d",
                       index, layer_name(l->type), l->kh, l->kw, l->same ? "same" : "valid", l->ih,
                       l->iw, l->ic);
    return 0;
}

/* Fills m->layers from the job (hidden layers, then the output layer) with every shape, and
 * checks that each layer fits the one before. */
static int layers_plan(model *m, const job_spec *job, int inputs, int outputs, char *err)
{
    int h = 1, w = 1, c = inputs;
    if (job->in_h > 0) {
        h = job->in_h;
        w = job->in_w;
        c = job->in_c;
        if ((int64_t)h * w * c != inputs)
            return err_set(err, -EINVAL,
                           "model.input_shape %d×%d×%d is not the %d values a row has", h, w, c,
                           inputs);
    }
    m->image_input = job->in_h > 0;
    m->in_h = h;
    m->in_w = w;
    m->in_c = c;
    int src_h = 1, src_w = 1, src_c = h * w * c; /* where the flat features come from */
    m->n_layers = 0;
    for (size_t i = 0; i <= job->n_layers; i++) {
        model_layer *l = &m->layers[m->n_layers++];
        const job_layer *jl = i < job->n_layers ? &job->layers[i] : NULL;
        memset(l, 0, sizeof *l);
        l->type = jl ? jl->type : JOB_LAYER_DENSE;
        l->ih = h;
        l->iw = w;
        l->ic = c;
        l->oh = h;
        l->ow = w;
        l->oc = c;
        l->src_h = src_h;
        l->src_w = src_w;
        l->src_c = src_c;
        int rc = 0;
        switch (l->type) {
        case JOB_LAYER_DENSE:
            if (h * w > 1 && jl)
                return err_set(err, -EINVAL,
                               "model.layers[%zu]: a dense layer cannot take the spatial shape "
                               "%d×%d×%d: add flatten or global_avgpool2d before it",
                               i, h, w, c);
            if (h * w > 1)
                return err_set(err, -EINVAL,
                               "the output layer cannot take the spatial shape %d×%d×%d: end "
                               "model.layers with flatten or global_avgpool2d",
                               h, w, c);
            l->oc = jl ? jl->units : outputs;
            l->job_act = jl ? jl->activation : JOB_ACT_LINEAR;
            l->use_bias = 1;
            break;
        case JOB_LAYER_DROPOUT:
            l->rate = (float)jl->rate;
            break;
        case JOB_LAYER_CONV2D:
            rc = window_plan(l, jl, i, err);
            l->oc = jl->filters;
            l->job_act = jl->activation;
            l->use_bias = jl->use_bias;
            break;
        case JOB_LAYER_MAXPOOL2D:
        case JOB_LAYER_AVGPOOL2D:
            rc = window_plan(l, jl, i, err);
            break;
        case JOB_LAYER_GLOBAL_AVGPOOL2D:
            l->kh = l->sh = h;
            l->kw = l->sw = w;
            l->oh = l->ow = 1;
            break;
        case JOB_LAYER_FLATTEN:
            l->oh = l->ow = 1;
            l->oc = h * w * c;
            break;
        case JOB_LAYER_BATCHNORM:
            l->bn_momentum = (float)jl->bn_momentum;
            l->bn_eps = (float)jl->bn_epsilon;
            break;
        default:
            return err_set(err, -EINVAL, "model.layers[%zu]: unknown layer type %d", i, l->type);
        }
        if (rc < 0)
            return rc;
        l->act = model_kern_act(l->job_act);
        l->in = l->ih * l->iw * l->ic;
        l->out = l->oh * l->ow * l->oc;
        h = l->oh;
        w = l->ow;
        c = l->oc;
        if (l->type == JOB_LAYER_FLATTEN) {
            src_h = l->ih;
            src_w = l->iw;
            src_c = l->ic;
        } else if (l->type != JOB_LAYER_DROPOUT && l->type != JOB_LAYER_BATCHNORM) {
            src_h = src_w = 1;
            src_c = l->oc;
        }
    }
    /* A conv straight before a max pool leaves its bias and activation to the pool, which applies
     * them to its 1/(kh·kw) as many outputs: max(act(z + b)) = act(max(z) + b) because float
     * addition and every activation are non-decreasing, so the outputs are the same, and so is
     * the gradient, which only reaches each window's maximum. */
    for (size_t i = 0; i + 1 < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        l->defer = l->type == JOB_LAYER_CONV2D && m->layers[i + 1].type == JOB_LAYER_MAXPOOL2D &&
                   (l->use_bias || l->job_act != JOB_ACT_LINEAR);
        const model_layer *p = &m->layers[i + 1];
        l->fuse_pool = l->type == JOB_LAYER_CONV2D && p->type == JOB_LAYER_MAXPOOL2D &&
                       p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->pt == 0 &&
                       p->pl == 0 && p->oh == l->oh / 2 && p->ow == l->ow / 2;
    }
    if (job->output_given && job->output_units != outputs)
        return err_set(err, -EINVAL,
                       "the model's output layer has %d units but the data has %d %s: make its "
                       "units %d",
                       job->output_units, outputs, outputs == 1 ? "output" : "classes", outputs);
    return 0;
}

/* Floats of weight and bias of a layer (0 for layers without). */
static void layer_param_sizes(model_layer *l)
{
    l->n_w = l->n_b = 0;
    if (l->type == JOB_LAYER_DENSE) {
        l->n_w = (size_t)l->in * (size_t)l->oc;
        l->n_b = (size_t)l->oc;
    } else if (l->type == JOB_LAYER_CONV2D) {
        l->n_w = (size_t)l->kh * (size_t)l->kw * (size_t)l->ic * (size_t)l->oc;
        l->n_b = l->use_bias ? (size_t)l->oc : 0;
    } else if (l->type == JOB_LAYER_BATCHNORM) {
        l->n_w = l->n_b = (size_t)l->oc;
    }
}

/* Lays the parameters and stats out, each tensor on align floats; sets n_params, n_weights,
 * n_stats. */
static void layers_layout(model *m, size_t align)
{
    size_t off = 0, soff = 0;
    m->n_weights = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        layer_param_sizes(l);
        if (l->n_w) {
            l->w_off = off;
            off = round_up(off + l->n_w, align);
        }
        if (l->n_b) {
            l->b_off = off;
            off = round_up(off + l->n_b, align);
        }
        m->n_weights += l->n_w + l->n_b;
        if (l->type == JOB_LAYER_BATCHNORM) {
            l->s_off = soff;
            l->v_off = round_up(soff + (size_t)l->oc, align);
            soff = round_up(l->v_off + (size_t)l->oc, align);
        }
    }
    m->n_params = off;
    m->n_stats = soff;
    m->first_param = 0;
    while (m->first_param + 1 < m->n_layers && !m->layers[m->first_param].n_w)
        m->first_param++;
}

static void conv_geom(const model_layer *l, int rows, kern_conv *g)
{
    *g = (kern_conv){.n = rows,
                     .h = l->ih,
                     .w = l->iw,
                     .c = l->ic,
                     .f = l->oc,
                     .kh = l->kh,
                     .kw = l->kw,
                     .sh = l->sh,
                     .sw = l->sw,
                     .pt = l->pt,
                     .pl = l->pl,
                     .oh = l->oh,
                     .ow = l->ow};
}

static void pool_geom(const model_layer *l, int rows, kern_pool *g)
{
    *g = (kern_pool){.n = rows,
                     .h = l->ih,
                     .w = l->iw,
                     .c = l->ic,
                     .kh = l->kh,
                     .kw = l->kw,
                     .sh = l->sh,
                     .sw = l->sw,
                     .pt = l->pt,
                     .pl = l->pl,
                     .oh = l->oh,
                     .ow = l->ow};
}

/* Device bytes of the buffers besides the four parameter-sized ones, for a planned model. */
typedef struct model_sizes {
    size_t widest;     /* floats per row of the widest activation (the gradient buffers) */
    size_t widest_c;   /* the most filters of a conv layer */
    size_t work;       /* conv workspace bytes */
    uint64_t per_rows; /* bytes per row of the batch: outputs, argmax, gradients, loss rows */
    uint64_t fixed;    /* the rest: batchnorm saves, zeros, totals */
} model_sizes;

static model_sizes model_sizes_of(const model *m, kern *k, int capacity)
{
    model_sizes z = {.widest = (size_t)m->inputs};
    for (size_t i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        if ((size_t)l->out > z.widest)
            z.widest = (size_t)l->out;
        if (l->type != JOB_LAYER_FLATTEN)
            z.per_rows += 4 * (uint64_t)l->out;
        if (l->type == JOB_LAYER_MAXPOOL2D)
            z.per_rows += 4 * (uint64_t)l->out;
        if (l->type == JOB_LAYER_BATCHNORM)
            z.fixed += 8 * (uint64_t)l->oc + 512;
        if (l->type == JOB_LAYER_CONV2D) {
            kern_conv g;
            conv_geom(l, capacity, &g);
            size_t ws = kern_conv_workspace(k, &g);
            if (ws > z.work)
                z.work = ws;
            if ((size_t)l->oc > z.widest_c)
                z.widest_c = (size_t)l->oc;
        }
    }
    z.per_rows += 4 * (2 * (uint64_t)z.widest + 2);
    z.fixed += 8 * (uint64_t)z.widest_c + 4 * MODEL_TOTALS + z.work;
    return z;
}

static uint64_t model_bytes(const model *m, kern *k, int capacity)
{
    model_sizes z = model_sizes_of(m, k, capacity);
    return 4 * (4 * (uint64_t)m->n_params + (uint64_t)m->n_stats) +
           (uint64_t)capacity * z.per_rows + z.fixed;
}

/* An inference model's: parameters and stats once, each layer's output, zeros and workspace. */
static uint64_t model_bytes_inference(const model *m, kern *k, int capacity)
{
    model_sizes z = model_sizes_of(m, k, capacity);
    uint64_t outs = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].type != JOB_LAYER_FLATTEN)
            outs += 4 * (uint64_t)m->layers[i].out;
    return 4 * ((uint64_t)m->n_params + (uint64_t)m->n_stats) + (uint64_t)capacity * outs +
           4 * (uint64_t)z.widest_c + z.work;
}

static uint64_t device_bytes(kern *k, const job_spec *job, int inputs, int outputs, int capacity,
                             int inference)
{
    model *plan = calloc(1, sizeof *plan);
    char err[ERR_LEN];
    uint64_t bytes = 0;
    if (!plan)
        return 0;
    plan->inputs = inputs;
    if (layers_plan(plan, job, inputs, outputs, err) == 0) {
        /* 256 bytes of alignment slack per tensor, as the device may want. */
        layers_layout(plan, 1);
        bytes = (inference ? model_bytes_inference(plan, k, capacity)
                           : model_bytes(plan, k, capacity)) +
                256 * 3 * (uint64_t)plan->n_layers;
    }
    free(plan);
    return bytes;
}

uint64_t model_device_bytes(kern *k, const job_spec *job, int inputs, int outputs, int capacity)
{
    return device_bytes(k, job, inputs, outputs, capacity, 0);
}

uint64_t model_device_bytes_inference(kern *k, const job_spec *job, int inputs, int outputs,
                                      int capacity)
{
    return device_bytes(k, job, inputs, outputs, capacity, 1);
}

int model_plan(const job_spec *job, int inputs, int outputs, int loss, model **out, char *err)
{
    if (inputs < 1 || outputs < 1)
        return err_set(err, -EINVAL, "a model needs at least one input and output");
    model *plan = calloc(1, sizeof *plan);
    if (!plan)
        return err_set(err, -ENOMEM, "out of memory");
    plan->inputs = inputs;
    plan->outputs = outputs;
    plan->loss = loss;
    int rc = layers_plan(plan, job, inputs, outputs, err);
    if (rc < 0) {
        free(plan);
        return rc;
    }
    layers_layout(plan, 1);
    *out = plan;
    return 0;
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
    rc = layers_plan(m, job, inputs, outputs, err);
    if (rc < 0)
        goto fail;
    for (size_t i = 0; i < m->n_layers; i++)
        m->layers[i].fuse_pool = m->layers[i].fuse_pool && kern_conv2d_fwd_maxpool_ok(k);
    /* Parameter layout: each tensor starts on the device's sub-buffer alignment. */
    size_t align = c->dev.base_align_bytes / sizeof(float);
    layers_layout(m, align < 1 ? 1 : align);

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
    int rc = layers_plan(m, job, inputs, outputs, err);
    if (rc < 0)
        goto fail;
    for (size_t i = 0; i < m->n_layers; i++)
        m->layers[i].fuse_pool = m->layers[i].fuse_pool && kern_conv2d_fwd_maxpool_ok(k);
    size_t align = c->dev.base_align_bytes / sizeof(float);
    layers_layout(m, align < 1 ? 1 : align);
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

static int kfail(model *m, char *err)
{
    err_set(err, -EIO, "%s", kern_last_error(m->k));
    return -EIO; /* a constant the compiler sees: callers' outputs are set whenever this is not */
}

/* The stream offset of a dropout layer for the current step: distinct per step and layer, laid
 * out for capacity rows, of which this step's start at row m->row0 (a data-parallel rank's
 * share of a batch draws the masks the whole batch would). */
static uint64_t dropout_offset(const model *m, size_t layer)
{
    uint64_t at = ((uint64_t)m->step * (JOB_MAX_LAYERS + 1) + layer) * (uint64_t)m->capacity;
    return (at + (uint64_t)m->row0) * (uint64_t)m->layers[layer].out;
}

static int bias_act_needed(const model_layer *l)
{
    return l->use_bias || l->act != KERN_ACT_LINEAR;
}

/* The conv layer whose bias and activation the max pool i applies (after pooling), or NULL. */
static const model_layer *deferred_from(const model *m, size_t i)
{
    return i > 0 && m->layers[i - 1].defer ? &m->layers[i - 1] : NULL;
}

/* Bias and activation of a conv layer over rows·h·w rows of y (conv->oc columns). */
static int conv_bias_act_fwd(model *m, const model_layer *conv, int rows, cl_mem y)
{
    return kern_bias_act_fwd(m->k, rows, conv->oc, conv->act, y,
                             conv->use_bias ? conv->b : m->zeros);
}

static int conv_bias_act_bwd(model *m, const model_layer *conv, int rows, cl_mem y, cl_mem dy)
{
    return kern_bias_act_bwd(m->k, rows, conv->oc, conv->act, y, dy,
                             conv->use_bias ? conv->gb : m->discard);
}

/* One layer's forward from x; *y is what it leaves for the next layer. */
static int layer_forward(model *m, size_t i, int rows, cl_mem x, int train, cl_mem *y)
{
    kern *k = m->k;
    model_layer *l = &m->layers[i];
    int rc = 0, spatial_rows = rows * l->oh * l->ow;
    *y = l->y;
    switch (l->type) {
    case JOB_LAYER_DENSE:
        rc = kern_gemm(k, 0, 0, rows, l->out, l->in, 1.0f, x, l->in, l->w, l->out, 0.0f, l->y,
                       l->out);
        if (rc == 0)
            rc = kern_bias_act_fwd(k, rows, l->out, l->act, l->y, l->b);
        break;
    case JOB_LAYER_CONV2D: {
        kern_conv g;
        conv_geom(l, rows, &g);
        if (l->fuse_pool) {
            /* the pool's output and argmax straight from the conv, with the bias and activation
             * the conv defers to the pool: the pool has nothing left to do */
            model_layer *p = &m->layers[i + 1];
            return kern_conv2d_fwd_maxpool_act(k, &g, x, l->w, p->y, train ? p->argmax : NULL,
                                               l->defer ? l->act : -1,
                                               l->use_bias ? l->b : m->zeros, m->work);
        }
        rc = kern_conv2d_fwd(k, &g, x, l->w, l->y, m->work);
        if (rc == 0 && bias_act_needed(l) && !l->defer)
            rc = conv_bias_act_fwd(m, l, spatial_rows, l->y);
        break;
    }
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
    case JOB_LAYER_GLOBAL_AVGPOOL2D: {
        kern_pool g;
        pool_geom(l, rows, &g);
        int max = l->type == JOB_LAYER_MAXPOOL2D;
        if (i > 0 && m->layers[i - 1].fuse_pool)
            break; /* the conv wrote y and argmax, and applied its bias and activation */
        rc = kern_pool2d_fwd(k, max ? KERN_POOL_MAX : KERN_POOL_AVG, &g, x, l->y,
                             max && train ? l->argmax : NULL);
        if (rc == 0 && deferred_from(m, i))
            rc = conv_bias_act_fwd(m, deferred_from(m, i), spatial_rows, l->y);
        break;
    }
    case JOB_LAYER_BATCHNORM:
        if (train)
            rc = kern_batchnorm_fwd_train(k, spatial_rows, l->oc, l->bn_momentum, l->bn_eps, x,
                                          l->w, l->b, l->mmean, l->mvar, l->save_mean,
                                          l->save_invstd, l->y);
        else
            rc = kern_batchnorm_fwd_infer(k, spatial_rows, l->oc, l->bn_eps, x, l->w, l->b,
                                          l->mmean, l->mvar, l->y);
        break;
    case JOB_LAYER_DROPOUT:
        if (train && l->rate > 0.0f)
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, i), x, l->y);
        else
            *y = x; /* dropout is the identity outside training */
        break;
    default:
        *y = x; /* flatten: NHWC rows already are (h, w, c)-ordered features */
        break;
    }
    return rc;
}

/* Forward over rows of x; train enables dropout and batch statistics. *out is the output
 * layer's buffer. */
static int forward(model *m, int rows, cl_mem x, int train, cl_mem *out, char *err)
{
    cl_mem cur = x;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        l->x_cur = cur;
        if (layer_forward(m, i, rows, cur, train, &cur) < 0)
            return kfail(m, err);
        l->y_cur = cur;
    }
    *out = cur;
    return 0;
}

/* Loss over rows: per-row loss and correct flags, gradient into dlogits when not NULL, sums
 * added to totals[loss_at] and totals[loss_at + 1]. */
/* The loss gradient is scaled by 1/of_rows: the mean over a batch of that many rows, of which
 * these rows are a share (of_rows = rows but in a data-parallel step). */
static int loss(model *m, int rows, int of_rows, cl_mem logits, cl_mem targets, cl_mem dlogits,
                int loss_at, char *err)
{
    kern *k = m->k;
    float scale = 1.0f / (float)of_rows;
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

/* Whether conv layer i takes its weight gradient straight from the max pool's dy and argmax
 * after it (kern_conv2d_bwd_weights_maxpool), so that the pool writes no conv-sized dx: the
 * forward was fused, and the conv is the first layer with parameters (it needs no dx of its
 * own, which would want the whole dy). */
static int bwd_through_pool(const model *m, size_t i)
{
    return m->layers[i].fuse_pool && i == m->first_param;
}

/* One layer's backward: dy (the gradient of its output) in, its parameters' gradients out, and
 * the gradient of its input into dx, or into dy itself (*moved 0) for the layers that work in
 * place. The first layer with parameters computes no input gradient: nobody reads it. */
static int layer_backward(model *m, size_t n, int rows, cl_mem dy, cl_mem dx, int *moved)
{
    kern *k = m->k;
    model_layer *l = &m->layers[n];
    int rc = 0, first = n == m->first_param, spatial_rows = rows * l->oh * l->ow;
    *moved = 0;
    switch (l->type) {
    case JOB_LAYER_DENSE:
        rc = kern_bias_act_bwd(k, rows, l->out, l->act, l->y, dy, l->gb);
        if (rc == 0)
            rc = kern_gemm(k, 1, 0, l->in, l->out, rows, 1.0f, l->x_cur, l->in, dy, l->out, 0.0f,
                           l->gw, l->out);
        if (rc == 0 && !first) {
            rc = kern_gemm(k, 0, 1, rows, l->in, l->out, 1.0f, dy, l->out, l->w, l->out, 0.0f, dx,
                           l->in);
            *moved = 1;
        }
        break;
    case JOB_LAYER_CONV2D: {
        kern_conv g;
        conv_geom(l, rows, &g);
        if (bias_act_needed(l) && !l->defer)
            rc = conv_bias_act_bwd(m, l, spatial_rows, l->y, dy);
        if (rc == 0 && bwd_through_pool(m, n))
            return kern_conv2d_bwd_weights_maxpool(k, &g, l->x_cur, dy, m->layers[n + 1].argmax,
                                                   l->gw, 0, m->work);
        if (rc == 0)
            rc = kern_conv2d_bwd_weights(k, &g, l->x_cur, dy, l->gw, 0, m->work);
        if (rc == 0 && !first) {
            rc = kern_conv2d_bwd_data(k, &g, dy, l->w, dx, m->work);
            *moved = 1;
        }
        break;
    }
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
    case JOB_LAYER_GLOBAL_AVGPOOL2D: {
        kern_pool g;
        pool_geom(l, rows, &g);
        int mode = l->type == JOB_LAYER_MAXPOOL2D ? KERN_POOL_MAX : KERN_POOL_AVG;
        if (deferred_from(m, n))
            rc = conv_bias_act_bwd(m, deferred_from(m, n), spatial_rows, l->y, dy);
        if (rc == 0 && !first && !(n > 0 && bwd_through_pool(m, n - 1))) {
            rc = kern_pool2d_bwd(k, mode, &g, dy, mode == KERN_POOL_MAX ? l->argmax : NULL, dx);
            *moved = 1;
        }
        break;
    }
    case JOB_LAYER_BATCHNORM:
        rc = kern_batchnorm_bwd(k, spatial_rows, l->oc, l->x_cur, dy, l->w, l->save_mean,
                                l->save_invstd, dy, l->gw, l->gb);
        break;
    case JOB_LAYER_DROPOUT:
        if (l->rate > 0.0f && !first)
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, n), dy, dy);
        break;
    default:
        break; /* flatten: the gradient is already in the input's layout */
    }
    return rc;
}

static int backward(model *m, int rows, char *err)
{
    int cur = 0; /* dbuf[cur] holds the gradient of the current layer's output */
    for (size_t n = m->n_layers; n-- > m->first_param;) {
        int moved = 0;
        if (layer_backward(m, n, rows, m->dbuf[cur], m->dbuf[1 - cur], &moved) < 0)
            return kfail(m, err);
        if (moved)
            cur = 1 - cur;
    }
    return 0;
}

int model_update(model *m, char *err)
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

/* Training, evaluation and the state functions need what an inference model lacks. */
static int check_training(const model *m, char *err)
{
    if (m->inference)
        return err_set(err, -EINVAL, "an inference model can only run forwards");
    return 0;
}

static int check_rows(const model *m, int rows, char *err)
{
    if (rows < 1 || rows > m->capacity)
        return err_set(err, -EINVAL, "%d rows do not fit the model's batches (1..%d)", rows,
                       m->capacity);
    return 0;
}

int model_backprop_share(model *m, int rows, int of_rows, int row0, cl_mem x, cl_mem targets,
                         char *err)
{
    cl_mem logits;
    int rc = check_training(m, err);
    if (rc == 0)
        rc = check_rows(m, rows, err);
    if (rc == 0 && (row0 < 0 || of_rows < rows || row0 > of_rows - rows || of_rows > m->capacity))
        rc = err_set(err, -EINVAL, "rows %d..%d are not a share of a batch of %d (capacity %d)",
                     row0, row0 + rows, of_rows, m->capacity);
    if (rc < 0)
        return rc;
    m->row0 = row0;
    rc = forward(m, rows, x, 1, &logits, err);
    /* The loss gradient goes straight into the first ping-pong buffer that backward reads. */
    if (rc == 0)
        rc = loss(m, rows, of_rows, logits, targets, m->dbuf[0], MODEL_TRAIN_LOSS, err);
    if (rc == 0)
        rc = backward(m, rows, err);
    m->row0 = 0;
    return rc;
}

int model_backprop(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    return model_backprop_share(m, rows, rows, 0, x, targets, err);
}

int model_train_step(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    int rc = model_backprop(m, rows, x, targets, err);
    if (rc == 0)
        rc = model_update(m, err);
    return rc;
}

int model_evaluate(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    cl_mem logits;
    int rc = check_training(m, err);
    if (rc == 0)
        rc = check_rows(m, rows, err);
    if (rc < 0)
        return rc;
    rc = forward(m, rows, x, 0, &logits, err);
    if (rc < 0)
        return rc;
    return loss(m, rows, rows, logits, targets, NULL, MODEL_VAL_LOSS, err);
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
    if (check_training(m, err) < 0)
        return -EINVAL;
    float host[MODEL_TOTALS];
    int rc = ocl_read(m->c, m->totals, 0, sizeof host, host, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < MODEL_TOTALS; i++)
        t[i] = m->fresh[i] ? 0.0 : host[i]; /* nothing summed into it since the reset */
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
    if (check_training(m, err) < 0)
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
    if (check_training(m, err) < 0)
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
