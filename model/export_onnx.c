/* export_onnx: see export_onnx.h. Every message, string and array is allocated into one list
 * and freed together after packing; the export's tensors are not copied (raw_data points at its
 * floats, little-endian as ONNX wants them on the machines trainyard runs on), the
 * preprocessing's constants are (ox.consts). */
#include "model/export_onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/err.h"
#include "util/json_out.h"
#include "util/writefile.h"
#include "model/onnx.pb-c.h"

#define ONNX_IR_VERSION 8  /* what opset 17 needs */
#define ONNX_PREP_NODES 64 /* an image's preprocessing takes 48 */
#define ONNX_MAX_NODES  (6 * (JOB_MAX_LAYERS + 1) + ONNX_PREP_NODES)
#define ONNX_MAX_CONSTS 24 /* the preprocessing's initializers: 14 at most */
#define ONNX_FLOAT      ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define ONNX_INT64      ONNX__TENSOR_PROTO__DATA_TYPE__INT64

typedef struct ox {
    void **owned; /* everything allocated here, freed by ox_free */
    size_t n_owned, cap_owned;
    Onnx__NodeProto *nodes[ONNX_MAX_NODES];
    size_t n_nodes;
    size_t serial; /* values made so far: "t<serial>" names the next, unique across subgraphs */
    Onnx__TensorProto *consts[ONNX_MAX_CONSTS]; /* the preprocessing's initializers */
    size_t n_consts;
    const char *cur; /* the value the next node reads */
    int failed;
} ox;

static void *own(ox *x, void *p)
{
    if (!p) {
        x->failed = 1;
        return NULL;
    }
    if (ARRAY_GROW(x->owned, x->cap_owned, x->n_owned + 1, ARRAY_NO_MAX) < 0) {
        free(p);
        x->failed = 1;
        return NULL;
    }
    x->owned[x->n_owned++] = p;
    return p;
}

static void ox_free(ox *x)
{
    for (size_t i = 0; i < x->n_owned; i++)
        free(x->owned[i]);
    free(x->owned);
}

/* A copy of s; NULL (and failed) when s is NULL, a value an earlier failure left unnamed. */
static char *str(ox *x, const char *s)
{
    if (!s) {
        x->failed = 1;
        return NULL;
    }
    return own(x, strdup(s));
}

static Onnx__AttributeProto *attr(ox *x, const char *name)
{
    Onnx__AttributeProto *a = own(x, malloc(sizeof *a));
    if (!a)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = str(x, name);
    a->has_type = 1;
    return a;
}

static Onnx__AttributeProto *attr_int(ox *x, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(x, name);
    if (a) {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = v;
    }
    return a;
}

static Onnx__AttributeProto *attr_float(ox *x, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(x, name);
    if (a) {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        a->has_f = 1;
        a->f = v;
    }
    return a;
}

static Onnx__AttributeProto *attr_ints(ox *x, const char *name, const int64_t *v, size_t n)
{
    Onnx__AttributeProto *a = attr(x, name);
    int64_t *copy = own(x, malloc(n * sizeof *copy));
    if (a && copy) {
        memcpy(copy, v, n * sizeof *copy);
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a->ints = copy;
        a->n_ints = n;
    }
    return a;
}

/* A node op_type(in...) with attrs; returns its output ("t<N>"), NULL once anything failed. A
 * NULL input is left out (a conv without bias). */
