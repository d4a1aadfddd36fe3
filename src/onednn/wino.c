/* wino.c: the forward, backward-data and weight-gradient passes of 3x3 and 5x5 stride-1
 * convolutions by Winograd's minimal filtering F(4x4, 3x3) and F(2x2, 5x5), on oneDNN's blocked
 * tensors ([n][c / 8][h][w][8] as oneDNN lays them out on AVX2, [n][c / 16][h][w][16] on AVX-512;
 * the transforms take chunks of 8 channels in AVX2 vectors, the products 16 channels in AVX2's or
 * AVX-512's), for the oneDNN plan (conv.c). oneDNN 2.x has Winograd convolutions on AVX-512 only
 * (and the plan asks for its direct ones); on AVX2 its direct kernels (jit:avx2) compute every one of the 9 (25)
 * multiply-adds an output takes per input channel, and ran resnet50's sixteen 3x3 convolutions at
 * 484 ms of a 1,400 ms step of primitives (forward and backward data, batch 8, two cores), lenet's
 * second convolution (5x5, 32 -> 64 channels) at 57 % of its step (docs/performance.md).
 *
 * Each 4x4 block of outputs ("tile") is computed from the 6x6 block of input that it reads:
 *
 *   Y = A^T [ sum over c of (G g[k][c] G^T) .* (B^T d[c] B) ] A
 *
 * with the 6x6, 6x3 and 4x6 matrices of F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016). The sum over input channels at each of the 36 positions
 * of the transformed tile is a matrix product, tiles x cin by cin x cout, so an output takes 36/16
 * = 2.25 multiply-adds per input channel instead of 9. 5x5 filters use F(2x2, 5x5): the same 6x6
 * input tiles and B (the same interpolation points 0, 1, -1, 2, -2 and infinity), G 6x5, A^T 2x6,
 * 36/4 = 9 multiply-adds an output instead of 25. Three passes, over as many tiles as keep
 * their transformed inputs V and products M within about 8 MiB (or, where the transformed filters
 * fit a core's L2, 6 tiles at a time on each thread: run_fused):
 *
 *   1. input transform: each tile's 6x6 pixels of 8 channels (a vector each; zeros outside the
 *      image) through B^T . B, into V[position] (tiles x cin, in chunks of KC channels);
 *   2. 36 products M[position] = V[position] U[position], tiles x cout, by a kernel of 6 tiles by
 *      16 output channels in 12 ymm sums (per input channel 2 vector loads and 6 broadcasts), or 6
 *      zmm sums on AVX-512;
 *   3. output transform: A^T . A of each tile's 36 products of 8 channels, plus the bias, the relu
 *      when fused, the pixels inside the output stored.
 *
 * U = G g G^T, the transformed filters, is made from the weights in the parameter arena at each
 * call: whole, before the passes, where it is at most 16 MiB (36 x cout x cin floats), else by the
 * products in panels of 16 output by KC input channels that stay in the thread's L2 (resnet50's
 * 512 x 512 filters: a whole U would be 36 MiB written and read back each call). The backward data
 * pass is the same computation on the output gradient with the filters turned by 180 degrees and
 * their input and output channels swapped, padded by 2 - padding. Needs no oneDNN: the tests run it
 * against the definition in any build.
 *
 * Rounding: the transforms scale by up to 4x4 (B) and 8x8 (A) and G's entries are not
 * representable in binary, so the result differs from the direct sum by more than the direct
 * kernels do (measured in tests/test_conv.c: conv_winograd_matches_definition). */
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "onednn/internal.h"
#include "onednn/wino.h"
#include "util.h"

#define BLK 8
#define NR 16      /* output channels of one product call: 2 vectors */
#define MR 6       /* tiles of one product call */
#define NP 36      /* positions of a transformed 6x6 tile */
#define KC 128     /* input channels of a panel of transformed filters */
#define PANEL ((size_t)NP * KC * NR) /* floats of a panel: 36 x KC x 16 (288 KiB) */
#define PASS_BYTES ((size_t)8 << 20)
#define U_BYTES ((size_t)16 << 20)

/* The computation as a forward convolution: in [n][cin / blk][ih][iw][blk] -> out [n][cout / blk][oh][ow][blk]. */
typedef struct Geo {
    int n, cin, cout, ih, iw, oh, ow, pt, pl;
    int blk;    /* the tensors' channel block: 8 (nChw8c) or 16 (nChw16c) */
    int r, m;   /* filter size (3, 5) and output tile size (4, 2): m + r - 1 = 6 */
    int coutp;  /* cout rounded up to NR (U's and M's rows) */
    int th, tw; /* tiles down and across an image */
    int tiles;  /* n th tw */
    int tc;     /* tiles of one pass, a multiple of MR */
} Geo;

static Geo geo_of(int n, int cin, int cout, int ih, int iw, int oh, int ow, int pt, int pl, int r, int blk) {
    Geo q = {n, cin, cout, ih, iw, oh, ow, pt, pl, blk, r, 7 - r, 0, 0, 0, 0, 0};
    q.coutp = (cout + NR - 1) / NR * NR;
    q.th = (oh + q.m - 1) / q.m;
    q.tw = (ow + q.m - 1) / q.m;
    q.tiles = n * q.th * q.tw;
    size_t tc = PASS_BYTES / ((size_t)NP * sizeof(float) * (size_t)(cin + q.coutp)) / MR * MR;
    const size_t all = ((size_t)q.tiles + MR - 1) / MR * MR;
    if (tc < MR) tc = MR;
    if (tc > all) tc = all;
    q.tc = (int)tc;
    return q;
}

/* V and M (the transformed filters come after them: all of U, or a panel per thread) */
static size_t geo_floats(const Geo *q) { return (size_t)NP * (size_t)q->tc * (size_t)(q->cin + q->coutp); }

/* U, the transformed filters, is made whole (once per call) where it stays within U_BYTES: the
 * products then read it position by position, each tile's transformed input once per 64 output
 * channels. Larger (512 x 512 channels: 36 MiB), writing it out and reading it back would cost
 * more than the products: the products transform the filters into panels as they go. */
