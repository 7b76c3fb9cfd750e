/* Unit tests of schema v5 (users' own training scripts), from a database that an earlier
 * build left at v4: the migration keeps every row (metrics ids included, so an event stream
 * that remembers one sees nothing twice), adds tokens.scripts, workers.scripts, jobs.script and
 * metrics.extra with their defaults, lets loss and seconds be null, and the new columns then
 * round-trip through db/. The v4 database is made by running the first four migrations
 * themselves (schema.c is included for its table), as a v4 build did.
 *
 * And of schema v6 (models), from a v5 database with a succeeded built-in job, a succeeded
 * script job with model.onnx and one without: the migration adds an empty models table (jobs
 * that succeeded before it published nothing), and publish, retire and the job's deletion then
 * work on it. */
#include "db/schema.c"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db/jobs.h"
#include "db/metrics.h"
#include "db/models.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "job/job.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"

static char tmp_dir[] = "/tmp/trainyard-test-db-migrate-XXXXXX";

/* A database at path as a build of that schema version left it: the first `version`
 * migrations, then rows (which set user_version). */
static void make_at(const char *path, int version, const char *rows)
{
    sqlite3 *s = NULL;
    CHECK_INT(sqlite3_open(path, &s), SQLITE_OK);
    for (int v = 0; v < version; v++)
        CHECK_INT(sqlite3_exec(s, db_migrations[v], NULL, NULL, NULL), SQLITE_OK);
    CHECK_INT(sqlite3_exec(s, rows, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(s);
}

/* A v4 database at path with a job (seq 1), two metrics (ids 5 and 9), a token and a worker. */
static void make_v4(const char *path)
{
    const char *rows =
        "PRAGMA user_version = 4;"
        "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority, device_kind,"
        "  max_runtime_seconds, document, created_at) VALUES (1, 'j1', 'old', 'queued', 0, 3, 0,"
        "  'any', 60, '{}', 1);"
        "INSERT INTO metrics (id, job_seq, attempt, epoch, loss, val_loss, accuracy, val_accuracy,"
        "  seconds, samples_per_second, at) VALUES (5, 1, 1, 1, 0.5, NULL, 0.75, NULL, 2.0, NULL,"
        "  10), (9, 1, 1, 2, 0.25, 0.3, 0.8, 0.7, 1.5, 100.0, 20);"
        "INSERT INTO tokens (id, name, role, hash, created_at) VALUES ('t1', 'u', 'user', 'h', 1);"
        "INSERT INTO workers (id, name, devices, kinds, registered_at, last_seen_at)"
        "  VALUES ('w1', 'box', '[]', 2, 1, 1);";
    make_at(path, 4, rows);
}

typedef struct seen {
    int n;
    db_metric m[4];
    char extra[4][128];
} seen;

static int collect(void *ctx, const db_metric *m)
{
    seen *s = ctx;
    if (s->n < 4) {
        s->m[s->n] = *m;
        snprintf(s->extra[s->n], sizeof s->extra[0], "%s", m->extra ? m->extra : "");
        s->m[s->n].extra = NULL; /* only valid during the call */
        s->n++;
    }
    return 0;
}

static void test_v4_to_v5(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/v4.db", tmp_dir);
    make_v4(path);
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    CHECK_INT(db_query_int(d, "PRAGMA user_version"), db_schema_latest());
    CHECK_INT(db_schema_latest(), 9);
    /* Old rows keep their values and take the new columns' defaults. */
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM metrics"), 2);
    CHECK_INT(db_query_int(d, "SELECT max(id) FROM metrics"), 9);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM metrics WHERE extra IS NULL"), 2);
    CHECK_INT(db_query_int(d, "SELECT scripts FROM tokens WHERE id = 't1'"), 0);
    CHECK_INT(db_query_int(d, "SELECT scripts FROM workers WHERE id = 'w1'"), 0);
    CHECK_INT(db_query_int(d, "SELECT script FROM jobs WHERE seq = 1"), 0);
    CHECK_INT(db_query_int(d, "PRAGMA foreign_key_check"), -1); /* no row: nothing dangles */
    db_token t;
    CHECK_INT(db_token_get(d, "t1", &t, err), 0);
    CHECK_INT(t.scripts, 0);
    db_job j;
    CHECK_INT(db_job_get(d, "j1", &j, err), 0);
    CHECK_INT(j.script, 0);
    db_job_clear(&j);

    /* A script's epoch: no loss, no time, metrics of its own. The next id follows the largest
     * copied one. */
    db_metric m = {.attempt = 1,
                   .epoch = 3,
                   .loss = NAN,
                   .val_loss = NAN,
                   .accuracy = NAN,
                   .val_accuracy = 0.9,
                   .seconds = NAN,
                   .samples_per_second = NAN,
                   .at = 30,
                   .extra = "{\"top5\":0.99}"};
    CHECK_INT(db_metric_put(d, 1, &m, err), 0);
    seen s = {0};
    CHECK_INT(db_metric_list(d, 1, collect, &s, err), 0);
    CHECK_INT(s.n, 3);
    CHECK(s.m[0].id == 5 && s.m[0].loss == 0.5 && isnan(s.m[0].val_loss));
    CHECK(s.m[1].id == 9 && s.m[1].samples_per_second == 100.0);
    CHECK(s.m[2].id > 9);
    CHECK(isnan(s.m[2].loss) && isnan(s.m[2].seconds) && s.m[2].val_accuracy == 0.9);
    CHECK_STR(s.extra[2], "{\"top5\":0.99}");
    CHECK_STR(s.extra[0], "");
    /* Deleting the job still cascades to the rebuilt table. */
    CHECK_INT(db_exec(d, "UPDATE jobs SET status = 'failed' WHERE seq = 1", err), 0);
    CHECK_INT(db_job_delete(d, 1, err), 1);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM metrics"), 0);
    db_close(d);
}

static void test_v5_columns(void)
{
    char path[256], err[ERR_LEN], secret[DB_TOKEN_SECRET_LEN + 1];
    snprintf(path, sizeof path, "%s/v5.db", tmp_dir);
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    db_token t, back;
    CHECK_INT(db_token_create(d, "s", DB_ROLE_USER, 1, 5, &t, secret, err), 0);
    CHECK_INT(t.scripts, 1);
    CHECK_INT(db_token_get(d, t.id, &back, err), 0);
    CHECK_INT(back.scripts, 1);
    char hash[DB_TOKEN_HASH_LEN + 1];
    db_token_hash(secret, hash);
    CHECK_INT(db_token_find_hash(d, hash, &back, err), 0);
    CHECK_INT(back.scripts, 1);

    db_worker w = {.kinds = DB_KIND_CPU, .registered_at = 1, .last_seen_at = 1, .scripts = 1};
    snprintf(w.id, sizeof w.id, "w2");
    snprintf(w.name, sizeof w.name, "scripter");
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    db_worker wb;
    CHECK_INT(db_worker_get(d, "w2", &wb, err), 0);
    CHECK_INT(wb.scripts, 1);
    db_worker_clear(&wb);

    /* A script job is the next queued job only for a worker that runs scripts. */
    db_job j;
    memset(&j, 0, sizeof j);
    CHECK_INT(db_id_new(j.id, err), 0);
    snprintf(j.name, sizeof j.name, "script");
    j.max_attempts = 1;
    j.device_kind = JOB_DEVICE_ANY;
    j.max_runtime_seconds = 60;
    j.document = "{}";
    j.script = 1;
    CHECK_INT(db_job_insert(d, &j, NULL, NULL, err), 0);
    db_job next;
    db_worker plain = {.kinds = DB_KIND_CPU}, scripter = {.kinds = DB_KIND_CPU, .scripts = 1};
    CHECK_INT(db_job_next_queued(d, &plain, 0, &next, err), 0);
    CHECK_INT(db_job_next_queued(d, &scripter, 0, &next, err), 1);
    CHECK_STR(next.id, j.id);
    CHECK_INT(next.script, 1);
    db_job_clear(&next);

    /* A worker whose devices have no OpenCL (GPUs found by NVML or nvidia-smi) takes script
     * jobs only, even behind a built-in job of higher priority, which others still take. */
    db_job builtin = j;
    CHECK_INT(db_id_new(builtin.id, err), 0);
    builtin.script = 0;
    builtin.priority = 9;
    CHECK_INT(db_job_insert(d, &builtin, NULL, NULL, err), 0);
    db_worker gpu_only = {.kinds = DB_KIND_GPU | DB_KIND_SCRIPTS_ONLY, .scripts = 1};
    CHECK_INT(db_job_next_queued(d, &gpu_only, 0, &next, err), 1);
    CHECK_STR(next.id, j.id);
    db_job_clear(&next);
    CHECK_INT(db_job_next_queued(d, &scripter, 0, &next, err), 1);
    CHECK_STR(next.id, builtin.id);
    db_job_clear(&next);
    CHECK_INT(db_job_set_running(d, builtin.seq, "w2", "cpu", 1, 2, err), 1);

    /* v7: a job of two replicas goes only to a worker of two slots or more; a job bound to a
     * worker (the Slurm executor's) only to that worker, which takes nothing else. */
    db_job dp = j;
    CHECK_INT(db_id_new(dp.id, err), 0);
    dp.script = 0;
    dp.replicas = 2;
    dp.priority = 5;
    CHECK_INT(db_job_insert(d, &dp, NULL, NULL, err), 0);
    db_worker two = {.kinds = DB_KIND_CPU, .slots = 2},
              bound = {.kinds = DB_KIND_CPU, .slots = 2, .bound = 1};
    snprintf(two.id, sizeof two.id, "w3");
    snprintf(bound.id, sizeof bound.id, "w4");
    CHECK_INT(db_job_next_queued(d, &plain, 0, &next, err), 0);
    CHECK_INT(db_job_next_queued(d, &two, 0, &next, err), 1);
    CHECK_STR(next.id, dp.id);
    CHECK_INT(next.replicas, 2);
    db_job_clear(&next);
    CHECK_INT(db_job_next_queued(d, &bound, 0, &next, err), 0);
    CHECK_INT(db_job_set_slurm(d, dp.seq, "42", "w4", err), 1);
    CHECK_INT(db_job_next_queued(d, &two, 0, &next, err), 0);
    CHECK_INT(db_job_next_queued(d, &bound, 0, &next, err), 1);
    CHECK_STR(next.id, dp.id);
    CHECK_STR(next.slurm_job_id, "42");
    CHECK_STR(next.for_worker, "w4");
    db_job_clear(&next);
    db_close(d);
}

/* A v5 database at path with three succeeded jobs: built-in (seq 1), a script with model.onnx
 * (seq 2), a script with only log.txt (seq 3). */
static void make_v5(const char *path)
{
    const char *rows =
        "PRAGMA user_version = 5;"
        "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority, device_kind,"
        "  max_runtime_seconds, document, created_at, owner, script) VALUES"
        "  (1, 'j1', 'm', 'succeeded', 1, 3, 0, 'any', 60, '{}', 1, 't1', 0),"
        "  (2, 'j2', 'm', 'succeeded', 1, 3, 0, 'any', 60, '{}', 2, 't1', 1),"
        "  (3, 'j3', 'm', 'succeeded', 1, 3, 0, 'any', 60, '{}', 3, 't1', 1);"
        "INSERT INTO artifacts (job_seq, name, size, sha256, created_at) VALUES"
        "  (2, 'model.onnx', 1, '', 1), (3, 'log.txt', 1, '', 1);";
    make_at(path, 5, rows);
}

static void test_v5_to_v6(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/v5-models.db", tmp_dir);
    make_v5(path);
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    CHECK_INT(db_query_int(d, "PRAGMA user_version"), db_schema_latest());
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM models"), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM jobs"), 3);
    int64_t v = -1;
    CHECK_INT(db_model_publish(d, 1, 10, &v, err), 0);
    CHECK_INT(v, 1);
    CHECK_INT(db_model_publish(d, 3, 11, &v, err), 0);
    CHECK_INT(v, 0); /* a script without a model */
    CHECK_INT(db_model_publish(d, 2, 12, &v, err), 0);
    CHECK_INT(v, 2);
    CHECK_INT(db_model_publish(d, 2, 13, &v, err), -EEXIST); /* once per job */
    db_model m;
    CHECK_INT(db_model_of_job(d, 2, &m, err), 0);
    CHECK_STR(m.name, "m");
    CHECK_STR(m.job_id, "j2");
    CHECK_INT(m.state, DB_MODEL_AVAILABLE);
    CHECK_INT(m.created_at, 12);
    CHECK_INT(m.retired_at, 0);
    CHECK_INT(db_model_retire(d, 2, 20, err), 0);
    CHECK_INT(db_exec(d, "DELETE FROM jobs WHERE seq = 2", err), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM models WHERE version = 2 AND job_seq IS NULL"
                              " AND state = 'retired' AND retired_at = 20 AND owner = 't1'"),
              1);
    CHECK_INT(db_query_int(d, "PRAGMA foreign_key_check"), -1);
    db_close(d);
}

