/* test_agent: the worker loop (worker/agent.c) driven in-process against the real server.
 *
 * The test starts `trainyard serve` with no local workers (tests/unit/servetest.h), makes a
 * worker token, submits jobs on small CSV datasets it writes (file:// under the agent's
 * dataset_root) and calls agent_run() on a thread of its own, with max_jobs set so that it
 * returns, while the main thread watches and acts over HTTP as a user would:
 *
 *   - a job runs to succeeded: its status, one metrics row per epoch, the artifacts the server
 *     lists (sizes and SHA-256 of what it serves, the CSV against the metrics), the log lines
 *     the heartbeats carried (train.log's lines), the worker in GET /workers with its device;
 *   - a cancel while training ends the job cancelled and agent_run returns, within a bound;
 *   - *stop = 2 (a second SIGTERM) hands the running job back (queued) and agent_run returns 0;
 *   - a missing dataset fails the job with an error that names the file;
 *   - a server where nothing listens is retried (the retries are counted in agent_run's own
 *     output) until *stop, then agent_run returns 0 within a bound;
 * and the device helpers agent.h exports (agent_first_device, agent_device_entry,
 * agent_pick_device, agent_device_json).
 *
 * Each agent_run has a deadline: past it the test sets *stop = 2 and fails, so that a loop that
 * ignores a cancel cannot hang the test. Exit 77 without an OpenCL device. */
#include "worker/agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "util/err.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "data/fetch.h"

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"
#include "tests/unit/servetest.h"
#include "tests/unit/train/train_fixtures.h"

#define EPOCHS      3    /* the job that succeeds */
#define LONG_EPOCHS 5000 /* the jobs that are cancelled or stopped: far more than they run */
#define ACT_BOUND_S 3.0  /* a cancel or a stop ends agent_run within this long */

static servetest srv;
static client *api;       /* the test's own connection, with the admin token */
static char wtoken[256];  /* a worker token for the agents */
static ocl_device device; /* what agent_run picks for "any" */

/* ---- the server's API, as the admin ---------------------------------------------------------- */

