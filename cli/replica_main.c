/* trainyard-replica: one rank of a data-parallel job, started by Open MPI's mpirun (a worker's
 * local launch) or by Slurm's srun (the Slurm executor). It is its own program so that the
 * trainyard binary (the server, the CLI) does not load Open MPI.
 *
 * With --lease FILE (the worker that leased the job wrote it) or, without it, a lease rank 0
 * takes itself for --worker ID (the worker serve made for a Slurm job), rank 0 runs the job
 * and reports it through the worker protocol (agent_lead); the lease's text reaches the other
 * ranks through MPI, and they train their shares without talking to the server (agent_follow).
 * With --train JOB.json --out DIR it trains a job document without a server, like `trainyard
 * train`, rank 0 writing DIR.
 *
 * Each rank opens its own OpenCL device: entry (local rank) of the --device list, taken in turn.
 * A rank that fails while the others wait in a collective ends them all (MPI_Abort). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "cli/cli.h"
#include "job/job.h"
#include "kernels/ocl.h"
#include "script/netns.h"
#include "script/sandbox.h"
#include "util/err.h"
#include "util/json_out.h"
#include "worker/agent.h"
#include "worker/rank_env.h"
#include "train/distrib.h"
#include "data/dscache.h"
#include "data/fetch.h"

static const char usage_text[] =
    "usage: trainyard-replica --server URL --worker ID [--lease FILE] [options]\n"
    "       trainyard-replica --train JOB.json --out DIR [options]\n"
    "\n"
    "One rank of a data-parallel job (\"distribution\": {\"replicas\": N}). Workers started\n"
    "with --replicas start it under mpirun; serve --executor slurm under srun --mpi=pmix.\n"
    "\n"
    "  --server URL         the trainyard server; the worker token is $TRAINYARD_TOKEN\n"
    "  --worker ID          the worker the job is leased to, whose lease rank 0 extends\n"
    "  --lease FILE         the lease the worker took (without it rank 0 leases ID's job,\n"
    "                       waiting up to --lease-wait seconds, default 60; exit status 3\n"
    "                       when none came)\n"
    "  --ca FILE, --pin-cert FILE\n"
    "                       as for `trainyard worker`\n"
    "  --device LIST        the devices of this machine's ranks, in turn by local rank:\n"
    "                       gpu, cpu, any (default) or indexes from `trainyard devices`\n"
    "  --rank-threads N     POCL_MAX_PTHREAD_COUNT for this rank (PoCL's CPU device)\n"
    "  --work-dir DIR       where rank 0 keeps the job's folder (default $TMPDIR)\n"
    "  --dataset-root, --dataset-allow, --dataset-ca, --dataset-cache, --max-dataset-bytes,\n"
    "  --dataset-stall-seconds, --checkpoint-seconds\n"
    "                       as for `trainyard worker` (rank 0 fetches; the others get the\n"
    "                       bytes from it)\n"
    "  --train JOB.json --out DIR\n"
    "                       no server: train the job document, rank 0 writing DIR\n"
    "\n"
    "A script job's ranks each run the script (rank 0 reporting), with the worker's script\n"
    "options:\n" CLI_SCRIPT_HELP;

#if defined(__SANITIZE_ADDRESS__)
/* Under AddressSanitizer: Open MPI loads its components with dlopen and closes them at
 * MPI_Finalize, so the fast unwinder's stacks of their allocations end in "unknown module" and
 * escape tests/lsan.supp's Open MPI lines; the slow unwinder names the library they came
 * through. Only this program pays for it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}
#endif

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    if (stop_requested < 2)
        stop_requested++;
}

typedef struct replica_args {
    agent_opts o;
    const char *worker, *lease, *train, *out, *cache_dir;
    long lease_wait;
} replica_args;

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < lo || n > hi) {
        fprintf(stderr, "trainyard-replica: %s takes a number from %ld to %ld, not '%s'\n", flag,
                lo, hi, v);
        return -1;
    }
    *out = n;
    return 0;
}

static int parse_args(int argc, char **argv, replica_args *a)
{
    static char allow[4096];
    const char *pin = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(usage_text, stdout);
            exit(0);
        }
        int script_flag = cli_script_flag("replica", argc, argv, &i, &a->o, NULL, NULL, 0);
        if (script_flag < 0)
            return -1;
        if (script_flag > 0)
            continue;
        if (!v) {
            fprintf(stderr, "trainyard-replica: unknown or incomplete option '%s'\n", f);
            return -1;
        }
        i++;
        if (!strcmp(f, "--server"))
            a->o.server = v;
        else if (!strcmp(f, "--worker"))
            a->worker = v;
        else if (!strcmp(f, "--lease"))
            a->lease = v;
        else if (!strcmp(f, "--ca"))
            a->o.ca_file = v;
        else if (!strcmp(f, "--pin-cert"))
            pin = v;
        else if (!strcmp(f, "--device"))
            a->o.device_list = v;
        else if (!strcmp(f, "--work-dir"))
            a->o.work_dir = v;
        else if (!strcmp(f, "--dataset-root"))
            a->o.dataset_root = v;
        else if (!strcmp(f, "--dataset-ca"))
            a->o.dataset_ca = v;
        else if (!strcmp(f, "--dataset-cache"))
            a->cache_dir = v;
        else if (!strcmp(f, "--train"))
            a->train = v;
        else if (!strcmp(f, "--out"))
            a->out = v;
        else if (!strcmp(f, "--dataset-allow")) {
            size_t used = strlen(allow);
            snprintf(allow + used, sizeof allow - used, "%s%s", used ? "," : "", v);
            a->o.dataset_allow = allow;
        } else if (!strcmp(f, "--rank-threads") || !strcmp(f, "--lease-wait") ||
                   !strcmp(f, "--dataset-stall-seconds") || !strcmp(f, "--checkpoint-seconds") ||
                   !strcmp(f, "--max-dataset-bytes")) {
            if (parse_long(f, v, 0, LONG_MAX, &n) < 0)
                return -1;
            if (!strcmp(f, "--rank-threads"))
                a->o.rank_threads = (int)(n < INT_MAX ? n : INT_MAX);
            else if (!strcmp(f, "--lease-wait"))
                a->lease_wait = n;
            else if (!strcmp(f, "--dataset-stall-seconds"))
                a->o.dataset_stall_s = n;
            else if (!strcmp(f, "--checkpoint-seconds"))
                a->o.checkpoint_seconds = (double)n;
            else
                a->o.max_dataset_bytes = (uint64_t)n;
        } else {
            fprintf(stderr, "trainyard-replica: unknown option '%s' (try --help)\n", f);
            return -1;
        }
    }
    if (pin) {
        a->o.ca_file = pin;
        a->o.ca_pinned = 1;
    }
    if (a->train ? !a->out : (!a->o.server || !a->worker)) {
        fputs(usage_text, stderr);
        return -1;
    }
    return 0;
}

/* The lease (rank 0 reads or takes it) to every rank: its length, then its text; length 0
 * when rank 0 has none. Returns 1 with *lease, 0 when there is none, or a negative code. */
