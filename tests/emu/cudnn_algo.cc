/* cudnn_algo.cc: the convolution algorithms of the emulated cuDNN (cudnn_algo.h).
 *
 * The source of every rule is cuDNN 9's API reference, the cudnn_cnn library
 * (https://docs.nvidia.com/deeplearning/cudnn/backend/latest/api/cudnn-cnn-library.html):
 * cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t and cudnnConvolutionBwdFilterAlgo_t
 * (what each algorithm is, and whether it is deterministic), and the tables of supported
 * algorithms under cudnnConvolutionForward(), cudnnConvolutionBackwardData() and
 * cudnnConvolutionBackwardFilter() (data type configurations, layouts, strides, dilations, filter
 * sizes). cudnn_cnn.h itself marks backward data ALGO_0 and backward filter ALGO_0 and ALGO_3
 * "non-deterministic" and backward filter WINOGRAD "not implemented"; cuDNN 9 has no DIRECT
 * forward algorithm either.
 *
 * How each family computes here (dense fp32 arrays; every result is rounded once, to the output's
 * type, by the caller):
 *   implicit GEMM (forward IMPLICIT_GEMM, backward ALGO_0/ALGO_1/ALGO_3): a sum over the filter
 *     taps (c, r, s) of each output, in that order; the precomputed-index variant (forward
 *     IMPLICIT_PRECOMP_GEMM) sums over (r, s, c) instead.
 *   explicit GEMM (forward GEMM): the im2col matrix in the data type (its values are the data's),
 *     then a GEMM that sums its K dimension in tiles of 32 and adds the tiles' partial sums.
 *   backward data ALGO_1: the sum over output channels in tiles of 8; ALGO_0 (atomics): the
 *     output channels in up to eight slices whose partial results, each gathered over the taps in
 *     a shuffled order, are added into dx in a shuffled order; backward filter ALGO_1: images and
 *     output positions in order; ALGO_0 (atomics): one partial sum per image and 32 output
 *     positions (at least 4 per image), added in a shuffled order; ALGO_3: one per 16 output
 *     positions over every image (at least 8), likewise. Each call draws its own orders.
 *   FFT: 2-D complex FFTs (radix 2, fp32, twiddles rounded from double) of the zero-padded planes,
 *     their products summed over the reduced channels, one inverse transform per output plane;
 *     FFT_TILING: the same on 32x32 tiles (overlap-save).
 *   Winograd: WINOGRAD F(2x2, 3x3) with its transforms in fp32 (a fused kernel: no tensor cores);
 *     WINOGRAD_NONFUSED F(4x4, 3x3) or F(2x2, 5x5) (and for the filter gradient F(3x3, 4x4) or
 *     F(5x5, 2x2)) with the transformed operands stored as the GEMM between them takes them
 *     (on a 5x5 filter in TF32 even under CUDNN_FMA_MATH, as cuDNN 9 does: wino_operand).
 *     The transforms' matrices come from Toom-Cook with the points 0, 1, -1, 2, -2 and infinity,
 *     computed in double and rounded to fp32 (checked against a direct sum at their first use).
 * The operands of every product run on tensor cores are rounded as the tensor cores take them:
 * TF32 for fp32 data when the math type allows it (not CUDNN_FMA_MATH), fp16 or bf16 for 16-bit
 * data (exact for the data itself, a rounding for the transformed operands of WINOGRAD_NONFUSED
 * and for nothing else). FFT and the fused Winograd never use tensor cores.
 */
#include "cudnn_algo.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <mutex>

#include "emu.h"

