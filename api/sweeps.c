/* sweeps: POST /sweeps, GET /sweeps, GET /sweeps/{id}, POST /sweeps/{id}/cancel.
 *
 * Submit: the document is checked whole by sweep_spec_parse (scheduler/sweep_spec.h: every
 * trial's job document is built and validated, so no trial can fail to be made later), its
 * resolved form stored as a running sweep, and answered 201. The trials are made by the
 * sweep controller (scheduler/sweep.h) on its own thread, within SWEEP_CTL_INTERVAL_MS: the
 * handler never waits on them.
 *
 * Ownership as for jobs (api/auth.c): a sweep belongs to the token that submitted it and so do
 * its trials; a user token sees and cancels its own sweeps only (404 for the others), admin
 * tokens every one. A script job as base needs the scripts right, as POST /train does.
 *
 * The Sweep object carries its leaderboard (scheduler/sweep.h: each trial's best value of the
 * metric, best first), read from the trials and their metrics at each request; lists leave
 * the leaderboard out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/sweeps.h"
#include "scheduler/notify.h"
#include "scheduler/sweep.h"
#include "util/datadir.h"
#include "util/json_out.h"
#include "util/timeutil.h"

#define API_SWEEP_LIST_DEFAULT 50
#define API_SWEEP_LIST_MAX     500

/* ---- the Sweep object ------------------------------------------------------------------- */

static json_t *api_sweep_entry(const sweep_entry *e, int rank)
{
    return json_pack("{s:i, s:s, s:s, s:s, s:O, s:o, s:o, s:i, s:o}", "rank", rank, "job_id", e->id,
                     "name", e->name, "status", db_status_name(e->status), "parameters",
                     e->parameters, "value", api_encode_real(e->value), "epoch",
                     e->epoch > 0 ? json_integer(e->epoch) : json_null(), "epochs_run",
                     e->epochs_run, "stop_reason",
                     e->stop_reason ? json_string(e->stop_reason) : json_null());
}

