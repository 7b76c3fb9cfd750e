/* lifecycle: the job state machine. Every change of a job's state goes through one function
 * here, and each is ONE SQLite transaction (BEGIN IMMEDIATE) that also appends a job_events row,
 * so a job's state and its history never disagree and a crash leaves either all of a transition
 * or none of it.
 *
 *             submit            lease               complete(succeeded)
 *    (new) ─────────▶ queued ──────────▶ running ──────────────────────────▶ succeeded
 *                      ▲  │               │   │
 *                      │  │               │   │ complete(failed); expire with no attempt
 *                      │  │               │   │ left, or past max_runtime_seconds
 *                      │  │               │   ├─────────────────────────────▶ failed
 *                      │  │               │   │ complete(cancelled); expire after a
 *                      │  │ cancel        │   │ cancel request
 *                      │  └───────────────┼───┴─────────────────────────────▶ cancelled
 *                      │    expire:       │
 *                      └── lease lapsed, ─┘
 *                          attempts left (worker lost: the same, at once, when serve saw its
 *                          local worker process die; release: asked by a stopping worker)
 *
 *   running ── cancel ──▶ running with cancel_requested (the worker stops on its next heartbeat)
 *   running ── stop ──▶ running with stop_requested (the worker finishes the epoch, saves the
 *                       model and completes succeeded with stop_reason); queued ── stop ──▶
 *                       cancelled
 *   running ── heartbeat ─▶ running (lease extended, phase, metrics, logs)
 *   entering succeeded | failed | cancelled: the checkpoint is deleted, or kept as an artifact
 *   succeeded | failed | cancelled ── delete ──▶ (gone, with its rows and artifact files)
 *   entering succeeded: the job's model, when it made one, is published as the next version of
 *   its name (db/models.h), in the same transaction; delete retires that version (the models
 *   row stays, state retired, so its number is never reused)
 *
 * | transition                               | function                |
 * | ---------------------------------------- | ----------------------- |
 * | (new) → queued                           | sched_job_submit (*)    |
 * | queued → running (attempt + 1)           | sched_job_lease         |
 * | running → running (lease, progress)      | sched_job_heartbeat     |
 * | running → running (artifact stored)      | sched_artifact_add      |
 * | running → running (checkpoint stored)    | sched_checkpoint_store  |
 * | running → succeeded / failed / cancelled | sched_job_complete      |
 * | queued → cancelled; running: request     | sched_job_cancel        |
 * | queued → cancelled; running: stop request | sched_job_stop          |
 * | running → queued / failed / cancelled    | sched_job_expire (**)   |
 * | running → queued / failed / cancelled    | sched_worker_lost (**)  |
 * |   at once: the worker's process died     |                         |
 * | running → queued (worker hands it back)  | sched_job_release (**)  |
 * | terminal → deleted                       | sched_job_delete        |
 * | (every lapsed lease, silent worker)      | sched_expire_db          |
 *
 * (*) Concurrent submits share one transaction and one fsync (group commit, submit.c); each
 *     still gets its own job, its own event row and its own result.
 * (**) Requeueing deletes the metrics of epochs after the stored checkpoint's (jobs.
 *     checkpoint_epoch) and logs "attempt N resumes after epoch E": the next attempt resumes
 *     from that checkpoint and reports only the later epochs, so each epoch is stored once.
 *     A release is the same requeue asked for by the lease holder (its worker is stopping):
 *     at once instead of after the lease, and a released attempt does not count against
 *     max_attempts (the job did nothing wrong), though the next lease still numbers it + 1.
 *     sched_worker_lost is the lapse without the wait, for a worker known dead (serve saw its
 *     local worker process exit): the attempt counts, as after a lapse.
 *     A lost attempt (expire, worker lost, lose; not a release) queues the job with a back-off:
 *     jobs.retry_at = now + sched_retry_backoff_ms(attempt), before which leasing skips it
 *     (SQL_JOB_NEXT), so a job that kills its workers does not take the next one at once;
 *     leasing clears it.
 * Every transition into a terminal state settles the job's files in its own transaction
 * (reports.c, sched_settle_stage): the TensorBoard file is written and recorded, and the
 * checkpoint kept as the artifact checkpoint.safetensors when the job says "delete_checkpoint":
 * false, so a client that sees the status sees them; an unkept checkpoint is deleted after the
 * commit, best effort (a file left behind by a crash in between is removed with the job,
 * sched_job_delete).
 *
 * Rules:
 * - Terminal states never change: every write names the status it expects in its WHERE clause
 *   and the function checks that a row changed.
 * - A worker's explicit failure report is final: a bad dataset fails the same way every time.
 *   Only a lost worker (its lease lapsed, or serve saw its local worker process die) retries,
 *   while attempts are left; a release (worker stopping) always requeues and uses up no
 *   attempt. A full disk is a failure report like any other (docs/OPERATIONS.md says why).
 * - max_runtime_seconds bounds the running time summed over all attempts.
 * - Only the worker holding a running job's lease may heartbeat, upload or complete it;
 *   anyone else gets -EBUSY (409), and an unknown job -ENOENT (404).
 * - Leasing takes the highest priority, then the oldest queued job whose resources.device fits
 *   one of the worker's device kinds ("any" fits every worker, "gpu" needs a GPU, "cpu" a CPU).
 *
 * Callers: the API handlers, which raise the app's signals after a function returns (queued
 * when a job became queued, changed on any change); the functions here touch only the database
 * (and, for artifacts, the artifact folders). Times are ms since the epoch, passed in as `now`
 * so tests control the clock. */
