/* ref.c: plain-C references of every kernel but GEMM (ref_gemm.c), written for clarity, not speed.
 *
 * They define what the OpenCL kernels must compute; tests/unit/kernels compares the two. Long sums
 * accumulate in double, so the reference is the more accurate side of every comparison.
 * Element-wise math stays in float where the kernel's result is meant to be bit-identical (the
 * dropout mask and its scale); elsewhere double is used and the tests allow a tolerance.
 *
 * Edge cases shared with the kernels (kernels.h says the same):
 * - softmax_xent: a label outside [0, cols) is never used as an index; that row gets
 *   loss = −ln(FLT_MIN) ≈ 87.34 (the loss of a probability clamped to the smallest normal float),
 *   correct = 0 and a zero dlogits row, so a bad label is visible in the loss but moves nothing.
 * - dropout: rate ≤ 0 keeps everything unscaled, rate ≥ 1 drops everything. */
#include "kernels/ref.h"

#include <math.h>
#include <stddef.h>

#include "kernels/kernels.h"

#define XENT_BAD_LABEL_LOSS 87.33654475f /* −ln(FLT_MIN) = 126·ln 2 */

static double act_apply(int act, double x)
{
    switch (act) {
    case KERN_ACT_RELU:
        return x > 0 ? x : 0;
    case KERN_ACT_TANH:
        return tanh(x);
    case KERN_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    default:
        return x;
    }
}

/* act'(x) written in terms of the output y = act(x). */
static double act_grad(int act, double y)
{
    switch (act) {
    case KERN_ACT_RELU:
        return y > 0 ? 1 : 0;
    case KERN_ACT_TANH:
        return 1 - y * y;
    case KERN_ACT_SIGMOID:
        return y * (1 - y);
    default:
        return 1;
    }
}

void ref_bias_act_fwd(int rows, int cols, int act, float *y, const float *bias)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float *p = &y[(size_t)r * cols + c];
            *p = (float)act_apply(act, (double)(*p + bias[c]));
        }
}

void ref_bias_act_bwd(int rows, int cols, int act, const float *y, float *dy, float *dbias)
{
    for (int c = 0; c < cols; c++) {
        double s = 0;
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)r * cols + c;
            dy[i] = (float)(dy[i] * act_grad(act, y[i]));
            s += dy[i];
        }
        dbias[c] = (float)s;
    }
}

void ref_softmax_xent(int rows, int cols, const float *logits, const int32_t *labels, float scale,
                      float *dlogits, float *loss, float *correct)
{
    for (int r = 0; r < rows; r++) {
        const float *z = &logits[(size_t)r * cols];
        int label = labels[r], best = 0;
        for (int c = 1; c < cols; c++)
            if (z[c] > z[best]) /* ties keep the first maximum */
                best = c;
        double zmax = z[best], sum = 0;
        for (int c = 0; c < cols; c++)
            sum += exp(z[c] - zmax);
        int valid = label >= 0 && label < cols;
        loss[r] = valid ? (float)(log(sum) - (z[label] - zmax)) : XENT_BAD_LABEL_LOSS;
        correct[r] = valid && best == label ? 1.0f : 0.0f;
        if (!dlogits)
            continue;
        for (int c = 0; c < cols; c++) {
            double p = exp(z[c] - zmax) / sum - (c == label ? 1 : 0);
            dlogits[(size_t)r * cols + c] = valid ? (float)(p * scale) : 0.0f;
        }
    }
}

void ref_bce(int rows, const float *logits, const float *labels, float scale, float *dlogits,
             float *loss, float *correct)
{
    for (int r = 0; r < rows; r++) {
        double z = logits[r], y = labels[r];
        double sig = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
        loss[r] = (float)(fmax(z, 0) - z * y + log1p(exp(-fabs(z))));
        correct[r] = (z > 0) == (y > 0.5) ? 1.0f : 0.0f;
        if (dlogits)
            dlogits[r] = (float)((sig - y) * scale);
    }
}

void ref_mse(int rows, int cols, const float *pred, const float *target, float scale, float *dpred,
             float *loss)
{
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            double d = (double)pred[i] - target[i];
            s += d * d;
            if (dpred)
                dpred[i] = (float)(2 * d * scale / cols);
        }
        loss[r] = (float)(s / cols);
    }
}

/* The splitmix64 output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* The counter-th output of a splitmix64 stream whose state starts at mix64(seed): a pure function
 * of (seed, counter), so any element can be drawn independently. The top 24 bits of the high word
 * become a float in [0, 1) exactly, with no rounding on either side. */
float ref_uniform(uint64_t seed, uint64_t counter)
{
    uint64_t x = mix64(mix64(seed) + (counter + 1) * 0x9e3779b97f4a7c15ULL);
    uint32_t bits = (uint32_t)(x >> 32);
    return (float)(bits >> 8) * 5.9604644775390625e-8f; /* 2^-24 */
}

void ref_dropout(int n, float rate, uint64_t seed, uint64_t offset, const float *x, float *y)
{
    float scale = rate <= 0.0f ? 1.0f : rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
    for (int i = 0; i < n; i++)
        y[i] = ref_uniform(seed, offset + (uint64_t)i) >= rate ? x[i] * scale : 0.0f;
}

void ref_reduce_sum(int n, const float *x, float *out, int index, int accumulate)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    out[index] = accumulate ? (float)(out[index] + s) : (float)s;
}

void ref_sgd(int n, float lr, float momentum, float *w, const float *g, float *v)
{
    for (int i = 0; i < n; i++) {
        if (momentum == 0.0f) {
            w[i] -= lr * g[i];
        } else {
            v[i] = momentum * v[i] - lr * g[i];
            w[i] += v[i];
        }
    }
}

void ref_adam(int n, float lr, float beta1, float beta2, float eps, float bc1, float bc2, float *w,
              const float *g, float *m, float *v)
{
    for (int i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
        double step = (double)lr * (m[i] / (double)bc1) / (sqrt(v[i] / (double)bc2) + eps);
        w[i] = (float)(w[i] - step);
    }
}

void ref_gather_rows(int rows, int cols, const uint32_t *src, const int32_t *idx, int start,
                     uint32_t *dst)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            dst[(size_t)i * cols + j] = src[(size_t)idx[start + i] * cols + j];
}
