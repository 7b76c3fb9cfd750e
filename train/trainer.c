/* trainer: the job's whole run (see trainer.h), in the order trainer_run() calls its parts:
 *
 *   read and check a resume checkpoint → open the outputs (train.log, metrics.csv, job.json)
 *   → start the kernel build → the dataset (trainer_data.c: fetch, parse, split, standardise)
 *   → finish the kernels → the model and the data on the device (trainer_data.c) → resume or
 *   warm start (trainer_resume.c) → the epochs (trainer_epochs.c) → restore the best epoch's
 *   weights → model files and validation outputs (trainer_outputs.c) → release everything.
 *
 * Image formats take the same road through imagedata.h: parse (images_load) → check against
 * input_shape → split or take the test set → per-channel statistics → upload the pixels once →
 * per batch one kern_image_batch (resize, scale, standardise, augment) + model step.
 *
 * The device holds the whole dataset for the run; the host only uploads a new permutation per
 * epoch. A full-batch CSV job trains on the uploaded arrays directly, without a gather.
 *
 * A resumed run (opts->resume_from) reads and checks the checkpoint before anything is fetched,
 * checks the dataset against it after parsing, restores the model after building it, and then
 * joins the same epoch loop at the epoch after the checkpoint's. Its r->history holds every
 * finished epoch's metrics (restored ones included), which each checkpoint carries.
 *
 * The parts share one trainer_ctx (trainer_priv.h); this file owns it: it is made here, the
 * parts fill it, and everything it holds is released here at the end of trainer_run. */
#include "train/trainer_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/timeutil.h"
#include "data/dataset.h"
#include "train/checkpoint.h"
#include "train/early_stop.h"
#include "train/imagedata.h"
#include "train/kbuild.h"

/* Rank 0 of a group, or a run alone: the one that fetches, reports and writes. */
int trainer_lead(const trainer_ctx *r)
{
    return !r->g || r->g->rank == 0;
}

void trainer_say(trainer_ctx *r, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (r->log) {
        fprintf(r->log, "%s\n", line);
        fflush(r->log);
    }
    if (r->hooks && r->hooks->on_log)
        r->hooks->on_log(r->hooks->user, line);
}

void trainer_phase(trainer_ctx *r, int phase_now)
{
    if (r->hooks && r->hooks->on_phase)
        r->hooks->on_phase(r->hooks->user, phase_now);
}

static void release(cl_mem m)
{
    if (m)
        clReleaseMemObject(m);
}

unsigned trainer_kern_families(const job_spec *job)
{
    unsigned f = KERN_FAM_DENSE;
    if (job->format != JOB_FORMAT_CSV)
        f |= KERN_FAM_IMAGE;
    for (size_t i = 0; i < job->n_layers; i++) {
        switch (job->layers[i].type) {
        case JOB_LAYER_DENSE:
        case JOB_LAYER_FLATTEN:
            break;
        case JOB_LAYER_DROPOUT:
            f |= KERN_FAM_DROPOUT;
            break;
        case JOB_LAYER_CONV2D:
            f |= KERN_FAM_CONV;
            break;
        case JOB_LAYER_MAXPOOL2D:
        case JOB_LAYER_AVGPOOL2D:
        case JOB_LAYER_GLOBAL_AVGPOOL2D:
            f |= KERN_FAM_POOL;
            break;
        case JOB_LAYER_BATCHNORM:
            f |= KERN_FAM_BATCHNORM;
            break;
        default:
            return KERN_FAM_ALL; /* a layer this list does not know yet: build everything */
        }
    }
    return f;
}

