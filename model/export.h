/* export: a trained model in PyTorch's terms, for model.safetensors.
 *
 * The tensors are named and laid out as the state_dict of the torch.nn.Sequential that
 * export_set.torch spells out (a Python expression to eval after `from torch import nn`), so that
 * `load_state_dict(strict=True)` takes the file as it is. The Sequential takes NCHW images
 * ([N, C, H, W], as PyTorch's convolutions want) or [N, features] for feature rows, and ends
 * with nn.Softmax(dim=1) (classification) or nn.Sigmoid() (binary): its output is what
 * `trainyard train --val-outputs` writes. Module by module (each counts one index, activations,
 * dropout and padding included):
 *
 *   dense              nn.Linear(in, out) [+ nn.ReLU() | nn.Tanh() | nn.Sigmoid()]; weight
 *                      [out, in]. After a flatten of h×w×c its input columns are permuted from
 *                      our (h, w, c) order to PyTorch's (c, h, w).
 *   conv2d             nn.Conv2d(c, f, kernel_size, stride, padding, bias) [+ activation];
 *                      weight [f, c, kh, kw] (ours is [kh][kw][c][f]). Padding same that is
 *                      asymmetric (TensorFlow puts the odd cell at the bottom/right) becomes
 *                      nn.ZeroPad2d((left, right, top, bottom)) before a Conv2d without padding.
 *   maxpool2d          nn.MaxPool2d(kernel_size, stride, padding); asymmetric same padding:
 *                      nn.ConstantPad2d(..., float('-inf')) first, which is exact.
 *   avgpool2d          nn.AvgPool2d(kernel_size, stride, padding, count_include_pad=False);
 *                      asymmetric same padding: nn.ZeroPad2d first, which is NOT exact on the
 *                      bottom/right border (PyTorch then counts the padded cells).
 *   global_avgpool2d   nn.AdaptiveAvgPool2d(1), nn.Flatten() (two modules)
 *   flatten            nn.Flatten()
 *   batchnorm          nn.BatchNorm2d(c, eps, momentum) on images, nn.BatchNorm1d on features;
 *                      weight, bias, running_mean, running_var (F32) and num_batches_tracked
 *                      (I64, 0-d: the optimizer steps taken). PyTorch's momentum is 1 − ours.
 *   dropout            nn.Dropout(p)
 *
 * A dense layer straight after a 4-D tensor of 1×1 cells gets an nn.Flatten() before it.
 * `config` is the trainyard.model metadata: per layer its type, shapes and tensor names.
 *
 * Ownership: an export_set owns everything in it; export_free() accepts NULL. */
#ifndef TRAINYARD_WORKER_EXPORT_H
#define TRAINYARD_WORKER_EXPORT_H

#include <jansson.h>

#include "model/model.h"
#include "model/safetensors.h"

#define EXPORT_MAX_TENSORS (5 * (JOB_MAX_LAYERS + 1))

typedef struct export_set {
    size_t n; /* tensors */
    safetensors_tensor tensors[EXPORT_MAX_TENSORS];
    char names[EXPORT_MAX_TENSORS][32];
    float *data;     /* every F32 tensor's values */
    int64_t batches; /* num_batches_tracked */
    json_t *config;  /* the trainyard.model metadata */
    char *torch;     /* "nn.Sequential(...)" */
} export_set;

/* Builds the tensors from params and stats as model_read_params() read them. */
int export_build(const model *m, const float *params, const float *stats, export_set **out,
                 char *err);
/* Releases an export; accepts NULL. */
void export_free(export_set *e);

#endif
