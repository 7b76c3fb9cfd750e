/* cmd_serve: `trainyard serve` — the API, the scheduler and SQLite in one process, plus one
 * local worker process per OpenCL device, supervised and restarted when one dies.
 *
 * The main thread only sets things up, runs the scheduler's housekeeping once a second (lapsed
 * leases, runtime limits, workers gone quiet) and waits for SIGTERM/SIGINT; requests are served
 * by libmicrohttpd's thread pool.
 *
 * Stopping (SIGTERM/SIGINT), bounded by --shutdown-seconds: submits and leases get 503; the
 * local workers get SIGTERM, and each finishes its epoch, uploads its checkpoint and hands the
 * job back (POST .../release), so it is queued, not lost, and resumes from that checkpoint under
 * the next serve; the HTTP server keeps answering them meanwhile. A worker still busy 3 s before
 * the bound gets a second SIGTERM (stop at the next step, hand back the last checkpoint); one
 * busy 1 s before it is killed (its lease then lapses as after a crash). Then the server
 * closes and serve exits 0. Remote workers are told nothing: they keep training and re-attach
 * when a serve is back on the same address (worker/agent.c).
 *
 * kill -9: nothing to do here by design. Every acknowledged change is committed (WAL,
 * synchronous=FULL); local workers die with serve (--parent); remote ones re-attach; the
 * restarted serve's sweeper requeues the jobs whose leases lapsed meanwhile.
 *
 * One serve per data directory: DATA-DIR/serve.lock is locked before anything there changes
 * (serve_lock). A local worker process that dies while serve runs is reported by the supervisor
 * and its job requeued at once (serve_worker_exited), not after its lease.
 *
 * SIGXFSZ is ignored so that a file-size limit (ulimit -f) makes write() fail with EFBIG, which
 * the upload path answers with a 507, instead of killing the server. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/app.h"
#include "cli/cli.h"
#include "db/tokens.h"
#include "kernels/ocl.h"
#include "scheduler/supervisor.h"
#include "util/err.h"
#include "util/lockfile.h"
#include "util/timeutil.h"

#define SERVE_LOCK_FILE "serve.lock"

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
    "  --workers N          local workers to run (default: one per OpenCL device; 0: none)\n"
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
    "  --checkpoint-seconds N\n"
    "                       local workers checkpoint a job after an epoch at most this often;\n"
    "                       a requeued job resumes from its last one (default 10; 0: every\n"
    "                       epoch)\n"
    "  --dataset-stall-seconds N\n"
    "                       fail a dataset download that stalls this long (default 30)\n"
    "  --max-dataset-bytes N\n"
    "                       local workers refuse a dataset larger than this (K, M, G\n"
    "                       suffixes; default 2G)\n"
    "  --max-artifact-bytes N\n"
    "                       refuse an uploaded artifact or checkpoint larger than this\n"
    "                       (default and most 4G); its job fails saying so\n"
    "  --max-queued N       queued jobs one token may have at once; more submits get 429\n"
    "                       (default 10000; 0: no limit)\n"
    "  --threads N          HTTP threads (default 4)\n"
    "  --max-connections-per-client N\n"
    "                       open connections one client address may hold; more are refused\n"
    "                       (default 256; 0: no limit, e.g. behind a reverse proxy, where\n"
    "                       every client has the proxy's address)\n"
    "  --shutdown-seconds N on SIGTERM/SIGINT, exit within this long: local workers\n"
    "                       checkpoint their jobs and hand them back to the queue meanwhile\n"
    "                       (default 10)\n"
    "\n"
    "Every API call but GET /healthz needs a token (Authorization: Bearer TOKEN). On first\n"
    "start serve makes an admin token and writes it to DATA-DIR/admin.token (mode 0600);\n"
    "make more with `trainyard token create`. Local workers get a worker token of their own.\n";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* One line, one write(2): the HTTP threads log every request, and a shared stdio stream would
 * make them queue on its lock and flush one by one. */