static size_t u_floats(const Geo *q) { return (size_t)NP * q->coutp * q->cin; }
static int u_whole(const Geo *q) { return u_floats(q) * sizeof(float) <= U_BYTES; }
/* Where U is this small (and a tile's channels one chunk of V), each thread takes 6 tiles at a
 * time through all three passes, its V and M (36 x 6 x the channels) and the whole of U within its
 * L2 (512 KiB on the smallest of today's server cores): V and M never go out to memory, where the
 * passes over many tiles write and read them back (lenet's second convolution, F(2x2, 5x5) on 32
 * -> 64 channels: 14 and 29 MB a forward, 9 and 18 times its input and output). */
#define FUSE_U_BYTES ((size_t)320 << 10)
static int fused(const Geo *q) { return u_floats(q) * sizeof(float) <= FUSE_U_BYTES && q->cin <= KC; }
static size_t fused_floats(const Geo *q) { return (size_t)NP * MR * (size_t)(q->cin + q->coutp); } /* a thread's V and M */

static size_t geo_scratch(const Geo *q, int threads) {
    const size_t t = (size_t)(threads > 0 ? threads : 1);
    const size_t passes = geo_floats(q) + (u_whole(q) ? u_floats(q) : t * PANEL);
    const size_t f = fused(q) ? u_floats(q) + t * fused_floats(q) : 0;
    return passes > f ? passes : f;
}

static Geo geo_fwd(const DnWino *g) {
    return geo_of(g->n, g->cin, g->cout, g->h, g->w, g->oh, g->ow, g->pt, g->pl, g->k, g->blk);
}
static Geo geo_bwd(const DnWino *g) {
    return geo_of(g->n, g->cout, g->cin, g->oh, g->ow, g->h, g->w, g->k - 1 - g->pt, g->k - 1 - g->pl, g->k, g->blk);
}

/* The weight gradient's sums S (as large as U) are kept whole, over every pass: where they are
 * larger than U_BYTES, writing them out and reading them back costs what the multiplications
 * save (resnet50's 512 x 512 filters on 7x7 at batch 8: 16.4 ms against 17.0 for the direct
 * kernel of blkconv.c), and dn_wino_dw_ok refuses. */
static int dw_whole(const DnWino *g) {
    const Geo f = geo_fwd(g);
    return u_whole(&f);
}

size_t dn_wino_scratch_floats(const DnWino *g, int threads) {
    const Geo f = geo_fwd(g), b = geo_bwd(g);
    const size_t a = geo_scratch(&f, threads), c = geo_scratch(&b, threads);
    const size_t d = dw_whole(g) ? geo_floats(&f) + u_floats(&f) : 0;
    return a > c ? (a > d ? a : d) : (c > d ? c : d);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))

static int has_avx2_fma(void) { return cpu_avx2_fma(); }

/* o = G a: G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1] */
TGT static inline void g_1d(__m256 a0, __m256 a1, __m256 a2, __m256 o[6]) {
    const __m256 e = _mm256_add_ps(a0, a2), s6 = _mm256_set1_ps(1.0f / 6.0f);
    const __m256 f = _mm256_fmadd_ps(a0, _mm256_set1_ps(1.0f / 24.0f), _mm256_mul_ps(a2, s6));
    const __m256 h = _mm256_mul_ps(a1, _mm256_set1_ps(1.0f / 12.0f));
    o[0] = _mm256_mul_ps(a0, _mm256_set1_ps(0.25f));
    o[1] = _mm256_mul_ps(_mm256_add_ps(e, a1), _mm256_set1_ps(-1.0f / 6.0f));
    o[2] = _mm256_mul_ps(_mm256_sub_ps(a1, e), s6);
    o[3] = _mm256_add_ps(f, h);
    o[4] = _mm256_sub_ps(f, h);
    o[5] = a2;
}

/* o = G a for 5 taps (F(2x2, 5x5)): G = [1/4 0 0 0 0; -1/6 (1 1 1 1 1); -1/6 (1 -1 1 -1 1);
 * 1/24 (1 2 4 8 16); 1/24 (1 -2 4 -8 16); 0 0 0 0 1] */
TGT static inline void g5_1d(const __m256 a[5], __m256 o[6]) {
    const __m256 e = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), a[4]), od = _mm256_add_ps(a[1], a[3]);
    const __m256 e2 = _mm256_fmadd_ps(a[4], _mm256_set1_ps(16.0f), _mm256_fmadd_ps(a[2], _mm256_set1_ps(4.0f), a[0]));
    const __m256 o2 = _mm256_fmadd_ps(a[3], _mm256_set1_ps(8.0f), _mm256_add_ps(a[1], a[1]));
    const __m256 m6 = _mm256_set1_ps(-1.0f / 6.0f), s24 = _mm256_set1_ps(1.0f / 24.0f);
    o[0] = _mm256_mul_ps(a[0], _mm256_set1_ps(0.25f));
    o[1] = _mm256_mul_ps(_mm256_add_ps(e, od), m6);
    o[2] = _mm256_mul_ps(_mm256_sub_ps(e, od), m6);
    o[3] = _mm256_mul_ps(_mm256_add_ps(e2, o2), s24);
    o[4] = _mm256_mul_ps(_mm256_sub_ps(e2, o2), s24);
    o[5] = a[4];
}

/* o = G a for r (3 or 5) taps */
TGT static inline void g_r(const __m256 *a, int r, __m256 o[6]) {
    if (r == 3)
        g_1d(a[0], a[1], a[2], o);
    else
        g5_1d(a, o);
}

/* o = B^T d: B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 * 0 4 0 -5 0 1] */
TGT static inline void bt_1d(const __m256 d[6], __m256 o[6]) {
    const __m256 four = _mm256_set1_ps(4.0f), mfive = _mm256_set1_ps(-5.0f), two = _mm256_set1_ps(2.0f);
    const __m256 s12 = _mm256_add_ps(d[1], d[2]), d12 = _mm256_sub_ps(d[1], d[2]);
    const __m256 s34 = _mm256_add_ps(d[3], d[4]), d43 = _mm256_sub_ps(d[4], d[3]);
    const __m256 d42 = _mm256_sub_ps(d[4], d[2]), d31 = _mm256_sub_ps(d[3], d[1]);
    o[0] = _mm256_fmadd_ps(d[0], four, _mm256_fmadd_ps(d[2], mfive, d[4]));
    o[1] = _mm256_fnmadd_ps(s12, four, s34);
    o[2] = _mm256_fmadd_ps(d12, four, d43);
    o[3] = _mm256_fmadd_ps(d31, two, d42);
    o[4] = _mm256_fnmadd_ps(d31, two, d42);
    o[5] = _mm256_fmadd_ps(d[1], four, _mm256_fmadd_ps(d[3], mfive, d[5]));
}

