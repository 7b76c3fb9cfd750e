/* bench-conv: the image kernels (kernels/conv.c) on the default OpenCL device, beside this
 * machine's FMA peak measured in the same run (bench/fma_peak.c).
 *
 * Prints one JSON object per line: first the peak (fma_peak_print: this CPU's, and on a device
 * that is not a CPU the device's own, which "of_peak" then refers to)
 *   {"fma_peak_gflops": p, "isa": "avx512", "threads": 2}
 *   {"device_fma_peak_gflops": p, "device": "NVIDIA H200"}
 * then, per op and shape, seconds per call and GFLOP/s (convolutions: 2·N·OH·OW·F·KH·KW·C
 * FLOPs, and the fraction of the peak) or GB/s (the memory-bound families: bytes read + written
 * once)
 *   {"op": "conv_fwd", "shape": "32x64x64x3 f32 k3x3 s1 valid", "ms": t, "variant": "direct",
 *    "gflops": g, "of_peak": g/p, "cpus": u}
 * (cpus: this process's CPU seconds per second over the timed batches; on a CPU device, how many
 * cores the kernels keep busy)
 * and the peak again at the end (the machine is shared: compare lines with the nearer peak).
 * The shapes are the seed CNN's at batch 32: conv 64×64×3 → 32 filters 3×3 valid, then a second
 * layer 31×31×32 → 64 filters 3×3 same; max pooling 2×2 of 62×62×32; batchnorm over
 * 32·62·62 rows × 32 (and kern_bias_act_fwd/bwd with relu on the same matrix, what a conv layer's
 * bias and activation cost); the image batch of 32 CIFAR images (32×32×3 uint8) resized to 64×64
 * with flip and crop. Each time is the best of at least five batches of back-to-back calls (~20 ms
 * a batch, ~0.5 s per line at most), warm-up untimed.
 *
 * The convolutions run twice, each on its own kern made with TRAINYARD_CONV set (whatever the
 * device would pick): the direct kernels CPU devices use ("variant": "direct") and the im2col +
 * kern_gemm path of other devices ("gemm"), which --quick leaves out.
 *
 * Run: ./build/bench/bench-conv [--quick] [--device-peak]   (--quick: the direct convolutions
 * only; --device-peak: the OpenCL FMA loop on a CPU device too, to try it there;
 * TRAINYARD_DEVICE=<index> picks another device, TRAINYARD_GEMM=tiled the GPU GEMM on a CPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/fma_peak.h"
#include "kernels/kernels.h"
#include "util/err.h"
#include "util/timeutil.h"

#define BENCH_BATCH_SECONDS 0.02
#define BENCH_MIN_BATCHES   5
#define BENCH_MAX_SECONDS   0.5

struct bench {
    ocl_ctx *c;
    kern *k;
    double peak;
    const char *variant; /* the conv path: "direct" or "gemm" (TRAINYARD_CONV) */
    double cpus;         /* of the last time_op: CPU seconds per second */
};

/* One op's call, with its buffers. */
struct op {
    const char *name;
    int (*run)(struct bench *b, struct op *o);
    kern_conv g;
    kern_pool p;
    kern_image im;
    int rows, cols;
    cl_mem m[8];
};