namespace emu {
namespace dnn {

const int algo_count[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};

namespace {

/* ---- the algorithms by family ---- */
enum Kind { IMPLICIT, PRECOMP, GEMM, DIRECT, FFT, FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED, ATOMIC, ORDERED, ATOMIC_PRECOMP, NEVER };

Kind kind_of(Dir d, int algo) {
    if (d == FWD) return (Kind)algo; /* cudnnConvolutionFwdAlgo_t's order */
    if (d == BWD_DATA) {
        static const Kind k[] = {ATOMIC, ORDERED, FFT, FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED};
        return k[algo];
    }
    static const Kind k[] = {ATOMIC, ORDERED, FFT, ATOMIC_PRECOMP, NEVER, WINOGRAD_NONFUSED, FFT_TILING};
    return k[algo];
}

/* whether the family's products run on tensor cores (where the data and math type allow) */
bool tensor_cores(Kind k) { return k != FFT && k != FFT_TILING && k != WINOGRAD; }

/* ---- rounding ---- */
float to_half(float v) { return __half2float(__float2half_rn(v)); }
float to_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/* an operand of a product as family k's arithmetic takes it */
float operand(float v, const Arith &a, Kind k) {
    if (!tensor_cores(k)) return v;
    switch (a.data) {
    case CUDNN_DATA_FLOAT: return a.math != CUDNN_FMA_MATH ? emu::tf32(v) : v;
    case CUDNN_DATA_HALF: return to_half(v);
    case CUDNN_DATA_BFLOAT16: return to_bf16(v);
    default: return v;
    }
}

/* A transformed operand of WINOGRAD_NONFUSED as it is stored. With a 5x5 filter cuDNN 9 rounds
 * fp32 data to TF32 even under CUDNN_FMA_MATH: on an H200 its results were the same bits with FMA
 * and DEFAULT math, 1.2e-3 to 8.1e-3 of the largest element off a double reference in every
 * direction (2026-11-26 and 27, tests/test_cudnn.c), where its 3x3 kernels gave 2.8e-6 and every
 * other fp32 algorithm under 1e-5. Modelled so (taps: the filter's side, or for the filter
 * gradient the side of the result). */
float wino_operand(float v, const Arith &a, Kind k, int taps) {
    if (k == WINOGRAD_NONFUSED && taps == 5 && a.data == CUDNN_DATA_FLOAT) return emu::tf32(v);
    return operand(v, a, k);
}

std::vector<float> operands(const std::vector<float> &v, const Arith &a, Kind k) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = operand(v[i], a, k);
    return r;
}

/* ---- seeded randomness ---- */
uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* the next number of the sequence NVCNN_EMU_SEED starts (Find's noise, the atomics' orders) */
uint64_t draw() {
    static std::mutex mu;
    static bool started = false;
    static uint64_t state;
    std::lock_guard<std::mutex> hold(mu);
    if (!started) state = emu::seed() * 0xd6e8feb86659fd93ull ^ 0x63754e4e44ull, started = true;
    return splitmix(&state);
}

/* 0, 1, ..., n - 1 in an order drawn from (seed, salt) */
std::vector<int> shuffled(int n, uint64_t seed, uint64_t salt) {
    std::vector<int> v((size_t)n);
    for (int i = 0; i < n; i++) v[(size_t)i] = i;
    uint64_t s = seed ^ (salt * 0x9e3779b97f4a7c15ull);
    for (int i = n - 1; i > 0; i--) std::swap(v[(size_t)i], v[(size_t)(splitmix(&s) % (uint64_t)(i + 1))]);
    return v;
}

/* ---- dense GEMM ---- */
/* C[m][n] += A[m][k] B[k][n] (row-major, leading dimensions lda, ldb, ldc): element (i, j) adds
 * its products onto C in ascending k. Four rows of C share each row of B. */
void matmul(int m, int n, int k, const float *A, int lda, const float *B, int ldb, float *C, int ldc) {
    for (int i0 = 0; i0 < m; i0 += 4) {
        const int rows = m - i0 < 4 ? m - i0 : 4;
        for (int jb = 0; jb < n; jb += 512) {
            const int je = n - jb < 512 ? n : jb + 512;
            if (rows == 4) {
                float *c0 = C + (size_t)i0 * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
                for (int p = 0; p < k; p++) {
                    const float a0 = A[(size_t)i0 * lda + p], a1 = A[(size_t)(i0 + 1) * lda + p], a2 = A[(size_t)(i0 + 2) * lda + p],
                                a3 = A[(size_t)(i0 + 3) * lda + p];
                    const float *b = B + (size_t)p * ldb;
                    for (int j = jb; j < je; j++) {
                        const float bv = b[j];
                        c0[j] += a0 * bv;
                        c1[j] += a1 * bv;
                        c2[j] += a2 * bv;
                        c3[j] += a3 * bv;
                    }
                }
            } else {
                for (int i = i0; i < i0 + rows; i++)
                    for (int p = 0; p < k; p++) {
                        const float a = A[(size_t)i * lda + p];
                        const float *b = B + (size_t)p * ldb;
                        float *c = C + (size_t)i * ldc;
                        for (int j = jb; j < je; j++) c[j] += a * b[j];
                    }
            }
        }
    }
}

/* C += A B with the k dimension in tiles of `tile`: each tile's products summed from zero, then
 * added onto C (a GEMM's K-tiles). tmp holds m x n floats. */
void matmul_tiled(int m, int n, int k, const float *A, int lda, const float *B, int ldb, float *C, int ldc, int tile, float *tmp) {
    for (int k0 = 0; k0 < k; k0 += tile) {
        const int kc = k - k0 < tile ? k - k0 : tile;
        for (int i = 0; i < m; i++) memset(tmp + (size_t)i * n, 0, (size_t)n * sizeof(float));
        matmul(m, n, kc, A + k0, lda, B + (size_t)k0 * ldb, ldb, tmp, n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) C[(size_t)i * ldc + j] += tmp[(size_t)i * n + j];
    }
}

/* Whether a convolution is worth more than one thread (small ones spend more on the threads'
 * start than on the work). */
bool parallel_worth(const Geo &g) { return 2.0 * g.n * g.k * g.oh * g.ow * (double)g.cg * g.r * g.s > 4e6; }

/* ---- implicit and explicit GEMM ----
 * The taps p = (c', r, s) of a group's filter in the canonical order, or (r, s, c') (`rsc`):
 * order[i] is the canonical index of the i-th tap summed. */
std::vector<int> tap_order(const Geo &g, bool rsc) {
    const int P = g.cg * g.r * g.s, rs = g.r * g.s;
    std::vector<int> o((size_t)P);
    for (int i = 0; i < P; i++) o[(size_t)i] = rsc ? (i % g.cg) * rs + i / g.cg : i;
    return o;
}

/* col[i][q] (or col[q][i] when `transpose`) of image n, group grp: the input under tap order[i]
 * at output position q (0 where it falls on padding) */
void im2col(const Geo &g, const float *x, int n, int grp, const int *order, float *col, bool transpose) {
    const int Q = g.oh * g.ow, P = g.cg * g.r * g.s;
    for (int i = 0; i < P; i++) {
        const int p = order[i], cc = p / (g.r * g.s), r = p / g.s % g.r, s = p % g.s;
        const float *xin = x + ((size_t)n * g.c + (size_t)grp * g.cg + cc) * g.h * g.w;
        for (int oh = 0; oh < g.oh; oh++) {
            const int ih = oh * g.u - g.ph + r * g.dh;
            for (int ow = 0; ow < g.ow; ow++) {
                const int iw = ow * g.v - g.pw + s * g.dw, q = oh * g.ow + ow;
                const float v = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w ? xin[(size_t)ih * g.w + iw] : 0.0f;
                if (transpose)
                    col[(size_t)q * P + i] = v;
                else
                    col[(size_t)i * Q + q] = v;
            }
        }
    }
}

/* y[n][k][q] = sum over the taps of w[k][p] col[p][q], in the family's order and tiling */
void fwd_gemm(const Geo &g, const Arith &a, Kind kind, const std::vector<float> &x0, const std::vector<float> &w0, std::vector<float> &y) {
    const int kg = g.k / g.g, P = g.cg * g.r * g.s, Q = g.oh * g.ow;
    const std::vector<int> order = tap_order(g, kind == PRECOMP);
    const std::vector<float> x = operands(x0, a, kind);
    std::vector<float> w((size_t)g.k * P);
    for (int k = 0; k < g.k; k++)
        for (int i = 0; i < P; i++) w[(size_t)k * P + i] = operand(w0[(size_t)k * P + order[(size_t)i]], a, kind);
    std::fill(y.begin(), y.end(), 0.0f);
#pragma omp parallel if (parallel_worth(g))
    {
        std::vector<float> col((size_t)P * Q), tmp(kind == GEMM ? (size_t)kg * Q : 0);
#pragma omp for schedule(static)
        for (int ng = 0; ng < g.n * g.g; ng++) {
            const int n = ng / g.g, grp = ng % g.g;
            im2col(g, x.data(), n, grp, order.data(), col.data(), false);
            float *out = &y[((size_t)n * g.k + (size_t)grp * kg) * Q];
            if (kind == GEMM)
                matmul_tiled(kg, Q, P, &w[(size_t)grp * kg * P], P, col.data(), Q, out, Q, 32, tmp.data());
            else
                matmul(kg, Q, P, &w[(size_t)grp * kg * P], P, col.data(), Q, out, Q);
        }
    }
}

/* dx += the dcol rows (canonical taps) of image n, group grp, gathered onto the input positions
 * they came from, tap by tap in `order` */
void col2im_add(const Geo &g, const float *dcol, const int *order, float *dx_ng) {
    const int P = g.cg * g.r * g.s, Q = g.oh * g.ow;
    for (int i = 0; i < P; i++) {
        const int p = order[i], cc = p / (g.r * g.s), r = p / g.s % g.r, s = p % g.s;
        float *out = dx_ng + (size_t)cc * g.h * g.w;
        const float *d = dcol + (size_t)p * Q;
        for (int oh = 0; oh < g.oh; oh++) {
            const int ih = oh * g.u - g.ph + r * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            for (int ow = 0; ow < g.ow; ow++) {
                const int iw = ow * g.v - g.pw + s * g.dw;
                if (iw >= 0 && iw < g.w) out[(size_t)ih * g.w + iw] += d[oh * g.ow + ow];
            }
        }
    }
}

/* backward data, ALGO_1 (ORDERED) or ALGO_0 (ATOMIC) */
void bwd_data_gemm(const Geo &g, const Arith &a, Kind kind, const std::vector<float> &dy0, const std::vector<float> &w, std::vector<float> &dx,
                   uint64_t seed) {
    const int kg = g.k / g.g, P = g.cg * g.r * g.s, Q = g.oh * g.ow;
    const std::vector<float> dy = operands(dy0, a, kind);
    std::vector<float> wt((size_t)g.g * P * kg);
    for (int grp = 0; grp < g.g; grp++)
        for (int k = 0; k < kg; k++)
            for (int p = 0; p < P; p++) wt[((size_t)grp * P + p) * kg + k] = operand(w[((size_t)grp * kg + k) * P + p], a, kind);
    const std::vector<int> canonical = tap_order(g, false);
    std::fill(dx.begin(), dx.end(), 0.0f);
    const int slices = kg < 8 ? kg : 8, per = (kg + slices - 1) / slices;
#pragma omp parallel if (parallel_worth(g))
    {
        std::vector<float> dcol((size_t)P * Q), tmp(kind == ORDERED ? (size_t)P * Q : (size_t)g.cg * g.h * g.w);
#pragma omp for schedule(static)
        for (int ng = 0; ng < g.n * g.g; ng++) {
            const int n = ng / g.g, grp = ng % g.g;
            const float *dyn = &dy[((size_t)n * g.k + (size_t)grp * kg) * Q];
            float *dxn = &dx[((size_t)n * g.c + (size_t)grp * g.cg) * g.h * g.w];
            if (kind == ORDERED) {
                std::fill(dcol.begin(), dcol.end(), 0.0f);
                matmul_tiled(P, Q, kg, &wt[(size_t)grp * P * kg], kg, dyn, Q, dcol.data(), Q, 8, tmp.data());
                col2im_add(g, dcol.data(), canonical.data(), dxn);
                continue;
            }
            /* atomics: each slice of up to 8 output channels lands on dx in an order no one controls */
            const std::vector<int> slice = shuffled(slices, seed, 2 * (uint64_t)ng), taps = shuffled(P, seed, 2 * (uint64_t)ng + 1);
            for (int si : slice) {
                const int k0 = si * per, kc = kg - k0 < per ? kg - k0 : per;
                if (kc <= 0) continue;
                std::fill(dcol.begin(), dcol.end(), 0.0f);
                matmul(P, Q, kc, &wt[(size_t)grp * P * kg + k0], kg, dyn + (size_t)k0 * Q, Q, dcol.data(), Q);
                std::fill(tmp.begin(), tmp.end(), 0.0f);
                col2im_add(g, dcol.data(), taps.data(), tmp.data());
                for (size_t i = 0; i < tmp.size(); i++) dxn[i] += tmp[i];
            }
        }
    }
}

/* backward filter, ALGO_1 (ORDERED), ALGO_0 (ATOMIC) or ALGO_3 (ATOMIC_PRECOMP): dw[k][p] = sum
 * over n and q of dy[n][k][q] colT_n[q][p]; threads take blocks of 4 rows k */
void bwd_filter_gemm(const Geo &g, const Arith &a, Kind kind, const std::vector<float> &x0, const std::vector<float> &dy0, std::vector<float> &dw,
                     uint64_t seed) {
    const int kg = g.k / g.g, P = g.cg * g.r * g.s, Q = g.oh * g.ow;
    const std::vector<float> x = operands(x0, a, kind), dy = operands(dy0, a, kind);
    const std::vector<int> canonical = tap_order(g, false);
    std::vector<float> colt((size_t)g.n * g.g * Q * P);
    const bool par = parallel_worth(g);
#pragma omp parallel for schedule(static) if (par)
    for (int ng = 0; ng < g.n * g.g; ng++) im2col(g, x.data(), ng / g.g, ng % g.g, canonical.data(), &colt[(size_t)ng * Q * P], true);
    std::fill(dw.begin(), dw.end(), 0.0f);
    /* the partial sums the atomics add: per image and 32 output positions (ALGO_0), per 16
     * output positions over every image (ALGO_3); at least 4 (8) per image on small planes */
    const int most = kind == ATOMIC ? 32 : 16, least = kind == ATOMIC ? 4 : 8;
    const int qper = std::max(1, std::min(most, Q / least)), qparts = (Q + qper - 1) / qper;
    const int per_group = (kg + 3) / 4; /* blocks of 4 rows, never straddling two groups */
#pragma omp parallel if (par)
    {
        std::vector<float> tmp(kind == ORDERED ? 0 : (size_t)4 * P);
#pragma omp for schedule(static)
        for (int b = 0; b < g.g * per_group; b++) {
            const int grp = b / per_group, kb = grp * kg + b % per_group * 4, rows = (grp + 1) * kg - kb < 4 ? (grp + 1) * kg - kb : 4;
            float *out = &dw[(size_t)kb * P];
            if (kind == ORDERED) {
                for (int n = 0; n < g.n; n++)
                    matmul(rows, P, Q, &dy[((size_t)n * g.k + kb) * Q], Q, &colt[((size_t)n * g.g + grp) * Q * P], P, out, P);
                continue;
            }
            const int units = kind == ATOMIC ? g.n * qparts : qparts;
            for (int u : shuffled(units, seed, (uint64_t)b)) {
                const int part = u % qparts, q0 = part * qper, qc = Q - q0 < qper ? Q - q0 : qper;
                if (qc <= 0) continue;
                std::fill(tmp.begin(), tmp.end(), 0.0f);
                for (int n = kind == ATOMIC ? u / qparts : 0; n < (kind == ATOMIC ? u / qparts + 1 : g.n); n++)
                    matmul(rows, P, qc, &dy[((size_t)n * g.k + kb) * Q + q0], Q, &colt[(((size_t)n * g.g + grp) * Q + q0) * P], P, tmp.data(), P);
                for (size_t i = 0; i < (size_t)rows * P; i++) out[i] += tmp[i];
            }
        }
    }
}

/* ---- planes for the stride-1 families (FFT, Winograd) ----
 * Each reduces out[b][k] = sum over j of (in[b][j] correlated with f[k][j]): forward b = image,
 * j = input channel, k = output channel; backward data the same on dy padded by (r - 1 - pad)
 * with the filter turned by 180 degrees and its channels exchanged; backward filter b = input
 * channel, j = image, k = output channel, with dy as the "filter" and dw as the output. */
struct Planes {
    const float *p;
    size_t s0, s1; /* plane (i0, i1) starts at p + i0 s0 + i1 s1 */
    int h, w;
    const float *at(int i0, int i1) const { return p + (size_t)i0 * s0 + (size_t)i1 * s1; }
};
struct OutPlanes {
    float *p;
    size_t s0, s1;
    int h, w;
    float *at(int i0, int i1) const { return p + (size_t)i0 * s0 + (size_t)i1 * s1; }
};

/* [n][c][h][w] -> [n][c][h + 2 ph][w + 2 pw], zeros around */
std::vector<float> padded(const float *x, int n, int c, int h, int w, int ph, int pw) {
    const int hp = h + 2 * ph, wp = w + 2 * pw;
    std::vector<float> out((size_t)n * c * hp * wp, 0.0f);
    for (size_t pl = 0; pl < (size_t)n * c; pl++)
        for (int y = 0; y < h; y++) memcpy(&out[(pl * hp + y + ph) * wp + pw], &x[(pl * h + y) * w], (size_t)w * sizeof(float));
    return out;
}

/* ---- FFT ---- */
struct Cx {
    float re, im;
};

int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

/* exp(-2 pi i j / n), j < n / 2, for n = 2 ... 1024, from double */
const Cx *twiddles(int n) {
    static std::once_flag once;
    static std::vector<Cx> tab[11];
    std::call_once(once, [] {
        for (int e = 1; e <= 10; e++) {
            const int m = 1 << e;
            tab[e].resize((size_t)m / 2);
            for (int j = 0; j < m / 2; j++)
                tab[e][(size_t)j] = {(float)cos(-2 * M_PI * j / m), (float)sin(-2 * M_PI * j / m)};
        }
    });
    int e = 0;
    while ((1 << e) < n) e++;
    if (e < 1 || e > 10 || (1 << e) != n) emu::fatal("emulated cuDNN: an FFT of %d points (2 to 1024 are emulated)", n);
    return tab[e].data();
}

Cx mul(Cx a, Cx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
Cx mul_conj(Cx a, Cx b) { return {a.re * b.re + a.im * b.im, a.im * b.re - a.re * b.im}; } /* a conj(b) */

/* in place, n points (a power of 2), radix 2, decimation in time */
void fft1(Cx *a, int n, bool inverse) {
    if (n == 1) return;
    const Cx *tw = twiddles(n);
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) std::swap(a[i], a[j]);
    }
    for (int len = 2; len <= n; len <<= 1) {
        const int half = len / 2, step = n / len;
        for (int i = 0; i < n; i += len)
            for (int j = 0; j < half; j++) {
                Cx w = tw[j * step];
                if (inverse) w.im = -w.im;
                const Cx u = a[i + j], t = mul(a[i + j + half], w);
                a[i + j] = {u.re + t.re, u.im + t.im};
                a[i + j + half] = {u.re - t.re, u.im - t.im};
            }
    }
}

/* in place, n1 rows of n2 points; the inverse divides by n1 n2 (a power of 2: exact) */
void fft2(Cx *a, int n1, int n2, bool inverse, Cx *col) {
    for (int y = 0; y < n1; y++) fft1(a + (size_t)y * n2, n2, inverse);
    for (int x = 0; x < n2; x++) {
        for (int y = 0; y < n1; y++) col[y] = a[(size_t)y * n2 + x];
        fft1(col, n1, inverse);
        for (int y = 0; y < n1; y++) a[(size_t)y * n2 + x] = col[y];
    }
    if (inverse) {
        const float s = 1.0f / (float)(n1 * n2);
        for (size_t i = 0; i < (size_t)n1 * n2; i++) a[i].re *= s, a[i].im *= s;
    }
}

/* the transform of the h x w window of plane src at (y0, x0) (zeros outside src's hs x ws) */
void fft_window(const float *src, int hs, int ws, int y0, int x0, int h, int w, Cx *dst, int n1, int n2, Cx *col) {
    for (size_t i = 0; i < (size_t)n1 * n2; i++) dst[i] = {0.0f, 0.0f};
    for (int y = 0; y < h && y0 + y < hs; y++)
        for (int x = 0; x < w && x0 + x < ws; x++) dst[(size_t)y * n2 + x].re = src[(size_t)(y0 + y) * ws + x0 + x];
    fft2(dst, n1, n2, false, col);
}

/* The transforms (n1 x n2) of every plane in[b][j]'s windows at the tile origins (t1 apart down,
 * t2 across; ty x tx tiles), [b][j][tile] */
std::vector<Cx> fft_windows(int B, int J, const Planes &in, int n1, int n2, int t1, int t2, int ty, int tx, bool par) {
    const int nt = ty * tx;
    const size_t plane = (size_t)n1 * n2;
    std::vector<Cx> X((size_t)B * J * nt * plane);
#pragma omp parallel if (par)
    {
        std::vector<Cx> col((size_t)n1);
#pragma omp for schedule(static)
        for (int i = 0; i < B * J * nt; i++) {
            const int t = i % nt, j = i / nt % J, b = i / nt / J;
            fft_window(in.at(b, j), in.h, in.w, t / tx * t1, t % tx * t2, n1, n2, &X[(size_t)i * plane], n1, n2, col.data());
        }
    }
    return X;
}

/* out[b][k] = sum over j of in[b][j] correlated with f[k][j], through whole-plane transforms or
 * (tiled) 32 x 32 tiles of the output's plane with their input windows (overlap-save). */
void fft_correlate(int B, int K, int J, const Planes &in, const Planes &f, const OutPlanes &out, bool tiled, bool par) {
    const int n1 = tiled ? 32 : pow2_at_least(in.h), n2 = tiled ? 32 : pow2_at_least(in.w);
    const int t1 = tiled ? n1 - f.h + 1 : out.h, t2 = tiled ? n2 - f.w + 1 : out.w;
    const int ty = (out.h + t1 - 1) / t1, tx = (out.w + t2 - 1) / t2, nt = ty * tx;
    const size_t plane = (size_t)n1 * n2;
    const std::vector<Cx> X = fft_windows(B, J, in, n1, n2, t1, t2, ty, tx, par);
#pragma omp parallel if (par)
    {
        std::vector<Cx> F((size_t)J * plane), acc(plane), col((size_t)n1);
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++) {
            for (int j = 0; j < J; j++) fft_window(f.at(k, j), f.h, f.w, 0, 0, f.h, f.w, &F[(size_t)j * plane], n1, n2, col.data());
            for (int b = 0; b < B; b++)
                for (int t = 0; t < nt; t++) {
                    std::fill(acc.begin(), acc.end(), Cx{0.0f, 0.0f});
                    for (int j = 0; j < J; j++) {
                        const Cx *x = &X[(((size_t)b * J + j) * nt + t) * plane], *fj = &F[(size_t)j * plane];
                        for (size_t e = 0; e < plane; e++) {
                            const Cx p = mul_conj(x[e], fj[e]);
                            acc[e].re += p.re, acc[e].im += p.im;
                        }
                    }
                    fft2(acc.data(), n1, n2, true, col.data());
                    float *o = out.at(b, k);
                    const int y0 = t / tx * t1, x0 = t % tx * t2;
                    for (int y = 0; y < t1 && y0 + y < out.h; y++)
                        for (int x = 0; x < t2 && x0 + x < out.w; x++) o[(size_t)(y0 + y) * out.w + x0 + x] = acc[(size_t)y * n2 + x].re;
                }
        }
    }
}

