/* bn.cu: the GPU half of bn (src/layers/bn.c): batch statistics in training (running averages
 * with factor 1 - BN_DECAY, unbiased variance, as the CPU half), running statistics in inference.
 * Backward after an inference forward (the input gradient through fixed statistics) is a kernel
 * of its own.
 *
 * Every precision and both layouts use the kernels below; NVCNN_GPU_BN=cudnn gives fp32, tf32
 * and fp16 cuDNN's legacy spatial batch normalisation instead (unfused layers only; bf16 has none:
 * the legacy calls are deprecated in cuDNN 9 and list float, half and double data). On an H200
 * (2026-11-26, resnet50 batch 256 fp16) those legacy kernels took 27.5 ms forward and 39.4 ms
 * backward for a 256x256x56x56 NHWC layer, and 0.83 and 1.30 ms in NCHW, where reading and
 * writing it once takes about 0.1 ms at the memory's speed.
 *
 * The statistics stay in fp32 or wider: blocks sum their share of a channel's n hw values, shifted
 * by the channel's first element (so that a mean far from 0 costs no precision in the variance),
 * one thread per channel adds the partial sums in order (deterministic) and derives the mean, the
 * inverse standard deviation and the running averages; the normalisation is elementwise. The
 * partial sums read memory in order: in NCHW a block walks its channel's planes (a warp reads 32
 * consecutive pixels); in NHWC a block is a tile of BN_TC consecutive channels (threadIdx.x: one
 * warp reads one pixel's BN_TC channels, 64 or 128 contiguous bytes) by BN_TR pixels at a time
 * (threadIdx.y). No index is divided in their loops.
 *
 * NHWC with channels a multiple of the 16-byte vector (bn_vec_ok: every batch norm of the zoo's
 * ResNets) has kernels of its own, since the general ones ran 5 to 10 times slower than memory on
 * an H200 (2026-11-26: 1.06 ms forward and 3.12 ms backward for 256x256x56x56 in fp16): the
 * partial sums read 16-byte vectors, and the normalisation and the input gradient keep each
 * thread's channels fixed over its loop, their statistics and parameters in registers. */
#include "gpunet_internal.h"

typedef struct BnGpu {
    cudnnTensorDescriptor_t x, p;
    int own;            /* 1: the kernels below (bf16), 0: cuDNN */
    int splits;         /* own: partial sums per channel */
    int training;       /* mode of the last forward */
    float *save_mean;   /* [c] */
    float *save_invstd; /* [c] */
    double *part;       /* own: [c][splits][2] partial sums, then [c][2] backward sums */
    void *discard;      /* dx when the input is the network input (which has no gradient) */
} BnGpu;

/* NHWC partial sums: tiles of BN_TC channels by BN_TR pixels (a block of GPU_THREADS threads) */
#define BN_TC 32
#define BN_TR (GPU_THREADS / BN_TC)

/* The NHWC vector path (k_bn_partial_nhwc_vec, k_bn_apply_nhwc, k_bn_grad_input_nhwc): c a multiple
 * of the 16-byte vector's V = 16 / esize elements (and every tensor 16-byte aligned, checked at the
 * launch). A block of its partial sums: gb = min(c / V, GPU_THREADS) threads across a pixel's
 * vectors of channels (a tile of gb V channels), GPU_THREADS / gb pixels at a time. */
static int bn_vec_ok(int c, size_t esize, int nhwc) { return nhwc && c % (int)(16 / esize) == 0; }
static int bn_vec_gb(int c, size_t esize) {
    const int G = c / (int)(16 / esize);
    return G < GPU_THREADS ? G : GPU_THREADS;
}

/* Partial sums per channel: enough blocks to fill the GPU (about 1024 in all; 2048 on the vector
 * path, whose threads read 16 bytes at a time), and at least 16 values per thread in each (8
 * vectors on the vector path; fewer would spend the block on its reduction). A block's share is a
 * range of the channel's n hw values (NCHW) or of the n hw pixels (NHWC, for a tile of channels). */
static int bn_splits(int n, int c, size_t hw, int nhwc, size_t esize) {
    size_t s, work;
    if (bn_vec_ok(c, esize, nhwc)) {
        const int gb = bn_vec_gb(c, esize), G = c / (int)(16 / esize), tiles = (G + gb - 1) / gb;
        s = (2048 + (size_t)tiles - 1) / (size_t)tiles;
        work = (size_t)n * hw / ((size_t)(GPU_THREADS / gb) * 8);
    } else {
        const size_t blocks_per_split = nhwc ? ((size_t)c + BN_TC - 1) / BN_TC : (size_t)c;
        /* a block's threads share a split's values (NCHW) or its pixels (NHWC: BN_TR threads to a channel) */
        s = (1024 + blocks_per_split - 1) / blocks_per_split;
        work = (size_t)n * hw / ((size_t)(nhwc ? BN_TR : GPU_THREADS) * 16);
    }
    if (s > work) s = work;
    if (s > 512) s = 512;
    return s < 1 ? 1 : (int)s;
}

/* NVCNN_GPU_BN=cudnn: cuDNN's legacy batch norm where it has one (for comparison on a GPU) */
static int bn_cudnn_wanted(void) {
    const char *e = getenv("NVCNN_GPU_BN");
    if (!e || !*e || strcmp(e, "own") == 0) return 0;
    if (strcmp(e, "cudnn") == 0) return 1;
    die_code(EXIT_USAGE, "NVCNN_GPU_BN=%s: want own or cudnn", e);
}

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

