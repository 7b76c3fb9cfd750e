/* job_experiment: the job document's experiment sections — early_stopping, init_from,
 * tensorboard, notify and keep (job/job.h says what each means).
 *
 * They are checked after the rest of the document, because early_stopping.monitor depends on it:
 * a built-in job reports loss and, with validation_split, val_loss; accuracy only for
 * classification. A script job reports metrics of its own choosing, so any name is taken and
 * what it never reports simply never stops it; restore_best and histograms need weights trainyard
 * holds, so script jobs are refused them.
 *
 * The resolved document shows each section only when it says something (as distribution does),
 * so documents without them stay as they were; early_stopping shows every member with "auto"
 * resolved to min or max. */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job/job_priv.h"

#define JOB_ID_HEX 32 /* a job's public id: 128 bits as lowercase hex (db/db.h's DB_ID_LEN) */

static const job_enum job_es_modes[] = {
    {"auto", -1}, {"min", JOB_ES_MIN}, {"max", JOB_ES_MAX}, {NULL, 0}};

static const job_enum job_events[] = {{"succeeded", JOB_EVENT_SUCCEEDED},
                                      {"failed", JOB_EVENT_FAILED},
                                      {"cancelled", JOB_EVENT_CANCELLED},
                                      {"running", JOB_EVENT_RUNNING},
                                      {NULL, 0}};

const char *job_event_name(int bit)
{
    return job_enum_name(job_events, bit);
}

/* Keras's "auto": accuracies grow, everything else (losses, errors) shrinks. */
static int job_es_auto_mode(const char *monitor)
{
    return strstr(monitor, "acc") ? JOB_ES_MAX : JOB_ES_MIN;
}

/* The metrics a built-in job reports, so a monitor that would never be seen is an error at
 * submit rather than a job that silently never stops. */
static void job_es_check_monitor(job_vctx *v, const job_spec *s)
{
    const char *m = s->early_stopping.monitor;
    const char *path = "early_stopping.monitor";
    int val = strncmp(m, "val_", 4) == 0;
    const char *base = val ? m + 4 : m;
    if (strcmp(base, "loss") != 0 && strcmp(base, "accuracy") != 0) {
        field_errors_add(v->errs, path,
                         "must be one of \"loss\", \"val_loss\", \"accuracy\" or \"val_accuracy\" "
                         "(the metrics a built-in job reports), got \"%s\"",
                         m);
        return;
    }
    if (strcmp(base, "accuracy") == 0 && s->task != JOB_TASK_CLASSIFICATION)
        field_errors_add(v->errs, path, "\"%s\" is reported only by classification jobs", m);
    if (val && !(s->validation_split > 0))
        field_errors_add(v->errs, path,
                         "\"%s\" needs hyperparameters.validation_split > 0: without a "
                         "validation set the job reports no %s",
                         m, m);
}

static void job_v_early_stopping(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"monitor",      "mode",     "patience",
                                        "min_delta",    "baseline", "start_from_epoch",
                                        "restore_best", NULL};
    const char *path = "early_stopping";
    const json_t *es = NULL;
    if (job_get_object(v, doc, "early_stopping", "", &es) != 1)
        return;
    job_early_stopping *e = &s->early_stopping;
    e->enabled = 1;
    field_errors_unknown(v->errs, es, path, known);
    const char *monitor = "val_loss";
    const char *given = NULL;
    if (job_get_string(v, es, "monitor", path, &given) == 1) {
        size_t n = strlen(given);
        if (n == 0 || n >= JOB_MAX_METRIC) {
            field_errors_add(v->errs, "early_stopping.monitor",
                             "must be a metric name of 1 to %d bytes", JOB_MAX_METRIC - 1);
            given = NULL;
        } else {
            monitor = given;
        }
    }
    memcpy(e->monitor, monitor, strlen(monitor) + 1);
    int mode = -1;
    job_get_enum(v, es, "mode", path, job_es_modes, "\"auto\", \"min\" or \"max\"", &mode);
    e->mode = mode < 0 ? job_es_auto_mode(e->monitor) : mode;
    job_get_int32(v, es, "patience", path, 0, JOB_MAX_EPOCHS, &e->patience);
    job_get_number(v, es, "min_delta", path, (job_range){0, 1e300, 0, 0}, &e->min_delta);
    const json_t *b = json_object_get(es, "baseline");
    if (b && !json_is_null(b) &&
        job_get_number(v, es, "baseline", path, (job_range){-1e300, 1e300, 0, 0}, &e->baseline) ==
            1)
        e->has_baseline = 1;
    job_get_int32(v, es, "start_from_epoch", path, 0, JOB_MAX_EPOCHS, &e->start_from_epoch);
    job_get_bool(v, es, "restore_best", path, &e->restore_best);
    if (job_is_script(s)) {
        if (e->restore_best)
            field_errors_add(v->errs, "early_stopping.restore_best",
                             "applies only to built-in jobs: trainyard does not hold a script's "
                             "weights");
    } else if (given || !json_object_get(es, "monitor")) {
        job_es_check_monitor(v, s);
    }
}

