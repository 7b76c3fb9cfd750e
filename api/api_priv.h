/* api_priv: what the files of api/ share and nothing else sees — the handlers that routes.c
 * lists, and the helpers every handler uses (api/app.c).
 *
 * Handler conventions (http/http.h): answer with exactly one http_reply_*() and return 0, or
 * return a negative code with a sentence in http_errbuf() and let the error table answer
 * (-ENOENT 404, -EINVAL 400, -EEXIST/-EBUSY 409, -ENOSPC 507, ...). After a change commits, a
 * handler raises app->queued when a job became queued and app->changed on any job change. */
#ifndef TRAINYARD_API_API_PRIV_H
#define TRAINYARD_API_API_PRIV_H

#include "api/app.h"
#include "http/http.h"
#include "db/db.h"
#include "db/jobs.h"
#include "db/tokens.h"
#include "job/job.h"

/* ---- who may call what (api/auth.c) ------------------------------------------------------ */

/* http_route.access: 0 is public, else the bits of the token roles (enum db_role) admitted. */
#define API_PUBLIC      0u
#define API_ROLE_BIT(r) (1u << (r))
#define API_ADMIN       API_ROLE_BIT(DB_ROLE_ADMIN)
#define API_USERS       (API_ROLE_BIT(DB_ROLE_ADMIN) | API_ROLE_BIT(DB_ROLE_USER))
#define API_WORKERS     (API_ROLE_BIT(DB_ROLE_ADMIN) | API_ROLE_BIT(DB_ROLE_WORKER))
#define API_ANY_TOKEN   (API_USERS | API_WORKERS)
#define API_SCRAPERS    (API_ROLE_BIT(DB_ROLE_ADMIN) | API_ROLE_BIT(DB_ROLE_METRICS))

/* The caller of a request that passed api_authorize; all zero (not authenticated) on public
 * routes and without an authorize hook. */
typedef struct api_caller {
    int authenticated;
    char token_id[DB_ID_LEN + 1];
    int role;       /* enum db_role; meaningful only when authenticated */
    int scripts;    /* the token's scripts right (tokens.scripts) */
    int max_queued; /* the token's cap on its queued and running jobs (0: none) */
} api_caller;

/* http_config.authorize: the bearer token, its role against access, a worker's token. */
int api_authorize(http_req *r, void *app, unsigned access);
const api_caller *api_caller_of(http_req *r);
/* The caller holding the token secret (a bearer token's value), from this thread's memory of
 * the checks of the last API_AUTH_TTL_MS, else the database: 0, or -EPERM (unknown, revoked,
 * too long) or -EIO with a sentence in err. api_authorize and gRPC's resolve both use it. */
int api_caller_of_token(app *a, const char *secret, api_caller *out, char *err);
/* 1 when the caller's role sees every job: admin, and worker (only through its leases). An
 * allow-list: a role added later sees no job until it is named here or in api_may_see. */
int api_sees_every_job(const api_caller *c);
/* 1 when the caller may see a job owned by token owner ("" for none): those that see every
 * job, a user its own, anyone else (no role, metrics, not authenticated) none. */
int api_may_see(http_req *r, const char *owner);
/* 1 when the caller may submit script jobs and upload code: an admin, or a user token with the
 * scripts right. */
int api_may_run_scripts(http_req *r);
int api_tokens_create(http_req *r, void *app);
int api_tokens_list(http_req *r, void *app);
int api_tokens_revoke(http_req *r, void *app);

/* api/jobs.c */
int api_jobs_submit(http_req *r, void *app);
int api_jobs_list(http_req *r, void *app);
int api_jobs_get(http_req *r, void *app);
int api_jobs_cancel(http_req *r, void *app);
/* GET /workers/{worker}/jobs/{id}/init_model: the lease holder fetches the model.safetensors
 * of the job's init_from (api/checkpoints.c). */
