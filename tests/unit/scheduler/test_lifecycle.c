/* Unit tests of scheduler/: every transition of the job lifecycle and the ones it forbids,
 * priority + FIFO order, device fit, lapsed leases (requeue, then failure after max_attempts),
 * max_runtime_seconds over attempts, cancel in each state, reports from a worker that does not
 * hold the lease, idempotent submits, the event history, metrics replaced per epoch across
 * attempts, concurrent submits sharing transactions (group commit), artifacts, delete, a
 * worker known dead (sched_worker_lost), checkpoints deleted or kept when a job ends, and the
 * sweeper (sched_sweep_db; the signals api_sweep() raises for what it reports are seen by the
 * end-to-end tests over HTTP).
 *
 * The clock is the test's: every call gets `now` explicitly. */
#include "scheduler/lifecycle.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/app.h"
#include "db/artifacts.h"
#include "db/events.h"
#include "db/models.h"
#include "db/workers.h"
#include "scheduler/sweeper.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"
#include "job/job.h"
#include "util/datadir.h"

#define T0    1700000000000LL /* the test's epoch, ms */
#define LEASE 30              /* lease seconds */

static char tmp_dir[] = "/tmp/trainyard-test-sched-XXXXXX";
static db *the_db;
/* ---- helpers ------------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static db *fresh_db(const char *name)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.db", tmp_dir, name);
    db *d = NULL;
    if (db_open(path, &d, err) < 0) {
        fprintf(stderr, "db_open: %s\n", err);
        exit(1);
    }
    the_db = d;
    return d;
}

/* Registers a worker with devices of the given types ("gpu", "cpu", ...), returns its id. */
static void add_worker(db *d, const char *types, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN], devices[512] = "[";
    db_worker w;
    memset(&w, 0, sizeof w);
    CHECK_INT(db_id_new(w.id, err), 0);
    snprintf(w.name, sizeof w.name, "worker-%s", types);
    char copy[64];
    snprintf(copy, sizeof copy, "%s", types);
    int i = 0;
    for (char *t = strtok(copy, ","); t; t = strtok(NULL, ","), i++) {
        char one[128];
        snprintf(one, sizeof one, "%s{\"index\":%d,\"name\":\"%s-%d\",\"type\":\"%s\"}",
                 i ? "," : "", i, t, i, t);
        strcat(devices, one);
        w.kinds |= !strcmp(t, "gpu")   ? DB_KIND_GPU
                   : !strcmp(t, "cpu") ? DB_KIND_CPU
                                       : DB_KIND_OTHER;
    }
    strcat(devices, "]");
    w.devices = devices;
    w.registered_at = w.last_seen_at = T0;
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    memcpy(id, w.id, sizeof w.id);
}

/* Submits a job with document text; returns its id in id. */
static void submit_doc(db *d, const char *name, const char *document, int priority, int kind,
                       int max_attempts, int max_runtime, int64_t now, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    sched_new_job nj = {.name = name,
                        .document = document,
                        .device_kind = kind,
                        .max_attempts = max_attempts,
                        .max_runtime_seconds = max_runtime,
                        .priority = priority};
    db_job j;
    int created = -1;
    CHECK_INT(sched_job_submit(d, &nj, now, &j, &created, err), 0);
    CHECK_INT(created, 1);
    memcpy(id, j.id, sizeof j.id);
    db_job_clear(&j);
}

/* Submits a job; returns its id in id. */
static void submit(db *d, const char *name, int priority, int kind, int max_attempts,
                   int max_runtime, int64_t now, char id[DB_ID_LEN + 1])
{
    submit_doc(d, name, "{\"name\":\"doc\"}", priority, kind, max_attempts, max_runtime, now, id);
}

/* Leases for worker and returns 1 with the job's id in id, or 0 when nothing fits. */
static int lease(db *d, const char *worker, int64_t now, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    db_job j;
    int rc = sched_job_lease(d, worker, now, LEASE, &j, err);
    CHECK(rc == 0 || rc == 1);
    if (rc == 1) {
        memcpy(id, j.id, sizeof j.id);
        db_job_clear(&j);
    }
    return rc;
}

