/* db/jobs: the jobs table — rows in and out, and the guarded state writes the scheduler's
 * lifecycle composes into transactions (scheduler/lifecycle.h owns the rules; this module only
 * says how a row is read and changed).
 *
 * Every state write names the status it expects in its WHERE clause and returns the number of
 * rows it changed (0 or 1), so a caller can tell "not in that state any more" from success;
 * terminal rows are never matched by any write except db_job_delete.
 *
 * A db_job owns `document` and `error` (malloc'ed; db_job_clear frees them). Times are ms since
 * the epoch with 0 for "not yet" (NULL in the table). `device` and `worker_id` are "" for none. */
#ifndef TRAINYARD_DB_JOBS_H
#define TRAINYARD_DB_JOBS_H

#include <stdint.h>

#include "db/db.h"

#define DB_NAME_MAX   512 /* bytes of a job or worker name (128 characters of UTF-8) */
#define DB_DEVICE_MAX 256 /* bytes of a device name */
#define DB_STOP_MAX   512 /* bytes of a stop request's or stop reason's words */

enum db_status { DB_QUEUED, DB_RUNNING, DB_SUCCEEDED, DB_FAILED, DB_CANCELLED, DB_N_STATUS };
enum db_phase { DB_PHASE_NONE, DB_PHASE_DOWNLOADING, DB_PHASE_TRAINING, DB_PHASE_UPLOADING };
/* Device kinds a job asks for are enum job_device (job/job.h): any, gpu, cpu. */

typedef struct db_job {
    int64_t seq; /* internal order; 0 before insertion */
    char id[DB_ID_LEN + 1];
    char name[DB_NAME_MAX + 1];
    int status; /* enum db_status */
    int phase;  /* enum db_phase */
    int attempt, max_attempts, priority;
    int device_kind; /* enum job_device */
    int max_runtime_seconds;
    char *document; /* the resolved job document, JSON text */
    int64_t created_at, started_at, finished_at;
    int64_t attempt_started_at; /* when the current attempt was leased */
    int64_t runtime_ms;         /* running time of the attempts that ended */
    char *error;                /* NULL when none */
    char device[DB_DEVICE_MAX + 1];
    char worker_id[DB_ID_LEN + 1];
    int64_t lease_expires_at;
    int cancel_requested;
    int log_lines;                  /* log lines stored so far */
    char owner[DB_ID_LEN + 1];      /* id of the token that submitted it; "" for none */
    int script;                     /* 1: a script job (training_script), leased only to workers
                                       that run scripts */
    int replicas;                   /* distribution.replicas (1 for most jobs): leased only to a
                                       worker with at least as many slots */
    char slurm_job_id[32];          /* the Slurm job that holds it now; "" for none */
    char for_worker[DB_ID_LEN + 1]; /* only this worker may lease it; "" for any */

    /* v8 (experiments) */
    char stop_requested[DB_STOP_MAX]; /* a graceful stop asked of the running job (its
                                         words); "" for none */
    char stop_reason[DB_STOP_MAX];    /* why it ended before its last epoch; "" for none */
    int stopped_epoch;                /* the epoch it ended after when it stopped early; 0 */
    int best_epoch;                   /* the epoch whose model was kept (restore_best); 0 */
    int keep;                         /* 1: retention never removes it */
    int64_t sweep_seq;                /* the sweep it is a trial of; 0 for none */
    char sweep_id[DB_ID_LEN + 1];     /* that sweep's public id; "" for none (read only) */

    /* v9 (why a job waits) */
    int64_t retry_at;      /* queued again after a lost attempt: not leased before this; 0 */
    char slurm_reason[64]; /* squeue's reason for its pending Slurm job; "" for none */
} db_job;

/* Filters of db_job_list; status -1, name NULL and owner NULL match every job. */
typedef struct db_job_filter {
    int status;
    const char *name;
    const char *owner;  /* a token id */
    int64_t before_seq; /* only jobs with seq < before_seq; 0: from the newest */
    int limit;
    const char *sweep; /* a sweep's public id: only its trials; NULL: any job */
} db_job_filter;

