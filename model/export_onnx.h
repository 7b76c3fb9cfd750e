/* export_onnx: model.onnx, the trained network as an ONNX graph (opset 17, IR version 8),
 * written with protobuf-c from model/onnx.proto (ONNX's own message and field numbers).
 *
 * It is the same network as model.safetensors' nn.Sequential (export.h), built from the same
 * tensors (PyTorch's layouts: dense weights [out, in] with the columns after a flatten in
 * (c, h, w) order, conv weights [f, c, kh, kw]): the graph takes "input", float32 [N, C, H, W]
 * for images or [N, features] for rows, after the dataset's preprocessing (scaling, resize,
 * standardisation; model.safetensors' metadata holds what to apply), and gives "output": the
 * probabilities (Softmax over axis 1, or Sigmoid for binary) or the regression values, which is
 * what `trainyard train --val-outputs` writes.
 *
 * Layer by layer: dense → Gemm (transB) [+ Relu | Tanh | Sigmoid], with a Flatten first when its
 * input is still a map; conv2d → Conv with explicit pads (ONNX takes TensorFlow's asymmetric
 * "same" padding as it is) [+ activation]; maxpool2d → MaxPool, avgpool2d → AveragePool with
 * count_include_pad 0 (exact at a padded border, unlike PyTorch's ZeroPad2d), both with pads;
 * global_avgpool2d → GlobalAveragePool, Flatten; flatten → Flatten; batchnorm →
 * BatchNormalization (inference: the moving statistics); dropout → nothing. The N dimension is
 * symbolic ("batch"). */
#ifndef TRAINYARD_WORKER_EXPORT_ONNX_H
#define TRAINYARD_WORKER_EXPORT_ONNX_H

#include "model/export.h"
#include "model/model.h"

#define EXPORT_ONNX_OPSET 17

/* Writes m as ONNX to path (a temporary name beside it, then a rename), from e = export_build()'s
 * tensors of the same model. metadata: key/value pairs for the model's metadata_props (NULL
 * keys end the list early; n pairs). */
int export_onnx_write(const model *m, const export_set *e, const safetensors_meta *metadata,
                      size_t n, const char *path, char *err);

#endif