static db_job get(db *d, const char *id)
{
    char err[ERR_LEN];
    db_job j;
    memset(&j, 0, sizeof j);
    CHECK_INT(db_job_get(d, id, &j, err), 0);
    return j;
}

static int job_status(db *d, const char *id)
{
    db_job j = get(d, id);
    int s = j.status;
    db_job_clear(&j);
    return s;
}

typedef struct history {
    int n;
    char text[1024];
} history;

static int history_add(void *ctx, const db_event *e)
{
    history *h = ctx;
    char one[128];
    snprintf(one, sizeof one, "%s%s>%s", h->n ? " " : "",
             e->from < 0 ? "-" : db_status_name(e->from), db_status_name(e->to));
    strncat(h->text, one, sizeof h->text - strlen(h->text) - 1);
    h->n++;
    return 0;
}

/* The job's events as "from>to ..." ("-" for none). */
static const char *events_of(db *d, const char *id)
{
    static history h;
    char err[ERR_LEN];
    memset(&h, 0, sizeof h);
    db_job j = get(d, id);
    CHECK_INT(db_event_list(d, j.seq, history_add, &h, err), 0);
    db_job_clear(&j);
    return h.text;
}

static int sweep(db *d, int64_t now)
{
    char err[ERR_LEN];
    sched_sweep_stats st;
    CHECK_INT(sched_sweep_db(d, NULL, now, 60, &st, err), 0);
    return st.requeued + st.failed + st.cancelled;
}

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
    /* that lapse was a real attempt: the next one's lapse fails the job */
    CHECK_INT(lease(d, w, T0 + 6 + LEASE * 1000, got), 1);
    CHECK_INT(sweep(d, T0 + 7 + 2 * LEASE * 1000), 1);
    CHECK_INT(job_status(d, id), DB_FAILED);
    CHECK_STR(events_of(d, id),
              "->queued queued>running running>queued queued>running running>queued "
              "queued>running running>failed");
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

