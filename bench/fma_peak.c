/* fma_peak: the fp32 FMA peak of this machine, measured with a register-only loop.
 *
 * Each thread runs chains of independent vector FMAs (16 accumulators: enough to cover an FMA
 * latency of 4 cycles on two pipes), one function per ISA compiled with a target attribute and
 * chosen at run time with __builtin_cpu_supports, so the file builds with the project's default
 * flags and runs on any x86-64 (elsewhere it reports 0). All threads start together and the
 * figure is the total FLOPs over the slowest thread's time, best of several rounds.
 *
 * A GPU's peak comes from the same loop as an OpenCL kernel (PEAK_CL): 16 chains of scalar FMAs
 * per work-item, which a GPU runs one lane per work-item (a CPU device would need PoCL to
 * vectorise across work-items, hence the C loop there). The trip count doubles until one launch
 * takes PEAK_CL_SECONDS, so the launch overhead stays out of the figure. */
#include "bench/fma_peak.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/timeutil.h"

#define PEAK_ITERS (1L << 22) /* loop trips per run (~15 ms): 16 FMAs of one vector each */
#define PEAK_ROUNDS                                                                                \
    20 /* best of: short runs, like the kernels' timed batches, so that on a shared                \
        * machine both figures come from its quiet moments */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PEAK_X86 1

#define PEAK_BODY(T, FMA, SET)                                                                     \
    T a0 = SET(1.0f), a1 = SET(1.1f), a2 = SET(1.2f), a3 = SET(1.3f), a4 = SET(1.4f);              \
    T a5 = SET(1.5f), a6 = SET(1.6f), a7 = SET(1.7f), a8 = SET(1.8f), a9 = SET(1.9f);              \
    T a10 = SET(2.0f), a11 = SET(2.1f), a12 = SET(2.2f), a13 = SET(2.3f), a14 = SET(2.4f);         \
    T a15 = SET(2.5f), m = SET(0.999999f), d = SET(1e-7f);                                         \
    for (long i = 0; i < iters; i++) {                                                             \
        a0 = FMA(a0, m, d), a1 = FMA(a1, m, d), a2 = FMA(a2, m, d), a3 = FMA(a3, m, d);            \
        a4 = FMA(a4, m, d), a5 = FMA(a5, m, d), a6 = FMA(a6, m, d), a7 = FMA(a7, m, d);            \
        a8 = FMA(a8, m, d), a9 = FMA(a9, m, d), a10 = FMA(a10, m, d), a11 = FMA(a11, m, d);        \
        a12 = FMA(a12, m, d), a13 = FMA(a13, m, d), a14 = FMA(a14, m, d), a15 = FMA(a15, m, d);    \
    }                                                                                              \
    T s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15

