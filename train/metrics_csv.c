/* metrics_csv: metrics.csv's header, rows and number format (see metrics_csv.h).
 *
 * The writer keeps the file, the column names (copied: a script job's come from a JSON reply
 * that is freed before the rows are written) and the path for the closing message. Reals go
 * through json_out_real so that the file holds the digits the API's JSON holds. */
#include "train/metrics_csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/json_out.h"

struct metrics_csv {
    FILE *f;
    char **names;
    size_t n;
    char *path;
};

static void metrics_csv_free(metrics_csv *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w);
}

int metrics_csv_open(const char *path, const char *const *names, size_t n, metrics_csv **out,
                     char *err)
{
    metrics_csv *w = calloc(1, sizeof *w);
    int rc = 0;
    if (w)
        w->names = calloc(n ? n : 1, sizeof *w->names);
    if (w && w->names)
        w->path = strdup(path);
    if (!w || !w->names || !w->path) {
        rc = err_set(err, -ENOMEM, "out of memory opening %s", path);
        goto fail;
    }
    for (; w->n < n; w->n++) {
        w->names[w->n] = strdup(names[w->n]);
        if (!w->names[w->n]) {
            rc = err_set(err, -ENOMEM, "out of memory opening %s", path);
            goto fail;
        }
    }
    w->f = fopen(path, "w");
    if (!w->f) {
        rc = err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(w->f, "%s%s", i ? "," : "", names[i]);
    fputc('\n', w->f);
    fflush(w->f);
    *out = w;
    return 0;
fail:
    metrics_csv_free(w);
    return rc;
}

int metrics_csv_cell(const json_t *v, char out[METRICS_CSV_CELL_MAX])
{
    out[0] = 0;
    if (json_is_integer(v))
        return snprintf(out, METRICS_CSV_CELL_MAX, "%lld", (long long)json_integer_value(v));
    if (json_is_real(v) && json_out_real(json_real_value(v), 0, out) > 0)
        return (int)strlen(out);
    out[0] = 0;
    return 0;
}

void metrics_csv_row(metrics_csv *w, const json_t *row)
{
    char cell[METRICS_CSV_CELL_MAX];
    for (size_t i = 0; i < w->n; i++) {
        metrics_csv_cell(json_object_get(row, w->names[i]), cell);
        fprintf(w->f, "%s%s", i ? "," : "", cell);
    }
    fputc('\n', w->f);
    fflush(w->f);
}

int metrics_csv_close(metrics_csv *w, char *err)
{
    if (!w)
        return 0;
    int bad = ferror(w->f) != 0;
    if (fclose(w->f) != 0)
        bad = 1;
    int rc = bad ? err_set(err, -EIO, "writing %s failed", w->path) : 0;
    metrics_csv_free(w);
    return rc;
}
