/* serve: `trainyard serve` — the API, the scheduler and SQLite in one process, plus one
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
 * restarted serve's lease expiry (scheduler/expiry.c) requeues the jobs whose leases lapsed
 * meanwhile.
 *
 * One serve per data directory: DATA-DIR/serve.lock is locked before anything there changes
 * (serve_lock). A local worker process that dies while serve runs is reported by the supervisor
 * and its job requeued at once (serve_worker_exited), not after its lease.
 *
 * TLS: the CLI reads the certificate and key (cli/cli_tls.c); serve_run hands them to the HTTP
 * layer, wipes its copies, and pins the leaf for the local workers (serve_pem_pin).
 *
 * SIGXFSZ is ignored so that a file-size limit (ulimit -f) makes write() fail with EFBIG, which
 * the upload path answers with a 507, instead of killing the server. */
#include "serve/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/app.h"
#include "db/artifacts.h"
#include "db/events.h"
#include "db/tokens.h"
#include "kernels/ocl.h"
#include "kernels/devices.h"
#include "predict/grpc.h"
#include "predict/predict.h"
#include "scheduler/lifecycle.h"
#include "scheduler/notify.h"
#include "scheduler/slurm.h"
#include "scheduler/sweep.h"
#include "scheduler/supervisor.h"
#include "util/datadir.h"
#include "util/err.h"
#include "util/exepath.h"
#include "util/lockfile.h"
#include "util/timeutil.h"

#define PEM_CERT_END "-----END CERTIFICATE-----"

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
 * now rather than when its lease lapses (api_workers_lost, over scheduler/expiry.h). */
static void serve_predict_log(void *user, const char *line)
{
    char buf[ERR_LEN + 16];
    snprintf(buf, sizeof buf, "predict: %s", line);
    log_line(buf);
}

static int serve_resolve(void *user, const char *token, const char *name, int64_t version,
                         predict_target *t, char *err)
{
    return api_predict_resolve(user, token, name, version, t, err);
}

static void serve_worker_exited(void *user, const char *name, pid_t pid, const char *how)
{
    serve_local *l = user;
    char why[160], err[ERR_LEN];
    snprintf(why, sizeof why, "local worker %s (pid %d) %s", name, (int)pid, how);
    if (api_workers_lost(l->a, l->token_id, name, why, time_wall_ms(), err) < 0)
        log_line(err);
}

/* The Slurm executor changed jobs (scheduler/slurm.h): the API's log lines and signals. */
static void serve_slurm_changed(void *user, const sched_expiry_stats *st)
{
    api_jobs_changed(user, st, "slurm");
}

/* The sweep controller (scheduler/sweep.h) made trials, asked some to stop or ended sweeps. */
static void serve_sweeps_changed(void *user, const sweep_tick_stats *st)
{
    api_sweeps_changed(user, st->trials_created, st->stops_requested, st->sweeps_finished);
}

static void serve_sweeps_log(void *user, const char *line)
{
    (void)user;
    log_line(line);
}

/* The Slurm executor, on its own thread (scheduler/slurm.c says why). The ranks reach serve
 * at advertise_url, else at url; trainyard-replica is o->replica_exe, else the file of that
 * name beside this executable. *out stays NULL with the local executor. 0, or -1 after saying
 * why. */
