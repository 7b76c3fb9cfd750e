/* submit: (new) → queued, with group commit.
 *
 * Why: a submit is acknowledged only once its COMMIT is on disk (synchronous=FULL), and SQLite
 * commits one transaction per fsync, so one transaction per submit caps the rate at the disk's
 * fsync rate (about 3,000/s on a fast SSD, a few hundred on a slow disk) however many clients
 * there are. Here concurrent submits queue, and one of them, the leader, commits every queued
 * submit of the same database in one transaction: N clients waiting cost one fsync, not N.
 * Alone, a submit is its own batch and pays one transaction, as before.
 *
 * How: callers append a request to sched_q and wait on sched_q_done. A caller that finds no
 * leader becomes one: it takes up to SCHED_BATCH_MAX queued requests for its database file,
 * runs them in one BEGIN IMMEDIATE ... COMMIT on its own connection, each inside a SAVEPOINT so
 * one request's failure (say, an Idempotency-Key conflict) leaves the others' work in place,
 * marks them done and wakes everyone; a waiter whose request is still queued then leads the
 * next batch. The leader writes each request's result, error code and sentence into that
 * request (the caller's memory, valid because the caller is blocked until done), under
 * sched_q_lock, so the caller reads them after the wake-up.
 *
 * Per request, the work is as small as it can be: an Idempotency-Key lookup when a key is
 * given, a count of the owner's queued (and, under the token's own cap, running) jobs when a
 * limit is set (index lookups), one INSERT
 * into jobs, one into job_events. Requests in one batch see each other: a
 * retry of a key earlier in the same batch finds that job. If the COMMIT fails, every request
 * of the batch fails with its error: none was acknowledged. */
#include "scheduler/submit.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/events.h"
#include "db/sweeps.h"
#include "scheduler/lifecycle.h"

#define SCHED_BATCH_MAX 128

typedef struct sched_submit_req {
    const sched_new_job *nj;
    int64_t now;
    const char *file; /* the database file: only requests for the same one share a batch */
    db_job job;       /* the result, when rc is 0 */
    int created;
    int rc;
    char *err;
    int done;
    struct sched_submit_req *next;
} sched_submit_req;

static pthread_mutex_t sched_q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sched_q_done = PTHREAD_COND_INITIALIZER;
static sched_submit_req *sched_q_head, *sched_q_tail;
static int sched_q_leading; /* a leader is running a batch */

static const char SQL_SAVEPOINT[] = "SAVEPOINT sched_submit";
static const char SQL_RELEASE[] = "RELEASE sched_submit";
static const char SQL_ROLLBACK_TO[] = "ROLLBACK TO sched_submit";

/* The new job's row, before insertion. */
static int sched_job_new(const sched_new_job *nj, int64_t now, db_job *j, char *err)
{
    memset(j, 0, sizeof *j);
    int rc = db_id_new(j->id, err);
    if (rc < 0)
        return rc;
    snprintf(j->name, sizeof j->name, "%s", nj->name ? nj->name : "job");
    j->status = DB_QUEUED;
    j->max_attempts = nj->max_attempts;
    j->priority = nj->priority;
    j->device_kind = nj->device_kind;
    j->max_runtime_seconds = nj->max_runtime_seconds;
    j->script = nj->script != 0;
    j->replicas = nj->replicas > 1 ? nj->replicas : 1;
    j->sweep_seq = nj->sweep_seq > 0 ? nj->sweep_seq : 0;
    j->keep = nj->keep != 0;
    j->created_at = now;
    snprintf(j->owner, sizeof j->owner, "%s", nj->owner ? nj->owner : "");
    j->document = strdup(nj->document);
    if (!j->document)
        return err_set(err, -ENOMEM, "out of memory");
    return 0;
}

