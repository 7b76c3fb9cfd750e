/* Unit tests of scheduler/: what happens when time passes: lapsed leases (requeue, then failure
 * after max_attempts; metrics replaced per epoch across attempts, checkpoints stored for the
 * lease holder only), max_runtime_seconds over attempts, reports from a worker that does not hold
 * the lease, lease expiry (sched_expire_db; the signals api_expire() raises for what it reports are
 * seen by the end-to-end tests over HTTP), a worker known dead (sched_worker_lost), and the
 * back-off of a job queued again after a lost attempt. */
#include "tests/unit/scheduler/lifecycle_test.h"

static void test_lapsed_leases(void)
{
    db *d = fresh_db("lapse");
    char err[ERR_LEN], w1[DB_ID_LEN + 1], w2[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w1);
    add_worker(d, "gpu", w2);
    submit(d, "flaky", 0, JOB_DEVICE_ANY, 2, 3600, T0, id);
    CHECK_INT(lease(d, w1, T0, got), 1);

    /* attempt 1 reports epochs 1 and 2 */
    db_metric m = {.epoch = 1,
                   .loss = 1.0,
                   .val_loss = NAN,
                   .accuracy = NAN,
                   .val_accuracy = NAN,
                   .seconds = 1,
                   .samples_per_second = NAN};
    db_histogram h = {.epoch = 1,
                      .tensor = "dense_0.weight",
                      .data = "{\"min\":0,\"max\":1,\"num\":1,\"sum\":1,\"sum_squares\":1,"
                              "\"limits\":[1],\"counts\":[1]}"};
    sched_progress p = {.epochs = &m, .n_epochs = 1, .histograms = &h, .n_histograms = 1};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, id, w1, &p, T0 + 1000, LEASE, &beat, err), 0);
    m.epoch = h.epoch = 2;
    CHECK_INT(sched_job_heartbeat(d, id, w1, &p, T0 + 2000, LEASE, &beat, err), 0);
    p.histograms = NULL;
    p.n_histograms = 0;

    /* a checkpoint after epoch 1 is stored for the lease holder only, and only when newer */
    char adir[512], up[600], stored_path[DATADIR_PATH_MAX];
    snprintf(adir, sizeof adir, "%s/ckpt-artifacts", tmp_dir);
    mkdir(adir, 0755);
    snprintf(up, sizeof up, "%s/ckpt-upload", tmp_dir);
    FILE *f = fopen(up, "w");
    fputs("state", f);
    fclose(f);
    int stored = -1;
    CHECK_INT(sched_checkpoint_store(d, id, w2, adir, up, NULL, 1, &stored, err), -EBUSY);
    CHECK_INT(sched_checkpoint_store(d, id, w1, adir, up, NULL, 1, &stored, err), 0);
    CHECK_INT(stored, 1);
    CHECK_INT(datadir_job_checkpoint(adir, id, stored_path), 0);
    CHECK_INT(access(stored_path, F_OK), 0);
    f = fopen(up, "w");
    fclose(f);
    CHECK_INT(sched_checkpoint_store(d, id, w1, adir, up, NULL, 1, &stored, err), 0);
    CHECK_INT(stored, 0); /* not newer: dropped, the stored file stays */
    CHECK_INT(access(up, F_OK), 0);

    /* not yet lapsed: nothing happens; lapsed: back to the queue, attempt unchanged */
    CHECK_INT(sweep(d, T0 + 2000 + LEASE * 1000), 0);
    CHECK_INT(job_status(d, id), DB_RUNNING);
    CHECK_INT(sweep(d, T0 + 2001 + LEASE * 1000), 1);
    db_job j = get(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_INT(j.attempt, 1);
    CHECK_INT(j.lease_expires_at, 0);
    db_job_clear(&j);
    db_worker wk;
    CHECK_INT(db_worker_get(d, w1, &wk, err), 0);
    CHECK_STR(wk.job_id, "");
    db_worker_clear(&wk);

    /* the requeue dropped the epochs after the checkpoint's and said where attempt 2 starts */
    {
        sqlite3_stmt *q = NULL;
        sqlite3_prepare_v2(db_sqlite(d),
                           "SELECT (SELECT group_concat(epoch, ' ') FROM metrics m WHERE"
                           " m.job_seq = j.seq), (SELECT text FROM logs l WHERE l.job_seq = j.seq"
                           " ORDER BY line DESC LIMIT 1), (SELECT group_concat(epoch, ' ') FROM"
                           " histograms h WHERE h.job_seq = j.seq) FROM jobs j WHERE j.id = ?",
                           -1, &q, NULL);
        sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
        CHECK(sqlite3_step(q) == SQLITE_ROW);
        CHECK_STR((const char *)sqlite3_column_text(q, 0), "1");
        CHECK_STR((const char *)sqlite3_column_text(q, 1), "attempt 2 resumes after epoch 1");
        CHECK_STR((const char *)sqlite3_column_text(q, 2), "1");
        sqlite3_finalize(q);
    }

    /* the old holder is refused from now on */
    CHECK_INT(sched_job_heartbeat(d, id, w1, &p, T0 + 40000, LEASE, &beat, err), -EBUSY);

    /* attempt 2 on the other worker resumes after epoch 1: it reports epochs 2 and 3 */
    int64_t t1 = T0 + 50000;
    CHECK_INT(lease(d, w2, t1, got), 1);
    j = get(d, id);
    CHECK_INT(j.attempt, 2);
    CHECK_INT(j.started_at, T0); /* the first start stays */
    db_job_clear(&j);
    CHECK_INT(sched_job_heartbeat(d, id, w1, &p, t1 + 1, LEASE, &beat, err), -EBUSY);
    CHECK(strstr(err, "another worker") != NULL);
    m.epoch = 2;
    m.loss = 0.25;
    CHECK_INT(sched_job_heartbeat(d, id, w2, &p, t1 + 1000, LEASE, &beat, err), 0);
    m.epoch = 3;
    CHECK_INT(sched_job_heartbeat(d, id, w2, &p, t1 + 2000, LEASE, &beat, err), 0);
    j = get(d, id);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db_sqlite(d),
                       "SELECT group_concat(epoch || ':' || attempt || ':' || loss, ' ') FROM"
                       " (SELECT * FROM metrics WHERE job_seq = ? ORDER BY epoch)",
                       -1, &st, NULL);
    sqlite3_bind_int64(st, 1, j.seq);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(st, 0), "1:1:1.0 2:2:0.25 3:2:0.25");
    sqlite3_finalize(st);
    db_job_clear(&j);

    /* attempt 2 lapses too: attempts are used up, the job fails */
    CHECK_INT(sweep(d, t1 + 2001 + LEASE * 1000), 1);
    j = get(d, id);
    CHECK_INT(j.status, DB_FAILED);
    CHECK_STR(j.error, "lease expired after 2 attempts");
    CHECK(j.finished_at > 0);
    db_job_clear(&j);
    CHECK_STR(events_of(d, id), "->queued queued>running running>queued queued>running "
                                "running>failed");
    db_close(d);
}

