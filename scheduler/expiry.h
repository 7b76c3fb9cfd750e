/* expiry: the scheduler's housekeeping — leases that lapsed, jobs past their runtime, workers
 * that went silent.
 *
 * `trainyard serve` runs sched_expire_db() about once a second from a housekeeping thread
 * (through api_expire; never from an HTTP thread). A sweep reads the running jobs, and for
 * each whose lease lapsed or whose running time passed max_runtime_seconds calls
 * sched_job_expire() (lifecycle.h), which re-checks inside its own transaction, so a
 * heartbeat that lands between the read and the write wins. Then workers unseen for
 * worker_gone_seconds are marked gone, and workers gone for a day with no job are forgotten.
 *
 * The scheduler sits below the API: it raises no HTTP signal and writes no log line. Both
 * functions return what changed (sched_expiry_stats, sched_lost_report) and the caller above
 * (api_expire, api_workers_lost in api/) logs it and wakes the parked requests.
 *
 * sched_workers_lost() is the sweep's fast path for workers known dead: serve's supervisor
 * reports a reaped local worker process, so that the job it held is requeued at once
 * instead of after its lease. It finds the worker rows by the token that registered them and
 * their name: serve's local-workers token is secret to serve and its children, so a remote
 * worker cannot make its row look like a local one; and the supervisor calls it before the
 * slot's next process starts, so every row of that name still active is the dead process's. */
#ifndef TRAINYARD_SCHEDULER_EXPIRY_H
#define TRAINYARD_SCHEDULER_EXPIRY_H

#include <stdint.h>

#include "db/db.h"

#define SCHED_EXPIRE_MAX_JOBS  256 /* jobs expired per sweep; the rest next time */
#define SCHED_LOST_MAX_WORKERS 16  /* rows one dead process may have (it re-registered) */
#define SCHED_WORKER_FORGET_MS (24LL * 3600 * 1000) /* gone workers are dropped after a day */

typedef struct sched_expiry_stats {
    int requeued, failed, cancelled; /* jobs that left running, by where they went */
    int workers_gone;                /* workers newly marked gone */
} sched_expiry_stats;

/* What sched_workers_lost changed: the workers it marked gone, where each one's job went. */
typedef struct sched_lost_report {
    int n; /* workers marked gone, at most SCHED_LOST_MAX_WORKERS */
    struct {
        char worker_id[DB_ID_LEN + 1];
        int to; /* the new status of the job it held (DB_QUEUED, ...), -1: it held none */
    } workers[SCHED_LOST_MAX_WORKERS];
    sched_expiry_stats st; /* the jobs that left running, counted as a sweep counts them */
} sched_lost_report;

/* The number of jobs st counts as changed (requeued, failed or cancelled). */
int sched_expiry_changed(const sched_expiry_stats *st);
/* One sweep over database d at time now (ms); *st counts what changed. A job that ends has
 * its checkpoint settled under artifacts_dir (may be NULL: left alone). */
int sched_expire_db(db *d, const char *artifacts_dir, int64_t now, int worker_gone_seconds,
                    sched_expiry_stats *st, char *err);
/* The workers that token_id registered as name are dead (why says how, for the job's history):
 * each is marked gone and its job's attempt ends at once (sched_worker_lost). *out says what
 * changed, also when a later worker failed (then the negative code is returned, err filled);
 * 0 on success. */
int sched_workers_lost(db *d, const char *artifacts_dir, const char *token_id, const char *name,
                       const char *why, int64_t now, sched_lost_report *out, char *err);

#endif
