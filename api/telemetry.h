/* telemetry: the service's own counters and histograms, kept in memory since start and
 * exposed by GET /metrics (api/prometheus.c) in Prometheus's text format. Everything is an
 * atomic: handlers on every HTTP thread observe at once, without a lock.
 *
 * What is observed where: submit → running latency when a job's first attempt is leased
 * (api/workers.c), epoch durations as heartbeats bring epochs, dataset bytes as workers report
 * what they fetched. Per-route request counts and bytes live in the HTTP layer (http_stats). */
#ifndef TRAINYARD_API_TELEMETRY_H
#define TRAINYARD_API_TELEMETRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TELEMETRY_MAX_BUCKETS 16

typedef struct telemetry_hist {
    const double *bounds; /* ascending upper bounds (seconds); n_bounds of them */
    size_t n_bounds;
    _Atomic uint64_t counts[TELEMETRY_MAX_BUCKETS + 1]; /* per bucket, not cumulative; +Inf last */
    _Atomic uint64_t sum_us;                            /* the observations' sum in µs */
} telemetry_hist;

typedef struct telemetry {
    telemetry_hist submit_to_running; /* created → first attempt leased */
    telemetry_hist epoch_seconds;     /* each epoch's duration as its worker measured it */
    _Atomic uint64_t dataset_bytes;   /* dataset bytes workers reported fetching */
} telemetry;

/* Sets the buckets; the counts start at zero. */
void telemetry_init(telemetry *t);
/* Counts one observation of seconds (negative counts as 0) in h. */
void telemetry_observe(telemetry_hist *h, double seconds);

#endif