static void job_v_init_from(job_vctx *v, const json_t *doc, job_spec *s)
{
    const char *id = NULL;
    if (job_get_string(v, doc, "init_from", "", &id) != 1)
        return;
    if (job_is_script(s)) {
        field_errors_add(v->errs, "init_from",
                         "applies only to built-in jobs: a script loads what it likes itself");
        return;
    }
    size_t n = strlen(id);
    int hex = n == JOB_ID_HEX;
    for (size_t i = 0; hex && i < n; i++)
        hex = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
    if (!hex) {
        field_errors_add(v->errs, "init_from", "must be a job id (%d lowercase hex digits)",
                         JOB_ID_HEX);
        return;
    }
    s->init_from = job_strdup(v, id);
}

static void job_v_tensorboard(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"histograms", NULL};
    const json_t *tb = NULL;
    if (job_get_object(v, doc, "tensorboard", "", &tb) != 1)
        return;
    field_errors_unknown(v->errs, tb, "tensorboard", known);
    job_get_bool(v, tb, "histograms", "tensorboard", &s->tb_histograms);
    if (s->tb_histograms && job_is_script(s))
        field_errors_add(v->errs, "tensorboard.histograms",
                         "applies only to built-in jobs: trainyard does not hold a script's "
                         "weights");
}

/* A webhook address: http or https with a host, no credentials (the signature authenticates
 * the sender; a receiver's secret does not belong in a stored document). Which hosts may be
 * reached is serve's rule (its allow-list), checked at submit by the API. */
static void job_notify_url(job_vctx *v, const char *field, const char *url, job_notify *n)
{
    size_t len = strlen(url);
    if (len > JOB_MAX_NOTIFY_URL) {
        field_errors_add(v->errs, field, "must be at most %d bytes long, got %zu",
                         JOB_MAX_NOTIFY_URL, len);
        return;
    }
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        field_errors_add(v->errs, field, "must be a URL starting with http:// or https://");
        return;
    }
    CURLU *u = curl_url();
    if (!u) {
        v->rc = -ENOMEM;
        return;
    }
    char *host = NULL, *user = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !host[0])
        field_errors_add(v->errs, field, "is not a URL with a host");
    else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK && user)
        field_errors_add(
            v->errs, field,
            "must not hold credentials: deliveries are signed (X-Trainyard-Signature)");
    else
        n->url = job_strdup(v, url);
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
}

