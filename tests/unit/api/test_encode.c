/* Unit tests of api/encode and api/bodies: the Job JSON has exactly the members the Job
 * schema of openapi.yaml requires and allows (read from the YAML itself), with the right types
 * and nulls; times are RFC 3339 UTC with milliseconds; EpochMetrics, Artifact, Worker and
 * Lease objects; base64 and the list cursor (round trip, and refusal of other forms); and
 * the worker protocol's body validators naming each bad field. */
#include "api/encode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/bodies.h"
#include "db/tokens.h"
#include "tests/unit/check.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- the Job schema, read from openapi.yaml ----------------------------------------------- */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The names in the Job schema's `required: [...]` and under its `properties:` (the YAML's
 * layout: schemas at 4 spaces, their keys at 6, property names at 8). */
static int job_schema(char required[32][32], int *n_req, char props[32][32], int *n_props)
{
    const char *root = getenv("TRAINYARD_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/openapi.yaml", root ? root : ".");
    char *yaml = read_file(path);
    if (!yaml)
        return -1;
    const char *job = strstr(yaml, "\n    Job:\n");
    const char *req = job ? strstr(job, "required: [") : NULL;
    const char *end = req ? strchr(req, ']') : NULL;
    *n_req = *n_props = 0;
    for (const char *p = req ? req + 11 : NULL; p && p < end;) {
        while (p < end && (*p == ' ' || *p == ',' || *p == '\n'))
            p++;
        size_t len = strcspn(p, " ,\n]");
        if (len && *n_req < 32)
            snprintf(required[(*n_req)++], 32, "%.*s", (int)len, p);
        p += len;
    }
    const char *props_at = job ? strstr(job, "\n      properties:\n") : NULL;
    for (const char *line = props_at ? props_at + 19 : NULL; line && *line;) {
        int indent = (int)strspn(line, " ");
        if (indent < 8 && line[indent] != '\n')
            break;
        if (indent == 8 && *n_props < 32) {
            size_t len = strcspn(line + 8, ":");
            snprintf(props[(*n_props)++], 32, "%.*s", (int)len, line + 8);
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    free(yaml);
    return job && req && props_at ? 0 : -1;
}

static db_job sample_job(void)
{
    db_job j;
    memset(&j, 0, sizeof j);
    j.seq = 7;
    snprintf(j.id, sizeof j.id, "%s", "0123456789abcdef0123456789abcdef");
    snprintf(j.name, sizeof j.name, "%s", "digits-mlp");
    j.status = DB_QUEUED;
    j.max_attempts = 3;
    j.priority = -4;
    j.created_at = 1714566896789; /* 2024-05-01T12:34:56.789Z */
    j.document = strdup("{\"name\":\"digits-mlp\",\"hyperparameters\":{\"epochs\":2}}");
    return j;
}

static void test_encode_job_schema(void)
{
    char required[32][32], props[32][32];
    int n_req = 0, n_props = 0;
    if (job_schema(required, &n_req, props, &n_props) < 0) {
        fprintf(stderr, "cannot read the Job schema from openapi.yaml\n");
        check_failures++;
        return;
    }
    CHECK(n_req >= 16);
    CHECK_INT(n_props,
              n_req + 3); /* attempts, model: GET /jobs/{id} only; waiting: not in streams */

    db_job j = sample_job();
    json_t *o = api_encode_job(&j);
    CHECK(o != NULL);
    for (int i = 0; o && i < n_req; i++) {
        if (!json_object_get(o, required[i])) {
            fprintf(stderr, "Job JSON lacks required member %s\n", required[i]);
            check_failures++;
        }
    }
    const char *key;
    json_t *val;
    json_object_foreach (o, key, val) {
        int known = 0;
        for (int i = 0; i < n_props; i++)
            known |= strcmp(key, props[i]) == 0;
        if (!known) {
            fprintf(stderr, "Job JSON has %s, which the schema does not allow\n", key);
            check_failures++;
        }
    }

    /* types and nulls of a queued job */
    CHECK_STR(json_string_value(json_object_get(o, "id")), j.id);
    CHECK_STR(json_string_value(json_object_get(o, "status")), "queued");
    CHECK(json_is_null(json_object_get(o, "phase")));
    CHECK(json_is_integer(json_object_get(o, "attempt")));
    CHECK_INT(json_integer_value(json_object_get(o, "priority")), -4);
    CHECK_STR(json_string_value(json_object_get(o, "created_at")), "2024-05-01T12:34:56.789Z");
    CHECK(json_is_null(json_object_get(o, "started_at")));
    CHECK(json_is_null(json_object_get(o, "finished_at")));
    CHECK(json_is_null(json_object_get(o, "error")));
    CHECK(json_is_null(json_object_get(o, "device")));
    CHECK(json_is_null(json_object_get(o, "worker")));
    CHECK(json_is_false(json_object_get(o, "cancel_requested")));
    json_t *doc = json_object_get(o, "document");
    CHECK(json_is_object(doc));
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(doc, "hyperparameters"), "epochs")), 2);
    json_t *links = json_object_get(o, "links");
    CHECK_STR(json_string_value(json_object_get(links, "self")),
              "/jobs/0123456789abcdef0123456789abcdef");
    CHECK_STR(json_string_value(json_object_get(links, "cancel")),
              "/jobs/0123456789abcdef0123456789abcdef/cancel");
    CHECK_INT(json_object_size(links), 6);
    json_decref(o);

    /* a running job: every nullable member set */
    j.status = DB_RUNNING;
    j.phase = DB_PHASE_TRAINING;
    j.attempt = 2;
    j.started_at = 1714566900000;
    snprintf(j.device, sizeof j.device, "%s", "NVIDIA H100");
    snprintf(j.worker_id, sizeof j.worker_id, "%s", "ffffffffffffffffffffffffffffffff");
    j.cancel_requested = 1;
    j.error = strdup("lease expired");
    o = api_encode_job(&j);
    CHECK_STR(json_string_value(json_object_get(o, "phase")), "training");
    CHECK_STR(json_string_value(json_object_get(o, "started_at")), "2024-05-01T12:35:00.000Z");
    CHECK_STR(json_string_value(json_object_get(o, "device")), "NVIDIA H100");
    CHECK_STR(json_string_value(json_object_get(o, "worker")), j.worker_id);
    CHECK_STR(json_string_value(json_object_get(o, "error")), "lease expired");
    CHECK(json_is_true(json_object_get(o, "cancel_requested")));

    /* The text form splices the stored document in: it must say exactly what the object says,
     * also when a string value holds the member's own spelling. */
    size_t len = 0;
    char *text = api_encode_job_text(&j, &len);
    json_t *back = text ? json_loadb(text, len, 0, NULL) : NULL;
    CHECK(back != NULL && json_equal(back, o));
    CHECK(text && strlen(text) == len);
    json_decref(back);
    free(text);
    free(j.error);
    j.error = strdup("\"document\":null,\"links\":{}");
    json_decref(o);
    o = api_encode_job(&j);
    text = api_encode_job_text(&j, &len);
    back = text ? json_loadb(text, len, 0, NULL) : NULL;
    CHECK(back != NULL && json_equal(back, o));
    json_decref(back);
    free(text);
    json_decref(o);

    /* a stored document that is not an object is refused, not passed on */
    free(j.document);
    j.document = strdup("[1, 2]");
    CHECK(api_encode_job(&j) == NULL);
    CHECK(api_encode_job_text(&j, &len) == NULL);
    db_job_clear(&j);
}