static void bn_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    const Bn *b = (const Bn *)l->priv;
    BnGpu *p = (BnGpu *)xcalloc(1, sizeof *p);
    g->lp[li] = p;
    Shape s = g->net->node[l->in[0]].shape;
    /* fused layers (fuse.cu: with the ReLU, and the residual add, that follow) need our kernels */
    p->own = g->prec == PREC_BF16 || (g->fused && g->fused[li].out >= 0) || !bn_cudnn_wanted();
    if (!p->own) {
        p->x = gpu_tensor_desc(g, s);
        p->p = gpu_tensor_desc_f32(shape4(1, b->c, 1, 1)); /* scale, bias and statistics stay fp32 */
    }
    p->splits = bn_splits(s.n, b->c, b->hw, g->nhwc, g->esize);
    if ((size_t)s.n * b->hw >= 0x80000000u) die("bn %s: %d x %zu values per channel: 2^31 or more", l->name, s.n, (size_t)b->hw);
    *scratch = 2 * round256((size_t)b->c * sizeof(float));
    if (p->own) *scratch += round256((size_t)b->c * (size_t)(p->splits + 1) * 2 * sizeof(double));
    if (l->in[0] == g->net->input && !p->own) *scratch += shape_count(s) * g->esize;
    *workspace = 0;
}

static void bn_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    const Bn *b = (const Bn *)l->priv;
    BnGpu *p = (BnGpu *)g->lp[li];
    const size_t cb = round256((size_t)b->c * sizeof(float));
    p->save_mean = (float *)scratch;
    p->save_invstd = (float *)(scratch + cb);
    scratch += 2 * cb;
    if (p->own) {
        p->part = (double *)scratch;
        scratch += round256((size_t)b->c * (size_t)(p->splits + 1) * 2 * sizeof(double));
    }
    if (l->in[0] == g->net->input && !p->own) p->discard = scratch;
}

/* ---- bf16: batch norm of our own ---- */
/* The gradient reaching the batch norm's output: dy, or through the fused ReLU (y its output:
 * y > 0 iff the ReLU passed its input, as act.cu's backward decides) */
__device__ __forceinline__ float bn_relu_grad(float dyv, float yv, bool relu) { return relu && !(yv > 0) ? 0.0f : dyv; }
template <typename T> __device__ __forceinline__ float bn_dy(const T *dy, const T *y, size_t i) {
    return bn_relu_grad(to_f(dy[i]), y ? to_f(y[i]) : 0.0f, y != NULL);
}

/* Where value k of channel ch lies, k counting (sample, pixel) pairs of [0, n hw): NCHW
 * [n][c][hw], NHWC [n hw][c]. */
__device__ __forceinline__ size_t bn_at(size_t k, int ch, int c, size_t hw, int nhwc) {
    return nhwc ? k * (size_t)c + ch : (k / hw * c + ch) * hw + k % hw;
}

/* The two sums of one value: statistics (GRAD 0): x - x0 and its square (x0: the channel's first
 * element); gradients (GRAD 1): dy (through the fused ReLU) and dy xhat (x0: the mean). */
template <typename T, int GRAD> struct BnTerm {
    const T *x, *dy, *y;
    float x0, is;
    __device__ __forceinline__ void add(size_t at, float &a, float &b) const {
        if (GRAD) {
            const float d = bn_dy(dy, y, at);
            a += d;
            b += d * ((to_f(x[at]) - x0) * is);
        } else {
            const float d = to_f(x[at]) - x0;
            a += d;
            b += d * d;
        }
    }
};

template <typename T, int GRAD>
__device__ __forceinline__ BnTerm<T, GRAD> bn_term(const T *x, const T *dy, const T *y, const float *mean, const float *invstd, int ch,
                                                   size_t first) {
    BnTerm<T, GRAD> t = {x, dy, y, GRAD ? mean[ch] : to_f(x[first]), GRAD ? invstd[ch] : 0.0f};
    return t;
}

/* Adds the terms of channel ch's values k, k + step, ... below k1 (NCHW: value k of the channel is
 * sample k / hw, pixel k % hw), walking (sample, pixel) without dividing. */
template <typename T, int GRAD>
__device__ __forceinline__ void bn_walk_nchw(const BnTerm<T, GRAD> &t, unsigned k, unsigned k1, unsigned step, int c, int ch, unsigned hw,
                                             float &a, float &b) {
    unsigned n = k / hw, px = k % hw;
    const unsigned step_n = step / hw, step_px = step % hw;
    for (; k < k1; k += step) {
        t.add(((size_t)n * c + ch) * hw + px, a, b);
        n += step_n;
        px += step_px;
        if (px >= hw) {
            px -= hw;
            n++;
        }
    }
}

/* NCHW, block (ch, s): part[ch][s] = the two sums over values [s m / S, (s+1) m / S) of channel ch
 * (m = n hw: every thread of the block busy whatever hw). */
template <typename T, int GRAD>
__global__ void k_bn_partial_nchw(const T *x, const T *dy, const T *y, const float *mean, const float *invstd, double *part, unsigned m, int c,
                                  unsigned hw) {
    const int ch = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    const unsigned k0 = (unsigned)((unsigned long long)m * s / S), k1 = (unsigned)((unsigned long long)m * (s + 1) / S);
    const BnTerm<T, GRAD> t = bn_term<T, GRAD>(x, dy, y, mean, invstd, ch, (size_t)ch * hw);
    float a = 0, b = 0;
    bn_walk_nchw(t, k0 + threadIdx.x, k1, blockDim.x, c, ch, hw, a, b);
    __shared__ double sh[2][GPU_THREADS];
    double v[2] = {a, b};
    gpu_block_reduce<2>(sh, v);
    if (threadIdx.x == 0) {
        part[((size_t)ch * S + s) * 2] = v[0];
        part[((size_t)ch * S + s) * 2 + 1] = v[1];
    }
}

