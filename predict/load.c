/* load: a trainyard model.safetensors → a predict_model (host side), and its upload to a device.
 *
 * The file is the trainer's (train/trainer_outputs.c, trainer_write_model): tensors in
 * PyTorch's layouts (model/export.h) and metadata trainyard.job (the resolved job: it fixes the
 * layers), trainyard.model (per layer the tensor names), trainyard.classes, .features, .label,
 * .standardization and .input (images: the pixel scale; absent in older files: 1/255).
 *
 * Reading is the inverse of export.c, done on the caller's thread with no device:
 * model_plan() gives the layers and a packed parameter layout; each layer's tensors are checked
 * against its shapes and written there in our layouts: dense torch [out, in] → in × out with
 * the flatten permutation undone (torch's (c, h, w) columns back to our (h, w, c) order), conv
 * [f, c, kh, kw] → [kh][kw][c][f], batchnorm weight/bias → gamma/beta in params and
 * running_mean/running_var → the stats (permuted like dense columns after a flatten). The
 * upload (engine thread) builds the model with model_new_inference (no gradients or optimizer
 * state) and copies each tensor from the packed
 * layout to the device layout's offsets (which pad for alignment). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "predict/predict_priv.h"
#include "util/err.h"
#include "model/safetensors.h"

#define LOAD_MAX_NAMES (1 << 24) /* classes or features a model may name (a wide CSV) */

static void strings_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* A JSON array of strings (metadata text) → a malloc'd array of copies. */
static int strings_read(const char *text, const char *what, char ***out, size_t *n, char *err)
{
    json_t *a = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    int rc = 0;
    char **v = NULL;
    size_t len = json_array_size(a);
    if (!json_is_array(a) || len > LOAD_MAX_NAMES) {
        rc = err_set(err, -EINVAL, "the model's %s metadata is missing or not a list of names",
                     what);
        goto out;
    }
    v = calloc(len + 1, sizeof *v);
    if (!v) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s) {
            rc = err_set(err, -EINVAL, "the model's %s metadata holds a non-string", what);
            goto out;
        }
        v[i] = strdup(s);
        if (!v[i]) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    *out = v;
    *n = len;
    v = NULL;
out:
    strings_free(v, len);
    json_decref(a);
    return rc;
}

/* A JSON array of n numbers → floats. */
static int floats_read(const json_t *a, size_t n, float *out)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_number(v))
            return -EINVAL;
        out[i] = (float)json_number_value(v);
    }
    return 0;
}