/* o = A^T m: A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1] */
TGT static inline void at_1d(const __m256 m[6], __m256 o[4]) {
    const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
    const __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
    o[1] = _mm256_fmadd_ps(d, _mm256_set1_ps(2.0f), b);
    o[2] = _mm256_fmadd_ps(c, _mm256_set1_ps(4.0f), a);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(d, _mm256_set1_ps(8.0f), b), m[5]);
}

/* o = A^T m for 2x2 output tiles (F(2x2, 5x5)): A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1] */
TGT static inline void at2_1d(const __m256 m[6], __m256 o[2]) {
    const __m256 b = _mm256_sub_ps(m[1], m[2]), d = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m[0], m[1]), _mm256_add_ps(m[2], m[3])), m[4]);
    o[1] = _mm256_add_ps(_mm256_fmadd_ps(d, _mm256_set1_ps(2.0f), b), m[5]);
}

/* The filters as the products read them: g[o][i][r][s] at w0 + o so + i si + r sr + s ss. */
typedef struct Filters {
    const float *w0;
    long so, si, sr, ss;
    int r; /* 3 or 5 */
} Filters;

/* The filters' panel: panel[position ps + (i - i0) 16 + o % 16] = (G g[o][i] G^T)[position] for
 * the 16 filter rows o of block ob (o from ob 16) and the ni filter columns i from i0 (the
 * backward pass's turned filters have negative sr and ss); the rows o from O on zero. */
TGT static void panel_transform(const Filters *f, int O, int ob, int i0, int ni, float *panel, size_t ps) {
    const long so = f->so, si = f->si, sr = f->sr, ss = f->ss;
    const int r = f->r;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)so));
    for (int h = 0; h < NR / BLK; h++) {
        const int o0 = ob * NR + h * BLK;
        float *ub = panel + h * BLK;
        for (int i = 0; i < ni; i++) {
            float *u = ub + (size_t)i * NR;
            if (o0 >= O) {
                for (int p = 0; p < NP; p++) _mm256_storeu_ps(u + (size_t)p * ps, _mm256_setzero_ps());
                continue;
            }
            const float *b = f->w0 + (long)o0 * so + (long)(i0 + i) * si;
            __m256 t[6][5], col[5], o[6];
            for (int s = 0; s < r; s++) {
                for (int a = 0; a < r; a++) col[a] = _mm256_i32gather_ps(b + a * sr + s * ss, idx, 4);
                g_r(col, r, o);
#pragma GCC unroll 6
                for (int a = 0; a < 6; a++) t[a][s] = o[a];
            }
#pragma GCC unroll 6
            for (int a = 0; a < 6; a++) {
                g_r(t[a], r, o);
#pragma GCC unroll 6
                for (int c = 0; c < 6; c++) _mm256_storeu_ps(u + (size_t)(a * 6 + c) * ps, o[c]);
            }
        }
    }
}

/* The tile t's image and top-left output pixel. */
static inline void tile_at(const Geo *q, int t, int *img, int *y, int *x) {
    const int per = q->th * q->tw, r = t % per;
    *img = t / per;
    *y = r / q->tw * q->m;
    *x = r % q->tw * q->m;
}

/* Where the 8 channels from 8 c8 of image img start in a tensor [n][C / blk][hw][blk]: the
 * pixels that follow are blk floats apart (in nChw16c, two such chunks share each pixel's 16). */
static inline size_t chunk_at(int blk, int C, size_t hw, int img, int c8) {
    const int per = blk / BLK;
    return ((size_t)img * (size_t)(C / blk) + (size_t)(c8 / per)) * hw * (size_t)blk + (size_t)(c8 % per) * BLK;
}

/* Where V[position] holds tile lt's input channel c: in chunks of KC channels, each chunk's rows
 * of all the pass's tiles one after the other, so a product's pass over the tiles reads one
 * stream. */
static inline size_t v_at(const Geo *q, int lt, int c) {
    const int k0 = c / KC * KC, kc = q->cin - k0 < KC ? q->cin - k0 : KC;
    return (size_t)k0 * q->tc + (size_t)lt * kc + (size_t)(c - k0);
}

/* V[position] = B^T d B of tile t, as row lt of the pass */
TGT static void input_tile(const Geo *q, const float *in, int t, int lt, float *V) {
    const int cb = q->cin / BLK;
    const size_t pstride = (size_t)q->tc * q->cin, hw = (size_t)q->ih * q->iw, ps = (size_t)q->blk;
    int img, y0, x0;
    tile_at(q, t, &img, &y0, &x0);
    y0 -= q->pt;
    x0 -= q->pl;
    int rv[6], cv[6];
    for (int i = 0; i < 6; i++) {
        rv[i] = y0 + i >= 0 && y0 + i < q->ih;
        cv[i] = x0 + i >= 0 && x0 + i < q->iw;
    }
    for (int c = 0; c < cb; c++) {
        const float *src = in + chunk_at(q->blk, q->cin, hw, img, c);
        float *v = V + v_at(q, lt, c * BLK);
        __m256 d[6][6], tt[6][6], col[6], o[6];
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++)
#pragma GCC unroll 6
            for (int j = 0; j < 6; j++)
                d[i][j] = rv[i] && cv[j] ? _mm256_loadu_ps(src + ((size_t)(y0 + i) * q->iw + (x0 + j)) * ps)
                                         : _mm256_setzero_ps();
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) col[i] = d[i][j];
            bt_1d(col, o);
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) tt[i][j] = o[i];
        }
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            bt_1d(tt[i], o);
#pragma GCC unroll 6
            for (int j = 0; j < 6; j++) _mm256_storeu_ps(v + (size_t)(i * 6 + j) * pstride, o[j]);
        }
    }
}