/* NCHW with few values a channel (m = n hw below BN_WARP_MAX, one split): a warp per channel,
 * GPU_THREADS / 32 channels a block, each lane taking every 32nd value, the lanes' sums added in a
 * fixed tree of shuffles (deterministic): part[ch][0]. A block per channel would give its 256
 * threads fewer than 16 values each and spend itself on the reduction. (The same launches as the
 * block per channel: the counts of a step do not depend on its sizes.) */
#define BN_WARP_MAX ((unsigned)GPU_THREADS * 16)
template <typename T, int GRAD>
__global__ void k_bn_partial_nchw_warp(const T *x, const T *dy, const T *y, const float *mean, const float *invstd, double *part, unsigned m,
                                       int c, unsigned hw) {
    const int ch = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = (int)(threadIdx.x % 32);
    if (ch >= c) return; /* a whole warp */
    const BnTerm<T, GRAD> t = bn_term<T, GRAD>(x, dy, y, mean, invstd, ch, (size_t)ch * hw);
    float a = 0, b = 0;
    bn_walk_nchw(t, (unsigned)lane, m, 32, c, ch, hw, a, b);
    const double sa = gpu_warp_reduce(a), sb = gpu_warp_reduce(b);
    if (lane == 0) {
        part[(size_t)ch * 2] = sa;
        part[(size_t)ch * 2 + 1] = sb;
    }
}

/* NHWC, block (tile, s) of BN_TC x BN_TR threads: part[ch][s] = the two sums over pixels
 * [s m / S, (s+1) m / S) of the tile's channels; thread (tx, ty) takes channel tile BN_TC + tx at
 * pixels ty, ty + BN_TR, ...; then thread (tx, 0) adds the BN_TR rows in order. */
template <typename T, int GRAD>
__global__ void k_bn_partial_nhwc(const T *x, const T *dy, const T *y, const float *mean, const float *invstd, double *part, unsigned m, int c) {
    __shared__ double s1[BN_TR][BN_TC], s2[BN_TR][BN_TC];
    const int tx = (int)threadIdx.x % BN_TC, ty = (int)threadIdx.x / BN_TC, ch = (int)blockIdx.x * BN_TC + tx, s = blockIdx.y, S = gridDim.y;
    const unsigned r0 = (unsigned)((unsigned long long)m * s / S), r1 = (unsigned)((unsigned long long)m * (s + 1) / S);
    /* a thread past the last channel runs no pixel (bounds, not a branch around the barrier) */
    const int chc = ch < c ? ch : c - 1;
    const unsigned rend = ch < c ? r1 : r0;
    const BnTerm<T, GRAD> t = bn_term<T, GRAD>(x, dy, y, mean, invstd, chc, (size_t)chc);
    float a = 0, b = 0;
    for (unsigned r = r0 + ty; r < rend; r += BN_TR) t.add((size_t)r * c + chc, a, b);
    s1[ty][tx] = a;
    s2[ty][tx] = b;
    __syncthreads();
    if (ty == 0 && ch < c) {
        double sa = 0, sb = 0;
        for (int k = 0; k < BN_TR; k++) {
            sa += s1[k][tx];
            sb += s2[k][tx];
        }
        part[((size_t)ch * S + s) * 2] = sa;
        part[((size_t)ch * S + s) * 2 + 1] = sb;
    }
}

/* NHWC vector path, block (tile, s): part[ch][s] = the two sums over pixels [s m / S, (s+1) m / S)
 * of the tile's gb V channels. Thread (tx, ty) = (t % gb, t / gb) reads the 16-byte vector tx of
 * the tile at pixels ty, ty + R, ... (R = GPU_THREADS / gb; a warp reads whole pixels' channels,
 * 512 contiguous bytes), each of its V channels summed in fp32 as BnTerm does; then the block's
 * R rows of each channel are added in order, in double, by one thread each. */
