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
#define DATASET_MAX_VALUES  (1u << 30) /* rows × cols: 4 GiB of floats */
#define DATASET_MAX_LABEL   1024       /* bytes in one class label */

typedef struct dataset {
    size_t rows;
    size_t cols;          /* features per row */
    float *x;             /* rows × cols, row-major */
    float *y;             /* rows targets: class index (as float) or regression value */
    int n_classes;        /* classification: distinct labels; 0 for regression */
    char **class_names;   /* n_classes strings */
    char **feature_names; /* cols strings: from the header, else "c<N>" with N the 1-based CSV
                             column, as in error messages ("c1", "c2", ...; the label's N is
                             skipped); an empty header cell is named the same way */
    char *label_name;     /* from the header, else "c<N>" likewise */
} dataset;

/* Header detection (header == -1): with label_name set, the first record is the header. Else,
 * with two or more records, the first is a header when some column holds a non-empty cell that
 * is not a number there and a number in the second record; with a single record, when any of
 * its cells is non-empty and not a number (which then leaves no data rows, an error). */
typedef struct dataset_csv_opts {
    int header;             /* -1 detect, 0 none, 1 first row is a header */
    const char *label_name; /* label column by header name (exact, after trimming), or NULL */
    int label_index;        /* else by index; negative counts from the end (-1: last) */
    int classification;     /* 1: labels are classes; 0: labels must be numeric (regression) */
} dataset_csv_opts;

/* Parses CSV text (RFC 4180 quoting, LF or CRLF, blank lines skipped; see data/csv.h) into a
 * dataset. Cells may have spaces or tabs around them. Every record must have as many cells as
 * the first, at least 2. Numbers are decimal with an optional exponent; inf, nan and values
 * beyond a float's range are refused. Class labels are any non-empty text of at most
 * DATASET_MAX_LABEL bytes, trimmed; distinct texts are distinct classes ("1" and "1.0" too).
 * A NUL byte in a label or in any cell of the first record (kept as text) is refused.
 * Errors name the line and the 1-based column, and the column's name when there is a header:
 * "line 12, column 3 (age): 'abc' is not a number". -EINVAL bad input or options, -E2BIG too
 * many classes, -EFBIG over DATASET_MAX_VALUES, -ENOMEM. */
int dataset_from_csv(const char *text, size_t len, const dataset_csv_opts *opts, dataset **out,
                     char *err);

/* Splits ds into train and validation parts: rows are shuffled with seed when shuffle is set,
 * then the last round(rows × validation_split) rows become validation. *val is NULL when the
 * split is 0. ds is left unchanged. The split must be in [0, 1); a split above 0 needs at least
 * 2 rows, gives validation at least 1 row and leaves training at least 1 row.
 * Shuffle: Fisher–Yates over the row order, i from rows-1 down to 1, swapping rows i and j,
 * j = v mod (i+1) for the next output v of splitmix64 seeded with seed (state +=
 * 0x9e3779b97f4a7c15, then the standard xor-shift-multiply finaliser), redrawing v while
 * v < 2^64 mod (i+1).
 * Both parts are deep copies (names included); the caller frees each with dataset_free(). */
int dataset_split(const dataset *ds, double validation_split, int shuffle, uint64_t seed,
                  dataset **train, dataset **val, char *err);
/* The row order dataset_split() uses, for rows that are not a dataset (images): *order is a
 * malloc'd permutation of 0..rows-1 whose last *n_val entries are the validation rows. */
int dataset_split_order(size_t rows, double validation_split, int shuffle, uint64_t seed,
                        size_t **order, size_t *n_val, char *err);

/* Computes each feature's mean and population standard deviation over ds, accumulated in
 * double (a std of 0 is stored as 1), into malloc'd arrays of ds->cols floats that the caller
 * frees. */
int dataset_stats(const dataset *ds, float **mean, float **std, char *err);

/* x ← (x − mean) / std in place, per feature. */
void dataset_standardize(dataset *ds, const float *mean, const float *std);

/* Releases a dataset; accepts NULL. */
void dataset_free(dataset *ds);

#endif