/* The Sweep of s with its board; with_board 0 leaves the leaderboard out (lists). */
static json_t *api_sweep_encode(const db_sweep *s, const sweep_board *b, int with_board)
{
    json_t *doc = json_loads(s->document, 0, NULL);
    json_t *best = json_null();
    if (b->best >= 0) {
        const sweep_entry *e = &b->entries[b->best];
        json_decref(best);
        best = json_pack("{s:s, s:o, s:i, s:O}", "job_id", e->id, "value",
                         api_encode_real(e->value), "epoch", e->epoch, "parameters", e->parameters);
    }
    json_t *trials =
        json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "created", (int)b->n, "queued", b->queued,
                  "running", b->running, "succeeded", b->succeeded, "failed", b->failed,
                  "cancelled", b->cancelled, "stopped_early", b->stopped_early);
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:o, s:o}", "id", s->id, "name", s->name,
        "status", db_sweep_status_name(s->status), "created_at", api_encode_time(s->created_at),
        "finished_at", api_encode_time(s->finished_at), "document", doc ? doc : json_null(),
        "trials", trials ? trials : json_null(), "epochs_total", (json_int_t)b->epochs_total,
        "best", best ? best : json_null(), "error", s->error ? json_string(s->error) : json_null());
    if (o && with_board) {
        json_t *lb = json_array();
        for (size_t i = 0; lb && i < b->n; i++)
            if (json_array_append_new(lb, api_sweep_entry(&b->entries[i], (int)i + 1)) < 0) {
                json_decref(lb);
                lb = NULL;
            }
        if (!lb || json_object_set_new(o, "leaderboard", lb) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* The Sweep of s as the API answers it, board read now; NULL with err on failure. */
static json_t *api_sweep_json(db *d, const db_sweep *s, int with_board, char *err)
{
    sweep_spec *spec = NULL;
    sweep_board b;
    memset(&b, 0, sizeof b);
    b.best = -1;
    int rc = sweep_spec_stored(s->document, &spec, err);
    if (rc == 0)
        rc = sweep_board_read(d, s, spec, &b, err);
    json_t *o = NULL;
    if (rc == 0) {
        o = api_sweep_encode(s, &b, with_board);
        if (!o)
            err_set(err, -ENOMEM, "cannot build the sweep's JSON");
    }
    sweep_board_free(&b);
    sweep_spec_free(spec);
    return o;
}

/* The {id} sweep if the caller may see it; -ENOENT with a sentence otherwise. */
static int api_sweep_find(http_req *r, app *a, db **d, db_sweep *out)
{
    db *conn = api_db(r, a);
    if (!conn)
        return -EIO;
    const char *id = http_param(r, "id");
    int rc = db_sweep_get(conn, id, out, http_errbuf(r));
    if (rc == 0 && !api_may_see(r, out->owner)) {
        db_sweep_clear(out);
        rc = -ENOENT;
    }
    if (rc == -ENOENT)
        err_set(http_errbuf(r), rc, "no sweep has the id %s", id);
    if (rc < 0)
        return rc;
    *d = conn;
    return 0;
}

static int api_sweep_reply(http_req *r, db *d, int status, const db_sweep *s)
{
    json_t *o = api_sweep_json(d, s, 1, http_errbuf(r));
    if (!o)
        return -EIO;
    if (status == 201) {
        char loc[DB_ID_LEN + 16];
        snprintf(loc, sizeof loc, "/sweeps/%s", s->id);
        http_header_add(r, "Location", loc);
    }
    return http_reply_json(r, status, o);
}

/* ---- POST /sweeps ----------------------------------------------------------------------- */

/* A script job as base: the scripts right (403) and stored code (400), as POST /train. Returns
 * 1 after answering, 0 to go on. */
static int api_sweep_script_allowed(http_req *r, app *a, const json_t *base)
{
    if (!api_may_run_scripts(r)) {
        http_field_error e = {"base.training_script",
                              "this token may not submit script jobs; an admin can create one "
                              "with scripts: true"};
        int rc = http_reply_problem(r, 403, "Forbidden",
                                    "script jobs need a token with the scripts right", &e, 1);
        return rc < 0 ? rc : 1;
    }
    const char *code = json_string_value(json_object_get(base, "code"));
    char path[DATADIR_PATH_MAX];
    if (code && !strncmp(code, "sha256:", 7) &&
        (datadir_code_file(a->data_dir, code + 7, path) < 0 || access(path, F_OK) != 0)) {
        field_errors errs = {0};
        field_errors_add(&errs, "base.code",
                         "no code was uploaded with the address %s: upload the .tar.gz with POST "
                         "/code first and give the address it answers",
                         code);
        int rc = api_reply_invalid(r, "Invalid sweep document", &errs);
        return rc < 0 ? rc : 1;
    }
    return 0;
}

/* Webhook URLs, the sweep's own (notify[i].url) and its trials' (base.notify[i].url), obey the
 * server's host rules, as a job's do (api/webhooks.c). Returns 1 after answering, 0 to go on. */
static int api_sweep_notify_allowed(http_req *r, app *a, const sweep_spec *spec)
{
    static const allow_list none;
    const allow_list *allow = a->notify_allow ? a->notify_allow : &none;
    static const char *const where[] = {"notify", "base.notify"};
    const json_t *lists[] = {json_object_get(spec->doc, "notify"),
                             json_object_get(spec->base, "notify")};
    field_errors errs = {0};
    for (int k = 0; k < 2; k++) {
        size_t i;
        const json_t *entry;
        json_array_foreach (lists[k], i, entry) {
            const char *url = json_string_value(json_object_get(entry, "url"));
            char err[ERR_LEN], field[64];
            if (!url || notify_check_url(allow, url, err) == 0)
                continue;
            snprintf(field, sizeof field, "%s[%zu].url", where[k], i);
            field_errors_add(&errs, field, "%s", err);
        }
    }
    if (!errs.count)
        return 0;
    int rc = api_reply_invalid(r, "Invalid sweep document", &errs);
    return rc < 0 ? rc : 1;
}

int api_sweeps_submit(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    json_t *body = NULL;
    sweep_spec *spec = NULL;
    char *text = NULL;
    db_sweep s;
    memset(&s, 0, sizeof s);

    if (a->stopping)
        return err_set(err, -ESHUTDOWN,
                       "the service is stopping and takes no new sweeps: submit again once it is "
                       "back");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    field_errors errs;
    rc = sweep_spec_parse(body, &spec, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid sweep document", &errs);
        goto out;
    }
    if (rc < 0) {
        err_set(err, rc, "cannot read the sweep document");
        goto out;
    }
    rc = api_sweep_notify_allowed(r, a, spec);
    if (rc != 0) {
        rc = rc > 0 ? 0 : rc;
        goto out;
    }
    if (spec->script) {
        rc = api_sweep_script_allowed(r, a, spec->base);
        if (rc != 0) {
            rc = rc > 0 ? 0 : rc;
            goto out;
        }
    }
    text = json_out_dumps(spec->doc, JSON_COMPACT);
    if (!text) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rc = db_id_new(s.id, err);
    if (rc < 0)
        goto out;
    snprintf(s.name, sizeof s.name, "%s", spec->name);
    snprintf(s.owner, sizeof s.owner, "%s", api_caller_of(r)->token_id);
    s.document = text;
    s.created_at = time_wall_ms();
    /* stored, and its "running" webhooks enqueued, in one transaction */
    rc = db_begin(d, err);
    if (rc < 0)
        goto out;
    rc = db_sweep_insert(d, &s, err);
    if (rc == 0)
        rc = sweep_announce(d, &s, spec->doc, DB_SWEEP_RUNNING, NULL, s.created_at, err);
    if (rc == 0)
        rc = db_commit(d, err);
    else
        db_rollback(d);
    if (rc == 0) {
        app_log(a, "sweep %s running: %s (%d trials, %d at a time)", s.id, s.name, spec->n_trials,
                spec->max_concurrent);
        rc = api_sweep_reply(r, d, 201, &s); /* no trial yet: the controller makes them */
    }
    s.document = NULL; /* text, freed below */
out:
    db_sweep_clear(&s);
    free(text);
    sweep_spec_free(spec);
    json_decref(body);
    return rc;
}

/* ---- GET /sweeps ------------------------------------------------------------------------ */

typedef struct api_sweep_page {
    db *d;
    json_t *list;
    int want, got, more;
    int64_t last_seq;
    char *err;
} api_sweep_page;

static int api_sweep_page_add(void *ctx, const db_sweep *s)
{
    api_sweep_page *p = ctx;
    if (p->got == p->want) {
        p->more = 1;
        return 0;
    }
    json_t *o = api_sweep_json(p->d, s, 0, p->err);
    if (!o)
        return -EIO;
    if (json_array_append_new(p->list, o) < 0)
        return err_set(p->err, -ENOMEM, "out of memory");
    p->got++;
    p->last_seq = s->seq;
    return 0;
}

int api_sweeps_list(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    long lim = API_SWEEP_LIST_DEFAULT;
    int64_t before = 0;
    const char *limit = http_query(r, "limit");
    if (limit && api_parse_int(limit, 1, API_SWEEP_LIST_MAX, &lim) < 0)
        return api_reply_bad_param(r, "limit", "must be an integer from 1 to 500");
    const char *cursor = http_query(r, "cursor");
    if (cursor && (strlen(cursor) > API_CURSOR_MAX || api_encode_cursor_seq(cursor, &before) < 0))
        return api_reply_bad_param(r, "cursor",
                                   "is not a cursor this server made: pass next_cursor as is");
    const api_caller *caller = api_caller_of(r);
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    api_sweep_page page = {.d = d, .list = json_array(), .want = (int)lim, .err = err};
    if (!page.list)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = db_sweep_list(d, api_sees_every_job(caller) ? NULL : caller->token_id, before,
                           (int)lim + 1, api_sweep_page_add, &page, err);
    if (rc < 0) {
        json_decref(page.list);
        return rc;
    }
    return api_reply_page(r, "sweeps", page.list, page.more, page.last_seq);
}

/* ---- one sweep -------------------------------------------------------------------------- */

int api_sweeps_get(http_req *r, void *ctx)
{
    db *d = NULL;
    db_sweep s;
    int rc = api_sweep_find(r, ctx, &d, &s);
    if (rc < 0)
        return rc;
    rc = api_sweep_reply(r, d, 200, &s);
    db_sweep_clear(&s);
    return rc;
}

int api_sweeps_cancel(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = NULL;
    db_sweep s;
    int rc = api_sweep_find(r, a, &d, &s);
    if (rc < 0)
        return rc;
    int changed = 0;
    rc = sched_sweep_cancel(d, s.seq, a->artifacts_dir, time_wall_ms(), &changed, http_errbuf(r));
    if (rc < 0)
        goto out;
    app_log(a, "sweep %s cancelled: %d trial(s) cancelled or asked to", s.id, changed);
    if (changed)
        api_raise(a->changed);
    int64_t seq = s.seq;
    db_sweep_clear(&s);
    rc = db_sweep_get_seq(d, seq, &s, http_errbuf(r));
    if (rc == 0)
        rc = api_sweep_reply(r, d, 200, &s);
out:
    db_sweep_clear(&s);
    return rc;
}
