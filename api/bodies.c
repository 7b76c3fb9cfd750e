/* bodies: the worker protocol's request bodies, checked field by field (see bodies.h).
 *
 * Each parser walks the schema's properties, records a {field, message} for each problem and
 * goes on, then rejects unknown members where the schema says additionalProperties: false
 * (Device objects allow extra members: `trainyard devices --json` prints more than the schema
 * names, and a worker may send all of it). Messages read "must be <rule>". */
#include "api/bodies.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/encode.h"
#include "db/jobs.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "job/job.h"
#include "util/array.h"
#include "util/json_out.h"
#include "util/utf8.h"

/* 1 with *out set when v is an integer, or a real with an integral value (3.0) as JSON Schema
 * counts integers; 0 otherwise. */
static int api_integer(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return *out >= -9007199254740992LL && *out <= 9007199254740992LL; /* openapi's bound */
    }
    if (!json_is_real(v))
        return 0;
    double d = json_real_value(v);
    if (!isfinite(d) || floor(d) != d || fabs(d) > 9007199254740992.0)
        return 0;
    *out = (long long)d;
    return 1;
}

/* A string of 1..max_chars characters; NULL (with an error) otherwise. */
static const char *api_get_string(const json_t *v, const char *field, size_t max_chars,
                                  field_errors *errs)
{
    if (!json_is_string(v)) {
        field_errors_add(errs, field, "must be a string");
        return NULL;
    }
    const char *s = json_string_value(v);
    size_t n = utf8_chars(s);
    if (n < 1 || n > max_chars || strlen(s) != json_string_length(v)) {
        field_errors_add(errs, field, "must be 1 to %zu characters (no NUL)", max_chars);
        return NULL;
    }
    return s;
}

/* ---- WorkerRegistration ----------------------------------------------------------------- */

/* The DB_KIND_* bit of a device's type (0 when invalid, with an error); *opencl is set to 0 for
 * a device that says "opencl": false (a GPU found by NVML or nvidia-smi: script jobs only). */
static unsigned api_device_check(const json_t *dev, size_t i, int *opencl, field_errors *errs)
{
    static const char *const types[] = {"gpu", "cpu", "accelerator", "other"};
    static const unsigned bits[] = {DB_KIND_GPU, DB_KIND_CPU, DB_KIND_OTHER, DB_KIND_OTHER};
    char f[128];
    if (!json_is_object(dev)) {
        snprintf(f, sizeof f, "devices[%zu]", i);
        field_errors_add(errs, f, "must be an object");
        return 0;
    }
    json_t *index = json_object_get(dev, "index");
    long long n = 0;
    snprintf(f, sizeof f, "devices[%zu].index", i);
    if (!api_integer(index, &n) || n < 0)
        field_errors_add(errs, f, "must be an integer >= 0");
    snprintf(f, sizeof f, "devices[%zu].name", i);
    api_get_string(json_object_get(dev, "name"), f, 256, errs);
    snprintf(f, sizeof f, "devices[%zu].type", i);
    const char *type = json_string_value(json_object_get(dev, "type"));
    unsigned kind = 0;
    for (size_t k = 0; type && k < 4; k++) {
        if (strcmp(type, types[k]) == 0)
            kind = bits[k];
    }
    if (!kind)
        field_errors_add(errs, f, "must be one of gpu, cpu, accelerator, other");
    static const char *const strings[] = {"platform", "opencl_c_version", "found_by", "uuid"};
    static const size_t lengths[] = {256, 256, 300, 64};
    static const char *const ints[] = {"compute_units", "global_mem_bytes"};
    static const char *const known[] = {"index",
                                        "name",
                                        "type",
                                        "platform",
                                        "opencl_c_version",
                                        "compute_units",
                                        "global_mem_bytes",
                                        "opencl",
                                        "found_by",
                                        "uuid",
                                        NULL};
    for (size_t k = 0; k < 4; k++) {
        json_t *v = json_object_get(dev, strings[k]);
        snprintf(f, sizeof f, "devices[%zu].%s", i, strings[k]);
        if (v)
            api_get_string(v, f, lengths[k], errs);
    }
    for (size_t k = 0; k < 2; k++) {
        json_t *v = json_object_get(dev, ints[k]);
        snprintf(f, sizeof f, "devices[%zu].%s", i, ints[k]);
        if (v && (!api_integer(v, &n) || n < 0))
            field_errors_add(errs, f, "must be an integer >= 0");
    }
    json_t *cl = json_object_get(dev, "opencl");
    snprintf(f, sizeof f, "devices[%zu].opencl", i);
    if (cl && !json_is_boolean(cl))
        field_errors_add(errs, f, "must be true or false");
    *opencl = !json_is_false(cl);
    /* Only what the API describes is stored and shown again in GET /workers and /devices. */
    snprintf(f, sizeof f, "devices[%zu]", i);
    field_errors_unknown(errs, dev, f, known);
    return kind;
}

