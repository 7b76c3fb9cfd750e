/* sweeper: expiring lapsed leases and marking silent workers (see sweeper.h).
 *
 * The scan of running jobs is a plain read (no write lock): it only picks candidates, at most
 * SCHED_SWEEP_MAX_JOBS, and sched_job_expire() decides each one under the lock. */
#include "scheduler/sweeper.h"

#include <string.h>

#include "api/app.h"
#include "db/jobs.h"
#include "db/workers.h"
#include "scheduler/lifecycle.h"

typedef struct sched_due {
    int64_t now;
    int64_t seqs[SCHED_SWEEP_MAX_JOBS];
    int n;
} sched_due;

/* Counts a job that left running for to (-1: none did). */
static void sched_stats_count(sched_sweep_stats *s, int to)
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
    if ((over || lapsed) && due->n < SCHED_SWEEP_MAX_JOBS)
        due->seqs[due->n++] = j->seq;
    return 0;
}

int sched_sweep_db(db *d, const char *artifacts_dir, int64_t now, int worker_gone_seconds,
                   sched_sweep_stats *st, char *err)
{
    sched_sweep_stats s;
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

/* Raises the app's signals for what st counts; returns the number of jobs changed. */
static int sched_announce(struct app *a, const sched_sweep_stats *st)
{
    if (st->requeued && a->queued)
        http_signal_raise(a->queued);
    int changed = st->requeued + st->failed + st->cancelled;
    if (changed && a->changed)
        http_signal_raise(a->changed);
    return changed;
}

int sched_sweep(struct app *a, int64_t now, char *err)
{
    db *d = app_db(a);
    if (!d)
        return err_set(err, -EIO, "the database cannot be opened (see the log)");
    sched_sweep_stats st;
    int rc = sched_sweep_db(d, a->artifacts_dir, now, a->worker_gone_seconds, &st, err);
    if (rc < 0)
        return rc;
    if (st.requeued)
        app_log(a, "sweep: %d job(s) back in the queue after their lease lapsed", st.requeued);
    if (st.failed)
        app_log(a, "sweep: %d job(s) failed: attempts or max_runtime_seconds used up", st.failed);
    return sched_announce(a, &st);
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

int sched_workers_lost(struct app *a, const char *token_id, const char *name, const char *why,
                       int64_t now, char *err)
{
    db *d = app_db(a);
    if (!d)
        return err_set(err, -EIO, "the database cannot be opened (see the log)");
    sched_lost lost = {.n = 0};
    sched_sweep_stats st;
    memset(&st, 0, sizeof st);
    int rc = db_worker_list_named(d, token_id, name, sched_lost_add, &lost, err);
    for (int i = 0; i < lost.n && rc >= 0; i++) {
        int to = -1;
        rc = sched_worker_lost(d, lost.ids[i], why, a->artifacts_dir, now, &to, err);
        if (rc == -ENOENT)
            rc = 0; /* forgotten meanwhile */
        if (rc == 0 && to >= 0)
            app_log(a, "worker %s is gone (%s): its job is %s", lost.ids[i], why,
                    db_status_name(to));
        sched_stats_count(&st, to);
    }
    int changed = sched_announce(a, &st);
    return rc < 0 ? rc : changed;
}
