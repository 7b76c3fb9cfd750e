/* Unit tests of db/: opening and migrating an empty database, the pragmas that durability
 * depends on, reopening keeps the data, a database from the future is refused, concurrent
 * first opens migrate once, the statement cache past its table, rows of every table in and
 * out, the per-epoch metric replacement, the log cap, and the cascade of a job's deletion. */
#include "db/db.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/artifacts.h"
#include "db/events.h"
#include "db/jobs.h"
#include "db/logs.h"
#include "db/metrics.h"
#include "db/workers.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"
#include "job/job.h"

static char tmp_dir[] = "/tmp/trainyard-test-db-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void db_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmp_dir, name);
}

static void fill_job(db_job *j, const char *name)
{
    memset(j, 0, sizeof *j);
    char err[ERR_LEN];
    CHECK_INT(db_id_new(j->id, err), 0);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->max_attempts = 3;
    j->priority = 7;
    j->device_kind = JOB_DEVICE_GPU;
    j->max_runtime_seconds = 600;
    j->document = strdup("{\"name\":\"x\"}");
    j->created_at = 1700000000123;
}

static void test_open_empty(void)
{
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "empty.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    int v = -1;
    CHECK_INT(db_version(d, &v, err), 0);
    CHECK_INT(v, db_schema_latest());
    CHECK(db_schema_latest() >= 1);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
                              " ('jobs', 'job_events', 'metrics', 'logs', 'artifacts', 'workers')"),
              6);
    CHECK_INT(db_query_int(d, "PRAGMA synchronous"), 2); /* FULL */
    CHECK_INT(db_query_int(d, "PRAGMA foreign_keys"), 1);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN"
                              " ('jobs_queue', 'jobs_status_seq', 'jobs_name_seq')"),
              3);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db_sqlite(d), "PRAGMA journal_mode", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    /* migrating again is a no-op */
    CHECK_INT(db_migrate(d, err), 0);
    CHECK_INT(db_version(d, &v, err), 0);
    CHECK_INT(v, db_schema_latest());
    db_close(d);
    db_close(NULL);
}

static void test_reopen_keeps_data(void)
{
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "reopen.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    db_job j;
    fill_job(&j, "kept");
    CHECK_INT(db_job_insert(d, &j, "key-1", "hash-1", err), 0);
    CHECK(j.seq > 0);
    db_close(d);

    d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    int v = -1;
    CHECK_INT(db_version(d, &v, err), 0);
    CHECK_INT(v, db_schema_latest());
    db_job got;
    CHECK_INT(db_job_get(d, j.id, &got, err), 0);
    CHECK_STR(got.name, "kept");
    CHECK_INT(got.status, DB_QUEUED);
    CHECK_INT(got.phase, DB_PHASE_NONE);
    CHECK_INT(got.attempt, 0);
    CHECK_INT(got.max_attempts, 3);
    CHECK_INT(got.priority, 7);
    CHECK_INT(got.device_kind, JOB_DEVICE_GPU);
    CHECK_INT(got.max_runtime_seconds, 600);
    CHECK_INT(got.created_at, 1700000000123);
    CHECK_INT(got.started_at, 0);
    CHECK_STR(got.document, "{\"name\":\"x\"}");
    CHECK(got.error == NULL);
    CHECK_STR(got.worker_id, "");
    db_job_clear(&got);

    char hash[65];
    CHECK_INT(db_job_get_by_key(d, "key-1", &got, hash, err), 0);
    CHECK_STR(hash, "hash-1");
    CHECK_INT(got.seq, j.seq);
    db_job_clear(&got);
    CHECK_INT(db_job_get_by_key(d, "key-2", &got, hash, err), -ENOENT);
    CHECK_INT(db_job_get(d, "nope", &got, err), -ENOENT);

    /* the UNIQUE key refuses a second job with it */
    db_job k;
    fill_job(&k, "dup");
    CHECK_INT(db_job_insert(d, &k, "key-1", "hash-2", err), -EEXIST);
    db_job_clear(&k);
    db_job_clear(&j);
    db_close(d);
}

static void test_future_version_refused(void)
{
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "future.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", db_schema_latest() + 1);
    CHECK_INT(db_exec(d, sql, err), 0);
    db_close(d);
    d = NULL;
    err[0] = '\0';
    CHECK_INT(db_open(path, &d, err), -EPROTO);
    CHECK(d == NULL);
    CHECK(strstr(err, "newer trainyard") != NULL);
}

static void *open_thread(void *arg)
{
    char err[ERR_LEN];
    db *d = NULL;
    intptr_t rc = db_open(arg, &d, err);
    db_close(d);
    return (void *)rc;
}

