/* Unit tests of scheduler/: the job lifecycle's transitions and the ones it forbids, priority +
 * FIFO order, device fit, a failure that is final, a worker handing its job back, cancel in each
 * state, a graceful stop, idempotent submits, and concurrent submits sharing transactions (group
 * commit). The event history records every transition. */
#include <pthread.h>

#include "tests/unit/scheduler/lifecycle_test.h"

/* ---- tests -------------------------------------------------------------------------------- */

static void test_happy_path(void)
{
    db *d = fresh_db("happy");
    char err[ERR_LEN], w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    submit(d, "mnist", 0, JOB_DEVICE_ANY, 3, 3600, T0, id);
    db_job j = get(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_INT(j.attempt, 0);
    CHECK_INT(j.created_at, T0);
    CHECK_STR(j.name, "mnist");
    db_job_clear(&j);

    CHECK_INT(lease(d, w, T0 + 10, got), 1);
    CHECK_STR(got, id);
    j = get(d, id);
    CHECK_INT(j.status, DB_RUNNING);
    CHECK_INT(j.attempt, 1);
    CHECK_INT(j.started_at, T0 + 10);
    CHECK_INT(j.lease_expires_at, T0 + 10 + LEASE * 1000);
    CHECK_STR(j.worker_id, w);
    CHECK_STR(j.device, "gpu-0");
    db_job_clear(&j);
    db_worker wk;
    CHECK_INT(db_worker_get(d, w, &wk, err), 0);
    CHECK_STR(wk.job_id, id);
    db_worker_clear(&wk);
    CHECK_INT(lease(d, w, T0 + 11, got), 0); /* nothing else queued */

    /* heartbeat: lease, phase (one event), metrics, logs */
    db_metric m[2] = {{.epoch = 1,
                       .loss = 1.0,
                       .val_loss = NAN,
                       .accuracy = 0.5,
                       .val_accuracy = NAN,
                       .seconds = 1,
                       .samples_per_second = 100},
                      {.epoch = 2,
                       .loss = 0.5,
                       .val_loss = NAN,
                       .accuracy = 0.7,
                       .val_accuracy = NAN,
                       .seconds = 1,
                       .samples_per_second = 100}};
    const char *logs[] = {"epoch 1", "epoch 2"};
    sched_progress p = {
        .phase = DB_PHASE_TRAINING, .epochs = m, .n_epochs = 2, .logs = logs, .n_logs = 2};
    sched_beat beat = {.cancel = -1};
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 1000, LEASE, &beat, err), 0);
    CHECK_INT(beat.cancel, 0);
    CHECK_INT(beat.lease_expires_at, T0 + 1000 + LEASE * 1000);
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 2000, LEASE, &beat, err), 0);
    j = get(d, id);
    CHECK_INT(j.phase, DB_PHASE_TRAINING);
    CHECK_INT(j.log_lines, 4);
    CHECK_INT(j.lease_expires_at, T0 + 2000 + LEASE * 1000);
    db_job_clear(&j);

    db_job done;
    CHECK_INT(sched_job_complete(d, id, w, DB_SUCCEEDED, "ignored", NULL, T0 + 5000, &done, err),
              0);
    CHECK_INT(done.status, DB_SUCCEEDED);
    CHECK_INT(done.finished_at, T0 + 5000);
    CHECK(done.error == NULL);
    CHECK_INT(done.phase, DB_PHASE_NONE);
    CHECK_INT(done.runtime_ms, 5000 - 10);
    db_job_clear(&done);
    CHECK_INT(db_worker_get(d, w, &wk, err), 0);
    CHECK_STR(wk.job_id, "");
    db_worker_clear(&wk);
    /* one event per transition, and the phase change */
    CHECK_STR(events_of(d, id), "->queued queued>running running>running running>succeeded");

    /* terminal states never change */
    CHECK_INT(sched_job_complete(d, id, w, DB_FAILED, "late", NULL, T0 + 6000, &done, err), -EBUSY);
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 6000, LEASE, &beat, err), -EBUSY);
    CHECK_INT(sched_job_cancel(d, id, NULL, T0 + 6000, &done, err), -EBUSY);
    CHECK(strstr(err, "already succeeded") != NULL);
    CHECK_INT(sweep(d, T0 + 999999999), 0);
    CHECK_INT(job_status(d, id), DB_SUCCEEDED);
    db_close(d);
}

