/* pool.cl: max and average pooling over NHWC (kern_pool2d_fwd / kern_pool2d_bwd).
 *
 * Forward: one work-item per output element (channel fastest, so neighbouring work-items read
 * neighbouring floats), walking its window over the cells inside the image. Max records the flat
 * input index it took (the first maximum in row-major window order); a window with no cell inside
 * gives 0 and index −1. Average divides by the number of cells inside (Keras' `same` rule).
 * Backward gathers instead of scattering: one work-item per input element adds the dy of every
 * window that covers it (max: only where argmax names this element; avg: dy/count), in a fixed
 * order, so overlapping windows need no atomics and the result is deterministic. */

#define POOL_MAX 0
#define POOL_AVG 1

/* Cells of the window at (oy, ox) inside the image. */
static inline int pool_count(int h, int w, int kh, int kw, int sh, int sw, int pt, int pl, int oy,
                             int ox)
{
    int y0 = oy * sh - pt, x0 = ox * sw - pl;
    int ny = min(y0 + kh, h) - max(y0, 0), nx = min(x0 + kw, w) - max(x0, 0);
    return ny > 0 && nx > 0 ? ny * nx : 0;
}

/* Global size (C rounded up, N·OH·OW rounded up). */
__kernel void pool_fwd(int mode, int nout, int h, int w, int c, int kh, int kw, int sh, int sw,
                       int pt, int pl, int oh, int ow, __global const float *x, __global float *y,
                       int has_arg, __global int *argmax)
{
    int ch = get_global_id(0), o = get_global_id(1);
    if (ch >= c || o >= nout)
        return;
    int ox = o % ow, t = o / ow, oy = t % oh, n = t / oh;
    int y0 = oy * sh - pt, x0 = ox * sw - pl;
    int ya = max(y0, 0), yb = min(y0 + kh, h), xa = max(x0, 0), xb = min(x0 + kw, w);
    float best = 0.0f, sum = 0.0f;
    int arg = -1;
    for (int yy = ya; yy < yb; yy++)
        for (int xx = xa; xx < xb; xx++) {
            int e = ((n * h + yy) * w + xx) * c + ch;
            float v = x[e];
            if (mode == POOL_AVG) {
                sum += v;
            } else if (arg < 0 || v > best) {
                best = v;
                arg = e;
            }
        }
    size_t oe = (size_t)o * c + ch;
    if (mode == POOL_AVG) {
        int cnt = (yb - ya) * (xb - xa);
        y[oe] = yb > ya && xb > xa ? sum / (float)cnt : 0.0f;
    } else {
        y[oe] = best;
        if (has_arg)
            argmax[oe] = arg;
    }
}

/* Global size (C rounded up, N·H·W rounded up). */
__kernel void pool_bwd(int mode, int npix, int h, int w, int c, int kh, int kw, int sh, int sw,
                       int pt, int pl, int oh, int ow, __global const float *dy,
                       __global const int *argmax, __global float *dx)
{
    int ch = get_global_id(0), p = get_global_id(1);
    if (ch >= c || p >= npix)
        return;
    int xx = p % w, t = p / w, yy = t % h, n = t / h;
    int e = p * c + ch;
    /* Windows covering yy: oy·sh − pt ≤ yy ≤ oy·sh − pt + kh − 1. */
    int ty = yy + pt - kh + 1, tx = xx + pl - kw + 1;
    int oya = ty <= 0 ? 0 : (ty + sh - 1) / sh, oyb = min((yy + pt) / sh, oh - 1);
    int oxa = tx <= 0 ? 0 : (tx + sw - 1) / sw, oxb = min((xx + pl) / sw, ow - 1);
    float s = 0.0f;
    for (int oy = oya; oy <= oyb; oy++)
        for (int ox = oxa; ox <= oxb; ox++) {
            size_t oe = (size_t)((n * oh + oy) * ow + ox) * c + ch;
            if (mode == POOL_AVG)
                s += dy[oe] / (float)pool_count(h, w, kh, kw, sh, sw, pt, pl, oy, ox);
            else if (argmax[oe] == e)
                s += dy[oe];
        }
    dx[e] = s;
}
