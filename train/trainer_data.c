/* trainer_data: the dataset side of a run: fetch through the dataset cache (rank 0 alone in a
 * data-parallel job, its bytes shared with the others), parse (CSV, or an image format through
 * imagedata.h), split, standardise with the training rows' statistics, and put it on the
 * device once beside the model, with the batch buffers. Also the sizes the cold kernel build
 * (kbuild.h) dry-runs with, which are the ones trainer_prepare_device() gives the model.
 *
 * After trainer_load_data() the run holds either all/train/val (CSV) or img (images), and
 * mean/std when the job standardises (for images, img's, borrowed); a resumed run's
 * standardisation is the checkpoint's (trainer_resume_data). */
#include "train/trainer_priv.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/timeutil.h"
#include "data/dataset.h"
#include "data/fetch.h"
#include "train/imagedata.h"
#include "train/kbuild.h"

/* Validation rows evaluated per enqueue sequence when they do not fit the batch buffers. */
#define TRAINER_VAL_CHUNK 4096

json_t *trainer_strings_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* The class names of image data: those of the set that has them all. */
const image_set *trainer_image_classes(const imagedata *d)
{
    return d->test && d->test->n_classes > d->train->n_classes ? d->test : d->train;
}

/* What a checkpoint pins of the dataset: its size, bytes and classes (for images rows are
 * images, training and test, and cols their pixels × channels). */
json_t *trainer_dataset_json(trainer_ctx *r)
{
    if (r->img) {
        const image_set *tr = r->img->train, *cl = trainer_image_classes(r->img);
        size_t rows = tr->n + (r->img->test ? r->img->test->n : 0);
        return json_pack("{s:I, s:I, s:s, s:o}", "rows", (json_int_t)rows, "cols",
                         (json_int_t)tr->h * tr->w * tr->c, "sha256", r->data_sha, "classes",
                         trainer_strings_json(cl->class_names, (size_t)cl->n_classes));
    }
    const dataset *d = r->all;
    return json_pack("{s:I, s:I, s:s, s:o}", "rows", (json_int_t)d->rows, "cols",
                     (json_int_t)d->cols, "sha256", r->data_sha, "classes",
                     trainer_strings_json(d->class_names, (size_t)d->n_classes));
}

/* Length of the standardisation vectors: features, or an image's channels. */
size_t trainer_std_len(const trainer_ctx *r)
{
    return r->img ? (size_t)r->img->train->c : r->all->cols;
}

size_t trainer_train_rows(const trainer_ctx *r)
{
    return r->img ? r->img->n_train : r->train->rows;
}

size_t trainer_val_rows(const trainer_ctx *r)
{
    return r->img ? r->img->n_val : r->val ? r->val->rows : 0;
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

static int load_images(trainer_ctx *r, const char *text, size_t len, char *err)
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
    trainer_say(
        r, "dataset: %zu training images%s of %d×%d×%d (%s), %d classes, from %s (parsed in %.2fs)",
        tr->n, test, tr->h, tr->w, tr->c, tr->dtype == IMAGES_U8 ? "uint8" : "float32",
        d->n_classes, format_name(job->format), time_mono() - t0);
    r->mean = d->mean;
    r->std = d->std;
    rc = trainer_resume_data(r, err);
    if (rc < 0)
        return rc;
    if (job->resize_h && (job->resize_h != tr->h || job->resize_w != tr->w))
        trainer_say(r, "resize: %d×%d to %d×%d (bilinear, on the device)", tr->h, tr->w,
                    job->resize_h, job->resize_w);
    trainer_say(r, "split: %zu training images, %zu validation images%s", d->n_train, d->n_val,
                d->val_from_test                         ? " (the test set)"
                : d->test && job->validation_split > 0.0 ? " (split off; the test set is unused)"
                                                         : "");
    return 0;
}

/* Rank 0's dataset bytes (or its failure to fetch them) to every rank: its length and hash,
 * then the bytes. rc is this rank's fetch result (rank 0's matters). */
