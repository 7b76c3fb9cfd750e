/* Unit tests of the API handlers over a fake HTTP framework (fake_http.c): a job's whole life
 * through the handlers as a worker and a user would drive it — submit (202, idempotent 200,
 * 409, 400 naming fields), list with filters and cursors, get, register, lease (at once, and
 * parked on the queued signal until a submit), heartbeat, logs and events streams ending after
 * the job ends, metrics, artifact upload and download headers, complete, cancel, delete,
 * healthz, devices and openapi.yaml. The real framework's own tests and the end-to-end tests
 * cover HTTP itself; this checks what the handlers decide and answer. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/job_json.h"
#include "db/jobs.h"
#include "tests/unit/api/fake_http.c"
#include "tests/unit/check.h"
#include "util/timeutil.h"

static char tmp_dir[] = "/tmp/trainyard-test-api-XXXXXX";
static app the_app;
static http_signal sig_queued, sig_changed;

static const char JOB_DOC[] = "{\"name\":\"spirals\",\"dataset_url\":\"file:///data/s.csv\","
                              "\"hyperparameters\":{\"epochs\":2}}";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void app_setup(void)
{
    memset(&the_app, 0, sizeof the_app);
    snprintf(the_app.data_dir, sizeof the_app.data_dir, "%s", tmp_dir);
    snprintf(the_app.db_path, sizeof the_app.db_path, "%s/trainyard.db", tmp_dir);
    snprintf(the_app.artifacts_dir, sizeof the_app.artifacts_dir, "%s/artifacts", tmp_dir);
    snprintf(the_app.tmp_dir, sizeof the_app.tmp_dir, "%s/tmp", tmp_dir);
    mkdir(the_app.artifacts_dir, 0755);
    mkdir(the_app.tmp_dir, 0755);
    the_app.queued = &sig_queued;
    the_app.changed = &sig_changed;
    the_app.lease_seconds = 30;
    the_app.worker_gone_seconds = 60;
    the_app.max_artifact_bytes = 1 << 20;
    the_app.version = "test";
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* POST /train with body (and a key); returns the status, the id in id when given. */
static int submit(const char *body, const char *key, char id[DB_ID_LEN + 1])
{
    http_req r;
    fake_req_init(&r, "POST", "/train");
    r.body = body;
    if (key)
        fake_header(&r, "Idempotency-Key", key);
    int status = fake_call(&r, api_jobs_submit, &the_app);
    if (id && (status == 202 || status == 200))
        snprintf(id, DB_ID_LEN + 1, "%s", jstr(r.json, "id"));
    fake_req_free(&r);
    return status;
}

static void test_submit(void)
{
    char id[DB_ID_LEN + 1], again[DB_ID_LEN + 1];
    http_req r;
    fake_req_init(&r, "POST", "/train");
    r.body = JOB_DOC;
    fake_header(&r, "Idempotency-Key", "abc");
    int raised = sig_queued.raised;
    CHECK_INT(fake_call(&r, api_jobs_submit, &the_app), 202);
    CHECK_INT(sig_queued.raised, raised + 1);
    snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
    char loc[64];
    snprintf(loc, sizeof loc, "/jobs/%s", id);
    CHECK_STR(fake_resp_header(&r, "Location"), loc);
    CHECK_STR(jstr(r.json, "status"), "queued");
    CHECK_STR(jstr(r.json, "name"), "spirals");
    json_t *doc = json_object_get(r.json, "document");
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(doc, "hyperparameters"), "batch_size")),
        32); /* defaults resolved */
    fake_req_free(&r);

    /* the same document, spelled differently, is a retry; another document a conflict */
    CHECK_INT(submit("{\"hyperparameters\":{\"epochs\":2},\"dataset_url\":\"file:///data/s.csv\","
                     "\"name\":\"spirals\",\"priority\":0}",
                     "abc", again),
              200);
    CHECK_STR(again, id);
    CHECK_INT(sig_queued.raised, raised + 1);
    fake_req_init(&r, "POST", "/train");
    r.body = "{\"dataset_url\":\"file:///x.csv\",\"hyperparameters\":{}}";
    fake_header(&r, "Idempotency-Key", "abc");
    CHECK_INT(fake_call(&r, api_jobs_submit, &the_app), 409);
    CHECK(strstr(jstr(r.json, "detail"), "Idempotency-Key reused") != NULL);
    fake_req_free(&r);

    /* invalid documents: every bad field named */
    fake_req_init(&r, "POST", "/train");
    r.body = "{\"hyperparameters\":{\"epochs\":0},\"colour\":1}";
    CHECK_INT(fake_call(&r, api_jobs_submit, &the_app), 400);
    json_t *errs = json_object_get(r.json, "errors");
    CHECK(json_array_size(errs) >= 3);
    CHECK_STR(r.content_type, "application/problem+json");
    fake_req_free(&r);
    CHECK_INT(submit("not json", NULL, NULL), 400);
    CHECK_INT(submit(JOB_DOC, "", NULL), 400);

    fake_req_init(&r, "GET", "/jobs/x");
    fake_param(&r, "id", id);
    CHECK_INT(fake_call(&r, api_jobs_get, &the_app), 200);
    CHECK_STR(jstr(r.json, "id"), id);
    fake_req_free(&r);
    fake_req_init(&r, "GET", "/jobs/x");
    fake_param(&r, "id", "nope");
    CHECK_INT(fake_call(&r, api_jobs_get, &the_app), 404);
    fake_req_free(&r);
}

