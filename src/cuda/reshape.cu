/* reshape.cu: the GPU half of flatten (NCHW -> [n][h*w*c] in NHWC order: in NHWC a copy) and
 * spatial average (src/layers/reshape.c), in either layout. */
#include "gpunet_internal.h"

/* y[s][p*c + ch] = x[s][ch][p] (forward); dx[s][ch][p] (+)= dy[s][p*c + ch] (backward: adds if acc) */
template <typename T> __global__ void k_flatten(const T *x, T *y, size_t total, int c, size_t hw, int backward, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t chw = (size_t)c * hw, s = i / chw, r = i % chw, ch = r / hw, p = r % hw;
        size_t j = s * chw + p * c + ch; /* NHWC position of NCHW element i */
        if (backward)
            y[i] = acc ? from_f<T>(to_f(y[i]) + to_f(x[j])) : x[j];
        else
            y[j] = x[i];
    }
}

/* one thread per (sample, channel) i: its pixels from x + base, step elements apart */
template <typename T> __global__ void k_spatial_avg(const T *x, T *y, size_t planes, int c, size_t hw, int nhwc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < planes; i += (size_t)gridDim.x * blockDim.x) {
        const size_t base = nhwc ? i / (size_t)c * hw * c + i % (size_t)c : i * hw, step = nhwc ? (size_t)c : 1;
        double s = 0;
        for (size_t k = 0; k < hw; k++) s += to_f(x[base + k * step]);
        y[i] = from_f<T>((float)(s / (double)hw));
    }
}

template <typename T> __global__ void k_spatial_avg_backward(const T *dy, T *dx, size_t total, int c, size_t hw, int nhwc, int acc) {
    const float inv = 1.0f / (float)hw;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float d = to_f(dy[nhwc ? i / (hw * c) * c + i % (size_t)c : i / hw]) * inv;
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + d : d);
    }
}

static void flatten_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    Shape s = g->net->node[l->in[0]].shape;
    size_t total = shape_count(s);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_flatten<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (T *)g->x[l->out], total,
                        g->nhwc ? (int)shape_sample(s) : s.c, g->nhwc ? (size_t)1 : (size_t)s.h * s.w, 0, 0)); /* NHWC: a copy */
}

static void flatten_backward(GpuNet *g, Layer *l, int li) {
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    Shape s = g->net->node[l->in[0]].shape;
    size_t total = shape_count(s);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_flatten<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)g->dx[l->out], (T *)dx, total,
                        g->nhwc ? (int)shape_sample(s) : s.c, g->nhwc ? (size_t)1 : (size_t)s.h * s.w, 1, gpu_acc(g, li, 0)));
}

static void avg_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    Shape s = g->net->node[l->in[0]].shape;
    size_t planes = (size_t)s.n * s.c;
    GPU_DISPATCH(g, T,
                 LAUNCH(k_spatial_avg<T>, gpu_blocks(planes), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (T *)g->x[l->out], planes, s.c,
                        (size_t)s.h * s.w, g->nhwc));
}

static void avg_backward(GpuNet *g, Layer *l, int li) {
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    Shape s = g->net->node[l->in[0]].shape;
    size_t total = shape_count(s);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_spatial_avg_backward<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)g->dx[l->out], (T *)dx, total, s.c,
                        (size_t)s.h * s.w, g->nhwc, gpu_acc(g, li, 0)));
}

const GpuLayerImpl gpu_flatten_impl = {"flatten", NULL, NULL, flatten_forward, flatten_backward, NULL, NULL};
const GpuLayerImpl gpu_avg_impl = {"avg", NULL, NULL, avg_forward, avg_backward, NULL, NULL};