/* trainyard.standardization: null, or {mean, std} of n floats each. */
static int standardization_read(predict_model *m, const char *text, size_t n, char *err)
{
    json_t *s = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    int rc = 0;
    if (!s || json_is_null(s))
        goto out; /* absent or null: the job did not standardise */
    m->mean = malloc((n + 1) * sizeof *m->mean);
    m->std = malloc((n + 1) * sizeof *m->std);
    if (!m->mean || !m->std) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (floats_read(json_object_get(s, "mean"), n, m->mean) < 0 ||
        floats_read(json_object_get(s, "std"), n, m->std) < 0) {
        rc = err_set(err, -EINVAL,
                     "the model's standardization metadata does not hold %zu means "
                     "and standard deviations",
                     n);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (!(m->std[i] != 0.0f) || !isfinite(m->std[i]) || !isfinite(m->mean[i])) {
            rc = err_set(err, -EINVAL, "the model's standardization metadata is not usable");
            goto out;
        }
out:
    json_decref(s);
    return rc;
}

/* trainyard.input's pixel_scale; 1/255 when absent (files from before it existed). */
static float pixel_scale_read(const char *text)
{
    json_t *in = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    const json_t *v = json_object_get(in, "pixel_scale");
    float scale = json_is_number(v) ? (float)json_number_value(v) : 1.0f / 255.0f;
    json_decref(in);
    return scale;
}

/* The tensor named by entry[field] with the given shape, or an error naming the problem. */
static int tensor_get(const safetensors_file *f, const json_t *entry, const char *field,
                      const char *name_given, int ndim, const int64_t *shape,
                      const safetensors_tensor **out, char *err)
{
    const char *name = name_given ? name_given : json_string_value(json_object_get(entry, field));
    const safetensors_tensor *t = name ? safetensors_find(f, name) : NULL;
    if (!t)
        return err_set(err, -EINVAL, "the model file lacks the tensor %s", name ? name : field);
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = t->shape[d] == shape[d];
    if (!ok)
        return err_set(err, -EINVAL,
                       "the model file's tensor %s does not have the shape the job's "
                       "layers give it",
                       name);
    *out = t;
    return 0;
}

/* Our flat feature index of PyTorch's feature t (export.c's feature_ours). */
static size_t feature_ours(const model_layer *l, size_t t)
{
    size_t hw = (size_t)l->src_h * (size_t)l->src_w;
    size_t ch = t / hw, cell = t % hw;
    return cell * (size_t)l->src_c + ch;
}

static int dense_read(predict_model *m, const model_layer *l, const safetensors_file *f,
                      const json_t *entry, char *err)
{
    const safetensors_tensor *w, *b;
    int64_t shape[2] = {l->oc, l->in};
    int rc = tensor_get(f, entry, "weight", NULL, 2, shape, &w, err);
    if (rc == 0)
        rc = tensor_get(f, entry, "bias", NULL, 1, shape, &b, err);
    if (rc < 0)
        return rc;
    float *W = m->params + l->w_off;
    for (size_t o = 0; o < (size_t)l->oc; o++)
        for (size_t t = 0; t < (size_t)l->in; t++)
            W[feature_ours(l, t) * (size_t)l->oc + o] = w->data[o * (size_t)l->in + t];
    memcpy(m->params + l->b_off, b->data, (size_t)l->oc * sizeof(float));
    return 0;
}

static int conv_read(predict_model *m, const model_layer *l, const safetensors_file *f,
                     const json_t *entry, char *err)
{
    const safetensors_tensor *w, *b = NULL;
    int64_t shape[4] = {l->oc, l->ic, l->kh, l->kw};
    int rc = tensor_get(f, entry, "weight", NULL, 4, shape, &w, err);
    if (rc == 0 && l->use_bias)
        rc = tensor_get(f, entry, "bias", NULL, 1, shape, &b, err);
    if (rc < 0)
        return rc;
    size_t kh = (size_t)l->kh, kw = (size_t)l->kw, c = (size_t)l->ic, fl = (size_t)l->oc;
    float *W = m->params + l->w_off; /* [kh][kw][c][f] */
    for (size_t o = 0; o < fl; o++)
        for (size_t ci = 0; ci < c; ci++)
            for (size_t i = 0; i < kh; i++)
                for (size_t j = 0; j < kw; j++)
                    W[((i * kw + j) * c + ci) * fl + o] = w->data[((o * c + ci) * kh + i) * kw + j];
    if (b)
        memcpy(m->params + l->b_off, b->data, fl * sizeof(float));
    return 0;
}

static int batchnorm_read(predict_model *m, const model_layer *l, int four_d,
                          const safetensors_file *f, const json_t *entry, char *err)
{
    const char *module = json_string_value(json_object_get(entry, "module"));
    if (!module)
        return err_set(err, -EINVAL, "the model's metadata names no module for a batchnorm layer");
    static const char *const what[4] = {"weight", "bias", "running_mean", "running_var"};
    float *dst[4] = {m->params + l->w_off, m->params + l->b_off, m->stats + l->s_off,
                     m->stats + l->v_off};
    int64_t shape[1] = {l->oc};
    for (int i = 0; i < 4; i++) {
        char name[64];
        const safetensors_tensor *t = NULL;
        snprintf(name, sizeof name, "%s.%s", module, what[i]);
        int rc = tensor_get(f, entry, NULL, name, 1, shape, &t, err);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < (size_t)l->oc; j++)
            dst[i][four_d ? j : feature_ours(l, j)] = t->data[j];
    }
    return 0;
}