/* v8 (experiments): a v7 job takes the new columns' defaults; a sweep's trials keep their rows
 * when the sweep goes, and a job's histograms and deliveries go with the job. */
static void test_v7_to_v8(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/v7.db", tmp_dir);
    make_at(path, 7,
            "PRAGMA user_version = 7;"
            "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority,"
            "  device_kind, max_runtime_seconds, document, created_at, finished_at) VALUES"
            "  (1, 'j1', 'm', 'succeeded', 1, 3, 0, 'any', 60, '{}', 1, 5);");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    CHECK_INT(db_query_int(d, "PRAGMA user_version"), db_schema_latest());
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM jobs WHERE keep = 0 AND sweep_seq IS NULL"
                              " AND stop_requested IS NULL AND stop_reason IS NULL"
                              " AND stopped_epoch IS NULL AND best_epoch IS NULL"),
              1);
    CHECK_INT(db_exec(d,
                      "INSERT INTO sweeps (seq, id, name, status, document, created_at)"
                      "  VALUES (1, 's1', 'sw', 'running', '{}', 2);"
                      "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority,"
                      "  device_kind, max_runtime_seconds, document, created_at, sweep_seq)"
                      "  VALUES (2, 'j2', 'm', 'queued', 0, 3, 0, 'any', 60, '{}', 3, 1);"
                      "INSERT INTO histograms VALUES (1, 1, 'dense/kernel', '{}');"
                      "INSERT INTO deliveries (job_seq, url, event, body, status, next_at,"
                      "  created_at) VALUES (1, 'https://h/', 'succeeded', '{}', 'pending', 6, 6);"
                      "INSERT INTO delivery_attempts VALUES (1, 1, 7, 500, NULL, 3);",
                      err),
              0);
    CHECK_INT(db_exec(d, "DELETE FROM sweeps WHERE seq = 1", err), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM jobs WHERE seq = 2 AND sweep_seq IS NULL"), 1);
    CHECK_INT(db_exec(d, "DELETE FROM jobs WHERE seq = 1", err), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM histograms"), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM deliveries"), 0);
    CHECK_INT(db_query_int(d, "SELECT count(*) FROM delivery_attempts"), 0);
    CHECK_INT(db_query_int(d, "PRAGMA foreign_key_check"), -1);
    db_close(d);
}

