/* trainer_resume: a run's state across runs. Checkpoints: writing one after an epoch (model
 * state, standardisation, metrics so far, early stopping's state and best weights), and on
 * resume checking the dataset against it, restoring the model, the finished epochs' rows and
 * early stopping, and handing rank 0's state to the other ranks (trainer_group_start). Warm
 * start: a model.safetensors of an earlier job mapped back onto the device layout
 * (trainer_load_init_model). An epoch's metrics go to and from JSON here, as checkpoints keep
 * them. */
#include "train/trainer_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/path.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "model/export.h"
#include "model/safetensors.h"
#include "train/checkpoint.h"
#include "train/early_stop.h"

/* On resume: the dataset must be the checkpoint's, and its standardisation replaces the one
 * just computed (the same numbers, unless the arithmetic changed between builds). */
int trainer_resume_data(trainer_ctx *r, char *err)
{
    if (!r->resume)
        return 0;
    const checkpoint_state *s = checkpoint_state_of(r->resume);
    json_t *want = trainer_dataset_json(r);
    int rc = checkpoint_check_dataset(r->resume, want, err);
    json_decref(want);
    if (rc < 0)
        return rc;
    if (!r->mean != !s->mean || (s->mean && s->cols != trainer_std_len(r)))
        return err_set(err, -EINVAL, "the checkpoint's standardisation does not fit the job");
    if (r->mean) {
        memcpy(r->mean, s->mean, s->cols * sizeof *r->mean);
        memcpy(r->std, s->std, s->cols * sizeof *r->std);
    }
    return 0;
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static double num_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

json_t *trainer_epoch_json(const trainer_epoch *e)
{
    return json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "epoch", e->epoch, "loss",
                     num_or_null(e->loss), "val_loss", num_or_null(e->val_loss), "accuracy",
                     num_or_null(e->accuracy), "val_accuracy", num_or_null(e->val_accuracy),
                     "seconds", num_or_null(e->seconds), "samples_per_second",
                     num_or_null(e->samples_per_second));
}

static trainer_epoch epoch_from_json(const json_t *j, int epochs)
{
    trainer_epoch e = {.epoch = (int)json_integer_value(json_object_get(j, "epoch")),
                       .epochs = epochs};
    e.loss = num_or_nan(json_object_get(j, "loss"));
    e.val_loss = num_or_nan(json_object_get(j, "val_loss"));
    e.accuracy = num_or_nan(json_object_get(j, "accuracy"));
    e.val_accuracy = num_or_nan(json_object_get(j, "val_accuracy"));
    e.seconds = num_or_nan(json_object_get(j, "seconds"));
    e.samples_per_second = num_or_nan(json_object_get(j, "samples_per_second"));
    return e;
}

static json_t *early_stop_json(const early_stop *es)
{
    /* best is ±inf before any judged epoch: JSON has no infinity, so null stands for it */
    return json_pack("{s:o, s:i, s:i, s:i}", "best",
                     isfinite(es->best) ? json_real(es->best) : json_null(), "best_epoch",
                     es->best_epoch, "wait", es->wait, "stopped_epoch", es->stopped_epoch);
}

/* On resume: the early-stopping state and best weights the checkpoint carried, so the resumed
 * run decides as the uninterrupted one would have. */
static int resume_early_stop(trainer_ctx *r, const checkpoint_state *s, char *err)
{
    const job_early_stopping *cfg = &r->job->early_stopping;
    if (!cfg->enabled || !s->early_stopping)
        return 0;
    const json_t *best = json_object_get(s->early_stopping, "best");
    if (json_is_number(best))
        r->es.best = json_number_value(best);
    r->es.best_epoch = (int)json_integer_value(json_object_get(s->early_stopping, "best_epoch"));
    r->es.wait = (int)json_integer_value(json_object_get(s->early_stopping, "wait"));
    r->es.stopped_epoch =
        (int)json_integer_value(json_object_get(s->early_stopping, "stopped_epoch"));
    if (cfg->restore_best && s->best_params) {
        size_t np = r->m->n_params, ns = r->m->n_stats;
        r->best_p = malloc(np * sizeof *r->best_p);
        r->best_st = ns ? malloc(ns * sizeof *r->best_st) : NULL;
        if (!r->best_p || (ns && !r->best_st))
            return err_set(err, -ENOMEM, "out of memory");
        memcpy(r->best_p, s->best_params, np * sizeof *r->best_p);
        if (ns && s->best_stats)
            memcpy(r->best_st, s->best_stats, ns * sizeof *r->best_st);
        else if (ns)
            return err_set(err, -EINVAL, "the checkpoint's best weights lack their statistics");
    }
    trainer_say(r, "early stopping: best %s %.6g at epoch %d, %d epoch(s) without improvement",
                cfg->monitor, r->es.best, r->es.best_epoch, r->es.wait);
    return 0;
}

