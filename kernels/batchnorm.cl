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
 * forward Σ(x − x[0]) and Σ(x − x[0])², backward Σdy and Σdy·(x − mean)·invstd. One work-item
 * per group walking its rows, 16 columns at a time; acc holds 2·c floats. Global size nparts,
 * local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
bn_part(int mode, int rows, int c, int chunk, int nparts, __global const float *x,
        __global const float *dy, __global const float *mean, __global const float *invstd,
        __global float *part, __local float *acc)
{
    int p = get_global_id(0);
    int r0 = p * chunk, r1 = min(rows, r0 + chunk), c16 = c / 16 * 16;
    for (int e = 0; e < 2 * c; e++)
        acc[e] = 0.0f;
    /* fwd: shift = row 0, scale 1; bwd: shift = mean, scale = invstd */
    __global const float *shift = mode == BN_FWD ? x : mean;
    for (int r = r0; r < r1; r++) {
        __global const float *xr = x + (size_t)r * c, *gr = dy + (size_t)r * c;
        for (int col = 0; col < c16; col += 16) {
            float16 d = vload16(0, xr + col) - vload16(0, shift + col);
            float16 g = d;
            if (mode == BN_BWD) {
                g = vload16(0, gr + col);
                d = g * (d * vload16(0, invstd + col));
            } else {
                d = d * d;
            }
            vstore16(vload16(0, acc + col) + g, 0, acc + col);
            vstore16(vload16(0, acc + c + col) + d, 0, acc + c + col);
        }
        for (int col = c16; col < c; col++) {
            float d = xr[col] - shift[col], g = d;
            if (mode == BN_BWD) {
                g = gr[col];
                d = g * (d * invstd[col]);
            } else {
                d = d * d;
            }
            acc[col] += g;
            acc[c + col] += d;
        }
    }
    for (int col = 0; col < c; col++) {
        part[(size_t)p * c + col] = acc[col];
        part[(size_t)(nparts + p) * c + col] = acc[c + col];
    }
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

/* y = gamma·(x − mean)·invstd + beta over rows [p·chunk, (p+1)·chunk), where invstd = stat
 * (training) or 1/sqrt(stat + eps) (the moving variance, inference), kept per column in k (c
 * floats of __local). Global size ceil(rows/chunk), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
bn_apply(int rows, int c, int chunk, int stat_is_var, float eps, __global const float *x,
         __global const float *gamma, __global const float *beta, __global const float *mean,
         __global const float *stat, __global float *y, __local float *k)
{
    int p = get_global_id(0);
    int r0 = p * chunk, r1 = min(rows, r0 + chunk), c16 = c / 16 * 16;
    for (int col = 0; col < c; col++)
        k[col] = gamma[col] * (stat_is_var ? 1.0f / sqrt(stat[col] + eps) : stat[col]);
    for (int r = r0; r < r1; r++) {
        __global const float *xr = x + (size_t)r * c;
        __global float *yr = y + (size_t)r * c;
        for (int col = 0; col < c16; col += 16)
            vstore16(fma(vload16(0, k + col), vload16(0, xr + col) - vload16(0, mean + col),
                         vload16(0, beta + col)),
                     0, yr + col);
        for (int col = c16; col < c; col++)
            yr[col] = fma(k[col], xr[col] - mean[col], beta[col]);
    }
}

/* dx = gamma·invstd·(dy − dbeta/rows − x̂·dgamma/rows) over rows [p·chunk, (p+1)·chunk).
 * Global size ceil(rows/chunk), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
bn_bwd_apply(int rows, int c, int chunk, __global const float *x, __global const float *dy,
             __global const float *gamma, __global const float *mean, __global const float *invstd,
             __global const float *dgamma, __global const float *dbeta, __global float *dx)
{
    int p = get_global_id(0);
    int r0 = p * chunk, r1 = min(rows, r0 + chunk), c16 = c / 16 * 16;
    float inv_rows = 1.0f / (float)rows;
    for (int r = r0; r < r1; r++) {
        size_t e = (size_t)r * c;
        for (int col = 0; col < c16; col += 16) {
            float16 is = vload16(0, invstd + col);
            float16 xhat = (vload16(0, x + e + col) - vload16(0, mean + col)) * is;
            float16 g = vload16(0, dy + e + col) - vload16(0, dbeta + col) * inv_rows -
                        xhat * vload16(0, dgamma + col) * inv_rows;
            vstore16(vload16(0, gamma + col) * is * g, 0, dx + e + col);
        }
        for (int col = c16; col < c; col++) {
            float is = invstd[col], xhat = (x[e + col] - mean[col]) * is;
            dx[e + col] = gamma[col] * is *
                          (dy[e + col] - dbeta[col] * inv_rows - xhat * dgamma[col] * inv_rows);
        }
    }
}
