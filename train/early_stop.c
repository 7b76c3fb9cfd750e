/* early_stop: Keras's EarlyStopping decision (see early_stop.h). */
#include "train/early_stop.h"

#include <math.h>
#include <stdio.h>

void early_stop_init(early_stop *s, const job_early_stopping *cfg)
{
    s->best = cfg->mode == JOB_ES_MAX ? -INFINITY : INFINITY;
    s->best_epoch = 0;
    s->wait = 0;
    s->stopped_epoch = 0;
}

/* v beats ref by more than min_delta in cfg's direction. */
static int improves(const job_early_stopping *cfg, double v, double ref)
{
    double d = fabs(cfg->min_delta);
    return cfg->mode == JOB_ES_MAX ? v - d > ref : v + d < ref;
}

int early_stop_update(early_stop *s, const job_early_stopping *cfg, int epoch, double value)
{
    if (!cfg->enabled || isnan(value) || epoch <= cfg->start_from_epoch || s->stopped_epoch)
        return 0;
    s->wait++;
    if (improves(cfg, value, s->best)) {
        s->best = value;
        s->best_epoch = epoch;
        if (!cfg->has_baseline || improves(cfg, value, cfg->baseline))
            s->wait = 0;
        return EARLY_STOP_IMPROVED;
    }
    if (s->wait >= cfg->patience && epoch > 1) {
        s->stopped_epoch = epoch;
        return EARLY_STOP_STOP;
    }
    return 0;
}

void early_stop_reason(const early_stop *s, const job_early_stopping *cfg, char *out, size_t cap)
{
    char best[64] = "";
    if (s->best_epoch)
        snprintf(best, sizeof best, " (best %.6g at epoch %d)", s->best, s->best_epoch);
    if (cfg->has_baseline && s->best_epoch && !improves(cfg, s->best, cfg->baseline))
        snprintf(out, cap,
                 "early stopping: %s did not beat the baseline %.6g by more than %g in %d "
                 "epochs%s",
                 cfg->monitor, cfg->baseline, cfg->min_delta, s->wait, best);
    else
        snprintf(out, cap, "early stopping: %s did not improve by more than %g for %d epochs%s",
                 cfg->monitor, cfg->min_delta, s->wait, best);
}
