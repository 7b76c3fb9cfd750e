/* predict/tfs_msg: TensorFlow Serving's messages for predict/grpc.c (see tfs_msg.h).
 *
 * Decoding: a TensorProto carries its values either as tensor_content (row-major,
 * little-endian, the dtype's width each) or in the dtype's repeated field; TensorFlow reads one
 * value in that field as the whole shape filled with it, so we do too. Every count is checked
 * against the shape before a byte is read, and the shape's product against the caller's cap,
 * so no allocation grows past what the caller allows.
 *
 * Encoding: the response messages are built on the stack (protobuf-c structs pointing at our
 * strings and arrays) and packed once into a malloc'd buffer; nothing else is allocated. */
#include "predict/tfs_msg.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static const char *dtype_name(int dtype)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&tensorflow__data_type__descriptor, dtype);
    return v ? v->name : "an unknown dtype";
}

/* Little-endian loads, whatever the host's order. */
static uint64_t load_le(const uint8_t *p, size_t width)
{
    uint64_t v = 0;
    for (size_t i = width; i > 0; i--)
        v = v << 8 | p[i - 1];
    return v;
}

static float content_value(int dtype, const uint8_t *p)
{
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
    switch (dtype) {
    case TENSORFLOW__DATA_TYPE__DT_FLOAT:
        u32 = (uint32_t)load_le(p, 4);
        memcpy(&f, &u32, sizeof f);
        return f;
    case TENSORFLOW__DATA_TYPE__DT_DOUBLE:
        u64 = load_le(p, 8);
        memcpy(&d, &u64, sizeof d);
        return (float)d;
    case TENSORFLOW__DATA_TYPE__DT_INT32:
        return (float)(int32_t)(uint32_t)load_le(p, 4);
    case TENSORFLOW__DATA_TYPE__DT_INT64:
        return (float)(int64_t)load_le(p, 8);
    default: /* DT_UINT8 */
        return (float)p[0];
    }
}

/* The dtype's repeated field: its name and count; field_value reads its i-th value. */
static size_t field_count(const Tensorflow__TensorProto *t, const char **field)
{
    switch (t->dtype) {
    case TENSORFLOW__DATA_TYPE__DT_FLOAT:
        *field = "float_val";
        return t->n_float_val;
    case TENSORFLOW__DATA_TYPE__DT_DOUBLE:
        *field = "double_val";
        return t->n_double_val;
    case TENSORFLOW__DATA_TYPE__DT_INT64:
        *field = "int64_val";
        return t->n_int64_val;
    default: /* DT_INT32, DT_UINT8 */
        *field = "int_val";
        return t->n_int_val;
    }
}

static float field_value(const Tensorflow__TensorProto *t, size_t i)
{
    switch (t->dtype) {
    case TENSORFLOW__DATA_TYPE__DT_FLOAT:
        return t->float_val[i];
    case TENSORFLOW__DATA_TYPE__DT_DOUBLE:
        return (float)t->double_val[i];
    case TENSORFLOW__DATA_TYPE__DT_INT64:
        return (float)t->int64_val[i];
    case TENSORFLOW__DATA_TYPE__DT_UINT8:
        return (float)(uint8_t)t->int_val[i];
    default:
        return (float)t->int_val[i];
    }
}

static size_t dtype_width(int dtype)
{
    switch (dtype) {
    case TENSORFLOW__DATA_TYPE__DT_FLOAT:
    case TENSORFLOW__DATA_TYPE__DT_INT32:
        return 4;
    case TENSORFLOW__DATA_TYPE__DT_DOUBLE:
    case TENSORFLOW__DATA_TYPE__DT_INT64:
        return 8;
    case TENSORFLOW__DATA_TYPE__DT_UINT8:
        return 1;
    default:
        return 0;
    }
}

