/* trainer: runs one training job end to end on an OpenCL device: fetch the dataset, parse it,
 * split and standardise, build the model, train epoch by epoch, write the artifacts.
 *
 * The same function serves `trainyard train` (in-process) and the worker process (which keeps
 * the ocl_ctx and kern between jobs, so no job pays for compiling kernels). Progress reaches the
 * caller through hooks; the trainer itself prints nothing.
 *
 * Artifacts written into out_dir: model.safetensors, metrics.csv (appended epoch by epoch),
 * job.json (the resolved job) and train.log (every log line), and checkpoint.safetensors (see
 * checkpoint.h): the training state after the last finished epoch it covers.
 *
 * Checkpoints: one is written after a finished epoch (its metrics final, on_epoch called) when
 * checkpoint_seconds have passed since the last one (or since training began), and always after
 * the last epoch and after an epoch at whose end a hook stopped training. Writing one costs a
 * read-back of three parameter-sized buffers, the metrics so far and an fsync'd rename: 7 ms
 * for 101,770 parameters (1.2 MB) on PoCL, a tenth of an epoch of 2,000 rows. Every epoch is
 * fine for epochs of seconds but dominates a job of tiny epochs: the 1,000-epoch full-batch
 * linear job takes 0.12 s with one checkpoint and 11.5 s with one per epoch (the metrics it
 * carries grow too), hence the interval (the CLI and the worker use 10 s). A longer interval
 * loses more epochs to a crash; they are retrained, identically.
 *
 * Warm start (init_model): after the model is built, its parameters and batchnorm statistics
 * are read from a model.safetensors this trainer wrote (export.h's names and layouts, mapped
 * back), which must hold every tensor of this model with the same shape, else the run fails
 * naming the tensor (a dataset with another number of features or classes than the first job's
 * lands here); the optimizer moments and step start at zero.
 *
 * Resume (resume_from): the checkpoint must come from the same resolved job document, and the
 * fetched dataset must hash and parse to the one it was trained on; otherwise trainer_run fails
 * with a message saying so. The run then reuses the checkpoint's standardisation, restores the
 * weights, optimizer moments and step, writes the finished epochs' rows into metrics.csv as they
 * were (on_epoch is NOT called for them: whoever received them the first time has them), logs
 * "resuming after epoch N of M" and trains epochs N+1..M. The result is bit-identical to an
 * uninterrupted run on the same device. */
#ifndef TRAINYARD_WORKER_TRAINER_H
#define TRAINYARD_WORKER_TRAINER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "job/job.h"
#include "data/dscache.h"

typedef struct trainer_epoch {
    int epoch;                     /* 1-based */
    int epochs;                    /* of the job */
    double loss, accuracy;         /* accuracy NAN for regression */
    double val_loss, val_accuracy; /* NAN without a validation split */
    double seconds;                /* wall time of the epoch, validation included */
    double samples_per_second;     /* training rows per second */
    json_t *histograms; /* the weight histograms (train/histogram.h) when the job asked for
                           them ("tensorboard"), during on_epoch only; else NULL */
} trainer_epoch;

/* Where a run is. The trainer only writes files (the artifacts into its output folder); a
 * caller that sends them somewhere names that part of the run itself. */
enum trainer_phase {
    TRAINER_PHASE_DOWNLOADING = 0, /* fetching the dataset */
    TRAINER_PHASE_TRAINING = 1,    /* the epochs */
    TRAINER_PHASE_SAVING = 2,      /* writing the model and the other artifacts */
};

typedef struct trainer_hooks {
    void *user;
    /* A line for people (also written to train.log). May be NULL. */
    void (*on_log)(void *user, const char *line);
    /* The phase changes (enum trainer_phase). May be NULL. */
    void (*on_phase)(void *user, int phase);
    /* After each epoch; a nonzero return stops training after that epoch. May be NULL. */
    int (*on_epoch)(void *user, const trainer_epoch *e);
    /* Polled between steps; nonzero stops training at once (no artifacts). May be NULL. */
    int (*should_stop)(void *user);
    /* After each epoch (after on_epoch): nonzero ends training after that epoch as if it were
     * the last (a graceful stop: the model is written, the run succeeds) and writes why into
     * why[cap] (trainer_result.stop_reason). May be NULL. */
    int (*should_finish)(void *user, char *why, size_t cap);
    /* After a checkpoint after epoch was written to path (overwritten by the next one: copy it
     * to keep it). Called on the training thread, after on_epoch of that epoch. May be NULL. */
    void (*on_checkpoint)(void *user, const char *path, int epoch);
    /* The dataset was fetched: bytes came over the wire (or from the file); not called when it
     * came from the dataset cache. May be NULL. */
    void (*on_dataset)(void *user, uint64_t bytes);
} trainer_hooks;

