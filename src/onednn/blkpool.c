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

#include "onednn/blkpool.h"

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
    /* outputs oy whose window [oy * sh - pt, oy * sh - pt + kh) holds iy; the same for columns */
    const int lo = iy + g->pt - g->kh + 1;
    const int oy0 = lo <= 0 ? 0 : (lo + g->sh - 1) / g->sh;
    int oy1 = (iy + g->pt) / g->sh;
    if (oy1 > g->oh - 1) oy1 = g->oh - 1;
    for (int ix = 0; ix < g->w; ix++) {
        const int lx = ix + g->pl - g->kw + 1;
        const int ox0 = lx <= 0 ? 0 : (lx + g->sw - 1) / g->sw;
        int ox1 = (ix + g->pl) / g->sw;
        if (ox1 > g->ow - 1) ox1 = g->ow - 1;
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

void dn_blkpool_forward(const DnBlkPool *g, const float *x, float *y) {
    const size_t in_plane = (size_t)g->h * g->w * g->b, out_plane = (size_t)g->oh * g->ow * g->b;
    const int planes = g->n * g->cb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < g->oh; oy++) {
            const size_t o = (size_t)pl * out_plane + (size_t)oy * g->ow * g->b;
            if (g->b == 8)
                blk_forward_row(g, x + (size_t)pl * in_plane, y + o, g->pos + o, oy, 8);
            else
                blk_forward_row(g, x + (size_t)pl * in_plane, y + o, g->pos + o, oy, 16);
        }
}

void dn_blkpool_backward(const DnBlkPool *g, const float *dy, float *dx, int add) {
    const size_t in_plane = (size_t)g->h * g->w * g->b, out_plane = (size_t)g->oh * g->ow * g->b;
    const int planes = g->n * g->cb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int pl = 0; pl < planes; pl++)
        for (int iy = 0; iy < g->h; iy++) {
            const size_t o = (size_t)pl * out_plane, i = (size_t)pl * in_plane + (size_t)iy * g->w * g->b;
            if (g->b == 8)
                blk_backward_row(g, dy + o, g->pos + o, dx + i, iy, add, 8);
            else
                blk_backward_row(g, dy + o, g->pos + o, dx + i, iy, add, 16);
        }
}

