/* cltest: what every OpenCL kernel test needs. cltest_open() opens the default device (a GPU if
 * there is one), its context and kern, or skips the test (exit 77) where no OpenCL device exists;
 * any other failure stops the test with exit 1 and says why. The buffer helpers stop the same way
 * on failure, so test bodies stay about the numbers. cltest_close() releases what open made and
 * every buffer the helpers made. Include after tests/unit/check.h. */
#ifndef TRAINYARD_TESTS_CLTEST_H
#define TRAINYARD_TESTS_CLTEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/err.h"

#define CLTEST_MAX_BUFFERS 256

typedef struct cltest {
    ocl_ctx *c;
    kern *k;
    cl_mem bufs[CLTEST_MAX_BUFFERS];
    int nbufs;
} cltest;

static inline void cltest_die(const char *what, const char *why)
{
    fprintf(stderr, "%s: %s\n", what, why);
    exit(1);
}

static inline void cltest_open(cltest *t)
{
    char err[ERR_LEN] = "";
    ocl_device dev;
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0)
        cltest_die("picking an OpenCL device", err);
    memset(t, 0, sizeof *t);
    if (ocl_ctx_new(&dev, NULL, &t->c, err) < 0)
        cltest_die("creating the OpenCL context", err);
    if (kern_new(t->c, &t->k, err) < 0)
        cltest_die("creating the kernels", err);
    printf("device: %s (%s, kernels of the %s class), program %s in %.2f s\n", dev.name,
           ocl_device_kind(&dev), kern_class_of(t->k) == KERN_CLASS_CPU ? "CPU" : "GPU",
           t->c->from_cache ? "from cache" : "compiled", t->c->build_seconds);
}

/* A device buffer of bytes (at least 4), filled from src when src is not NULL. */
static inline cl_mem cltest_buf(cltest *t, size_t bytes, const void *src)
{
    char err[ERR_LEN] = "";
    cl_mem m;
    if (bytes < 4)
        bytes = 4;
    if (t->nbufs == CLTEST_MAX_BUFFERS)
        cltest_die("cltest_buf", "too many buffers; raise CLTEST_MAX_BUFFERS");
    if (ocl_buffer_new(t->c, bytes, &m, err) < 0)
        cltest_die("allocating a device buffer", err);
    t->bufs[t->nbufs++] = m;
    if (src && ocl_write(t->c, m, 0, bytes, src, err) < 0)
        cltest_die("writing a device buffer", err);
    return m;
}

static inline void cltest_write(cltest *t, cl_mem m, size_t bytes, const void *src)
{
    char err[ERR_LEN] = "";
    if (bytes && ocl_write(t->c, m, 0, bytes, src, err) < 0)
        cltest_die("writing a device buffer", err);
}

static inline void cltest_read(cltest *t, cl_mem m, size_t bytes, void *dst)
{
    char err[ERR_LEN] = "";
    if (bytes && ocl_read(t->c, m, 0, bytes, dst, err) < 0)
        cltest_die("reading a device buffer", err);
}

/* Stops the test when a wrapper failed: the kernels cannot be compared after that. */
static inline void cltest_ok(cltest *t, int rc, const char *what)
{
    if (rc < 0)
        cltest_die(what, kern_last_error(t->k));
}

/* Releases every buffer cltest_buf() made so far (call between cases, after a read). */
static inline void cltest_bufs_free(cltest *t)
{
    for (int i = 0; i < t->nbufs; i++)
        clReleaseMemObject(t->bufs[i]);
    t->nbufs = 0;
}

/* A seeded splitmix64 stream for test inputs: 32 random bits, or a float uniform in [lo, hi). */
static inline uint32_t cltest_rng_u32(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static inline float cltest_rng_float(uint64_t *state, float lo, float hi)
{
    return lo + (hi - lo) * (float)(cltest_rng_u32(state) >> 8) * (1.0f / 16777216.0f);
}

/* Releases the buffers, then the kern and the context. */
static inline void cltest_close(cltest *t)
{
    cltest_bufs_free(t);
    kern_free(t->k);
    ocl_ctx_free(t->c);
}

/* Compares n floats: |got − want| ≤ atol + rtol·|want| everywhere (NaN fails unless both are
 * NaN). On failure prints the worst element and counts a check failure; returns 1 when equal. */
static inline int cltest_near(const char *what, const float *got, const float *want, size_t n,
                              double rtol, double atol)
{
    size_t worst = 0, bad = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(g) && isnan(w))
            continue;
        double excess = fabs(g - w) - (atol + rtol * fabs(w));
        if (isnan(excess))
            excess = INFINITY;
        if (excess > 0)
            bad++;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    if (!bad)
        return 1;
    fprintf(stderr,
            "%s: %zu of %zu values outside rtol %g + atol %g; worst [%zu] got %.9g want %.9g "
            "(|diff| %.3g)\n",
            what, bad, n, rtol, atol, worst, (double)got[worst], (double)want[worst],
            fabs((double)got[worst] - want[worst]));
    check_failures++;
    return 0;
}

#endif
