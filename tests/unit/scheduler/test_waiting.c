/* Unit tests of scheduler/waiting on a real SQLite file:
 * - sched_worker_takes and sched_job_held are leasing's rule: for workers of every kind,
 *   scripts, slots and binding, the job db_job_next_queued leases is the first (priority, then
 *   age) that sched_worker_takes accepts and sched_job_held does not hold, over jobs of every
 *   device kind, kind, replica count, binding, back-off (none, over, not over) and owner (none,
 *   a token at its running cap, one under it);
 * - the messages of no_worker and no_capable_worker name each missing requirement, or say that
 *   no single worker has them all; retry_backoff says the seconds left, token_cap the cap and
 *   the count; slurm carries squeue's reason once there is one;
 * - behind_jobs counts the jobs ahead that capable workers would lease, and no others (not
 *   those in a back-off or held by their token's cap);
 * - the Slurm executor's walk of unbound jobs holds back the same jobs. */
#include "scheduler/waiting.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "db/tokens.h"
#include "job/job.h"
#include "util/err.h"

#define NOW 1000000 /* the clock of leasing and of the reasons */

static char dir[64];

static db *open_db(const char *name)
{
    char path[128], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    db *d = NULL;
    if (db_open(path, &d, err) < 0) {
        fprintf(stderr, "db_open: %s\n", err);
        exit(1);
    }
    return d;
}

/* A token named name with a running-job cap of max_running (0: none); its id into id. */
static void add_token(db *d, const char *name, int max_running, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN], secret[DB_TOKEN_SECRET_LEN + 1];
    db_token spec, t;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.name, sizeof spec.name, "%s", name);
    spec.role = DB_ROLE_USER;
    spec.max_running = max_running;
    CHECK_INT(db_token_create_capped(d, &spec, 1, &t, secret, err), 0);
    memcpy(id, t.id, DB_ID_LEN + 1);
}

/* Sets inserted job j's retry_at, in its row and in *j (0: leaves it as it is). */
static void set_retry_at(db *d, db_job *j, int64_t retry_at)
{
    char sql[128], err[ERR_LEN];
    if (!retry_at)
        return;
    snprintf(sql, sizeof sql, "UPDATE jobs SET retry_at = %lld WHERE seq = %lld",
             (long long)retry_at, (long long)j->seq);
    CHECK_INT(db_exec(d, sql, err), 0);
    j->retry_at = retry_at;
}

static void add_job_of(db *d, db_job *j, int kind, int script, int replicas, const char *for_worker,
                       int priority, const char *owner);

static void add_job(db *d, db_job *j, int kind, int script, int replicas, const char *for_worker,
                    int priority)
{
    add_job_of(d, j, kind, script, replicas, for_worker, priority, "");
}

static void add_job_of(db *d, db_job *j, int kind, int script, int replicas, const char *for_worker,
                       int priority, const char *owner)
{
    char err[ERR_LEN];
    memset(j, 0, sizeof *j);
    CHECK_INT(db_id_new(j->id, err), 0);
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    snprintf(j->name, sizeof j->name, "k%d-s%d-r%d-p%d", kind, script, replicas, priority);
    j->status = DB_QUEUED;
    j->max_attempts = 1;
    j->priority = priority;
    j->device_kind = kind;
    j->script = script;
    j->replicas = replicas;
    snprintf(j->for_worker, sizeof j->for_worker, "%s", for_worker);
    j->document = strdup("{}");
    CHECK_INT(db_job_insert(d, j, NULL, NULL, err), 0);
    free(j->document);
    j->document = NULL;
    if (for_worker[0]) /* bound as the Slurm executor binds a job to its worker */
        CHECK_INT(db_job_set_slurm(d, j->seq, "42", for_worker, err), 1); /* one row */
}

static db_worker worker(unsigned kinds, int scripts, int slots, int bound, const char *id)
{
    db_worker w;
    memset(&w, 0, sizeof w);
    snprintf(w.id, sizeof w.id, "%s", id);
    w.kinds = kinds;
    w.scripts = scripts;
    w.slots = slots;
    w.bound = bound;
    return w;
}

