/* add.cu: the GPU half of the residual sum (src/layers/add.c). */
#include "gpunet_internal.h"

template <typename T> __global__ void k_add2(const T *a, const T *b, T *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

/* dx = dy, or dx += dy when acc */
template <typename T> __global__ void k_acc(T *dx, const T *dy, size_t n, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = acc ? from_f<T>(to_f(dx[i]) + to_f(dy[i])) : dy[i];
}

static void add_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    size_t n = shape_count(g->net->node[l->out].shape);
    GPU_DISPATCH(g, T,
                 k_add2<T><<<gpu_blocks(n), 256, 0, g->s>>>((const T *)g->x[l->in[0]], (const T *)g->x[l->in[1]], (T *)g->x[l->out], n));
}

static void add_backward(GpuNet *g, Layer *l, int li) {
    size_t n = shape_count(g->net->node[l->out].shape);
    for (int k = 0; k < 2; k++)
        if (g->dx[l->in[k]])
            GPU_DISPATCH(g, T,
                         k_acc<T><<<gpu_blocks(n), 256, 0, g->s>>>((T *)g->dx[l->in[k]], (const T *)g->dx[l->out], n, gpu_acc(g, li, k)));
}

const GpuLayerImpl gpu_add_impl = {"add", NULL, NULL, add_forward, add_backward, NULL, NULL};
