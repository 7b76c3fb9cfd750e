/* Unit tests of scheduler/slurm: the sbatch command line and the batch script made from a job,
 * what squeue's states mean, running a command with its output captured (and cut off when it
 * hangs), and the executor's passes against fake sbatch, squeue and scancel scripts: a job is
 * bound and submitted with its token only in sbatch's environment, waits while its Slurm job
 * is pending (keeping squeue's reason, the rest of its line, as it changes), is requeued
 * (attempt counted) and submitted again, once the lost attempt's back-off is over, when its
 * Slurm job ends while it runs, is scancelled when cancelled while its Slurm job waits, and waits
 * out a failed sbatch without a new try every pass; a squeue that fails changes nothing.
 *
 * The real Slurm is in tests/e2e/test_slurm.py. */
#include "scheduler/slurm.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/events.h"
#include "db/jobs.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "job/job.h"
#include "scheduler/lifecycle.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"

#define T0 1700000000000LL

static char tmp_dir[] = "/tmp/trainyard-test-slurm-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* ---- command lines ------------------------------------------------------------------------ */

/* a->v joined by spaces. */
static void joined(const slurm_argv *a, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; a->v[i]; i++) {
        strncat(out, i ? " " : "", cap - strlen(out) - 1);
        strncat(out, a->v[i], cap - strlen(out) - 1);
    }
}

static void test_sbatch_argv(void)
{
    char err[ERR_LEN], line[2048];
    slurm_opts o = {.sbatch = "/opt/slurm/bin/sbatch"};
    slurm_submit s = {.job_id = "abc", .worker_id = "w1", .replicas = 2, .time_limit_s = 3720};
    snprintf(s.output, sizeof s.output, "/data/slurm/abc-%%j.out");
    slurm_argv a;
    CHECK_INT(slurm_sbatch_argv(&o, &s, &a, err), 0);
    joined(&a, line, sizeof line);
    CHECK_STR(line, "/opt/slurm/bin/sbatch --parsable --no-requeue --job-name=trainyard-abc "
                    "--ntasks=2 --time=0-01:02:00 --output /data/slurm/abc-%j.out");

    /* GPUs: per node when nodes are given (rounded up), else one per task; a partition */
    o.sbatch = NULL;
    o.partition = "gpu";
    s.replicas = 5;
    s.nodes = 2;
    s.gpu = 1;
    s.time_limit_s = 2 * 86400 + 1;
    CHECK_INT(slurm_sbatch_argv(&o, &s, &a, err), 0);
    joined(&a, line, sizeof line);
    CHECK_STR(line, "sbatch --parsable --no-requeue --job-name=trainyard-abc --ntasks=5 --nodes=2 "
                    "--gres=gpu:3 --time=2-00:00:01 --partition=gpu --output "
                    "/data/slurm/abc-%j.out");
    s.nodes = 0;
    s.time_limit_s = 0;
    o.partition = NULL;
    CHECK_INT(slurm_sbatch_argv(&o, &s, &a, err), 0);
    joined(&a, line, sizeof line);
    CHECK_STR(line, "sbatch --parsable --no-requeue --job-name=trainyard-abc --ntasks=5 "
                    "--gpus-per-task=1 --output /data/slurm/abc-%j.out");

    char long_partition[200];
    memset(long_partition, 'p', sizeof long_partition - 1);
    long_partition[sizeof long_partition - 1] = '\0';
    o.partition = long_partition;
    CHECK_INT(slurm_sbatch_argv(&o, &s, &a, err), -E2BIG);
}

static void test_script(void)
{
    char err[ERR_LEN], script[SLURM_SCRIPT_MAX];
    slurm_opts o = {.replica_exe = "/opt/it's here/trainyard-replica",
                    .server_url = "https://serve:8443",
                    .pin_cert = "/data/server-cert.pem",
                    .dataset_allow = "10.0.0.0/8,*.example.com",
                    .checkpoint_s = 10,
                    .dataset_stall_s = 0};
    CHECK_INT(slurm_script_build(&o, "0123abcd", script, sizeof script, err), 0);
    CHECK(strncmp(script, "#!/bin/sh\n", 10) == 0);
    const char *exec = strstr(script, "\nexec ");
    CHECK(exec != NULL);
    if (exec)
        CHECK_STR(exec + 1, "exec srun --mpi=pmix --kill-on-bad-exit=1 '/opt/it'\\''s "
                            "here/trainyard-replica' --server 'https://serve:8443' --worker "
                            "'0123abcd' --pin-cert '/data/server-cert.pem' --dataset-allow "
                            "'10.0.0.0/8,*.example.com' --checkpoint-seconds 10\n");
    CHECK(strstr(script, "ty_") == NULL); /* no token in it */
    CHECK_INT(slurm_script_build(&o, "0123abcd", script, 64, err), -E2BIG);
}

