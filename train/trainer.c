/* trainer: the job's whole run (see trainer.h). Its order of work:
 *
 *   fetch (libcurl) → parse CSV → split (seeded shuffle) → standardise (training stats) →
 *   upload everything once → per epoch: shuffle indices, per batch gather + model step,
 *   validation in chunks, one read-back of the totals → artifacts.
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
 * joins the same epoch loop at the epoch after the checkpoint's. Its run->history holds every
 * finished epoch's metrics (restored ones included), which each checkpoint carries. */
#include "train/trainer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/err.h"
#include "util/json_out.h"
#include "util/mkdirs.h"
#include "util/timeutil.h"
#include "train/checkpoint.h"
#include "data/dataset.h"
#include "train/early_stop.h"
#include "model/export.h"
#include "model/export_onnx.h"
#include "data/fetch.h"
#include "train/histogram.h"
#include "train/imagedata.h"
#include "train/kbuild.h"
#include "model/model.h"
#include "model/safetensors.h"

/* Validation rows evaluated per enqueue sequence when they do not fit the batch buffers. */
#define TRAINER_VAL_CHUNK 4096
/* Steps between two polls of should_stop: every step, since a cancel must stop a job within a
 * second however long its steps are, and the hooks only read a flag. */
#define TRAINER_POLL_STEPS 1

typedef struct run {
    const job_spec *job;
    const trainer_opts *opts;
    const trainer_hooks *hooks;
    ocl_ctx *c;
    kern *k;
    FILE *log;
    FILE *metrics;
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
} run;

/* Rank 0 of a group, or a run alone: the one that fetches, reports and writes. */
static int lead(const run *r)
{
    return !r->g || r->g->rank == 0;
}

static void say(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(run *r, const char *fmt, ...)
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

static void phase(run *r, int phase_now)
{
    if (r->hooks && r->hooks->on_phase)
        r->hooks->on_phase(r->hooks->user, phase_now);
}

static int path_join(char *out, size_t cap, const char *dir, const char *name, char *err)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return err_set(err, -ENAMETOOLONG, "path %s/%s is too long", dir, name);
    return 0;
}

static int open_outputs(run *r, char *err)
{
    const char *dir = r->opts->out_dir;
    char path[4096];
    int rc = mkdirs(dir, 0755, err);
    if (rc < 0)
        return rc;
    rc = path_join(path, sizeof path, dir, "train.log", err);
    if (rc < 0)
        return rc;
    r->log = fopen(path, r->resume ? "a" : "w");
    if (!r->log)
        return err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    rc = path_join(path, sizeof path, dir, "metrics.csv", err);
    if (rc < 0)
        return rc;
    r->metrics = fopen(path, "w");
    if (!r->metrics)
        return err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    fprintf(r->metrics, "epoch,loss,val_loss,accuracy,val_accuracy,seconds\n");
    fflush(r->metrics);
    return 0;
}

static json_t *strings_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* The class names of image data: those of the set that has them all. */
static const image_set *image_classes(const imagedata *d)
{
    return d->test && d->test->n_classes > d->train->n_classes ? d->test : d->train;
}

/* What a checkpoint pins of the dataset: its size, bytes and classes (for images rows are
 * images, training and test, and cols their pixels × channels). */
static json_t *dataset_json(run *r)
{
    if (r->img) {
        const image_set *tr = r->img->train, *cl = image_classes(r->img);
        size_t rows = tr->n + (r->img->test ? r->img->test->n : 0);
        return json_pack("{s:I, s:I, s:s, s:o}", "rows", (json_int_t)rows, "cols",
                         (json_int_t)tr->h * tr->w * tr->c, "sha256", r->data_sha, "classes",
                         strings_json(cl->class_names, (size_t)cl->n_classes));
    }
    const dataset *d = r->all;
    return json_pack("{s:I, s:I, s:s, s:o}", "rows", (json_int_t)d->rows, "cols",
                     (json_int_t)d->cols, "sha256", r->data_sha, "classes",
                     strings_json(d->class_names, (size_t)d->n_classes));
}

/* Length of the standardisation vectors: features, or an image's channels. */
static size_t std_len(const run *r)
{
    return r->img ? (size_t)r->img->train->c : r->all->cols;
}

static size_t train_rows(const run *r)
{
    return r->img ? r->img->n_train : r->train->rows;
}

static size_t val_rows(const run *r)
{
    return r->img ? r->img->n_val : r->val ? r->val->rows : 0;
}

/* On resume: the dataset must be the checkpoint's, and its standardisation replaces the one
 * just computed (the same numbers, unless the arithmetic changed between builds). */
