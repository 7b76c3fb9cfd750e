/* expiry: expiring lapsed leases and marking silent workers (see expiry.h).
 *
 * The scan of running jobs is a plain read (no write lock): it only picks candidates, at most
 * SCHED_EXPIRE_MAX_JOBS, and sched_job_expire() decides each one under the lock. */
#include "scheduler/expiry.h"

#include <errno.h>
#include <string.h>

#include "db/jobs.h"
#include "db/workers.h"
#include "scheduler/lifecycle.h"

typedef struct sched_due {
    int64_t now;
    int64_t seqs[SCHED_EXPIRE_MAX_JOBS];
    int n;
} sched_due;

/* Counts a job that left running for to (-1: none did). */
static void sched_stats_count(sched_expiry_stats *s, int to)
{
    s->requeued += to == DB_QUEUED;
    s->failed += to == DB_FAILED;
    s->cancelled += to == DB_CANCELLED;
}

/* Collects the running jobs whose lease lapsed or whose running time is used up. */
static int sched_due_add(void *ctx, const db_job *j)
{
    sched_due *due = ctx;
    int64_t used = j->runtime_ms + (j->attempt_started_at ? due->now - j->attempt_started_at : 0);
    int over = used > (int64_t)j->max_runtime_seconds * 1000;
    int lapsed = j->lease_expires_at != 0 && j->lease_expires_at < due->now;
    if ((over || lapsed) && due->n < SCHED_EXPIRE_MAX_JOBS)
        due->seqs[due->n++] = j->seq;
    return 0;
}

int sched_expire_db(db *d, const char *artifacts_dir, int64_t now, int worker_gone_seconds,
                    sched_expiry_stats *st, char *err)
{
    sched_expiry_stats s;
    memset(&s, 0, sizeof s);
    sched_due due;
    due.now = now;
    due.n = 0;
    int rc = db_job_list_running(d, sched_due_add, &due, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < due.n; i++) {
        int to = -1;
        rc = sched_job_expire(d, due.seqs[i], artifacts_dir, now, &to, err);
        if (rc < 0)
            return rc;
        sched_stats_count(&s, to);
    }
    rc = db_worker_mark_gone(d, now - (int64_t)worker_gone_seconds * 1000, err);
    if (rc < 0)
        return rc;
    s.workers_gone = rc;
    rc = db_worker_forget(d, now - SCHED_WORKER_FORGET_MS, err);
    if (rc < 0)
        return rc;
    *st = s;
    return 0;
}

int sched_expiry_changed(const sched_expiry_stats *st)
{
    return st->requeued + st->failed + st->cancelled;
}

typedef struct sched_lost {
    char ids[SCHED_LOST_MAX_WORKERS][DB_ID_LEN + 1];
    int n;
} sched_lost;

static int sched_lost_add(void *ctx, const db_worker *w)
{
    sched_lost *l = ctx;
    if (l->n < SCHED_LOST_MAX_WORKERS)
        memcpy(l->ids[l->n++], w->id, sizeof l->ids[0]);
    return 0;
}

int sched_workers_lost(db *d, const char *artifacts_dir, const char *token_id, const char *name,
                       const char *why, int64_t now, sched_lost_report *out, char *err)
{
    sched_lost lost = {.n = 0};
    memset(out, 0, sizeof *out);
    int rc = db_worker_list_named(d, token_id, name, sched_lost_add, &lost, err);
    for (int i = 0; i < lost.n && rc >= 0; i++) {
        int to = -1;
        rc = sched_worker_lost(d, lost.ids[i], why, artifacts_dir, now, &to, err);
        if (rc == -ENOENT) {
            rc = 0; /* forgotten meanwhile */
            continue;
        }
        if (rc < 0)
            break;
        memcpy(out->workers[out->n].worker_id, lost.ids[i], sizeof lost.ids[i]);
        out->workers[out->n++].to = to;
        sched_stats_count(&out->st, to);
    }
    return rc < 0 ? rc : 0;
}