static const char *emit(ox *x, const char *op, const char *const *in, size_t n_in,
                        Onnx__AttributeProto *const *attrs, size_t n_attrs)
{
    if (x->failed || x->n_nodes == ONNX_MAX_NODES) {
        x->failed = 1;
        return NULL;
    }
    Onnx__NodeProto *n = own(x, malloc(sizeof *n));
    char **ins = own(x, calloc(n_in + 1, sizeof *ins));
    char **out = own(x, calloc(1, sizeof *out));
    Onnx__AttributeProto **at = own(x, calloc(n_attrs + 1, sizeof *at));
    char name[32];
    snprintf(name, sizeof name, "t%zu", x->serial++);
    if (!n || !ins || !out || !at)
        return NULL;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (size_t i = 0; i < n_in; i++)
        if (in[i])
            ins[n->n_input++] = str(x, in[i]);
    for (size_t i = 0; i < n_attrs; i++) {
        if (!attrs[i])
            x->failed = 1;
        at[i] = attrs[i];
    }
    out[0] = str(x, name);
    n->input = ins;
    n->output = out;
    n->n_output = 1;
    n->op_type = str(x, op);
    n->name = str(x, name);
    n->attribute = at;
    n->n_attribute = n_attrs;
    x->nodes[x->n_nodes++] = n;
    return x->failed ? NULL : out[0];
}

/* A node op_type(cur, extra...) with attrs, whose output becomes cur. */
static void node(ox *x, const char *op, const char *const *extra, size_t n_extra,
                 Onnx__AttributeProto *const *attrs, size_t n_attrs)
{
    const char *in[5] = {x->cur};
    if (n_extra > 4) {
        x->failed = 1;
        return;
    }
    for (size_t i = 0; i < n_extra; i++)
        in[i + 1] = extra[i];
    const char *out = emit(x, op, in, n_extra + 1, attrs, n_attrs);
    if (out)
        x->cur = out;
}

static void activation(ox *x, int job_act)
{
    static const char *const ops[] = {
        [JOB_ACT_RELU] = "Relu", [JOB_ACT_TANH] = "Tanh", [JOB_ACT_SIGMOID] = "Sigmoid"};
    if (job_act == JOB_ACT_RELU || job_act == JOB_ACT_TANH || job_act == JOB_ACT_SIGMOID)
        node(x, ops[job_act], NULL, 0, NULL, 0);
}

static void flatten(ox *x)
{
    Onnx__AttributeProto *a[] = {attr_int(x, "axis", 1)};
    node(x, "Flatten", NULL, 0, a, 1);
}

/* kernel_shape, strides and pads (ONNX's order: top, left, bottom, right) of a window. */
static size_t window_attrs(ox *x, const model_layer *l, Onnx__AttributeProto **a)
{
    int64_t k[2] = {l->kh, l->kw}, s[2] = {l->sh, l->sw}, p[4] = {l->pt, l->pl, l->pb, l->pr};
    a[0] = attr_ints(x, "kernel_shape", k, 2);
    a[1] = attr_ints(x, "strides", s, 2);
    a[2] = attr_ints(x, "pads", p, 4);
    return 3;
}

static const char *entry_str(const json_t *entry, const char *key)
{
    return json_string_value(json_object_get(entry, key));
}

/* The graph's nodes for the model's layers; four_d: the value is still NCHW. */
static void layers(ox *x, const model *m, const json_t *entries)
{
    int four_d = m->image_input;
    for (size_t i = 0; i < m->n_layers && !x->failed; i++) {
        const model_layer *l = &m->layers[i];
        const json_t *entry = json_array_get(entries, i);
        Onnx__AttributeProto *a[4];
        switch (l->type) {
        case JOB_LAYER_DENSE: {
            if (four_d)
                flatten(x);
            four_d = 0;
            const char *in[] = {entry_str(entry, "weight"), entry_str(entry, "bias")};
            a[0] = attr_int(x, "transB", 1);
            node(x, "Gemm", in, 2, a, 1);
            activation(x, l->job_act);
            break;
        }
        case JOB_LAYER_CONV2D: {
            const char *in[] = {entry_str(entry, "weight"), entry_str(entry, "bias")};
            size_t na = window_attrs(x, l, a);
            node(x, "Conv", in, 2, a, na);
            activation(x, l->job_act);
            break;
        }
        case JOB_LAYER_MAXPOOL2D:
            node(x, "MaxPool", NULL, 0, a, window_attrs(x, l, a));
            break;
        case JOB_LAYER_AVGPOOL2D: {
            size_t na = window_attrs(x, l, a);
            a[na++] = attr_int(x, "count_include_pad", 0);
            node(x, "AveragePool", NULL, 0, a, na);
            break;
        }
        case JOB_LAYER_GLOBAL_AVGPOOL2D:
            node(x, "GlobalAveragePool", NULL, 0, NULL, 0);
            flatten(x);
            four_d = 0;
            break;
        case JOB_LAYER_FLATTEN:
            flatten(x);
            four_d = 0;
            break;
        case JOB_LAYER_BATCHNORM: {
            const char *mod = entry_str(entry, "module");
            char names[4][48];
            const char *in[4];
            static const char *const what[] = {"weight", "bias", "running_mean", "running_var"};
            for (int k = 0; k < 4; k++) {
                snprintf(names[k], sizeof names[k], "%s.%s", mod ? mod : "?", what[k]);
                in[k] = names[k];
            }
            a[0] = attr_float(x, "epsilon", l->bn_eps);
            node(x, "BatchNormalization", in, 4, a, 1);
            break;
        }
        default: /* dropout: the identity at inference */
            break;
        }
    }
    if (m->loss == MODEL_LOSS_SOFTMAX_XENT) {
        Onnx__AttributeProto *a[] = {attr_int(x, "axis", 1)};
        node(x, "Softmax", NULL, 0, a, 1);
    } else if (m->loss == MODEL_LOSS_BCE) {
        node(x, "Sigmoid", NULL, 0, NULL, 0);
    }
}

