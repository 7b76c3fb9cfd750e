/* dataset: CSV text → a dense float table and targets; splitting and standardising it.
 *
 * Parsing is one pass over the text with the csv reader. The first record is copied (it may be
 * a header, and detection may need the second record while the first is still wanted); every
 * other record is converted cell by cell straight into x, which grows by half again from an
 * estimate taken from the first data row's length, and is trimmed to size at the end.
 * Classification labels are interned in an open-addressing hash table in order of first
 * appearance; y holds those provisional ids until the end, when the distinct labels are sorted
 * and y is rewritten with the sorted ranks.
 *
 * Invariants while parsing: rows <= cap_rows; rows × cols <= DATASET_MAX_VALUES; every id in y
 * is < the number of interned labels <= DATASET_MAX_CLASSES. */
#include "data/dataset.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/err.h"
#include "util/utf8.h"
#include "data/csv.h"

/* One distinct class label. */
typedef struct ds_label {
    char *text; /* trimmed, NUL-terminated, owned */
    size_t len;
    uint64_t hash;
    double value; /* when numeric */
    int numeric;
    uint32_t id; /* order of first appearance */
} ds_label;

/* Distinct labels by id, and a hash table of id + 1 (0: empty slot). */
typedef struct ds_labels {
    ds_label *list;
    size_t n, list_cap;
    uint32_t *slots;
    size_t slots_cap; /* a power of two, kept at least twice n */
} ds_labels;

/* Everything dataset_from_csv builds before it hands over a dataset. */
typedef struct ds_parse {
    const dataset_csv_opts *opts;
    size_t ncsv;      /* cells per record */
    size_t label_col; /* CSV column of the label */
    size_t cols;      /* ncsv - 1 */
    char **header;    /* ncsv trimmed header cells, or NULL without a header */
    float *x, *y;
    size_t rows, cap_rows; /* cap_rows: rows that both x and y hold */
    size_t x_cap, y_cap;   /* floats allocated in each */
    size_t text_len;
    ds_labels labels;
} ds_parse;

