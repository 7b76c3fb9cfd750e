/* imagedata: parse → check → split → statistics → upload → batches (see imagedata.h).
 *
 * Nothing here runs per pixel on the host during training: after the upload, a batch is one
 * kern_image_batch and one kern_gather_rows enqueue. The host touches pixels twice, at load
 * (the parser) and for the standardisation statistics. */
#include "train/imagedata.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "data/dataset.h"

static size_t pixel_bytes(const image_set *s)
{
    return s->dtype == IMAGES_U8 ? 1 : 4;
}

static size_t set_bytes(const image_set *s)
{
    return s->n * (size_t)s->h * (size_t)s->w * (size_t)s->c * pixel_bytes(s);
}

/* The label of every image must be a class of the model. */
static int labels_check(const image_set *s, const char *which, int classes, char *err)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->labels[i] < 0 || s->labels[i] >= classes)
            return err_set(err, -EINVAL, "%s image %zu has label %d, outside the %d classes", which,
                           i, (int)s->labels[i], classes);
    return 0;
}

/* Model input vs images: sizes after resize, then channels. */
static int shape_check(const image_set *s, const job_spec *job, char *err)
{
    int h = job->resize_h ? job->resize_h : s->h, w = job->resize_w ? job->resize_w : s->w;
    if (h != job->in_h || w != job->in_w)
        return err_set(err, -EINVAL,
                       "the images are %d×%d%s but model.input_shape is [%d, %d, %d]: set "
                       "dataset.resize to [%d, %d] or make input_shape [%d, %d, %d]",
                       s->h, s->w, job->resize_h ? " (resized)" : "", job->in_h, job->in_w,
                       job->in_c, job->in_h, job->in_w, h, w, s->c);
    if (s->c != job->in_c)
        return err_set(err, -EINVAL,
                       "the images have %d channel%s but model.input_shape [%d, %d, %d] wants %d",
                       s->c, s->c == 1 ? "" : "s", job->in_h, job->in_w, job->in_c, job->in_c);
    return 0;
}

/* Per-channel mean and population std of the training images after scaling. */
static int stats_compute(imagedata *d, float scale, char *err)
{
    const image_set *s = d->train;
    size_t c = (size_t)s->c, per = (size_t)s->h * (size_t)s->w * c;
    double *sum = calloc(2 * c, sizeof *sum);
    d->mean = malloc(c * sizeof *d->mean);
    d->std = malloc(c * sizeof *d->std);
    if (!sum || !d->mean || !d->std) {
        free(sum);
        return err_set(err, -ENOMEM, "out of memory computing the image statistics");
    }
    for (size_t i = 0; i < d->n_train; i++) {
        size_t base = (size_t)d->train_ids[i] * per;
        for (size_t p = 0; p < per; p++) {
            double v = s->dtype == IMAGES_U8 ? (double)((const uint8_t *)s->pixels)[base + p]
                                             : (double)((const float *)s->pixels)[base + p];
            v *= scale;
            sum[p % c] += v;
            sum[c + p % c] += v * v;
        }
    }
    double count = (double)d->n_train * (double)s->h * (double)s->w;
    for (size_t ch = 0; ch < c; ch++) {
        double mean = sum[ch] / count, var = sum[c + ch] / count - mean * mean;
        double sd = var > 0 ? sqrt(var) : 0;
        d->mean[ch] = (float)mean;
        d->std[ch] = sd > 0 ? (float)sd : 1.0f;
    }
    free(sum);
    return 0;
}

/* Training and validation indices. */
static int split(imagedata *d, const job_spec *job, char *err)
{
    size_t n = d->train->n;
    if (d->test && job->validation_split == 0.0) {
        d->val_from_test = 1;
        d->n_train = n;
        d->n_val = d->test->n;
    }
    size_t *order = NULL, n_val = 0;
    int rc = 0;
    if (!d->val_from_test) {
        rc = dataset_split_order(n, job->validation_split, job->shuffle, job->seed, &order, &n_val,
                                 err);
        if (rc < 0)
            return rc;
        d->n_train = n - n_val;
        d->n_val = n_val;
    }
    d->train_ids = malloc((d->n_train ? d->n_train : 1) * sizeof *d->train_ids);
    d->val_ids = malloc((d->n_val ? d->n_val : 1) * sizeof *d->val_ids);
    if (!d->train_ids || !d->val_ids) {
        rc = err_set(err, -ENOMEM, "out of memory splitting %zu images", n);
        goto out;
    }
    for (size_t i = 0; i < d->n_train; i++)
        d->train_ids[i] = (int32_t)(order ? order[i] : i);
    for (size_t i = 0; i < d->n_val; i++)
        d->val_ids[i] = (int32_t)(order ? order[d->n_train + i] : i);
out:
    free(order);
    return rc;
}

