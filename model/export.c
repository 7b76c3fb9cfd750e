/* export: the model's tensors and module list in PyTorch's nn.Sequential terms (see export.h).
 *
 * One walk over the layers keeps the module index, whether the tensor flowing there is 4-D
 * (images: NCHW in PyTorch) or 2-D, and, for 2-D features that came out of a flatten, the
 * spatial shape they came from, which fixes the permutation from our (h, w, c) feature order to
 * PyTorch's (c, h, w). Each layer appends its modules to the Sequential's text, its tensors to
 * the set and its entry to the config. */
#include "model/export.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/dynbuf.h"
#include "util/err.h"
#include "util/json_out.h"

#define EXPORT_TORCH_MAX (1 << 20)

typedef struct walk {
    export_set *e;
    const model *m;
    const float *params, *stats;
    dynbuf torch;
    int module;  /* index of the next module */
    int four_d;  /* the tensor here is [N, C, H, W] in PyTorch */
    size_t used; /* floats of e->data handed out */
    int failed;  /* -ENOMEM once something could not be added */
} walk;

static void module_add(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void module_add(walk *w, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (dynbuf_adds(&w->torch, w->module ? ", nn." : "nn.Sequential(nn.") < 0 ||
        dynbuf_adds(&w->torch, text) < 0)
        w->failed = -ENOMEM;
    w->module++;
}

/* The activation module after a dense or conv layer, if any. */
static void activation_add(walk *w, int job_act)
{
    if (job_act == JOB_ACT_RELU)
        module_add(w, "ReLU()");
    else if (job_act == JOB_ACT_TANH)
        module_add(w, "Tanh()");
    else if (job_act == JOB_ACT_SIGMOID)
        module_add(w, "Sigmoid()");
}

/* A new F32 tensor of the current module named <module>.<what>; its floats are returned. */
static float *tensor_add(walk *w, const char *what, int ndim, const int64_t *shape)
{
    export_set *e = w->e;
    safetensors_tensor *t = &e->tensors[e->n];
    snprintf(e->names[e->n], sizeof e->names[e->n], "%d.%s", w->module, what);
    *t = (safetensors_tensor){.name = e->names[e->n], .ndim = ndim, .data = e->data + w->used};
    size_t count = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        count *= (size_t)shape[d];
    }
    e->n++;
    float *out = e->data + w->used;
    w->used += count;
    return out;
}

/* Our flat feature index of PyTorch's feature t, for features flattened from h×w×c. */
static size_t feature_ours(const model_layer *l, size_t t)
{
    size_t hw = (size_t)l->src_h * (size_t)l->src_w;
    size_t ch = t / hw, cell = t % hw;
    return cell * (size_t)l->src_c + ch;
}

static void dense_add(walk *w, const model_layer *l, json_t *entry)
{
    if (w->four_d) {
        module_add(w, "Flatten()");
        w->four_d = 0;
    }
    int64_t shape[2] = {l->oc, l->in};
    char wname[32], bname[32];
    snprintf(wname, sizeof wname, "%d.weight", w->module);
    snprintf(bname, sizeof bname, "%d.bias", w->module);
    float *wt = tensor_add(w, "weight", 2, shape);
    float *bt = tensor_add(w, "bias", 1, shape);
    const float *W = w->params + l->w_off;
    for (size_t o = 0; o < (size_t)l->oc; o++)
        for (size_t t = 0; t < (size_t)l->in; t++)
            wt[o * (size_t)l->in + t] = W[feature_ours(l, t) * (size_t)l->oc + o];
    memcpy(bt, w->params + l->b_off, (size_t)l->oc * sizeof *bt);
    module_add(w, "Linear(%d, %d)", l->in, l->oc);
    json_object_set_new(entry, "in", json_integer(l->in));
    json_object_set_new(entry, "out", json_integer(l->oc));
    json_object_set_new(entry, "activation", json_string(job_activation_name(l->job_act)));
    json_object_set_new(entry, "weight", json_string(wname));
    json_object_set_new(entry, "bias", json_string(bname));
    activation_add(w, l->job_act);
}

static int asymmetric(const model_layer *l)
{
    return l->pt != l->pb || l->pl != l->pr;
}

/* The padding module of an asymmetric window, with fill "0" or "float('-inf')". */
static void pad_add(walk *w, const model_layer *l, const char *fill)
{
    if (strcmp(fill, "0") == 0)
        module_add(w, "ZeroPad2d((%d, %d, %d, %d))", l->pl, l->pr, l->pt, l->pb);
    else
        module_add(w, "ConstantPad2d((%d, %d, %d, %d), %s)", l->pl, l->pr, l->pt, l->pb, fill);
}

