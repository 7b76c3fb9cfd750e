/* job_model: the model section of the job document — model.input_shape, model.layers, the
 * output layer when the document gives it, and every layer's output shape (see job.h).
 *
 * Design. Two passes. The first reads each layer on its own: its type, which members that type
 * takes (an option of another type is named as such), their ranges and Keras's defaults. The
 * second walks the layers in order with the shape flowing through them, from input_shape
 * (images) or a flat input of unknown width (CSV), fills out_h/out_w/out_c and reports a layer
 * that cannot take its input, naming both shapes. It stops at the first layer the first pass
 * refused, whose output is unknown; every problem before it, and every member's own, is still
 * reported.
 *
 * The shape is h × w × c plus one bit, spatial: set by the image input, conv2d and the windowed
 * pools, kept by dropout and batchnorm, cleared by flatten, global_avgpool2d and dense. conv2d,
 * the pools and global_avgpool2d need a spatial input; dense and the output layer a flat one
 * (Keras would apply a dense layer to the last axis of a map, which is never what a job means:
 * the message says to add flatten or global_avgpool2d). Sizes follow job_conv_out(), the rule
 * the worker uses too.
 *
 * Limits (job.h): kernel, pool and stride sizes 1..JOB_MAX_KERNEL; input sides up to
 * JOB_MAX_IMAGE_SIDE and JOB_MAX_CHANNELS; the input and all layer outputs together at most
 * JOB_MAX_ACTIVATIONS values per sample; one layer at most JOB_MAX_WEIGHTS weights where its
 * input width is known at submit. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "job/job_priv.h"

static const job_enum job_activations[] = {
    {"relu", JOB_ACT_RELU},     {"tanh", JOB_ACT_TANH},       {"sigmoid", JOB_ACT_SIGMOID},
    {"linear", JOB_ACT_LINEAR}, {"softmax", JOB_ACT_SOFTMAX}, {NULL, 0},
};

static const job_enum job_layer_types[] = {
    {"dense", JOB_LAYER_DENSE},
    {"dropout", JOB_LAYER_DROPOUT},
    {"conv2d", JOB_LAYER_CONV2D},
    {"maxpool2d", JOB_LAYER_MAXPOOL2D},
    {"avgpool2d", JOB_LAYER_AVGPOOL2D},
    {"global_avgpool2d", JOB_LAYER_GLOBAL_AVGPOOL2D},
    {"flatten", JOB_LAYER_FLATTEN},
    {"batchnorm", JOB_LAYER_BATCHNORM},
    {NULL, 0},
};

static const job_enum job_paddings[] = {
    {"valid", JOB_PAD_VALID},
    {"same", JOB_PAD_SAME},
    {NULL, 0},
};

#define JOB_LAYER_TYPES                                                                            \
    "one of \"dense\", \"dropout\", \"conv2d\", \"maxpool2d\", \"avgpool2d\", "                    \
    "\"global_avgpool2d\", \"flatten\", \"batchnorm\""
#define JOB_HIDDEN_ACTS "one of \"relu\", \"tanh\", \"sigmoid\", \"linear\""

/* The members each layer type takes, indexed by enum job_layer_type. */
static const char *const job_dense_known[] = {"type", "units", "activation", NULL};
static const char *const job_dropout_known[] = {"type", "rate", NULL};
static const char *const job_conv_known[] = {"type",    "filters",    "kernel_size", "strides",
                                             "padding", "activation", "use_bias",    NULL};
static const char *const job_pool_known[] = {"type", "pool_size", "strides", "padding", NULL};
static const char *const job_bare_known[] = {"type", NULL};
static const char *const job_bn_known[] = {"type", "momentum", "epsilon", NULL};
static const char *const *const job_known_by_type[] = {
    job_dense_known, job_dropout_known, job_conv_known, job_pool_known,
    job_pool_known,  job_bare_known,    job_bare_known, job_bn_known,
};
#define JOB_N_TYPES (sizeof job_known_by_type / sizeof job_known_by_type[0])

const char *job_activation_name(int act)
{
    return job_enum_name(job_activations, act);
}

