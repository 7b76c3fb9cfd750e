/* histogram: weight histograms of a model's tensors (see histogram.h). */
#include "train/histogram.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util/err.h"
#include "model/export.h"

json_t *histogram_of(const char *tensor, const float *v, size_t n)
{
    double min = INFINITY, max = -INFINITY, sum = 0, sq = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        if (!isfinite(x))
            continue; /* a diverged weight: counted nowhere, as the API takes finite numbers */
        finite++;
        min = x < min ? x : min;
        max = x > max ? x : max;
        sum += x;
        sq += x * x;
    }
    if (finite == 0)
        min = max = 0;
    int buckets = max > min ? HISTOGRAM_BUCKETS : 1;
    double counts[HISTOGRAM_BUCKETS] = {0}, width = (max - min) / buckets;
    for (size_t i = 0; i < n && buckets > 1; i++) {
        if (!isfinite(v[i]))
            continue;
        /* (lo, hi] buckets: the value at a limit belongs to the bucket below it */
        long b = (long)ceil(((double)v[i] - min) / width) - 1;
        counts[b < 0 ? 0 : b >= buckets ? buckets - 1 : b]++;
    }
    if (buckets == 1)
        counts[0] = (double)finite;
    json_t *limits = json_array(), *cnt = json_array();
    for (int b = 0; b < buckets; b++) {
        double limit = b == buckets - 1 ? max : min + width * (b + 1);
        json_array_append_new(limits, json_real(limit));
        json_array_append_new(cnt, json_integer((json_int_t)counts[b]));
    }
    if (!isfinite(sum) || !isfinite(sq)) /* overflowed: the API takes finite numbers */
        sum = sq = 0;
    return json_pack("{s:s, s:f, s:f, s:I, s:f, s:f, s:o, s:o}", "tensor", tensor, "min",
                     (double)min, "max", (double)max, "num", (json_int_t)finite, "sum", sum,
                     "sum_squares", sq, "limits", limits, "counts", cnt);
}

int histogram_model(model *m, json_t **out, char *err)
{
    float *params = NULL, *stats = NULL;
    export_set *e = NULL;
    int rc = model_read_params(m, &params, &stats, err);
    if (rc == 0)
        rc = export_build(m, params, stats, &e, err);
    json_t *all = rc == 0 ? json_array() : NULL;
    for (size_t i = 0; rc == 0 && i < e->n; i++) {
        const safetensors_tensor *t = &e->tensors[i];
        if (t->dtype != SAFETENSORS_F32)
            continue;
        size_t n = 1;
        for (int d = 0; d < t->ndim; d++)
            n *= (size_t)t->shape[d];
        json_t *h = histogram_of(t->name, t->data, n);
        if (!all || !h || json_array_append_new(all, h) < 0)
            rc = err_set(err, -ENOMEM, "out of memory building the weight histograms");
    }
    export_free(e);
    free(params);
    free(stats);
    if (rc < 0) {
        json_decref(all);
        return rc;
    }
    *out = all;
    return 0;
}
