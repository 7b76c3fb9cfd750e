/* ref_conv: the plain-C meaning of the image families — conv2d, pooling, batchnorm and the image
 * batch (kernels.h gives the contracts). Straight loops over NHWC / HWIO with double sums; the
 * tests compare the OpenCL kernels with these and differentiate them numerically. The image batch
 * is written in float with the kernel's own operations, so the two agree to a rounding. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ref.h"

/* Input element of x at (n, y, x, ch), or −1 outside the image. */
static long conv_at(const kern_conv *g, int n, int y, int x, int ch)
{
    if (y < 0 || y >= g->h || x < 0 || x >= g->w)
        return -1;
    return (((long)n * g->h + y) * g->w + x) * g->c + ch;
}

static long weight_at(const kern_conv *g, int i, int j, int ch, int f)
{
    return (((long)i * g->kw + j) * g->c + ch) * g->f + f;
}

void ref_conv2d_fwd(const kern_conv *g, const float *x, const float *w, float *y)
{
    for (int n = 0; n < g->n; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int f = 0; f < g->f; f++) {
                    double s = 0;
                    for (int i = 0; i < g->kh; i++)
                        for (int j = 0; j < g->kw; j++)
                            for (int ch = 0; ch < g->c; ch++) {
                                long e = conv_at(g, n, oy * g->sh - g->pt + i,
                                                 ox * g->sw - g->pl + j, ch);
                                if (e >= 0)
                                    s += (double)x[e] * w[weight_at(g, i, j, ch, f)];
                            }
                    y[(((long)n * g->oh + oy) * g->ow + ox) * g->f + f] = (float)s;
                }
}

/* For each dx element, every output position whose window holds it: oy with
 * i = y + pt − oy·sh inside the kernel, likewise ox. */
void ref_conv2d_bwd_data(const kern_conv *g, const float *dy, const float *w, float *dx)
{
    for (int n = 0; n < g->n; n++)
        for (int y = 0; y < g->h; y++)
            for (int x = 0; x < g->w; x++)
                for (int ch = 0; ch < g->c; ch++) {
                    double s = 0;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int i = y + g->pt - oy * g->sh;
                        if (i < 0 || i >= g->kh)
                            continue;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int j = x + g->pl - ox * g->sw;
                            if (j < 0 || j >= g->kw)
                                continue;
                            const float *d = &dy[(((long)n * g->oh + oy) * g->ow + ox) * g->f];
                            for (int f = 0; f < g->f; f++)
                                s += (double)d[f] * w[weight_at(g, i, j, ch, f)];
                        }
                    }
                    dx[conv_at(g, n, y, x, ch)] = (float)s;
                }
}

void ref_conv2d_bwd_weights(const kern_conv *g, const float *x, const float *dy, float *dw,
                            int accumulate)
{
    for (int i = 0; i < g->kh; i++)
        for (int j = 0; j < g->kw; j++)
            for (int ch = 0; ch < g->c; ch++)
                for (int f = 0; f < g->f; f++) {
                    double s = 0;
                    for (int n = 0; n < g->n; n++)
                        for (int oy = 0; oy < g->oh; oy++)
                            for (int ox = 0; ox < g->ow; ox++) {
                                long e = conv_at(g, n, oy * g->sh - g->pt + i,
                                                 ox * g->sw - g->pl + j, ch);
                                if (e >= 0)
                                    s += (double)x[e] *
                                         dy[(((long)n * g->oh + oy) * g->ow + ox) * g->f + f];
                            }
                    float *o = &dw[weight_at(g, i, j, ch, f)];
                    *o = accumulate ? (float)(*o + s) : (float)s;
                }
}

/* The window of output (oy, ox) clipped to the image: [*ya, *yb) × [*xa, *xb). */
static void pool_window(const kern_pool *g, int oy, int ox, int *ya, int *yb, int *xa, int *xb)
{
    int y0 = oy * g->sh - g->pt, x0 = ox * g->sw - g->pl;
    *ya = y0 < 0 ? 0 : y0;
    *yb = y0 + g->kh < g->h ? y0 + g->kh : g->h;
    *xa = x0 < 0 ? 0 : x0;
    *xb = x0 + g->kw < g->w ? x0 + g->kw : g->w;
}