template <typename T, int GRAD>
__global__ void k_bn_partial_nhwc_vec(const T *x, const T *dy, const T *y, const float *mean, const float *invstd, double *part, unsigned m,
                                      int c, int gb) {
    constexpr int V = 16 / sizeof(T);
    __shared__ float sh[2 * GPU_THREADS * V]; /* [R][2][gb V] */
    const int G = c / V, R = GPU_THREADS / gb, CT = gb * V;
    const int tx = (int)threadIdx.x % gb, ty = (int)threadIdx.x / gb, gv = (int)blockIdx.x * gb + tx, s = blockIdx.y, S = gridDim.y;
    const bool live = ty < R && gv < G;
    const unsigned r0 = (unsigned)((unsigned long long)m * s / S), r1 = (unsigned)((unsigned long long)m * (s + 1) / S);
    float a[V], b[V], x0[V], is[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int ch = live ? gv * V + k : 0;
        x0[k] = GRAD ? mean[ch] : to_f(x[ch]);
        is[k] = GRAD ? invstd[ch] : 0.0f;
        a[k] = b[k] = 0.0f;
    }
    for (unsigned r = r0 + (unsigned)ty; live && r < r1; r += (unsigned)R) {
        const size_t v = (size_t)r * (size_t)G + (size_t)gv;
        alignas(16) T xa[V], da[V], ya[V];
        gpu_load16(xa, x, v);
        if (GRAD) {
            gpu_load16(da, dy, v);
            if (y) gpu_load16(ya, y, v);
        }
#pragma unroll
        for (int k = 0; k < V; k++) {
            if (GRAD) {
                const float d = bn_relu_grad(to_f(da[k]), y ? to_f(ya[k]) : 0.0f, y != NULL);
                a[k] += d;
                b[k] += d * ((to_f(xa[k]) - x0[k]) * is[k]);
            } else {
                const float d = to_f(xa[k]) - x0[k];
                a[k] += d;
                b[k] += d * d;
            }
        }
    }
    if (ty < R)
#pragma unroll
        for (int k = 0; k < V; k++) {
            sh[(2 * ty) * CT + tx * V + k] = a[k];
            sh[(2 * ty + 1) * CT + tx * V + k] = b[k];
        }
    __syncthreads();
    for (int j = (int)threadIdx.x; j < 2 * CT; j += GPU_THREADS) {
        const int which = j / CT, cl = j % CT, ch = (int)blockIdx.x * CT + cl;
        if (ch >= c) continue;
        double sum = 0;
        for (int r = 0; r < R; r++) sum += (double)sh[(2 * r + which) * CT + cl];
        part[((size_t)ch * S + s) * 2 + which] = sum;
    }
}

