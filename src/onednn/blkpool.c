/* blkpool.c: max pooling of a blocked input ([n][c / b][h][w][b], b = 8 or 16), written for
 * the oneDNN plan (pool.c) because oneDNN 2.x's own pooling kernels move only 1.4-4 GB/s at
 * googlenet's shapes on two AVX2 cores, a third of what the same bytes cost elsewhere in the
 * step. Forward keeps each maximum's position in its window (one byte per output element);
 * backward gathers, for each input element, the gradients of the outputs whose maximum it was, so
 * every input gradient is written (or added to) once, b channels at a time in vector registers.
 * The rule is the reference layer's (layers/pool.c): the first in-bounds element, row by row,
 * strictly greater than every one before it; TensorFlow's padding (no padded position is ever
 * picked). Needs no oneDNN: the tests run it against the reference layer in any build. */
#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE4_1__
#include <smmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BLK_AVX2 1
#define TGT __attribute__((target("avx2")))
#endif

#include "onednn/blkpool.h"
#include "util.h"

/* The window of output (oy, ox) clipped to the input: rows [y0, y1), columns [x0, x1); (ys, xs)
 * its unclipped corner. */
static inline void blk_window(const DnBlkPool *g, int oy, int ox, int *ys, int *xs, int *y0, int *y1, int *x0, int *x1) {
    *ys = oy * g->sh - g->pt;
    *xs = ox * g->sw - g->pl;
    *y0 = *ys < 0 ? 0 : *ys;
    *x0 = *xs < 0 ? 0 : *xs;
    *y1 = *ys + g->kh > g->h ? g->h : *ys + g->kh;
    *x1 = *xs + g->kw > g->w ? g->w : *xs + g->kw;
}

/* The outputs [o0, o1] whose window [o * stride - pad, o * stride - pad + k) holds input i (along
 * one axis of n outputs). */
static inline void blk_outputs_of(int i, int pad, int k, int stride, int n, int *o0, int *o1) {
    const int lo = i + pad - k + 1;
    *o0 = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    *o1 = (i + pad) / stride;
    if (*o1 > n - 1) *o1 = n - 1;
}

/* One output row of image plane block xp (B channels a position). */
static inline __attribute__((always_inline)) void blk_forward_row(const DnBlkPool *g, const float *xp, float *yr,
                                                                  uint8_t *pr, int oy, const int B) {
    for (int ox = 0; ox < g->ow; ox++) {
        int ys, xs, y0, y1, x0, x1;
        blk_window(g, oy, ox, &ys, &xs, &y0, &y1, &x0, &x1);
        float best[16];
        int at[16];
        const float *first = xp + ((size_t)y0 * g->w + x0) * B;
#ifdef __SSE4_1__
        /* B / 4 vectors of 4 lanes: compare, then blend the value and the position */
        __m128 vb[4];
        __m128i va[4];
        const __m128i a0 = _mm_set1_epi32((y0 - ys) * g->kw + (x0 - xs));
        for (int q = 0; q < B / 4; q++) {
            vb[q] = _mm_set1_ps(-FLT_MAX);
            va[q] = a0;
        }
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) {
                const float *v = xp + ((size_t)yy * g->w + xx) * B;
                const __m128i kv = _mm_set1_epi32((yy - ys) * g->kw + (xx - xs));
                for (int q = 0; q < B / 4; q++) {
                    const __m128 x = _mm_loadu_ps(v + 4 * q), gt = _mm_cmpgt_ps(x, vb[q]);
                    vb[q] = _mm_blendv_ps(vb[q], x, gt);
                    va[q] = _mm_blendv_epi8(va[q], kv, _mm_castps_si128(gt));
                }
            }
        for (int q = 0; q < B / 4; q++) {
            _mm_storeu_ps(best + 4 * q, vb[q]);
            _mm_storeu_si128((__m128i *)(at + 4 * q), va[q]);
        }
#else
        for (int b = 0; b < B; b++) {
            best[b] = -FLT_MAX;
            at[b] = (y0 - ys) * g->kw + (x0 - xs);
        }
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) {
                const float *v = xp + ((size_t)yy * g->w + xx) * B;
                const int k = (yy - ys) * g->kw + (xx - xs);
                for (int b = 0; b < B; b++)
                    if (v[b] > best[b]) {
                        best[b] = v[b];
                        at[b] = k;
                    }
            }
#endif
        float *o = yr + (size_t)ox * B;
        uint8_t *p = pr + (size_t)ox * B;
        /* nothing above -FLT_MAX (-inf, NaN): the first element, as the reference */
        for (int b = 0; b < B; b++) {
            o[b] = best[b] > -FLT_MAX ? best[b] : first[b];
            p[b] = (uint8_t)at[b];
        }
    }
}

/* One input row's gradient: for each input element, the sum of the gradients of the outputs
 * whose maximum it is. */
