/* gemm.cl: C = alpha·op(A)·op(B) + beta·C, row-major float32 (the kern_gemm contract).
 *
 * Kernels, chosen by the host per device type (kernels/gemm.c):
 *
 * gemm_cpu — for CPU devices (PoCL). One work-item per work-group, so PoCL's work-item loops
 *   stay out of the way and the explicit float16 code maps onto AVX-512 as written. Each group
 *   owns an mb×nb tile of C (host: up to 512×256) and walks K in blocks of kc (≤ 256). For each
 *   block it packs op(A)[tile rows, block] into Ap as MR-row micro-panels laid out [panel][k][MR]
 *   and op(B)[block, tile cols] into Bp as NR-column micro-panels [panel][k][NR], zero-padding
 *   past the matrix edges. Ap and Bp are __local: on a CPU device a per-work-group scratch buffer
 *   that stays in L1/L2 and, unlike rows of B 4 KiB apart, does not alias in the caches. The
 *   register micro-kernel multiplies one MR×kc A panel by one kc×NR B panel into MR×NR = 8×32
 *   accumulators (16 float16 registers), per k loading two float16 of B and broadcasting MR
 *   scalars of A: 16 FMAs against 10 loads. The transposes only change how the packing reads
 *   memory; the micro-kernel never sees them. A tile only one or two micro-panels tall reads full
 *   B panels in place instead (a separate pass over B would not pay for itself).
 *   With K split into parts (long K onto a small C), part s writes its plain product into the
 *   scratch W[s], and gemm_cpu_sum adds the parts into C in a fixed order.
 *
 * gemm_tiled — for GPUs and anything else: the classic shared-memory tiling, a TS×TS tile of C
 *   per work-group of (TS/WPT)² work-items, each computing WPT×WPT outputs. When C has too few
 *   tiles to fill the device, the host splits K as for gemm_cpu: part s (group id 2) writes its
 *   plain product of its K range into W[s], and gemm_cpu_sum adds the parts into C in order.
 *
 * Invariants: each C element in range is written once per K block of its tile (or W's, then once
 * by gemm_cpu_sum); for the first block C is read only when beta != 0, so beta 0 overwrites NaNs;
 * elements outside M×N, stride padding included, are never written. */

#define GEMM_MR 8
#define GEMM_NR 32
/* Tiles at most this many micro-panels tall read full B panels in place instead of packing. */
#define GEMM_DIRECT_B_PANELS 2

/* In-register transposes, built from one round: new row p takes the even lanes of rows 2p and
 * 2p+1, new row p + n/2 their odd lanes (one two-source shuffle each). Seen as the bits of
 * (row | lane), a round rotates them right by one, so four rounds turn 16 rows × 16 lanes into
 * its transpose, and 8 rows × 16 lanes (r, k) into the k-major order k·8 + r. Written out with
 * named variables: private arrays indexed in loops end up on the stack under PoCL. */
#define GEMM_UNZIP(d, dlo, dhi, s, a, b)                                                           \
    d##dlo = (float16)(s##a.even, s##b.even);                                                      \
    d##dhi = (float16)(s##a.odd, s##b.odd)
#define GEMM_ROUND8(d, s)                                                                          \
    GEMM_UNZIP(d, 0, 4, s, 0, 1);                                                                  \
    GEMM_UNZIP(d, 1, 5, s, 2, 3);                                                                  \
    GEMM_UNZIP(d, 2, 6, s, 4, 5);                                                                  \
    GEMM_UNZIP(d, 3, 7, s, 6, 7)
#define GEMM_ROUND16(d, s)                                                                         \
    GEMM_UNZIP(d, 0, 8, s, 0, 1);                                                                  \
    GEMM_UNZIP(d, 1, 9, s, 2, 3);                                                                  \
    GEMM_UNZIP(d, 2, 10, s, 4, 5);                                                                 \
    GEMM_UNZIP(d, 3, 11, s, 6, 7);                                                                 \
    GEMM_UNZIP(d, 4, 12, s, 8, 9);                                                                 \
    GEMM_UNZIP(d, 5, 13, s, 10, 11);                                                               \
    GEMM_UNZIP(d, 6, 14, s, 12, 13);                                                               \
    GEMM_UNZIP(d, 7, 15, s, 14, 15)

