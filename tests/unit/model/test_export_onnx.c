/* Unit tests of model/export_onnx: model.onnx read back with protobuf-c (ONNX's own messages),
 * its shape and its preprocessing. The preprocessing part of the graph (up to "preprocessed")
 * is run here by a small interpreter of the operators it uses (numpy's broadcasting, float32
 * and int64 as ONNX defines them) and must give what predict/ gives bit for bit:
 * dataset_standardize() on CSV rows, ref_image_batch() on images of other sizes than the
 * model's (smaller, larger, one pixel, the same). Then: the first layer reads "preprocessed"
 * (or "input" when there is nothing to do), the input's dimensions are what :predict takes, the
 * metadata says the steps, and a standardisation of the wrong length is refused. No device. */
#include "model/export_onnx.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "kernels/ref.h"
#include "model/onnx.pb-c.h"
#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-onnx-XXXXXX";
static char path[128];

/* ---- the interpreter ------------------------------------------------------------------- */

#define MAX_VALUES 160

typedef struct tensor {
    char name[48];
    int is_int; /* int64, else float32 */
    int ndim;
    int64_t dims[4];
    size_t n;
    float *f;
    int64_t *i;
} tensor;

typedef struct values {
    tensor t[MAX_VALUES];
    size_t n;
} values;

static tensor *find(values *v, const char *name)
{
    for (size_t k = 0; k < v->n; k++)
        if (!strcmp(v->t[k].name, name))
            return &v->t[k];
    return NULL;
}

static tensor *add(values *v, const char *name, int is_int, int ndim, const int64_t *dims)
{
    if (v->n == MAX_VALUES || ndim > 4)
        return NULL;
    tensor *t = &v->t[v->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->is_int = is_int;
    t->ndim = ndim;
    t->n = 1;
    for (int d = 0; d < ndim; d++) {
        t->dims[d] = dims[d];
        t->n *= (size_t)dims[d];
    }
    if (is_int)
        t->i = calloc(t->n + 1, sizeof *t->i);
    else
        t->f = calloc(t->n + 1, sizeof *t->f);
    return t;
}

static void values_free(values *v)
{
    for (size_t k = 0; k < v->n; k++) {
        free(v->t[k].f);
        free(v->t[k].i);
    }
}

static int64_t attr_i(const Onnx__NodeProto *nd, const char *name, int64_t dflt)
{
    for (size_t k = 0; k < nd->n_attribute; k++)
        if (!strcmp(nd->attribute[k]->name, name))
            return nd->attribute[k]->i;
    return dflt;
}

static const Onnx__AttributeProto *attr_of(const Onnx__NodeProto *nd, const char *name)
{
    for (size_t k = 0; k < nd->n_attribute; k++)
        if (!strcmp(nd->attribute[k]->name, name))
            return nd->attribute[k];
    return NULL;
}

/* The element of a that output coordinates c (of ndim dimensions) read under broadcasting. */
static size_t broadcast_index(const tensor *a, const int64_t *c, int ndim)
{
    size_t idx = 0;
    for (int d = 0; d < a->ndim; d++) {
        int64_t coord = c[ndim - a->ndim + d];
        idx = idx * (size_t)a->dims[d] + (size_t)(a->dims[d] == 1 ? 0 : coord);
    }
    return idx;
}

static float binary_f(const char *op, float x, float y)
{
    if (!strcmp(op, "Add"))
        return x + y;
    if (!strcmp(op, "Sub"))
        return x - y;
    if (!strcmp(op, "Mul"))
        return x * y;
    if (!strcmp(op, "Div"))
        return x / y;
    if (!strcmp(op, "Max"))
        return x > y ? x : y;
    return x < y ? x : y; /* Min */
}

static int64_t binary_i(const char *op, int64_t x, int64_t y)
{
    if (!strcmp(op, "Add"))
        return x + y;
    if (!strcmp(op, "Sub"))
        return x - y;
    if (!strcmp(op, "Max"))
        return x > y ? x : y;
    return x < y ? x : y; /* Min */
}

static int binary(values *v, const Onnx__NodeProto *nd, const tensor *a, const tensor *b)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    int known = 0;
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        known |= !strcmp(nd->op_type, ops[k]);
    if (!known || a->is_int != b->is_int)
        return -1;
    int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t dims[4];
    for (int d = 0; d < ndim; d++) {
        int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        dims[d] = x > y ? x : y;
    }
    tensor *o = add(v, nd->output[0], a->is_int, ndim, dims);
    if (!o)
        return -1;
    for (size_t k = 0; k < o->n; k++) {
        int64_t c[4];
        size_t rest = k;
        for (int d = ndim - 1; d >= 0; d--) {
            c[d] = (int64_t)(rest % (size_t)dims[d]);
            rest /= (size_t)dims[d];
        }
        size_t ia = broadcast_index(a, c, ndim), ib = broadcast_index(b, c, ndim);
        if (o->is_int)
            o->i[k] = binary_i(nd->op_type, a->i[ia], b->i[ib]);
        else
            o->f[k] = binary_f(nd->op_type, a->f[ia], b->f[ib]);
    }
    return 0;
}

