/* optim.cl: the optimiser updates, one work-item per parameter (kern_sgd, kern_adam).
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

__kernel void optim_adam(int n, float lr, float beta1, float beta2, float eps, float bc1,
                         float bc2, __global float *w, __global const float *g,
                         __global float *m, __global float *v)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float gi = g[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi / bc1) / (sqrt(vi / bc2) + eps);
}