static bool bn_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The partial sums of every channel into part[c][S][2] (statistics, or with GRAD the gradients') */
template <typename T, int GRAD>
static void bn_partial(GpuNet *g, const T *x, const T *dy, const T *y, const float *mean, const float *invstd, double *part, int n, int c,
                       size_t hw, int S) {
    const unsigned m = (unsigned)((size_t)n * hw);
    if (bn_vec_ok(c, sizeof(T), g->nhwc) && bn_aligned(x) && (!dy || bn_aligned(dy)) && (!y || bn_aligned(y))) {
        const int gb = bn_vec_gb(c, sizeof(T)), G = c / (int)(16 / sizeof(T));
        LAUNCH((k_bn_partial_nhwc_vec<T, GRAD>), dim3((unsigned)((G + gb - 1) / gb), (unsigned)S), GPU_THREADS, 0, g->s, x, dy, y, mean,
               invstd, part, m, c, gb);
    } else if (g->nhwc)
        LAUNCH((k_bn_partial_nhwc<T, GRAD>), dim3((unsigned)((c + BN_TC - 1) / BN_TC), (unsigned)S), GPU_THREADS, 0, g->s, x, dy, y, mean,
               invstd, part, m, c);
    else if (S == 1 && m < BN_WARP_MAX)
        LAUNCH((k_bn_partial_nchw_warp<T, GRAD>), (unsigned)(((size_t)c * 32 + GPU_THREADS - 1) / GPU_THREADS), GPU_THREADS, 0, g->s, x, dy, y,
               mean, invstd, part, m, c, (unsigned)hw);
    else
        LAUNCH((k_bn_partial_nchw<T, GRAD>), dim3((unsigned)c, (unsigned)S), GPU_THREADS, 0, g->s, x, dy, y, mean, invstd, part, m, c,
               (unsigned)hw);
}

/* The channel's S partial pairs added: with S above BN_FINAL_SERIAL a warp per channel, lane l
 * taking s = l, l + 32, ... (a warp reads 32 consecutive pairs), then the lanes' sums added in a
 * fixed tree (deterministic), the channel's two sums in lane 0 (a thread per channel would wait
 * for S dependent adds in turn); with fewer a thread per channel, adding them in order (a warp's
 * ten shuffles would cost more than the adds). */
#define BN_FINAL_SERIAL 32
#define BN_FINAL_BLOCKS(c, S) \
    ((unsigned)(((size_t)(c) * ((S) > BN_FINAL_SERIAL ? 32 : 1) + GPU_THREADS - 1) / GPU_THREADS))
__device__ __forceinline__ int bn_final_sums(const double *part, int S, int c, double *sa, double *sb) {
    double a = 0, b = 0;
    if (S <= BN_FINAL_SERIAL) {
        const int ch = (int)(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
        if (ch >= c) return -1;
        for (int s = 0; s < S; s++) {
            a += part[((size_t)ch * S + s) * 2];
            b += part[((size_t)ch * S + s) * 2 + 1];
        }
        *sa = a;
        *sb = b;
        return ch;
    }
    const int ch = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = (int)(threadIdx.x % 32);
    if (ch < c)
        for (int s = lane; s < S; s += 32) {
            a += part[((size_t)ch * S + s) * 2];
            b += part[((size_t)ch * S + s) * 2 + 1];
        }
    *sa = gpu_warp_reduce(a);
    *sb = gpu_warp_reduce(b);
    return lane == 0 && ch < c ? ch : -1;
}

/* the mean, 1 / sqrt(biased variance + eps), and the running averages with the unbiased variance */
template <typename T>
__global__ void k_bn_stats_final(const T *x, const double *part, int S, int c, size_t hw, int nhwc, double m, float factor, float *mean,
                                 float *invstd, float *run_mean, float *run_var) {
    double sa, sb;
    const int ch = bn_final_sums(part, S, c, &sa, &sb);
    if (ch < 0) return;
    const double x0 = to_f(x[bn_at(0, ch, c, hw, nhwc)]), d = sa / m, var = fmax(sb / m - d * d, 0.0), mu = x0 + d;
    mean[ch] = (float)mu;
    invstd[ch] = (float)(1.0 / sqrt(var + (double)BN_EPSILON));
    run_mean[ch] = (1.0f - factor) * run_mean[ch] + factor * (float)mu;
    run_var[ch] = (1.0f - factor) * run_var[ch] + factor * (float)(m > 1 ? var * m / (m - 1) : var);
}

/* y = gamma (x - mean) invstd + beta; invstd NULL: 1 / sqrt(var + eps) from var (inference).
 * Fused (fuse.cu): + z (the residual, where z is not NULL), then max(0, .) where relu. */
template <typename T>
__device__ __forceinline__ float bn_out(float x, float mu, float is, float ga, float be, const T *z, int relu) {
    float v = ga * ((x - mu) * is) + be;
    if (z) v = to_f(from_f<T>(v)) + to_f(*z); /* the batch norm's output rounded, as the add would read it */
    return relu && !(v > 0) ? 0.0f : v;
}
/* bn_out with channel ch's statistics and parameters */
template <typename T>
__device__ __forceinline__ float bn_value(float x, int ch, const float *mean, const float *invstd, const float *var, const float *gamma,
                                          const float *beta, const T *z, size_t i, int relu) {
    const float is = invstd ? invstd[ch] : rsqrtf(var[ch] + BN_EPSILON);
    return bn_out<T>(x, mean[ch], is, gamma[ch], beta[ch], z ? &z[i] : (const T *)NULL, relu);
}

/* 16-byte vectors of x, y (and z) where they allow (gpunet_internal.h), the channel walked
 * along each vector; the rest one by one */
template <typename T>
__global__ void k_bn_apply(const T *x, T *y, const float *mean, const float *invstd, const float *var, const float *gamma, const float *beta,
                           size_t total, int c, size_t hw, int nhwc, const T *z, int relu) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const size_t nv = gpu_vec_split<T>(total, gpu_aligned16(x) && gpu_aligned16(y) && (!z || gpu_aligned16(z)));
    for (size_t v = t0; v < nv / V; v += stride) {
        alignas(16) T a[V], zv[V];
        gpu_load16(a, x, v);
        if (z) gpu_load16(zv, z, v);
        GpuChanWalk w(v * V, c, hw, nhwc);
#pragma unroll
        for (int k = 0; k < V; k++, w.next())
            a[k] = from_f<T>(bn_value<T>(to_f(a[k]), w.ch, mean, invstd, var, gamma, beta, z ? zv : (const T *)NULL, (size_t)k, relu));
        gpu_store16(y, v, a);
    }
    for (size_t i = nv + t0; i < total; i += stride)
        y[i] = from_f<T>(bn_value<T>(to_f(x[i]), gpu_chan(i, c, hw, nhwc), mean, invstd, var, gamma, beta, z, i, relu));
}

/* dbeta += sum dy, dgamma += sum dy xhat (bn_final_sums); means[ch] = {sum dy, sum dy xhat} / m, which
 * every element of the input gradient takes (divided once here, not there) */
__global__ void k_bn_grad_final(const double *part, int S, int c, double m, double *means, float *dgamma, float *dbeta) {
    double sa, sb;
    const int ch = bn_final_sums(part, S, c, &sa, &sb);
    if (ch < 0) return;
    means[2 * ch] = sa / m;
    means[2 * ch + 1] = sb / m;
    dbeta[ch] += (float)sa;
    dgamma[ch] += (float)sb;
}

/* dx (+)= gamma invstd (dy - (mean dy + xhat mean dy xhat)) (adds if acc; dx NULL: none), with
 * one channel's mean, invstd, gamma and the two means of bn_grad_final. Fused: dy through the ReLU
 * (relu: yv its output), and that gradient also into the residual's, dz (adds if acc_z): the one
 * pass that yields both branches' gradients, no copy of its own. */
template <typename T>
__device__ __forceinline__ void bn_grad_out(float x, float dyv, float yv, int relu, float mu, float is, float ga, double ma, double mb, T *dxv,
                                            T *dzv, int acc, int acc_z) {
    const float d = bn_relu_grad(dyv, yv, relu);
    if (dzv) *dzv = from_f<T>(acc_z ? to_f(*dzv) + d : d);
    if (!dxv) return;
    const float xhat = (x - mu) * is;
    const float v = ga * is * (d - (float)(ma + (double)xhat * mb));
    *dxv = from_f<T>(acc ? to_f(*dxv) + v : v);
}
/* bn_grad_out with channel ch's */
template <typename T>
__device__ __forceinline__ void bn_grad_value(float x, float dyv, float yv, int ch, T *dxv, T *dzv, const float *mean, const float *invstd,
                                              const float *gamma, const double *means, int relu, int acc, int acc_z) {
    bn_grad_out<T>(x, dyv, yv, relu, mean[ch], invstd[ch], gamma[ch], means[2 * ch], means[2 * ch + 1], dxv, dzv, acc, acc_z);
}

/* The input gradient's operands at 16-byte vector v: x, dy, the fused ReLU's output y, and dx and
 * dz where the pass adds onto them; then its results back. */
template <typename T> struct BnGradVec {
    static constexpr int V = 16 / sizeof(T);
    alignas(16) T x[V], dy[V], y[V], dx[V], dz[V];
    __device__ void load(size_t v, const T *x_, const T *dy_, const T *y_, const T *dx_, const T *dz_, int acc, int acc_z) {
        gpu_load16(x, x_, v);
        gpu_load16(dy, dy_, v);
        if (y_) gpu_load16(y, y_, v);
        if (dx_ && acc) gpu_load16(dx, dx_, v);
        if (dz_ && acc_z) gpu_load16(dz, dz_, v);
    }
    __device__ void store(size_t v, T *dx_, T *dz_) const {
        if (dx_) gpu_store16(dx_, v, dx);
        if (dz_) gpu_store16(dz_, v, dz);
    }
};

/* 16-byte vectors of every operand where they allow (gpunet_internal.h), the channel walked along
 * each vector; the rest one by one */
template <typename T>
__global__ void k_bn_grad_input(const T *x, const T *dy, const T *y, T *dx, T *dz, const float *mean, const float *invstd, const float *gamma,
                                const double *means, size_t total, int c, size_t hw, int nhwc, int acc, int acc_z) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const int relu = y != NULL;
    const size_t nv = gpu_vec_split<T>(total, gpu_aligned16(x) && gpu_aligned16(dy) && (!y || gpu_aligned16(y)) && (!dx || gpu_aligned16(dx)) &&
                                                  (!dz || gpu_aligned16(dz)));
    for (size_t v = t0; v < nv / V; v += stride) {
        BnGradVec<T> a;
        a.load(v, x, dy, y, dx, dz, acc, acc_z);
        GpuChanWalk w(v * V, c, hw, nhwc);
#pragma unroll
        for (int k = 0; k < V; k++, w.next())
            bn_grad_value<T>(to_f(a.x[k]), to_f(a.dy[k]), y ? to_f(a.y[k]) : 0.0f, w.ch, dx ? &a.dx[k] : (T *)NULL, dz ? &a.dz[k] : (T *)NULL,
                             mean, invstd, gamma, means, relu, acc, acc_z);
        a.store(v, dx, dz);
    }
    for (size_t i = nv + t0; i < total; i += stride)
        bn_grad_value<T>(to_f(x[i]), to_f(dy[i]), y ? to_f(y[i]) : 0.0f, gpu_chan(i, c, hw, nhwc), dx ? &dx[i] : (T *)NULL, dz ? &dz[i] : (T *)NULL,
                         mean, invstd, gamma, means, relu, acc, acc_z);
}

