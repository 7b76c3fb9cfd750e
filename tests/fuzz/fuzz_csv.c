/* fuzz_csv: libFuzzer target for the CSV tokenizer and dataset builder (data/csv.c,
 * data/dataset.c).
 *
 * Input: byte 0 chooses the options: bits 0-1 the header mode (0 detect, 1 none, 2 header,
 * 3 detect), bit 2 classification (else regression), bit 3 the label by name (else by index).
 * Byte 1: by name, the name's length (low 4 bits), the name following it; by index, the index as
 * a signed byte. The rest is the CSV text, passed without a terminating NUL so that a read past
 * its end is caught.
 * Properties, on success: rows >= 1 and cols >= 1; every x is finite; regression: every y is
 * finite and there are no classes; classification: 1 <= n_classes, every y is an integer class
 * index in range, every class appears, and class names are distinct and non-empty; every name
 * is there. On failure: a negative errno and a message. Never a crash or a leak. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_csv: %s\n", what);
    abort();
}

static void fuzz_check(const dataset *ds, const dataset_csv_opts *o)
{
    if (ds->rows < 1 || ds->cols < 1 || !ds->x || !ds->y || !ds->label_name || !ds->feature_names)
        fuzz_fail("empty dataset or missing arrays");
    for (size_t i = 0; i < ds->rows * ds->cols; i++) {
        if (!isfinite(ds->x[i]))
            fuzz_fail("a feature is not finite");
    }
    for (size_t j = 0; j < ds->cols; j++) {
        if (!ds->feature_names[j])
            fuzz_fail("a feature has no name");
    }
    if (!o->classification) {
        if (ds->n_classes != 0 || ds->class_names)
            fuzz_fail("regression with classes");
        for (size_t r = 0; r < ds->rows; r++) {
            if (!isfinite(ds->y[r]))
                fuzz_fail("a regression target is not finite");
        }
        return;
    }
    if (ds->n_classes < 1 || ds->n_classes > DATASET_MAX_CLASSES || !ds->class_names)
        fuzz_fail("classification without classes");
    unsigned char *seen = calloc((size_t)ds->n_classes, 1);
    if (!seen)
        abort();
    for (size_t r = 0; r < ds->rows; r++) {
        float y = ds->y[r];
        if (!(y >= 0 && y < (float)ds->n_classes) || y != floorf(y))
            fuzz_fail("a class index is out of range");
        seen[(size_t)y] = 1;
    }
    for (int c = 0; c < ds->n_classes; c++) {
        if (!seen[c])
            fuzz_fail("a class appears in no row");
        if (!ds->class_names[c] || !ds->class_names[c][0])
            fuzz_fail("a class has no name");
        for (int d = 0; d < c; d++) {
            if (strcmp(ds->class_names[c], ds->class_names[d]) == 0)
                fuzz_fail("two classes have the same name");
        }
    }
    free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int headers[4] = {-1, 0, 1, -1};
    char name[16];
    if (size < 2)
        return 0;
    dataset_csv_opts o = {.header = headers[data[0] & 3], .classification = (data[0] >> 2) & 1};
    size_t at = 2;
    if (data[0] & 8) {
        size_t n = data[1] & 15;
        if (n > size - at)
            n = size - at;
        memcpy(name, data + at, n);
        name[n] = '\0';
        o.label_name = name;
        at += n;
    } else {
        o.label_index = (int8_t)data[1];
    }
    size_t len = size - at;
    /* An exact-size copy, so ASan sees any read past the text. */
    char *text = malloc(len ? len : 1);
    if (!text)
        abort();
    memcpy(text, data + at, len);
    dataset *ds = NULL;
    char err[ERR_LEN] = "";
    int rc = dataset_from_csv(text, len, &o, &ds, err);
    if (rc == 0) {
        fuzz_check(ds, &o);
        dataset_free(ds);
    } else if (rc > 0 || !err[0] || ds) {
        fuzz_fail("a failure without a negative code and a message, or with a dataset");
    }
    free(text);
    return 0;
}
