/* Unit tests of sweeps below the API: ASHA's rungs and decisions (scheduler/asha.h), the sweep
 * document's trials (scheduler/sweep_spec.h: deterministic draws within their ranges, the
 * grid's order), and the controller's pass (scheduler/sweep.h) on a real database: trials made
 * up to max_concurrent and the sweep's count, a weak trial asked to stop at a rung and a
 * strong one not, the same decisions from a second connection (restart), the end with the
 * best trial, and a cancel. Trials are moved through their states with SQL, as no worker runs
 * here; the end-to-end test (tests/e2e/test_sweeps.py) runs them for real. */
#include "scheduler/asha.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/metrics.h"
#include "db/sweeps.h"
#include "scheduler/sweep.h"
#include "scheduler/sweep_spec.h"
#include "tests/unit/check.h"

#define T0 1700000000000LL

static void test_rungs(void)
{
    int r[ASHA_MAX_RUNGS];
    CHECK_INT(asha_rungs(1, 3, 9, r), 2);
    CHECK_INT(r[0], 1);
    CHECK_INT(r[1], 3);
    CHECK_INT(asha_rungs(1, 3, 10, r), 3);
    CHECK_INT(r[2], 9);
    CHECK_INT(asha_rungs(2, 2, 9, r), 3);
    CHECK_INT(r[2], 8);
    CHECK_INT(asha_rungs(9, 3, 9, r), 0);
    CHECK_INT(asha_rungs(0, 3, 9, r), 0);
    CHECK_INT(asha_rungs(1, 1, 9, r), 0);
    CHECK_INT(asha_rungs(1, 2, 100000, r), 17); /* 1..65536 */
}

static void test_keep(void)
{
    double v[] = {0.5, 0.4, 0.9, 0.3, 0.5, NAN};
    CHECK(asha_keep(v, 1, 0.5, 3, 0));  /* the first at a rung goes on */
    CHECK(asha_keep(v, 2, 0.4, 3, 0));  /* better than the first */
    CHECK(!asha_keep(v, 3, 0.9, 3, 0)); /* ceil(3/3) = 1: only the best */
    CHECK(asha_keep(v, 4, 0.3, 3, 0));
    CHECK(asha_keep(v, 4, 0.4, 3, 0));  /* ceil(4/3) = 2 go on: 0.4 is second */
    CHECK(!asha_keep(v, 4, 0.5, 3, 0)); /* third */
    CHECK(asha_keep(v, 5, 0.4, 3, 0));  /* of 5: ceil = 2; better than 0.4: 0.3 only */
    CHECK(!asha_keep(v, 5, 0.5, 3, 0)); /* better than 0.5: 0.4, 0.3 */
    CHECK(asha_keep(v, 6, NAN, 3, 0));  /* no value decides nothing */
    CHECK(asha_keep(v, 6, 0.9, 3, 1));  /* maximize: 0.9 is best */
    CHECK(!asha_keep(v, 6, 0.3, 3, 1));
    double ties[] = {0.5, 0.5, 0.5};
    CHECK(asha_keep(ties, 3, 0.5, 3, 0)); /* a tie never stops one */
    CHECK(asha_better(1, NAN, 0) && !asha_better(NAN, 1, 0) && !asha_better(NAN, NAN, 1));
}