/* Called per row of a listing; j and its strings are valid during the call only. A negative
 * return stops the listing and is returned by it. */
typedef int (*db_job_fn)(void *ctx, const db_job *j);

/* "queued", "running", ...; NULL for a value out of range. */
const char *db_status_name(int status);
/* The enum db_status of a name; -1 when unknown. */
int db_status_parse(const char *s);
/* 1 for succeeded, failed and cancelled. */
int db_status_terminal(int status);
/* "downloading", "training", "uploading"; NULL for DB_PHASE_NONE or out of range. */
const char *db_phase_name(int phase);
/* The enum db_phase of a name; -1 when unknown. */
int db_phase_parse(const char *s);
/* "any", "gpu", "cpu" for an enum job_device; NULL otherwise. */
const char *db_device_kind_name(int kind);

/* Frees document and error and zeroes the row; accepts NULL. */
void db_job_clear(db_job *j);
/* Deep copy of src into *out (which the caller clears). */
int db_job_copy(const db_job *src, db_job *out, char *err);

/* Inserts a new job (all of j but seq); sets j->seq. -EEXIST when id or key already exists. */
int db_job_insert(db *d, db_job *j, const char *idem_key, const char *body_hash, char *err);
/* The job with public id; -ENOENT when none. */
int db_job_get(db *d, const char *id, db_job *out, char *err);
/* The job with internal seq; -ENOENT when none. */
int db_job_get_seq(db *d, int64_t seq, db_job *out, char *err);
/* The job submitted with idem_key and the hash of its document (65 bytes); -ENOENT when none. */
int db_job_get_by_key(db *d, const char *idem_key, db_job *out, char body_hash[65], char *err);
/* Jobs matching f, newest first, at most f->limit. */
int db_job_list(db *d, const db_job_filter *f, db_job_fn fn, void *ctx, char *err);
/* Every running job (for lease expiry). */
int db_job_list_running(db *d, db_job_fn fn, void *ctx, char *err);
/* At most limit queued jobs bound to no worker, script jobs only when scripts is set, in leasing
 * order, leaving out those whose retry back-off lasts past now and those whose token is at its
 * running cap, counting its jobs bound to a Slurm job as running (the Slurm executor submits
 * them). */
int db_job_list_unbound(db *d, int64_t now, int limit, int scripts, db_job_fn fn, void *ctx,
                        char *err);
/* At most limit jobs of any status bound to a worker (for_worker set) with seq > after_seq,
 * oldest first. */
int db_job_list_bound(db *d, int64_t after_seq, int limit, db_job_fn fn, void *ctx, char *err);
struct db_worker;
/* The next queued job worker w may run at now: one whose device kind is among w's kinds
 * (DB_KIND_* bits), a script job only when w runs scripts, no more replicas than w's slots,
 * either bound to w (for_worker) or, when w is not a bound worker, to nobody, whose retry
 * back-off is over (retry_at <= now) and whose token is under its running cap (tokens.
 * max_running): highest priority, then oldest. Returns 1 with *out filled, 0 when none fits. */
int db_job_next_queued(db *d, const struct db_worker *w, int64_t now, db_job *out, char *err);
/* Binds queued job seq to worker_id (NULL: unbinds) and records the Slurm job that holds it
 * (NULL: none); Slurm's reason is cleared. Returns rows changed. */
int db_job_set_slurm(db *d, int64_t seq, const char *slurm_job_id, const char *worker_id,
                     char *err);
/* Records squeue's reason for queued job seq's pending Slurm job (NULL or "": none). Returns
 * rows changed. */
int db_job_set_slurm_reason(db *d, int64_t seq, const char *reason, char *err);
/* How many jobs have status. */
int db_job_count(db *d, int status, int64_t *out, char *err);

