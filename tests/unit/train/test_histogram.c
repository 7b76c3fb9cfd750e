/* Unit tests of train/histogram: the buckets of histogram_of (30 equal-width (lo, hi] buckets
 * between min and max, the min in the first and the max in the last, every value counted
 * once), the single bucket of equal values, non-finite values left out, and an empty tensor. */
#include "train/histogram.h"

#include <math.h>

#include "tests/unit/check.h"

static double num(const json_t *h, const char *key)
{
    return json_number_value(json_object_get(h, key));
}

int main(void)
{
    float v[301];
    for (int i = 0; i <= 300; i++)
        v[i] = (float)i / 100.0f - 1.0f; /* -1 .. 2 */
    json_t *h = histogram_of("0.weight", v, 301);
    CHECK(h != NULL);
    CHECK_STR(json_string_value(json_object_get(h, "tensor")), "0.weight");
    CHECK(num(h, "min") == -1.0 && num(h, "max") == 2.0);
    CHECK(num(h, "num") == 301);
    json_t *limits = json_object_get(h, "limits"), *counts = json_object_get(h, "counts");
    CHECK_INT(json_array_size(limits), HISTOGRAM_BUCKETS);
    CHECK_INT(json_array_size(counts), HISTOGRAM_BUCKETS);
    double total = 0, prev = -INFINITY;
    for (size_t i = 0; i < json_array_size(limits); i++) {
        double l = json_number_value(json_array_get(limits, i));
        CHECK(l > prev);
        prev = l;
        total += json_number_value(json_array_get(counts, i));
    }
    CHECK(total == 301);
    CHECK(json_number_value(json_array_get(limits, HISTOGRAM_BUCKETS - 1)) == 2.0);
    double sum = 0, sq = 0;
    for (int i = 0; i <= 300; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
    }
    CHECK(fabs(num(h, "sum") - sum) < 1e-9 && fabs(num(h, "sum_squares") - sq) < 1e-9);
    json_decref(h);

    /* 0, 1, ..., 30: buckets of width 1, (k-1, k]; the first also holds the min */
    float ints[31];
    for (int i = 0; i <= 30; i++)
        ints[i] = (float)i;
    h = histogram_of("ints", ints, 31);
    counts = json_object_get(h, "counts");
    CHECK(json_number_value(json_array_get(counts, 0)) == 2);
    for (int b = 1; b < HISTOGRAM_BUCKETS; b++)
        CHECK(json_number_value(json_array_get(counts, (size_t)b)) == 1);
    CHECK(json_number_value(json_array_get(json_object_get(h, "limits"), 0)) == 1.0);
    json_decref(h);

    float same[4] = {0.5f, 0.5f, 0.5f, NAN};
    h = histogram_of("b", same, 4);
    CHECK(num(h, "min") == 0.5 && num(h, "max") == 0.5 && num(h, "num") == 3);
    CHECK_INT(json_array_size(json_object_get(h, "counts")), 1);
    CHECK(json_number_value(json_array_get(json_object_get(h, "counts"), 0)) == 3);
    json_decref(h);

    h = histogram_of("empty", NULL, 0);
    CHECK(h != NULL && num(h, "num") == 0);
    json_decref(h);
    return check_exit();
}
