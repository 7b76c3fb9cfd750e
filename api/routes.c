/* routes: api_routes(), the table of every operation in openapi.yaml and its handler.
 *
 * Body caps: JSON bodies HTTP_JSON_MAX_BODY (1 MiB); GET and DELETE take none (0: the
 * framework answers 413 to a body); the two POSTs that need no body (cancel, lease) accept and
 * ignore up to API_IGNORED_BODY bytes, because HTTP clients differ in what they send with an
 * empty POST (nothing, "Content-Length: 0", "{}"). Artifact uploads stream to a file
 * (body_to_file) within API_ARTIFACT_MAX_BODY, the default of app.max_artifact_bytes; the
 * handler enforces a smaller app setting; checkpoint uploads likewise (the table is static and
 * cannot see the app).
 *
 * Access: who may call each route (api/auth.c): API_USERS (admin and user tokens; a user sees
 * only its own jobs), API_WORKERS (admin and worker tokens: the worker protocol), API_ADMIN,
 * API_ANY_TOKEN, API_SCRAPERS (admin and metrics tokens: GET /metrics), and API_PUBLIC for the
 * health check and the dashboard's static files.
 *
 * Keep this table and openapi.yaml in step: the end-to-end test walks every operation of the
 * YAML against the server. */
#include "api/api_priv.h"

#define API_IGNORED_BODY      4096
#define API_ARTIFACT_MAX_BODY (4ull << 30) /* 4 GiB */
/* A heartbeat holds up to API_MAX_LOG_LINES lines of API_LOG_LINE_CHARS characters, each of
 * which may take 6 bytes of JSON escaping, plus its epochs. */
#define API_HEARTBEAT_MAX_BODY (8u << 20)
#define API_PREDICT_MAX_BODY   (32u << 20) /* instances, images in base64 among them */