/* How many queued jobs have a retry back-off that ended after `after` and by `upto`. */
int db_job_count_backoff_over(db *d, int64_t after, int64_t upto, int64_t *out, char *err);
/* How many jobs owner (a token id) has in status. */
int db_job_count_owned(db *d, const char *owner, int status, int64_t *out, char *err);
/* The queued jobs that a worker able to do what `can` says (kinds, scripts, slots; db/workers.h)
 * would lease before j at now (a higher priority, or the same and submitted earlier; neither
 * in a retry's back-off nor held by their token's running cap) into *ahead, and of those the
 * ones of a higher priority into *higher, in one walk of at most limit jobs (a deep queue costs
 * no more than that). */
int db_job_count_ahead(db *d, const db_job *j, const struct db_worker *can, int64_t now, int limit,
                       int64_t *ahead, int64_t *higher, char *err);
/* The running-job cap of job j's token into *max_running (0: none, or j has no owner) and how
 * many of that token's jobs run into *running (counted only when capped, else 0). */
int db_job_owner_cap(db *d, const db_job *j, int *max_running, int64_t *running, char *err);

/* queued → running for worker on device, attempt + 1, lease until lease_until. */
int db_job_set_running(db *d, int64_t seq, const char *worker_id, const char *device, int64_t now,
                       int64_t lease_until, char *err);
/* A heartbeat of a running job held by worker_id: new lease, phase (DB_PHASE_NONE keeps it),
 * log line count. */
int db_job_set_lease(db *d, int64_t seq, const char *worker_id, int phase, int64_t lease_until,
                     int log_lines, char *err);
/* running → queued (a lapsed lease): the attempt's time is added to runtime_ms; the job is not
 * leased before retry_at (0: at once). */
int db_job_set_requeued(db *d, int64_t seq, int64_t now, int64_t retry_at, char *err);
/* running → terminal status with error (may be NULL); worker_id NULL matches any holder. */
int db_job_set_finished(db *d, int64_t seq, const char *worker_id, int status, const char *error,
                        int64_t now, char *err);
/* queued → cancelled. */
int db_job_set_cancelled(db *d, int64_t seq, int64_t now, char *err);
/* running: cancel_requested = 1. */
int db_job_set_cancel_requested(db *d, int64_t seq, char *err);
/* running, no stop requested yet: stop_requested = reason (copied). Returns rows changed (0: not
 * running, or a stop was already requested, whose words stay). */
int db_job_set_stop_requested(db *d, int64_t seq, const char *reason, char *err);
/* Records how job seq ended early: reason ("" or NULL: none), the epoch it stopped after and the
 * epoch whose model it kept (each <= 0: none). */
int db_job_set_stop_result(db *d, int64_t seq, const char *reason, int stopped_epoch,
                           int best_epoch, char *err);
/* Deletes a terminal job and, by cascade, its events, metrics, logs and artifact rows. */
int db_job_delete(db *d, int64_t seq, char *err);
/* The epoch of job seq's stored checkpoint into *out (0: none); -ENOENT for no such job. */
int db_job_checkpoint_epoch(db *d, int64_t seq, int *out, char *err);
/* Records that job seq's stored checkpoint is after epoch. */
int db_job_set_checkpoint_epoch(db *d, int64_t seq, int epoch, char *err);
/* Stores job seq's dataset credentials, sealed (util/secret.h); NULL removes them. They are
 * removed anyway when the job finishes or is cancelled, and never read into a db_job. */
int db_job_set_credentials(db *d, int64_t seq, const char *sealed, char *err);
/* Job seq's sealed dataset credentials, malloc'd, into *out (NULL when it has none). */
int db_job_credentials(db *d, int64_t seq, char **out, char *err);
/* Stores log_lines as job seq's count of log lines (after a db_log_append outside a lease). */
int db_job_set_log_lines(db *d, int64_t seq, int log_lines, char *err);

#endif