const char *job_layer_type_name(int type)
{
    return job_enum_name(job_layer_types, type);
}

int job_conv_out(int in, int k, int s, int padding, int *pad_before)
{
    if (in < 1 || k < 1 || s < 1)
        return 0;
    long long out, pad = 0;
    if (padding == JOB_PAD_SAME) {
        out = ((long long)in + s - 1) / s;
        long long total = (out - 1) * s + k - in;
        pad = total > 0 ? total / 2 : 0;
    } else if (padding == JOB_PAD_VALID) {
        if (k > in)
            return 0;
        out = (in - k) / s + 1;
    } else {
        return 0;
    }
    if (pad_before)
        *pad_before = (int)pad;
    return (int)out;
}

int job_layer_is_spatial(const job_spec *spec, size_t i)
{
    if (!spec || i >= spec->n_layers)
        return 0; /* the output layer, or none */
    for (size_t j = i + 1; j-- > 0;) {
        switch (spec->layers[j].type) {
        case JOB_LAYER_CONV2D:
        case JOB_LAYER_MAXPOOL2D:
        case JOB_LAYER_AVGPOOL2D:
            return 1;
        case JOB_LAYER_DROPOUT:
        case JOB_LAYER_BATCHNORM:
            continue;
        default:
            return 0;
        }
    }
    return spec->in_h > 0;
}

/* ---- pass 1: each layer on its own ------------------------------------------------------- */

/* Reports the members of layer l that its type does not take: "unknown field", saying which
 * layer types take it when some do. */
static void job_check_layer_members(job_vctx *v, const json_t *l, const char *path, int type)
{
    const char *key;
    json_t *val;
    json_object_foreach ((json_t *)l, key, val) {
        int mine = 0;
        char owners[160] = "";
        size_t used = 0;
        for (size_t t = 0; t < JOB_N_TYPES; t++) {
            for (size_t k = 0; job_known_by_type[t][k]; k++) {
                if (strcmp(key, job_known_by_type[t][k]) != 0)
                    continue;
                if ((int)t == type)
                    mine = 1;
                else if (used < sizeof owners)
                    used += (size_t)snprintf(owners + used, sizeof owners - used, "%s%s",
                                             used ? ", " : "", job_layer_type_name((int)t));
            }
        }
        if (mine)
            continue;
        job_path p;
        job_path_key(p, path, key);
        if (owners[0])
            field_errors_add(v->errs, p, "unknown field for a %s layer (it is an option of %s)",
                             job_layer_type_name(type), owners);
        else
            field_errors_add(v->errs, p, "unknown field");
    }
}

/* Reports a required member that is absent. */
static void job_required(job_vctx *v, int r, const char *path, const char *key, const char *what)
{
    if (r != 0)
        return;
    job_path p;
    job_path_key(p, path, key);
    field_errors_add(v->errs, p, "is required for this layer: %s", what);
}

/* activation of a dense (softmax allowed here; the model pass decides where) or conv2d layer. */
static int job_v_activation(job_vctx *v, const json_t *l, const char *path, int softmax_ok,
                            int *out)
{
    const json_t *act = json_object_get(l, "activation");
    if (!softmax_ok && json_is_string(act) && strcmp(json_string_value(act), "softmax") == 0) {
        job_path p;
        job_path_key(p, path, "activation");
        field_errors_add(v->errs, p,
                         "softmax is only for the output: the last layer, a dense one; use "
                         "relu, tanh, sigmoid or linear here");
        return -1;
    }
    return job_get_enum(
        v, l, "activation", path, job_activations,
        softmax_ok ? JOB_HIDDEN_ACTS " (or \"softmax\" on the last layer)" : JOB_HIDDEN_ACTS, out);
}

/* A window's size and strides: kernel_size (conv2d, required) or pool_size (pools, default
 * 2×2); strides default to 1 for conv2d and to the window for pools, as in Keras. */