/* GET path; the JSON answer (new reference) when it is 200, else NULL and a failed check. */
static json_t *api_get(const char *path)
{
    char err[ERR_LEN];
    long status = 0;
    json_t *reply = NULL;
    int rc = client_get_json(api, path, &status, &reply, err);
    if (rc < 0 || status != 200) {
        fprintf(stderr, "GET %s: %s (status %ld)\n", path, rc < 0 ? err : "refused", status);
        check_failures++;
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* POST body (borrowed, may be NULL) to path; the answer (new reference) or NULL; *status. */
static json_t *api_post(const char *path, const json_t *body, long *status)
{
    char err[ERR_LEN];
    json_t *reply = NULL;
    *status = 0;
    if (client_post_json(api, path, body, status, &reply, err) < 0)
        fprintf(stderr, "POST %s: %s\n", path, err);
    return reply;
}

/* A job document on the CSV file `file` under the test's folder. */
static json_t *job_doc(const char *name, const char *file, int epochs)
{
    char url[1024];
    snprintf(url, sizeof url, "file://%s/%s", srv.dir, file);
    return json_pack("{s:s, s:s, s:{s:[{s:s, s:i, s:s}]}, s:{s:i, s:i, s:s, s:f, s:f, s:i}}",
                     "name", name, "dataset_url", url, "model", "layers", "type", "dense", "units",
                     16, "activation", "relu", "hyperparameters", "epochs", epochs, "batch_size",
                     16, "optimizer", "adam", "learning_rate", 0.01, "validation_split", 0.2,
                     "seed", 3);
}

/* Submits a job; its id into id[cap]. The test stops when the server refuses it. */
static void submit(const char *name, const char *file, int epochs, char *id, size_t cap)
{
    json_t *doc = job_doc(name, file, epochs);
    long status;
    json_t *reply = api_post("/train", doc, &status);
    const char *got = json_string_value(json_object_get(reply, "id"));
    if (status != 202 || !got) {
        char why[512];
        client_problem(status, reply, why, sizeof why);
        cltest_die("submitting a job", why);
    }
    snprintf(id, cap, "%s", got);
    json_decref(reply);
    json_decref(doc);
}

/* GET /jobs/{id} (new reference, or NULL). */
static json_t *job_get(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/jobs/%s", id);
    return api_get(path);
}

/* The job's status into out[cap] ("" when it cannot be read). */
static void job_status(const char *id, char *out, size_t cap)
{
    json_t *job = job_get(id);
    const char *s = json_string_value(json_object_get(job, "status"));
    snprintf(out, cap, "%s", s ? s : "");
    json_decref(job);
}

/* GET /jobs/{id}/metrics's epochs (new reference, or NULL). */
static json_t *job_epochs(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *m = api_get(path);
    json_t *epochs = json_incref(json_object_get(m, "epochs"));
    json_decref(m);
    return epochs;
}

/* Downloads path into the test's folder as name; its bytes (free them) with *len, or NULL. */
static char *api_download(const char *path, const char *name, size_t *len)
{
    char file[1024], err[ERR_LEN];
    long status = 0;
    snprintf(file, sizeof file, "%s/%s", srv.dir, name);
    if (client_download(api, path, file, &status, err) < 0 || status != 200) {
        fprintf(stderr, "GET %s: %s (status %ld)\n", path, err, status);
        check_failures++;
        return NULL;
    }
    char *text = servetest_slurp(file);
    *len = text ? strlen(text) : 0;
    return text;
}

/* Waits until the job has at least n epochs (training is under way); 0 when it did not
 * within limit_s seconds. */
static int wait_epochs(const char *id, size_t n, double limit_s)
{
    double until = time_mono() + limit_s;
    while (time_mono() < until) {
        json_t *epochs = job_epochs(id);
        size_t have = json_array_size(epochs);
        json_decref(epochs);
        if (have >= n)
            return 1;
        servetest_sleep_ms(20);
    }
    fprintf(stderr, "job %s had fewer than %zu epochs after %.0f s\n", id, n, limit_s);
    return 0;
}

/* ---- agent_run on a thread of its own -------------------------------------------------------- */

typedef struct agent_thread {
    agent_opts o;
    volatile sig_atomic_t stop;
    char work[1024];
    pthread_t thread;
    int done; /* __atomic: agent_run returned */
    int rc;
    char err[ERR_LEN];
} agent_thread;

static void *agent_main(void *arg)
{
    agent_thread *a = arg;
    a->rc = agent_run(&a->o, a->err);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Starts agent_run as worker `name` against server, for max_jobs jobs. */
static void agent_start(agent_thread *a, const char *server, const char *name, int max_jobs)
{
    memset(a, 0, sizeof *a);
    snprintf(a->work, sizeof a->work, "%s/work-%s", srv.dir, name);
    if (mkdir(a->work, 0700) < 0)
        cltest_die("creating the work folder", strerror(errno));
    a->o = (agent_opts){.server = server,
                        .token = wtoken,
                        .name = name,
                        .device = "any",
                        .work_dir = a->work,
                        .dataset_root = srv.dir,
                        .max_jobs = max_jobs,
                        .checkpoint_seconds = 10,
                        .stop = &a->stop};
    if (pthread_create(&a->thread, NULL, agent_main, a) != 0)
        cltest_die("pthread_create", "cannot start the agent's thread");
}

static int agent_done(agent_thread *a)
{
    return __atomic_load_n(&a->done, __ATOMIC_ACQUIRE);
}

/* Joins the agent if it returns within limit_s seconds and returns 1 with the seconds it took
 * in *took. Else the check fails, *stop becomes 2 (the hand-back, which ends agent_run after
 * the job's wrap-up) and it is joined all the same; 0. */
static int agent_join_within(agent_thread *a, double limit_s, double *took)
{
    double t0 = time_mono();
    while (!agent_done(a) && time_mono() - t0 < limit_s)
        servetest_sleep_ms(5);
    *took = time_mono() - t0;
    int in_time = agent_done(a);
    if (!in_time) {
        fprintf(stderr, "agent_run (%s) did not return within %.1f s: stopping it\n", a->o.name,
                limit_s);
        check_failures++;
        a->stop = 2;
    }
    pthread_join(a->thread, NULL);
    /* agent_run removes each job's folder when the job is over, whatever its end. */
    if (rmdir(a->work) < 0) {
        fprintf(stderr, "%s is not empty after agent_run: %s\n", a->work, strerror(errno));
        check_failures++;
    }
    return in_time;
}

/* Submits a job (its id into id[cap]) and runs agent_run as worker `name` until it has done
 * that job, which must take less than limit_s seconds; returns the seconds it took. */
static double run_one_job(const char *name, const char *file, int epochs, double limit_s, char *id,
                          size_t cap)
{
    agent_thread a;
    double took;
    submit(name, file, epochs, id, cap);
    agent_start(&a, srv.url, name, 1);
    agent_join_within(&a, limit_s, &took);
    CHECK_INT(a.rc, 0);
    return took;
}

/* POST /jobs/{id}/cancel, which must be accepted. */
static void job_cancel(const char *id)
{
    char path[256];
    long code;
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    json_decref(api_post(path, NULL, &code));
    CHECK(code == 200 || code == 202);
}

/* ---- the cases ------------------------------------------------------------------------------- */

/* The artifact called name in GET /jobs/{id}/artifacts's list (borrowed), or NULL. */
static json_t *artifact_find(json_t *list, const char *name)
{
    size_t i;
    json_t *a;
    json_array_foreach (json_object_get(list, "artifacts"), i, a)
        if (!strcmp(json_string_value(json_object_get(a, "name")), name))
            return a;
    return NULL;
}

/* Each artifact is listed, and its listed size and SHA-256 are those of what the server
 * serves; metrics.csv has a row per epoch with the losses of GET /jobs/{id}/metrics, and
 * job.json is the job's document. */
static void check_artifacts(const char *id, const json_t *epochs)
{
    static const char *const names[] = {"model.safetensors", "metrics.csv", "job.json",
                                        "train.log"};
    char path[512];
    snprintf(path, sizeof path, "/jobs/%s/artifacts", id);
    json_t *list = api_get(path);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *a = artifact_find(list, names[i]);
        if (!a) {
            fprintf(stderr, "artifact %s is not listed\n", names[i]);
            check_failures++;
            continue;
        }
        char file[1024], err[ERR_LEN], hex[65];
        long status = 0;
        uint64_t size = 0;
        snprintf(path, sizeof path, "/jobs/%s/artifacts/%s", id, names[i]);
        snprintf(file, sizeof file, "%s/got-%s", srv.dir, names[i]);
        CHECK(client_download(api, path, file, &status, err) == 0);
        CHECK_INT(status, 200);
        CHECK(sha256_file(file, hex, &size, err) == 0);
        CHECK(size > 0);
        CHECK_INT(json_integer_value(json_object_get(a, "size")), size);
        CHECK_STR(json_string_value(json_object_get(a, "sha256")), hex);
    }
    json_decref(list);

    /* metrics.csv: a header, then epoch,loss,... one row per epoch as the heartbeats said. */
    char file[1024];
    snprintf(file, sizeof file, "%s/got-metrics.csv", srv.dir);
    char *csv = servetest_slurp(file);
    int rows = 0;
    for (char *line = csv ? strtok(csv, "\n") : NULL; line; line = strtok(NULL, "\n"), rows++) {
        if (rows == 0) {
            CHECK(!strncmp(line, "epoch,loss", 10));
            continue;
        }
        int epoch = 0;
        double loss = NAN;
        CHECK_INT(sscanf(line, "%d,%lf", &epoch, &loss), 2);
        json_t *e = json_array_get(epochs, (size_t)rows - 1);
        CHECK_INT(epoch, json_integer_value(json_object_get(e, "epoch")));
        CHECK_NEAR(loss, json_number_value(json_object_get(e, "loss")), 1e-4);
    }
    CHECK_INT(rows, EPOCHS + 1);
    free(csv);

    snprintf(file, sizeof file, "%s/got-job.json", srv.dir);
    json_t *doc = json_load_file(file, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(doc, "name")), "agent-ok");
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(doc, "hyperparameters"), "epochs")),
        EPOCHS);
    json_decref(doc);
}

