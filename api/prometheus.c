/* prometheus: GET /metrics, the service's state and counters in Prometheus's text format
 * (version 0.0.4), for an admin or a metrics token.
 *
 * Gauges are read from SQLite at scrape time (jobs by status, workers connected and busy);
 * histograms and counters come from memory (api/telemetry.h, http_stats) and start at zero
 * with the process, as Prometheus expects counters to; so do the inference engine's
 * (predict_engine_stats), listed when predictions are on. Label values are route patterns, never
 * raw paths, so the series stay few whatever clients ask for. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "db/workers.h"
#include "predict/predict.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_hist(FILE *f, const char *name, const char *help, telemetry_hist *h)
{
    prom_head(f, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        cumulative += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
        if (i < h->n_bounds)
            fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
                    (unsigned long long)cumulative);
        else
            fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cumulative);
    }
    double sum = (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6;
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)cumulative);
}

typedef struct prom_workers {
    int64_t connected, busy;
} prom_workers;

static int prom_worker(void *ctx, const db_worker *w)
{
    prom_workers *n = ctx;
    n->connected++;
    n->busy += w->job_id[0] != '\0';
    return 0;
}

/* A family's samples must be together: the requests go in one walk, the bytes in another. */
typedef struct prom_http {
    FILE *f;
    int bytes_pass;
    uint64_t artifact_bytes;
} prom_http;

static void prom_http_route(void *ctx, const http_route_stats *rs)
{
    prom_http *p = ctx;
    const char *method = rs->route ? rs->route->method : "";
    const char *pattern = rs->route ? rs->route->pattern : "";
    if (p->bytes_pass) {
        fprintf(p->f, "trainyard_http_response_bytes_total{method=\"%s\",route=\"%s\"} %llu\n",
                method, pattern, (unsigned long long)rs->bytes);
        if (rs->route && !strcmp(pattern, "/jobs/{id}/artifacts/{name}"))
            p->artifact_bytes += rs->bytes;
        return;
    }
    for (size_t i = 0; i < rs->n; i++) {
        char code[16];
        snprintf(code, sizeof code, rs->by_status[i].status < 0 ? "other" : "%d",
                 rs->by_status[i].status);
        fprintf(p->f,
                "trainyard_http_requests_total{method=\"%s\",route=\"%s\",status=\"%s\"} %llu\n",
                method, pattern, code, (unsigned long long)rs->by_status[i].count);
    }
}

int api_prometheus_scrape(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    int64_t by_status[DB_N_STATUS] = {0};
    int rc = 0;
    for (int s = 0; s < DB_N_STATUS && rc == 0; s++)
        rc = db_job_count(d, s, &by_status[s], err);
    prom_workers w = {0};
    if (rc == 0)
        rc = db_worker_list_live(d, api_live_since(a), prom_worker, &w, err);
    if (rc < 0)
        return rc;

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return err_set(err, -ENOMEM, "out of memory");
    prom_head(f, "trainyard_jobs", "gauge", "Jobs by status.");
    for (int s = 0; s < DB_N_STATUS; s++)
        fprintf(f, "trainyard_jobs{status=\"%s\"} %lld\n", db_status_name(s),
                (long long)by_status[s]);
    prom_head(f, "trainyard_queue_depth", "gauge", "Jobs waiting for a worker.");
    fprintf(f, "trainyard_queue_depth %lld\n", (long long)by_status[DB_QUEUED]);
    prom_hist(f, "trainyard_submit_to_running_seconds",
              "Time from a submit to its first attempt's lease.", &a->stats.submit_to_running);
    prom_hist(f, "trainyard_epoch_duration_seconds", "Epoch durations as workers measured them.",
              &a->stats.epoch_seconds);
    prom_head(f, "trainyard_workers", "gauge",
              "Workers heard from lately, and those holding a job.");
    fprintf(f, "trainyard_workers{state=\"connected\"} %lld\n", (long long)w.connected);
    fprintf(f, "trainyard_workers{state=\"busy\"} %lld\n", (long long)w.busy);
    prom_head(f, "trainyard_dataset_bytes_fetched_total", "counter",
              "Dataset bytes workers reported fetching.");
    fprintf(
        f, "trainyard_dataset_bytes_fetched_total %llu\n",
        (unsigned long long)atomic_load_explicit(&a->stats.dataset_bytes, memory_order_relaxed));
    prom_http p = {.f = f};
    if (a->http) {
        prom_head(f, "trainyard_http_requests_total", "counter",
                  "HTTP requests answered, by route and status (status 0: no answer).");
        http_stats(a->http, prom_http_route, &p);
        p.bytes_pass = 1;
        prom_head(f, "trainyard_http_response_bytes_total", "counter",
                  "Bytes sent in answers, by route.");
        http_stats(a->http, prom_http_route, &p);
    }
    prom_head(f, "trainyard_artifact_bytes_served_total", "counter",
              "Artifact bytes sent to clients (GET /jobs/{id}/artifacts/{name}).");
    fprintf(f, "trainyard_artifact_bytes_served_total %llu\n",
            (unsigned long long)p.artifact_bytes);
    if (a->predict) {
        predict_stats ps;
        predict_engine_stats(a->predict, &ps);
        prom_head(f, "trainyard_predict_requests_total", "counter",
                  "Prediction requests the inference engine took (REST and gRPC).");
        fprintf(f, "trainyard_predict_requests_total %llu\n", (unsigned long long)ps.requests);
        prom_head(f, "trainyard_predict_rows_total", "counter", "Rows those requests held.");
        fprintf(f, "trainyard_predict_rows_total %llu\n", (unsigned long long)ps.rows);
        prom_head(f, "trainyard_predict_forwards_total", "counter",
                  "Forward passes run (rows per forward = rows / forwards: the batching).");
        fprintf(f, "trainyard_predict_forwards_total %llu\n", (unsigned long long)ps.forwards);
        prom_head(f, "trainyard_predict_model_loads_total", "counter",
                  "Models copied onto the inference device.");
        fprintf(f, "trainyard_predict_model_loads_total %llu\n", (unsigned long long)ps.loads);
        prom_head(f, "trainyard_predict_model_evictions_total", "counter",
                  "Models unloaded to make room under --predict-memory.");
        fprintf(f, "trainyard_predict_model_evictions_total %llu\n",
                (unsigned long long)ps.evictions);
        prom_head(f, "trainyard_predict_models_loaded", "gauge",
                  "Models on the inference device now.");
        fprintf(f, "trainyard_predict_models_loaded %zu\n", ps.loaded);
        prom_head(f, "trainyard_predict_loaded_bytes", "gauge",
                  "Device bytes the loaded models take.");
        fprintf(f, "trainyard_predict_loaded_bytes %llu\n", (unsigned long long)ps.loaded_bytes);
    }
    if (fclose(f) != 0 || !text) {
        free(text);
        return err_set(err, -ENOMEM, "out of memory");
    }
    rc = http_reply_bytes(r, 200, PROM_CONTENT_TYPE, text, len);
    free(text);
    return rc;
}