static const http_route api_route_table[] = {
    /* jobs */
    {"POST", "/train", api_jobs_submit, HTTP_JSON_MAX_BODY, 0, API_USERS},
    {"GET", "/jobs", api_jobs_list, 0, 0, API_USERS},
    {"GET", "/jobs/{id}", api_jobs_get, 0, 0, API_USERS},
    {"DELETE", "/jobs/{id}", api_jobs_delete, 0, 0, API_USERS},
    {"POST", "/jobs/{id}/cancel", api_jobs_cancel, API_IGNORED_BODY, 0, API_USERS},
    {"POST", "/jobs/{id}/stop", api_jobs_stop, HTTP_JSON_MAX_BODY, 0, API_USERS},
    {"GET", "/jobs/{id}/metrics", api_jobs_metrics, 0, 0, API_USERS},
    {"GET", "/jobs/{id}/logs", api_jobs_logs, 0, 0, API_USERS},
    {"GET", "/jobs/{id}/events", api_jobs_events, 0, 0, API_USERS},
    {"GET", "/jobs/{id}/artifacts", api_artifacts_list, 0, 0, API_USERS},
    /* webhooks and retention (api/webhooks.c) */
    {"GET", "/jobs/{id}/deliveries", api_jobs_deliveries, 0, 0, API_USERS},
    {"PATCH", "/jobs/{id}", api_jobs_patch, HTTP_JSON_MAX_BODY, 0, API_USERS},
    {"POST", "/tokens/{id}/webhook-secret", api_tokens_webhook_secret, API_IGNORED_BODY, 0,
     API_USERS},
    {"GET", "/jobs/{id}/artifacts/{name}", api_artifacts_get, 0, 0, API_USERS},
    /* sweeps (api/sweeps.c): their trials are jobs, GET /jobs?sweep= */
    {"POST", "/sweeps", api_sweeps_submit, HTTP_JSON_MAX_BODY, 0, API_USERS},
    {"GET", "/sweeps", api_sweeps_list, 0, 0, API_USERS},
    {"GET", "/sweeps/{id}", api_sweeps_get, 0, 0, API_USERS},
    {"POST", "/sweeps/{id}/cancel", api_sweeps_cancel, API_IGNORED_BODY, 0, API_USERS},
    /* models: succeeded jobs' models by name and version (TensorFlow Serving's model status) */
    {"GET", "/models", api_models_list, 0, 0, API_USERS},
    {"GET", "/v1/models/{name}", api_models_status, 0, 0, API_USERS},
    {"GET", "/v1/models/{name}/versions/{version}", api_models_version_status, 0, 0, API_USERS},
    /* predictions (api/predictions.c): TensorFlow Serving's REST paths, and one job's model */
    {"POST", "/v1/models/{name}:predict", api_predict, API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/v1/models/{name}/versions/{version}:predict", api_predict_version,
     API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/v1/models/{name}:classify", api_classify, API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/v1/models/{name}/versions/{version}:classify", api_classify_version,
     API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/v1/models/{name}:regress", api_regress, API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/v1/models/{name}/versions/{version}:regress", api_regress_version,
     API_PREDICT_MAX_BODY, 0, API_USERS},
    {"POST", "/jobs/{id}/predict", api_jobs_predict, API_PREDICT_MAX_BODY, 0, API_USERS},
    /* code of script jobs: uploaded by users with the scripts right, fetched by workers */
    {"POST", "/code", api_code_upload, API_ARTIFACT_MAX_BODY, 1, API_USERS},
    {"GET", "/code/{address}", api_code_get, 0, 0, API_WORKERS},
    /* service */
    {"GET", "/devices", api_service_devices, 0, 0, API_USERS},
    {"GET", "/workers", api_workers_list, 0, 0, API_USERS},
    {"GET", "/healthz", api_service_health, 0, 0, API_PUBLIC},
    {"GET", "/openapi.yaml", api_service_openapi, 0, 0, API_ANY_TOKEN},
    {"GET", "/metrics", api_prometheus_scrape, 0, 0, API_SCRAPERS},
    /* the dashboard (api/web.c): public files; the data they fetch needs a token */
    {"GET", "/", api_web_index, 0, 0, API_PUBLIC},
    {"GET", "/web/{name}", api_web_file_get, 0, 0, API_PUBLIC},
    /* tokens */
    {"POST", "/tokens", api_tokens_create, HTTP_JSON_MAX_BODY, 0, API_ADMIN},
    {"GET", "/tokens", api_tokens_list, 0, 0, API_ADMIN},
    {"DELETE", "/tokens/{id}", api_tokens_revoke, 0, 0, API_ADMIN},
    /* workers */
    {"POST", "/workers", api_workers_register, HTTP_JSON_MAX_BODY, 0, API_WORKERS},
    {"POST", "/workers/{worker}/lease", api_workers_lease, API_IGNORED_BODY, 0, API_WORKERS},
    {"POST", "/workers/{worker}/jobs/{id}/heartbeat", api_workers_heartbeat, API_HEARTBEAT_MAX_BODY,
     0, API_WORKERS},
    {"PUT", "/workers/{worker}/jobs/{id}/artifacts/{name}", api_artifacts_upload,
     API_ARTIFACT_MAX_BODY, 1, API_WORKERS},
    {"GET", "/workers/{worker}/jobs/{id}/checkpoint", api_checkpoints_get, 0, 0, API_WORKERS},
    {"GET", "/workers/{worker}/jobs/{id}/init_model", api_init_model_get, 0, 0, API_WORKERS},
    {"GET", "/workers/{worker}/jobs/{id}/metrics", api_jobs_metrics_leased, 0, 0, API_WORKERS},
    {"PUT", "/workers/{worker}/jobs/{id}/checkpoint", api_checkpoints_upload, API_ARTIFACT_MAX_BODY,
     1, API_WORKERS},
    {"POST", "/workers/{worker}/jobs/{id}/complete", api_workers_complete, HTTP_JSON_MAX_BODY, 0,
     API_WORKERS},
    {"POST", "/workers/{worker}/jobs/{id}/release", api_workers_release, API_IGNORED_BODY, 0,
     API_WORKERS},
};

const http_route *api_routes(size_t *n)
{
    *n = sizeof api_route_table / sizeof api_route_table[0];
    return api_route_table;
}

unsigned api_json_max_depth(void)
{
    return JOB_MAX_JSON_DEPTH;
}
