/* trainer_priv.h: what the parts of the trainer share and nothing outside train/ includes.
 * trainer.h stays the public contract; this is the run's state (trainer_ctx, one per
 * trainer_run, made and released by trainer.c) and the few functions the parts call on each
 * other, grouped by the file that defines them:
 *
 *   trainer.c          the run: its order, the hooks' helpers (log lines, phases), cleanup
 *   trainer_data.c     fetch, parse, split, standardise, upload; the model built on it
 *   trainer_epochs.c   the epoch loop, validation, early stopping's judgement, the ranks
 *   trainer_outputs.c  train.log and metrics.csv, job.json, model files, validation outputs
 *   trainer_resume.c   checkpoints written and resumed, warm start, an epoch as JSON
 *
 * Every function that can fail returns 0 or a negative errno-style code with the reason in
 * err, as trainer_run does. */
#ifndef TRAINYARD_TRAIN_TRAINER_PRIV_H
#define TRAINYARD_TRAIN_TRAINER_PRIV_H

#include <jansson.h>
#include <stdio.h>

#include "data/dataset.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/early_stop.h"
#include "train/imagedata.h"
#include "train/kbuild.h"
#include "train/metrics_csv.h"
#include "train/trainer.h"

/* One run's state: what trainer_run was given, the data, the model and its buffers on the
 * device, the outputs, and what resume and early stopping carry across epochs. */
typedef struct trainer_ctx {
    const job_spec *job;
    const trainer_opts *opts;
    const trainer_hooks *hooks;
    ocl_ctx *c;
    kern *k;
    FILE *log;
    metrics_csv *metrics;       /* NULL on a rank but 0 */
    dataset *all, *train, *val; /* CSV data */
    imagedata *img;             /* image data (then all, train and val are NULL) */
    float *mean, *std;          /* the standardisation (for images img's, borrowed) */
    model *m;
    int loss, outputs, batch;
    checkpoint *resume; /* opts->resume_from, read; NULL when starting afresh */
    json_t *job_json;   /* the resolved job document */
    json_t *history;    /* metrics of every finished epoch, as checkpoints keep them */
    char data_sha[65];  /* of the fetched dataset */
    int start;          /* epochs finished before this run (from the checkpoint) */
    double last_ckpt;   /* time_mono() of the last checkpoint, or of the start of training */
    cl_mem xtr, ytr, xva, yva, idx, vidx;
    cl_mem xb[2], yb[2];     /* batch buffers; images alternate between the two (prefetch) */
    kern *own_k;             /* the kern trainer_run built (k NULL from the caller), or NULL */
    double build_s;          /* time building it, data loading excluded */
    const trainer_group *g;  /* the data-parallel ranks, or NULL when training alone */
    early_stop es;           /* job->early_stopping's state (early_stop.h) */
    int warm;                /* rank 0 loaded opts->init_model */
    float *best_p, *best_st; /* restore_best: the best epoch's parameters and statistics (as
                                model_read_params reads them), or NULL before one */
} trainer_ctx;

/* ---- trainer.c ---- */

/* Rank 0 of a group, or a run alone: the one that fetches, reports and writes. */
int trainer_lead(const trainer_ctx *r);
/* A line for people: train.log and the on_log hook. */
void trainer_say(trainer_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The on_phase hook (enum trainer_phase). */
void trainer_phase(trainer_ctx *r, int phase_now);

/* ---- trainer_data.c ---- */

/* Fetches (rank 0; shared with the other ranks), parses, splits and standardises the dataset;
 * logs what it found. */
int trainer_load_data(trainer_ctx *r, char *err);
/* Without a kern from the caller: finishes kbuild's build of the job's kernel families into
 * r->own_k (r->k). */
int trainer_build_kernels(trainer_ctx *r, kbuild *kb, char *err);
/* Builds the model and puts the data and the batch buffers on the device. */
int trainer_prepare_device(trainer_ctx *r, char *err);
/* What a checkpoint pins of the dataset (rows, cols, sha256, classes); a new reference. */
json_t *trainer_dataset_json(trainer_ctx *r);
/* A JSON array of n strings; a new reference. */
json_t *trainer_strings_json(char *const *v, size_t n);
/* The class names of image data: those of the set that has them all. */
const image_set *trainer_image_classes(const imagedata *d);
/* Length of the standardisation vectors: features, or an image's channels. */
size_t trainer_std_len(const trainer_ctx *r);
/* Training rows (images). */
size_t trainer_train_rows(const trainer_ctx *r);
/* Validation rows (images); 0 without a validation split. */
size_t trainer_val_rows(const trainer_ctx *r);

/* ---- trainer_epochs.c ---- */

/* Trains epochs r->start + 1 .. job->epochs (or until a hook or early stopping ends it),
 * filling res. */
int trainer_train_all(trainer_ctx *r, trainer_result *res, char *err);
/* What trainer_each_val_chunk runs on a chunk: x holds rows rows (with targets y) that start
 * at validation row start. */
typedef int (*trainer_val_fn)(trainer_ctx *r, size_t start, int rows, cl_mem x, cl_mem y,
                              void *user, char *err);
/* Runs fn over the validation rows in order, in chunks that fit the model (dealt to the ranks
 * in turn in a data-parallel run). */
int trainer_each_val_chunk(trainer_ctx *r, trainer_val_fn fn, void *user, char *err);
/* Puts the kept best weights back into the model (its optimizer state and step stay). */
int trainer_restore_best(trainer_ctx *r, char *err);

/* ---- trainer_outputs.c ---- */

/* Creates out_dir and opens train.log (appended to on resume) and metrics.csv. */
int trainer_open_outputs(trainer_ctx *r, char *err);
/* Writes job.json, the resolved job. */
int trainer_write_job(trainer_ctx *r, char *err);
/* Appends epoch e's row to metrics.csv (nothing on a rank but 0). */
void trainer_metrics_row(trainer_ctx *r, const trainer_epoch *e);
/* Writes model.safetensors and model.onnx. */
int trainer_write_model(trainer_ctx *r, char *err);
/* Writes opts->val_outputs: the model's outputs on the validation rows as a float32 .npy. */
int trainer_write_val_outputs(trainer_ctx *r, char *err);

/* ---- trainer_resume.c ---- */

/* On resume: the dataset must be the checkpoint's, and its standardisation replaces the one
 * just computed. Nothing when not resuming. */
int trainer_resume_data(trainer_ctx *r, char *err);
/* On resume, after the model is built: its state, the finished epochs' rows and early
 * stopping's state from the checkpoint. */
int trainer_resume_model(trainer_ctx *r, trainer_result *res, char *err);
/* Starts the model from opts->init_model's weights (a warm start). */
int trainer_load_init_model(trainer_ctx *r, char *err);
/* Writes the training state after epoch into out_dir/checkpoint.safetensors. */
int trainer_save_checkpoint(trainer_ctx *r, int epoch, trainer_result *res, char *err);
/* Before a data-parallel run's first step: every rank takes rank 0's state and epoch. */
int trainer_group_start(trainer_ctx *r, trainer_result *res, char *err);
/* Epoch e's metrics as a checkpoint keeps them; a new reference. */
json_t *trainer_epoch_json(const trainer_epoch *e);

#endif