/* row lt of V zero at every position */
static void input_zero(const Geo *q, int lt, float *V) {
    const size_t pstride = (size_t)q->tc * q->cin;
    for (int p = 0; p < NP; p++)
        for (int k0 = 0; k0 < q->cin; k0 += KC)
            memset(V + p * pstride + v_at(q, lt, k0), 0, (size_t)(q->cin - k0 < KC ? q->cin - k0 : KC) * sizeof(float));
}

/* V[position] = B^T d B of tiles t0 + lt (lt < nt); rows nt to tpad zero. */
static void input_transform(const Geo *q, const float *in, int t0, int nt, int tpad, float *V) {
#pragma omp parallel for schedule(static)
    for (int lt = 0; lt < tpad; lt++) {
        if (lt < nt)
            input_tile(q, in, t0 + lt, lt, V);
        else
            input_zero(q, lt, V);
    }
}

/* The products' kernels, where nearly all of the multiply-adds are: written once on GCC's generic
 * vectors and compiled as 2 vectors of 8 floats for AVX2 (ymm) and as 1 vector of 16 for AVX-512
 * (zmm), the second chosen where the CPU has AVX-512F. Both do the same fused multiply-adds in the
 * same order, so they give the same bits. The 16-float form is compiled for AVX2 too (each vector
 * two ymm, slowly) so that the tests run the AVX-512 kernels' source on any CPU with AVX2
 * (dn_wino_kernels). (Macros, not inline functions, so that each variant's vectors are compiled
 * for its own instruction set.) */
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))

/* o(r)[0..16) (+)= sum over k < N of A(r, k) B(k)[0..16), r < R: R rows by 16 output channels in
 * NV vectors VT, one broadcast of A and NV vector loads of B a step; acc: add to what o holds. The
 * products and the weight gradient's sums are this one kernel with other strides. */
#define RX16_BODY(R, VT, NV, N, A, B, O)                                              \
    VT c[R][NV], b[NV];                                                               \
    const int w = NR / NV;                                                            \
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) for (int j = 0; j < NV; j++) { \
        c[r][j] = (VT){0};                                                            \
        if (acc) VLOAD(c[r][j], O(r) + j * w);                                        \
    }                                                                                 \
    _Pragma("GCC unroll 2") for (int k = 0; k < N; k++) {                            \
        for (int j = 0; j < NV; j++) VLOAD(b[j], B(k) + j * w);                       \
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {                        \
            const float a = A(r, k);                                                  \
            for (int j = 0; j < NV; j++) c[r][j] += b[j] * a;                         \
        }                                                                             \
    }                                                                                 \
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) for (int j = 0; j < NV; j++)  \
        VSTORE(O(r) + j * w, c[r][j]);

/* m[r][0..16) (+)= sum over k < K of v[r vs + k] u[k][0..16), r < MR: 6 tiles by 16 output channels */
#define PRODUCT_A(r, k) v[(r) * vs + (k)]
#define PRODUCT_B(k) (u + (size_t)(k) * NR)
#define PRODUCT_O(r) (m + (r) * ms)
#define PRODUCT_6X16(NAME, TARGET, VT, NV)                                                                     \
    TARGET static void NAME(int K, const float *v, size_t vs, const float *u, float *m, size_t ms, int acc) { \
        RX16_BODY(MR, VT, NV, K, PRODUCT_A, PRODUCT_B, PRODUCT_O)                                              \
    }

/* s[r][0..16) (+)= sum over tiles t < nt of v[t vs + r] z[t zs + 0..16), r < R: R input channels by
 * 16 output channels */
#define SUM_A(r, t) v[(t) * vs + (r)]
#define SUM_B(t) (z + (t) * zs)
#define SUM_O(r) (s + (r) * NR)
#define SUM_RX16(NAME, R, TARGET, VT, NV)                                                                      \
    TARGET static void NAME(int nt, const float *z, size_t zs, const float *v, size_t vs, float *s, int acc) { \
        RX16_BODY(R, VT, NV, nt, SUM_A, SUM_B, SUM_O)                                                          \
    }