int api_registration_parse(const json_t *body, api_registration *out, field_errors *errs)
{
    static const char *const known[] = {"name", "devices", "scripts", "slots", NULL};
    errs->count = 0;
    api_registration reg = {.slots = 1};
    reg.name = api_get_string(json_object_get(body, "name"), "name", 128, errs);
    json_t *scripts = json_object_get(body, "scripts");
    if (scripts && !json_is_boolean(scripts))
        field_errors_add(errs, "scripts", "must be true or false");
    reg.scripts = json_is_true(scripts);
    json_t *slots = json_object_get(body, "slots");
    long long n_slots = 1;
    if (slots && (!api_integer(slots, &n_slots) || n_slots < 1 || n_slots > JOB_MAX_REPLICAS))
        field_errors_add(errs, "slots", "must be an integer from 1 to %d", JOB_MAX_REPLICAS);
    else
        reg.slots = (int)n_slots;
    json_t *devices = json_object_get(body, "devices");
    if (!json_is_array(devices) || json_array_size(devices) < 1 ||
        json_array_size(devices) > API_MAX_DEVICES) {
        field_errors_add(errs, "devices", "must be an array of 1 to %d devices", API_MAX_DEVICES);
    } else {
        size_t i;
        json_t *dev;
        int any_opencl = 0;
        json_array_foreach (devices, i, dev) {
            int opencl = 1;
            reg.kinds |= api_device_check(dev, i, &opencl, errs);
            any_opencl |= opencl;
        }
        if (!any_opencl) /* GPUs without OpenCL: built-in jobs would fail there */
            reg.kinds |= DB_KIND_SCRIPTS_ONLY;
        reg.devices = devices;
    }
    field_errors_unknown(errs, body, "", known);
    if (errs->count)
        return -EINVAL;
    *out = reg;
    return 0;
}

/* ---- Heartbeat -------------------------------------------------------------------------- */

/* A number (integer or real) into *out; with nullable, JSON null gives NAN. */
static void api_get_number(const json_t *obj, const char *key, size_t i, int required, int nullable,
                           double min, double *out, field_errors *errs)
{
    char f[128];
    snprintf(f, sizeof f, "epochs[%zu].%s", i, key);
    json_t *v = json_object_get(obj, key);
    *out = NAN;
    if (!v) {
        if (required)
            field_errors_add(errs, f, "is required");
        return;
    }
    if (json_is_null(v) && nullable)
        return;
    if (!json_is_number(v)) {
        field_errors_add(errs, f, nullable ? "must be a number or null" : "must be a number");
        return;
    }
    double d = json_number_value(v);
    if (d < min) {
        field_errors_add(errs, f, "must be >= %g", min);
        return;
    }
    *out = d;
}

/* 1 when key may name a metric of a script's own: ^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$. */
static int api_metric_name_ok(const char *key)
{
    size_t n = strlen(key);
    if (n < 1 || n > 64 || !((key[0] >= 'A' && key[0] <= 'Z') || (key[0] >= 'a' && key[0] <= 'z')))
        return 0;
    return strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/-") == n;
}

/* The members of e that are not in known, checked (a metric name, a number or null), as a new
 * JSON object's compact text in *out (NULL when there are none); -ENOMEM. */