/* Every layer's tensors into m->params and m->stats (the plan's packed layout). */
static int tensors_read(predict_model *m, const safetensors_file *f, const json_t *config,
                        char *err)
{
    const model *p = m->plan;
    const json_t *layers = json_object_get(config, "layers");
    if (json_array_size(layers) != p->n_layers)
        return err_set(err, -EINVAL, "the model's metadata lists %zu layers where its job has %zu",
                       json_array_size(layers), p->n_layers);
    m->params = calloc(p->n_params + 1, sizeof *m->params);
    m->stats = calloc(p->n_stats + 1, sizeof *m->stats);
    if (!m->params || !m->stats)
        return err_set(err, -ENOMEM, "out of memory for %zu parameters", p->n_params);
    int four_d = p->image_input, rc = 0;
    for (size_t i = 0; i < p->n_layers && rc == 0; i++) {
        const model_layer *l = &p->layers[i];
        const json_t *entry = json_array_get(layers, i);
        if (l->type == JOB_LAYER_DENSE) {
            rc = dense_read(m, l, f, entry, err);
            four_d = 0;
        } else if (l->type == JOB_LAYER_CONV2D) {
            rc = conv_read(m, l, f, entry, err);
        } else if (l->type == JOB_LAYER_BATCHNORM) {
            rc = batchnorm_read(m, l, four_d, f, entry, err);
        } else if (l->type == JOB_LAYER_FLATTEN || l->type == JOB_LAYER_GLOBAL_AVGPOOL2D) {
            four_d = 0;
        }
    }
    return rc;
}

/* The job, task and shapes: info's model half. */
static int job_read(predict_model *m, const safetensors_file *f, char *err)
{
    const char *text = safetensors_meta_get(f, "trainyard.job");
    if (!text)
        return err_set(err, -ENOTSUP,
                       "the model file has no trainyard.job metadata: trainyard did "
                       "not train it (a script job's model cannot be served)");
    field_errors errs = {0};
    if (job_parse(text, strlen(text), &m->job, &errs) < 0)
        return err_set(err, -EINVAL, "the model's trainyard.job metadata is not a valid job: %s",
                       errs.count ? errs.items[0].message : "unreadable");
    if (job_is_script(m->job))
        return err_set(err, -ENOTSUP, "the model comes from a script job, which cannot be served");
    m->job_text = strdup(text);
    if (!m->job_text)
        return err_set(err, -ENOMEM, "out of memory");
    return 0;
}

/* The metadata besides the tensors: classes, features, label, standardisation, input. */
static int info_read(predict_model *m, const safetensors_file *f, char *err)
{
    predict_info *in = &m->info;
    const job_spec *job = m->job;
    int rc = strings_read(safetensors_meta_get(f, "trainyard.classes"), "trainyard.classes",
                          &m->classes, &m->n_class_names, err);
    if (rc == 0)
        rc = strings_read(safetensors_meta_get(f, "trainyard.features"), "trainyard.features",
                          &m->features, &m->n_feature_names, err);
    size_t n_classes = m->n_class_names, n_features = m->n_feature_names;
    const char *label = safetensors_meta_get(f, "trainyard.label");
    if (rc == 0 && !(m->label = strdup(label ? label : "label")))
        rc = err_set(err, -ENOMEM, "out of memory");
    if (rc < 0)
        return rc;
    in->image = job->in_h > 0;
    in->in_h = in->image ? job->in_h : 1;
    in->in_w = in->image ? job->in_w : 1;
    in->in_c = in->image ? job->in_c : (int)n_features;
    if (!in->image && (n_features < 1 || n_features > INT32_MAX / 2))
        return err_set(err, -EINVAL, "the model's trainyard.features metadata names no features");
    in->inputs = in->in_h * in->in_w * in->in_c;
    if (job->task == JOB_TASK_REGRESSION) {
        in->task = PREDICT_REGRESS;
        m->loss = MODEL_LOSS_MSE;
        in->outputs = 1;
    } else {
        if (n_classes < 2 || (job->binary && n_classes != 2))
            return err_set(err, -EINVAL, "the model's trainyard.classes metadata lists %zu classes",
                           n_classes);
        in->task = job->binary ? PREDICT_BINARY : PREDICT_CLASSIFY;
        m->loss = job->binary ? MODEL_LOSS_BCE : MODEL_LOSS_SOFTMAX_XENT;
        in->outputs = job->binary ? 1 : (int)n_classes;
        in->n_classes = n_classes;
    }
    in->classes = (const char *const *)m->classes;
    in->n_features = in->image ? 0 : n_features;
    in->features = (const char *const *)m->features;
    in->label = m->label;
    in->pixel_scale = in->image ? pixel_scale_read(safetensors_meta_get(f, "trainyard.input")) : 1;
    rc = standardization_read(m, safetensors_meta_get(f, "trainyard.standardization"),
                              (size_t)in->in_c, err);
    in->mean = m->mean;
    in->std = m->std;
    in->job = m->job_text;
    return rc;
}

