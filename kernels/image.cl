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

/* The source value at (y0|y1, x0|x1) blend for channel ch of an image starting at base. */
static inline float image_sample(int src_u8, __global const uchar *src, size_t r0, size_t r1,
                                 int x0, int x1, float lx, float ly)
{
    float a, b, d, e;
    if (src_u8) {
        a = src[r0 + x0], b = src[r0 + x1], d = src[r1 + x0], e = src[r1 + x1];
    } else {
        __global const float *f = (__global const float *)src;
        a = f[r0 + x0], b = f[r0 + x1], d = f[r1 + x0], e = f[r1 + x1];
    }
    float top = a + (b - a) * lx, bot = d + (e - d) * lx;
    return top + (bot - top) * ly;
}

/* Output image i (dh × dw × c) of the batch. Global size rows, local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
image_batch(int src_u8, int n_src, int sh, int sw, int c, int dh, int dw, float scale, float ry,
            float rx, int flip, int crop, ulong seed, ulong ebase, int rows,
            __global const uchar *src, __global const int *idx, int start, int has_norm,
            __global const float *mean, __global const float *std, __global float *dst)
{
    int i = get_global_id(0);
    __global float *out = dst + (size_t)i * dh * dw * c;
    int img = idx[start + i];
    if (img < 0 || img >= n_src) {
        for (int e = 0; e < dh * dw * c; e++)
            out[e] = 0.0f;
        return;
    }
    ulong key = common_mix64(seed), ctr = (ebase + (ulong)img) * 4UL;
    int oy = 0, ox = 0, span = 2 * crop + 1;
    int flipped = flip && common_uniform(key, ctr) < 0.5f;
    if (crop > 0) {
        oy = min((int)(common_uniform(key, ctr + 1UL) * (float)span), 2 * crop);
        ox = min((int)(common_uniform(key, ctr + 2UL) * (float)span), 2 * crop);
    }
    size_t base = (size_t)img * sh * sw * c;
    for (int y = 0; y < dh; y++) {
        int py = y + oy - crop;
        int row_in = py >= 0 && py < dh;
        float fy = max(((float)py + 0.5f) * ry - 0.5f, 0.0f);
        int y0 = min((int)fy, sh - 1), y1 = min(y0 + 1, sh - 1);
        float ly = fy - (float)y0;
        size_t r0 = base + (size_t)y0 * sw * c, r1 = base + (size_t)y1 * sw * c;
        for (int x = 0; x < dw; x++, out += c) {
            int px = (flipped ? dw - 1 - x : x) + ox - crop;
            if (!row_in || px < 0 || px >= dw) {
                for (int ch = 0; ch < c; ch++)
                    out[ch] = 0.0f;
                continue;
            }
            float fx = max(((float)px + 0.5f) * rx - 0.5f, 0.0f);
            int x0 = min((int)fx, sw - 1), x1 = min(x0 + 1, sw - 1);
            float lx = fx - (float)x0;
            for (int ch = 0; ch < c; ch++) {
                float v = image_sample(src_u8, src, r0 + ch, r1 + ch, x0 * c, x1 * c, lx, ly);
                v *= scale;
                out[ch] = has_norm ? (v - mean[ch]) / std[ch] : v;
            }
        }
    }
}