static void test_artifacts_and_delete(void)
{
    db *d = fresh_db("artifacts");
    char err[ERR_LEN], w[DB_ID_LEN + 1], other[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    char got[DB_ID_LEN + 1], adir[512], up[600], final[1200];
    add_worker(d, "gpu", w);
    add_worker(d, "gpu", other);
    snprintf(adir, sizeof adir, "%s/artifacts", tmp_dir);
    mkdir(adir, 0755);
    submit(d, "with-files", 0, JOB_DEVICE_ANY, 3, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);

    CHECK(sched_artifact_name_ok("model.safetensors"));
    CHECK(sched_artifact_name_ok("a_b-c.1"));
    CHECK(!sched_artifact_name_ok(".hidden"));
    CHECK(!sched_artifact_name_ok("../x"));
    CHECK(!sched_artifact_name_ok("a/b"));
    CHECK(!sched_artifact_name_ok(""));
    char longname[140];
    memset(longname, 'x', 129);
    longname[129] = '\0';
    CHECK(!sched_artifact_name_ok(longname));

    snprintf(up, sizeof up, "%s/upload-1", tmp_dir);
    FILE *f = fopen(up, "w");
    fputs("weights", f);
    fclose(f);
    db_artifact a = {.name = "model.safetensors", .size = 7, .created_at = T0 + 1};
    snprintf(a.sha256, sizeof a.sha256, "%064d", 0);
    CHECK_INT(sched_artifact_add(d, id, other, adir, up, &a, err), -EBUSY);
    CHECK_INT(access(up, F_OK), 0); /* a refused upload stays where it was */
    db_artifact bad = a;
    snprintf(bad.name, sizeof bad.name, "../escape");
    CHECK_INT(sched_artifact_add(d, id, w, adir, up, &bad, err), -EINVAL);
    CHECK_INT(sched_artifact_add(d, id, w, adir, up, &a, err), 0);
    snprintf(final, sizeof final, "%s/%s/model.safetensors", adir, id);
    CHECK_INT(access(final, F_OK), 0);
    CHECK(access(up, F_OK) != 0);
    db_job j = get(d, id);
    db_artifact row;
    CHECK_INT(db_artifact_get(d, j.seq, "model.safetensors", &row, err), 0);
    CHECK_INT(row.size, 7);
    db_job_clear(&j);

    /* delete: refused while running, then removes the rows and the folder */
    CHECK_INT(sched_job_delete(d, id, adir, 1000, err), -EBUSY);
    CHECK_INT(sched_job_complete(d, id, w, DB_SUCCEEDED, NULL, NULL, T0 + 2, &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(sched_artifact_add(d, id, w, adir, up, &a, err), -EBUSY); /* finished */
    CHECK_INT(sched_job_delete(d, id, adir, 1000, err), 0);
    CHECK_INT(db_job_get(d, id, &j, err), -ENOENT);
    CHECK(access(final, F_OK) != 0);
    snprintf(final, sizeof final, "%s/%s", adir, id);
    CHECK(access(final, F_OK) != 0);
    CHECK_INT(sched_job_delete(d, id, adir, 1000, err), -ENOENT);
    db_close(d);
}

static void test_sweep(void)
{
    db *d = fresh_db("sweep");
    char w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], got[DB_ID_LEN + 1], err[ERR_LEN];
    add_worker(d, "gpu", w);
    submit(d, "swept", 0, JOB_DEVICE_ANY, 3, 3600, T0, id);
    CHECK_INT(lease(d, w, T0, got), 1);
    sched_sweep_stats st;
    CHECK_INT(sched_sweep_db(d, NULL, T0 + 1000, 60, &st, err), 0);
    CHECK_INT(st.requeued + st.failed + st.cancelled, 0);
    CHECK_INT(sched_sweep_db(d, NULL, T0 + 1 + LEASE * 1000, 60, &st, err), 0);
    CHECK_INT(st.requeued, 1);
    /* the worker, silent for a minute, is marked gone */
    char err2[ERR_LEN];
    CHECK_INT(sched_sweep_db(d, NULL, T0 + 61000, 60, &st, err2), 0);
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

    /* the attempt counted: the second one's loss uses up max_attempts (2) */
    CHECK_INT(lease(d, w2, T0 + 200, got), 1);
    db_job j = get(d, id);
    CHECK_INT(j.attempt, 2);
    db_job_clear(&j);
    CHECK_INT(sched_worker_lost(d, w2, why, NULL, T0 + 300, &to, err), 0);
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

/* Stores a checkpoint file with content for running job id held by worker w, with the upload's
 * digest sha256 (NULL: none). */
static void store_checkpoint(db *d, const char *adir, const char *id, const char *w, int epoch,
                             const char *sha256)
{
    char up[600], err[ERR_LEN];
    snprintf(up, sizeof up, "%s/ckpt-upload", tmp_dir);
    FILE *f = fopen(up, "w");
    fputs("state", f);
    fclose(f);
    int stored = 0;
    CHECK_INT(sched_checkpoint_store(d, id, w, adir, up, sha256, epoch, &stored, err), 0);
    CHECK_INT(stored, 1);
}

static int count_commit(void *ctx)
{
    (*(int *)ctx)++;
    return 0; /* 0: let it commit */
}

/* A running job of document doc with a stored checkpoint and one epoch of metrics. */
static void running_with_files(db *d, const char *adir, const char *w, const char *doc, int64_t now,
                               char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN], got[DB_ID_LEN + 1];
    submit_doc(d, "files", doc, 0, JOB_DEVICE_ANY, 3, 3600, now, id);
    CHECK_INT(lease(d, w, now, got), 1);
    store_checkpoint(d, adir, id, w, 1, NULL);
    db_metric m = {.epoch = 1,
                   .loss = 1.0,
                   .val_loss = NAN,
                   .accuracy = NAN,
                   .val_accuracy = NAN,
                   .seconds = 1,
                   .samples_per_second = 10};
    sched_progress p = {.phase = DB_PHASE_TRAINING, .epochs = &m, .n_epochs = 1};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, now + 1, LEASE, &beat, err), 0);
}

/* Ending a job is one commit that holds its files' rows too, so a client never sees a job ended
 * without its kept checkpoint and its TensorBoard file; a rolled-back end puts the files back. */
