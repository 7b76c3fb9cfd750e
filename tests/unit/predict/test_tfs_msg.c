/* tests for predict/tfs_msg: an input TensorProto in every dtype and both encodings (bytes in
 * tensor_content, values in the *_val field, one value filling the shape), each refusal naming
 * its field, the value cap checked before anything is allocated; and the two responses decoded
 * back as a client would (PredictResponse; GetModelMetadataResponse's Any holding the
 * SignatureDefMap). */
#include "predict/tfs_msg.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "util/err.h"

/* A tensor of dtype and shape dims[0..nd-1]; the caller sets its values. */
typedef struct tensor {
    Tensorflow__TensorProto t;
    Tensorflow__TensorShapeProto shape;
    Tensorflow__TensorShapeProto__Dim dim[TFS_MAX_DIMS + 1];
    Tensorflow__TensorShapeProto__Dim *dimv[TFS_MAX_DIMS + 1];
} tensor;

static void tensor_init(tensor *x, int dtype, const int64_t *dims, int nd)
{
    tensorflow__tensor_proto__init(&x->t);
    tensorflow__tensor_shape_proto__init(&x->shape);
    for (int i = 0; i < nd; i++) {
        tensorflow__tensor_shape_proto__dim__init(&x->dim[i]);
        x->dim[i].size = dims[i];
        x->dimv[i] = &x->dim[i];
    }
    x->shape.n_dim = (size_t)nd;
    x->shape.dim = x->dimv;
    x->t.dtype = dtype;
    x->t.tensor_shape = &x->shape;
}

/* Decodes x; returns the code, and the values in *vals (freed by the caller) on success. */
static int decode(const tensor *x, float **vals, int *ndim, char *err)
{
    int64_t dims[TFS_MAX_DIMS];
    err[0] = '\0';
    return tfs_tensor_floats(&x->t, "inputs", 1000, vals, dims, ndim, err);
}

static void test_content_in_every_dtype(void)
{
    char err[ERR_LEN];
    float *v = NULL;
    int nd = 0;
    int64_t d22[] = {2, 2};
    tensor x;

    /* DT_FLOAT: 1.5, -2, 0.25, 3 little-endian */
    static const uint8_t f32[] = {0, 0, 0xc0, 0x3f, 0, 0, 0,    0xc0,
                                  0, 0, 0x80, 0x3e, 0, 0, 0x40, 0x40};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d22, 2);
    x.t.tensor_content.data = (uint8_t *)f32;
    x.t.tensor_content.len = sizeof f32;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK_INT(nd, 2);
    CHECK(v && v[0] == 1.5f && v[1] == -2.0f && v[2] == 0.25f && v[3] == 3.0f);
    free(v);

    /* DT_DOUBLE: -0.5 (0xbfe0000000000000) in all four */
    uint8_t f64[32];
    for (int i = 0; i < 4; i++) {
        memset(f64 + 8 * i, 0, 8);
        f64[8 * i + 6] = 0xe0;
        f64[8 * i + 7] = 0xbf;
    }
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_DOUBLE, d22, 2);
    x.t.tensor_content.data = f64;
    x.t.tensor_content.len = sizeof f64;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == -0.5f && v[3] == -0.5f);
    free(v);

    /* DT_INT32 -3, DT_INT64 -70000, DT_UINT8 255 */
    static const uint8_t i32[] = {0xfd, 0xff, 0xff, 0xff};
    static const uint8_t i64[] = {0x90, 0xee, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t u8[] = {255};
    int64_t d11[] = {1, 1};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_INT32, d11, 2);
    x.t.tensor_content.data = (uint8_t *)i32;
    x.t.tensor_content.len = sizeof i32;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == -3.0f);
    free(v);
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_INT64, d11, 2);
    x.t.tensor_content.data = (uint8_t *)i64;
    x.t.tensor_content.len = sizeof i64;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == -70000.0f);
    free(v);
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_UINT8, d11, 2);
    x.t.tensor_content.data = (uint8_t *)u8;
    x.t.tensor_content.len = sizeof u8;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 255.0f);
    free(v);

    /* a byte too few names tensor_content and the bytes needed */
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d22, 2);
    x.t.tensor_content.data = (uint8_t *)f32;
    x.t.tensor_content.len = sizeof f32 - 1;
    v = NULL;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(v == NULL);
    CHECK(strstr(err, "inputs[\"inputs\"].tensor_content has 15 bytes") != NULL);
    CHECK(strstr(err, "need 16") != NULL);
}

