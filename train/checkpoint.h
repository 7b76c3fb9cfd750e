/* checkpoint: the training state after a finished epoch, in one safetensors file, so that a job
 * whose lease was lost resumes where its last attempt stopped instead of from scratch.
 *
 * File (checkpoint.safetensors in the job's out_dir; written atomically by safetensors_write):
 *   tensors   "params", "moment1", "moment2": F32 [n_params] each, padding included, as
 *             model_state_save() reads them; "stats": F32 [n_stats], batchnorm's moving
 *             statistics, when the model has any; "mean", "std": F32 [cols] when standardised
 *             (cols: features for CSV data, channels for images)
 *   metadata  "trainyard.checkpoint"  format version ("1")
 *             "trainyard.epoch"       last finished epoch (0..epochs)
 *             "trainyard.step"        optimizer steps taken (Adam's bias correction and the
 *                                     dropout stream both follow from it)
 *             "trainyard.n_params"    floats per state tensor
 *             "trainyard.job"         the resolved job document (compact JSON): a checkpoint is
 *                                     only ever resumed by the job that wrote it
 *             "trainyard.dataset"     {"rows", "cols", "sha256", "classes"} of the whole dataset
 *             "trainyard.metrics"     [{"epoch", "loss", "val_loss", "accuracy", "val_accuracy",
 *                                     "seconds", "samples_per_second"}, ...] one per finished
 *                                     epoch, in order (null where a metric does not apply)
 *             "trainyard.early_stopping"  (jobs with early_stopping) {"best", "best_epoch",
 *                                     "wait", "stopped_epoch"}: early_stop.h's state after
 *                                     epoch; with restore_best the tensors "best_params" (F32
 *                                     [n_params]) and "best_stats" (F32 [n_stats], when the
 *                                     model has statistics) hold the best epoch's weights
 *
 * Nothing else is needed to continue bit for bit: the shuffle of epoch e is derived from
 * (seed, e) and the dropout masks from (seed, step), and the data pipeline is seeded.
 *
 * Invariants checked by checkpoint_read(): the version is known, the three state tensors exist
 * with shape [n_params], stats a vector if present, mean/std both or neither with the same
 * shape [cols] (the trainer checks cols against its data), and the metrics hold
 * exactly epochs 1..epoch in order.
 *
 * Ownership: a checkpoint owns its file's bytes and parsed JSON; everything a checkpoint_state
 * from checkpoint_read() points to lives until checkpoint_free(), which accepts NULL. For
 * checkpoint_write() everything is borrowed. */
#ifndef TRAINYARD_WORKER_CHECKPOINT_H
#define TRAINYARD_WORKER_CHECKPOINT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_FILE    "checkpoint.safetensors"
#define CHECKPOINT_VERSION 1

typedef struct checkpoint_state {
    int epoch;                               /* last finished epoch */
    int64_t step;                            /* optimizer steps taken */
    size_t n_params;                         /* floats in each state tensor */
    const float *params, *moment1, *moment2; /* n_params each */
    size_t n_stats;                          /* floats of stats (0: none) */
    const float *stats;                      /* batchnorm's moving statistics, or NULL */
    size_t cols;                             /* length of mean and std */
    const float *mean, *std;                 /* or both NULL without standardisation */
    const json_t *job;                       /* the resolved job document */
    const json_t *dataset;                   /* {"rows", "cols", "sha256", "classes"} */
    const json_t *metrics;                   /* one object per finished epoch */
    const json_t *early_stopping;            /* {"best", "best_epoch", "wait", "stopped_epoch"}, or
                                                NULL */
    const float *best_params, *best_stats;   /* restore_best's weights (n_params, n_stats), or
                                                NULL */
} checkpoint_state;

typedef struct checkpoint checkpoint;

/* Writes s to path atomically (a temporary file renamed over path, both fsync'd). */
int checkpoint_write(const char *path, const checkpoint_state *s, char *err);
/* Reads and validates path; -ENOENT missing, -EINVAL not a trainyard checkpoint or corrupt. */
int checkpoint_read(const char *path, checkpoint **out, char *err);
/* The state of a checkpoint read (borrowed, lives as long as c). */
const checkpoint_state *checkpoint_state_of(const checkpoint *c);
/* 0 when the checkpoint was written by this job document, -EINVAL (naming the first field that
 * differs) otherwise. */
int checkpoint_check_job(const checkpoint *c, const json_t *job, char *err);
/* 0 when dataset ({"rows", "cols", "sha256", "classes"}) is the one the checkpoint was trained
 * on, -EINVAL naming what differs otherwise. */
int checkpoint_check_dataset(const checkpoint *c, const json_t *dataset, char *err);
/* Releases a checkpoint; accepts NULL. */
void checkpoint_free(checkpoint *c);

#endif