static void test_settle_is_in_the_ending_commit(void)
{
    db *d = fresh_db("settle-tx");
    char err[ERR_LEN], w[DB_ID_LEN + 1], id[DB_ID_LEN + 1], adir[512], ckpt[DATADIR_PATH_MAX];
    const char *keep = "{\"delete_checkpoint\":false}";
    snprintf(adir, sizeof adir, "%s/settle-tx-artifacts", tmp_dir);
    mkdir(adir, 0755);
    add_worker(d, "gpu", w);
    db_job j;
    int64_t n = -1;

    running_with_files(d, adir, w, keep, T0, id);
    int commits = 0;
    sqlite3_commit_hook(db_sqlite(d), count_commit, &commits);
    CHECK_INT(sched_job_complete(d, id, w, DB_SUCCEEDED, NULL, adir, T0 + 10, &j, err), 0);
    sqlite3_commit_hook(db_sqlite(d), NULL, NULL);
    CHECK_INT(commits, 1);
    CHECK_INT(db_artifact_count(d, j.seq, &n, err), 0);
    CHECK_INT(n, 2); /* checkpoint.safetensors and the event file */
    db_job_clear(&j);

    /* the same stage rolled back: the checkpoint is where it was, no event file, no rows */
    running_with_files(d, adir, w, keep, T0 + 20, id);
    CHECK_INT(datadir_job_checkpoint(adir, id, ckpt), 0);
    sched_settle s;
    CHECK_INT(db_begin(d, err), 0);
    CHECK_INT(db_job_get(d, id, &j, err), 0);
    sched_settle_stage(d, adir, &j, T0 + 30, &s);
    CHECK(s.kept[0] && s.tfevents[0]);
    CHECK_INT(access(s.kept, F_OK), 0);
    CHECK_INT(access(s.tfevents, F_OK), 0);
    CHECK(access(ckpt, F_OK) != 0);
    db_rollback(d);
    sched_settle_end(&s, 0);
    CHECK_INT(access(ckpt, F_OK), 0);
    CHECK(access(s.kept, F_OK) != 0);
    CHECK(access(s.tfevents, F_OK) != 0);
    CHECK_INT(db_artifact_count(d, j.seq, &n, err), 0);
    CHECK_INT(n, 0);
    db_job_clear(&j);
    db_close(d);
}

