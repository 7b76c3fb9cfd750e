/* db/metrics: the metrics table — one row per (job, epoch).
 *
 * A resumed attempt that reports an epoch again replaces the earlier row (INSERT OR REPLACE),
 * so a job never holds an epoch twice and shows the numbers of the attempt that finished. The
 * replacing row gets a new, larger id: a follower that remembers the last id it sent
 * (db_metric_since) also sees replaced epochs. NAN stands for null in every value but epoch.
 * Metrics under names of a script's own (schema v5) ride along in `extra`. */
#ifndef TRAINYARD_DB_METRICS_H
#define TRAINYARD_DB_METRICS_H

#include <stdint.h>

#include "db/db.h"

typedef struct db_metric {
    int64_t id; /* set when read back */
    int attempt, epoch;
    double loss, val_loss, accuracy, val_accuracy; /* NAN: null */
    double seconds, samples_per_second;            /* NAN: null */
    int64_t at;
    const char *extra; /* the other metrics, a JSON object's text, or NULL: borrowed (by
                          db_metric_put from the caller; when read, valid during the callback) */
} db_metric;

/* Called per row; m is valid during the call only. A negative return stops the walk. */
typedef int (*db_metric_fn)(void *ctx, const db_metric *m);

/* Stores m for job_seq, replacing a row of the same epoch. */
int db_metric_put(db *d, int64_t job_seq, const db_metric *m, char *err);
/* Deletes job_seq's rows of epochs after epoch (what a requeued attempt will report again). */
int db_metric_drop_after(db *d, int64_t job_seq, int epoch, char *err);
/* Every epoch of job_seq in epoch order. */
int db_metric_list(db *d, int64_t job_seq, db_metric_fn fn, void *ctx, char *err);
/* At most limit rows of job_seq with id > after_id, in id order (what changed since). */
int db_metric_since(db *d, int64_t job_seq, int64_t after_id, int limit, db_metric_fn fn, void *ctx,
                    char *err);

#endif
