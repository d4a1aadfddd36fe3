/* bias.cu: a per-channel bias over NCHW or NHWC activations, as the convolutions use it:
 *   forward   y[n][c][p] += b[c]
 *   backward  db[c] += sum over n, p of dy[n][c][p]
 * for every storage type (float, __half, __nv_bfloat16), with the bias and its gradient in the
 * fp32 master arenas, fp32 arithmetic and fp32 accumulation. cuDNN's cudnnAddTensor and
 * cudnnConvolutionBackwardBias are not documented for bf16 data, and these two kernels serve
 * every precision the same way (the fc layer's bias works alike).
 *
 * Both move 16 bytes per load and store (4 floats or 8 16-bit values). Forward runs over the
 * tensor as one flat array and tracks the channel element by element. Backward is deterministic:
 * blocks (s, c) sum channel c over their share of the samples into partial[c][s] (fp32), then
 * one thread per channel adds its partials in order into db. Blocks are (channel, split): any
 * number of channels (the grid's x), at most 256 splits (its y). In NHWC, channels that fill
 * 16-byte vectors are summed a vector a thread (k_bias_partial_nhwc_vec), others a channel a
 * thread. */
#include "gpunet_internal.h"

/* Partial sums per channel: enough blocks to fill the GPU (about 1024 in all), at most one per
 * sample, and at least 16 elements per thread in each (fewer would spend the block on its
 * reduction). */
static int bias_splits(int n, int c, size_t hw) {
    size_t s = (1024 + (size_t)c - 1) / (size_t)c, work = (size_t)n * hw / ((size_t)GPU_THREADS * 16);
    if (s > work) s = work;
    if (s > (size_t)n) s = (size_t)n;
    if (s > 256) s = 256;
    return s < 1 ? 1 : (int)s;
}

/* NHWC: splits of the n * hw rows (pixels), each of at least 64 rows, at most 256 */
static int bias_splits_nhwc(size_t rows) {
    size_t s = rows / 64;
    return s < 1 ? 1 : s > 256 ? 256 : (int)s;
}

size_t gpu_bias_scratch(int n, int c, size_t hw) {
    int s = bias_splits(n, c, hw), t = bias_splits_nhwc((size_t)n * hw);
    return (size_t)c * (size_t)(s > t ? s : t) * sizeof(float);
}

/* y += b over [total] elements, channel (i / hw) % c; y 16-byte aligned. The index arithmetic in I:
 * 32-bit below 2^31 elements (a 64-bit division is a few dozen instructions a vector, as many as
 * the vector's memory time on a GPU of 4.8 TB/s), NHWC's hw == 1 without the division. */
template <typename T, typename I> __device__ void bias_forward_range(T *y, const float *b, I total, I c, I hw) {
    constexpr int V = 16 / sizeof(T);
    const I nvec = total / V, stride = (I)gridDim.x * blockDim.x;
    for (I v = blockIdx.x * (I)blockDim.x + threadIdx.x; v < nvec; v += stride) {
        I i = v * V, plane = hw == 1 ? i : i / hw, r = i - plane * hw;
        int ch = (int)(plane % c);
        alignas(16) T t[V];
        *reinterpret_cast<uint4 *>(t) = reinterpret_cast<const uint4 *>(y)[v];
#pragma unroll
        for (int k = 0; k < V; k++) {
            t[k] = from_f<T>(to_f(t[k]) + b[ch]);
            if (++r == hw) {
                r = 0;
                if (++ch == (int)c) ch = 0;
            }
        }
        reinterpret_cast<uint4 *>(y)[v] = *reinterpret_cast<const uint4 *>(t);
    }
    for (I i = nvec * V + blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += stride) y[i] = from_f<T>(to_f(y[i]) + b[(i / hw) % c]);
}
template <typename T> __global__ void k_bias_forward(T *y, const float *b, size_t total, int c, size_t hw) {
    if (total < GPU_NARROW)
        bias_forward_range<T, unsigned>(y, b, (unsigned)total, (unsigned)c, (unsigned)hw);
    else
        bias_forward_range<T, size_t>(y, b, total, (size_t)c, hw);
}