static void test_states(void)
{
    CHECK_INT(slurm_state_class("PENDING"), SLURM_WAITING);
    CHECK_INT(slurm_state_class("CONFIGURING"), SLURM_WAITING);
    CHECK_INT(slurm_state_class("RUNNING"), SLURM_ALIVE);
    CHECK_INT(slurm_state_class("COMPLETING"), SLURM_ALIVE);
    CHECK_INT(slurm_state_class("SOMETHING_NEW"), SLURM_ALIVE);
    const char *ended[] = {"COMPLETED", "FAILED",        "NODE_FAIL", "TIMEOUT",
                           "CANCELLED", "OUT_OF_MEMORY", "PREEMPTED"};
    for (size_t i = 0; i < sizeof ended / sizeof ended[0]; i++)
        CHECK_INT(slurm_state_class(ended[i]), SLURM_ENDED);
}

static void test_cmd_run(void)
{
    char err[ERR_LEN], out[256], errout[256];
    const char *cat[] = {"sh", "-c", "cat; echo oops >&2; exit 3", NULL};
    CHECK_INT(slurm_cmd_run(cat, NULL, "hello\n", out, errout, sizeof out, 5000, err), 3);
    CHECK_STR(out, "hello\n");
    CHECK_STR(errout, "oops\n");

    /* output past cap is cut, not overflowed; the environment given is the one it sees */
    char *env[] = {"ONLY=this", NULL};
    const char *big[] = {"sh", "-c", "printf '%0300d' 0; printf %s \"$ONLY:$HOME\" >&2", NULL};
    CHECK_INT(slurm_cmd_run(big, env, NULL, out, errout, sizeof out, 5000, err), 0);
    CHECK_INT((int)strlen(out), 255);
    CHECK_STR(errout, "this:");

    const char *hang[] = {"sleep", "5", NULL};
    CHECK_INT(slurm_cmd_run(hang, NULL, NULL, out, errout, sizeof out, 200, err), -ETIMEDOUT);
    const char *none[] = {"/nonexistent/sbatch", NULL};
    CHECK(slurm_cmd_run(none, NULL, NULL, out, errout, sizeof out, 200, err) != 0);
}

/* ---- the executor against fake commands --------------------------------------------------- */

static char fake[256];

/* Writes an executable script bin/<name> in the fake folder. */
static void fake_cmd(const char *name, const char *body, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", fake, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "#!/bin/sh\nD='%s'\n%s", fake, body);
    fclose(f);
    chmod(path, 0755);
}

