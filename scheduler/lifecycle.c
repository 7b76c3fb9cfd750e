/* lifecycle: lease, complete, cancel, expire and delete (the diagram and the table
 * "transition → function" are in lifecycle.h; the submit is in submit.c, heartbeats and
 * artifacts in reports.c).
 *
 * Every function has the same shape: BEGIN IMMEDIATE (the write lock, so what is read inside
 * is what the write applies to), read the job, check the rule, one guarded write whose
 * changed-row count must be 1, one job_events row, COMMIT; on any failure the transaction is
 * rolled back and nothing changed. */
#include "scheduler/lifecycle.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "db/events.h"
#include "db/logs.h"
#include "db/models.h"
#include "db/workers.h"
#include "job/job.h"
#include "util/datadir.h"
#include "util/timeutil.h"

#define SCHED_SEEN_EVERY_MS 1000 /* an idle lease poll records the visit at most this often */
#define SCHED_LEASE_EXPIRED "lease expired"

/* ---- the retry back-off ------------------------------------------------------------------ */

static _Atomic int64_t sched_backoff_base_ms = SCHED_RETRY_BACKOFF_BASE_MS;

void sched_retry_backoff_set(int64_t base_ms)
{
    atomic_store(&sched_backoff_base_ms, base_ms > 0 ? base_ms : 0);
}

int64_t sched_retry_backoff_ms(int attempt)
{
    int64_t base = atomic_load(&sched_backoff_base_ms);
    int64_t most = base > SCHED_RETRY_BACKOFF_MAX_MS ? base : SCHED_RETRY_BACKOFF_MAX_MS;
    int64_t wait = base;
    for (int i = 1; i < attempt && wait < most; i++)
        wait *= 2;
    return wait < most ? wait : most;
}

/* ---- shared checks ------------------------------------------------------------------------ */

int sched_lease_check(const db_job *j, const char *worker_id, char *err)
{
    if (j->status != DB_RUNNING)
        return err_set(err, -EBUSY, "job %s is %s, not running: stop working on it", j->id,
                       db_status_name(j->status));
    if (strcmp(j->worker_id, worker_id) != 0)
        return err_set(err, -EBUSY,
                       "job %s is leased to another worker (its lease lapsed and it was handed "
                       "out again): stop working on it",
                       j->id);
    return 0;
}

/* BEGIN IMMEDIATE and reads job_id into *out; on failure rolled back, *out untouched. */
static int sched_job_begin(db *d, const char *job_id, db_job *out, char *err)
{
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_job_get(d, job_id, out, err);
    if (rc < 0)
        db_rollback(d);
    return rc;
}

int sched_job_begin_leased(db *d, const char *job_id, const char *worker_id, db_job *out, char *err)
{
    db_job j;
    int rc = sched_job_begin(d, job_id, &j, err);
    if (rc < 0)
        return rc;
    rc = sched_lease_check(&j, worker_id, err);
    if (rc < 0) {
        db_rollback(d);
        db_job_clear(&j);
        return rc;
    }
    *out = j;
    return 0;
}

/* Rereads job j after the transaction's writes, commits, and moves it to *out; j is consumed
 * (cleared on failure, the transaction rolled back when the reread fails). */
static int sched_job_commit_reread(db *d, db_job *j, db_job *out, char *err)
{
    int64_t seq = j->seq;
    db_job_clear(j);
    int rc = db_job_get_seq(d, seq, j, err);
    if (rc < 0) {
        db_rollback(d);
        db_job_clear(j);
        return rc;
    }
    rc = db_commit(d, err);
    if (rc < 0) {
        db_job_clear(j);
        return rc;
    }
    *out = *j;
    return 0;
}

/* A write that had to change exactly one row changed none: the state moved under us, which
 * BEGIN IMMEDIATE rules out, so it is reported as an internal inconsistency. */
static int sched_expect_one(int changed, const char *what, char *err)
{
    if (changed < 0)
        return changed;
    if (changed != 1)
        return err_set(err, -EIO, "%s changed %d rows instead of 1", what, changed);
    return 0;
}

/* The name of the worker's device that fits kind (enum job_device): for "any" a GPU first,
 * then a CPU, then whatever there is. devices is the worker's registered JSON array. */