/* Writes the training state after epoch into out_dir/checkpoint.safetensors. */
int trainer_save_checkpoint(trainer_ctx *r, int epoch, trainer_result *res, char *err)
{
    double t0 = time_mono();
    checkpoint_state s = {.epoch = epoch,
                          .step = r->m->step,
                          .n_params = r->m->n_params,
                          .n_stats = r->m->n_stats,
                          .cols = trainer_std_len(r),
                          .mean = r->mean,
                          .std = r->std,
                          .job = r->job_json,
                          .metrics = r->history,
                          .best_params = r->best_p,
                          .best_stats = r->best_st};
    json_t *es = r->job->early_stopping.enabled ? early_stop_json(&r->es) : NULL;
    s.early_stopping = es;
    float *p = NULL, *m1 = NULL, *m2 = NULL, *st = NULL;
    char path[4096];
    int rc = path_join(path, sizeof path, r->opts->out_dir, CHECKPOINT_FILE, err);
    if (rc == 0)
        rc = model_state_save(r->m, &p, &m1, &m2, &st, err);
    if (rc < 0) {
        json_decref(es);
        return rc;
    }
    json_t *data = trainer_dataset_json(r);
    s.params = p;
    s.moment1 = m1;
    s.moment2 = m2;
    s.stats = st;
    s.dataset = data;
    rc = checkpoint_write(path, &s, err);
    json_decref(data);
    json_decref(es);
    free(p);
    free(m1);
    free(m2);
    free(st);
    r->last_ckpt = time_mono();
    res->checkpoints++;
    res->checkpoint_s += r->last_ckpt - t0;
    if (rc == 0 && r->hooks && r->hooks->on_checkpoint)
        r->hooks->on_checkpoint(r->hooks->user, path, epoch);
    return rc;
}

/* On resume, after the model is built: restore its state and the finished epochs' metrics. */
int trainer_resume_model(trainer_ctx *r, trainer_result *res, char *err)
{
    const checkpoint_state *s = checkpoint_state_of(r->resume);
    if (s->n_params != r->m->n_params)
        return err_set(err, -EINVAL,
                       "the checkpoint holds %zu parameters where the model has %zu: it does not "
                       "fit this build of the model",
                       s->n_params, r->m->n_params);
    if (s->n_stats != r->m->n_stats)
        return err_set(err, -EINVAL,
                       "the checkpoint holds %zu batchnorm statistics where the model has %zu",
                       s->n_stats, r->m->n_stats);
    if (s->epoch > r->job->epochs)
        return err_set(err, -EINVAL, "the checkpoint is after epoch %d of a %d-epoch job", s->epoch,
                       r->job->epochs);
    int rc = model_state_load(r->m, s->params, s->moment1, s->moment2, s->stats, s->step, err);
    if (rc < 0)
        return rc;
    json_decref(r->history);
    r->history = json_deep_copy(s->metrics);
    if (!r->history)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(r->history); i++) {
        trainer_epoch e = epoch_from_json(json_array_get(r->history, i), r->job->epochs);
        trainer_metrics_row(r, &e);
        res->last = e;
    }
    r->start = res->epochs_done = res->resumed_after = s->epoch;
    trainer_say(r, "resuming after epoch %d of %d (optimizer step %lld)", s->epoch, r->job->epochs,
                (long long)s->step);
    return resume_early_stop(r, s, err);
}

/* Before a data-parallel run's first step: every rank holds rank 0's training state (the same
 * as its own from the seed unless rank 0 resumed from a checkpoint or warm-started) and epoch. */
int trainer_group_start(trainer_ctx *r, trainer_result *res, char *err)
{
    model *m = r->m;
    size_t n = m->n_params;
    int64_t head[3] = {r->start, m->step, r->warm};
    char why[ERR_LEN];
    if (r->g->share(r->g->user, head, sizeof head, why) < 0)
        return err_set(err, -EIO, "sharing the start between the replicas failed: %s", why);
    if (head[0] == 0 && head[2] == 0)
        return 0; /* a fresh start: the same seed gave every rank the same weights */
    float *p = NULL, *m1 = NULL, *m2 = NULL, *st = NULL;
    int rc = model_state_save(m, &p, &m1, &m2, &st, err);
    float *bufs[] = {p, m1, m2, st};
    size_t lens[] = {n, n, n, m->n_stats};
    for (int i = 0; rc == 0 && i < 4; i++)
        if (lens[i] && r->g->share(r->g->user, bufs[i], lens[i] * sizeof(float), why) < 0)
            rc = err_set(err, -EIO, "sharing the checkpoint's state failed: %s", why);
    if (rc == 0 && !trainer_lead(r))
        rc = model_state_load(m, p, m1, m2, st, head[1], err);
    if (rc == 0 && !trainer_lead(r))
        r->start = res->epochs_done = res->resumed_after = (int)head[0];
    free(p);
    free(m1);
    free(m2);
    free(st);
    return rc;
}

