/* jobs: POST /train, GET /jobs, GET /jobs/{id}, POST /jobs/{id}/cancel, DELETE /jobs/{id}.
 *
 * Submit: the body is checked by job_from_json() (every problem a {field, message} in a 400),
 * resolved with every default (job_to_json), and stored by sched_job_submit(), whose COMMIT
 * has reached the disk before the 202 is written. The resolved document is what the job keeps
 * and what its hash covers.
 *
 * Idempotency-Key: a submit whose key was used before answers the first job with 200 when the
 * resolved documents are equal (a retry), and 409 when they differ (the key was reused for
 * another job, which is a client bug that silently returning the first job would hide). Equal
 * means equal once resolved: bodies that differ in spacing, member order or defaults spelled
 * out are the same job. A key lives as long as its job: after DELETE it may create a new one.
 *
 * Ownership: a job belongs to the token that submitted it; a user token sees and acts on its
 * own jobs only (api_job_find answers 404 for the others, and listings filter by owner), and
 * its Idempotency-Keys are its own.
 *
 * Listing: newest first (by the internal seq), filters status and name (exact), limit 1..500
 * (default 50), and an opaque cursor (api_encode_cursor) naming where the next page starts;
 * next_cursor is null on the last page. Each page reads limit + 1 rows to know. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/bodies.h"
#include "api/encode.h"
#include "db/artifacts.h"
#include "db/events.h"
#include "db/jobs.h"
#include "db/models.h"
#include "scheduler/waiting.h"
#include "scheduler/lifecycle.h"
#include "util/datadir.h"
#include "util/json_out.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "util/url.h"
#include "util/utf8.h"
#include "job/job.h"

#define API_LIST_DEFAULT 50
#define API_LIST_MAX     500
#define API_IDEM_MAX     200 /* characters of an Idempotency-Key */

/* {"waiting": Waiting} for a queued job (why it has not started: scheduler/waiting.h) into
 * *out (a new object), {"waiting": null} for any other. ws holds the live workers, read at
 * the first queued job of a request (*loaded then 1), so answers without one read none. */
static int api_job_waiting(app *a, db *d, const db_job *j, sched_wait_workers *ws, int *loaded,
                           int ahead_max, json_t **out, char *err)
{
    json_t *w = json_null();
    if (j->status == DB_QUEUED) {
        sched_wait why;
        int rc = *loaded ? 0 : sched_wait_workers_load(d, api_live_since(a), ws, err);
        if (rc < 0)
            return rc;
        *loaded = 1;
        rc = sched_job_wait(d, j, ws, time_wall_ms(), ahead_max, &why, err);
        if (rc < 0)
            return rc;
        w = api_encode_wait(&why);
    }
    json_t *o = w ? json_pack("{s:o}", "waiting", w) : NULL;
    if (!o)
        return err_set(err, -ENOMEM, "out of memory");
    *out = o;
    return 0;
}

/* The members GET /jobs/{id} adds to a Job: `waiting`, and `model` when given (stolen). */
static int api_job_extra(app *a, db *d, const db_job *j, json_t *model, json_t **out, char *err)
{
    json_t *extra = NULL;
    sched_wait_workers ws = {0};
    int loaded = 0;
    int rc = api_job_waiting(a, d, j, &ws, &loaded, SCHED_WAIT_AHEAD_MAX, &extra, err);
    sched_wait_workers_free(&ws);
    if (rc == 0 && model) {
        if (json_object_set_new(extra, "model", model) < 0) /* stolen even on failure */
            rc = err_set(err, -ENOMEM, "out of memory");
        model = NULL;
    }
    json_decref(model);
    if (rc < 0) {
        json_decref(extra);
        return rc;
    }
    *out = extra;
    return 0;
}

/* Answers one job: status, the Location header when asked, the Job body with `waiting`. */
static int api_reply_job(http_req *r, app *a, db *d, int status, const db_job *j, int location)
{
    json_t *extra = NULL;
    int rc = api_job_extra(a, d, j, NULL, &extra, http_errbuf(r));
    if (rc < 0)
        return rc;
    size_t len = 0;
    char *body = api_encode_job_text_with(j, NULL, extra, &len);
    if (!body)
        return err_set(http_errbuf(r), -ENOMEM, "cannot build the job's JSON");
    if (location) {
        char loc[DB_ID_LEN + 8];
        snprintf(loc, sizeof loc, "/jobs/%s", j->id);
        http_header_add(r, "Location", loc);
    }
    rc = http_reply_bytes(r, status, "application/json", body, len);
    free(body);
    return rc;
}

