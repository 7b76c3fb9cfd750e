/* telemetry: buckets and observation (see telemetry.h). */
#include "api/telemetry.h"

#include <string.h>

/* Submits reach a parked worker in about a millisecond; a busy queue takes minutes. */
static const double telemetry_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  10,    60,   600};
/* Epochs of small models take milliseconds, of large ones minutes. */
static const double telemetry_epoch_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                5,    10,   30,  60,   300, 1800};

_Static_assert(sizeof telemetry_latency_bounds / sizeof(double) <= TELEMETRY_MAX_BUCKETS,
               "too many latency buckets");
_Static_assert(sizeof telemetry_epoch_bounds / sizeof(double) <= TELEMETRY_MAX_BUCKETS,
               "too many epoch buckets");

void telemetry_init(telemetry *t)
{
    memset(t, 0, sizeof *t);
    t->submit_to_running.bounds = telemetry_latency_bounds;
    t->submit_to_running.n_bounds = sizeof telemetry_latency_bounds / sizeof(double);
    t->epoch_seconds.bounds = telemetry_epoch_bounds;
    t->epoch_seconds.n_bounds = sizeof telemetry_epoch_bounds / sizeof(double);
}

void telemetry_observe(telemetry_hist *h, double seconds)
{
    if (!(seconds > 0))
        seconds = 0;
    size_t i = 0;
    while (i < h->n_bounds && seconds > h->bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (uint64_t)(seconds * 1e6 + 0.5), memory_order_relaxed);
}
