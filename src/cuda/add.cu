/* add.cu: the GPU half of the residual sum and the weighted sum ca * a + cb * b (src/layers/add.c).
 * The plain sum (ca = cb = 1) keeps kernels without multiplications, bit-exact with the CPU's. */
#include "gpunet_internal.h"

/* y = a + b: 16-byte vectors where a, b and y allow (gpunet_internal.h), the rest one by one */
template <typename T> __global__ void k_add2(const T *a, const T *b, T *y, size_t n) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const size_t nv = gpu_vec_split<T>(n, gpu_aligned16(a) && gpu_aligned16(b) && gpu_aligned16(y));
    for (size_t v = t0; v < nv / V; v += stride) {
        alignas(16) T av[V], bv[V];
        gpu_load16(av, a, v);
        gpu_load16(bv, b, v);
#pragma unroll
        for (int k = 0; k < V; k++) av[k] = from_f<T>(to_f(av[k]) + to_f(bv[k]));
        gpu_store16(y, v, av);
    }
    for (size_t i = nv + t0; i < n; i += stride) y[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

template <typename T> __global__ void k_add2_scaled(const T *a, const T *b, T *y, size_t n, float ca, float cb) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from_f<T>(ca * to_f(a[i]) + cb * to_f(b[i]));
}

/* dx = c dy, or dx += c dy when acc */
template <typename T> __global__ void k_acc_scaled(T *dx, const T *dy, size_t n, float c, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = c * to_f(dy[i]);
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + v : v);
    }
}

/* dx = dy, or dx += dy when acc (vectors as k_add2) */
template <typename T> __global__ void k_acc(T *dx, const T *dy, size_t n, int acc) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const size_t nv = gpu_vec_split<T>(n, gpu_aligned16(dx) && gpu_aligned16(dy));
    for (size_t v = t0; v < nv / V; v += stride) {
        alignas(16) T d[V], o[V];
        gpu_load16(d, dy, v);
        if (acc) {
            gpu_load16(o, dx, v);
#pragma unroll
            for (int k = 0; k < V; k++) d[k] = from_f<T>(to_f(o[k]) + to_f(d[k]));
        }
        gpu_store16(dx, v, d);
    }
    for (size_t i = nv + t0; i < n; i += stride) dx[i] = acc ? from_f<T>(to_f(dx[i]) + to_f(dy[i])) : dy[i];
}

static int plain(const AddPriv *p) { return p->ca == 1.0f && p->cb == 1.0f; }

static void add_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    const AddPriv *p = (const AddPriv *)l->priv;
    size_t n = shape_count(g->net->node[l->out].shape);
    const void *a = g->x[l->in[0]], *b = g->x[l->in[1]];
    if (plain(p))
        GPU_DISPATCH(g, T, LAUNCH(k_add2<T>, gpu_vec_blocks<T>(n), GPU_THREADS, 0, g->s, (const T *)a, (const T *)b, (T *)g->x[l->out], n));
    else
        GPU_DISPATCH(g, T,
                     LAUNCH(k_add2_scaled<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (const T *)a, (const T *)b, (T *)g->x[l->out], n, p->ca, p->cb));
}

static void add_backward(GpuNet *g, Layer *l, int li) {
    const AddPriv *p = (const AddPriv *)l->priv;
    size_t n = shape_count(g->net->node[l->out].shape);
    for (int k = 0; k < 2; k++) {
        void *dx = g->dx[l->in[k]];
        const void *dy = g->dx[l->out];
        if (!dx) continue;
        if (plain(p))
            GPU_DISPATCH(g, T, LAUNCH(k_acc<T>, gpu_vec_blocks<T>(n), GPU_THREADS, 0, g->s, (T *)dx, (const T *)dy, n, gpu_acc(g, li, k)));
        else
            GPU_DISPATCH(g, T,
                         LAUNCH(k_acc_scaled<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (T *)dx, (const T *)dy, n, k ? p->cb : p->ca, gpu_acc(g, li, k)));
    }
}

const GpuLayerImpl gpu_add_impl = {"add", NULL, NULL, add_forward, add_backward, NULL, NULL};
