/* waiting: see waiting.h. */
#include "scheduler/waiting.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "util/array.h"
#include "util/err.h"

static int collect(void *ctx, const db_worker *w)
{
    sched_wait_workers *ws = ctx;
    if (ARRAY_GROW(ws->w, ws->cap, ws->n + 1, ARRAY_NO_MAX) < 0)
        return -ENOMEM; /* the workers are the database's own rows: no cap of their own */
    db_worker *c = &ws->w[ws->n];
    *c = *w;
    c->devices = NULL; /* not needed here, and owned by the walk */
    ws->n++;
    return 0;
}

int sched_wait_workers_load(db *d, int64_t since, sched_wait_workers *out, char *err)
{
    sched_wait_workers ws = {0};
    int rc = db_worker_list_live(d, since, collect, &ws, err);
    if (rc < 0) {
        if (rc == -ENOMEM)
            err_set(err, rc, "out of memory");
        sched_wait_workers_free(&ws);
        return rc;
    }
    *out = ws;
    return 0;
}

void sched_wait_workers_free(sched_wait_workers *ws)
{
    free(ws->w);
    memset(ws, 0, sizeof *ws);
}

/* What a job needs of a worker, one requirement at a time (leasing's rule, SQL_JOB_NEXT). */
enum need { NEED_GPU, NEED_CPU, NEED_SCRIPTS, NEED_OPENCL, NEED_SLOTS, NEED_BINDING, NEED_COUNT };

static int slots_of(const db_worker *w)
{
    return w->slots > 1 ? w->slots : 1;
}

/* 1 when w meets requirement n of j (or j does not have that requirement). */
static int meets(const db_worker *w, const db_job *j, enum need n)
{
    switch (n) {
    case NEED_GPU:
        return j->device_kind != JOB_DEVICE_GPU || (w->kinds & DB_KIND_GPU);
    case NEED_CPU:
        return j->device_kind != JOB_DEVICE_CPU || (w->kinds & DB_KIND_CPU);
    case NEED_SCRIPTS:
        return !j->script || w->scripts;
    case NEED_OPENCL:
        return j->script || !(w->kinds & DB_KIND_SCRIPTS_ONLY);
    case NEED_SLOTS:
        return j->replicas <= slots_of(w);
    case NEED_BINDING:
        return j->for_worker[0] ? strcmp(j->for_worker, w->id) == 0 : !w->bound;
    default:
        return 0;
    }
}

int sched_worker_takes(const db_worker *w, const db_job *j)
{
    if (w->kinds == 0)
        return 0; /* a worker without devices runs nothing */
    for (int n = 0; n < NEED_COUNT; n++)
        if (!meets(w, j, (enum need)n))
            return 0;
    return 1;
}

int sched_job_held(const db_job *j, int64_t now, int max_running, int64_t running)
{
    if (j->retry_at > now)
        return SCHED_HOLD_BACKOFF;
    if (max_running > 0 && running >= max_running)
        return SCHED_HOLD_TOKEN_CAP;
    return SCHED_HOLD_NONE;
}

/* "it needs ..." for the requirements no connected worker meets, or the ones none meets
 * together, into msg. */
static void no_capable(const db_job *j, const sched_wait_workers *ws, char *msg, size_t cap)
{
    int met[NEED_COUNT] = {0}, most_slots = 0;
    for (size_t i = 0; i < ws->n; i++) {
        if (ws->w[i].kinds == 0)
            continue;
        for (int n = 0; n < NEED_COUNT; n++)
            met[n] += meets(&ws->w[i], j, (enum need)n);
        if (slots_of(&ws->w[i]) > most_slots)
            most_slots = slots_of(&ws->w[i]);
    }
    char parts[4][96];
    int np = 0;
    if (!met[NEED_GPU])
        snprintf(parts[np++], sizeof parts[0], "a GPU (resources.device: gpu)");
    if (!met[NEED_CPU])
        snprintf(parts[np++], sizeof parts[0], "a CPU device (resources.device: cpu)");
    if (!met[NEED_SCRIPTS])
        snprintf(parts[np++], sizeof parts[0], "a worker that runs scripts (--allow-scripts)");
    if (!met[NEED_OPENCL])
        snprintf(parts[np++], sizeof parts[0],
                 "an OpenCL device (the GPUs connected run scripts only)");
    if (!met[NEED_SLOTS] && np < 4)
        snprintf(parts[np++], sizeof parts[0], "a worker with %d slots (the most any has is %d)",
                 j->replicas, most_slots);
    size_t len = (size_t)snprintf(msg, cap, "no connected worker can take it: it needs ");
    if (np == 0) {
        snprintf(msg + len, cap - len, "one worker with all it asks for, and none has it all");
        return;
    }
    for (int i = 0; i < np && len < cap; i++)
        len += (size_t)snprintf(msg + len, cap - len, "%s%s",
                                i == 0        ? ""
                                : i == np - 1 ? " and "
                                              : ", ",
                                parts[i]);
}

