/* activation.cl: bias + activation, fused, forward and backward (kern_bias_act_fwd/_bwd).
 *
 * act_bias_fwd: one work-item per element of the rows×cols matrix, y = act(y + bias[c]) in place,
 * on a 2-D range (columns, rows) so that no work-item divides by cols (a 1-D range with i % cols
 * measured 27% slower on PoCL for 100000×64). The activation is an int argument; it is the same
 * for every work-item, so the switch costs a uniform branch, and one kernel serves all four.
 *
 * act_bias_bwd: dy ← dy·act'(y) in place, and the column sums of the new dy. A work-group is lx_n
 * × ly_n work-items (lx_n columns side by side so that a row segment is read contiguously, ly_n
 * rows): it owns lx_n columns of one chunk of `chunk` rows. Each work-item walks its column down
 * its own run of chunk / ly_n consecutive rows, then the work-group adds the ly_n partial sums as
 * a tree and writes one row of `part` (part[chunk index][c]). Consecutive rows rather than a
 * stride of ly_n rows: a GPU warp still reads 32 adjacent columns of one row at a time, and a CPU
 * walks memory in order instead of in ly_n-row jumps (4 KiB for 128 columns, which thrashed cache
 * sets: PoCL took 90 ms for 100000×128 that way, 13 ms this way). With a single chunk `part` is
 * dbias itself and one enqueue does everything; with several, act_bias_bwd_sum adds the chunk
 * rows. The host picks the chunk so that a work-item adds a few dozen values at most, whatever the
 * height: tall full-batch matrices spread over many work-groups instead of one long serial loop,
 * and the result is deterministic for a given shape and local size (no atomics). */

/* Global (cols, rows), each rounded up to the local size. */
__kernel void act_bias_fwd(int rows, int cols, int act, __global float *y,
                           __global const float *bias)
{
    int c = get_global_id(0), r = get_global_id(1);
    if (c >= cols || r >= rows)
        return;
    int i = r * cols + c;
    y[i] = common_act(act, y[i] + bias[c]);
}

/* Local size (lx_n, ly_n) with ly_n a power of two; global (cols rounded up to lx_n,
 * ly_n · number of chunks); s holds lx_n·ly_n floats. */
__kernel void act_bias_bwd(int rows, int cols, int act, int chunk, __global const float *y,
                           __global float *dy, __global float *part, __local float *s)
{
    int lx = get_local_id(0), ly = get_local_id(1);
    int lx_n = get_local_size(0), ly_n = get_local_size(1);
    int c = get_global_id(0), g = get_group_id(1);
    int r0 = g * chunk;
    int r1 = rows - r0 < chunk ? rows : r0 + chunk;
    /* Row lane ly walks its own run of chunk / ly_n consecutive rows. */
    int run = chunk / ly_n;
    int a = r0 + ly * run;
    int b = r1 - a < run ? r1 : a + run;
    float acc = 0.0f;
    if (c < cols) {
        for (int r = a; r < b; r++) {
            int i = r * cols + c;
            float d = dy[i] * common_act_grad(act, y[i]);
            dy[i] = d;
            acc += d;
        }
    }
    s[ly * lx_n + lx] = acc;
    common_local_colsum(s, lx, ly, lx_n, ly_n);
    if (ly == 0 && c < cols)
        part[g * cols + c] = s[lx];
}

/* Second pass when act_bias_bwd used several chunks: dbias[c] = Σ_j part[j][c] for j < nparts,
 * same work-group shape, a single group row. nparts 0 writes zeros (the sum of no rows). */
__kernel void act_bias_bwd_sum(int nparts, int cols, __global const float *part,
                               __global float *dbias, __local float *s)
{
    int lx = get_local_id(0), ly = get_local_id(1);
    int lx_n = get_local_size(0), ly_n = get_local_size(1);
    int c = get_global_id(0);
    float acc = 0.0f;
    if (c < cols)
        for (int j = ly; j < nparts; j += ly_n)
            acc += part[j * cols + c];
    s[ly * lx_n + lx] = acc;
    common_local_colsum(s, lx, ly, lx_n, ly_n);
    if (ly == 0 && c < cols)
        dbias[c] = s[lx];
}

/* CPU devices (PoCL) run the two below instead, shaped like gemm_cpu: one work-item per
 * work-group walking a chunk of whole rows, 16 columns at a time in float16 (the rest one by
 * one), which PoCL runs several times faster than one work-item per element. */
/* Rows [g·chunk, (g+1)·chunk). Global size ceil(rows/chunk), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
act_bias_fwd_cpu(int rows, int cols, int act, int chunk, __global float *y,
                 __global const float *bias)
{
    int g = get_global_id(0), r0 = g * chunk, r1 = min(rows, r0 + chunk), c16 = cols / 16 * 16;
    for (int r = r0; r < r1; r++) {
        __global float *yr = y + (size_t)r * cols;
        for (int c = 0; c < c16; c += 16)
            vstore16(common_act16(act, vload16(0, yr + c) + vload16(0, bias + c)), 0, yr + c);
        for (int c = c16; c < cols; c++)
            yr[c] = common_act(act, yr[c] + bias[c]);
    }
}

#define ACT_BLOCK 64 /* rows summed before their block sum joins the chunk's */

/* dy ← dy·act'(y) over rows [g·chunk, (g+1)·chunk) and their column sums into part[g][c], added
 * in blocks of ACT_BLOCK rows (acc) whose sums join tot, so no float sum runs longer than
 * ACT_BLOCK + chunk/ACT_BLOCK terms. acc and tot hold cols floats each. Global size
 * ceil(rows/chunk), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
act_bias_bwd_cpu(int rows, int cols, int act, int chunk, __global const float *y,
                 __global float *dy, __global float *part, __local float *acc, __local float *tot)
{
    int g = get_global_id(0), r0 = g * chunk, r1 = min(rows, r0 + chunk), c16 = cols / 16 * 16;
    for (int c = 0; c < cols; c++)
        acc[c] = tot[c] = 0.0f;
    for (int r = r0; r < r1; r++) {
        size_t e = (size_t)r * cols;
        for (int c = 0; c < c16; c += 16) {
            float16 d = vload16(0, dy + e + c) * common_act_grad16(act, vload16(0, y + e + c));
            vstore16(d, 0, dy + e + c);
            vstore16(vload16(0, acc + c) + d, 0, acc + c);
        }
        for (int c = c16; c < cols; c++) {
            float d = dy[e + c] * common_act_grad(act, y[e + c]);
            dy[e + c] = d;
            acc[c] += d;
        }
        if ((r - r0) % ACT_BLOCK == ACT_BLOCK - 1 || r == r1 - 1)
            for (int c = 0; c < cols; c++) {
                tot[c] += acc[c];
                acc[c] = 0.0f;
            }
    }
    for (int c = 0; c < cols; c++)
        part[(size_t)g * cols + c] = tot[c];
}