/* GET /jobs with the given query; returns the status, the page in *page (caller frees). */
static int list(const char *status, const char *name, const char *limit, const char *cursor,
                json_t **page)
{
    http_req r;
    fake_req_init(&r, "GET", "/jobs");
    if (status)
        fake_query(&r, "status", status);
    if (name)
        fake_query(&r, "name", name);
    if (limit)
        fake_query(&r, "limit", limit);
    if (cursor)
        fake_query(&r, "cursor", cursor);
    int st = fake_call(&r, api_jobs_list, &the_app);
    *page = json_incref(r.json);
    fake_req_free(&r);
    return st;
}

static void test_list(void)
{
    char ids[5][DB_ID_LEN + 1];
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"name\":\"page-%d\",\"dataset_url\":\"file:///x.csv\","
                 "\"hyperparameters\":{}}",
                 i % 2);
        CHECK_INT(submit(body, NULL, ids[i]), 202);
    }
    /* newest first, two at a time, until next_cursor is null */
    json_t *page = NULL;
    char cursor[API_CURSOR_MAX + 1] = "";
    int seen = 0, pages = 0;
    for (;;) {
        CHECK_INT(list(NULL, NULL, "2", cursor[0] ? cursor : NULL, &page), 200);
        json_t *jobs = json_object_get(page, "jobs");
        CHECK(json_array_size(jobs) <= 2);
        if (pages == 0)
            CHECK_STR(jstr(json_array_get(jobs, 0), "id"), ids[4]);
        seen += (int)json_array_size(jobs);
        pages++;
        json_t *next = json_object_get(page, "next_cursor");
        CHECK(next != NULL);
        if (json_is_null(next) || pages > 10) {
            json_decref(page);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
        json_decref(page);
    }
    CHECK_INT(seen, 6); /* and the job of test_submit */
    CHECK_INT(pages, 3);

    CHECK_INT(list("queued", "page-1", NULL, NULL, &page), 200);
    json_t *jobs = json_object_get(page, "jobs");
    CHECK_INT(json_array_size(jobs), 2);
    CHECK_STR(jstr(json_array_get(jobs, 0), "id"), ids[3]);
    CHECK_STR(jstr(json_array_get(jobs, 1), "id"), ids[1]);
    CHECK(json_is_null(json_object_get(page, "next_cursor")));
    json_decref(page);
    CHECK_INT(list("running", NULL, NULL, NULL, &page), 200);
    CHECK_INT(json_array_size(json_object_get(page, "jobs")), 0);
    json_decref(page);

    CHECK_INT(list("paused", NULL, NULL, NULL, &page), 400);
    CHECK_STR(jstr(json_array_get(json_object_get(page, "errors"), 0), "field"), "status");
    json_decref(page);
    CHECK_INT(list(NULL, NULL, "0", NULL, &page), 400);
    json_decref(page);
    CHECK_INT(list(NULL, NULL, "501", NULL, &page), 400);
    json_decref(page);
    CHECK_INT(list(NULL, NULL, "ten", NULL, &page), 400);
    json_decref(page);
    CHECK_INT(list(NULL, NULL, NULL, "garbage!", &page), 400);
    json_decref(page);
}