/* Every line of the train.log artifact reached the server's log through the heartbeats. */
static void check_logs(const char *id)
{
    char path[256], file[1024];
    size_t len = 0;
    snprintf(path, sizeof path, "/jobs/%s/logs", id);
    char *logs = api_download(path, "logs.txt", &len);
    snprintf(file, sizeof file, "%s/got-train.log", srv.dir);
    char *train_log = servetest_slurp(file);
    int lines = 0, epoch_lines = 0;
    for (char *line = train_log ? strtok(train_log, "\n") : NULL; line && logs;
         line = strtok(NULL, "\n")) {
        lines++;
        epoch_lines += strstr(line, "epoch") != NULL;
        if (!strstr(logs, line)) {
            fprintf(stderr, "train.log's line \"%s\" is not in the server's log\n", line);
            check_failures++;
        }
    }
    CHECK(lines >= EPOCHS);
    CHECK(epoch_lines >= EPOCHS);
    free(logs);
    free(train_log);
}

/* The worker `name` in GET /workers: its id into id[cap], its device is `device`. */
static void check_worker(const char *name, char *id, size_t cap)
{
    json_t *list = api_get("/workers");
    json_t *w, *found = NULL;
    size_t i;
    json_array_foreach (json_object_get(list, "workers"), i, w)
        if (!strcmp(json_string_value(json_object_get(w, "name")), name))
            found = w;
    CHECK(found != NULL);
    id[0] = '\0';
    if (found) {
        snprintf(id, cap, "%s", json_string_value(json_object_get(found, "id")));
        json_t *devs = json_object_get(found, "devices");
        json_t *d = json_array_get(devs, 0);
        CHECK_INT(json_array_size(devs), 1);
        CHECK_STR(json_string_value(json_object_get(d, "name")), device.name);
        CHECK_STR(json_string_value(json_object_get(d, "type")), ocl_device_kind(&device));
        CHECK_INT(json_integer_value(json_object_get(d, "index")), device.index);
    }
    json_decref(list);
}