static void sched_device_pick(const char *devices, int kind, char *out, size_t cap)
{
    static const char *const order_any[] = {"gpu", "cpu", NULL};
    static const char *const order_gpu[] = {"gpu", NULL};
    static const char *const order_cpu[] = {"cpu", NULL};
    const char *const *order = kind == JOB_DEVICE_GPU   ? order_gpu
                               : kind == JOB_DEVICE_CPU ? order_cpu
                                                        : order_any;
    out[0] = '\0';
    json_t *arr = json_loads(devices ? devices : "[]", 0, NULL);
    size_t i;
    json_t *dev;
    for (size_t k = 0; order[k] && !out[0]; k++) {
        json_array_foreach (arr, i, dev) {
            const char *type = json_string_value(json_object_get(dev, "type"));
            const char *name = json_string_value(json_object_get(dev, "name"));
            if (type && name && strcmp(type, order[k]) == 0) {
                snprintf(out, cap, "%s", name);
                break;
            }
        }
    }
    if (!out[0] && kind == JOB_DEVICE_ANY && json_array_size(arr) > 0) {
        const char *name = json_string_value(json_object_get(json_array_get(arr, 0), "name"));
        snprintf(out, cap, "%s", name ? name : "");
    }
    json_decref(arr);
}

/* ---- lease ------------------------------------------------------------------------------ */

int sched_job_lease(db *d, const char *worker_id, int64_t now, int lease_seconds, db_job *out,
                    char *err)
{
    db_worker w;
    db_job j;
    memset(&w, 0, sizeof w);
    memset(&j, 0, sizeof j);
    char device[DB_DEVICE_MAX + 1], reason[DB_DEVICE_MAX + 128];
    int found = 0;
    int64_t seq = 0, lease_until = now + (int64_t)lease_seconds * 1000;
    /* Without the write lock first: an idle worker's long poll asks often and mostly finds
     * nothing, which then costs a read and, once a second at most, a "seen" write. */
    int rc = db_worker_get(d, worker_id, &w, err);
    if (rc < 0)
        return rc;
    rc = db_job_next_queued(d, &w, now, &j, err);
    db_job_clear(&j);
    if (rc == 0 && (w.gone || now - w.last_seen_at >= SCHED_SEEN_EVERY_MS))
        rc = db_worker_seen(d, worker_id, now, err);
    if (rc <= 0) {
        db_worker_clear(&w);
        return rc < 0 ? rc : 0;
    }
    db_worker_clear(&w);

    rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_worker_get(d, worker_id, &w, err);
    if (rc < 0)
        goto out;
    rc = db_worker_seen(d, worker_id, now, err);
    if (rc < 0)
        goto out;
    rc = db_job_next_queued(d, &w, now, &j, err);
    if (rc <= 0)
        goto done; /* nothing fits: commit the "seen" */
    found = 1;
    sched_device_pick(w.devices, j.device_kind, device, sizeof device);
    rc = sched_expect_one(db_job_set_running(d, j.seq, worker_id, device, now, lease_until, err),
                          "leasing", err);
    if (rc < 0)
        goto out;
    snprintf(reason, sizeof reason, "leased by worker %s on %s", worker_id,
             device[0] ? device : "its device");
    rc = db_event_append(d, j.seq, now, DB_QUEUED, DB_RUNNING, DB_PHASE_NONE, j.attempt + 1, reason,
                         err);
    if (rc < 0)
        goto out;
    rc = db_worker_set_job(d, worker_id, j.id, err);
    if (rc < 0)
        goto out;
    seq = j.seq;
    db_job_clear(&j);
    rc = db_job_get_seq(d, seq, &j, err);
    if (rc < 0)
        goto out;
done:
    rc = db_commit(d, err);
    db_worker_clear(&w);
    if (rc < 0 || !found) {
        db_job_clear(&j);
        return rc;
    }
    *out = j;
    return 1;
out:
    db_rollback(d);
    db_worker_clear(&w);
    db_job_clear(&j);
    return rc;
}

/* ---- complete --------------------------------------------------------------------------- */

/* sched_job_commit_reread for a transaction that moved job j to status to: a terminal one has
 * the job's files settled inside it (sched_settle_stage). */
static int sched_job_commit_settled(db *d, db_job *j, int to, const char *artifacts_dir,
                                    int64_t now, db_job *out, char *err)
{
    sched_settle s;
    sched_settle_stage(d, db_status_terminal(to) ? artifacts_dir : NULL, j, now, &s);
    int rc = sched_job_commit_reread(d, j, out, err);
    sched_settle_end(&s, rc == 0);
    return rc;
}

