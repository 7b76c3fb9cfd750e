/* checkpoint: writer and validating reader of training checkpoints (see checkpoint.h).
 *
 * The state tensors go through safetensors as they are; the metadata values are strings, so
 * integers are written in decimal and the JSON values compact, each real as the shortest text
 * that reads back to the same double (util/json_out.h), so that the metrics re-emitted after a
 * resume are exactly the values sent before. */
#include "train/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/json_out.h"
#include "model/safetensors.h"

struct checkpoint {
    safetensors_file *file;
    json_t *job, *dataset, *metrics, *early_stopping;
    checkpoint_state s;
};

int checkpoint_write(const char *path, const checkpoint_state *s, char *err)
{
    safetensors_tensor t[8];
    size_t nt = 0;
    const char *names[] = {"params", "moment1", "moment2"};
    const float *data[] = {s->params, s->moment1, s->moment2};
    for (int i = 0; i < 3; i++) {
        t[nt] = (safetensors_tensor){.name = names[i], .ndim = 1, .data = data[i]};
        t[nt++].shape[0] = (int64_t)s->n_params;
    }
    if (s->n_stats) {
        t[nt] = (safetensors_tensor){.name = "stats", .ndim = 1, .data = s->stats};
        t[nt++].shape[0] = (int64_t)s->n_stats;
    }
    if (s->mean && s->std) {
        t[nt] = (safetensors_tensor){.name = "mean", .ndim = 1, .data = s->mean};
        t[nt++].shape[0] = (int64_t)s->cols;
        t[nt] = (safetensors_tensor){.name = "std", .ndim = 1, .data = s->std};
        t[nt++].shape[0] = (int64_t)s->cols;
    }
    if (s->best_params) {
        t[nt] = (safetensors_tensor){.name = "best_params", .ndim = 1, .data = s->best_params};
        t[nt++].shape[0] = (int64_t)s->n_params;
    }
    if (s->best_params && s->best_stats && s->n_stats) {
        t[nt] = (safetensors_tensor){.name = "best_stats", .ndim = 1, .data = s->best_stats};
        t[nt++].shape[0] = (int64_t)s->n_stats;
    }
    char version[16], epoch[24], step[24], n_params[24];
    snprintf(version, sizeof version, "%d", CHECKPOINT_VERSION);
    snprintf(epoch, sizeof epoch, "%d", s->epoch);
    snprintf(step, sizeof step, "%lld", (long long)s->step);
    snprintf(n_params, sizeof n_params, "%zu", s->n_params);
    const size_t flags = JSON_COMPACT | JSON_SORT_KEYS;
    char *job = json_out_dumps(s->job, flags), *dataset = json_out_dumps(s->dataset, flags),
         *metrics = json_out_dumps(s->metrics, flags);
    char *es = s->early_stopping ? json_out_dumps(s->early_stopping, flags) : NULL;
    int rc = 0;
    if (!job || !dataset || !metrics || (s->early_stopping && !es)) {
        rc = err_set(err, -ENOMEM, "out of memory writing the checkpoint metadata");
        goto out;
    }
    safetensors_meta meta[] = {
        {"trainyard.checkpoint", version},
        {"trainyard.epoch", epoch},
        {"trainyard.step", step},
        {"trainyard.n_params", n_params},
        {"trainyard.job", job},
        {"trainyard.dataset", dataset},
        {"trainyard.metrics", metrics},
        {"trainyard.early_stopping", es},
    };
    rc = safetensors_write(path, t, nt, meta, sizeof meta / sizeof meta[0] - !es, err);
out:
    free(es);
    free(job);
    free(dataset);
    free(metrics);
    return rc;
}

static int meta_int(const safetensors_file *f, const char *key, long long lo, long long hi,
                    long long *out, char *err)
{
    const char *v = safetensors_meta_get(f, key);
    if (!v)
        return err_set(err, -EINVAL, "the checkpoint has no %s: not a trainyard checkpoint", key);
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return err_set(err, -EINVAL, "the checkpoint's %s '%.40s' is not an integer in %lld..%lld",
                       key, v, lo, hi);
    *out = n;
    return 0;
}