/* A float tensor's type: dims[i] where it is > 0, else the symbolic dimension names[i]. */
static Onnx__ValueInfoProto *value_info(ox *x, const char *name, const int64_t *dims,
                                        const char *const *names, size_t n)
{
    Onnx__ValueInfoProto *v = own(x, malloc(sizeof *v));
    Onnx__TypeProto *t = own(x, malloc(sizeof *t));
    Onnx__TypeProto__Tensor *tt = own(x, malloc(sizeof *tt));
    Onnx__TensorShapeProto *s = own(x, malloc(sizeof *s));
    Onnx__TensorShapeProto__Dimension **d = own(x, calloc(n + 1, sizeof *d));
    if (!v || !t || !tt || !s || !d)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        d[i] = own(x, malloc(sizeof *d[i]));
        if (!d[i])
            return NULL;
        *d[i] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (dims[i] > 0) {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[i]->dim_value = dims[i];
        } else if (names && names[i]) {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[i]->dim_param = str(x, names[i]);
        } /* else a dimension of no known size */
    }
    *s = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    s->dim = d;
    s->n_dim = n;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX_FLOAT;
    tt->shape = s;
    *t = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    v->name = str(x, name);
    v->type = t;
    return v;
}

/* An initializer of the preprocessing: name, FLOAT or INT64, the values v (copied) of shape
 * dims[ndim] (ndim 0: a scalar). Returns name, NULL once anything failed. */
static const char *constant(ox *x, const char *name, int dtype, const void *v, const int64_t *dims,
                            size_t ndim)
{
    size_t count = 1, size = dtype == ONNX_INT64 ? sizeof(int64_t) : sizeof(float);
    for (size_t d = 0; d < ndim; d++)
        count *= (size_t)dims[d];
    if (x->failed || x->n_consts == ONNX_MAX_CONSTS) {
        x->failed = 1;
        return NULL;
    }
    Onnx__TensorProto *t = own(x, malloc(sizeof *t));
    int64_t *shape = own(x, malloc((ndim + 1) * sizeof *shape));
    void *data = own(x, malloc(count * size));
    if (!t || !shape || !data)
        return NULL;
    if (ndim) /* a scalar's dims may be NULL */
        memcpy(shape, dims, ndim * sizeof *shape);
    memcpy(data, v, count * size);
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->dims = shape;
    t->n_dims = ndim;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->name = str(x, name);
    t->has_raw_data = 1;
    t->raw_data.data = data;
    t->raw_data.len = count * size;
    x->consts[x->n_consts++] = t;
    return t->name;
}