static void test_value_fields(void)
{
    char err[ERR_LEN];
    float *v = NULL;
    int nd = 0;
    int64_t d23[] = {2, 3};
    tensor x;

    float fv[] = {1, 2, 3, 4, 5, 6};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d23, 2);
    x.t.float_val = fv;
    x.t.n_float_val = 6;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 1.0f && v[5] == 6.0f);
    free(v);

    /* one value fills the shape, as TensorFlow reads it */
    x.t.n_float_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 1.0f && v[5] == 1.0f);
    free(v);

    x.t.n_float_val = 4;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "inputs[\"inputs\"].float_val has 4 values; its tensor_shape needs 6"));

    /* uint8 and int32 in int_val, int64 in int64_val, double in double_val */
    int32_t iv[] = {511, -1, 7, 0, 1, 2};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_UINT8, d23, 2);
    x.t.int_val = iv;
    x.t.n_int_val = 6;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 255.0f && v[1] == 255.0f && v[2] == 7.0f);
    free(v);
    x.t.dtype = TENSORFLOW__DATA_TYPE__DT_INT32;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 511.0f && v[1] == -1.0f);
    free(v);
    int64_t lv[] = {-5};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_INT64, d23, 2);
    x.t.int64_val = lv;
    x.t.n_int64_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[4] == -5.0f);
    free(v);
    double dv[] = {0.125, 1, 2, 3, 4, 5};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_DOUBLE, d23, 2);
    x.t.double_val = dv;
    x.t.n_double_val = 2;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "double_val has 2 values") != NULL);
    x.t.n_double_val = 6;
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    CHECK(v && v[0] == 0.125f);
    free(v);
}

static void test_refusals(void)
{
    char err[ERR_LEN];
    float *v = NULL;
    int nd = 0;
    tensor x;
    float one = 1;

    int64_t d1[] = {4};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d1, 1);
    x.t.float_val = &one;
    x.t.n_float_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "tensor_shape has 1 dimensions; expected [N, features]") != NULL);

    int64_t d9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d9, 9);
    x.t.float_val = &one;
    x.t.n_float_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "tensor_shape has 9 dimensions") != NULL);

    int64_t d0[] = {3, 0};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d0, 2);
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "tensor_shape.dim[1].size is 0") != NULL);

    int64_t dneg[] = {-1, 2};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, dneg, 2);
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "dim[0].size is -1") != NULL);

    /* one value may not fill a shape past the cap (1000 here), nor may the product overflow */
    int64_t dbig[] = {1000000000, 1000000000, 1000000000};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, dbig, 3);
    x.t.float_val = &one;
    x.t.n_float_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "holds more than 1000 values") != NULL);
    int64_t d1001[] = {1001, 1};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_FLOAT, d1001, 2);
    x.t.float_val = &one;
    x.t.n_float_val = 1;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    int64_t d1000[] = {1000, 1};
    x.dim[0].size = d1000[0];
    CHECK_INT(decode(&x, &v, &nd, err), 0);
    free(v);

    int64_t d11[] = {1, 1};
    tensor_init(&x, TENSORFLOW__DATA_TYPE__DT_STRING, d11, 2);
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "inputs[\"inputs\"].dtype is DT_STRING") != NULL);
    x.t.dtype = 77;
    CHECK_INT(decode(&x, &v, &nd, err), -EINVAL);
    CHECK(strstr(err, "an unknown dtype") != NULL);

    int64_t dims[TFS_MAX_DIMS];
    CHECK_INT(tfs_tensor_floats(NULL, "x", 10, &v, dims, &nd, err), -EINVAL);
    CHECK(strstr(err, "inputs[\"x\"] holds no tensor") != NULL);
}