/* The ranks of a data-parallel job (job->replicas > 1): train/distrib.h makes one over MPI.
 * Every rank runs trainer_run on its own device with the same job; with size ranks, rank r
 * takes rows [rows·r/size, rows·(r+1)/size) of every global batch of `rows` rows, its loss
 * gradient scaled by 1/rows, and after backward the ranks sum their gradient buffers (one
 * `sum` per step over n_params + 1 floats: the gradients and a stop flag), so every rank applies
 * the same update to the same weights. Epoch totals are summed the same way; validation chunks
 * are dealt round-robin. Rank 0 alone fetches the dataset (its bytes go to the others through
 * `share`), reads a resume checkpoint (its state is shared), calls the hooks and writes the
 * output folder; the others write nothing. Batchnorm normalises over each rank's own rows (as
 * PyTorch's DistributedDataParallel does without SyncBatchNorm); its moving statistics are
 * averaged over the ranks after every epoch. */
typedef struct trainer_group {
    int rank, size;
    void *user;
    /* Sums n floats over the ranks, in place, on every rank (MPI_Allreduce). */
    int (*sum)(void *user, float *v, size_t n, char *err);
    /* Copies rank 0's n bytes into buf on every rank (MPI_Bcast). */
    int (*share)(void *user, void *buf, size_t n, char *err);
    /* Returns once every rank has called it (a barrier), or -ETIMEDOUT after timeout_s, or
     * -EINTR as soon as *stop is set (stop may be NULL); NULL when the group has none. A
     * distributed script job's rank 0 waits here for the other ranks' last log lines before it
     * completes the job. */
    int (*meet)(void *user, double timeout_s, volatile sig_atomic_t *stop, char *err);
} trainer_group;

typedef struct trainer_opts {
    const char *out_dir;        /* created if missing */
    const char *dataset_root;   /* where file:// URLs may point, or NULL for none */
    const char *dataset_allow;  /* comma-separated host patterns (fetch.h), or NULL */
    const char *dataset_ca;     /* PEM CA bundle for https datasets (fetch.h), or NULL */
    int allow_private;          /* 1: datasets on private addresses need no allow pattern */
    const fetch_s3 *s3;         /* endpoint and credentials for s3:// datasets; NULL: refused */
    uint64_t max_dataset_bytes; /* 0: the fetch default */
    long dataset_stall_s;       /* abort a download stalled this long; 0: the fetch default */
    const char *resume_from;    /* a checkpoint to continue from, or NULL to start afresh */
    double checkpoint_seconds;  /* least time between checkpoints: 0 every epoch, < 0 none */
    volatile sig_atomic_t *stop_download; /* nonzero ends the dataset download (-EINTR); NULL */
    dscache *dataset_cache; /* where fetched datasets are kept and looked up (a hit logs "dataset
                               from cache" and fetches nothing), or NULL for none; borrowed */
    const trainer_group *group; /* the ranks of a data-parallel job, or NULL to train alone */
    const char *init_model;     /* job->init_from's model.safetensors: the weights (and batchnorm
                                   statistics) to start from, the optimizer fresh; NULL: the seed's.
                                   Ignored when resuming (the checkpoint has the weights). */
    const char *val_outputs;    /* after training, write the model's outputs on the validation rows
                                   (probabilities for classification) as a float32 .npy of
                                   [rows, outputs] here; NULL: none */
} trainer_opts;

#define TRAINER_STOP_REASON 512 /* bytes of trainer_result.stop_reason */

typedef struct trainer_result {
    int epochs_done;
    int stopped; /* 1 when a hook stopped training */
    /* A run that ended before its last epoch but succeeded: early stopping (job->early_stopping)
     * or should_finish. stop_reason "" and stopped_epoch 0 when it ran every epoch. */
    char stop_reason[TRAINER_STOP_REASON];
    int stopped_epoch;
    int best_epoch;      /* early_stopping.restore_best: the epoch whose weights the model holds */
    int resumed_after;   /* epochs restored from resume_from (0 when starting afresh) */
    int checkpoints;     /* checkpoints written */
    double checkpoint_s; /* time spent writing them */
    double seconds;
    trainer_epoch last;
} trainer_result;

/* The kernel families (enum kern_family) that training this job launches, for kern_new_for():
 * the dense families, plus dropout, conv, pool and batchnorm for those layers and the image batch
 * for image formats. */
unsigned trainer_kern_families(const job_spec *job);

/* Runs job on c/k. Returns 0 when training finished or a hook stopped it (res->stopped), or a
 * negative code with the reason in err (bad dataset, device failure, disk full, ...). With k
 * NULL the trainer builds the job's kernel families itself (trainer_kern_families), on two cores
 * while it loads the data when the kernel cache is cold (train/kbuild.h), and frees them. */
int trainer_run(const job_spec *job, ocl_ctx *c, kern *k, const trainer_opts *opts,
                const trainer_hooks *hooks, trainer_result *res, char *err);

#endif