/* The block's sum of x[0, len) in fp32: unaligned head and tail one element at a time, the
 * 16-byte-aligned middle in vectors. Every thread of the block calls it; the result is the
 * thread's own share (reduced by the caller). */
template <typename T> __device__ float range_sum(const T *x, size_t len) {
    constexpr int V = 16 / sizeof(T);
    size_t head = ((16 - ((uintptr_t)x & 15)) & 15) / sizeof(T);
    if (head > len) head = len;
    const size_t nvec = (len - head) / V, tail = head + nvec * V;
    float s = 0;
    for (size_t i = threadIdx.x; i < head; i += blockDim.x) s += to_f(x[i]);
    const uint4 *xv = reinterpret_cast<const uint4 *>(x + head);
    for (size_t v = threadIdx.x; v < nvec; v += blockDim.x) {
        alignas(16) T t[V];
        *reinterpret_cast<uint4 *>(t) = xv[v];
#pragma unroll
        for (int k = 0; k < V; k++) s += to_f(t[k]);
    }
    for (size_t i = tail + threadIdx.x; i < len; i += blockDim.x) s += to_f(x[i]);
    return s;
}

/* block (ch, s): partial[ch][s] = sum of dy[i][ch][:] over samples i in [s n / S, (s+1) n / S).
 * Channels on the grid's x (up to 2^31 - 1; y would stop at 65,535), splits on y (at most 256);
 * GPU_THREADS threads per block. */
template <typename T> __global__ void k_bias_partial(const T *dy, float *partial, int n, int c, size_t hw) {
    const int ch = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    const int i0 = (int)((long long)s * n / S), i1 = (int)((long long)(s + 1) * n / S);
    float acc = 0;
    for (int i = i0; i < i1; i++) acc += range_sum(dy + ((size_t)i * c + ch) * hw, hw);
    /* block reduction: warps by shuffles, then the warps' sums */
    __shared__ float warp_sum[GPU_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0;
        for (int w = 0; w < GPU_THREADS / 32; w++) t += warp_sum[w];
        partial[(size_t)ch * S + s] = t;
    }
}

/* NHWC: block (x, s): thread t sums channel ch = x * GPU_THREADS + t over rows [s rows / S,
 * (s+1) rows / S) of dy [rows][c] (the threads of a warp read neighbouring channels) */
template <typename T> __global__ void k_bias_partial_nhwc(const T *dy, float *partial, size_t rows, int c) {
    const int ch = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y, S = gridDim.y;
    if (ch >= c) return;
    const size_t r0 = rows * s / S, r1 = rows * (s + 1) / S;
    float acc = 0;
    for (size_t r = r0; r < r1; r++) acc += to_f(dy[r * c + ch]);
    partial[(size_t)ch * S + s] = acc;
}

/* NHWC with channels in 16-byte vectors (c a multiple of V = 16 / sizeof(T), dy 16-byte aligned):
 * block (x, s) covers vector columns [x Gb, (x+1) Gb) of dy [rows][c / V] (Gb = min(c / V,
 * GPU_THREADS)) and rows [s rows / S, (s+1) rows / S); its threads are L = GPU_THREADS / Gb lanes
 * of Gb columns: thread (lane, col) sums rows lane, lane + L, ... of its share, V channels at a
 * time, so a warp reads whole rows' contiguous vectors (the scalar kernel above reads 2 or 4
 * bytes a thread, one thread a channel: 16 of 256 threads at work for 16 channels). The lanes'
 * sums are added in lane order (deterministic) into partial[ch][s]. */
