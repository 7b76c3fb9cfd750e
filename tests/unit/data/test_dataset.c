/* Unit tests of data/dataset: CSV → dataset (headers, label selection, classes, messages for
 * bad cells), the seeded split, and feature statistics. */
#include "data/dataset.h"

#include <errno.h>

#include "tests/unit/check.h"
#include "util/err.h"

static dataset_csv_opts opts_of(int header, const char *label_name, int label_index, int cls)
{
    dataset_csv_opts o = {.header = header,
                          .label_name = label_name,
                          .label_index = label_index,
                          .classification = cls};
    return o;
}

/* Parses text; on failure returns NULL and leaves the message in err. */
static dataset *parse(const char *text, dataset_csv_opts o, int *rc, char *err)
{
    dataset *ds = NULL;
    err[0] = '\0';
    *rc = dataset_from_csv(text, strlen(text), &o, &ds, err);
    return *rc == 0 ? ds : NULL;
}

/* Checks that parsing fails with code and a message containing want. */
static void check_fails(const char *text, dataset_csv_opts o, int code, const char *want, int line)
{
    char err[ERR_LEN];
    int rc;
    dataset *ds = parse(text, o, &rc, err);
    if (rc != code || !strstr(err, want)) {
        fprintf(stderr, "%s:%d: got %d \"%s\", expected %d with \"%s\"\n", __FILE__, line, rc, err,
                code, want);
        check_failures++;
    }
    CHECK(ds == NULL);
    dataset_free(ds);
}

static void test_basic(void)
{
    char err[ERR_LEN];
    int rc;
    /* Header detected; label by name, in the middle; spaces around cells. */
    dataset *ds = parse("age, label ,height\n30, cat , 1.5\n40,dog,2.5\r\n\n50,cat,-3e1\n",
                        opts_of(-1, "label", 0, 1), &rc, err);
    CHECK_INT(rc, 0);
    if (!ds)
        return;
    CHECK_INT(ds->rows, 3);
    CHECK_INT(ds->cols, 2);
    CHECK_STR(ds->feature_names[0], "age");
    CHECK_STR(ds->feature_names[1], "height");
    CHECK_STR(ds->label_name, "label");
    CHECK_INT(ds->n_classes, 2);
    CHECK_STR(ds->class_names[0], "cat");
    CHECK_STR(ds->class_names[1], "dog");
    float x[] = {30, 1.5f, 40, 2.5f, 50, -30};
    float y[] = {0, 1, 0};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(ds->x[i], x[i], 0);
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(ds->y[i], y[i], 0);
    dataset_free(ds);

    /* Quoted cells, escaped quotes and a newline inside a quoted label. */
    ds = parse("a,\"the \"\"label\"\"\"\n1,\"x,\"\"y\"\"\"\n2,\"two\nlines\"\n3,\"x,\"\"y\"\"\"\n",
               opts_of(-1, NULL, -1, 1), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_STR(ds->label_name, "the \"label\"");
        CHECK_INT(ds->n_classes, 2);
        CHECK_STR(ds->class_names[0], "two\nlines");
        CHECK_STR(ds->class_names[1], "x,\"y\"");
        CHECK_NEAR(ds->y[0], 1, 0);
        CHECK_NEAR(ds->y[1], 0, 0);
        CHECK_NEAR(ds->y[2], 1, 0);
        CHECK_NEAR(ds->x[2], 3, 0);
    }
    dataset_free(ds);
}

static void test_header_detection(void)
{
    char err[ERR_LEN];
    int rc;
    /* All numbers: no header; names from 1-based columns; label index 0. */
    dataset *ds = parse("1,2,3\n4,5,6", opts_of(-1, NULL, 0, 0), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->rows, 2);
        CHECK_STR(ds->label_name, "c1");
        CHECK_STR(ds->feature_names[0], "c2");
        CHECK_STR(ds->feature_names[1], "c3");
        CHECK_NEAR(ds->y[0], 1, 0);
        CHECK_NEAR(ds->y[1], 4, 0);
        CHECK_NEAR(ds->x[0], 2, 0);
        CHECK_NEAR(ds->x[3], 6, 0);
    }
    dataset_free(ds);

    /* String labels in both rows are not a header. */
    ds = parse("1,2,cat\n3,4,dog\n", opts_of(-1, NULL, -1, 1), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->rows, 2);
        CHECK_STR(ds->label_name, "c3");
    }
    dataset_free(ds);

    /* Forced: header=1 takes a numeric first line as names. */
    ds = parse("10,20\n1,2\n", opts_of(1, NULL, -1, 0), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->rows, 1);
        CHECK_STR(ds->feature_names[0], "10");
        CHECK_STR(ds->label_name, "20");
    }
    dataset_free(ds);

    /* header=0 with a text first line: the text is then data, and fails as a number. */
    check_fails("a,b\n1,2\n", opts_of(0, NULL, -1, 1), -EINVAL,
                "line 1, column 1: 'a' is not a number", __LINE__);
    /* A single text line is a header with no data. */
    check_fails("a,b\n", opts_of(-1, NULL, -1, 1), -EINVAL, "no data rows", __LINE__);
    /* A label by name needs a header. */
    check_fails("1,2\n3,4\n", opts_of(0, "b", 0, 1), -EINVAL, "no header", __LINE__);
    /* Naming the label means the first line is a header, even if it is numeric. */
    ds = parse("5,7\n1,2\n", opts_of(-1, "5", 0, 0), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_STR(ds->label_name, "5");
        CHECK_NEAR(ds->y[0], 1, 0);
        CHECK_NEAR(ds->x[0], 2, 0);
    }
    dataset_free(ds);
}

