/* cmd_serve: the flags of `trainyard serve`. It parses and checks them (a wrong one is a usage
 * error, exit 2, before anything starts), reads the TLS certificate and key, and hands a
 * serve_opts to serve_run (serve/serve.c), which runs the service. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "serve/serve.h"
#include "util/err.h"
#include "script/run.h"
#include "util/err.h"
#include "worker/agent.h"
#include "data/dscache.h"

static const char usage_text[] =
    "usage: trainyard serve [options]\n"
    "\n"
    "Runs the trainyard service: the HTTP API, the job queue in SQLite, and local workers\n"
    "that train on this machine's OpenCL devices.\n"
    "\n"
    "options:\n"
    "  --bind ADDR          address to listen on (default 127.0.0.1; 0.0.0.0 for every one)\n"
    "  --port N             port (default 8080; 0 picks a free one and prints it)\n"
    "  --data-dir DIR       SQLite database, artifacts and uploads (default ./trainyard-data)\n"
    "  --workers N          local workers to run (default: one per device of `trainyard\n"
    "                       devices`; 0: none)\n"
    "  --replicas N         local workers take data-parallel jobs of up to N replicas, their\n"
    "                       ranks started with Open MPI's mpirun (default 1: none)\n"
    "  --rank-threads N     each rank's PoCL device runs N threads (on a CPU: cores/replicas)\n"
    "  --tls-cert FILE      serve HTTPS with this PEM certificate (a chain: the server's\n"
    "                       first); needs --tls-key. Local workers trust exactly it\n"
    "  --tls-key FILE       the certificate's PEM private key\n"
    "  --dataset-root DIR   where file:// dataset URLs may point (default: nowhere)\n"
    "  --dataset-allow PATTERNS\n"
    "                       hosts datasets may come from: a name (data.example.com), a\n"
    "                       wildcard (*.example.com: subdomains only), an address (10.1.2.3,\n"
    "                       ::1) or a CIDR block (10.0.0.0/8); comma-separated, repeatable.\n"
    "                       Default: any host, but private, loopback and link-local\n"
    "                       addresses are refused unless a pattern allows them\n"
    "  --dataset-ca FILE    PEM bundle that verifies https dataset hosts instead of the\n"
    "                       system store (give both in one file to trust both)\n"
    "  --lease-seconds N    a job returns to the queue this long after its worker's last\n"
    "                       heartbeat (default 30)\n"
    "  --retry-backoff-seconds N\n"
    "                       a job whose attempt was lost waits N s before it is leased\n"
    "                       again, doubling with each lost attempt up to 5 minutes\n"
    "                       (default 5; 0: none)\n"
    "  --checkpoint-seconds N\n"
    "                       local workers checkpoint a job after an epoch at most this often;\n"
    "                       a requeued job resumes from its last one (default 10; 0: every\n"
    "                       epoch)\n"
    "  --dataset-stall-seconds N\n"
    "                       fail a dataset download that stalls this long (default 30)\n"
    "  --max-dataset-bytes N\n"
    "                       local workers refuse a dataset larger than this (K, M, G\n"
    "                       suffixes; default 2G)\n"
    "  --dataset-cache DIR  where local workers keep fetched datasets, so that a job on the\n"
    "                       same dataset fetches nothing (default $TRAINYARD_DATASET_CACHE,\n"
    "                       else $XDG_CACHE_HOME/trainyard/datasets, else\n"
    "                       ~/.cache/trainyard/datasets; none: no cache)\n"
    "  --dataset-cache-bytes N\n"
    "                       the cache's cap: the least recently used datasets go beyond it\n"
    "                       (K, M, G, T suffixes; default 10G)\n" CLI_S3_HELP
    "script jobs (passed on to the local workers; see `trainyard worker --help`):\n" CLI_SCRIPT_HELP
    "  --max-artifact-bytes N\n"
    "                       refuse an uploaded artifact or checkpoint larger than this\n"
    "                       (default and most 4G); its job fails saying so\n"
    "  --max-code-bytes N   refuse code uploads (POST /code, a script job's .tar.gz) larger\n"
    "                       than this with 413 (default 64M, most 4G)\n"
    "  --max-queued N       queued jobs one token may have at once; more submits get 429\n"
    "                       (default 10000; 0: no limit)\n"
    "  --threads N          HTTP threads (default 4)\n"
    "  --max-connections-per-client N\n"
    "                       open connections one client address may hold; more are refused\n"
    "                       (default 256; 0: no limit, e.g. behind a reverse proxy, where\n"
    "                       every client has the proxy's address)\n"
    "predictions (trained models answer TensorFlow Serving's REST and gRPC APIs):\n"
    "  --predict-device D   the OpenCL device serve's own inference runs on: any (a GPU when\n"
    "                       there is one), gpu, cpu, an index from `trainyard devices`, or\n"
    "                       none to turn predictions off (default any)\n"
    "  --predict-memory N   device memory the loaded models may take together; the least\n"
    "                       recently used one is unloaded past it (K, M, G; default 1G)\n"
    "  --predict-max-batch N\n"
    "                       rows one forward pass takes from queued requests (default 32;\n"
    "                       1: no batching)\n"
    "  --predict-window-us N\n"
    "                       how long a request arriving at an idle device waits for others\n"
    "                       to batch with (default 250; 0: none)\n"
    "  --grpc-port N        also serve TensorFlow Serving's gRPC PredictionService (Predict,\n"
    "                       GetModelMetadata) on this port (0 picks a free one and prints it),\n"
    "                       with TLS when --tls-cert is given; default: no gRPC\n"
    "Slurm (see docs/SLURM.md):\n"
    "  --executor E         local: queued jobs wait for workers to lease them (default);\n"
    "                       slurm: each queued built-in job is also submitted with sbatch,\n"
    "                       its ranks started by srun --mpi=pmix, and no local workers start\n"
    "                       unless --workers is given\n"
    "  --slurm-partition P  the partition sbatch submits to (default: Slurm's default)\n"
    "  --advertise-url URL  the address the Slurm jobs' ranks connect to (default: serve's\n"
    "                       own; give one the compute nodes reach, with --bind 0.0.0.0)\n"
    "  --replica-exe PATH   trainyard-replica as the compute nodes see it (default: the\n"
    "                       file of that name beside this trainyard executable)\n"
    "webhooks and retention (see docs/OPERATIONS.md):\n"
    "  --retain-days N      remove finished jobs older than N days (by finished_at) with\n"
    "                       their artifacts and history, except jobs marked keep (default 0:\n"
    "                       keep every job)\n"
    "  --notify-backoff-ms N\n"
    "                       a failed webhook is retried after N ms, doubling each time\n"
    "                       (default 1000)\n"
    "  --notify-attempts N  attempts per webhook before it is given up (default 8)\n"
    "  --shutdown-seconds N on SIGTERM/SIGINT, exit within this long: local workers\n"
    "                       checkpoint their jobs and hand them back to the queue meanwhile\n"
    "                       (default 10)\n"
    "\n"
    "Every API call but GET /healthz needs a token (Authorization: Bearer TOKEN). On first\n"
    "start serve makes an admin token and writes it to DATA-DIR/admin.token (mode 0600);\n"
    "make more with `trainyard token create`. Local workers get a worker token of their own.\n";
static int parse_count(const char *flag, const char *v, long max, long *out)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < 0 || n > max) {
        fprintf(stderr, "trainyard serve: %s takes a number from 0 to %ld, not '%s'\n", flag, max,
                v);
        return -EINVAL;
    }
    *out = n;
    return 0;
}
int cmd_serve(int argc, char **argv)
{
    const char *bind = "127.0.0.1", *data_dir = "./trainyard-data", *root = NULL;
    const char *tls_cert = NULL, *tls_key = NULL, *dataset_ca = NULL;
    long port = 8080, workers = -1, lease = 30, stall = 0, threads = 4, every = 10, bound = 10;
    long max_queued = 10000, per_client = 256, retry_backoff = -1;
    long retain_days = 0, notify_backoff = 1000, notify_attempts = 8;
    long max_batch = 32, window_us = 250, grpc_port = -1;
    uint64_t predict_memory = 1ull << 30;
    const char *predict_device = "any";
    const char *executor = "local", *partition = NULL, *advertise = NULL, *replica = NULL;
    uint64_t max_dataset = 0, max_artifact = 4ull << 30, max_code = 64ull << 20;
    const char *max_dataset_text = NULL, *cache_dir = NULL, *cache_bytes_text = NULL;
    const char *s3_endpoint = NULL, *s3_region = NULL;
    uint64_t cache_bytes = 0;
    static char allow[CLI_ALLOW_LEN];
    static const char *script_words[32], *script_only[32];
    size_t n_script_words = 0, n_script_only = 0;
    agent_opts script = {0}; /* the script flags, checked here, passed on to local workers */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        size_t had = n_script_words;
        rc = cli_script_flag("serve", argc, argv, &i, &script, script_words, &n_script_words,
                             sizeof script_words / sizeof script_words[0]);
        if (rc < 0)
            return 2;
        while (had < n_script_words) /* the Slurm ranks take these alone (not --replicas) */
            script_only[n_script_only++] = script_words[had++];
        if (rc)
            continue;
        if (!v) {
            fprintf(stderr, "trainyard serve: '%s' needs a value (try --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--replicas") || !strcmp(a, "--rank-threads")) {
            long n = 0; /* checked here, passed on to the local workers as given */
            if (parse_count(a, v, JOB_MAX_REPLICAS, &n) < 0 || n < 1 ||
                n_script_words + 3 > sizeof script_words / sizeof script_words[0]) {
                fprintf(stderr, "trainyard serve: %s takes a count from 1 to %d\n", a,
                        JOB_MAX_REPLICAS);
                return 2;
            }
            script_words[n_script_words++] = a;
            script_words[n_script_words++] = v;
            continue;
        }
        if (!strcmp(a, "--bind"))
            bind = v;
        else if (!strcmp(a, "--data-dir"))
            data_dir = v;
        else if (!strcmp(a, "--dataset-root"))
            root = v;
        else if (!strcmp(a, "--tls-cert"))
            tls_cert = v;
        else if (!strcmp(a, "--tls-key"))
            tls_key = v;
        else if (!strcmp(a, "--dataset-ca"))
            dataset_ca = v;
        else if (!strcmp(a, "--dataset-allow"))
            rc = cli_allow_add(allow, sizeof allow, v, "serve");
        else if (!strcmp(a, "--port"))
            rc = parse_count(a, v, 65535, &port);
        else if (!strcmp(a, "--workers"))
            rc = parse_count(a, v, SERVE_MAX_WORKERS, &workers);
        else if (!strcmp(a, "--lease-seconds"))
            rc = parse_count(a, v, 86400, &lease);
        else if (!strcmp(a, "--retry-backoff-seconds"))
            rc = parse_count(a, v, 86400, &retry_backoff);
        else if (!strcmp(a, "--checkpoint-seconds"))
            rc = parse_count(a, v, 86400, &every);
        else if (!strcmp(a, "--dataset-stall-seconds"))
            rc = parse_count(a, v, 86400, &stall);
        else if (!strcmp(a, "--max-dataset-bytes")) {
            rc = cli_bytes("serve", a, v, &max_dataset);
            max_dataset_text = v;
        } else if (!strcmp(a, "--dataset-cache")) {
            cache_dir = v;
        } else if (!strcmp(a, "--dataset-cache-bytes")) {
            rc = cli_bytes("serve", a, v, &cache_bytes);
            cache_bytes_text = v;
        } else if (!strcmp(a, "--s3-endpoint")) {
            s3_endpoint = v;
        } else if (!strcmp(a, "--s3-region")) {
            s3_region = v;
        } else if (!strcmp(a, "--max-artifact-bytes"))
            rc = cli_bytes("serve", a, v, &max_artifact);
        else if (!strcmp(a, "--max-code-bytes"))
            rc = cli_bytes("serve", a, v, &max_code);
        else if (!strcmp(a, "--max-queued"))
            rc = parse_count(a, v, 100000000, &max_queued);
        else if (!strcmp(a, "--max-connections-per-client"))
            rc = parse_count(a, v, 100000, &per_client);
        else if (!strcmp(a, "--threads"))
            rc = parse_count(a, v, 256, &threads);
        else if (!strcmp(a, "--predict-device"))
            predict_device = v;
        else if (!strcmp(a, "--predict-memory"))
            rc = cli_bytes("serve", a, v, &predict_memory);
        else if (!strcmp(a, "--predict-max-batch"))
            rc = parse_count(a, v, 1024, &max_batch);
        else if (!strcmp(a, "--predict-window-us"))
            rc = parse_count(a, v, 100000, &window_us);
        else if (!strcmp(a, "--grpc-port"))
            rc = parse_count(a, v, 65535, &grpc_port);
        else if (!strcmp(a, "--executor"))
            executor = v;
        else if (!strcmp(a, "--slurm-partition"))
            partition = v;
        else if (!strcmp(a, "--advertise-url"))
            advertise = v;
        else if (!strcmp(a, "--replica-exe"))
            replica = v;
        else if (!strcmp(a, "--retain-days"))
            rc = parse_count(a, v, 36500, &retain_days);
        else if (!strcmp(a, "--notify-backoff-ms"))
            rc = parse_count(a, v, 3600000, &notify_backoff);
        else if (!strcmp(a, "--notify-attempts"))
            rc = parse_count(a, v, 100, &notify_attempts);
        else if (!strcmp(a, "--shutdown-seconds"))
            rc = parse_count(a, v, 3600, &bound);
        else {
            fprintf(stderr, "trainyard serve: unknown option '%s' (try --help)\n", a);
            return 2;
        }
        if (rc < 0)
            return 2;
    }
    if (max_artifact > (4ull << 30) || max_code > (4ull << 30)) {
        fprintf(stderr, "trainyard serve: --max-artifact-bytes and --max-code-bytes are at most "
                        "4G\n");
        return 2;
    }
    if (lease < 1 || threads < 1 || max_batch < 1 || predict_memory == 0) {
        fprintf(stderr, "trainyard serve: --lease-seconds, --threads, --predict-max-batch and "
                        "--predict-memory must be at least 1\n");
        return 2;
    }
    if (notify_attempts < 1 || notify_backoff < 1) {
        fprintf(stderr, "trainyard serve: --notify-attempts and --notify-backoff-ms must be at "
                        "least 1\n");
        return 2;
    }
    if (strcmp(executor, "local") != 0 && strcmp(executor, "slurm") != 0) {
        fprintf(stderr, "trainyard serve: --executor is local or slurm, not '%s'\n", executor);
        return 2;
    }
    if (advertise && strncmp(advertise, "http://", 7) != 0 && strncmp(advertise, "https://", 8)) {
        fprintf(stderr,
                "trainyard serve: --advertise-url takes an http:// or https:// URL, not "
                "'%s'\n",
                advertise);
        return 2;
    }
    if (!tls_cert != !tls_key) {
        fprintf(stderr, "trainyard serve: HTTPS needs both --tls-cert FILE and --tls-key FILE "
                        "(neither serves plain HTTP)\n");
        return 2;
    }
    if (dataset_ca && cli_pem_check("serve", "--dataset-ca", dataset_ca) < 0)
        return 2;
    if (cli_s3_export(s3_endpoint, s3_region) < 0) /* the local workers inherit them */
        return 2;
    char err[ERR_LEN];
    if (script.allow_scripts && !script.no_sandbox && !script_sandbox_available(err)) {
        fprintf(stderr,
                "trainyard serve: --allow-scripts needs a bubblewrap sandbox, and %s (install "
                "Debian's bubblewrap; --no-sandbox runs scripts without one)\n",
                err);
        return 1;
    }
    dscache *cache = NULL; /* opened only to check the folder now rather than in each worker */
    if (cache_dir && cli_dscache_open("serve", cache_dir, cache_bytes, &cache) < 0)
        return 2;
    dscache_free(cache);
    char *cert_pem = NULL, *key_pem = NULL;
    if (tls_cert && (cli_pem_read("serve", "--tls-cert", tls_cert, "CERTIFICATE", &cert_pem) < 0 ||
                     cli_pem_read("serve", "--tls-key", tls_key, "PRIVATE KEY", &key_pem) < 0)) {
        free(cert_pem);
        return 2;
    }

    serve_opts so = {.bind = bind,
                     .port = (int)port,
                     .data_dir = data_dir,
                     .workers = workers,
                     .tls_cert = tls_cert,
                     .tls_key = tls_key,
                     .cert_pem = cert_pem,
                     .key_pem = key_pem,
                     .dataset_root = root,
                     .dataset_allow = allow[0] ? allow : NULL,
                     .dataset_ca = dataset_ca,
                     .max_dataset_bytes = max_dataset_text,
                     .dataset_cache = cache_dir,
                     .dataset_cache_bytes = cache_bytes_text,
                     .worker_args = n_script_words ? script_words : NULL,
                     .slurm_scripts = script.allow_scripts,
                     .slurm_script_args = n_script_only ? script_only : NULL,
                     .lease_seconds = lease,
                     .checkpoint_seconds = every,
                     .dataset_stall_seconds = stall,
                     .shutdown_seconds = bound,
                     .max_artifact_bytes = max_artifact,
                     .max_code_bytes = max_code,
                     .max_queued = max_queued,
                     .retry_backoff_seconds = retry_backoff,
                     .threads = threads,
                     .max_per_client = per_client,
                     .predict_device = strcmp(predict_device, "none") ? predict_device : NULL,
                     .predict_memory = predict_memory,
                     .predict_max_batch = max_batch,
                     .predict_window_us = window_us,
                     .grpc_port = grpc_port,
                     .executor = strcmp(executor, "slurm") == 0 ? SERVE_EXECUTOR_SLURM
                                                                : SERVE_EXECUTOR_LOCAL,
                     .slurm_partition = partition,
                     .advertise_url = advertise,
                     .replica_exe = replica,
                     .retain_days = retain_days,
                     .notify_backoff_ms = notify_backoff,
                     .notify_attempts = notify_attempts};
    return serve_run(&so); /* it takes cert_pem and key_pem */
}
