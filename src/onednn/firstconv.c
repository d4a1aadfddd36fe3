/* firstconv.c: the weight gradient of a stride-1 convolution with few input channels (1 to 4: a
 * net's first layer, on the RGB or grey image) from its plain input [n][cin][h][w] and its output
 * gradient [n][cout / 8][oh][ow][8] (oneDNN's nChw8c, as the plan holds the output), written for
 * the oneDNN plan (conv.c) because oneDNN 2.6's AVX2 backward-weights kernel runs lenet's first
 * convolution (3 -> 32 channels, 5x5, 28x28, batch 64) at 45-57 GFLOP/s on one core, against
 * 73-91 for its forward (docs/performance.md).
 *
 *   dw[o][c][kh][kw] = sum over n, oh, ow of x[n][c][oh + kh - pt][ow + kw - pl] dy[n][o][oh][ow]
 *
 * One task per 8-channel output block and part of the batch (a number of parts that depends on the
 * shape only, so that the sums do not depend on the thread count), each part's sums added in a
 * fixed order at the end. For R filter rows at a time (the rows of all input channels in turn, so
 * that few passes take fewer than R) and one output-gradient row, the input rows they meet are
 * walked column by column; the output-gradient vectors that meet input column iw (output columns
 * iw + pl - k for the kw filter columns k) sit in registers as a window that slides by one vector
 * per column, as in blkconv.c: per column 1 load, R broadcasts and R * kw fused multiply-adds into
 * R * kw sums, with R the most rows for which R * kw + kw + 1 registers fit in 16 (kw 5: 2 rows,
 * 10 sums). Input rows outside the image read a row of zeros; output columns outside the row are
 * zero vectors in the window. The bias gradient is summed per image while its output gradient is
 * in the cache. The forward stays oneDNN's: a tile of 6 output pixels by 2 channel blocks in
 * registers, a broadcast input value and 2 weight vectors a tap, ran 10-15 % slower than oneDNN's
 * forward at lenet's shape. Needs no oneDNN: the tests run it against the definition in any
 * build. */
#include <stdlib.h>
#include <string.h>

#include "onednn/blkconv.h"
#include "util.h"

#define BLK 8
#define K1_MAX 7
#define CIN_MAX 4
/* weight gradient: a task per channel block and part of the batch, about this many tasks */
#define DW_TASKS 4

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* acc[t0 .. t0 + R - 1][kw][8] += the products of the rows t0 .. t0 + R - 1 of the filter's
 * cin * kh (row t: input channel t / kh, filter row t % kh) over one image: x its planes
 * [cin][h][w], zrow w zeros, dyb its output-gradient block [oh][ow][8]; acc [cin * kh][kw][8]. */