static void log_line(const char *line)
{
    char out[1200];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(out, sizeof out, "%H:%M:%S ", &tm);
    int m = snprintf(out + n, sizeof out - n, "%s\n", line);
    if (m < 0)
        return;
    n += (size_t)m < sizeof out - n ? (size_t)m : sizeof out - n - 1;
    if (out[n - 1] != '\n')
        out[n - 1] = '\n';
    ssize_t w = write(STDOUT_FILENO, out, n); /* the banner's printf is flushed before any */
    (void)w;
}

static void log_request(void *user, const char *line)
{
    (void)user;
    log_line(line);
}

/* What the supervisor's exit callback needs: the app, and the id of this run's local-workers
 * token, which only serve and its children know the secret of. */
typedef struct serve_local {
    app *a;
    char token_id[DB_ID_LEN + 1];
} serve_local;

/* A local worker process ended (crash, kill -9, OOM): the job it held goes back to the queue
 * now rather than when its lease lapses (api_workers_lost, over scheduler/sweeper.h). */
static void serve_worker_exited(void *user, const char *name, pid_t pid, const char *how)
{
    serve_local *l = user;
    char why[160], err[ERR_LEN];
    snprintf(why, sizeof why, "local worker %s (pid %d) %s", name, (int)pid, how);
    if (api_workers_lost(l->a, l->token_id, name, why, time_wall_ms(), err) < 0)
        log_line(err);
}

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

/* One serve per data directory: a second one would revoke the first's local-workers token at
 * start (serve_tokens), and the two would hand out each other's jobs. So before anything in
 * DATA-DIR changes, serve locks DATA-DIR/serve.lock (util/lockfile.h: dropped by the kernel when
 * the process ends, kill -9 included) and a second serve exits naming the first. Returns the
 * lock's descriptor, or -1 after saying why. */
static int serve_lock(const char *data_dir)
{
    char path[4300], err[ERR_LEN];
    lockfile_owner owner;
    int fd = -1;
    snprintf(path, sizeof path, "%s/" SERVE_LOCK_FILE, data_dir);
    int rc = lockfile_take(path, &fd, &owner, err);
    if (rc == -EBUSY)
        fprintf(stderr,
                "trainyard serve: %s is in use by the serve with pid %d (%s); stop it first or "
                "pick another --data-dir\n",
                data_dir, (int)owner.pid, owner.note[0] ? owner.note : "still starting");
    else if (rc < 0)
        fprintf(stderr, "trainyard serve: %s\n", err);
    return rc < 0 ? -1 : fd;
}

/* Every connection is a descriptor, and the HTTP layer sizes its connection limit from the
 * open-file limit: take the soft limit up to the hard one (often 1024 of 524288). */
static void nofile_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        log_line("cannot raise the open-file limit; the connection limit stays small");
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "trainyard serve: cannot create %s: %s\n", path, strerror(errno));
        return -errno;
    }
    return 0;
}

/* Tokens at start: an admin token when there is none (its secret written to admin.token, mode
 * 0600, the only place it ever is), and a fresh worker token for this run's local workers,
 * replacing the last run's, put into TRAINYARD_TOKEN for them to inherit; its id goes to
 * workers_token_id (DB_ID_LEN + 1 bytes). note gets what to tell the person starting the
 * service. */