/* What every end of a leased attempt of running job j shares once its row is written: the
 * event, the worker freed and seen, the files settled, the commit. j is consumed; on failure
 * rolled back. */
static int sched_attempt_end(db *d, db_job *j, const char *worker_id, int to, const char *reason,
                             const char *artifacts_dir, int64_t now, db_job *out, char *err)
{
    int rc = db_event_append(d, j->seq, now, DB_RUNNING, to, j->phase, j->attempt, reason, err);
    if (rc >= 0)
        rc = db_worker_release(d, worker_id, j->id, err);
    if (rc >= 0)
        rc = db_worker_seen(d, worker_id, now, err);
    if (rc >= 0)
        return sched_job_commit_settled(d, j, to, artifacts_dir, now, out, err);
    db_rollback(d);
    db_job_clear(j);
    return rc;
}

int sched_job_complete(db *d, const char *job_id, const char *worker_id, int status,
                       const char *error, const char *artifacts_dir, int64_t now, db_job *out,
                       char *err)
{
    return sched_job_complete_stopped(d, job_id, worker_id, status, error, NULL, artifacts_dir, now,
                                      out, err);
}

int sched_job_complete_stopped(db *d, const char *job_id, const char *worker_id, int status,
                               const char *error, const sched_stop_result *stop,
                               const char *artifacts_dir, int64_t now, db_job *out, char *err)
{
    if (!db_status_terminal(status))
        return err_set(err, -EINVAL, "status must be succeeded, failed or cancelled");
    if (status == DB_SUCCEEDED)
        error = NULL;
    else if (status == DB_FAILED && (!error || !*error))
        error = "the worker reported a failure without saying why";
    db_job j;
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    rc = sched_expect_one(db_job_set_finished(d, j.seq, worker_id, status, error, now, err),
                          "completing", err);
    if (rc < 0)
        goto out;
    if (stop && (stop->reason || stop->stopped_epoch > 0 || stop->best_epoch > 0)) {
        rc = db_job_set_stop_result(d, j.seq, stop->reason, stop->stopped_epoch, stop->best_epoch,
                                    err);
        if (rc < 0)
            goto out;
    }
    if (status == DB_SUCCEEDED) { /* the model, when it made one, is published with it */
        rc = db_model_publish(d, j.seq, now, NULL, err);
        if (rc < 0)
            goto out;
    }
    return sched_attempt_end(d, &j, worker_id, status, error ? error : "reported by the worker",
                             artifacts_dir, now, out, err);
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- stop ------------------------------------------------------------------------------- */

int sched_job_stop(db *d, int64_t seq, const char *reason, const char *artifacts_dir, int64_t now,
                   db_job *out, char *err)
{
    if (!reason || !*reason)
        reason = "stop requested";
    char words[DB_STOP_MAX];
    snprintf(words, sizeof words, "%s", reason); /* longer words are cut, not refused */
    db_job j;
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_job_get_seq(d, seq, &j, err);
    if (rc < 0) {
        db_rollback(d);
        return rc;
    }
    int cancelled = 0;
    if (db_status_terminal(j.status)) {
        rc = err_set(err, -EBUSY, "job %s already %s; there is nothing to stop", j.id,
                     db_status_name(j.status));
    } else if (j.status == DB_QUEUED) {
        /* No epoch has run in this attempt, so there is nothing to finish: it ends now. */
        char why[DB_STOP_MAX + 64];
        snprintf(why, sizeof why, "stopped while queued: %s", words);
        rc = sched_expect_one(db_job_set_cancelled(d, j.seq, now, err), "stopping", err);
        if (rc == 0)
            rc = db_job_set_stop_result(d, j.seq, words, 0, 0, err);
        if (rc >= 0)
            rc = db_event_append(d, j.seq, now, DB_QUEUED, DB_CANCELLED, DB_PHASE_NONE, j.attempt,
                                 why, err);
        cancelled = 1;
    } else if (!j.stop_requested[0]) {
        char why[DB_STOP_MAX + 64];
        snprintf(why, sizeof why, "stop requested: %s", words);
        rc = sched_expect_one(db_job_set_stop_requested(d, j.seq, words, err), "stopping", err);
        if (rc == 0)
            rc = db_event_append(d, j.seq, now, DB_RUNNING, DB_RUNNING, j.phase, j.attempt, why,
                                 err);
    }
    if (rc < 0) {
        db_rollback(d);
        db_job_clear(&j);
        return rc;
    }
    db_job after;
    rc = sched_job_commit_settled(d, &j, cancelled ? DB_CANCELLED : DB_RUNNING, artifacts_dir, now,
                                  &after, err); /* a requeued job's files */
    if (rc < 0)
        return rc;
    if (out)
        *out = after;
    else
        db_job_clear(&after);
    return cancelled;
}

int sched_job_request_stop(db *d, int64_t seq, const char *reason, char *err)
{
    return sched_job_stop(d, seq, reason, NULL, time_wall_ms(), NULL, err);
}

/* ---- cancel ----------------------------------------------------------------------------- */

int sched_job_cancel(db *d, const char *job_id, const char *artifacts_dir, int64_t now, db_job *out,
                     char *err)
{
    db_job j;
    int rc = sched_job_begin(d, job_id, &j, err);
    if (rc < 0)
        return rc;
    if (db_status_terminal(j.status)) {
        rc = err_set(err, -EBUSY, "job %s already %s; there is nothing to cancel", j.id,
                     db_status_name(j.status));
        goto out;
    }
    if (j.status == DB_QUEUED) {
        rc = sched_expect_one(db_job_set_cancelled(d, j.seq, now, err), "cancelling", err);
        if (rc == 0)
            rc = db_event_append(d, j.seq, now, DB_QUEUED, DB_CANCELLED, DB_PHASE_NONE, j.attempt,
                                 "cancelled while queued", err);
    } else if (!j.cancel_requested) {
        rc = sched_expect_one(db_job_set_cancel_requested(d, j.seq, err), "cancelling", err);
        if (rc == 0)
            rc = db_event_append(d, j.seq, now, DB_RUNNING, DB_RUNNING, j.phase, j.attempt,
                                 "cancel requested", err);
    }
    if (rc < 0)
        goto out;
    /* cancelled while queued: a requeued job may have files to settle */
    return sched_job_commit_settled(d, &j, j.status == DB_QUEUED ? DB_CANCELLED : DB_RUNNING,
                                    artifacts_dir, now, out, err);
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- expire ----------------------------------------------------------------------------- */

/* Puts running job j back in the queue, not to be leased before retry_at (0: at once); returns
 * db_job_set_requeued's count of rows changed.
 * The next attempt resumes from the stored checkpoint, which reports only the epochs after it:
 * the metrics and histograms of later epochs go now, so that every epoch appears once, and the
 * log says where
 * the next attempt starts. */
static int sched_job_requeue(db *d, const db_job *j, int64_t now, int64_t retry_at, char *err)
{
    int epoch = 0, log_lines = j->log_lines;
    char line[128];
    int changed = db_job_set_requeued(d, j->seq, now, retry_at, err);
    if (changed <= 0)
        return changed;
    int rc = db_job_checkpoint_epoch(d, j->seq, &epoch, err);
    if (rc == 0)
        rc = db_metric_drop_after(d, j->seq, epoch, err);
    if (rc == 0)
        rc = db_histogram_drop_after(d, j->seq, epoch, err);
    if (rc == 0 && epoch > 0) {
        snprintf(line, sizeof line, "attempt %d resumes after epoch %d", j->attempt + 1, epoch);
        const char *lines[] = {line};
        rc = db_log_append(d, j->seq, &log_lines, now, lines, 1, err);
        if (rc == 0)
            rc = db_job_set_log_lines(d, j->seq, log_lines, err);
    }
    return rc < 0 ? rc : changed;
}

/* Ends running job j's attempt, inside the caller's transaction, because its worker is gone
 * (why: "lease expired", or how its process died) or its running time is used up (over): failed
 * past max_runtime_seconds, cancelled after a cancel request, queued again while attempts are
 * left (released attempts do not count), else failed. The event names the cause; the worker is
 * freed. *to is the new status. */
static int sched_attempt_lose(db *d, const db_job *j, int over, const char *why, int64_t now,
                              int *to, char *err)
{
    char reason[512];
    int next = DB_FAILED, released = 0, lapsed = strcmp(why, SCHED_LEASE_EXPIRED) == 0;
    int64_t retry_at = 0;
    int rc = db_event_count_released(d, j->seq, &released, err);
    if (rc < 0)
        return rc;
    if (over) {
        snprintf(reason, sizeof reason, "exceeded max_runtime_seconds (%d s, over %d attempt%s)",
                 j->max_runtime_seconds, j->attempt, j->attempt == 1 ? "" : "s");
    } else if (j->cancel_requested) {
        next = DB_CANCELLED;
        snprintf(reason, sizeof reason, "cancel requested and %s",
                 lapsed ? "the worker stopped answering" : why);
    } else if (j->attempt - released < j->max_attempts) {
        next = DB_QUEUED;
        retry_at = now + sched_retry_backoff_ms(j->attempt - released);
        if (retry_at > now)
            snprintf(reason, sizeof reason, "%s; retrying in %lld s", why,
                     (long long)((retry_at - now + 999) / 1000));
        else
            snprintf(reason, sizeof reason, "%s", why);
    } else {
        snprintf(reason, sizeof reason, "%s after %d attempt%s", why, j->attempt,
                 j->attempt == 1 ? "" : "s");
    }
    if (next == DB_QUEUED)
        rc = sched_job_requeue(d, j, now, retry_at, err);
    else
        rc =
            db_job_set_finished(d, j->seq, NULL, next, next == DB_FAILED ? reason : NULL, now, err);
    rc = sched_expect_one(rc, "ending the attempt", err);
    if (rc == 0)
        rc = db_event_append(d, j->seq, now, DB_RUNNING, next, j->phase, j->attempt, reason, err);
    if (rc == 0 && j->worker_id[0])
        rc = db_worker_release(d, j->worker_id, j->id, err);
    if (rc < 0)
        return rc;
    *to = next;
    return 0;
}

/* Commits the caller's transaction that ended job j's attempt (next: the new status; -1 when
 * nothing changed), with the files of a job that ended settled in it, and sets *to. */
static int sched_attempt_lose_commit(db *d, const db_job *j, int next, const char *artifacts_dir,
                                     int64_t now, int *to, char *err)
{
    sched_settle s;
    sched_settle_stage(d, db_status_terminal(next) ? artifacts_dir : NULL, j, now, &s);
    int rc = db_commit(d, err);
    sched_settle_end(&s, rc == 0);
    if (rc < 0)
        return rc;
    *to = next;
    return 0;
}

int sched_job_expire(db *d, int64_t seq, const char *artifacts_dir, int64_t now, int *to, char *err)
{
    db_job j;
    memset(&j, 0, sizeof j);
    int next = -1;
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_job_get_seq(d, seq, &j, err);
    if (rc == -ENOENT || (rc == 0 && j.status != DB_RUNNING)) {
        rc = 0; /* deleted or finished meanwhile: nothing is due */
        goto done;
    }
    if (rc < 0)
        goto out;
    int64_t used = j.runtime_ms + (j.attempt_started_at ? now - j.attempt_started_at : 0);
    int over = used > (int64_t)j.max_runtime_seconds * 1000;
    int lapsed = j.lease_expires_at != 0 && j.lease_expires_at < now;
    if (over || lapsed)
        rc = sched_attempt_lose(d, &j, over, SCHED_LEASE_EXPIRED, now, &next, err);
    if (rc < 0)
        goto out;
done:
    rc = sched_attempt_lose_commit(d, &j, next, artifacts_dir, now, to, err);
    db_job_clear(&j);
    return rc;
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- a worker known dead ---------------------------------------------------------------- */

int sched_worker_lost(db *d, const char *worker_id, const char *why, const char *artifacts_dir,
                      int64_t now, int *to, char *err)
{
    db_worker w;
    db_job j;
    memset(&w, 0, sizeof w);
    memset(&j, 0, sizeof j);
    int next = -1;
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_worker_get(d, worker_id, &w, err);
    if (rc < 0)
        goto out;
    if (w.job_id[0]) {
        rc = db_job_get(d, w.job_id, &j, err);
        if (rc == -ENOENT)
            rc = 0; /* deleted meanwhile: nothing held */
        else if (rc == 0 && sched_lease_check(&j, worker_id, NULL) == 0) {
            int64_t used = j.runtime_ms + (j.attempt_started_at ? now - j.attempt_started_at : 0);
            rc = sched_attempt_lose(d, &j, used > (int64_t)j.max_runtime_seconds * 1000, why, now,
                                    &next, err);
        }
        if (rc < 0)
            goto out;
    }
    rc = db_worker_set_gone(d, worker_id, err);
    if (rc < 0)
        goto out;
    rc = sched_attempt_lose_commit(d, &j, next, artifacts_dir, now, to, err);
    db_worker_clear(&w);
    db_job_clear(&j);
    return rc;
out:
    db_rollback(d);
    db_worker_clear(&w);
    db_job_clear(&j);
    return rc;
}

int sched_job_lose(db *d, const char *job_id, const char *worker_id, const char *why,
                   const char *artifacts_dir, int64_t now, int *to, char *err)
{
    db_job j;
    int next = -1;
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    int64_t used = j.runtime_ms + (j.attempt_started_at ? now - j.attempt_started_at : 0);
    rc = sched_attempt_lose(d, &j, used > (int64_t)j.max_runtime_seconds * 1000, why, now, &next,
                            err);
    if (rc < 0) {
        db_rollback(d);
        db_job_clear(&j);
        return rc;
    }
    rc = sched_attempt_lose_commit(d, &j, next, artifacts_dir, now, to, err);
    db_job_clear(&j);
    return rc;
}

/* ---- release ---------------------------------------------------------------------------- */

int sched_job_release(db *d, const char *job_id, const char *worker_id, int64_t now, db_job *out,
                      char *err)
{
    char reason[DB_ID_LEN + 128];
    db_job j;
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    rc = sched_expect_one(sched_job_requeue(d, &j, now, 0, err), "releasing", err);
    if (rc < 0)
        goto out;
    snprintf(reason, sizeof reason, DB_EVENT_RELEASED " %s: it is stopping", worker_id);
    return sched_attempt_end(d, &j, worker_id, DB_QUEUED, reason, NULL, now, out, err);
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- delete ----------------------------------------------------------------------------- */

/* Removes <artifacts_dir>/<id> and the files in it (uploads are flat: no subfolders). Best
 * effort: the rows are already gone, and a file left behind harms nothing. */
static void sched_artifacts_remove(const char *artifacts_dir, const char *id)
{
    char dir[DATADIR_PATH_MAX], path[DATADIR_PATH_MAX];
    if (datadir_job_dir(artifacts_dir, id, dir) < 0)
        return;
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    for (;;) {
        struct dirent *e = readdir(dh);
        if (!e)
            break;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (datadir_job_file(artifacts_dir, id, e->d_name, path) == 0)
            unlink(path);
    }
    closedir(dh);
    rmdir(dir);
}

/* sched_job_delete; with spare_kept, a job marked keep is -EBUSY too. */
static int sched_job_delete_if(db *d, const char *job_id, const char *artifacts_dir, int64_t now,
                               int spare_kept, char *err)
{
    db_job j;
    int rc = sched_job_begin(d, job_id, &j, err);
    if (rc < 0)
        return rc;
    if (!db_status_terminal(j.status)) {
        rc = err_set(err, -EBUSY,
                     "job %s is %s: cancel it (POST /jobs/%s/cancel) and delete it once it has "
                     "stopped",
                     j.id, db_status_name(j.status), j.id);
        goto out;
    }
    if (spare_kept && j.keep) {
        rc = err_set(err, -EBUSY, "job %s is marked keep", j.id);
        goto out;
    }
    rc = db_model_retire(d, j.seq, now, err);
    if (rc < 0)
        goto out;
    rc = sched_expect_one(db_job_delete(d, j.seq, err), "deleting", err);
    if (rc < 0)
        goto out;
    rc = db_commit(d, err);
    if (rc == 0 && artifacts_dir)
        sched_artifacts_remove(artifacts_dir, j.id);
    db_job_clear(&j);
    return rc;
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

int sched_job_delete(db *d, const char *job_id, const char *artifacts_dir, int64_t now, char *err)
{
    return sched_job_delete_if(d, job_id, artifacts_dir, now, 0, err);
}

int sched_job_delete_unkept(db *d, const char *job_id, const char *artifacts_dir, int64_t now,
                            char *err)
{
    return sched_job_delete_if(d, job_id, artifacts_dir, now, 1, err);
}