static void test_job_succeeds(void)
{
    char id[64], status[32], worker[128];
    /* The first agent_run may compile every kernel family (the cache is then warm). */
    double took = run_one_job("agent-ok", "small.csv", EPOCHS, 240, id, sizeof id);
    printf("a job of %d epochs: agent_run took %.2f s\n", EPOCHS, took);

    json_t *job = job_get(id);
    CHECK_STR(json_string_value(json_object_get(job, "status")), "succeeded");
    CHECK(json_is_null(json_object_get(job, "error")));
    CHECK_INT(json_integer_value(json_object_get(job, "attempt")), 1);

    json_t *epochs = job_epochs(id);
    CHECK_INT(json_array_size(epochs), EPOCHS);
    size_t i;
    json_t *e;
    json_array_foreach (epochs, i, e) {
        double loss = json_number_value(json_object_get(e, "loss"));
        CHECK_INT(json_integer_value(json_object_get(e, "epoch")), i + 1);
        CHECK(isfinite(loss) && loss > 0);
        CHECK(json_is_number(json_object_get(e, "val_loss")));
    }
    check_artifacts(id, epochs);
    check_logs(id);

    check_worker("agent-ok", worker, sizeof worker);
    CHECK_STR(json_string_value(json_object_get(job, "worker")), worker);
    CHECK_STR(json_string_value(json_object_get(job, "device")), device.name);
    json_decref(epochs);
    json_decref(job);
    job_status(id, status, sizeof status); /* nothing changed it since */
    CHECK_STR(status, "succeeded");
}

static void test_cancel_while_running(void)
{
    char id[64], status[32];
    submit("agent-cancel", "long.csv", LONG_EPOCHS, id, sizeof id);
    agent_thread a;
    double took;
    agent_start(&a, srv.url, "agent-cancel", 1);
    CHECK(wait_epochs(id, 1, 120));
    job_status(id, status, sizeof status);
    CHECK_STR(status, "running");

    job_cancel(id);
    CHECK(agent_join_within(&a, ACT_BOUND_S, &took));
    printf("cancel: agent_run returned %.2f s after it\n", took);
    CHECK_INT(a.rc, 0);
    job_status(id, status, sizeof status);
    CHECK_STR(status, "cancelled");
    json_t *epochs = job_epochs(id);
    CHECK(json_array_size(epochs) >= 1 && json_array_size(epochs) < LONG_EPOCHS);
    json_decref(epochs);
}

