/* add.cu: the GPU half of the residual sum (src/layers/add.c). */
#include "gpunet_internal.h"

__global__ void k_add2(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = a[i] + b[i];
}

__global__ void k_acc(float *dx, const float *dy, size_t n, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = acc ? dx[i] + dy[i] : dy[i];
}

static void add_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    size_t n = shape_count(g->net->node[l->out].shape);
    k_add2<<<gpu_blocks(n), 256, 0, g->s>>>(g->x[l->in[0]], g->x[l->in[1]], g->x[l->out], n);
}

static void add_backward(GpuNet *g, Layer *l, int li) {
    size_t n = shape_count(g->net->node[l->out].shape);
    for (int k = 0; k < 2; k++)
        if (g->dx[l->in[k]]) k_acc<<<gpu_blocks(n), 256, 0, g->s>>>(g->dx[l->in[k]], g->dx[l->out], n, gpu_acc(g, li, k));
}

const GpuLayerImpl gpu_add_impl = {"add", NULL, NULL, add_forward, add_backward, NULL};
