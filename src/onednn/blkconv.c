/* blkconv.c: the weight gradient of a stride-1 convolution with 3 filter columns (3x3, 1x3, ...)
 * on oneDNN's blocked tensors ([n][c / 8][h][w][8]), written for the oneDNN plan (conv.c) because
 * oneDNN 2.x's own backward-weights kernel for 3x3 filters on AVX2 (jit:avx2) runs at 55-65 % of
 * the pace of the same convolution's forward and backward-data kernels: in a resnet50 step on two
 * AVX2 cores, 3x3 weight gradients were 368 ms of 1,754 ms of oneDNN primitives; in googlenet's,
 * 294 of 1,114 (docs/performance.md).
 *
 *   dw[oc][ic][kh][kw] = sum over n, oh, ow of x[n][ic][oh + kh - pt][ow + kw - pl] dy[n][oc][oh][ow]
 *
 * One task per pair of 8-channel blocks (output block, input block) accumulates the pair's
 * kh x 3 x 8 x 8 sums over every image, so no task shares a sum and no sums are reduced across
 * threads. For one filter row kh, an input row and the output-gradient row that meets it are
 * walked once: at input column iw, the output columns that read it are ow = iw + pl - k for the
 * filter's columns k, so the 3 output-gradient vectors (8 output channels each) that meet column
 * iw sit in registers as a window that slides by one vector per column, and each input channel's
 * value is broadcast once and multiplied into all 3 of them: per column 1 vector load, 4
 * broadcasts and 12 fused multiply-adds, in 12 sums + 3 window + 1 broadcast = 16 ymm registers.
 * Products of padded positions are never formed. The same scheme for 5 columns (2 input channels
 * at a time) measured no faster than oneDNN's kernel at googlenet's 5x5 shapes (0.7-1.1x), and 1x1
 * filters as 3 output blocks by 4 input channels a pixel (7 loads for 12 multiply-adds) at 0.65-1.1x
 * of oneDNN's jit_1x1 kernel at resnet50's shapes, so those stay oneDNN's. Needs no oneDNN: the tests run it against the definition in any build. */
#include <stddef.h>
#include <string.h>

#include "onednn/blkconv.h"
#include "util.h"

#define BLK 8
#define KH_MAX 7
#define KW_MAX 3
#define CHUNK_BYTES (128 * 1024)

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))

/* acc[k][ic0 + s][8 output channels] += the products of filter row kh, column k, input channel
 * ic0 + s (s < 4) over nimg images' rows: xb, dyb the first image's blocks (an input block's
 * [h][w][8], an output block's [oh][ow][8]), the next image's xstep and dystep floats on; acc the
 * filter row's [3][8][8]. */
TGT static void dw_rows_3(const DnBlkConv *g, const float *xb, const float *dyb, int nimg, size_t xstep, size_t dystep,
                          int kh, int ic0, float *acc) {
    enum { KW = 3, ICS = 4 };
    __m256 a[KW][ICS];
#pragma GCC unroll 4
    for (int k = 0; k < KW; k++)
#pragma GCC unroll 4
        for (int s = 0; s < ICS; s++) a[k][s] = _mm256_loadu_ps(acc + ((size_t)k * BLK + ic0 + s) * BLK);
    /* the output rows whose filter row kh lies inside the input */
    const int oh0 = g->pt - kh > 0 ? g->pt - kh : 0;
    const int oh1 = g->h + g->pt - kh < g->oh ? g->h + g->pt - kh : g->oh;
    /* input columns iw < wfull meet output column iw + pl with filter column 0 */
    int wfull = g->ow - g->pl < g->w ? g->ow - g->pl : g->w;
    if (wfull < 0) wfull = 0;
    for (int n = 0; n < nimg; n++)
        for (int oh = oh0; oh < oh1; oh++) {
            const float *xr = xb + n * xstep + (size_t)(oh + kh - g->pt) * g->w * BLK + ic0;
            const float *dr = dyb + n * dystep + (size_t)oh * g->ow * BLK;
            __m256 win[KW]; /* win[k]: dy at output column iw + pl - k (zero outside the row) */
#pragma GCC unroll 4
            for (int k = 0; k < KW; k++) {
                const int o = g->pl - 1 - k;
                win[k] = o >= 0 && o < g->ow ? _mm256_loadu_ps(dr + (size_t)o * BLK) : _mm256_setzero_ps();
            }
            for (int iw = 0; iw < g->w; iw++) {
#pragma GCC unroll 4
                for (int k = KW - 1; k > 0; k--) win[k] = win[k - 1];
                win[0] = iw < wfull ? _mm256_loadu_ps(dr + (size_t)(iw + g->pl) * BLK) : _mm256_setzero_ps();
#pragma GCC unroll 4
                for (int s = 0; s < ICS; s++) {
                    const __m256 b = _mm256_broadcast_ss(xr + (size_t)iw * BLK + s);
#pragma GCC unroll 4
                    for (int k = 0; k < KW; k++) a[k][s] = _mm256_fmadd_ps(b, win[k], a[k][s]);
                }
            }
        }
#pragma GCC unroll 4
    for (int k = 0; k < KW; k++)
#pragma GCC unroll 4
        for (int s = 0; s < ICS; s++) _mm256_storeu_ps(acc + ((size_t)k * BLK + ic0 + s) * BLK, a[k][s]);
}

