/* db/histograms: the histograms table (schema v8) — per (job, epoch, tensor) one histogram of a
 * weight tensor's values, for the tfevents artifact of a job that asked for them ("tensorboard":
 * {"histograms": true}).
 *
 * data is the JSON text of the histogram as the worker reported it and the API checked it
 * (api/bodies.c): {"min", "max", "num", "sum", "sum_squares", "limits": [...], "counts": [...]}.
 * A requeue drops the rows of epochs after the stored checkpoint's with their metrics
 * (db_histogram_drop_after), and a resumed attempt that reports an epoch again replaces its rows
 * (INSERT OR REPLACE); the tfevents writer (scheduler/event_file.c) still skips any epoch without a
 * metrics row. */
#ifndef TRAINYARD_DB_HISTOGRAMS_H
#define TRAINYARD_DB_HISTOGRAMS_H

#include <stdint.h>

#include "db/db.h"

/* Bounds the API holds reports to (per epoch entry, per histogram). */
#define DB_HISTOGRAM_TENSOR_MAX  128 /* characters of a tensor name */
#define DB_HISTOGRAM_MAX_TENSORS 256 /* histograms in one epoch */
#define DB_HISTOGRAM_MAX_BUCKETS 256 /* buckets in one histogram */

typedef struct db_histogram {
    int epoch;
    const char *tensor; /* borrowed (when read, valid during the callback) */
    const char *data;   /* JSON text, borrowed likewise */
} db_histogram;

/* Called per row; h is valid during the call only. A negative return stops the walk. */
typedef int (*db_histogram_fn)(void *ctx, const db_histogram *h);

/* Stores h for job_seq, replacing the row of the same epoch and tensor. */
int db_histogram_put(db *d, int64_t job_seq, const db_histogram *h, char *err);
/* Deletes job_seq's histograms of epochs after epoch (a requeue, as db_metric_drop_after). */
int db_histogram_drop_after(db *d, int64_t job_seq, int epoch, char *err);
/* Every histogram of job_seq by epoch, then tensor. */
int db_histogram_list(db *d, int64_t job_seq, db_histogram_fn fn, void *ctx, char *err);

#endif