static int api_epoch_extra(const json_t *e, size_t i, const char *const *known, char **out,
                           field_errors *errs)
{
    json_t *extra = NULL;
    const char *key;
    json_t *val;
    char f[160];
    *out = NULL;
    size_t n = 0;
    json_object_foreach ((json_t *)e, key, val) {
        if (++n > API_MAX_METRICS) {
            snprintf(f, sizeof f, "epochs[%zu].%s", i, key);
            field_errors_add(errs, f,
                             "is one key too many: an epoch has at most %d (epoch and "
                             "the metrics)",
                             API_MAX_METRICS);
            break;
        }
        int found = 0;
        for (size_t k = 0; known[k] && !found; k++)
            found = strcmp(key, known[k]) == 0;
        if (found || strcmp(key, "histograms") == 0) /* histograms: api_epoch_histograms */
            continue;
        snprintf(f, sizeof f, "epochs[%zu].%s", i, key);
        if (!api_metric_name_ok(key)) {
            field_errors_add(errs, f,
                             "is not a metric name: 1 to 64 letters, digits, '_', '.', ':', '/' "
                             "or '-', starting with a letter");
            continue;
        }
        if (!json_is_number(val) && !json_is_null(val)) {
            field_errors_add(errs, f, "must be a number or null");
            continue;
        }
        if (!extra)
            extra = json_object();
        if (!extra || json_object_set(extra, key, val) < 0) {
            json_decref(extra);
            return -ENOMEM;
        }
    }
    if (!extra)
        return 0;
    *out = json_out_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(extra);
    return *out ? 0 : -ENOMEM;
}

/* One EpochMetrics: epoch required; the known metrics (null when absent) into their fields;
 * any other metric, named as a script may name one, into m->extra (owned). */
static int api_epoch_parse(const json_t *e, size_t i, db_metric *m, field_errors *errs)
{
    static const char *const known[] = {"epoch",        "loss",    "val_loss",           "accuracy",
                                        "val_accuracy", "seconds", "samples_per_second", NULL};
    char f[128];
    memset(m, 0, sizeof *m);
    if (!json_is_object(e)) {
        snprintf(f, sizeof f, "epochs[%zu]", i);
        field_errors_add(errs, f, "must be an object");
        return 0;
    }
    json_t *epoch = json_object_get(e, "epoch");
    long long n = 0;
    snprintf(f, sizeof f, "epochs[%zu].epoch", i);
    if (!api_integer(epoch, &n) || n < 1 || n > JOB_MAX_EPOCHS)
        field_errors_add(errs, f, "must be an integer from 1 to %d", JOB_MAX_EPOCHS);
    else
        m->epoch = (int)n;
    /* A script reports what it measures: each known metric may be null or absent. */
    api_get_number(e, "loss", i, 0, 1, -INFINITY, &m->loss, errs);
    api_get_number(e, "val_loss", i, 0, 1, -INFINITY, &m->val_loss, errs);
    api_get_number(e, "accuracy", i, 0, 1, -INFINITY, &m->accuracy, errs);
    api_get_number(e, "val_accuracy", i, 0, 1, -INFINITY, &m->val_accuracy, errs);
    api_get_number(e, "seconds", i, 0, 1, 0, &m->seconds, errs);
    api_get_number(e, "samples_per_second", i, 0, 1, 0, &m->samples_per_second, errs);
    char *extra = NULL;
    if (api_epoch_extra(e, i, known, &extra, errs) < 0)
        return -ENOMEM;
    m->extra = extra;
    return 0;
}

/* ---- weight histograms of an epoch (db/histograms.h) ---------------------------------------- */

/* 1 when s may name a tensor: 1 to DB_HISTOGRAM_TENSOR_MAX of [A-Za-z0-9_.:/-]. */
static int api_tensor_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= DB_HISTOGRAM_TENSOR_MAX &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/-") == n;
}

/* A finite number at key of h into *out; else an error on <f>.<key>. */
static void api_histogram_number(const json_t *h, const char *f, const char *key, double min,
                                 double *out, field_errors *errs)
{
    json_t *v = json_object_get(h, key);
    *out = json_number_value(v);
    if (!json_is_number(v) || !isfinite(*out) || *out < min) {
        char g[192];
        snprintf(g, sizeof g, "%s.%s", f, key);
        field_errors_add(
            errs, g, min > -INFINITY ? "must be a finite number >= %g" : "must be a finite number",
            min);
    }
}

/* An array of 1 to DB_HISTOGRAM_MAX_BUCKETS finite numbers >= min, ascending when asked; its
 * size, or 0 with an error on <f>.<key>. */