static int serve_tokens(app *a, char *note, size_t cap, char *workers_token_id)
{
    db_token workers_token;
    char err[ERR_LEN], secret[DB_TOKEN_SECRET_LEN + 1], path[4300];
    db *d = app_db(a);
    int64_t admins = 0, now = time_wall_ms();
    snprintf(path, sizeof path, "%s/admin.token", a->data_dir);
    int rc = db_token_count(d, DB_ROLE_ADMIN, &admins, err);
    if (rc == 0 && admins == 0) {
        rc = db_token_create(d, "admin", DB_ROLE_ADMIN, now, NULL, secret, err);
        if (rc == 0 && cli_secret_write(path, secret) < 0)
            rc = err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
        snprintf(note, cap, "admin token: written to %s (mode 0600)\n", path);
    } else if (rc == 0) {
        struct stat st;
        snprintf(note, cap,
                 stat(path, &st) == 0
                     ? "admin token: %s\n"
                     : "admin token: %s is gone; make another with\n  trainyard token create "
                       "--data-dir DATA-DIR --name admin --role admin\n",
                 path);
    }
    if (rc == 0) {
        rc = db_token_revoke_named(d, "local-workers", DB_ROLE_WORKER, now, err);
        if (rc >= 0)
            rc = db_token_create(d, "local-workers", DB_ROLE_WORKER, now, &workers_token, secret,
                                 err);
        if (rc == 0)
            memcpy(workers_token_id, workers_token.id, sizeof workers_token.id);
    }
    if (rc == 0 && setenv("TRAINYARD_TOKEN", secret, 1) != 0)
        rc = err_set(err, -errno, "setenv: %s", strerror(errno));
    explicit_bzero(secret, sizeof secret);
    if (rc < 0)
        fprintf(stderr, "trainyard serve: tokens: %s\n", err);
    return rc < 0 ? rc : 0;
}