static void test_checkpoint_settled_at_the_end(void)
{
    db *d = fresh_db("settle");
    char err[ERR_LEN], w[DB_ID_LEN + 1], got[DB_ID_LEN + 1], adir[512], path[DATADIR_PATH_MAX];
    char gone[DB_ID_LEN + 1], kept[DB_ID_LEN + 1], cancelled[DB_ID_LEN + 1];
    snprintf(adir, sizeof adir, "%s/settle-artifacts", tmp_dir);
    mkdir(adir, 0755);
    add_worker(d, "gpu", w);
    db_job j;
    db_artifact a;

    /* by default the checkpoint goes when the job succeeds, and is no artifact */
    submit(d, "default", 0, JOB_DEVICE_ANY, 3, 3600, T0, gone);
    CHECK_INT(lease(d, w, T0, got), 1);
    store_checkpoint(d, adir, gone, w, 1, NULL);
    CHECK_INT(datadir_job_checkpoint(adir, gone, path), 0);
    CHECK_INT(access(path, F_OK), 0);
    CHECK_INT(sched_job_complete(d, gone, w, DB_SUCCEEDED, NULL, adir, T0 + 10, &j, err), 0);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT, &a, err), -ENOENT);
    db_job_clear(&j);

    /* "delete_checkpoint": false keeps it as an artifact, which delete removes */
    submit_doc(d, "keep", "{\"delete_checkpoint\":false}", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 20,
               kept);
    CHECK_INT(lease(d, w, T0 + 20, got), 1);
    store_checkpoint(d, adir, kept, w, 2, NULL);
    CHECK_INT(sched_job_complete(d, kept, w, DB_FAILED, "boom", adir, T0 + 30, &j, err), 0);
    CHECK_INT(datadir_job_checkpoint(adir, kept, path), 0);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT, &a, err), 0);
    CHECK_INT(a.size, 5);
    CHECK_STR(a.sha256, "4ba69735ca53765ed6a709edb56c6ea236b7193a3b29a6b390c346f0f4340e4e");
    snprintf(path, sizeof path, "%s/%s/" SCHED_CHECKPOINT_KEPT, adir, kept);
    CHECK_INT(access(path, F_OK), 0);
    db_job_clear(&j);
    CHECK_INT(sched_job_delete(d, kept, adir, 1000, err), 0);
    CHECK(access(path, F_OK) != 0);

    /* the upload's digest is kept beside the checkpoint and recorded as given, not hashed
     * again (a value the file does not have shows which was used); a later checkpoint without
     * one removes it, so settle hashes that file rather than trust a stale digest */
    const char *given = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
    char hinted[DB_ID_LEN + 1], stale[DB_ID_LEN + 1];
    submit_doc(d, "hinted", "{\"delete_checkpoint\":false}", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 32,
               hinted);
    CHECK_INT(lease(d, w, T0 + 32, got), 1);
    store_checkpoint(d, adir, hinted, w, 1, given);
    CHECK_INT(sched_job_complete(d, hinted, w, DB_SUCCEEDED, NULL, adir, T0 + 33, &j, err), 0);
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT, &a, err), 0);
    CHECK_INT(a.size, 5);
    CHECK_STR(a.sha256, given);
    snprintf(path, sizeof path, "%s/%s/" DATADIR_CHECKPOINT_NAME ".sha256", adir, hinted);
    CHECK(access(path, F_OK) != 0);
    db_job_clear(&j);
    submit_doc(d, "stale", "{\"delete_checkpoint\":false}", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 34,
               stale);
    CHECK_INT(lease(d, w, T0 + 34, got), 1);
    store_checkpoint(d, adir, stale, w, 1, given);
    store_checkpoint(d, adir, stale, w, 2, NULL);
    CHECK_INT(sched_job_complete(d, stale, w, DB_SUCCEEDED, NULL, adir, T0 + 35, &j, err), 0);
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT, &a, err), 0);
    CHECK_STR(a.sha256, "4ba69735ca53765ed6a709edb56c6ea236b7193a3b29a6b390c346f0f4340e4e");
    db_job_clear(&j);

    /* a requeued job cancelled while queued: its checkpoint goes too */
    submit(d, "requeued", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 40, cancelled);
    CHECK_INT(lease(d, w, T0 + 40, got), 1);
    store_checkpoint(d, adir, cancelled, w, 1, NULL);
    int to = -2;
    CHECK_INT(sched_worker_lost(d, w, "died", adir, T0 + 50, &to, err), 0);
    CHECK_INT(to, DB_QUEUED);
    CHECK_INT(datadir_job_checkpoint(adir, cancelled, path), 0);
    CHECK_INT(access(path, F_OK), 0); /* the next attempt resumes from it */
    CHECK_INT(sched_job_cancel(d, cancelled, adir, T0 + 60, &j, err), 0);
    CHECK_INT(j.status, DB_CANCELLED);
    db_job_clear(&j);
    CHECK(access(path, F_OK) != 0);
    db_close(d);
}

/* Script jobs (jobs.script): leased only to a worker that runs scripts, which also takes built-in
 * jobs; a checkpoint of the same epoch replaces the stored one; the kept one is
 * checkpoint.tar.gz; and no job keeps more than SCHED_MAX_ARTIFACTS artifacts. */
