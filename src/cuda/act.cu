/* act.cu: the GPU half of the activations (src/layers/act.c): one elementwise kernel each way,
 * with the CPU half's formulas. Backward reads the output y (each derivative is a function of y:
 * y > 0 iff x > 0 for relu, relu6 and elu) and, for leaky relu only, x, whose test gives the same
 * answer on y when alpha > 0. So an activation may run in place over its input (gpunet.cu
 * decides when: net_act_in_place). */
#include "gpunet_internal.h"

/* the activation of v, as the CPU half computes it */
__device__ static float act_value(float v, int act, float alpha) {
    switch (act) {
    case ACT_RELU: return v > 0 ? v : 0.0f;
    case ACT_RELU6: return v > 0 ? (v < 6.0f ? v : 6.0f) : 0.0f;
    case ACT_ELU: return v > 0 ? v : expm1f(v);
    case ACT_SIGMOID:
        if (v >= 0) return 1.0f / (1.0f + expf(-v));
        {
            float e = expf(v);
            return e / (1.0f + e);
        }
    case ACT_TANH: return tanhf(v);
    case ACT_LRELU: return alpha * v > v ? alpha * v : v;
    default: return v;
    }
}

/* the gradient through the activation from its output v (and for leaky relu its input u) */
__device__ static float act_grad(float v, float u, float g, int act, float alpha) {
    switch (act) {
    case ACT_RELU: return v > 0 ? g : 0.0f;
    case ACT_RELU6: return (v > 0 && v < 6.0f) ? g : 0.0f;
    case ACT_ELU: return v > 0 ? g : g * (v + 1.0f);
    case ACT_SIGMOID: return g * v * (1.0f - v);
    case ACT_TANH: return g * (1.0f - v * v);
    case ACT_LRELU: return alpha * u > u ? alpha * g : g; /* in place (x is y) only when alpha > 0 */
    default: return g;
    }
}

/* y = act(x): 16-byte vectors where x and y allow (gpunet_internal.h), the rest one by one */
template <typename T> __global__ void k_act_forward(const T *x, T *y, size_t n, int act, float alpha) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const size_t nv = gpu_vec_split<T>(n, gpu_aligned16(x) && gpu_aligned16(y));
    for (size_t v = t0; v < nv / V; v += stride) {
        alignas(16) T a[V];
        gpu_load16(a, x, v);
#pragma unroll
        for (int k = 0; k < V; k++) a[k] = from_f<T>(act_value(to_f(a[k]), act, alpha));
        gpu_store16(y, v, a);
    }
    for (size_t i = nv + t0; i < n; i += stride) y[i] = from_f<T>(act_value(to_f(x[i]), act, alpha));
}

/* dx (+)= dy act'(...) (adds if acc): vectors of y, dy and dx (and x for leaky relu) where all
 * allow */
template <typename T>
__global__ void k_act_backward(const T *x, const T *y, const T *dy, T *dx, size_t n, int act, float alpha, int acc) {
    constexpr int V = 16 / sizeof(T);
    const size_t t0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    const size_t nv = gpu_vec_split<T>(n, gpu_aligned16(x) && gpu_aligned16(y) && gpu_aligned16(dy) && gpu_aligned16(dx));
    for (size_t v = t0; v < nv / V; v += stride) {
        alignas(16) T yv[V], gv[V], xv[V], o[V];
        gpu_load16(yv, y, v);
        gpu_load16(gv, dy, v);
        if (act == ACT_LRELU) gpu_load16(xv, x, v);
        if (acc) gpu_load16(o, dx, v);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float d = act_grad(to_f(yv[k]), act == ACT_LRELU ? to_f(xv[k]) : 0.0f, to_f(gv[k]), act, alpha);
            o[k] = from_f<T>(acc ? to_f(o[k]) + d : d);
        }
        gpu_store16(dx, v, o);
    }
    for (size_t i = nv + t0; i < n; i += stride) {
        const float d = act_grad(to_f(y[i]), act == ACT_LRELU ? to_f(x[i]) : 0.0f, to_f(dy[i]), act, alpha);
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + d : d);
    }
}

static void act_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    const ActPriv *a = (const ActPriv *)l->priv;
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    GPU_DISPATCH(g, T, LAUNCH(k_act_forward<T>, gpu_vec_blocks<T>(n), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (T *)g->x[l->out], n, (int)a->act, a->alpha));
}

static void act_backward(GpuNet *g, Layer *l, int li) {
    const ActPriv *a = (const ActPriv *)l->priv;
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_act_backward<T>, gpu_vec_blocks<T>(n), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (const T *)g->x[l->out],
                                                                  (const T *)g->dx[l->out], (T *)dx, n, (int)a->act, a->alpha,
                                                                  gpu_acc(g, li, 0)));
}

const GpuLayerImpl gpu_act_impl = {"act", NULL, NULL, act_forward, act_backward, NULL, NULL};
