/* models: GET /models, GET /v1/models/{name}, GET /v1/models/{name}/versions/{version}.
 *
 * A model is the name of the jobs that published it; each succeeded job that produced a model
 * is one version (db/models.h; the scheduler publishes it when the job succeeds and retires it
 * when the job is deleted). The two /v1 routes answer TensorFlow Serving's GetModelStatus JSON,
 * so its REST clients read them unchanged: versions as strings, newest first, state AVAILABLE
 * or END (retired), status {error_code "OK", error_message ""}. GET /models is trainyard's own
 * listing: names ascending, each with its versions newest first and the latest available one.
 *
 * Visibility follows the jobs': an admin sees every version, a user those of its own jobs
 * (the owner is kept on the row, so it holds after the job is deleted). A name, or a version,
 * with nothing the caller may see is a 404 that says which, as for a job of someone else.
 *
 * Caps: GET /models pages by name (limit 1..500, default 50; next_cursor names where the next
 * page starts); every answer lists at most API_MODEL_VERSIONS_MAX versions per name, the
 * newest. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/models.h"
#include "util/utf8.h"

#define API_MODELS_DEFAULT     50
#define API_MODELS_MAX         500
#define API_MODEL_VERSIONS_MAX 1000
#define API_MODEL_PAGE_FULL    (-EALREADY) /* the walk's "stop: the page is full" */

/* The caller's owner filter: NULL for one who sees every job, else its token id. */
static const char *api_model_owner(http_req *r)
{
    const api_caller *c = api_caller_of(r);
    return api_sees_every_job(c) ? NULL : c->token_id;
}

/* 400 for a name no job can have, so the 404 below always means "none you may see". */
static int api_model_name_ok(const char *name)
{
    return name && *name && strlen(name) <= DB_NAME_MAX && utf8_chars(name) <= 128;
}

/* ---- TensorFlow Serving's model status ---------------------------------------------------- */

/* One walk of GetModelStatus: the model_version_status array, and how many rows it saw. */
typedef struct api_status_walk {
    json_t *list;
    int n;
} api_status_walk;

static int api_status_add(void *ctx, const db_model *m)
{
    api_status_walk *w = ctx;
    if (w->n >= API_MODEL_VERSIONS_MAX)
        return API_MODEL_PAGE_FULL;
    char version[24];
    snprintf(version, sizeof version, "%lld", (long long)m->version);
    json_t *v = json_pack("{s:s, s:s, s:{s:s, s:s}}", "version", version, "state",
                          m->state == DB_MODEL_RETIRED ? "END" : "AVAILABLE", "status",
                          "error_code", "OK", "error_message", "");
    if (!v || json_array_append_new(w->list, v) < 0)
        return -ENOMEM;
    w->n++;
    return 0;
}

/* GetModelStatus for name, every version (version 0) or one. */
static int api_model_status(http_req *r, void *ctx, int64_t version)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *name = http_param(r, "name");
    if (!api_model_name_ok(name))
        return api_reply_bad_param(r, "name", "must be 1 to 128 characters, as a job's name");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    db_model_filter f = {.name = name, .owner = api_model_owner(r), .version = version};
    api_status_walk w = {json_array(), 0};
    if (!w.list)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = db_model_list(d, &f, api_status_add, &w, err);
    if (rc == API_MODEL_PAGE_FULL)
        rc = 0;
    if (rc == -ENOMEM)
        err_set(err, rc, "cannot build the model status");
    if (rc == 0 && w.n == 0 && version == 0)
        rc = err_set(err, -ENOENT,
                     "no model is named %s (or none you may see): a job of that "
                     "name publishes one when it succeeds",
                     name);
    else if (rc == 0 && w.n == 0)
        rc = err_set(err, -ENOENT,
                     "model %s has no version %lld (or none you may see): GET "
                     "/v1/models/%s lists its versions",
                     name, (long long)version, name);
    if (rc < 0) {
        json_decref(w.list);
        return rc;
    }
    static const char *const keys[] = {"model_version_status"};
    json_t *body = api_encode_object(keys, &w.list, 1);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

int api_models_status(http_req *r, void *ctx)
{
    return api_model_status(r, ctx, 0);
}

int api_models_version_status(http_req *r, void *ctx)
{
    long v = 0;
    if (api_parse_int(http_param(r, "version"), 1, 1000000000000000L, &v) < 0)
        return api_reply_bad_param(r, "version", "must be a version number: 1, 2, ...");
    return api_model_status(r, ctx, v);
}

/* ---- GET /models -------------------------------------------------------------------------- */

/* One page of GET /models being built: names in order, the current name's entry. */
typedef struct api_model_page {
    json_t *models;
    json_t *versions; /* borrowed from the current entry */
    json_t *current;  /* borrowed */
    char name[DB_NAME_MAX + 1];
    int names, want, per_name, more;
} api_model_page;

static int api_model_page_add(void *ctx, const db_model *m)
{
    api_model_page *p = ctx;
    if (!p->current || strcmp(p->name, m->name) != 0) {
        if (p->names == p->want) {
            p->more = 1;
            return API_MODEL_PAGE_FULL;
        }
        p->current = json_pack("{s:s, s:[], s:n}", "name", m->name, "versions", "latest");
        if (!p->current || json_array_append_new(p->models, p->current) < 0)
            return -ENOMEM;
        p->versions = json_object_get(p->current, "versions");
        snprintf(p->name, sizeof p->name, "%s", m->name);
        p->names++;
        p->per_name = 0;
    }
    /* latest: the newest available version, listed or past the cap */
    if (m->state == DB_MODEL_AVAILABLE && json_is_null(json_object_get(p->current, "latest")) &&
        json_object_set_new(p->current, "latest", json_integer((json_int_t)m->version)) < 0)
        return -ENOMEM;
    if (p->per_name >= API_MODEL_VERSIONS_MAX)
        return 0;
    p->per_name++;
    json_t *v =
        json_pack("{s:I, s:s, s:s, s:o, s:o}", "version", (json_int_t)m->version, "job_id",
                  m->job_id, "state", db_model_state_name(m->state), "created_at",
                  api_encode_time(m->created_at), "retired_at", api_encode_time(m->retired_at));
    if (!v || json_array_append_new(p->versions, v) < 0)
        return -ENOMEM;
    return 0;
}

int api_models_list(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    long lim = API_MODELS_DEFAULT;
    const char *limit = http_query(r, "limit");
    if (limit && api_parse_int(limit, 1, API_MODELS_MAX, &lim) < 0)
        return api_reply_bad_param(r, "limit", "must be an integer from 1 to 500");
    db_model_filter f = {.owner = api_model_owner(r), .after = http_query(r, "cursor")};
    if (f.after && !api_model_name_ok(f.after))
        return api_reply_bad_param(r, "cursor",
                                   "is not a cursor this server made: pass next_cursor as is");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    api_model_page p = {.models = json_array(), .want = (int)lim};
    if (!p.models)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = db_model_list(d, &f, api_model_page_add, &p, err);
    if (rc == API_MODEL_PAGE_FULL)
        rc = 0;
    if (rc < 0) {
        if (rc == -ENOMEM)
            err_set(err, rc, "cannot build the model list");
        json_decref(p.models);
        return rc;
    }
    json_t *next = p.more ? json_string(p.name) : json_null();
    static const char *const keys[] = {"models", "next_cursor"};
    json_t *vals[] = {p.models, next};
    json_t *body = api_encode_object(keys, vals, 2);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}