static int share_lease(distrib *d, replica_args *a, client *c, json_t **lease, char *err)
{
    char *text = NULL;
    uint64_t len = 0;
    int rc = 0;
    if (d->group.rank == 0 && c) {
        json_t *l = NULL;
        if (a->lease) {
            json_error_t je;
            l = json_load_file(a->lease, 0, &je);
            if (!l)
                rc = err_set(err, -EINVAL, "cannot read the lease %s: %s", a->lease, je.text);
        } else {
            rc = agent_replica_lease(&a->o, c, a->worker, (int)a->lease_wait, &l, err);
            if (rc == 0)
                snprintf(err, ERR_LEN, "no job was leased to worker %s within %ld s", a->worker,
                         a->lease_wait);
        }
        text = l ? json_out_dumps(l, JSON_COMPACT) : NULL;
        json_decref(l);
        len = text ? strlen(text) : 0;
    }
    char why[ERR_LEN];
    if (d->group.share(d->group.user, &len, sizeof len, why) < 0)
        return err_set(err, -EIO, "%s", why);
    if (len == 0) {
        free(text);
        return rc < 0 ? rc : 0;
    }
    if (d->group.rank != 0 && !(text = calloc(1, (size_t)len + 1)))
        return err_set(err, -ENOMEM, "out of memory");
    if (d->group.share(d->group.user, text, (size_t)len, why) < 0) {
        free(text);
        return err_set(err, -EIO, "%s", why);
    }
    *lease = json_loadb(text, (size_t)len, 0, NULL);
    explicit_bzero(text, (size_t)len); /* it may hold dataset credentials */
    free(text);
    return *lease ? 1 : err_set(err, -EINVAL, "the lease is not JSON");
}

