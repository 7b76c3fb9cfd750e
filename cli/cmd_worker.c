/* cmd_worker: `trainyard worker --server URL` runs a worker process: it registers its OpenCL
 * device with the server, leases jobs, trains them and reports back. `trainyard serve` starts
 * one per local device; on other GPU machines people start it by hand.
 *
 * SIGTERM/SIGINT: the current job's epoch is finished and checkpointed and the job handed back
 * to the queue (agent.c), then the worker exits; a second signal cuts the epoch short.
 *
 * --parent PID (what serve passes its local workers) ties the worker's life to that process:
 * when it dies, even by kill -9, the kernel sends the worker SIGKILL (PR_SET_PDEATHSIG), so no
 * unsupervised worker goes on holding a device that the restarted serve gives to a new local
 * worker. The job is not lost: its lease lapses in the database and the restarted serve
 * requeues it to resume from its last checkpoint. A remote worker (no --parent) outlives its
 * server instead and re-attaches when it is back. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli/cli.h"
#include "util/err.h"
#include "worker/agent.h"
#include "script/run.h"
#include "data/dscache.h"

static const char usage_text[] =
    "usage: trainyard worker --server URL [options]\n"
    "\n"
    "Runs a worker: registers this machine's OpenCL device with the server, then leases\n"
    "training jobs, trains them and uploads their artifacts, until stopped (SIGTERM/SIGINT).\n"
    "An NVIDIA GPU that only NVML or nvidia-smi shows (no OpenCL driver) runs script jobs\n"
    "only, with --allow-scripts (see `trainyard devices`).\n"
    "\n"
    "options:\n"
    "  --server URL         the trainyard server (default $TRAINYARD_URL)\n"
    "  --token TOKEN        worker token (default $TRAINYARD_TOKEN)\n"
    "  --ca FILE            PEM bundle of the CA(s) that verify an https server, for a\n"
    "                       private CA (default $TRAINYARD_CA; else the system store)\n"
    "  --pin-cert FILE      trust exactly this certificate, the server's own, whatever host\n"
    "                       name it names (how serve starts its local workers)\n"
    "  --device D           gpu, cpu, any (default), or an index from `trainyard devices`;\n"
    "                       a comma list (0,1) gives a data-parallel job's ranks one each\n"
    "                       in turn (the worker itself uses the first)\n"
    "  --name NAME          how the worker is listed (default <host>-<pid>)\n"
    "  --work-dir DIR       where job folders are made while a job runs (default $TMPDIR)\n"
    "  --dataset-root DIR   where file:// dataset URLs may point (default: nowhere)\n"
    "  --dataset-allow PATTERNS\n"
    "                       hosts datasets may come from: a name (data.example.com), a\n"
    "                       wildcard (*.example.com: subdomains only), an address (10.1.2.3,\n"
    "                       ::1) or a CIDR block (10.0.0.0/8); comma-separated, repeatable.\n"
    "                       Default: any host, but private, loopback and link-local\n"
    "                       addresses are refused unless a pattern allows them\n"
    "  --dataset-ca FILE    PEM bundle that verifies https dataset hosts instead of the\n"
    "                       system store (give both in one file to trust both)\n"
    "  --checkpoint-seconds S\n"
    "                       least time between two epoch checkpoints, which the server keeps\n"
    "                       so that a job whose worker died resumes from the last one\n"
    "                       (default 10; 0: after every epoch)\n"
    "  --dataset-stall-seconds S\n"
    "                       fail a dataset download that stalls this long (default 30)\n"
    "  --max-dataset-bytes N\n"
    "                       refuse a dataset larger than N bytes (K, M, G suffixes; default\n"
    "                       2G)\n" CLI_DSCACHE_HELP CLI_S3_HELP CLI_SCRIPT_HELP
    "  --replicas N         take data-parallel jobs of up to N replicas (script jobs too, with\n"
    "                       --allow-scripts) and start their ranks with Open MPI's mpirun and\n"
    "                       trainyard-replica (default 1: none)\n"
    "  --rank-threads N     each rank's PoCL device runs N threads (POCL_MAX_PTHREAD_COUNT);\n"
    "                       on a CPU, replicas x N should not exceed the cores (default: PoCL's)\n"
    "  --mpirun PATH        Open MPI's launcher (default mpirun on PATH)\n"
    "  --max-jobs N         exit after N jobs (default: never)\n"
    "  --parent PID         exit (SIGKILL) when process PID ends; serve passes its own pid to\n"
    "                       its local workers. Without it the worker outlives its server and\n"
    "                       goes on with its job when the server is back\n"
    "\n"
    "On SIGTERM/SIGINT the worker finishes the current epoch, uploads its checkpoint and\n"
    "hands the job back to the queue, then exits; a second signal stops it at the next step\n"
    "(the epochs after the last checkpoint are trained again by the next attempt).\n";

static volatile sig_atomic_t stop_requested;

/* The first signal stops after the current epoch, a second one at the next step (agent.h). */
static void on_signal(int sig)
{
    (void)sig;
    if (stop_requested < 2)
        stop_requested++;
}