/* The whole of fake/<name>, or "" (static buffer). */
static const char *fake_read(const char *name)
{
    static char text[8192];
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fake, name);
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return text;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void fake_write(const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fake, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int changes;
static void on_changed(void *user, const sched_expiry_stats *st)
{
    (void)user, (void)st;
    changes++;
}

/* A fresh copy of job id. */
static db_job job_now(db *d, const char *id)
{
    char err[ERR_LEN];
    db_job j;
    memset(&j, 0, sizeof j);
    CHECK_INT(db_job_get(d, id, &j, err), 0);
    return j;
}

static void tick(slurm_executor *x, int64_t now)
{
    char err[ERR_LEN] = "";
    sched_expiry_stats st;
    int rc = slurm_executor_tick(x, now, &st, err);
    if (rc < 0)
        fprintf(stderr, "tick: %s\n", err);
}

static void test_executor(void)
{
    char err[ERR_LEN], db_path[600], data_dir[512], artifacts[600];
    char sbatch[600], squeue[600], scancel[600];
    snprintf(fake, sizeof fake, "%s/fake", tmp_dir);
    snprintf(data_dir, sizeof data_dir, "%s/data", tmp_dir);
    snprintf(artifacts, sizeof artifacts, "%s/artifacts", data_dir);
    mkdir(fake, 0700);
    mkdir(data_dir, 0700);
    mkdir(artifacts, 0700);
    snprintf(db_path, sizeof db_path, "%s/trainyard.db", data_dir);
    /* sbatch: fails while $D/fail exists; else keeps its script, argv and token and prints
     * the next id (41, 42, ...) */
    fake_cmd("sbatch",
             "[ -e \"$D/fail\" ] && { echo 'sbatch: error: Batch job submission failed: "
             "Invalid partition name specified' >&2; exit 1; }\n"
             "cat > \"$D/script\"; echo \"$*\" > \"$D/args\"; echo \"$TRAINYARD_TOKEN\" > "
             "\"$D/token\"\n"
             "n=$(cat \"$D/next\" 2>/dev/null || echo 41); echo $((n + 1)) > \"$D/next\"\n"
             "echo $n; echo x >> \"$D/sbatch-calls\"\n",
             sbatch, sizeof sbatch);
    fake_cmd("squeue",
             "[ -e \"$D/down\" ] && { echo 'squeue: error: Unable to contact slurm "
             "controller' >&2; exit 1; }\ncat \"$D/states\" 2>/dev/null; exit 0\n",
             squeue, sizeof squeue);
    fake_cmd("scancel", "echo \"$*\" >> \"$D/cancelled\"\n", scancel, sizeof scancel);

    db *d = NULL;
    CHECK_INT(db_open(db_path, &d, err), 0);
    slurm_opts o = {.db_path = db_path,
                    .data_dir = data_dir,
                    .artifacts_dir = artifacts,
                    .replica_exe = "/bin/true",
                    .server_url = "http://127.0.0.1:1",
                    .checkpoint_s = -1,
                    .sbatch = sbatch,
                    .squeue = squeue,
                    .scancel = scancel,
                    .changed = on_changed};
    slurm_executor *x = NULL;
    CHECK_INT(slurm_executor_new(&o, d, &x, err), 0);
    if (!x)
        return;

    /* a 2-replica job and a script job: only the first goes to Slurm */
    sched_new_job nj = {.name = "dp",
                        .document = "{\"distribution\":{\"replicas\":2,\"nodes\":1}}",
                        .device_kind = JOB_DEVICE_ANY,
                        .max_attempts = 2,
                        .max_runtime_seconds = 600,
                        .replicas = 2};
    db_job j;
    int created;
    CHECK_INT(sched_job_submit(d, &nj, T0, &j, &created, err), 0);
    char id[DB_ID_LEN + 1];
    memcpy(id, j.id, sizeof id);
    db_job_clear(&j);
    sched_new_job sj = nj;
    sj.script = 1;
    sj.replicas = 1;
    CHECK_INT(sched_job_submit(d, &sj, T0, &j, &created, err), 0);
    db_job_clear(&j);

    tick(x, T0 + 1000);
    j = job_now(d, id);
    CHECK_STR(j.slurm_job_id, "41");
    CHECK_INT(j.status, DB_QUEUED);
    char wid[DB_ID_LEN + 1];
    memcpy(wid, j.for_worker, sizeof wid);
    CHECK_INT((int)strlen(wid), DB_ID_LEN);
    db_job_clear(&j);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM jobs WHERE slurm_job_id IS NOT NULL"), 1);
    db_worker w;
    CHECK_INT(db_worker_get(d, wid, &w, err), 0);
    CHECK_INT(w.bound, 1);
    CHECK_INT(w.slots, 2);
    char name[64];
    snprintf(name, sizeof name, "slurm-%s", id);
    CHECK_STR(w.name, name);
    db_worker_clear(&w);
    /* the token: in sbatch's environment only, a live worker token */
    const char *token = fake_read("token");
    CHECK(strncmp(token, "ty_", 3) == 0);
    char hash[DB_TOKEN_HASH_LEN + 1], secret[DB_TOKEN_SECRET_LEN + 1];
    snprintf(secret, sizeof secret, "%s", token);
    db_token_hash(secret, hash);
    db_token t;
    CHECK_INT(db_token_find_hash(d, hash, &t, err), 0);
    CHECK_INT(t.role, DB_ROLE_WORKER);
    CHECK(strstr(fake_read("args"), "ty_") == NULL);
    CHECK(strstr(fake_read("args"), "--ntasks=2 --nodes=1") != NULL);
    CHECK(strstr(fake_read("script"), wid) != NULL);
    CHECK(strstr(fake_read("script"), "ty_") == NULL);
    CHECK(changes > 0);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM logs WHERE text LIKE "
                                   "'submitted to Slurm as job 41 (its output: %-41.out)'"),
              1);

    /* pending: queued, with squeue's reason kept (the rest of its line) as it changes; rank 0
     * leases it, which clears the reason; running: nothing changes */
    fake_write("states", "41 PENDING Resources\n");
    tick(x, T0 + 2000);
    j = job_now(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_STR(j.slurm_reason, "Resources");
    db_job_clear(&j);
    fake_write("states", "41 PENDING ReqNodeNotAvail, UnavailableNodes:n1\n");
    tick(x, T0 + 2200);
    j = job_now(d, id);
    CHECK_STR(j.slurm_reason, "ReqNodeNotAvail, UnavailableNodes:n1");
    db_job_clear(&j);
    fake_write("states", "41 PENDING None\n");
    tick(x, T0 + 2400);
    j = job_now(d, id);
    CHECK_STR(j.slurm_reason, "");
    db_job_clear(&j);
    fake_write("states", "41 PENDING Priority\n");
    tick(x, T0 + 2450);
    CHECK_INT(sched_job_lease(d, wid, T0 + 2500, 30, &j, err), 1);
    CHECK_STR(j.id, id);
    CHECK_STR(j.slurm_reason, "");
    db_job_clear(&j);
    fake_write("states", "41 RUNNING None\n");
    tick(x, T0 + 3000);
    j = job_now(d, id);
    CHECK_INT(j.status, DB_RUNNING);
    db_job_clear(&j);

    /* squeue cannot reach slurmctld: nothing is concluded */
    fake_write("down", "");
    fake_write("states", "");
    tick(x, T0 + 4000);
    j = job_now(d, id);
    CHECK_INT(j.status, DB_RUNNING);
    CHECK_STR(j.slurm_job_id, "41");
    db_job_clear(&j);
    char down[600];
    snprintf(down, sizeof down, "%s/down", fake);
    remove(down);

    /* the node failed: attempt used, requeued, the old worker and token ended, a new Slurm
     * job once the lost attempt's back-off is over */
    fake_write("states", "41 NODE_FAIL\n");
    tick(x, T0 + 5000);
    j = job_now(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_INT(j.attempt, 1);
    CHECK_STR(j.slurm_job_id, "");
    CHECK_INT(j.retry_at, T0 + 5000 + SCHED_RETRY_BACKOFF_BASE_MS);
    db_job_clear(&j);
    tick(x, T0 + 4999 + SCHED_RETRY_BACKOFF_BASE_MS);
    j = job_now(d, id);
    CHECK_STR(j.slurm_job_id, "");
    db_job_clear(&j);
    tick(x, T0 + 5000 + SCHED_RETRY_BACKOFF_BASE_MS);
    j = job_now(d, id);
    CHECK_STR(j.slurm_job_id, "42");
    CHECK(strcmp(j.for_worker, wid) != 0);
    db_job_clear(&j);
    CHECK_INT(db_token_find_hash(d, hash, &t, err), -ENOENT);
    CHECK_INT(db_worker_get(d, wid, &w, err), 0);
    CHECK_INT(w.gone, 1);
    db_worker_clear(&w);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM job_events WHERE reason = "
                                   "'Slurm job 41 ended (NODE_FAIL); retrying in 5 s'"
                                   " AND to_status = 'queued'"),
              1);

    /* cancelled while its Slurm job waits: scancel, then unbound once Slurm lets it go (the id
     * stays to be shown) */
    fake_write("states", "42 PENDING\n");
    CHECK_INT(sched_job_cancel(d, id, artifacts, T0 + 11000, &j, err), 0);
    CHECK_INT(j.status, DB_CANCELLED);
    db_job_clear(&j);
    tick(x, T0 + 11500);
    CHECK_STR(fake_read("cancelled"), "42\n");
    fake_write("states", "42 CANCELLED\n");
    tick(x, T0 + 12500);
    j = job_now(d, id);
    CHECK_STR(j.slurm_job_id, "42");
    CHECK_STR(j.for_worker, "");
    db_job_clear(&j);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM workers WHERE gone = 0"), 0);

    /* sbatch fails: the job stays queued and unbound, says why, and is not tried every pass */
    fake_write("fail", "");
    fake_write("sbatch-calls", "");
    CHECK_INT(sched_job_submit(d, &nj, T0 + 13000, &j, &created, err), 0);
    memcpy(id, j.id, sizeof id);
    db_job_clear(&j);
    tick(x, T0 + 14000);
    tick(x, T0 + 15000);
    j = job_now(d, id);
    CHECK_INT(j.status, DB_QUEUED);
    CHECK_STR(j.for_worker, "");
    CHECK_STR(j.slurm_job_id, "");
    db_job_clear(&j);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM logs WHERE text LIKE 'sbatch failed "
                                   "(status 1): %Invalid partition%; trying again in 5 s'"),
              1);
    CHECK_INT((int)db_query_int(d, "SELECT count(*) FROM tokens WHERE role = 'worker' AND "
                                   "revoked_at IS NULL"),
              0);
    char fail[600];
    snprintf(fail, sizeof fail, "%s/fail", fake);
    remove(fail);
    tick(x, T0 + 20000);
    j = job_now(d, id);
    CHECK_STR(j.slurm_job_id, "43");
    db_job_clear(&j);

    slurm_executor_stop(x);
    db_close(d);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_sbatch_argv();
    test_script();
    test_states();
    test_cmd_run();
    test_executor();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