#ifndef TRAINYARD_SCHEDULER_LIFECYCLE_H
#define TRAINYARD_SCHEDULER_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"
/* The transitions of submit.c and reports.c, declared beside their code: */
#include "scheduler/reports.h"
#include "scheduler/submit.h"

/* Leases the next fitting job to worker_id until now + lease_seconds. Returns 1 with *out
 * filled, 0 when nothing fits; -ENOENT when the worker is unknown. Marks the worker seen. */
int sched_job_lease(db *d, const char *worker_id, int64_t now, int lease_seconds, db_job *out,
                    char *err);
/* The worker's final report: status DB_SUCCEEDED, DB_FAILED or DB_CANCELLED, error (may be
 * NULL). *out is the job afterwards. */
int sched_job_complete(db *d, const char *job_id, const char *worker_id, int status,
                       const char *error, const char *artifacts_dir, int64_t now, db_job *out,
                       char *err);
/* How a job that ended before its last epoch ended (the completion's stop_reason, stopped_epoch,
 * best_epoch): NULL reason and epochs <= 0 for none. Borrowed. */
typedef struct sched_stop_result {
    const char *reason;
    int stopped_epoch, best_epoch;
} sched_stop_result;
/* sched_job_complete that also records stop (may be NULL) in the job's row. */
int sched_job_complete_stopped(db *d, const char *job_id, const char *worker_id, int status,
                               const char *error, const sched_stop_result *stop,
                               const char *artifacts_dir, int64_t now, db_job *out, char *err);
/* A graceful stop of job seq (POST /jobs/{id}/stop, a sweep's ASHA rung): running: records
 * reason (cut to DB_STOP_MAX - 1 bytes; NULL or "": "stop requested") as stop_requested, which
 * the next heartbeat's answer carries; the worker finishes the epoch it is in, saves the model
 * and completes succeeded with stop_reason. A second request keeps the first one's words.
 * Queued (no epoch of this attempt has run, so there is nothing to finish): cancelled at once,
 * with reason as its stop_reason, and its checkpoint settled. Returns 0 (running: requested), 1
 * (queued: cancelled), -EBUSY for a finished job, -ENOENT. *out (may be NULL) is the job after. */
