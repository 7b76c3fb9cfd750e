/* pool.cl: max and average pooling over NHWC (kern_pool2d_fwd / kern_pool2d_bwd).
 *
 * pool_fwd and pool_bwd are CPU-shaped like gemm_cpu (the GPU forms are at the end of the file):
 * one work-item per work-group, each group one row of the output
 * (forward) or a band of input rows (backward) of one image, walking its pixels with the channels,
 * consecutive in NHWC, 16 at a time in float16 (the rest one by one). Forward takes each window's
 * cells inside the image: max keeps the first largest and records its flat input index, avg
 * divides by the number of cells inside (Keras' `same` rule); a window with no cell inside gives
 * 0 and index −1. Backward gathers instead of scattering: each input element adds the dy of every
 * window that covers it (max: only where argmax names this element; avg: dy/count), in a fixed
 * order, so overlapping windows need no atomics and the result is deterministic. */

#define POOL_MAX 0
#define POOL_AVG 1

/* One channel ch of the window rows [ya, yb) × columns [xa, xb) of image n: the max (the first
 * largest, its flat input index into *arg when has_arg) or the average over the cells inside. */
static inline void pool_one(int mode, int h, int w, int c, int n, int ch, int ya, int yb, int xa,
                            int xb, __global const float *x, __global float *y, int has_arg,
                            __global int *arg)
{
    float best = 0.0f, sum = 0.0f;
    int at = -1;
    for (int yy = ya; yy < yb; yy++)
        for (int xx = xa; xx < xb; xx++) {
            int e = ((n * h + yy) * w + xx) * c + ch;
            float v = x[e];
            sum += v;
            if (at < 0 || v > best) {
                best = v;
                at = e;
            }
        }
    if (mode == POOL_AVG) {
        int cells = max(yb - ya, 0) * max(xb - xa, 0);
        *y = cells ? sum / (float)cells : 0.0f;
    } else {
        *y = best;
        if (has_arg)
            *arg = at;
    }
}

/* Output row (n, oy) for every ox and channel. Global size N·OH, local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
pool_fwd(int mode, int h, int w, int c, int kh, int kw, int sh, int sw, int pt, int pl, int oh,
         int ow, __global const float *x, __global float *y, int has_arg, __global int *argmax)
{
    int row = get_global_id(0), n = row / oh, oy = row % oh;
    int y0 = oy * sh - pt, ya = max(y0, 0), yb = min(y0 + kh, h);
    for (int ox = 0; ox < ow; ox++) {
        int x0 = ox * sw - pl, xa = max(x0, 0), xb = min(x0 + kw, w);
        size_t o = ((size_t)row * ow + ox) * c;
        int cells = max(yb - ya, 0) * max(xb - xa, 0);
        int ch = 0;
        for (; ch + 16 <= c; ch += 16) {
            float16 best = 0.0f, sum = 0.0f;
            int16 arg = -1;
            int first = 1;
            for (int yy = ya; yy < yb; yy++)
                for (int xx = xa; xx < xb; xx++) {
                    int e = ((n * h + yy) * w + xx) * c + ch;
                    float16 v = vload16(0, x + e);
                    if (mode == POOL_AVG) {
                        sum += v;
                    } else if (first) {
                        best = v;
                        arg = (int16)(e) +
                              (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                        first = 0;
                    } else {
                        int16 take = v > best;
                        best = select(best, v, take);
                        arg = select(arg,
                                     (int16)(e) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                          13, 14, 15),
                                     take);
                    }
                }
            if (mode == POOL_AVG) {
                vstore16(cells ? sum / (float)cells : (float16)0.0f, 0, y + o + ch);
            } else {
                vstore16(best, 0, y + o + ch);
                if (has_arg)
                    vstore16(arg, 0, argmax + o + ch);
            }
        }
        for (; ch < c; ch++)
            pool_one(mode, h, w, c, n, ch, ya, yb, xa, xb, x, y + o + ch, has_arg, argmax + o + ch);
    }
}

/* Cells of the window at (oy, ox) inside the image. */
static inline int pool_count(int h, int w, int kh, int kw, int sh, int sw, int pt, int pl, int oy,
                             int ox)
{
    int y0 = oy * sh - pt, x0 = ox * sw - pl;
    int ny = min(y0 + kh, h) - max(y0, 0), nx = min(x0 + kw, w) - max(x0, 0);
    return ny > 0 && nx > 0 ? ny * nx : 0;
}

/* The gradient of input element e (channel ch of image n): the dy of every window
 * [oya, oyb] × [oxa, oxb] that covers it, max: where argmax names e, avg: over its count. */
static inline float pool_grad_one(int mode, int h, int w, int c, int kh, int kw, int sh, int sw,
                                  int pt, int pl, int oh, int ow, int n, int ch, int e, int oya,
                                  int oyb, int oxa, int oxb, __global const float *dy,
                                  __global const int *argmax)
{
    float s = 0.0f;
    for (int oy = oya; oy <= oyb; oy++)
        for (int ox = oxa; ox <= oxb; ox++) {
            size_t o = ((size_t)(n * oh + oy) * ow + ox) * c + ch;
            if (mode == POOL_AVG)
                s += dy[o] / (float)pool_count(h, w, kh, kw, sh, sw, pt, pl, oy, ox);
            else if (argmax[o] == e)
                s += dy[o];
        }
    return s;
}

