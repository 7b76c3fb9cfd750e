/* predict/tfs_msg: TensorFlow Serving's messages as predict/grpc.c reads and writes them — an
 * input TensorProto to floats, and the PredictResponse and GetModelMetadataResponse encodings.
 * No gRPC here: the messages are protobuf-c structs (tf_serving.proto) and malloc'd bytes. */
#ifndef TRAINYARD_PREDICT_TFS_MSG_H
#define TRAINYARD_PREDICT_TFS_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "predict/predict.h"
#include "predict/tf_serving.pb-c.h"

#define TFS_MAX_DIMS       8
#define TFS_SIGNATURE      "serving_default"
#define TFS_INPUT          "inputs"
#define TFS_OUTPUT         "outputs"
#define TFS_METHOD_PREDICT "tensorflow/serving/predict"

/* The values of tensor t (the request's input named name) as floats: *vals (malloc'd, the
 * caller frees) holds the product of dims[0..*ndim-1] values. DT_FLOAT, DT_DOUBLE, DT_INT32,
 * DT_INT64 or DT_UINT8, in tensor_content or the dtype's *_val field (one value fills the
 * shape, as TensorFlow reads it); at least 2 dims, each ≥ 1, at most max_values values.
 * -EINVAL with a sentence naming the field otherwise; -ENOMEM. */
int tfs_tensor_floats(const Tensorflow__TensorProto *t, const char *name, size_t max_values,
                      float **vals, int64_t *dims, int *ndim, char *err);

/* PredictResponse { outputs: {"outputs": DT_FLOAT [n, k] of out}, model_spec: name, version,
 * "serving_default" } encoded into *buf (malloc'd, the caller frees) of *len bytes. */
int tfs_predict_response(const char *name, int64_t version, const float *out, size_t n, int k,
                         uint8_t **buf, size_t *len);

/* GetModelMetadataResponse with metadata["signature_def"]: a SignatureDefMap whose
 * "serving_default" takes "inputs" (DT_FLOAT [-1, features] or [-1, h, w, c]) and gives
 * "outputs" (DT_FLOAT [-1, outputs]); encoded into *buf (malloc'd) of *len bytes. */
int tfs_metadata_response(const char *name, int64_t version, const predict_info *in, uint8_t **buf,
                          size_t *len);

#endif
