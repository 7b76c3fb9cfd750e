/* bench-allreduce: MPI_Allreduce time against message size, the cost a data-parallel step pays
 * once per step over the model's single gradient buffer (issue 14).
 *
 *   mpirun --allow-run-as-root -np 2 build/bench/bench-allreduce [--budget SECONDS]
 *                                                                 [--max-bytes BYTES]
 *
 * Times MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) for 4 B to
 * 64 MiB in powers of 2, plus the gradient buffers of the two models docs/SCALING.md is about:
 * the 784-128-10 MLP (101,770 floats) and the seed CNN of docs/cifar10-job.json (308,426).
 *
 * Per size: one call on buffers of 1.0 whose result is checked (every element must be the rank
 * count), five untimed warm-up calls on zeros, then R timed calls, each after an MPI_Barrier;
 * a call's time is the slowest rank's (MPI_Reduce MAX over the per-call times). R is chosen so
 * that every size gets an equal share of the budget (default 20 s), from the median warm-up
 * call of the slowest rank, so that every rank makes the same number of calls; R is between
 * REPS_MIN and REPS_MAX.
 *
 * Rank 0 prints one line per size: bytes, median and p90 µs, algorithmic bandwidth
 * (bytes / median) and bus bandwidth (algbw · 2(N−1)/N, what each link of a ring carries), then
 * the least-squares fit of t(n) = α + β·n on the medians, weighted by 1/t² (relative error, so
 * a 4-byte point weighs as much as a 64 MiB one), over all sizes and separately over the ranges
 * of FIT_EDGES, each with its largest relative residual, and the ring terms behind each fit:
 * a ring allreduce costs 2(N−1)·α_link + 2(N−1)/N · n / B_link, so α_link = α / (2(N−1)) and
 * B_link = 2(N−1)/N / β. The 1-minute load average is printed before and after. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BYTES    4
#define MAX_BYTES    (64u << 20)
#define WARMUP_CALLS 5
#define REPS_MIN     11
#define REPS_MAX     10000
#define MAX_POINTS   32
#define MLP_FLOATS   101770u /* 784·128 + 128 + 128·10 + 10 */
#define CNN_FLOATS   308426u /* 3·3·3·32 + 32 + 31·31·32·10 + 10 */

/* The ranges fitted apart. On one machine the "link" is memory, and its regimes are Open MPI's
 * shared-memory protocols and the caches: eager copies up to 4 KiB (btl_vader_eager_limit),
 * then rendezvous with the buffers in the 1 MiB L2 of each core, in the shared 32 MiB L3
 * (two ranks' buffers and temporaries: up to about 16 MiB), and in DRAM. */
static const size_t FIT_EDGES[] = {0, 4u << 10, 1u << 20, 16u << 20, MAX_BYTES};

typedef struct point {
    size_t bytes;
    const char *label; /* NULL for the powers of 2 */
    int reps;
    double median, p90; /* seconds */
} point;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* Times one size on every rank; fills p on rank 0. Returns 0, or -1 when the check fails. */
static int measure(point *p, float *buf, double *times, double *slowest, double budget_s, int ranks,
                   int rank)
{
    int n = (int)(p->bytes / sizeof(float));
    int bad = 0, any_bad = 0;

    for (int i = 0; i < n; i++)
        buf[i] = 1.0f;
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        if (buf[i] != (float)ranks)
            bad = 1;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (rank == 0)
            fprintf(stderr, "bench-allreduce: wrong sum at %zu bytes\n", p->bytes);
        return -1;
    }
    memset(buf, 0, p->bytes);

    double warm[WARMUP_CALLS], est_max;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < WARMUP_CALLS; i++) {
        double s = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        warm[i] = MPI_Wtime() - s;
    }
    /* the median warm-up call: one preempted call must not cut the repetitions */
    qsort(warm, WARMUP_CALLS, sizeof *warm, cmp_double);
    MPI_Allreduce(&warm[WARMUP_CALLS / 2], &est_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    /* + 5 µs for the barrier before each call */
    double want = budget_s / (est_max + 5e-6);
    int reps = want < REPS_MIN ? REPS_MIN : want > REPS_MAX ? REPS_MAX : (int)want;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        times[r] = MPI_Wtime() - s;
    }
    MPI_Reduce(times, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(slowest, (size_t)reps, sizeof *slowest, cmp_double);
        p->reps = reps;
        p->median = reps % 2 ? slowest[reps / 2] : (slowest[reps / 2 - 1] + slowest[reps / 2]) / 2;
        p->p90 = slowest[(int)ceil(0.9 * reps) - 1];
    }
    return 0;
}

/* Weighted least squares of t = α + β·n over the points with lo < bytes ≤ hi, weights 1/t².
 * Prints the fit and its ring terms; prints nothing when fewer than two points qualify. */