static int job_v_window(job_vctx *v, const json_t *l, const char *path, job_layer *layer)
{
    int ok = 1, size[2] = {2, 2}, strides[2] = {1, 1};
    int conv = layer->type == JOB_LAYER_CONV2D;
    const char *key = conv ? "kernel_size" : "pool_size";
    int r = job_get_ints(v, l, key, path, 2, 1, JOB_MAX_KERNEL, 1, "height, width", size);
    if (conv)
        job_required(v, r, path, key, "an integer such as 3, or [height, width]");
    ok &= r == 1 || (r == 0 && !conv);
    if (!conv) {
        strides[0] = size[0];
        strides[1] = size[1];
    }
    ok &=
        job_get_ints(v, l, "strides", path, 2, 1, JOB_MAX_KERNEL, 1, "height, width", strides) >= 0;
    ok &= job_get_enum(v, l, "padding", path, job_paddings, "\"valid\" or \"same\"",
                       &layer->padding) >= 0;
    layer->kh = size[0];
    layer->kw = size[1];
    layer->sh = strides[0];
    layer->sw = strides[1];
    return ok;
}

/* One layer into *out with its defaults; 1 when it is valid, 0 when not. */
static int job_v_layer(job_vctx *v, const json_t *l, const char *path, job_layer *out)
{
    if (!json_is_object(l)) {
        job_bad(v, path, "an object such as {\"type\": \"dense\", \"units\": 64}", l);
        return 0;
    }
    int type = -1;
    int r = job_get_enum(v, l, "type", path, job_layer_types, JOB_LAYER_TYPES, &type);
    if (r == 0) {
        job_path p;
        job_path_key(p, path, "type");
        field_errors_add(v->errs, p, "is required: " JOB_LAYER_TYPES);
    }
    if (r != 1)
        return 0;
    job_check_layer_members(v, l, path, type);
    job_layer layer = {.type = type};
    int ok = 1;
    switch (type) {
    case JOB_LAYER_DENSE:
        layer.activation = JOB_ACT_RELU;
        r = job_get_int32(v, l, "units", path, 1, JOB_MAX_UNITS, &layer.units);
        job_required(v, r, path, "units", "an integer from 1 to 65536");
        ok &= r == 1;
        ok &= job_v_activation(v, l, path, 1, &layer.activation) >= 0;
        break;
    case JOB_LAYER_DROPOUT:
        r = job_get_number(v, l, "rate", path, (job_range){0, 1, 0, 1}, &layer.rate);
        job_required(v, r, path, "rate", "a number >= 0 and < 1");
        ok &= r == 1;
        break;
    case JOB_LAYER_CONV2D:
        layer.activation = JOB_ACT_LINEAR; /* Keras's Conv2D default */
        layer.use_bias = 1;
        r = job_get_int32(v, l, "filters", path, 1, JOB_MAX_UNITS, &layer.filters);
        job_required(v, r, path, "filters", "an integer from 1 to 65536");
        ok &= r == 1;
        ok &= job_v_window(v, l, path, &layer);
        ok &= job_v_activation(v, l, path, 0, &layer.activation) >= 0;
        ok &= job_get_bool(v, l, "use_bias", path, &layer.use_bias) >= 0;
        break;
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
        ok &= job_v_window(v, l, path, &layer);
        break;
    case JOB_LAYER_BATCHNORM:
        layer.bn_momentum = 0.99;
        layer.bn_epsilon = 0.001;
        ok &= job_get_number(v, l, "momentum", path, (job_range){0, 1, 0, 1}, &layer.bn_momentum) >=
              0;
        ok &=
            job_get_number(v, l, "epsilon", path, (job_range){0, 1, 1, 0}, &layer.bn_epsilon) >= 0;
        break;
    default: /* flatten, global_avgpool2d: nothing to set */
        break;
    }
    *out = layer;
    return ok;
}

/* ---- input_shape --------------------------------------------------------------------------- */

/* input_shape [h, w, c] against the format: CIFAR-10 is 32×32×3 and MNIST 28×28×1 unless
 * resized, and dataset.resize sets the height and width of any format. 1 when it fits. */
