/* Fault tests of db/: SQLite's allocator and ours fail at the n-th allocation, for every n
 * until a run completes untouched (SQLite's own faultsim idea, through SQLITE_CONFIG_MALLOC as
 * release builds of SQLite lack its test hooks). Covered: db_open on a new file (the pragmas and
 * every migration), a submit's transaction (db_begin, db_job_insert, db_event_append,
 * db_commit), db_job_get, db_job_list, db_log_append and db_log_list, db_metric_put and
 * db_artifact_put, a job's lease (db_job_set_running, db_job_set_finished), db_worker_insert and
 * db_worker_get, db_token_create and db_token_find_hash. Each failing run must return a negative
 * code with a message, leave its output as it was, and roll back: no row of a failed transaction
 * stays, the connection is back in autocommit and the next transaction can begin. ASan checks
 * nothing leaks. */
#include "db/db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/artifacts.h"
#include "db/events.h"
#include "db/jobs.h"
#include "db/logs.h"
#include "db/metrics.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"
#include "job/job.h"

static char tmp_dir[64];

/* Removes a database and its WAL, shared-memory and journal files. */
static void remove_db(const char *path)
{
    char p[300];
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
        unlink(p);
    }
}

/* Whether a run failed; a failure must be the injected one, as -ENOMEM with a message (not
 * -ENOENT or -EEXIST, which a lost binding gave). */
static int failed(int rc, int hit, const char *err)
{
    if (rc >= 0)
        return 0;
    CHECK(hit);
    CHECK_INT(rc, -ENOMEM);
    CHECK(err[0] != '\0');
    return 1;
}

static void test_open(void)
{
    char path[300], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/open.db", tmp_dir);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        remove_db(path);
        db *d = (db *)1;
        err[0] = '\0';
        int rc = db_open(path, &d, err);
        if (failed(rc, alloc_fail_off(), err)) {
            CHECK(d == (db *)1);
        } else {
            /* SQLite has benign allocations (caches) whose failure it rides out */
            CHECK_INT(rc, 0);
            int v = -1;
            CHECK_INT(d ? db_version(d, &v, err) : -1, 0);
            CHECK_INT(v, db_schema_latest());
            db_close(d);
        }
    });
    printf("db_open: %ld failure points\n", points);
    CHECK(points > 100);
}

static void fill_job(db_job *j, int k)
{
    memset(j, 0, sizeof *j);
    char err[ERR_LEN];
    CHECK_INT(db_id_new(j->id, err), 0);
    snprintf(j->name, sizeof j->name, "fault-%d", k);
    j->max_attempts = 3;
    j->priority = 5;
    j->device_kind = JOB_DEVICE_CPU;
    j->max_runtime_seconds = 600;
    j->document = "{\"name\":\"fault\",\"dataset_url\":\"https://example.com/d.csv\"}";
    j->created_at = 1700000000000 + k;
}

/* A submit as the API does it: the job and its first event in one transaction. */
static int submit(db *d, db_job *j, char *err)
{
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_job_insert(d, j, NULL, NULL, err);
    if (rc == 0)
        rc = db_event_append(d, j->seq, j->created_at, -1, DB_QUEUED, DB_PHASE_NONE, 0, "submitted",
                             err);
    if (rc == 0)
        rc = db_commit(d, err);
    else
        db_rollback(d);
    return rc;
}

/* A job submitted with no failure injected, for the tests that read or add to it. */
static void submitted(db *d, int k, db_job *j)
{
    char err[ERR_LEN];
    fill_job(j, k);
    CHECK_INT(submit(d, j, err), 0);
}

static void test_submit(db *d)
{
    char err[ERR_LEN];
    long points = 0;
    int k = 0;
    ALLOC_FAIL_LOOP(&points, {
        alloc_fail_off();
        long long jobs = db_query_int(d, "SELECT count(*) FROM jobs");
        long long events = db_query_int(d, "SELECT count(*) FROM job_events");
        db_job j;
        fill_job(&j, k++);
        err[0] = '\0';
        alloc_fail_after(alloc_fail_n); /* the counts above allocate too */
        int rc = submit(d, &j, err);
        int hit = alloc_fail_off();
        CHECK(sqlite3_get_autocommit(db_sqlite(d)));
        if (failed(rc, hit, err)) {
            CHECK_INT(db_query_int(d, "SELECT count(*) FROM jobs"), jobs);
            CHECK_INT(db_query_int(d, "SELECT count(*) FROM job_events"), events);
        } else {
            CHECK_INT(db_query_int(d, "SELECT count(*) FROM jobs"), jobs + 1);
            CHECK_INT(db_query_int(d, "SELECT count(*) FROM job_events"), events + 1);
            db_job got;
            CHECK_INT(db_job_get(d, j.id, &got, err), 0);
            CHECK_STR(got.name, j.name);
            CHECK_STR(got.document, j.document);
            CHECK_INT(got.device_kind, JOB_DEVICE_CPU);
            db_job_clear(&got);
        }
        /* the write lock was released: a transaction can begin again */
        CHECK_INT(db_begin(d, err), 0);
        db_rollback(d);
    });
    printf("submit (db_begin, db_job_insert, db_event_append, db_commit): %ld failure points\n",
           points);
    CHECK(points > 5);
}

