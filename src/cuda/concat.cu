/* concat.cu: the GPU half of concat along channels (src/layers/concat.c): each input is one
 * strided copy into its channel range (of each sample in NCHW, of each pixel in NHWC); backward
 * copies (or adds) the range back. Where the ranges are whole 16-byte vectors (googlenet's and the
 * inception nets' channel counts, multiples of 8), a vector a thread (k_concat_vec), else an
 * element a thread. */
#include "gpunet_internal.h"

/* y[s][off + r] = x[s][r] for r < chw_in (forward); x[s][r] (+)= y[s][off + r] (backward: adds if
 * acc, else writes) */
template <typename T>
__global__ void k_concat(T *x, T *y, size_t total, size_t chw_in, size_t chw_out, size_t off, int backward, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t s = i / chw_in, r = i % chw_in, j = s * chw_out + off + r;
        if (backward)
            x[i] = acc ? from_f<T>(to_f(x[i]) + to_f(y[j])) : y[j];
        else
            y[j] = x[i];
    }
}

/* The same in 16-byte vectors: every count (total, chw_in, chw_out, off) in vectors of T, both
 * tensors 16-byte aligned, the row arithmetic in 32 bits (the caller checks that they fit). */
template <typename T>
__global__ void k_concat_vec(T *x, T *y, unsigned total, unsigned chw_in, unsigned chw_out, unsigned off, int backward, int acc) {
    constexpr int V = 16 / sizeof(T);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const unsigned s = i / chw_in, r = i - s * chw_in;
        const size_t j = (size_t)s * chw_out + off + r;
        alignas(16) T a[V];
        if (!backward) {
            gpu_load16(a, x, i);
            gpu_store16(y, j, a);
            continue;
        }
        gpu_load16(a, y, j);
        gpu_store16_acc(x, i, a, acc);
    }
}

static void concat_run(GpuNet *g, Layer *l, int li, int backward) {
    /* a row: a sample's [c][h][w] (NCHW) or a pixel's [c] (NHWC) */
    Shape so = g->net->node[l->out].shape;
    size_t chw_out = g->nhwc ? (size_t)so.c : shape_sample(so), off = 0;
    for (int k = 0; k < l->nin; k++) {
        Shape si = g->net->node[l->in[k]].shape;
        size_t chw_in = g->nhwc ? (size_t)si.c : shape_sample(si), total = shape_count(si);
        void *x = backward ? g->dx[l->in[k]] : g->x[l->in[k]];
        void *y = backward ? g->dx[l->out] : g->x[l->out];
        int acc = backward && gpu_acc(g, li, k);
        const size_t V = 16 / g->esize;
        if (x && chw_in % V == 0 && chw_out % V == 0 && off % V == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 15) == 0 &&
            shape_count(so) / V < 0x80000000u)
            GPU_DISPATCH(g, T,
                         LAUNCH(k_concat_vec<T>, gpu_blocks(total / V), GPU_THREADS, 0, g->s, (T *)x, (T *)y, (unsigned)(total / V),
                                (unsigned)(chw_in / V), (unsigned)(chw_out / V), (unsigned)(off / V), backward, acc));
        else if (x)
            GPU_DISPATCH(g, T, LAUNCH(k_concat<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (T *)x, (T *)y, total, chw_in, chw_out, off, backward, acc));
        off += chw_in;
    }
}

static void concat_forward(GpuNet *g, Layer *l, int li) { concat_run(g, l, li, 0); }

static void concat_backward(GpuNet *g, Layer *l, int li) { concat_run(g, l, li, 1); }

const GpuLayerImpl gpu_concat_impl = {"concat", NULL, NULL, concat_forward, concat_backward, NULL, NULL};