static int resume_data(run *r, char *err)
{
    if (!r->resume)
        return 0;
    const checkpoint_state *s = checkpoint_state_of(r->resume);
    json_t *want = dataset_json(r);
    int rc = checkpoint_check_dataset(r->resume, want, err);
    json_decref(want);
    if (rc < 0)
        return rc;
    if (!r->mean != !s->mean || (s->mean && s->cols != std_len(r)))
        return err_set(err, -EINVAL, "the checkpoint's standardisation does not fit the job");
    if (r->mean) {
        memcpy(r->mean, s->mean, s->cols * sizeof *r->mean);
        memcpy(r->std, s->std, s->cols * sizeof *r->std);
    }
    return 0;
}

static const char *format_name(int format)
{
    switch (format) {
    case JOB_FORMAT_CIFAR10:
        return "CIFAR-10 binary";
    case JOB_FORMAT_MNIST:
        return "MNIST IDX";
    case JOB_FORMAT_NPY:
        return "npy";
    case JOB_FORMAT_NPZ:
        return "npz";
    default:
        return "image folders";
    }
}

static int load_images(run *r, const char *text, size_t len, char *err)
{
    const job_spec *job = r->job;
    double t0 = time_mono();
    int rc = imagedata_load(text, len, job, &r->img, err);
    if (rc < 0)
        return rc;
    const imagedata *d = r->img;
    const image_set *tr = d->train;
    char test[64] = "";
    if (d->test)
        snprintf(test, sizeof test, " and %zu test images", d->test->n);
    say(r, "dataset: %zu training images%s of %d×%d×%d (%s), %d classes, from %s (parsed in %.2fs)",
        tr->n, test, tr->h, tr->w, tr->c, tr->dtype == IMAGES_U8 ? "uint8" : "float32",
        d->n_classes, format_name(job->format), time_mono() - t0);
    r->mean = d->mean;
    r->std = d->std;
    rc = resume_data(r, err);
    if (rc < 0)
        return rc;
    if (job->resize_h && (job->resize_h != tr->h || job->resize_w != tr->w))
        say(r, "resize: %d×%d to %d×%d (bilinear, on the device)", tr->h, tr->w, job->resize_h,
            job->resize_w);
    say(r, "split: %zu training images, %zu validation images%s", d->n_train, d->n_val,
        d->val_from_test                         ? " (the test set)"
        : d->test && job->validation_split > 0.0 ? " (split off; the test set is unused)"
                                                 : "");
    return 0;
}

/* Rank 0's dataset bytes (or its failure to fetch them) to every rank: its length and hash,
 * then the bytes. rc is this rank's fetch result (rank 0's matters). */
static int share_dataset(run *r, int rc, char **text, size_t *len, fetch_stats *st, char *err)
{
    struct {
        uint64_t len; /* UINT64_MAX: rank 0 has none */
        char sha[65];
    } head = {.len = rc < 0 ? UINT64_MAX : (uint64_t)*len};
    memcpy(head.sha, st->sha256, sizeof head.sha);
    char why[ERR_LEN];
    if (r->g->share(r->g->user, &head, sizeof head, why) < 0) {
        free(*text);
        *text = NULL;
        return err_set(err, -EIO, "sharing the dataset between the replicas failed: %s", why);
    }
    if (lead(r)) {
        if (rc == 0 && r->g->share(r->g->user, *text, *len, why) < 0)
            rc = err_set(err, -EIO, "sending the dataset to the replicas failed: %s", why);
        return rc;
    }
    if (head.len == UINT64_MAX)
        return err_set(err, -EIO, "rank 0 could not fetch the dataset");
    if (head.len >= SIZE_MAX || !(*text = malloc(head.len + 1)))
        return err_set(err, -ENOMEM, "out of memory for the dataset (%llu bytes)",
                       (unsigned long long)head.len);
    *len = (size_t)head.len;
    memcpy(st->sha256, head.sha, sizeof head.sha);
    st->sha256[64] = 0;
    if (r->g->share(r->g->user, *text, *len, why) < 0) {
        free(*text);
        *text = NULL;
        return err_set(err, -EIO, "receiving the dataset from rank 0 failed: %s", why);
    }
    (*text)[*len] = 0; /* as fetched text ends */
    return 0;
}