static void print_line(void *user, const char *line)
{
    (void)user;
    printf("%s\n", line);
    fflush(stdout);
}

/* --train: the job document of a file, no server. */
static int train_file(distrib *d, replica_args *a, ocl_ctx *ctx, char *err)
{
    json_error_t je;
    json_t *doc = json_load_file(a->train, 0, &je);
    if (!doc)
        return err_set(err, -EINVAL, "cannot read %s: %s", a->train, je.text);
    field_errors errs = {0};
    job_spec *job = NULL;
    int rc = job_from_json(doc, &job, &errs);
    json_decref(doc);
    if (rc < 0)
        return err_set(err, -EINVAL, "%s is not a valid job: %s: %s", a->train,
                       errs.count ? errs.items[0].field : "",
                       errs.count ? errs.items[0].message : "");
    char cwd[PATH_MAX];
    trainer_opts topts = {.out_dir = a->out,
                          .dataset_root =
                              a->o.dataset_root ? a->o.dataset_root : getcwd(cwd, sizeof cwd),
                          .dataset_allow = a->o.dataset_allow,
                          .dataset_ca = a->o.dataset_ca,
                          .allow_private = 1,
                          .max_dataset_bytes = a->o.max_dataset_bytes,
                          .dataset_cache = a->o.dataset_cache,
                          .s3 = a->o.s3,
                          .checkpoint_seconds = -1,
                          .stop_download = a->o.stop,
                          .group = &d->group};
    trainer_hooks hooks = {.on_log = d->group.rank == 0 ? print_line : NULL};
    trainer_result res;
    rc = trainer_run(job, ctx, NULL, &topts, &hooks, &res, err);
    job_free(job);
    return rc;
}

/* ---- a distributed script job ----------------------------------------------------------- */

typedef struct script_group {
    char **env;   /* rank_env_make's */
    pid_t holder; /* rank 0's netns holder, or 0 */
} script_group;

/* A TCP port free on this machine now (bound to port 0 and let go): its number, or 0. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof sa;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    int port = 0;
    if (s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(s, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* Where the ranks of a script job find each other, told to every rank's script (rank_env.h).
 *
 * All on this machine and sandboxed without --script-network: rank 0 makes a network namespace
 * (script/netns.h) that every rank's sandbox joins, so the scripts reach each other on
 * 127.0.0.1 and nothing else, at fixed ports from RANK_PORT_BASE. Otherwise (ranks on several
 * machines, or scripts with the machine's network) each rank takes a free port of its machine
 * and the others reach it by its host name (127.0.0.1 on one machine). Every rank takes part in
 * every collective, whatever failed before, so that none waits for ever. */