/* One event of a job's history, as db_event_list hands it over. */
static db_event event(int from, int to, int attempt, int64_t at, const char *reason)
{
    db_event e;
    memset(&e, 0, sizeof e);
    e.from = from;
    e.to = to;
    e.attempt = attempt;
    e.at = at;
    snprintf(e.reason, sizeof e.reason, "%s", reason);
    return e;
}

static void test_attempts(void)
{
    const int64_t t = 1714566896789; /* 2024-05-01T12:34:56.789Z */
    const db_event history[] = {
        event(-1, DB_QUEUED, 0, t, "submitted"),
        event(DB_QUEUED, DB_RUNNING, 1, t + 1000, "leased by worker aaaa on pocl-cpu x86"),
        event(DB_RUNNING, DB_QUEUED, 1, t + 2000, "lease expired"),
        event(DB_QUEUED, DB_RUNNING, 2, t + 3000, "leased by worker bbbb on its device"),
        event(DB_RUNNING, DB_RUNNING, 2, t + 3500, "cancel requested"),
        event(DB_RUNNING, DB_QUEUED, 2, t + 4000, "released by worker bbbb: it is stopping"),
        event(DB_QUEUED, DB_RUNNING, 3, t + 5000, "leased by worker cccc on gpu0"),
        event(DB_RUNNING, DB_FAILED, 3, t + 6000, "uploading model.safetensors: disk full"),
    };
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof history / sizeof history[0]; i++)
        CHECK_INT(api_encode_attempts_add(a, &history[i]), 0);
    CHECK_INT(json_array_size(a), 3);
    json_t *first = json_array_get(a, 0), *second = json_array_get(a, 1),
           *third = json_array_get(a, 2);
    CHECK_INT(json_object_size(first), 7);
    CHECK_INT(json_integer_value(json_object_get(first, "attempt")), 1);
    CHECK_STR(json_string_value(json_object_get(first, "worker")), "aaaa");
    CHECK_STR(json_string_value(json_object_get(first, "device")), "pocl-cpu x86");
    CHECK_STR(json_string_value(json_object_get(first, "started_at")), "2024-05-01T12:34:57.789Z");
    CHECK_STR(json_string_value(json_object_get(first, "ended_at")), "2024-05-01T12:34:58.789Z");
    CHECK_STR(json_string_value(json_object_get(first, "outcome")), "requeued");
    CHECK_STR(json_string_value(json_object_get(first, "reason")), "lease expired");
    CHECK_STR(json_string_value(json_object_get(second, "worker")), "bbbb");
    CHECK(json_is_null(json_object_get(second, "device")));
    CHECK_STR(json_string_value(json_object_get(second, "outcome")), "requeued");
    CHECK_STR(json_string_value(json_object_get(second, "reason")),
              "released by worker bbbb: it is stopping");
    CHECK_INT(json_integer_value(json_object_get(third, "attempt")), 3);
    CHECK_STR(json_string_value(json_object_get(third, "outcome")), "failed");
    CHECK_STR(json_string_value(json_object_get(third, "reason")),
              "uploading model.safetensors: disk full");

    /* a running attempt is open; an end without a start is skipped */
    json_t *b = json_array();
    db_event lone = event(DB_RUNNING, DB_QUEUED, 4, t, "lease expired");
    CHECK_INT(api_encode_attempts_add(b, &lone), 0);
    CHECK_INT(json_array_size(b), 0);
    CHECK_INT(api_encode_attempts_add(b, &history[1]), 0);
    json_t *open = json_array_get(b, 0);
    CHECK(json_is_null(json_object_get(open, "ended_at")));
    CHECK(json_is_null(json_object_get(open, "outcome")));
    CHECK(json_is_null(json_object_get(open, "reason")));

    /* the Job text with attempts says what the object with them says */
    db_job j = sample_job();
    size_t len = 0;
    char *text = api_encode_job_text_with(&j, json_incref(a), NULL, &len);
    json_t *back = text ? json_loadb(text, len, 0, NULL) : NULL;
    CHECK(back != NULL && json_equal(json_object_get(back, "attempts"), a));
    CHECK(json_is_object(json_object_get(back, "document")));
    CHECK(json_object_get(back, "model") == NULL);
    json_decref(back);
    free(text);
    /* and with the model it published and why it waits, the extra members */
    json_t *model = json_pack("{s:s, s:i}", "name", "digits-mlp", "version", 2);
    sched_wait why = {.reason = "behind_jobs", .jobs_ahead = 3};
    snprintf(why.message, sizeof why.message, "behind 3 job(s) submitted earlier");
    json_t *extra = json_pack("{s:O, s:o}", "model", model, "waiting", api_encode_wait(&why));
    text = api_encode_job_text_with(&j, NULL, extra, &len);
    back = text ? json_loadb(text, len, 0, NULL) : NULL;
    CHECK(back != NULL && json_equal(json_object_get(back, "model"), model));
    json_t *w = back ? json_object_get(back, "waiting") : NULL;
    CHECK_STR(json_string_value(json_object_get(w, "reason")), "behind_jobs");
    CHECK_STR(json_string_value(json_object_get(w, "message")),
              "behind 3 job(s) submitted earlier");
    CHECK_INT(json_integer_value(json_object_get(w, "jobs_ahead")), 3);
    CHECK(back != NULL && json_object_get(back, "attempts") == NULL);
    json_decref(back);
    json_decref(model);
    free(text);
    db_job_clear(&j);
    json_decref(a);
    json_decref(b);
}