static int job_input_fits_format(job_vctx *v, const job_spec *s, const int *hwc)
{
    const char *fmt = job_format_name(s->format);
    int want_c = s->format == JOB_FORMAT_CIFAR10 ? 3 : s->format == JOB_FORMAT_MNIST ? 1 : 0;
    int want_h = s->resize_h, want_w = s->resize_w;
    if (!want_h && want_c) /* CIFAR-10 and MNIST have one size */
        want_h = want_w = s->format == JOB_FORMAT_CIFAR10 ? 32 : 28;
    if (want_c && hwc[2] != want_c) {
        field_errors_add(v->errs, "model.input_shape",
                         "must have %d channel%s for dataset.format \"%s\", got [%d, %d, %d]",
                         want_c, want_c == 1 ? "" : "s", fmt, hwc[0], hwc[1], hwc[2]);
        return 0;
    }
    if (!want_h || (hwc[0] == want_h && hwc[1] == want_w))
        return 1;
    if (s->resize_h)
        field_errors_add(v->errs, "model.input_shape",
                         "must have the height and width of dataset.resize [%d, %d], got "
                         "[%d, %d, %d]",
                         want_h, want_w, hwc[0], hwc[1], hwc[2]);
    else
        field_errors_add(v->errs, "model.input_shape",
                         "must be [%d, %d, %d] for dataset.format \"%s\" (its images are %d×%d; "
                         "dataset.resize changes that), got [%d, %d, %d]",
                         want_h, want_w, want_c, fmt, want_h, want_w, hwc[0], hwc[1], hwc[2]);
    return 0;
}

/* model.input_shape: required for images, refused for CSV, checked against the format. */
static void job_v_input_shape(job_vctx *v, const json_t *model, job_spec *s)
{
    const json_t *val = model ? json_object_get(model, "input_shape") : NULL;
    if (!v->format_bad && s->format == JOB_FORMAT_CSV) {
        if (val)
            field_errors_add(v->errs, "model.input_shape",
                             "applies only to image formats (dataset.format \"cifar10\", "
                             "\"mnist\", \"npy\", \"npz\", \"images\"); this job's is \"csv\", "
                             "whose rows are flat");
        return;
    }
    if (!val) {
        if (!v->format_bad)
            field_errors_add(v->errs, "model.input_shape",
                             "is required for dataset.format \"%s\": [height, width, channels] "
                             "of the images the model takes (after dataset.resize)",
                             job_format_name(s->format));
        return;
    }
    int hwc[3];
    if (job_get_ints(v, model, "input_shape", "model", 3, 1, JOB_MAX_IMAGE_SIDE, 0,
                     "height, width, channels", hwc) != 1)
        return;
    long long values = (long long)hwc[0] * hwc[1] * hwc[2];
    if (values > JOB_MAX_ACTIVATIONS) {
        field_errors_add(v->errs, "model.input_shape",
                         "holds %lld values per sample; the limit is %d for the input and every "
                         "layer's output together",
                         values, JOB_MAX_ACTIVATIONS);
        return;
    }
    if (!v->format_bad && !job_input_fits_format(v, s, hwc))
        return;
    s->in_h = hwc[0];
    s->in_w = hwc[1];
    s->in_c = hwc[2];
}

/* ---- the output layer -------------------------------------------------------------------- */

/* Whether the last layer, already read, is the output itself; reports a softmax anywhere else
 * and one that does not fit the task. */
static void job_v_output(job_vctx *v, job_spec *s, size_t n, const int *ok)
{
    for (size_t i = 0; i < n; i++) {
        const job_layer *l = &s->layers[i];
        if (l->type != JOB_LAYER_DENSE) /* an unread type is left as a linear dense layer */
            continue;
        job_path p, pa;
        job_path_index(p, "model.layers", i);
        job_path_key(pa, p, "activation");
        int last = i + 1 == n;
        if (l->activation == JOB_ACT_SOFTMAX) {
            if (!last)
                field_errors_add(v->errs, pa,
                                 "softmax is only for the output, the last layer; use relu, "
                                 "tanh, sigmoid or linear here");
            else if (s->task == JOB_TASK_REGRESSION)
                field_errors_add(v->errs, pa,
                                 "softmax is a classification output; a regression's output is "
                                 "linear and is added from \"task\": remove this layer or use "
                                 "another activation");
            else if (s->binary)
                field_errors_add(v->errs, pa,
                                 "softmax does not go with \"binary\": true, whose output is one "
                                 "sigmoid unit: end with {\"type\": \"dense\", \"units\": 1, "
                                 "\"activation\": \"sigmoid\"} or leave the output out");
            else if (ok[i] && l->units < 2)
                field_errors_add(v->errs, p,
                                 "a softmax output needs one unit per class, at least 2; got %d",
                                 l->units);
            else
                s->output_given = 1;
        } else if (last && ok[i] && s->task == JOB_TASK_CLASSIFICATION && s->binary &&
                   l->activation == JOB_ACT_SIGMOID && l->units == 1) {
            s->output_given = 1;
        }
    }
    if (s->output_given)
        s->output_units = s->layers[n - 1].units;
}