/* backward filter through 32 x 32 tiles: the reduction over the output positions (the "filter"
 * f, dy) cut into tiles of (33 - r) x (33 - s); each tile's product with its input window is
 * summed in the frequency domain over images and tiles, then transformed back once. */
void fft_tiled_filter_grad(int B, int K, int J, const Planes &in, const Planes &f, const OutPlanes &out, bool par) {
    const int n = 32, t1 = n - out.h + 1, t2 = n - out.w + 1;
    const int ty = (f.h + t1 - 1) / t1, tx = (f.w + t2 - 1) / t2, nt = ty * tx;
    const size_t plane = (size_t)n * n;
    const std::vector<Cx> X = fft_windows(B, J, in, n, n, t1, t2, ty, tx, par);
#pragma omp parallel if (par)
    {
        std::vector<Cx> acc((size_t)B * plane), F(plane), col((size_t)n);
        std::vector<float> tile((size_t)t1 * t2);
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++) {
            std::fill(acc.begin(), acc.end(), Cx{0.0f, 0.0f});
            for (int j = 0; j < J; j++)
                for (int t = 0; t < nt; t++) {
                    const int y0 = t / tx * t1, x0 = t % tx * t2;
                    const float *src = f.at(k, j);
                    for (int y = 0; y < t1; y++)
                        for (int x = 0; x < t2; x++)
                            tile[(size_t)y * t2 + x] = y0 + y < f.h && x0 + x < f.w ? src[(size_t)(y0 + y) * f.w + x0 + x] : 0.0f;
                    fft_window(tile.data(), t1, t2, 0, 0, t1, t2, F.data(), n, n, col.data());
                    for (int b = 0; b < B; b++) {
                        const Cx *x = &X[(((size_t)b * J + j) * nt + t) * plane];
                        Cx *a = &acc[(size_t)b * plane];
                        for (size_t e = 0; e < plane; e++) {
                            const Cx p = mul_conj(x[e], F[e]);
                            a[e].re += p.re, a[e].im += p.im;
                        }
                    }
                }
            for (int b = 0; b < B; b++) {
                Cx *a = &acc[(size_t)b * plane];
                fft2(a, n, n, true, col.data());
                float *o = out.at(b, k);
                for (int y = 0; y < out.h; y++)
                    for (int x = 0; x < out.w; x++) o[(size_t)y * out.w + x] = a[(size_t)y * n + x].re;
            }
        }
    }
}

