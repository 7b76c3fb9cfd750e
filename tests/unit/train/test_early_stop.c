/* Unit tests of train/early_stop: Keras's EarlyStopping decision, epoch by epoch, on made-up
 * values: patience, min_delta in both modes, a baseline, start_from_epoch, missing values, the
 * first epoch never stopping, and the stop_reason's words. */
#include "train/early_stop.h"

#include <math.h>
#include <string.h>

#include "tests/unit/check.h"

static job_early_stopping cfg_of(int mode, int patience, double min_delta)
{
    job_early_stopping c;
    memset(&c, 0, sizeof c);
    c.enabled = 1;
    snprintf(c.monitor, sizeof c.monitor, "%s", mode == JOB_ES_MAX ? "val_accuracy" : "val_loss");
    c.mode = mode;
    c.patience = patience;
    c.min_delta = min_delta;
    return c;
}

/* Feeds values (epochs 1..n) and returns the epoch after which it stopped, or 0. */
static int run(early_stop *s, const job_early_stopping *c, const double *v, int n)
{
    early_stop_init(s, c);
    for (int e = 1; e <= n; e++)
        if (early_stop_update(s, c, e, v[e - 1]) & EARLY_STOP_STOP)
            return e;
    return 0;
}

static void test_patience_min(void)
{
    early_stop s;
    job_early_stopping c = cfg_of(JOB_ES_MIN, 2, 0);
    const double v[] = {1.0, 0.8, 0.7, 0.75, 0.71, 0.6, 0.9};
    CHECK_INT(run(&s, &c, v, 7), 5); /* epochs 4 and 5 do not beat 0.7 */
    CHECK_INT(s.best_epoch, 3);
    CHECK(s.best == 0.7);
    char why[256];
    early_stop_reason(&s, &c, why, sizeof why);
    CHECK_STR(why,
              "early stopping: val_loss did not improve by more than 0 for 2 epochs (best 0.7 at "
              "epoch 3)");
    /* patience 0: the first epoch that does not improve; never the first epoch */
    c.patience = 0;
    CHECK_INT(run(&s, &c, v, 7), 4);
    const double flat[] = {NAN, 1.0, 1.0};
    CHECK_INT(run(&s, &c, flat, 3), 3); /* epoch 1 is not judged (no value); 2 improves */
}

static void test_min_delta_and_max(void)
{
    early_stop s;
    job_early_stopping c = cfg_of(JOB_ES_MAX, 1, 0.05);
    const double v[] = {0.5, 0.6, 0.62, 0.7, 0.72};
    /* 0.62 is not 0.05 above 0.6: one epoch without improvement is enough */
    CHECK_INT(run(&s, &c, v, 5), 3);
    CHECK_INT(s.best_epoch, 2);
    c.min_delta = 0.01;
    CHECK_INT(run(&s, &c, v, 5), 0);
    CHECK_INT(s.best_epoch, 5);
    /* min mode: a drop of exactly min_delta is not an improvement */
    job_early_stopping m = cfg_of(JOB_ES_MIN, 0, 0.25);
    const double w[] = {1.0, 0.75};
    CHECK_INT(run(&s, &m, w, 2), 2);
}

static void test_baseline_and_start(void)
{
    early_stop s;
    job_early_stopping c = cfg_of(JOB_ES_MIN, 2, 0);
    c.has_baseline = 1;
    c.baseline = 0.5;
    /* improving but never below the baseline: the count is not reset, so the first epoch
     * that does not improve stops it (Keras never stops on an improving epoch) */
    const double v[] = {0.9, 0.8, 0.8, 0.7};
    CHECK_INT(run(&s, &c, v, 4), 3);
    char why[256];
    early_stop_reason(&s, &c, why, sizeof why);
    CHECK(strstr(why, "did not beat the baseline 0.5") != NULL);
    const double u[] = {0.9, 0.4, 0.45, 0.3};
    CHECK_INT(run(&s, &c, u, 4), 0); /* below the baseline at epoch 2: counting from there */
    c.has_baseline = 0;
    CHECK_INT(run(&s, &c, v, 4), 0); /* without it, epoch 3 is the first of two allowed */
    c.start_from_epoch = 3;
    const double x[] = {0.1, 0.9, 0.9, 0.95, 0.96};
    CHECK_INT(run(&s, &c, x, 5), 0); /* epochs 1-3 not judged: 4 is the first best */
    CHECK_INT(s.best_epoch, 4);
    c.enabled = 0;
    CHECK_INT(run(&s, &c, v, 4), 0);
}

int main(void)
{
    test_patience_min();
    test_min_delta_and_max();
    test_baseline_and_start();
    return check_exit();
}