/* Input rows [b·band, (b+1)·band) of image n (group (n, b)) for every xx and channel. The range
 * of windows covering each column is the same on every row: it is tabled once per group in
 * oxr (2·w ints of __local), so the inner loops divide nothing. Global size N·ceil(H/band),
 * local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
pool_bwd(int mode, int h, int w, int c, int kh, int kw, int sh, int sw, int pt, int pl, int oh,
         int ow, int band, __global const float *dy, __global const int *argmax, __global float *dx,
         __local int *oxr)
{
    int bands = (h + band - 1) / band, grp = get_global_id(0), n = grp / bands;
    int y_a = grp % bands * band, y_b = min(h, y_a + band);
    for (int xx = 0; xx < w; xx++) {
        int tx = xx + pl - kw + 1;
        oxr[2 * xx] = tx <= 0 ? 0 : (tx + sw - 1) / sw;
        oxr[2 * xx + 1] = min((xx + pl) / sw, ow - 1);
    }
    for (int yy = y_a; yy < y_b; yy++) {
        /* windows covering yy: oy·sh − pt ≤ yy ≤ oy·sh − pt + kh − 1 */
        int ty = yy + pt - kh + 1;
        int oya = ty <= 0 ? 0 : (ty + sh - 1) / sh, oyb = min((yy + pt) / sh, oh - 1);
        for (int xx = 0; xx < w; xx++) {
            int oxa = oxr[2 * xx], oxb = oxr[2 * xx + 1];
            int e0 = ((n * h + yy) * w + xx) * c;
            int ch = 0;
            for (; ch + 16 <= c; ch += 16) {
                float16 s = 0.0f;
                int16 me = (int16)(e0 + ch) +
                           (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                for (int oy = oya; oy <= oyb; oy++)
                    for (int ox = oxa; ox <= oxb; ox++) {
                        size_t o = ((size_t)(n * oh + oy) * ow + ox) * c + ch;
                        float16 g = vload16(0, dy + o);
                        if (mode == POOL_AVG)
                            s += g / (float)pool_count(h, w, kh, kw, sh, sw, pt, pl, oy, ox);
                        else
                            s += select((float16)0.0f, g, vload16(0, argmax + o) == me);
                    }
                vstore16(s, 0, dx + e0 + ch);
            }
            for (; ch < c; ch++)
                dx[e0 + ch] = pool_grad_one(mode, h, w, c, kh, kw, sh, sw, pt, pl, oh, ow, n, ch,
                                            e0 + ch, oya, oyb, oxa, oxb, dy, argmax);
        }
    }
}

/* The GPU forms: one work-item per output element (forward) or input element (backward), the
 * channel fastest, so neighbouring work-items read and write neighbouring floats. Each takes the
 * cells in the order pool_fwd and pool_bwd do, so the results are the same bits. Global size
 * total (rounded up to the work-group size; the kernels check bounds). */
__kernel void pool_fwd_gpu(int mode, int h, int w, int c, int kh, int kw, int sh, int sw, int pt,
                           int pl, int oh, int ow, int total, __global const float *x,
                           __global float *y, int has_arg, __global int *argmax)
{
    int o = get_global_id(0);
    if (o >= total)
        return;
    int ch = o % c, t = o / c, ox = t % ow;
    t /= ow;
    int oy = t % oh, n = t / oh;
    int y0 = oy * sh - pt, ya = max(y0, 0), yb = min(y0 + kh, h);
    int x0 = ox * sw - pl, xa = max(x0, 0), xb = min(x0 + kw, w);
    pool_one(mode, h, w, c, n, ch, ya, yb, xa, xb, x, y + o, has_arg, argmax + o);
}

__kernel void pool_bwd_gpu(int mode, int h, int w, int c, int kh, int kw, int sh, int sw, int pt,
                           int pl, int oh, int ow, int total, __global const float *dy,
                           __global const int *argmax, __global float *dx)
{
    int e = get_global_id(0);
    if (e >= total)
        return;
    int ch = e % c, t = e / c, xx = t % w;
    t /= w;
    int yy = t % h, n = t / h;
    int ty = yy + pt - kh + 1, tx = xx + pl - kw + 1;
    int oya = ty <= 0 ? 0 : (ty + sh - 1) / sh, oyb = min((yy + pt) / sh, oh - 1);
    int oxa = tx <= 0 ? 0 : (tx + sw - 1) / sw, oxb = min((xx + pl) / sw, ow - 1);
    dx[e] = pool_grad_one(mode, h, w, c, kh, kw, sh, sw, pt, pl, oh, ow, n, ch, e, oya, oyb, oxa,
                          oxb, dy, argmax);
}
