/* conv.cl: 2-D convolution over NHWC activations with HWIO weights [kh][kw][c][f] (the
 * kern_conv2d_* contracts in kernels/kernels.h), as direct kernels for CPU devices.
 *
 * Seen as a GEMM, the forward is y[N·OH·OW][F] = col · W with col[p][(i, j, c)] the input under
 * output pixel p's window: an implicit GEMM, never stored. In NHWC the (j, c) part of a window row
 * is kw·C consecutive floats of the input, and the same (i, j, c) order is consecutive rows of W,
 * so conv_fwd walks K as kh runs of kw·C without any index arithmetic. Like gemm_cpu it runs one
 * work-item per work-group (PoCL then compiles the loops as written, float16 on AVX-512): a group
 * owns mb output pixels × nb filters and computes them as 8×32 register tiles, per k broadcasting
 * one input float for each of the 8 pixels and loading 32 weights: 16 FMAs against 10 loads.
 *
 * The input is read from a copy padded so that every window lies inside (conv_pad, only when the
 * geometry needs it), and W from a copy whose rows are padded to a multiple of 32 filters
 * (conv_pack_w, in panels of 32). Backward-data is the same kernel: dx is the stride-1 convolution
 * of dy, dilated by the strides and padded by kh − 1 − pt (conv_pad), with W flipped in i and j and
 * transposed in (c, f) (conv_pack_w); with few input channels (C ≤ 8, where a 32-column tile over C
 * would be mostly padding) it is instead conv_fwd as a 1×1 conv of dy with Wᵀ, giving the patch
 * gradients, which conv_col2im_rows gathers into dx row by row. Backward-weights, dw[(i, j, c)][f]
 * = Σ_p col[p][(i, j, c)]·dy[p][f], is the transposed GEMM with a long sum over p: conv_dw splits p
 * into a fixed number of parts, each group walks its part in chunks whose input and dy stay in L1,
 * keeps its partial dw in __local, and writes it to a scratch slice; conv_dw_sum adds the slices in
 * order. No atomics anywhere: a given device and geometry always give the same bits.
 *
 * Buffers that may be regions of the caller's workspace come as (buffer, offset in floats) pairs,
 * the *_buf / *_off arguments, so the workspace can be any buffer, a sub-buffer included.
 *
 * Other devices take the GEMM path (kernels/conv.c): conv_im2col writes the patch matrix and
 * kern_gemm multiplies; conv_col2im gathers backward-data's patch gradients into dx, one
 * work-item per dx element adding its entries in a fixed order. */

#define CONV_MR     8   /* output rows of a register tile */
#define CONV_NR     32  /* output columns of a register tile (two float16) */
#define CONV_CHUNK  64  /* pixels conv_dw walks per pass over its register tiles */
#define CONV_MB_MAX 256 /* output pixels per conv_fwd work-group, at most (conv.c) */

/* dst[n][t][u][c] for t < hp, u < wp, c < cd: src[n][(t − pt)/dh][(u − pl)/dw][c] where the
 * divisions are exact and land inside src (hs × ws × cs), else 0. Global size (n·hp), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_pad(int hs, int ws, int cs, int dh, int dw, int pt, int pl, int hp, int wp, int cd,
         __global const float *src, __global float *dst_buf, ulong dst_off)
{
    __global float *dst = dst_buf + dst_off;
    int row = get_global_id(0), n = row / hp, t = row % hp;
    __global float *d = dst + (size_t)row * wp * cd;
    int ty = t - pt, sy = ty / dh;
    if (ty < 0 || ty % dh || sy >= hs) {
        for (int e = 0; e < wp * cd; e++)
            d[e] = 0.0f;
        return;
    }
    __global const float *s = src + ((size_t)n * hs + sy) * ws * cs;
    int c16 = cs / 16 * 16;
    for (int u = 0; u < wp; u++, d += cd) {
        int tx = u - pl, sx = tx / dw, c = 0;
        if (tx >= 0 && tx % dw == 0 && sx < ws) {
            __global const float *sp = s + (size_t)sx * cs;
            for (; c < c16; c += 16)
                vstore16(vload16(0, sp + c), 0, d + c);
            for (; c < cs; c++)
                d[c] = sp[c];
        }
        for (; c < cd; c++)
            d[c] = 0.0f;
    }
}

/* Packed weights: rows × columns b, zero past the columns, stored panel by panel of 32 columns
 * (out[panel][row][32]) so that the register tile's weights are one contiguous run:
 *   mode 0: row (i, j, c), column f: w[i][j][c][f]                  (forward)
 *   mode 1: row (i, j, f), column c: w[kh−1−i][kw−1−j][c][f]        (backward-data)
 *   mode 2: row f, column (i, j, c): w[i][j][c][f], i.e. Wᵀ          (narrow backward-data)
 * ldo: the columns rounded up to 32. Global size (ldo, rows). */