static void job_v_notify_entry(job_vctx *v, const json_t *entry, const char *path, job_notify *n)
{
    static const char *const known[] = {"url", "events", NULL};
    if (!json_is_object(entry)) {
        job_bad(v, path, "an object {\"url\": ..., \"events\": [...]}", entry);
        return;
    }
    field_errors_unknown(v->errs, entry, path, known);
    const char *url = NULL;
    job_path field;
    job_path_key(field, path, "url");
    int got = job_get_string(v, entry, "url", path, &url);
    if (got == 0)
        field_errors_add(v->errs, field, "is required");
    else if (got == 1)
        job_notify_url(v, field, url, n);
    n->events = JOB_EVENT_SUCCEEDED | JOB_EVENT_FAILED | JOB_EVENT_CANCELLED;
    const json_t *events = json_object_get(entry, "events");
    if (!events)
        return;
    job_path_key(field, path, "events");
    if (!json_is_array(events) || json_array_size(events) == 0) {
        job_bad(v, field,
                "a non-empty array of \"succeeded\", \"failed\", \"cancelled\", "
                "\"running\"",
                events);
        return;
    }
    n->events = 0;
    size_t i;
    const json_t *e;
    json_array_foreach (events, i, e) {
        job_path ep;
        job_path_index(ep, field, i);
        int bit = 0;
        for (const job_enum *k = job_events; json_is_string(e) && k->name; k++) {
            if (strcmp(json_string_value(e), k->name) == 0)
                bit = k->value;
        }
        if (!bit)
            job_bad(v, ep, "one of \"succeeded\", \"failed\", \"cancelled\", \"running\"", e);
        else if (n->events & bit)
            field_errors_add(v->errs, ep, "\"%s\" is listed twice", json_string_value(e));
        n->events |= bit;
    }
}

static void job_v_notify(job_vctx *v, const json_t *doc, job_spec *s)
{
    const json_t *list = json_object_get(doc, "notify");
    if (!list)
        return;
    if (!json_is_array(list)) {
        job_bad(v, "notify", "an array of {\"url\": ..., \"events\": [...]}", list);
        return;
    }
    if (json_array_size(list) > JOB_MAX_NOTIFY) {
        field_errors_add(v->errs, "notify", "may hold at most %d entries, got %zu", JOB_MAX_NOTIFY,
                         json_array_size(list));
        return;
    }
    size_t i;
    const json_t *entry;
    json_array_foreach (list, i, entry) {
        job_path path;
        job_path_index(path, "notify", i);
        job_v_notify_entry(v, entry, path, &s->notify[i]);
        s->n_notify = i + 1;
    }
}

void job_v_experiment(job_vctx *v, const json_t *doc, job_spec *s)
{
    job_v_early_stopping(v, doc, s);
    job_v_init_from(v, doc, s);
    job_v_tensorboard(v, doc, s);
    job_v_notify(v, doc, s);
    job_get_bool(v, doc, "keep", "", &s->keep);
}

json_t *job_notify_to_json(const job_spec *s)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < s->n_notify; i++) {
        json_t *events = json_array();
        for (const job_enum *k = job_events; events && k->name; k++) {
            if ((s->notify[i].events & k->value) &&
                json_array_append_new(events, json_string(k->name)) != 0) {
                json_decref(events);
                events = NULL;
            }
        }
        json_t *entry =
            events ? json_pack("{s:s?,s:o}", "url", s->notify[i].url, "events", events) : NULL;
        if (!entry || json_array_append_new(list, entry) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

void job_experiment_to_json(json_t *doc, const job_spec *s, int *bad)
{
    const job_early_stopping *e = &s->early_stopping;
    if (e->enabled) {
        json_t *es = json_object();
        job_put(es, "monitor", job_str(e->monitor, bad), bad);
        job_put(es, "mode", job_str(job_enum_name(job_es_modes, e->mode), bad), bad);
        job_put(es, "patience", json_integer(e->patience), bad);
        job_put(es, "min_delta", json_real(e->min_delta), bad);
        job_put(es, "baseline", e->has_baseline ? json_real(e->baseline) : json_null(), bad);
        job_put(es, "start_from_epoch", json_integer(e->start_from_epoch), bad);
        job_put(es, "restore_best", json_boolean(e->restore_best), bad);
        job_put(doc, "early_stopping", es, bad);
    }
    if (s->init_from)
        job_put(doc, "init_from", job_str(s->init_from, bad), bad);
    if (s->tb_histograms)
        job_put(doc, "tensorboard", json_pack("{s:b}", "histograms", 1), bad);
    if (s->n_notify > 0)
        job_put(doc, "notify", job_notify_to_json(s), bad);
    if (s->keep)
        job_put(doc, "keep", json_true(), bad);
}

void job_experiment_free(job_spec *s)
{
    free(s->init_from);
    for (size_t i = 0; i < s->n_notify; i++)
        free(s->notify[i].url);
}