/* ---- Winograd ----
 * F(m, r): m outputs of a correlation with an r-tap filter from n = m + r - 1 products,
 * y = At [(G g) . (Bt d)]. Toom-Cook with the points p_j (0, 1, -1, 2, -2, ...) and infinity:
 * At[i][j] = p_j^i (the last column: 1 in the last row), G[j][t] = p_j^t / prod_{l != j}
 * (p_j - p_l) (the last row: 1 in the last column), Bt's row j the coefficients of prod_{l != j}
 * (x - p_l) and its last row those of prod_l (x - p_l). */
struct Wino {
    int m, r, n;
    std::vector<float> At, G, Bt; /* m x n, n x r, n x n */
};

const Wino &wino(int m, int r) {
    static std::mutex mu;
    static std::vector<Wino *> made;
    std::lock_guard<std::mutex> hold(mu);
    for (Wino *w : made)
        if (w->m == m && w->r == r) return *w;
    const int n = m + r - 1;
    static const double pts[] = {0, 1, -1, 2, -2, 0.5, -0.5};
    if (n - 1 > 7) emu::fatal("emulated cuDNN: Winograd F(%d, %d) has too many points", m, r);
    std::vector<double> At((size_t)m * n, 0), G((size_t)n * r, 0), Bt((size_t)n * n, 0);
    for (int j = 0; j < n - 1; j++) {
        double f = 1;
        std::vector<double> poly(1, 1.0); /* prod over l != j of (x - p_l), ascending powers */
        for (int l = 0; l < n - 1; l++) {
            if (l == j) continue;
            f *= pts[j] - pts[l];
            std::vector<double> next(poly.size() + 1, 0.0);
            for (size_t i = 0; i < poly.size(); i++) next[i + 1] += poly[i], next[i] -= pts[l] * poly[i];
            poly = next;
        }
        for (size_t i = 0; i < poly.size(); i++) Bt[(size_t)j * n + i] = poly[i];
        for (int t = 0; t < r; t++) G[(size_t)j * r + t] = pow(pts[j], t) / f;
        for (int i = 0; i < m; i++) At[(size_t)i * n + j] = pow(pts[j], i);
    }
    std::vector<double> all(1, 1.0);
    for (int l = 0; l < n - 1; l++) {
        std::vector<double> next(all.size() + 1, 0.0);
        for (size_t i = 0; i < all.size(); i++) next[i + 1] += all[i], next[i] -= pts[l] * all[i];
        all = next;
    }
    for (int i = 0; i < n; i++) Bt[(size_t)(n - 1) * n + i] = all[(size_t)i];
    G[(size_t)(n - 1) * r + r - 1] = 1;
    At[(size_t)(m - 1) * n + n - 1] = 1;
    /* checked in double on a few random correlations before use */
    uint64_t s = 12345;
    for (int trial = 0; trial < 4; trial++) {
        std::vector<double> d((size_t)n), gg((size_t)r), u((size_t)n), v((size_t)n);
        for (auto &e : d) e = (double)(splitmix(&s) >> 11) * 0x1p-53 - 0.5;
        for (auto &e : gg) e = (double)(splitmix(&s) >> 11) * 0x1p-53 - 0.5;
        for (int j = 0; j < n; j++) {
            u[(size_t)j] = v[(size_t)j] = 0;
            for (int t = 0; t < r; t++) u[(size_t)j] += G[(size_t)j * r + t] * gg[(size_t)t];
            for (int i = 0; i < n; i++) v[(size_t)j] += Bt[(size_t)j * n + i] * d[(size_t)i];
        }
        for (int i = 0; i < m; i++) {
            double y = 0, want = 0;
            for (int j = 0; j < n; j++) y += At[(size_t)i * n + j] * u[(size_t)j] * v[(size_t)j];
            for (int t = 0; t < r; t++) want += d[(size_t)(i + t)] * gg[(size_t)t];
            if (fabs(y - want) > 1e-9) emu::fatal("emulated cuDNN: Winograd F(%d, %d)'s matrices are wrong (%g vs %g)", m, r, y, want);
        }
    }
    Wino *w = new Wino{m, r, n, {}, {}, {}};
    for (double v : At) w->At.push_back((float)v);
    for (double v : G) w->G.push_back((float)v);
    for (double v : Bt) w->Bt.push_back((float)v);
    made.push_back(w);
    return *w;
}