static void test_times(void)
{
    char buf[API_TIME_LEN];
    api_encode_time_format(0, buf);
    CHECK_STR(buf, "1970-01-01T00:00:00.000Z");
    api_encode_time_format(1, buf);
    CHECK_STR(buf, "1970-01-01T00:00:00.001Z");
    api_encode_time_format(951782400999, buf); /* a leap day */
    CHECK_STR(buf, "2000-02-29T00:00:00.999Z");
    CHECK(json_is_null(api_encode_time(0)));
    json_t *t = api_encode_time(1714566896789);
    CHECK_STR(json_string_value(t), "2024-05-01T12:34:56.789Z");
    json_decref(t);
}

static void test_small_objects(void)
{
    db_metric m = {.epoch = 3,
                   .loss = 0.5,
                   .val_loss = NAN,
                   .accuracy = 0.75,
                   .val_accuracy = NAN,
                   .seconds = 1.25,
                   .samples_per_second = NAN};
    json_t *o = api_encode_metric(&m);
    CHECK_INT(json_integer_value(json_object_get(o, "epoch")), 3);
    CHECK_NEAR(json_number_value(json_object_get(o, "loss")), 0.5, 0);
    CHECK(json_is_null(json_object_get(o, "val_loss")));
    CHECK(json_is_null(json_object_get(o, "val_accuracy")));
    CHECK(json_is_number(json_object_get(o, "accuracy")));
    CHECK(json_object_get(o, "samples_per_second") == NULL); /* optional, not nullable */
    CHECK_INT(json_object_size(o), 6);
    json_decref(o);
    m.samples_per_second = 1000;
    o = api_encode_metric(&m);
    CHECK_NEAR(json_number_value(json_object_get(o, "samples_per_second")), 1000, 0);
    json_decref(o);

    db_artifact a = {.name = "metrics.csv", .size = 12};
    snprintf(a.sha256, sizeof a.sha256, "%064d", 7);
    o = api_encode_artifact(&a);
    CHECK_INT(json_object_size(o), 3);
    CHECK_INT(json_integer_value(json_object_get(o, "size")), 12);
    json_decref(o);

    db_worker w;
    memset(&w, 0, sizeof w);
    snprintf(w.id, sizeof w.id, "%s", "abc");
    snprintf(w.name, sizeof w.name, "%s", "box");
    w.devices = "[{\"index\":0,\"name\":\"cpu\",\"type\":\"cpu\"}]";
    w.registered_at = 1000;
    w.last_seen_at = 5000;
    o = api_encode_worker(&w, 4000, 30);
    CHECK_STR(json_string_value(json_object_get(o, "status")), "idle");
    CHECK(json_is_null(json_object_get(o, "job")));
    CHECK_INT(json_array_size(json_object_get(o, "devices")), 1);
    CHECK_INT(json_integer_value(json_object_get(o, "lease_seconds")), 30);
    CHECK_INT(json_object_size(o), 11);
    CHECK_INT(json_integer_value(json_object_get(o, "slots")), 1);
    CHECK(json_is_false(json_object_get(o, "scripts")));
    /* what it takes: no devices of a kind leasing knows (kinds 0), so nothing */
    json_t *takes = json_object_get(o, "takes");
    CHECK(json_is_false(json_object_get(takes, "built_in")));
    CHECK_INT(json_array_size(json_object_get(takes, "devices")), 0);
    json_decref(o);
    w.kinds = DB_KIND_GPU | DB_KIND_CPU;
    w.scripts = 1;
    w.slots = 4;
    o = api_encode_worker(&w, 4000, 30);
    takes = json_object_get(o, "takes");
    CHECK(json_is_true(json_object_get(takes, "built_in")) &&
          json_is_true(json_object_get(takes, "scripts")));
    CHECK_INT(json_array_size(json_object_get(takes, "devices")), 2);
    CHECK_INT(json_integer_value(json_object_get(takes, "replicas")), 4);
    json_decref(o);
    snprintf(w.job_id, sizeof w.job_id, "%s", "j1");
    o = api_encode_worker(&w, 4000, 30);
    CHECK_STR(json_string_value(json_object_get(o, "status")), "busy");
    CHECK_STR(json_string_value(json_object_get(o, "job")), "j1");
    json_decref(o);
    o = api_encode_worker(&w, 6000, 30);
    CHECK_STR(json_string_value(json_object_get(o, "status")), "gone");
    json_decref(o);

    db_job j = sample_job();
    j.attempt = 1;
    j.lease_expires_at = 1714566926789;
    o = api_encode_lease(&j);
    CHECK_INT(json_object_size(o), 4);
    CHECK_STR(json_string_value(json_object_get(o, "job_id")), j.id);
    CHECK_STR(json_string_value(json_object_get(o, "lease_expires_at")),
              "2024-05-01T12:35:26.789Z");
    CHECK(json_is_object(json_object_get(o, "document")));
    json_decref(o);
    /* A script job with uploaded code: the lease names the GET of its code. */
    free(j.document);
    j.document = strdup("{\"training_script\":\"t.py\",\"code\":\"sha256:" HEX64 "\"}");
    j.script = 1;
    o = api_encode_lease(&j);
    CHECK_INT(json_object_size(o), 5);
    CHECK_STR(json_string_value(json_object_get(o, "code")), "/code/sha256:" HEX64);
    json_decref(o);
    j.script = 0; /* only script jobs get it */
    o = api_encode_lease(&j);
    CHECK(json_object_get(o, "code") == NULL);
    json_decref(o);
    /* Every Job answer carries job_id beside id. */
    o = api_encode_job(&j);
    CHECK_STR(json_string_value(json_object_get(o, "job_id")), j.id);
    json_decref(o);
    db_job_clear(&j);

    /* Tokens show the scripts right: a user's as stored, an admin's always. */
    db_token t;
    memset(&t, 0, sizeof t);
    snprintf(t.id, sizeof t.id, "t1");
    snprintf(t.name, sizeof t.name, "u");
    t.role = DB_ROLE_USER;
    t.created_at = 1000;
    o = api_encode_token(&t);
    CHECK(json_is_false(json_object_get(o, "scripts")));
    json_decref(o);
    t.scripts = 1;
    o = api_encode_token(&t);
    CHECK(json_is_true(json_object_get(o, "scripts")));
    json_decref(o);
    t.scripts = 0;
    t.role = DB_ROLE_ADMIN;
    o = api_encode_token(&t);
    CHECK(json_is_true(json_object_get(o, "scripts")));
    /* caps: null when none, else the number */
    CHECK(json_is_null(json_object_get(o, "max_running")));
    CHECK(json_is_null(json_object_get(o, "max_queued")));
    json_decref(o);
    t.max_running = 2;
    t.max_queued = 7;
    o = api_encode_token(&t);
    CHECK_INT(json_integer_value(json_object_get(o, "max_running")), 2);
    CHECK_INT(json_integer_value(json_object_get(o, "max_queued")), 7);
    json_decref(o);
}