static const char *scalar_float(ox *x, const char *name, float v)
{
    return constant(x, name, ONNX_FLOAT, &v, NULL, 0);
}

static const char *scalar_int(ox *x, const char *name, int64_t v)
{
    return constant(x, name, ONNX_INT64, &v, NULL, 0);
}

/* op(a) and op(a, b), without attributes. */
static const char *op1(ox *x, const char *op, const char *a)
{
    return emit(x, op, &a, 1, NULL, 0);
}

static const char *op2(ox *x, const char *op, const char *a, const char *b)
{
    const char *in[] = {a, b};
    return emit(x, op, in, 2, NULL, 0);
}

static const char *cast(ox *x, const char *a, int dtype)
{
    Onnx__AttributeProto *at[] = {attr_int(x, "to", dtype)};
    return emit(x, "Cast", &a, 1, at, 1);
}

/* a + (b − a)·l, as ref_image_batch() interpolates. */
static const char *lerp(ox *x, const char *a, const char *b, const char *l)
{
    return op2(x, "Add", a, op2(x, "Mul", op2(x, "Sub", b, a), l));
}

/* (v − mean) / std with the prep's n values along v's last axis, as dataset_standardize() and
 * ref_image_batch() do; v itself when the job did not standardise. */
static const char *standardize(ox *x, const char *v, const export_onnx_prep *p)
{
    if (!p->mean || !p->std)
        return v;
    int64_t n = (int64_t)p->n;
    const char *mean = constant(x, "prep.mean", ONNX_FLOAT, p->mean, &n, 1);
    const char *std = constant(x, "prep.std", ONNX_FLOAT, p->std, &n, 1);
    return op2(x, "Div", op2(x, "Sub", v, mean), std);
}

/* One axis of the resize: the source positions a and b (int64 [dst]) and weight l that output
 * positions 0..dst-1 read, computed from the input's size along axis (1: height, 2: width) as
 * ref_image_batch()'s image_src() does: ratio = src / dst, f = max((p + 0.5)·ratio − 0.5, 0),
 * a = min(⌊f⌋, src − 1), b = min(a + 1, src − 1), l = f − a. l comes shaped [dst, 1, 1]
 * (height) or [dst, 1] (width) to broadcast over [N, dst_h, dst_w, C]. */
typedef struct axis_sample {
    const char *a, *b, *l;
} axis_sample;

static axis_sample resize_axis(ox *x, const char *shape, int axis, int dst)
{
    axis_sample r = {0};
    const char *tag = axis == 1 ? "h" : "w";
    char name[32];
    float *centres = malloc((size_t)dst * sizeof *centres);
    if (!centres) {
        x->failed = 1;
        return r;
    }
    for (int p = 0; p < dst; p++)
        centres[p] = (float)p + 0.5f; /* exact */
    int64_t n = dst;
    snprintf(name, sizeof name, "prep.centres_%s", tag);
    const char *pos = constant(x, name, ONNX_FLOAT, centres, &n, 1);
    free(centres);
    snprintf(name, sizeof name, "prep.axis_%s", tag);
    const char *src = op2(x, "Gather", shape, scalar_int(x, name, axis));
    snprintf(name, sizeof name, "prep.size_%s", tag);
    const char *ratio = op2(x, "Div", cast(x, src, ONNX_FLOAT), scalar_float(x, name, (float)dst));
    const char *f = op2(x, "Sub", op2(x, "Mul", pos, ratio), "prep.half");
    f = op2(x, "Max", f, "prep.zero");
    const char *last = op2(x, "Sub", src, "prep.one");
    r.a = op2(x, "Min", cast(x, f, ONNX_INT64), last);
    r.b = op2(x, "Min", op2(x, "Add", r.a, "prep.one"), last);
    int64_t to[3] = {dst, 1, 1}, rank = axis == 1 ? 3 : 2;
    snprintf(name, sizeof name, "prep.shape_%s", tag);
    r.l = op2(x, "Reshape", op2(x, "Sub", f, cast(x, r.a, ONNX_FLOAT)),
              constant(x, name, ONNX_INT64, to, &rank, 1));
    return r;
}

