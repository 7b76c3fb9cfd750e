/* Unit tests of scheduler/: what a job leaves when it ends: artifacts and delete, checkpoints
 * deleted or kept (in the same commit as the end), script jobs (leased only to workers that run
 * scripts), and the model versions an ended job publishes. */
#include "tests/unit/scheduler/lifecycle_test.h"

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
    lifecycle_test_begin();
    test_artifacts_and_delete();
    test_checkpoint_settled_at_the_end();
    test_settle_is_in_the_ending_commit();
    test_script_jobs();
    test_models();
    lifecycle_test_end();
    return check_exit();
}
