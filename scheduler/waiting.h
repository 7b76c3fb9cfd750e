/* waiting: why a queued job has not started yet, as people read it in GET /jobs/{id},
 * `trainyard status` and the dashboard (Slurm's squeue shows a reason for every pending job).
 *
 * The reason is worked out when asked, from the workers connected now and the queue ahead of
 * the job; nothing is stored. In the order they are tried:
 *   slurm           the Slurm executor submitted it and Slurm has not started it yet
 *   no_worker       no worker is connected
 *   no_capable_worker  no connected worker could ever lease it: the message names what it
 *                   needs that none has (a GPU, a CPU device, scripts allowed, an OpenCL
 *                   device, N slots), or says no single worker has all of it
 *   behind_jobs     capable workers exist and N queued jobs are leased first (higher priority,
 *                   or the same and submitted earlier)
 *   workers_busy    first in line, and every worker that could take it holds a job
 *   starting        first in line with a capable worker free: a lease is about to happen
 * sched_worker_takes() is leasing's rule (db/jobs.c, SQL_JOB_NEXT) written in C for one worker
 * and one job; tests/unit/scheduler/test_waiting.c checks the two agree. */
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
/* Why queued job j waits, among the workers ws, the jobs ahead counted up to ahead_max (a page
 * of a list asks less of each job than a single job's answer). 0, or a negative code from the
 * database. */
int sched_job_wait(db *d, const db_job *j, const sched_wait_workers *ws, int ahead_max,
                   sched_wait *out, char *err);

#endif
