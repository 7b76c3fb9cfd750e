/* Unit tests of scheduler/waiting on a real SQLite file:
 * - sched_worker_takes is leasing's rule: for workers of every kind, scripts, slots and binding,
 *   the job db_job_next_queued leases is the first (priority, then age) that sched_worker_takes
 *   accepts, over jobs of every device kind, kind, replica count and binding;
 * - the messages of no_worker and no_capable_worker name each missing requirement, or say that
 *   no single worker has them all;
 * - behind_jobs counts the jobs ahead that capable workers would lease, and no others. */
#include "scheduler/waiting.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "job/job.h"
#include "util/err.h"

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

static void add_job(db *d, db_job *j, int kind, int script, int replicas, const char *for_worker,
                    int priority)
{
    char err[ERR_LEN];
    memset(j, 0, sizeof *j);
    CHECK_INT(db_id_new(j->id, err), 0);
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

static void test_takes_is_leasing(void)
{
    db *d = open_db("rule.db");
    char err[ERR_LEN];
    static const char bound_id[] = "0123456789abcdef0123456789abcdef";
    db_job jobs[N_JOBS];
    int n = 0;
    for (int kind = 0; kind < 3; kind++)
        for (int script = 0; script < 2; script++)
            for (int r = 0; r < 3; r++)
                for (int b = 0; b < 2; b++, n++)
                    add_job(d, &jobs[n], kind, script, 1 << r, b ? bound_id : "",
                            (n * 7) % 5); /* priorities out of submit order */
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
                        if (!sched_worker_takes(&w, &jobs[i]))
                            continue;
                        if (!want || jobs[i].priority > want->priority ||
                            (jobs[i].priority == want->priority && jobs[i].seq < want->seq))
                            want = &jobs[i];
                    }
                    db_job got;
                    memset(&got, 0, sizeof got);
                    int rc = db_job_next_queued(d, &w, &got, err);
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
    CHECK_INT(sched_job_wait(d, j, ws, SCHED_WAIT_AHEAD_MAX, &w, err), 0);
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
    busy.job_id[0] = '\0';
    expect(d, &first, &ws, "starting", "first in line: a worker is free to take it");
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
    return check_exit_removing(dir);
}
