/* trainer_epochs: the epoch loop. Per epoch: a new permutation of the training rows (seed and
 * epoch: a resumed run shuffles as the uninterrupted one did), the batches gathered on the
 * device and stepped, should_stop polled between steps, the validation rows evaluated in
 * chunks, one read-back of the totals, then the epoch's row (train.log, metrics.csv, on_epoch,
 * the history checkpoints carry), early stopping's judgement, should_finish, and a checkpoint
 * when its interval has passed or training ends.
 *
 * A data-parallel rank (r->g) takes its share of every global batch, sums gradients, stop
 * flags and epoch totals with the others, and averages batchnorm's moving statistics; every
 * rank ends after the same step and the same epoch. */
#include "train/trainer_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/timeutil.h"
#include "data/dataset.h"
#include "train/early_stop.h"
#include "train/histogram.h"
#include "train/imagedata.h"

/* Steps between two polls of should_stop: every step, since a cancel must stop a job within a
 * second however long its steps are, and the hooks only read a flag. */
#define TRAINER_POLL_STEPS 1

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A new permutation of the training rows for this epoch, uploaded to the training order (for
 * images, of the training images' indices). */
static int shuffle_epoch(trainer_ctx *r, int32_t *perm, size_t n, int epoch, char *err)
{
    uint64_t s = r->job->seed * 0x100000001b3ULL + (uint64_t)epoch;
    for (size_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next(&s) % (i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    if (r->img)
        for (size_t i = 0; i < n; i++)
            perm[i] = r->img->train_ids[perm[i]];
    /* Blocking write: perm is reused next epoch. */
    return ocl_write(r->c, r->img ? r->img->idx : r->idx, 0, n * sizeof *perm, perm, err);
}

static int stop_requested(trainer_ctx *r)
{
    return r->hooks && r->hooks->should_stop && r->hooks->should_stop(r->hooks->user);
}

/* Enqueues rows rows from position start of the training order (train) or of the validation
 * rows into xb[buf] and yb[buf]. */
static int make_batch(trainer_ctx *r, int train, int epoch, size_t start, int rows, int buf,
                      char *err)
{
    if (r->img)
        return imagedata_batch(r->img, r->k, train, epoch, start, rows, r->xb[buf], r->yb[buf],
                               err);
    int cols = (int)r->all->cols;
    cl_mem x = train ? r->xtr : r->xva, y = train ? r->ytr : r->yva;
    cl_mem idx = train ? r->idx : r->vidx;
    if (kern_gather_rows(r->k, rows, cols, x, idx, (int)start, r->xb[buf]) < 0 ||
        kern_gather_rows(r->k, rows, 1, y, idx, (int)start, r->yb[buf]) < 0)
        return err_set(err, -EIO, "%s", kern_last_error(r->k));
    return 0;
}

static int rows_at(size_t n, size_t start, size_t batch)
{
    return (int)(n - start < batch ? n - start : batch);
}

/* Whether any rank's *flag is set, on every rank. */
static int group_flag(trainer_ctx *r, int *flag, char *err)
{
    float f = *flag ? 1.0f : 0.0f;
    char why[ERR_LEN];
    if (r->g->sum(r->g->user, &f, 1, why) < 0)
        return err_set(err, -EIO, "agreeing on a stop between the replicas failed: %s", why);
    *flag = f > 0.0f;
    return 0;
}

/* A data-parallel step's second half: the rank's gradients (zeros when it had no rows) summed
 * in place over the ranks, in the gradient buffer mapped for the host (on a CPU device that is
 * the device's own memory: nothing is copied), then applied; and the stop flags summed, so
 * that every rank stops after the same step. *stop: some rank asked. */
static int group_step(trainer_ctx *r, int had_rows, int *stop, char *err)
{
    model *m = r->m;
    size_t n = m->n_params;
    float *g = NULL;
    char why[ERR_LEN];
    int rc = ocl_map(r->c, m->grads, 0, n * sizeof *g, (void **)&g, err);
    if (rc < 0)
        return rc;
    if (!had_rows)
        memset(g, 0, n * sizeof *g);
    if (r->g->sum(r->g->user, g, n, why) < 0)
        rc = err_set(err, -EIO, "summing the gradients over the replicas failed: %s", why);
    int unmapped = ocl_unmap(r->c, m->grads, g, rc < 0 ? why : err);
    if (rc == 0)
        rc = unmapped;
    if (rc == 0)
        rc = model_update(m, err);
    int flag = stop_requested(r);
    if (rc == 0)
        rc = group_flag(r, &flag, err);
    *stop = flag;
    return rc;
}

/* One data-parallel epoch: every global batch of the training order is cut into one share per
 * rank; each rank computes the gradient of its share, then group_step. */
static int train_epoch_group(trainer_ctx *r, int epoch, int *stopped, char *err)
{
    size_t n = trainer_train_rows(r), batch = (size_t)r->batch;
    int rank = r->g->rank, size = r->g->size, pre = r->img != NULL, cur = 0, rc = 0;
    if (pre) {
        int rows = rows_at(n, 0, batch), lo = rows * rank / size, hi = rows * (rank + 1) / size;
        if (hi > lo)
            rc = make_batch(r, 1, epoch, (size_t)lo, hi - lo, cur, err);
    }
    for (size_t start = 0; start < n && rc == 0; start += batch) {
        int rows = rows_at(n, start, batch), lo = rows * rank / size, hi = rows * (rank + 1) / size;
        if (pre && start + batch < n) {
            int next = rows_at(n, start + batch, batch), nlo = next * rank / size,
                nhi = next * (rank + 1) / size;
            if (nhi > nlo)
                rc = make_batch(r, 1, epoch, start + batch + (size_t)nlo, nhi - nlo, 1 - cur, err);
        } else if (!pre && hi > lo) {
            rc = make_batch(r, 1, epoch, start + (size_t)lo, hi - lo, cur, err);
        }
        if (rc == 0 && hi > lo)
            rc = model_backprop_share(r->m, hi - lo, rows, lo, r->xb[cur], r->yb[cur], err);
        int stop = 0;
        if (rc == 0)
            rc = group_step(r, hi > lo, &stop, err);
        if (pre)
            cur = 1 - cur;
        if (rc == 0 && stop) {
            *stopped = 1;
            break;
        }
    }
    return rc;
}

/* Image batches are prefetched: batch b+1 is enqueued into the other buffer pair before the
 * step of batch b. The queue is in order, so on the device the image kernel and the step still
 * run one after the other: nothing overlaps there. What overlaps is the host with the device:
 * the host enqueues the epoch's work without ever waiting (and polls should_stop) while the
 * device computes. The two buffers are what an out-of-order or second queue would need to run
 * a batch's resize beside the previous step. CSV batches are a gather each, made right before
 * their step in one buffer pair; a full-batch CSV job trains on the uploaded arrays. */
static int train_epoch(trainer_ctx *r, int32_t *perm, int epoch, int *stopped, char *err)
{
    size_t n = trainer_train_rows(r), batch = (size_t)r->batch;
    if (r->g) {
        int rc = r->job->shuffle ? shuffle_epoch(r, perm, n, epoch, err) : 0;
        return rc < 0 ? rc : train_epoch_group(r, epoch, stopped, err);
    }
    int full = !r->img && r->batch == (int)n, pre = r->img != NULL, cur = 0;
    int rc = 0;
    if (r->job->shuffle && !full)
        rc = shuffle_epoch(r, perm, n, epoch, err);
    if (rc == 0 && pre)
        rc = make_batch(r, 1, epoch, 0, rows_at(n, 0, batch), cur, err);
    int step = 0;
    for (size_t start = 0; start < n && rc == 0; start += batch, step++) {
        int rows = rows_at(n, start, batch);
        if (full) {
            rc = model_train_step(r->m, rows, r->xtr, r->ytr, err);
            continue;
        }
        if (pre && start + batch < n)
            rc = make_batch(r, 1, epoch, start + batch, rows_at(n, start + batch, batch), 1 - cur,
                            err);
        else if (!pre)
            rc = make_batch(r, 1, epoch, start, rows, cur, err);
        if (rc == 0)
            rc = model_train_step(r->m, rows, r->xb[cur], r->yb[cur], err);
        if (pre)
            cur = 1 - cur;
        if (rc == 0 && step % TRAINER_POLL_STEPS == TRAINER_POLL_STEPS - 1 && stop_requested(r)) {
            *stopped = 1;
            break;
        }
    }
    return rc;
}

/* Validation in chunks that fit the model's batch buffers; a set that fits them whole (CSV) is
 * one call on the uploaded arrays. */
int trainer_each_val_chunk(trainer_ctx *r, trainer_val_fn fn, void *user, char *err)
{
    size_t n = trainer_val_rows(r), cap = (size_t)r->m->capacity;
    if (!r->img && n <= cap)
        return trainer_lead(r) ? fn(r, 0, (int)n, r->xva, r->yva, user, err) : 0;
    int rc = 0;
    size_t chunk = 0;
    for (size_t start = 0; start < n && rc == 0; start += cap, chunk++) {
        if (r->g && (int)(chunk % (size_t)r->g->size) != r->g->rank)
            continue; /* data-parallel: chunks are dealt to the ranks in turn */
        int rows = rows_at(n, start, cap);
        rc = make_batch(r, 0, 0, start, rows, 0, err);
        if (rc == 0)
            rc = fn(r, start, rows, r->xb[0], r->yb[0], user, err);
    }
    return rc;
}

static int evaluate_chunk(trainer_ctx *r, size_t start, int rows, cl_mem x, cl_mem y, void *user,
                          char *err)
{
    (void)start;
    (void)user;
    return model_evaluate(r->m, rows, x, y, err);
}

static int validate_epoch(trainer_ctx *r, char *err)
{
    return trainer_each_val_chunk(r, evaluate_chunk, NULL, err);
}

/* An epoch's line in the log and its row in metrics.csv. */
static void record_epoch(trainer_ctx *r, const trainer_epoch *e)
{
    char line[512];
    int n = snprintf(line, sizeof line, "epoch %d/%d  loss %.4f", e->epoch, e->epochs, e->loss);
    if (!isnan(e->accuracy))
        n += snprintf(line + n, sizeof line - (size_t)n, "  accuracy %.4f", e->accuracy);
    if (!isnan(e->val_loss))
        n += snprintf(line + n, sizeof line - (size_t)n, "  val_loss %.4f", e->val_loss);
    if (!isnan(e->val_accuracy))
        n += snprintf(line + n, sizeof line - (size_t)n, "  val_accuracy %.4f", e->val_accuracy);
    snprintf(line + n, sizeof line - (size_t)n, "  %.2fs", e->seconds);
    trainer_say(r, "%s", line);
    trainer_metrics_row(r, e);
}

/* The monitored metric of epoch e (NAN when this job does not report it). */
static double monitored(const trainer_epoch *e, const char *name)
{
    if (!strcmp(name, "loss"))
        return e->loss;
    if (!strcmp(name, "val_loss"))
        return e->val_loss;
    if (!strcmp(name, "accuracy"))
        return e->accuracy;
    if (!strcmp(name, "val_accuracy"))
        return e->val_accuracy;
    return NAN;
}

/* restore_best: keeps a host copy of the weights of the epoch that just improved. */
static int keep_best(trainer_ctx *r, char *err)
{
    float *p = NULL, *st = NULL;
    int rc = model_read_params(r->m, &p, &st, err);
    if (rc < 0)
        return rc;
    free(r->best_p);
    free(r->best_st);
    r->best_p = p;
    r->best_st = st;
    return 0;
}

/* Puts the kept best weights back into the model (its optimizer state and step stay: nothing
 * trains after this). */
int trainer_restore_best(trainer_ctx *r, char *err)
{
    float *p = NULL, *m1 = NULL, *m2 = NULL, *st = NULL;
    int rc = model_state_save(r->m, &p, &m1, &m2, &st, err);
    if (rc == 0)
        rc = model_state_load(r->m, r->best_p, m1, m2, r->best_st ? r->best_st : st, r->m->step,
                              err);
    free(p);
    free(m1);
    free(m2);
    free(st);
    return rc;
}

/* After epoch e: judges it for early stopping; 1 when training should end after it (why in
 * res->stop_reason), 0 to go on, or a negative code. */
static int judge_epoch(trainer_ctx *r, const trainer_epoch *e, trainer_result *res, char *err)
{
    const job_early_stopping *cfg = &r->job->early_stopping;
    if (!cfg->enabled)
        return 0;
    int d = early_stop_update(&r->es, cfg, e->epoch, monitored(e, cfg->monitor));
    if ((d & EARLY_STOP_IMPROVED) && cfg->restore_best && trainer_lead(r)) {
        int rc = keep_best(r, err);
        if (rc < 0)
            return rc;
    }
    if (!(d & EARLY_STOP_STOP))
        return 0;
    early_stop_reason(&r->es, cfg, res->stop_reason, sizeof res->stop_reason);
    return 1;
}

/* The end of a data-parallel epoch: the loss and correct counts summed over the ranks, and
 * batchnorm's moving statistics (each rank's from its own rows) averaged. */
static int group_epoch_end(trainer_ctx *r, double totals[MODEL_TOTALS], char *err)
{
    float t[MODEL_TOTALS];
    char why[ERR_LEN];
    for (int i = 0; i < MODEL_TOTALS; i++)
        t[i] = (float)totals[i];
    if (r->g->sum(r->g->user, t, MODEL_TOTALS, why) < 0)
        return err_set(err, -EIO, "summing the epoch's totals over the replicas failed: %s", why);
    for (int i = 0; i < MODEL_TOTALS; i++)
        totals[i] = t[i];
    size_t n = r->m->n_stats;
    if (n == 0)
        return 0;
    float *st = malloc(n * sizeof *st);
    if (!st)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = ocl_read(r->c, r->m->stats, 0, n * sizeof *st, st, err);
    if (rc == 0 && r->g->sum(r->g->user, st, n, why) < 0)
        rc = err_set(err, -EIO, "averaging the batchnorm statistics failed: %s", why);
    for (size_t i = 0; rc == 0 && i < n; i++)
        st[i] /= (float)r->g->size;
    if (rc == 0)
        rc = ocl_write(r->c, r->m->stats, 0, n * sizeof *st, st, err);
    free(st);
    return rc;
}

int trainer_train_all(trainer_ctx *r, trainer_result *res, char *err)
{
    size_t n = trainer_train_rows(r), nva = trainer_val_rows(r);
    int32_t *perm = malloc(n * sizeof *perm);
    if (!perm)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = 0, classification = r->loss != MODEL_LOSS_MSE;
    trainer_phase(r, TRAINER_PHASE_TRAINING);
    r->last_ckpt = time_mono();
    if (r->es.stopped_epoch && r->es.stopped_epoch == r->start && r->start < r->job->epochs) {
        /* resumed from the checkpoint of the epoch early stopping ended the job after (the
         * attempt was interrupted before it finished): it ends there again */
        early_stop_reason(&r->es, &r->job->early_stopping, res->stop_reason,
                          sizeof res->stop_reason);
        res->stopped_epoch = r->start;
        free(perm);
        return 0;
    }
    for (int epoch = r->start + 1; epoch <= r->job->epochs; epoch++) {
        double t0 = time_mono(), totals[MODEL_TOTALS];
        int stopped = 0;
        rc = model_reset_totals(r->m, err);
        if (rc == 0)
            rc = train_epoch(r, perm, epoch, &stopped, err);
        if (rc < 0)
            break;
        if (stopped) {
            res->stopped = 1;
            break;
        }
        if (nva)
            rc = validate_epoch(r, err);
        if (rc == 0)
            rc = model_read_totals(r->m, totals, err);
        if (rc == 0 && r->g)
            rc = group_epoch_end(r, totals, err);
        if (rc < 0)
            break;
        trainer_epoch e = {.epoch = epoch, .epochs = r->job->epochs};
        e.seconds = time_mono() - t0;
        e.samples_per_second = e.seconds > 0 ? (double)n / e.seconds : 0;
        e.loss = totals[MODEL_TRAIN_LOSS] / (double)n;
        e.accuracy = classification ? totals[MODEL_TRAIN_CORRECT] / (double)n : NAN;
        e.val_loss = nva ? totals[MODEL_VAL_LOSS] / (double)nva : NAN;
        e.val_accuracy = nva && classification ? totals[MODEL_VAL_CORRECT] / (double)nva : NAN;
        if (!isfinite(e.loss)) {
            rc = err_set(err, -ERANGE,
                         "the training loss became %f in epoch %d: lower the learning_rate", e.loss,
                         epoch);
            break;
        }
        record_epoch(r, &e);
        res->epochs_done = epoch;
        res->last = e;
        if (json_array_append_new(r->history, trainer_epoch_json(&e)) != 0) {
            rc = err_set(err, -ENOMEM, "out of memory");
            break;
        }
        if (r->job->tb_histograms && trainer_lead(r) &&
            (rc = histogram_model(r->m, &e.histograms, err)) < 0)
            break;
        int stop = r->hooks && r->hooks->on_epoch && r->hooks->on_epoch(r->hooks->user, &e);
        json_decref(e.histograms); /* train/histogram.h: for on_epoch only */
        stop = stop || stop_requested(r);
        /* A graceful end after this epoch: early stopping, or a stop request (should_finish).
         * The epoch is judged even when a hook stops the run, so that the checkpoint written
         * now carries its judgement. */
        int finish = judge_epoch(r, &e, res, err);
        if (finish < 0) {
            rc = finish;
            break;
        }
        if (stop)
            finish = 0;
        if (!stop && !finish && trainer_lead(r) && r->hooks && r->hooks->should_finish)
            finish = r->hooks->should_finish(r->hooks->user, res->stop_reason,
                                             sizeof res->stop_reason) != 0;
        if (r->g) {
            rc = group_flag(r, &stop, err); /* the ranks stop after the same epoch */
            if (rc == 0)
                rc = group_flag(r, &finish, err);
            if (rc < 0)
                break;
        }
        double every = r->opts->checkpoint_seconds;
        if (trainer_lead(r) && every >= 0 &&
            (stop || finish || epoch == r->job->epochs || time_mono() - r->last_ckpt >= every)) {
            rc = trainer_save_checkpoint(r, epoch, res, err);
            if (rc < 0)
                break;
        }
        if (stop) {
            res->stopped = 1;
            break;
        }
        if (finish) {
            if (epoch < r->job->epochs) {
                res->stopped_epoch = epoch;
                trainer_say(r, "%s: ending after epoch %d of %d", res->stop_reason, epoch,
                            r->job->epochs);
            } else {
                res->stop_reason[0] = 0; /* it ran every epoch anyway */
            }
            break;
        }
    }
    free(perm);
    return rc;
}