static int script_group_setup(distrib *d, replica_args *a, script_group *sg, char *err)
{
    int size = d->group.size, rank = d->group.rank, rc = 0;
    int one_machine = d->local_size == size;
    int shared = one_machine && !a->o.no_sandbox && !a->o.script_network;
    char host[RANK_HOST_MAX] = "";
    if (gethostname(host, sizeof host - 1) < 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    char *hosts = calloc((size_t)size, RANK_HOST_MAX);
    int32_t *ports = calloc((size_t)size, 2 * sizeof *ports);
    const char **addrs = calloc((size_t)size, sizeof *addrs);
    int *tf_ports = calloc((size_t)size, sizeof *tf_ports);
    if (!hosts || !ports || !addrs || !tf_ports)
        rc = err_set(err, -ENOMEM, "out of memory"); /* MPI_Abort follows: no collective waits */
    if (rc == 0)
        rc = distrib_gather(d, host, hosts, RANK_HOST_MAX, err);
    int32_t holder = 0, mine[2] = {0, 0}; /* this rank's TensorFlow port, rank 0's MASTER_PORT */
    if (rc == 0 && shared) {
        pid_t pid = 0;
        if (rank == 0)
            holder = netns_start(&pid, err) < 0 ? -1 : (int32_t)pid;
        rc = d->group.share(d->group.user, &holder, sizeof holder, err);
        if (rc == 0 && holder < 0 && rank != 0)
            rc = err_set(err, -EIO, "rank 0 could not make the ranks' network namespace");
        else if (rc == 0 && holder < 0)
            rc = -EIO; /* err says why */
        mine[0] = RANK_PORT_BASE + 1 + rank;
        mine[1] = RANK_PORT_BASE;
    } else if (rc == 0) {
        mine[0] = free_port();
        mine[1] = rank == 0 ? free_port() : 0;
    }
    if (rc == 0)
        rc = distrib_gather(d, mine, ports, sizeof mine, err);
    for (int r = 0; rc == 0 && r < size; r++) {
        addrs[r] = one_machine ? "127.0.0.1" : hosts + (size_t)r * RANK_HOST_MAX;
        tf_ports[r] = ports[2 * r];
        if (!tf_ports[r])
            rc = err_set(err, -EADDRINUSE, "rank %d found no free port on its machine", r);
    }
    if (rc == 0) {
        rank_env_in in = {.rank = rank,
                          .size = size,
                          .local_rank = d->local_rank,
                          .local_size = d->local_size,
                          .master_addr = addrs[0],
                          .master_port = ports[1],
                          .hosts = addrs,
                          .ports = tf_ports};
        rc = rank_env_make(&in, &sg->env) < 0 ? err_set(err, -ENOMEM, "out of memory") : 0;
    }
    if (holder > 0 && rank == 0)
        sg->holder = holder;
    if (rc == 0) {
        a->o.script_rank = rank;
        a->o.script_ranks = size;
        a->o.script_rank_env = (const char *const *)sg->env;
        a->o.script_netns = holder > 0 ? holder : 0;
        fprintf(stderr, "replica %d of %d: %s\n", rank, size,
                shared ? "the ranks' scripts share a network namespace of their own"
                       : "the ranks' scripts use the machines' network");
    }
    free(hosts);
    free(ports);
    free(addrs);
    free(tf_ports);
    return rc;
}

/* The lease's job, parsed: NULL (with err) when it is not valid. */
static job_spec *lease_job(const json_t *lease, char *err)
{
    field_errors errs = {0};
    job_spec *job = NULL;
    if (job_from_json(json_object_get(lease, "document"), &job, &errs) < 0)
        err_set(err, -EINVAL, "the lease holds an invalid job: %s: %s",
                errs.count ? errs.items[0].field : "", errs.count ? errs.items[0].message : "");
    return job;
}

int main(int argc, char **argv)
{
    /* a sandboxed script's launcher is this program (script/sandbox.h) */
    if (argc > 1 && !strcmp(argv[1], "__script-exec"))
        return sandbox_exec_main(argc - 1, argv + 1);
    replica_args a = {.o = {.checkpoint_seconds = 10, .stop = &stop_requested}, .lease_wait = 60};
    a.o.token = getenv("TRAINYARD_TOKEN");
    if (parse_args(argc, argv, &a) < 0)
        return 2;
    char rank_threads[16];
    if (a.o.rank_threads > 0) { /* before OpenCL reads it */
        snprintf(rank_threads, sizeof rank_threads, "%d", a.o.rank_threads);
        setenv("POCL_MAX_PTHREAD_COUNT", rank_threads, 1);
    }
    char err[ERR_LEN] = "";
    distrib d;
    if (distrib_init(&argc, &argv, &d, err) < 0) {
        fprintf(stderr, "trainyard-replica: %s\n", err);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    char work[PATH_MAX] = "";
    if (!a.o.work_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(work, sizeof work, "%s/trainyard-replica-%d", tmp && *tmp ? tmp : "/tmp",
                 (int)getpid());
        mkdir(work, 0700);
        a.o.work_dir = work;
    }
    fetch_s3 s3; /* s3:// datasets: the AWS_* environment, as the worker that started it has */
    fetch_s3_from_env(&s3, NULL, NULL);
    a.o.s3 = &s3;
    ocl_device dev;
    ocl_ctx *ctx = NULL;
    client *c = NULL;
    json_t *lease = NULL;
    script_group sg = {0};
    int led = 0;
    int rc = fetch_global_init(err);
    if (rc == 0 && a.cache_dir && d.group.rank == 0)
        rc = dscache_open(a.cache_dir, 0, &a.o.dataset_cache, err);
    if (rc == 0)
        rc = agent_pick_rank_device(a.o.device_list, d.local_rank, &dev, err);
    if (rc == 0)
        rc = ocl_ctx_new(&dev, NULL, &ctx, err);
    a.o.device_info = &dev;
    if (rc == 0)
        fprintf(stderr, "replica %d of %d (local %d): %s\n", d.group.rank, d.group.size,
                d.local_rank, dev.name);
    if (rc == 0 && a.train) {
        rc = train_file(&d, &a, ctx, err);
    } else if (rc == 0) {
        if (d.group.rank == 0) {
            rc = client_new(a.o.server, a.o.token, &c, err);
            if (rc == 0)
                client_set_ca(c, a.o.ca_file, a.o.ca_pinned);
        }
        /* Every rank takes part in the sharing, whatever rank 0's state (without a client it
         * shares "no lease"). */
        char why[ERR_LEN] = "";
        int shared = share_lease(&d, &a, rc == 0 ? c : NULL, &lease, why);
        if (rc == 0 && shared <= 0) {
            rc = shared == 0 ? 3 : shared;
            snprintf(err, sizeof err, "%s", why[0] ? why : "rank 0 has no lease to run");
        }
        job_spec *job = rc == 0 ? lease_job(lease, err) : NULL;
        if (rc == 0 && !job)
            rc = -EINVAL;
        int script = job && job_is_script(job);
        /* every rank of a script job talks to the server (heartbeats with its log lines) */
        if (script && !c) {
            rc = client_new(a.o.server, a.o.token, &c, err);
            if (rc == 0)
                client_set_ca(c, a.o.ca_file, a.o.ca_pinned);
        }
        if (rc == 0 && script)
            rc = script_group_setup(&d, &a, &sg, err);
        if (rc == 0 && d.group.rank == 0) {
            led = 1; /* from here rank 0 reports the job, whatever happens */
            rc = agent_lead(&a.o, c, a.worker, ctx, NULL, lease, &d.group);
        } else if (rc == 0 && script)
            rc = agent_script_follow(&a.o, c, a.worker, lease, job, err);
        if (rc == 0 && script && d.group.rank != 0 && d.group.size > 1) /* rank 0 waits for us */
            (void)d.group.meet(d.group.user, 24 * 3600, a.o.stop, err);
        else if (rc == 0)
            rc = agent_follow(&a.o, ctx, NULL, lease, &d.group, err);
        job_free(job);
    }
    if (rc < 0 || rc == 3)
        fprintf(stderr, "trainyard-replica %d: %s\n", d.group.rank, err);
    if (rc < 0 && !led && lease && !stop_requested && d.group.size > 1) {
        char why[ERR_LEN + 32];
        snprintf(why, sizeof why, "rank %d: %s", d.group.rank, err);
        agent_report_lost(&a.o, c, a.worker, lease, why);
    }
    json_decref(lease);
    netns_stop(sg.holder);
    rank_env_free(sg.env);
    client_free(c);
    ocl_ctx_free(ctx);
    dscache_free(a.o.dataset_cache);
    if (work[0])
        rmdir(work);
    if (rc < 0 && d.group.size > 1)
        distrib_abort(&d, 1); /* the other ranks may be waiting for this one */
    if (d.unmet)
        distrib_abort(&d, 0); /* ranks that never came to the meeting: ended, not waited for */
    distrib_end(&d);
    return rc == 3 ? 3 : rc < 0 ? 1 : 0;
}
