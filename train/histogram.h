/* histogram: per epoch, a histogram of each of the model's weight tensors, for TensorBoard
 * ("tensorboard": {"histograms": true}; the server writes them into the job's tfevents
 * artifact, scheduler/event_file.h).
 *
 * The tensors are model.safetensors' (model/export.h): the same names ("0.weight", "0.bias",
 * batchnorm's running_mean and running_var too), every F32 tensor; num_batches_tracked (I64) is
 * not a weight and is left out. A read-back of the parameter and statistics buffers each epoch
 * costs what a checkpoint's does (trainer.h): a few ms for a model of 100,000 parameters. */
#ifndef TRAINYARD_WORKER_HISTOGRAM_H
#define TRAINYARD_WORKER_HISTOGRAM_H

#include <stddef.h>

#include <jansson.h>

#include "model/model.h"

#define HISTOGRAM_BUCKETS 30 /* equal-width buckets between a tensor's min and max */

/* The histogram of n values as the heartbeat carries it (openapi.yaml WeightHistogram):
 * {"tensor", "min", "max", "num", "sum", "sum_squares", "limits", "counts"}. Bucket i counts
 * the values in (limits[i-1], limits[i]], the first from -infinity; the last limit is the max.
 * All values equal: one bucket. NULL when out of memory. */
json_t *histogram_of(const char *tensor, const float *v, size_t n);

/* Reads m's weights back and builds the histograms of its tensors into *out (a new JSON
 * array). */
int histogram_model(model *m, json_t **out, char *err);

#endif
