/* image.cl: the image batch (kern_image_batch) — gather, resize, scale, standardise and augment
 * in one pass: image_batch one work-item per output image (CPU devices), image_batch_gpu one per
 * output float.
 *
 * Output (i, y, x, ch) of image idx[start + i]: the augmentation maps (y, x) to a position of
 * the resized image (a crop of it zero-padded by `crop` on each side, mirrored when flipped);
 * that position is sampled bilinearly with half-pixel centres from the source (PyTorch's
 * align_corners=False rule: src = max(0, (dst + 0.5)·(in/out) − 0.5), neighbours clamped to the
 * edge), then scaled and standardised. Positions in the padding are 0. The transform of each
 * image comes from common_uniform keyed by the seed, counter (((epoch << 32) + image)·4 + d):
 * d = 0 the flip, 1 and 2 the crop offsets (kernels.h; ref_image_batch is the host twin). */

/* The augmentation of image img this epoch: whether it is mirrored (the return value) and its
 * crop offsets *oy, *ox in [0, 2·crop]. */
static int image_transform(ulong seed, ulong ebase, int img, int flip, int crop, int *oy, int *ox)
{
    ulong key = common_mix64(seed), ctr = (ebase + (ulong)img) * 4UL;
    int span = 2 * crop + 1;
    *oy = *ox = 0;
    if (crop > 0) {
        *oy = min((int)(common_uniform(key, ctr + 1UL) * (float)span), 2 * crop);
        *ox = min((int)(common_uniform(key, ctr + 2UL) * (float)span), 2 * crop);
    }
    return flip && common_uniform(key, ctr) < 0.5f;
}

/* Source row sy of the image at base, resampled along x into h (dw·c floats) through the column
 * tables: output column x blends source columns xs0[x], xs1[x] (offsets in floats) by xl[x], or
 * is 0 where xs0[x] < 0 (the crop's padding). */
static void image_hrow(int src_u8, __global const uchar *src, size_t row, int c, int dw,
                       __local const int *xs0, __local const int *xs1, __local const float *xl,
                       __local float *h)
{
    __global const float *f = (__global const float *)src;
    for (int x = 0; x < dw; x++, h += c) {
        int o0 = xs0[x], o1 = xs1[x];
        float l = xl[x];
        for (int ch = 0; ch < c; ch++) {
            float a = 0.0f, b = 0.0f;
            if (o0 >= 0) {
                a = src_u8 ? (float)src[row + o0 + ch] : f[row + o0 + ch];
                b = src_u8 ? (float)src[row + o1 + ch] : f[row + o1 + ch];
            }
            h[ch] = a + (b - a) * l;
        }
    }
}

/* Output image i (dh × dw × c) of the batch, separably: the column tables once, then per output
 * row the two source rows resampled along x (each kept while the next output row needs it), then
 * one float16 pass down the row for the blend along y, the scale and the standardisation, whose
 * per-column mean and 1/std (0 in the crop's padding, so padding stays 0) are laid out along the
 * row once. Local buffers: xs0, xs1 (dw ints), xl (dw floats), h0, h1, mrow, irow (dw·c floats).
 * Global size rows, local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
image_batch(int src_u8, int n_src, int sh, int sw, int c, int dh, int dw, float scale, float ry,
            float rx, int flip, int crop, ulong seed, ulong ebase, int rows,
            __global const uchar *src, __global const int *idx, int start, int has_norm,
            __global const float *mean, __global const float *std, __global float *dst,
            __local int *xs0, __local int *xs1, __local float *xl, __local float *h0,
            __local float *h1, __local float *mrow, __local float *irow)
{
    int i = get_global_id(0), n = dw * c, n16 = n / 16 * 16;
    __global float *out = dst + (size_t)i * dh * n;
    int img = idx[start + i];
    if (img < 0 || img >= n_src) {
        for (int e = 0; e < dh * n; e++)
            out[e] = 0.0f;
        return;
    }
    int oy, ox, flipped = image_transform(seed, ebase, img, flip, crop, &oy, &ox);
    for (int x = 0; x < dw; x++) {
        int px = (flipped ? dw - 1 - x : x) + ox - crop, inside = px >= 0 && px < dw;
        float fx = max(((float)px + 0.5f) * rx - 0.5f, 0.0f);
        int x0 = min((int)fx, sw - 1), x1 = min(x0 + 1, sw - 1);
        xs0[x] = inside ? x0 * c : -1;
        xs1[x] = x1 * c;
        xl[x] = fx - (float)x0;
        for (int ch = 0; ch < c; ch++) {
            mrow[x * c + ch] = has_norm && inside ? mean[ch] : 0.0f;
            irow[x * c + ch] = !inside ? 0.0f : has_norm ? 1.0f / std[ch] : 1.0f;
        }
    }
    size_t base = (size_t)img * sh * sw * c, rowlen = (size_t)sw * c;
    int have0 = -1, have1 = -1; /* the source rows h0 and h1 hold */
    for (int y = 0; y < dh; y++, out += n) {
        int py = y + oy - crop;
        if (py < 0 || py >= dh) {
            for (int e = 0; e < n; e++)
                out[e] = 0.0f;
            continue;
        }
        float fy = max(((float)py + 0.5f) * ry - 0.5f, 0.0f);
        int y0 = min((int)fy, sh - 1), y1 = min(y0 + 1, sh - 1);
        float ly = fy - (float)y0;
        if (have0 != y0) {
            if (have1 == y0) {
                __local float *t = h0;
                h0 = h1, h1 = t, have0 = y0, have1 = -1;
            } else {
                image_hrow(src_u8, src, base + y0 * rowlen, c, dw, xs0, xs1, xl, h0);
                have0 = y0;
            }
        }
        if (have1 != y1) {
            image_hrow(src_u8, src, base + y1 * rowlen, c, dw, xs0, xs1, xl, h1);
            have1 = y1;
        }
        int e = 0;
        for (; e < n16; e += 16) {
            float16 a = vload16(0, h0 + e), b = vload16(0, h1 + e);
            float16 v = (a + (b - a) * ly) * scale;
            vstore16((v - vload16(0, mrow + e)) * vload16(0, irow + e), 0, out + e);
        }
        for (; e < n; e++) {
            float v = (h0[e] + (h1[e] - h0[e]) * ly) * scale;
            out[e] = (v - mrow[e]) * irow[e];
        }
    }
}