/* A script job's submit: the token must have the scripts right (403 naming training_script),
 * and code, when given, must be stored (400 naming code). Returns 1 after answering, 0 when the
 * job may go on, or a negative code. */
static int api_script_allowed(http_req *r, app *a, const job_spec *spec)
{
    if (!api_may_run_scripts(r)) {
        http_field_error e = {"training_script",
                              "this token may not submit script jobs; an admin can create one "
                              "with scripts: true"};
        int rc = http_reply_problem(r, 403, "Forbidden",
                                    "script jobs need a token with the scripts right", &e, 1);
        return rc < 0 ? rc : 1;
    }
    char path[DATADIR_PATH_MAX];
    if (spec->code && (datadir_code_file(a->data_dir, spec->code + strlen("sha256:"), path) < 0 ||
                       access(path, F_OK) != 0)) {
        field_errors errs = {0};
        field_errors_add(&errs, "code",
                         "no code was uploaded with the address %s: upload the .tar.gz with POST "
                         "/code first and give the address it answers",
                         spec->code);
        int rc = api_reply_invalid(r, "Invalid job document", &errs);
        return rc < 0 ? rc : 1;
    }
    return 0;
}

/* ---- init_from (docs/API.md "Warm start") ---------------------------------------------- */

/* A layer as far as its weights go: its settings but a dropout's rate (a warm start may train
 * with another rate; no weight depends on it). A new reference. */
static json_t *api_arch_layer(const json_t *layer)
{
    json_t *copy = json_deep_copy(layer);
    const char *type = json_string_value(json_object_get(layer, "type"));
    if (copy && type && !strcmp(type, "dropout"))
        json_object_del(copy, "rate");
    return copy;
}

/* json_equal, with two absent members equal too (jansson's says 0 for NULL). */
static int api_same_json(const json_t *a, const json_t *b)
{
    return (!a && !b) || json_equal((json_t *)a, (json_t *)b);
}

/* "Same architecture" for a warm start, on two resolved documents: the same task and binary,
 * the same dataset format (CSV rows or images) and model.input_shape, and the same layers in
 * order, each with the same settings (a dropout's rate aside). Writes the first difference
 * into why and returns 0, or returns 1. The features and classes of the data are checked where
 * they are known: when the job trains (each tensor's shape). */
static int api_same_architecture(const json_t *from, const json_t *to, char *why, size_t cap)
{
    static const char *const top[] = {"task", "binary"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!api_same_json(json_object_get(from, top[i]), json_object_get(to, top[i]))) {
            snprintf(why, cap, "its %s differs", top[i]);
            return 0;
        }
    json_t *fd = json_object_get(from, "dataset"), *td = json_object_get(to, "dataset");
    if (!api_same_json(json_object_get(fd, "format"), json_object_get(td, "format"))) {
        snprintf(why, cap, "its dataset.format differs");
        return 0;
    }
    json_t *fm = json_object_get(from, "model"), *tm = json_object_get(to, "model");
    if (!api_same_json(json_object_get(fm, "input_shape"), json_object_get(tm, "input_shape"))) {
        snprintf(why, cap, "its model.input_shape differs");
        return 0;
    }
    json_t *fl = json_object_get(fm, "layers"), *tl = json_object_get(tm, "layers");
    if (json_array_size(fl) != json_array_size(tl)) {
        snprintf(why, cap, "its model has %zu layers where this one has %zu", json_array_size(fl),
                 json_array_size(tl));
        return 0;
    }
    for (size_t i = 0; i < json_array_size(fl); i++) {
        json_t *a = api_arch_layer(json_array_get(fl, i)),
               *b = api_arch_layer(json_array_get(tl, i));
        int same = a && b && json_equal(a, b);
        json_decref(a);
        json_decref(b);
        if (!same) {
            snprintf(why, cap, "its model.layers[%zu] differs", i);
            return 0;
        }
    }
    return 1;
}

