/* housekeeping: the API's side of the scheduler's housekeeping — what lease expiry changed becomes
 * log lines and raised signals.
 *
 * The scheduler sits below the API and knows nothing of HTTP (scheduler/expiry.h): it changes
 * the database and reports what changed. These wrappers, which serve calls from its
 * housekeeping thread and its supervisor's exit callback (never from an HTTP thread), take the
 * thread's connection, run the sweep, log it, and raise app->queued when a job went back to the
 * queue (a parked lease may take it) and app->changed when any job changed (parked log follows,
 * event streams and GET /jobs/{id}'s answer cache look again). */
#include <errno.h>

#include "api/api_priv.h"
#include "scheduler/retention.h"
#include "scheduler/expiry.h"

/* Raises the app's signals for what st counts; returns the number of jobs changed. */
static int api_expiry_announce(app *a, const sched_expiry_stats *st)
{
    int changed = sched_expiry_changed(st);

    if (st->requeued)
        api_raise(a->queued);
    if (changed)
        api_raise(a->changed);
    return changed;
}

void api_jobs_changed(app *a, const sched_expiry_stats *st, const char *who)
{
    if (st->requeued)
        app_log(a, "%s: %d job(s) back in the queue", who, st->requeued);
    if (st->failed)
        app_log(a, "%s: %d job(s) failed: attempts used up", who, st->failed);
    if (api_expiry_announce(a, st) == 0)
        api_raise(a->changed); /* a log line or a submit: followers look again */
}

int api_expire(app *a, int64_t now, char *err)
{
    db *d = app_db(a);
    sched_expiry_stats st;
    int rc;

    if (!d)
        return err_set(err, -EIO, "the database cannot be opened (see the log)");
    rc = sched_expire_db(d, a->artifacts_dir, now, a->worker_gone_seconds, &st, err);
    if (rc < 0)
        return rc;
    if (st.requeued)
        app_log(a, "lease expiry: %d job(s) back in the queue after their lease lapsed",
                st.requeued);
    if (st.failed)
        app_log(a, "lease expiry: %d job(s) failed: attempts or max_runtime_seconds used up",
                st.failed);
    /* A job whose retry back-off ended is leasable now, and nothing else would say so: parked
     * lease polls wake, and the answers that said retry_backoff are read again. */
    int64_t over = 0;
    rc = db_job_count_backoff_over(d, a->backoffs_seen_to, now, &over, err);
    if (rc < 0)
        return rc;
    a->backoffs_seen_to = now;
    if (over > 0) {
        api_raise(a->queued);
        api_raise(a->changed);
    }
    return api_expiry_announce(a, &st);
}

int api_workers_lost(app *a, const char *token_id, const char *name, const char *why, int64_t now,
                     char *err)
{
    db *d = app_db(a);
    sched_lost_report rep;
    int rc, changed;

    if (!d)
        return err_set(err, -EIO, "the database cannot be opened (see the log)");
    rc = sched_workers_lost(d, a->artifacts_dir, token_id, name, why, now, &rep, err);
    for (int i = 0; i < rep.n; i++)
        if (rep.workers[i].to >= 0)
            app_log(a, "worker %s is gone (%s): its job is %s", rep.workers[i].worker_id, why,
                    db_status_name(rep.workers[i].to));
    changed = api_expiry_announce(a, &rep.st);
    return rc < 0 ? rc : changed;
}

void api_sweeps_changed(app *a, int trials_created, int stops_requested, int sweeps_finished)
{
    if (trials_created)
        app_log(a, "sweeps: %d trial(s) queued", trials_created);
    if (stops_requested)
        app_log(a, "sweeps: %d trial(s) asked to stop (ASHA)", stops_requested);
    if (sweeps_finished)
        app_log(a, "sweeps: %d sweep(s) ended", sweeps_finished);
    if (trials_created)
        api_raise(a->queued);
    api_raise(a->changed);
}

int api_retain(app *a, int64_t now, long days, char *err)
{
    db *d = app_db(a);
    int removed = 0;

    if (!d)
        return err_set(err, -EIO, "the database cannot be opened (see the log)");
    int rc = sched_retain(d, a->artifacts_dir, now - days * SCHED_DAY_MS, SCHED_RETAIN_BATCH, now,
                          &removed, err);
    if (removed) {
        app_log(a, "retention: %d finished job(s) older than %ld day(s) removed", removed, days);
        api_raise(a->changed);
    }
    return rc < 0 ? rc : removed;
}