int tfs_tensor_floats(const Tensorflow__TensorProto *t, const char *name, size_t max_values,
                      float **vals, int64_t *dims, int *ndim, char *err)
{
    if (!t)
        return err_set(err, -EINVAL, "inputs[\"%s\"] holds no tensor", name);
    size_t width = dtype_width(t->dtype);
    if (width == 0)
        return err_set(err, -EINVAL,
                       "inputs[\"%s\"].dtype is %s; expected DT_FLOAT, DT_DOUBLE, DT_INT32, "
                       "DT_INT64 or DT_UINT8",
                       name, dtype_name(t->dtype));
    size_t nd = t->tensor_shape ? t->tensor_shape->n_dim : 0;
    if (nd < 2 || nd > TFS_MAX_DIMS)
        return err_set(err, -EINVAL,
                       "inputs[\"%s\"].tensor_shape has %zu dimensions; expected [N, features] "
                       "or [N, height, width, channels] (at most %d)",
                       name, nd, TFS_MAX_DIMS);
    size_t count = 1;
    int64_t shape[TFS_MAX_DIMS];
    for (size_t i = 0; i < nd; i++) {
        int64_t size = t->tensor_shape->dim[i]->size;
        if (size < 1)
            return err_set(err, -EINVAL,
                           "inputs[\"%s\"].tensor_shape.dim[%zu].size is %lld; every dimension "
                           "must be at least 1",
                           name, i, (long long)size);
        if ((uint64_t)size > max_values / count)
            return err_set(err, -EINVAL, "inputs[\"%s\"] holds more than %zu values", name,
                           max_values);
        count *= (size_t)size;
        shape[i] = size;
    }

    const char *field = "tensor_content";
    size_t have = 0;
    if (t->tensor_content.len > 0) {
        if (t->tensor_content.len != count * width)
            return err_set(err, -EINVAL,
                           "inputs[\"%s\"].tensor_content has %zu bytes; its shape and %s need "
                           "%zu",
                           name, t->tensor_content.len, dtype_name(t->dtype), count * width);
    } else {
        have = field_count(t, &field);
        if (have != count && have != 1)
            return err_set(err, -EINVAL,
                           "inputs[\"%s\"].%s has %zu values; its tensor_shape needs %zu", name,
                           field, have, count);
    }
    float *v = malloc(count * sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory for %zu input values", count);
    for (size_t i = 0; i < count; i++) {
        if (t->tensor_content.len > 0)
            v[i] = content_value(t->dtype, t->tensor_content.data + i * width);
        else
            v[i] = field_value(t, have == 1 ? 0 : i);
    }
    memcpy(dims, shape, nd * sizeof *dims);
    *ndim = (int)nd;
    *vals = v;
    return 0;
}

/* Packs msg into a new buffer. */
static int pack(const ProtobufCMessage *msg, uint8_t **buf, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return -ENOMEM;
    protobuf_c_message_pack(msg, b);
    *buf = b;
    *len = n;
    return 0;
}

static void model_spec_fill(Tensorflow__Serving__ModelSpec *spec, Google__Protobuf__Int64Value *v,
                            const char *name, int64_t version)
{
    v->value = version;
    spec->name = (char *)name;
    spec->signature_name = (char *)TFS_SIGNATURE;
    spec->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    spec->version = v;
}

int tfs_predict_response(const char *name, int64_t version, const float *out, size_t n, int k,
                         uint8_t **buf, size_t *len)
{
    size_t count = n * (size_t)k;
    uint8_t *content = malloc(count ? count * 4 : 1);
    if (!content)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &out[i], 4);
        for (int b = 0; b < 4; b++)
            content[i * 4 + b] = (uint8_t)(u >> (8 * b));
    }
    Tensorflow__TensorShapeProto__Dim d0 = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim d1 = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dimv[2] = {&d0, &d1};
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    d0.size = (int64_t)n;
    d1.size = k;
    shape.n_dim = 2;
    shape.dim = dimv;
    Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tensor.tensor_shape = &shape;
    tensor.tensor_content.data = content;
    tensor.tensor_content.len = count * 4;
    Tensorflow__Serving__PredictResponse__OutputsEntry entry =
        TENSORFLOW__SERVING__PREDICT_RESPONSE__OUTPUTS_ENTRY__INIT;
    Tensorflow__Serving__PredictResponse__OutputsEntry *entries[1] = {&entry};
    entry.key = (char *)TFS_OUTPUT;
    entry.value = &tensor;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Google__Protobuf__Int64Value v = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
    model_spec_fill(&spec, &v, name, version);
    Tensorflow__Serving__PredictResponse resp = TENSORFLOW__SERVING__PREDICT_RESPONSE__INIT;
    resp.model_spec = &spec;
    resp.n_outputs = 1;
    resp.outputs = entries;
    int rc = pack(&resp.base, buf, len);
    free(content);
    return rc;
}