int imagedata_load(const char *bytes, size_t len, const job_spec *job, imagedata **out, char *err)
{
    imagedata *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = images_load(bytes, len, job->format, &d->train, &d->test, err);
    if (rc < 0)
        goto fail;
    const image_set *tr = d->train, *te = d->test;
    if (tr->n == 0 || tr->n > INT32_MAX / 2 || (te && te->n > INT32_MAX / 2)) {
        rc = err_set(err, tr->n ? -EFBIG : -EINVAL, "the dataset has %zu training images", tr->n);
        goto fail;
    }
    if (te && (te->h != tr->h || te->w != tr->w || te->c != tr->c || te->dtype != tr->dtype)) {
        rc = err_set(err, -EINVAL,
                     "the test images are %d×%d×%d (%s) where the training images are %d×%d×%d "
                     "(%s)",
                     te->h, te->w, te->c, te->dtype == IMAGES_U8 ? "uint8" : "float32", tr->h,
                     tr->w, tr->c, tr->dtype == IMAGES_U8 ? "uint8" : "float32");
        goto fail;
    }
    if (job->task != JOB_TASK_CLASSIFICATION) {
        rc = err_set(err, -EINVAL,
                     "image datasets have class labels: the task must be "
                     "classification");
        goto fail;
    }
    d->n_classes = tr->n_classes;
    if (te && te->n_classes > d->n_classes)
        d->n_classes = te->n_classes;
    rc = shape_check(tr, job, err);
    if (rc == 0)
        rc = labels_check(tr, "training", d->n_classes, err);
    if (rc == 0 && te)
        rc = labels_check(te, "test", d->n_classes, err);
    if (rc == 0 && d->n_classes < 2)
        rc = err_set(err, -EINVAL, "classification needs at least two classes; the images have %d",
                     d->n_classes);
    if (rc == 0 && job->binary && d->n_classes != 2)
        rc = err_set(err, -EINVAL,
                     "binary classification needs exactly two classes; the images have %d",
                     d->n_classes);
    if (rc == 0)
        rc = split(d, job, err);
    if (rc < 0)
        goto fail;
    float scale = tr->dtype == IMAGES_U8 ? 1.0f / 255.0f : 1.0f;
    if (job->scale == JOB_SCALE_STANDARDIZE) {
        rc = stats_compute(d, scale, err);
        if (rc < 0)
            goto fail;
    }
    d->geom = (kern_image){.src_u8 = tr->dtype == IMAGES_U8,
                           .sh = tr->h,
                           .sw = tr->w,
                           .c = tr->c,
                           .dh = job->in_h,
                           .dw = job->in_w,
                           .scale = scale,
                           .flip = job->augment_flip,
                           .crop = job->augment_crop,
                           .seed = job->seed};
    *out = d;
    return 0;
fail:
    imagedata_free(d);
    return rc;
}

uint64_t imagedata_device_bytes(const imagedata *d)
{
    uint64_t b = set_bytes(d->train) + 4 * (uint64_t)d->train->n;
    if (d->val_from_test)
        b += set_bytes(d->test) + 4 * (uint64_t)d->test->n;
    return b + 4 * ((uint64_t)d->n_train + d->n_val + 2 * (uint64_t)d->train->c);
}

static int upload_new(ocl_ctx *c, const void *src, size_t bytes, cl_mem *out, char *err)
{
    int rc = ocl_buffer_new(c, bytes ? bytes : 4, out, err);
    if (rc == 0 && bytes)
        rc = ocl_write(c, *out, 0, bytes, src, err);
    return rc;
}

static int labels_upload(const image_set *s, ocl_ctx *c, int float_labels, cl_mem *out, char *err)
{
    if (!float_labels)
        return upload_new(c, s->labels, s->n * sizeof *s->labels, out, err);
    float *f = malloc((s->n ? s->n : 1) * sizeof *f);
    if (!f)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < s->n; i++)
        f[i] = (float)s->labels[i];
    int rc = upload_new(c, f, s->n * sizeof *f, out, err);
    free(f);
    return rc;
}

int imagedata_upload(imagedata *d, ocl_ctx *c, int float_labels, char *err)
{
    const image_set *sets[2] = {d->train, d->val_from_test ? d->test : NULL};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (!sets[i])
            continue;
        rc = upload_new(c, sets[i]->pixels, set_bytes(sets[i]), &d->src[i], err);
        if (rc == 0)
            rc = labels_upload(sets[i], c, float_labels, &d->labels[i], err);
    }
    if (rc == 0)
        rc = upload_new(c, d->train_ids, d->n_train * sizeof *d->train_ids, &d->idx, err);
    if (rc == 0)
        rc = upload_new(c, d->val_ids, d->n_val * sizeof *d->val_ids, &d->vidx, err);
    if (rc == 0 && d->mean) {
        size_t bytes = (size_t)d->train->c * sizeof(float);
        rc = upload_new(c, d->mean, bytes, &d->mean_d, err);
        if (rc == 0)
            rc = upload_new(c, d->std, bytes, &d->std_d, err);
    }
    return rc;
}

int imagedata_batch(imagedata *d, kern *k, int train, int epoch, size_t start, int rows, cl_mem x,
                    cl_mem y, char *err)
{
    int from = train ? 0 : d->val_from_test;
    kern_image g = d->geom;
    g.n_src = (int)(from ? d->test->n : d->train->n);
    g.epoch = epoch;
    if (!train)
        g.flip = g.crop = 0;
    cl_mem idx = train ? d->idx : d->vidx;
    if (kern_image_batch(k, &g, rows, d->src[from], idx, (int)start, d->mean_d, d->std_d, x) < 0 ||
        kern_gather_rows(k, rows, 1, d->labels[from], idx, (int)start, y) < 0)
        return err_set(err, -EIO, "%s", kern_last_error(k));
    return 0;
}

void imagedata_free(imagedata *d)
{
    if (!d)
        return;
    cl_mem bufs[] = {d->src[0], d->src[1], d->labels[0], d->labels[1],
                     d->idx,    d->vidx,   d->mean_d,    d->std_d};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            clReleaseMemObject(bufs[i]);
    image_set_free(d->train);
    image_set_free(d->test);
    free(d->train_ids);
    free(d->val_ids);
    free(d->mean);
    free(d->std);
    free(d);
}