static void test_max_runtime(void)
{
    db *d = fresh_db("runtime");
    char err[ERR_LEN], w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    add_worker(d, "cpu", w);
    submit(d, "slow", 0, JOB_DEVICE_ANY, 3, 60, T0, id);
    /* attempt 1 runs 40 s (heartbeats keep it alive), then its lease lapses */
    CHECK_INT(lease(d, w, T0, got), 1);
    sched_progress p = {.phase = DB_PHASE_NONE};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 20000, LEASE, &beat, err), 0);
    CHECK_INT(sweep(d, T0 + 40000), 0);
    CHECK_INT(sweep(d, T0 + 50001), 1);
    db_job j = get(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_INT(j.runtime_ms, 50001);
    db_job_clear(&j);
    /* attempt 2: 10 s is fine, 10 s more passes 60 s in all */
    int64_t t1 = T0 + 100000;
    CHECK_INT(lease(d, w, t1, got), 1);
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, t1 + 9000, LEASE, &beat, err), 0);
    CHECK_INT(sweep(d, t1 + 9000), 0);
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, t1 + 10000, LEASE, &beat, err), 0);
    CHECK_INT(sweep(d, t1 + 10000), 1);
    j = get(d, id);
    CHECK_INT(j.status, DB_FAILED);
    CHECK(j.error && strstr(j.error, "exceeded max_runtime_seconds") != NULL);
    db_job_clear(&j);
    db_close(d);
}

static void test_sweep(void)
{
    db *d = fresh_db("sweep");
    char w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], got[DB_ID_LEN + 1], err[ERR_LEN];
    add_worker(d, "gpu", w);
    submit(d, "swept", 0, JOB_DEVICE_ANY, 3, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);
    sched_expiry_stats st;
    CHECK_INT(sched_expire_db(d, NULL, T0 + 1000, 60, &st, err), 0);
    CHECK_INT(st.requeued + st.failed + st.cancelled, 0);
    CHECK_INT(sched_expire_db(d, NULL, T0 + 1 + LEASE * 1000, 60, &st, err), 0);
    CHECK_INT(st.requeued, 1);
    /* the worker, silent for a minute, is marked gone */
    char err2[ERR_LEN];
    CHECK_INT(sched_expire_db(d, NULL, T0 + 61000, 60, &st, err2), 0);
    CHECK_INT(st.workers_gone, 1);
    db_worker wk;
    CHECK_INT(db_worker_get(d, w, &wk, err), 0);
    CHECK_INT(wk.gone, 1);
    db_worker_clear(&wk);
    CHECK_INT(lease(d, w, T0 + 62000, got), 1); /* asking again brings it back */
    CHECK_INT(db_worker_get(d, w, &wk, err), 0);
    CHECK_INT(wk.gone, 0);
    db_worker_clear(&wk);
    db_close(d);
}