/* The NHWC vector path's elementwise kernels: the launch makes the grid's stride a multiple of a
 * pixel's c / V vectors (bn_vec_blocks), so that each thread meets the same V channels at every
 * step of its loop and holds their statistics and parameters in registers: no channel index per
 * element, no loads of them (the general kernels above walk the channel of every element and
 * gather its mean, scale and sums). The grid gives each thread about 16 vectors, so that its 4 V
 * (8 in 16-bit) loads of the channels' values are few against its 16 vectors' (a grid of one
 * vector a thread would load 4 values per element, as many as the general kernels gathered).
 * The same arithmetic (bn_out, bn_grad_out) as the general kernels. */
static int gcd_int(int a, int b) {
    while (b) {
        const int t = a % b;
        a = b;
        b = t;
    }
    return a;
}
#define BN_VEC_PER_THREAD 16
static unsigned bn_vec_blocks(size_t nvec, int G) {
    const size_t q = (size_t)(G / gcd_int(G, GPU_THREADS)); /* blocks * GPU_THREADS % G == 0 */
    size_t b = (nvec + (size_t)GPU_THREADS * BN_VEC_PER_THREAD - 1) / ((size_t)GPU_THREADS * BN_VEC_PER_THREAD);
    if (b > 65535 * 8) b = 65535 * 8;
    if (b < 1) b = 1;
    return (unsigned)((b + q - 1) / q * q);
}

template <typename T>
__global__ void k_bn_apply_nhwc(const T *x, T *y, const float *mean, const float *invstd, const float *var, const float *gamma, const float *beta,
                                size_t nvec, int G, const T *z, int relu) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const int ch0 = (int)(t0 % (size_t)G) * V;
    float mu[V], is[V], ga[V], be[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        mu[k] = mean[ch0 + k];
        is[k] = invstd ? invstd[ch0 + k] : rsqrtf(var[ch0 + k] + BN_EPSILON);
        ga[k] = gamma[ch0 + k];
        be[k] = beta[ch0 + k];
    }
    for (size_t v = t0; v < nvec; v += stride) {
        alignas(16) T a[V], zv[V];
        gpu_load16(a, x, v);
        if (z) gpu_load16(zv, z, v);
#pragma unroll
        for (int k = 0; k < V; k++) a[k] = from_f<T>(bn_out<T>(to_f(a[k]), mu[k], is[k], ga[k], be[k], z ? &zv[k] : (const T *)NULL, relu));
        gpu_store16(y, v, a);
    }
}