#define TGT512 __attribute__((target("avx512f,fma")))
#define KERNELS(SUFFIX, TARGET, VT, NV)                  \
    PRODUCT_6X16(product_##SUFFIX, TARGET, VT, NV)       \
    SUM_RX16(sum6_##SUFFIX, 6, TARGET, VT, NV)           \
    SUM_RX16(sum4_##SUFFIX, 4, TARGET, VT, NV)
KERNELS(avx2, TGT, V8, 2)
KERNELS(avx512, TGT512, V16, 1)
KERNELS(wide_avx2, TGT, V16, 1)

typedef void (*ProductFn)(int, const float *, size_t, const float *, float *, size_t, int);
typedef void (*SumFn)(int, const float *, size_t, const float *, size_t, float *, int);
typedef struct Kernels {
    ProductFn product;
    SumFn sum6, sum4;
} Kernels;

static const Kernels k_avx2 = {product_avx2, sum6_avx2, sum4_avx2}, k_avx512 = {product_avx512, sum6_avx512, sum4_avx512},
                     k_wide_avx2 = {product_wide_avx2, sum6_wide_avx2, sum4_wide_avx2};
static int kernels_asked; /* dn_wino_kernels */
static int unfused_asked = -1; /* dn_wino_unfused; -1: NVCNN_WINO_FUSED=off in the environment (to compare) */
static int unfused(void) {
    if (unfused_asked < 0) {
        unfused_asked = dn_env(DN_ENV_WINO_FUSED) == 1;
    }
    return unfused_asked;
}

static int has_avx512(void) { return cpu_avx512f(); }

/* AVX-512's kernels where the CPU has them, unless NVCNN_WINO_AVX512=off (to compare) */
static int auto_avx512(void) {
    static int v = -1;
    if (v < 0) {
        v = dn_env(DN_ENV_WINO_AVX512) != 1 && has_avx512();
    }
    return v;
}

static const Kernels *kernels(void) {
    switch (kernels_asked) {
    case DN_WINO_YMM: return &k_avx2;
    case DN_WINO_WIDE: return has_avx512() ? &k_avx512 : &k_wide_avx2;
    default: return auto_avx512() ? &k_avx512 : &k_avx2;
    }
}

int dn_wino_unfused(int on) {
    unfused_asked = on;
    return on;
}

const char *dn_wino_kernels(int which) {
    kernels_asked = which;
    const Kernels *k = kernels();
    return k == &k_avx512 ? "16 floats a vector (AVX-512)" : k == &k_wide_avx2 ? "16 floats a vector (on AVX2)" : "8 floats a vector (AVX2)";
}

/* M[position] = V[position] U[position] for the first tpad tiles of the pass. A task is one block
 * of 16 output channels over a range of the tiles: for each KC input channels, it transforms the
 * block's filters into its thread's panel (36 x KC x 16, within the L2), then, position by
 * position, passes every tile of its range by the panel's part for the position (8 KiB, in the L1).
 * So the transformed filters never leave the cache; a filter is transformed once per pass and range
 * of tiles, and the tiles are split into ranges only as far as the blocks leave threads without two
 * tasks each. */
static void products_panels(const Geo *q, const Filters *f, const float *V, float *M, int tpad, float *panels, int threads) {
    const Kernels *kp = kernels();
    const int nkb = q->coutp / NR, groups = tpad / MR;
    int split = (2 * threads + nkb - 1) / nkb;
    if (split > groups) split = groups;
    if (split < 1) split = 1;
    const size_t vps = (size_t)q->tc * q->cin, mps = (size_t)q->tc * q->coutp;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int task = 0; task < nkb * split; task++) {
        const int kb = task / split, part = task % split;
        const int t0 = groups * part / split * MR, t1 = groups * (part + 1) / split * MR;
        float *panel = panels + (size_t)omp_get_thread_num() * PANEL;
        for (int k0 = 0; k0 < q->cin; k0 += KC) {
            const int kc = q->cin - k0 < KC ? q->cin - k0 : KC;
            panel_transform(f, q->cout, kb, k0, kc, panel, (size_t)KC * NR);
            for (int p = 0; p < NP; p++)
                for (int t = t0; t < t1; t += MR)
                    kp->product(kc, V + p * vps + v_at(q, t, k0), kc, panel + (size_t)p * KC * NR,
                                 M + p * mps + (size_t)t * q->coutp + (size_t)kb * NR, q->coutp, k0 > 0);
        }
    }
}

/* U[position][o / 16][i][o % 16] = (G g[o][i] G^T)[position] for all the filters, with the
 * rows o from O to the next multiple of 16 zero. */
static void weights_transform(const Geo *q, const Filters *f, float *U) {
    const size_t pstride = (size_t)q->coutp * q->cin;
#pragma omp parallel for schedule(static)
    for (int ob = 0; ob < q->coutp / NR; ob++)
        for (int i0 = 0; i0 < q->cin; i0 += KC)
            panel_transform(f, q->cout, ob, i0, q->cin - i0 < KC ? q->cin - i0 : KC, U + ((size_t)ob * q->cin + i0) * NR,
                            pstride);
}

/* M[position] = V[position] U[position] for the first tpad tiles of the pass, U whole: a task is
 * one position and up to 4 blocks of 16 output channels; U's panel of KC input channels by 16
 * output channels (2 KiB) stays in the L1 while every tile's KC channels of V pass it, and the
 * position's V (the pass's tiles) stays in the L2 for the task's blocks. */
static void products_u(const Geo *q, const float *U, const float *V, float *M, int tpad) {
    const Kernels *kp = kernels();
    const int nkb = q->coutp / NR, ntask = (nkb + 3) / 4;
    const size_t vps = (size_t)q->tc * q->cin, mps = (size_t)q->tc * q->coutp, ups = u_floats(q) / NP;
#pragma omp parallel for collapse(2) schedule(static)
    for (int p = 0; p < NP; p++)
        for (int task = 0; task < ntask; task++) {
            const int kb0 = task * 4, kb1 = kb0 + 4 < nkb ? kb0 + 4 : nkb;
            for (int kb = kb0; kb < kb1; kb++)
                for (int k0 = 0; k0 < q->cin; k0 += KC) {
                    const int kc = q->cin - k0 < KC ? q->cin - k0 : KC;
                    const float *u = U + p * ups + ((size_t)kb * q->cin + k0) * NR;
                    for (int t = 0; t < tpad; t += MR)
                        kp->product(kc, V + p * vps + v_at(q, t, k0), kc, u,
                                     M + p * mps + (size_t)t * q->coutp + (size_t)kb * NR, q->coutp, k0 > 0);
                }
        }
}

/* out's pixels of tile t = A^T M A (+ bias, relu), M's row lt */
TGT static void output_tile(const Geo *q, const float *M, int t, int lt, const float *bias, int relu, float *out) {
    const int kb = q->cout / BLK;
    const size_t pstride = (size_t)q->tc * q->coutp, hw = (size_t)q->oh * q->ow, ps = (size_t)q->blk;
    int img, y0, x0;
    tile_at(q, t, &img, &y0, &x0);
    const int nh = q->oh - y0 < q->m ? q->oh - y0 : q->m, nw = q->ow - x0 < q->m ? q->ow - x0 : q->m;
    const float *m = M + (size_t)lt * q->coutp;
    for (int c = 0; c < kb; c++) {
        __m256 s[4][6], col[6], o[4];
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) col[i] = _mm256_loadu_ps(m + (size_t)(i * 6 + j) * pstride + c * BLK);
            if (q->m == 4)
                at_1d(col, o);
            else
                at2_1d(col, o);
            for (int i = 0; i < q->m; i++) s[i][j] = o[i];
        }
        const __m256 b = bias ? _mm256_loadu_ps(bias + c * BLK) : _mm256_setzero_ps(), zero = _mm256_setzero_ps();
        float *dst = out + chunk_at(q->blk, q->cout, hw, img, c) + ((size_t)y0 * q->ow + x0) * ps;
        for (int i = 0; i < nh; i++) {
            if (q->m == 4)
                at_1d(s[i], o);
            else
                at2_1d(s[i], o);
            for (int j = 0; j < nw; j++) {
                __m256 r = _mm256_add_ps(o[j], b);
                if (relu) r = _mm256_max_ps(zero, r); /* max(0, NaN) is NaN */
                _mm256_storeu_ps(dst + ((size_t)i * q->ow + j) * ps, r);
            }
        }
    }
}

