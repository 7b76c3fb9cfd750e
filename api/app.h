/* app: what the API handlers share — the data directory, the database, the signals that wake
 * parked requests, and the service's settings. `trainyard serve` (serve/serve.c) fills one,
 * starts the HTTP server with api_routes(), and runs the scheduler's housekeeping.
 *
 * Threads: every HTTP pool thread opens its own SQLite connection on first use (app_db());
 * nothing else in app changes after start, except through the scheduler's own locking. */
#ifndef TRAINYARD_API_APP_H
#define TRAINYARD_API_APP_H

#include <stddef.h>
#include <stdint.h>

#include "api/telemetry.h"
#include "predict/grpc.h"
#include "http/http.h"
#include "util/datadir.h"
#include "util/secret.h"

struct db;
struct allow_list;

#define API_PREDICT_SIGNALS 8 /* the signals predict requests park on, spread over them */

typedef struct app {
    /* The data directory and the paths in it that the handlers use (util/datadir.h). */
    char data_dir[DATADIR_PATH_MAX];
    char db_path[DATADIR_PATH_MAX];       /* DATADIR_DB */
    char artifacts_dir[DATADIR_PATH_MAX]; /* DATADIR_ARTIFACTS: one folder per job id */
    char tmp_dir[DATADIR_PATH_MAX];       /* DATADIR_TMP: uploads in flight */
    /* Seals dataset credentials in the database: <data_dir>/credentials.key */
    uint8_t credentials_key[SECRET_KEY_LEN];
    http_server *http;
    http_signal *queued;     /* raised when a job becomes queued: wakes lease long-polls */
    http_signal *changed;    /* raised when any job's status, phase, metrics or logs change */
    int lease_seconds;       /* a lease lapses this long after the last heartbeat (default 30) */
    int worker_gone_seconds; /* a worker unseen this long is listed as gone (default 60) */
    uint64_t max_artifact_bytes; /* per upload (default 4 GiB) */
    uint64_t max_code_bytes;     /* per POST /code body (0: API_CODE_MAX_DEFAULT, 64 MiB) */
    int max_queued_per_token;    /* queued jobs one token may have; 0: no limit */
    int64_t backoffs_seen_to;    /* api_expire announced the back-offs that ended by then */
    telemetry stats;             /* GET /metrics; telemetry_init() before serving */
    const char *version;
    /* Serve's inference engine (predict/predict.h), NULL when predictions are off; predict
     * requests park on predicted[i], which the engine raises when their answer is there. */
    predict_engine *predict;
    http_signal *predicted[API_PREDICT_SIGNALS];
    volatile int stopping; /* set by serve on SIGTERM/SIGINT: submits and leases get 503 */
    /* The host rules notify URLs obey at submit (serve's --dataset-allow; scheduler/notify.h);
     * NULL: none checked. */
    const struct allow_list *notify_allow;
    /* Where job transitions are logged, one line each; NULL: nowhere. */
    void (*log)(const char *line);
} app;

/* Logs one line about a job transition through a->log. */
void app_log(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's database connection, opened on first use; NULL (with a log line) when
 * the database cannot be opened. Closed when the thread exits. */
struct db *app_db(app *a);

/* http_config.json_max_depth for this table: the job document's limit, the deepest any
 * of its bodies may be. */
unsigned api_json_max_depth(void);
/* One scheduler sweep (scheduler/expiry.h) with the calling thread's connection, logging what
 * it did and raising the app's signals (api/housekeeping.c). Returns the number of jobs
 * changed, or a negative code with err filled (err may be NULL). */
int api_expire(app *a, int64_t now, char *err);
/* The workers that token_id registered as name are dead (why says how): sched_workers_lost,
 * then its log lines and signals. Returns the number of jobs changed, or a negative code with
 * err filled. */
int api_workers_lost(app *a, const char *token_id, const char *name, const char *why, int64_t now,
                     char *err);

/* serve --retain-days: removes up to a batch of finished jobs older than days (not kept),
 * logging how many (api/housekeeping.c). Returns the number removed or a negative code. */
int api_retain(app *a, int64_t now, long days, char *err);

struct sched_expiry_stats;
/* Jobs changed outside a request (the Slurm executor's passes, scheduler/slurm.h): logs what
 * st counts under who's name and raises the app's signals (changed always: a log line may be
 * all that changed). */
void api_jobs_changed(app *a, const struct sched_expiry_stats *st, const char *who);

/* The sweep controller's pass (scheduler/sweep.h) queued trials, asked running ones to stop
 * or ended sweeps: its log lines and the API's signals (api/housekeeping.c). */
void api_sweeps_changed(app *a, int trials_created, int stops_requested, int sweeps_finished);

/* Resolves a model for a caller known only by its bearer token (gRPC's metadata), with the
 * REST API's rules: admin and user tokens, a user's own models; predict/grpc.h's
 * predict_resolve_fn with app as its user. */
int api_predict_resolve(app *a, const char *token, const char *name, int64_t version,
                        predict_target *t, char *err);

/* The route table of every endpoint in openapi.yaml. */
const http_route *api_routes(size_t *n);
/* http_config.authorize for that table: bearer tokens and roles (api/auth.c). */
int api_authorize(http_req *r, void *app, unsigned access);

/* The embedded openapi.yaml (generated at build time), and its length. */
extern const char api_openapi_yaml[];
extern const size_t api_openapi_yaml_len;

#endif