/* ---- pass 2: shapes ---------------------------------------------------------------------- */

typedef struct job_shape {
    long long h, w, c; /* c alone is meaningful when flat; all 0 when unknown */
    int known;         /* the sizes are known (not for CSV's input or after an unknown) */
    int spatial;
    int image;        /* the input is an image (not CSV rows) */
    long long values; /* per sample so far: the input and every output */
    size_t from;      /* the layer the shape comes from, or (size_t)-1 for the input */
} job_shape;

/* "62×62×32", "128 flat values" or "a spatial map" for messages. */
static void job_shape_text(const job_shape *sh, char *buf, size_t cap)
{
    if (sh->known && sh->spatial)
        snprintf(buf, cap, "%lld×%lld×%lld", sh->h, sh->w, sh->c);
    else if (sh->known)
        snprintf(buf, cap, "%lld flat values", sh->c);
    else if (sh->spatial)
        snprintf(buf, cap, "a spatial map");
    else
        snprintf(buf, cap, "flat values");
}

/* Where the shape came from, for messages: "the input" or "model.layers[2] (conv2d)". */
static void job_shape_source(const job_spec *s, const job_shape *sh, char *buf, size_t cap)
{
    if (sh->from == (size_t)-1)
        snprintf(buf, cap, "the input");
    else
        snprintf(buf, cap, "model.layers[%zu] (%s)", sh->from,
                 job_layer_type_name(s->layers[sh->from].type));
}

/* Reports a dense layer (or the output) meeting a spatial map. */
static void job_flat_needed(job_vctx *v, const job_spec *s, const job_shape *sh, const char *path,
                            const char *what)
{
    char shape[64], src[64];
    job_shape_text(sh, shape, sizeof shape);
    job_shape_source(s, sh, src, sizeof src);
    field_errors_add(v->errs, path,
                     "%s needs flat input, but %s gives %s: add flatten or global_avgpool2d "
                     "before it",
                     what, src, shape);
}

/* The output of a conv2d or windowed pool on sh, or 0 when it does not fit (reported). */
static int job_window_out(job_vctx *v, const job_layer *l, const job_shape *sh, const char *path,
                          int *oh, int *ow)
{
    *oh = job_conv_out((int)sh->h, l->kh, l->sh, l->padding, NULL);
    *ow = job_conv_out((int)sh->w, l->kw, l->sw, l->padding, NULL);
    if (*oh > 0 && *ow > 0)
        return 1;
    char shape[64];
    job_shape_text(sh, shape, sizeof shape);
    field_errors_add(v->errs, path, "%s with a %d×%d %s (padding %s) does not fit its input %s",
                     job_layer_type_name(l->type), l->kh, l->kw,
                     l->type == JOB_LAYER_CONV2D ? "kernel" : "window",
                     job_enum_name(job_paddings, l->padding), shape);
    return 0;
}

/* A layer's weights against JOB_MAX_WEIGHTS. */
static void job_check_weights(job_vctx *v, const char *path, long long weights)
{
    if (weights > JOB_MAX_WEIGHTS)
        field_errors_add(v->errs, path, "would have %lld weights; the limit is %d per layer",
                         weights, JOB_MAX_WEIGHTS);
}