static void test_decide(void)
{
    int rungs[] = {1, 3};
    /* five trials, stored order as they finish epochs; lower is better */
    asha_point pts[] = {
        {0, 1, 0.50}, {1, 1, 0.60}, /* 1 is worse than 0 at rung 1: of 2, top 1: stop */
        {2, 1, 0.40},               /* best so far */
        {0, 2, 0.45}, {3, 1, NAN},  /* 3 reported no value: no decision */
        {1, 2, 0.20},               /* 1 goes on anyway (it finishes its epoch) */
        {0, 3, 0.44}, {1, 3, 0.10}, /* 1 is not recorded at rung 3: it was stopped */
        {2, 2, 0.39}, {2, 3, 0.38}, /* of 0.44 and 0.38 at rung 3: 2 is best; 0 went first */
        {4, 1, 0.55},               /* of 0.5, 0.6, 0.4, 0.55: ceil(4/3) = 2: stop */
    };
    size_t n = sizeof pts / sizeof pts[0];
    int stop[5];
    CHECK_INT(asha_decide(pts, n, 5, rungs, 2, 3, 0, stop), 0);
    CHECK_INT(stop[0], 0);
    CHECK_INT(stop[1], 1);
    CHECK_INT(stop[2], 0);
    CHECK_INT(stop[3], 0);
    CHECK_INT(stop[4], 1);
    /* a prefix decides the same for what it holds: decisions never depend on the future */
    int early[5];
    CHECK_INT(asha_decide(pts, 3, 5, rungs, 2, 3, 0, early), 0);
    CHECK_INT(early[1], 1);
    CHECK_INT(early[4], 0);
    /* the best so far over epochs 1..rung counts, not the rung's epoch alone */
    asha_point dip[] = {{0, 1, 0.9}, {0, 2, 0.1}, {0, 3, 0.8},
                        {1, 1, 0.5}, {1, 2, 0.5}, {1, 3, 0.3}};
    CHECK_INT(asha_decide(dip, 6, 2, rungs, 2, 3, 0, stop), 0);
    CHECK_INT(stop[0], 0);
    CHECK_INT(stop[1], 3); /* at rung 3: 0.3 against trial 0's 0.1 */
    asha_point bad = {7, 1, 0.1};
    CHECK_INT(asha_decide(&bad, 1, 2, rungs, 2, 3, 0, stop), -EINVAL);
}

static json_t *sweep_doc(const char *extra)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"s\", \"base\": {\"dataset_url\": \"http://h/d.csv\","
             " \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 8}]},"
             " \"hyperparameters\": {\"epochs\": 9, \"validation_split\": 0.2}},"
             " \"metric\": {\"name\": \"val_loss\"}%s}",
             extra);
    json_error_t e;
    json_t *doc = json_loads(text, 0, &e);
    if (!doc)
        fprintf(stderr, "%s: %s\n", text, e.text);
    return doc;
}

static void test_spec(void)
{
    field_errors errs;
    sweep_spec *s = NULL;
    json_t *doc = sweep_doc(
        ", \"seed\": 5, \"max_trials\": 200, \"parameters\": {"
        "\"hyperparameters.learning_rate\": {\"type\": \"log_uniform\", \"min\": 1e-4, \"max\": "
        "1e-1},"
        "\"model.layers[0].units\": {\"type\": \"int_uniform\", \"min\": 2, \"max\": 4},"
        "\"hyperparameters.optimizer\": {\"type\": \"choice\", \"values\": [\"adam\", \"sgd\"]},"
        "\"dataset.standardize\": {\"type\": \"choice\", \"values\": [true, false]}}");
    CHECK_INT(sweep_spec_parse(doc, &s, &errs), 0);
    if (!s) {
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "%s: %s\n", errs.items[i].field, errs.items[i].message);
        json_decref(doc);
        return;
    }
    CHECK_INT(s->n_trials, 200);
    CHECK(!s->maximize);                                 /* val_loss: auto is min */
    CHECK_STR(s->params[0].path, "dataset.standardize"); /* sorted by path */
    int seen[5] = {0}, sgd = 0;
    double lo = 1, hi = 0;
    for (int n = 1; n <= 200; n++) {
        json_t *t = sweep_trial_doc(s, n), *again = sweep_trial_doc(s, n);
        CHECK(json_equal(t, again)); /* a function of (document, n) */
        char name[16];
        snprintf(name, sizeof name, "s-%d", n);
        CHECK_STR(json_string_value(json_object_get(t, "name")), name);
        json_t *hp = json_object_get(t, "hyperparameters");
        double lr = json_real_value(json_object_get(hp, "learning_rate"));
        CHECK(lr >= 1e-4 && lr <= 1e-1);
        lo = lr < lo ? lr : lo;
        hi = lr > hi ? lr : hi;
        sgd += !strcmp(json_string_value(json_object_get(hp, "optimizer")), "sgd");
        json_t *units = json_object_get(
            json_array_get(json_object_get(json_object_get(t, "model"), "layers"), 0), "units");
        CHECK(json_is_integer(units));
        seen[json_integer_value(units)]++;
        CHECK(json_is_boolean(json_object_get(json_object_get(t, "dataset"), "standardize")));
        json_t *p = sweep_trial_params(s, t);
        CHECK(json_equal(json_object_get(p, "hyperparameters.learning_rate"),
                         json_object_get(hp, "learning_rate")));
        json_decref(p);
        json_decref(t);
        json_decref(again);
    }
    CHECK(seen[2] > 40 && seen[3] > 40 && seen[4] > 40); /* both ends of int_uniform drawn */
    CHECK(sgd > 60 && sgd < 140);
    CHECK(lo < 3e-4 && hi > 3e-2); /* log-uniform: as many decades low as high */
    sweep_spec_free(s);
    json_decref(doc);

    /* a grid: the product in path order, the last path fastest, max_trials a cap */
    doc = sweep_doc(", \"algorithm\": \"grid\", \"max_trials\": 10, \"parameters\": {"
                    "\"hyperparameters.batch_size\": {\"type\": \"choice\", \"values\": [8, 16]},"
                    "\"model.layers[0].units\": {\"type\": \"choice\", \"values\": [1, 2, 3]}}");
    CHECK_INT(sweep_spec_parse(doc, &s, &errs), 0);
    CHECK_INT(s ? s->n_trials : 0, 6);
    int expect[6][2] = {{8, 1}, {8, 2}, {8, 3}, {16, 1}, {16, 2}, {16, 3}};
    for (int n = 1; s && n <= 6; n++) {
        json_t *t = sweep_trial_doc(s, n);
        CHECK_INT(json_integer_value(
                      json_object_get(json_object_get(t, "hyperparameters"), "batch_size")),
                  expect[n - 1][0]);
        CHECK_INT(json_integer_value(json_object_get(
                      json_array_get(json_object_get(json_object_get(t, "model"), "layers"), 0),
                      "units")),
                  expect[n - 1][1]);
        json_decref(t);
    }
    sweep_spec_free(s);
    json_decref(doc);
}