static void test_stop_hands_back(void)
{
    char id[64], status[32];
    submit("agent-stop", "long.csv", LONG_EPOCHS, id, sizeof id);
    agent_thread a;
    double took;
    agent_start(&a, srv.url, "agent-stop", 0); /* no max_jobs: only the stop ends it */
    CHECK(wait_epochs(id, 1, 120));
    job_status(id, status, sizeof status);
    CHECK_STR(status, "running");

    a.stop = 2;
    CHECK(agent_join_within(&a, ACT_BOUND_S, &took));
    printf("stop = 2: agent_run returned %.2f s after it\n", took);
    CHECK_INT(a.rc, 0);
    json_t *job = job_get(id);
    CHECK_STR(json_string_value(json_object_get(job, "status")), "queued");
    CHECK(json_is_null(json_object_get(job, "error")));
    json_decref(job);

    /* Cancelled while queued, so that no later agent leases it. */
    job_cancel(id);
    job_status(id, status, sizeof status);
    CHECK_STR(status, "cancelled");
}

static void test_missing_dataset(void)
{
    char id[64];
    run_one_job("agent-missing", "missing.csv", EPOCHS, 60, id, sizeof id);
    json_t *job = job_get(id);
    const char *error = json_string_value(json_object_get(job, "error"));
    CHECK_STR(json_string_value(json_object_get(job, "status")), "failed");
    CHECK(error && strstr(error, "missing.csv"));
    printf("missing dataset: %s\n", error ? error : "(no error)");
    json_decref(job);
}

/* A loopback port bound (so that nothing else takes it) where nothing listens: connecting is
 * refused. The socket into *fd; its port. */
static int refusing_port(int *fd)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(*fd, (struct sockaddr *)&sa, &len) < 0)
        cltest_die("binding a loopback port", strerror(errno));
    return ntohs(sa.sin_port);
}

