/* bench-predict: the serving engine's latency and throughput (predict/predict.h), without HTTP.
 *
 *   build/bench/bench-predict MODEL.safetensors [SECONDS]
 *
 * Closed-loop clients (threads), each sending 1-row requests back to back (random rows of the
 * model's input; submit → notify through a semaphore), against engines of max_batch 32 with no
 * window, max_batch 32 with the default 250 µs window, and max_batch 1 (batching off), for 1, 4
 * and 16 clients, SECONDS each (default 2). One JSON line per run: requests per second, latency
 * p50 and p99 in ms, rows per forward, and the 1-minute load average. The model: any
 * model.safetensors trainyard wrote (bench/README.md trains a 784-128-10 MLP for this). */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict/predict.h"
#include "util/err.h"
#include "util/timeutil.h"

#define MAX_CLIENTS 16
#define MAX_SAMPLES (1 << 20)

typedef struct client {
    predict_engine *e;
    predict_model *m;
    const float *row;
    double until;
    double *lat; /* seconds per request */
    size_t n;
    sem_t done;
} client;

static void post(void *arg)
{
    sem_post(arg);
}

static void *client_main(void *arg)
{
    client *c = arg;
    char err[ERR_LEN];
    while (c->n < MAX_SAMPLES && time_mono() < c->until) {
        predict_req *q;
        double t0 = time_mono();
        if (predict_submit(c->e, c->m, c->row, 1, post, &c->done, &q, err) < 0) {
            fprintf(stderr, "bench-predict: %s\n", err);
            exit(1);
        }
        while (sem_wait(&c->done) != 0)
            ;
        c->lat[c->n++] = time_mono() - t0;
        predict_req_release(q);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The engine's lines (device, loads) are not the benchmark's. */
static void quiet(void *user, const char *line)
{
    (void)user;
    (void)line;
}

static void run(const char *path, double seconds, int max_batch, int window, int clients)
{
    char err[ERR_LEN];
    predict_engine *e;
    predict_model *m;
    predict_opts o = {.max_batch = max_batch, .window_us = window, .log = quiet};
    if (predict_engine_new(&o, &e, err) < 0 || predict_model_get(e, "bench", path, &m, err) < 0) {
        fprintf(stderr, "bench-predict: %s\n", err);
        exit(1);
    }
    const predict_info *in = predict_model_info(m);
    float *rows = malloc((size_t)clients * (size_t)in->inputs * sizeof *rows);
    for (size_t i = 0; i < (size_t)clients * (size_t)in->inputs; i++)
        rows[i] = (float)rand() / (float)RAND_MAX * 2 - 1;
    client cl[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    /* warm: the device copy made, the kernels' first launches done */
    cl[0] = (client){.e = e, .m = m, .row = rows, .until = time_mono() + 0.2};
    cl[0].lat = malloc(MAX_SAMPLES * sizeof *cl[0].lat);
    sem_init(&cl[0].done, 0, 0);
    client_main(&cl[0]);
    sem_destroy(&cl[0].done);
    free(cl[0].lat);
    predict_stats s0, s1;
    predict_engine_stats(e, &s0);
    double t0 = time_mono();
    for (int i = 0; i < clients; i++) {
        cl[i] = (client){
            .e = e, .m = m, .row = rows + (size_t)i * (size_t)in->inputs, .until = t0 + seconds};
        cl[i].lat = malloc(MAX_SAMPLES * sizeof *cl[i].lat);
        sem_init(&cl[i].done, 0, 0);
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    size_t total = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        total += cl[i].n;
    }
    double wall = time_mono() - t0;
    predict_engine_stats(e, &s1);
    double *all = malloc((total + 1) * sizeof *all);
    size_t at = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + at, cl[i].lat, cl[i].n * sizeof *all);
        at += cl[i].n;
        sem_destroy(&cl[i].done);
        free(cl[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_double);
    double load[1] = {0};
    getloadavg(load, 1);
    uint64_t forwards = s1.forwards - s0.forwards;
    printf("{\"clients\": %d, \"max_batch\": %d, \"window_us\": %d, \"requests_per_s\": %.0f, "
           "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"rows_per_forward\": %.2f, \"load\": %.2f}\n",
           clients, max_batch, window, (double)total / wall, all[total / 2] * 1e3,
           all[total * 99 / 100] * 1e3, forwards ? (double)(s1.rows - s0.rows) / forwards : 0.0,
           load[0]);
    fflush(stdout);
    free(all);
    free(rows);
    predict_model_put(m);
    predict_engine_free(e);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench-predict MODEL.safetensors [SECONDS]\n");
        return 2;
    }
    double seconds = argc == 3 ? atof(argv[2]) : 2.0;
    static const int configs[3][2] = {{32, 0}, {32, 250}, {1, 0}};
    static const int clients[3] = {1, 4, 16};
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 3; k++)
            run(argv[1], seconds, configs[c][0], configs[c][1], clients[k]);
    return 0;
}