static void test_encodings(void)
{
    char out[64];
    CHECK_INT(api_encode_base64("", 0, 0, out, sizeof out), 0);
    CHECK_STR(out, "");
    api_encode_base64("f", 1, 0, out, sizeof out);
    CHECK_STR(out, "Zg==");
    api_encode_base64("foob", 4, 0, out, sizeof out);
    CHECK_STR(out, "Zm9vYg==");
    api_encode_base64("foobar", 6, 0, out, sizeof out);
    CHECK_STR(out, "Zm9vYmFy");
    api_encode_base64("\xfb\xff", 2, 1, out, sizeof out);
    CHECK_STR(out, "-_8");
    CHECK_INT(api_encode_base64("foobar", 6, 0, out, 8), -ENOSPC);

    int64_t seqs[] = {1, 9, 10, 123456, INT64_MAX};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        char c[API_CURSOR_MAX + 1];
        api_encode_cursor(seqs[i], c);
        int64_t back = 0;
        CHECK_INT(api_encode_cursor_seq(c, &back), 0);
        CHECK_INT(back, seqs[i]);
        CHECK_INT(strlen(c), API_CURSOR_LEN);
        CHECK(strspn(c, "0123456789abcdef") == API_CURSOR_LEN);
    }
    /* Every cursor of the right form names a position; past INT64_MAX is the newest end. */
    int64_t top = 0;
    CHECK_INT(api_encode_cursor_seq("ffffffffffffffff", &top), 0);
    CHECK(top == INT64_MAX);
    static const char *const bad[] = {
        "",
        "x",
        "000000000000001",   /* 15 digits */
        "00000000000000001", /* 17 digits */
        "000000000000001F",  /* upper case is not ours */
        "00000000000000g1",  /* not hex */
        "-000000000000001",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = -5;
        if (api_encode_cursor_seq(bad[i], &v) != -EINVAL || v != -5) {
            fprintf(stderr, "cursor \"%s\" was accepted\n", bad[i]);
            check_failures++;
        }
    }
}

