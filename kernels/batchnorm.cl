/* batchnorm.cl: batch normalisation over rows × c, per column (kern_batchnorm_*).
 *
 * Training forward is two passes over x plus one small one: bn_part sums each chunk of rows per
 * column into the scratch, bn_stats adds the chunks in order (so the statistics do not depend on
 * scheduling) and writes mean, invstd and the moving statistics, and bn_apply normalises. The
 * sums are of x − x[0][col] (a shift inside the column's range), so the variance
 * E[(x−s)²] − E[x−s]² does not lose its digits to a large mean. Backward is the same shape: bn_part
 * sums dy and dy·x̂, bn_grads adds them into dbeta and dgamma, and bn_bwd_apply writes
 *   dx = gamma·invstd·(dy − dbeta/rows − x̂·dgamma/rows).
 * Inference is bn_apply alone with the moving statistics. Every element-wise pass reads and
 * writes one element per work-item at the same index, so y may be x and dx may be dy. */

#define BN_FWD 0
#define BN_BWD 1

/* Column sums of rows [p·chunk, (p+1)·chunk) into part[p][col] and part[nparts + p][col]:
 * forward Σ(x − x[0]) and Σ(x − x[0])², backward Σdy and Σdy·(x − mean)·invstd.
 * Global size (c rounded up, nparts rounded up). */
__kernel void bn_part(int mode, int rows, int c, int chunk, int nparts, __global const float *x,
                      __global const float *dy, __global const float *mean,
                      __global const float *invstd, __global float *part)
{
    int col = get_global_id(0), p = get_global_id(1);
    if (col >= c || p >= nparts)
        return;
    int r0 = p * chunk, r1 = min(rows, r0 + chunk);
    float s1 = 0.0f, s2 = 0.0f;
    if (mode == BN_FWD) {
        float shift = x[col];
        for (int r = r0; r < r1; r++) {
            float d = x[(size_t)r * c + col] - shift;
            s1 += d;
            s2 = fma(d, d, s2);
        }
    } else {
        float m = mean[col], is = invstd[col];
        for (int r = r0; r < r1; r++) {
            size_t e = (size_t)r * c + col;
            float g = dy[e];
            s1 += g;
            s2 = fma(g, (x[e] - m) * is, s2);
        }
    }
    part[(size_t)p * c + col] = s1;
    part[(size_t)(nparts + p) * c + col] = s2;
}

/* The two sums of column col over the parts, added in part order. */
static float2 bn_sum_parts(int c, int nparts, __global const float *part, int col)
{
    float2 s = 0.0f;
    for (int p = 0; p < nparts; p++)
        s += (float2)(part[(size_t)p * c + col], part[(size_t)(nparts + p) * c + col]);
    return s;
}

/* Batch statistics from the parts, and the moving update. Global size c rounded up. */
__kernel void bn_stats(int rows, int c, int nparts, float momentum, float eps,
                       __global const float *part, __global const float *x,
                       __global float *moving_mean, __global float *moving_var,
                       __global float *save_mean, __global float *save_invstd)
{
    int col = get_global_id(0);
    if (col >= c)
        return;
    float2 s = bn_sum_parts(c, nparts, part, col);
    float m1 = s.x / (float)rows;
    float mean = x[col] + m1;
    float var = max(s.y / (float)rows - m1 * m1, 0.0f);
    save_mean[col] = mean;
    save_invstd[col] = 1.0f / sqrt(var + eps);
    moving_mean[col] = momentum * moving_mean[col] + (1.0f - momentum) * mean;
    moving_var[col] = momentum * moving_var[col] + (1.0f - momentum) * var;
}

/* dbeta = Σ dy, dgamma = Σ dy·x̂ from the parts (zeros when nparts is 0). Global size c. */
__kernel void bn_grads(int c, int nparts, __global const float *part, __global float *dgamma,
                       __global float *dbeta)
{
    int col = get_global_id(0);
    if (col >= c)
        return;
    float2 s = bn_sum_parts(c, nparts, part, col);
    dbeta[col] = s.x;
    dgamma[col] = s.y;
}

/* y = gamma·(x − mean)·invstd + beta, where invstd = stat (training) or 1/sqrt(stat + eps) (the
 * moving variance, inference). Global size (c rounded up, rows rounded up). */
__kernel void bn_apply(int rows, int c, int stat_is_var, float eps, __global const float *x,
                       __global const float *gamma, __global const float *beta,
                       __global const float *mean, __global const float *stat, __global float *y)
{
    int col = get_global_id(0), r = get_global_id(1);
    if (col >= c || r >= rows)
        return;
    float is = stat_is_var ? 1.0f / sqrt(stat[col] + eps) : stat[col];
    size_t e = (size_t)r * c + col;
    y[e] = fma(gamma[col] * is, x[e] - mean[col], beta[col]);
}

/* dx = gamma·invstd·(dy − dbeta/rows − x̂·dgamma/rows). Global size (c, rows), rounded up. */
__kernel void bn_bwd_apply(int rows, int c, __global const float *x, __global const float *dy,
                           __global const float *gamma, __global const float *mean,
                           __global const float *invstd, __global const float *dgamma,
                           __global const float *dbeta, __global float *dx)
{
    int col = get_global_id(0), r = get_global_id(1);
    if (col >= c || r >= rows)
        return;
    float is = invstd[col], inv_rows = 1.0f / (float)rows;
    size_t e = (size_t)r * c + col;
    float xhat = (x[e] - mean[col]) * is;
    dx[e] = gamma[col] * is * (dy[e] - dbeta[col] * inv_rows - xhat * dgamma[col] * inv_rows);
}