static void test_labels(void)
{
    char err[ERR_LEN];
    int rc;
    /* Negative index counts from the end. */
    dataset *ds = parse("a,b,c\n1,2,3\n", opts_of(-1, NULL, -2, 0), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_STR(ds->label_name, "b");
        CHECK_NEAR(ds->y[0], 2, 0);
        CHECK_NEAR(ds->x[0], 1, 0);
        CHECK_NEAR(ds->x[1], 3, 0);
    }
    dataset_free(ds);
    check_fails("a,b,c\n1,2,3\n", opts_of(-1, NULL, 3, 0), -EINVAL, "out of range", __LINE__);
    check_fails("a,b,c\n1,2,3\n", opts_of(-1, NULL, -4, 0), -EINVAL, "out of range", __LINE__);
    check_fails("a,b,c\n1,2,3\n", opts_of(-1, "d", 0, 0), -EINVAL,
                "no column is named 'd'; the columns are 'a', 'b', 'c'", __LINE__);

    /* Many columns: the list is cut short and says how many there are. */
    char text[8192];
    size_t used = 0;
    for (int i = 0; i < 300; i++)
        used += (size_t)sprintf(text + used, "%scolumn_%d", i ? "," : "", i);
    used += (size_t)sprintf(text + used, "\n");
    for (int i = 0; i < 300; i++)
        used += (size_t)sprintf(text + used, "%s%d", i ? "," : "", i);
    sprintf(text + used, "\n");
    check_fails(text, opts_of(-1, "nope", 0, 0), -EINVAL, "... (300 in all)", __LINE__);

    /* Numeric labels sort numerically: 2 < 10 < 100, not bytewise. */
    ds = parse("x,y\n1,10\n2,2\n3,100\n4,-1.5\n5,2\n", opts_of(-1, NULL, -1, 1), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->n_classes, 4);
        CHECK_STR(ds->class_names[0], "-1.5");
        CHECK_STR(ds->class_names[1], "2");
        CHECK_STR(ds->class_names[2], "10");
        CHECK_STR(ds->class_names[3], "100");
        float y[] = {2, 1, 3, 0, 1};
        for (int i = 0; i < 5; i++)
            CHECK_NEAR(ds->y[i], y[i], 0);
    }
    dataset_free(ds);

    /* Mixed labels sort bytewise: "10" < "2" < "b". */
    ds = parse("x,y\n1,b\n2,10\n3,2\n", opts_of(-1, NULL, -1, 1), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->n_classes, 3);
        CHECK_STR(ds->class_names[0], "10");
        CHECK_STR(ds->class_names[1], "2");
        CHECK_STR(ds->class_names[2], "b");
        CHECK_NEAR(ds->y[0], 2, 0);
        CHECK_NEAR(ds->y[1], 0, 0);
        CHECK_NEAR(ds->y[2], 1, 0);
    }
    dataset_free(ds);

    /* Regression labels must be numbers; values are kept as they are. */
    ds = parse("x,y\n1,0.25\n2,-7\n", opts_of(-1, NULL, -1, 0), &rc, err);
    CHECK_INT(rc, 0);
    if (ds) {
        CHECK_INT(ds->n_classes, 0);
        CHECK(ds->class_names == NULL);
        CHECK_NEAR(ds->y[0], 0.25, 0);
        CHECK_NEAR(ds->y[1], -7, 0);
    }
    dataset_free(ds);
    check_fails("x,y\n1,0.25\n2,high\n", opts_of(-1, NULL, -1, 0), -EINVAL,
                "line 3, column 2 (y): 'high' is not a number", __LINE__);
    check_fails("x,y\n1,0.25\n2,\n", opts_of(-1, NULL, -1, 1), -EINVAL,
                "line 3, column 2 (y): missing value", __LINE__);
}