/* Dies with process parent (see the top). 0, or -ESRCH when it is gone already. */
static int follow_parent(pid_t parent)
{
#ifdef __linux__
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        return -errno;
#endif
    /* The parent may have died before the prctl: then this process was reparented. */
    return getppid() == parent ? 0 : -ESRCH;
}

int cmd_worker(int argc, char **argv)
{
    agent_opts o = {.server = getenv("TRAINYARD_URL"),
                    .token = getenv("TRAINYARD_TOKEN"),
                    .ca_file = getenv("TRAINYARD_CA"),
                    .device = "any",
                    .checkpoint_seconds = 10,
                    .stop = &stop_requested};
    static char allow[CLI_ALLOW_LEN];
    const char *pin = NULL, *cache_dir = NULL, *s3_endpoint = NULL, *s3_region = NULL;
    char err[ERR_LEN] = "";
    uint64_t cache_bytes = 0;
    /* the first ones fill slots[] with a string; the last two are counts */
    static const char *const flags[] = {"--server",
                                        "--token",
                                        "--device",
                                        "--name",
                                        "--work-dir",
                                        "--dataset-root",
                                        "--ca",
                                        "--dataset-ca",
                                        "--pin-cert",
                                        "--s3-endpoint",
                                        "--s3-region",
                                        "--max-jobs",
                                        "--dataset-stall-seconds"};
    const char **slots[] = {&o.server,   &o.token,        &o.device,  &o.name,
                            &o.work_dir, &o.dataset_root, &o.ca_file, &o.dataset_ca,
                            &pin,        &s3_endpoint,    &s3_region};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        int taken = cli_script_flag("worker", argc, argv, &i, &o, NULL, NULL, 0);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        if (!strcmp(argv[i], "--dataset-allow") && i + 1 < argc) {
            if (cli_allow_add(allow, sizeof allow, argv[++i], "worker") < 0)
                return 2;
            o.dataset_allow = allow;
            continue;
        }
        if (!strcmp(argv[i], "--max-dataset-bytes") && i + 1 < argc) {
            if (cli_bytes("worker", argv[i], argv[i + 1], &o.max_dataset_bytes) < 0)
                return 2;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--dataset-cache") && i + 1 < argc) {
            cache_dir = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--dataset-cache-bytes") && i + 1 < argc) {
            if (cli_bytes("worker", argv[i], argv[i + 1], &cache_bytes) < 0)
                return 2;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--parent") && i + 1 < argc) {
            char *end = NULL;
            long pid = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || pid < 1 || pid > INT32_MAX) {
                fprintf(stderr, "trainyard worker: --parent takes a process id, not '%s'\n",
                        argv[i]);
                return 2;
            }
            if (follow_parent((pid_t)pid) < 0) {
                fprintf(stderr, "trainyard worker: process %ld is gone: not starting\n", pid);
                return 1;
            }
            continue;
        }
        if ((!strcmp(argv[i], "--replicas") || !strcmp(argv[i], "--rank-threads")) &&
            i + 1 < argc) {
            char *end = NULL;
            long n = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || n < 1 || n > JOB_MAX_REPLICAS) {
                fprintf(stderr, "trainyard worker: %s takes a count from 1 to %d, not '%s'\n",
                        argv[i - 1], JOB_MAX_REPLICAS, argv[i]);
                return 2;
            }
            *(!strcmp(argv[i - 1], "--replicas") ? &o.replicas : &o.rank_threads) = (int)n;
            continue;
        }
        if (!strcmp(argv[i], "--mpirun") && i + 1 < argc) {
            o.mpirun = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--checkpoint-seconds") && i + 1 < argc) {
            char *end = NULL;
            double v = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(v >= 0 && v <= 1e6)) {
                fprintf(stderr,
                        "trainyard worker: --checkpoint-seconds takes seconds >= 0, not "
                        "'%s'\n",
                        argv[i]);
                return 2;
            }
            o.checkpoint_seconds = v;
            continue;
        }
        size_t f = 0;
        while (f < sizeof flags / sizeof flags[0] && strcmp(argv[i], flags[f]))
            f++;
        if (f == sizeof flags / sizeof flags[0] || i + 1 >= argc) {
            fprintf(stderr, "trainyard worker: unknown or incomplete option '%s' (try --help)\n",
                    argv[i]);
            return 2;
        }
        if (f < sizeof slots / sizeof slots[0]) {
            *slots[f] = argv[++i];
        } else {
            char *end = NULL;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 0 || n > 1000000) {
                fprintf(stderr, "trainyard worker: %s takes a count, not '%s'\n", flags[f],
                        argv[i]);
                return 2;
            }
            if (!strcmp(flags[f], "--max-jobs"))
                o.max_jobs = (int)n;
            else
                o.dataset_stall_s = n;
        }
    }
    if (!o.server || !*o.server) {
        fprintf(stderr, "trainyard worker: --server URL (or TRAINYARD_URL) is required\n");
        return 2;
    }
    o.device_list = o.device;
    if (pin) {
        o.ca_file = pin;
        o.ca_pinned = 1;
    }
    if (o.ca_file && *o.ca_file == '\0')
        o.ca_file = NULL; /* TRAINYARD_CA= : the system store */
    if ((o.ca_file && cli_pem_check("worker", pin ? "--pin-cert" : "--ca", o.ca_file) < 0) ||
        (o.dataset_ca && cli_pem_check("worker", "--dataset-ca", o.dataset_ca) < 0))
        return 2;
    if (o.allow_scripts && !o.no_sandbox && !script_sandbox_available(err)) {
        fprintf(stderr,
                "trainyard worker: --allow-scripts needs a bubblewrap sandbox, and %s (install "
                "Debian's bubblewrap; --no-sandbox runs scripts without one)\n",
                err);
        return 1;
    }
    if (cli_dscache_open("worker", cache_dir, cache_bytes, &o.dataset_cache) < 0)
        return 2;
    fetch_s3 s3;
    if (cli_s3_opts("worker", s3_endpoint, s3_region, &s3) < 0) {
        dscache_free(o.dataset_cache);
        return 2;
    }
    o.s3 = &s3;
    /* A data-parallel job's rank 0 fetches too: it reads the S3 flags from its environment. */
    if (o.replicas > 1 && cli_s3_export(s3_endpoint, s3_region) < 0) {
        dscache_free(o.dataset_cache);
        return 2;
    }

    char work[4096];
    if (!o.work_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(work, sizeof work, "%s/trainyard-worker-%d", tmp && *tmp ? tmp : "/tmp",
                 (int)getpid());
        o.work_dir = work;
    }
    if (mkdir(o.work_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "trainyard worker: cannot create %s: %s\n", o.work_dir, strerror(errno));
        dscache_free(o.dataset_cache);
        return 1;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = agent_run(&o, err);
    if (o.work_dir == work)
        rmdir(work);
    dscache_free(o.dataset_cache);
    if (rc < 0) {
        fprintf(stderr, "trainyard worker: %s\n", err);
        return 1;
    }
    return 0;
}