/* dst[k·8 + r] = src[r·ld + k] for r < 8, k < 16. */
static void gemm_transpose_8x16(__global const float *src, size_t ld, __local float *dst)
{
    float16 v0 = vload16(0, src), v1 = vload16(0, src + ld), v2 = vload16(0, src + 2 * ld);
    float16 v3 = vload16(0, src + 3 * ld), v4 = vload16(0, src + 4 * ld);
    float16 v5 = vload16(0, src + 5 * ld), v6 = vload16(0, src + 6 * ld);
    float16 v7 = vload16(0, src + 7 * ld);
    float16 t0, t1, t2, t3, t4, t5, t6, t7;
    GEMM_ROUND8(t, v);
    GEMM_ROUND8(v, t);
    GEMM_ROUND8(t, v);
    GEMM_ROUND8(v, t);
    vstore16(v0, 0, dst), vstore16(v1, 1, dst), vstore16(v2, 2, dst), vstore16(v3, 3, dst);
    vstore16(v4, 4, dst), vstore16(v5, 5, dst), vstore16(v6, 6, dst), vstore16(v7, 7, dst);
}

/* dst[k·dstride + c] = src[c·ld + k] for c, k < 16; dst and dstride 16-float aligned. */
static void gemm_transpose_16x16(__global const float *src, size_t ld, __local float *dst,
                                 int dstride)
{
    float16 v0 = vload16(0, src), v1 = vload16(0, src + ld), v2 = vload16(0, src + 2 * ld);
    float16 v3 = vload16(0, src + 3 * ld), v4 = vload16(0, src + 4 * ld);
    float16 v5 = vload16(0, src + 5 * ld), v6 = vload16(0, src + 6 * ld);
    float16 v7 = vload16(0, src + 7 * ld), v8 = vload16(0, src + 8 * ld);
    float16 v9 = vload16(0, src + 9 * ld), v10 = vload16(0, src + 10 * ld);
    float16 v11 = vload16(0, src + 11 * ld), v12 = vload16(0, src + 12 * ld);
    float16 v13 = vload16(0, src + 13 * ld), v14 = vload16(0, src + 14 * ld);
    float16 v15 = vload16(0, src + 15 * ld);
    float16 t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15;
    GEMM_ROUND16(t, v);
    GEMM_ROUND16(v, t);
    GEMM_ROUND16(t, v);
    GEMM_ROUND16(v, t);
    __local float16 *d = (__local float16 *)dst;
    int s = dstride / 16;
    d[0] = v0, d[s] = v1, d[2 * s] = v2, d[3 * s] = v3, d[4 * s] = v4, d[5 * s] = v5;
    d[6 * s] = v6, d[7 * s] = v7, d[8 * s] = v8, d[9 * s] = v9, d[10 * s] = v10;
    d[11 * s] = v11, d[12 * s] = v12, d[13 * s] = v13, d[14 * s] = v14, d[15 * s] = v15;
}

/* op(A)[rows m0.., cols k0..k0+kb) → Ap[panel][k][MR], zero rows past M. */
static void gemm_pack_a(int ta, int M, __global const float *A, int lda, int m0, int mh, int k0,
                        int kb, __local float *Ap)
{
    int panels = (mh + GEMM_MR - 1) / GEMM_MR;
    for (int ip = 0; ip < panels; ip++) {
        __local float *dst = Ap + ip * GEMM_MR * kb;
        int r0 = m0 + ip * GEMM_MR;
        int rows = min(GEMM_MR, M - r0);
        if (ta) {
            /* A is K×M: the MR values of one k are contiguous. */
            if (rows == GEMM_MR) {
                for (int p = 0; p < kb; p++)
                    vstore8(vload8(0, A + (size_t)(k0 + p) * lda + r0), p, dst);
            } else {
                for (int p = 0; p < kb; p++)
                    for (int r = 0; r < GEMM_MR; r++)
                        dst[p * GEMM_MR + r] = r < rows ? A[(size_t)(k0 + p) * lda + r0 + r] : 0.0f;
            }
        } else {
            /* A is M×K: each row is contiguous along k; interleave MR rows, 16 k at a time as
             * an 8×16 block transposed in registers. */
            int p = 0;
            if (rows == GEMM_MR) {
                __global const float *src = A + (size_t)r0 * lda + k0;
                for (; p + 16 <= kb; p += 16)
                    gemm_transpose_8x16(src + p, lda, dst + p * GEMM_MR);
                for (; p < kb; p++)
                    for (int r = 0; r < GEMM_MR; r++)
                        dst[p * GEMM_MR + r] = src[(size_t)r * lda + p];
                continue;
            }
            for (int r = 0; r < GEMM_MR; r++) {
                if (r < rows) {
                    __global const float *src = A + (size_t)(r0 + r) * lda + k0;
                    for (int p = 0; p < kb; p++)
                        dst[p * GEMM_MR + r] = src[p];
                } else {
                    for (int p = 0; p < kb; p++)
                        dst[p * GEMM_MR + r] = 0.0f;
                }
            }
        }
    }
}