static uint64_t ds_hash(const char *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void ds_labels_free(ds_labels *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->list[i].text);
    free(t->list);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* Doubles the slot array and re-inserts every label. */
static int ds_labels_rehash(ds_labels *t)
{
    size_t cap = t->slots_cap ? t->slots_cap * 2 : 64;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        size_t s = (size_t)t->list[i].hash & (cap - 1);
        while (slots[s])
            s = (s + 1) & (cap - 1);
        slots[s] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->slots_cap = cap;
    return 0;
}

/* Finds or adds the label p/len (trimmed, non-empty) and writes its id. -E2BIG past
 * DATASET_MAX_CLASSES distinct labels. */
static int ds_labels_intern(ds_labels *t, const char *p, size_t len, uint32_t *id)
{
    uint64_t h = ds_hash(p, len);
    size_t s = 0;
    if (t->slots_cap) {
        s = (size_t)h & (t->slots_cap - 1);
        while (t->slots[s]) {
            const ds_label *l = &t->list[t->slots[s] - 1];
            if (l->hash == h && l->len == len && memcmp(l->text, p, len) == 0) {
                *id = l->id;
                return 0;
            }
            s = (s + 1) & (t->slots_cap - 1);
        }
    }
    if (t->n >= DATASET_MAX_CLASSES)
        return -E2BIG;
    if (ARRAY_GROW(t->list, t->list_cap, t->n + 1, DATASET_MAX_CLASSES) < 0)
        return -ENOMEM;
    char *text = strndup(p, len);
    if (!text)
        return -ENOMEM;
    ds_label *l = &t->list[t->n];
    l->text = text;
    l->len = len;
    l->hash = h;
    l->numeric = csv_number(p, len, &l->value) == 0;
    l->id = (uint32_t)t->n;
    t->n++;
    if (t->n * 2 > t->slots_cap) {
        int rc = ds_labels_rehash(t); /* places the new label too */
        if (rc < 0)
            return rc;
    } else {
        s = (size_t)h & (t->slots_cap - 1);
        while (t->slots[s])
            s = (s + 1) & (t->slots_cap - 1);
        t->slots[s] = (uint32_t)t->n;
    }
    *id = l->id;
    return 0;
}

static int ds_label_cmp_bytes(const void *a, const void *b)
{
    const ds_label *la = *(ds_label *const *)a, *lb = *(ds_label *const *)b;
    size_t n = la->len < lb->len ? la->len : lb->len;
    int c = memcmp(la->text, lb->text, n);
    if (c)
        return c;
    return (la->len > lb->len) - (la->len < lb->len);
}

static int ds_label_cmp_numeric(const void *a, const void *b)
{
    const ds_label *la = *(ds_label *const *)a, *lb = *(ds_label *const *)b;
    if (la->value != lb->value)
        return la->value < lb->value ? -1 : 1;
    return ds_label_cmp_bytes(a, b);
}

/* Writes a cell's text for a message: at most 40 bytes, control bytes and quotes as '?'. */
static void ds_quote(const char *p, size_t len, char out[48])
{
    char raw[41];
    csv_trim(&p, &len);
    size_t n = len > 40 ? 40 : len;
    for (size_t i = 0; i < n; i++)
        raw[i] = p[i] == '\'' ? '?' : p[i];
    raw[n] = '\0';
    /* The message may reach JSON (a job's error): keep it valid UTF-8, controls as '?'. */
    utf8_clean(out, 44, raw);
    if (len > n)
        strcat(out, "...");
}

/* Writes "line L, column C (name)" (the name only with a header) into where[]. */
static void ds_where(const ds_parse *st, size_t line, size_t col, char *where, size_t size)
{
    if (st->header && st->header[col][0] != '\0')
        snprintf(where, size, "line %zu, column %zu (%.64s)", line, col + 1, st->header[col]);
    else
        snprintf(where, size, "line %zu, column %zu", line, col + 1);
}

/* Turns csv_number's failure on a cell into a message. */
static int ds_cell_error(const ds_parse *st, const csv_cell *c, size_t line, size_t col, int rc,
                         char *err)
{
    char where[128], text[48];
    ds_where(st, line, col, where, sizeof where);
    const char *p = c->ptr;
    size_t len = c->len;
    csv_trim(&p, &len);
    if (len == 0)
        return err_set(err, -EINVAL, "%s: missing value", where);
    ds_quote(p, len, text);
    if (rc == -ERANGE)
        return err_set(err, -EINVAL, "%s: '%s' is out of range for a 32-bit float", where, text);
    return err_set(err, -EINVAL, "%s: '%s' is not a number", where, text);
}

/* Makes room for one more row in x and y. */
static int ds_reserve(ds_parse *st, size_t row_bytes, size_t line, char *err)
{
    if (st->rows < st->cap_rows)
        return 0;
    size_t max_values = DATASET_MAX_VALUES;
    if (max_values > SIZE_MAX / sizeof(float))
        max_values = SIZE_MAX / sizeof(float); /* 32-bit size_t */
    size_t max_rows = max_values / st->cols;
    if (st->rows >= max_rows)
        return err_set(err, -EFBIG,
                       "line %zu: the dataset is larger than %u values (rows × features)", line,
                       DATASET_MAX_VALUES);
    size_t cap;
    if (st->cap_rows == 0) {
        /* Enough for the whole text if rows are about as long as this one, plus a margin. */
        size_t per_row = row_bytes ? row_bytes : 1;
        cap = st->text_len / per_row;
        cap += cap / 4 + 16;
    } else {
        cap = st->cap_rows + st->cap_rows / 2 + 16;
    }
    if (cap > max_rows)
        cap = max_rows;
    /* Exactly the estimate, which grows by half: doubling would overshoot a large table. */
    if (ARRAY_RESIZE(st->x, st->x_cap, cap * st->cols) < 0 ||
        ARRAY_RESIZE(st->y, st->y_cap, cap) < 0)
        return err_set(err, -ENOMEM, "out of memory for %zu rows of %zu features", cap, st->cols);
    st->cap_rows = cap;
    return 0;
}

/* Converts one data record of st->ncsv cells into a row of x and a target in y. */
static int ds_row(ds_parse *st, const csv_cell *cells, size_t n, size_t line, size_t bytes,
                  char *err)
{
    if (n != st->ncsv)
        return err_set(err, -EINVAL, "line %zu has %zu column%s, expected %zu", line, n,
                       n == 1 ? "" : "s", st->ncsv);
    int rc = ds_reserve(st, bytes, line, err);
    if (rc < 0)
        return rc;
    float *xr = st->x + st->rows * st->cols;
    for (size_t j = 0; j < n; j++) {
        if (j == st->label_col)
            continue;
        double v;
        rc = csv_number(cells[j].ptr, cells[j].len, &v);
        float f = (float)v;
        if (rc == 0 && isinf(f))
            rc = -ERANGE;
        if (rc < 0)
            return ds_cell_error(st, &cells[j], line, j, rc, err);
        *xr++ = f;
    }
    const csv_cell *lc = &cells[st->label_col];
    if (!st->opts->classification) {
        double v;
        rc = csv_number(lc->ptr, lc->len, &v);
        float f = (float)v;
        if (rc == 0 && isinf(f))
            rc = -ERANGE;
        if (rc < 0)
            return ds_cell_error(st, lc, line, st->label_col, rc, err);
        st->y[st->rows++] = f;
        return 0;
    }
    const char *p = lc->ptr;
    size_t len = lc->len;
    csv_trim(&p, &len);
    char where[128];
    if (len == 0 || len > DATASET_MAX_LABEL || memchr(p, '\0', len)) {
        ds_where(st, line, st->label_col, where, sizeof where);
        if (len == 0)
            return err_set(err, -EINVAL, "%s: missing value", where);
        if (len > DATASET_MAX_LABEL)
            return err_set(err, -EINVAL, "%s: the label is longer than %d bytes", where,
                           DATASET_MAX_LABEL);
        return err_set(err, -EINVAL, "%s: the label holds a NUL byte; is this a text file?", where);
    }
    uint32_t id;
    rc = ds_labels_intern(&st->labels, p, len, &id);
    if (rc == -E2BIG) {
        ds_where(st, line, st->label_col, where, sizeof where);
        return err_set(err, rc,
                       "%s: more than %d distinct labels; is this a regression target "
                       "rather than classes?",
                       where, DATASET_MAX_CLASSES);
    }
    if (rc < 0)
        return err_set(err, rc, "out of memory for the labels at line %zu", line);
    st->y[st->rows++] = (float)id; /* exact: ids stay below 2^24 */
    return 0;
}

/* Sorts the distinct labels, rewrites y[0..rows) from first-appearance ids to sorted ranks, and
 * moves the label texts into *names (t->n strings). */
static int ds_classes_finish(ds_labels *t, float *y, size_t rows, char ***names, char *err)
{
    ds_label **order = malloc(t->n * sizeof *order);
    uint32_t *rank = malloc(t->n * sizeof *rank);
    char **out = calloc(t->n, sizeof *out);
    int rc = 0;
    if (!order || !rank || !out) {
        rc = err_set(err, -ENOMEM, "out of memory sorting %zu classes", t->n);
        goto out;
    }
    int numeric = 1;
    for (size_t i = 0; i < t->n; i++) {
        order[i] = &t->list[i];
        numeric &= t->list[i].numeric;
    }
    qsort(order, t->n, sizeof *order, numeric ? ds_label_cmp_numeric : ds_label_cmp_bytes);
    for (size_t i = 0; i < t->n; i++) {
        rank[order[i]->id] = (uint32_t)i;
        out[i] = order[i]->text;
    }
    for (size_t r = 0; r < rows; r++)
        y[r] = (float)rank[(size_t)y[r]];
    /* The texts now belong to out. */
    for (size_t i = 0; i < t->n; i++)
        t->list[i].text = NULL;
    *names = out;
    out = NULL;
out:
    free(order);
    free(rank);
    free(out);
    return rc;
}

static void ds_strings_free(char **s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

/* Copies the cells of a record as trimmed strings (ncsv of them) into *copy. A cell holding a
 * NUL byte is refused: as a string it would be cut short, and read as something else than the
 * same cell on any later line. */
static int ds_copy_record(const csv_record *rec, char ***copy, char *err)
{
    int rc = 0;
    char **c = calloc(rec->n, sizeof *c);
    if (!c)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t j = 0; j < rec->n; j++) {
        const char *p = rec->cells[j].ptr;
        size_t len = rec->cells[j].len;
        csv_trim(&p, &len);
        if (memchr(p, '\0', len)) {
            rc = err_set(err, -EINVAL,
                         "line %zu, column %zu: the cell holds a NUL byte; is this a text file?",
                         rec->line, j + 1);
            goto out;
        }
        c[j] = strndup(p, len);
        if (!c[j]) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    *copy = c;
    c = NULL;
out:
    ds_strings_free(c, rec->n);
    return rc;
}

static int ds_is_number(const char *p, size_t len)
{
    double v;
    return csv_number(p, len, &v) == 0;
}

/* Header detection, as documented on dataset_csv_opts; second may be NULL. */
static int ds_detect_header(char **first, size_t n, const csv_record *second)
{
    for (size_t j = 0; j < n; j++) {
        if (first[j][0] == '\0' || ds_is_number(first[j], strlen(first[j])))
            continue;
        if (!second)
            return 1;
        if (j < second->n && ds_is_number(second->cells[j].ptr, second->cells[j].len))
            return 1;
    }
    return 0;
}

/* Writes "a, b, c, ... (N in all)" of the header's names into list[size]. */
static void ds_list_names(char **names, size_t n, char *list, size_t size)
{
    size_t used = 0;
    list[0] = '\0';
    for (size_t j = 0; j < n; j++) {
        int w = snprintf(list + used, size - used, "%s'%.40s'", j ? ", " : "", names[j]);
        if (w < 0 || (size_t)w >= size - used - 24) {
            list[used] = '\0';
            snprintf(list + used, size - used, "%s... (%zu in all)", j ? ", " : "", n);
            return;
        }
        used += (size_t)w;
    }
}

/* Chooses the label column from the options. */
static int ds_label_column(ds_parse *st, char *err)
{
    const dataset_csv_opts *o = st->opts;
    if (o->label_name) {
        if (!st->header)
            return err_set(err, -EINVAL,
                           "the label column is named ('%.64s') but the CSV has no header; "
                           "give its index instead",
                           o->label_name);
        const char *want = o->label_name;
        size_t want_len = strlen(want);
        csv_trim(&want, &want_len);
        for (size_t j = 0; j < st->ncsv; j++) {
            if (strlen(st->header[j]) == want_len && memcmp(st->header[j], want, want_len) == 0) {
                st->label_col = j;
                return 0;
            }
        }
        char list[320];
        ds_list_names(st->header, st->ncsv, list, sizeof list);
        return err_set(err, -EINVAL, "no column is named '%.64s'; the columns are %s",
                       o->label_name, list);
    }
    long long n = (long long)st->ncsv, i = o->label_index;
    if (i < -n || i >= n)
        return err_set(err, -EINVAL,
                       "label index %lld is out of range for %lld columns (use 0..%lld, or -1 "
                       "for the last)",
                       i, n, n - 1);
    st->label_col = (size_t)(i < 0 ? n + i : i);
    return 0;
}

/* Builds feature_names and label_name of ds from the header or from column numbers. */
static int ds_names(const ds_parse *st, dataset *ds, char *err)
{
    ds->feature_names = calloc(st->cols, sizeof *ds->feature_names);
    if (!ds->feature_names)
        return err_set(err, -ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t j = 0; j < st->ncsv; j++) {
        char *name;
        if (st->header && st->header[j][0] != '\0') {
            name = strdup(st->header[j]);
        } else {
            char buf[32];
            snprintf(buf, sizeof buf, "c%zu", j + 1);
            name = strdup(buf);
        }
        if (!name)
            return err_set(err, -ENOMEM, "out of memory");
        if (j == st->label_col)
            ds->label_name = name;
        else
            ds->feature_names[k++] = name;
    }
    return 0;
}

int dataset_from_csv(const char *text, size_t len, const dataset_csv_opts *opts, dataset **out,
                     char *err)
{
    ds_parse st = {.opts = opts, .text_len = len};
    csv_reader r;
    csv_record rec;
    char **first = NULL;
    size_t first_line = 0, first_bytes = 0;
    int have_second = 0, is_header = 0;
    dataset *ds = NULL;
    int rc;

    csv_reader_init(&r, text ? text : "", text ? len : 0);
    if (!opts || opts->header < -1 || opts->header > 1) {
        rc = err_set(err, -EINVAL, "bad CSV options");
        goto out;
    }
    rc = csv_reader_next(&r, &rec, err);
    if (rc < 0)
        goto out;
    if (rc == 0) {
        rc = err_set(err, -EINVAL, "the CSV is empty");
        goto out;
    }
    st.ncsv = rec.n;
    first_line = rec.line;
    first_bytes = rec.bytes;
    if (st.ncsv < 2) {
        rc = err_set(err, -EINVAL,
                     "line %zu has 1 column; a dataset needs at least 2 (features and a label)",
                     rec.line);
        goto out;
    }
    st.cols = st.ncsv - 1;
    rc = ds_copy_record(&rec, &first, err);
    if (rc < 0)
        goto out;

    if (opts->header == 1 || (opts->header == -1 && opts->label_name)) {
        is_header = 1;
    } else if (opts->header == -1) {
        rc = csv_reader_next(&r, &rec, err);
        if (rc < 0)
            goto out;
        have_second = rc;
        is_header = ds_detect_header(first, st.ncsv, have_second ? &rec : NULL);
    }
    if (is_header) {
        st.header = first;
        first = NULL;
    }
    rc = ds_label_column(&st, err);
    if (rc < 0)
        goto out;

    if (first) {
        csv_cell *cells = malloc(st.ncsv * sizeof *cells);
        if (!cells) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        for (size_t j = 0; j < st.ncsv; j++) {
            cells[j].ptr = first[j];
            cells[j].len = strlen(first[j]);
        }
        rc = ds_row(&st, cells, st.ncsv, first_line, first_bytes, err);
        free(cells);
        if (rc < 0)
            goto out;
    }
    if (have_second) {
        rc = ds_row(&st, rec.cells, rec.n, rec.line, rec.bytes, err);
        if (rc < 0)
            goto out;
    }
    for (;;) {
        rc = csv_reader_next(&r, &rec, err);
        if (rc <= 0)
            break;
        rc = ds_row(&st, rec.cells, rec.n, rec.line, rec.bytes, err);
        if (rc < 0)
            break;
    }
    if (rc < 0)
        goto out;
    if (st.rows == 0) {
        rc = err_set(err, -EINVAL, "the CSV has a header (line %zu) but no data rows%s", first_line,
                     opts->header == -1 ? "; if that line is data, say there is no header" : "");
        goto out;
    }

    ds = calloc(1, sizeof *ds);
    if (!ds) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    ds->rows = st.rows;
    ds->cols = st.cols;
    /* Give back the estimate's slack; a failed shrink keeps the larger block. */
    (void)ARRAY_RESIZE(st.x, st.x_cap, st.rows * st.cols);
    (void)ARRAY_RESIZE(st.y, st.y_cap, st.rows);
    ds->x = st.x;
    ds->y = st.y;
    st.x = NULL;
    st.y = NULL;
    rc = ds_names(&st, ds, err);
    if (rc < 0)
        goto out;
    if (opts->classification) {
        rc = ds_classes_finish(&st.labels, ds->y, ds->rows, &ds->class_names, err);
        if (rc < 0)
            goto out;
        ds->n_classes = (int)st.labels.n;
    }
    *out = ds;
    ds = NULL;
    rc = 0;
out:
    dataset_free(ds);
    csv_reader_free(&r);
    ds_strings_free(first, st.ncsv);
    ds_strings_free(st.header, st.ncsv);
    ds_labels_free(&st.labels);
    free(st.x);
    free(st.y);
    return rc;
}

void dataset_free(dataset *ds)
{
    if (!ds)
        return;
    free(ds->x);
    free(ds->y);
    if (ds->class_names)
        ds_strings_free(ds->class_names, (size_t)ds->n_classes);
    ds_strings_free(ds->feature_names, ds->cols);
    free(ds->label_name);
    free(ds);
}

/* splitmix64 (Steele, Lea, Flood 2014): a 64-bit state advanced by a constant, then mixed. */
static uint64_t ds_splitmix64(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, bound) by rejection: draws below 2^64 mod bound are redrawn. */
static uint64_t ds_uniform(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t v = ds_splitmix64(state);
        if (v >= threshold)
            return v % bound;
    }
}

/* A new dataset with src's columns, classes and names (deep copies) and room for rows rows. */
static int ds_new_like(const dataset *src, size_t rows, dataset **out, char *err)
{
    dataset *ds = calloc(1, sizeof *ds);
    int rc = -ENOMEM;
    if (!ds)
        goto out;
    ds->rows = rows;
    ds->cols = src->cols;
    ds->x = malloc(rows * src->cols * sizeof *ds->x);
    ds->y = malloc(rows * sizeof *ds->y);
    ds->label_name = src->label_name ? strdup(src->label_name) : NULL;
    if (!ds->x || !ds->y || (src->label_name && !ds->label_name))
        goto out;
    if (src->feature_names) {
        ds->feature_names = calloc(src->cols, sizeof *ds->feature_names);
        if (!ds->feature_names)
            goto out;
        for (size_t j = 0; j < src->cols; j++) {
            ds->feature_names[j] = src->feature_names[j] ? strdup(src->feature_names[j]) : NULL;
            if (src->feature_names[j] && !ds->feature_names[j])
                goto out;
        }
    }
    ds->n_classes = src->n_classes;
    if (src->n_classes > 0 && src->class_names) {
        ds->class_names = calloc((size_t)src->n_classes, sizeof *ds->class_names);
        if (!ds->class_names)
            goto out;
        for (int c = 0; c < src->n_classes; c++) {
            ds->class_names[c] = strdup(src->class_names[c]);
            if (!ds->class_names[c])
                goto out;
        }
    }
    *out = ds;
    ds = NULL;
    rc = 0;
out:
    dataset_free(ds);
    if (rc < 0)
        err_set(err, rc, "out of memory copying %zu rows of %zu features", rows, src->cols);
    return rc;
}

/* Copies rows order[from .. from+n) of src into dst's rows 0..n. */
static void ds_copy_rows(const dataset *src, const size_t *order, size_t from, size_t n,
                         dataset *dst)
{
    for (size_t i = 0; i < n; i++) {
        size_t r = order[from + i];
        memcpy(dst->x + i * src->cols, src->x + r * src->cols, src->cols * sizeof *src->x);
        dst->y[i] = src->y[r];
    }
}

int dataset_split_order(size_t rows, double validation_split, int shuffle, uint64_t seed,
                        size_t **order, size_t *n_val, char *err)
{
    if (rows == 0)
        return err_set(err, -EINVAL, "cannot split an empty dataset");
    if (!(validation_split >= 0.0 && validation_split < 1.0))
        return err_set(err, -EINVAL, "validation split %g is outside [0, 1)", validation_split);
    size_t nv = (size_t)llround((double)rows * validation_split);
    if (validation_split > 0.0) {
        if (rows < 2)
            return err_set(err, -EINVAL,
                           "a validation split needs at least 2 rows; the dataset has 1");
        if (nv == 0)
            nv = 1;
        if (nv >= rows)
            nv = rows - 1;
    }
    size_t *o = malloc(rows * sizeof *o);
    if (!o)
        return err_set(err, -ENOMEM, "out of memory shuffling %zu rows", rows);
    for (size_t i = 0; i < rows; i++)
        o[i] = i;
    if (shuffle) {
        uint64_t state = seed;
        for (size_t i = rows - 1; i > 0; i--) {
            size_t j = (size_t)ds_uniform(&state, (uint64_t)i + 1);
            size_t t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
    }
    *order = o;
    *n_val = nv;
    return 0;
}

int dataset_split(const dataset *ds, double validation_split, int shuffle, uint64_t seed,
                  dataset **train, dataset **val, char *err)
{
    size_t *order = NULL, n_val = 0;
    dataset *tr = NULL, *va = NULL;
    if (!ds)
        return err_set(err, -EINVAL, "cannot split an empty dataset");
    int rc = dataset_split_order(ds->rows, validation_split, shuffle, seed, &order, &n_val, err);
    if (rc < 0)
        return rc;
    size_t n_train = ds->rows - n_val;
    rc = ds_new_like(ds, n_train, &tr, err);
    if (rc < 0)
        goto out;
    ds_copy_rows(ds, order, 0, n_train, tr);
    if (n_val > 0) {
        rc = ds_new_like(ds, n_val, &va, err);
        if (rc < 0)
            goto out;
        ds_copy_rows(ds, order, n_train, n_val, va);
    }
    *train = tr;
    *val = va;
    tr = NULL;
    va = NULL;
out:
    free(order);
    dataset_free(tr);
    dataset_free(va);
    return rc;
}

int dataset_stats(const dataset *ds, float **mean, float **std, char *err)
{
    double *sum = NULL, *sq = NULL;
    float *m = NULL, *s = NULL;
    int rc = 0;
    if (!ds || ds->rows == 0 || ds->cols == 0)
        return err_set(err, -EINVAL, "cannot compute statistics of an empty dataset");
    sum = calloc(ds->cols, sizeof *sum);
    sq = calloc(ds->cols, sizeof *sq);
    m = malloc(ds->cols * sizeof *m);
    s = malloc(ds->cols * sizeof *s);
    if (!sum || !sq || !m || !s) {
        rc = err_set(err, -ENOMEM, "out of memory for the statistics of %zu features", ds->cols);
        goto out;
    }
    /* Two passes (mean, then squared deviations) avoid the cancellation of sum of squares. */
    for (size_t r = 0; r < ds->rows; r++) {
        const float *xr = ds->x + r * ds->cols;
        for (size_t j = 0; j < ds->cols; j++)
            sum[j] += xr[j];
    }
    for (size_t j = 0; j < ds->cols; j++)
        sum[j] /= (double)ds->rows;
    for (size_t r = 0; r < ds->rows; r++) {
        const float *xr = ds->x + r * ds->cols;
        for (size_t j = 0; j < ds->cols; j++) {
            double d = xr[j] - sum[j];
            sq[j] += d * d;
        }
    }
    for (size_t j = 0; j < ds->cols; j++) {
        float sd = (float)sqrt(sq[j] / (double)ds->rows);
        m[j] = (float)sum[j];
        s[j] = sd > 0.0f && isfinite(sd) ? sd : 1.0f;
    }
    *mean = m;
    *std = s;
    m = NULL;
    s = NULL;
out:
    free(sum);
    free(sq);
    free(m);
    free(s);
    return rc;
}

void dataset_standardize(dataset *ds, const float *mean, const float *std)
{
    for (size_t r = 0; r < ds->rows; r++) {
        float *xr = ds->x + r * ds->cols;
        for (size_t j = 0; j < ds->cols; j++)
            xr[j] = (xr[j] - mean[j]) / std[j];
    }
}