__attribute__((target("avx512f"))) static float peak_avx512(long iters)
{
    PEAK_BODY(__m512, _mm512_fmadd_ps, _mm512_set1_ps);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float peak_avx2(long iters)
{
    PEAK_BODY(__m256, _mm256_fmadd_ps, _mm256_set1_ps);
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[7];
}
#endif

struct peak_thread {
    int lanes; /* floats per vector: 16, 8, or 0 for none */
    double seconds;
    volatile float sink;
    const int *go; /* set to 1 once every thread exists, so they all run at once */
};

static void *peak_run(void *arg)
{
    struct peak_thread *t = arg;
    while (!__atomic_load_n(t->go, __ATOMIC_ACQUIRE))
        ;
    double t0 = time_mono();
#ifdef PEAK_X86
    t->sink = t->lanes == 16 ? peak_avx512(PEAK_ITERS) : peak_avx2(PEAK_ITERS);
#endif
    t->seconds = time_mono() - t0;
    return NULL;
}

double fma_peak_gflops(int threads, const char **isa)
{
    int lanes = 0;
    *isa = "none";
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        lanes = 16, *isa = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        lanes = 8, *isa = "avx2";
#endif
    if (!lanes || threads < 1 || threads > 64)
        return 0;
    double best = 0;
    for (int round = 0; round < PEAK_ROUNDS; round++) {
        struct peak_thread t[64];
        pthread_t id[64];
        int go = 0, started = 0;
        for (int i = 0; i < threads; i++) {
            t[i] = (struct peak_thread){.lanes = lanes, .go = &go};
            if (pthread_create(&id[i], NULL, peak_run, &t[i]) != 0)
                break;
            started++;
        }
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        double slowest = 0;
        for (int i = 0; i < started; i++) {
            pthread_join(id[i], NULL);
            slowest = t[i].seconds > slowest ? t[i].seconds : slowest;
        }
        if (started < threads)
            return 0;
        double flops = 2.0 * 16 * lanes * (double)PEAK_ITERS * threads;
        if (slowest > 0 && flops / slowest / 1e9 > best)
            best = flops / slowest / 1e9;
    }
    return best;
}

#define PEAK_CL_ITEMS_PER_UNIT 2048
#define PEAK_CL_LOCAL          256
#define PEAK_CL_SECONDS        0.02
#define PEAK_CL_RUNS           10

static const char PEAK_CL[] =
    "__kernel void fma_peak(__global float *out, int iters, float m, float d)\n"
    "{\n"
    "    float s = (float)get_global_id(0) * 1e-9f;\n"
    "    float a0 = s + 1.0f, a1 = s + 1.1f, a2 = s + 1.2f, a3 = s + 1.3f, a4 = s + 1.4f;\n"
    "    float a5 = s + 1.5f, a6 = s + 1.6f, a7 = s + 1.7f, a8 = s + 1.8f, a9 = s + 1.9f;\n"
    "    float a10 = s + 2.0f, a11 = s + 2.1f, a12 = s + 2.2f, a13 = s + 2.3f;\n"
    "    float a14 = s + 2.4f, a15 = s + 2.5f;\n"
    "    for (int i = 0; i < iters; i++) {\n"
    "        a0 = fma(a0, m, d), a1 = fma(a1, m, d), a2 = fma(a2, m, d), a3 = fma(a3, m, d);\n"
    "        a4 = fma(a4, m, d), a5 = fma(a5, m, d), a6 = fma(a6, m, d), a7 = fma(a7, m, d);\n"
    "        a8 = fma(a8, m, d), a9 = fma(a9, m, d), a10 = fma(a10, m, d);\n"
    "        a11 = fma(a11, m, d), a12 = fma(a12, m, d), a13 = fma(a13, m, d);\n"
    "        a14 = fma(a14, m, d), a15 = fma(a15, m, d);\n"
    "    }\n"
    "    out[get_global_id(0)] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 +\n"
    "                            a12 + a13 + a14 + a15;\n"
    "}\n";

/* Seconds of one launch of kl over global items (local per group) at iters; negative on failure. */
static double peak_cl_launch(ocl_ctx *c, cl_kernel kl, size_t global, size_t local, int iters)
{
    if (clSetKernelArg(kl, 1, sizeof iters, &iters) != CL_SUCCESS)
        return -1;
    double t0 = time_mono();
    if (clEnqueueNDRangeKernel(c->queue, kl, 1, NULL, &global, &local, 0, NULL, NULL) !=
            CL_SUCCESS ||
        clFinish(c->queue) != CL_SUCCESS)
        return -1;
    return time_mono() - t0;
}

double fma_peak_device_gflops(ocl_ctx *c, char *err)
{
    const char *src = PEAK_CL;
    cl_int rc;
    cl_program prog = clCreateProgramWithSource(c->context, 1, &src, NULL, &rc);
    cl_kernel kl = NULL;
    cl_mem out = NULL;
    double best = 0;
    if (rc == CL_SUCCESS)
        rc = clBuildProgram(prog, 1, &c->dev.id, "", NULL, NULL);
    if (rc == CL_SUCCESS)
        kl = clCreateKernel(prog, "fma_peak", &rc);
    size_t local = c->dev.max_work_group < PEAK_CL_LOCAL ? c->dev.max_work_group : PEAK_CL_LOCAL;
    size_t units = c->dev.compute_units ? c->dev.compute_units : 1;
    size_t global = units * PEAK_CL_ITEMS_PER_UNIT / local * local;
    if (rc == CL_SUCCESS)
        out = clCreateBuffer(c->context, CL_MEM_WRITE_ONLY, global * sizeof(float), NULL, &rc);
    float m = 0.999999f, d = 1e-7f;
    if (rc == CL_SUCCESS) {
        rc |= clSetKernelArg(kl, 0, sizeof out, &out);
        rc |= clSetKernelArg(kl, 2, sizeof m, &m);
        rc |= clSetKernelArg(kl, 3, sizeof d, &d);
    }
    if (rc != CL_SUCCESS) {
        err_set(err, -EIO, "the FMA peak kernel: %s", ocl_strerror(rc));
        goto out;
    }
    int iters = 64;
    double t = peak_cl_launch(c, kl, global, local, iters); /* compiles the launch, untimed */
    while (t >= 0 && iters < (1 << 24)) {
        t = peak_cl_launch(c, kl, global, local, iters);
        if (t >= PEAK_CL_SECONDS)
            break;
        iters *= 2;
    }
    for (int run = 0; run < PEAK_CL_RUNS && t >= 0; run++) {
        t = peak_cl_launch(c, kl, global, local, iters);
        double gflops = 2.0 * 16 * (double)iters * (double)global / t / 1e9;
        if (t > 0 && gflops > best)
            best = gflops;
    }
    if (t < 0) {
        best = 0;
        err_set(err, -EIO, "the FMA peak kernel failed to run");
    }
out:
    if (out)
        clReleaseMemObject(out);
    if (kl)
        clReleaseKernel(kl);
    if (prog)
        clReleaseProgram(prog);
    return best;
}

double fma_peak_print(ocl_ctx *c, int device_loop)
{
    int cpu = (c->dev.type & CL_DEVICE_TYPE_CPU) != 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpu && c->dev.compute_units > 0 ? (int)c->dev.compute_units
                  : cores > 0                     ? (int)cores
                                                  : 1;
    const char *isa = "none";
    double host = fma_peak_gflops(threads, &isa);
    printf("{\"fma_peak_gflops\": %.1f, \"isa\": \"%s\", \"threads\": %d}\n", host, isa, threads);
    if (cpu && !device_loop) {
        fflush(stdout);
        return host;
    }
    char err[ERR_LEN] = "";
    double dev = fma_peak_device_gflops(c, err);
    if (dev > 0)
        printf("{\"device_fma_peak_gflops\": %.1f, \"device\": \"%s\"}\n", dev, c->dev.name);
    else
        printf("{\"device_fma_peak_gflops\": null, \"device\": \"%s\", \"error\": \"%s\"}\n",
               c->dev.name, err);
    fflush(stdout);
    return cpu ? host : dev;
}

int fma_peak_args(int argc, char **argv, const char *prog, int *quick, int *device_loop)
{
    *quick = *device_loop = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            *quick = 1;
        else if (strcmp(argv[i], "--device-peak") == 0)
            *device_loop = 1;
        else {
            fprintf(stderr, "usage: %s [--quick] [--device-peak]\n", prog);
            return -EINVAL;
        }
    }
    return 0;
}