static void test_predict_response(void)
{
    float out[] = {0.25f, 0.75f, -1.0f, 2.0f, 3.5f, 1e-8f};
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_INT(tfs_predict_response("blobs", 4, out, 2, 3, &buf, &len), 0);
    Tensorflow__Serving__PredictResponse *r =
        tensorflow__serving__predict_response__unpack(NULL, len, buf);
    CHECK(r != NULL);
    if (r) {
        CHECK_STR(r->model_spec->name, "blobs");
        CHECK_STR(r->model_spec->signature_name, "serving_default");
        CHECK_INT(r->model_spec->version_choice_case,
                  TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION);
        CHECK_INT(r->model_spec->version->value, 4);
        CHECK_INT(r->n_outputs, 1);
        CHECK_STR(r->outputs[0]->key, "outputs");
        const Tensorflow__TensorProto *t = r->outputs[0]->value;
        CHECK_INT(t->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
        CHECK_INT(t->tensor_shape->n_dim, 2);
        CHECK_INT(t->tensor_shape->dim[0]->size, 2);
        CHECK_INT(t->tensor_shape->dim[1]->size, 3);
        CHECK_INT(t->tensor_content.len, sizeof out);
        /* read back through the decoder: the same floats */
        char err[ERR_LEN];
        float *v = NULL;
        int64_t dims[TFS_MAX_DIMS];
        int nd = 0;
        CHECK_INT(tfs_tensor_floats(t, "outputs", 100, &v, dims, &nd, err), 0);
        CHECK(v && memcmp(v, out, sizeof out) == 0);
        free(v);
        tensorflow__serving__predict_response__free_unpacked(r, NULL);
    }
    free(buf);
}

/* The SignatureDefMap of a metadata response, with the response's checks. */
static Tensorflow__Serving__SignatureDefMap *metadata_map(const predict_info *in, int64_t version)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_INT(tfs_metadata_response("m", version, in, &buf, &len), 0);
    Tensorflow__Serving__GetModelMetadataResponse *r =
        tensorflow__serving__get_model_metadata_response__unpack(NULL, len, buf);
    free(buf);
    CHECK(r != NULL);
    if (!r)
        return NULL;
    CHECK_STR(r->model_spec->name, "m");
    CHECK_INT(r->model_spec->version->value, version);
    CHECK_INT(r->n_metadata, 1);
    CHECK_STR(r->metadata[0]->key, "signature_def");
    const Google__Protobuf__Any *any = r->metadata[0]->value;
    CHECK_STR(any->type_url, "type.googleapis.com/tensorflow.serving.SignatureDefMap");
    Tensorflow__Serving__SignatureDefMap *map =
        tensorflow__serving__signature_def_map__unpack(NULL, any->value.len, any->value.data);
    tensorflow__serving__get_model_metadata_response__free_unpacked(r, NULL);
    CHECK(map != NULL);
    if (map) {
        CHECK_INT(map->n_signature_def, 1);
        CHECK_STR(map->signature_def[0]->key, "serving_default");
        const Tensorflow__SignatureDef *sig = map->signature_def[0]->value;
        CHECK_STR(sig->method_name, "tensorflow/serving/predict");
        CHECK_INT(sig->n_inputs, 1);
        CHECK_INT(sig->n_outputs, 1);
        CHECK_STR(sig->inputs[0]->key, "inputs");
        CHECK_STR(sig->outputs[0]->key, "outputs");
        CHECK_INT(sig->inputs[0]->value->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
        CHECK_INT(sig->outputs[0]->value->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    }
    return map;
}

static void check_shape(const Tensorflow__TensorInfo *ti, const int64_t *want, size_t n)
{
    CHECK_INT(ti->tensor_shape->n_dim, n);
    for (size_t i = 0; i < n && i < ti->tensor_shape->n_dim; i++)
        CHECK_INT(ti->tensor_shape->dim[i]->size, want[i]);
}

static void test_metadata_response(void)
{
    predict_info features = {
        .image = 0, .in_h = 1, .in_w = 1, .in_c = 5, .inputs = 5, .outputs = 3};
    Tensorflow__Serving__SignatureDefMap *map = metadata_map(&features, 2);
    if (map) {
        const Tensorflow__SignatureDef *sig = map->signature_def[0]->value;
        check_shape(sig->inputs[0]->value, (int64_t[]){-1, 5}, 2);
        check_shape(sig->outputs[0]->value, (int64_t[]){-1, 3}, 2);
        tensorflow__serving__signature_def_map__free_unpacked(map, NULL);
    }
    predict_info image = {
        .image = 1, .in_h = 28, .in_w = 24, .in_c = 3, .inputs = 28 * 24 * 3, .outputs = 1};
    map = metadata_map(&image, 9);
    if (map) {
        const Tensorflow__SignatureDef *sig = map->signature_def[0]->value;
        check_shape(sig->inputs[0]->value, (int64_t[]){-1, 28, 24, 3}, 4);
        check_shape(sig->outputs[0]->value, (int64_t[]){-1, 1}, 2);
        tensorflow__serving__signature_def_map__free_unpacked(map, NULL);
    }
}

int main(void)
{
    test_content_in_every_dtype();
    test_value_fields();
    test_refusals();
    test_predict_response();
    test_metadata_response();
    return check_exit();
}