static void test_concurrent_first_open(void)
{
    char path[256];
    db_path(path, sizeof path, "race.db");
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, open_thread, path);
    for (int i = 0; i < 4; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        CHECK_INT((intptr_t)rc, 0);
    }
    char err[ERR_LEN];
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    CHECK_INT(db_query_int(d, "PRAGMA user_version"), db_schema_latest());
    db_close(d);
}

/* More distinct statements than the cache's table holds still work, and come back cached. */
static void test_statement_cache(void)
{
    static char sqls[300][48];
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "stmts.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 300; i++) {
            snprintf(sqls[i], sizeof sqls[i], "SELECT %d", i);
            sqlite3_stmt *st = NULL;
            CHECK_INT(db_stmt(d, sqls[i], &st, err), 0);
            CHECK(st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == i);
            db_stmt_done(st);
        }
    }
    static const char bad[] = "SELECT FROM nowhere";
    sqlite3_stmt *st = NULL;
    CHECK(db_stmt(d, bad, &st, err) < 0);
    CHECK(strstr(err, "database:") != NULL);
    db_close(d);
}

static int count_metric(void *ctx, const db_metric *m)
{
    db_metric *last = ctx;
    *last = *m;
    last->at++; /* used as a counter */
    return 0;
}

static int count_log(void *ctx, int line, int64_t at, const char *text, size_t len)
{
    int *n = ctx;
    (void)at;
    CHECK_INT(strlen(text), len);
    CHECK(strchr(text, '\n') == NULL);
    CHECK_INT(line, *n + 1 + DB_LOG_MAX_LINES - 2);
    (*n)++;
    return 0;
}

static void test_children_and_cascade(void)
{
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "children.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    db_job j;
    fill_job(&j, "parent");
    CHECK_INT(db_job_insert(d, &j, NULL, NULL, err), 0);
    CHECK_INT(db_event_append(d, j.seq, 1, -1, DB_QUEUED, DB_PHASE_NONE, 0, "submitted", err), 0);

    /* metrics: one row per epoch; the replacement gets a larger id */
    db_metric m = {.attempt = 1,
                   .epoch = 1,
                   .loss = 0.5,
                   .val_loss = NAN,
                   .accuracy = 0.9,
                   .val_accuracy = NAN,
                   .seconds = 1.5,
                   .samples_per_second = NAN,
                   .at = 5};
    CHECK_INT(db_metric_put(d, j.seq, &m, err), 0);
    db_metric last;
    memset(&last, 0, sizeof last);
    CHECK_INT(db_metric_list(d, j.seq, count_metric, &last, err), 0);
    int64_t first_id = last.id;
    CHECK(isnan(last.val_loss) && isnan(last.samples_per_second));
    CHECK_NEAR(last.accuracy, 0.9, 0);
    m.attempt = 2;
    m.loss = 0.25;
    CHECK_INT(db_metric_put(d, j.seq, &m, err), 0);
    memset(&last, 0, sizeof last);
    CHECK_INT(db_metric_list(d, j.seq, count_metric, &last, err), 0);
    CHECK_INT(last.at, 5 + 1); /* one row */
    CHECK_INT(last.attempt, 2);
    CHECK_NEAR(last.loss, 0.25, 0);
    CHECK(last.id > first_id);
    memset(&last, 0, sizeof last);
    CHECK_INT(db_metric_since(d, j.seq, first_id, 10, count_metric, &last, err), 0);
    CHECK_INT(last.attempt, 2);

    /* logs: the cap keeps DB_LOG_MAX_LINES lines and a marker */
    int lines = DB_LOG_MAX_LINES - 2;
    char longline[DB_LOG_LINE_MAX + 10];
    memset(longline, 'a', sizeof longline);
    memcpy(longline + DB_LOG_LINE_MAX - 1, "\xc3\xa9", 2); /* é across the cut */
    longline[sizeof longline - 1] = '\0';
    const char *batch[] = {"one\ntwo", longline, "dropped", "dropped too"};
    CHECK_INT(db_log_append(d, j.seq, &lines, 9, batch, 4, err), 0);
    CHECK_INT(lines, DB_LOG_MAX_LINES + 1);
    CHECK_INT(db_log_append(d, j.seq, &lines, 9, batch, 1, err), 0);
    CHECK_INT(lines, DB_LOG_MAX_LINES + 1);
    int n = 0;
    CHECK_INT(db_log_list(d, j.seq, 0, 100, count_log, &n, err), 0);
    CHECK_INT(n, 3);
    CHECK_INT(db_query_int(d, "SELECT length(CAST(text AS BLOB)) FROM logs WHERE line = 100000"),
              DB_LOG_LINE_MAX - 1);
    CHECK_INT(db_query_int(d, "SELECT text LIKE '%later lines are not kept' FROM logs"
                              " WHERE line = 100001"),
              1);

    db_artifact a = {.name = "model.safetensors", .size = 42, .created_at = 3};
    memset(a.sha256, 'a', 64);
    a.sha256[64] = '\0';
    CHECK_INT(db_artifact_put(d, j.seq, &a, err), 0);
    db_artifact got;
    CHECK_INT(db_artifact_get(d, j.seq, "model.safetensors", &got, err), 0);
    CHECK_INT(got.size, 42);
    CHECK_STR(got.sha256, a.sha256);
    CHECK_INT(db_artifact_get(d, j.seq, "other", &got, err), -ENOENT);

    /* a job is deleted only when terminal, and takes its rows with it */
    CHECK_INT(db_job_delete(d, j.seq, err), 0);
    CHECK_INT(db_job_set_running(d, j.seq, "w", "dev", 10, 20, err), 1);
    CHECK_INT(db_job_set_finished(d, j.seq, "someone-else", DB_FAILED, "x", 30, err), 0);
    CHECK_INT(db_job_set_finished(d, j.seq, "w", DB_SUCCEEDED, NULL, 30, err), 1);
    CHECK_INT(db_job_set_finished(d, j.seq, "w", DB_FAILED, "again", 40, err), 0);
    CHECK_INT(db_job_set_requeued(d, j.seq, 50, 0, err), 0);
    CHECK_INT(db_job_delete(d, j.seq, err), 1);
    CHECK_INT(db_query_int(d, "SELECT (SELECT count(*) FROM job_events) + (SELECT count(*) FROM"
                              " metrics) + (SELECT count(*) FROM logs) + (SELECT count(*) FROM"
                              " artifacts)"),
              0);
    db_job_clear(&j);
    db_close(d);
}