/* Writes shape as "[a, b, c]". */
static void shape_text(const safetensors_tensor *t, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < cap)
        snprintf(out + n, cap - n, "]");
}

/* Starts the model from init_model's weights. Which device float each exported value comes from
 * is found by exporting a model whose every parameter and statistic holds its own index (exact
 * in a float below 2^24): export_build then says, element by element, where it put each one, so
 * the file is mapped back through the same code that wrote it. */
int trainer_load_init_model(trainer_ctx *r, char *err)
{
    const char *from = r->job->init_from ? r->job->init_from : "init_from";
    model *m = r->m;
    size_t np = m->n_params, ns = m->n_stats;
    if (np + ns >= (1u << 24))
        return err_set(err, -E2BIG,
                       "init_from: a model of %zu parameters is past what a warm start maps (16 "
                       "million)",
                       np + ns);
    safetensors_file *f = NULL;
    export_set *e = NULL;
    float *idx = malloc((np + ns + 1) * sizeof *idx);
    float *p = NULL, *m1 = NULL, *m2 = NULL, *st = NULL;
    char why[ERR_LEN];
    int rc = idx ? 0 : err_set(err, -ENOMEM, "out of memory");
    if (rc == 0 && safetensors_open(r->opts->init_model, &f, why) < 0)
        rc = err_set(err, -EINVAL, "init_from: the model of job %s cannot be read: %s", from, why);
    if (rc == 0) {
        for (size_t i = 0; i < np + ns; i++)
            idx[i] = (float)i;
        rc = export_build(m, idx, ns ? idx + np : NULL, &e, err);
    }
    if (rc == 0)
        rc = model_state_save(m, &p, &m1, &m2, &st, err);
    for (size_t t = 0; rc == 0 && t < e->n; t++) {
        const safetensors_tensor *want = &e->tensors[t];
        if (want->dtype != SAFETENSORS_F32)
            continue; /* batchnorm's num_batches_tracked: the step starts afresh */
        const safetensors_tensor *have = safetensors_find(f, want->name);
        char ws[96], hs[96];
        shape_text(want, ws, sizeof ws);
        if (!have || have->dtype != SAFETENSORS_F32) {
            rc = err_set(err, -EINVAL,
                         "init_from: the model of job %s has no tensor %s %s that this job's model "
                         "has: it is another architecture",
                         from, want->name, ws);
            break;
        }
        int same = have->ndim == want->ndim;
        size_t count = 1;
        for (int d = 0; same && d < want->ndim; d++) {
            same = have->shape[d] == want->shape[d];
            count *= (size_t)want->shape[d];
        }
        if (!same) {
            shape_text(have, hs, sizeof hs);
            rc = err_set(err, -EINVAL,
                         "init_from: tensor %s of job %s's model is %s where this job's model has "
                         "%s: the dataset must have as many features (and classes) as job %s's "
                         "had",
                         want->name, from, hs, ws, from);
            break;
        }
        for (size_t k = 0; k < count; k++) {
            float at = want->data[k];
            size_t i = (size_t)at;
            if (at < 0 || (float)i != at || i >= np + ns) {
                rc = err_set(err, -EIO, "init_from: cannot map tensor %s back (a bug)", want->name);
                break;
            }
            if (i < np)
                p[i] = have->data[k];
            else
                st[i - np] = have->data[k];
        }
    }
    if (rc == 0) {
        memset(m1, 0, np * sizeof *m1); /* the optimizer starts fresh */
        memset(m2, 0, np * sizeof *m2);
        rc = model_state_load(m, p, m1, m2, st, 0, err);
    }
    if (rc == 0) {
        r->warm = 1;
        trainer_say(r, "warm start: the weights of job %s's model", from);
    }
    free(idx);
    free(p);
    free(m1);
    free(m2);
    free(st);
    export_free(e);
    safetensors_close(f);
    return rc;
}
