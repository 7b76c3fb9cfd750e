/* tfevents: writing TensorBoard event files (events.out.tfevents.*), what `tensorboard
 * --logdir` reads.
 *
 * An event file is a sequence of TFRecord records, each
 *     uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
 *     length bytes of data          | uint32 masked CRC-32C of the data
 * (masking: util/crc32c.h), and each record's data is a serialized Event (tfevents.proto, with
 * TensorBoard's field numbers). The first record is the Event {wall_time, file_version:
 * "brain.Event:2"} that readers expect; every later one carries a Summary of scalar values
 * (simple_value, shown under Scalars) or one histogram (HistogramProto, shown under
 * Histograms and Distributions) at a step.
 *
 * Errors are sticky: a failed write is remembered and reported by tfevents_close(), so callers
 * may write everything and check once. Ownership: tfevents_close() frees the writer whatever it
 * returns; the file it leaves behind on failure is the caller's to remove. */
#ifndef TRAINYARD_PROTO_TFEVENTS_H
#define TRAINYARD_PROTO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

#define TFEVENTS_FILE_VERSION "brain.Event:2"
#define TFEVENTS_MAX_BUCKETS  256 /* buckets of a histogram given as JSON */

typedef struct tfevents tfevents;

/* One weight histogram: counts[i] values fell into (limits[i-1], limits[i]] (the first
 * bucket from -infinity), n buckets. */
typedef struct tfevents_histo {
    double min, max, num, sum, sum_squares;
    const double *limits, *counts;
    size_t n;
} tfevents_histo;

/* Creates (truncates) path and writes the file_version record at wall_time (seconds). */
int tfevents_open(const char *path, double wall_time, tfevents **out, char *err);
/* One Event at step holding n scalars tags[i] = values[i] (stored as float, as TensorBoard's
 * simple_value is). */
void tfevents_scalars(tfevents *w, double wall_time, int64_t step, const char *const *tags,
                      const double *values, size_t n);
/* One Event at step holding the histogram h under tag. */
void tfevents_histogram(tfevents *w, double wall_time, int64_t step, const char *tag,
                        const tfevents_histo *h);
/* tfevents_histogram of a histogram in the JSON form train/histogram.h makes and the server
 * stores: {"min", "max", "num", "sum", "sum_squares", "limits": [...], "counts": [...]} (other
 * members ignored). -EINVAL, writing nothing, when h is not that (limits and counts of unequal
 * lengths or over TFEVENTS_MAX_BUCKETS). */
int tfevents_histogram_json(tfevents *w, double wall_time, int64_t step, const char *tag,
                            const json_t *h);
/* Flushes, fsyncs and closes; the first error of any call since open, else 0. Frees w. */
int tfevents_close(tfevents *w, char *err);

/* One TFRecord record of len bytes at data onto f (the framing above); -EIO when short. Exposed
 * for the tests. */
int tfrecord_write(void *file, const void *data, size_t len);

#endif