static void fit(const point *pts, int np, size_t lo, size_t hi, int ranks, const char *name)
{
    double sw = 0, swn = 0, swnn = 0, swt = 0, swnt = 0;
    int k = 0;
    for (int i = 0; i < np; i++) {
        if (pts[i].bytes <= lo || pts[i].bytes > hi)
            continue;
        double n = (double)pts[i].bytes, t = pts[i].median, w = 1 / (t * t);
        sw += w, swn += w * n, swnn += w * n * n, swt += w * t, swnt += w * n * t;
        k++;
    }
    double det = sw * swnn - swn * swn;
    if (k < 2 || det == 0)
        return;
    double alpha = (swt * swnn - swn * swnt) / det, beta = (sw * swnt - swn * swt) / det;
    double worst = 0;
    for (int i = 0; i < np; i++) {
        if (pts[i].bytes <= lo || pts[i].bytes > hi)
            continue;
        double r = fabs(alpha + beta * (double)pts[i].bytes - pts[i].median) / pts[i].median;
        worst = r > worst ? r : worst;
    }
    double hops = 2.0 * (ranks - 1), share = hops / ranks;
    printf("%-26s alpha %8.2f us  beta %9.4f ns/B (%7.2f GB/s)  max rel. residual %5.1f%%"
           "  ring: alpha_link %7.2f us, B_link %7.2f GB/s\n",
           name, alpha * 1e6, beta * 1e9, beta > 0 ? 1e-9 / beta : 0.0, worst * 100,
           alpha / hops * 1e6, beta > 0 ? share / beta * 1e-9 : 0.0);
}

static int usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: mpirun -np N bench-allreduce [--budget SECONDS] "
                        "[--max-bytes BYTES]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int rank, ranks, rc = 0;
    double budget = 20;
    size_t max_bytes = MAX_BYTES;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 < argc && strcmp(argv[i], "--budget") == 0) {
            budget = strtod(argv[++i], &end);
            if (*end || !(budget > 0))
                rc = usage(rank);
        } else if (i + 1 < argc && strcmp(argv[i], "--max-bytes") == 0) {
            max_bytes = strtoull(argv[++i], &end, 10);
            if (*end || max_bytes < MIN_BYTES || max_bytes > MAX_BYTES)
                rc = usage(rank);
        } else {
            rc = usage(rank);
        }
    }
    if (rc) {
        MPI_Finalize();
        return rc;
    }

    point pts[MAX_POINTS];
    int np = 0;
    for (size_t b = MIN_BYTES; b <= max_bytes; b *= 2)
        pts[np++] = (point){.bytes = b};
    const point models[] = {{.bytes = MLP_FLOATS * sizeof(float), .label = "MLP 784-128-10"},
                            {.bytes = CNN_FLOATS * sizeof(float), .label = "seed CNN"}};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        if (models[m].bytes > max_bytes)
            continue;
        int at = np++;
        while (at > 0 && pts[at - 1].bytes > models[m].bytes) {
            pts[at] = pts[at - 1];
            at--;
        }
        pts[at] = models[m];
    }

    float *buf = malloc(max_bytes);
    double *times = malloc(REPS_MAX * sizeof *times);
    double *slowest = malloc(REPS_MAX * sizeof *slowest);
    if (!buf || !times || !slowest) {
        fprintf(stderr, "bench-allreduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 0, max_bytes);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, ",\n")] = 0;
        printf("# %d ranks, %s, budget %.0f s, load %.2f\n", ranks, lib, budget, load1());
        printf("%12s %-15s %6s %12s %12s %12s %12s\n", "bytes", "model", "reps", "median_us",
               "p90_us", "algbw_GB/s", "busbw_GB/s");
    }
    for (int i = 0; i < np && rc == 0; i++) {
        point *p = &pts[i];
        if (measure(p, buf, times, slowest, budget / np, ranks, rank) < 0) {
            rc = 1;
            break;
        }
        if (rank == 0) {
            double alg = (double)p->bytes / p->median * 1e-9;
            printf("%12zu %-15s %6d %12.2f %12.2f %12.3f %12.3f\n", p->bytes,
                   p->label ? p->label : "", p->reps, p->median * 1e6, p->p90 * 1e6, alg,
                   alg * 2.0 * (ranks - 1) / ranks);
            fflush(stdout);
        }
    }
    if (rank == 0 && rc == 0) {
        printf("# fit t(n) = alpha + beta*n on the medians, weighted 1/t^2; load %.2f\n", load1());
        fit(pts, np, 0, MAX_BYTES, ranks, "all sizes");
        for (size_t e = 0; e + 1 < sizeof FIT_EDGES / sizeof *FIT_EDGES; e++) {
            char name[64];
            snprintf(name, sizeof name, "%zu < n <= %zu", FIT_EDGES[e], FIT_EDGES[e + 1]);
            fit(pts, np, FIT_EDGES[e], FIT_EDGES[e + 1], ranks, name);
        }
    }
    free(buf);
    free(times);
    free(slowest);
    MPI_Finalize();
    return rc;
}
