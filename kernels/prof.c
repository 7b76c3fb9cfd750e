/* prof: TRAINYARD_PROFILE=1 times every kernel a kern enqueues, for finding where a step goes.
 *
 * When the variable is set at kern_new_for, kern_enqueue (the one place kernels.c, gemm.c and
 * conv.c enqueue) finishes the queue before and after each launch and adds the wall time to the
 * kernel's row; kern_free prints the table to stderr: per kernel the launches, total and mean
 * milliseconds, sorted by total. Finishing around every launch removes the overlap of host
 * enqueueing and device work, so the sum is a little more than a step takes without it; off (the
 * default) it costs one branch per enqueue. Rows are keyed by cl_kernel and global size (one row
 * per shape); past KERN_PROF_ROWS of them the rest are not counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kern_priv.h"

#define KERN_PROF_ROWS 64

struct kern_prof_row {
    cl_kernel kn;
    size_t global[3]; /* the launch's global size, (n, 1, 1) for fewer dimensions */
    long calls;
    double ms;
};

struct kern_prof {
    size_t n;
    struct kern_prof_row rows[KERN_PROF_ROWS];
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void kern_prof_init(kern *k)
{
    const char *v = getenv("TRAINYARD_PROFILE");
    if (v && *v && strcmp(v, "0") != 0)
        k->prof = calloc(1, sizeof *k->prof);
}

cl_int kern_enqueue(kern *k, cl_kernel kn, cl_uint dims, const size_t *global, const size_t *local)
{
    if (!k->prof)
        return clEnqueueNDRangeKernel(k->c->queue, kn, dims, NULL, global, local, 0, NULL, NULL);
    clFinish(k->c->queue);
    double t0 = now_ms();
    cl_int rc = clEnqueueNDRangeKernel(k->c->queue, kn, dims, NULL, global, local, 0, NULL, NULL);
    clFinish(k->c->queue);
    double dt = now_ms() - t0;
    struct kern_prof *p = k->prof;
    size_t g[3] = {1, 1, 1}, i = 0;
    for (cl_uint d = 0; d < dims && d < 3; d++)
        g[d] = global[d];
    while (i < p->n && (p->rows[i].kn != kn || memcmp(p->rows[i].global, g, sizeof g)))
        i++;
    if (i == p->n && p->n < KERN_PROF_ROWS)
        p->rows[p->n++] = (struct kern_prof_row){.kn = kn, .global = {g[0], g[1], g[2]}};
    if (i < p->n) {
        p->rows[i].calls++;
        p->rows[i].ms += dt;
    }
    return rc;
}

static int by_total(const void *a, const void *b)
{
    double x = ((const struct kern_prof_row *)a)->ms, y = ((const struct kern_prof_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void kern_prof_print(kern *k)
{
    struct kern_prof *p = k->prof;
    if (!p)
        return;
    qsort(p->rows, p->n, sizeof p->rows[0], by_total);
    double total = 0.0;
    for (size_t i = 0; i < p->n; i++)
        total += p->rows[i].ms;
    fprintf(stderr, "kernel profile (TRAINYARD_PROFILE): %.1f ms in all\n", total);
    fprintf(stderr, "%-22s %-16s %8s %10s %9s %6s\n", "kernel", "global", "launches", "total_ms",
            "mean_ms", "share");
    for (size_t i = 0; i < p->n; i++) {
        char name[64] = "?";
        clGetKernelInfo(p->rows[i].kn, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        char global[48];
        snprintf(global, sizeof global, "%zux%zux%zu", p->rows[i].global[0], p->rows[i].global[1],
                 p->rows[i].global[2]);
        fprintf(stderr, "%-22s %-16s %8ld %10.1f %9.4f %5.1f%%\n", name, global, p->rows[i].calls,
                p->rows[i].ms, p->rows[i].ms / (double)p->rows[i].calls,
                total > 0.0 ? 100.0 * p->rows[i].ms / total : 0.0);
    }
    free(p);
    k->prof = NULL;
}