template <typename T>
__global__ void k_bn_grad_input_nhwc(const T *x, const T *dy, const T *y, T *dx, T *dz, const float *mean, const float *invstd, const float *gamma,
                                     const double *means, size_t nvec, int G, int acc, int acc_z) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const int ch0 = (int)(t0 % (size_t)G) * V;
    float mu[V], is[V], ga[V];
    double ma[V], mb[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        mu[k] = mean[ch0 + k];
        is[k] = invstd[ch0 + k];
        ga[k] = gamma[ch0 + k];
        ma[k] = means[2 * (ch0 + k)];
        mb[k] = means[2 * (ch0 + k) + 1];
    }
    for (size_t v = t0; v < nvec; v += stride) {
        BnGradVec<T> a;
        a.load(v, x, dy, y, dx, dz, acc, acc_z);
#pragma unroll
        for (int k = 0; k < V; k++)
            bn_grad_out<T>(to_f(a.x[k]), to_f(a.dy[k]), y ? to_f(a.y[k]) : 0.0f, y != NULL, mu[k], is[k], ga[k], ma[k], mb[k],
                           dx ? &a.dx[k] : (T *)NULL, dz ? &a.dz[k] : (T *)NULL, acc, acc_z);
        a.store(v, dx, dz);
    }
}

/* What fuse.cu fused into batch norm li: the node it writes, the residual node (NULL: none), the
 * ReLU; and their gradients: the one it reads, the residual's it writes (NULL: none) and whether
 * it adds there. Unfused: its own output and gradient. */
struct BnIo {
    void *y;
    const void *z;
    int relu;
    const void *dy;
    void *dz;
    int acc_z;
};
static BnIo bn_io(const GpuNet *g, const Layer *l, int li) {
    BnIo io = {g->x[l->out], NULL, 0, g->dx[l->out], NULL, 0};
    const GpuFused *f = g->fused ? &g->fused[li] : NULL;
    if (!f || f->out < 0) return io;
    io.y = g->x[f->out];
    io.dy = g->dx[f->out];
    io.relu = f->relu;
    if (f->z >= 0) {
        io.z = g->x[f->z];
        io.dz = g->dx[f->z];
        io.acc_z = gpu_acc(g, f->add_li, f->add_k);
    }
    return io;
}

/* Batch norm of our own (bf16, and every fused layer): statistics, then the normalisation (with
 * the fused residual and ReLU); in inference the running statistics. */
template <typename T> static void bn_forward_own(GpuNet *g, const Layer *l, BnGpu *p, const float *gamma, const float *beta, float *mm,
                                                 float *mv) {
    const Bn *b = (const Bn *)l->priv;
    const Shape s = g->net->node[l->in[0]].shape;
    const size_t total = shape_count(s), hw = (size_t)b->hw;
    const T *x = (const T *)g->x[l->in[0]];
    const BnIo io = bn_io(g, l, (int)(l - g->net->layer));
    if (p->training) {
        bn_partial<T, 0>(g, x, NULL, NULL, NULL, NULL, p->part, s.n, b->c, hw, p->splits);
        LAUNCH(k_bn_stats_final<T>, BN_FINAL_BLOCKS(b->c, p->splits), GPU_THREADS, 0, g->s, x, p->part, p->splits, b->c, hw, g->nhwc,
               (double)s.n * (double)hw, 1.0f - BN_DECAY, p->save_mean, p->save_invstd, mm, mv);
    }
    /* training: the batch's statistics; inference: the running ones */
    const float *mu = p->training ? p->save_mean : mm, *is = p->training ? p->save_invstd : NULL, *var = p->training ? NULL : mv;
    if (bn_vec_ok(b->c, sizeof(T), g->nhwc) && bn_aligned(x) && bn_aligned(io.y) && (!io.z || bn_aligned(io.z))) {
        const int G = b->c / (int)(16 / sizeof(T));
        const size_t nvec = total / (16 / sizeof(T));
        LAUNCH(k_bn_apply_nhwc<T>, bn_vec_blocks(nvec, G), GPU_THREADS, 0, g->s, x, (T *)io.y, mu, is, var, gamma, beta, nvec, G,
               (const T *)io.z, io.relu);
    } else {
        LAUNCH(k_bn_apply<T>, gpu_vec_blocks<T>(total), GPU_THREADS, 0, g->s, x, (T *)io.y, mu, is, var, gamma, beta, total, b->c, hw, g->nhwc,
               (const T *)io.z, io.relu);
    }
}

static void bn_forward(GpuNet *g, Layer *l, int li) {
    BnGpu *p = (BnGpu *)g->lp[li];
    Net *net = g->net;
    const float one = 1.0f, zero = 0.0f;
    const float *gamma = gpu_param(g, l->param0), *beta = gpu_param(g, l->param0 + 1);
    float *mm = g->state + net->buf[l->buf0].off, *mv = g->state + net->buf[l->buf0 + 1].off;
    p->training = net->training != 0;
    if (p->own) {
        GPU_DISPATCH(g, T, bn_forward_own<T>(g, l, p, gamma, beta, mm, mv));
        return;
    }
    if (p->training)
        CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, g->x[l->in[0]], p->x,
                                                           g->x[l->out], p->p, gamma, beta, 1.0 - (double)BN_DECAY, mm, mv,
                                                           (double)BN_EPSILON, p->save_mean, p->save_invstd));
    else
        CUDNN_CHECK(cudnnBatchNormalizationForwardInference(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, g->x[l->in[0]], p->x,
                                                            g->x[l->out], p->p, gamma, beta, mm, mv, (double)BN_EPSILON));
}

/* inference-mode backward: dx (+)= gamma / sqrt(var + eps) dy (adds if acc); dgamma += sum dy xhat;
 * dbeta += sum dy (one block per channel) */