/* out (A x C) = L (A x B) X (B x BC) R^T (R: C x BC), in fp32, each sum in ascending order (the
 * transforms: G g G^T, Bt d B, At M A); sizes fixed at compile time so that the loops unroll */
template <int A, int B, int BC, int C> void sandwich(const float *L, const float *X, const float *R, float *out) {
    float tmp[A * BC];
    for (int i = 0; i < A; i++)
        for (int q = 0; q < BC; q++) {
            float t = 0;
            for (int l = 0; l < B; l++) t += L[i * B + l] * X[l * BC + q];
            tmp[i * BC + q] = t;
        }
    for (int i = 0; i < A; i++)
        for (int p = 0; p < C; p++) {
            float t = 0;
            for (int q = 0; q < BC; q++) t += tmp[i * BC + q] * R[p * BC + q];
            out[i * C + p] = t;
        }
}

/* the n x n window of plane src at (y0, x0), zeros outside */
void window(const float *src, int hs, int ws, int y0, int x0, int n, float *d) {
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) d[y * n + x] = y0 + y < hs && x0 + x < ws ? src[(size_t)(y0 + y) * ws + x0 + x] : 0.0f;
}

/* out[b][k] = sum over j of in[b][j] correlated with f[k][j] (r x r), tiles of m x m outputs;
 * the transformed operands rounded as family `kind` stores them */