static int gather(values *v, const Onnx__NodeProto *nd, const tensor *a, const tensor *idx)
{
    int axis = (int)attr_i(nd, "axis", 0), ndim = 0;
    int64_t dims[4];
    size_t outer = 1, inner = 1;
    if (!idx->is_int || axis >= a->ndim || a->ndim - 1 + idx->ndim > 4)
        return -1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)(dims[ndim++] = a->dims[d]);
    for (int d = 0; d < idx->ndim; d++)
        dims[ndim++] = idx->dims[d];
    for (int d = axis + 1; d < a->ndim; d++)
        inner *= (size_t)(dims[ndim++] = a->dims[d]);
    tensor *o = add(v, nd->output[0], a->is_int, ndim, dims);
    if (!o)
        return -1;
    size_t along = (size_t)a->dims[axis], at = 0;
    for (size_t x = 0; x < outer; x++)
        for (size_t k = 0; k < idx->n; k++) {
            if (idx->i[k] < 0 || (size_t)idx->i[k] >= along)
                return -1;
            size_t from = (x * along + (size_t)idx->i[k]) * inner;
            for (size_t y = 0; y < inner; y++, at++) {
                if (o->is_int)
                    o->i[at] = a->i[from + y];
                else
                    o->f[at] = a->f[from + y];
            }
        }
    return 0;
}

static int transpose(values *v, const Onnx__NodeProto *nd, const tensor *a)
{
    const Onnx__AttributeProto *p = attr_of(nd, "perm");
    if (!p || (int)p->n_ints != a->ndim || a->is_int)
        return -1;
    int64_t dims[4], strides[4], s = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= a->dims[d];
    }
    for (int d = 0; d < a->ndim; d++)
        dims[d] = a->dims[p->ints[d]];
    tensor *o = add(v, nd->output[0], 0, a->ndim, dims);
    if (!o)
        return -1;
    for (size_t k = 0; k < o->n; k++) {
        size_t rest = k, from = 0;
        for (int d = a->ndim - 1; d >= 0; d--) {
            from += (rest % (size_t)dims[d]) * (size_t)strides[p->ints[d]];
            rest /= (size_t)dims[d];
        }
        o->f[k] = a->f[from];
    }
    return 0;
}

/* a's elements into o, made of a's count and kind: 0, or -1 when o is missing or another size. */
static int copy_elements(tensor *o, const tensor *a)
{
    if (!o || o->n != a->n)
        return -1;
    if (a->is_int)
        memcpy(o->i, a->i, a->n * sizeof *o->i);
    else
        memcpy(o->f, a->f, a->n * sizeof *o->f);
    return 0;
}

/* A copy of a under name (Identity, and an If's branch output). */
static int copy_as(values *v, const char *name, const tensor *a)
{
    return copy_elements(add(v, name, a->is_int, a->ndim, a->dims), a);
}

static int run_node(values *v, const Onnx__NodeProto *nd);

/* If: the branch cond (one bool, kept as an int) picks runs over the outer values. */
static int run_if(values *v, const Onnx__NodeProto *nd, const tensor *cond)
{
    const Onnx__AttributeProto *at = attr_of(nd, cond->i[0] ? "then_branch" : "else_branch");
    if (!cond->is_int || cond->n != 1 || !at || !at->g || at->g->n_output != 1)
        return -1;
    for (size_t k = 0; k < at->g->n_node; k++)
        if (run_node(v, at->g->node[k]) < 0)
            return -1;
    const tensor *out = find(v, at->g->output[0]->name);
    return out ? copy_as(v, nd->output[0], out) : -1;
}

/* Runs one node; -1 for an operator or shape the preprocessing should not have. Booleans are
 * int64 0 and 1. */
