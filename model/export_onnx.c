/* export_onnx: see export_onnx.h. Every message, string and array is allocated into one list
 * and freed together after packing; the tensors' bytes are not copied (raw_data points at the
 * export's floats, little-endian as ONNX wants them on the machines trainyard runs on). */
#include "model/export_onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/err.h"
#include "util/writefile.h"
#include "model/onnx.pb-c.h"

#define ONNX_IR_VERSION 8 /* what opset 17 needs */
#define ONNX_MAX_NODES  (6 * (JOB_MAX_LAYERS + 1))

typedef struct ox {
    void **owned; /* everything allocated here, freed by ox_free */
    size_t n_owned, cap_owned;
    Onnx__NodeProto *nodes[ONNX_MAX_NODES];
    size_t n_nodes;
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

static char *str(ox *x, const char *s)
{
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

/* A node op_type(cur, extra...) with attrs; its output ("t<N>") becomes cur. A NULL extra input
 * is left out (a conv without bias). */
static void node(ox *x, const char *op, const char *const *extra, size_t n_extra,
                 Onnx__AttributeProto *const *attrs, size_t n_attrs)
{
    if (x->failed || x->n_nodes == ONNX_MAX_NODES) {
        x->failed = 1;
        return;
    }
    Onnx__NodeProto *n = own(x, malloc(sizeof *n));
    char **in = own(x, calloc(n_extra + 1, sizeof *in));
    char **out = own(x, calloc(1, sizeof *out));
    Onnx__AttributeProto **at = own(x, calloc(n_attrs + 1, sizeof *at));
    char name[32];
    snprintf(name, sizeof name, "t%zu", x->n_nodes);
    if (!n || !in || !out || !at)
        return;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    in[n->n_input++] = str(x, x->cur);
    for (size_t i = 0; i < n_extra; i++)
        if (extra[i])
            in[n->n_input++] = str(x, extra[i]);
    for (size_t i = 0; i < n_attrs; i++) {
        if (!attrs[i])
            x->failed = 1;
        at[i] = attrs[i];
    }
    out[0] = str(x, name);
    n->input = in;
    n->output = out;
    n->n_output = 1;
    n->op_type = str(x, op);
    n->name = str(x, name);
    n->attribute = at;
    n->n_attribute = n_attrs;
    x->cur = out[0];
    x->nodes[x->n_nodes++] = n;
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

/* A float tensor's type: ["batch", dims...]. */
static Onnx__ValueInfoProto *value_info(ox *x, const char *name, const int64_t *dims, size_t n)
{
    Onnx__ValueInfoProto *v = own(x, malloc(sizeof *v));
    Onnx__TypeProto *t = own(x, malloc(sizeof *t));
    Onnx__TypeProto__Tensor *tt = own(x, malloc(sizeof *tt));
    Onnx__TensorShapeProto *s = own(x, malloc(sizeof *s));
    Onnx__TensorShapeProto__Dimension **d = own(x, calloc(n + 1, sizeof *d));
    if (!v || !t || !tt || !s || !d)
        return NULL;
    for (size_t i = 0; i <= n; i++) {
        d[i] = own(x, malloc(sizeof *d[i]));
        if (!d[i])
            return NULL;
        *d[i] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (i == 0) {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[i]->dim_param = str(x, "batch");
        } else {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[i]->dim_value = dims[i - 1];
        }
    }
    *s = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    s->dim = d;
    s->n_dim = n + 1;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = s;
    *t = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    v->name = str(x, name);
    v->type = t;
    return v;
}

/* The export's float tensors as initializers (num_batches_tracked is PyTorch's alone). */
static Onnx__TensorProto **initializers(ox *x, const export_set *e, size_t *n)
{
    Onnx__TensorProto **list = own(x, calloc(e->n + 1, sizeof *list));
    *n = 0;
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

int export_onnx_write(const model *m, const export_set *e, const safetensors_meta *metadata,
                      size_t n, const char *path, char *err)
{
    ox x = {.cur = "input"};
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    layers(&x, m, json_object_get(e->config, "layers"));

    int64_t in_dims[3], out_dims[1] = {m->outputs};
    size_t n_in = 0;
    if (m->image_input) {
        in_dims[n_in++] = m->in_c; /* NCHW, as the nn.Sequential takes it */
        in_dims[n_in++] = m->in_h;
        in_dims[n_in++] = m->in_w;
    } else {
        in_dims[n_in++] = m->inputs;
    }
    Onnx__ValueInfoProto *in[] = {value_info(&x, "input", in_dims, n_in)};
    Onnx__ValueInfoProto *out[] = {value_info(&x, x.cur, out_dims, 1)};
    /* The last node's output is the graph's; it is renamed "output" for readers. */
    if (x.n_nodes > 0 && out[0]) {
        Onnx__NodeProto *last = x.nodes[x.n_nodes - 1];
        last->output[0] = str(&x, "output");
        out[0]->name = last->output[0];
    }
    Onnx__StringStringEntryProto *props = own(&x, calloc(n + 1, sizeof *props));
    Onnx__StringStringEntryProto **prop_list = own(&x, calloc(n + 1, sizeof *prop_list));
    size_t n_props = 0;
    for (size_t i = 0; props && prop_list && i < n && metadata[i].key; i++) {
        props[i] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        props[i].key = (char *)metadata[i].key;
        props[i].value = (char *)metadata[i].value;
        prop_list[n_props++] = &props[i];
    }
    size_t n_init = 0;
    Onnx__TensorProto **init = initializers(&x, e, &n_init);
    if (x.failed || x.n_nodes == 0 || !in[0] || !out[0] || !init) {
        ox_free(&x);
        return err_set(err, x.n_nodes == 0 ? -EINVAL : -ENOMEM,
                       x.n_nodes == 0 ? "the model has no layer to write as ONNX"
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