template <typename T> __global__ void k_bias_partial_nhwc_vec(const T *dy, float *partial, size_t rows, int c, int Gb) {
    constexpr int V = 16 / sizeof(T);
    __shared__ float sh[GPU_THREADS * V];
    const int G = c / V, L = GPU_THREADS / Gb, t = threadIdx.x, lane = t / Gb, cl = t % Gb, col = blockIdx.x * Gb + cl;
    const int s = blockIdx.y, S = gridDim.y;
    const size_t r0 = rows * s / S, r1 = rows * (s + 1) / S;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = 0;
    if (lane < L && col < G)
        for (size_t r = r0 + lane; r < r1; r += L) {
            alignas(16) T v[V];
            gpu_load16(v, dy, r * G + col);
#pragma unroll
            for (int k = 0; k < V; k++) acc[k] += to_f(v[k]);
        }
#pragma unroll
    for (int k = 0; k < V; k++) sh[t * V + k] = acc[k];
    __syncthreads();
    if (lane == 0 && col < G)
        for (int k = 0; k < V; k++) {
            float sum = 0;
            for (int j = 0; j < L; j++) sum += sh[(j * Gb + cl) * V + k];
            partial[(size_t)(col * V + k) * S + s] = sum;
        }
}

/* db[ch] += sum over s of partial[ch][s], in order */
__global__ void k_bias_collect(const float *partial, float *db, int c, int S) {
    for (int ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c; ch += gridDim.x * blockDim.x) {
        float t = 0;
        for (int s = 0; s < S; s++) t += partial[(size_t)ch * S + s];
        db[ch] += t;
    }
}

void gpu_bias_forward(GpuNet *g, void *y, const float *b, int n, int c, size_t hw) {
    const size_t total = (size_t)n * c * hw;
    if (total == 0) return;
    if (g->nhwc) hw = 1; /* NHWC is NCHW's formula over [n hw][c][1]: channel i % c */
    GPU_DISPATCH(g, T, LAUNCH(k_bias_forward<T>, gpu_blocks(total / (16 / sizeof(T)) + 1), GPU_THREADS, 0, g->s, (T *)y, b, total, c, hw));
}

void gpu_bias_backward(GpuNet *g, const void *dy, float *db, int n, int c, size_t hw, float *partial) {
    if (n == 0 || c == 0) return;
    if (g->nhwc) {
        const size_t rows = (size_t)n * hw;
        const size_t V = 16 / g->esize;
        if ((size_t)c % V == 0 && ((uintptr_t)dy & 15) == 0 && (size_t)c / V < 0x80000000u / GPU_THREADS) {
            const int G = (int)((size_t)c / V), Gb = G < GPU_THREADS ? G : GPU_THREADS, L = GPU_THREADS / Gb;
            const unsigned gx = (unsigned)((G + Gb - 1) / Gb);
            /* about 1024 blocks in all, each thread at least 16 rows, within the scratch's splits */
            size_t S = (1024 + gx - 1) / gx, most = rows / ((size_t)L * 16);
            if (S > most) S = most;
            if (S > (size_t)bias_splits_nhwc(rows)) S = (size_t)bias_splits_nhwc(rows);
            if (S < 1) S = 1;
            GPU_DISPATCH(g, T,
                         LAUNCH(k_bias_partial_nhwc_vec<T>, dim3(gx, (unsigned)S), GPU_THREADS, 0, g->s, (const T *)dy, partial, rows, c, Gb));
            LAUNCH(k_bias_collect, (c + GPU_THREADS - 1) / GPU_THREADS, GPU_THREADS, 0, g->s, partial, db, c, (int)S);
            return;
        }
        const int S = bias_splits_nhwc(rows);
        GPU_DISPATCH(g, T,
                     LAUNCH(k_bias_partial_nhwc<T>, dim3((unsigned)((c + GPU_THREADS - 1) / GPU_THREADS), (unsigned)S), GPU_THREADS, 0, g->s,
                            (const T *)dy, partial, rows, c));
        LAUNCH(k_bias_collect, (c + GPU_THREADS - 1) / GPU_THREADS, GPU_THREADS, 0, g->s, partial, db, c, S);
        return;
    }
    const int S = bias_splits(n, c, hw); /* at most 256: within the grid's y limit */
    GPU_DISPATCH(g, T, LAUNCH(k_bias_partial<T>, dim3((unsigned)c, (unsigned)S), GPU_THREADS, 0, g->s, (const T *)dy, partial, n, c, hw));
    LAUNCH(k_bias_collect, (c + GPU_THREADS - 1) / GPU_THREADS, GPU_THREADS, 0, g->s, partial, db, c, S);
}
