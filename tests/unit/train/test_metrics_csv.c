/* Unit tests of train/metrics_csv: the header, rows whose cells read back (strtod) to the exact
 * doubles written, integers as integers, empty cells for null and missing members, the
 * shortest digits (0.1 rather than 0.10000000000000001, 1.0 for a whole real, 1e-7), a file
 * that cannot be opened, and a write that fails (/dev/full) reported by close. */
#include "train/metrics_csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-metrics-csv-XXXXXX";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The cells of one value. */
static void cells(void)
{
    char out[METRICS_CSV_CELL_MAX];
    struct {
        json_t *v;
        const char *want;
    } cases[] = {
        {json_integer(3), "3"},
        {json_integer(-12345678901LL), "-12345678901"},
        {json_real(0.1), "0.1"},
        {json_real(0.95), "0.95"},
        {json_real(1.0), "1.0"},
        {json_real(1e-7), "1e-7"},
        {json_real(100.0), "100.0"},
        {json_real((double)0.1f), "0.10000000149011612"}, /* a float's value, as a double */
        {json_null(), ""},
        {json_string("x"), ""},
        {NULL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = metrics_csv_cell(cases[i].v, out);
        CHECK_STR(out, cases[i].want);
        CHECK_INT(n, strlen(cases[i].want));
        json_decref(cases[i].v);
    }
}

/* A file of three rows: the header as given, every real read back bit for bit. */
static void rows(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    const char *names[] = {"epoch", "loss", "val_loss", "accuracy"};
    const double loss[3] = {0.6931471824645996, 1.0 / 3.0, 2.5e-9};
    metrics_csv *w = NULL;
    CHECK_INT(metrics_csv_open(path, names, 4, &w, err), 0);
    for (int e = 0; w && e < 3; e++) {
        /* val_loss null in the first row and missing in the second; accuracy a whole real */
        json_t *row = json_pack("{s:i, s:f, s:f}", "epoch", e + 1, "loss", loss[e], "accuracy",
                                (double)e / 2.0);
        if (e == 0)
            json_object_set_new(row, "val_loss", json_null());
        if (e == 2)
            json_object_set_new(row, "val_loss", json_real(loss[e] * 2));
        metrics_csv_row(w, row);
        json_decref(row);
    }
    CHECK_INT(metrics_csv_close(w, err), 0);
    char *text = slurp(path);
    CHECK(text != NULL);
    if (!text)
        return;
    CHECK_STR(strtok(text, "\n"), "epoch,loss,val_loss,accuracy");
    for (int e = 0; e < 3; e++) {
        char *line = strtok(NULL, "\n");
        CHECK(line != NULL);
        if (!line)
            return;
        char *end;
        CHECK_INT(strtol(line, &end, 10), e + 1);
        CHECK(*end == ',');
        double got = strtod(end + 1, &end);
        CHECK(got == loss[e]); /* the exact double, not six digits of it */
        CHECK(*end == ',');
        if (e < 2) {
            CHECK(end[1] == ','); /* null, then missing: empty cells */
            end++;
        } else {
            CHECK(strtod(end + 1, &end) == loss[e] * 2);
        }
        CHECK(*end == ',' && strtod(end + 1, &end) == (double)e / 2.0 && *end == 0);
    }
    CHECK(strtok(NULL, "\n") == NULL);
    /* the second row's text as it stands: shortest digits, a whole real with its ".0" */
    CHECK(strstr(slurp(path), "\n2,0.3333333333333333,,0.5\n") != NULL);
    CHECK(strstr(slurp(path), "\n1,0.6931471824645996,,0.0\n") != NULL);
    unlink(path);
}

static void failures(void)
{
    char err[ERR_LEN] = "";
    const char *names[] = {"epoch", "loss"};
    metrics_csv *w = (metrics_csv *)1;
    char path[256];
    snprintf(path, sizeof path, "%s/no/such/folder/metrics.csv", dir);
    CHECK_INT(metrics_csv_open(path, names, 2, &w, err), -ENOENT);
    CHECK(strstr(err, "metrics.csv") != NULL);
    CHECK(w == (metrics_csv *)1);
    CHECK_INT(metrics_csv_close(NULL, err), 0);
    /* /dev/full takes the open but no byte: close says the file is incomplete */
    if (access("/dev/full", W_OK) == 0) {
        w = NULL;
        err[0] = 0;
        CHECK_INT(metrics_csv_open("/dev/full", names, 2, &w, err), 0);
        json_t *row = json_pack("{s:i, s:f}", "epoch", 1, "loss", 0.5);
        metrics_csv_row(w, row);
        json_decref(row);
        CHECK_INT(metrics_csv_close(w, err), -EIO);
        CHECK(strstr(err, "/dev/full") != NULL);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    cells();
    rows();
    failures();
    rmdir(dir);
    return check_exit();
}