static void test_script_jobs(void)
{
    db *d = fresh_db("scripts");
    char err[ERR_LEN], plain[DB_ID_LEN + 1], runner[DB_ID_LEN + 1], got[DB_ID_LEN + 1];
    char script[DB_ID_LEN + 1], builtin[DB_ID_LEN + 1], adir[512], up[600];
    snprintf(adir, sizeof adir, "%s/script-artifacts", tmp_dir);
    mkdir(adir, 0755);
    add_worker(d, "cpu", plain);
    add_worker(d, "cpu", runner);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE workers SET scripts = 1 WHERE id = '%s'", runner);
    CHECK_INT(db_exec(d, sql, err), 0);
    sched_new_job nj = {.name = "script",
                        .document = "{\"delete_checkpoint\":false}",
                        .device_kind = JOB_DEVICE_ANY,
                        .max_attempts = 3,
                        .max_runtime_seconds = 3600,
                        .priority = 5,
                        .script = 1};
    db_job j;
    int created = 0;
    CHECK_INT(sched_job_submit(d, &nj, T0, &j, &created, err), 0);
    memcpy(script, j.id, sizeof script);
    CHECK_INT(j.script, 1);
    db_job_clear(&j);
    submit(d, "builtin", 0, JOB_DEVICE_ANY, 3, 3600, T0 + 1, builtin);
    /* The plain worker skips the script job (higher priority) and takes the built-in one. */
    CHECK_INT(lease(d, plain, T0 + 2, got), 1);
    CHECK_STR(got, builtin);
    CHECK_INT(lease(d, plain, T0 + 3, got), 0);
    CHECK_INT(lease(d, runner, T0 + 4, got), 1);
    CHECK_STR(got, script);

    /* Same epoch again: stored (a newer snapshot); an older epoch: dropped. */
    int stored = -1;
    snprintf(up, sizeof up, "%s/script-upload", tmp_dir);
    const char *contents[] = {"one", "two", "old"};
    const int epochs[] = {2, 2, 1};
    const int want[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(up, "w");
        fputs(contents[i], f);
        fclose(f);
        CHECK_INT(
            sched_checkpoint_store(d, script, runner, adir, up, NULL, epochs[i], &stored, err), 0);
        CHECK_INT(stored, want[i]);
    }
    unlink(up);

    /* The artifact cap: new names past it are refused, a replacement is not. */
    CHECK_INT(db_job_get(d, script, &j, err), 0);
    CHECK_INT(db_exec(d,
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
                      " WHERE i < 1000) INSERT INTO artifacts (job_seq, name, size, sha256,"
                      " created_at) SELECT (SELECT seq FROM jobs WHERE script = 1), 'a' || i, 0,"
                      " '', 0 FROM n",
                      err),
              0);
    db_job_clear(&j);
    db_artifact a = {.size = 1, .created_at = T0 + 5};
    snprintf(a.sha256, sizeof a.sha256, "%064d", 0);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(up, "w");
        fputs("x", f);
        fclose(f);
        snprintf(a.name, sizeof a.name, "%s", i == 0 ? "one-more" : "a7");
        CHECK_INT(sched_artifact_add(d, script, runner, adir, up, &a, err), i == 0 ? -EDQUOT : 0);
        unlink(up);
    }

    /* Kept at the end under the script's name. */
    CHECK_INT(sched_job_complete(d, script, runner, DB_SUCCEEDED, NULL, adir, T0 + 6, &j, err), 0);
    db_artifact kept;
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT_SCRIPT, &kept, err), 0);
    CHECK_INT(kept.size, 3); /* "two" */
    CHECK_INT(db_artifact_get(d, j.seq, SCHED_CHECKPOINT_KEPT, &kept, err), -ENOENT);
    db_job_clear(&j);
    db_close(d);
}

/* Submits job name (a script job when script), leases it to worker and ends it with status;
 * when model_artifact, the job uploaded it first (its row, as sched_artifact_add writes). */
static void run_job(db *d, const char *worker, const char *name, int script,
                    const char *model_artifact, int status, int64_t now, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN], got[DB_ID_LEN + 1];
    sched_new_job nj = {.name = name,
                        .document = "{}",
                        .device_kind = JOB_DEVICE_ANY,
                        .max_attempts = 1,
                        .max_runtime_seconds = 3600,
                        .script = script};
    db_job j;
    int created = 0;
    CHECK_INT(sched_job_submit(d, &nj, now, &j, &created, err), 0);
    memcpy(id, j.id, sizeof j.id);
    if (model_artifact) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "INSERT INTO artifacts (job_seq, name, size, sha256, created_at)"
                 " VALUES (%lld, '%s', 1, '', 0)",
                 (long long)j.seq, model_artifact);
        CHECK_INT(db_exec(d, sql, err), 0);
    }
    db_job_clear(&j);
    CHECK_INT(lease(d, worker, now + 1, got), 1);
    CHECK_STR(got, id);
    CHECK_INT(sched_job_complete(d, id, worker, status, "why", NULL, now + 2, &j, err), 0);
    db_job_clear(&j);
}