static inline __attribute__((always_inline)) void blk_backward_row(const DnBlkPool *g, const float *dyp,
                                                                   const uint8_t *pp, float *dxr, int iy, int add,
                                                                   const int B) {
    int oy0, oy1;
    blk_outputs_of(iy, g->pt, g->kh, g->sh, g->oh, &oy0, &oy1);
    for (int ix = 0; ix < g->w; ix++) {
        int ox0, ox1;
        blk_outputs_of(ix, g->pl, g->kw, g->sw, g->ow, &ox0, &ox1);
        float acc[16];
#ifdef __SSE4_1__
        __m128 va[4];
        for (int q = 0; q < B / 4; q++) va[q] = _mm_setzero_ps();
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                const __m128i kv = _mm_set1_epi32((iy - (oy * g->sh - g->pt)) * g->kw + (ix - (ox * g->sw - g->pl)));
                const size_t o = ((size_t)oy * g->ow + ox) * B;
                for (int q = 0; q < B / 4; q++) {
                    int32_t p4;
                    memcpy(&p4, pp + o + 4 * q, 4);
                    const __m128i at = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(p4));
                    const __m128 hit = _mm_castsi128_ps(_mm_cmpeq_epi32(at, kv));
                    va[q] = _mm_add_ps(va[q], _mm_and_ps(hit, _mm_loadu_ps(dyp + o + 4 * q)));
                }
            }
        for (int q = 0; q < B / 4; q++) _mm_storeu_ps(acc + 4 * q, va[q]);
#else
        for (int b = 0; b < B; b++) acc[b] = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                const int k = (iy - (oy * g->sh - g->pt)) * g->kw + (ix - (ox * g->sw - g->pl));
                const size_t o = ((size_t)oy * g->ow + ox) * B;
                for (int b = 0; b < B; b++) acc[b] += pp[o + b] == k ? dyp[o + b] : 0.0f;
            }
#endif
        float *d = dxr + (size_t)ix * B;
        if (add)
            for (int b = 0; b < B; b++) d[b] += acc[b];
        else
            for (int b = 0; b < B; b++) d[b] = acc[b];
    }
}

#ifdef BLK_AVX2
/* The same rows in AVX2 (one vector of 8 lanes where SSE takes two of 4), the window's result
 * and the positions stored as vectors: the same comparisons, blends and sums in the same order,
 * so the same bits. lenet's first pooling (64 x 32 x 28 x 28, 2x2 stride 2) took 2.2 ms forward
 * and 1.5 ms backward a step on one core in SSE, most of it the scalar loops per output. */

/* the low byte of each of the 8 lanes, in order, into 8 bytes at p */
TGT static inline void store_bytes8(uint8_t *p, __m256i v) {
    const __m256i sel = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i b = _mm256_shuffle_epi8(v, sel);
    const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
    _mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(lo, hi));
}

TGT static inline __attribute__((always_inline)) void avx2_forward_row(const DnBlkPool *g, const float *xp, float *yr,
                                                                        uint8_t *pr, int oy, const int B) {
    const __m256 lowest = _mm256_set1_ps(-FLT_MAX);
    for (int ox = 0; ox < g->ow; ox++) {
        int ys, xs, y0, y1, x0, x1;
        blk_window(g, oy, ox, &ys, &xs, &y0, &y1, &x0, &x1);
        const float *first = xp + ((size_t)y0 * g->w + x0) * B;
        __m256 vb[2];
        __m256i va[2];
        const __m256i a0 = _mm256_set1_epi32((y0 - ys) * g->kw + (x0 - xs));
        for (int q = 0; q < B / 8; q++) {
            vb[q] = lowest;
            va[q] = a0;
        }
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) {
                const float *v = xp + ((size_t)yy * g->w + xx) * B;
                const __m256i kv = _mm256_set1_epi32((yy - ys) * g->kw + (xx - xs));
                for (int q = 0; q < B / 8; q++) {
                    const __m256 x = _mm256_loadu_ps(v + 8 * q), gt = _mm256_cmp_ps(x, vb[q], _CMP_GT_OQ);
                    vb[q] = _mm256_blendv_ps(vb[q], x, gt);
                    va[q] = _mm256_blendv_epi8(va[q], kv, _mm256_castps_si256(gt));
                }
            }
        /* nothing above -FLT_MAX (-inf, NaN): the first element, as the reference */
        for (int q = 0; q < B / 8; q++) {
            const __m256 found = _mm256_cmp_ps(vb[q], lowest, _CMP_GT_OQ);
            _mm256_storeu_ps(yr + (size_t)ox * B + 8 * q, _mm256_blendv_ps(_mm256_loadu_ps(first + 8 * q), vb[q], found));
            store_bytes8(pr + (size_t)ox * B + 8 * q, va[q]);
        }
    }
}

