/* optim.cl: the optimiser updates, one work-item per parameter (kern_sgd, kern_adam), and
 * optim_adam_cpu, Adam as CPU devices run it (float16 runs per work-group).
 *
 * SGD uses the Keras form of momentum (v = μ·v − lr·g; w += v); with μ = 0 the velocity buffer
 * is neither read nor written (the host passes has_v = 0 and may pass NULL). Adam takes its bias
 * corrections bc1 = 1 − β1^t and bc2 = 1 − β2^t from the host, which knows t; the update is
 * w −= lr·(m/bc1) / (sqrt(v/bc2) + eps), eps outside the square root as in Keras. */

__kernel void optim_sgd(int n, float lr, float momentum, int has_v, __global float *w,
                        __global const float *g, __global float *v)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    if (has_v) {
        float vi = momentum * v[i] - lr * g[i];
        v[i] = vi;
        w[i] += vi;
    } else {
        w[i] -= lr * g[i];
    }
}

/* Adam's update of parameter i; optim_adam_cpu's float16 lanes use the same expressions. */
static inline void adam_one(int i, float lr, float beta1, float beta2, float eps, float bc1,
                            float bc2, __global float *w, __global const float *g,
                            __global float *m, __global float *v)
{
    float gi = g[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi / bc1) / (sqrt(vi / bc2) + eps);
}

__kernel void optim_adam(int n, float lr, float beta1, float beta2, float eps, float bc1,
                         float bc2, __global float *w, __global const float *g,
                         __global float *m, __global float *v)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    adam_one(i, lr, beta1, beta2, eps, bc1, bc2, w, g, m, v);
}

/* optim_adam for CPU devices: one work-item per work-group walking [g·chunk, (g+1)·chunk) 16
 * parameters at a time, the same expressions lane by lane (so the same bits as optim_adam), the
 * rest one by one. Global size ceil(n/chunk), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
optim_adam_cpu(int n, int chunk, float lr, float beta1, float beta2, float eps, float bc1,
               float bc2, __global float *w, __global const float *g, __global float *m,
               __global float *v)
{
    int i = get_global_id(0) * chunk, i1 = min(n, i + chunk);
    for (; i + 16 <= i1; i += 16) {
        float16 gi = vload16(0, g + i);
        float16 mi = beta1 * vload16(0, m + i) + (1.0f - beta1) * gi;
        float16 vi = beta2 * vload16(0, v + i) + (1.0f - beta2) * gi * gi;
        vstore16(mi, 0, m + i);
        vstore16(vi, 0, v + i);
        vstore16(vload16(0, w + i) - lr * (mi / bc1) / (sqrt(vi / bc2) + eps), 0, w + i);
    }
    for (; i < i1; i++)
        adam_one(i, lr, beta1, beta2, eps, bc1, bc2, w, g, m, v);
}