/* The version job id published (0: none) and its state (enum db_model_state). */
static int64_t version_of(db *d, const char *id, int *state)
{
    char err[ERR_LEN];
    db_job j = get(d, id);
    db_model m;
    int rc = db_model_of_job(d, j.seq, &m, err);
    db_job_clear(&j);
    if (rc == -ENOENT)
        return 0;
    CHECK_INT(rc, 0);
    if (state)
        *state = m.state;
    return m.version;
}

static void test_models(void)
{
    db *d = fresh_db("models");
    char err[ERR_LEN], w[DB_ID_LEN + 1], a1[DB_ID_LEN + 1], a2[DB_ID_LEN + 1];
    char b1[DB_ID_LEN + 1], fail[DB_ID_LEN + 1], cancel[DB_ID_LEN + 1], bare[DB_ID_LEN + 1];
    char onnx[DB_ID_LEN + 1], st[DB_ID_LEN + 1], a3[DB_ID_LEN + 1];
    add_worker(d, "cpu", w);
    CHECK_INT(db_exec(d, "UPDATE workers SET scripts = 1", err), 0);
    /* Built-in jobs: versions 1, 2 per name, each name counting on its own. */
    run_job(d, w, "a", 0, NULL, DB_SUCCEEDED, T0, a1);
    run_job(d, w, "b", 0, NULL, DB_SUCCEEDED, T0 + 10, b1);
    run_job(d, w, "a", 0, NULL, DB_SUCCEEDED, T0 + 20, a2);
    CHECK_INT(version_of(d, a1, NULL), 1);
    CHECK_INT(version_of(d, a2, NULL), 2);
    CHECK_INT(version_of(d, b1, NULL), 1);
    /* Failed and cancelled jobs publish nothing, and take no number. */
    run_job(d, w, "a", 0, NULL, DB_FAILED, T0 + 30, fail);
    run_job(d, w, "a", 0, NULL, DB_CANCELLED, T0 + 40, cancel);
    CHECK_INT(version_of(d, fail, NULL), 0);
    CHECK_INT(version_of(d, cancel, NULL), 0);
    /* A script job publishes only when it uploaded model.onnx or model.safetensors. */
    run_job(d, w, "a", 1, NULL, DB_SUCCEEDED, T0 + 50, bare);
    run_job(d, w, "a", 1, "model.onnx", DB_SUCCEEDED, T0 + 60, onnx);
    run_job(d, w, "a", 1, "model.safetensors", DB_SUCCEEDED, T0 + 70, st);
    CHECK_INT(version_of(d, bare, NULL), 0);
    CHECK_INT(version_of(d, onnx, NULL), 3);
    CHECK_INT(version_of(d, st, NULL), 4);

    /* Delete retires the version; the row stays and its number is not handed out again. */
    CHECK_INT(sched_job_delete(d, st, NULL, T0 + 80, err), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM models WHERE name = 'a' AND version = 4"
                              " AND state = 'retired' AND retired_at = 1700000000080"
                              " AND job_seq IS NULL"),
              1);
    run_job(d, w, "a", 0, NULL, DB_SUCCEEDED, T0 + 90, a3);
    CHECK_INT(version_of(d, a3, NULL), 5);
    /* A failed job's delete touches no model. */
    CHECK_INT(sched_job_delete(d, fail, NULL, T0 + 95, err), 0);
    int state = -1;
    CHECK_INT(version_of(d, a1, &state), 1);
    CHECK_INT(state, DB_MODEL_AVAILABLE);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM models WHERE state = 'retired'"), 1);
    db_close(d);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_happy_path();
    test_order_and_fit();
    test_lapsed_leases();
    test_failure_is_final();
    test_release();
    test_max_runtime();
    test_cancel();
    test_stop();
    test_idempotent_submit();
    test_concurrent_submits();
    test_artifacts_and_delete();
    test_sweep();
    test_worker_lost();
    test_checkpoint_settled_at_the_end();
    test_settle_is_in_the_ending_commit();
    test_script_jobs();
    test_models();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