void ref_pool2d_fwd(int mode, const kern_pool *g, const float *x, float *y, int32_t *argmax)
{
    for (int n = 0; n < g->n; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int ch = 0; ch < g->c; ch++) {
                    int ya, yb, xa, xb;
                    pool_window(g, oy, ox, &ya, &yb, &xa, &xb);
                    double sum = 0;
                    float best = 0;
                    long arg = -1;
                    int count = 0;
                    for (int yy = ya; yy < yb; yy++)
                        for (int xx = xa; xx < xb; xx++) {
                            long e = (((long)n * g->h + yy) * g->w + xx) * g->c + ch;
                            sum += x[e];
                            count++;
                            if (arg < 0 || x[e] > best) {
                                best = x[e];
                                arg = e;
                            }
                        }
                    long o = (((long)n * g->oh + oy) * g->ow + ox) * g->c + ch;
                    if (mode == KERN_POOL_AVG) {
                        y[o] = count ? (float)(sum / count) : 0.0f;
                    } else {
                        y[o] = best;
                        if (argmax)
                            argmax[o] = (int32_t)arg;
                    }
                }
}

/* Scatter form, the reverse of the forward's loops: each dy goes to its argmax (max), or in equal
 * shares to the window's cells inside the image (avg). */
void ref_pool2d_bwd(int mode, const kern_pool *g, const float *dy, const int32_t *argmax, float *dx)
{
    memset(dx, 0, (size_t)g->n * g->h * g->w * g->c * sizeof(float));
    for (int n = 0; n < g->n; n++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int ch = 0; ch < g->c; ch++) {
                    long o = (((long)n * g->oh + oy) * g->ow + ox) * g->c + ch;
                    if (mode == KERN_POOL_MAX) {
                        if (argmax[o] >= 0)
                            dx[argmax[o]] += dy[o];
                        continue;
                    }
                    int ya, yb, xa, xb;
                    pool_window(g, oy, ox, &ya, &yb, &xa, &xb);
                    int count = (yb - ya) * (xb - xa);
                    for (int yy = ya; yy < yb; yy++)
                        for (int xx = xa; xx < xb; xx++)
                            dx[(((long)n * g->h + yy) * g->w + xx) * g->c + ch] +=
                                (float)((double)dy[o] / count);
                }
}

void ref_batchnorm_fwd_train(int rows, int c, float momentum, float eps, const float *x,
                             const float *gamma, const float *beta, float *moving_mean,
                             float *moving_var, float *save_mean, float *save_invstd, float *y)
{
    if (rows == 0)
        return;
    for (int col = 0; col < c; col++) {
        double s = 0, v = 0;
        for (int r = 0; r < rows; r++)
            s += x[(size_t)r * c + col];
        double mean = s / rows;
        for (int r = 0; r < rows; r++) {
            double d = x[(size_t)r * c + col] - mean;
            v += d * d;
        }
        double var = v / rows, invstd = 1.0 / sqrt(var + eps);
        save_mean[col] = (float)mean;
        save_invstd[col] = (float)invstd;
        moving_mean[col] = (float)(momentum * (double)moving_mean[col] + (1.0 - momentum) * mean);
        moving_var[col] = (float)(momentum * (double)moving_var[col] + (1.0 - momentum) * var);
        for (int r = 0; r < rows; r++) {
            size_t e = (size_t)r * c + col;
            y[e] = (float)(gamma[col] * (x[e] - mean) * invstd + beta[col]);
        }
    }
}

void ref_batchnorm_fwd_infer(int rows, int c, float eps, const float *x, const float *gamma,
                             const float *beta, const float *moving_mean, const float *moving_var,
                             float *y)
{
    for (int r = 0; r < rows; r++)
        for (int col = 0; col < c; col++) {
            size_t e = (size_t)r * c + col;
            double invstd = 1.0 / sqrt((double)moving_var[col] + eps);
            y[e] = (float)(gamma[col] * ((double)x[e] - moving_mean[col]) * invstd + beta[col]);
        }
}

void ref_batchnorm_bwd(int rows, int c, const float *x, const float *dy, const float *gamma,
                       const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                       float *dbeta)
{
    for (int col = 0; col < c; col++) {
        double sb = 0, sg = 0, m = save_mean[col], is = save_invstd[col];
        for (int r = 0; r < rows; r++) {
            size_t e = (size_t)r * c + col;
            sb += dy[e];
            sg += dy[e] * ((x[e] - m) * is);
        }
        for (int r = 0; r < rows; r++) {
            size_t e = (size_t)r * c + col;
            double xhat = (x[e] - m) * is;
            dx[e] = (float)(gamma[col] * is * (dy[e] - sb / rows - xhat * sg / rows));
        }
        dbeta[col] = (float)sb;
        dgamma[col] = (float)sg;
    }
}