static void conv_add(walk *w, const model_layer *l, json_t *entry)
{
    int pad_t = l->pt, pad_l = l->pl;
    if (asymmetric(l)) {
        pad_add(w, l, "0");
        pad_t = pad_l = 0;
    }
    int64_t shape[4] = {l->oc, l->ic, l->kh, l->kw};
    char wname[32], bname[32];
    snprintf(wname, sizeof wname, "%d.weight", w->module);
    snprintf(bname, sizeof bname, "%d.bias", w->module);
    float *wt = tensor_add(w, "weight", 4, shape);
    const float *W = w->params + l->w_off; /* [kh][kw][c][f] */
    size_t kh = (size_t)l->kh, kw = (size_t)l->kw, c = (size_t)l->ic, f = (size_t)l->oc;
    for (size_t o = 0; o < f; o++)
        for (size_t ci = 0; ci < c; ci++)
            for (size_t i = 0; i < kh; i++)
                for (size_t j = 0; j < kw; j++)
                    wt[((o * c + ci) * kh + i) * kw + j] = W[((i * kw + j) * c + ci) * f + o];
    if (l->use_bias)
        memcpy(tensor_add(w, "bias", 1, shape), w->params + l->b_off, f * sizeof(float));
    module_add(w, "Conv2d(%d, %d, kernel_size=(%d, %d), stride=(%d, %d), padding=(%d, %d)%s)",
               l->ic, l->oc, l->kh, l->kw, l->sh, l->sw, pad_t, pad_l,
               l->use_bias ? "" : ", bias=False");
    json_object_set_new(entry, "filters", json_integer(l->oc));
    json_object_set_new(entry, "activation", json_string(job_activation_name(l->job_act)));
    json_object_set_new(entry, "weight", json_string(wname));
    json_object_set_new(entry, "bias", l->use_bias ? json_string(bname) : json_null());
    activation_add(w, l->job_act);
}

static void pool_add(walk *w, const model_layer *l)
{
    int max = l->type == JOB_LAYER_MAXPOOL2D;
    int pad_t = l->pt, pad_l = l->pl;
    if (asymmetric(l)) {
        pad_add(w, l, max ? "float('-inf')" : "0");
        pad_t = pad_l = 0;
    }
    if (max)
        module_add(w, "MaxPool2d(kernel_size=(%d, %d), stride=(%d, %d), padding=(%d, %d))", l->kh,
                   l->kw, l->sh, l->sw, pad_t, pad_l);
    else
        module_add(w,
                   "AvgPool2d(kernel_size=(%d, %d), stride=(%d, %d), padding=(%d, %d), "
                   "count_include_pad=False)",
                   l->kh, l->kw, l->sh, l->sw, pad_t, pad_l);
}

static void batchnorm_add(walk *w, const model_layer *l, json_t *entry)
{
    export_set *e = w->e;
    int64_t shape[1] = {l->oc};
    size_t c = (size_t)l->oc;
    const float *src[4] = {w->params + l->w_off, w->params + l->b_off, w->stats + l->s_off,
                           w->stats + l->v_off};
    const char *what[4] = {"weight", "bias", "running_mean", "running_var"};
    /* Features after a flatten are permuted like a dense layer's input columns. */
    for (int i = 0; i < 4; i++) {
        float *t = tensor_add(w, what[i], 1, shape);
        for (size_t j = 0; j < c; j++)
            t[j] = w->four_d ? src[i][j] : src[i][feature_ours(l, j)];
    }
    safetensors_tensor *t = &e->tensors[e->n];
    snprintf(e->names[e->n], sizeof e->names[e->n], "%d.num_batches_tracked", w->module);
    *t = (safetensors_tensor){
        .name = e->names[e->n], .ndim = 0, .dtype = SAFETENSORS_I64, .data_i64 = &e->batches};
    e->n++;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%d", w->module);
    /* PyTorch's momentum is 1 − ours, taken from our momentum as written (0.99 → 0.01). */
    char eps[JSON_OUT_REAL_MAX], ours[JSON_OUT_REAL_MAX], theirs[JSON_OUT_REAL_MAX];
    json_out_float_text(l->bn_momentum, ours);
    json_out_float_text((float)(1.0 - strtod(ours, NULL)), theirs);
    json_out_float_text(l->bn_eps, eps);
    module_add(w, "BatchNorm%dd(%d, eps=%s, momentum=%s)", w->four_d ? 2 : 1, l->oc, eps, theirs);
    json_object_set_new(entry, "momentum", json_real(json_out_float(l->bn_momentum)));
    json_object_set_new(entry, "epsilon", json_real(json_out_float(l->bn_eps)));
    json_object_set_new(entry, "module", json_string(prefix));
}

static json_t *shape_json(int h, int w, int c)
{
    return json_pack("[i, i, i]", h, w, c);
}