/* out's pixels of tiles t0 + lt (lt < nt) = A^T M A (+ bias, relu) */
static void output_transform(const Geo *q, const float *M, int t0, int nt, const float *bias, int relu, float *out) {
#pragma omp parallel for schedule(static)
    for (int lt = 0; lt < nt; lt++) output_tile(q, M, t0 + lt, lt, bias, relu, out);
}

/* ---- the weight gradient ----
 * The forward's Y = A^T [U .* V] A with U = G g G^T gives, for each tile, dL/dU = (A dY A^T) .* V
 * and dL/dg = G^T (dL/dU) G; the sum over tiles moves inside G^T . G, so
 *
 *   dw[k][c] = G^T [ sum over tiles of (A dY A^T)[k] .* (B^T d B)[c] ] G
 *
 * (dY zero at the outputs a tile has outside the image): V as in the forward, Z[position][tile][k]
 * = A dY A^T of each tile's 4x4 output gradients, and 36 products S[position] (cout x cin) = Z^T V
 * summed over the tiles of every pass, 4x fewer multiply-adds than the direct sum's 9 x 16 per
 * tile and pair of channels. */

/* o = A y: A = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1] */
TGT static inline void a_1d(const __m256 y[4], __m256 o[6]) {
    const __m256 e = _mm256_add_ps(y[0], y[2]), od = _mm256_add_ps(y[1], y[3]);
    const __m256 e2 = _mm256_fmadd_ps(y[2], _mm256_set1_ps(4.0f), y[0]);
    const __m256 o2 = _mm256_fmadd_ps(y[3], _mm256_set1_ps(8.0f), _mm256_add_ps(y[1], y[1]));
    o[0] = y[0];
    o[1] = _mm256_add_ps(e, od);
    o[2] = _mm256_sub_ps(e, od);
    o[3] = _mm256_add_ps(e2, o2);
    o[4] = _mm256_sub_ps(e2, o2);
    o[5] = y[3];
}

/* o = A y for 2x2 output tiles: A = [1 0; 1 1; 1 -1; 1 2; 1 -2; 0 1] */
TGT static inline void a2_1d(const __m256 y[2], __m256 o[6]) {
    const __m256 y2 = _mm256_add_ps(y[1], y[1]);
    o[0] = y[0];
    o[1] = _mm256_add_ps(y[0], y[1]);
    o[2] = _mm256_sub_ps(y[0], y[1]);
    o[3] = _mm256_add_ps(y[0], y2);
    o[4] = _mm256_sub_ps(y[0], y2);
    o[5] = y[1];
}

/* o = A y for m (4 or 2) outputs */
TGT static inline void a_m(const __m256 *y, int m, __m256 o[6]) {
    if (m == 4)
        a_1d(y, o);
    else
        a2_1d(y, o);
}

/* o = G^T m for r (3 or 5) taps, G^T the transpose of g_1d's or g5_1d's G: for 3, [1/4 -1/6 -1/6
 * 1/24 1/24 0; 0 -1/6 1/6 1/12 -1/12 0; 0 -1/6 -1/6 1/6 1/6 1]; 5 taps have the same first two
 * rows, then -1/6 (0 1 1 -1 -1 0), 1/6 (0 -1 1 2 -2 0), 1/6 (0 -1 -1 4 4 6) */
TGT static inline void gt_r(const __m256 m[6], int r, __m256 o[5]) {
    const __m256 s12 = _mm256_add_ps(m[1], m[2]), s34 = _mm256_add_ps(m[3], m[4]);
    const __m256 d21 = _mm256_sub_ps(m[2], m[1]), d34 = _mm256_sub_ps(m[3], m[4]);
    const __m256 s6 = _mm256_set1_ps(1.0f / 6.0f), ms6 = _mm256_set1_ps(-1.0f / 6.0f);
    o[0] = _mm256_fmadd_ps(m[0], _mm256_set1_ps(0.25f),
                           _mm256_fmadd_ps(s12, ms6, _mm256_mul_ps(s34, _mm256_set1_ps(1.0f / 24.0f))));
    o[1] = _mm256_fmadd_ps(d21, s6, _mm256_mul_ps(d34, _mm256_set1_ps(1.0f / 12.0f)));
    if (r == 3) {
        o[2] = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(s34, s12), s6), m[5]);
        return;
    }
    o[2] = _mm256_fmadd_ps(s12, ms6, _mm256_mul_ps(s34, s6));
    o[3] = _mm256_fmadd_ps(d21, s6, _mm256_mul_ps(d34, _mm256_set1_ps(1.0f / 3.0f)));
    o[4] = _mm256_add_ps(_mm256_fmadd_ps(s12, ms6, _mm256_mul_ps(s34, _mm256_set1_ps(2.0f / 3.0f))), m[5]);
}

/* Z[position][lt][coutp] = A dY A^T of tiles t0 + lt (lt < nt), channels from cout on zero; rows nt
 * to tpad zero. */
TGT static void grad_transform(const Geo *q, const float *dy, int t0, int nt, int tpad, float *Z) {
    const int kb = q->cout / BLK;
    const size_t pstride = (size_t)q->tc * q->coutp, hw = (size_t)q->oh * q->ow, ps = (size_t)q->blk;
#pragma omp parallel for schedule(static)
    for (int lt = 0; lt < tpad; lt++) {
        float *z = Z + (size_t)lt * q->coutp;
        if (lt >= nt) {
            for (int p = 0; p < NP; p++) memset(z + p * pstride, 0, (size_t)q->coutp * sizeof(float));
            continue;
        }
        int img, y0, x0;
        tile_at(q, t0 + lt, &img, &y0, &x0);
        const int nh = q->oh - y0 < q->m ? q->oh - y0 : q->m, nw = q->ow - x0 < q->m ? q->ow - x0 : q->m;
        for (int c = 0; c < kb; c++) {
            const float *src = dy + chunk_at(q->blk, q->cout, hw, img, c) + ((size_t)y0 * q->ow + x0) * ps;
            __m256 d[4][4], t[6][4], col[4], o[6];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++)
                    d[i][j] = i < nh && j < nw ? _mm256_loadu_ps(src + ((size_t)i * q->ow + j) * ps) : _mm256_setzero_ps();
            for (int j = 0; j < q->m; j++) {
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) col[i] = d[i][j];
                a_m(col, q->m, o);
#pragma GCC unroll 6
                for (int i = 0; i < 6; i++) t[i][j] = o[i];
            }
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) {
                a_m(t[i], q->m, o);
#pragma GCC unroll 6
                for (int j = 0; j < 6; j++) _mm256_storeu_ps(z + (size_t)(i * 6 + j) * pstride + c * BLK, o[j]);
            }
        }
        for (int p = 0; p < NP && q->coutp > q->cout; p++)
            memset(z + p * pstride + q->cout, 0, (size_t)(q->coutp - q->cout) * sizeof(float));
    }
}