static int has_avx2_fma(void) { return cpu_avx2_fma(); }
#else
static int has_avx2_fma(void) { return 0; }
#endif

int dn_blkconv_dw_ok(const DnBlkConv *g) {
    return has_avx2_fma() && g->n > 0 && g->cin > 0 && g->cout > 0 && g->cin % BLK == 0 && g->cout % BLK == 0 &&
           g->kw == 3 && g->kh >= 1 && g->kh <= KH_MAX && g->h > 0 && g->w > 0 && g->oh > 0 &&
           g->ow > 0 && g->pt >= 0 && g->pl >= 0;
}

void dn_blkconv_dw(const DnBlkConv *g, const float *x, const float *dy, float *dw, float *db) {
#if defined(__x86_64__) || defined(__i386__)
    const int cbi = g->cin / BLK, cbo = g->cout / BLK, taps = g->kh * g->kw;
    const size_t xplane = (size_t)g->h * g->w * BLK, dplane = (size_t)g->oh * g->ow * BLK;
    /* images a pass over the rows takes: a pair's blocks of them within about 128 KiB (the L2) */
    int chunk = (int)(CHUNK_BYTES / (sizeof(float) * (xplane + dplane)));
    if (chunk < 1) chunk = 1;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < cbo * cbi; p++) {
        const int ocb = p / cbi, icb = p % cbi;
        float acc[KH_MAX * KW_MAX * BLK * BLK]; /* [kh][kw][8 input channels][8 output channels] */
        memset(acc, 0, sizeof(float) * (size_t)taps * BLK * BLK);
        for (int n = 0; n < g->n; n += chunk) {
            const float *xb = x + ((size_t)n * cbi + icb) * xplane, *dyb = dy + ((size_t)n * cbo + ocb) * dplane;
            const int nimg = g->n - n < chunk ? g->n - n : chunk;
            for (int kh = 0; kh < g->kh; kh++) {
                float *ak = acc + (size_t)kh * g->kw * BLK * BLK;
                for (int ic0 = 0; ic0 < BLK; ic0 += 4)
                    dw_rows_3(g, xb, dyb, nimg, cbi * xplane, cbo * dplane, kh, ic0, ak);
            }
        }
        for (int o = 0; o < BLK; o++)
            for (int i = 0; i < BLK; i++) {
                float *w = dw + ((size_t)(ocb * BLK + o) * g->cin + (size_t)icb * BLK + i) * taps;
                for (int t = 0; t < taps; t++) w[t] = acc[((size_t)t * BLK + i) * BLK + o];
            }
    }
    if (db) {
#pragma omp parallel for schedule(static)
        for (int ocb = 0; ocb < cbo; ocb++) {
            float s[BLK] = {0};
            for (int n = 0; n < g->n; n++) {
                const float *d = dy + ((size_t)n * cbo + ocb) * dplane;
                for (size_t e = 0; e < dplane; e += BLK)
                    for (int o = 0; o < BLK; o++) s[o] += d[e + o];
            }
            for (int o = 0; o < BLK; o++) db[ocb * BLK + o] = s[o];
        }
    }
#else
    (void)g, (void)x, (void)dy, (void)dw, (void)db;
#endif
}
