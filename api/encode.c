/* encode: rows to openapi.yaml's JSON, and the shared encodings (see encode.h).
 *
 * jansson references: json_object_set_new() and json_array_append_new() steal the value, and
 * both accept NULL (they fail and set nothing), so a builder packs everything and checks only
 * once at the end that every required member made it, instead of checking each allocation.
 *
 * The cursor is base64url of "s<seq>": opaque to clients (they pass next_cursor back as is),
 * trivially versioned by its first letter, and strict to decode (a canonical decimal seq > 0),
 * so a cursor that was not made here is a 400, not a silently different page. */
#include "api/encode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/json_out.h"
#include "job/job.h"

/* ---- scalars ---------------------------------------------------------------------------- */

void api_encode_time_format(int64_t ms, char buf[API_TIME_LEN])
{
    time_t secs = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    char date[24];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, API_TIME_LEN, "%s.%03dZ", date, frac);
}

json_t *api_encode_time(int64_t ms)
{
    if (ms == 0)
        return json_null();
    char buf[API_TIME_LEN];
    api_encode_time_format(ms, buf);
    return json_string(buf);
}

json_t *api_encode_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A JSON string, or null for NULL or "". */
static json_t *api_opt_string(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

/* ---- the builders ---------------------------------------------------------------------- */

json_t *api_encode_object(const char *const *keys, json_t **vals, size_t n)
{
    json_t *o = json_object();
    int ok = o != NULL;
    for (size_t i = 0; i < n; i++) {
        if (!vals[i])
            ok = 0;
        else if (!o)
            json_decref(vals[i]);
        else if (json_object_set_new(o, keys[i], vals[i]) < 0) /* stolen even on failure */
            ok = 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *api_job_links(const char *id)
{
    static const char *const names[] = {"self", "metrics", "logs", "events", "artifacts", "cancel"};
    static const char *const suffixes[] = {"",        "/metrics",   "/logs",
                                           "/events", "/artifacts", "/cancel"};
    json_t *vals[6];
    char buf[DB_ID_LEN + 32];
    for (size_t i = 0; i < 6; i++) {
        snprintf(buf, sizeof buf, "/jobs/%s%s", id, suffixes[i]);
        vals[i] = json_string(buf);
    }
    return api_encode_object(names, vals, 6);
}

/* The Job object with `document` given (a new reference, stolen; NULL means out of memory) and
 * `attempts` when not NULL (stolen too). */
static json_t *api_job_with(const db_job *j, json_t *doc, json_t *attempts, json_t *extra)
{
    static const char *const keys[] = {"id",
                                       "job_id", /* the same: seed 002's name */
                                       "name",
                                       "status",
                                       "phase",
                                       "attempt",
                                       "max_attempts",
                                       "priority",
                                       "created_at",
                                       "started_at",
                                       "finished_at",
                                       "error",
                                       "device",
                                       "worker",
                                       "cancel_requested",
                                       "owner",
                                       "slurm_job_id",
                                       "stop_requested",
                                       "stop_reason",
                                       "stopped_epoch",
                                       "best_epoch",
                                       "keep",
                                       "sweep_id",
                                       "retry_at",
                                       "document",
                                       "links",
                                       "attempts"};
    const char *phase = db_phase_name(j->phase);
    /* retry_at: a queued job's back-off after a lost attempt; null otherwise */
    json_t *vals[] = {json_string(j->id),
                      json_string(j->id),
                      json_string(j->name),
                      json_string(db_status_name(j->status)),
                      phase ? json_string(phase) : json_null(),
                      json_integer(j->attempt),
                      json_integer(j->max_attempts),
                      json_integer(j->priority),
                      api_encode_time(j->created_at),
                      api_encode_time(j->started_at),
                      api_encode_time(j->finished_at),
                      api_opt_string(j->error),
                      api_opt_string(j->device),
                      api_opt_string(j->worker_id),
                      json_boolean(j->cancel_requested),
                      api_opt_string(j->owner),
                      api_opt_string(j->slurm_job_id),
                      api_opt_string(j->stop_requested),
                      api_opt_string(j->stop_reason),
                      j->stopped_epoch > 0 ? json_integer(j->stopped_epoch) : json_null(),
                      j->best_epoch > 0 ? json_integer(j->best_epoch) : json_null(),
                      json_boolean(j->keep),
                      api_opt_string(j->sweep_id),
                      api_encode_time(j->status == DB_QUEUED ? j->retry_at : 0),
                      doc,
                      api_job_links(j->id),
                      attempts};
    size_t n = sizeof vals / sizeof vals[0];
    json_t *o = api_encode_object(keys, vals, attempts ? n : n - 1);
    if (extra && o && json_object_update(o, extra) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(extra);
    return o;
}

json_t *api_encode_job(const db_job *j)
{
    json_t *doc = json_loads(j->document ? j->document : "", 0, NULL);
    if (doc && !json_is_object(doc)) {
        json_decref(doc);
        doc = NULL;
    }
    return api_job_with(j, doc, NULL, NULL);
}

char *api_encode_job_text(const db_job *j, size_t *len)
{
    return api_encode_job_text_with(j, NULL, NULL, len);
}

char *api_encode_job_text_with(const db_job *j, json_t *attempts, json_t *extra, size_t *len)
{
    /* The stored document is compact JSON the server wrote itself at submit time; parsing and
     * printing it again on every GET was most of a GET's cost. The outer object is dumped with a
     * null in its place and the stored text spliced in. `"document":null` cannot occur inside a
     * string value (its quotes would be escaped there), so its one match is the member. */
    static const char hole[] = "\"document\":null";
    if (!j->document || j->document[0] != '{') {
        json_decref(attempts);
        json_decref(extra);
        return NULL;
    }
    json_t *o = api_job_with(j, json_null(), attempts, extra);
    char *outer = o ? json_out_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    char *at = outer ? strstr(outer, hole) : NULL;
    if (!at) {
        free(outer);
        return NULL;
    }
    size_t head = (size_t)(at - outer) + sizeof hole - 1 - 4; /* up to "document": */
    size_t doc_len = strlen(j->document), tail = strlen(at + sizeof hole - 1);
    char *text = malloc(head + doc_len + tail + 1);
    if (text) {
        memcpy(text, outer, head);
        memcpy(text + head, j->document, doc_len);
        memcpy(text + head + doc_len, at + sizeof hole - 1, tail + 1);
        *len = head + doc_len + tail;
    }
    free(outer);
    return text;
}

/* "leased by worker <id> on <device>" (sched_job_lease's reason): the worker and the device. */
static void api_lease_reason(const char *reason, json_t **worker, json_t **device)
{
    static const char prefix[] = "leased by worker ", on[] = " on ", none[] = "its device";
    *worker = json_null();
    *device = json_null();
    if (strncmp(reason, prefix, sizeof prefix - 1) != 0)
        return;
    const char *id = reason + sizeof prefix - 1, *end = strchr(id, ' ');
    size_t n = end ? (size_t)(end - id) : strlen(id);
    if (n == 0)
        return;
    json_decref(*worker);
    *worker = json_stringn(id, n);
    if (end && strncmp(end, on, sizeof on - 1) == 0 && strcmp(end + sizeof on - 1, none) != 0) {
        json_decref(*device);
        *device = json_string(end + sizeof on - 1);
    }
}

int api_encode_attempts_add(json_t *attempts, const db_event *e)
{
    if (e->from == DB_QUEUED && e->to == DB_RUNNING) {
        static const char *const keys[] = {"attempt",  "worker",  "device", "started_at",
                                           "ended_at", "outcome", "reason"};
        json_t *worker, *device;
        api_lease_reason(e->reason, &worker, &device);
        json_t *vals[] = {json_integer(e->attempt),
                          worker,
                          device,
                          api_encode_time(e->at),
                          json_null(),
                          json_null(),
                          json_null()};
        json_t *o = api_encode_object(keys, vals, 7);
        return o && json_array_append_new(attempts, o) == 0 ? 0 : -ENOMEM;
    }
    if (e->from != DB_RUNNING || e->to == DB_RUNNING)
        return 0; /* the submit, a cancel request: no attempt starts or ends */
    json_t *last = json_array_get(attempts, json_array_size(attempts) - 1);
    if (!last || !json_is_null(json_object_get(last, "ended_at")) ||
        json_integer_value(json_object_get(last, "attempt")) != e->attempt)
        return 0; /* an end without its start (history from before this rule): skipped */
    const char *outcome = e->to == DB_QUEUED ? "requeued" : db_status_name(e->to);
    int rc = json_object_set_new(last, "ended_at", api_encode_time(e->at));
    rc |= json_object_set_new(last, "outcome", json_string(outcome));
    rc |= json_object_set_new(last, "reason", e->reason[0] ? json_string(e->reason) : json_null());
    return rc == 0 ? 0 : -ENOMEM;
}

json_t *api_encode_metric(const db_metric *m)
{
    static const char *const keys[] = {"epoch",        "loss",    "val_loss",          "accuracy",
                                       "val_accuracy", "seconds", "samples_per_second"};
    json_t *vals[] = {json_integer(m->epoch),
                      api_encode_real(m->loss),
                      api_encode_real(m->val_loss),
                      api_encode_real(m->accuracy),
                      api_encode_real(m->val_accuracy),
                      api_encode_real(m->seconds),
                      isfinite(m->samples_per_second) ? json_real(m->samples_per_second) : NULL};
    /* samples_per_second is optional: left out when unknown */
    size_t n = vals[6] ? 7 : 6;
    json_t *o = api_encode_object(keys, vals, n);
    if (!o || !m->extra)
        return o;
    /* A script's own metrics beside the known ones (stored text the heartbeat checked). */
    json_t *extra = json_loads(m->extra, 0, NULL);
    if (!json_is_object(extra) || json_object_update_missing(o, extra) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(extra);
    return o;
}

json_t *api_encode_artifact(const db_artifact *a)
{
    static const char *const keys[] = {"name", "size", "sha256"};
    json_t *vals[] = {json_string(a->name), json_integer(a->size), json_string(a->sha256)};
    return api_encode_object(keys, vals, 3);
}

/* What leasing gives a worker (scheduler/waiting.h's rule): built-in jobs unless its devices
 * lack OpenCL, script jobs when it runs them, jobs asking for the kinds of device it has, up to
 * its slots in replicas, and only its own Slurm job when it was made for one. */
static json_t *api_worker_takes(const db_worker *w)
{
    json_t *kinds = json_array();
    if (kinds && (w->kinds & DB_KIND_GPU))
        json_array_append_new(kinds, json_string("gpu"));
    if (kinds && (w->kinds & DB_KIND_CPU))
        json_array_append_new(kinds, json_string("cpu"));
    return json_pack("{s:b, s:b, s:o, s:i, s:b}", "built_in",
                     w->kinds != 0 && !(w->kinds & DB_KIND_SCRIPTS_ONLY), "scripts",
                     w->kinds != 0 && w->scripts, "devices", kinds ? kinds : json_null(),
                     "replicas", w->slots > 1 ? w->slots : 1, "only_its_slurm_job", w->bound);
}

json_t *api_encode_worker(const db_worker *w, int64_t gone_before, int lease_seconds)
{
    static const char *const keys[] = {"id",      "name",          "status",       "devices",
                                       "job",     "registered_at", "last_seen_at", "lease_seconds",
                                       "scripts", "slots",         "takes"};
    const char *status = w->gone || w->last_seen_at < gone_before ? "gone"
                         : w->job_id[0]                           ? "busy"
                                                                  : "idle";
    json_t *devices = json_loads(w->devices ? w->devices : "[]", 0, NULL);
    if (devices && !json_is_array(devices)) {
        json_decref(devices);
        devices = json_array();
    }
    json_t *vals[] = {json_string(w->id),
                      json_string(w->name),
                      json_string(status),
                      devices,
                      api_opt_string(w->job_id),
                      api_encode_time(w->registered_at),
                      api_encode_time(w->last_seen_at),
                      json_integer(lease_seconds),
                      json_boolean(w->scripts),
                      json_integer(w->slots > 1 ? w->slots : 1),
                      api_worker_takes(w)};
    return api_encode_object(keys, vals, sizeof vals / sizeof vals[0]);
}

json_t *api_encode_wait(const sched_wait *w)
{
    json_t *o = json_pack("{s:s, s:s}", "reason", w->reason, "message", w->message);
    if (o && w->jobs_ahead > 0 &&
        json_object_set_new(o, "jobs_ahead", json_integer((json_int_t)w->jobs_ahead)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *api_encode_lease(const db_job *j)
{
    static const char *const keys[] = {"job_id", "attempt", "lease_expires_at", "document", "code"};
    json_t *doc = json_loads(j->document ? j->document : "", 0, NULL);
    /* A script job with uploaded code: the GET that fetches it (with the worker's token). */
    const char *code = json_string_value(json_object_get(doc, "code"));
    char path[96];
    int with_code = j->script && code && strlen(code) < sizeof path - 6;
    if (with_code)
        snprintf(path, sizeof path, "/code/%s", code);
    json_t *vals[] = {json_string(j->id), json_integer(j->attempt),
                      api_encode_time(j->lease_expires_at), doc,
                      with_code ? json_string(path) : NULL};
    return api_encode_object(keys, vals, with_code ? 5 : 4);
}

/* ---- encodings -------------------------------------------------------------------------- */

int api_encode_base64(const void *data, size_t len, int url, char *out, size_t cap)
{
    static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *alpha = url ? safe : std;
    const unsigned char *p = data;
    size_t need = url ? (len * 4 + 2) / 3 : (len + 2) / 3 * 4;
    if (need + 1 > cap)
        return -ENOSPC;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        size_t left = len - i;
        if (left > 1)
            v |= (uint32_t)p[i + 1] << 8;
        if (left > 2)
            v |= p[i + 2];
        out[o++] = alpha[(v >> 18) & 63];
        out[o++] = alpha[(v >> 12) & 63];
        if (left > 1)
            out[o++] = alpha[(v >> 6) & 63];
        else if (!url)
            out[o++] = '=';
        if (left > 2)
            out[o++] = alpha[v & 63];
        else if (!url)
            out[o++] = '=';
    }
    out[o] = '\0';
    return (int)o;
}

void api_encode_cursor(int64_t seq, char out[API_CURSOR_MAX + 1])
{
    snprintf(out, API_CURSOR_MAX + 1, "%016llx", (unsigned long long)seq);
}

int api_encode_cursor_seq(const char *cursor, int64_t *seq)
{
    /* Exactly API_CURSOR_LEN lowercase hex digits, so that every cursor the schema allows names
     * a position; values past INT64_MAX name the newest end. */
    if (strlen(cursor) != API_CURSOR_LEN)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < API_CURSOR_LEN; i++) {
        char c = cursor[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -EINVAL;
        v = v << 4 | (uint64_t)d;
    }
    *seq = v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    return 0;
}

json_t *api_encode_token(const db_token *t)
{
    static const char *const keys[] = {"id",         "name",    "role",        "created_at",
                                       "revoked_at", "scripts", "max_running", "max_queued"};
    /* scripts: whether the token may submit script jobs; an admin always may. The caps are
     * null when the token has none. */
    json_t *vals[] = {json_string(t->id),
                      json_string(t->name),
                      json_string(db_role_name(t->role)),
                      api_encode_time(t->created_at),
                      api_encode_time(t->revoked_at),
                      json_boolean(t->scripts || t->role == DB_ROLE_ADMIN),
                      t->max_running > 0 ? json_integer(t->max_running) : json_null(),
                      t->max_queued > 0 ? json_integer(t->max_queued) : json_null()};
    return api_encode_object(keys, vals, 8);
}