static int run_node(values *v, const Onnx__NodeProto *nd)
{
    const char *op = nd->op_type;
    tensor *a = nd->n_input > 0 ? find(v, nd->input[0]) : NULL;
    tensor *b = nd->n_input > 1 ? find(v, nd->input[1]) : NULL;
    if (!a || (nd->n_input > 1 && !b) || nd->n_output != 1)
        return -1;
    if (!strcmp(op, "If"))
        return run_if(v, nd, a);
    if (!strcmp(op, "Identity"))
        return copy_as(v, nd->output[0], a);
    if (!strcmp(op, "Equal")) {
        tensor *o = b && a->is_int && b->is_int && a->n == b->n
                        ? add(v, nd->output[0], 1, a->ndim, a->dims)
                        : NULL;
        for (size_t k = 0; o && k < o->n; k++)
            o->i[k] = a->i[k] == b->i[k];
        return o ? 0 : -1;
    }
    if (!strcmp(op, "ReduceMin")) { /* over every axis, keepdims 0: a scalar */
        tensor *o = a->is_int && attr_i(nd, "keepdims", 1) == 0 && !attr_of(nd, "axes")
                        ? add(v, nd->output[0], 1, 0, NULL)
                        : NULL;
        for (size_t k = 0; o && k < a->n; k++)
            o->i[0] = k == 0 || a->i[k] < o->i[0] ? a->i[k] : o->i[0];
        return o ? 0 : -1;
    }
    if (!strcmp(op, "Shape")) {
        int64_t n = a->ndim;
        tensor *o = add(v, nd->output[0], 1, 1, &n);
        for (int d = 0; o && d < a->ndim; d++)
            o->i[d] = a->dims[d];
        return o ? 0 : -1;
    }
    if (!strcmp(op, "Cast")) {
        int64_t to = attr_i(nd, "to", 0);
        int to_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
        int to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || to_bool;
        tensor *o = add(v, nd->output[0], to_int, a->ndim, a->dims);
        for (size_t k = 0; o && k < o->n; k++) {
            if (to_bool)
                o->i[k] = a->is_int ? a->i[k] != 0 : a->f[k] != 0;
            else if (to_int)
                o->i[k] = a->is_int ? a->i[k] : (int64_t)a->f[k];
            else
                o->f[k] = a->is_int ? (float)a->i[k] : a->f[k];
        }
        return o ? 0 : -1;
    }
    if (!strcmp(op, "Reshape")) {
        tensor *o = b && b->is_int ? add(v, nd->output[0], a->is_int, (int)b->n, b->i) : NULL;
        return copy_elements(o, a);
    }
    if (!strcmp(op, "Gather"))
        return gather(v, nd, a, b);
    if (!strcmp(op, "Transpose"))
        return transpose(v, nd, a);
    return b ? binary(v, nd, a, b) : -1;
}

/* The graph's initializers into v. */
static void load_initializers(values *v, const Onnx__GraphProto *g)
{
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        int is_int = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        tensor *o = add(v, t->name, is_int, (int)t->n_dims, t->dims);
        CHECK(o != NULL);
        if (!o)
            return;
        size_t bytes = o->n * (is_int ? sizeof(int64_t) : sizeof(float));
        CHECK(t->raw_data.len == bytes);
        if (t->raw_data.len == bytes)
            memcpy(is_int ? (void *)o->i : (void *)o->f, t->raw_data.data, bytes);
    }
}

/* Runs mp's nodes on input until the value "preprocessed"; returns it (in v), NULL if the graph
 * has none or a node could not be run. */
static const tensor *preprocess(values *v, const Onnx__ModelProto *mp, const tensor *input)
{
    const Onnx__GraphProto *g = mp->graph;
    load_initializers(v, g);
    tensor *in = add(v, "input", 0, input->ndim, input->dims);
    if (!in)
        return NULL;
    memcpy(in->f, input->f, input->n * sizeof *in->f);
    for (size_t k = 0; k < g->n_node; k++) {
        if (run_node(v, g->node[k]) < 0) {
            fprintf(stderr, "node %zu (%s) could not be run\n", k, g->node[k]->op_type);
            return NULL;
        }
        if (!strcmp(g->node[k]->output[0], "preprocessed"))
            return find(v, "preprocessed");
    }
    return NULL;
}

/* ---- the models -------------------------------------------------------------------------- */

/* model.onnx of a planned model (no device) with zero weights and prep, read back; NULL when
 * the write failed (*rc says how). */