static void test_bad_cells(void)
{
    const char *head = "id,age,label\n";
    char text[256];
    snprintf(text, sizeof text, "%s1,20,a\n2,,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "line 3, column 2 (age): missing value",
                __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n\n2,  ,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "line 4, column 2 (age): missing value",
                __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n2,abc,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL,
                "line 3, column 2 (age): 'abc' is not a number", __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n2,12kg,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "'12kg' is not a number", __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n2,nan,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "'nan' is not a number", __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n2,inf,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "'inf' is not a number", __LINE__);
    snprintf(text, sizeof text, "%s1,20,a\n2,1e39,b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "'1e39' is out of range", __LINE__);
    /* Without a header, no name. */
    check_fails("1,2,3\n4,x,6\n", opts_of(-1, NULL, -1, 0), -EINVAL,
                "line 2, column 2: 'x' is not a number", __LINE__);
    /* Ragged rows. */
    snprintf(text, sizeof text, "%s1,20,a\n2,30,b\n\n3,40\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "line 5 has 2 columns, expected 3",
                __LINE__);
    snprintf(text, sizeof text, "%s1,20,a,9\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EINVAL, "line 2 has 4 columns, expected 3",
                __LINE__);
    /* Quoting errors come through with their line. */
    snprintf(text, sizeof text, "%s1,20,a\n2,30,\"b\n", head);
    check_fails(text, opts_of(-1, NULL, -1, 1), -EBADMSG, "line 3", __LINE__);
    /* No data. */
    check_fails("", opts_of(-1, NULL, -1, 1), -EINVAL, "empty", __LINE__);
    check_fails("\n\n", opts_of(-1, NULL, -1, 1), -EINVAL, "empty", __LINE__);
    check_fails("a\n1\n", opts_of(-1, NULL, -1, 1), -EINVAL, "at least 2", __LINE__);
    check_fails("a,b\n", opts_of(1, NULL, -1, 1), -EINVAL, "no data rows", __LINE__);
}

/* Parses len bytes (which may hold NULs) and checks that it fails with -EINVAL and want. */
static void check_fails_bytes(const char *text, size_t len, dataset_csv_opts o, const char *want,
                              int line)
{
    char err[ERR_LEN] = "";
    dataset *ds = NULL;
    int rc = dataset_from_csv(text, len, &o, &ds, err);
    if (rc != -EINVAL || !strstr(err, want)) {
        fprintf(stderr, "%s:%d: got %d \"%s\", expected %d with \"%s\"\n", __FILE__, line, rc, err,
                -EINVAL, want);
        check_failures++;
    }
    CHECK(ds == NULL);
    dataset_free(ds);
}

/* A NUL byte in a cell kept as text (a label, or any cell of the first record) is refused
 * rather than cutting the text short (found by tests/fuzz/fuzz_csv). */
static void test_nul_bytes(void)
{
    static const char label[] = "1,a\n2,\0b\n3,\0c\n";
    check_fails_bytes(label, sizeof label - 1, opts_of(0, NULL, -1, 1),
                      "line 2, column 2: the label holds a NUL byte", __LINE__);
    static const char first[] = "1\0,a\n2,b\n";
    check_fails_bytes(first, sizeof first - 1, opts_of(-1, NULL, -1, 1),
                      "line 1, column 1: the cell holds a NUL byte", __LINE__);
    static const char head[] = "x,la\0bel\n1,a\n";
    check_fails_bytes(head, sizeof head - 1, opts_of(1, NULL, -1, 1),
                      "line 1, column 2: the cell holds a NUL byte", __LINE__);
}

static void test_many_classes(void)
{
    /* DATASET_MAX_CLASSES + 1 distinct labels is refused; exactly the cap is fine. */
    size_t n = DATASET_MAX_CLASSES + 1;
    char *text = malloc(n * 16 + 16);
    CHECK(text != NULL);
    if (!text)
        return;
    size_t used = (size_t)sprintf(text, "x,y\n"), before_last = 0;
    for (size_t i = 0; i < n; i++) {
        before_last = used;
        used += (size_t)sprintf(text + used, "%zu,L%zu\n", i, i);
    }
    dataset_csv_opts o = opts_of(-1, NULL, -1, 1);
    dataset *ds = NULL;
    char err[ERR_LEN];
    CHECK_INT(dataset_from_csv(text, used, &o, &ds, err), -E2BIG);
    CHECK(ds == NULL);
    CHECK(strstr(err, "more than 65536 distinct labels") != NULL);
    /* Without the last line. */
    CHECK_INT(dataset_from_csv(text, before_last, &o, &ds, err), 0);
    if (ds) {
        CHECK_INT(ds->rows, DATASET_MAX_CLASSES);
        CHECK_INT(ds->n_classes, DATASET_MAX_CLASSES);
        CHECK_STR(ds->class_names[0], "L0");
        CHECK_STR(ds->class_names[1], "L1");
        CHECK_STR(ds->class_names[2], "L10");
        CHECK_NEAR(ds->y[10], 2, 0);
    }
    dataset_free(ds);
    free(text);
}

/* A regression dataset whose row i is (i, 2i) -> i. */
static dataset *numbered(size_t rows)
{
    char *text = malloc(rows * 40 + 16);
    CHECK(text != NULL);
    if (!text)
        return NULL;
    size_t used = (size_t)sprintf(text, "a,b,y\n");
    for (size_t i = 0; i < rows; i++)
        used += (size_t)sprintf(text + used, "%zu,%zu,%zu\n", i, 2 * i, i);
    dataset_csv_opts o = opts_of(-1, NULL, -1, 0);
    dataset *ds = NULL;
    char err[ERR_LEN];
    CHECK_INT(dataset_from_csv(text, used, &o, &ds, err), 0);
    free(text);
    return ds;
}

static void test_split(void)
{
    char err[ERR_LEN];
    dataset *ds = numbered(100);
    if (!ds)
        return;
    dataset *tr = NULL, *va = NULL, *tr2 = NULL, *va2 = NULL;
    CHECK_INT(dataset_split(ds, 0.2, 1, 42, &tr, &va, err), 0);
    CHECK_INT(dataset_split(ds, 0.2, 1, 42, &tr2, &va2, err), 0);
    if (tr && va && tr2 && va2) {
        CHECK_INT(tr->rows, 80);
        CHECK_INT(va->rows, 20);
        CHECK_INT(tr->cols, 2);
        CHECK(memcmp(tr->x, tr2->x, 80 * 2 * sizeof(float)) == 0);
        CHECK(memcmp(va->y, va2->y, 20 * sizeof(float)) == 0);
        /* Every row appears once across both parts, rows stay intact, order is shuffled. */
        int seen[100] = {0}, moved = 0;
        for (size_t i = 0; i < 100; i++) {
            const dataset *p = i < 80 ? tr : va;
            size_t r = i < 80 ? i : i - 80;
            int v = (int)p->y[r];
            CHECK(v >= 0 && v < 100);
            if (v < 0 || v >= 100)
                continue;
            seen[v]++;
            CHECK_NEAR(p->x[r * 2], v, 0);
            CHECK_NEAR(p->x[r * 2 + 1], 2 * v, 0);
            moved += v != (int)i;
        }
        for (int v = 0; v < 100; v++)
            CHECK_INT(seen[v], 1);
        CHECK(moved > 50);
        CHECK_STR(va->feature_names[1], "b");
        CHECK_STR(va->label_name, "y");
        CHECK(va->feature_names != ds->feature_names);
    }
    dataset_free(tr2);
    dataset_free(va2);
    /* Another seed gives another order. */
    CHECK_INT(dataset_split(ds, 0.2, 1, 43, &tr2, &va2, err), 0);
    if (tr && tr2)
        CHECK(memcmp(tr->y, tr2->y, 80 * sizeof(float)) != 0);
    dataset_free(tr);
    dataset_free(va);
    dataset_free(tr2);
    dataset_free(va2);

    /* The order is pinned: an independent implementation of the algorithm documented in
     * dataset.h (Python, splitmix64 + Fisher-Yates) gives this permutation of 10 rows. */
    dataset *ten = numbered(10);
    CHECK_INT(dataset_split(ten, 0.2, 1, 42, &tr, &va, err), 0);
    if (tr && va) {
        const int want[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
        for (int i = 0; i < 10; i++)
            CHECK_NEAR(i < 8 ? tr->y[i] : va->y[i - 8], want[i], 0);
    }
    dataset_free(tr);
    dataset_free(va);
    dataset_free(ten);

    /* No shuffle: validation is the tail. */
    CHECK_INT(dataset_split(ds, 0.25, 0, 1, &tr, &va, err), 0);
    if (tr && va) {
        CHECK_INT(tr->rows, 75);
        CHECK_NEAR(tr->y[74], 74, 0);
        CHECK_INT(va->rows, 25);
        CHECK_NEAR(va->y[0], 75, 0);
        CHECK_NEAR(va->y[24], 99, 0);
    }
    dataset_free(tr);
    dataset_free(va);

    /* Split 0: no validation set. */
    va = (dataset *)1;
    CHECK_INT(dataset_split(ds, 0, 1, 1, &tr, &va, err), 0);
    CHECK(va == NULL);
    if (tr)
        CHECK_INT(tr->rows, 100);
    dataset_free(tr);

    /* Rounding: 0.004 × 100 rounds to 0, raised to 1; 0.999 leaves training 1 row. */
    CHECK_INT(dataset_split(ds, 0.004, 1, 1, &tr, &va, err), 0);
    if (va && tr) {
        CHECK_INT(va->rows, 1);
        CHECK_INT(tr->rows, 99);
    }
    dataset_free(tr);
    dataset_free(va);
    CHECK_INT(dataset_split(ds, 0.999, 1, 1, &tr, &va, err), 0);
    if (va && tr) {
        CHECK_INT(va->rows, 99);
        CHECK_INT(tr->rows, 1);
    }
    dataset_free(tr);
    dataset_free(va);
    CHECK_INT(dataset_split(ds, 1.0, 1, 1, &tr, &va, err), -EINVAL);
    CHECK_INT(dataset_split(ds, -0.1, 1, 1, &tr, &va, err), -EINVAL);
    CHECK_INT(dataset_split(ds, NAN, 1, 1, &tr, &va, err), -EINVAL);
    dataset_free(ds);

    ds = numbered(1);
    CHECK_INT(dataset_split(ds, 0.5, 1, 1, &tr, &va, err), -EINVAL);
    CHECK(strstr(err, "at least 2 rows") != NULL);
    dataset_free(ds);

    /* Classification splits keep the class names. */
    dataset_csv_opts o = opts_of(-1, NULL, -1, 1);
    CHECK_INT(dataset_from_csv("1,a\n2,b\n3,a\n", 12, &o, &ds, err), 0);
    CHECK_INT(dataset_split(ds, 0.34, 1, 7, &tr, &va, err), 0);
    if (tr && va) {
        CHECK_INT(tr->rows + va->rows, 3);
        CHECK_INT(va->n_classes, 2);
        CHECK_STR(va->class_names[1], "b");
    }
    dataset_free(tr);
    dataset_free(va);
    dataset_free(ds);
}

static void test_stats(void)
{
    char err[ERR_LEN];
    dataset_csv_opts o = opts_of(-1, NULL, -1, 0);
    dataset *ds = NULL;
    const char *text = "a,b,c,y\n1,5,10,0\n2,5,20,0\n3,5,30,0\n4,5,40,0\n";
    CHECK_INT(dataset_from_csv(text, strlen(text), &o, &ds, err), 0);
    if (!ds)
        return;
    float *mean = NULL, *std = NULL;
    CHECK_INT(dataset_stats(ds, &mean, &std, err), 0);
    if (mean && std) {
        CHECK_NEAR(mean[0], 2.5, 1e-6);
        CHECK_NEAR(mean[1], 5, 1e-6);
        CHECK_NEAR(mean[2], 25, 1e-6);
        CHECK_NEAR(std[0], sqrt(1.25), 1e-6); /* population std */
        CHECK_NEAR(std[1], 1, 0);             /* constant column */
        CHECK_NEAR(std[2], sqrt(125.0), 1e-5);
        dataset_standardize(ds, mean, std);
        CHECK_NEAR(ds->x[0], -1.5 / sqrt(1.25), 1e-6);
        CHECK_NEAR(ds->x[1], 0, 0);
        CHECK_NEAR(ds->x[3 * 3 + 2], 15 / sqrt(125.0), 1e-6);
        /* After standardising: mean 0, std 1. */
        float *m2 = NULL, *s2 = NULL;
        CHECK_INT(dataset_stats(ds, &m2, &s2, err), 0);
        if (m2 && s2) {
            CHECK_NEAR(m2[0], 0, 1e-6);
            CHECK_NEAR(s2[0], 1, 1e-6);
            CHECK_NEAR(s2[2], 1, 1e-6);
        }
        free(m2);
        free(s2);
    }
    free(mean);
    free(std);
    dataset_free(ds);
    dataset_free(NULL);
}

int main(void)
{
    test_basic();
    test_header_detection();
    test_labels();
    test_bad_cells();
    test_nul_bytes();
    test_many_classes();
    test_split();
    test_stats();
    return check_exit();
}