/* Layer i on shape sh: reports what does not fit, writes the layer's output shape and moves sh
 * on. Returns 0 when the walk should stop: an image layer on CSV rows or on flat values, or the
 * activations over their limit (what follows would only repeat the problem). */
static int job_shape_layer(job_vctx *v, job_spec *s, size_t i, job_shape *sh)
{
    job_layer *l = &s->layers[i];
    job_path path;
    job_path_index(path, "model.layers", i);
    const char *name = job_layer_type_name(l->type);
    int spatial_in = l->type == JOB_LAYER_CONV2D || l->type == JOB_LAYER_MAXPOOL2D ||
                     l->type == JOB_LAYER_AVGPOOL2D || l->type == JOB_LAYER_GLOBAL_AVGPOOL2D;
    if ((spatial_in || l->type == JOB_LAYER_FLATTEN) && !sh->image) {
        field_errors_add(v->errs, path,
                         "%s needs images: set dataset.format to an image format and "
                         "model.input_shape; a CSV row is flat",
                         name);
        return 0;
    }
    if (spatial_in && !sh->spatial) {
        char src[64], shape[64];
        job_shape_source(s, sh, src, sizeof src);
        job_shape_text(sh, shape, sizeof shape);
        field_errors_add(v->errs, path,
                         "%s needs a height×width×channels input, but %s gives %s: move it "
                         "before the flatten, global_avgpool2d or dense layer",
                         name, src, shape);
        return 0; /* what follows would only repeat it */
    }
    int oh = 1, ow = 1;
    switch (l->type) {
    case JOB_LAYER_DENSE:
        if (sh->spatial)
            job_flat_needed(v, s, sh, path, "dense");
        else if (sh->known)
            job_check_weights(v, path, sh->c * l->units);
        sh->h = sh->w = 1;
        sh->c = l->units;
        sh->known = 1;
        sh->spatial = 0;
        break;
    case JOB_LAYER_CONV2D:
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
        if (sh->known && !job_window_out(v, l, sh, path, &oh, &ow))
            sh->known = 0;
        if (sh->known && l->type == JOB_LAYER_CONV2D)
            job_check_weights(v, path, (long long)l->kh * l->kw * sh->c * l->filters);
        sh->h = oh;
        sh->w = ow;
        if (l->type == JOB_LAYER_CONV2D)
            sh->c = l->filters;
        sh->spatial = 1;
        break;
    case JOB_LAYER_GLOBAL_AVGPOOL2D:
        sh->h = sh->w = 1;
        sh->spatial = 0;
        break;
    case JOB_LAYER_FLATTEN:
        sh->c = sh->h * sh->w * sh->c;
        sh->h = sh->w = 1;
        sh->spatial = 0;
        break;
    default: /* dropout, batchnorm: the shape passes through */
        break;
    }
    sh->from = i;
    l->out_h = sh->known ? (int)sh->h : !sh->spatial;
    l->out_w = sh->known ? (int)sh->w : !sh->spatial;
    l->out_c = sh->known ? (int)sh->c : 0;
    if (sh->known)
        sh->values += sh->h * sh->w * sh->c;
    if (sh->values > JOB_MAX_ACTIVATIONS) {
        /* Stopping here also keeps every size the walk computes within int. */
        field_errors_add(v->errs, path,
                         "brings the activations to %lld values per sample (this layer gives "
                         "%d×%d×%d); the limit is %d for the input and every layer's output "
                         "together",
                         sh->values, l->out_h, l->out_w, l->out_c, JOB_MAX_ACTIVATIONS);
        return 0;
    }
    return 1;
}

/* Walks the n layers read (ok[i]: valid on its own), the given output included. */
static void job_shapes(job_vctx *v, job_spec *s, size_t n, const int *ok)
{
    job_shape sh = {.from = (size_t)-1};
    if (v->format_bad && !s->in_h)
        return; /* neither CSV nor a known image: nothing to check against */
    sh.image = s->format != JOB_FORMAT_CSV || v->format_bad;
    sh.spatial = sh.image;
    if (s->in_h) {
        sh.h = s->in_h;
        sh.w = s->in_w;
        sh.c = s->in_c;
        sh.known = 1;
        sh.values = sh.h * sh.w * sh.c;
    }
    for (size_t i = 0; i < n; i++) {
        if (!ok[i] || !job_shape_layer(v, s, i, &sh))
            return;
    }
    if (s->output_given || !sh.spatial)
        return;
    job_flat_needed(v, s, &sh, "model.layers",
                    "the output layer (a dense layer added from \"task\")");
}

