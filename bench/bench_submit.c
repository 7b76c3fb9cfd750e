/* bench-submit: durable submits per second through sched_job_submit(), the transaction that
 * POST /train commits before its 202, with many concurrent clients.
 *
 * Each of T threads opens its own connection (as each HTTP pool thread does) and submits jobs
 * with a realistic resolved document for S seconds; half the submits carry an Idempotency-Key,
 * so the key lookup is measured too. It prints one JSON line per synchronous setting:
 *   {"synchronous": "FULL", "threads": T, "submits": N, "per_second": x,
 *    "p50_ms": a, "p99_ms": b}
 * FULL is what db_open() uses (each COMMIT waits for the WAL's fsync); NORMAL is shown for
 * comparison only (it survives kill -9 but not a power cut). The HTTP layer adds its own cost
 * on top; this isolates what storage allows.
 *
 * Run: ./build/bench/bench-submit [threads=8] [seconds=3] [dir=/tmp]
 * (the database goes in a fresh folder under dir, on the disk being measured).
 *
 * Latest figures (FULL; 2-core dev VM, virtio disk, one fsync ≈ 0.25 ms), with group commit:
 *   1 thread 3,400/s (p50 0.26 ms) · 4: 5,200/s · 8: 6,300/s (p99 4.8 ms) · 32: 11,200/s
 *   (p99 8.6 ms). Before group commit, every thread count gave ≈ 3,000/s. */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "scheduler/lifecycle.h"
#include "util/timeutil.h"
#include "job/job.h"

#define BENCH_MAX_SAMPLES 400000

static const char BENCH_DOC[] =
    "{\"name\":\"digits-mlp\",\"dataset_url\":\"https://data.example/digits.csv.gz\","
    "\"dataset\":{\"format\":\"csv\",\"label_column\":\"target\",\"header\":\"auto\","
    "\"sha256\":null,\"standardize\":true},\"task\":\"classification\",\"binary\":false,"
    "\"model\":{\"layers\":[{\"type\":\"dense\",\"units\":128,\"activation\":\"relu\"},"
    "{\"type\":\"dropout\",\"rate\":0.2}]},\"hyperparameters\":{\"epochs\":20,\"batch_size\":64,"
    "\"learning_rate\":0.001,\"optimizer\":\"adam\",\"beta1\":0.9,\"beta2\":0.999,"
    "\"epsilon\":1e-07,\"validation_split\":0.1,\"shuffle\":true,\"seed\":42},"
    "\"resources\":{\"device\":\"gpu\"},\"max_attempts\":3,\"max_runtime_seconds\":3600,"
    "\"priority\":0}";

typedef struct bench_shared {
    char path[600];
    const char *sync;
    double until;
    pthread_mutex_t lock;
    double *lat_ms;
    size_t n_lat;
    long submits;
    int failed;
} bench_shared;

static void *bench_client(void *arg)
{
    bench_shared *b = arg;
    char err[ERR_LEN], pragma[64], key[64];
    db *d = NULL;
    if (db_open(b->path, &d, err) < 0) {
        fprintf(stderr, "bench-submit: %s\n", err);
        b->failed = 1;
        return NULL;
    }
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", b->sync);
    db_exec(d, pragma, err);
    double local[4096];
    size_t n = 0;
    long count = 0;
    while (time_mono() < b->until) {
        sched_new_job nj = {.name = "digits-mlp",
                            .document = BENCH_DOC,
                            .device_kind = JOB_DEVICE_GPU,
                            .max_attempts = 3,
                            .max_runtime_seconds = 3600,
                            .priority = 0,
                            .body_hash = "0000000000000000000000000000000000000000000000000000"
                                         "000000000000"};
        if (count % 2 == 0) {
            snprintf(key, sizeof key, "k-%p-%ld", (void *)&local, count);
            nj.idem_key = key;
        }
        db_job j;
        int created = 0;
        double t = time_mono();
        if (sched_job_submit(d, &nj, time_wall_ms(), &j, &created, err) < 0) {
            fprintf(stderr, "bench-submit: %s\n", err);
            b->failed = 1;
            break;
        }
        db_job_clear(&j);
        local[n++] = (time_mono() - t) * 1000.0;
        count++;
        if (n == sizeof local / sizeof local[0] || time_mono() >= b->until) {
            pthread_mutex_lock(&b->lock);
            for (size_t i = 0; i < n && b->n_lat < BENCH_MAX_SAMPLES; i++)
                b->lat_ms[b->n_lat++] = local[i];
            pthread_mutex_unlock(&b->lock);
            n = 0;
        }
    }
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; i < n && b->n_lat < BENCH_MAX_SAMPLES; i++)
        b->lat_ms[b->n_lat++] = local[i];
    b->submits += count;
    pthread_mutex_unlock(&b->lock);
    db_close(d);
    return NULL;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int bench_run(const char *dir, const char *sync, int threads, double seconds)
{
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/bench-submit-XXXXXX", dir);
    if (!mkdtemp(tmpl)) {
        perror("bench-submit: mkdtemp");
        return 1;
    }
    bench_shared b;
    memset(&b, 0, sizeof b);
    snprintf(b.path, sizeof b.path, "%s/trainyard.db", tmpl);
    b.sync = sync;
    b.lat_ms = malloc(BENCH_MAX_SAMPLES * sizeof *b.lat_ms);
    pthread_mutex_init(&b.lock, NULL);
    char err[ERR_LEN];
    db *d = NULL;
    if (!b.lat_ms || db_open(b.path, &d, err) < 0) { /* create and migrate once */
        fprintf(stderr, "bench-submit: %s\n", b.lat_ms ? err : "out of memory");
        free(b.lat_ms);
        return 1;
    }
    db_close(d);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    double start = time_mono();
    b.until = start + seconds;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, bench_client, &b);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double took = time_mono() - start;
    qsort(b.lat_ms, b.n_lat, sizeof *b.lat_ms, bench_cmp);
    double p50 = b.n_lat ? b.lat_ms[b.n_lat / 2] : 0;
    double p99 = b.n_lat ? b.lat_ms[(size_t)((double)b.n_lat * 0.99)] : 0;
    printf("{\"synchronous\": \"%s\", \"threads\": %d, \"submits\": %ld, \"per_second\": %.0f, "
           "\"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
           sync, threads, b.submits, (double)b.submits / took, p50, p99);
    fflush(stdout);
    free(t);
    free(b.lat_ms);
    nftw(tmpl, bench_rm, 8, FTW_DEPTH | FTW_PHYS);
    return b.failed;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    if (threads < 1 || threads > 256 || seconds <= 0) {
        fprintf(stderr, "usage: bench-submit [threads=8] [seconds=3] [dir=/tmp]\n");
        return 2;
    }
    int rc = bench_run(dir, "FULL", threads, seconds);
    rc |= bench_run(dir, "NORMAL", threads, seconds);
    return rc;
}
