/* common.cl: helpers shared by the kernel families. Every kernels/\*.cl file is built into one
 * program, common.cl first, so the families may use what is defined here; nothing here is a
 * kernel. Names carry the prefix `common_` so that they cannot collide with a family's.
 *
 * Portable OpenCL C 1.2: no extensions, no double, static inline helpers only.
 *
 * Activation codes must match enum kern_act in kernels/kernels.h. */

#define COMMON_ACT_LINEAR  0
#define COMMON_ACT_RELU    1
#define COMMON_ACT_TANH    2
#define COMMON_ACT_SIGMOID 3

/* common_act(act, x) = y = act(x), and common_act_grad(act, y) = act'(x) expressed through the
 * output y = act(x), which is what the backward pass keeps; common_act16 / common_act_grad16 the
 * same lane by lane on float16. NaN through relu gives 0, as in the host reference. */
#define COMMON_ACT_FNS(T, suffix)                                                                  \
    static inline T common_act##suffix(int act, T x)                                               \
    {                                                                                              \
        switch (act) {                                                                             \
        case COMMON_ACT_RELU:                                                                      \
            return select((T)0.0f, x, x > 0.0f);                                                   \
        case COMMON_ACT_TANH:                                                                      \
            return tanh(x);                                                                        \
        case COMMON_ACT_SIGMOID:                                                                   \
            return 1.0f / (1.0f + exp(-x));                                                        \
        default:                                                                                   \
            return x;                                                                              \
        }                                                                                          \
    }                                                                                              \
    static inline T common_act_grad##suffix(int act, T y)                                          \
    {                                                                                              \
        switch (act) {                                                                             \
        case COMMON_ACT_RELU:                                                                      \
            return select((T)0.0f, (T)1.0f, y > 0.0f);                                             \
        case COMMON_ACT_TANH:                                                                      \
            return 1.0f - y * y;                                                                   \
        case COMMON_ACT_SIGMOID:                                                                   \
            return y * (1.0f - y);                                                                 \
        default:                                                                                   \
            return 1.0f;                                                                           \
        }                                                                                          \
    }

COMMON_ACT_FNS(float, )
COMMON_ACT_FNS(float16, 16)

/* Tree sum of s[0 .. n) into s[0] for a 1-D work-group; n = the local size, a power of two.
 * Every work-item must call it (it holds barriers); s[0] is valid after it returns. */
static inline void common_local_sum(__local float *s, int lid, int n)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = n >> 1; h > 0; h >>= 1) {
        if (lid < h)
            s[lid] += s[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Column sums of an lx_n × ly_n work-group laid out as s[ly·lx_n + lx]: after the call
 * s[lx] holds Σ over ly. ly_n is a power of two; every work-item must call it. */
static inline void common_local_colsum(__local float *s, int lx, int ly, int lx_n, int ly_n)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ly_n >> 1; h > 0; h >>= 1) {
        if (ly < h)
            s[ly * lx_n + lx] += s[(ly + h) * lx_n + lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* The splitmix64 finaliser and the counter-based uniform in [0, 1) drawn from it: the
 * counter-th output of splitmix64 started from the state key = mix64(seed). ref_uniform in
 * kernels/ref.c is the host twin, bit for bit (dropout.cl says how). */
static inline ulong common_mix64(ulong z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9UL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebUL;
    z ^= z >> 31;
    return z;
}

static inline float common_uniform(ulong key, ulong counter)
{
    ulong x = common_mix64(key + (counter + 1UL) * 0x9e3779b97f4a7c15UL);
    uint bits = (uint)(x >> 32);
    return (float)(bits >> 8) * 5.9604644775390625e-8f; /* 2^-24 */
}