static size_t api_histogram_array(const json_t *h, const char *f, const char *key, double min,
                                  int ascending, field_errors *errs)
{
    json_t *a = json_object_get(h, key), *v;
    size_t n = json_array_size(a), i;
    int ok = json_is_array(a) && n >= 1 && n <= DB_HISTOGRAM_MAX_BUCKETS;
    double prev = -INFINITY;
    json_array_foreach (a, i, v) {
        double d = json_number_value(v);
        ok = ok && json_is_number(v) && isfinite(d) && d >= min && (!ascending || d > prev);
        prev = d;
    }
    if (ok)
        return n;
    char g[192];
    snprintf(g, sizeof g, "%s.%s", f, key);
    field_errors_add(errs, g, "must be an array of 1 to %d finite numbers%s",
                     DB_HISTOGRAM_MAX_BUCKETS, ascending ? " in ascending order" : " >= 0");
    return 0;
}

/* Checks histogram k of epoch entry i; its canonical JSON text into *data (NULL when invalid,
 * with errors added); -ENOMEM. */
static int api_histogram_parse(const json_t *h, size_t i, size_t k, const char **tensor,
                               char **data, field_errors *errs)
{
    static const char *const known[] = {"tensor",      "min",    "max",    "num", "sum",
                                        "sum_squares", "limits", "counts", NULL};
    char f[128], prefix[160];
    size_t before = errs->count;
    *data = NULL;
    snprintf(f, sizeof f, "epochs[%zu].histograms[%zu]", i, k);
    if (!json_is_object(h)) {
        field_errors_add(errs, f, "must be an object");
        return 0;
    }
    *tensor = json_string_value(json_object_get(h, "tensor"));
    if (!*tensor || !api_tensor_name_ok(*tensor)) {
        snprintf(prefix, sizeof prefix, "%s.tensor", f);
        field_errors_add(errs, prefix, "must be 1 to %d letters, digits, '_', '.', ':', '/' or '-'",
                         DB_HISTOGRAM_TENSOR_MAX);
    }
    double min, max, num, sum, sq;
    api_histogram_number(h, f, "min", -INFINITY, &min, errs);
    api_histogram_number(h, f, "max", -INFINITY, &max, errs);
    api_histogram_number(h, f, "num", 0, &num, errs);
    api_histogram_number(h, f, "sum", -INFINITY, &sum, errs);
    api_histogram_number(h, f, "sum_squares", 0, &sq, errs);
    size_t nl = api_histogram_array(h, f, "limits", -INFINITY, 1, errs);
    size_t nc = api_histogram_array(h, f, "counts", 0, 0, errs);
    if (nl && nc && nl != nc) {
        snprintf(prefix, sizeof prefix, "%s.counts", f);
        field_errors_add(errs, prefix, "must have as many items as limits");
    }
    if (errs->count == before && min > max) {
        snprintf(prefix, sizeof prefix, "%s.max", f);
        field_errors_add(errs, prefix, "must be >= min");
    }
    field_errors_unknown(errs, h, f, known);
    if (errs->count != before)
        return 0;
    json_t *canon = json_pack("{s:f, s:f, s:f, s:f, s:f, s:O, s:O}", "min", min, "max", max, "num",
                              num, "sum", sum, "sum_squares", sq, "limits",
                              json_object_get(h, "limits"), "counts", json_object_get(h, "counts"));
    *data = canon ? json_out_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(canon);
    return *data ? 0 : -ENOMEM;
}

/* The "histograms" of epoch entry i (epoch: its number), appended to hb; -ENOMEM. */
static int api_epoch_histograms(const json_t *e, size_t i, int epoch, api_heartbeat *hb,
                                field_errors *errs)
{
    json_t *hs = json_object_get(e, "histograms"), *h;
    if (!hs)
        return 0;
    if (!json_is_array(hs) || json_array_size(hs) > DB_HISTOGRAM_MAX_TENSORS) {
        char f[64];
        snprintf(f, sizeof f, "epochs[%zu].histograms", i);
        field_errors_add(errs, f, "must be an array of at most %d histograms",
                         DB_HISTOGRAM_MAX_TENSORS);
        return 0;
    }
    size_t n = json_array_size(hs), k;
    if (n == 0)
        return 0;
    if (ARRAY_GROW(hb->histograms, hb->histograms_cap, hb->n_histograms + n,
                   (size_t)API_MAX_EPOCHS * DB_HISTOGRAM_MAX_TENSORS) < 0)
        return -ENOMEM;
    json_array_foreach (hs, k, h) {
        const char *tensor = NULL;
        char *data = NULL;
        if (api_histogram_parse(h, i, k, &tensor, &data, errs) < 0)
            return -ENOMEM;
        if (data)
            hb->histograms[hb->n_histograms++] =
                (db_histogram){.epoch = epoch, .tensor = tensor, .data = data};
    }
    return 0;
}