/* Cancels every queued job so the worker tests start from an empty queue. */
static int cancel_each(void *ctx, const db_job *j)
{
    (void)ctx;
    http_req r;
    fake_req_init(&r, "POST", "/jobs/x/cancel");
    fake_param(&r, "id", j->id);
    CHECK_INT(fake_call(&r, api_jobs_cancel, &the_app), 200);
    CHECK_STR(jstr(r.json, "status"), "cancelled");
    fake_req_free(&r);
    return 0;
}

static void drain_queue(void)
{
    char err[ERR_LEN];
    db_job_filter f = {.status = DB_QUEUED, .limit = 100};
    CHECK_INT(db_job_list(app_db(&the_app), &f, cancel_each, NULL, err), 0);
}

static void register_worker(char id[DB_ID_LEN + 1])
{
    http_req r;
    fake_req_init(&r, "POST", "/workers");
    r.body =
        "{\"name\":\"box\",\"devices\":[{\"index\":0,\"name\":\"Fake GPU\",\"type\":\"gpu\"}]}";
    CHECK_INT(fake_call(&r, api_workers_register, &the_app), 201);
    CHECK_STR(jstr(r.json, "status"), "idle");
    CHECK_INT(json_integer_value(json_object_get(r.json, "lease_seconds")), 30);
    snprintf(id, DB_ID_LEN + 1, "%s", jstr(r.json, "id"));
    fake_req_free(&r);
    fake_req_init(&r, "POST", "/workers");
    r.body = "{\"name\":\"box\",\"devices\":[]}";
    CHECK_INT(fake_call(&r, api_workers_register, &the_app), 400);
    fake_req_free(&r);
}

/* POST heartbeat with body; returns the status. */
static int heartbeat(const char *worker, const char *job, const char *body, json_t **answer)
{
    http_req r;
    fake_req_init(&r, "POST", "/workers/w/jobs/j/heartbeat");
    fake_param(&r, "worker", worker);
    fake_param(&r, "id", job);
    r.body = body;
    int st = fake_call(&r, api_workers_heartbeat, &the_app);
    if (answer)
        *answer = json_incref(r.json);
    fake_req_free(&r);
    return st;
}