TGT static inline __attribute__((always_inline)) void avx2_backward_row(const DnBlkPool *g, const float *dyp,
                                                                         const uint8_t *pp, float *dxr, int iy, int add,
                                                                         const int B) {
    int oy0, oy1;
    blk_outputs_of(iy, g->pt, g->kh, g->sh, g->oh, &oy0, &oy1);
    for (int ix = 0; ix < g->w; ix++) {
        int ox0, ox1;
        blk_outputs_of(ix, g->pl, g->kw, g->sw, g->ow, &ox0, &ox1);
        __m256 va[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                const __m256i kv = _mm256_set1_epi32((iy - (oy * g->sh - g->pt)) * g->kw + (ix - (ox * g->sw - g->pl)));
                const size_t o = ((size_t)oy * g->ow + ox) * B;
                for (int q = 0; q < B / 8; q++) {
                    const __m256i at = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(pp + o + 8 * q)));
                    const __m256 hit = _mm256_castsi256_ps(_mm256_cmpeq_epi32(at, kv));
                    va[q] = _mm256_add_ps(va[q], _mm256_and_ps(hit, _mm256_loadu_ps(dyp + o + 8 * q)));
                }
            }
        float *d = dxr + (size_t)ix * B;
        for (int q = 0; q < B / 8; q++)
            _mm256_storeu_ps(d + 8 * q, add ? _mm256_add_ps(_mm256_loadu_ps(d + 8 * q), va[q]) : va[q]);
    }
}

/* the rows of each block size as plain functions, for the walkers below */
TGT static void avx2_fwd8(const DnBlkPool *g, const float *xp, float *yr, uint8_t *pr, int oy) {
    avx2_forward_row(g, xp, yr, pr, oy, 8);
}
TGT static void avx2_fwd16(const DnBlkPool *g, const float *xp, float *yr, uint8_t *pr, int oy) {
    avx2_forward_row(g, xp, yr, pr, oy, 16);
}
TGT static void avx2_bwd8(const DnBlkPool *g, const float *dyp, const uint8_t *pp, float *dxr, int iy, int add) {
    avx2_backward_row(g, dyp, pp, dxr, iy, add, 8);
}
TGT static void avx2_bwd16(const DnBlkPool *g, const float *dyp, const uint8_t *pp, float *dxr, int iy, int add) {
    avx2_backward_row(g, dyp, pp, dxr, iy, add, 16);
}

static int use_avx2 = -1; /* -1: where the CPU has AVX2 (dn_blkpool_avx2) */
static int avx2_on(void) { return use_avx2 < 0 ? cpu_avx2_fma() : use_avx2 && __builtin_cpu_supports("avx2"); }
#else
static int avx2_on(void) { return 0; }
#endif

int dn_blkpool_avx2(int on) {
#ifdef BLK_AVX2
    use_avx2 = on;
#else
    (void)on;
#endif
    return avx2_on();
}

typedef void (*FwdRow)(const DnBlkPool *g, const float *xp, float *yr, uint8_t *pr, int oy);
typedef void (*BwdRow)(const DnBlkPool *g, const float *dyp, const uint8_t *pp, float *dxr, int iy, int add);

static void sse_fwd8(const DnBlkPool *g, const float *xp, float *yr, uint8_t *pr, int oy) {
    blk_forward_row(g, xp, yr, pr, oy, 8);
}
static void sse_fwd16(const DnBlkPool *g, const float *xp, float *yr, uint8_t *pr, int oy) {
    blk_forward_row(g, xp, yr, pr, oy, 16);
}
static void sse_bwd8(const DnBlkPool *g, const float *dyp, const uint8_t *pp, float *dxr, int iy, int add) {
    blk_backward_row(g, dyp, pp, dxr, iy, add, 8);
}
static void sse_bwd16(const DnBlkPool *g, const float *dyp, const uint8_t *pp, float *dxr, int iy, int add) {
    blk_backward_row(g, dyp, pp, dxr, iy, add, 16);
}

void dn_blkpool_forward(const DnBlkPool *g, const float *x, float *y) {
    FwdRow row = g->b == 8 ? sse_fwd8 : sse_fwd16;
#ifdef BLK_AVX2
    if (avx2_on()) row = g->b == 8 ? avx2_fwd8 : avx2_fwd16;
#endif
    const size_t in_plane = (size_t)g->h * g->w * g->b, out_plane = (size_t)g->oh * g->ow * g->b;
    const int planes = g->n * g->cb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < g->oh; oy++) {
            const size_t o = (size_t)pl * out_plane + (size_t)oy * g->ow * g->b;
            row(g, x + (size_t)pl * in_plane, y + o, g->pos + o, oy);
        }
}

void dn_blkpool_backward(const DnBlkPool *g, const float *dy, float *dx, int add) {
    BwdRow row = g->b == 8 ? sse_bwd8 : sse_bwd16;
#ifdef BLK_AVX2
    if (avx2_on()) row = g->b == 8 ? avx2_bwd8 : avx2_bwd16;
#endif
    const size_t in_plane = (size_t)g->h * g->w * g->b, out_plane = (size_t)g->oh * g->ow * g->b;
    const int planes = g->n * g->cb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int pl = 0; pl < planes; pl++)
        for (int iy = 0; iy < g->h; iy++) {
            const size_t o = (size_t)pl * out_plane, i = (size_t)pl * in_plane + (size_t)iy * g->w * g->b;
            row(g, dy + o, g->pos + o, dx + i, iy, add);
        }
}