int api_heartbeat_parse(const json_t *body, api_heartbeat *out, field_errors *errs)
{
    static const char *const known[] = {"phase", "epochs", "logs", "dataset_bytes", NULL};
    errs->count = 0;
    api_heartbeat hb = {0};
    json_t *phase = json_object_get(body, "phase");
    if (phase) {
        hb.phase = db_phase_parse(json_string_value(phase));
        if (hb.phase < 0) {
            field_errors_add(errs, "phase", "must be one of downloading, training, uploading");
            hb.phase = DB_PHASE_NONE;
        }
    }
    json_t *bytes = json_object_get(body, "dataset_bytes");
    long long n = 0;
    if (bytes && (!api_integer(bytes, &n) || n < 0))
        field_errors_add(errs, "dataset_bytes", "must be an integer >= 0");
    hb.dataset_bytes = n > 0 ? (uint64_t)n : 0;
    json_t *epochs = json_object_get(body, "epochs");
    if (epochs && (!json_is_array(epochs) || json_array_size(epochs) > API_MAX_EPOCHS)) {
        field_errors_add(errs, "epochs", "must be an array of at most %d EpochMetrics",
                         API_MAX_EPOCHS);
    } else if (epochs && json_array_size(epochs) > 0) {
        hb.epochs = calloc(json_array_size(epochs), sizeof *hb.epochs);
        if (!hb.epochs)
            return -ENOMEM;
        size_t i;
        json_t *e;
        hb.n_epochs = json_array_size(epochs);
        json_array_foreach (epochs, i, e) {
            if (api_epoch_parse(e, i, &hb.epochs[i], errs) < 0 ||
                api_epoch_histograms(e, i, hb.epochs[i].epoch, &hb, errs) < 0) {
                api_heartbeat_free(&hb);
                return -ENOMEM;
            }
        }
    }
    json_t *logs = json_object_get(body, "logs");
    if (logs && (!json_is_array(logs) || json_array_size(logs) > API_MAX_LOG_LINES)) {
        field_errors_add(errs, "logs", "must be an array of at most %d strings", API_MAX_LOG_LINES);
    } else if (logs && json_array_size(logs) > 0) {
        hb.logs = calloc(json_array_size(logs), sizeof *hb.logs);
        if (!hb.logs) {
            api_heartbeat_free(&hb);
            return -ENOMEM;
        }
        size_t i;
        json_t *line;
        json_array_foreach (logs, i, line) {
            const char *s = json_string_value(line);
            if (!s || utf8_chars(s) > API_LOG_LINE_CHARS) {
                char f[64];
                snprintf(f, sizeof f, "logs[%zu]", i);
                field_errors_add(errs, f, "must be a string of at most %d characters",
                                 API_LOG_LINE_CHARS);
            }
            hb.logs[i] = s ? s : "";
        }
        hb.n_logs = json_array_size(logs);
    }
    field_errors_unknown(errs, body, "", known);
    if (errs->count) {
        api_heartbeat_free(&hb);
        return -EINVAL;
    }
    *out = hb;
    return 0;
}

void api_heartbeat_free(api_heartbeat *hb)
{
    if (!hb)
        return;
    for (size_t i = 0; hb->epochs && i < hb->n_epochs; i++)
        free((char *)hb->epochs[i].extra);
    free(hb->epochs);
    for (size_t i = 0; i < hb->n_histograms; i++)
        free((char *)hb->histograms[i].data);
    free(hb->histograms);
    free(hb->logs);
    memset(hb, 0, sizeof *hb);
}

/* ---- Completion ------------------------------------------------------------------------- */

