/* dataset: a table of numeric features and one target per row, as the trainer consumes it.
 *
 * Built from CSV text by dataset_from_csv(); the label column (by name or index) becomes the
 * target: for classification, labels are mapped to class indices 0..n_classes-1 in sorted order
 * (numeric order when every label is a number, else byte order) and class_names keeps the text;
 * for regression the label must be numeric. Every other column is a float feature.
 *
 * Ownership: everything inside a dataset belongs to it; dataset_free() accepts NULL. */
#ifndef TRAINYARD_WORKER_DATASET_H
#define TRAINYARD_WORKER_DATASET_H

#include <stddef.h>
#include <stdint.h>

#define DATASET_MAX_CLASSES 65536

typedef struct dataset {
    size_t rows;
    size_t cols;          /* features per row */
    float *x;             /* rows × cols, row-major */
    float *y;             /* rows targets: class index (as float) or regression value */
    int n_classes;        /* classification: distinct labels; 0 for regression */
    char **class_names;   /* n_classes strings */
    char **feature_names; /* cols strings: from the header, else "c0", "c1", ... by CSV column */
    char *label_name;     /* from the header, else "c<index>" */
} dataset;

typedef struct dataset_csv_opts {
    int header;             /* -1 detect, 0 none, 1 first row is a header */
    const char *label_name; /* label column by header name, or NULL */
    int label_index;        /* else by index; negative counts from the end (-1: last) */
    int classification;     /* 1: labels are classes; 0: labels must be numeric (regression) */
} dataset_csv_opts;

/* Parses CSV text (RFC 4180 quoting, LF or CRLF, blank lines skipped) into a dataset.
 * Errors name the line and column: "line 12, column 3 (age): 'abc' is not a number". */
int dataset_from_csv(const char *text, size_t len, const dataset_csv_opts *opts, dataset **out,
                     char *err);

/* Splits ds into train and validation parts: rows are shuffled with seed when shuffle is set,
 * then the last round(rows × validation_split) rows become validation. *val is NULL when the
 * split is 0. ds is left unchanged. */
int dataset_split(const dataset *ds, double validation_split, int shuffle, uint64_t seed,
                  dataset **train, dataset **val, char *err);

/* Computes each feature's mean and standard deviation over ds (a std of 0 is stored as 1) into
 * malloc'd arrays of ds->cols floats. */
int dataset_stats(const dataset *ds, float **mean, float **std, char *err);

/* x ← (x − mean) / std in place, per feature. */
void dataset_standardize(dataset *ds, const float *mean, const float *std);

/* Releases a dataset; accepts NULL. */
void dataset_free(dataset *ds);

#endif
