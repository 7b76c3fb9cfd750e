/* event_file: the server's TensorBoard event file of a finished job, the artifact
 * events.out.tfevents.<created_at in unix seconds>.trainyard (SCHED_TFEVENTS_PREFIX; the number
 * is the job's submit time, so the name is fixed per job and sorts runs by age).
 *
 * Written once the job reached a terminal state (any: succeeded, failed, cancelled), built-in
 * and script jobs alike, when it has at least one epoch of metrics; from the database, not from
 * anything the worker uploads:
 * - per epoch (step = epoch, wall_time = when the server stored the epoch) one Event with every
 *   scalar metric of GET /jobs/{id}/metrics that is not null: loss, val_loss, accuracy,
 *   val_accuracy, seconds, samples_per_second and a script's own metrics, each under its
 *   metric name as tag (simple_value, a float);
 * - per stored weight histogram (db/histograms.h; jobs with "tensorboard": {"histograms":
 *   true}) one Event at its epoch, tagged with the tensor's name (model.safetensors' names).
 *
 * It is written inside the transaction that ends the job (lifecycle.h's sched_settle_stage), so
 * whoever sees the terminal status sees the artifact too: to <artifacts_dir>/<id>/.tfevents.part,
 * synced, renamed and recorded. The write lock is held that long; the file is a few KB for most
 * jobs (a histogram is about 0.5 KB a tensor an epoch). The artifact does not count against
 * SCHED_MAX_ARTIFACTS. */
#ifndef TRAINYARD_SCHEDULER_EVENT_FILE_H
#define TRAINYARD_SCHEDULER_EVENT_FILE_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"
#include "util/datadir.h"

#define SCHED_TFEVENTS_PREFIX "events.out.tfevents."
#define SCHED_TFEVENTS_SUFFIX ".trainyard"

/* The artifact name of job j into name[DB_ARTIFACT_NAME_MAX + 1]. */
void sched_tfevents_name(const db_job *j, char *name);

/* Writes job j's event file and records it as an artifact created at now, in the caller's write
 * transaction. placed[DATADIR_PATH_MAX] gets the file's path once it is in place ("" when it is
 * not): the caller removes that file if the transaction rolls back. 0 also when there is nothing
 * to write (no metrics, artifacts_dir NULL); a negative code with err filled when writing failed
 * (nothing is left behind then). */
int sched_tfevents_write(db *d, const char *artifacts_dir, const db_job *j, int64_t now,
                         char placed[DATADIR_PATH_MAX], char *err);

#endif