static void test_worker_lost(void)
{
    db *d = fresh_db("lost");
    char err[ERR_LEN], w1[DB_ID_LEN + 1], w2[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1], c[DB_ID_LEN + 1];
    const char *why = "local worker local-0 (pid 7) was killed by signal 9";
    add_worker(d, "gpu", w1);
    add_worker(d, "gpu", w2);
    submit(d, "lost", 0, JOB_DEVICE_ANY, 2, 3600, T0, id);
    CHECK_INT(lease(d, w1, T0, got), 1);

    /* at once, long before the lease would lapse: queued again, the worker gone */
    int to = -2;
    CHECK_INT(sched_worker_lost(d, w1, why, NULL, T0 + 100, &to, err), 0);
    CHECK_INT(to, DB_QUEUED);
    CHECK_STR(events_of(d, id), "->queued queued>running running>queued");
    db_worker wk;
    CHECK_INT(db_worker_get(d, w1, &wk, err), 0);
    CHECK_INT(wk.gone, 1);
    CHECK_STR(wk.job_id, "");
    db_worker_clear(&wk);
    CHECK_INT(sweep(d, T0 + 1 + LEASE * 1000), 0); /* nothing left for the lapse to do */

    /* the attempt counted, and the job waits out its back-off before the next lease; the
     * second one's loss uses up max_attempts (2) */
    db_job j = get(d, id);
    CHECK_INT(j.retry_at, T0 + 100 + SCHED_RETRY_BACKOFF_BASE_MS);
    db_job_clear(&j);
    CHECK_INT(lease(d, w2, T0 + 200, got), 0);
    CHECK_INT(lease(d, w2, T0 + 100 + SCHED_RETRY_BACKOFF_BASE_MS, got), 1);
    j = get(d, id);
    CHECK_INT(j.attempt, 2);
    CHECK_INT(j.retry_at, 0); /* leasing clears it */
    db_job_clear(&j);
    CHECK_INT(sched_worker_lost(d, w2, why, NULL, T0 + 300 + SCHED_RETRY_BACKOFF_BASE_MS, &to, err),
              0);
    CHECK_INT(to, DB_FAILED);
    j = get(d, id);
    CHECK(j.error && strstr(j.error, "killed by signal 9 after 2 attempts"));
    db_job_clear(&j);

    /* a worker holding nothing is only marked gone; an unknown one is -ENOENT */
    CHECK_INT(sched_worker_lost(d, w1, why, NULL, T0 + 400, &to, err), 0);
    CHECK_INT(to, -1);
    CHECK_INT(sched_worker_lost(d, "nobody", why, NULL, T0 + 400, &to, err), -ENOENT);

    /* a job whose cancel was requested ends cancelled */
    add_worker(d, "cpu", w1);
    submit(d, "to-cancel", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 500, c);
    CHECK_INT(lease(d, w1, T0 + 500, got), 1);
    CHECK_INT(sched_job_cancel(d, c, NULL, T0 + 600, &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(sched_worker_lost(d, w1, why, NULL, T0 + 700, &to, err), 0);
    CHECK_INT(to, DB_CANCELLED);
    db_close(d);
}

/* The back-off doubles with each lost attempt up to its cap, follows the setting, and a base of
 * 0 turns it off; the event of a lost attempt says when the next starts. */
static void test_backoff(void)
{
    CHECK_INT(sched_retry_backoff_ms(1), SCHED_RETRY_BACKOFF_BASE_MS);
    CHECK_INT(sched_retry_backoff_ms(2), 2 * SCHED_RETRY_BACKOFF_BASE_MS);
    CHECK_INT(sched_retry_backoff_ms(3), 4 * SCHED_RETRY_BACKOFF_BASE_MS);
    CHECK_INT(sched_retry_backoff_ms(99), SCHED_RETRY_BACKOFF_MAX_MS);
    sched_retry_backoff_set(250);
    CHECK_INT(sched_retry_backoff_ms(1), 250);
    CHECK_INT(sched_retry_backoff_ms(4), 2000);
    db *d = fresh_db("backoff");
    char w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    add_worker(d, "gpu", w);
    submit(d, "backs-off", 0, JOB_DEVICE_ANY, 3, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);
    CHECK_INT(sweep(d, T0 + 1 + LEASE * 1000), 1);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM job_events WHERE reason = "
                              "'lease expired; retrying in 1 s'"),
              1);
    CHECK_INT(lease(d, w, T0 + 250 + LEASE * 1000, got), 0);
    CHECK_INT(lease(d, w, T0 + 251 + LEASE * 1000, got), 1);
    sched_retry_backoff_set(0); /* none: queued again and leased at once */
    CHECK_INT(sweep(d, T0 + 252 + 2 * LEASE * 1000), 1);
    CHECK_INT(lease(d, w, T0 + 252 + 2 * LEASE * 1000, got), 1);
    sched_retry_backoff_set(SCHED_RETRY_BACKOFF_BASE_MS);
    db_close(d);
}

int main(void)
{
    lifecycle_test_begin();
    test_lapsed_leases();
    test_max_runtime();
    test_sweep();
    test_worker_lost();
    test_backoff();
    lifecycle_test_end();
    return check_exit();
}
