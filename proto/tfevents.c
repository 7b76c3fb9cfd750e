/* tfevents: event files through protobuf-c (see tfevents.h). Each Event is packed into one
 * buffer sized by get_packed_size and framed with util/crc32c's masked CRCs. */
#include "proto/tfevents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/tfevents.pb-c.h"
#include "util/crc32c.h"

struct tfevents {
    FILE *f;
    char path[4096];
    int rc;            /* the first error (negative errno), or 0 */
    char why[ERR_LEN]; /* its message */
};

static void le_put(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

int tfrecord_write(void *file, const void *data, size_t len)
{
    FILE *f = file;
    uint8_t head[12], tail[4];
    le_put(head, (uint64_t)len, 8);
    le_put(head + 8, crc32c_masked(head, 8), 4);
    le_put(tail, crc32c_masked(data, len), 4);
    if (fwrite(head, 1, sizeof head, f) != sizeof head || fwrite(data, 1, len, f) != len ||
        fwrite(tail, 1, sizeof tail, f) != sizeof tail)
        return -EIO;
    return 0;
}

/* Packs ev and writes it as one record; a failure is kept in w. */
static void tfevents_put(tfevents *w, const Trainyard__Tfevents__Event *ev)
{
    if (w->rc < 0)
        return;
    size_t n = trainyard__tfevents__event__get_packed_size(ev);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        w->rc = err_set(w->why, -ENOMEM, "out of memory writing %s", w->path);
        return;
    }
    trainyard__tfevents__event__pack(ev, buf);
    if (tfrecord_write(w->f, buf, n) < 0)
        w->rc = err_set(w->why, -EIO, "cannot write %s: %s", w->path, strerror(errno));
    free(buf);
}

int tfevents_open(const char *path, double wall_time, tfevents **out, char *err)
{
    tfevents *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, -ENOMEM, "out of memory");
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path) {
        free(w);
        return err_set(err, -ENAMETOOLONG, "%s: path too long", path);
    }
    w->f = fopen(path, "wbe");
    if (!w->f) {
        int rc = err_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
        free(w);
        return rc;
    }
    Trainyard__Tfevents__Event ev = TRAINYARD__TFEVENTS__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.what_case = TRAINYARD__TFEVENTS__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)TFEVENTS_FILE_VERSION;
    tfevents_put(w, &ev);
    *out = w;
    return 0;
}

/* Writes an Event at step whose summary holds the n values at v. */
static void tfevents_summary(tfevents *w, double wall_time, int64_t step,
                             Trainyard__Tfevents__Summary__Value **v, size_t n)
{
    Trainyard__Tfevents__Summary sum = TRAINYARD__TFEVENTS__SUMMARY__INIT;
    sum.n_value = n;
    sum.value = v;
    Trainyard__Tfevents__Event ev = TRAINYARD__TFEVENTS__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TRAINYARD__TFEVENTS__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    tfevents_put(w, &ev);
}

void tfevents_scalars(tfevents *w, double wall_time, int64_t step, const char *const *tags,
                      const double *values, size_t n)
{
    if (w->rc < 0 || n == 0)
        return;
    Trainyard__Tfevents__Summary__Value *vals = calloc(n, sizeof *vals);
    Trainyard__Tfevents__Summary__Value **ptrs = calloc(n, sizeof *ptrs);
    if (!vals || !ptrs) {
        w->rc = err_set(w->why, -ENOMEM, "out of memory writing %s", w->path);
    } else {
        for (size_t i = 0; i < n; i++) {
            trainyard__tfevents__summary__value__init(&vals[i]);
            vals[i].tag = (char *)tags[i];
            vals[i].value_case = TRAINYARD__TFEVENTS__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
            vals[i].simple_value = (float)values[i];
            ptrs[i] = &vals[i];
        }
        tfevents_summary(w, wall_time, step, ptrs, n);
    }
    free(vals);
    free(ptrs);
}

void tfevents_histogram(tfevents *w, double wall_time, int64_t step, const char *tag,
                        const tfevents_histo *h)
{
    Trainyard__Tfevents__HistogramProto hp = TRAINYARD__TFEVENTS__HISTOGRAM_PROTO__INIT;
    hp.min = h->min;
    hp.max = h->max;
    hp.num = h->num;
    hp.sum = h->sum;
    hp.sum_squares = h->sum_squares;
    hp.n_bucket_limit = hp.n_bucket = h->n;
    hp.bucket_limit = (double *)h->limits;
    hp.bucket = (double *)h->counts;
    Trainyard__Tfevents__Summary__Value v = TRAINYARD__TFEVENTS__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TRAINYARD__TFEVENTS__SUMMARY__VALUE__VALUE_HISTO;
    v.histo = &hp;
    Trainyard__Tfevents__Summary__Value *ptr = &v;
    tfevents_summary(w, wall_time, step, &ptr, 1);
}

/* Reads up to cap numbers of array a into out; the count, or -1 when a is not such an array. */
static int tfevents_numbers(const json_t *a, double *out, size_t cap)
{
    if (!json_is_array(a) || json_array_size(a) > cap)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        if (!json_is_number(v))
            return -1;
        out[i] = json_number_value(v);
    }
    return (int)json_array_size(a);
}

int tfevents_histogram_json(tfevents *w, double wall_time, int64_t step, const char *tag,
                            const json_t *h)
{
    double limits[TFEVENTS_MAX_BUCKETS], counts[TFEVENTS_MAX_BUCKETS];
    int nl = tfevents_numbers(json_object_get(h, "limits"), limits, TFEVENTS_MAX_BUCKETS);
    int nc = tfevents_numbers(json_object_get(h, "counts"), counts, TFEVENTS_MAX_BUCKETS);
    if (nl < 0 || nl != nc)
        return -EINVAL;
    tfevents_histo hist = {
        .min = json_number_value(json_object_get(h, "min")),
        .max = json_number_value(json_object_get(h, "max")),
        .num = json_number_value(json_object_get(h, "num")),
        .sum = json_number_value(json_object_get(h, "sum")),
        .sum_squares = json_number_value(json_object_get(h, "sum_squares")),
        .limits = limits,
        .counts = counts,
        .n = (size_t)nl,
    };
    tfevents_histogram(w, wall_time, step, tag, &hist);
    return 0;
}

int tfevents_close(tfevents *w, char *err)
{
    int rc = w->rc;
    if (rc < 0)
        err_set(err, rc, "%s", w->why);
    if (fflush(w->f) != 0 && rc == 0)
        rc = err_set(err, -errno, "cannot write %s: %s", w->path, strerror(errno));
    if (fsync(fileno(w->f)) != 0 && rc == 0)
        rc = err_set(err, -errno, "cannot sync %s: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == 0)
        rc = err_set(err, -errno, "cannot write %s: %s", w->path, strerror(errno));
    free(w);
    return rc;
}