/* op(B)[rows k0..k0+kb, cols n0..] → Bp[panel][k][NR], zero columns past N; panels before
 * `from` are left out (gemm_micro_direct reads them in place). */
static void gemm_pack_b(int tb, int N, __global const float *B, int ldb, int n0, int nw, int k0,
                        int kb, int from, __local float *Bp)
{
    int panels = (nw + GEMM_NR - 1) / GEMM_NR;
    int full = nw / GEMM_NR; /* panels with all NR columns inside N */
    if (!tb && from < full) {
        /* B is K×N: the NR values of one k are contiguous. Walk each row of the block once, end
         * to end, so that the hardware prefetcher sees one stream per row, not one per panel. */
        __local float16 *dst = (__local float16 *)Bp;
        for (int p = 0; p < kb; p++) {
            __global const float *src = B + (size_t)(k0 + p) * ldb + n0;
            for (int jp = from; jp < full; jp++) {
                dst[(jp * kb + p) * 2] = vload16(2 * jp, src);
                dst[(jp * kb + p) * 2 + 1] = vload16(2 * jp + 1, src);
            }
        }
    }
    for (int jp = tb ? from : max(from, full); jp < panels; jp++) {
        __local float *dst = Bp + jp * GEMM_NR * kb;
        int c0 = n0 + jp * GEMM_NR;
        int cols = min(GEMM_NR, N - c0);
        if (!tb) {
            for (int p = 0; p < kb; p++)
                for (int c = 0; c < GEMM_NR; c++)
                    dst[p * GEMM_NR + c] = c < cols ? B[(size_t)(k0 + p) * ldb + c0 + c] : 0.0f;
        } else if (cols == GEMM_NR) {
            /* B is N×K: each stored row is one column of op(B), contiguous along k. Transpose
             * 16×16 blocks in registers: 16 columns by 16 k at a time. */
            int p = 0;
            __global const float *src = B + (size_t)c0 * ldb + k0;
            for (; p + 16 <= kb; p += 16) {
                gemm_transpose_16x16(src + p, ldb, dst + p * GEMM_NR, GEMM_NR);
                gemm_transpose_16x16(src + 16 * (size_t)ldb + p, ldb, dst + p * GEMM_NR + 16,
                                     GEMM_NR);
            }
            for (; p < kb; p++)
                for (int c = 0; c < GEMM_NR; c++)
                    dst[p * GEMM_NR + c] = B[(size_t)(c0 + c) * ldb + k0 + p];
        } else {
            for (int c = 0; c < GEMM_NR; c++) {
                if (c < cols) {
                    __global const float *src = B + (size_t)(c0 + c) * ldb + k0;
                    for (int p = 0; p < kb; p++)
                        dst[p * GEMM_NR + c] = src[p];
                } else {
                    for (int p = 0; p < kb; p++)
                        dst[p * GEMM_NR + c] = 0.0f;
                }
            }
        }
    }
}

/* One C row of the micro-tile: 32 values as two float16, combined with what C holds. */
#define GEMM_ROW_STORE(r)                                                                          \
    do {                                                                                           \
        __global float *cr = crow + (size_t)(r) * ldc;                                             \
        float16 v0 = alpha * c##r##0, v1 = alpha * c##r##1;                                        \
        if (!first) {                                                                              \
            v0 += vload16(0, cr);                                                                  \
            v1 += vload16(1, cr);                                                                  \
        } else if (beta != 0.0f) {                                                                 \
            v0 = fma((float16)beta, vload16(0, cr), v0);                                           \
            v1 = fma((float16)beta, vload16(1, cr), v1);                                           \
        }                                                                                          \
        vstore16(v0, 0, cr);                                                                       \
        vstore16(v1, 1, cr);                                                                       \
    } while (0)

