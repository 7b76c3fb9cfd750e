/* agent_group: the worker's side of data-parallel jobs (see agent.h, "the ranks of a
 * data-parallel job").
 *
 * A worker started with --replicas N registers N slots and may lease a job of up to N
 * replicas. It does not run such a job itself: it writes the lease into the job's folder
 * (mode 0600: it may carry dataset credentials) and starts Open MPI's local launcher,
 *
 *   mpirun -np R --bind-to none --mca btl self,vader trainyard-replica --lease DIR/lease.json
 *          --server URL --worker ID --work-dir WORK --device LIST [the worker's dataset flags]
 *
 * with the worker token in the ranks' environment (TRAINYARD_TOKEN), never on a command line.
 * Rank 0 reports the job as this worker (heartbeats extend this worker's lease), so the worker
 * only waits; a stop signal is passed on to mpirun, which passes it to the ranks (they agree to
 * stop after the same step or epoch, and rank 0 hands the job back). When the ranks end badly
 * before rank 0 reported, the worker fails the attempt with their exit status. */
#include "worker/agent.h"
#include "worker/agent_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"
#include "util/exepath.h"
#include "util/json_out.h"

extern char **environ;

#define GROUP_MAX_ARGS 64

const char *agent_first_device(const char *list)
{
    return agent_device_entry(list, 0);
}

const char *agent_device_entry(const char *list, int i)
{
    static char one[64];
    if (!list || !*list)
        return "any";
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    i %= n;
    const char *at = list;
    for (; i > 0; i--)
        at = strchr(at, ',') + 1;
    size_t len = strcspn(at, ",");
    snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), at);
    return one;
}

/* agent_pick_device for a rank, which trains with OpenCL: a GPU without it is refused. */
static int rank_device(const char *want, ocl_device *out, char *err)
{
    ocl_device d;
    int rc = agent_pick_device(want, &d, err);
    if (rc == 0 && !d.opencl)
        rc = err_set(err, -ENODEV,
                     "device %s (%s, found by %s) has no OpenCL: a data-parallel rank needs it",
                     want, d.name, d.found_by);
    if (rc == 0)
        *out = d;
    return rc;
}

int agent_pick_rank_device(const char *list, int local_rank, ocl_device *out, char *err)
{
    const char *want = agent_device_entry(list, local_rank);
    int gpu = !strcmp(want, "gpu"), cpu = !strcmp(want, "cpu"), any = !strcmp(want, "any");
    if (!gpu && !cpu && !any)
        return rank_device(want, out, err); /* an index */
    /* A kind: the ranks of this machine take its devices of that kind in turn ("any": the GPUs
     * when there are some, as ocl_device_pick prefers them). */
    ocl_device *all = NULL;
    size_t n = 0, k = 0, gpus = 0;
    int rc = ocl_devices_list(&all, &n, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        gpus += (all[i].type & CL_DEVICE_TYPE_GPU) != 0;
    for (size_t i = 0; i < n; i++) {
        int is_gpu = (all[i].type & CL_DEVICE_TYPE_GPU) != 0;
        int fits = gpu ? is_gpu : cpu ? (all[i].type & CL_DEVICE_TYPE_CPU) != 0 : !gpus || is_gpu;
        if (fits)
            all[k++] = all[i];
    }
    if (k == 0 || getenv("TRAINYARD_DEVICE")) {
        free(all);
        return rank_device(want, out, err); /* says why, or obeys the forced index */
    }
    *out = all[(size_t)local_rank % k];
    free(all);
    return 0;
}

/* trainyard-replica: o->replica_exe, else beside this executable. */
static int replica_path(const agent_opts *o, char *out, size_t cap)
{
    if (o->replica_exe)
        return exepath_which(o->replica_exe, out, cap) == 0;
    return exepath_beside_self("trainyard-replica", out, cap) == 0;
}

int agent_group_slots(const agent_opts *o)
{
    if (o->replicas <= 1)
        return 1;
    char exe[PATH_MAX], mpirun[PATH_MAX];
    if (!replica_path(o, exe, sizeof exe)) {
        agent_say("--replicas %d: trainyard-replica is missing (built only with Open MPI, "
                  "libopenmpi-dev): taking jobs of one replica only",
                  o->replicas);
        return 1;
    }
    if (exepath_which(o->mpirun ? o->mpirun : "mpirun", mpirun, sizeof mpirun) < 0) {
        agent_say("--replicas %d: %s is not found (Debian's openmpi-bin): taking jobs of one "
                  "replica only",
                  o->replicas, o->mpirun ? o->mpirun : "mpirun");
        return 1;
    }
    return o->replicas;
}

/* The lease as rank 0 reads it: written whole, then renamed, mode 0600. */
static int write_lease(const json_t *lease, const char *dir, char *path, size_t cap, char *err)
{
    char tmp[4200];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, cap, "%s/lease.json", dir);
    snprintf(tmp, sizeof tmp, "%s/lease.json.new", dir);
    char *text = json_out_dumps(lease, JSON_COMPACT);
    if (!text)
        return err_set(err, -ENOMEM, "out of memory");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    explicit_bzero(text, len);
    free(text);
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, -e, "cannot write %s: %s", path, strerror(e));
    }
    return 0;
}

