/* conv.cl: 2-D convolution over NHWC activations with HWIO weights [kh][kw][c][f] (the
 * kern_conv2d_* contracts in kernels/kernels.h).
 *
 * The convolutions are GEMMs over the patch matrix col[N·OH·OW][KH·KW·C], row r = (n, oy, ox),
 * column q = (i, j, ch) = x[n, oy·sh − pt + i, ox·sw − pl + j, ch] or 0 outside the image:
 *   forward         y  = col · W                 (M = N·OH·OW, N = F, K = KH·KW·C)
 *   backward-data   dcol = dy · Wᵀ, then dx = col2im(dcol)
 *   backward-weights dW = colᵀ · dy              (K = N·OH·OW, the long sum; split by kern_gemm)
 * The host (kernels/conv.c) runs the GEMMs with kern_gemm; this file holds the two data
 * movements. conv_col2im gathers, one work-item per dx element adding its (at most KH·KW)
 * patch entries in a fixed order, so no two work-items write one address and the result does not
 * depend on scheduling. */

/* col[r][q] for r < rows, q < KH·KW·C. Global size (KH·KW·C rounded up, rows rounded up). */
__kernel void conv_im2col(int h, int w, int c, int kh, int kw, int sh, int sw, int pt, int pl,
                          int oh, int ow, int rows, __global const float *x, __global float *col)
{
    int q = get_global_id(0), r = get_global_id(1);
    int kkc = kh * kw * c;
    if (q >= kkc || r >= rows)
        return;
    int ch = q % c, ij = q / c, j = ij % kw, i = ij / kw;
    int ox = r % ow, t = r / ow, oy = t % oh, n = t / oh;
    int y = oy * sh - pt + i, xx = ox * sw - pl + j;
    float v = 0.0f;
    if (y >= 0 && y < h && xx >= 0 && xx < w)
        v = x[((size_t)(n * h + y) * w + xx) * c + ch];
    col[(size_t)r * kkc + q] = v;
}

/* dx[n, y, x, ch] = Σ over the patch entries that read it: dcol[(n, oy, ox)][(i, j, ch)] with
 * oy·sh − pt + i = y and ox·sw − pl + j = x. Global size (C rounded up, N·H·W rounded up). */
__kernel void conv_col2im(int npix, int h, int w, int c, int kh, int kw, int sh, int sw, int pt,
                          int pl, int oh, int ow, __global const float *dcol, __global float *dx)
{
    int ch = get_global_id(0), p = get_global_id(1);
    if (ch >= c || p >= npix)
        return;
    int xx = p % w, t = p / w, y = t % h, n = t / h;
    int kkc = kh * kw * c;
    float s = 0.0f;
    for (int i = 0; i < kh; i++) {
        int ty = y + pt - i;
        if (ty < 0 || ty % sh)
            continue;
        int oy = ty / sh;
        if (oy >= oh)
            continue;
        for (int j = 0; j < kw; j++) {
            int tx = xx + pl - j;
            if (tx < 0 || tx % sw)
                continue;
            int ox = tx / sw;
            if (ox >= ow)
                continue;
            s += dcol[(size_t)((n * oh + oy) * ow + ox) * kkc + (i * kw + j) * c + ch];
        }
    }
    dx[(size_t)p * c + ch] = s;
}