static void test_get(db *d)
{
    char err[ERR_LEN];
    db_job j;
    submitted(d, 1000, &j);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        db_job got, before;
        memset(&got, 0xAB, sizeof got);
        before = got;
        err[0] = '\0';
        int rc = db_job_get(d, j.id, &got, err);
        int hit = alloc_fail_off();
        if (failed(rc, hit, err)) {
            CHECK(memcmp(&got, &before, sizeof got) == 0);
        } else {
            CHECK_INT(got.seq, j.seq);
            CHECK_STR(got.id, j.id);
            CHECK_STR(got.name, j.name);
            CHECK_INT(got.status, DB_QUEUED);
            CHECK_INT(got.device_kind, JOB_DEVICE_CPU);
            CHECK_STR(got.document, j.document);
            CHECK(got.error == NULL);
            db_job_clear(&got);
        }
    });
    printf("db_job_get: %ld failure points\n", points);
    CHECK(points >= 2);
}

static int count_job(void *ctx, const db_job *j)
{
    CHECK(j->document != NULL && j->name[0] != '\0');
    (*(int *)ctx)++;
    return 0;
}

static void test_list(db *d)
{
    char err[ERR_LEN];
    int want = (int)db_query_int(d, "SELECT count(*) FROM jobs");
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        db_job_filter f = {.status = DB_QUEUED, .name = NULL, .limit = 1000};
        int n = 0;
        err[0] = '\0';
        int rc = db_job_list(d, &f, count_job, &n, err);
        int hit = alloc_fail_off();
        if (failed(rc, hit, err)) {
        } else {
            CHECK_INT(n, want);
        }
    });
    printf("db_job_list: %ld failure points\n", points);
    CHECK(points >= 1);
}

static int log_row(void *ctx, int line, int64_t at, const char *text, size_t len)
{
    (void)at, (void)text, (void)len;
    *(int *)ctx = line;
    return 0;
}

static void test_logs(db *d)
{
    char err[ERR_LEN];
    db_job j;
    submitted(d, 2000, &j);
    static const char *const lines[] = {"epoch 1 loss 0.5", "epoch 2 loss 0.25", "done"};
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        alloc_fail_off();
        CHECK_INT(db_begin(d, err), 0);
        int log_lines = 0;
        err[0] = '\0';
        alloc_fail_after(alloc_fail_n);
        int rc = db_log_append(d, j.seq, &log_lines, 1, lines, 3, err);
        if (rc == 0)
            rc = db_commit(d, err);
        else
            db_rollback(d);
        int hit = alloc_fail_off();
        if (failed(rc, hit, err)) {
            CHECK_INT(db_query_int(d, "SELECT count(*) FROM logs"), 0);
        } else {
            CHECK_INT(log_lines, 3);
            int last = 0;
            CHECK_INT(db_log_list(d, j.seq, 0, 100, log_row, &last, err), 0);
            CHECK_INT(last, 3);
            CHECK_INT(db_exec(d, "DELETE FROM logs", err), 0);
        }
    });
    printf("db_log_append in a transaction: %ld failure points\n", points);
    CHECK(points >= 2);
}

static void test_metric_artifact(db *d)
{
    char err[ERR_LEN];
    db_job j;
    submitted(d, 3000, &j);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        db_metric m = {.attempt = 1,
                       .epoch = 1,
                       .loss = 0.5,
                       .val_loss = NAN,
                       .accuracy = 0.9,
                       .val_accuracy = NAN,
                       .seconds = 1.5,
                       .samples_per_second = 100,
                       .at = 2};
        db_artifact a = {.name = "model.safetensors", .size = 123, .created_at = 3};
        memset(a.sha256, 'a', 64);
        a.sha256[64] = '\0';
        err[0] = '\0';
        int rc = db_metric_put(d, j.seq, &m, err);
        if (rc == 0)
            rc = db_artifact_put(d, j.seq, &a, err);
        int hit = alloc_fail_off();
        if (failed(rc, hit, err)) {
        } else {
            db_artifact got;
            CHECK_INT(db_artifact_get(d, j.seq, "model.safetensors", &got, err), 0);
            CHECK_INT(got.size, 123);
            CHECK_STR(got.sha256, a.sha256);
        }
    });
    printf("db_metric_put, db_artifact_put: %ld failure points\n", points);
    CHECK(points >= 2);
}

