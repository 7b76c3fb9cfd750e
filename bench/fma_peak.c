/* fma_peak: the fp32 FMA peak of this machine, measured with a register-only loop.
 *
 * Each thread runs chains of independent vector FMAs (16 accumulators: enough to cover an FMA
 * latency of 4 cycles on two pipes), one function per ISA compiled with a target attribute and
 * chosen at run time with __builtin_cpu_supports, so the file builds with the project's default
 * flags and runs on any x86-64 (elsewhere it reports 0). All threads start together and the
 * figure is the total FLOPs over the slowest thread's time, best of several rounds. */
#include "bench/fma_peak.h"

#include <pthread.h>
#include <stddef.h>

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
