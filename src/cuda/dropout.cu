/* dropout.cu: the GPU half of dropout (src/layers/dropout.c). The mask comes from a counter-based
 * hash of (seed, forward number, element), so it is reproducible without RNG state on the
 * device; it is a different stream of numbers from the CPU half's, with the same law. */
#include "gpunet_internal.h"

typedef struct DropoutGpu {
    uint8_t *mask; /* [count] 1: kept */
    int training;  /* mode of the last forward */
} DropoutGpu;

__device__ static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

template <typename T> __global__ void k_dropout(const T *x, T *y, uint8_t *mask, size_t n, uint64_t key, float keep) {
    const float scale = 1.0f / keep;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (float)(mix64(key + i * 0x9e3779b97f4a7c15ULL) >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
        uint8_t k = u < keep;
        mask[i] = k;
        y[i] = from_f<T>(k ? to_f(x[i]) * scale : 0.0f);
    }
}

template <typename T> __global__ void k_dropout_backward(const T *dy, const uint8_t *mask, T *dx, size_t n, float scale, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float d = !mask ? to_f(dy[i]) : mask[i] ? to_f(dy[i]) * scale : 0.0f;
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + d : d);
    }
}

static void dropout_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    g->lp[li] = xcalloc(1, sizeof(DropoutGpu));
    *scratch = g->inference ? 0 : shape_count(g->net->node[l->in[0]].shape); /* the mask: training only */
    *workspace = 0;
}

static void dropout_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    (void)l;
    ((DropoutGpu *)g->lp[li])->mask = (uint8_t *)scratch;
}

static void dropout_forward(GpuNet *g, Layer *l, int li) {
    const Dropout *d = (const Dropout *)l->priv;
    DropoutGpu *p = (DropoutGpu *)g->lp[li];
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    p->training = g->net->training != 0;
    if (!p->training) {
        CUDA_CHECK(cudaMemcpyAsync(g->x[l->out], g->x[l->in[0]], n * g->esize, cudaMemcpyDeviceToDevice, g->s));
        return;
    }
    uint64_t key = g->dropout_seed ^ (g->dropout_calls * 0xd1b54a32d192ed03ULL) ^ ((uint64_t)li << 48);
    GPU_DISPATCH(g, T, LAUNCH(k_dropout<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (T *)g->x[l->out], p->mask, n, key, d->keep));
}

static void dropout_backward(GpuNet *g, Layer *l, int li) {
    const Dropout *d = (const Dropout *)l->priv;
    DropoutGpu *p = (DropoutGpu *)g->lp[li];
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_dropout_backward<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (const T *)g->dx[l->out], p->training ? p->mask : NULL, (T *)dx, n,
                                                                       1.0f / d->keep, gpu_acc(g, li, 0)));
}

const GpuLayerImpl gpu_dropout_impl = {"dropout", dropout_plan, dropout_bind, dropout_forward, dropout_backward, NULL, NULL};