/* A worker takes a job and finishes it: each guarded write either happens whole or not at all. */
static void test_lease(db *d)
{
    char err[ERR_LEN];
    long points = 0;
    int k = 4000;
    ALLOC_FAIL_LOOP(&points, {
        alloc_fail_off();
        db_job j;
        submitted(d, k++, &j);
        alloc_fail_after(alloc_fail_n);
        err[0] = '\0';
        int rc = db_job_set_running(d, j.seq, "w1", "cpu", 10, 1000, err);
        if (rc >= 0)
            rc = db_job_set_finished(d, j.seq, "w1", DB_SUCCEEDED, NULL, 20, err);
        int hit = alloc_fail_off();
        db_job got;
        CHECK_INT(db_job_get(d, j.id, &got, err), 0);
        if (failed(rc, hit, err)) {
            CHECK(got.status == DB_QUEUED || got.status == DB_RUNNING);
        } else {
            CHECK_INT(got.status, DB_SUCCEEDED);
            CHECK_INT(got.attempt, 1);
        }
        db_job_clear(&got);
    });
    printf("db_job_set_running, db_job_set_finished: %ld failure points\n", points);
    CHECK(points >= 2);
}

static void test_worker(db *d)
{
    char err[ERR_LEN];
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        alloc_fail_off();
        db_worker w = {.kinds = 4, .registered_at = 5, .last_seen_at = 6};
        CHECK_INT(db_id_new(w.id, err), 0);
        snprintf(w.name, sizeof w.name, "host-%ld", alloc_fail_n);
        w.devices = "[{\"kind\":\"cpu\"}]";
        alloc_fail_after(alloc_fail_n);
        err[0] = '\0';
        db_worker got, before;
        memset(&got, 0xAB, sizeof got);
        before = got;
        int rc = db_worker_insert(d, &w, err);
        if (rc == 0)
            rc = db_worker_get(d, w.id, &got, err);
        int hit = alloc_fail_off();
        if (failed(rc, hit, err)) {
            CHECK(memcmp(&got, &before, sizeof got) == 0);
        } else {
            CHECK_STR(got.name, w.name);
            CHECK_STR(got.devices, w.devices);
            CHECK_INT(got.kinds, 4);
            db_worker_clear(&got);
        }
    });
    printf("db_worker_insert, db_worker_get: %ld failure points\n", points);
    CHECK(points >= 2);
}

static void test_token(db *d)
{
    char err[ERR_LEN];
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        db_token t, before;
        char secret[DB_TOKEN_SECRET_LEN + 1], secret_before[sizeof secret];
        memset(&t, 0xAB, sizeof t);
        before = t;
        memset(secret, 'z', sizeof secret);
        memcpy(secret_before, secret, sizeof secret);
        err[0] = '\0';
        int created = db_token_create(d, "ci", DB_ROLE_USER, 0, 7, &t, secret, err);
        int rc = created;
        db_token found;
        if (rc == 0) {
            char hash[DB_TOKEN_HASH_LEN + 1];
            db_token_hash(secret, hash);
            rc = db_token_find_hash(d, hash, &found, err);
        }
        int hit = alloc_fail_off();
        if (created < 0) { /* neither output written */
            CHECK(memcmp(&t, &before, sizeof t) == 0);
            CHECK(memcmp(secret, secret_before, sizeof secret) == 0);
        }
        if (failed(rc, hit, err)) {
        } else {
            CHECK_STR(found.id, t.id);
            CHECK_INT(found.role, DB_ROLE_USER);
        }
    });
    printf("db_token_create, db_token_find_hash: %ld failure points\n", points);
    CHECK(points >= 2);
}

int main(void)
{
    CHECK_INT(alloc_fail_init(), 0);
    /* synchronous=FULL syncs every commit; tmpfs keeps hundreds of them cheap */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/trainyard-test-db-alloc-XXXXXX", base);
    if (!mkdtemp(tmp_dir))
        check_skip("cannot create a temporary directory");
    test_open();
    char path[300], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/ops.db", tmp_dir);
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (d) {
        test_submit(d);
        test_get(d);
        test_list(d);
        test_logs(d);
        test_metric_artifact(d);
        test_lease(d);
        test_worker(d);
        test_token(d);
        db_close(d);
    }
    remove_db(path);
    snprintf(path, sizeof path, "%s/open.db", tmp_dir);
    remove_db(path);
    rmdir(tmp_dir);
    return check_exit();
}
