/* image.cl: the image batch (kern_image_batch) — gather, resize, scale, standardise and augment
 * in one pass, one work-item per output float.
 *
 * Output (i, y, x, ch) of image idx[start + i]: the augmentation maps (y, x) to a position of
 * the resized image (a crop of it zero-padded by `crop` on each side, mirrored when flipped);
 * that position is sampled bilinearly with half-pixel centres from the source (PyTorch's
 * align_corners=False rule: src = max(0, (dst + 0.5)·(in/out) − 0.5), neighbours clamped to the
 * edge), then scaled and standardised. Positions in the padding are 0. The transform of each
 * image comes from common_uniform keyed by the seed, counter (((epoch << 32) + image)·4 + d):
 * d = 0 the flip, 1 and 2 the crop offsets (kernels.h; ref_image_batch is the host twin). */

/* Global size (dw·c rounded up, rows·dh rounded up). */
__kernel void image_batch(int src_u8, int n_src, int sh, int sw, int c, int dh, int dw, float scale,
                          float ry, float rx, int flip, int crop, ulong seed, ulong ebase, int rows,
                          __global const uchar *src, __global const int *idx, int start,
                          int has_norm, __global const float *mean, __global const float *std,
                          __global float *dst)
{
    int q = get_global_id(0), r = get_global_id(1);
    if (q >= dw * c || r >= rows * dh)
        return;
    int ch = q % c, x = q / c, y = r % dh, i = r / dh;
    __global float *out = dst + ((size_t)r * dw + x) * c + ch;
    int img = idx[start + i];
    if (img < 0 || img >= n_src) {
        *out = 0.0f;
        return;
    }
    ulong key = common_mix64(seed), ctr = (ebase + (ulong)img) * 4UL;
    int oy = 0, ox = 0, span = 2 * crop + 1;
    if (flip && common_uniform(key, ctr) < 0.5f)
        x = dw - 1 - x;
    if (crop > 0) {
        oy = min((int)(common_uniform(key, ctr + 1UL) * (float)span), 2 * crop);
        ox = min((int)(common_uniform(key, ctr + 2UL) * (float)span), 2 * crop);
    }
    int py = y + oy - crop, px = x + ox - crop;
    if (py < 0 || py >= dh || px < 0 || px >= dw) {
        *out = 0.0f;
        return;
    }
    float fy = max(((float)py + 0.5f) * ry - 0.5f, 0.0f);
    float fx = max(((float)px + 0.5f) * rx - 0.5f, 0.0f);
    int y0 = min((int)fy, sh - 1), x0 = min((int)fx, sw - 1);
    int y1 = min(y0 + 1, sh - 1), x1 = min(x0 + 1, sw - 1);
    float ly = fy - (float)y0, lx = fx - (float)x0;
    size_t base = (size_t)img * sh * sw * c + ch;
    size_t e00 = base + ((size_t)y0 * sw + x0) * c, e01 = base + ((size_t)y0 * sw + x1) * c;
    size_t e10 = base + ((size_t)y1 * sw + x0) * c, e11 = base + ((size_t)y1 * sw + x1) * c;
    float a, b, d, e;
    if (src_u8) {
        a = src[e00], b = src[e01], d = src[e10], e = src[e11];
    } else {
        __global const float *f = (__global const float *)src;
        a = f[e00], b = f[e01], d = f[e10], e = f[e11];
    }
    float top = a + (b - a) * lx, bot = d + (e - d) * lx;
    float v = (top + (bot - top) * ly) * scale;
    if (has_norm)
        v = (v - mean[ch]) / std[ch];
    *out = v;
}