/* The submit's check of init_from: a job the caller may see, succeeded, with model.safetensors,
 * of the same architecture as resolved. 0 when fine; -EINVAL with the reason in errs (the 400
 * names init_from); another negative code for a failure of the database. */
static int api_init_from_check(http_req *r, db *d, const job_spec *spec, const json_t *resolved,
                               field_errors *errs)
{
    errs->count = 0;
    if (!spec->init_from)
        return 0;
    char *err = http_errbuf(r), why[256];
    db_job src;
    int rc = db_job_get(d, spec->init_from, &src, err);
    if (rc == -ENOENT || (rc == 0 && !api_may_see(r, src.owner))) {
        if (rc == 0)
            db_job_clear(&src);
        field_errors_add(errs, "init_from", "there is no job %s", spec->init_from);
        return -EINVAL;
    }
    if (rc < 0)
        return rc;
    db_artifact art;
    json_t *doc = NULL;
    if (src.status != DB_SUCCEEDED) {
        field_errors_add(errs, "init_from",
                         "job %s is %s: only a succeeded job's model can be started from", src.id,
                         db_status_name(src.status));
    } else if (src.script) {
        field_errors_add(errs, "init_from",
                         "job %s is a script job: trainyard does not know its model", src.id);
    } else if ((rc = db_artifact_get(d, src.seq, "model.safetensors", &art, err)) < 0) {
        if (rc == -ENOENT)
            field_errors_add(errs, "init_from", "job %s has no model.safetensors", src.id);
    } else if (!(doc = json_loads(src.document, 0, NULL))) {
        rc = err_set(err, -EIO, "job %s's document cannot be read", src.id);
    } else if (!api_same_architecture(doc, resolved, why, sizeof why)) {
        field_errors_add(errs, "init_from",
                         "job %s's model is another architecture: %s (a warm start needs the same "
                         "task, dataset.format, model.input_shape and layers)",
                         src.id, why);
    }
    json_decref(doc);
    db_job_clear(&src);
    if (errs->count)
        return -EINVAL;
    return rc == -ENOENT ? 0 : rc < 0 ? rc : 0;
}

int api_jobs_submit(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    json_t *body = NULL, *resolved = NULL;
    job_spec *spec = NULL;
    char *doc = NULL, *sealed = NULL;
    db_job j;
    memset(&j, 0, sizeof j);
    int created = 0;

    if (a->stopping)
        return err_set(err, -ESHUTDOWN,
                       "the service is stopping and takes no new jobs: submit again once it is "
                       "back");
    const api_caller *caller = api_caller_of(r);
    const char *key = http_header(r, "Idempotency-Key");
    if (key && (!*key || utf8_chars(key) > API_IDEM_MAX))
        return api_reply_bad_param(r, "Idempotency-Key", "must be 1 to 200 characters");
    /* Keys are the submitter's own: the same key from two tokens names two jobs. */
    char scoped_key[DB_ID_LEN + 2 + 4 * API_IDEM_MAX];
    if (key)
        snprintf(scoped_key, sizeof scoped_key, "%s/%s", caller->token_id, key);
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    field_errors errs;
    rc = job_from_json(body, &spec, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid job document", &errs);
        goto out;
    }
    if (rc < 0) {
        err_set(err, rc, "cannot read the job document");
        goto out;
    }
    if (job_is_script(spec)) {
        rc = api_script_allowed(r, a, spec);
        if (rc != 0) {
            rc = rc > 0 ? 0 : rc; /* answered, or an error for the table */
            goto out;
        }
    }
    rc = api_notify_allowed(r, a, spec); /* webhooks: the dataset host rules */
    if (rc != 0) {
        rc = rc > 0 ? 0 : rc;
        goto out;
    }
    resolved = job_to_json(spec);
    doc = resolved ? json_out_dumps(resolved, JSON_COMPACT) : NULL;
    if (!doc) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rc = api_init_from_check(r, d, spec, resolved, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid job document", &errs);
        goto out;
    }
    if (rc < 0)
        goto out;
    uint8_t digest[32];
    char hash[65];
    sha256_ctx sc;
    sha256_init(&sc);
    sha256_update(&sc, doc, strlen(doc));
    sha256_final(&sc, digest);
    sha256_hex(digest, hash);

    /* The dataset URL's userinfo is kept apart, sealed; the document shows ***@ instead. */
    char *userinfo = spec->dataset_url ? url_userinfo_dup(spec->dataset_url) : NULL;
    if (userinfo) {
        rc = secret_text_seal(a->credentials_key, userinfo, &sealed, err);
        explicit_bzero(userinfo, strlen(userinfo));
        free(userinfo);
        if (rc < 0)
            goto out;
    }
    sched_new_job nj = {.name = spec->name,
                        .document = doc,
                        .device_kind = spec->device,
                        .max_attempts = spec->max_attempts,
                        .max_runtime_seconds = spec->max_runtime_seconds,
                        .priority = spec->priority,
                        .idem_key = key ? scoped_key : NULL,
                        .body_hash = hash,
                        .owner = caller->token_id,
                        .max_queued = a->max_queued_per_token,
                        .token_max_queued = caller->max_queued,
                        .credentials = sealed,
                        .script = job_is_script(spec),
                        .replicas = spec->replicas,
                        .keep = spec->keep};
    rc = sched_job_submit(d, &nj, time_wall_ms(), &j, &created, err);
    if (rc < 0)
        goto out;
    if (created) {
        app_log(a, "job %s queued: %s (priority %d)", j.id, j.name, j.priority);
        api_raise(a->queued);
        api_raise(a->changed);
    }
    rc = api_reply_job(r, a, d, created ? 202 : 200, &j, 1);
out:
    db_job_clear(&j);
    free(doc);
    free(sealed);
    json_decref(resolved);
    job_free(spec);
    json_decref(body);
    return rc;
}