/* The GPU form: one work-item per output float (i, y, x, ch), the channel fastest, each doing
 * image_batch's arithmetic for its own float (the two source rows blended along x, then along
 * y, scaled and standardised), so the results are the same. Global size total = rows·dh·dw·c
 * (rounded up to the work-group size; the kernel checks bounds). */
__kernel void image_batch_gpu(int src_u8, int n_src, int sh, int sw, int c, int dh, int dw,
                              float scale, float ry, float rx, int flip, int crop, ulong seed,
                              ulong ebase, int total, __global const uchar *src,
                              __global const int *idx, int start, int has_norm,
                              __global const float *mean, __global const float *std,
                              __global float *dst)
{
    int o = get_global_id(0);
    if (o >= total)
        return;
    int ch = o % c, t = o / c, x = t % dw;
    t /= dw;
    int y = t % dh, i = t / dh;
    int img = idx[start + i];
    if (img < 0 || img >= n_src) {
        dst[o] = 0.0f;
        return;
    }
    int oy, ox, flipped = image_transform(seed, ebase, img, flip, crop, &oy, &ox);
    int px = (flipped ? dw - 1 - x : x) + ox - crop, py = y + oy - crop;
    if (px < 0 || px >= dw || py < 0 || py >= dh) {
        dst[o] = 0.0f;
        return;
    }
    float fx = max(((float)px + 0.5f) * rx - 0.5f, 0.0f);
    int x0 = min((int)fx, sw - 1), x1 = min(x0 + 1, sw - 1);
    float lx = fx - (float)x0;
    float fy = max(((float)py + 0.5f) * ry - 0.5f, 0.0f);
    int y0 = min((int)fy, sh - 1), y1 = min(y0 + 1, sh - 1);
    float ly = fy - (float)y0;
    size_t base = (size_t)img * sh * sw * c, rowlen = (size_t)sw * c;
    size_t r0 = base + y0 * rowlen + ch, r1 = base + y1 * rowlen + ch;
    size_t c0 = (size_t)x0 * c, c1 = (size_t)x1 * c;
    __global const float *f = (__global const float *)src;
    float a0 = src_u8 ? (float)src[r0 + c0] : f[r0 + c0];
    float b0 = src_u8 ? (float)src[r0 + c1] : f[r0 + c1];
    float a1 = src_u8 ? (float)src[r1 + c0] : f[r1 + c0];
    float b1 = src_u8 ? (float)src[r1 + c1] : f[r1 + c1];
    float h0 = a0 + (b0 - a0) * lx, h1 = a1 + (b1 - a1) * lx;
    float v = (h0 + (h1 - h0) * ly) * scale;
    dst[o] = has_norm ? (v - mean[ch]) * (1.0f / std[ch]) : v;
}
