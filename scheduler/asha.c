/* asha: successive-halving decisions (see asha.h). Pure: no database, no clock. */
#include "scheduler/asha.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int asha_rungs(int min_epochs, int eta, int max_epochs, int rungs[ASHA_MAX_RUNGS])
{
    int n = 0;
    if (min_epochs < 1 || eta < 2)
        return 0;
    for (long r = min_epochs; r < max_epochs && n < ASHA_MAX_RUNGS; r *= eta)
        rungs[n++] = (int)r;
    return n;
}

int asha_better(double a, double b, int maximize)
{
    if (isnan(a))
        return 0;
    if (isnan(b))
        return 1;
    return maximize ? a > b : a < b;
}

int asha_keep(const double *recorded, size_t n, double v, int eta, int maximize)
{
    if (isnan(v) || n == 0 || eta < 1)
        return 1;
    size_t better = 0;
    for (size_t i = 0; i < n; i++)
        better += asha_better(recorded[i], v, maximize);
    size_t top = (n + (size_t)eta - 1) / (size_t)eta; /* ceil(n / eta) >= 1 */
    return better < top;
}

/* The index of epoch among the rungs, or -1. */
static int asha_rung_of(const int *rungs, int n_rungs, int epoch)
{
    for (int i = 0; i < n_rungs; i++)
        if (rungs[i] == epoch)
            return i;
    return -1;
}

int asha_decide(const asha_point *points, size_t n_points, size_t n_trials, const int *rungs,
                int n_rungs, int eta, int maximize, int *stop_at)
{
    int rc = 0;
    double *best = NULL, *recorded = NULL;
    size_t *n_rec = NULL;

    memset(stop_at, 0, n_trials * sizeof *stop_at);
    if (n_trials == 0 || n_rungs <= 0)
        return 0;
    best = malloc(n_trials * sizeof *best);
    recorded = malloc((size_t)n_rungs * n_trials * sizeof *recorded);
    n_rec = calloc((size_t)n_rungs, sizeof *n_rec);
    if (!best || !recorded || !n_rec) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t t = 0; t < n_trials; t++)
        best[t] = NAN;
    for (size_t i = 0; i < n_points; i++) {
        const asha_point *p = &points[i];
        if (p->trial < 0 || (size_t)p->trial >= n_trials) {
            rc = -EINVAL;
            goto out;
        }
        if (asha_better(p->value, best[p->trial], maximize))
            best[p->trial] = p->value;
        int k = asha_rung_of(rungs, n_rungs, p->epoch);
        /* a trial told to stop that still reached a later rung (it finishes the epoch it is
         * in) is not recorded there: ASHA would not have let it get that far */
        if (k < 0 || isnan(best[p->trial]) || n_rec[k] >= n_trials || stop_at[p->trial])
            continue;
        double *rung = recorded + (size_t)k * n_trials;
        rung[n_rec[k]++] = best[p->trial];
        if (!stop_at[p->trial] && !asha_keep(rung, n_rec[k], best[p->trial], eta, maximize))
            stop_at[p->trial] = p->epoch;
    }
out:
    free(best);
    free(recorded);
    free(n_rec);
    return rc;
}