/* environ with TRAINYARD_TOKEN set to token (or removed when NULL); free() the array only. */
static char **env_with_token(const char *token, char *entry, size_t cap)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TRAINYARD_TOKEN=", 16) != 0)
            env[k++] = environ[i];
    if (token && (size_t)snprintf(entry, cap, "TRAINYARD_TOKEN=%s", token) < cap)
        env[k++] = entry;
    env[k] = NULL;
    return env;
}

int agent_group_launch(const agent_opts *o, const char *worker_id, const json_t *lease,
                       const job_spec *job, const char *dir, char *err)
{
    char exe[PATH_MAX], mpirun[PATH_MAX], lease_path[4200], np[16], threads[16], every[32];
    char max_bytes[32], stall[32];
    if (!replica_path(o, exe, sizeof exe))
        return err_set(err, -ENOENT,
                       "this worker cannot start data-parallel ranks: "
                       "trainyard-replica is missing");
    if (exepath_which(o->mpirun ? o->mpirun : "mpirun", mpirun, sizeof mpirun) < 0)
        return err_set(err, -ENOENT,
                       "this worker cannot start data-parallel ranks: %s is not found",
                       o->mpirun ? o->mpirun : "mpirun");
    int rc = write_lease(lease, dir, lease_path, sizeof lease_path, err);
    if (rc < 0)
        return rc;
    snprintf(np, sizeof np, "%d", job->replicas);
    const char *argv[GROUP_MAX_ARGS];
    int n = 0;
    argv[n++] = mpirun;
    if (geteuid() == 0)
        argv[n++] = "--allow-run-as-root"; /* Open MPI refuses root otherwise */
    argv[n++] = "-np";
    argv[n++] = np;
    /* Ranks of one machine: shared memory between them, no network probing; each rank's
     * OpenCL threads are the device's business, so no binding. */
    argv[n++] = "--bind-to";
    argv[n++] = "none";
    argv[n++] = "--mca";
    argv[n++] = "btl";
    argv[n++] = "self,vader";
    argv[n++] = exe;
    argv[n++] = "--server";
    argv[n++] = o->server;
    argv[n++] = "--worker";
    argv[n++] = worker_id;
    argv[n++] = "--lease";
    argv[n++] = lease_path;
    argv[n++] = "--work-dir";
    argv[n++] = o->work_dir;
    argv[n++] = "--device";
    argv[n++] = o->device_list ? o->device_list : (o->device ? o->device : "any");
    /* On a CPU device the ranks share its cores: each gets its part unless told otherwise. */
    int per_rank = o->rank_threads;
    if (per_rank == 0 && o->device_info && (o->device_info->type & CL_DEVICE_TYPE_CPU))
        per_rank = o->device_info->compute_units / (unsigned)job->replicas > 1
                       ? (int)(o->device_info->compute_units / (unsigned)job->replicas)
                       : 1;
    if (per_rank > 0) {
        snprintf(threads, sizeof threads, "%d", per_rank);
        argv[n++] = "--rank-threads";
        argv[n++] = threads;
    }
    if (o->ca_file) {
        argv[n++] = o->ca_pinned ? "--pin-cert" : "--ca";
        argv[n++] = o->ca_file;
    }
    const char *pairs[][2] = {
        {"--dataset-root", o->dataset_root},
        {"--dataset-allow", o->dataset_allow},
        {"--dataset-ca", o->dataset_ca},
        {"--dataset-cache", o->dataset_cache ? dscache_dir(o->dataset_cache) : NULL}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (pairs[i][1]) {
            argv[n++] = pairs[i][0];
            argv[n++] = pairs[i][1];
        }
    }
    snprintf(every, sizeof every, "%g", o->checkpoint_seconds);
    argv[n++] = "--checkpoint-seconds";
    argv[n++] = every;
    if (o->max_dataset_bytes) {
        snprintf(max_bytes, sizeof max_bytes, "%llu", (unsigned long long)o->max_dataset_bytes);
        argv[n++] = "--max-dataset-bytes";
        argv[n++] = max_bytes;
    }
    if (o->dataset_stall_s > 0) {
        snprintf(stall, sizeof stall, "%ld", o->dataset_stall_s);
        argv[n++] = "--dataset-stall-seconds";
        argv[n++] = stall;
    }
    /* A script job's ranks run it as this worker would (cli/cli_script.c's flags). */
    char memory[32], grace[32];
    const char *switches[][2] = {{"--allow-scripts", o->allow_scripts ? "" : NULL},
                                 {"--allow-pip", o->allow_pip ? "" : NULL},
                                 {"--script-network", o->script_network ? "" : NULL},
                                 {"--no-sandbox", o->no_sandbox ? "" : NULL},
                                 {"--python", o->python},
                                 {"--script-ro-bind", o->script_ro_bind},
                                 {"--script-cache", o->script_cache},
                                 {"--script-memory", NULL},
                                 {"--script-grace-seconds", NULL}};
    if (o->script_memory) {
        snprintf(memory, sizeof memory, "%llu", (unsigned long long)o->script_memory);
        switches[7][1] = memory;
    }
    if (o->script_grace_s > 0) {
        snprintf(grace, sizeof grace, "%g", o->script_grace_s);
        switches[8][1] = grace;
    }
    for (size_t i = 0; job_is_script(job) && i < sizeof switches / sizeof switches[0]; i++) {
        if (!switches[i][1])
            continue;
        argv[n++] = switches[i][0];
        if (*switches[i][1])
            argv[n++] = switches[i][1];
    }
    argv[n] = NULL;

    char token_entry[1024];
    char **env = env_with_token(o->token ? o->token : getenv("TRAINYARD_TOKEN"), token_entry,
                                sizeof token_entry);
    if (!env)
        return err_set(err, -ENOMEM, "out of memory");
    pid_t pid;
    int src = posix_spawn(&pid, mpirun, NULL, NULL, (char *const *)argv, env);
    explicit_bzero(token_entry, sizeof token_entry);
    free(env);
    if (src != 0)
        return err_set(err, -src, "cannot start %s: %s", mpirun, strerror(src));
    agent_say("job %s: %d replicas started under %s (pid %d)", job->name, job->replicas, mpirun,
              (int)pid);

    int status = 0, signalled = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return err_set(err, -errno, "waiting for %s failed: %s", mpirun, strerror(errno));
        if (*o->stop > signalled) {
            kill(pid, SIGTERM); /* mpirun passes it to the ranks */
            signalled = *o->stop;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        return err_set(err, -EIO,
                       "the job's %d replicas ended with exit status %d before rank 0 reported "
                       "the job (the worker's log has their output)",
                       job->replicas, WEXITSTATUS(status));
    return err_set(err, -EIO, "the job's replicas were ended by signal %d (%s)", WTERMSIG(status),
                   strsignal(WTERMSIG(status)));
}

int agent_replica_lease(const agent_opts *o, client *c, const char *worker_id, int wait_s,
                        json_t **lease, char *err)
{
    char path[512];
    snprintf(path, sizeof path, "/workers/%s/lease?wait=%d", worker_id, wait_s);
    client_set_timeout(c, wait_s + 30);
    long status = 0;
    json_t *reply = NULL;
    int rc = client_post_json(c, path, NULL, &status, &reply, err);
    if (rc < 0)
        return rc;
    if (status == 200 && json_is_object(reply)) {
        *lease = reply;
        return 1;
    }
    json_decref(reply);
    if (status == 204)
        return 0;
    return err_set(err, -EIO, "the server answered the lease with %ld%s", status,
                   status == 404 ? ": it does not know worker " : "");
}

/* A follower stops when a signal asked it to: at once on a second, at the epoch's end on a
 * first (the trainer agrees the stop with the other ranks). */
static int follow_stop(void *user)
{
    const agent_opts *o = user;
    return *o->stop > 1;
}

static int follow_epoch(void *user, const trainer_epoch *e)
{
    (void)e;
    const agent_opts *o = user;
    return *o->stop != 0;
}

int agent_follow(const agent_opts *o, ocl_ctx *ctx, kern *k, const json_t *lease,
                 const trainer_group *g, char *err)
{
    field_errors errs = {0};
    job_spec *job = NULL;
    if (job_from_json(json_object_get(lease, "document"), &job, &errs) < 0)
        return err_set(err, -EINVAL, "the lease holds an invalid job: %s: %s",
                       errs.count ? errs.items[0].field : "",
                       errs.count ? errs.items[0].message : "");
    trainer_opts topts = {
        .out_dir = o->work_dir, .checkpoint_seconds = -1, .stop_download = o->stop, .group = g};
    trainer_hooks hooks = {.user = (void *)o, .should_stop = follow_stop, .on_epoch = follow_epoch};
    trainer_result res;
    int rc = trainer_run(job, ctx, k, &topts, &hooks, &res, err);
    job_free(job);
    return rc;
}