static const char *gather(ox *x, const char *data, const char *idx, int axis)
{
    const char *in[] = {data, idx};
    Onnx__AttributeProto *at[] = {attr_int(x, "axis", axis)};
    return emit(x, "Gather", in, 2, at, 1);
}

/* A subgraph of the nodes emitted from first on (taken out of x's list), whose one output is
 * value, a float tensor of rank 4 (an If's branch; its nodes read the outer graph's values). */
static Onnx__GraphProto *branch(ox *x, size_t first, const char *value, const char *name)
{
    Onnx__GraphProto *g = own(x, malloc(sizeof *g));
    Onnx__NodeProto **nodes = own(x, calloc(x->n_nodes - first + 1, sizeof *nodes));
    Onnx__ValueInfoProto **out = own(x, calloc(2, sizeof *out));
    int64_t dims[4] = {0, 0, 0, 0};
    if (!g || !nodes || !out)
        return NULL;
    *g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    for (size_t k = first; k < x->n_nodes; k++)
        nodes[g->n_node++] = x->nodes[k];
    x->n_nodes = first;
    out[0] = value_info(x, value, dims, NULL, 4);
    g->node = nodes;
    g->output = out;
    g->n_output = 1;
    g->name = str(x, name);
    return out[0] ? g : NULL;
}

static Onnx__AttributeProto *attr_graph(ox *x, const char *name, Onnx__GraphProto *g)
{
    Onnx__AttributeProto *a = attr(x, name);
    if (a && g) {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        a->g = g;
    } else {
        x->failed = 1;
    }
    return a;
}

/* The input's pixels at the model's size: as they are when the input has that size (an If,
 * so that onnxruntime does not pay for a one-to-one resize), else resized as
 * ref_image_batch() resizes. */
static const char *resized(ox *x, const model *m)
{
    scalar_float(x, "prep.half", 0.5f);
    scalar_float(x, "prep.zero", 0.0f);
    scalar_int(x, "prep.one", 1);
    const char *shape = op1(x, "Shape", "input");
    int64_t hw_axes[2] = {1, 2}, hw[2] = {m->in_h, m->in_w}, two = 2;
    const char *in_hw =
        op2(x, "Gather", shape, constant(x, "prep.hw_axes", ONNX_INT64, hw_axes, &two, 1));
    const char *same = op2(x, "Equal", in_hw, constant(x, "prep.hw", ONNX_INT64, hw, &two, 1));
    Onnx__AttributeProto *keep[] = {attr_int(x, "keepdims", 0)};
    const char *both = cast(x, same, ONNX_INT64);
    both = emit(x, "ReduceMin", &both, 1, keep, 1);
    const char *cond = cast(x, both, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);

    size_t first = x->n_nodes;
    const char *as_is = op1(x, "Identity", "input");
    Onnx__GraphProto *then_g = branch(x, first, as_is, "prep.same_size");
    axis_sample ys = resize_axis(x, shape, 1, m->in_h);
    axis_sample xs = resize_axis(x, shape, 2, m->in_w);
    const char *r0 = gather(x, "input", ys.a, 1), *r1 = gather(x, "input", ys.b, 1);
    const char *top = lerp(x, gather(x, r0, xs.a, 2), gather(x, r0, xs.b, 2), xs.l);
    const char *bot = lerp(x, gather(x, r1, xs.a, 2), gather(x, r1, xs.b, 2), xs.l);
    const char *res = lerp(x, top, bot, ys.l);
    Onnx__GraphProto *else_g = x->failed ? NULL : branch(x, first, res, "prep.resize");
    Onnx__AttributeProto *at[] = {attr_graph(x, "then_branch", then_g),
                                  attr_graph(x, "else_branch", else_g)};
    return emit(x, "If", &cond, 1, at, 2);
}

/* The preprocessing from "input" to the network's input, left in cur; "preprocessed" names its
 * last value (export_onnx.h). */
