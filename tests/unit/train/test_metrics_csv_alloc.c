/* Fault tests of train/metrics_csv: metrics_csv_open with the n-th allocation failing, for every
 * n until a run completes untouched. A failed open returns -ENOMEM with a message, leaves *out
 * as it was and writes no file; ASan checks nothing leaks. */
#include "train/metrics_csv.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-metrics-csv-alloc-XXXXXX";

int main(void)
{
    if (alloc_fail_init() < 0 || !mkdtemp(dir))
        return 1;
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    const char *names[] = {"epoch", "loss", "val_loss", "accuracy", "val_accuracy", "seconds"};
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        metrics_csv *w = (metrics_csv *)1;
        err[0] = 0;
        unlink(path);
        int rc = metrics_csv_open(path, names, 6, &w, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != 0);
            CHECK(w == (metrics_csv *)1);
            CHECK(access(path, F_OK) != 0);
        } else {
            CHECK_INT(rc, 0);
            CHECK_INT(metrics_csv_close(w, err), 0);
        }
    });
    printf("metrics_csv_open: %ld failure points\n", points);
    CHECK(points >= 8); /* the writer, its names array, the path and six names */
    unlink(path);
    rmdir(dir);
    return check_exit();
}