static void test_workers(void)
{
    char path[256], err[ERR_LEN];
    db_path(path, sizeof path, "workers.db");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    db_worker w;
    memset(&w, 0, sizeof w);
    CHECK_INT(db_id_new(w.id, err), 0);
    CHECK_INT(strlen(w.id), DB_ID_LEN);
    snprintf(w.name, sizeof w.name, "box-1");
    w.devices = "[{\"index\":0,\"name\":\"gpu0\",\"type\":\"gpu\"}]";
    w.kinds = DB_KIND_GPU;
    w.registered_at = w.last_seen_at = 1000;
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    db_worker got;
    CHECK_INT(db_worker_get(d, w.id, &got, err), 0);
    CHECK_STR(got.devices, w.devices);
    CHECK_INT(got.kinds, DB_KIND_GPU);
    db_worker_clear(&got);
    int64_t n = -1;
    CHECK_INT(db_worker_count_live(d, 500, &n, err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(db_worker_mark_gone(d, 2000, err), 1);
    CHECK_INT(db_worker_count_live(d, 500, &n, err), 0);
    CHECK_INT(n, 0);
    CHECK_INT(db_worker_seen(d, w.id, 3000, err), 1);
    CHECK_INT(db_worker_count_live(d, 2500, &n, err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(db_worker_set_job(d, w.id, "job-a", err), 1);
    CHECK_INT(db_worker_release(d, w.id, "job-b", err), 0);
    CHECK_INT(db_worker_release(d, w.id, "job-a", err), 1);
    CHECK_INT(db_worker_mark_gone(d, 4000, err), 1);
    CHECK_INT(db_worker_forget(d, 4000, err), 1);
    CHECK_INT(db_worker_get(d, w.id, &got, err), -ENOENT);
    db_close(d);
}

static void test_codes(void)
{
    CHECK_INT(db_code(SQLITE_OK), 0);
    CHECK_INT(db_code(SQLITE_BUSY), -EAGAIN);
    CHECK_INT(db_code(SQLITE_FULL), -ENOSPC);
    CHECK_INT(db_code(SQLITE_CONSTRAINT_UNIQUE), -EEXIST);
    CHECK_INT(db_code(SQLITE_NOMEM), -ENOMEM);
    CHECK_INT(db_code(SQLITE_CORRUPT), -EIO);
    CHECK_STR(db_status_name(DB_CANCELLED), "cancelled");
    CHECK_INT(db_status_parse("running"), DB_RUNNING);
    CHECK_INT(db_status_parse("paused"), -1);
    CHECK(db_phase_name(DB_PHASE_NONE) == NULL);
    CHECK_INT(db_phase_parse("training"), DB_PHASE_TRAINING);
    CHECK_STR(db_device_kind_name(JOB_DEVICE_CPU), "cpu");
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_open_empty();
    test_reopen_keeps_data();
    test_future_version_refused();
    test_concurrent_first_open();
    test_statement_cache();
    test_children_and_cascade();
    test_workers();
    test_codes();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
