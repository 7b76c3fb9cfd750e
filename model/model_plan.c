/* model_plan: the model on the host alone: each layer's shapes from the job (Keras's padding
 * rules, the conv/max-pool fusions), the packed layout of the parameter and stats buffers, and
 * the device bytes a model of a given capacity needs. No buffer is made here: model.c builds
 * the device side on what these functions plan, model_plan() hands the plan to readers of a
 * trained model (predict/), and model_device_bytes() answers the memory check before a run.
 *
 * Invariants: every layer's input shape is the previous layer's output shape (the first takes
 * the job's input shape, or 1×1×inputs); the output layer is flat; a tensor's offset in params
 * or stats is a multiple of the alignment given to model_layers_layout(). */
#include "model/model_priv.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

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
int model_layers_plan(model *m, const job_spec *job, int inputs, int outputs, char *err)
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
void model_layers_layout(model *m, size_t align)
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

void model_conv_geom(const model_layer *l, int rows, kern_conv *g)
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

void model_pool_geom(const model_layer *l, int rows, kern_pool *g)
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

model_sizes model_sizes_of(const model *m, kern *k, int capacity)
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
            model_conv_geom(l, capacity, &g);
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

uint64_t model_bytes(const model *m, kern *k, int capacity)
{
    model_sizes z = model_sizes_of(m, k, capacity);
    return 4 * (4 * (uint64_t)m->n_params + (uint64_t)m->n_stats) +
           (uint64_t)capacity * z.per_rows + z.fixed;
}

/* An inference model's: parameters and stats once, each layer's output, zeros and workspace. */
uint64_t model_bytes_inference(const model *m, kern *k, int capacity)
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
    if (model_layers_plan(plan, job, inputs, outputs, err) == 0) {
        /* 256 bytes of alignment slack per tensor, as the device may want. */
        model_layers_layout(plan, 1);
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
    int rc = model_layers_plan(plan, job, inputs, outputs, err);
    if (rc < 0) {
        free(plan);
        return rc;
    }
    model_layers_layout(plan, 1);
    *out = plan;
    return 0;
}