int sched_job_stop(db *d, int64_t seq, const char *reason, const char *artifacts_dir, int64_t now,
                   db_job *out, char *err);
/* sched_job_stop without the job back, at the wall clock's now, for the sweep controller. */
int sched_job_request_stop(db *d, int64_t seq, const char *reason, char *err);
/* Cancels a queued job at once, or requests a running job's cancellation (again is a no-op);
 * -EBUSY for a finished job. *out is the job afterwards. */
int sched_job_cancel(db *d, const char *job_id, const char *artifacts_dir, int64_t now, db_job *out,
                     char *err);
#define SCHED_RETRY_BACKOFF_BASE_MS 5000   /* a lost attempt's job waits this long (default) */
#define SCHED_RETRY_BACKOFF_MAX_MS  300000 /* doubling per lost attempt up to this */
/* Sets the back-off of a job queued again after a lost attempt (expire, worker lost, lose; not a
 * release): base_ms after the first lost attempt, doubling with each one after, at most
 * SCHED_RETRY_BACKOFF_MAX_MS (or base_ms when larger); 0: none. Process-wide, for every
 * database (serve --retry-backoff-seconds sets it before its threads start); the default is
 * SCHED_RETRY_BACKOFF_BASE_MS. */
void sched_retry_backoff_set(int64_t base_ms);
/* The back-off after lost attempt number attempt (1 for the first) under the current setting. */
int64_t sched_retry_backoff_ms(int attempt);
/* Ends the attempt of running job seq if its lease lapsed before now or its running time
 * passed max_runtime_seconds: back to queued while attempts are left, else failed; cancelled
 * when its cancellation was requested. *to is the new status, or -1 when nothing was due. */
int sched_job_expire(db *d, int64_t seq, const char *artifacts_dir, int64_t now, int *to,
                     char *err);
/* The process of worker_id is known to have died (serve reaped its local worker): the attempt
 * of the job it held ends at once as after a lapsed lease (queued with attempt + 1 while
 * attempts are left, else failed; cancelled after a cancel request; why is the event's reason)
 * and the worker is marked gone. *to is the job's new status, or -1 when it held none.
 * -ENOENT for an unknown worker. */
int sched_worker_lost(db *d, const char *worker_id, const char *why, const char *artifacts_dir,
                      int64_t now, int *to, char *err);
/* The lease holder of running job_id lost its attempt where it ran (a data-parallel job's ranks
 * died; why says how): the attempt ends as after a lapsed lease, with why as its reason (queued
 * again while attempts are left, resuming from the checkpoint, else failed). *to is the new
 * status. */
int sched_job_lose(db *d, const char *job_id, const char *worker_id, const char *why,
                   const char *artifacts_dir, int64_t now, int *to, char *err);
/* The lease holder of running job_id gives it back (its worker is stopping): back to queued at
 * once, whatever attempts are left, resuming from its stored checkpoint. *out is the job. */
int sched_job_release(db *d, const char *job_id, const char *worker_id, int64_t now, db_job *out,
                      char *err);
/* Deletes a finished job, its rows and <artifacts_dir>/<id> (artifacts, a kept checkpoint, a
 * checkpoint left behind), retiring its model version at now; -EBUSY while queued or running. */
int sched_job_delete(db *d, const char *job_id, const char *artifacts_dir, int64_t now, char *err);
/* sched_job_delete for retention: also -EBUSY when the job is marked keep, read in the same
 * transaction, so a PATCH keep that commits before it wins. */
int sched_job_delete_unkept(db *d, const char *job_id, const char *artifacts_dir, int64_t now,
                            char *err);

/* 0 when job j is running and leased to worker_id; -EBUSY with the reason otherwise. */
int sched_lease_check(const db_job *j, const char *worker_id, char *err);
/* BEGIN IMMEDIATE, reads job_id into *out and checks worker_id's lease; on failure rolled back. */
int sched_job_begin_leased(db *d, const char *job_id, const char *worker_id, db_job *out,
                           char *err);

#endif
