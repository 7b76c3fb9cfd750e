/* waiting: why a queued job has not started yet, as people read it in GET /jobs/{id},
 * `trainyard status` and the dashboard (Slurm's squeue shows a reason for every pending job).
 *
 * The reason is worked out when asked, from the job's row, its token's cap, the workers
 * connected now and the queue ahead of the job; nothing is stored but what the job's row holds
 * anyway (retry_at, and squeue's reason, which the Slurm executor keeps in slurm_reason). First
 * what holds the job itself, then the workers, in the order they are tried:
 *   slurm           the Slurm executor submitted it and Slurm has not started it yet; the
 *                   message carries squeue's reason (Resources, Priority, BeginTime, ...) once
 *                   the executor has polled it
 *   retry_backoff   its last attempt was lost and it waits retry_at before the next (lifecycle.h)
 *   token_cap       its token's max_running jobs are running already: none of its jobs is
 *                   leased until one of them ends
 *   no_worker       no worker is connected
 *   no_capable_worker  no connected worker could ever lease it: the message names what it
 *                   needs that none has (a GPU, a CPU device, scripts allowed, an OpenCL
 *                   device, N slots), or says no single worker has all of it
 *   behind_jobs     capable workers exist and N queued jobs are leased first (higher priority,
 *                   or the same and submitted earlier)
 *   workers_busy    first in line, and every worker that could take it holds a job
 *   starting        first in line with a capable worker free: a lease is about to happen
 * sched_worker_takes() and sched_job_held() are leasing's rule (db/jobs.c, SQL_JOB_NEXT) written
 * in C, for one worker and one job and for the job alone; tests/unit/scheduler/test_waiting.c
 * checks that they and SQL_JOB_NEXT agree. */
#ifndef TRAINYARD_SCHEDULER_WAITING_H
#define TRAINYARD_SCHEDULER_WAITING_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"
#include "db/workers.h"

#define SCHED_WAIT_AHEAD_MAX  10000 /* jobs ahead counted at most for one job ("10000+") */
#define SCHED_WAIT_AHEAD_LIST 100   /* ...and for each job of a page of GET /jobs ("100+") */

/* The workers connected now (not gone, seen since a given time), loaded once per request. */
typedef struct sched_wait_workers {
    db_worker *w;
    size_t n, cap;
} sched_wait_workers;

typedef struct sched_wait {
    const char *reason; /* one of the codes above (static) */
    char message[320];  /* a sentence for people */
    int64_t jobs_ahead; /* behind_jobs: the count (at the cap: at least that); else 0 */
} sched_wait;

/* Loads the workers not gone and seen at or after since into *out. Free with ..._free. */
int sched_wait_workers_load(db *d, int64_t since, sched_wait_workers *out, char *err);
/* Frees what load made; accepts a zeroed struct. */
void sched_wait_workers_free(sched_wait_workers *ws);
/* 1 when w could lease j (busy or not), else 0: leasing's rule. */
int sched_worker_takes(const db_worker *w, const db_job *j);
enum sched_hold { SCHED_HOLD_NONE, SCHED_HOLD_BACKOFF, SCHED_HOLD_TOKEN_CAP };
/* What keeps queued job j from being leased at now whatever the worker (an enum sched_hold):
 * its retry back-off (retry_at > now), else its token's cap, given as max_running (0: none) and
 * how many of the token's jobs run (db_job_owner_cap). */
int sched_job_held(const db_job *j, int64_t now, int max_running, int64_t running);
/* Why queued job j waits at now, among the workers ws, the jobs ahead counted up to ahead_max
 * (a page of a list asks less of each job than a single job's answer). 0, or a negative code
 * from the database. */
int sched_job_wait(db *d, const db_job *j, const sched_wait_workers *ws, int64_t now, int ahead_max,
                   sched_wait *out, char *err);

#endif