template <typename T>
__global__ void k_bn_backward_fixed(const T *x, const T *dy, T *dx, const float *gamma, const float *mean, const float *var,
                                    float *dgamma, float *dbeta, int n, int c, size_t hw, int nhwc, int acc, const T *y, T *dz, int acc_z) {
    const int ch = blockIdx.x;
    const float is = rsqrtf(var[ch] + BN_EPSILON), a = gamma[ch] * is, mu = mean[ch];
    __shared__ double sh[2][GPU_THREADS];
    double sdy = 0, sdyx = 0;
    for (size_t k = threadIdx.x; k < (size_t)n * hw; k += blockDim.x) {
        size_t i = bn_at(k, ch, c, hw, nhwc);
        float d = bn_dy(dy, y, i);
        if (dz) dz[i] = from_f<T>(acc_z ? to_f(dz[i]) + d : d);
        sdy += d;
        sdyx += d * ((to_f(x[i]) - mu) * is);
        if (dx) dx[i] = from_f<T>(acc ? to_f(dx[i]) + a * d : a * d);
    }
    double v[2] = {sdy, sdyx};
    gpu_block_reduce<2>(sh, v);
    if (threadIdx.x == 0) {
        dgamma[ch] += (float)v[1];
        dbeta[ch] += (float)v[0];
    }
}

/* Backward of our own: the sums of dy and dy xhat per channel, then the input gradient (and
 * the residual's, fused) */
template <typename T> static void bn_backward_own(GpuNet *g, const Layer *l, int li, BnGpu *p, const float *gamma, float *dgamma, float *dbeta) {
    const Bn *b = (const Bn *)l->priv;
    const Shape s = g->net->node[l->in[0]].shape;
    const size_t total = shape_count(s), hw = (size_t)b->hw;
    const T *x = (const T *)g->x[l->in[0]];
    const BnIo io = bn_io(g, l, li);
    const T *dy = (const T *)io.dy, *y = io.relu ? (const T *)io.y : NULL;
    T *dx = (T *)g->dx[l->in[0]];
    double *means = p->part + (size_t)b->c * (size_t)p->splits * 2;
    bn_partial<T, 1>(g, x, dy, y, p->save_mean, p->save_invstd, p->part, s.n, b->c, hw, p->splits);
    LAUNCH(k_bn_grad_final, BN_FINAL_BLOCKS(b->c, p->splits), GPU_THREADS, 0, g->s, p->part, p->splits, b->c, (double)s.n * (double)hw,
           means, dgamma, dbeta);
    if (!dx && !io.dz) return;
    const int acc = gpu_acc(g, li, 0);
    if (bn_vec_ok(b->c, sizeof(T), g->nhwc) && bn_aligned(x) && bn_aligned(dy) && (!y || bn_aligned(y)) && (!dx || bn_aligned(dx)) &&
        (!io.dz || bn_aligned(io.dz))) {
        const int G = b->c / (int)(16 / sizeof(T));
        const size_t nvec = total / (16 / sizeof(T));
        LAUNCH(k_bn_grad_input_nhwc<T>, bn_vec_blocks(nvec, G), GPU_THREADS, 0, g->s, x, dy, y, dx, (T *)io.dz, p->save_mean, p->save_invstd,
               gamma, means, nvec, G, acc, io.acc_z);
    } else {
        LAUNCH(k_bn_grad_input<T>, gpu_vec_blocks<T>(total), GPU_THREADS, 0, g->s, x, dy, y, dx, (T *)io.dz, p->save_mean, p->save_invstd, gamma,
               means, total, b->c, hw, g->nhwc, acc, io.acc_z);
    }
}

static void bn_backward(GpuNet *g, Layer *l, int li) {
    BnGpu *p = (BnGpu *)g->lp[li];
    const Bn *b = (const Bn *)l->priv;
    Net *net = g->net;
    const float one = 1.0f;
    const float *gamma = gpu_param(g, l->param0);
    float *dgamma = gpu_grad(g, l->param0), *dbeta = gpu_grad(g, l->param0 + 1);
    void *dx = g->dx[l->in[0]];
    if (!p->training) {
        Shape s = net->node[l->in[0]].shape;
        const BnIo io = bn_io(g, l, li);
        GPU_DISPATCH(g, T,
                     LAUNCH(k_bn_backward_fixed<T>, b->c, GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (const T *)io.dy, (T *)dx, gamma,
                            g->state + net->buf[l->buf0].off, g->state + net->buf[l->buf0 + 1].off, dgamma, dbeta, s.n, b->c, b->hw, g->nhwc,
                            gpu_acc(g, li, 0), io.relu ? (const T *)io.y : NULL, (T *)io.dz, io.acc_z));
        return;
    }
    if (p->own) {
        GPU_DISPATCH(g, T, bn_backward_own<T>(g, l, li, p, gamma, dgamma, dbeta));
        return;
    }
    float beta_dx = gpu_acc(g, li, 0) ? 1.0f : 0.0f;
    if (!dx) { /* cuDNN always writes dx */
        dx = p->discard;
        beta_dx = 0.0f;
    }
    CUDNN_CHECK(cudnnBatchNormalizationBackward(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &beta_dx, &one, &one, p->x, g->x[l->in[0]], p->x,
                                                g->dx[l->out], p->x, dx, p->p, gamma, dgamma, dbeta, (double)BN_EPSILON, p->save_mean,
                                                p->save_invstd));
}

static void bn_destroy(GpuNet *g, Layer *l, int li) {
    (void)l;
    BnGpu *p = (BnGpu *)g->lp[li];
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->p) cudnnDestroyTensorDescriptor(p->p);
}

const GpuLayerImpl gpu_bn_impl = {"bn", bn_plan, bn_bind, bn_forward, bn_backward, bn_destroy, NULL};