/* One request inside the leader's open transaction, isolated by a savepoint. */
static void sched_submit_one(db *d, sched_submit_req *q)
{
    const sched_new_job *nj = q->nj;
    db_job j, prev;
    char prev_hash[65];
    memset(&prev, 0, sizeof prev);
    int rc = sched_job_new(nj, q->now, &j, q->err);
    if (rc < 0)
        goto out;
    rc = db_run(d, SQL_SAVEPOINT, q->err);
    if (rc < 0)
        goto out;
    if (nj->idem_key) {
        rc = db_job_get_by_key(d, nj->idem_key, &prev, prev_hash, q->err);
        if (rc == 0)
            goto known;
        if (rc != -ENOENT)
            goto undo;
    }
    if (nj->owner && nj->max_queued > 0) {
        int64_t queued = 0;
        rc = db_job_count_owned(d, nj->owner, DB_QUEUED, &queued, q->err);
        if (rc < 0)
            goto undo;
        if (queued >= nj->max_queued) {
            rc = err_set(q->err, -EUSERS,
                         "this token already has %lld queued jobs, the most this server takes: "
                         "submit again when some have started, or cancel some",
                         (long long)queued);
            goto undo;
        }
    }
    if (nj->owner && nj->token_max_queued > 0) {
        int64_t queued = 0, running = 0;
        rc = db_job_count_owned(d, nj->owner, DB_QUEUED, &queued, q->err);
        if (rc == 0)
            rc = db_job_count_owned(d, nj->owner, DB_RUNNING, &running, q->err);
        if (rc < 0)
            goto undo;
        if (queued + running >= nj->token_max_queued) {
            rc = err_set(q->err, -EUSERS,
                         "this token's max_queued is %d and it has %lld jobs queued or running: "
                         "submit again when some have finished, or cancel some",
                         nj->token_max_queued, (long long)(queued + running));
            goto undo;
        }
    }
    rc = db_job_insert(d, &j, nj->idem_key, nj->body_hash, q->err);
    if (rc == 0 && nj->credentials)
        rc = db_job_set_credentials(d, j.seq, nj->credentials, q->err);
    if (rc == 0 && nj->sweep_seq > 0)
        rc = db_sweep_trial_added(d, nj->sweep_seq, j.seq, q->err);
    if (rc < 0)
        goto undo;
    rc = db_event_append(d, j.seq, q->now, -1, DB_QUEUED, DB_PHASE_NONE, 0, "submitted", q->err);
    if (rc < 0)
        goto undo;
    rc = db_run(d, SQL_RELEASE, q->err);
    if (rc < 0)
        goto undo;
    q->job = j;
    q->created = 1;
    q->rc = 0;
    return;

known: /* the key was used before: the same document is a retry, another one a conflict */
    db_run(d, SQL_RELEASE, NULL);
    db_job_clear(&j);
    if (strcmp(prev_hash, nj->body_hash ? nj->body_hash : "") != 0) {
        q->rc = err_set(q->err, -EEXIST,
                        "Idempotency-Key reused with a different body: the key belongs to job "
                        "%s; use a new key for a new job",
                        prev.id);
        db_job_clear(&prev);
        return;
    }
    q->job = prev;
    q->created = 0;
    q->rc = 0;
    return;
undo:
    db_run(d, SQL_ROLLBACK_TO, NULL);
    db_run(d, SQL_RELEASE, NULL);
out:
    db_job_clear(&j);
    q->rc = rc;
}

/* Runs a batch in one transaction on the leader's connection. */
static void sched_submit_batch(db *d, sched_submit_req **batch, size_t n)
{
    char err[ERR_LEN];
    int rc = db_begin(d, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        sched_submit_one(d, batch[i]);
    if (rc == 0)
        rc = db_commit(d, err);
    if (rc == 0)
        return;
    for (size_t i = 0; i < n; i++) { /* nothing of the batch is stored */
        if (batch[i]->rc == 0)
            db_job_clear(&batch[i]->job);
        batch[i]->created = 0;
        batch[i]->rc = err_set(batch[i]->err, rc, "%s", err);
    }
}

/* Moves up to SCHED_BATCH_MAX queued requests for file into batch, in arrival order. */
static size_t sched_q_take(const char *file, sched_submit_req **batch)
{
    size_t n = 0;
    sched_submit_req *prev = NULL, *q = sched_q_head;
    while (q && n < SCHED_BATCH_MAX) {
        sched_submit_req *next = q->next;
        if (strcmp(q->file, file) == 0) {
            batch[n++] = q;
            if (prev)
                prev->next = next;
            else
                sched_q_head = next;
            if (sched_q_tail == q)
                sched_q_tail = prev;
        } else {
            prev = q;
        }
        q = next;
    }
    return n;
}

int sched_job_submit(db *d, const sched_new_job *nj, int64_t now, db_job *out, int *created,
                     char *err)
{
    sched_submit_req me;
    memset(&me, 0, sizeof me);
    me.nj = nj;
    me.now = now;
    me.file = sqlite3_db_filename(db_sqlite(d), "main");
    me.err = err;
    me.rc = -EIO;
    if (!me.file)
        me.file = "";

    pthread_mutex_lock(&sched_q_lock);
    if (sched_q_tail)
        sched_q_tail->next = &me;
    else
        sched_q_head = &me;
    sched_q_tail = &me;
    while (!me.done) {
        if (sched_q_leading) {
            pthread_cond_wait(&sched_q_done, &sched_q_lock);
            continue;
        }
        sched_q_leading = 1;
        sched_submit_req *batch[SCHED_BATCH_MAX];
        size_t n = sched_q_take(me.file, batch);
        pthread_mutex_unlock(&sched_q_lock);
        sched_submit_batch(d, batch, n);
        pthread_mutex_lock(&sched_q_lock);
        for (size_t i = 0; i < n; i++)
            batch[i]->done = 1;
        sched_q_leading = 0;
        pthread_cond_broadcast(&sched_q_done);
    }
    pthread_mutex_unlock(&sched_q_lock);
    if (me.rc < 0)
        return me.rc;
    *out = me.job;
    *created = me.created;
    return 0;
}