static int share_dataset(trainer_ctx *r, int rc, char **text, size_t *len, fetch_stats *st,
                         char *err)
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
    if (trainer_lead(r)) {
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

int trainer_load_data(trainer_ctx *r, char *err)
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
    trainer_phase(r, TRAINER_PHASE_DOWNLOADING);
    int rc = trainer_lead(r) ? dscache_fetch(r->opts->dataset_cache, job->dataset_url, &fo, &text,
                                             &len, &st, &cr, err)
                             : 0;
    if (cr.note[0])
        trainer_say(r, "dataset cache: %s", cr.note);
    if (r->g)
        rc = share_dataset(r, rc, &text, &len, &st, err);
    if (rc < 0)
        return rc;
    memcpy(r->data_sha, st.sha256, sizeof r->data_sha);
    if (!trainer_lead(r)) {
        /* The bytes came from rank 0. */
    } else if (cr.how != DSCACHE_FETCHED) {
        trainer_say(r, "dataset from cache (%zu bytes, sha256 %s%s) in %.2fs", len, st.sha256,
                    cr.how == DSCACHE_REVALIDATED ? ", still current: the server answered 304" : "",
                    st.seconds);
    } else {
        if (r->hooks && r->hooks->on_dataset)
            r->hooks->on_dataset(r->hooks->user, st.downloaded);
        trainer_say(r, "dataset: %llu bytes fetched%s in %.2fs", (unsigned long long)st.downloaded,
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
    trainer_say(r, "dataset: %zu rows, %zu features, label '%s'%s (parsed in %.2fs)", d->rows,
                d->cols, d->label_name,
                job->task == JOB_TASK_CLASSIFICATION ? ", classification" : "", time_mono() - t0);
    if (job->task == JOB_TASK_CLASSIFICATION) {
        if (d->n_classes < 2)
            return err_set(err, -EINVAL,
                           "classification needs at least two classes; label '%s' has only one",
                           d->label_name);
        if (job->binary && d->n_classes != 2)
            return err_set(err, -EINVAL,
                           "binary classification needs exactly two classes; label '%s' has %d",
                           d->label_name, d->n_classes);
        trainer_say(r, "classes: %d", d->n_classes);
    }
    if (d->cols < 1)
        return err_set(err, -EINVAL, "the dataset has no feature columns besides the label");

    rc = dataset_split(d, job->validation_split, job->shuffle, job->seed, &r->train, &r->val, err);
    if (rc == 0 && !job->standardize)
        rc = trainer_resume_data(r, err);
    if (rc < 0)
        return rc;
    if (job->standardize) {
        rc = dataset_stats(r->train, &r->mean, &r->std, err);
        if (rc == 0)
            rc = trainer_resume_data(r, err);
        if (rc < 0)
            return rc;
        dataset_standardize(r->train, r->mean, r->std);
        if (r->val)
            dataset_standardize(r->val, r->mean, r->std);
    }
    trainer_say(r, "split: %zu training rows, %zu validation rows", r->train->rows,
                r->val ? r->val->rows : (size_t)0);
    return 0;
}

/* Uploads n targets as the loss wants them: int32 classes for softmax, floats otherwise. */
static int upload_targets(trainer_ctx *r, const dataset *d, cl_mem *out, char *err)
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

static int upload_iota(trainer_ctx *r, size_t n, cl_mem *out, char *err)
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
static void loss_plan(trainer_ctx *r, int n_classes)
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
static int prepare_images(trainer_ctx *r, char *err)
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

static int prepare_csv(trainer_ctx *r, char *err)
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
static void dry_shape(trainer_ctx *r, kbuild_shape *s)
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
int trainer_build_kernels(trainer_ctx *r, kbuild *kb, char *err)
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

int trainer_prepare_device(trainer_ctx *r, char *err)
{
    int rc = r->img ? prepare_images(r, err) : prepare_csv(r, err);
    if (rc == 0)
        trainer_say(r, "model: %zu layers, %zu parameters, batches of %d rows", r->m->n_layers,
                    r->m->n_weights, r->batch);
    return rc;
}
