/* webhooks: the API's side of webhooks and retention — notify URLs checked at submit,
 * GET /jobs/{id}/deliveries, POST /tokens/{id}/webhook-secret, and PATCH /jobs/{id}
 * {"keep": bool}. scheduler/notify.h says how deliveries are made and signed,
 * scheduler/retention.h what keep protects a job from. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/deliveries.h"
#include "scheduler/notify.h"
#include "scheduler/retention.h"
#include "util/err.h"
#include "util/field_errors.h"
#include "util/secret.h"
#include "util/timeutil.h"

int api_notify_allowed(http_req *r, app *a, const job_spec *spec)
{
    static const allow_list none;
    const allow_list *allow = a->notify_allow ? a->notify_allow : &none;
    field_errors errs = {0};
    for (size_t i = 0; i < spec->n_notify; i++) {
        char err[ERR_LEN], field[48];
        if (!spec->notify[i].url || notify_check_url(allow, spec->notify[i].url, err) == 0)
            continue;
        snprintf(field, sizeof field, "notify[%zu].url", i);
        field_errors_add(&errs, field, "%s", err);
    }
    if (!errs.count)
        return 0;
    int rc = api_reply_invalid(r, "Invalid job document", &errs);
    return rc < 0 ? rc : 1;
}

/* ---- GET /jobs/{id}/deliveries ---------------------------------------------------------- */

typedef struct api_deliveries {
    db *d;
    json_t *list;
    char *err;
} api_deliveries;

static int api_attempt_add(void *ctx, const db_delivery_attempt *at)
{
    json_t *list = ctx;
    static const char *const keys[] = {"attempt", "at", "http_status", "error", "ms"};
    json_t *vals[] = {json_integer(at->attempt), api_encode_time(at->at),
                      at->http_status ? json_integer(at->http_status) : json_null(),
                      at->error ? json_string(at->error) : json_null(), json_integer(at->ms)};
    json_t *o = api_encode_object(keys, vals, 5);
    return o && json_array_append_new(list, o) == 0 ? 0 : -ENOMEM;
}

static int api_delivery_add(void *ctx, const db_delivery *dl)
{
    api_deliveries *w = ctx;
    json_t *attempts = json_array();
    if (!attempts)
        return -ENOMEM;
    int rc = db_delivery_attempts(w->d, dl->id, api_attempt_add, attempts, w->err);
    if (rc < 0) {
        json_decref(attempts);
        return rc;
    }
    char event[64];
    snprintf(event, sizeof event, "%s.%s", dl->sweep_seq ? "sweep" : "job", dl->event);
    static const char *const keys[] = {"id",         "event",   "url",         "status",
                                       "created_at", "next_at", "finished_at", "attempts"};
    json_t *vals[] = {json_integer(dl->id),
                      json_string(event),
                      json_string(dl->url),
                      json_string(db_delivery_status_name(dl->status)),
                      api_encode_time(dl->created_at),
                      api_encode_time(dl->status == DB_DELIVERY_PENDING ? dl->next_at : 0),
                      api_encode_time(dl->finished_at),
                      attempts};
    json_t *o = api_encode_object(keys, vals, 8);
    return o && json_array_append_new(w->list, o) == 0 ? 0 : -ENOMEM;
}

int api_jobs_deliveries(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j); /* the caller's job, or 404 */
    if (rc < 0)
        return rc;
    api_deliveries w = {d, json_array(), http_errbuf(r)};
    rc = w.list ? db_delivery_list_job(d, j.seq, api_delivery_add, &w, w.err) : -ENOMEM;
    db_job_clear(&j);
    return api_reply_list(r, "deliveries", w.list, rc);
}

/* ---- POST /tokens/{id}/webhook-secret --------------------------------------------------- */

int api_tokens_webhook_secret(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *id = http_param(r, "id");
    const api_caller *c = api_caller_of(r);
    /* an admin sets anyone's; a user only its own (another's is a 404, as for jobs) */
    if (c->authenticated && c->role != DB_ROLE_ADMIN && strcmp(c->token_id, id) != 0)
        return err_set(err, -ENOENT, "no active token has the id %s", id);
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    char secret[NOTIFY_SECRET_LEN + 1];
    int rc = notify_token_secret_set(d, a->credentials_key, id, secret, err);
    if (rc < 0)
        return rc;
    app_log(a, "token %s: new webhook secret, set by token %s", id, c->token_id);
    json_t *body = json_pack("{s:s, s:s}", "token_id", id, "secret", secret);
    explicit_bzero(secret, sizeof secret);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

/* ---- PATCH /jobs/{id} ------------------------------------------------------------------- */

int api_jobs_patch(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = NULL;
    db_job j;
    json_t *body = NULL;
    int rc = api_job_find(r, a, &d, &j); /* the caller's job (owner or admin), or 404 */
    if (rc < 0)
        return rc;
    db_job_clear(&j);
    rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    if (!json_is_object(body)) {
        json_decref(body);
        return api_reply_bad_param(r, "body", "must be a JSON object such as {\"keep\": true}");
    }
    const char *key;
    json_t *v;
    json_object_foreach (body, key, v) {
        if (strcmp(key, "keep") != 0) {
            field_errors errs = {0};
            field_errors_add(&errs, key, "cannot be changed: PATCH /jobs/{id} takes keep only");
            json_decref(body);
            return api_reply_invalid(r, "Invalid change", &errs);
        }
    }
    json_t *keep = json_object_get(body, "keep");
    if (!json_is_boolean(keep)) {
        json_decref(body);
        return api_reply_bad_param(r, "keep", keep ? "must be true or false" : "is required");
    }
    const char *id = http_param(r, "id");
    rc = sched_job_set_keep(d, id, json_is_true(keep), err);
    json_decref(body);
    if (rc < 0)
        return api_no_job(r, rc, id);
    rc = db_job_get(d, id, &j, err);
    if (rc < 0)
        return api_no_job(r, rc, id);
    size_t len = 0;
    char *text = api_encode_job_text(&j, &len);
    db_job_clear(&j);
    if (!text)
        return err_set(err, -ENOMEM, "cannot build the job's JSON");
    api_raise(a->changed);
    rc = http_reply_bytes(r, 200, "application/json", text, len);
    free(text);
    return rc;
}