static Onnx__ModelProto *written(job_spec *job, int inputs, const export_onnx_prep *prep, int *rc)
{
    char err[ERR_LEN];
    model *m = NULL;
    export_set *e = NULL;
    Onnx__ModelProto *mp = NULL;
    const safetensors_meta meta[] = {{"trainyard.label", "y"}};
    CHECK_INT(model_plan(job, inputs, 3, MODEL_LOSS_SOFTMAX_XENT, &m, err), 0);
    float *params = calloc(m->n_params + 1, sizeof *params);
    float *stats = calloc(m->n_stats + 1, sizeof *stats);
    CHECK_INT(export_build(m, params, m->n_stats ? stats : NULL, &e, err), 0);
    unlink(path);
    *rc = export_onnx_write(m, e, prep, meta, 1, path, err);
    if (*rc == 0) {
        FILE *f = fopen(path, "rb");
        static uint8_t buf[1 << 20];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        mp = onnx__model_proto__unpack(NULL, len, buf);
        CHECK(mp != NULL);
    } else {
        CHECK(err[0] != '\0');
        CHECK(access(path, F_OK) != 0);
    }
    export_free(e);
    free(params);
    free(stats);
    free(m);
    return mp;
}

static const char *meta_get(const Onnx__ModelProto *mp, const char *key)
{
    for (size_t k = 0; k < mp->n_metadata_props; k++)
        if (!strcmp(mp->metadata_props[k]->key, key))
            return mp->metadata_props[k]->value;
    return NULL;
}

/* The first node that is not preprocessing: the first layer's. */
static const Onnx__NodeProto *first_layer(const Onnx__ModelProto *mp)
{
    for (size_t k = 0; k < mp->graph->n_node; k++)
        if (!strcmp(mp->graph->node[k]->op_type, "Gemm") ||
            !strcmp(mp->graph->node[k]->op_type, "Conv"))
            return mp->graph->node[k];
    return NULL;
}

static void check_input_dims(const Onnx__ModelProto *mp, const char *const *params,
                             const int64_t *dims, size_t n)
{
    const Onnx__ValueInfoProto *in = mp->graph->input[0];
    const Onnx__TensorShapeProto *s = in->type->tensor_type->shape;
    CHECK_STR(in->name, "input");
    CHECK_INT(s->n_dim, n);
    for (size_t d = 0; d < n && d < s->n_dim; d++) {
        if (params[d])
            CHECK_STR(s->dim[d]->dim_param, params[d]);
        else
            CHECK_INT(s->dim[d]->dim_value, dims[d]);
    }
}

static job_spec *dense_job(void)
{
    job_spec *j = calloc(1, sizeof *j);
    j->layers[0] = (job_layer){.type = JOB_LAYER_DENSE, .units = 4, .activation = JOB_ACT_RELU};
    j->n_layers = 1;
    return j;
}

/* CSV rows: (x − mean) / std as dataset_standardize() does, then the Gemm reads it. */
static void test_features(void)
{
    enum { ROWS = 5, F = 3 };
    const float mean[F] = {512.25f, -7.0625f, 0.3f}, std[F] = {61.5f, 0.0417f, 3.0f};
    export_onnx_prep prep = {.mean = mean, .std = std, .n = F};
    job_spec *job = dense_job();
    int rc;
    Onnx__ModelProto *mp = written(job, F, &prep, &rc);
    CHECK_INT(rc, 0);
    if (!mp) {
        free(job);
        return;
    }
    int64_t dims[2] = {ROWS, F};
    check_input_dims(mp, (const char *const[]){"batch", NULL}, dims, 2);
    values v = {0};
    tensor *x = add(&v, "x", 0, 2, dims);
    uint64_t s = 11;
    for (size_t k = 0; k < x->n; k++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x->f[k] = mean[k % F] + (float)((int)(s >> 40) % 2000 - 1000) * std[k % F] / 300.0f;
    }
    dataset d = {.rows = ROWS, .cols = F, .x = malloc(x->n * sizeof(float))};
    memcpy(d.x, x->f, x->n * sizeof(float));
    dataset_standardize(&d, mean, std);
    const tensor *got = preprocess(&v, mp, x);
    CHECK(got && got->n == x->n);
    if (got && got->n == x->n)
        CHECK(memcmp(got->f, d.x, x->n * sizeof(float)) == 0);
    const Onnx__NodeProto *gemm = first_layer(mp);
    CHECK(gemm && !strcmp(gemm->input[0], "preprocessed"));
    const char *steps = meta_get(mp, "trainyard.preprocessing");
    CHECK(steps && strstr(steps, "\"standardization\"") && !strstr(steps, "resize"));
    CHECK_STR(meta_get(mp, "trainyard.label"), "y");
    free(d.x);
    values_free(&v);
    onnx__model_proto__free_unpacked(mp, NULL);

    /* Without standardisation the network reads the input itself. */
    mp = written(job, F, NULL, &rc);
    CHECK_INT(rc, 0);
    if (mp) {
        gemm = first_layer(mp);
        CHECK(gemm && !strcmp(gemm->input[0], "input"));
        steps = meta_get(mp, "trainyard.preprocessing");
        CHECK(steps && strstr(steps, "\"steps\":[]") && strstr(steps, "\"preprocessed\":null"));
        onnx__model_proto__free_unpacked(mp, NULL);
    }
    /* A standardisation of another length than the features is refused, and nothing written. */
    prep.n = F - 1;
    CHECK(written(job, F, &prep, &rc) == NULL);
    CHECK_INT(rc, -EINVAL);
    free(job);
}