int predict_model_read(const char *key, const char *path, predict_model **out, char *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(err, errno == ENOENT ? -ENOENT : -errno, "cannot read %s: %s", path,
                       strerror(errno));
    safetensors_file *f = NULL;
    json_t *config = NULL;
    predict_model *m = calloc(1, sizeof *m);
    int rc = m ? 0 : err_set(err, -ENOMEM, "out of memory");
    if (rc == 0 && !(m->key = strdup(key)))
        rc = err_set(err, -ENOMEM, "out of memory");
    if (rc == 0)
        rc = safetensors_open(path, &f, err); /* -EINVAL when damaged, else the I/O error */
    if (rc == 0)
        rc = job_read(m, f, err);
    if (rc == 0)
        rc = info_read(m, f, err);
    if (rc < 0)
        goto out;
    rc = model_plan(m->job, m->info.inputs, m->info.outputs, m->loss, &m->plan, err);
    if (rc < 0 && rc != -ENOMEM) {
        char why[ERR_LEN];
        snprintf(why, sizeof why, "%s", err);
        rc = err_set(err, -EINVAL, "the model's job does not fit its metadata: %s", why);
    }
    if (rc < 0)
        goto out;
    const char *ctext = safetensors_meta_get(f, "trainyard.model");
    config = ctext ? json_loads(ctext, 0, NULL) : NULL;
    if (!config) {
        rc = err_set(err, -EINVAL, "the model file has no readable trainyard.model metadata");
        goto out;
    }
    rc = tensors_read(m, f, config, err);
out:
    json_decref(config);
    safetensors_close(f);
    if (rc < 0) {
        predict_model_destroy(m);
        return rc;
    }
    atomic_init(&m->refs, 1);
    *out = m;
    return 0;
}

void predict_model_destroy(predict_model *m)
{
    if (!m)
        return;
    free(m->key);
    strings_free(m->classes, m->n_class_names);
    strings_free(m->features, m->n_feature_names);
    free(m->label);
    free(m->job_text);
    free(m->mean);
    free(m->std);
    job_free(m->job);
    free(m->plan);
    free(m->params);
    free(m->stats);
    free(m);
}

/* Copies n floats of each tensor from the plan's offsets to the device model's. */
static void relayout(const model *from, const model *to, const float *src, const float *src_stats,
                     float *dst, float *dst_stats)
{
    for (size_t i = 0; i < from->n_layers; i++) {
        const model_layer *a = &from->layers[i], *b = &to->layers[i];
        if (a->n_w)
            memcpy(dst + b->w_off, src + a->w_off, a->n_w * sizeof *dst);
        if (a->n_b)
            memcpy(dst + b->b_off, src + a->b_off, a->n_b * sizeof *dst);
        if (a->type == JOB_LAYER_BATCHNORM) {
            memcpy(dst_stats + b->s_off, src_stats + a->s_off, (size_t)a->oc * sizeof *dst);
            memcpy(dst_stats + b->v_off, src_stats + a->v_off, (size_t)a->oc * sizeof *dst);
        }
    }
}

int predict_model_upload(predict_model *m, ocl_ctx *c, kern *k, int capacity, char *err)
{
    model *dev = NULL;
    float *params = NULL, *stats = NULL;
    cl_mem x = NULL;
    int rc = model_new_inference(c, k, m->job, m->info.inputs, m->info.outputs, m->loss, capacity,
                                 &dev, err);
    if (rc < 0)
        return rc;
    params = calloc(dev->n_params + 1, sizeof *params);
    stats = calloc(dev->n_stats + 1, sizeof *stats);
    if (!params || !stats) {
        rc = err_set(err, -ENOMEM, "out of memory uploading a model");
        goto out;
    }
    relayout(m->plan, dev, m->params, m->stats, params, stats);
    rc = ocl_write(c, dev->params, 0, dev->n_params * sizeof *params, params, err);
    if (rc == 0 && dev->n_stats)
        rc = ocl_write(c, dev->stats, 0, dev->n_stats * sizeof *stats, stats, err);
    if (rc == 0)
        rc = ocl_buffer_new(c, (size_t)capacity * (size_t)m->info.inputs * sizeof(float), &x, err);
out:
    free(params);
    free(stats);
    if (rc < 0) {
        model_free(dev);
        return rc;
    }
    m->dev = dev;
    m->x = x;
    return 0;
}

void predict_model_unload(predict_model *m)
{
    model_free(m->dev);
    m->dev = NULL;
    if (m->x)
        clReleaseMemObject(m->x);
    m->x = NULL;
}
