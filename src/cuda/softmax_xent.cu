/* softmax_xent.cu: the GPU half of the softmax cross-entropy loss (src/layers/softmax_xent.c):
 * one block per sample computes the log-sum-exp in double, the probabilities and the sample's
 * loss; backward adds (p - onehot) / n times the loss scale to the logits' gradient. */
#include "gpunet_internal.h"

typedef struct XentGpu {
    float *prob; /* [n][classes] */
    float *loss; /* [n] per-sample losses, fp32 whatever the storage type */
} XentGpu;

template <typename T> __global__ void k_xent_forward(const T *z, const int32_t *labels, float *prob, float *loss, T *out, int c) {
    const int i = blockIdx.x;
    const T *row = z + (size_t)i * c;
    __shared__ double red[1][GPU_THREADS];
    __shared__ double bcast;
    double m = -1e300;
    for (int j = threadIdx.x; j < c; j += blockDim.x) m = fmax(m, (double)to_f(row[j]));
    gpu_block_reduce<1, true>(red, &m);
    if (threadIdx.x == 0) bcast = m;
    __syncthreads();
    m = bcast;
    double sum = 0;
    for (int j = threadIdx.x; j < c; j += blockDim.x) sum += exp((double)to_f(row[j]) - m);
    gpu_block_reduce<1>(red, &sum); /* red's reads of the max were before the barrier above */
    if (threadIdx.x == 0) bcast = sum;
    __syncthreads();
    const double lse = m + log(bcast);
    for (int j = threadIdx.x; j < c; j += blockDim.x) prob[(size_t)i * c + j] = (float)exp((double)to_f(row[j]) - lse);
    if (threadIdx.x == 0) {
        loss[i] = (float)(lse - (double)to_f(row[labels[i]]));
        out[i] = from_f<T>(loss[i]);
    }
}

template <typename T>
__global__ void k_xent_backward(const float *prob, const int32_t *labels, T *dz, int n, int c, const float *scale, int acc) {
    const float inv = *scale / (float)n; /* the loss scale, from the device (gpunet_step moves it) */
    size_t total = (size_t)n * c;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(k / c), j = (int)(k % c);
        float d = (prob[k] - (j == labels[i] ? 1.0f : 0.0f)) * inv;
        dz[k] = from_f<T>(acc ? to_f(dz[k]) + d : d);
    }
}

static void xent_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    g->lp[li] = xcalloc(1, sizeof(XentGpu));
    Shape s = g->net->node[l->in[0]].shape;
    *scratch = ((shape_count(s) * sizeof(float) + 255) & ~(size_t)255) + (size_t)s.n * sizeof(float);
    *workspace = 0;
}

static void xent_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    XentGpu *p = (XentGpu *)g->lp[li];
    p->prob = (float *)scratch;
    p->loss = (float *)(scratch + ((shape_count(g->net->node[l->in[0]].shape) * sizeof(float) + 255) & ~(size_t)255));
    g->loss_vec = p->loss;
}

static void xent_forward(GpuNet *g, Layer *l, int li) {
    const Xent *x = (const Xent *)l->priv;
    int n = g->net->node[l->in[0]].shape.n;
    XentGpu *p = (XentGpu *)g->lp[li];
    GPU_DISPATCH(g, T,
                 LAUNCH(k_xent_forward<T>, n, GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], g->labels, p->prob, p->loss, (T *)g->x[l->out],
                                                       x->classes));
}

static void xent_backward(GpuNet *g, Layer *l, int li) {
    const Xent *x = (const Xent *)l->priv;
    void *dz = g->dx[l->in[0]];
    if (!dz) return;
    int n = g->net->node[l->in[0]].shape.n;
    GPU_DISPATCH(g, T,
                 LAUNCH(k_xent_backward<T>, gpu_blocks((size_t)n * x->classes), GPU_THREADS, 0, g->s, ((XentGpu *)g->lp[li])->prob, g->labels,
                                                                                         (T *)dz, n, x->classes, gpu_loss_scale(g),
                                                                                         gpu_acc(g, li, 0)));
}

const GpuLayerImpl gpu_xent_impl = {"softmax_xent", xent_plan, xent_bind, xent_forward, xent_backward, NULL, NULL};