/* Index of the error on field, or -1. */
static int error_on(const field_errors *errs, const char *field)
{
    for (size_t i = 0; i < errs->count; i++) {
        if (strcmp(errs->items[i].field, field) == 0)
            return (int)i;
    }
    return -1;
}

/* The scripts flags: a worker's (WorkerRegistration) and a token's (TokenRequest). */
static void test_scripts_flags(void)
{
    field_errors errs;
    api_registration reg;
    const char *devs = "\"devices\":[{\"index\":0,\"name\":\"c\",\"type\":\"cpu\"}]";
    char text[256];
    const char *vals[] = {"", ",\"scripts\":true", ",\"scripts\":false", ",\"scripts\":1"};
    const int want[] = {0, 1, 0, -1};
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof text, "{\"name\":\"w\",%s%s}", devs, vals[i]);
        json_t *b = json_loads(text, 0, NULL);
        int rc = api_registration_parse(b, &reg, &errs);
        if (want[i] < 0) {
            CHECK_INT(rc, -EINVAL);
            CHECK(error_on(&errs, "scripts") >= 0);
        } else {
            CHECK_INT(rc, 0);
            CHECK_INT(reg.scripts, want[i]);
        }
        json_decref(b);
    }
    db_token t;
    json_t *b = json_loads("{\"name\":\"u\",\"role\":\"user\",\"scripts\":true}", 0, NULL);
    CHECK_INT(api_token_request_parse(b, &t, &errs), 0);
    CHECK_INT(t.scripts, 1);
    CHECK_INT(t.role, DB_ROLE_USER);
    CHECK_STR(t.name, "u");
    CHECK_INT(t.max_running, 0);
    CHECK_INT(t.max_queued, 0);
    json_decref(b);
    b = json_loads("{\"name\":\"u\",\"role\":\"user\"}", 0, NULL);
    CHECK_INT(api_token_request_parse(b, &t, &errs), 0);
    CHECK_INT(t.scripts, 0);
    json_decref(b);
    b = json_loads("{\"name\":\"u\",\"role\":\"user\",\"scripts\":\"yes\"}", 0, NULL);
    CHECK_INT(api_token_request_parse(b, &t, &errs), -EINVAL);
    CHECK(error_on(&errs, "scripts") >= 0);
    json_decref(b);
    /* the caps: whole numbers from 1, or null for none */
    b = json_loads("{\"name\":\"u\",\"role\":\"user\",\"max_running\":2,\"max_queued\":null}", 0,
                   NULL);
    CHECK_INT(api_token_request_parse(b, &t, &errs), 0);
    CHECK_INT(t.max_running, 2);
    CHECK_INT(t.max_queued, 0);
    json_decref(b);
    b = json_loads("{\"name\":\"u\",\"role\":\"user\",\"max_running\":0,"
                   "\"max_queued\":1.5}",
                   0, NULL);
    CHECK_INT(api_token_request_parse(b, &t, &errs), -EINVAL);
    CHECK(error_on(&errs, "max_running") >= 0);
    CHECK(error_on(&errs, "max_queued") >= 0);
    json_decref(b);
}

