/* export_onnx: model.onnx, the trained network as an ONNX graph (opset 17, IR version 8),
 * written with protobuf-c from model/onnx.proto (ONNX's own message and field numbers).
 *
 * It is the same network as model.safetensors' nn.Sequential (export.h), built from the same
 * tensors (PyTorch's layouts: dense weights [out, in] with the columns after a flatten in
 * (c, h, w) order, conv weights [f, c, kh, kw]), and it stands alone: it takes what :predict
 * takes and applies the job's preprocessing inside the graph with the float operations of
 * predict_prepare() (predict/prepare.c) in the same order, so that onnxruntime on raw values
 * gives :predict's numbers. "input" is float32 [N, features] of raw feature values (CSV), or
 * [N, height, width, C] pixels as stored (0–255 for 8-bit images), of any height and width
 * (images). Then:
 *   features: (x − mean) / std per feature (Sub, Div) when the job standardised;
 *   images:   the bilinear resize to the model's H×W with half-pixel centres of
 *             ref_image_batch(), spelled out in operators (per axis, from Shape: each output
 *             position's source coordinate, its two neighbours and weight; then Gather of the
 *             four pixels and two lerps in our order) rather than ONNX's Resize, whose
 *             arithmetic (a weighted sum of four, the scale divided rather than multiplied)
 *             rounds differently; × pixel_scale; (v − mean) / std per channel when the job
 *             standardised; Transpose to NCHW.
 * The value the preprocessing ends with is named "preprocessed" (a CSV model without
 * standardisation has none: its input is the network's); onnx.utils.extract_model cuts there
 * the graph that takes preprocessed input, which is what model.safetensors' Sequential takes.
 * The graph gives "output": the probabilities (Softmax over axis 1, or Sigmoid for binary) or
 * the regression values, which is what `trainyard train --val-outputs` writes.
 *
 * Layer by layer: dense → Gemm (transB) [+ Relu | Tanh | Sigmoid], with a Flatten first when its
 * input is still a map; conv2d → Conv with explicit pads (ONNX takes TensorFlow's asymmetric
 * "same" padding as it is) [+ activation]; maxpool2d → MaxPool, avgpool2d → AveragePool with
 * count_include_pad 0 (exact at a padded border, unlike PyTorch's ZeroPad2d), both with pads;
 * global_avgpool2d → GlobalAveragePool, Flatten; flatten → Flatten; batchnorm →
 * BatchNormalization (inference: the moving statistics); dropout → nothing. The N dimension is
 * symbolic ("batch"), as are an image's "height" and "width". */
#ifndef TRAINYARD_WORKER_EXPORT_ONNX_H
#define TRAINYARD_WORKER_EXPORT_ONNX_H

#include "model/export.h"
#include "model/model.h"

#define EXPORT_ONNX_OPSET 17

/* The preprocessing the graph applies, as predict_info holds it: mean and std of n values each
 * (per feature, or per image channel), both NULL when the job did not standardise;
 * pixel_scale: what an image's pixel is multiplied by after the resize (unused for features). */
typedef struct export_onnx_prep {
    const float *mean, *std;
    size_t n;
    float pixel_scale;
} export_onnx_prep;

/* Writes m as ONNX to path (a temporary name beside it, then a rename), from e = export_build()'s
 * tensors of the same model, with prep inside the graph (NULL: none; -EINVAL when its values do
 * not match the model's features or channels). metadata: key/value pairs for the
 * model's metadata_props (NULL keys end the list early; n pairs); the graph adds
 * trainyard.preprocessing, which says what the input is and which steps the graph applies. */
int export_onnx_write(const model *m, const export_set *e, const export_onnx_prep *prep,
                      const safetensors_meta *metadata, size_t n, const char *path, char *err);

#endif