#define TCH 32 /* tiles of one kernel call of the weight gradient's products: their rows of Z and V within the L1 */

/* S[position][k / 16][c][k % 16] (+)= sum over the pass's nt tiles of Z[position][t][k] V[position][t][c]
 * (first: written): one task per position; per KC input channels and TCH tiles, every block of
 * 16 output channels by 6 (or 4) input channels, Z's and V's rows of those tiles within the L2. */
static void sums(const Geo *q, const float *Z, const float *V, float *S, int nt, int first) {
    const Kernels *kp = kernels();
    const int nkb = q->coutp / NR;
    const size_t vps = (size_t)q->tc * q->cin, zps = (size_t)q->tc * q->coutp, sps = u_floats(q) / NP;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < NP; p++)
        for (int k0 = 0; k0 < q->cin; k0 += KC) {
            const int kc = q->cin - k0 < KC ? q->cin - k0 : KC;
            /* kc, a multiple of 8, as 6s and then one or two 4s where it leaves 4 or 2 */
            const int c6 = kc - 4 * (kc % 6 == 0 ? 0 : kc % 6 == 4 ? 1 : 2);
            for (int t = 0; t < nt; t += TCH) {
                const int n = nt - t < TCH ? nt - t : TCH, acc = !first || t > 0;
                for (int kb = 0; kb < nkb; kb++) {
                    const float *z = Z + p * zps + (size_t)t * q->coutp + (size_t)kb * NR;
                    const float *v = V + p * vps + v_at(q, t, k0);
                    float *sp = S + p * sps + ((size_t)kb * q->cin + k0) * NR;
                    int c = 0;
                    for (; c < c6; c += 6) kp->sum6(n, z, q->coutp, v + c, kc, sp + (size_t)c * NR, acc);
                    for (; c < kc; c += 4) kp->sum4(n, z, q->coutp, v + c, kc, sp + (size_t)c * NR, acc);
                }
            }
        }
}

/* dw[k][c] = G^T S[.][k][c] G (r x r) for every pair of channels. */
TGT static void sums_transform(const Geo *q, const float *S, float *dw) {
    const size_t pstride = u_floats(q) / NP;
    const int r = q->r, rr = r * r;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < q->cout / BLK; h++)
        for (int c = 0; c < q->cin; c++) {
            const float *sp = S + ((size_t)(h / 2) * q->cin + c) * NR + (h % 2) * BLK;
            __m256 t[5][6], col[6], o[5];
#pragma GCC unroll 6
            for (int j = 0; j < 6; j++) {
#pragma GCC unroll 6
                for (int i = 0; i < 6; i++) col[i] = _mm256_loadu_ps(sp + (size_t)(i * 6 + j) * pstride);
                gt_r(col, r, o);
                for (int i = 0; i < r; i++) t[i][j] = o[i];
            }
            float out[25][BLK];
            for (int i = 0; i < r; i++) {
                gt_r(t[i], r, o);
                for (int j = 0; j < r; j++) _mm256_storeu_ps(out[i * r + j], o[j]);
            }
            for (int k = 0; k < BLK; k++) {
                float *d = dw + ((size_t)(h * BLK + k) * q->cin + c) * rr;
                for (int e = 0; e < rr; e++) d[e] = out[e][k];
            }
        }
}

/* db[k] = the sum of dy's channel k */
TGT static void bias_sums(const DnWino *g, const float *dy, float *db) {
    const size_t hw = (size_t)g->oh * g->ow, ps = (size_t)g->blk;
#pragma omp parallel for schedule(static)
    for (int kb = 0; kb < g->cout / BLK; kb++) {
        __m256 a = _mm256_setzero_ps();
        for (int n = 0; n < g->n; n++) {
            const float *d = dy + chunk_at(g->blk, g->cout, hw, n, kb);
            for (size_t e = 0; e < hw; e++) a = _mm256_add_ps(a, _mm256_loadu_ps(d + e * ps));
        }
        _mm256_storeu_ps(db + kb * BLK, a);
    }
}

/* The panels' threads that scratch (floats) leaves room for, at most OpenMP's. */
static int threads_of(const Geo *q, size_t scratch_floats) {
    const size_t vm = geo_floats(q);
    size_t t = scratch_floats > vm ? (scratch_floats - vm) / PANEL : 0;
    const int most = omp_get_max_threads();
    if (t > (size_t)most) t = (size_t)most;
    return (int)t;
}

/* The three passes 6 tiles at a time, each thread with its own V and M (fused). The same sums in
 * the same order as the passes over many tiles: the same bits. */