#define N_JOBS (3 * 2 * 3 * 2)

/* The cap of owner among the two tokens of the rule's test: capped runs 1 job, its cap. */
static int cap_of(const char *owner, const char *capped, int64_t *running)
{
    *running = strcmp(owner, capped) == 0 ? 1 : 0;
    return strcmp(owner, capped) == 0 ? 1 : 0;
}

static void test_takes_is_leasing(void)
{
    db *d = open_db("rule.db");
    char err[ERR_LEN];
    static const char bound_id[] = "0123456789abcdef0123456789abcdef";
    char capped[DB_ID_LEN + 1], free_tok[DB_ID_LEN + 1];
    add_token(d, "capped", 1, capped);
    add_token(d, "free", 0, free_tok);
    const char *owners[] = {"", capped, free_tok};
    static const int64_t retries[] = {0, NOW - 1, NOW + 1, NOW, NOW + 60000};
    db_job run; /* capped's one running job: its cap is reached */
    add_job_of(d, &run, JOB_DEVICE_ANY, 0, 1, "", 0, capped);
    CHECK_INT(db_job_set_running(d, run.seq, "elsewhere", "cpu", 1, NOW + 60000, err), 1);
    db_job jobs[N_JOBS];
    int n = 0;
    for (int kind = 0; kind < 3; kind++)
        for (int script = 0; script < 2; script++)
            for (int r = 0; r < 3; r++)
                for (int b = 0; b < 2; b++, n++) {
                    add_job_of(d, &jobs[n], kind, script, 1 << r, b ? bound_id : "",
                               (n * 7) % 5, /* priorities out of submit order */
                               owners[(n / 2) % 3]);
                    set_retry_at(d, &jobs[n], retries[n % 5]);
                }
    static const unsigned kinds[] = {0, DB_KIND_GPU, DB_KIND_CPU, DB_KIND_GPU | DB_KIND_CPU,
                                     DB_KIND_GPU | DB_KIND_SCRIPTS_ONLY};
    int checked = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int scripts = 0; scripts < 2; scripts++)
            for (int slots = 1; slots <= 4; slots *= 2)
                for (int bound = 0; bound < 2; bound++) {
                    db_worker w = worker(kinds[k], scripts, slots, bound,
                                         bound ? bound_id : "fedcba9876543210fedcba9876543210");
                    /* the first job in leasing's order that the rule accepts */
                    const db_job *want = NULL;
                    for (int i = 0; i < n; i++) {
                        int64_t running = 0;
                        int cap = cap_of(jobs[i].owner, capped, &running);
                        if (!sched_worker_takes(&w, &jobs[i]) ||
                            sched_job_held(&jobs[i], NOW, cap, running) != SCHED_HOLD_NONE)
                            continue;
                        if (!want || jobs[i].priority > want->priority ||
                            (jobs[i].priority == want->priority && jobs[i].seq < want->seq))
                            want = &jobs[i];
                    }
                    db_job got;
                    memset(&got, 0, sizeof got);
                    int rc = db_job_next_queued(d, &w, NOW, &got, err);
                    CHECK_INT(rc, want ? 1 : 0);
                    if (rc == 1 && want && strcmp(got.id, want->id) != 0)
                        fprintf(stderr,
                                "worker kinds %u scripts %d slots %d bound %d: leased %s, "
                                "the rule says %s\n",
                                kinds[k], scripts, slots, bound, got.name, want->name);
                    CHECK(rc != 1 || (want && strcmp(got.id, want->id) == 0));
                    if (rc == 1)
                        db_job_clear(&got);
                    checked++;
                }
    printf("the rule and leasing agree for %d workers over %d jobs\n", checked, n);
    db_close(d);
}