static void preprocess(ox *x, const model *m, const export_onnx_prep *p)
{
    size_t first = x->n_nodes;
    const char *v = "input";
    if (m->image_input) {
        v = op2(x, "Mul", resized(x, m), scalar_float(x, "prep.pixel_scale", p->pixel_scale));
        v = standardize(x, v, p);
        int64_t perm[] = {0, 3, 1, 2};
        Onnx__AttributeProto *at[] = {attr_ints(x, "perm", perm, 4)};
        v = emit(x, "Transpose", &v, 1, at, 1);
    } else {
        v = standardize(x, v, p);
    }
    if (x->failed || x->n_nodes == first)
        return;
    Onnx__NodeProto *last = x->nodes[x->n_nodes - 1];
    last->output[0] = str(x, "preprocessed");
    x->cur = last->output[0] ? last->output[0] : x->cur;
}

/* trainyard.preprocessing: what "input" is and which steps the graph applies to it. */
static char *preprocessing_json(const model *m, const export_onnx_prep *p)
{
    int std = p->mean && p->std, bad = 0;
    json_t *steps = json_array();
    if (m->image_input) {
        bad |= json_array_append_new(
            steps, json_pack("{s:s, s:[i, i]}", "step", "resize", "to", m->in_h, m->in_w));
        bad |= json_array_append_new(steps, json_pack("{s:s, s:f}", "step", "pixel_scale", "by",
                                                      json_out_float(p->pixel_scale)));
    }
    if (std)
        bad |= json_array_append_new(steps, json_pack("{s:s, s:s}", "step", "standardization",
                                                      "values", "trainyard.standardization"));
    if (m->image_input)
        bad |= json_array_append_new(steps, json_pack("{s:s}", "step", "nchw"));
    if (bad) { /* a step that could not be made is not left out silently */
        json_decref(steps);
        return NULL;
    }
    json_t *o = json_pack(
        "{s:s, s:s, s:o, s:s?}", "input",
        m->image_input ? "[batch, height, width, channels] float32 pixels as stored, any size"
                       : "[batch, features] float32 raw feature values",
        "applied", "inside the graph, as :predict applies it", "steps", steps, "preprocessed",
        m->image_input || std ? "preprocessed" : NULL);
    char *s = o ? json_out_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* The export's float tensors as initializers (num_batches_tracked is PyTorch's alone), then the
 * preprocessing's constants. */
static Onnx__TensorProto **initializers(ox *x, const export_set *e, size_t *n)
{
    Onnx__TensorProto **list = own(x, calloc(e->n + x->n_consts + 1, sizeof *list));
    *n = 0;
    for (size_t i = 0; list && i < x->n_consts; i++)
        list[(*n)++] = x->consts[i];
    for (size_t i = 0; list && i < e->n; i++) {
        const safetensors_tensor *s = &e->tensors[i];
        if (s->dtype != SAFETENSORS_F32)
            continue;
        Onnx__TensorProto *t = own(x, malloc(sizeof *t));
        int64_t *dims = own(x, malloc(((size_t)s->ndim + 1) * sizeof *dims));
        if (!t || !dims)
            return NULL;
        *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
        size_t count = 1;
        for (int d = 0; d < s->ndim; d++) {
            dims[d] = s->shape[d];
            count *= (size_t)s->shape[d];
        }
        t->dims = dims;
        t->n_dims = (size_t)s->ndim;
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->name = str(x, s->name);
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)s->data;
        t->raw_data.len = count * sizeof(float);
        list[(*n)++] = t;
    }
    return list;
}