template <int m, int r>
void wino_correlate(int B, int K, int J, const Planes &in, const Planes &f, const OutPlanes &out, const Arith &a, Kind kind, bool par) {
    const Wino &W = wino(m, r);
    constexpr int n = m + r - 1, nn = n * n;
    std::vector<float> U((size_t)K * J * nn);
#pragma omp parallel for schedule(static) if (par)
    for (int kj = 0; kj < K * J; kj++) {
        float *u = &U[(size_t)kj * nn];
        sandwich<n, r, r, n>(W.G.data(), f.at(kj / J, kj % J), W.G.data(), u);
        for (int e = 0; e < nn; e++) u[e] = wino_operand(u[e], a, kind, r);
    }
    const int ty = (out.h + m - 1) / m, tx = (out.w + m - 1) / m;
#pragma omp parallel if (par)
    {
        std::vector<float> V((size_t)J * nn), M((size_t)nn);
        float d[nn], y[m * m];
#pragma omp for schedule(static)
        for (int bt = 0; bt < B * ty * tx; bt++) {
            const int b = bt / (ty * tx), t = bt % (ty * tx), y0 = t / tx * m, x0 = t % tx * m;
            for (int j = 0; j < J; j++) {
                window(in.at(b, j), in.h, in.w, y0, x0, n, d);
                float *v = &V[(size_t)j * nn];
                sandwich<n, n, n, n>(W.Bt.data(), d, W.Bt.data(), v);
                for (int e = 0; e < nn; e++) v[e] = wino_operand(v[e], a, kind, r);
            }
            for (int k = 0; k < K; k++) {
                std::fill(M.begin(), M.end(), 0.0f);
                for (int j = 0; j < J; j++) {
                    const float *u = &U[((size_t)k * J + j) * nn], *v = &V[(size_t)j * nn];
                    for (int e = 0; e < nn; e++) M[(size_t)e] += u[e] * v[e];
                }
                sandwich<m, n, n, m>(W.At.data(), M.data(), W.At.data(), y);
                float *o = out.at(b, k);
                for (int i = 0; i < m && y0 + i < out.h; i++)
                    for (int p = 0; p < m && x0 + p < out.w; p++) o[(size_t)(y0 + i) * out.w + x0 + p] = y[i * m + p];
            }
        }
    }
}

/* backward filter, WINOGRAD_NONFUSED: F(r x r, t x t) with n = 6 points: out (r x r) in one
 * tile, the reduction over dy's positions cut into t x t chunks; the products summed over images
 * and chunks in order, then one output transform */
template <int m, int t>
void wino_filter_grad(int B, int K, int J, const Planes &in, const Planes &f, const OutPlanes &out, const Arith &a, Kind kind, bool par) {
    const Wino &W = wino(m, t);
    constexpr int n = m + t - 1, nn = n * n;
    const int ty = (f.h + t - 1) / t, tx = (f.w + t - 1) / t, nt = ty * tx;
    std::vector<float> V((size_t)J * nt * B * nn);
#pragma omp parallel for schedule(static) if (par)
    for (int i = 0; i < J * nt * B; i++) {
        const int b = i % B, c = i / B % nt, j = i / B / nt;
        float d[nn];
        window(in.at(b, j), in.h, in.w, c / tx * t, c % tx * t, n, d);
        float *v = &V[(size_t)i * nn];
        sandwich<n, n, n, n>(W.Bt.data(), d, W.Bt.data(), v);
        for (int e = 0; e < nn; e++) v[e] = wino_operand(v[e], a, kind, m);
    }
#pragma omp parallel if (par)
    {
        std::vector<float> M((size_t)B * nn);
        float g[t * t], u[nn], y[m * m];
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++) {
            std::fill(M.begin(), M.end(), 0.0f);
            for (int j = 0; j < J; j++)
                for (int c = 0; c < nt; c++) {
                    window(f.at(k, j), f.h, f.w, c / tx * t, c % tx * t, t, g);
                    sandwich<n, t, t, n>(W.G.data(), g, W.G.data(), u);
                    for (int e = 0; e < nn; e++) u[e] = wino_operand(u[e], a, kind, m);
                    for (int b = 0; b < B; b++) {
                        const float *v = &V[(((size_t)j * nt + c) * B + b) * nn];
                        float *mb = &M[(size_t)b * nn];
                        for (int e = 0; e < nn; e++) mb[e] += u[e] * v[e];
                    }
                }
            for (int b = 0; b < B; b++) {
                sandwich<m, n, n, m>(W.At.data(), &M[(size_t)b * nn], W.At.data(), y);
                float *o = out.at(b, k);
                for (int e = 0; e < m * m; e++) o[e] = y[e];
            }
        }
    }
}