/* A TensorInfo named name, DT_FLOAT, shape [-1, dims...]. */
static void tensor_info_fill(Tensorflow__TensorInfo *ti, Tensorflow__TensorShapeProto *shape,
                             Tensorflow__TensorShapeProto__Dim *dim,
                             Tensorflow__TensorShapeProto__Dim **dimv, const char *name,
                             const int *sizes, int n)
{
    for (int i = 0; i <= n; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dim[i]);
        dim[i].size = i == 0 ? -1 : sizes[i - 1];
        dimv[i] = &dim[i];
    }
    tensorflow__tensor_shape_proto__init(shape);
    shape->n_dim = (size_t)n + 1;
    shape->dim = dimv;
    tensorflow__tensor_info__init(ti);
    ti->name = (char *)name;
    ti->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    ti->tensor_shape = shape;
}

int tfs_metadata_response(const char *name, int64_t version, const predict_info *in, uint8_t **buf,
                          size_t *len)
{
    int in_sizes[3] = {in->in_h, in->in_w, in->in_c};
    int n_in = 3;
    if (!in->image) {
        in_sizes[0] = in->inputs;
        n_in = 1;
    }
    Tensorflow__TensorShapeProto__Dim in_dim[4], out_dim[2];
    Tensorflow__TensorShapeProto__Dim *in_dimv[4], *out_dimv[2];
    Tensorflow__TensorShapeProto in_shape, out_shape;
    Tensorflow__TensorInfo in_info, out_info;
    tensor_info_fill(&in_info, &in_shape, in_dim, in_dimv, TFS_INPUT, in_sizes, n_in);
    tensor_info_fill(&out_info, &out_shape, out_dim, out_dimv, TFS_OUTPUT, &in->outputs, 1);

    Tensorflow__SignatureDef__InputsEntry ie = TENSORFLOW__SIGNATURE_DEF__INPUTS_ENTRY__INIT;
    Tensorflow__SignatureDef__OutputsEntry oe = TENSORFLOW__SIGNATURE_DEF__OUTPUTS_ENTRY__INIT;
    Tensorflow__SignatureDef__InputsEntry *iev[1] = {&ie};
    Tensorflow__SignatureDef__OutputsEntry *oev[1] = {&oe};
    ie.key = (char *)TFS_INPUT;
    ie.value = &in_info;
    oe.key = (char *)TFS_OUTPUT;
    oe.value = &out_info;
    Tensorflow__SignatureDef sig = TENSORFLOW__SIGNATURE_DEF__INIT;
    sig.n_inputs = 1;
    sig.inputs = iev;
    sig.n_outputs = 1;
    sig.outputs = oev;
    sig.method_name = (char *)TFS_METHOD_PREDICT;

    Tensorflow__Serving__SignatureDefMap__SignatureDefEntry se =
        TENSORFLOW__SERVING__SIGNATURE_DEF_MAP__SIGNATURE_DEF_ENTRY__INIT;
    Tensorflow__Serving__SignatureDefMap__SignatureDefEntry *sev[1] = {&se};
    se.key = (char *)TFS_SIGNATURE;
    se.value = &sig;
    Tensorflow__Serving__SignatureDefMap map = TENSORFLOW__SERVING__SIGNATURE_DEF_MAP__INIT;
    map.n_signature_def = 1;
    map.signature_def = sev;
    uint8_t *packed;
    size_t packed_len;
    int rc = pack(&map.base, &packed, &packed_len);
    if (rc < 0)
        return rc;

    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = (char *)"type.googleapis.com/tensorflow.serving.SignatureDefMap";
    any.value.data = packed;
    any.value.len = packed_len;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry me =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__METADATA_ENTRY__INIT;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry *mev[1] = {&me};
    me.key = (char *)"signature_def";
    me.value = &any;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Google__Protobuf__Int64Value v = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
    model_spec_fill(&spec, &v, name, version);
    Tensorflow__Serving__GetModelMetadataResponse resp =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__INIT;
    resp.model_spec = &spec;
    resp.n_metadata = 1;
    resp.metadata = mev;
    rc = pack(&resp.base, buf, len);
    free(packed);
    return rc;
}