int cmd_serve(int argc, char **argv)
{
    const char *bind = "127.0.0.1", *data_dir = "./trainyard-data", *root = NULL;
    const char *tls_cert = NULL, *tls_key = NULL, *dataset_ca = NULL;
    long port = 8080, workers = -1, lease = 30, stall = 0, threads = 4, every = 10, bound = 10;
    long max_queued = 10000, per_client = 256;
    uint64_t max_dataset = 0, max_artifact = 4ull << 30;
    const char *max_dataset_text = NULL;
    static char allow[CLI_ALLOW_LEN];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "trainyard serve: '%s' needs a value (try --help)\n", a);
            return 2;
        }
        i++;
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
            rc = parse_count(a, v, SUPERVISOR_MAX_WORKERS, &workers);
        else if (!strcmp(a, "--lease-seconds"))
            rc = parse_count(a, v, 86400, &lease);
        else if (!strcmp(a, "--checkpoint-seconds"))
            rc = parse_count(a, v, 86400, &every);
        else if (!strcmp(a, "--dataset-stall-seconds"))
            rc = parse_count(a, v, 86400, &stall);
        else if (!strcmp(a, "--max-dataset-bytes")) {
            rc = cli_bytes("serve", a, v, &max_dataset);
            max_dataset_text = v;
        } else if (!strcmp(a, "--max-artifact-bytes"))
            rc = cli_bytes("serve", a, v, &max_artifact);
        else if (!strcmp(a, "--max-queued"))
            rc = parse_count(a, v, 100000000, &max_queued);
        else if (!strcmp(a, "--max-connections-per-client"))
            rc = parse_count(a, v, 100000, &per_client);
        else if (!strcmp(a, "--threads"))
            rc = parse_count(a, v, 256, &threads);
        else if (!strcmp(a, "--shutdown-seconds"))
            rc = parse_count(a, v, 3600, &bound);
        else {
            fprintf(stderr, "trainyard serve: unknown option '%s' (try --help)\n", a);
            return 2;
        }
        if (rc < 0)
            return 2;
    }
    if (max_artifact > (4ull << 30)) {
        fprintf(stderr, "trainyard serve: --max-artifact-bytes is at most 4G\n");
        return 2;
    }
    if (lease < 1 || threads < 1) {
        fprintf(stderr, "trainyard serve: --lease-seconds and --threads must be at least 1\n");
        return 2;
    }
    if (!tls_cert != !tls_key) {
        fprintf(stderr, "trainyard serve: HTTPS needs both --tls-cert FILE and --tls-key FILE "
                        "(neither serves plain HTTP)\n");
        return 2;
    }
    if (dataset_ca && cli_pem_check("serve", "--dataset-ca", dataset_ca) < 0)
        return 2;
    char *cert_pem = NULL, *key_pem = NULL;
    if (tls_cert && (cli_pem_read("serve", "--tls-cert", tls_cert, "CERTIFICATE", &cert_pem) < 0 ||
                     cli_pem_read("serve", "--tls-key", tls_key, "PRIVATE KEY", &key_pem) < 0)) {
        free(cert_pem);
        return 2;
    }

    static app a;
    a.lease_seconds = (int)lease;
    a.worker_gone_seconds = 2 * (int)lease;
    a.max_artifact_bytes = max_artifact;
    a.max_queued_per_token = (int)max_queued;
    telemetry_init(&a.stats);
    a.version = TRAINYARD_VERSION;
    a.log = log_line;
    if (!realpath(data_dir, a.data_dir)) {
        if (make_dir(data_dir) < 0 || !realpath(data_dir, a.data_dir)) {
            fprintf(stderr, "trainyard serve: cannot use %s as the data directory\n", data_dir);
            return 1;
        }
    }
    int lock = serve_lock(a.data_dir);
    if (lock < 0)
        return 1;
    snprintf(a.db_path, sizeof a.db_path, "%s/trainyard.db", a.data_dir);
    snprintf(a.artifacts_dir, sizeof a.artifacts_dir, "%s/artifacts", a.data_dir);
    snprintf(a.tmp_dir, sizeof a.tmp_dir, "%s/tmp", a.data_dir);
    if (make_dir(a.artifacts_dir) < 0 || make_dir(a.tmp_dir) < 0)
        return 1;
    char key_path[4200], key_err[ERR_LEN];
    snprintf(key_path, sizeof key_path, "%s/credentials.key", a.data_dir);
    if (secret_key_load(key_path, a.credentials_key, key_err) < 0) {
        fprintf(stderr, "trainyard serve: %s\n", key_err);
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    nofile_raise();
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    char err[ERR_LEN] = "";
    /* Opening the first connection applies the migrations before anything is served. */
    if (!app_db(&a)) {
        fprintf(stderr, "trainyard serve: cannot open the database %s\n", a.db_path);
        return 1;
    }
    /* Before any thread starts: local workers inherit the worker token through the
     * environment (TRAINYARD_TOKEN), which keeps it out of their command lines. */
    char admin_note[4400];
    static serve_local locals;
    locals.a = &a;
    if (serve_tokens(&a, admin_note, sizeof admin_note, locals.token_id) < 0)
        return 1;

    /* Local workers dial the listener's address, not the name in the certificate, and trust
     * exactly the server's own certificate: its leaf, pinned in the data directory (a chain's
     * first certificate alone, so that no CA of the chain is trusted for anything else). As
     * the only trust anchor it proves the listener holds its key; so for them, and only them,
     * the name is not checked (client_set_ca). */
    char pin[PATH_MAX + 32] = "";
    if (tls_cert) {
        snprintf(pin, sizeof pin, "%s/server-cert.pem", a.data_dir);
        if (cli_pem_pin(cert_pem, pin, err) < 0) {
            fprintf(stderr, "trainyard serve: --tls-cert %s: %s\n", tls_cert, err);
            cli_pem_free(cert_pem);
            cli_pem_free(key_pem);
            return 1;
        }
    }

    size_t n_routes = 0;
    const http_route *routes = api_routes(&n_routes);
    http_config cfg = {.bind = bind,
                       .port = (int)port,
                       .threads = (unsigned)threads,
                       .routes = routes,
                       .n_routes = n_routes,
                       .app = &a,
                       .tmp_dir = a.tmp_dir,
                       .authorize = api_authorize,
                       .log = log_request,
                       .tls_cert_pem = cert_pem,
                       .tls_key_pem = key_pem,
                       .max_per_client = (unsigned)per_client,
                       .json_max_depth = api_json_max_depth()};
    int started = http_start(&cfg, &a.http, err); /* it keeps copies */
    cli_pem_free(cert_pem);
    cli_pem_free(key_pem);
    if (started == -EINVAL && tls_cert) {
        fprintf(stderr, "trainyard serve: --tls-cert %s with --tls-key %s: %s\n", tls_cert, tls_key,
                err);
        return 1;
    }
    if (started < 0) {
        fprintf(stderr, "trainyard serve: %s\n", err);
        return 1;
    }
    a.queued = http_signal_new(a.http);
    a.changed = http_signal_new(a.http);
    char url[512];
    const char *host = !strcmp(bind, "0.0.0.0") ? "127.0.0.1" : bind;
    snprintf(url, sizeof url, "%s://%s:%d", tls_cert ? "https" : "http", host, http_port(a.http));
    if (lockfile_note(lock, url, err) < 0)
        log_line(err); /* a second serve then names only our pid */

    /* Local workers: one per device unless told otherwise. */
    ocl_device *devs = NULL;
    size_t ndev = 0;
    if (ocl_devices_list(&devs, &ndev, err) < 0)
        log_line(err);
    if (workers < 0)
        workers = (long)ndev;
    supervisor *sup = NULL;
    int status = 0;
    double t0 = 0;
    if (workers > 0 && ndev == 0) {
        log_line("no OpenCL device here: no local workers; jobs wait for a remote worker "
                 "(trainyard worker --server URL on a machine with one)");
    } else if (workers > 0) {
        char exe[PATH_MAX] = "", work[4300];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0)
            exe[len] = '\0';
        int dev_index[SUPERVISOR_MAX_WORKERS];
        for (long i = 0; i < workers; i++)
            dev_index[i] = (int)(i % (long)ndev);
        snprintf(work, sizeof work, "%s/work", a.data_dir);
        make_dir(work);
        supervisor_opts so = {.exe = exe,
                              .server_url = url,
                              .pin_cert = tls_cert ? pin : NULL,
                              .dataset_ca = dataset_ca,
                              .dataset_root = root,
                              .dataset_allow = allow[0] ? allow : NULL,
                              .work_dir = work,
                              .dataset_stall_s = stall,
                              .max_dataset_bytes = max_dataset_text,
                              .checkpoint_s = every,
                              .count = (int)workers,
                              .devices = dev_index,
                              .log = log_line,
                              .exited = serve_worker_exited,
                              .user = &locals};
        if (supervisor_start(&so, &sup, err) < 0) {
            fprintf(stderr, "trainyard serve: %s\n", err);
            status = 1;
            goto out;
        }
    }

    printf("trainyard %s listening on %s\n", TRAINYARD_VERSION, url);
    printf("data directory: %s\n", a.data_dir);
    printf("local workers: %ld", workers > 0 && ndev > 0 ? workers : 0L);
    if (workers > 0 && ndev > 0)
        printf(" on %s", devs[0].name);
    printf("\n%s", admin_note);
    printf(
        "submit a job:\n  curl -X POST %s/train -H \"Authorization: Bearer $(cat %s/admin.token)\" "
        "-H 'Content-Type: application/json' -d @job.json\n",
        url, a.data_dir);
    fflush(stdout);

    while (!stop_requested) {
        if (api_sweep(&a, time_wall_ms(), err) < 0)
            log_line(err);
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL); /* a signal cuts it short */
    }
    t0 = time_mono();
    a.stopping = 1;
    log_line("stopping: no new jobs; local workers hand their jobs back, then the server closes");
out:
    supervisor_stop(sup, bound > 1 ? (int)(bound - 1) * 1000 : 0);
    http_stop(a.http);
    if (t0 > 0) {
        char line[96];
        snprintf(line, sizeof line, "stopped in %.1fs", time_mono() - t0);
        log_line(line);
    }
    free(devs);
    lockfile_release(lock);
    return status;
}