/* ---- the section ------------------------------------------------------------------------- */

void job_v_model(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"input_shape", "layers", NULL};
    const json_t *model = NULL;
    if (job_get_object(v, doc, "model", "", &model) < 0)
        return;
    if (model)
        field_errors_unknown(v->errs, model, "model", known);
    job_v_input_shape(v, model, s);
    const json_t *layers = model ? json_object_get(model, "layers") : NULL;
    size_t n = 0;
    int ok[JOB_MAX_LAYERS];
    if (layers && !json_is_array(layers)) {
        job_bad(v, "model.layers", "an array of layers", layers);
        return;
    }
    if (layers) {
        n = json_array_size(layers);
        if (n > JOB_MAX_LAYERS) {
            field_errors_add(v->errs, "model.layers", "must have at most %d layers, got %zu",
                             JOB_MAX_LAYERS, n);
            return;
        }
    }
    for (size_t i = 0; i < n; i++) {
        job_path p;
        job_path_index(p, "model.layers", i);
        ok[i] = job_v_layer(v, json_array_get(layers, i), p, &s->layers[i]);
    }
    job_v_output(v, s, n, ok);
    s->n_layers = n - (size_t)s->output_given;
    job_shapes(v, s, n, ok);
}

/* ---- out --------------------------------------------------------------------------------- */

static json_t *job_layer_to_json(const job_layer *l, int *bad)
{
    json_t *o = json_object();
    job_put(o, "type", job_str(job_layer_type_name(l->type), bad), bad);
    switch (l->type) {
    case JOB_LAYER_DENSE:
        job_put(o, "units", json_integer(l->units), bad);
        job_put(o, "activation", job_str(job_activation_name(l->activation), bad), bad);
        break;
    case JOB_LAYER_DROPOUT:
        job_put(o, "rate", json_real(l->rate), bad);
        break;
    case JOB_LAYER_CONV2D:
        job_put(o, "filters", json_integer(l->filters), bad);
        job_put(o, "kernel_size", job_pair(l->kh, l->kw, bad), bad);
        break;
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
        job_put(o, "pool_size", job_pair(l->kh, l->kw, bad), bad);
        break;
    case JOB_LAYER_BATCHNORM:
        job_put(o, "momentum", json_real(l->bn_momentum), bad);
        job_put(o, "epsilon", json_real(l->bn_epsilon), bad);
        break;
    default:
        break;
    }
    if (l->type == JOB_LAYER_CONV2D || l->type == JOB_LAYER_MAXPOOL2D ||
        l->type == JOB_LAYER_AVGPOOL2D) {
        job_put(o, "strides", job_pair(l->sh, l->sw, bad), bad);
        job_put(o, "padding", job_str(job_enum_name(job_paddings, l->padding), bad), bad);
    }
    if (l->type == JOB_LAYER_CONV2D) {
        job_put(o, "activation", job_str(job_activation_name(l->activation), bad), bad);
        job_put(o, "use_bias", json_boolean(l->use_bias), bad);
    }
    return o;
}

json_t *job_model_to_json(const job_spec *s, int *bad)
{
    json_t *model = json_object();
    if (s->in_h) {
        json_t *shape = json_pack("[iii]", s->in_h, s->in_w, s->in_c);
        job_put(model, "input_shape", shape, bad);
    }
    json_t *layers = json_array();
    size_t n = s->n_layers + (size_t)(s->output_given != 0);
    for (size_t i = 0; layers && i < n && i < JOB_MAX_LAYERS; i++) {
        if (json_array_append_new(layers, job_layer_to_json(&s->layers[i], bad)) < 0)
            *bad = 1;
    }
    job_put(model, "layers", layers, bad);
    return model;
}
