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