static int serve_slurm_start(const serve_opts *o, app *a, const char *url, const char *pin,
                             slurm_executor **out)
{
    static char replica[PATH_MAX];
    char err[ERR_LEN];
    if (o->executor != SERVE_EXECUTOR_SLURM)
        return 0;
    if (o->replica_exe)
        snprintf(replica, sizeof replica, "%s", o->replica_exe);
    else if (exepath_beside_self("trainyard-replica", replica, sizeof replica) == -ENAMETOOLONG)
        replica[0] = '\0';
    slurm_opts so = {.db_path = a->db_path,
                     .data_dir = a->data_dir,
                     .artifacts_dir = a->artifacts_dir,
                     .replica_exe = replica,
                     .server_url = o->advertise_url ? o->advertise_url : url,
                     .pin_cert = pin && pin[0] ? pin : NULL,
                     .partition = o->slurm_partition,
                     .dataset_root = o->dataset_root,
                     .dataset_allow = o->dataset_allow,
                     .dataset_ca = o->dataset_ca,
                     .max_dataset_bytes = o->max_dataset_bytes,
                     .dataset_cache = o->dataset_cache,
                     .checkpoint_s = o->checkpoint_seconds,
                     .dataset_stall_s = o->dataset_stall_seconds,
                     .scripts = o->slurm_scripts,
                     .script_args = o->slurm_script_args,
                     .log = log_line,
                     .changed = serve_slurm_changed,
                     .user = a};
    if (slurm_executor_start(&so, out, err) < 0) {
        fprintf(stderr, "trainyard serve: %s\n", err);
        return -1;
    }
    return 0;
}

void serve_pem_free(char *pem)
{
    if (pem)
        explicit_bzero(pem, strlen(pem)); /* it may be a private key */
    free(pem);
}