/* ---- the stride-1 families in each direction ---- */
void stride1(Dir d, Kind kind, const Geo &g, const Arith &a, const std::vector<float> &in0, const std::vector<float> &in1, std::vector<float> &out) {
    const int kg = g.k / g.g, RS = g.r * g.s;
    const bool par = parallel_worth(g);
    /* WINOGRAD F(2x2, 3x3); NONFUSED F(4x4, 3x3), F(2x2, 5x5) */
    auto run = [&](int B, int K, int J, const Planes &in, const Planes &f, const OutPlanes &o) {
        if (kind == FFT || kind == FFT_TILING)
            fft_correlate(B, K, J, in, f, o, kind == FFT_TILING, par);
        else if (kind == WINOGRAD)
            wino_correlate<2, 3>(B, K, J, in, f, o, a, kind, par);
        else if (g.r == 3)
            wino_correlate<4, 3>(B, K, J, in, f, o, a, kind, par);
        else
            wino_correlate<2, 5>(B, K, J, in, f, o, a, kind, par);
    };
    if (d == FWD) {
        const int hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
        const std::vector<float> xp = padded(in0.data(), g.n, g.c, g.h, g.w, g.ph, g.pw);
        for (int grp = 0; grp < g.g; grp++) {
            const size_t pl = (size_t)hp * wp, opl = (size_t)g.oh * g.ow;
            Planes in{&xp[(size_t)grp * g.cg * pl], (size_t)g.c * pl, pl, hp, wp};
            Planes f{&in1[(size_t)grp * kg * g.cg * RS], (size_t)g.cg * RS, (size_t)RS, g.r, g.s};
            OutPlanes o{&out[(size_t)grp * kg * opl], (size_t)g.k * opl, opl, g.oh, g.ow};
            run(g.n, kg, g.cg, in, f, o);
        }
    } else if (d == BWD_DATA) {
        const int qh = g.r - 1 - g.ph, qw = g.s - 1 - g.pw, hp = g.oh + 2 * qh, wp = g.ow + 2 * qw;
        const std::vector<float> dyp = padded(in0.data(), g.n, g.k, g.oh, g.ow, qh, qw);
        std::vector<float> wr((size_t)g.k * g.cg * RS); /* [grp][c'][k'][r][s], turned by 180 degrees */
        for (int grp = 0; grp < g.g; grp++)
            for (int cc = 0; cc < g.cg; cc++)
                for (int kk = 0; kk < kg; kk++)
                    for (int e = 0; e < RS; e++)
                        wr[(((size_t)grp * g.cg + cc) * kg + kk) * RS + e] = in1[(((size_t)grp * kg + kk) * g.cg + cc) * RS + RS - 1 - e];
        for (int grp = 0; grp < g.g; grp++) {
            const size_t pl = (size_t)hp * wp, opl = (size_t)g.h * g.w;
            Planes in{&dyp[(size_t)grp * kg * pl], (size_t)g.k * pl, pl, hp, wp};
            Planes f{&wr[(size_t)grp * g.cg * kg * RS], (size_t)kg * RS, (size_t)RS, g.r, g.s};
            OutPlanes o{&out[(size_t)grp * g.cg * opl], (size_t)g.c * opl, opl, g.h, g.w};
            run(g.n, g.cg, kg, in, f, o);
        }
    } else {
        const int hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
        const std::vector<float> xp = padded(in0.data(), g.n, g.c, g.h, g.w, g.ph, g.pw);
        for (int grp = 0; grp < g.g; grp++) {
            const size_t pl = (size_t)hp * wp, opl = (size_t)g.oh * g.ow;
            Planes in{&xp[(size_t)grp * g.cg * pl], pl, (size_t)g.c * pl, hp, wp};
            Planes f{&in1[(size_t)grp * kg * opl], opl, (size_t)g.k * opl, g.oh, g.ow};
            OutPlanes o{&out[(size_t)grp * kg * g.cg * RS], (size_t)RS, (size_t)g.cg * RS, g.r, g.s};
            if (kind == FFT)
                fft_correlate(g.cg, kg, g.n, in, f, o, false, par);
            else if (kind == FFT_TILING)
                fft_tiled_filter_grad(g.cg, kg, g.n, in, f, o, par);
            else if (g.r == 3) /* F(3x3, 4x4), F(5x5, 2x2) */
                wino_filter_grad<3, 4>(g.cg, kg, g.n, in, f, o, a, kind, par);
            else
                wino_filter_grad<5, 2>(g.cg, kg, g.n, in, f, o, a, kind, par);
        }
    }
}

/* [k][c][r][s] turned by 180 degrees in (r, s) */
std::vector<float> turned(const std::vector<float> &w, const Geo &g) {
    std::vector<float> out(w.size());
    const size_t rs = (size_t)g.r * g.s;
    for (size_t pl = 0; pl < w.size() / rs; pl++)
        for (size_t e = 0; e < rs; e++) out[pl * rs + e] = w[pl * rs + rs - 1 - e];
    return out;
}

bool is_float_like(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF; }

} // namespace

const char *algo_name(Dir d, int algo) {
    static const char *const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
                                      "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    if (algo < 0 || algo >= algo_count[d]) return "?";
    return d == FWD ? fwd[algo] : d == BWD_DATA ? data[algo] : filter[algo];
}

const char *unsupported_because(Dir d, int algo, const Geo &g, const Arith &a) {
    const Kind k = kind_of(d, algo);
    const bool stride1 = g.u == 1 && g.v == 1, dil1 = g.dh == 1 && g.dw == 1;
    /* TRUE_HALF_CONFIG: half data computed in half */
    const bool true_half = a.data == CUDNN_DATA_HALF && a.compute == CUDNN_DATA_HALF;
    /* layouts, as the support tables' "format support" column lists them: backward data ALGO_0
     * and WINOGRAD and backward filter ALGO_3 take NCHW CHW-packed tensors only (NHWC: the
     * others, FFT's HW-packed NCHW aside, below) */
    if (!g.chw_packed && ((d == BWD_DATA && (k == ATOMIC || k == WINOGRAD)) || (d == BWD_FILTER && k == ATOMIC_PRECOMP)))
        return "NCHW CHW-packed tensors only";
    switch (k) {
    case IMPLICIT: case PRECOMP: case ATOMIC: case ORDERED: case ATOMIC_PRECOMP:
        return nullptr; /* every data type configuration, stride, dilation and group count */
    case GEMM:
        if (a.data == CUDNN_DATA_BFLOAT16) return "GEMM: BFLOAT16 is not among its data type configurations";
        return nullptr;
    case DIRECT: return "DIRECT is not implemented in cuDNN 9";
    case NEVER: return "backward filter WINOGRAD is not implemented (cudnn_cnn.h)";
    case FFT: case FFT_TILING:
        if (!is_float_like(a.data) || true_half) return "FFT: PSEUDO_HALF_CONFIG and FLOAT_CONFIG only";
        if (!g.hw_packed) return "FFT: NCHW tensors with packed HW planes only";
        if (!stride1) return "FFT: the vertical and horizontal filter stride must equal 1";
        if (!dil1) return "FFT: the dilation must equal 1";
        if (g.r <= g.ph || g.s <= g.pw) return "FFT: the filter's height and width must be greater than the zero-padding's";
        if (k == FFT && (g.h + 2 * g.ph > 256 || g.w + 2 * g.pw > 256))
            return "FFT: the feature map's height and width + 2 * the zero-padding must equal 256 or less";
        if (k == FFT_TILING && (g.r > 32 || g.s > 32)) return "FFT_TILING: the filter's height and width must equal 32 or less";
        return nullptr;
    case WINOGRAD:
        if (!is_float_like(a.data) || true_half) return "WINOGRAD: PSEUDO_HALF_CONFIG and FLOAT_CONFIG only";
        if (!stride1 || !dil1) return "WINOGRAD: the filter stride and the dilation must equal 1";
        if (g.r != 3 || g.s != 3) return "WINOGRAD: the filter must be 3x3";
        return nullptr;
    case WINOGRAD_NONFUSED:
        if (a.data == CUDNN_DATA_DOUBLE || a.data == CUDNN_DATA_BFLOAT16)
            return "WINOGRAD_NONFUSED: TRUE_HALF_CONFIG, PSEUDO_HALF_CONFIG and FLOAT_CONFIG only";
        if (!stride1 || !dil1) return "WINOGRAD_NONFUSED: the filter stride and the dilation must equal 1";
        if (!((g.r == 3 && g.s == 3) || (g.r == 5 && g.s == 5))) return "WINOGRAD_NONFUSED: the filter must be 3x3 or 5x5";
        if (g.r == 5 && true_half) return "WINOGRAD_NONFUSED: a 5x5 filter does not support TRUE_HALF_CONFIG";
        /* the backward data transform pads dy by r - 1 - pad */
        if (d == BWD_DATA && (g.r <= g.ph || g.s <= g.pw)) return "WINOGRAD_NONFUSED: the padding must be smaller than the filter";
        return nullptr;
    }
    return "unknown algorithm";
}