static int meta_json(const safetensors_file *f, const char *key, json_type type, json_t **out,
                     char *err)
{
    const char *v = safetensors_meta_get(f, key);
    if (!v)
        return err_set(err, -EINVAL, "the checkpoint has no %s: not a trainyard checkpoint", key);
    json_error_t je;
    json_t *j = json_loads(v, JSON_DECODE_ANY, &je);
    if (!j || json_typeof(j) != type) {
        json_decref(j);
        return err_set(err, -EINVAL, "the checkpoint's %s is not a JSON %s", key,
                       type == JSON_ARRAY ? "array" : "object");
    }
    *out = j;
    return 0;
}

static const float *state_tensor(const safetensors_file *f, const char *name, int64_t n, char *err)
{
    const safetensors_tensor *t = safetensors_find(f, name);
    if (!t) {
        err_set(err, -EINVAL, "the checkpoint has no tensor '%s'", name);
        return NULL;
    }
    if (t->ndim != 1 || t->shape[0] != n || t->dtype != SAFETENSORS_F32) {
        err_set(err, -EINVAL, "the checkpoint's tensor '%s' is not a vector of %lld floats", name,
                (long long)n);
        return NULL;
    }
    return t->data;
}

/* The metrics must be epochs 1..epoch, in order, each an object. */
static int check_metrics(const json_t *metrics, int epoch, char *err)
{
    if (json_array_size(metrics) != (size_t)epoch)
        return err_set(err, -EINVAL, "the checkpoint holds %zu metrics rows for %d epochs",
                       json_array_size(metrics), epoch);
    for (size_t i = 0; i < json_array_size(metrics); i++) {
        const json_t *row = json_array_get(metrics, i);
        if (!json_is_object(row) ||
            json_integer_value(json_object_get(row, "epoch")) != (json_int_t)i + 1)
            return err_set(err, -EINVAL, "the checkpoint's metrics row %zu is not epoch %zu", i,
                           i + 1);
    }
    return 0;
}

int checkpoint_read(const char *path, checkpoint **out, char *err)
{
    checkpoint *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(err, -ENOMEM, "out of memory");
    char why[ERR_LEN] = "";
    long long version = 0, epoch = 0, step = 0, n_params = 0;
    int rc = safetensors_open(path, &c->file, why);
    if (rc < 0) {
        rc = err_set(err, rc == -ENOENT ? -ENOENT : -EINVAL, "cannot read checkpoint %s: %s", path,
                     why);
        goto fail;
    }
    safetensors_file *f = c->file;
    rc = meta_int(f, "trainyard.checkpoint", 1, 1000, &version, why);
    if (rc == 0 && version != CHECKPOINT_VERSION)
        rc = err_set(why, -EINVAL, "checkpoint format %lld is not the %d this build reads", version,
                     CHECKPOINT_VERSION);
    if (rc == 0)
        rc = meta_int(f, "trainyard.epoch", 0, INT32_MAX, &epoch, why);
    if (rc == 0)
        rc = meta_int(f, "trainyard.step", 0, INT64_MAX, &step, why);
    if (rc == 0)
        rc = meta_int(f, "trainyard.n_params", 1, INT64_MAX / 4, &n_params, why);
    if (rc == 0)
        rc = meta_json(f, "trainyard.job", JSON_OBJECT, &c->job, why);
    if (rc == 0)
        rc = meta_json(f, "trainyard.dataset", JSON_OBJECT, &c->dataset, why);
    if (rc == 0)
        rc = meta_json(f, "trainyard.metrics", JSON_ARRAY, &c->metrics, why);
    if (rc == 0)
        rc = check_metrics(c->metrics, (int)epoch, why);
    if (rc < 0)
        goto bad;

    checkpoint_state *s = &c->s;
    s->epoch = (int)epoch;
    s->step = step;
    s->n_params = (size_t)n_params;
    s->params = state_tensor(f, "params", n_params, why);
    s->moment1 = s->params ? state_tensor(f, "moment1", n_params, why) : NULL;
    s->moment2 = s->moment1 ? state_tensor(f, "moment2", n_params, why) : NULL;
    if (!s->moment2) {
        rc = -EINVAL;
        goto bad;
    }
    const safetensors_tensor *stats = safetensors_find(f, "stats");
    if (stats) {
        s->stats = stats->ndim == 1 && stats->shape[0] > 0
                       ? state_tensor(f, "stats", stats->shape[0], why)
                       : NULL;
        if (!s->stats) {
            rc = err_set(why, -EINVAL, "the checkpoint's tensor 'stats' is not a vector");
            goto bad;
        }
        s->n_stats = (size_t)stats->shape[0];
    }
    json_int_t cols = json_integer_value(json_object_get(c->dataset, "cols"));
    const safetensors_tensor *mean = safetensors_find(f, "mean"), *std = safetensors_find(f, "std");
    if (!mean != !std) {
        rc = err_set(why, -EINVAL, "the checkpoint has only one of the tensors mean and std");
        goto bad;
    }
    if (mean && mean->ndim == 1)
        cols = mean->shape[0]; /* features, or an image's channels */
    if (mean) {
        s->mean = state_tensor(f, "mean", cols, why);
        s->std = s->mean ? state_tensor(f, "std", cols, why) : NULL;
        if (!s->std) {
            rc = -EINVAL;
            goto bad;
        }
    }
    s->cols = (size_t)cols;
    if (safetensors_meta_get(f, "trainyard.early_stopping")) {
        rc = meta_json(f, "trainyard.early_stopping", JSON_OBJECT, &c->early_stopping, why);
        if (rc < 0)
            goto bad;
        s->early_stopping = c->early_stopping;
    }
    if (safetensors_find(f, "best_params")) {
        s->best_params = state_tensor(f, "best_params", n_params, why);
        if (!s->best_params) {
            rc = -EINVAL;
            goto bad;
        }
        if (s->n_stats) {
            s->best_stats = state_tensor(f, "best_stats", (int64_t)s->n_stats, why);
            if (!s->best_stats) {
                rc = -EINVAL;
                goto bad;
            }
        }
    }
    s->job = c->job;
    s->dataset = c->dataset;
    s->metrics = c->metrics;
    *out = c;
    return 0;
bad:
    rc = err_set(err, -EINVAL, "checkpoint %s is unusable: %s", path, why);
fail:
    checkpoint_free(c);
    return rc;
}

