/* fuzz_tfs: libFuzzer target for what a gRPC client sends predict/grpc.c: a PredictRequest
 * decoded by protobuf-c from our tf_serving.proto and each input tensor turned into floats by
 * predict/tfs_msg.c; and a GetModelMetadataRequest.
 *
 * Input: the message bytes as they arrive in a gRPC call's body.
 * Properties, on success: 2..TFS_MAX_DIMS dimensions, each ≥ 1, their product ≤ the cap; every
 * value can be read; the values encoded as a PredictResponse and decoded again are the same bits.
 * On failure: -EINVAL or -ENOMEM and a sentence. Never a crash or a leak. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict/tfs_msg.h"
#include "util/err.h"

#define FUZZ_CAP (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_tfs: %s\n", what);
    abort();
}

static void fuzz_tensor(const Tensorflow__TensorProto *t, const char *name)
{
    char err[ERR_LEN] = "";
    float *v = NULL;
    int64_t dims[TFS_MAX_DIMS];
    int nd = 0;
    int rc = tfs_tensor_floats(t, name, FUZZ_CAP, &v, dims, &nd, err);
    if (rc < 0) {
        if ((rc != -EINVAL && rc != -ENOMEM) || !err[0] || v)
            fuzz_fail("a refusal without its code or sentence");
        return;
    }
    if (nd < 2 || nd > TFS_MAX_DIMS)
        fuzz_fail("a dimension count out of range");
    size_t count = 1;
    for (int i = 0; i < nd; i++) {
        if (dims[i] < 1 || (uint64_t)dims[i] > FUZZ_CAP)
            fuzz_fail("a dimension out of range");
        count *= (size_t)dims[i];
        if (count > FUZZ_CAP)
            fuzz_fail("more values than the cap");
    }
    volatile float sink = 0;
    for (size_t i = 0; i < count; i++)
        sink += v[i];
    (void)sink;
    size_t n = (size_t)dims[0];
    uint8_t *buf = NULL;
    size_t len = 0;
    if (tfs_predict_response("m", 1, v, n, (int)(count / n), &buf, &len) == 0) {
        Tensorflow__Serving__PredictResponse *r =
            tensorflow__serving__predict_response__unpack(NULL, len, buf);
        if (!r || r->n_outputs != 1 || r->outputs[0]->value->tensor_content.len != count * 4)
            fuzz_fail("our own PredictResponse does not decode");
        float *back = NULL;
        int64_t bdims[TFS_MAX_DIMS];
        int bnd = 0;
        if (tfs_tensor_floats(r->outputs[0]->value, "outputs", FUZZ_CAP, &back, bdims, &bnd, err) <
                0 ||
            memcmp(back, v, count * sizeof *v) != 0)
            fuzz_fail("the response's values differ from the request's");
        free(back);
        tensorflow__serving__predict_response__free_unpacked(r, NULL);
        free(buf);
    }
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Tensorflow__Serving__PredictRequest *req =
        tensorflow__serving__predict_request__unpack(NULL, size, data);
    if (req) {
        for (size_t i = 0; i < req->n_inputs; i++)
            fuzz_tensor(req->inputs[i]->value, req->inputs[i]->key);
        tensorflow__serving__predict_request__free_unpacked(req, NULL);
    }
    Tensorflow__Serving__GetModelMetadataRequest *meta =
        tensorflow__serving__get_model_metadata_request__unpack(NULL, size, data);
    if (meta)
        tensorflow__serving__get_model_metadata_request__free_unpacked(meta, NULL);
    return 0;
}