static int load_data(run *r, char *err)
{
    const job_spec *job = r->job;
    char *text = NULL;
    size_t len = 0;
    fetch_stats st;
    fetch_opts fo = {.file_root = r->opts->dataset_root,
                     .max_bytes = r->opts->max_dataset_bytes,
                     .low_speed_timeout_s = r->opts->dataset_stall_s,
                     .sha256 = job->sha256,
                     .allow = r->opts->dataset_allow,
                     .ca_file = r->opts->dataset_ca,
                     .allow_private = r->opts->allow_private,
                     .stop = r->opts->stop_download,
                     .s3 = r->opts->s3};
    dscache_result cr = {0};
    phase(r, TRAINER_PHASE_DOWNLOADING);
    int rc = lead(r) ? dscache_fetch(r->opts->dataset_cache, job->dataset_url, &fo, &text, &len,
                                     &st, &cr, err)
                     : 0;
    if (cr.note[0])
        say(r, "dataset cache: %s", cr.note);
    if (r->g)
        rc = share_dataset(r, rc, &text, &len, &st, err);
    if (rc < 0)
        return rc;
    memcpy(r->data_sha, st.sha256, sizeof r->data_sha);
    if (!lead(r)) {
        /* The bytes came from rank 0. */
    } else if (cr.how != DSCACHE_FETCHED) {
        say(r, "dataset from cache (%zu bytes, sha256 %s%s) in %.2fs", len, st.sha256,
            cr.how == DSCACHE_REVALIDATED ? ", still current: the server answered 304" : "",
            st.seconds);
    } else {
        if (r->hooks && r->hooks->on_dataset)
            r->hooks->on_dataset(r->hooks->user, st.downloaded);
        say(r, "dataset: %llu bytes fetched%s in %.2fs", (unsigned long long)st.downloaded,
            st.was_gzip ? " (gzip)" : "", st.seconds);
    }

    if (job->format != JOB_FORMAT_CSV) {
        rc = load_images(r, text, len, err);
        free(text);
        return rc;
    }
    dataset_csv_opts co = {.header = job->header,
                           .label_name = job->label_name,
                           .label_index = job->label_index,
                           .classification = job->task == JOB_TASK_CLASSIFICATION};
    double t0 = time_mono();
    rc = dataset_from_csv(text, len, &co, &r->all, err);
    free(text);
    if (rc < 0)
        return rc;
    dataset *d = r->all;
    say(r, "dataset: %zu rows, %zu features, label '%s'%s (parsed in %.2fs)", d->rows, d->cols,
        d->label_name, job->task == JOB_TASK_CLASSIFICATION ? ", classification" : "",
        time_mono() - t0);
    if (job->task == JOB_TASK_CLASSIFICATION) {
        if (d->n_classes < 2)
            return err_set(err, -EINVAL,
                           "classification needs at least two classes; label '%s' has only one",
                           d->label_name);
        if (job->binary && d->n_classes != 2)
            return err_set(err, -EINVAL,
                           "binary classification needs exactly two classes; label '%s' has %d",
                           d->label_name, d->n_classes);
        say(r, "classes: %d", d->n_classes);
    }
    if (d->cols < 1)
        return err_set(err, -EINVAL, "the dataset has no feature columns besides the label");

    rc = dataset_split(d, job->validation_split, job->shuffle, job->seed, &r->train, &r->val, err);
    if (rc == 0 && !job->standardize)
        rc = resume_data(r, err);
    if (rc < 0)
        return rc;
    if (job->standardize) {
        rc = dataset_stats(r->train, &r->mean, &r->std, err);
        if (rc == 0)
            rc = resume_data(r, err);
        if (rc < 0)
            return rc;
        dataset_standardize(r->train, r->mean, r->std);
        if (r->val)
            dataset_standardize(r->val, r->mean, r->std);
    }
    say(r, "split: %zu training rows, %zu validation rows", r->train->rows,
        r->val ? r->val->rows : (size_t)0);
    return 0;
}

/* Uploads n targets as the loss wants them: int32 classes for softmax, floats otherwise. */
static int upload_targets(run *r, const dataset *d, cl_mem *out, char *err)
{
    size_t n = d->rows;
    int rc = ocl_buffer_new(r->c, n * 4, out, err);
    if (rc < 0)
        return rc;
    if (r->loss != MODEL_LOSS_SOFTMAX_XENT)
        return ocl_write(r->c, *out, 0, n * 4, d->y, err);
    int32_t *cls = malloc(n * sizeof *cls);
    if (!cls)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        cls[i] = (int32_t)d->y[i];
    rc = ocl_write(r->c, *out, 0, n * 4, cls, err);
    free(cls);
    return rc;
}