int api_completion_parse(const json_t *body, int *status, const char **error, field_errors *errs)
{
    static const char *const known[] = {"status",        "error",      "stop_reason",
                                        "stopped_epoch", "best_epoch", NULL};
    errs->count = 0;
    const char *s = json_string_value(json_object_get(body, "status"));
    int st = s && strcmp(s, "lost") == 0 ? API_COMPLETION_LOST : db_status_parse(s);
    if (st != API_COMPLETION_LOST && !db_status_terminal(st))
        field_errors_add(errs, "status", "must be one of succeeded, failed, cancelled, lost");
    json_t *e = json_object_get(body, "error");
    const char *text = NULL;
    if (e && (!json_is_string(e) || utf8_chars(json_string_value(e)) > API_ERROR_CHARS))
        field_errors_add(errs, "error", "must be a string of at most %d characters",
                         API_ERROR_CHARS);
    else if (e)
        text = json_string_value(e);
    field_errors_unknown(errs, body, "", known);
    if (errs->count)
        return -EINVAL;
    *status = st;
    *error = text;
    return 0;
}

int api_completion_stop_parse(const json_t *body, api_completion_stop *out, field_errors *errs)
{
    errs->count = 0;
    memset(out, 0, sizeof *out);
    json_t *v = json_object_get(body, "stop_reason");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || utf8_chars(json_string_value(v)) > API_STOP_REASON_CHARS))
        field_errors_add(errs, "stop_reason", "must be a string of at most %d characters",
                         API_STOP_REASON_CHARS);
    else if (v && json_is_string(v))
        out->reason = json_string_value(v);
    static const char *const epochs[] = {"stopped_epoch", "best_epoch"};
    int *dst[] = {&out->stopped_epoch, &out->best_epoch};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(body, epochs[i]);
        if (!v || json_is_null(v))
            continue;
        long long n = 0;
        if (!api_integer(v, &n) || n < 1 || n > 1000000)
            field_errors_add(errs, epochs[i], "must be an epoch number, 1 to 1000000");
        else
            *dst[i] = (int)n;
    }
    return errs->count ? -EINVAL : 0;
}

int api_stop_request_parse(const json_t *body, const char **reason, field_errors *errs)
{
    static const char *const known[] = {"reason", NULL};
    errs->count = 0;
    json_t *v = json_object_get(body, "reason");
    if (v && (!json_is_string(v) || !*json_string_value(v) ||
              utf8_chars(json_string_value(v)) > API_STOP_REASON_CHARS))
        field_errors_add(errs, "reason", "must be a string of 1 to %d characters",
                         API_STOP_REASON_CHARS);
    else if (v)
        *reason = json_string_value(v);
    field_errors_unknown(errs, body, "", known);
    return errs->count ? -EINVAL : 0;
}

/* ---- TokenRequest ----------------------------------------------------------------------- */

/* Optional cap field of body: a whole number from 1 to DB_TOKEN_CAP_MAX, or null or absent
 * (0: none). */
static int api_token_cap(const json_t *body, const char *field, field_errors *errs)
{
    const json_t *v = json_object_get(body, field);
    long long n = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!api_integer(v, &n) || n < 1 || n > DB_TOKEN_CAP_MAX) {
        field_errors_add(errs, field, "must be a whole number from 1 to %d, or null for no cap",
                         DB_TOKEN_CAP_MAX);
        return 0;
    }
    return (int)n;
}

int api_token_request_parse(const json_t *body, db_token *out, field_errors *errs)
{
    static const char *const known[] = {"name",        "role",       "scripts",
                                        "max_running", "max_queued", NULL};
    db_token t;
    memset(&t, 0, sizeof t);
    errs->count = 0;
    const char *name = api_get_string(json_object_get(body, "name"), "name", 128, errs);
    snprintf(t.name, sizeof t.name, "%s", name ? name : "");
    t.role = db_role_parse(json_string_value(json_object_get(body, "role")));
    if (t.role < 0)
        field_errors_add(errs, "role", "must be one of admin, user, worker, metrics");
    json_t *s = json_object_get(body, "scripts");
    if (s && !json_is_boolean(s))
        field_errors_add(errs, "scripts", "must be true or false");
    t.scripts = json_is_true(s);
    t.max_running = api_token_cap(body, "max_running", errs);
    t.max_queued = api_token_cap(body, "max_queued", errs);
    field_errors_unknown(errs, body, "", known);
    if (errs->count)
        return -EINVAL;
    *out = t;
    return 0;
}