/* v9 (why a job waits): a v8 database opens with every token uncapped and no job backing off,
 * and its queued job is leased as before; a cap set on its token then holds it back. */
static void test_v8_to_v9(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/v8.db", tmp_dir);
    make_at(path, 8,
            "PRAGMA user_version = 8;"
            "INSERT INTO tokens (id, name, role, hash, created_at) VALUES ('t1', 'u', 'user', 'h',"
            "  1);"
            "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority,"
            "  device_kind, max_runtime_seconds, document, created_at, owner) VALUES"
            "  (1, 'j1', 'm', 'queued', 0, 3, 0, 'any', 60, '{}', 1, 't1'),"
            "  (2, 'j2', 'm', 'running', 1, 3, 0, 'any', 60, '{}', 2, 't1');");
    db *d = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    if (!d)
        return;
    CHECK_INT(db_query_int(d, "PRAGMA user_version"), 9);
    db_token t;
    CHECK_INT(db_token_get(d, "t1", &t, err), 0);
    CHECK_INT(t.max_running, 0);
    CHECK_INT(t.max_queued, 0);
    db_job next;
    db_worker w = {.kinds = DB_KIND_CPU};
    snprintf(w.id, sizeof w.id, "w1");
    CHECK_INT(db_job_next_queued(d, &w, 5, &next, err), 1);
    CHECK_STR(next.id, "j1");
    CHECK_INT(next.retry_at, 0);
    CHECK_STR(next.slurm_reason, "");
    db_job_clear(&next);
    /* a cap of one running job now holds j1 back; none holds it again */
    CHECK_INT(db_exec(d, "UPDATE tokens SET max_running = 1", err), 0);
    CHECK_INT(db_job_next_queued(d, &w, 5, &next, err), 0);
    CHECK_INT(db_exec(d, "UPDATE tokens SET max_running = 0", err), 0);
    CHECK_INT(db_job_next_queued(d, &w, 5, &next, err), 1);
    db_job_clear(&next);
    db_close(d);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_v4_to_v5();
    test_v5_columns();
    test_v5_to_v6();
    test_v7_to_v8();
    test_v8_to_v9();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_dir);
    return check_exit();
}
