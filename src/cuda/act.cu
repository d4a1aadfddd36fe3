/* act.cu: the GPU half of the activations (src/layers/act.c): one elementwise kernel each way,
 * with the CPU half's formulas. Backward reads the output y (each derivative is a function of y:
 * y > 0 iff x > 0 for relu, relu6 and elu) and, for leaky relu only, x, whose test gives the same
 * answer on y when alpha > 0. So an activation may run in place over its input (gpunet.cu
 * decides when: net_act_in_place). */
#include "gpunet_internal.h"

template <typename T> __global__ void k_act_forward(const T *x, T *y, size_t n, int act, float alpha) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = to_f(x[i]), r;
        switch (act) {
        case ACT_RELU: r = v > 0 ? v : 0.0f; break;
        case ACT_RELU6: r = v > 0 ? (v < 6.0f ? v : 6.0f) : 0.0f; break;
        case ACT_ELU: r = v > 0 ? v : expm1f(v); break;
        case ACT_SIGMOID:
            if (v >= 0) {
                r = 1.0f / (1.0f + expf(-v));
            } else {
                float e = expf(v);
                r = e / (1.0f + e);
            }
            break;
        case ACT_TANH: r = tanhf(v); break;
        case ACT_LRELU: r = alpha * v > v ? alpha * v : v; break;
        default: r = v; break;
        }
        y[i] = from_f<T>(r);
    }
}

template <typename T>
__global__ void k_act_backward(const T *x, const T *y, const T *dy, T *dx, size_t n, int act, float alpha, int acc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = to_f(y[i]), g = to_f(dy[i]), d;
        switch (act) {
        case ACT_RELU: d = v > 0 ? g : 0.0f; break;
        case ACT_RELU6: d = (v > 0 && v < 6.0f) ? g : 0.0f; break;
        case ACT_ELU: d = v > 0 ? g : g * (v + 1.0f); break;
        case ACT_SIGMOID: d = g * v * (1.0f - v); break;
        case ACT_TANH: d = g * (1.0f - v * v); break;
        case ACT_LRELU: { /* in place (x is y) only when alpha > 0 */
            float u = to_f(x[i]);
            d = alpha * u > u ? alpha * g : g;
            break;
        }
        default: d = g; break;
        }
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + d : d);
    }
}

static void act_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    const ActPriv *a = (const ActPriv *)l->priv;
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    GPU_DISPATCH(g, T, LAUNCH(k_act_forward<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (T *)g->x[l->out], n, (int)a->act, a->alpha));
}

static void act_backward(GpuNet *g, Layer *l, int li) {
    const ActPriv *a = (const ActPriv *)l->priv;
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    size_t n = shape_count(g->net->node[l->in[0]].shape);
    GPU_DISPATCH(g, T,
                 LAUNCH(k_act_backward<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (const T *)g->x[l->out],
                                                                  (const T *)g->dx[l->out], (T *)dx, n, (int)a->act, a->alpha,
                                                                  gpu_acc(g, li, 0)));
}

const GpuLayerImpl gpu_act_impl = {"act", NULL, NULL, act_forward, act_backward, NULL, NULL};