static cl_mem buffer(struct bench *b, size_t bytes, unsigned seed)
{
    char err[ERR_LEN];
    cl_mem m = NULL;
    float *h = malloc(bytes);
    if (!h) {
        fprintf(stderr, "bench-conv: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < bytes / 4; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    if (ocl_buffer_new(b->c, bytes < 4 ? 4 : bytes, &m, err) < 0 ||
        (bytes && ocl_write(b->c, m, 0, bytes, h, err) < 0)) {
        fprintf(stderr, "bench-conv: %s\n", err);
        exit(1);
    }
    free(h);
    return m;
}

static int run_fwd(struct bench *b, struct op *o)
{
    return kern_conv2d_fwd(b->k, &o->g, o->m[0], o->m[1], o->m[2], o->m[5]);
}

static int run_bwd_data(struct bench *b, struct op *o)
{
    return kern_conv2d_bwd_data(b->k, &o->g, o->m[3], o->m[1], o->m[4], o->m[5]);
}

static int run_bwd_weights(struct bench *b, struct op *o)
{
    return kern_conv2d_bwd_weights(b->k, &o->g, o->m[0], o->m[3], o->m[6], 0, o->m[5]);
}

static int run_pool_fwd(struct bench *b, struct op *o)
{
    return kern_pool2d_fwd(b->k, KERN_POOL_MAX, &o->p, o->m[0], o->m[1], o->m[2]);
}

static int run_pool_bwd(struct bench *b, struct op *o)
{
    return kern_pool2d_bwd(b->k, KERN_POOL_MAX, &o->p, o->m[1], o->m[2], o->m[0]);
}

static int run_bn_fwd(struct bench *b, struct op *o)
{
    cl_mem *m = o->m;
    return kern_batchnorm_fwd_train(b->k, o->rows, o->cols, 0.99f, 1e-3f, m[0], m[2], m[3], m[4],
                                    m[5], m[6], m[7], m[1]);
}

static int run_bn_bwd(struct bench *b, struct op *o)
{
    cl_mem *m = o->m;
    return kern_batchnorm_bwd(b->k, o->rows, o->cols, m[0], m[1], m[2], m[6], m[7], m[1], m[3],
                              m[4]);
}

static int run_bias_act_fwd(struct bench *b, struct op *o)
{
    return kern_bias_act_fwd(b->k, o->rows, o->cols, KERN_ACT_RELU, o->m[1], o->m[2]);
}

static int run_bias_act_bwd(struct bench *b, struct op *o)
{
    return kern_bias_act_bwd(b->k, o->rows, o->cols, KERN_ACT_RELU, o->m[0], o->m[1], o->m[2]);
}

static int run_image(struct bench *b, struct op *o)
{
    return kern_image_batch(b->k, &o->im, o->rows, o->m[0], o->m[1], 0, NULL, NULL, o->m[2]);
}

/* CPU seconds this process (PoCL's worker threads included) has used. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per call, the best batch; negative when a call fails. b->cpus: CPU seconds per second
 * over the timed batches. */
static double time_op(struct bench *b, struct op *o)
{
    if (o->run(b, o) < 0 || clFinish(b->c->queue) != CL_SUCCESS)
        return -1;
    double t0 = time_mono();
    if (o->run(b, o) < 0 || clFinish(b->c->queue) != CL_SUCCESS)
        return -1;
    double one = time_mono() - t0;
    int calls = one > 0 ? (int)(BENCH_BATCH_SECONDS / one) : 100;
    calls = calls < 1 ? 1 : calls > 100 ? 100 : calls;
    double best = -1, start = time_mono(), cpu0 = cpu_seconds();
    for (int n = 0; n < 64 && (n < BENCH_MIN_BATCHES || time_mono() - start < BENCH_MAX_SECONDS);
         n++) {
        t0 = time_mono();
        for (int i = 0; i < calls; i++)
            if (o->run(b, o) < 0)
                return -1;
        if (clFinish(b->c->queue) != CL_SUCCESS)
            return -1;
        double t = (time_mono() - t0) / calls;
        best = n == 0 || t < best ? t : best;
    }
    double wall = time_mono() - start;
    b->cpus = wall > 0 ? (cpu_seconds() - cpu0) / wall : 0;
    return best;
}

/* Times o and prints its line: GFLOP/s when flops > 0, else GB/s of bytes. */
static void report(struct bench *b, struct op *o, const char *shape, double flops, double bytes)
{
    double t = time_op(b, o);
    if (t <= 0) {
        printf("{\"op\": \"%s\", \"shape\": \"%s\", \"error\": \"%s\"}\n", o->name, shape,
               kern_last_error(b->k));
        return;
    }
    printf("{\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.3f", o->name, shape, t * 1e3);
    if (flops > 0) {
        printf(", \"variant\": \"%s\", \"gflops\": %.1f", b->variant, flops / t / 1e9);
        printf(b->peak > 0 ? ", \"of_peak\": %.2f" : ", \"of_peak\": null",
               b->peak > 0 ? flops / t / 1e9 / b->peak : 0.0);
        printf(", \"cpus\": %.2f", b->cpus);
    } else
        printf(", \"gbps\": %.1f", bytes / t / 1e9);
    printf("}\n");
    fflush(stdout);
}

static void release(struct op *o)
{
    for (int i = 0; i < 8; i++)
        if (o->m[i])
            clReleaseMemObject(o->m[i]);
    memset(o->m, 0, sizeof o->m);
}

static void bench_conv(struct bench *b, kern_conv g, const char *pad)
{
    char shape[128];
    snprintf(shape, sizeof shape, "%dx%dx%dx%d f%d k%dx%d s%d %s", g.n, g.h, g.w, g.c, g.f, g.kh,
             g.kw, g.sh, pad);
    size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.f;
    size_t nw = (size_t)g.kh * g.kw * g.c * g.f;
    struct op o = {.g = g};
    o.m[0] = buffer(b, nx * 4, 1);
    o.m[1] = buffer(b, nw * 4, 2);
    o.m[2] = buffer(b, ny * 4, 0);
    o.m[3] = buffer(b, ny * 4, 3);
    o.m[4] = buffer(b, nx * 4, 0);
    o.m[5] = buffer(b, kern_conv_workspace(b->k, &g), 0);
    o.m[6] = buffer(b, nw * 4, 0);
    double flops = 2.0 * g.n * g.oh * g.ow * g.f * g.kh * g.kw * g.c;
    o.name = "conv_fwd", o.run = run_fwd;
    report(b, &o, shape, flops, 0);
    o.name = "conv_bwd_data", o.run = run_bwd_data;
    report(b, &o, shape, flops, 0);
    o.name = "conv_bwd_weights", o.run = run_bwd_weights;
    report(b, &o, shape, flops, 0);
    release(&o);
}

static void bench_memory_bound(struct bench *b)
{
    kern_pool p = {32, 62, 62, 32, 2, 2, 2, 2, 0, 0, 31, 31};
    size_t nx = (size_t)32 * 62 * 62 * 32, ny = nx / 4;
    struct op o = {.p = p};
    o.m[0] = buffer(b, nx * 4, 1);
    o.m[1] = buffer(b, ny * 4, 2);
    o.m[2] = buffer(b, ny * 4, 0);
    o.name = "maxpool_fwd", o.run = run_pool_fwd;
    report(b, &o, "32x62x62x32 k2 s2", 0, (nx + 2 * ny) * 4.0);
    o.name = "maxpool_bwd", o.run = run_pool_bwd;
    report(b, &o, "32x62x62x32 k2 s2", 0, (nx + 2 * ny) * 4.0);
    release(&o);

    o.rows = 32 * 62 * 62, o.cols = 32;
    o.m[0] = buffer(b, nx * 4, 1);
    o.m[1] = buffer(b, nx * 4, 2);
    for (int i = 2; i < 8; i++)
        o.m[i] = buffer(b, 32 * 4, (unsigned)i);
    o.name = "batchnorm_fwd_train", o.run = run_bn_fwd;
    report(b, &o, "123008x32", 0, 3.0 * nx * 4);
    o.name = "batchnorm_bwd", o.run = run_bn_bwd;
    report(b, &o, "123008x32", 0, 5.0 * nx * 4);
    /* what a conv layer's bias and relu cost around these (kernels.c) */
    o.name = "bias_relu_fwd", o.run = run_bias_act_fwd;
    report(b, &o, "123008x32", 0, 2.0 * nx * 4);
    o.name = "bias_relu_bwd", o.run = run_bias_act_bwd;
    report(b, &o, "123008x32", 0, 3.0 * nx * 4);
    release(&o);

    kern_image im = {1, 1000, 32, 32, 3, 64, 64, 1.0f / 255, 1, 4, 7, 1};
    int32_t idx[32];
    for (int i = 0; i < 32; i++)
        idx[i] = i * 31 % 1000;
    o.im = im, o.rows = 32;
    o.m[0] = buffer(b, (size_t)1000 * 32 * 32 * 3, 1);
    o.m[1] = buffer(b, sizeof idx, 0);
    o.m[2] = buffer(b, (size_t)32 * 64 * 64 * 3 * 4, 0);
    char err[ERR_LEN];
    if (ocl_write(b->c, o.m[1], 0, sizeof idx, idx, err) < 0)
        fprintf(stderr, "bench-conv: %s\n", err);
    o.name = "image_batch", o.run = run_image;
    report(b, &o, "32 of 32x32x3 u8 -> 64x64 flip crop 4", 0,
           32.0 * (32 * 32 * 3 + 64 * 64 * 3 * 4));
    release(&o);
}

/* One pass of the convolutions on a kern made with TRAINYARD_CONV=variant: the variant is read
 * when the kern is made (kernels/conv.c), so each pass needs its own. The memory-bound families
 * have one path and run in the first pass only. */
static int bench_variant(struct bench *b, const char *variant, int memory_bound)
{
    char err[ERR_LEN];
    setenv("TRAINYARD_CONV", variant, 1);
    if (kern_new(b->c, &b->k, err) < 0) {
        fprintf(stderr, "bench-conv: %s\n", err);
        return -1;
    }
    kern_conv l1 = {32, 64, 64, 3, 32, 3, 3, 1, 1, 0, 0, 62, 62};
    kern_conv l2 = {32, 31, 31, 32, 64, 3, 3, 1, 1, 1, 1, 31, 31};
    b->variant = variant;
    bench_conv(b, l1, "valid");
    bench_conv(b, l2, "same");
    if (memory_bound)
        bench_memory_bound(b);
    kern_free(b->k);
    b->k = NULL;
    return 0;
}

int main(int argc, char **argv)
{
    int quick, device_loop;
    if (fma_peak_args(argc, argv, "bench-conv", &quick, &device_loop) < 0)
        return 2;
    char err[ERR_LEN];
    ocl_device dev;
    struct bench b = {0};
    if (ocl_device_pick("any", &dev, err) < 0 || ocl_ctx_new(&dev, NULL, &b.c, err) < 0) {
        fprintf(stderr, "bench-conv: %s\n", err);
        return 1;
    }
    b.peak = fma_peak_print(b.c, device_loop);
    int rc = bench_variant(&b, "direct", !quick);
    if (rc == 0 && !quick) /* the im2col + kern_gemm path, for comparison */
        rc = bench_variant(&b, "gemm", 0);
    unsetenv("TRAINYARD_CONV");
    double first = b.peak;
    fma_peak_print(b.c, device_loop);
    b.peak = first;
    ocl_ctx_free(b.c);
    return rc < 0 ? 1 : 0;
}