/* The transform of one image: flipped, and the crop offsets (kern_image in kernels.h). */
static void image_aug(const kern_image *g, int img, int *flip, int *oy, int *ox)
{
    uint64_t ctr = (((uint64_t)(uint32_t)g->epoch << 32) + (uint64_t)img) * 4;
    int span = 2 * g->crop + 1;
    *flip = g->flip && ref_uniform(g->seed, ctr) < 0.5f;
    *oy = *ox = 0;
    if (g->crop > 0) {
        *oy = (int)(ref_uniform(g->seed, ctr + 1) * (float)span);
        *ox = (int)(ref_uniform(g->seed, ctr + 2) * (float)span);
        *oy = *oy > 2 * g->crop ? 2 * g->crop : *oy;
        *ox = *ox > 2 * g->crop ? 2 * g->crop : *ox;
    }
}

/* Source coordinate and its two neighbours for output position p (half-pixel centres). */
static void image_src(int p, float ratio, int size, int *a, int *b, float *l)
{
    float f = ((float)p + 0.5f) * ratio - 0.5f;
    f = f < 0.0f ? 0.0f : f;
    *a = (int)f < size - 1 ? (int)f : size - 1;
    *b = *a + 1 < size - 1 ? *a + 1 : size - 1;
    *l = f - (float)*a;
}

static float image_pixel(const kern_image *g, const void *src, size_t e)
{
    return g->src_u8 ? (float)((const uint8_t *)src)[e] : ((const float *)src)[e];
}

void ref_image_batch(const kern_image *g, int rows, const void *src, const int32_t *idx, int start,
                     const float *mean, const float *std, float *dst)
{
    float ry = (float)g->sh / (float)g->dh, rx = (float)g->sw / (float)g->dw;
    for (int i = 0; i < rows; i++) {
        int img = idx[start + i], flip = 0, oy = 0, ox = 0;
        int ok = img >= 0 && img < g->n_src;
        if (ok)
            image_aug(g, img, &flip, &oy, &ox);
        for (int y = 0; y < g->dh; y++)
            for (int x = 0; x < g->dw; x++)
                for (int ch = 0; ch < g->c; ch++) {
                    float *out = &dst[(((size_t)i * g->dh + y) * g->dw + x) * g->c + ch];
                    int py = y + oy - g->crop;
                    int px = (flip ? g->dw - 1 - x : x) + ox - g->crop;
                    if (!ok || py < 0 || py >= g->dh || px < 0 || px >= g->dw) {
                        *out = 0.0f;
                        continue;
                    }
                    int y0, y1, x0, x1;
                    float ly, lx;
                    image_src(py, ry, g->sh, &y0, &y1, &ly);
                    image_src(px, rx, g->sw, &x0, &x1, &lx);
                    size_t base = (size_t)img * g->sh * g->sw * g->c + ch;
                    float a = image_pixel(g, src, base + ((size_t)y0 * g->sw + x0) * g->c);
                    float b = image_pixel(g, src, base + ((size_t)y0 * g->sw + x1) * g->c);
                    float d = image_pixel(g, src, base + ((size_t)y1 * g->sw + x0) * g->c);
                    float e = image_pixel(g, src, base + ((size_t)y1 * g->sw + x1) * g->c);
                    float top = a + (b - a) * lx, bot = d + (e - d) * lx;
                    float v = (top + (bot - top) * ly) * g->scale;
                    if (mean && std)
                        v = (v - mean[ch]) / std[ch];
                    *out = v;
                }
    }
}

void ref_conv2d_fwd_maxpool(const kern_conv *g, const float *x, const float *w, float *ytmp,
                            float *y, int32_t *argmax)
{
    kern_pool p = {g->n, g->oh, g->ow, g->f, 2, 2, 2, 2, 0, 0, g->oh / 2, g->ow / 2};
    ref_conv2d_fwd(g, x, w, ytmp);
    ref_pool2d_fwd(KERN_POOL_MAX, &p, ytmp, y, argmax);
}
