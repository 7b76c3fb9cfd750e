/* asha: the decisions of asynchronous successive halving (ASHA, Li et al. 2018), stopping
 * variant, as pure functions of the values trials reported; scheduler/sweep.c applies them.
 *
 * Rungs are epochs: min_epochs · η^k for k = 0, 1, ... below the trials' epochs (the last
 * epoch is no rung: a trial that got there has finished). When a trial completes a rung's
 * epoch, its value there (its best value of the metric over epochs 1..rung) joins the values
 * recorded at that rung so far, its own included. It goes on only when it is in the top 1/η of
 * them, rounded up: fewer than ceil(n / η) of the n values are strictly better than its own.
 * So the first trial at a rung always goes on, a tie never stops one, and with η = 3 and
 * values arriving in random order about a third of the trials pass each rung.
 *
 * "So far" is the order the epochs were stored in: a decision depends only on what came
 * before it, so it can be made at once (asynchronously: no trial waits for another) and
 * recomputed later from the same rows with the same result, which is what makes the
 * controller restart-safe. A value that is NaN (the epoch did not report the metric) is no
 * value: it is not recorded and decides nothing. */
#ifndef TRAINYARD_SCHEDULER_ASHA_H
#define TRAINYARD_SCHEDULER_ASHA_H

#include <stddef.h>

#define ASHA_MAX_RUNGS 32

/* One stored epoch of one trial (0 <= trial < n_trials), in stored order. */
typedef struct asha_point {
    int trial;
    int epoch;
    double value;
} asha_point;

/* The rungs below max_epochs, ascending, into rungs (at most ASHA_MAX_RUNGS); returns how many
 * (0 when min_epochs >= max_epochs). min_epochs >= 1, eta >= 2. */
int asha_rungs(int min_epochs, int eta, int max_epochs, int rungs[ASHA_MAX_RUNGS]);
/* 1 when a is strictly better than b in the direction (maximize 1: larger is better); NaN is
 * never better and everything is better than NaN. */
int asha_better(double a, double b, int maximize);
/* 1 when value v stays among the n values recorded at a rung (v's own included): fewer than
 * ceil(n / eta) of them are strictly better than v. NaN v stays. */
int asha_keep(const double *recorded, size_t n, double v, int eta, int maximize);
/* Replays points in stored order and writes per trial the first rung at which it fell out of
 * the top 1/η into stop_at[trial] (0: it kept every rung it reached). -ENOMEM, -EINVAL (a
 * trial out of range). */
int asha_decide(const asha_point *points, size_t n_points, size_t n_trials, const int *rungs,
                int n_rungs, int eta, int maximize, int *stop_at);

#endif