int api_init_model_get(http_req *r, void *app);
/* POST /jobs/{id}/stop: a graceful stop (sched_job_stop), with an optional {"reason"}. */
int api_jobs_stop(http_req *r, void *app);
int api_jobs_delete(http_req *r, void *app);
/* api/sweeps.c: hyperparameter sweeps (scheduler/sweep.h runs them) */
int api_sweeps_submit(http_req *r, void *app);
int api_sweeps_list(http_req *r, void *app);
int api_sweeps_get(http_req *r, void *app);
int api_sweeps_cancel(http_req *r, void *app);
/* api/job_output.c */
int api_jobs_metrics(http_req *r, void *app);
int api_jobs_metrics_leased(http_req *r, void *app);
int api_jobs_logs(http_req *r, void *app);
int api_jobs_events(http_req *r, void *app);
/* api/artifacts.c */
int api_artifacts_list(http_req *r, void *app);
int api_artifacts_get(http_req *r, void *app);
int api_artifacts_upload(http_req *r, void *app);
/* api/models.c: GET /models; TensorFlow Serving's GetModelStatus for a name or one version. */
int api_models_list(http_req *r, void *app);
int api_models_status(http_req *r, void *app);
int api_models_version_status(http_req *r, void *app);
/* api/predictions.c: TensorFlow Serving's REST predict, classify and regress; a job's predict */
int api_predict(http_req *r, void *app);
int api_predict_version(http_req *r, void *app);
int api_classify(http_req *r, void *app);
int api_classify_version(http_req *r, void *app);
int api_regress(http_req *r, void *app);
int api_regress_version(http_req *r, void *app);
int api_jobs_predict(http_req *r, void *app);
/* api/code.c: users' code for script jobs */
#define API_CODE_MAX_DEFAULT (64ull << 20) /* POST /code bodies when app.max_code_bytes is 0 */
int api_code_upload(http_req *r, void *app);
int api_code_get(http_req *r, void *app);
/* api/checkpoints.c */
int api_checkpoints_upload(http_req *r, void *app);
int api_checkpoints_get(http_req *r, void *app);
/* api/workers.c */
int api_workers_register(http_req *r, void *app);
int api_workers_list(http_req *r, void *app);
int api_workers_lease(http_req *r, void *app);
int api_workers_heartbeat(http_req *r, void *app);
int api_workers_complete(http_req *r, void *app);
int api_workers_release(http_req *r, void *app);
/* api/webhooks.c: webhooks and retention (scheduler/notify.h, scheduler/retention.h) */
int api_jobs_deliveries(http_req *r, void *app);
int api_jobs_patch(http_req *r, void *app);
int api_tokens_webhook_secret(http_req *r, void *app);
/* Submit: every notify[i].url obeys the server's host rules (400 naming each one that does
 * not). Returns 1 after answering, 0 when the job may go on, or a negative code. */
int api_notify_allowed(http_req *r, app *a, const job_spec *spec);
/* api/service.c */
int api_service_health(http_req *r, void *app);
int api_service_devices(http_req *r, void *app);
int api_service_openapi(http_req *r, void *app);
/* Workers last seen at or after this (ms) count as connected. */
int64_t api_live_since(const app *a);
/* api/prometheus.c */
int api_prometheus_scrape(http_req *r, void *app);
/* api/web.c: the dashboard's files (GET /, GET /web/{name}) */
int api_web_index(http_req *r, void *app);
int api_web_file_get(http_req *r, void *app);

/* ---- helpers (api/app.c) ---------------------------------------------------------------- */

/* The calling thread's database; NULL with the reason in the request's error buffer. */
db *api_db(http_req *r, app *a);
/* Raises sig when the server made one (tests may run without). */
void api_raise(http_signal *sig);
/* 400 problem+json listing errs; returns what http_reply_problem returns. */
int api_reply_invalid(http_req *r, const char *title, const field_errors *errs);
/* 400 problem+json for one bad parameter or header. */
int api_reply_bad_param(http_req *r, const char *field, const char *message);
/* Answers 200 with a page of a listing: {key: list, "next_cursor": the cursor after last_seq
 * when more is set, else null}. Takes list (also on failure). */
int api_reply_page(http_req *r, const char *key, json_t *list, int more, int64_t last_seq);
/* The thread's database into *d and the {id} job into *out; -EIO, or -ENOENT with a sentence
 * (also for a job the caller may not see, api_may_see). */
int api_job_find(http_req *r, app *a, db **d, db_job *out);
/* The shared start of a lease holder's upload (an artifact, a checkpoint): its body's file in
 * *tmp within a->max_artifact_bytes, the {id} job found, the {worker} holding its lease (checked
 * early; the storing transaction checks again). what names the upload in messages. */
int api_upload_begin(http_req *r, app *a, const char *what, const char **tmp, uint64_t *len,
                     db **d);
/* The same check without the row: the thread's database into *d when the {id} job exists and
 * the caller may see it; -ENOENT with a sentence otherwise. */
int api_job_mine(http_req *r, app *a, db **d);
/* Names job id in a 404's sentence when rc is -ENOENT; returns rc. */
int api_no_job(http_req *r, int rc, const char *id);
/* Answers 200 {key: list} (list stolen); with rc < 0 drops list and returns rc. */
int api_reply_list(http_req *r, const char *key, json_t *list, int rc);
/* Parses a decimal integer in [min, max] from text; -EINVAL otherwise. */
int api_parse_int(const char *text, long min, long max, long *out);
/* Parses "true"/"false"/"1"/"0" (absent: def); -EINVAL otherwise. */
int api_parse_bool(const char *text, int def, int *out);

#endif