int export_onnx_write(const model *m, const export_set *e, const export_onnx_prep *prep,
                      const safetensors_meta *metadata, size_t n, const char *path, char *err)
{
    ox x = {.cur = "input"};
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    export_onnx_prep none = {.pixel_scale = 1.0f};
    prep = prep ? prep : &none;
    size_t want = m->image_input ? (size_t)m->in_c : (size_t)m->inputs;
    if ((prep->mean || prep->std) && (!prep->mean || !prep->std || prep->n != want))
        return err_set(err, -EINVAL, "the standardisation has %zu values; model.onnx wants %zu",
                       prep->n, want);
    preprocess(&x, m, prep);
    size_t n_prep = x.n_nodes;
    layers(&x, m, json_object_get(e->config, "layers"));

    /* what :predict takes: [batch, height, width, channels] pixels, or [batch, features] */
    int64_t in_dims[4] = {0, 0, 0, m->in_c}, out_dims[2] = {0, m->outputs};
    const char *dim_names[] = {"batch", "height", "width", NULL};
    if (!m->image_input)
        in_dims[1] = m->inputs;
    Onnx__ValueInfoProto *in[] = {
        value_info(&x, "input", in_dims, dim_names, m->image_input ? 4 : 2)};
    Onnx__ValueInfoProto *out[] = {value_info(&x, x.cur, out_dims, dim_names, 2)};
    if (in[0])
        in[0]->doc_string = m->image_input
                                ? "pixels as stored (0-255 for 8-bit images), any height and "
                                  "width: the graph resizes, scales and standardises them"
                                : "raw feature values: the graph standardises them";
    /* The last node's output is the graph's; it is renamed "output" for readers. */
    if (x.n_nodes > n_prep && out[0]) {
        Onnx__NodeProto *last = x.nodes[x.n_nodes - 1];
        last->output[0] = str(&x, "output");
        out[0]->name = last->output[0];
    }
    Onnx__StringStringEntryProto *props = own(&x, calloc(n + 2, sizeof *props));
    Onnx__StringStringEntryProto **prop_list = own(&x, calloc(n + 2, sizeof *prop_list));
    size_t n_props = 0;
    for (size_t i = 0; props && prop_list && i < n && metadata[i].key; i++) {
        props[n_props] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        props[n_props].key = (char *)metadata[i].key;
        props[n_props].value = (char *)metadata[i].value;
        prop_list[n_props] = &props[n_props];
        n_props++;
    }
    char *steps = own(&x, preprocessing_json(m, prep));
    if (props && prop_list && steps) {
        props[n_props] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        props[n_props].key = "trainyard.preprocessing";
        props[n_props].value = steps;
        prop_list[n_props] = &props[n_props];
        n_props++;
    }
    size_t n_init = 0;
    Onnx__TensorProto **init = initializers(&x, e, &n_init);
    if (x.failed || x.n_nodes == n_prep || !in[0] || !out[0] || !init) {
        int none_left = !x.failed && x.n_nodes == n_prep;
        ox_free(&x);
        return err_set(err, none_left ? -EINVAL : -ENOMEM,
                       none_left ? "the model has no layer to write as ONNX"
                                 : "out of memory writing model.onnx");
    }
    g.node = x.nodes;
    g.n_node = x.n_nodes;
    g.name = "trainyard";
    g.initializer = init;
    g.n_initializer = n_init;
    g.input = in;
    g.n_input = 1;
    g.output = out;
    g.n_output = 1;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = EXPORT_ONNX_OPSET;
    mp.has_ir_version = 1;
    mp.ir_version = ONNX_IR_VERSION;
    mp.producer_name = "trainyard";
    mp.producer_version = TRAINYARD_VERSION;
    mp.doc_string = "trainyard model: takes what :predict takes, the job's preprocessing applied "
                    "inside (metadata trainyard.preprocessing)";
    mp.graph = &g;
    mp.opset_import = opsets;
    mp.n_opset_import = 1;
    mp.metadata_props = prop_list;
    mp.n_metadata_props = n_props;

    size_t len = onnx__model_proto__get_packed_size(&mp);
    uint8_t *buf = malloc(len ? len : 1);
    int rc = buf ? 0 : err_set(err, -ENOMEM, "out of memory writing model.onnx");
    if (rc == 0 && onnx__model_proto__pack(&mp, buf) != len)
        rc = err_set(err, -EIO, "model.onnx did not pack to its own size");
    if (rc == 0)
        rc = writefile(path, buf, len, err);
    free(buf);
    ox_free(&x);
    return rc;
}