int trainer_run(const job_spec *job, ocl_ctx *c, kern *k, const trainer_opts *opts,
                const trainer_hooks *hooks, trainer_result *res, char *err)
{
    trainer_ctx r = {.job = job, .opts = opts, .hooks = hooks, .c = c, .k = k, .g = opts->group};
    if (r.g && r.g->size < 2)
        r.g = NULL;
    trainer_result out = {0};
    kbuild *kb = NULL;
    double t0 = time_mono();
    int rc = 0;
    r.job_json = job_to_json(job);
    r.history = json_array();
    early_stop_init(&r.es, &job->early_stopping);
    if (!r.job_json || !r.history)
        rc = err_set(err, -ENOMEM, "out of memory");
    /* Before anything is written or fetched: a wrong checkpoint fails at once. */
    if (rc == 0 && opts->resume_from && trainer_lead(&r))
        rc = checkpoint_read(opts->resume_from, &r.resume, err);
    if (rc == 0 && r.resume)
        rc = checkpoint_check_job(r.resume, r.job_json, err);
    if (rc < 0)
        goto out;
    if (trainer_lead(&r))
        rc = trainer_open_outputs(&r, err);
    if (rc == 0 && trainer_lead(&r))
        rc = trainer_write_job(&r, err);
    if (rc == 0 && r.g)
        trainer_say(&r, "data-parallel: %d replicas, each with its share of every batch of %d rows",
                    r.g->size, job->batch_size);
    else if (rc == 0 && job->replicas > 1)
        trainer_say(&r,
                    "distribution.replicas is %d, but this run is one process: it trains on one "
                    "device, along the same loss curve (`mpirun -np %d trainyard-replica --train` "
                    "runs the ranks)",
                    job->replicas, job->replicas);
    if (rc == 0 && !k) {
        double t_build = time_mono();
        rc = kbuild_start(c, job, trainer_kern_families(job), &kb, err);
        r.build_s = time_mono() - t_build;
    }
    if (rc == 0 && k)
        trainer_say(&r, "device: %s (%s, %u compute units), kernels %s in %.2fs", c->dev.name,
                    ocl_device_kind(&c->dev), c->dev.compute_units,
                    c->from_cache ? "loaded from cache" : "compiled", c->build_seconds);
    if (rc == 0)
        rc = trainer_load_data(&r, err);
    if (rc == 0 && !k) {
        rc = trainer_build_kernels(&r, kb, err);
        if (rc == 0)
            trainer_say(&r, "device: %s (%s, %u compute units), kernels %s in %.2fs", c->dev.name,
                        ocl_device_kind(&c->dev), c->dev.compute_units,
                        c->from_cache ? "loaded from cache" : "compiled", r.build_s);
    }
    if (rc == 0 && opts->val_outputs && trainer_val_rows(&r) == 0)
        rc = err_set(err, -EINVAL,
                     "--val-outputs needs validation rows: set hyperparameters.validation_split "
                     "above 0, or use a dataset that has a test set");
    if (rc == 0)
        rc = trainer_prepare_device(&r, err);
    if (rc == 0 && r.resume)
        rc = trainer_resume_model(&r, &out, err);
    else if (rc == 0 && opts->init_model && trainer_lead(&r))
        rc = trainer_load_init_model(&r, err);
    else if (rc == 0 && job->init_from && trainer_lead(&r))
        trainer_say(&r,
                    "init_from %s: no model to start from was given (--init-model), so this run "
                    "starts from the seed's weights",
                    job->init_from);
    if (rc == 0 && r.g)
        rc = trainer_group_start(&r, &out, err);
    if (rc == 0)
        rc = trainer_train_all(&r, &out, err);
    if (rc == 0 && !out.stopped && trainer_lead(&r) && job->early_stopping.restore_best &&
        r.best_p) {
        out.best_epoch = r.es.best_epoch;
        if (r.es.best_epoch != out.epochs_done) {
            trainer_say(&r, "early stopping: the model is epoch %d's (best %s %.6g)",
                        r.es.best_epoch, job->early_stopping.monitor, r.es.best);
            rc = trainer_restore_best(&r, err);
        }
    }
    if (rc == 0 && !out.stopped && trainer_lead(&r)) {
        trainer_phase(&r, TRAINER_PHASE_SAVING);
        rc = trainer_write_model(&r, err);
        if (rc == 0 && opts->val_outputs)
            rc = trainer_write_val_outputs(&r, err);
    }
    out.seconds = time_mono() - t0;
    if (rc == 0)
        trainer_say(&r, "%s after %d epoch(s) in %.2fs (%d checkpoint(s) in %.3fs)",
                    out.stopped ? "stopped" : "done", out.epochs_done, out.seconds, out.checkpoints,
                    out.checkpoint_s);
    else
        trainer_say(&r, "failed: %s", err);
out:

    release(r.xtr);
    release(r.ytr);
    release(r.xva);
    release(r.yva);
    release(r.idx);
    release(r.vidx);
    for (int i = 0; i < 2; i++) {
        release(r.xb[i]);
        release(r.yb[i]);
    }
    model_free(r.m);
    kbuild_free(kb);
    kern_free(r.own_k);
    dataset_free(r.all);
    dataset_free(r.train);
    dataset_free(r.val);
    if (!r.img) {
        free(r.mean);
        free(r.std);
    }
    imagedata_free(r.img);
    checkpoint_free(r.resume);
    free(r.best_p);
    free(r.best_st);
    json_decref(r.job_json);
    json_decref(r.history);
    if (r.log)
        fclose(r.log);
    int closed = metrics_csv_close(r.metrics, rc == 0 ? err : NULL);
    if (rc == 0)
        rc = closed;
    if (rc == 0 && res)
        *res = out;
    return rc;
}