const checkpoint_state *checkpoint_state_of(const checkpoint *c)
{
    return &c->s;
}

/* Writes into path the first place where a and b differ ("" when equal). */
static void json_diff(const json_t *a, const json_t *b, char *path, size_t cap)
{
    if (json_equal((json_t *)a, (json_t *)b))
        return;
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *va;
        json_object_foreach ((json_t *)a, key, va) {
            json_t *vb = json_object_get(b, key);
            if (!vb || !json_equal(va, vb)) {
                size_t n = strlen(path);
                snprintf(path + n, cap - n, "%s%s", n ? "." : "", key);
                if (vb)
                    json_diff(va, vb, path, cap);
                return;
            }
        }
        json_object_foreach ((json_t *)b, key, va) {
            if (!json_object_get(a, key)) {
                size_t n = strlen(path);
                snprintf(path + n, cap - n, "%s%s", n ? "." : "", key);
                return;
            }
        }
    }
    if (!*path)
        snprintf(path, cap, "(document)");
}

static int check_same(const json_t *have, const json_t *want, const char *what, const char *hint,
                      char *err)
{
    char field[256] = "";
    json_diff(have, want, field, sizeof field);
    if (!*field)
        return 0;
    return err_set(err, -EINVAL, "the checkpoint belongs to another %s (%s differs): %s", what,
                   field, hint);
}

int checkpoint_check_job(const checkpoint *c, const json_t *job, char *err)
{
    return check_same(c->job, job, "job", "resume only with the job document that wrote it", err);
}

int checkpoint_check_dataset(const checkpoint *c, const json_t *dataset, char *err)
{
    return check_same(c->dataset, dataset, "dataset",
                      "the data at the job's URL changed since; start the job afresh", err);
}

void checkpoint_free(checkpoint *c)
{
    if (!c)
        return;
    safetensors_close(c->file);
    json_decref(c->job);
    json_decref(c->dataset);
    json_decref(c->metrics);
    json_decref(c->early_stopping);
    free(c);
}