static int upload_iota(run *r, size_t n, cl_mem *out, char *err)
{
    int32_t *v = malloc(n * sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = (int32_t)i;
    int rc = ocl_buffer_new(r->c, n * sizeof *v, out, err);
    if (rc == 0)
        rc = ocl_write(r->c, *out, 0, n * sizeof *v, v, err);
    free(v);
    return rc;
}

/* The loss and outputs from the task and the classes. */
static void loss_plan(run *r, int n_classes)
{
    const job_spec *job = r->job;
    if (job->task == JOB_TASK_REGRESSION) {
        r->loss = MODEL_LOSS_MSE;
        r->outputs = 1;
    } else if (job->binary) {
        r->loss = MODEL_LOSS_BCE;
        r->outputs = 1;
    } else {
        r->loss = MODEL_LOSS_SOFTMAX_XENT;
        r->outputs = n_classes;
    }
}

/* Images: the set goes up once; batches are made on the device into two buffers in turn. The
 * validation chunks are batch-sized (an image model's activations are large). */
static int prepare_images(run *r, char *err)
{
    const job_spec *job = r->job;
    imagedata *d = r->img;
    int inputs = job->in_h * job->in_w * job->in_c;
    loss_plan(r, d->n_classes);
    r->batch = job->batch_size < (int)d->n_train ? job->batch_size : (int)d->n_train;
    int capacity = r->batch;
    uint64_t extra =
        imagedata_device_bytes(d) + 2 * (uint64_t)capacity * (uint64_t)(inputs + 1) * 4;
    int rc = model_new(r->c, r->k, job, inputs, r->outputs, r->loss, capacity, extra, &r->m, err);
    if (rc == 0)
        rc = imagedata_upload(d, r->c, r->loss == MODEL_LOSS_BCE, err);
    for (int i = 0; i < 2 && rc == 0; i++) {
        rc = ocl_buffer_new(r->c, (size_t)capacity * (size_t)inputs * 4, &r->xb[i], err);
        if (rc == 0)
            rc = ocl_buffer_new(r->c, (size_t)capacity * 4, &r->yb[i], err);
    }
    return rc;
}

static int prepare_csv(run *r, char *err)
{
    const job_spec *job = r->job;
    size_t ntr = r->train->rows, nva = r->val ? r->val->rows : 0, cols = r->train->cols;
    if (ntr > INT32_MAX / 2 || cols > INT32_MAX / 2)
        return err_set(err, -EFBIG, "the dataset is too large (%zu rows × %zu features)", ntr,
                       cols);
    loss_plan(r, r->all->n_classes);
    r->batch = job->batch_size < (int)ntr ? job->batch_size : (int)ntr;
    int val_chunk = nva < TRAINER_VAL_CHUNK ? (int)nva : TRAINER_VAL_CHUNK;
    int capacity = r->batch > val_chunk ? r->batch : val_chunk;
    uint64_t extra =
        4 * ((uint64_t)(ntr + nva) * (cols + 1) + ntr + nva) + (uint64_t)capacity * (cols + 1) * 4;

    int rc =
        model_new(r->c, r->k, job, (int)cols, r->outputs, r->loss, capacity, extra, &r->m, err);
    if (rc < 0)
        return rc;
    rc = ocl_buffer_new(r->c, ntr * cols * 4, &r->xtr, err);
    if (rc == 0)
        rc = ocl_write(r->c, r->xtr, 0, ntr * cols * 4, r->train->x, err);
    if (rc == 0)
        rc = upload_targets(r, r->train, &r->ytr, err);
    if (rc == 0)
        rc = upload_iota(r, ntr, &r->idx, err);
    if (rc == 0)
        rc = ocl_buffer_new(r->c, (size_t)capacity * cols * 4, &r->xb[0], err);
    if (rc == 0)
        rc = ocl_buffer_new(r->c, (size_t)capacity * 4, &r->yb[0], err);
    if (rc == 0 && nva) {
        rc = ocl_buffer_new(r->c, nva * cols * 4, &r->xva, err);
        if (rc == 0)
            rc = ocl_write(r->c, r->xva, 0, nva * cols * 4, r->val->x, err);
        if (rc == 0)
            rc = upload_targets(r, r->val, &r->yva, err);
        if (rc == 0 && nva > (size_t)capacity)
            rc = upload_iota(r, nva, &r->vidx, err);
    }
    return rc;
}

/* The sizes prepare_device will give the model, for kbuild's dry step. */
static void dry_shape(run *r, kbuild_shape *s)
{
    const job_spec *job = r->job;
    memset(s, 0, sizeof *s);
    if (r->img) {
        const imagedata *d = r->img;
        loss_plan(r, d->n_classes);
        s->inputs = job->in_h * job->in_w * job->in_c;
        s->batch = job->batch_size < (int)d->n_train ? job->batch_size : (int)d->n_train;
        s->capacity = s->batch;
        s->val_rows = d->n_val ? s->batch : 0;
        s->image = 1;
        s->image_geom = d->geom;
    } else {
        size_t ntr = r->train->rows, nva = r->val ? r->val->rows : 0;
        loss_plan(r, r->all->n_classes);
        s->inputs = (int)r->train->cols;
        s->batch = job->batch_size < (int)ntr ? job->batch_size : (int)ntr;
        s->val_rows = nva < TRAINER_VAL_CHUNK ? (int)nva : TRAINER_VAL_CHUNK;
        s->capacity = s->batch > s->val_rows ? s->batch : s->val_rows;
    }
    s->outputs = r->outputs;
    s->loss = r->loss;
}

/* Without a kern from the caller: the job's families built while the data loads (kbuild). */
static int build_kernels(run *r, kbuild *kb, char *err)
{
    double t0 = time_mono();
    kbuild_shape s;
    dry_shape(r, &s);
    int rc = kbuild_dry(kb, &s, err);
    if (rc == 0)
        rc = kbuild_finish(kb, &r->own_k, err);
    r->k = r->own_k;
    r->build_s += time_mono() - t0;
    return rc;
}

static int prepare_device(run *r, char *err)
{
    int rc = r->img ? prepare_images(r, err) : prepare_csv(r, err);
    if (rc == 0)
        say(r, "model: %zu layers, %zu parameters, batches of %d rows", r->m->n_layers,
            r->m->n_weights, r->batch);
    return rc;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A new permutation of the training rows for this epoch, uploaded to the training order (for
 * images, of the training images' indices). */
static int shuffle_epoch(run *r, int32_t *perm, size_t n, int epoch, char *err)
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

static int stop_requested(run *r)
{
    return r->hooks && r->hooks->should_stop && r->hooks->should_stop(r->hooks->user);
}

/* Enqueues rows rows from position start of the training order (train) or of the validation
 * rows into xb[buf] and yb[buf]. */
static int make_batch(run *r, int train, int epoch, size_t start, int rows, int buf, char *err)
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

/* Image batches are prefetched: batch b+1 is enqueued into the other buffer pair before the
 * step of batch b. The queue is in order, so on the device the image kernel and the step still
 * run one after the other: nothing overlaps there. What overlaps is the host with the device:
 * the host enqueues the epoch's work without ever waiting (and polls should_stop) while the
 * device computes. The two buffers are what an out-of-order or second queue would need to run
 * a batch's resize beside the previous step. CSV batches are a gather each, made right before
 * their step in one buffer pair; a full-batch CSV job trains on the uploaded arrays. */
/* Whether any rank's *flag is set, on every rank. */
static int group_flag(run *r, int *flag, char *err)
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
static int group_step(run *r, int had_rows, int *stop, char *err)
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
static int train_epoch_group(run *r, int epoch, int *stopped, char *err)
{
    size_t n = train_rows(r), batch = (size_t)r->batch;
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

static int train_epoch(run *r, int32_t *perm, int epoch, int *stopped, char *err)
{
    size_t n = train_rows(r), batch = (size_t)r->batch;
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

/* Runs fn over the validation rows in order, in chunks that fit the model: x holds rows rows
 * (with targets y) starting at row start. */
typedef int (*val_fn)(run *r, size_t start, int rows, cl_mem x, cl_mem y, void *user, char *err);

static int each_val_chunk(run *r, val_fn fn, void *user, char *err)
{
    size_t n = val_rows(r), cap = (size_t)r->m->capacity;
    if (!r->img && n <= cap)
        return lead(r) ? fn(r, 0, (int)n, r->xva, r->yva, user, err) : 0;
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

static int evaluate_chunk(run *r, size_t start, int rows, cl_mem x, cl_mem y, void *user, char *err)
{
    (void)start;
    (void)user;
    return model_evaluate(r->m, rows, x, y, err);
}

static int validate_epoch(run *r, char *err)
{
    return each_val_chunk(r, evaluate_chunk, NULL, err);
}

/* The model's outputs on a chunk of validation rows, as probabilities, into user (floats). */
static int outputs_chunk(run *r, size_t start, int rows, cl_mem x, cl_mem y, void *user, char *err)
{
    (void)y;
    int k = r->outputs;
    float *dst = (float *)user + start * (size_t)k;
    cl_mem out;
    int rc = model_forward(r->m, rows, x, &out, err);
    if (rc == 0)
        rc = ocl_read(r->c, out, 0, (size_t)rows * (size_t)k * sizeof *dst, dst, err);
    for (int i = 0; rc == 0 && i < rows; i++) {
        float *row = dst + (size_t)i * (size_t)k;
        if (r->loss == MODEL_LOSS_BCE) {
            row[0] = (float)(1.0 / (1.0 + exp(-(double)row[0])));
        } else if (r->loss == MODEL_LOSS_SOFTMAX_XENT) {
            double top = row[0], sum = 0;
            for (int j = 1; j < k; j++)
                top = row[j] > top ? row[j] : top;
            for (int j = 0; j < k; j++)
                sum += exp((double)row[j] - top);
            for (int j = 0; j < k; j++)
                row[j] = (float)(exp((double)row[j] - top) / sum);
        }
    }
    return rc;
}

/* opts->val_outputs: the outputs on the validation rows, in order, as a float32 .npy of
 * [rows, outputs] (version 1.0, little-endian as the hosts we run on). */
static int write_val_outputs(run *r, char *err)
{
    const char *path = r->opts->val_outputs;
    size_t n = val_rows(r), k = (size_t)r->outputs;
    float *v = malloc((n * k + 1) * sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory for %zu validation outputs", n * k);
    int rc = each_val_chunk(r, outputs_chunk, v, err);
    if (rc < 0)
        goto out;
    char head[128];
    int len = snprintf(head, sizeof head,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", n, k);
    while ((10 + len + 1) % 64)
        head[len++] = ' ';
    head[len++] = '\n';
    unsigned char magic[10] = {0x93,
                               'N',
                               'U',
                               'M',
                               'P',
                               'Y',
                               1,
                               0,
                               (unsigned char)(len & 0xff),
                               (unsigned char)(len >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    int bad = fwrite(magic, 1, sizeof magic, f) != sizeof magic ||
              fwrite(head, 1, (size_t)len, f) != (size_t)len ||
              fwrite(v, sizeof *v, n * k, f) != n * k;
    if (fclose(f) != 0 || bad)
        rc = err_set(err, -EIO, "writing %s failed", path);
    if (rc == 0)
        say(r, "validation outputs: %zu rows × %zu written to %s", n, k, path);
out:
    free(v);
    return rc;
}

static void csv_num(FILE *f, double v, int last)
{
    if (isnan(v))
        fputs(last ? "\n" : ",", f);
    else
        fprintf(f, last ? "%.6g\n" : "%.6g,", v);
}

static void metrics_row(run *r, const trainer_epoch *e);

static void report_epoch(run *r, const trainer_epoch *e)
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
    say(r, "%s", line);
    metrics_row(r, e);
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static double num_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *epoch_json(const trainer_epoch *e)
{
    return json_pack("{s:i, s:o, s:o, s:o, s:o, s:f, s:f}", "epoch", e->epoch, "loss",
                     num_or_null(e->loss), "val_loss", num_or_null(e->val_loss), "accuracy",
                     num_or_null(e->accuracy), "val_accuracy", num_or_null(e->val_accuracy),
                     "seconds", e->seconds, "samples_per_second", e->samples_per_second);
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

/* ---- warm start (opts->init_model) ------------------------------------------------------- */

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
static int load_init_model(run *r, char *err)
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
        say(r, "warm start: the weights of job %s's model", from);
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

/* ---- early stopping (job->early_stopping; early_stop.h) ----------------------------------- */

static json_t *early_stop_json(const early_stop *es)
{
    /* best is ±inf before any judged epoch: JSON has no infinity, so null stands for it */
    return json_pack("{s:o, s:i, s:i, s:i}", "best",
                     isfinite(es->best) ? json_real(es->best) : json_null(), "best_epoch",
                     es->best_epoch, "wait", es->wait, "stopped_epoch", es->stopped_epoch);
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
static int keep_best(run *r, char *err)
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
static int restore_best(run *r, char *err)
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

/* On resume: the early-stopping state and best weights the checkpoint carried, so the resumed
 * run decides as the uninterrupted one would have. */
static int resume_early_stop(run *r, const checkpoint_state *s, char *err)
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
    say(r, "early stopping: best %s %.6g at epoch %d, %d epoch(s) without improvement",
        cfg->monitor, r->es.best, r->es.best_epoch, r->es.wait);
    return 0;
}

/* After epoch e: judges it for early stopping; 1 when training should end after it (why in
 * res->stop_reason), 0 to go on, or a negative code. */
static int judge_epoch(run *r, const trainer_epoch *e, trainer_result *res, char *err)
{
    const job_early_stopping *cfg = &r->job->early_stopping;
    if (!cfg->enabled)
        return 0;
    int d = early_stop_update(&r->es, cfg, e->epoch, monitored(e, cfg->monitor));
    if ((d & EARLY_STOP_IMPROVED) && cfg->restore_best && lead(r)) {
        int rc = keep_best(r, err);
        if (rc < 0)
            return rc;
    }
    if (!(d & EARLY_STOP_STOP))
        return 0;
    early_stop_reason(&r->es, cfg, res->stop_reason, sizeof res->stop_reason);
    return 1;
}

/* Writes the training state after epoch into out_dir/checkpoint.safetensors. */
static int save_checkpoint(run *r, int epoch, trainer_result *res, char *err)
{
    double t0 = time_mono();
    checkpoint_state s = {.epoch = epoch,
                          .step = r->m->step,
                          .n_params = r->m->n_params,
                          .n_stats = r->m->n_stats,
                          .cols = std_len(r),
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
    json_t *data = dataset_json(r);
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
static int resume_model(run *r, trainer_result *res, char *err)
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
        metrics_row(r, &e);
        res->last = e;
    }
    r->start = res->epochs_done = res->resumed_after = s->epoch;
    say(r, "resuming after epoch %d of %d (optimizer step %lld)", s->epoch, r->job->epochs,
        (long long)s->step);
    return resume_early_stop(r, s, err);
}

static void metrics_row(run *r, const trainer_epoch *e)
{
    if (!r->metrics)
        return; /* a data-parallel rank but 0 writes nothing */
    fprintf(r->metrics, "%d,", e->epoch);
    csv_num(r->metrics, e->loss, 0);
    csv_num(r->metrics, e->val_loss, 0);
    csv_num(r->metrics, e->accuracy, 0);
    csv_num(r->metrics, e->val_accuracy, 0);
    csv_num(r->metrics, e->seconds, 1);
    fflush(r->metrics);
}

/* The end of a data-parallel epoch: the loss and correct counts summed over the ranks, and
 * batchnorm's moving statistics (each rank's from its own rows) averaged. */
static int group_epoch_end(run *r, double totals[MODEL_TOTALS], char *err)
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

/* Before a data-parallel run's first step: every rank holds rank 0's training state (the same
 * as its own from the seed unless rank 0 resumed from a checkpoint or warm-started) and epoch. */
static int group_start(run *r, trainer_result *res, char *err)
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
    if (rc == 0 && !lead(r))
        rc = model_state_load(m, p, m1, m2, st, head[1], err);
    if (rc == 0 && !lead(r))
        r->start = res->epochs_done = res->resumed_after = (int)head[0];
    free(p);
    free(m1);
    free(m2);
    free(st);
    return rc;
}

static int train_all(run *r, trainer_result *res, char *err)
{
    size_t n = train_rows(r), nva = val_rows(r);
    int32_t *perm = malloc(n * sizeof *perm);
    if (!perm)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = 0, classification = r->loss != MODEL_LOSS_MSE;
    phase(r, TRAINER_PHASE_TRAINING);
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
        report_epoch(r, &e);
        res->epochs_done = epoch;
        res->last = e;
        if (json_array_append_new(r->history, epoch_json(&e)) != 0) {
            rc = err_set(err, -ENOMEM, "out of memory");
            break;
        }
        if (r->job->tb_histograms && lead(r) &&
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
        if (!stop && !finish && lead(r) && r->hooks && r->hooks->should_finish)
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
        if (lead(r) && every >= 0 &&
            (stop || finish || epoch == r->job->epochs || time_mono() - r->last_ckpt >= every)) {
            rc = save_checkpoint(r, epoch, res, err);
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
                say(r, "%s: ending after epoch %d of %d", res->stop_reason, epoch, r->job->epochs);
            } else {
                res->stop_reason[0] = 0; /* it ran every epoch anyway */
            }
            break;
        }
    }
    free(perm);
    return rc;
}

static json_t *floats_json(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(json_out_float(v[i])));
    return a;
}

/* model.safetensors: the tensors under PyTorch nn.Sequential names (export.h), with metadata
 * trainyard.model (layers, shapes, tensor names, output, loss), trainyard.pytorch (the
 * Sequential to build), trainyard.standardization, trainyard.features (CSV feature names; [] for
 * images), trainyard.classes, trainyard.label, trainyard.job and trainyard.input ({"pixel_scale":
 * s} for images: a pixel's factor before standardisation; {} for CSV). */
static int write_model(run *r, char *err)
{
    float *params = NULL, *stats = NULL;
    export_set *e = NULL;
    int rc = model_read_params(r->m, &params, &stats, err);
    if (rc == 0)
        rc = export_build(r->m, params, stats, &e, err);
    if (rc < 0)
        goto done;
    const image_set *cl = r->img ? image_classes(r->img) : NULL;
    size_t n_std = std_len(r);
    json_t *std = r->mean ? json_pack("{s:o, s:o}", "mean", floats_json(r->mean, n_std), "std",
                                      floats_json(r->std, n_std))
                          : json_null();
    json_t *meta_json[] = {
        json_incref(e->config),
        std,
        r->img ? json_array() : strings_json(r->all->feature_names, r->all->cols),
        cl                  ? strings_json(cl->class_names, (size_t)cl->n_classes)
        : r->all->n_classes ? strings_json(r->all->class_names, (size_t)r->all->n_classes)
                            : json_array(),
        job_to_json(r->job),
        /* what a pixel is multiplied by before standardisation (predict/ prepares so) */
        r->img ? json_pack("{s:f}", "pixel_scale", json_out_float(r->img->geom.scale))
               : json_object(),
    };
    const char *keys[] = {"trainyard.model",    "trainyard.standardization",
                          "trainyard.features", "trainyard.classes",
                          "trainyard.job",      "trainyard.input"};
    enum { NMETA = sizeof keys / sizeof keys[0] };
    char *vals[NMETA] = {0};
    safetensors_meta meta[NMETA + 3];
    size_t nm = 0;
    meta[nm++] = (safetensors_meta){"format", "pt"};
    meta[nm++] = (safetensors_meta){"trainyard.label", r->img ? "label" : r->all->label_name};
    meta[nm++] = (safetensors_meta){"trainyard.pytorch", e->torch};
    for (int i = 0; i < NMETA; i++) {
        vals[i] = json_out_dumps(meta_json[i], JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(meta_json[i]);
        if (!vals[i])
            rc = err_set(err, -ENOMEM, "out of memory writing the model metadata");
        meta[nm++] = (safetensors_meta){keys[i], vals[i] ? vals[i] : ""};
    }
    char path[4096];
    if (rc == 0)
        rc = path_join(path, sizeof path, r->opts->out_dir, "model.safetensors", err);
    if (rc == 0)
        rc = safetensors_write(path, e->tensors, e->n, meta, nm, err);
    /* model.onnx: the same network and tensors, with the trainyard.* metadata */
    if (rc == 0)
        rc = path_join(path, sizeof path, r->opts->out_dir, "model.onnx", err);
    if (rc == 0)
        rc = export_onnx_write(r->m, e, meta + 1, nm - 1, path, err);
    for (int i = 0; i < NMETA; i++)
        free(vals[i]);
done:
    export_free(e);
    free(params);
    free(stats);
    return rc;
}

static int write_job(run *r, char *err)
{
    char path[4096];
    int rc = path_join(path, sizeof path, r->opts->out_dir, "job.json", err);
    if (rc < 0)
        return rc;
    if (json_out_dump_file(r->job_json, path, JSON_INDENT(2)) != 0)
        rc = err_set(err, -EIO, "cannot write %s", path);
    return rc;
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
    run r = {.job = job, .opts = opts, .hooks = hooks, .c = c, .k = k, .g = opts->group};
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
    if (rc == 0 && opts->resume_from && lead(&r))
        rc = checkpoint_read(opts->resume_from, &r.resume, err);
    if (rc == 0 && r.resume)
        rc = checkpoint_check_job(r.resume, r.job_json, err);
    if (rc < 0)
        goto out;
    if (lead(&r))
        rc = open_outputs(&r, err);
    if (rc == 0 && lead(&r))
        rc = write_job(&r, err);
    if (rc == 0 && r.g)
        say(&r, "data-parallel: %d replicas, each with its share of every batch of %d rows",
            r.g->size, job->batch_size);
    else if (rc == 0 && job->replicas > 1)
        say(&r,
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
        say(&r, "device: %s (%s, %u compute units), kernels %s in %.2fs", c->dev.name,
            ocl_device_kind(&c->dev), c->dev.compute_units,
            c->from_cache ? "loaded from cache" : "compiled", c->build_seconds);
    if (rc == 0)
        rc = load_data(&r, err);
    if (rc == 0 && !k) {
        rc = build_kernels(&r, kb, err);
        if (rc == 0)
            say(&r, "device: %s (%s, %u compute units), kernels %s in %.2fs", c->dev.name,
                ocl_device_kind(&c->dev), c->dev.compute_units,
                c->from_cache ? "loaded from cache" : "compiled", r.build_s);
    }
    if (rc == 0 && opts->val_outputs && val_rows(&r) == 0)
        rc = err_set(err, -EINVAL,
                     "--val-outputs needs validation rows: set hyperparameters.validation_split "
                     "above 0, or use a dataset that has a test set");
    if (rc == 0)
        rc = prepare_device(&r, err);
    if (rc == 0 && r.resume)
        rc = resume_model(&r, &out, err);
    else if (rc == 0 && opts->init_model && lead(&r))
        rc = load_init_model(&r, err);
    else if (rc == 0 && job->init_from && lead(&r))
        say(&r,
            "init_from %s: no model to start from was given (--init-model), so this run "
            "starts from the seed's weights",
            job->init_from);
    if (rc == 0 && r.g)
        rc = group_start(&r, &out, err);
    if (rc == 0)
        rc = train_all(&r, &out, err);
    if (rc == 0 && !out.stopped && lead(&r) && job->early_stopping.restore_best && r.best_p) {
        out.best_epoch = r.es.best_epoch;
        if (r.es.best_epoch != out.epochs_done) {
            say(&r, "early stopping: the model is epoch %d's (best %s %.6g)", r.es.best_epoch,
                job->early_stopping.monitor, r.es.best);
            rc = restore_best(&r, err);
        }
    }
    if (rc == 0 && !out.stopped && lead(&r)) {
        phase(&r, TRAINER_PHASE_SAVING);
        rc = write_model(&r, err);
        if (rc == 0 && opts->val_outputs)
            rc = write_val_outputs(&r, err);
    }
    out.seconds = time_mono() - t0;
    if (rc == 0)
        say(&r, "%s after %d epoch(s) in %.2fs (%d checkpoint(s) in %.3fs)",
            out.stopped ? "stopped" : "done", out.epochs_done, out.seconds, out.checkpoints,
            out.checkpoint_s);
    else
        say(&r, "failed: %s", err);
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
    if (r.metrics && fclose(r.metrics) != 0 && rc == 0)
        rc = err_set(err, -EIO, "writing metrics.csv failed");
    if (rc == 0 && res)
        *res = out;
    return rc;
}