static void expect(db *d, const db_job *j, const sched_wait_workers *ws, const char *reason,
                   const char *message)
{
    sched_wait w;
    char err[ERR_LEN];
    CHECK_INT(sched_job_wait(d, j, ws, NOW, SCHED_WAIT_AHEAD_MAX, &w, err), 0);
    CHECK_STR(w.reason, reason);
    if (strcmp(w.message, message) != 0)
        fprintf(stderr, "got:  %s\nwant: %s\n", w.message, message);
    CHECK_STR(w.message, message);
}

static void test_messages(void)
{
    db *d = open_db("messages.db");
    db_job j;
    add_job(d, &j, JOB_DEVICE_GPU, 1, 2, "", 0);
    sched_wait_workers none = {0};
    expect(d, &j, &none, "no_worker", "no worker is connected");

    db_worker cpu = worker(DB_KIND_CPU, 0, 1, 0, "a");
    sched_wait_workers one = {&cpu, 1, 1};
    expect(d, &j, &one, "no_capable_worker",
           "no connected worker can take it: it needs a GPU (resources.device: gpu), a worker "
           "that runs scripts (--allow-scripts) and a worker with 2 slots (the most any has is "
           "1)");

    /* every requirement is met by some worker, never by one alone */
    db_worker two[2] = {worker(DB_KIND_GPU, 0, 2, 0, "a"), worker(DB_KIND_CPU, 1, 2, 0, "b")};
    sched_wait_workers split = {two, 2, 2};
    expect(d, &j, &split, "no_capable_worker",
           "no connected worker can take it: it needs one worker with all it asks for, and none "
           "has it all");

    /* a built-in job where the GPUs have no OpenCL */
    db_job built_in;
    add_job(d, &built_in, JOB_DEVICE_ANY, 0, 1, "", 0);
    db_worker nv = worker(DB_KIND_GPU | DB_KIND_SCRIPTS_ONLY, 1, 1, 0, "c");
    sched_wait_workers nvs = {&nv, 1, 1};
    expect(d, &built_in, &nvs, "no_capable_worker",
           "no connected worker can take it: it needs an OpenCL device (the GPUs connected run "
           "scripts only)");

    /* what holds the job itself comes first: its back-off, then its token's cap */
    char err[ERR_LEN], tok[DB_ID_LEN + 1];
    add_token(d, "two at once", 2, tok);
    db_job held, r1, r2;
    add_job_of(d, &r1, JOB_DEVICE_ANY, 0, 1, "", 0, tok);
    add_job_of(d, &r2, JOB_DEVICE_ANY, 0, 1, "", 0, tok);
    add_job_of(d, &held, JOB_DEVICE_ANY, 0, 1, "", 0, tok);
    held.attempt = 1;
    set_retry_at(d, &held, NOW + 4001);
    expect(d, &held, &none, "retry_backoff",
           "its attempt 1 was lost: retrying in 5 s (the back-off after a lost attempt)");
    set_retry_at(d, &held, NOW);
    expect(d, &held, &none, "no_worker", "no worker is connected"); /* the back-off is over */
    CHECK_INT(db_job_set_running(d, r1.seq, "x", "cpu", 1, NOW + 60000, err), 1);
    expect(d, &held, &none, "no_worker", "no worker is connected"); /* 1 of 2 */
    CHECK_INT(db_job_set_running(d, r2.seq, "y", "cpu", 1, NOW + 60000, err), 1);
    expect(d, &held, &none, "token_cap",
           "its token's cap: 2 of its jobs are running and its max_running is 2; it starts when "
           "one of them ends");

    /* bound to a Slurm job: squeue's reason once the executor has stored one */
    db_job slurm;
    add_job(d, &slurm, JOB_DEVICE_ANY, 0, 2, "0123456789abcdef0123456789abcdef", 0);
    snprintf(slurm.slurm_job_id, sizeof slurm.slurm_job_id, "42");
    expect(d, &slurm, &none, "slurm",
           "submitted to Slurm as job 42: waiting for Slurm to start it");
    CHECK_INT(db_job_set_slurm_reason(d, slurm.seq, "Resources", err), 1);
    CHECK_INT(db_job_get_seq(d, slurm.seq, &slurm, err), 0);
    CHECK_STR(slurm.slurm_reason, "Resources");
    expect(d, &slurm, &none, "slurm", "held by Slurm (job 42): Resources");
    db_job_clear(&slurm);
    db_close(d);
}