/* ---- the controller on a database ------------------------------------------------------- */

static char tmp_dir[] = "/tmp/trainyard-test-asha-XXXXXX";

static int64_t count(db *d, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db_sqlite(d), sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void exec(db *d, const char *sql)
{
    char err[ERR_LEN];
    if (db_exec(d, sql, err) < 0) {
        fprintf(stderr, "%s: %s\n", sql, err);
        check_failures++;
    }
}

/* Trial n of the sweep: running, with epoch 1..upto's val_loss from vals, stored at T0 + at. */
static void report(db *d, int n, const double *vals, int upto, int64_t at)
{
    char sql[256], err[ERR_LEN];
    snprintf(sql, sizeof sql, "UPDATE jobs SET status = 'running' WHERE name = 's-%d'", n);
    exec(d, sql);
    snprintf(sql, sizeof sql, "SELECT seq FROM jobs WHERE name = 's-%d'", n);
    int64_t seq = count(d, sql);
    for (int e = 1; e <= upto; e++) {
        db_metric m = {.attempt = 1,
                       .epoch = e,
                       .loss = vals[e - 1],
                       .val_loss = vals[e - 1],
                       .accuracy = NAN,
                       .val_accuracy = NAN,
                       .seconds = 0.1,
                       .samples_per_second = NAN,
                       .at = T0 + at + e};
        CHECK_INT(db_metric_put(d, seq, &m, err), 0);
    }
}

static void finish(db *d, int n, const char *status)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET status = '%s', finished_at = %lld WHERE name = 's-%d'", status,
             T0 + 1000, n);
    exec(d, sql);
}