/* ---- GET /jobs -------------------------------------------------------------------------- */

typedef struct api_page {
    json_t *jobs;
    int want; /* the page size; one more row is read */
    int got;
    int64_t last_seq; /* seq of the last job on the page */
    int more;
    int failed;
    db *d; /* for the waiting reasons of queued jobs */
    app *a;
    sched_wait_workers workers; /* the live workers, read at the page's first queued job */
    int workers_loaded;
    char *err;
} api_page;

static int api_page_add(void *ctx, const db_job *j)
{
    api_page *p = ctx;
    if (p->got == p->want) {
        p->more = 1;
        return 0;
    }
    json_t *o = api_encode_job(j), *waiting = NULL;
    if (o && api_job_waiting(p->a, p->d, j, &p->workers, &p->workers_loaded, SCHED_WAIT_AHEAD_LIST,
                             &waiting, p->err) < 0) {
        json_decref(o);
        return -EIO;
    }
    if (!o || json_object_update(o, waiting) < 0 || json_array_append_new(p->jobs, o) < 0) {
        json_decref(waiting);
        p->failed = 1;
        return -ENOMEM;
    }
    json_decref(waiting);
    p->got++;
    p->last_seq = j->seq;
    return 0;
}

int api_jobs_list(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db_job_filter f = {.status = -1, .name = NULL, .before_seq = 0, .limit = API_LIST_DEFAULT};
    const char *status = http_query(r, "status");
    if (status) {
        f.status = db_status_parse(status);
        if (f.status < 0)
            return api_reply_bad_param(r, "status",
                                       "must be one of queued, running, succeeded, failed, "
                                       "cancelled");
    }
    f.name = http_query(r, "name");
    if (f.name && (utf8_chars(f.name) > 128 || strlen(f.name) > DB_NAME_MAX))
        return api_reply_bad_param(r, "name", "must be at most 128 characters");
    f.sweep = http_query(r, "sweep"); /* a sweep's trials (api/sweeps.c) */
    if (f.sweep &&
        (strlen(f.sweep) != DB_ID_LEN || strspn(f.sweep, "0123456789abcdef") != DB_ID_LEN))
        return api_reply_bad_param(r, "sweep", "must be a sweep's id (32 lowercase hex digits)");
    const char *limit = http_query(r, "limit");
    long lim = API_LIST_DEFAULT;
    if (limit && api_parse_int(limit, 1, API_LIST_MAX, &lim) < 0)
        return api_reply_bad_param(r, "limit", "must be an integer from 1 to 500");
    const char *cursor = http_query(r, "cursor");
    if (cursor &&
        (strlen(cursor) > API_CURSOR_MAX || api_encode_cursor_seq(cursor, &f.before_seq) < 0))
        return api_reply_bad_param(r, "cursor",
                                   "is not a cursor this server made: pass next_cursor as is");
    f.limit = (int)lim + 1;
    const api_caller *caller = api_caller_of(r);
    if (!api_sees_every_job(caller))
        f.owner = caller->token_id; /* "" when not authenticated: no job */

    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    api_page page = {.jobs = json_array(), .want = (int)lim, .d = d, .a = a, .err = err};
    if (!page.jobs)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = db_job_list(d, &f, api_page_add, &page, err);
    sched_wait_workers_free(&page.workers);
    if (rc < 0) {
        if (page.failed)
            err_set(err, rc, "cannot build the job list");
        json_decref(page.jobs);
        return rc;
    }
    return api_reply_page(r, "jobs", page.jobs, page.more, page.last_seq);
}