__kernel void conv_pack_w(int kh, int kw, int c, int f, int mode, int ldo, __global const float *w,
                          __global float *out_buf, ulong out_off)
{
    __global float *out = out_buf + out_off;
    int b = get_global_id(0), row = get_global_id(1);
    int na = mode == 1 ? f : c, nb = mode == 1 ? c : f, kk = kh * kw;
    int rows = mode == 2 ? f : kk * na, cols = mode == 2 ? kk * c : nb;
    if (b >= ldo || row >= rows)
        return;
    int a = row % na, ij = row / na, j = ij % kw, i = ij / kw;
    float v = 0.0f;
    if (b < cols) {
        if (mode == 2)
            v = w[(size_t)b * f + row];
        else if (mode == 1)
            v = w[(((size_t)(kh - 1 - i) * kw + (kw - 1 - j)) * c + b) * f + a];
        else
            v = w[(((size_t)i * kw + j) * c + a) * f + b];
    }
    out[((size_t)(b / CONV_NR) * rows + row) * CONV_NR + b % CONV_NR] = v;
}

/* dx row (n, y) from the patch gradients dcol[(n, oy, ox)][(i, j, c)] (rows ld floats apart):
 * each dx element adds the entries of the windows that cover it, in a fixed order: by window row
 * i, then along the output row (the narrow backward-data path, for few input channels). Global
 * size N·H, local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_col2im_rows(int h, int w, int c, int kh, int kw, int sh, int sw, int pt, int pl, int oh,
                 int ow, int ld, __global const float *dcol_buf, ulong dcol_off, __global float *dx)
{
    __global const float *dcol = dcol_buf + dcol_off;
    int row = get_global_id(0), n = row / h, y = row % h;
    __global float *d = dx + (size_t)row * w * c;
    for (int e = 0; e < w * c; e++)
        d[e] = 0.0f;
    /* The row is this work-item's alone, so it scatters: window rows i that land on y, then
     * every window along the output row, no division in the inner loops. */
    for (int i = 0; i < kh; i++) {
        int ty = y + pt - i, oy = ty / sh;
        if (ty < 0 || ty % sh || oy >= oh)
            continue;
        __global const float *s = dcol + (size_t)(n * oh + oy) * ow * ld + i * kw * c;
        for (int ox = 0; ox < ow; ox++, s += ld)
            for (int j = 0; j < kw; j++) {
                int x = ox * sw - pl + j;
                if (x < 0 || x >= w)
                    continue;
                for (int ch = 0; ch < c; ch++)
                    d[x * c + ch] += s[j * c + ch];
            }
    }
}

#define CONV_ACC_DECL                                                                              \
    float16 c00 = 0, c01 = 0, c10 = 0, c11 = 0, c20 = 0, c21 = 0, c30 = 0, c31 = 0;                \
    float16 c40 = 0, c41 = 0, c50 = 0, c51 = 0, c60 = 0, c61 = 0, c70 = 0, c71 = 0

#define CONV_FMA(r, a)                                                                             \
    do {                                                                                           \
        float16 a_ = (float16)(a);                                                                 \
        c##r##0 = fma(a_, b0, c##r##0);                                                            \
        c##r##1 = fma(a_, b1, c##r##1);                                                            \
    } while (0)

/* One k step of the 8×32 tile: row r takes the float at xr[o_r]. */
#define CONV_STEP(xr)                                                                              \
    CONV_FMA(0, (xr)[o0]);                                                                         \
    CONV_FMA(1, (xr)[o1]);                                                                         \
    CONV_FMA(2, (xr)[o2]);                                                                         \
    CONV_FMA(3, (xr)[o3]);                                                                         \
    CONV_FMA(4, (xr)[o4]);                                                                         \
    CONV_FMA(5, (xr)[o5]);                                                                         \
    CONV_FMA(6, (xr)[o6]);                                                                         \
    CONV_FMA(7, (xr)[o7])