#define GEMM_ROW_SPILL(r)                                                                          \
    do {                                                                                           \
        vstore16(c##r##0, 2 * (r), tile);                                                          \
        vstore16(c##r##1, 2 * (r) + 1, tile);                                                      \
    } while (0)

#define GEMM_ROW_FMA(r)                                                                            \
    do {                                                                                           \
        float16 a_ = (float16)(a[r]);                                                              \
        c##r##0 = fma(a_, b0, c##r##0);                                                            \
        c##r##1 = fma(a_, b1, c##r##1);                                                            \
    } while (0)

#define GEMM_ACC_DECL                                                                              \
    float16 c00 = 0, c01 = 0, c10 = 0, c11 = 0, c20 = 0, c21 = 0, c30 = 0, c31 = 0;                \
    float16 c40 = 0, c41 = 0, c50 = 0, c51 = 0, c60 = 0, c61 = 0, c70 = 0, c71 = 0

#define GEMM_ACC_STEP                                                                              \
    GEMM_ROW_FMA(0);                                                                               \
    GEMM_ROW_FMA(1);                                                                               \
    GEMM_ROW_FMA(2);                                                                               \
    GEMM_ROW_FMA(3);                                                                               \
    GEMM_ROW_FMA(4);                                                                               \
    GEMM_ROW_FMA(5);                                                                               \
    GEMM_ROW_FMA(6);                                                                               \
    GEMM_ROW_FMA(7)

/* Merges the accumulators into C[rows][cols] at crow per `first` (see GEMM_ROW_STORE); a
 * partial tile goes through a private copy, one element at a time. */
#define GEMM_TILE_STORE                                                                            \
    do {                                                                                           \
        if (rows == GEMM_MR && cols == GEMM_NR) {                                                  \
            GEMM_ROW_STORE(0);                                                                     \
            GEMM_ROW_STORE(1);                                                                     \
            GEMM_ROW_STORE(2);                                                                     \
            GEMM_ROW_STORE(3);                                                                     \
            GEMM_ROW_STORE(4);                                                                     \
            GEMM_ROW_STORE(5);                                                                     \
            GEMM_ROW_STORE(6);                                                                     \
            GEMM_ROW_STORE(7);                                                                     \
            break;                                                                                 \
        }                                                                                          \
        float tile[GEMM_MR * GEMM_NR];                                                             \
        GEMM_ROW_SPILL(0);                                                                         \
        GEMM_ROW_SPILL(1);                                                                         \
        GEMM_ROW_SPILL(2);                                                                         \
        GEMM_ROW_SPILL(3);                                                                         \
        GEMM_ROW_SPILL(4);                                                                         \
        GEMM_ROW_SPILL(5);                                                                         \
        GEMM_ROW_SPILL(6);                                                                         \
        GEMM_ROW_SPILL(7);                                                                         \
        for (int r = 0; r < rows; r++) {                                                           \
            __global float *cr = crow + (size_t)r * ldc;                                           \
            for (int c = 0; c < cols; c++) {                                                       \
                float v = alpha * tile[r * GEMM_NR + c];                                           \
                if (!first)                                                                        \
                    v += cr[c];                                                                    \
                else if (beta != 0.0f)                                                             \
                    v = fma(beta, cr[c], v);                                                       \
                cr[c] = v;                                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* C[rows][cols] at crow (merged per `first`) = an Ap panel × a packed Bp panel. */
static void gemm_micro(__local const float *a, __local const float16 *b, int kb, int rows,
                       int cols, float alpha, float beta, int first, __global float *crow,
                       int ldc)
{
    GEMM_ACC_DECL;
    for (int p = 0; p < kb; p++) {
        float16 b0 = b[0], b1 = b[1];
        GEMM_ACC_STEP;
        a += GEMM_MR;
        b += 2;
    }
    GEMM_TILE_STORE;
}

/* The same with B read in place: kb rows of NR floats, ldb apart (op(B) = B, a full panel). */
static void gemm_micro_direct(__local const float *a, __global const float *b, int ldb, int kb,
                              int rows, int cols, float alpha, float beta, int first,
                              __global float *crow, int ldc)
{
    GEMM_ACC_DECL;
    for (int p = 0; p < kb; p++) {
        float16 b0 = vload16(0, b), b1 = vload16(1, b);
        GEMM_ACC_STEP;
        a += GEMM_MR;
        b += ldb;
    }
    GEMM_TILE_STORE;
}

/* Where a group of gemm_cpu (gemm_nn_narrow, gemm_tiled) writes: C, or with K split into parts
 * its own scratch slice W[part] (M×N dense), plainly (alpha 1, beta 0); declares out and ldo. */
#define GEMM_PART_OUT                                                                              \
    __global float *out = C;                                                                       \
    int ldo = ldc;                                                                                 \
    if (get_num_groups(2) > 1) {                                                                   \
        out = W + get_group_id(2) * (size_t)M * N;                                                 \
        ldo = N;                                                                                   \
        alpha = 1.0f;                                                                              \
        beta = 0.0f;                                                                               \
    }

/* Global size (tiles across N, tiles down M, parts), local size (1, 1, 1). Ap holds mb·kc
 * floats, Bp kc·nb; mb is a multiple of GEMM_MR and nb of GEMM_NR. With one part the group
 * writes C. With several (split K, for long reductions onto a small C), part s covers
 * k ∈ [s·kpart, (s+1)·kpart) and writes its plain sum op(A)·op(B) into W[s] (M×N, dense), which
 * gemm_cpu_sum then folds into C. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_cpu(int ta, int tb, int M, int N, int K, float alpha, __global const float *A, int lda,
         __global const float *B, int ldb, float beta, __global float *C, int ldc, int mb, int nb,
         int kc, int kpart, __global float *W, __local float *Ap, __local float *Bp)
{
    int n0 = get_group_id(0) * nb, m0 = get_group_id(1) * mb;
    int mh = min(mb, M - m0), nw = min(nb, N - n0);
    int mpanels = (mh + GEMM_MR - 1) / GEMM_MR, npanels = (nw + GEMM_NR - 1) / GEMM_NR;
    int kbeg = get_group_id(2) * kpart, kend = min(K, kbeg + kpart);
    GEMM_PART_OUT;
    /* A short tile uses each B panel once or twice: packing it would only add a pass over B
     * that cannot overlap the arithmetic. Its full panels are then read in place. */
    int direct = !tb && mpanels <= GEMM_DIRECT_B_PANELS ? nw / GEMM_NR : 0;
    int k0 = kbeg;
    do {
        int kb = min(kc, kend - k0);
        gemm_pack_b(tb, N, B, ldb, n0, nw, k0, kb, direct, Bp);
        gemm_pack_a(ta, M, A, lda, m0, mh, k0, kb, Ap);
        for (int jp = 0; jp < npanels; jp++) {
            int c0 = n0 + jp * GEMM_NR;
            for (int ip = 0; ip < mpanels; ip++) {
                int r0 = m0 + ip * GEMM_MR;
                int rows = min(GEMM_MR, M - r0), cols = min(GEMM_NR, N - c0);
                __global float *crow = out + (size_t)r0 * ldo + c0;
                if (jp < direct)
                    gemm_micro_direct(Ap + ip * GEMM_MR * kb, B + (size_t)k0 * ldb + c0, ldb, kb,
                                      rows, cols, alpha, beta, k0 == kbeg, crow, ldo);
                else
                    gemm_micro(Ap + ip * GEMM_MR * kb,
                               (__local const float16 *)(Bp + jp * GEMM_NR * kb), kb, rows, cols,
                               alpha, beta, k0 == kbeg, crow, ldo);
            }
        }
        k0 += kc;
    } while (k0 < kend);
}

/* C = alpha·Σ_s W[s] + beta·C, summing the parts in order so the result does not depend on
 * scheduling. Global size (N, M). */
__kernel void gemm_cpu_sum(int M, int N, int parts, float alpha, __global const float *W,
                           float beta, __global float *C, int ldc)
{
    int j = get_global_id(0), i = get_global_id(1);
    if (i >= M || j >= N)
        return;
    size_t e = (size_t)i * N + j, stride = (size_t)M * N;
    float s = 0.0f;
    for (int p = 0; p < parts; p++)
        s += W[e + p * stride];
    __global float *c = C + (size_t)i * ldc + j;
    *c = beta != 0.0f ? fma(beta, *c, alpha * s) : alpha * s;
}

#define GEMM_TS  64 /* C tile edge per work-group */
#define GEMM_WPT 4  /* outputs per work-item along each edge */
#define GEMM_TK  16 /* K slice staged in local memory */
#define GEMM_RTS (GEMM_TS / GEMM_WPT)

/* Global size (ceil(N/TS)·RTS, ceil(M/TS)·RTS, parts), local size (RTS, RTS, 1). Part s covers
 * k ∈ [s·kpart, (s+1)·kpart); with one part it writes C, with several W[s] (GEMM_PART_OUT). */
__kernel __attribute__((reqd_work_group_size(GEMM_RTS, GEMM_RTS, 1))) void
gemm_tiled(int ta, int tb, int M, int N, int K, float alpha, __global const float *A, int lda,
           __global const float *B, int ldb, float beta, __global float *C, int ldc, int kpart,
           __global float *W)
{
    __local float As[GEMM_TK][GEMM_TS + 1];
    __local float Bs[GEMM_TK][GEMM_TS + 1];
    int tx = get_local_id(0), ty = get_local_id(1);
    int n0 = get_group_id(0) * GEMM_TS, m0 = get_group_id(1) * GEMM_TS;
    int lin = ty * GEMM_RTS + tx;
    float acc[GEMM_WPT][GEMM_WPT];
    for (int i = 0; i < GEMM_WPT; i++)
        for (int j = 0; j < GEMM_WPT; j++)
            acc[i][j] = 0.0f;

    int kbeg = get_group_id(2) * kpart, kend = min(K, kbeg + kpart);
    GEMM_PART_OUT;
    for (int k0 = kbeg; k0 < kend; k0 += GEMM_TK) {
        /* TS·TK values of each operand, RTS² work-items, loaded so that consecutive work-items
         * read consecutive addresses of whichever layout the operand has. */
        for (int e = lin; e < GEMM_TS * GEMM_TK; e += GEMM_RTS * GEMM_RTS) {
            int m, p, n;
            if (ta) {
                m = e % GEMM_TS, p = e / GEMM_TS;
            } else {
                p = e % GEMM_TK, m = e / GEMM_TK;
            }
            int gm = m0 + m, gp = k0 + p;
            float v = 0.0f;
            if (gm < M && gp < kend)
                v = ta ? A[(size_t)gp * lda + gm] : A[(size_t)gm * lda + gp];
            As[p][m] = v;
            if (tb) {
                p = e % GEMM_TK, n = e / GEMM_TK;
            } else {
                n = e % GEMM_TS, p = e / GEMM_TS;
            }
            int gn = n0 + n;
            gp = k0 + p;
            v = 0.0f;
            if (gn < N && gp < kend)
                v = tb ? B[(size_t)gn * ldb + gp] : B[(size_t)gp * ldb + gn];
            Bs[p][n] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < GEMM_TK; p++) {
            float a[GEMM_WPT], b[GEMM_WPT];
            for (int i = 0; i < GEMM_WPT; i++)
                a[i] = As[p][ty + i * GEMM_RTS];
            for (int j = 0; j < GEMM_WPT; j++)
                b[j] = Bs[p][tx + j * GEMM_RTS];
            for (int i = 0; i < GEMM_WPT; i++)
                for (int j = 0; j < GEMM_WPT; j++)
                    acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < GEMM_WPT; i++) {
        int gm = m0 + ty + i * GEMM_RTS;
        if (gm >= M)
            continue;
        for (int j = 0; j < GEMM_WPT; j++) {
            int gn = n0 + tx + j * GEMM_RTS;
            if (gn >= N)
                continue;
            __global float *c = out + (size_t)gm * ldo + gn;
            float v = alpha * acc[i][j];
            *c = beta != 0.0f ? fma(beta, *c, v) : v;
        }
    }
}

/* Narrow shapes on CPU devices, where gemm_cpu's 8×32 tile is mostly padding (kernels/gemm.c picks
 * them): a dense layer's weight gradient Xᵀ·dZ with few outputs (N ≤ 16, K one of gemm_cpu's K
 * blocks) and its input gradient dZ·Wᵀ (K ≤ 16). Each C element is the same chain as gemm_cpu's:
 * fma over k = 0..K−1 from 0, then alpha·acc, then fma(beta, C, ·) when beta != 0, so the results
 * are gemm_cpu's bits (tests/unit/kernels/test_gemm.c compares them). One work-item per
 * work-group, 16 C rows (TN) or columns (NT) per float16; ta and tb are there so that the first 13
 * arguments are gemm_cpu's (the host sets them alike). */

#define GEMM_N16_DECL                                                                              \
    float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0, a8 = 0, a9 = 0,        \
            a10 = 0, a11 = 0, a12 = 0, a13 = 0, a14 = 0, a15 = 0

#define GEMM_N16_FMA(j) a##j = fma(xv, (float16)bp[j], a##j)

/* Column j of the 16-row block at row i: alpha·a_j (+ beta·C) into C[i + l][j]. */
#define GEMM_N16_STORE(j)                                                                          \
    do {                                                                                           \
        if ((j) < N) {                                                                             \
            float t_[16];                                                                          \
            vstore16(alpha * a##j, 0, t_);                                                         \
            for (int l = 0; l < 16; l++) {                                                         \
                __global float *c_ = C + (size_t)(i + l) * ldc + (j);                              \
                *c_ = beta != 0.0f ? fma(beta, *c_, t_[l]) : t_[l];                                \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* C = alpha·Aᵀ·B + beta·C with A K×M (lda), B K×N (ldb), N ≤ 16: rows [g·per, (g+1)·per) of C.
 * bl (__local, K·16 floats) holds B padded to 16 columns. Global size ceil(M/per), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_tn_narrow(int ta, int tb, int M, int N, int K, float alpha, __global const float *A, int lda,
               __global const float *B, int ldb, float beta, __global float *C, int ldc, int per,
               __local float *bl)
{
    int i0 = get_group_id(0) * per, i1 = min(M, i0 + per);
    for (int p = 0; p < K; p++)
        for (int j = 0; j < 16; j++)
            bl[p * 16 + j] = j < N ? B[(size_t)p * ldb + j] : 0.0f;
    int i = i0;
    for (; i + 16 <= i1; i += 16) {
        GEMM_N16_DECL;
        for (int p = 0; p < K; p++) {
            float16 xv = vload16(0, A + (size_t)p * lda + i);
            __local const float *bp = bl + p * 16;
            GEMM_N16_FMA(0);
            GEMM_N16_FMA(1);
            GEMM_N16_FMA(2);
            GEMM_N16_FMA(3);
            GEMM_N16_FMA(4);
            GEMM_N16_FMA(5);
            GEMM_N16_FMA(6);
            GEMM_N16_FMA(7);
            GEMM_N16_FMA(8);
            GEMM_N16_FMA(9);
            GEMM_N16_FMA(10);
            GEMM_N16_FMA(11);
            GEMM_N16_FMA(12);
            GEMM_N16_FMA(13);
            GEMM_N16_FMA(14);
            GEMM_N16_FMA(15);
        }
        GEMM_N16_STORE(0);
        GEMM_N16_STORE(1);
        GEMM_N16_STORE(2);
        GEMM_N16_STORE(3);
        GEMM_N16_STORE(4);
        GEMM_N16_STORE(5);
        GEMM_N16_STORE(6);
        GEMM_N16_STORE(7);
        GEMM_N16_STORE(8);
        GEMM_N16_STORE(9);
        GEMM_N16_STORE(10);
        GEMM_N16_STORE(11);
        GEMM_N16_STORE(12);
        GEMM_N16_STORE(13);
        GEMM_N16_STORE(14);
        GEMM_N16_STORE(15);
    }
    for (; i < i1; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int p = 0; p < K; p++)
                acc = fma(A[(size_t)p * lda + i], bl[p * 16 + j], acc);
            __global float *c = C + (size_t)i * ldc + j;
            float v = alpha * acc;
            *c = beta != 0.0f ? fma(beta, *c, v) : v;
        }
}

/* C = alpha·A·Bᵀ + beta·C with A M×K (lda), B N×K (ldb), K ≤ 16: columns [g·per, (g+1)·per) of
 * C. The run's B is transposed once into bl (__local, K·per floats), then each row of C is
 * written in order, 16 columns at a time. Global size ceil(N/per), local 1. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_nt_narrow(int ta, int tb, int M, int N, int K, float alpha, __global const float *A, int lda,
               __global const float *B, int ldb, float beta, __global float *C, int ldc, int per,
               __local float *bl)
{
    int j0 = get_group_id(0) * per, j1 = min(N, j0 + per), w = j1 - j0, w16 = w / 16 * 16;
    for (int l = 0; l < w; l++)
        for (int p = 0; p < K; p++)
            bl[p * per + l] = B[(size_t)(j0 + l) * ldb + p];
    for (int m = 0; m < M; m++) {
        __global const float *ar = A + (size_t)m * lda;
        __global float *cr = C + (size_t)m * ldc + j0;
        for (int j = 0; j < w16; j += 16) {
            float16 acc = 0.0f;
            for (int p = 0; p < K; p++)
                acc = fma((float16)ar[p], vload16(0, bl + p * per + j), acc);
            float16 v = alpha * acc;
            if (beta != 0.0f)
                v = fma((float16)beta, vload16(0, cr + j), v);
            vstore16(v, 0, cr + j);
        }
        for (int j = w16; j < w; j++) {
            float acc = 0.0f;
            for (int p = 0; p < K; p++)
                acc = fma(ar[p], bl[p * per + j], acc);
            float v = alpha * acc;
            cr[j] = beta != 0.0f ? fma(beta, cr[j], v) : v;
        }
    }
}

/* C = alpha·A·B + beta·C with N ≤ 16 (a dense layer's forward to few outputs): gemm_cpu with its
 * arguments, plan and split-K scratch (W, then gemm_cpu_sum), but 8×16 register tiles over B
 * padded to 16 columns in bl (__local, kc·16 floats) instead of 8×32 over 32, and A read in
 * place. Per element the same chain per K block and the same merge as GEMM_TILE_STORE's
 * element path, so the bits are gemm_cpu's. Global size (1, ceil(M/mb), parts), local 1; ap is
 * unused. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_nn_narrow(int ta, int tb, int M, int N, int K, float alpha, __global const float *A, int lda,
               __global const float *B, int ldb, float beta, __global float *C, int ldc, int mb,
               int nb, int kc, int kpart, __global float *W, __local float *ap, __local float *bl)
{
    int m0 = get_group_id(1) * mb, m1 = min(M, m0 + mb);
    int kbeg = get_group_id(2) * kpart, kend = min(K, kbeg + kpart);
    GEMM_PART_OUT;
    int k0 = kbeg;
    do {
        int kb = min(kc, kend - k0), first = k0 == kbeg;
        for (int p = 0; p < kb; p++)
            for (int j = 0; j < 16; j++)
                bl[p * 16 + j] = j < N ? B[(size_t)(k0 + p) * ldb + j] : 0.0f;
        for (int r0 = m0; r0 < m1; r0 += 8) {
            int rows = min(8, m1 - r0), l = rows - 1;
            __global const float *a0 = A + (size_t)r0 * lda + k0;
            __global const float *a1 = a0 + (size_t)min(1, l) * lda;
            __global const float *a2 = a0 + (size_t)min(2, l) * lda;
            __global const float *a3 = a0 + (size_t)min(3, l) * lda;
            __global const float *a4 = a0 + (size_t)min(4, l) * lda;
            __global const float *a5 = a0 + (size_t)min(5, l) * lda;
            __global const float *a6 = a0 + (size_t)min(6, l) * lda;
            __global const float *a7 = a0 + (size_t)min(7, l) * lda;
            float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
            for (int p = 0; p < kb; p++) {
                float16 b = vload16(p, bl);
                c0 = fma((float16)a0[p], b, c0);
                c1 = fma((float16)a1[p], b, c1);
                c2 = fma((float16)a2[p], b, c2);
                c3 = fma((float16)a3[p], b, c3);
                c4 = fma((float16)a4[p], b, c4);
                c5 = fma((float16)a5[p], b, c5);
                c6 = fma((float16)a6[p], b, c6);
                c7 = fma((float16)a7[p], b, c7);
            }
            float tile[8 * 16];
            vstore16(c0, 0, tile);
            vstore16(c1, 1, tile);
            vstore16(c2, 2, tile);
            vstore16(c3, 3, tile);
            vstore16(c4, 4, tile);
            vstore16(c5, 5, tile);
            vstore16(c6, 6, tile);
            vstore16(c7, 7, tile);
            for (int r = 0; r < rows; r++) {
                __global float *cr = out + (size_t)(r0 + r) * ldo;
                for (int c = 0; c < N; c++) {
                    float v = alpha * tile[r * 16 + c];
                    if (!first)
                        v += cr[c];
                    else if (beta != 0.0f)
                        v = fma(beta, cr[c], v);
                    cr[c] = v;
                }
            }
        }
        k0 += kc;
    } while (k0 < kend);
}