/* How many times text says that it retries reaching url. */
static int count_retries(const char *text, const char *url)
{
    char needle[256];
    snprintf(needle, sizeof needle, "cannot reach %s, retrying", url);
    int n = 0;
    for (const char *p = text ? strstr(text, needle) : NULL; p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_unreachable_server(void)
{
    int fd;
    char url[128], log[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", refusing_port(&fd));
    /* agent_run says each retry on stderr: it goes to a file while this runs. */
    snprintf(log, sizeof log, "%s/unreachable.log", srv.dir);
    fflush(stderr);
    int saved = dup(2), out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || out < 0 || dup2(out, 2) < 0)
        cltest_die("redirecting stderr", strerror(errno));
    close(out);

    agent_thread a;
    double took;
    agent_start(&a, url, "agent-unreachable", 1);
    int retries = 0;
    double until = time_mono() + 120;
    while (retries < 3 && !agent_done(&a) && time_mono() < until) {
        servetest_sleep_ms(20);
        char *text = servetest_slurp(log);
        retries = count_retries(text, url);
        free(text);
    }
    int early = agent_done(&a);
    a.stop = 1;
    /* A retry sleeps at most 5 s (the backoff's cap) before it sees the stop. */
    int in_time = agent_join_within(&a, 6.5, &took);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *text = servetest_slurp(log);
    fprintf(stderr, "%s", text ? text : "");
    free(text);
    CHECK(!early); /* agent_run did not give up on its own */
    CHECK(retries >= 3);
    CHECK(in_time);
    CHECK_INT(a.rc, 0);
    printf("unreachable server: %d retries, agent_run returned %.2f s after the stop\n", retries,
           took);
}

static void test_device_helpers(void)
{
    char err[ERR_LEN] = "";
    CHECK_STR(agent_first_device(NULL), "any");
    CHECK_STR(agent_first_device(""), "any");
    CHECK_STR(agent_first_device("0,1"), "0");
    CHECK_STR(agent_first_device("gpu"), "gpu");
    CHECK_STR(agent_device_entry("0,1,2", 1), "1");
    CHECK_STR(agent_device_entry("0,1,2", 2), "2");
    CHECK_STR(agent_device_entry("0,1,2", 4), "1"); /* modulo the count */
    CHECK_STR(agent_device_entry("cpu", 7), "cpu");
    CHECK_STR(agent_device_entry(NULL, 3), "any");

    ocl_device *all = NULL, d, untouched;
    size_t n = 0;
    CHECK(ocl_devices_list(&all, &n, err) == 0);
    CHECK(n >= 1);
    CHECK(agent_pick_device("0", &d, err) == 0);
    CHECK_STR(d.name, n ? all[0].name : "");
    CHECK_INT(d.index, 0);
    CHECK(agent_pick_device("any", &d, err) == 0);
    CHECK_STR(d.name, device.name);

    /* A bad index says which and how many there are, and leaves *out as it was. */
    char want[32], count[32];
    snprintf(want, sizeof want, "%zu", n);
    snprintf(count, sizeof count, "(%zu found", n);
    memset(&untouched, 0x5a, sizeof untouched);
    d = untouched;
    err[0] = '\0';
    CHECK_INT(agent_pick_device(want, &d, err), -ENODEV);
    CHECK(strstr(err, want) && strstr(err, count));
    CHECK(!memcmp(&d, &untouched, sizeof d));
    printf("a bad index: %s\n", err);
    err[0] = '\0';
    CHECK_INT(agent_pick_device("-1", &d, err), -ENODEV);
    CHECK(strstr(err, "-1") != NULL);
    err[0] = '\0';
    CHECK(agent_pick_device("1x", &d, err) < 0); /* not a number, nor a kind */
    CHECK(strstr(err, "1x") != NULL);
    CHECK(!memcmp(&d, &untouched, sizeof d));
    free(all);

    json_t *j = agent_device_json(&device);
    CHECK_STR(json_string_value(json_object_get(j, "name")), device.name);
    CHECK_STR(json_string_value(json_object_get(j, "type")), ocl_device_kind(&device));
    CHECK_STR(json_string_value(json_object_get(j, "platform")), device.platform_name);
    CHECK_INT(json_integer_value(json_object_get(j, "index")), device.index);
    CHECK_INT(json_integer_value(json_object_get(j, "compute_units")), device.compute_units);
    CHECK_INT(json_integer_value(json_object_get(j, "global_mem_bytes")), device.global_mem);
    json_decref(j);
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* A worker token from POST /tokens into wtoken. */
static void make_worker_token(void)
{
    json_t *body = json_pack("{s:s, s:s}", "name", "agent-test", "role", "worker");
    long status;
    json_t *reply = api_post("/tokens", body, &status);
    const char *secret = json_string_value(json_object_get(reply, "token"));
    if (status != 201 || !secret)
        cltest_die("POST /tokens", "no worker token");
    snprintf(wtoken, sizeof wtoken, "%s", secret);
    json_decref(reply);
    json_decref(body);
}

int main(void)
{
    char err[ERR_LEN] = "";
    int rc = agent_pick_device("any", &device, err);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0)
        cltest_die("picking an OpenCL device", err);
    signal(SIGPIPE, SIG_IGN);
    if (fetch_global_init(err) < 0) /* before any thread: curl_global_init is not thread-safe */
        cltest_die("fetch_global_init", err);
    test_device_helpers();

    servetest_start(&srv, NULL);
    printf("server: %s, folder %s\n", srv.url, srv.dir);
    if (client_new(srv.url, srv.admin, &api, err) < 0)
        cltest_die("client_new", err);
    make_worker_token();
    char path[1024];
    snprintf(path, sizeof path, "%s/small.csv", srv.dir);
    tf_write_three_class_csv(path, 5, 600);
    snprintf(path, sizeof path, "%s/long.csv", srv.dir);
    tf_write_three_class_csv(path, 7, 4000);

    test_job_succeeds();
    test_cancel_while_running();
    test_stop_hands_back();
    test_missing_dataset();
    test_unreachable_server();

    client_free(api);
    CHECK(servetest_stop(&srv) == 0);
    return check_exit();
}