/* Images of sh×sw (any size) → the model's H×W: what ref_image_batch() gives, bit for bit. */
static void check_image(const Onnx__ModelProto *mp, int sh, int sw, int h, int w, int c,
                        float scale, const float *mean, const float *std)
{
    enum { N = 2 };
    values v = {0};
    int64_t dims[4] = {N, sh, sw, c};
    tensor *x = add(&v, "x", 0, 4, dims);
    uint64_t s = (uint64_t)(sh * 131 + sw);
    for (size_t k = 0; k < x->n; k++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x->f[k] = (float)((s >> 40) % 256);
    }
    float *want = malloc((size_t)N * (size_t)(h * w * c) * sizeof *want);
    int32_t idx[N] = {0, 1};
    kern_image g = {.n_src = N, .sh = sh, .sw = sw, .c = c, .dh = h, .dw = w, .scale = scale};
    ref_image_batch(&g, N, x->f, idx, 0, mean, std, want);
    const tensor *got = preprocess(&v, mp, x);
    CHECK(got && got->ndim == 4 && got->n == (size_t)N * (size_t)(h * w * c));
    int same = got && got->n == (size_t)N * (size_t)(h * w * c);
    for (int i = 0; same && i < N; i++) /* got is NCHW, want NHWC */
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++)
                for (int ch = 0; ch < c; ch++)
                    same &= got->f[(((size_t)i * c + ch) * h + y) * w + xx] ==
                            want[(((size_t)i * h + y) * w + xx) * c + ch];
    if (!same)
        fprintf(stderr, "%d×%d → %d×%d×%d differs from ref_image_batch\n", sh, sw, h, w, c);
    CHECK(same);
    free(want);
    values_free(&v);
}

static void test_images(void)
{
    const float mean[3] = {0.21f, 0.43f, 0.65f}, std[3] = {0.17f, 0.29f, 0.31f};
    const int sizes[][2] = {{4, 9}, {7, 13}, {1, 1}, {2, 30}, {23, 5}, {3, 4}};
    for (int c = 1; c <= 3; c += 2) {
        job_spec *job = dense_job();
        job->in_h = 4;
        job->in_w = 9;
        job->in_c = c;
        job->layers[0] = (job_layer){.type = JOB_LAYER_CONV2D,
                                     .filters = 2,
                                     .kh = 3,
                                     .kw = 3,
                                     .sh = 1,
                                     .sw = 1,
                                     .activation = JOB_ACT_RELU,
                                     .use_bias = 1};
        job->layers[1] = (job_layer){.type = JOB_LAYER_FLATTEN};
        job->n_layers = 2;
        export_onnx_prep prep = {.mean = c == 3 ? mean : NULL,
                                 .std = c == 3 ? std : NULL,
                                 .n = c == 3 ? 3 : 0,
                                 .pixel_scale = 1.0f / 255.0f};
        int rc;
        Onnx__ModelProto *mp = written(job, 4 * 9 * c, &prep, &rc);
        CHECK_INT(rc, 0);
        if (mp) {
            int64_t dims[4] = {0, 0, 0, c};
            check_input_dims(mp, (const char *const[]){"batch", "height", "width", NULL}, dims, 4);
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
                check_image(mp, sizes[k][0], sizes[k][1], 4, 9, c, prep.pixel_scale, prep.mean,
                            prep.std);
            const Onnx__NodeProto *conv = first_layer(mp);
            CHECK(conv && !strcmp(conv->input[0], "preprocessed"));
            const char *steps = meta_get(mp, "trainyard.preprocessing");
            CHECK(steps && strstr(steps, "\"to\":[4,9]") && strstr(steps, "pixel_scale"));
            CHECK(steps && (c == 3) == (strstr(steps, "standardization") != NULL));
            onnx__model_proto__free_unpacked(mp, NULL);
        }
        free(job);
    }
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    test_features();
    test_images();
    unlink(path);
    rmdir(dir);
    return check_exit();
}