static void test_ahead(void)
{
    db *d = open_db("ahead.db");
    db_job first, gpu_only, mine, later;
    add_job(d, &first, JOB_DEVICE_ANY, 0, 1, "", 0);
    add_job(d, &gpu_only, JOB_DEVICE_GPU, 0, 1, "", 3); /* no connected worker takes it */
    add_job(d, &mine, JOB_DEVICE_ANY, 0, 1, "", 0);
    add_job(d, &later, JOB_DEVICE_ANY, 0, 1, "", 0);
    db_worker busy = worker(DB_KIND_CPU, 0, 1, 0, "a");
    snprintf(busy.job_id, sizeof busy.job_id, "%s", "somejob");
    sched_wait_workers ws = {&busy, 1, 1};
    expect(d, &first, &ws, "workers_busy",
           "first in line: waiting for a free worker (the 1 that can take it are busy)");
    expect(d, &mine, &ws, "behind_jobs", "behind 1 job(s) submitted earlier");
    expect(d, &later, &ws, "behind_jobs", "behind 2 job(s) submitted earlier");
    /* a job ahead in its back-off is not leased before mine, so it is not counted */
    set_retry_at(d, &first, NOW + 1000);
    expect(d, &later, &ws, "behind_jobs", "behind 1 job(s) submitted earlier");
    set_retry_at(d, &first, NOW);
    expect(d, &later, &ws, "behind_jobs", "behind 2 job(s) submitted earlier");
    busy.job_id[0] = '\0';
    expect(d, &first, &ws, "starting", "first in line: a worker is free to take it");
    db_close(d);
}

static int count_row(void *ctx, const db_job *j)
{
    (void)j;
    (*(int *)ctx)++;
    return 0;
}

/* The Slurm executor's walk of unbound jobs holds back what leasing holds back, counting a job
 * bound to a Slurm job as running against its token's cap (it will run). */
static void test_unbound_walk(void)
{
    db *d = open_db("unbound.db");
    char err[ERR_LEN], tok[DB_ID_LEN + 1];
    add_token(d, "one at once", 1, tok);
    db_job a, b;
    add_job_of(d, &a, JOB_DEVICE_ANY, 0, 1, "", 0, tok);
    add_job_of(d, &b, JOB_DEVICE_ANY, 0, 1, "", 0, tok);
    int n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW, 10, 0, count_row, &n, err), 0);
    CHECK_INT(n, 2);
    CHECK_INT(db_job_set_slurm(d, a.seq, "7", "0123456789abcdef0123456789abcdef", err), 1);
    n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW, 10, 0, count_row, &n, err), 0);
    CHECK_INT(n, 0); /* a is bound, b waits for it */
    CHECK_INT(db_job_set_slurm(d, a.seq, NULL, NULL, err), 1);
    set_retry_at(d, &a, NOW + 1);
    n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW, 10, 0, count_row, &n, err), 0);
    CHECK_INT(n, 1); /* a backs off, b goes */
    n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW + 1, 10, 0, count_row, &n, err), 0);
    CHECK_INT(n, 2);
    /* script jobs only when the executor takes them (serve --allow-scripts) */
    db_job s;
    add_job(d, &s, JOB_DEVICE_ANY, 1, 2, "", 0);
    n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW + 1, 10, 0, count_row, &n, err), 0);
    CHECK_INT(n, 2);
    n = 0;
    CHECK_INT(db_job_list_unbound(d, NOW + 1, 10, 1, count_row, &n, err), 0);
    CHECK_INT(n, 3);
    db_close(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/trainyard-waiting-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_takes_is_leasing();
    test_messages();
    test_ahead();
    test_unbound_walk();
    return check_exit_removing(dir);
}
