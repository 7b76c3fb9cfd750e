/* event_file: a finished job's TensorBoard event file from its metrics and histograms rows (see
 * event_file.h; the file format is proto/tfevents.h's). */
#include "scheduler/event_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "db/artifacts.h"
#include "db/histograms.h"
#include "db/metrics.h"
#include "proto/tfevents.h"
#include "util/array.h"
#include "util/datadir.h"
#include "util/sha256.h"

#define TFEVENTS_PART ".tfevents.part" /* a dot name: never an artifact's */
_Static_assert(DB_HISTOGRAM_MAX_BUCKETS <= TFEVENTS_MAX_BUCKETS, "every stored histogram fits");
#define TFEVENTS_MAX_TAGS 80 /* the known six and API_MAX_METRICS extras */

void sched_tfevents_name(const db_job *j, char *name)
{
    snprintf(name, DB_ARTIFACT_NAME_MAX + 1, SCHED_TFEVENTS_PREFIX "%lld" SCHED_TFEVENTS_SUFFIX,
             (long long)(j->created_at / 1000));
}

/* One epoch's row, copied out of the walk. */
typedef struct tfev_epoch {
    int epoch;
    int64_t at;
    double v[6];   /* in the order of tfev_known */
    json_t *extra; /* the script's own metrics, or NULL */
} tfev_epoch;

static const char *const tfev_known[6] = {"loss",         "val_loss", "accuracy",
                                          "val_accuracy", "seconds",  "samples_per_second"};

typedef struct tfev_rows {
    tfev_epoch *e;
    size_t n, cap;
} tfev_rows;

static int tfev_collect(void *ctx, const db_metric *m)
{
    tfev_rows *r = ctx;
    int rc = ARRAY_GROW(r->e, r->cap, r->n + 1, ARRAY_NO_MAX); /* rows of our database */
    if (rc < 0)
        return rc;
    tfev_epoch *e = &r->e[r->n++];
    e->epoch = m->epoch;
    e->at = m->at;
    double v[6] = {m->loss,         m->val_loss, m->accuracy,
                   m->val_accuracy, m->seconds,  m->samples_per_second};
    memcpy(e->v, v, sizeof v);
    e->extra = m->extra ? json_loads(m->extra, 0, NULL) : NULL;
    return 0;
}

static void tfev_rows_free(tfev_rows *r)
{
    for (size_t i = 0; i < r->n; i++)
        json_decref(r->e[i].extra);
    free(r->e);
}

/* The row of epoch (rows are in epoch order), or NULL. */
static const tfev_epoch *tfev_find(const tfev_rows *r, int epoch)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->e[mid].epoch == epoch)
            return &r->e[mid];
        if (r->e[mid].epoch < epoch)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Every epoch's scalars: one Event per epoch. */
static void tfev_scalars(tfevents *w, const tfev_rows *r)
{
    const char *tags[TFEVENTS_MAX_TAGS];
    double vals[TFEVENTS_MAX_TAGS];
    for (size_t i = 0; i < r->n; i++) {
        const tfev_epoch *e = &r->e[i];
        size_t n = 0;
        for (int k = 0; k < 6; k++)
            if (!isnan(e->v[k])) {
                tags[n] = tfev_known[k];
                vals[n++] = e->v[k];
            }
        const char *key;
        json_t *val;
        json_object_foreach (e->extra, key, val) {
            if (json_is_number(val) && n < TFEVENTS_MAX_TAGS) {
                tags[n] = key;
                vals[n++] = json_number_value(val);
            }
        }
        tfevents_scalars(w, (double)e->at / 1000.0, e->epoch, tags, vals, n);
    }
}

typedef struct tfev_hwalk {
    tfevents *w;
    const tfev_rows *rows;
} tfev_hwalk;

/* One stored histogram as one Event, at its epoch's time; skipped when that epoch has no
 * metrics row (a requeue drops both, so only a row stored by hand) or the row does not read
 * back as a histogram. */
static int tfev_histogram(void *ctx, const db_histogram *h)
{
    tfev_hwalk *hw = ctx;
    const tfev_epoch *e = tfev_find(hw->rows, h->epoch);
    if (!e)
        return 0;
    json_t *j = json_loads(h->data, 0, NULL);
    if (j)
        (void)tfevents_histogram_json(hw->w, (double)e->at / 1000.0, h->epoch, h->tensor, j);
    json_decref(j);
    return 0;
}

/* Moves the written file part to the artifact path final and records a, inside the caller's
 * transaction. *placed is 1 once the file is at final. */
static int tfev_place(db *d, const db_job *j, const char *part, const char *final, const char *dir,
                      const db_artifact *a, int *placed, char *err)
{
    if (rename(part, final) < 0)
        return err_set(err, -errno, "cannot rename %s: %s", part, strerror(errno));
    *placed = 1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    return db_artifact_put(d, j->seq, a, err);
}

int sched_tfevents_write(db *d, const char *artifacts_dir, const db_job *j, int64_t now,
                         char placed_path[DATADIR_PATH_MAX], char *err)
{
    char dir[DATADIR_PATH_MAX], part[DATADIR_PATH_MAX], final[DATADIR_PATH_MAX];
    db_artifact a;
    tfev_rows rows = {0};
    tfevents *w = NULL;
    uint64_t size = 0;
    int placed = 0;
    memset(&a, 0, sizeof a);
    placed_path[0] = '\0';
    if (!artifacts_dir)
        return 0;
    sched_tfevents_name(j, a.name);
    if (datadir_job_dir(artifacts_dir, j->id, dir) < 0 ||
        datadir_job_file(artifacts_dir, j->id, TFEVENTS_PART, part) < 0 ||
        datadir_job_file(artifacts_dir, j->id, a.name, final) < 0)
        return err_set(err, -ENAMETOOLONG, "%s: the artifact's path is too long", artifacts_dir);
    int rc = db_metric_list(d, j->seq, tfev_collect, &rows, err);
    if (rc == -ENOMEM)
        err_set(err, rc, "out of memory reading the metrics");
    if (rc < 0 || rows.n == 0)
        goto out;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    rc = tfevents_open(part, (double)rows.e[0].at / 1000.0, &w, err);
    if (rc < 0)
        goto out;
    tfev_scalars(w, &rows);
    tfev_hwalk hw = {w, &rows};
    rc = db_histogram_list(d, j->seq, tfev_histogram, &hw, err);
    int closed = tfevents_close(w, rc < 0 ? NULL : err);
    if (rc == 0)
        rc = closed;
    if (rc == 0)
        rc = sha256_file(part, a.sha256, &size, err);
    if (rc < 0)
        goto out;
    a.size = (int64_t)size;
    a.created_at = now;
    rc = tfev_place(d, j, part, final, dir, &a, &placed, err);
out:
    if (rc < 0 && placed)
        unlink(final); /* no row names it */
    else if (placed)
        memcpy(placed_path, final, sizeof final);
    if (!placed)
        unlink(part);
    tfev_rows_free(&rows);
    return rc;
}