/* The implicit GEMM of one 8×32 tile: the accumulators += the windows at o0..o7 of xp (kh rows of
 * kwc floats, row_stride apart) times the packed weights of columns j0.. (conv_fwd, conv_fwd_pool;
 * the same terms in the same order in both). */
#define CONV_WINDOW_SUM                                                                            \
    do {                                                                                           \
        __global const float *wr = wpk + (size_t)j0 * kh * kwc;                                    \
        for (int i = 0; i < kh; i++) {                                                             \
            __global const float *xr = xp + i * row_stride;                                        \
            for (int q_ = 0; q_ < kwc; q_++) {                                                     \
                float16 b0 = vload16(0, wr), b1 = vload16(1, wr);                                  \
                CONV_STEP(xr + q_);                                                                \
                wr += CONV_NR;                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define CONV_SPILL(r)                                                                              \
    do {                                                                                           \
        vstore16(c##r##0, 2 * (r), tile);                                                          \
        vstore16(c##r##1, 2 * (r) + 1, tile);                                                      \
    } while (0)

/* The 16 accumulators into tile[8][32] (private). */
#define CONV_TILE_SPILL                                                                            \
    CONV_SPILL(0);                                                                                 \
    CONV_SPILL(1);                                                                                 \
    CONV_SPILL(2);                                                                                 \
    CONV_SPILL(3);                                                                                 \
    CONV_SPILL(4);                                                                                 \
    CONV_SPILL(5);                                                                                 \
    CONV_SPILL(6);                                                                                 \
    CONV_SPILL(7)

/* Adds tile row r into the __local partial sums at ar (rows below `rows` only). */
#define CONV_LOCAL_ADD(r)                                                                          \
    do {                                                                                           \
        if ((r) < rows) {                                                                          \
            __local float *a_ = ar + (r)*ldd + j0;                                                 \
            vstore16(vload16(0, a_) + c##r##0, 0, a_);                                             \
            vstore16(vload16(1, a_) + c##r##1, 1, a_);                                             \
        }                                                                                          \
    } while (0)

/* Writes rows × cols of tile[8][32] to out (row stride ld): whole rows as two float16 when the
 * tile is full width, else one float at a time. */
static void conv_tile_store(const float *tile, int rows, int cols, __global float *out, int ld)
{
    for (int r = 0; r < rows; r++) {
        __global float *o = out + (size_t)r * ld;
        if (cols == CONV_NR) {
            vstore16(vload16(2 * r, tile), 0, o);
            vstore16(vload16(2 * r + 1, tile), 1, o);
        } else {
            for (int c = 0; c < cols; c++)
                o[c] = tile[r * CONV_NR + c];
        }
    }
}

/* base[t] = offset in the padded input (hp × wp × c per image) of output pixel p + t's window
 * corner, for t < count: one division for the first pixel, then a walk along the rows. */
static void conv_bases(int p, int count, int ow, int ohw, int hp, int wp, int c, int sh, int sw,
                       __local int *base)
{
    int n = p / ohw, rem = p % ohw, oy = rem / ow, ox = rem % ow, oh = ohw / ow;
    int o = ((n * hp + oy * sh) * wp + ox * sw) * c;
    for (int t = 0; t < count; t++) {
        base[t] = o;
        o += sw * c;
        if (++ox == ow) {
            ox = 0;
            if (++oy == oh) {
                oy = 0;
                n++;
            }
            o = ((n * hp + oy * sh) * wp) * c;
        }
    }
}

/* One row of a full tile straight from the registers. */
#define CONV_ROW_STORE(r)                                                                          \
    do {                                                                                           \
        vstore16(c##r##0, 0, out + (size_t)(r)*f_out);                                             \
        vstore16(c##r##1, 1, out + (size_t)(r)*f_out);                                             \
    } while (0)

/* y[p][f] for p < m, f < f_out = Σ_{i, q < kwc} xp[base(p) + i·wp·c + q]·wp_[(i·kwc + q)][f].
 * Global size (ceil(ldw/nb), ceil(m/mb)), local (1, 1); mb a multiple of 8, nb of 32, ldw (the
 * packed weights' row stride) a multiple of 32. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_fwd(int m, int ow, int ohw, int hp, int wp, int c, int kh, int kwc, int sh, int sw, int f_out,
         int ldw, __global const float *xp_buf, ulong xp_off, __global const float *wpk_buf,
         ulong wpk_off, __global float *y_buf, ulong y_off, int mb, int nb)
{
    __global const float *xp = xp_buf + xp_off, *wpk = wpk_buf + wpk_off;
    __global float *y = y_buf + y_off;
    int n0 = get_group_id(0) * nb, m0 = get_group_id(1) * mb;
    int m1 = min(m, m0 + mb), n1 = min(ldw, n0 + nb);
    size_t row_stride = (size_t)wp * c;
    __local int base[CONV_MB_MAX];
    conv_bases(m0, m1 - m0, ow, ohw, hp, wp, c, sh, sw, base);
    for (int j0 = n0; j0 < n1 && j0 < f_out; j0 += CONV_NR) {
        int cols = min(CONV_NR, f_out - j0);
        for (int p = m0; p < m1; p += CONV_MR) {
            int rows = min(CONV_MR, m1 - p), t = p - m0, l = rows - 1;
            int o0 = base[t], o1 = base[t + min(1, l)], o2 = base[t + min(2, l)];
            int o3 = base[t + min(3, l)], o4 = base[t + min(4, l)], o5 = base[t + min(5, l)];
            int o6 = base[t + min(6, l)], o7 = base[t + min(7, l)];
            CONV_ACC_DECL;
            CONV_WINDOW_SUM;
            __global float *out = y + (size_t)p * f_out + j0;
            if (rows == CONV_MR && cols == CONV_NR) {
                CONV_ROW_STORE(0);
                CONV_ROW_STORE(1);
                CONV_ROW_STORE(2);
                CONV_ROW_STORE(3);
                CONV_ROW_STORE(4);
                CONV_ROW_STORE(5);
                CONV_ROW_STORE(6);
                CONV_ROW_STORE(7);
            } else {
                float tile[CONV_MR * CONV_NR];
                CONV_TILE_SPILL;
                conv_tile_store(tile, rows, cols, out, f_out);
            }
        }
    }
}

/* conv_dw's and conv_dw_pool's start: this group's rows [r0, r1) and pixels [pa, pb), the
 * window-offset table, the partial sums cleared. */
#define CONV_DW_BEGIN                                                                              \
    __global float *scr = scr_buf + scr_off;                                                       \
    int r0 = get_group_id(0) * mb, s = get_group_id(1);                                            \
    int r1 = min(kk, r0 + mb);                                                                     \
    int pa = s * ppart, pb = min(m, pa + ppart);                                                   \
    int ncols = (f_out + CONV_NR - 1) / CONV_NR * CONV_NR;                                         \
    __local int base[CONV_CHUNK];                                                                  \
    for (int e = 0; e < mb * ldd; e++)                                                             \
        acc[e] = 0.0f;                                                                             \
    int row_stride = wp * c

/* conv_dw's rows [r0, r1) of one chunk of np pixels from p0 (their window offsets in base): the
 * register tiles over the chunk's dy rows, which start at dbase (ldd floats apart, SPACE memory),
 * added into acc. */
#define CONV_DW_CHUNK(SPACE, dbase)                                                                \
    for (int r = r0; r < r1; r += CONV_MR) {                                                       \
        int last = kk - 1;                                                                         \
        int o0 = (r / kwc) * row_stride + r % kwc;                                                 \
        int o1 = (min(r + 1, last) / kwc) * row_stride + min(r + 1, last) % kwc;                   \
        int o2 = (min(r + 2, last) / kwc) * row_stride + min(r + 2, last) % kwc;                   \
        int o3 = (min(r + 3, last) / kwc) * row_stride + min(r + 3, last) % kwc;                   \
        int o4 = (min(r + 4, last) / kwc) * row_stride + min(r + 4, last) % kwc;                   \
        int o5 = (min(r + 5, last) / kwc) * row_stride + min(r + 5, last) % kwc;                   \
        int o6 = (min(r + 6, last) / kwc) * row_stride + min(r + 6, last) % kwc;                   \
        int o7 = (min(r + 7, last) / kwc) * row_stride + min(r + 7, last) % kwc;                   \
        __local float *ar = acc + (size_t)(r - r0) * ldd;                                          \
        for (int j0 = 0; j0 < ncols; j0 += CONV_NR) {                                              \
            CONV_ACC_DECL;                                                                         \
            SPACE const float *dr = (dbase) + j0;                                                  \
            for (int t = 0; t < np; t++) {                                                         \
                float16 b0 = vload16(0, dr), b1 = vload16(1, dr);                                  \
                CONV_STEP(xp + base[t]);                                                           \
                dr += ldd;                                                                         \
            }                                                                                      \
            int rows = min(CONV_MR, r1 - r);                                                       \
            CONV_LOCAL_ADD(0);                                                                     \
            CONV_LOCAL_ADD(1);                                                                     \
            CONV_LOCAL_ADD(2);                                                                     \
            CONV_LOCAL_ADD(3);                                                                     \
            CONV_LOCAL_ADD(4);                                                                     \
            CONV_LOCAL_ADD(5);                                                                     \
            CONV_LOCAL_ADD(6);                                                                     \
            CONV_LOCAL_ADD(7);                                                                     \
        }                                                                                          \
    }

/* The partial sums of rows [r0, r1) of group (·, s) out of acc: into scr[s] with several parts,
 * else into dw (adding when accumulate). */
static void conv_dw_store(__local const float *acc, int ldd, int r0, int r1, int s, int kk,
                          int f_out, __global float *scr, __global float *dw, int accumulate)
{
    int parts = get_num_groups(1);
    for (int r = r0; r < r1; r++) {
        __local const float *ar = acc + (size_t)(r - r0) * ldd;
        if (parts > 1) {
            __global float *o = scr + ((size_t)s * kk + r) * f_out;
            for (int cc = 0; cc < f_out; cc++)
                o[cc] = ar[cc];
        } else {
            __global float *o = dw + (size_t)r * f_out;
            for (int cc = 0; cc < f_out; cc++)
                o[cc] = accumulate ? o[cc] + ar[cc] : ar[cc];
        }
    }
}

/* Partial weight gradient of part s (pixels [s·ppart, (s+1)·ppart) ∩ [0, m)) for rows
 * [m0, m0 + mb) of kk = kh·kwc: out[row][f] = Σ_p xp[base(p) + off(row)]·dyp[p][f], with
 * off((i, q)) = i·wp·c + q. dyp has ldd ≥ 32·ceil(f_out/32) columns (zero past f_out). Writes
 * scr[s][kk][f_out] when parts > 1; with one part writes dw directly (adding when accumulate).
 * acc holds mb × ldd floats. Global size (ceil(kk/mb), parts), local (1, 1). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_dw(int m, int ow, int ohw, int hp, int wp, int c, int kwc, int kk, int sh, int sw, int f_out,
        int ldd, int ppart, __global const float *xp_buf, ulong xp_off,
        __global const float *dyp_buf, ulong dyp_off, __global float *scr_buf, ulong scr_off,
        __global float *dw, int accumulate, int mb, __local float *acc)
{
    __global const float *xp = xp_buf + xp_off, *dyp = dyp_buf + dyp_off;
    CONV_DW_BEGIN;
    for (int p0 = pa; p0 < pb; p0 += CONV_CHUNK) {
        int np = min(CONV_CHUNK, pb - p0);
        conv_bases(p0, np, ow, ohw, hp, wp, c, sh, sw, base);
        CONV_DW_CHUNK(__global, dyp + (size_t)p0 * ldd)
    }
    conv_dw_store(acc, ldd, r0, r1, s, kk, f_out, scr, dw, accumulate);
}

/* conv_dw with the conv's dy given by the 2×2 stride-2 max pool after it: dyq (N·PH·PW·f_out,
 * pw per row, phw per image) and the pool's argmax (flat conv-output indices). Each chunk's dy
 * rows are expanded into dyc (CONV_CHUNK × ldd floats of __local) as pool_bwd would write them,
 * 0 + dy where the argmax names the element and 0 elsewhere, so the sums are conv_dw's over
 * pool_bwd's output, bit for bit, without that output. Same global and local sizes. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_dw_pool(int m, int ow, int ohw, int hp, int wp, int c, int kwc, int kk, int sh, int sw,
             int f_out, int ldd, int ppart, __global const float *xp_buf, ulong xp_off,
             __global const float *dyq, __global const int *argq, int pw, int phw,
             __global float *scr_buf, ulong scr_off, __global float *dw, int accumulate, int mb,
             __local float *acc, __local float *dyc)
{
    __global const float *xp = xp_buf + xp_off;
    CONV_DW_BEGIN;
    int ph = phw / pw, f16 = f_out / 16 * 16;
    for (int p0 = pa; p0 < pb; p0 += CONV_CHUNK) {
        int np = min(CONV_CHUNK, pb - p0);
        conv_bases(p0, np, ow, ohw, hp, wp, c, sh, sw, base);
        int n = p0 / ohw, oy = p0 % ohw / ow, ox = p0 % ow; /* then walked, no division */
        for (int t = 0; t < np; t++) {
            int p = p0 + t, img = n, py = oy >> 1, px = ox >> 1;
            if (++ox == ow) {
                ox = 0;
                if (++oy == ohw / ow) {
                    oy = 0;
                    n++;
                }
            }
            __local float *d = dyc + t * ldd;
            int ch = 0;
            if (py < ph && px < pw) {
                size_t q = ((size_t)img * phw + py * pw + px) * f_out;
                int e = p * f_out;
                for (; ch < f16; ch += 16) {
                    int16 me = (int16)(e + ch) +
                               (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                    float16 g = select((float16)0.0f, vload16(0, dyq + q + ch),
                                       vload16(0, argq + q + ch) == me);
                    vstore16(0.0f + g, 0, d + ch);
                }
                for (; ch < f_out; ch++)
                    d[ch] = 0.0f + (argq[q + ch] == e + ch ? dyq[q + ch] : 0.0f);
            }
            for (; ch < ldd; ch++)
                d[ch] = 0.0f;
        }
        CONV_DW_CHUNK(__local, dyc)
    }
    conv_dw_store(acc, ldd, r0, r1, s, kk, f_out, scr, dw, accumulate);
}

/* dw[e] = (accumulate ? dw[e] : 0) + Σ_{s < parts} scr[s][e], the parts in order. Global n. */
__kernel void conv_dw_sum(int n, int parts, int accumulate, __global const float *scr_buf,
                          ulong scr_off, __global float *dw)
{
    __global const float *scr = scr_buf + scr_off;
    int e = get_global_id(0);
    if (e >= n)
        return;
    float v = 0.0f;
    for (int s = 0; s < parts; s++)
        v += scr[(size_t)s * n + e];
    dw[e] = accumulate ? dw[e] + v : v;
}
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

/* One float16 half (h = 0 or 1) of two pooled pixels' 2×2 windows, rows 4a..4a+3 of the tile in
 * window order (0,0), (0,1), (1,0), (1,1): the first largest value and its flat index in the conv
 * output, as pool_fwd picks them. */
#define CONV_POOL_PICK(best, arg, r0, r1, r2, r3, h, e0, e1, e2, e3)                               \
    do {                                                                                           \
        int16 lane_ = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) + (h)*16;     \
        int16 t_;                                                                                  \
        best = c##r0##h;                                                                           \
        arg = (int16)(e0) + lane_;                                                                 \
        t_ = c##r1##h > best;                                                                      \
        best = select(best, c##r1##h, t_);                                                         \
        arg = select(arg, (int16)(e1) + lane_, t_);                                                \
        t_ = c##r2##h > best;                                                                      \
        best = select(best, c##r2##h, t_);                                                         \
        arg = select(arg, (int16)(e2) + lane_, t_);                                                \
        t_ = c##r3##h > best;                                                                      \
        best = select(best, c##r3##h, t_);                                                         \
        arg = select(arg, (int16)(e3) + lane_, t_);                                                \
    } while (0)

/* conv_fwd followed by a 2×2 max pool of stride 2 without padding, the conv output never
 * written: y[q][f] for pooled pixel q < mq (pw per row, phw per image) is the largest of the four
 * conv outputs of q's window (then act(y + bias[f]) when has_act, the conv's deferred bias and
 * activation, computed as act_bias_fwd_cpu does), argmax[q][f] (when has_arg) its flat index in the conv output
 * (oh × ow × f_out per image), the first largest in window order as pool_fwd keeps it. The conv
 * sums are conv_fwd's, term for term, so y and argmax are the bits conv_fwd + pool_fwd give. A
 * register tile is two pooled pixels: rows 0–3 the first one's window, rows 4–7 the second's.
 * Global size (ceil(ldw/nb), ceil(mq/mb)), local (1, 1); mb (pooled pixels) even, at most
 * CONV_MB_MAX / 4; nb a multiple of 32. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
conv_fwd_pool(int mq, int pw, int phw, int ow, int oh, int hp, int wp, int c, int kh, int kwc,
              int sh, int sw, int f_out, int ldw, __global const float *xp_buf, ulong xp_off,
              __global const float *wpk_buf, ulong wpk_off, __global float *y, int has_arg,
              __global int *argmax, int mb, int nb, int has_act, int act,
              __global const float *bias)
{
    __global const float *xp = xp_buf + xp_off, *wpk = wpk_buf + wpk_off;
    int n0 = get_group_id(0) * nb, q0 = get_group_id(1) * mb;
    int q1 = min(mq, q0 + mb), n1 = min(ldw, n0 + nb);
    int row_stride = wp * c, right = sw * c, down = sh * row_stride;
    __local int base[CONV_MB_MAX / 4], ebase[CONV_MB_MAX / 4];
    for (int q = q0; q < q1; q++) {
        int n = q / phw, r = q % phw, py = r / pw, px = r % pw;
        base[q - q0] = ((n * hp + 2 * py * sh) * wp + 2 * px * sw) * c;
        ebase[q - q0] = ((n * oh + 2 * py) * ow + 2 * px) * f_out;
    }
    int e_right = f_out, e_down = ow * f_out;
    for (int j0 = n0; j0 < n1 && j0 < f_out; j0 += CONV_NR) {
        int cols = min(CONV_NR, f_out - j0);
        for (int q = q0; q < q1; q += 2) {
            int pair = min(2, q1 - q), t = q - q0, u = t + pair - 1;
            int o0 = base[t], o1 = o0 + right, o2 = o0 + down, o3 = o2 + right;
            int o4 = base[u], o5 = o4 + right, o6 = o4 + down, o7 = o6 + right;
            CONV_ACC_DECL;
            CONV_WINDOW_SUM;
            float16 best[4];
            int16 arg[4];
            int ea = ebase[t] + j0, eb = ebase[u] + j0;
            CONV_POOL_PICK(best[0], arg[0], 0, 1, 2, 3, 0, ea, ea + e_right, ea + e_down,
                           ea + e_down + e_right);
            CONV_POOL_PICK(best[1], arg[1], 0, 1, 2, 3, 1, ea, ea + e_right, ea + e_down,
                           ea + e_down + e_right);
            CONV_POOL_PICK(best[2], arg[2], 4, 5, 6, 7, 0, eb, eb + e_right, eb + e_down,
                           eb + e_down + e_right);
            CONV_POOL_PICK(best[3], arg[3], 4, 5, 6, 7, 1, eb, eb + e_right, eb + e_down,
                           eb + e_down + e_right);
            if (has_act) /* act(max + b) as act_bias_fwd_cpu: float16 where it takes 16 */
                for (int s = 0; s < 4; s++) {
                    int c0 = j0 + (s & 1) * 16;
                    if (c0 + 16 <= f_out) {
                        best[s] = common_act16(act, best[s] + vload16(0, bias + c0));
                    } else {
                        float v[16];
                        vstore16(best[s], 0, v);
                        for (int l = 0; l < 16 && c0 + l < f_out; l++)
                            v[l] = common_act(act, v[l] + bias[c0 + l]);
                        best[s] = vload16(0, v);
                    }
                }
            for (int s = 0; s < pair; s++) {
                size_t o = (size_t)(q + s) * f_out + j0;
                if (cols == CONV_NR) {
                    vstore16(best[2 * s], 0, y + o);
                    vstore16(best[2 * s + 1], 1, y + o);
                    if (has_arg) {
                        vstore16(arg[2 * s], 0, argmax + o);
                        vstore16(arg[2 * s + 1], 1, argmax + o);
                    }
                } else {
                    float vb[CONV_NR];
                    int va[CONV_NR];
                    vstore16(best[2 * s], 0, vb);
                    vstore16(best[2 * s + 1], 1, vb);
                    vstore16(arg[2 * s], 0, va);
                    vstore16(arg[2 * s + 1], 1, va);
                    for (int cc = 0; cc < cols; cc++) {
                        y[o + cc] = vb[cc];
                        if (has_arg)
                            argmax[o + cc] = va[cc];
                    }
                }
            }
        }
    }
}
