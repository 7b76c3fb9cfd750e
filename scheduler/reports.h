/* reports: what a running job's worker reports inside its lease (lifecycle.h has the state
 * machine): heartbeats with progress, artifacts, checkpoints, and the files a job leaves when it
 * ends (sched_settle_*). Only the worker holding the lease may report; anyone else gets -EBUSY,
 * an unknown job -ENOENT. */
#ifndef TRAINYARD_SCHEDULER_REPORTS_H
#define TRAINYARD_SCHEDULER_REPORTS_H

#include <stddef.h>
#include <stdint.h>

#include "db/artifacts.h"
#include "db/db.h"
#include "db/histograms.h"
#include "db/jobs.h"
#include "db/metrics.h"
#include "util/datadir.h"

/* What one heartbeat reports; everything is borrowed and optional. */
typedef struct sched_progress {
    int phase; /* enum db_phase; DB_PHASE_NONE leaves it as it is */
    const db_metric *epochs;
    size_t n_epochs;
    const char *const *logs;
    size_t n_logs;
    const db_histogram *histograms; /* weight histograms of those epochs (db/histograms.h) */
    size_t n_histograms;
} sched_progress;

/* The answer to a heartbeat. */
typedef struct sched_beat {
    int cancel;             /* 1: the job's cancellation was requested, stop it */
    char stop[DB_STOP_MAX]; /* a graceful stop's words: finish the epoch, save, succeed; "" */
    int64_t lease_expires_at;
} sched_beat;

/* Extends the lease of job_id held by worker_id to now + lease_seconds and records progress;
 * *out says whether to cancel. Metrics are stored under the job's current attempt. */
int sched_job_heartbeat(db *d, const char *job_id, const char *worker_id, const sched_progress *p,
                        int64_t now, int lease_seconds, sched_beat *out, char *err);

/* 1 when name is a valid artifact name: [A-Za-z0-9._-]{1,128}, not starting with '.'. */
int sched_artifact_name_ok(const char *name);
/* The most artifacts one job keeps (a kept checkpoint not counted). */
#define SCHED_MAX_ARTIFACTS 1000
/* Moves the uploaded file tmp_path to <artifacts_dir>/<job id>/<a->name> and records a, for
 * the lease holder of a running job only; -EDQUOT when that would be a new name past
 * SCHED_MAX_ARTIFACTS. */
int sched_artifact_add(db *d, const char *job_id, const char *worker_id, const char *artifacts_dir,
                       const char *tmp_path, const db_artifact *a, char *err);

/* What ending a job does to its files: sched_settle_stage inside the transaction that moves it
 * into a terminal state, sched_settle_end once that transaction committed or rolled back. */
typedef struct sched_settle {
    char tfevents[DATADIR_PATH_MAX];   /* the event file placed: removed on a rollback */
    char kept[DATADIR_PATH_MAX];       /* the checkpoint kept as an artifact, here... */
    char checkpoint[DATADIR_PATH_MAX]; /* ...from here: moved back on a rollback */
    char drop[DATADIR_PATH_MAX];       /* a checkpoint nobody keeps: removed after the commit */
    char digest[DATADIR_PATH_MAX];     /* the checkpoint's digest file: removed after the commit */
} sched_settle;

/* For job j (as read in the caller's write transaction, which has just set a terminal status):
 * writes its TensorBoard file (scheduler/event_file.h) and, when j's document says
 * "delete_checkpoint": false, moves its checkpoint (datadir_job_checkpoint) to the artifact
 * SCHED_CHECKPOINT_KEPT (SCHED_CHECKPOINT_KEPT_SCRIPT for a script job), recording both in that
 * transaction: whoever sees the terminal status sees these artifacts. A failure is reported on
 * stderr and changes neither the job's outcome nor the transaction. Call it last before the
 * commit. artifacts_dir NULL does nothing. */
void sched_settle_stage(db *d, const char *artifacts_dir, const db_job *j, int64_t now,
                        sched_settle *s);
/* After that transaction: committed, deletes the checkpoint nobody keeps; rolled back, undoes
 * the stage's files (the rows went with the rollback). */
void sched_settle_end(const sched_settle *s, int committed);

/* The artifact a kept checkpoint becomes: what `trainyard train --resume` reads. */
#define SCHED_CHECKPOINT_KEPT "checkpoint.safetensors"
/* A script job's: its checkpoint folder, packed. */
#define SCHED_CHECKPOINT_KEPT_SCRIPT "checkpoint.tar.gz"
/* For the lease holder of running job_id: when epoch is after the stored checkpoint's (for a
 * script job: at or after it, a newer snapshot of the same epoch replacing the older), moves
 * tmp_path over the job's checkpoint file, records epoch and sets *stored to 1; else leaves
 * everything as it was and sets *stored to 0. sha256 (hex, may be NULL) is the file's digest,
 * computed as it was uploaded: kept beside it, it spares sched_settle_stage a hash. */
int sched_checkpoint_store(db *d, const char *job_id, const char *worker_id,
                           const char *artifacts_dir, const char *tmp_path, const char *sha256,
                           int epoch, int *stored, char *err);

#endif
