/* early_stop: the decision of "early_stopping" (job/job.h's job_early_stopping), Keras's
 * EarlyStopping callback as a small pure state machine, shared by the trainer (built-in jobs,
 * on loss, val_loss, accuracy, val_accuracy) and the worker's script path (any metric a script
 * reports).
 *
 * After each epoch e (1-based), with the monitored value v:
 *   - nothing happens while e <= start_from_epoch, or when v is missing (NaN): the epoch is not
 *     judged (Keras skips epochs before start_from_epoch and epochs without the metric);
 *   - wait += 1;
 *   - v improves when it beats the best so far by more than min_delta in the mode's direction
 *     (min: v < best - min_delta; max: v > best + min_delta); the first judged epoch always
 *     improves on nothing. An improvement makes e the best epoch (its weights are what
 *     restore_best keeps) and resets wait to 0, unless a baseline is set and v does not beat the
 *     baseline by the same rule;
 *   - otherwise, once wait >= patience (and e is not the job's first epoch), training stops
 *     after e.
 * So with patience p the job stops after p epochs in a row that did not improve (p = 0: after
 * the first one), as Keras 3 does.
 *
 * The state is plain numbers so a checkpoint can carry it (trainyard.early_stopping) and a
 * resumed job decides exactly as an uninterrupted one. */
#ifndef TRAINYARD_WORKER_EARLY_STOP_H
#define TRAINYARD_WORKER_EARLY_STOP_H

#include <stddef.h>

#include "job/job.h"

typedef struct early_stop {
    double best;       /* the best judged value; +inf (min) or -inf (max) before any */
    int best_epoch;    /* the epoch of best; 0 before any */
    int wait;          /* judged epochs since the last improvement that reset it */
    int stopped_epoch; /* the epoch after which it stopped training; 0 while it has not */
} early_stop;

/* What early_stop_update says, as bits. */
enum { EARLY_STOP_IMPROVED = 1, EARLY_STOP_STOP = 2 };

/* A fresh state for cfg. */
void early_stop_init(early_stop *s, const job_early_stopping *cfg);
/* Judges epoch's value (NAN: the metric is missing this epoch); returns EARLY_STOP_* bits:
 * IMPROVED when epoch became the best one, STOP when training should end after it. */
int early_stop_update(early_stop *s, const job_early_stopping *cfg, int epoch, double value);
/* The stop_reason of a stop, e.g. "early stopping: val_loss did not improve by more than 0 for 5
 * epochs (best 0.123 at epoch 7)". */
void early_stop_reason(const early_stop *s, const job_early_stopping *cfg, char *out, size_t cap);

#endif