static void test_order_and_fit(void)
{
    db *d = fresh_db("order");
    char gpu[DB_ID_LEN + 1], cpu[DB_ID_LEN + 1], both[DB_ID_LEN + 1], acc[DB_ID_LEN + 1];
    char a[DB_ID_LEN + 1], b[DB_ID_LEN + 1], c[DB_ID_LEN + 1], e[DB_ID_LEN + 1];
    char g[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    add_worker(d, "gpu", gpu);
    add_worker(d, "cpu", cpu);
    add_worker(d, "cpu,gpu", both);
    add_worker(d, "accelerator", acc);
    submit(d, "a", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 1, a);
    submit(d, "b", 5, JOB_DEVICE_ANY, 3, 3600, T0 + 2, b);
    submit(d, "c", 5, JOB_DEVICE_ANY, 3, 3600, T0 + 3, c);
    submit(d, "e", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 4, e);
    submit(d, "g", 9, JOB_DEVICE_GPU, 3, 3600, T0 + 5, g);

    /* the CPU worker skips the GPU job (highest priority) and takes b, then c, a, e in order */
    CHECK_INT(lease(d, cpu, T0 + 10, got), 1);
    CHECK_STR(got, b);
    db_job j = get(d, b);
    CHECK_STR(j.device, "cpu-0");
    db_job_clear(&j);
    CHECK_INT(lease(d, acc, T0 + 10, got), 1); /* "any" fits an accelerator-only worker */
    CHECK_STR(got, c);
    CHECK_INT(lease(d, both, T0 + 10, got), 1);
    CHECK_STR(got, g);
    j = get(d, g);
    CHECK_STR(j.device, "gpu-1"); /* the GPU of a cpu,gpu worker */
    db_job_clear(&j);
    CHECK_INT(lease(d, gpu, T0 + 10, got), 1);
    CHECK_STR(got, a);
    CHECK_INT(lease(d, gpu, T0 + 10, got), 1);
    CHECK_STR(got, e);
    CHECK_INT(lease(d, gpu, T0 + 10, got), 0);

    /* a CPU job never goes to a GPU-only worker, a GPU job never to a CPU-only one */
    char cj[DB_ID_LEN + 1], gj[DB_ID_LEN + 1];
    submit(d, "cpu-job", 0, JOB_DEVICE_CPU, 3, 3600, T0 + 20, cj);
    submit(d, "gpu-job", 0, JOB_DEVICE_GPU, 3, 3600, T0 + 21, gj);
    CHECK_INT(lease(d, acc, T0 + 30, got), 0);
    CHECK_INT(lease(d, gpu, T0 + 30, got), 1);
    CHECK_STR(got, gj);
    CHECK_INT(lease(d, gpu, T0 + 30, got), 0);
    CHECK_INT(lease(d, cpu, T0 + 30, got), 1);
    CHECK_STR(got, cj);

    char err[ERR_LEN];
    db_job none;
    CHECK_INT(sched_job_lease(d, "no-such-worker", T0, LEASE, &none, err), -ENOENT);
    db_close(d);
}

static void test_failure_is_final(void)
{
    db *d = fresh_db("final");
    char err[ERR_LEN], w[DB_ID_LEN + 1], other[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    add_worker(d, "gpu", other);
    submit(d, "bad-data", 0, JOB_DEVICE_ANY, 5, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);
    db_job j;
    CHECK_INT(sched_job_complete(d, id, other, DB_FAILED, "nope", NULL, T0 + 1, &j, err), -EBUSY);
    CHECK_INT(sched_job_complete(d, id, w, DB_QUEUED, NULL, NULL, T0 + 1, &j, err), -EINVAL);
    CHECK_INT(sched_job_complete(d, "missing", w, DB_FAILED, NULL, NULL, T0 + 1, &j, err), -ENOENT);
    CHECK_INT(sched_job_complete(d, id, w, DB_FAILED, "dataset: not a CSV", NULL, T0 + 2, &j, err),
              0);
    CHECK_INT(j.status, DB_FAILED);
    CHECK_STR(j.error, "dataset: not a CSV");
    CHECK_INT(j.attempt, 1); /* attempts were left, and still no retry */
    db_job_clear(&j);
    CHECK_INT(lease(d, w, T0 + 3, got), 0);
    db_close(d);
}

/* A stopping worker hands its job back: queued at once, and the released attempt does not count
 * against max_attempts (2 here: two lapses after the release, not one, fail the job). */
static void test_release(void)
{
    db *d = fresh_db("release");
    char err[ERR_LEN], w[DB_ID_LEN + 1], other[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    add_worker(d, "gpu", other);
    submit(d, "stop-me", 0, JOB_DEVICE_ANY, 2, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);
    db_job j;
    CHECK_INT(sched_job_release(d, id, other, T0 + 1, &j, err), -EBUSY);
    CHECK_INT(sched_job_release(d, "missing", w, T0 + 1, &j, err), -ENOENT);
    CHECK_INT(sched_job_release(d, id, w, T0 + 2, &j, err), 0);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_INT(j.attempt, 1);
    db_job_clear(&j);
    CHECK_INT(sched_job_release(d, id, w, T0 + 3, &j, err), -EBUSY); /* not running any more */
    /* the first lapse after the release leaves one attempt */
    CHECK_INT(lease(d, other, T0 + 4, got), 1);
    CHECK_INT(sweep(d, T0 + 5 + LEASE * 1000), 1);
    CHECK_INT(job_status(d, id), DB_QUEUED);
    /* that lapse was a real attempt, so the job waits out the back-off of a lost attempt (a
     * release had none); the next one's lapse fails the job */
    int64_t after = T0 + 5 + LEASE * 1000 + SCHED_RETRY_BACKOFF_BASE_MS;
    CHECK_INT(lease(d, w, after - 1, got), 0);
    CHECK_INT(lease(d, w, after, got), 1);
    CHECK_INT(sweep(d, after + 1 + LEASE * 1000), 1);
    CHECK_INT(job_status(d, id), DB_FAILED);
    CHECK_STR(events_of(d, id),
              "->queued queued>running running>queued queued>running running>queued "
              "queued>running running>failed");
    db_close(d);
}

static void test_cancel(void)
{
    db *d = fresh_db("cancel");
    char err[ERR_LEN], w[DB_ID_LEN + 1], q[DB_ID_LEN + 1], r[DB_ID_LEN + 1];
    char r2[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    submit(d, "running", 1, JOB_DEVICE_ANY, 3, 3600, T0, r);
    submit(d, "running-2", 1, JOB_DEVICE_ANY, 3, 3600, T0 + 1, r2);
    submit(d, "queued", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 2, q);
    CHECK_INT(lease(d, w, T0 + 5, got), 1);
    CHECK_STR(got, r);

    /* queued: cancelled at once, and never leased */
    db_job j;
    CHECK_INT(sched_job_cancel(d, q, NULL, T0 + 10, &j, err), 0);
    CHECK_INT(j.status, DB_CANCELLED);
    CHECK_INT(j.finished_at, T0 + 10);
    db_job_clear(&j);
    CHECK_STR(events_of(d, q), "->queued queued>cancelled");

    /* running: a request the worker sees on its next heartbeat; twice is the same */
    CHECK_INT(sched_job_cancel(d, r, NULL, T0 + 20, &j, err), 0);
    CHECK_INT(j.status, DB_RUNNING);
    CHECK_INT(j.cancel_requested, 1);
    db_job_clear(&j);
    CHECK_INT(sched_job_cancel(d, r, NULL, T0 + 21, &j, err), 0);
    CHECK_INT(j.cancel_requested, 1);
    db_job_clear(&j);
    sched_progress p = {.phase = DB_PHASE_NONE};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, r, w, &p, T0 + 30, LEASE, &beat, err), 0);
    CHECK_INT(beat.cancel, 1);
    CHECK_INT(sched_job_complete(d, r, w, DB_CANCELLED, NULL, NULL, T0 + 40, &j, err), 0);
    CHECK_INT(j.status, DB_CANCELLED);
    CHECK(j.error == NULL);
    db_job_clear(&j);
    CHECK_STR(events_of(d, r), "->queued queued>running running>running running>cancelled");
    CHECK_INT(sched_job_cancel(d, r, NULL, T0 + 50, &j, err), -EBUSY);
    CHECK_INT(sched_job_cancel(d, "missing", NULL, T0 + 50, &j, err), -ENOENT);

    /* running with a cancel request whose worker vanishes: cancelled, not requeued */
    CHECK_INT(lease(d, w, T0 + 60, got), 1);
    CHECK_STR(got, r2);
    CHECK_INT(sched_job_cancel(d, r2, NULL, T0 + 61, &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(sweep(d, T0 + 61 + LEASE * 1000), 1);
    CHECK_INT(job_status(d, r2), DB_CANCELLED);
    db_close(d);
}

/* A graceful stop: running → stop_requested, carried by every heartbeat's answer until the
 * worker completes succeeded with its stop result; queued → cancelled with the reason; a
 * second request keeps the first words; a finished job refuses. */
static void test_stop(void)
{
    db *d = fresh_db("stop");
    char err[ERR_LEN], w[DB_ID_LEN + 1], q[DB_ID_LEN + 1], r[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    submit(d, "running", 1, JOB_DEVICE_ANY, 3, 3600, T0, r);
    submit(d, "queued", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 1, q);
    CHECK_INT(lease(d, w, T0 + 5, got), 1);
    CHECK_STR(got, r);
    db_job j = get(d, q);
    CHECK_INT(sched_job_stop(d, j.seq, "not needed", NULL, T0 + 10, NULL, err), 1);
    db_job_clear(&j);
    j = get(d, q);
    CHECK_INT(j.status, DB_CANCELLED);
    CHECK_STR(j.stop_reason, "not needed");
    db_job_clear(&j);
    CHECK_STR(events_of(d, q), "->queued queued>cancelled");

    sched_progress p = {.phase = DB_PHASE_NONE};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, r, w, &p, T0 + 15, LEASE, &beat, err), 0);
    CHECK_STR(beat.stop, "");
    j = get(d, r);
    int64_t seq = j.seq;
    db_job_clear(&j);
    CHECK_INT(sched_job_request_stop(d, seq, "rung 1 of 3", err), 0);
    CHECK_INT(sched_job_stop(d, seq, "later words", NULL, T0 + 21, &j, err), 0);
    CHECK_STR(j.stop_requested, "rung 1 of 3");
    CHECK_INT(j.status, DB_RUNNING);
    db_job_clear(&j);
    CHECK_INT(sched_job_heartbeat(d, r, w, &p, T0 + 30, LEASE, &beat, err), 0);
    CHECK_STR(beat.stop, "rung 1 of 3");
    CHECK_INT(beat.cancel, 0);
    sched_stop_result sr = {"rung 1 of 3", 4, 0};
    CHECK_INT(sched_job_complete_stopped(d, r, w, DB_SUCCEEDED, NULL, &sr, NULL, T0 + 40, &j, err),
              0);
    CHECK_INT(j.status, DB_SUCCEEDED);
    CHECK_STR(j.stop_reason, "rung 1 of 3");
    CHECK_INT(j.stopped_epoch, 4);
    CHECK_INT(j.best_epoch, 0);
    db_job_clear(&j);
    CHECK_INT(sched_job_stop(d, seq, NULL, NULL, T0 + 50, NULL, err), -EBUSY);
    CHECK_INT(sched_job_request_stop(d, 999999, "x", err), -ENOENT);
    db_close(d);
}

static void test_idempotent_submit(void)
{
    db *d = fresh_db("idem");
    char err[ERR_LEN];
    sched_new_job nj = {.name = "once",
                        .document = "{\"a\":1}",
                        .device_kind = JOB_DEVICE_ANY,
                        .max_attempts = 3,
                        .max_runtime_seconds = 60,
                        .idem_key = "k-1",
                        .body_hash = "h-1"};
    db_job first, again;
    int created = -1;
    CHECK_INT(sched_job_submit(d, &nj, T0, &first, &created, err), 0);
    CHECK_INT(created, 1);
    CHECK_INT(sched_job_submit(d, &nj, T0 + 5, &again, &created, err), 0);
    CHECK_INT(created, 0);
    CHECK_STR(again.id, first.id);
    CHECK_INT(again.created_at, T0);
    db_job_clear(&again);
    nj.body_hash = "h-2";
    CHECK_INT(sched_job_submit(d, &nj, T0 + 6, &again, &created, err), -EEXIST);
    CHECK(strstr(err, "Idempotency-Key reused with a different body") != NULL);
    CHECK(strstr(err, first.id) != NULL);
    nj.idem_key = NULL; /* without a key every submit is a new job */
    CHECK_INT(sched_job_submit(d, &nj, T0 + 7, &again, &created, err), 0);
    CHECK_INT(created, 1);
    CHECK(strcmp(again.id, first.id) != 0);
    CHECK_INT(strlen(again.id), DB_ID_LEN);
    db_job_clear(&again);
    int64_t n = 0;
    CHECK_INT(db_job_count(d, DB_QUEUED, &n, err), 0);
    CHECK_INT(n, 2);
    CHECK_STR(events_of(d, first.id), "->queued");
    db_job_clear(&first);
    db_close(d);
}

/* ---- concurrent submits (group commit) ----------------------------------------------------- */

#define GC_THREADS 8
#define GC_EACH    100
#define GC_KEYS    10

static char gc_path[256];
static char gc_ids[GC_KEYS][DB_ID_LEN + 1];
static pthread_mutex_t gc_lock = PTHREAD_MUTEX_INITIALIZER;
static int gc_bad;

/* Submits GC_EACH jobs on its own connection: even ones without a key, odd ones with one of
 * GC_KEYS keys shared by every thread (same document), checking each key names one job. */
static void *gc_client(void *arg)
{
    (void)arg;
    char err[ERR_LEN], key[32];
    db *d = NULL;
    if (db_open(gc_path, &d, err) < 0)
        return (void *)1;
    for (int i = 0; i < GC_EACH; i++) {
        sched_new_job nj = {.name = "gc",
                            .document = "{}",
                            .max_attempts = 1,
                            .max_runtime_seconds = 60,
                            .body_hash = "same"};
        int k = (i / 2) % GC_KEYS;
        if (i % 2) {
            snprintf(key, sizeof key, "shared-%d", k);
            nj.idem_key = key;
        }
        db_job j;
        int created = -1;
        if (sched_job_submit(d, &nj, T0 + i, &j, &created, err) < 0) {
            fprintf(stderr, "concurrent submit: %s\n", err);
            gc_bad++;
            continue;
        }
        if (i % 2) {
            pthread_mutex_lock(&gc_lock);
            if (!gc_ids[k][0])
                memcpy(gc_ids[k], j.id, sizeof j.id);
            else if (strcmp(gc_ids[k], j.id) != 0)
                gc_bad++;
            pthread_mutex_unlock(&gc_lock);
        } else if (!created) {
            gc_bad++;
        }
        db_job_clear(&j);
    }
    db_close(d);
    return NULL;
}

static void test_concurrent_submits(void)
{
    db *d = fresh_db("group");
    char err[ERR_LEN];
    snprintf(gc_path, sizeof gc_path, "%s", sqlite3_db_filename(db_sqlite(d), "main"));
    pthread_t t[GC_THREADS];
    for (int i = 0; i < GC_THREADS; i++)
        pthread_create(&t[i], NULL, gc_client, NULL);
    for (int i = 0; i < GC_THREADS; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        CHECK(rc == NULL);
    }
    CHECK_INT(gc_bad, 0);
    int64_t n = 0;
    CHECK_INT(db_job_count(d, DB_QUEUED, &n, err), 0);
    CHECK_INT(n, GC_THREADS * GC_EACH / 2 + GC_KEYS);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db_sqlite(d), "SELECT count(*) FROM job_events", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_INT(sqlite3_column_int64(st, 0), n); /* one event per job, none for the retries */
    sqlite3_finalize(st);
    /* a conflicting reuse of a key fails alone */
    sched_new_job nj = {.name = "gc",
                        .document = "{}",
                        .max_attempts = 1,
                        .max_runtime_seconds = 60,
                        .idem_key = "shared-0",
                        .body_hash = "other"};
    db_job j;
    int created = -1;
    CHECK_INT(sched_job_submit(d, &nj, T0, &j, &created, err), -EEXIST);
    CHECK_INT(created, -1);
    db_close(d);
}

int main(void)
{
    lifecycle_test_begin();
    test_happy_path();
    test_order_and_fit();
    test_failure_is_final();
    test_release();
    test_cancel();
    test_stop();
    test_idempotent_submit();
    test_concurrent_submits();
    lifecycle_test_end();
    return check_exit();
}