/* ---- one job ---------------------------------------------------------------------------- */

/* GET /jobs/{id} is what every client polls. Each HTTP thread keeps the last answers it made
 * in a small table of its own (no lock), each tagged with the server's signal generation taken
 * BEFORE the job was read. Every write that changes a job raises a signal after it commits, so
 * an answer whose tag still equals the current generation cannot be stale; any raise anywhere
 * ends the validity of every entry at once. */
#define API_JOB_CACHE 64

typedef struct api_cached_job {
    char id[DB_ID_LEN + 1];
    char owner[DB_ID_LEN + 1];
    uint64_t generation;
    char *text;
    size_t len;
} api_cached_job;

static pthread_key_t api_job_cache_key;
static pthread_once_t api_job_cache_once = PTHREAD_ONCE_INIT;

/* Runs when an HTTP thread ends. */
static void api_job_cache_free(void *table)
{
    api_cached_job *t = table;
    for (int i = 0; i < API_JOB_CACHE; i++)
        free(t[i].text);
    free(t);
}

static void api_job_cache_init(void)
{
    pthread_key_create(&api_job_cache_key, api_job_cache_free);
}

/* The calling thread's slot for id; NULL when out of memory (then nothing is cached). */
static api_cached_job *api_job_slot(const char *id)
{
    pthread_once(&api_job_cache_once, api_job_cache_init);
    api_cached_job *t = pthread_getspecific(api_job_cache_key);
    if (!t) {
        t = calloc(API_JOB_CACHE, sizeof *t);
        if (!t || pthread_setspecific(api_job_cache_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return &t[h % API_JOB_CACHE];
}

/* db_event_list() callback: one event into the attempts array. */
static int api_job_attempt(void *ctx, const db_event *e)
{
    return api_encode_attempts_add(ctx, e);
}

int api_jobs_get(http_req *r, void *ctx)
{
    app *a = ctx;
    const char *id = http_param(r, "id");
    uint64_t generation = a->http ? http_signal_generation(a->http) : 0;
    api_cached_job *slot = api_job_slot(id);
    if (a->http && slot && slot->text && slot->generation == generation && !strcmp(slot->id, id) &&
        api_may_see(r, slot->owner))
        return http_reply_bytes(r, 200, "application/json", slot->text, slot->len);

    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    json_t *attempts = json_array();
    rc = attempts ? db_event_list(d, j.seq, api_job_attempt, attempts, http_errbuf(r)) : -ENOMEM;
    if (rc < 0) {
        json_decref(attempts);
        db_job_clear(&j);
        return rc;
    }
    /* the model version it published, once it has succeeded with one */
    db_model m;
    json_t *model = NULL;
    rc = db_model_of_job(d, j.seq, &m, http_errbuf(r));
    if (rc == 0) {
        model = json_pack("{s:s, s:I}", "name", m.name, "version", (json_int_t)m.version);
        rc = model ? 0 : err_set(http_errbuf(r), -ENOMEM, "out of memory");
    } else if (rc == -ENOENT) {
        rc = 0;
    }
    if (rc < 0) {
        json_decref(attempts);
        db_job_clear(&j);
        return rc;
    }
    json_t *extra = NULL;
    rc = api_job_extra(a, d, &j, model, &extra, http_errbuf(r));
    if (rc < 0) {
        json_decref(attempts);
        db_job_clear(&j);
        return rc;
    }
    size_t len = 0;
    char *text = api_encode_job_text_with(&j, attempts, extra, &len);
    char owner[DB_ID_LEN + 1];
    memcpy(owner, j.owner, sizeof owner);
    /* a back-off's seconds left change with no signal: such an answer is not kept */
    int counting = j.status == DB_QUEUED && j.retry_at > time_wall_ms();
    db_job_clear(&j);
    if (!text)
        return err_set(http_errbuf(r), -ENOMEM, "cannot build the job's JSON");
    rc = http_reply_bytes(r, 200, "application/json", text, len);
    if (slot && !counting && strlen(id) <= DB_ID_LEN) {
        free(slot->text);
        memcpy(slot->id, id, strlen(id) + 1);
        memcpy(slot->owner, owner, sizeof owner);
        slot->generation = generation;
        slot->text = text;
        slot->len = len;
    } else {
        free(text);
    }
    return rc;
}

int api_jobs_cancel(http_req *r, void *ctx)
{
    app *a = ctx;
    const char *id = http_param(r, "id");
    db *d = NULL;
    int rc = api_job_mine(r, a, &d); /* the caller's job, or 404 */
    if (rc < 0)
        return rc;
    db_job j;
    rc = sched_job_cancel(d, id, a->artifacts_dir, time_wall_ms(), &j, http_errbuf(r));
    if (rc < 0)
        return api_no_job(r, rc, id);
    app_log(a, j.status == DB_CANCELLED ? "job %s cancelled" : "job %s: cancel requested", j.id);
    api_raise(a->changed);
    rc = api_reply_job(r, a, d, 200, &j, 0);
    db_job_clear(&j);
    return rc;
}

int api_jobs_stop(http_req *r, void *ctx)
{
    app *a = ctx;
    const char *id = http_param(r, "id");
    db *d = NULL;
    int rc = api_job_mine(r, a, &d); /* the caller's job, or 404 */
    if (rc < 0)
        return rc;
    /* An optional {"reason": "..."}; an empty body stops with "stopped by a user". */
    json_t *body = NULL;
    const char *reason = "stopped by a user";
    size_t len = 0;
    http_body(r, &len);
    if (len > 0) {
        rc = http_body_json(r, &body);
        if (rc < 0)
            return rc; /* answered */
        field_errors errs;
        if (api_stop_request_parse(body, &reason, &errs) < 0) {
            rc = api_reply_invalid(r, "Invalid stop request", &errs);
            json_decref(body);
            return rc;
        }
    }
    db_job j;
    rc = db_job_get(d, id, &j, http_errbuf(r));
    int64_t seq = j.seq;
    if (rc == 0) {
        db_job_clear(&j);
        rc = sched_job_stop(d, seq, reason, a->artifacts_dir, time_wall_ms(), &j, http_errbuf(r));
    }
    json_decref(body);
    if (rc < 0)
        return api_no_job(r, rc, id);
    app_log(a, rc == 1 ? "job %s stopped while queued" : "job %s: stop requested", j.id);
    api_raise(a->changed);
    rc = api_reply_job(r, a, d, 200, &j, 0);
    db_job_clear(&j);
    return rc;
}

int api_jobs_delete(http_req *r, void *ctx)
{
    app *a = ctx;
    const char *id = http_param(r, "id");
    db *d = NULL;
    int rc = api_job_mine(r, a, &d); /* the caller's job, or 404 */
    if (rc < 0)
        return rc;
    rc = sched_job_delete(d, id, a->artifacts_dir, time_wall_ms(), http_errbuf(r));
    if (rc < 0)
        return api_no_job(r, rc, id);
    app_log(a, "job %s deleted", id);
    api_raise(a->changed); /* followers of the job see it gone and end */
    return http_reply_empty(r, 204);
}