static void run_fused(const Geo *q, const float *in, const Filters *f, const float *bias, int relu, float *out,
                      float *scratch, size_t scratch_floats) {
    const size_t uf = u_floats(q), per = fused_floats(q);
    size_t most = scratch_floats > uf ? (scratch_floats - uf) / per : 0;
    if (most < 1) die("wino.c: %zu floats of scratch are too few", scratch_floats);
    const int threads = most < (size_t)omp_get_max_threads() ? (int)most : omp_get_max_threads();
    float *U = scratch;
    weights_transform(q, f, U);
    Geo ql = *q;
    ql.tc = MR; /* V and M of 6 tiles: V[position][tile][cin], M[position][tile][coutp] */
    const Kernels *kp = kernels();
    const int groups = (q->tiles + MR - 1) / MR, nkb = q->coutp / NR;
    const size_t vps = (size_t)MR * q->cin, mps = (size_t)MR * q->coutp, ups = uf / NP;
#pragma omp parallel num_threads(threads)
    {
        float *V = U + uf + (size_t)omp_get_thread_num() * per, *M = V + (size_t)NP * vps;
#pragma omp for schedule(static)
        for (int gi = 0; gi < groups; gi++) {
            const int t0 = gi * MR, nt = q->tiles - t0 < MR ? q->tiles - t0 : MR;
            for (int lt = 0; lt < MR; lt++) {
                if (lt < nt)
                    input_tile(&ql, in, t0 + lt, lt, V);
                else
                    input_zero(&ql, lt, V);
            }
            for (int p = 0; p < NP; p++)
                for (int kb = 0; kb < nkb; kb++)
                    kp->product(q->cin, V + p * vps, q->cin, U + p * ups + (size_t)kb * q->cin * NR, M + p * mps + (size_t)kb * NR,
                                q->coutp, 0);
            for (int lt = 0; lt < nt; lt++) output_tile(&ql, M, t0 + lt, lt, bias, relu, out);
        }
    }
}

static void run(const Geo *q, const float *in, const Filters *f, const float *bias, int relu, float *out, float *scratch,
                size_t scratch_floats) {
    if (fused(q) && !unfused()) {
        run_fused(q, in, f, bias, relu, out, scratch, scratch_floats);
        return;
    }
    const int whole = u_whole(q), threads = whole ? 0 : threads_of(q, scratch_floats);
    if (whole ? scratch_floats < geo_scratch(q, 0) : !threads) die("wino.c: %zu floats of scratch are too few", scratch_floats);
    float *V = scratch, *M = V + (size_t)NP * q->tc * q->cin, *U = M + (size_t)NP * q->tc * q->coutp;
    if (whole) weights_transform(q, f, U);
    for (int t0 = 0; t0 < q->tiles; t0 += q->tc) {
        const int nt = q->tiles - t0 < q->tc ? q->tiles - t0 : q->tc, tpad = (nt + MR - 1) / MR * MR;
        input_transform(q, in, t0, nt, tpad, V);
        if (whole)
            products_u(q, U, V, M, tpad);
        else
            products_panels(q, f, V, M, tpad, U, threads);
        output_transform(q, M, t0, nt, bias, relu, out);
    }
}

int dn_wino_ok(const DnWino *g) {
    return has_avx2_fma() && (g->blk == 8 || g->blk == 16) && g->n > 0 && g->cin > 0 && g->cout > 0 &&
           g->cin % g->blk == 0 && g->cout % g->blk == 0 &&
           (g->k == 3 || g->k == 5) && g->h > 0 && g->w > 0 && g->oh > 0 && g->ow > 0 && g->pt >= 0 &&
           g->pt < g->k && g->pl >= 0 && g->pl < g->k && (long)g->cin * 25 * 8 < (1L << 30) &&
           (long)g->cout * 25 * 8 < (1L << 30);
}

void dn_wino_fwd(const DnWino *g, const float *x, const float *w, const float *bias, int relu, float *y,
                 float *scratch, size_t scratch_floats) {
    const Geo q = geo_fwd(g);
    const int r = g->k, rr = r * r;
    const Filters f = {w, (long)g->cin * rr, rr, r, 1, r};
    run(&q, x, &f, bias, relu, y, scratch, scratch_floats);
}

void dn_wino_bwd_data(const DnWino *g, const float *dy, const float *w, float *dx, float *scratch,
                      size_t scratch_floats) {
    const Geo q = geo_bwd(g);
    /* filter (o = input channel c, i = output channel k, a, b) = w[k][c][r - 1 - a][r - 1 - b] */
    const int r = g->k, rr = r * r;
    const Filters f = {w + rr - 1, rr, (long)g->cin * rr, -r, -1, r};
    run(&q, dy, &f, NULL, 0, dx, scratch, scratch_floats);
}
int dn_wino_dw_ok(const DnWino *g) { return dn_wino_ok(g) && dw_whole(g); }

void dn_wino_dw(const DnWino *g, const float *x, const float *dy, float *dw, float *db, float *scratch,
                size_t scratch_floats) {
    const Geo q = geo_fwd(g);
    if (scratch_floats < geo_floats(&q) + u_floats(&q)) die("wino.c: %zu floats of scratch are too few", scratch_floats);
    float *V = scratch, *Z = V + (size_t)NP * q.tc * q.cin, *S = Z + (size_t)NP * q.tc * q.coutp;
    for (int t0 = 0; t0 < q.tiles; t0 += q.tc) {
        const int nt = q.tiles - t0 < q.tc ? q.tiles - t0 : q.tc, tpad = (nt + MR - 1) / MR * MR;
        input_transform(&q, x, t0, nt, tpad, V);
        grad_transform(&q, dy, t0, nt, tpad, Z);
        sums(&q, Z, V, S, nt, t0 == 0);
    }
    sums_transform(&q, S, dw);
    if (db) bias_sums(g, dy, db);
}
#else
int dn_wino_unfused(int on) {
    (void)on;
    return 0;
}

const char *dn_wino_kernels(int which) {
    (void)which;
    return "none (not an x86 CPU)";
}
int dn_wino_ok(const DnWino *g) {
    (void)g;
    return 0;
}
void dn_wino_fwd(const DnWino *g, const float *x, const float *w, const float *bias, int relu, float *y,
                 float *scratch, size_t scratch_floats) {
    (void)g, (void)x, (void)w, (void)bias, (void)relu, (void)y, (void)scratch, (void)scratch_floats;
}
void dn_wino_bwd_data(const DnWino *g, const float *dy, const float *w, float *dx, float *scratch,
                      size_t scratch_floats) {
    (void)g, (void)dy, (void)w, (void)dx, (void)scratch, (void)scratch_floats;
}
int dn_wino_dw_ok(const DnWino *g) {
    (void)g;
    return 0;
}
void dn_wino_dw(const DnWino *g, const float *x, const float *dy, float *dw, float *db, float *scratch,
                size_t scratch_floats) {
    (void)g, (void)x, (void)dy, (void)dw, (void)db, (void)scratch, (void)scratch_floats;
}
#endif