/* Writes the first certificate of cert_pem (the leaf of a chain) to path, by rename. */
static int serve_pem_pin(const char *cert_pem, const char *path, char *err)
{
    const char *begin = strstr(cert_pem, "-----BEGIN CERTIFICATE-----");
    const char *end = begin ? strstr(begin, PEM_CERT_END) : NULL;
    char tmp[DATADIR_PATH_MAX];
    int fd, rc = 0;

    if (!end)
        return err_set(err, -EINVAL, "the certificate file holds no PEM certificate");
    size_t len = (size_t)(end + strlen(PEM_CERT_END) - begin);
    if (datadir_beside(path, ".tmp", tmp) < 0)
        return err_set(err, -ENAMETOOLONG, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
    if (write(fd, begin, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
        rc = err_set(err, -EIO, "cannot write %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = err_set(err, -EIO, "cannot write %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_set(err, -errno, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* Writes secret and a newline to path, created or truncated with mode 0600 and synced; -1 with
 * errno on failure. */
static int serve_secret_write(const char *path, const char *secret)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t len = strlen(secret);
    int ok = fchmod(fd, 0600) == 0 && write(fd, secret, len) == (ssize_t)len &&
             write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return ok ? 0 : -1;
}

/* One serve per data directory: a second one would revoke the first's local-workers token at
 * start (serve_tokens), and the two would hand out each other's jobs. So before anything in
 * DATA-DIR changes, serve locks DATA-DIR/serve.lock (util/lockfile.h: dropped by the kernel when
 * the process ends, kill -9 included) and a second serve exits naming the first. Returns the
 * lock's descriptor, or -1 after saying why. */
static int serve_lock(const char *data_dir)
{
    char path[DATADIR_PATH_MAX], err[ERR_LEN];
    lockfile_owner owner;
    int fd = -1;
    int rc = datadir_path(data_dir, DATADIR_SERVE_LOCK, path);
    if (rc < 0)
        err_set(err, rc, "%s: the path of its lock file is too long", data_dir);
    else
        rc = lockfile_take(path, &fd, &owner, err);
    if (rc == -EBUSY)
        fprintf(stderr,
                "trainyard serve: %s is in use by the serve with pid %d (%s); stop it first or "
                "pick another --data-dir\n",
                data_dir, (int)owner.pid, owner.note[0] ? owner.note : "still starting");
    else if (rc < 0)
        fprintf(stderr, "trainyard serve: %s\n", err);
    return rc < 0 ? -1 : fd;
}

/* The data directory's paths that the API uses, into a (util/datadir.h), and a check that the
 * deepest path serve or a job can make under it fits: a job's artifact with the longest id and
 * name, while being copied in (".part"), and a local worker's folder. When those fit, every
 * other path does, so nothing later fails on a name too long. 0, or -1 after saying why. */
static int serve_paths(app *a)
{
    char id[DB_ID_LEN + 1], name[DB_ARTIFACT_NAME_MAX + 1], work[DATADIR_PATH_MAX];
    char deepest[DATADIR_PATH_MAX], part[DATADIR_PATH_MAX];
    memset(id, 'x', DB_ID_LEN);
    id[DB_ID_LEN] = '\0';
    memset(name, 'x', DB_ARTIFACT_NAME_MAX);
    name[DB_ARTIFACT_NAME_MAX] = '\0';
    int rc = datadir_path(a->data_dir, DATADIR_DB, a->db_path);
    if (rc == 0)
        rc = datadir_path(a->data_dir, DATADIR_ARTIFACTS, a->artifacts_dir);
    if (rc == 0)
        rc = datadir_path(a->data_dir, DATADIR_TMP, a->tmp_dir);
    if (rc == 0)
        rc = datadir_job_file(a->artifacts_dir, id, name, deepest);
    if (rc == 0)
        rc = datadir_beside(deepest, ".part", part);
    if (rc == 0)
        rc = datadir_path(a->data_dir, DATADIR_WORK, work);
    if (rc == 0)
        rc = datadir_worker_dir(work, SUPERVISOR_MAX_WORKERS, deepest);
    if (rc < 0)
        fprintf(stderr,
                "trainyard serve: the data directory %s is too deep: paths in it would pass %d "
                "bytes; pick a shorter --data-dir\n",
                a->data_dir, DATADIR_PATH_MAX);
    return rc < 0 ? -1 : 0;
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
    char err[ERR_LEN], secret[DB_TOKEN_SECRET_LEN + 1], path[DATADIR_PATH_MAX];
    db *d = app_db(a);
    int64_t admins = 0, now = time_wall_ms();
    int rc = datadir_path(a->data_dir, DATADIR_ADMIN_TOKEN, path);
    if (rc < 0)
        err_set(err, rc, "%s: the admin token's path is too long", a->data_dir);
    else
        rc = db_token_count(d, DB_ROLE_ADMIN, &admins, err);
    if (rc == 0 && admins == 0) {
        rc = db_token_create(d, "admin", DB_ROLE_ADMIN, 1, now, NULL, secret, err);
        if (rc == 0 && serve_secret_write(path, secret) < 0)
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
            rc = db_token_create(d, "local-workers", DB_ROLE_WORKER, 0, now, &workers_token, secret,
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

/* The PEM texts serve_run took, NULL once wiped (serve_run wipes what is left at the end). */
typedef struct serve_pems {
    char *cert_pem, *key_pem;
} serve_pems;

/* serve_run's work; returns the exit status. The options are read into locals named as the
 * flags' variables were when this was cmd_serve, so the body reads as it did there. */
static int serve_main(const serve_opts *o, serve_pems *pems)
{
    const char *bind = o->bind, *data_dir = o->data_dir, *root = o->dataset_root;
    const char *tls_cert = o->tls_cert, *tls_key = o->tls_key, *dataset_ca = o->dataset_ca;
    const char *allow = o->dataset_allow, *max_dataset_text = o->max_dataset_bytes;
    long port = o->port, workers = o->workers, lease = o->lease_seconds;
    long stall = o->dataset_stall_seconds, threads = o->threads, every = o->checkpoint_seconds;
    long bound = o->shutdown_seconds, max_queued = o->max_queued, per_client = o->max_per_client;
    uint64_t max_artifact = o->max_artifact_bytes;

    static app a;
    a.lease_seconds = (int)lease;
    a.worker_gone_seconds = 2 * (int)lease;
    a.max_artifact_bytes = max_artifact;
    a.max_code_bytes = o->max_code_bytes;
    a.max_queued_per_token = (int)max_queued;
    if (o->retry_backoff_seconds >= 0) /* before any thread leases or expires */
        sched_retry_backoff_set((int64_t)o->retry_backoff_seconds * 1000);
    telemetry_init(&a.stats);
    a.version = TRAINYARD_VERSION;
    a.log = log_line;
    if (!realpath(data_dir, a.data_dir)) {
        if (make_dir(data_dir) < 0 || !realpath(data_dir, a.data_dir)) {
            fprintf(stderr, "trainyard serve: cannot use %s as the data directory\n", data_dir);
            return 1;
        }
    }
    if (serve_paths(&a) < 0)
        return 1;
    int lock = serve_lock(a.data_dir);
    if (lock < 0)
        return 1;
    char code_dir[DATADIR_PATH_MAX];
    datadir_path(a.data_dir, DATADIR_CODE, code_dir); /* fits: serve_paths */
    if (make_dir(a.artifacts_dir) < 0 || make_dir(a.tmp_dir) < 0 || make_dir(code_dir) < 0)
        return 1;
    char key_path[DATADIR_PATH_MAX], key_err[ERR_LEN];
    datadir_path(a.data_dir, DATADIR_CREDENTIALS_KEY, key_path); /* fits: serve_paths */
    if (secret_key_load(key_path, a.credentials_key, key_err) < 0) {
        fprintf(stderr, "trainyard serve: %s\n", key_err);
        return 1;
    }

    /* Webhooks obey the dataset host rules (scheduler/notify.h): the same --dataset-allow list,
     * checked at submit and at each delivery. The enqueue hook is set before any thread can
     * change a job; its links name the server once its address is known (notify_base). */
    static allow_list notify_allow;
    static const char *_Atomic notify_base;
    char allow_err[ERR_LEN];
    if (allow_list_parse(allow, &notify_allow, allow_err) < 0) {
        fprintf(stderr, "trainyard serve: --dataset-allow: %s\n", allow_err);
        return 1;
    }
    a.notify_allow = &notify_allow;
    db_event_set_hook(notify_job_transition, (void *)&notify_base);

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
    char admin_note[DATADIR_PATH_MAX + 200];
    static serve_local locals;
    locals.a = &a;
    if (serve_tokens(&a, admin_note, sizeof admin_note, locals.token_id) < 0)
        return 1;

    /* Local workers dial the listener's address, not the name in the certificate, and trust
     * exactly the server's own certificate: its leaf, pinned in the data directory (a chain's
     * first certificate alone, so that no CA of the chain is trusted for anything else). As
     * the only trust anchor it proves the listener holds its key; so for them, and only them,
     * the name is not checked (client_set_ca). */
    char pin[DATADIR_PATH_MAX] = "";
    if (tls_cert) {
        datadir_path(a.data_dir, DATADIR_SERVER_CERT, pin); /* fits: serve_paths */
        if (serve_pem_pin(pems->cert_pem, pin, err) < 0) {
            fprintf(stderr, "trainyard serve: --tls-cert %s: %s\n", tls_cert, err);
            return 1;
        }
    }

    /* The devices, listed before the inference engine's thread opens one: the OpenCL ICD
     * loader's first platform enumeration is not safe from two threads at once. GPUs without
     * OpenCL (kernels/devices.h) count too: their local workers take script jobs. */
    ocl_device *devs = NULL;
    size_t ndev = 0;
    if (devices_list(&devs, &ndev, err) < 0)
        log_line(err);
    /* The devices local workers go to (indices into devs): a GPU without OpenCL only when
     * the workers take script jobs, since that is all it runs. */
    int usable[SUPERVISOR_MAX_WORKERS];
    size_t n_usable = 0, skipped = 0;
    int scripts = 0;
    for (size_t i = 0; o->worker_args && o->worker_args[i]; i++)
        scripts |= !strcmp(o->worker_args[i], "--allow-scripts");
    for (size_t i = 0; i < ndev && n_usable < SUPERVISOR_MAX_WORKERS; i++) {
        if (devs[i].opencl || scripts)
            usable[n_usable++] = (int)i;
        else
            skipped++;
    }
    if (skipped) {
        char line[ERR_LEN];
        snprintf(line, sizeof line,
                 "%zu GPU(s) without OpenCL (found by %s) run script jobs only, which need "
                 "--allow-scripts: no local worker on them",
                 skipped, devs[ndev - 1].found_by);
        log_line(line);
    }

    /* Inference: its own device and thread, opened in the background. */
    if (o->predict_device) {
        predict_opts po = {.device = o->predict_device,
                           .memory_cap = o->predict_memory,
                           .max_batch = (int)o->predict_max_batch,
                           .window_us = (int)o->predict_window_us,
                           .log = serve_predict_log};
        if (predict_engine_new(&po, &a.predict, err) < 0) {
            fprintf(stderr, "trainyard serve: %s\n", err);
            free(devs);
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
                       .tls_cert_pem = pems->cert_pem,
                       .tls_key_pem = pems->key_pem,
                       .max_per_client = (unsigned)per_client,
                       .json_max_depth = api_json_max_depth()};
    int started = http_start(&cfg, &a.http, err); /* it keeps copies */
    for (int i = 0; started == 0 && i < API_PREDICT_SIGNALS; i++)
        a.predicted[i] = http_signal_new(a.http);
    predict_grpc *grpc = NULL;
    char grpc_err[ERR_LEN] = "";
    if (started == 0 && o->grpc_port >= 0) {
        predict_grpc_opts go = {.bind = bind,
                                .port = (int)o->grpc_port,
                                .cert_pem = pems->cert_pem,
                                .key_pem = pems->key_pem,
                                .engine = a.predict,
                                .resolve = serve_resolve,
                                .user = &a,
                                .log = log_request};
        if (!a.predict)
            snprintf(grpc_err, sizeof grpc_err,
                     "--grpc-port needs predictions on (not --predict-device none)");
        else if (predict_grpc_start(&go, &grpc, grpc_err) < 0 && !grpc_err[0])
            snprintf(grpc_err, sizeof grpc_err, "the gRPC server did not start");
    }
    serve_pem_free(pems->cert_pem);
    serve_pem_free(pems->key_pem);
    pems->cert_pem = pems->key_pem = NULL;
    if (started < 0 || grpc_err[0]) {
        if (started == -EINVAL && tls_cert)
            fprintf(stderr, "trainyard serve: --tls-cert %s with --tls-key %s: %s\n", tls_cert,
                    tls_key, err);
        else if (started < 0)
            fprintf(stderr, "trainyard serve: %s\n", err);
        else
            fprintf(stderr, "trainyard serve: --grpc-port %ld: %s\n", o->grpc_port, grpc_err);
        predict_engine_stop(a.predict);
        http_stop(a.http);
        predict_engine_free(a.predict);
        free(devs);
        return 1;
    }
    a.queued = http_signal_new(a.http);
    a.changed = http_signal_new(a.http);
    char url[512];
    const char *host = !strcmp(bind, "0.0.0.0") ? "127.0.0.1" : bind;
    snprintf(url, sizeof url, "%s://%s:%d", tls_cert ? "https" : "http", host, http_port(a.http));
    if (lockfile_note(lock, url, err) < 0)
        log_line(err); /* a second serve then names only our pid */
    static char base_url[sizeof url];
    memcpy(base_url, url, sizeof url);
    atomic_store(&notify_base, base_url);

    /* Local workers: one per device unless told otherwise (none by default with Slurm). */
    if (workers < 0)
        workers = o->executor == SERVE_EXECUTOR_SLURM ? 0 : (long)n_usable;
    supervisor *sup = NULL;
    slurm_executor *slurm = NULL;
    sweep_ctl *sweeps = NULL;
    notifier *notif = NULL;
    int status = 0;
    double t0 = 0;
    notify_opts no = {.db_path = a.db_path,
                      .data_dir = a.data_dir,
                      .key = a.credentials_key,
                      .allow = &notify_allow,
                      .backoff_ms = (int)o->notify_backoff_ms,
                      .max_attempts = (int)o->notify_attempts,
                      .log = log_line};
    if (notifier_start(&no, &notif, err) < 0) {
        fprintf(stderr, "trainyard serve: webhooks: %s\n", err);
        status = 1;
        goto out;
    }
    if (serve_slurm_start(o, &a, url, pin, &slurm) < 0) {
        status = 1;
        goto out;
    }
    sweep_ctl_opts wo = {.db_path = a.db_path,
                         .artifacts_dir = a.artifacts_dir,
                         .changed = serve_sweeps_changed,
                         .log = serve_sweeps_log,
                         .user = &a};
    if (sweep_ctl_start(&wo, &sweeps, err) < 0) {
        fprintf(stderr, "trainyard serve: the sweep controller: %s\n", err);
        status = 1;
        goto out;
    }
    if (workers > 0 && n_usable == 0) {
        if (!skipped) /* else the line above said why */
            log_line(
                "no OpenCL device here (nor a GPU NVML or nvidia-smi finds): no local workers; "
                "jobs wait for a remote worker (trainyard worker --server URL on a machine with "
                "one; `trainyard devices` says what this one has)");
    } else if (workers > 0) {
        char exe[PATH_MAX] = "", work[DATADIR_PATH_MAX], why[ERR_LEN];
        if (exepath_self(exe, sizeof exe, why) < 0)
            exe[0] = '\0';
        int dev_index[SUPERVISOR_MAX_WORKERS];
        for (long i = 0; i < workers; i++)
            dev_index[i] = usable[i % (long)n_usable];
        datadir_path(a.data_dir, DATADIR_WORK, work); /* fits: serve_paths */
        make_dir(work);
        supervisor_opts so = {.exe = exe,
                              .server_url = url,
                              .pin_cert = tls_cert ? pin : NULL,
                              .dataset_ca = dataset_ca,
                              .dataset_root = root,
                              .dataset_allow = allow,
                              .work_dir = work,
                              .dataset_stall_s = stall,
                              .max_dataset_bytes = max_dataset_text,
                              .dataset_cache = o->dataset_cache,
                              .dataset_cache_bytes = o->dataset_cache_bytes,
                              .extra_args = o->worker_args,
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
    printf("local workers: %ld", workers > 0 && n_usable > 0 ? workers : 0L);
    if (workers > 0 && n_usable > 0)
        printf(" on %s%s", devs[usable[0]].name,
               devs[usable[0]].opencl ? "" : " (script jobs only)");
    printf("\n");
    if (slurm)
        printf("executor: slurm (the ranks connect to %s)\n",
               o->advertise_url ? o->advertise_url : url);
    if (grpc)
        printf("gRPC PredictionService on %s:%d%s\n", host, predict_grpc_port(grpc),
               tls_cert ? " (TLS)" : "");
    printf("%s", admin_note);
    printf(
        "submit a job:\n  curl -X POST %s/train -H \"Authorization: Bearer $(cat %s/admin.token)\" "
        "-H 'Content-Type: application/json' -d @job.json\n",
        url, a.data_dir);
    fflush(stdout);

    while (!stop_requested) {
        if (api_expire(&a, time_wall_ms(), err) < 0)
            log_line(err);
        if (o->retain_days > 0 && api_retain(&a, time_wall_ms(), o->retain_days, err) < 0)
            log_line(err);
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL); /* a signal cuts it short */
    }
    t0 = time_mono();
    a.stopping = 1;
    log_line("stopping: no new jobs; local workers hand their jobs back, then the server closes");
out:
    sweep_ctl_stop(sweeps);     /* its state is the database's: the next serve carries on */
    notifier_stop(notif);       /* pending webhooks wait in the database for the next serve */
    slurm_executor_stop(slurm); /* its Slurm jobs run on; the next serve polls them */
    supervisor_stop(sup, bound > 1 ? (int)(bound - 1) * 1000 : 0);
    /* gRPC first (its calls need the engine); the engine's queued requests then finish with
     * -ECANCELED, raising their signals while the HTTP server still has them */
    predict_grpc_stop(grpc);
    predict_engine_stop(a.predict);
    http_stop(a.http);
    predict_engine_free(a.predict);
    if (t0 > 0) {
        char line[96];
        snprintf(line, sizeof line, "stopped in %.1fs", time_mono() - t0);
        log_line(line);
    }
    free(devs);
    lockfile_release(lock);
    return status;
}

int serve_run(const serve_opts *o)
{
    serve_pems pems = {.cert_pem = o->cert_pem, .key_pem = o->key_pem};
    int status = serve_main(o, &pems);
    serve_pem_free(pems.cert_pem);
    serve_pem_free(pems.key_pem);
    return status;
}