/* The layer's modules, tensors and config entry. */
static void layer_add(walk *w, const model_layer *l, json_t *layers)
{
    json_t *entry = json_object();
    if (l->type == JOB_LAYER_DENSE) {
        json_object_set_new(entry, "type", json_string("dense"));
        dense_add(w, l, entry);
    } else if (l->type == JOB_LAYER_DROPOUT) {
        json_object_set_new(entry, "type", json_string("dropout"));
        json_object_set_new(entry, "rate", json_real(json_out_float(l->rate)));
        char p[JSON_OUT_REAL_MAX];
        json_out_float_text(l->rate, p);
        module_add(w, "Dropout(p=%s)", p);
    } else {
        static const char *const names[] = {
            [JOB_LAYER_CONV2D] = "conv2d",       [JOB_LAYER_MAXPOOL2D] = "maxpool2d",
            [JOB_LAYER_AVGPOOL2D] = "avgpool2d", [JOB_LAYER_GLOBAL_AVGPOOL2D] = "global_avgpool2d",
            [JOB_LAYER_FLATTEN] = "flatten",     [JOB_LAYER_BATCHNORM] = "batchnorm"};
        json_object_set_new(entry, "type", json_string(names[l->type]));
        json_object_set_new(entry, "input_shape", shape_json(l->ih, l->iw, l->ic));
        json_object_set_new(entry, "output_shape", shape_json(l->oh, l->ow, l->oc));
        if (l->type == JOB_LAYER_CONV2D || l->type == JOB_LAYER_MAXPOOL2D ||
            l->type == JOB_LAYER_AVGPOOL2D) {
            json_object_set_new(entry, "kernel_size", json_pack("[i, i]", l->kh, l->kw));
            json_object_set_new(entry, "strides", json_pack("[i, i]", l->sh, l->sw));
            json_object_set_new(entry, "padding", json_string(l->same ? "same" : "valid"));
        }
        if (l->type == JOB_LAYER_CONV2D) {
            conv_add(w, l, entry);
        } else if (l->type == JOB_LAYER_MAXPOOL2D || l->type == JOB_LAYER_AVGPOOL2D) {
            pool_add(w, l);
        } else if (l->type == JOB_LAYER_GLOBAL_AVGPOOL2D) {
            module_add(w, "AdaptiveAvgPool2d(1)");
            module_add(w, "Flatten()");
            w->four_d = 0;
        } else if (l->type == JOB_LAYER_FLATTEN) {
            module_add(w, "Flatten()");
            w->four_d = 0;
        } else {
            batchnorm_add(w, l, entry);
        }
    }
    if (json_array_append_new(layers, entry) < 0)
        w->failed = -ENOMEM;
}

static const char *output_module(int loss)
{
    return loss == MODEL_LOSS_SOFTMAX_XENT ? "Softmax(dim=1)"
           : loss == MODEL_LOSS_BCE        ? "Sigmoid()"
                                           : NULL;
}

int export_build(const model *m, const float *params, const float *stats, export_set **out,
                 char *err)
{
    export_set *e = calloc(1, sizeof *e);
    json_t *layers = json_array();
    size_t floats = m->n_weights + 2 * m->n_stats + 1;
    walk w = {.e = e, .m = m, .params = params, .stats = stats, .four_d = m->image_input};
    dynbuf_init(&w.torch, EXPORT_TORCH_MAX);
    int rc = 0;
    if (!e || !layers || !(e->data = malloc(floats * sizeof(float)))) {
        rc = err_set(err, -ENOMEM, "out of memory exporting the model");
        goto out;
    }
    e->batches = m->step;
    /* I64 tensors first, so that every tensor's data is aligned to its element size. */
    for (size_t i = 0; i < m->n_layers; i++)
        layer_add(&w, &m->layers[i], layers);
    const char *last = output_module(m->loss);
    if (last)
        module_add(&w, "%s", last);
    if (dynbuf_adds(&w.torch, ")") < 0)
        w.failed = -ENOMEM;
    const char *output = m->loss == MODEL_LOSS_SOFTMAX_XENT ? "softmax"
                         : m->loss == MODEL_LOSS_BCE        ? "sigmoid"
                                                            : "linear";
    const char *loss = m->loss == MODEL_LOSS_SOFTMAX_XENT ? "sparse_categorical_crossentropy"
                       : m->loss == MODEL_LOSS_BCE        ? "binary_crossentropy"
                                                          : "mse";
    e->config = json_pack("{s:i, s:i, s:O, s:s, s:s}", "inputs", m->inputs, "outputs", m->outputs,
                          "layers", layers, "output", output, "loss", loss);
    if (e->config && m->image_input)
        json_object_set_new(e->config, "input_shape", shape_json(m->in_h, m->in_w, m->in_c));
    e->torch = dynbuf_take(&w.torch, NULL);
    if (w.failed || !e->config || !e->torch) {
        rc = err_set(err, -ENOMEM, "out of memory exporting the model");
        goto out;
    }
    /* Move the I64 tensors to the front (stable for the rest). */
    safetensors_tensor sorted[EXPORT_MAX_TENSORS];
    size_t ns = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < e->n; i++)
            if ((e->tensors[i].dtype == SAFETENSORS_I64) == (pass == 0))
                sorted[ns++] = e->tensors[i];
    memcpy(e->tensors, sorted, ns * sizeof *sorted);
out:
    json_decref(layers);
    dynbuf_free(&w.torch);
    if (rc < 0) {
        export_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void export_free(export_set *e)
{
    if (!e)
        return;
    free(e->data);
    json_decref(e->config);
    free(e->torch);
    free(e);
}