static void test_controller(void)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/sweep.db", tmp_dir);
    db *d = NULL, *d2 = NULL;
    CHECK_INT(db_open(path, &d, err), 0);
    CHECK_INT(db_open(path, &d2, err), 0);
    if (!d || !d2)
        return;
    field_errors errs;
    sweep_spec *spec = NULL;
    json_t *doc =
        sweep_doc(", \"max_trials\": 4, \"max_concurrent\": 2, \"asha\": {\"min_epochs\": 1},"
                  " \"parameters\": {\"hyperparameters.learning_rate\": {\"type\": \"uniform\","
                  " \"min\": 0.001, \"max\": 0.01}}");
    CHECK_INT(sweep_spec_parse(doc, &spec, &errs), 0);
    db_sweep s;
    memset(&s, 0, sizeof s);
    CHECK_INT(db_id_new(s.id, err), 0);
    snprintf(s.name, sizeof s.name, "s");
    snprintf(s.owner, sizeof s.owner, "owner-token");
    s.document = json_dumps(spec->doc, JSON_COMPACT);
    s.created_at = T0;
    CHECK_INT(db_sweep_insert(d, &s, err), 0);

    sweep_tick_stats st;
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created, 2); /* max_concurrent */
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created, 0);
    CHECK_INT(count(d, "SELECT count(*) FROM jobs WHERE sweep_seq IS NOT NULL AND"
                       " owner = 'owner-token' AND status = 'queued'"),
              2);
    CHECK_INT(count(d, "SELECT trials_created FROM sweeps"), 2);

    /* trial 1 reaches rungs 1 and 3 first; trial 2 is worse at rung 1 (of 2: top 1) */
    double good[] = {0.5, 0.4, 0.3}, bad[] = {0.9, 0.8};
    report(d, 1, good, 3, 0);
    report(d, 2, bad, 1, 100);
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.stops_requested, 1);
    CHECK_INT(count(d, "SELECT count(*) FROM jobs WHERE name = 's-2' AND stop_requested"
                       " LIKE '%ASHA%'"),
              1);
    CHECK_INT(count(d, "SELECT count(*) FROM jobs WHERE stop_requested IS NOT NULL"), 1);
    /* a restarted controller (another connection, nothing in memory) asks nothing again */
    CHECK_INT(sched_sweeps_tick(d2, NULL, T0, &st, err), 0);
    CHECK_INT(st.stops_requested + st.trials_created, 0);

    /* trial 2 ends (stopped after epoch 2), trial 1 ends: two more trials, then the end */
    report(d, 2, bad, 2, 100);
    finish(d, 2, "succeeded");
    finish(d, 1, "succeeded");
    CHECK_INT(sched_sweeps_tick(d2, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created, 2);
    CHECK_INT(count(d, "SELECT trials_created FROM sweeps"), 4);
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created + st.sweeps_finished, 0); /* made all four: none more */
    finish(d, 3, "failed");
    finish(d, 4, "cancelled"); /* a trial cancelled alone */
    CHECK_INT(sched_sweeps_tick(d, NULL, T0 + 2000, &st, err), 0);
    CHECK_INT(st.sweeps_finished, 1);
    db_sweep got;
    CHECK_INT(db_sweep_get(d, s.id, &got, err), 0);
    CHECK_INT(got.status, DB_SWEEP_SUCCEEDED);
    CHECK_INT(got.finished_at, T0 + 2000);
    CHECK_INT(got.best_job_seq, count(d, "SELECT seq FROM jobs WHERE name = 's-1'"));

    sweep_board b;
    CHECK_INT(sweep_board_read(d, &got, spec, &b, err), 0);
    CHECK_INT(b.n, 4);
    CHECK_STR(b.entries[0].name, "s-1"); /* best first: 0.3 */
    CHECK_NEAR(b.entries[0].value, 0.3, 1e-12);
    CHECK_INT(b.entries[0].epoch, 3);
    CHECK_STR(b.entries[1].name, "s-2");
    CHECK_INT(b.entries[1].epochs_run, 2);
    CHECK(isnan(b.entries[2].value) && isnan(b.entries[3].value)); /* no value: last */
    CHECK_INT(b.succeeded, 2);
    CHECK_INT(b.stopped_early, 1);
    CHECK_INT(b.epochs_total, 5);
    CHECK_INT(b.best, 0);
    sweep_board_free(&b);
    db_sweep_clear(&got);

    /* cancel: queued trials cancelled, the sweep makes no more */
    db_sweep c;
    memset(&c, 0, sizeof c);
    CHECK_INT(db_id_new(c.id, err), 0);
    snprintf(c.name, sizeof c.name, "s");
    c.document = s.document;
    c.created_at = T0;
    CHECK_INT(db_sweep_insert(d, &c, err), 0);
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created, 2);
    int changed = 0;
    CHECK_INT(sched_sweep_cancel(d, c.seq, NULL, T0, &changed, err), 0);
    CHECK_INT(changed, 2);
    CHECK_INT(sched_sweep_cancel(d, c.seq, NULL, T0, &changed, err), -EBUSY);
    CHECK_INT(sched_sweeps_tick(d, NULL, T0, &st, err), 0);
    CHECK_INT(st.trials_created, 0);
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM jobs WHERE sweep_seq = %lld AND status = 'cancelled'",
             (long long)c.seq);
    CHECK_INT(count(d, sql), 2);

    free(s.document);
    sweep_spec_free(spec);
    json_decref(doc);
    db_close(d);
    db_close(d2);
    unlink(path);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_rungs();
    test_keep();
    test_decide();
    test_spec();
    test_controller();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_dir);
    return check_exit();
}