size_t workspace(Dir d, int algo, const Geo &g, const Arith &a) {
    const size_t es = a.data == CUDNN_DATA_HALF || a.data == CUDNN_DATA_BFLOAT16 ? 2 : a.data == CUDNN_DATA_DOUBLE ? 8 : 4;
    switch (kind_of(d, algo)) {
    case PRECOMP: case ATOMIC_PRECOMP: return (size_t)g.cg * g.r * g.s * 8; /* one index per tap */
    case GEMM: return (size_t)g.cg * g.r * g.s * g.oh * g.ow * es;         /* one image's im2col matrix */
    case FFT: {
        const size_t n1 = (size_t)pow2_at_least(g.h + 2 * g.ph), n2 = (size_t)pow2_at_least(g.w + 2 * g.pw);
        return (size_t)((size_t)g.n * g.c + (size_t)g.k * g.cg + (size_t)g.n * g.k) * n1 * (n2 / 2 + 1) * 8;
    }
    case FFT_TILING: return (size_t)((size_t)g.n * g.c + (size_t)g.k * g.cg) * 32 * 17 * 8;
    case WINOGRAD_NONFUSED:
        return (size_t)((size_t)g.n * g.c + (size_t)g.k * g.cg + (size_t)g.n * g.k) * ((g.oh + 1) / 2) * ((g.ow + 1) / 2) * 36 * es;
    default: return 0;
    }
}

cudnnDeterminism_t determinism(Dir d, int algo) {
    const Kind k = kind_of(d, algo);
    return k == ATOMIC || k == ATOMIC_PRECOMP ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
}

bool uses_tensor_cores(Dir d, int algo, const Arith &a) {
    return tensor_cores(kind_of(d, algo)) &&
           (a.data == CUDNN_DATA_HALF || a.data == CUDNN_DATA_BFLOAT16 || (a.data == CUDNN_DATA_FLOAT && a.math != CUDNN_FMA_MATH));
}

double model_ms(Dir d, int algo, const Geo &g, const Arith &a) {
    const Kind k = kind_of(d, algo);
    const double direct = 2.0 * g.n * g.k * g.oh * g.ow * (double)g.cg * g.r * g.s;
    /* tensor cores: 8 times the FMA units' rate, for the families that use them, on 16-bit data
     * or fp32 data whose math type allows TF32 */
    const bool tc = uses_tensor_cores(d, algo, a);
    const double rate = 1e9 * (tc ? 8 : 1); /* flops per ms */
    double flops, launches = 1;
    switch (k) {
    case IMPLICIT: flops = direct / 1.0; break;
    case PRECOMP: flops = direct / 1.5; break;
    case GEMM: flops = direct / 1.4 + 2.0 * g.n * g.c * g.r * g.s * g.oh * g.ow, launches = 2; break;
    case ORDERED: flops = direct / 1.1; break;
    case ATOMIC: flops = direct / 1.4; break;
    case ATOMIC_PRECOMP: flops = direct / 1.6; break;
    case WINOGRAD: case WINOGRAD_NONFUSED: {
        /* F(m x m, r x r) on n x n tiles: n^2 products per tile and channel pair, and the
         * transforms: every filter (n r^2 + n^2 r multiply-adds), every input tile (2 n^3), every
         * output tile (m n^2 + m^2 n) */
        const double m = k == WINOGRAD ? 2 : g.r == 3 ? 4 : 2, n = m + g.r - 1;
        const double tiles = ceil(g.oh / m) * ceil(g.ow / m) * g.n;
        flops = 2.0 * (tiles * g.k * g.cg * n * n + (double)g.k * g.cg * (n * g.r * g.r + n * n * g.r) + tiles * g.c * 2 * n * n * n +
                       tiles * g.k * (m * n * n + m * m * n));
        launches = k == WINOGRAD ? 1 : 4;
        break;
    }
    case FFT: case FFT_TILING: {
        double n1 = pow2_at_least(g.h + 2 * g.ph), n2 = pow2_at_least(g.w + 2 * g.pw), tiles = 1;
        if (k == FFT_TILING) {
            tiles = ceil((double)g.oh / (33 - g.r)) * ceil((double)g.ow / (33 - g.s));
            n1 = n2 = 32;
        }
        const double S = n1 * n2, transforms = (double)g.n * g.c * tiles + (double)g.k * g.cg + (double)g.n * g.k * tiles;
        flops = 5.0 * S * log2(S) * transforms + 8.0 * g.n * g.k * g.cg * S * tiles, launches = 3;
        break;
    }
    default: flops = direct;
    }
    return flops / rate + 0.005 * launches;
}

double noise(double spread) { return 1.0 + spread * (2.0 * (double)(draw() >> 11) * 0x1p-53 - 1.0); }

void compute(Dir d, int algo, const Geo &g0, const Arith &a, const std::vector<float> &in0, const std::vector<float> &in1,
             std::vector<float> &out) {
    /* CUDNN_CONVOLUTION (a flipped filter) as cross-correlation with the filter turned */
    Geo g = g0;
    g.flip = false;
    std::vector<float> wt;
    if (g0.flip && d != BWD_FILTER) wt = turned(in1, g);
    const std::vector<float> &second = g0.flip && d != BWD_FILTER ? wt : in1;
    const Kind k = kind_of(d, algo);
    const uint64_t seed = k == ATOMIC || k == ATOMIC_PRECOMP ? draw() : 0; /* a new order every call */
    switch (k) {
    case IMPLICIT: case PRECOMP: case GEMM: fwd_gemm(g, a, k, in0, second, out); break;
    case ATOMIC: case ORDERED: case ATOMIC_PRECOMP:
        if (d == BWD_DATA)
            bwd_data_gemm(g, a, k, in0, second, out, seed);
        else
            bwd_filter_gemm(g, a, k, in0, second, out, seed);
        break;
    case FFT: case FFT_TILING: case WINOGRAD: case WINOGRAD_NONFUSED: stride1(d, k, g, a, in0, second, out); break;
    default: emu::fatal("emulated cuDNN: %s %d cannot run", d == FWD ? "forward algorithm" : "backward algorithm", algo);
    }
    if (g0.flip && d == BWD_FILTER) out = turned(out, g);
}

} // namespace dnn
} // namespace emu