static void test_bodies(void)
{
    field_errors errs;
    api_registration reg;
    json_t *b = json_loads("{\"name\":\"box\",\"devices\":[{\"index\":0,\"name\":\"A100\","
                           "\"type\":\"gpu\"},{\"index\":1,"
                           "\"name\":\"cpu\",\"type\":\"cpu\",\"compute_units\":8}]}",
                           0, NULL);
    CHECK_INT(api_registration_parse(b, &reg, &errs), 0);
    CHECK_STR(reg.name, "box");
    CHECK_INT(reg.kinds, DB_KIND_GPU | DB_KIND_CPU);
    json_decref(b);
    b = json_loads("{\"name\":\"\",\"devices\":[{\"index\":-1,\"type\":\"tpu\","
                   "\"compute_units\":\"8\"}],\"extra\":1}",
                   0, NULL);
    CHECK_INT(api_registration_parse(b, &reg, &errs), -EINVAL);
    CHECK(error_on(&errs, "name") >= 0);
    CHECK(error_on(&errs, "devices[0].index") >= 0);
    CHECK(error_on(&errs, "devices[0].name") >= 0);
    CHECK(error_on(&errs, "devices[0].type") >= 0);
    CHECK(error_on(&errs, "devices[0].compute_units") >= 0);
    CHECK(error_on(&errs, "extra") >= 0);
    json_decref(b);
    /* Only what the API describes is stored: an unknown device member is refused. */
    b = json_loads("{\"name\":\"box\",\"devices\":[{\"index\":0,\"name\":\"A100\","
                   "\"type\":\"gpu\",\"vendor\":\"x\"}]}",
                   0, NULL);
    CHECK_INT(api_registration_parse(b, &reg, &errs), -EINVAL);
    CHECK(error_on(&errs, "devices[0].vendor") >= 0);
    json_decref(b);
    /* GPUs without OpenCL (found by nvidia-smi): script jobs only; one OpenCL device among
     * them lifts that; "opencl" must be a boolean. */
    b = json_loads("{\"name\":\"box\",\"devices\":[{\"index\":0,\"name\":\"H200\","
                   "\"type\":\"gpu\",\"opencl\":false,\"found_by\":\"nvidia-smi\","
                   "\"uuid\":\"GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9\"}]}",
                   0, NULL);
    CHECK_INT(api_registration_parse(b, &reg, &errs), 0);
    CHECK_INT(reg.kinds, DB_KIND_GPU | DB_KIND_SCRIPTS_ONLY);
    json_array_append_new(
        json_object_get(b, "devices"),
        json_pack("{s:i, s:s, s:s, s:b}", "index", 1, "name", "cpu", "type", "cpu", "opencl", 1));
    CHECK_INT(api_registration_parse(b, &reg, &errs), 0);
    CHECK_INT(reg.kinds, DB_KIND_GPU | DB_KIND_CPU);
    json_object_set_new(json_array_get(json_object_get(b, "devices"), 1), "opencl",
                        json_string("no"));
    CHECK_INT(api_registration_parse(b, &reg, &errs), -EINVAL);
    CHECK(error_on(&errs, "devices[1].opencl") >= 0);
    json_decref(b);

    api_heartbeat hb;
    b = json_loads("{\"phase\":\"training\",\"epochs\":[{\"epoch\":1,\"loss\":0.5,"
                   "\"val_loss\":null,\"accuracy\":1,\"val_accuracy\":null,\"seconds\":2}],"
                   "\"logs\":[\"a\",\"b\"]}",
                   0, NULL);
    CHECK_INT(api_heartbeat_parse(b, &hb, &errs), 0);
    CHECK_INT(hb.phase, DB_PHASE_TRAINING);
    CHECK_INT(hb.n_epochs, 1);
    CHECK(isnan(hb.epochs[0].val_loss));
    CHECK_NEAR(hb.epochs[0].accuracy, 1.0, 0);
    CHECK(isnan(hb.epochs[0].samples_per_second));
    CHECK_INT(hb.n_logs, 2);
    CHECK_STR(hb.logs[1], "b");
    api_heartbeat_free(&hb);
    json_decref(b);
    b = json_loads("{}", 0, NULL);
    CHECK_INT(api_heartbeat_parse(b, &hb, &errs), 0);
    CHECK_INT(hb.phase, DB_PHASE_NONE);
    api_heartbeat_free(&hb);
    json_decref(b);
    b = json_loads("{\"phase\":\"resting\",\"epochs\":[{\"epoch\":0,\"loss\":\"x\","
                   "\"seconds\":-1,\"bogus\":\"1\",\"9lives\":1,\"a b\":2}],\"logs\":[3],"
                   "\"more\":true}",
                   0, NULL);
    CHECK_INT(api_heartbeat_parse(b, &hb, &errs), -EINVAL);
    CHECK(error_on(&errs, "phase") >= 0);
    CHECK(error_on(&errs, "epochs[0].epoch") >= 0);
    CHECK(error_on(&errs, "epochs[0].loss") >= 0);
    CHECK(error_on(&errs, "epochs[0].val_loss") < 0); /* absent: null */
    CHECK(error_on(&errs, "epochs[0].seconds") >= 0);
    CHECK(error_on(&errs, "epochs[0].bogus") >= 0);  /* a metric name, but not a number */
    CHECK(error_on(&errs, "epochs[0].9lives") >= 0); /* not a metric name */
    CHECK(error_on(&errs, "epochs[0].a b") >= 0);
    CHECK(error_on(&errs, "logs[0]") >= 0);
    CHECK(error_on(&errs, "more") >= 0);
    json_decref(b);

    /* A script's epoch: only what it measured, and metrics of its own names, which ride along
     * in extra (sorted, compact) and come back beside the known ones. */
    b = json_loads("{\"epochs\":[{\"epoch\":2,\"val_accuracy\":0.5,\"top5/acc\":0.9,"
                   "\"lr\":0.001,\"gap\":null}]}",
                   0, NULL);
    CHECK_INT(api_heartbeat_parse(b, &hb, &errs), 0);
    CHECK_INT(hb.n_epochs, 1);
    CHECK(isnan(hb.epochs[0].loss));
    CHECK(isnan(hb.epochs[0].seconds));
    CHECK_STR(hb.epochs[0].extra, "{\"gap\":null,\"lr\":0.001,\"top5/acc\":0.9}");
    json_t *o = api_encode_metric(&hb.epochs[0]);
    CHECK(json_is_null(json_object_get(o, "loss")));
    CHECK(json_is_null(json_object_get(o, "seconds")));
    CHECK(json_real_value(json_object_get(o, "val_accuracy")) == 0.5);
    CHECK(json_real_value(json_object_get(o, "top5/acc")) == 0.9);
    CHECK(json_is_null(json_object_get(o, "gap")));
    json_decref(o);
    api_heartbeat_free(&hb);
    json_decref(b);

    /* At most API_MAX_METRICS keys in an epoch: the first past it is named. */
    b = json_loads("{\"epochs\":[{\"epoch\":1}]}", 0, NULL);
    json_t *big = json_array_get(json_object_get(b, "epochs"), 0);
    for (int k = 0; k < API_MAX_METRICS; k++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", k);
        json_object_set_new(big, key, json_real(k));
    }
    CHECK_INT(api_heartbeat_parse(b, &hb, &errs), -EINVAL);
    CHECK(error_on(&errs, "epochs[0].m63") >= 0);
    CHECK(error_on(&errs, "epochs[0].m62") < 0);
    json_decref(b);

    int status = -1;
    const char *error = "untouched";
    b = json_loads("{\"status\":\"failed\",\"error\":\"bad CSV\"}", 0, NULL);
    CHECK_INT(api_completion_parse(b, &status, &error, &errs), 0);
    CHECK_INT(status, DB_FAILED);
    CHECK_STR(error, "bad CSV");
    json_decref(b);
    b = json_loads("{\"status\":\"running\",\"error\":5}", 0, NULL);
    CHECK_INT(api_completion_parse(b, &status, &error, &errs), -EINVAL);
    CHECK(error_on(&errs, "status") >= 0);
    CHECK(error_on(&errs, "error") >= 0);
    json_decref(b);
}

int main(void)
{
    test_encode_job_schema();
    test_attempts();
    test_times();
    test_small_objects();
    test_encodings();
    test_bodies();
    test_scripts_flags();
    return check_exit();
}