static void test_worker_protocol(void)
{
    char w[DB_ID_LEN + 1], id[DB_ID_LEN + 1];
    drain_queue();
    register_worker(w);

    /* nothing queued: wait=0 answers 204; a long poll parks on the queued signal */
    http_req lease;
    fake_req_init(&lease, "POST", "/workers/w/lease");
    fake_param(&lease, "worker", w);
    fake_query(&lease, "wait", "0");
    CHECK_INT(fake_call(&lease, api_workers_lease, &the_app), 204);
    fake_req_free(&lease);
    fake_req_init(&lease, "POST", "/workers/w/lease");
    fake_param(&lease, "worker", w);
    fake_query(&lease, "wait", "61");
    CHECK_INT(fake_call(&lease, api_workers_lease, &the_app), 400);
    fake_req_free(&lease);
    fake_req_init(&lease, "POST", "/workers/w/lease");
    fake_param(&lease, "worker", "unknown");
    CHECK_INT(fake_call(&lease, api_workers_lease, &the_app), 404);
    fake_req_free(&lease);

    fake_req_init(&lease, "POST", "/workers/w/lease");
    fake_param(&lease, "worker", w);
    fake_query(&lease, "wait", "20");
    fake_call(&lease, api_workers_lease, &the_app);
    CHECK(lease.parked);
    CHECK(lease.park_sig == &sig_queued);
    CHECK(lease.park_ms > 0 && lease.park_ms <= 2000);
    fake_wake(&lease, api_workers_lease, &the_app, 1); /* a re-check finds nothing: parks again */
    CHECK(lease.parked);
    CHECK_INT(submit(JOB_DOC, NULL, id), 202);
    CHECK_INT(fake_wake(&lease, api_workers_lease, &the_app, 0), 200);
    CHECK_STR(jstr(lease.json, "job_id"), id);
    CHECK_INT(json_integer_value(json_object_get(lease.json, "attempt")), 1);
    CHECK(jstr(lease.json, "lease_expires_at") != NULL);
    CHECK(json_is_object(json_object_get(lease.json, "document")));
    fake_req_free(&lease);

    /* streams opened while running: nothing yet, so they wait */
    http_req logs, events;
    fake_req_init(&logs, "GET", "/jobs/j/logs");
    fake_param(&logs, "id", id);
    fake_query(&logs, "follow", "true");
    CHECK_INT(fake_call(&logs, api_jobs_logs, &the_app), 200);
    CHECK(logs.stream_sig == &sig_changed);
    CHECK_INT(fake_drain(&logs), HTTP_PULL_WAIT);
    CHECK_INT(logs.len, 0);
    fake_req_init(&events, "GET", "/jobs/j/events");
    fake_param(&events, "id", id);
    CHECK_INT(fake_call(&events, api_jobs_events, &the_app), 200);
    CHECK_STR(events.content_type, "text/event-stream");
    CHECK_INT(fake_drain(&events), HTTP_PULL_WAIT);
    CHECK(strncmp(events.bytes, "event: status\ndata: {", 21) == 0);
    CHECK(strstr(events.bytes, "\"status\":\"running\"") != NULL);

    /* heartbeats: progress, refusals */
    json_t *answer = NULL;
    CHECK_INT(heartbeat(w, id,
                        "{\"phase\":\"training\",\"logs\":[\"epoch 1 done\"],\"epochs\":"
                        "[{\"epoch\":1,\"loss\":0.7,\"val_loss\":null,\"accuracy\":0.5,"
                        "\"val_accuracy\":null,\"seconds\":0.1,\"samples_per_second\":10}]}",
                        &answer),
              200);
    CHECK(json_is_false(json_object_get(answer, "cancel")));
    CHECK(jstr(answer, "lease_expires_at") != NULL);
    json_decref(answer);
    CHECK_INT(heartbeat(w, id, "{\"phase\":\"sleeping\"}", NULL), 400);
    CHECK_INT(heartbeat("someone-else", id, "{}", NULL), 409);
    CHECK_INT(heartbeat(w, "no-such-job", "{}", NULL), 404);
    CHECK_INT(fake_drain(&logs), HTTP_PULL_WAIT);
    CHECK_STR(logs.bytes, "epoch 1 done\n");
    CHECK_INT(fake_drain(&events), HTTP_PULL_WAIT);
    CHECK(strstr(events.bytes, "event: metrics\ndata: {\"epoch\":1") != NULL);
    CHECK(strstr(events.bytes, "\"phase\":\"training\"") != NULL);

    http_req m;
    fake_req_init(&m, "GET", "/jobs/j/metrics");
    fake_param(&m, "id", id);
    CHECK_INT(fake_call(&m, api_jobs_metrics, &the_app), 200);
    json_t *epochs = json_object_get(m.json, "epochs");
    CHECK_INT(json_array_size(epochs), 1);
    CHECK(json_is_null(json_object_get(json_array_get(epochs, 0), "val_loss")));
    fake_req_free(&m);

    /* an artifact: upload by the lease holder, then the download's headers */
    char up[512];
    snprintf(up, sizeof up, "%s/tmp/upload", tmp_dir);
    FILE *f = fopen(up, "w");
    fputs("abc", f);
    fclose(f);
    http_req put;
    fake_req_init(&put, "PUT", "/workers/w/jobs/j/artifacts/n");
    fake_param(&put, "worker", w);
    fake_param(&put, "id", id);
    fake_param(&put, "name", "../etc");
    put.body_file = up;
    CHECK_INT(fake_call(&put, api_artifacts_upload, &the_app), 400);
    fake_req_free(&put);
    fake_req_init(&put, "PUT", "/workers/w/jobs/j/artifacts/n");
    fake_param(&put, "worker", w);
    fake_param(&put, "id", id);
    fake_param(&put, "name", "model.bin");
    put.body_file = up;
    CHECK_INT(fake_call(&put, api_artifacts_upload, &the_app), 201);
    /* SHA-256("abc") */
    static const char abc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    CHECK_STR(jstr(put.json, "sha256"), abc);
    CHECK_INT(json_integer_value(json_object_get(put.json, "size")), 3);
    fake_req_free(&put);
    http_req get;
    fake_req_init(&get, "GET", "/jobs/j/artifacts/n");
    fake_param(&get, "id", id);
    fake_param(&get, "name", "model.bin");
    CHECK_INT(fake_call(&get, api_artifacts_get, &the_app), 200);
    CHECK(strstr(get.file, "/artifacts/") && strstr(get.file, "model.bin"));
    CHECK_INT(access(get.file, R_OK), 0);
    char etag[80];
    snprintf(etag, sizeof etag, "\"%s\"", abc);
    CHECK_STR(get.etag, etag);
    CHECK_STR(fake_resp_header(&get, "Repr-Digest"),
              "sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:");
    CHECK_STR(fake_resp_header(&get, "Digest"),
              "SHA-256=ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
    fake_req_free(&get);
    fake_req_init(&get, "GET", "/jobs/j/artifacts");
    fake_param(&get, "id", id);
    CHECK_INT(fake_call(&get, api_artifacts_list, &the_app), 200);
    CHECK_INT(json_array_size(json_object_get(get.json, "artifacts")), 1);
    fake_req_free(&get);

    /* cancel while running: requested, seen by the next heartbeat, then the worker stops */
    http_req c;
    fake_req_init(&c, "POST", "/jobs/j/cancel");
    fake_param(&c, "id", id);
    CHECK_INT(fake_call(&c, api_jobs_cancel, &the_app), 200);
    CHECK(json_is_true(json_object_get(c.json, "cancel_requested")));
    fake_req_free(&c);
    CHECK_INT(heartbeat(w, id, "{\"logs\":[\"stopping\"]}", &answer), 200);
    CHECK(json_is_true(json_object_get(answer, "cancel")));
    json_decref(answer);
    http_req done;
    fake_req_init(&done, "POST", "/workers/w/jobs/j/complete");
    fake_param(&done, "worker", w);
    fake_param(&done, "id", id);
    done.body = "{\"status\":\"cancelled\"}";
    CHECK_INT(fake_call(&done, api_workers_complete, &the_app), 200);
    CHECK_STR(jstr(done.json, "status"), "cancelled");
    fake_req_free(&done);

    /* the streams send the rest and end */
    CHECK_INT(fake_drain(&logs), HTTP_PULL_END);
    CHECK_STR(logs.bytes, "epoch 1 done\nstopping\n");
    CHECK_INT(fake_drain(&events), HTTP_PULL_END);
    CHECK(strstr(events.bytes, "\"status\":\"cancelled\"") != NULL);
    fake_req_free(&logs);
    fake_req_free(&events);

    /* a finished job cannot be cancelled; it can be deleted, with its files */
    fake_req_init(&c, "POST", "/jobs/j/cancel");
    fake_param(&c, "id", id);
    CHECK_INT(fake_call(&c, api_jobs_cancel, &the_app), 409);
    fake_req_free(&c);
    fake_req_init(&c, "DELETE", "/jobs/j");
    fake_param(&c, "id", id);
    CHECK_INT(fake_call(&c, api_jobs_delete, &the_app), 204);
    fake_req_free(&c);
    fake_req_init(&c, "DELETE", "/jobs/j");
    fake_param(&c, "id", id);
    CHECK_INT(fake_call(&c, api_jobs_delete, &the_app), 404);
    fake_req_free(&c);
}

static void test_service(void)
{
    http_req r;
    fake_req_init(&r, "GET", "/healthz");
    CHECK_INT(fake_call(&r, api_service_health, &the_app), 200);
    CHECK_STR(jstr(r.json, "status"), "ok");
    CHECK_STR(jstr(r.json, "version"), "test");
    CHECK_INT(json_integer_value(json_object_get(r.json, "workers")), 1);
    CHECK_INT(json_object_size(r.json), 5);
    fake_req_free(&r);

    fake_req_init(&r, "GET", "/devices");
    CHECK_INT(fake_call(&r, api_service_devices, &the_app), 200);
    json_t *dev = json_array_get(json_object_get(r.json, "devices"), 0);
    CHECK_STR(jstr(dev, "name"), "Fake GPU");
    CHECK(jstr(dev, "worker") != NULL);
    fake_req_free(&r);

    fake_req_init(&r, "GET", "/workers");
    CHECK_INT(fake_call(&r, api_workers_list, &the_app), 200);
    CHECK_INT(json_array_size(json_object_get(r.json, "workers")), 1);
    fake_req_free(&r);

    fake_req_init(&r, "GET", "/openapi.yaml");
    CHECK_INT(fake_call(&r, api_service_openapi, &the_app), 200);
    CHECK(strncmp(r.bytes, "openapi: 3.1.0", 14) == 0);
    CHECK_INT(r.len, api_openapi_yaml_len);
    CHECK_STR(r.content_type, "application/yaml");
    fake_req_free(&r);

    size_t n = 0;
    const http_route *routes = api_routes(&n);
    CHECK_INT(n, 19);
    for (size_t i = 0; i < n; i++)
        CHECK(routes[i].handler != NULL);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    app_setup();
    test_submit();
    test_list();
    test_worker_protocol();
    test_service();
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