int sched_job_wait(db *d, const db_job *j, const sched_wait_workers *ws, int64_t now, int ahead_max,
                   sched_wait *out, char *err)
{
    sched_wait w = {0};
    if (j->slurm_job_id[0]) {
        w.reason = "slurm";
        if (j->slurm_reason[0])
            snprintf(w.message, sizeof w.message, "held by Slurm (job %s): %s", j->slurm_job_id,
                     j->slurm_reason);
        else
            snprintf(w.message, sizeof w.message,
                     "submitted to Slurm as job %s: waiting for Slurm to start it",
                     j->slurm_job_id);
        *out = w;
        return 0;
    }
    int max_running = 0;
    int64_t running = 0;
    int rc = db_job_owner_cap(d, j, &max_running, &running, err);
    if (rc < 0)
        return rc;
    switch (sched_job_held(j, now, max_running, running)) {
    case SCHED_HOLD_BACKOFF:
        w.reason = "retry_backoff";
        snprintf(w.message, sizeof w.message,
                 "its attempt %d was lost: retrying in %lld s (the back-off after a lost attempt)",
                 j->attempt, (long long)((j->retry_at - now + 999) / 1000));
        *out = w;
        return 0;
    case SCHED_HOLD_TOKEN_CAP:
        w.reason = "token_cap";
        snprintf(w.message, sizeof w.message,
                 "its token's cap: %lld of its jobs are running and its max_running is %d; it "
                 "starts when one of them ends",
                 (long long)running, max_running);
        *out = w;
        return 0;
    default:
        break;
    }
    size_t capable = 0, free_capable = 0, live = 0;
    db_worker can = {.kinds = DB_KIND_SCRIPTS_ONLY}; /* what the capable workers do together */
    for (size_t i = 0; i < ws->n; i++) {
        const db_worker *x = &ws->w[i];
        live += x->kinds != 0;
        if (!sched_worker_takes(x, j))
            continue;
        capable++;
        free_capable += x->job_id[0] == '\0';
        can.kinds |= x->kinds & (DB_KIND_GPU | DB_KIND_CPU | DB_KIND_OTHER);
        if (!(x->kinds & DB_KIND_SCRIPTS_ONLY))
            can.kinds &= ~(unsigned)DB_KIND_SCRIPTS_ONLY; /* one runs built-in jobs */
        can.scripts |= x->scripts;
        if (slots_of(x) > can.slots)
            can.slots = slots_of(x);
    }
    if (live == 0) {
        w.reason = "no_worker";
        snprintf(w.message, sizeof w.message, "no worker is connected");
    } else if (capable == 0) {
        w.reason = "no_capable_worker";
        no_capable(j, ws, w.message, sizeof w.message);
    } else {
        int64_t ahead = 0, higher = 0;
        rc = db_job_count_ahead(d, j, &can, now, ahead_max, &ahead, &higher, err);
        if (rc < 0)
            return rc;
        const char *plus = ahead >= ahead_max ? "+" : "";
        if (ahead > 0) {
            w.reason = "behind_jobs";
            w.jobs_ahead = ahead;
            if (higher == ahead)
                snprintf(w.message, sizeof w.message, "behind %lld%s job(s) of higher priority",
                         (long long)ahead, plus);
            else if (higher > 0)
                snprintf(w.message, sizeof w.message,
                         "behind %lld%s job(s): %lld of higher priority, %lld submitted earlier",
                         (long long)ahead, plus, (long long)higher, (long long)(ahead - higher));
            else
                snprintf(w.message, sizeof w.message, "behind %lld%s job(s) submitted earlier",
                         (long long)ahead, plus);
        } else if (free_capable == 0) {
            w.reason = "workers_busy";
            snprintf(w.message, sizeof w.message,
                     "first in line: waiting for a free worker (the %zu that can take it are busy)",
                     capable);
        } else {
            w.reason = "starting";
            snprintf(w.message, sizeof w.message, "first in line: a worker is free to take it");
        }
    }
    *out = w;
    return 0;
}