TGT INL void dw_rows(const DnBlkConv *g, const float *x, const float *zrow, const float *dyb, int t0, float *acc,
                     const int KW, const int R) {
    __m256 s[4][K1_MAX], win[K1_MAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 7
        for (int k = 0; k < KW; k++) s[r][k] = _mm256_loadu_ps(acc + ((size_t)(t0 + r) * KW + k) * BLK);
    int wfull = g->ow - g->pl < g->w ? g->ow - g->pl : g->w; /* iw < wfull: output column iw + pl exists */
    if (wfull < 0) wfull = 0;
    for (int oh = 0; oh < g->oh; oh++) {
        const float *xr[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const int t = t0 + r, ih = oh + t % g->kh - g->pt;
            xr[r] = ih >= 0 && ih < g->h ? x + ((size_t)(t / g->kh) * g->h + ih) * g->w : zrow;
        }
        const float *dr = dyb + (size_t)oh * g->ow * BLK;
#pragma GCC unroll 7
        for (int k = 0; k < KW; k++) {
            const int o = g->pl - 1 - k;
            win[k] = o >= 0 && o < g->ow ? _mm256_loadu_ps(dr + (size_t)o * BLK) : _mm256_setzero_ps();
        }
        for (int iw = 0; iw < g->w; iw++) {
#pragma GCC unroll 7
            for (int k = KW - 1; k > 0; k--) win[k] = win[k - 1];
            win[0] = iw < wfull ? _mm256_loadu_ps(dr + (size_t)(iw + g->pl) * BLK) : _mm256_setzero_ps();
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256 bx = _mm256_broadcast_ss(xr[r] + iw);
#pragma GCC unroll 7
                for (int k = 0; k < KW; k++) s[r][k] = _mm256_fmadd_ps(bx, win[k], s[r][k]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 7
        for (int k = 0; k < KW; k++) _mm256_storeu_ps(acc + ((size_t)(t0 + r) * KW + k) * BLK, s[r][k]);
}

/* the most rows a pass takes for kw columns: R * kw sums + kw window + 1 broadcast <= 16 */
static int dw_rows_max(int kw) {
    int r = 15 / kw - 1;
    return r < 1 ? 1 : r > 4 ? 4 : r;
}

#define DW_CASE(KW, R)                                                                                                \
    case KW * 8 + R: dw_rows(g, x, zrow, dyb, t0, acc, KW, R); break;
#define DW_CASES_4(KW) DW_CASE(KW, 1) DW_CASE(KW, 2) DW_CASE(KW, 3) DW_CASE(KW, 4)

TGT static void dw_pass(const DnBlkConv *g, const float *x, const float *zrow, const float *dyb, int t0, int r,
                        float *acc) {
    switch (g->kw * 8 + r) {
        DW_CASES_4(1)
        DW_CASES_4(2)
        DW_CASES_4(3)
        DW_CASE(4, 1)
        DW_CASE(4, 2)
        DW_CASE(5, 1)
        DW_CASE(5, 2)
        DW_CASE(6, 1)
        DW_CASE(7, 1)
    default: break;
    }
}

/* s[8] += the output gradient of one block of one image: dyb [oh * ow][8] */
TGT static void db_sum(const float *dyb, size_t npix, float *s) {
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    size_t p = 0;
    for (; p + 4 <= npix; p += 4)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = _mm256_add_ps(a[j], _mm256_loadu_ps(dyb + (p + j) * BLK));
    for (; p < npix; p++) a[0] = _mm256_add_ps(a[0], _mm256_loadu_ps(dyb + p * BLK));
    const __m256 t = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
    _mm256_storeu_ps(s, _mm256_add_ps(_mm256_loadu_ps(s), t));
}

static int has_avx2_fma(void) { return cpu_avx2_fma(); }
#else
static int has_avx2_fma(void) { return 0; }
#endif

int dn_firstconv_ok(const DnBlkConv *g) {
    return has_avx2_fma() && g->n > 0 && g->cin >= 1 && g->cin <= CIN_MAX && g->cout > 0 && g->cout % BLK == 0 && g->kh >= 1 &&
           g->kh <= K1_MAX && g->kw >= 1 && g->kw <= K1_MAX && g->h > 0 && g->w > 0 && g->oh > 0 && g->ow > 0 &&
           g->pt >= 0 && g->pt < g->kh && g->pl >= 0 && g->pl < g->kw;
}

void dn_firstconv_dw(const DnBlkConv *g, const float *x, const float *dy, float *dw, float *db) {
#if defined(__x86_64__) || defined(__i386__)
    const int cbo = g->cout / BLK, taps = g->cin * g->kh * g->kw, rmax = dw_rows_max(g->kw);
    /* parts of the batch: enough tasks for a few threads, a number that depends on the shape only */
    int parts = (DW_TASKS + cbo - 1) / cbo;
    if (parts > g->n) parts = g->n;
    const size_t xplane = (size_t)g->h * g->w, dplane = (size_t)g->oh * g->ow * BLK, per = (size_t)(taps + 1) * BLK;
    float *part = xmalloc_aligned((size_t)cbo * parts * per * sizeof(float)); /* [cbo][parts][taps + 1][8] */
    float *zrow = xmalloc_aligned((size_t)g->w * sizeof(float));
    memset(zrow, 0, (size_t)g->w * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int t = 0; t < cbo * parts; t++) {
        const int cb = t / parts, q = t % parts;
        const int n0 = (int)((long)g->n * q / parts), n1 = (int)((long)g->n * (q + 1) / parts);
        float *acc = part + (size_t)t * per; /* [cin][kh][kw][8], then the bias's [8] */
        memset(acc, 0, per * sizeof(float));
        for (int n = n0; n < n1; n++) {
            const float *dyb = dy + ((size_t)n * cbo + cb) * dplane;
            const int rows = g->cin * g->kh;
            for (int t0 = 0; t0 < rows; t0 += rmax)
                dw_pass(g, x + (size_t)n * g->cin * xplane, zrow, dyb, t0, rows - t0 < rmax ? rows - t0 : rmax, acc);
            if (db) db_sum(dyb, (size_t)g->oh * g->ow, acc + (size_t)taps * BLK);
        }
    }
    for (int cb = 0; cb < cbo; cb++)
        for (int o = 0; o < BLK; o++) {
            for (int t = 0; t < taps; t++) {
                float s = 0;
                for (int q = 0; q < parts; q++) s += part[((size_t)cb * parts + q) * per + (size_t)t * BLK + o];
                dw[(size_t)(cb * BLK + o) * taps + t] = s;
            }
            if (db) {
                float s = 0;
                for (int q = 0; q < parts; q++) s += part[((size_t)cb * parts + q) * per + (size_t)taps * BLK + o];
                db[cb * BLK + o] = s;
            }
        }
    free(part);
    free(zrow);
#else
    (void)g, (void)x, (void)dy, (void)dw, (void)db;
#endif
}
