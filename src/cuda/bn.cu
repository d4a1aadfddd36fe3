/* bn.cu: the GPU half of bn (src/layers/bn.c) on cuDNN's spatial batch normalisation: batch
 * statistics in training (running averages with factor 1 - BN_DECAY, unbiased variance, as the
 * CPU half), running statistics in inference. Backward after an inference forward (the input
 * gradient through fixed statistics) is a kernel of its own. */
#include "gpunet_internal.h"

typedef struct BnGpu {
    cudnnTensorDescriptor_t x, p;
    int training;       /* mode of the last forward */
    float *save_mean;   /* [c] */
    float *save_invstd; /* [c] */
    void *discard;      /* dx when the input is the network input (which has no gradient) */
} BnGpu;

static void bn_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    const Bn *b = (const Bn *)l->priv;
    BnGpu *p = (BnGpu *)xcalloc(1, sizeof *p);
    g->lp[li] = p;
    Shape s = g->net->node[l->in[0]].shape;
    p->x = gpu_tensor_desc(g, s);
    p->p = gpu_tensor_desc_f32(shape4(1, b->c, 1, 1)); /* scale, bias and statistics stay fp32 */
    *scratch = 2 * (((size_t)b->c * sizeof(float) + 255) & ~(size_t)255);
    if (l->in[0] == g->net->input) *scratch += shape_count(s) * g->esize;
    *workspace = 0;
}

static void bn_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    const Bn *b = (const Bn *)l->priv;
    BnGpu *p = (BnGpu *)g->lp[li];
    p->save_mean = (float *)scratch;
    const size_t cb = ((size_t)b->c * sizeof(float) + 255) & ~(size_t)255;
    p->save_invstd = (float *)(scratch + cb);
    if (l->in[0] == g->net->input) p->discard = scratch + 2 * cb;
}

static void bn_forward(GpuNet *g, Layer *l, int li) {
    BnGpu *p = (BnGpu *)g->lp[li];
    Net *net = g->net;
    const float one = 1.0f, zero = 0.0f;
    const float *gamma = gpu_param(g, l->param0), *beta = gpu_param(g, l->param0 + 1);
    float *mm = g->state + net->buf[l->buf0].off, *mv = g->state + net->buf[l->buf0 + 1].off;
    p->training = net->training != 0;
    if (p->training)
        CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, g->x[l->in[0]], p->x,
                                                           g->x[l->out], p->p, gamma, beta, 1.0 - (double)BN_DECAY, mm, mv,
                                                           (double)BN_EPSILON, p->save_mean, p->save_invstd));
    else
        CUDNN_CHECK(cudnnBatchNormalizationForwardInference(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, g->x[l->in[0]], p->x,
                                                            g->x[l->out], p->p, gamma, beta, mm, mv, (double)BN_EPSILON));
}

/* inference-mode backward: dx (+)= gamma / sqrt(var + eps) dy (adds if acc); dgamma += sum dy xhat;
 * dbeta += sum dy (one block per channel) */
template <typename T>
__global__ void k_bn_backward_fixed(const T *x, const T *dy, T *dx, const float *gamma, const float *mean, const float *var,
                                    float *dgamma, float *dbeta, int n, int c, size_t hw, int acc) {
    const int ch = blockIdx.x;
    const float is = rsqrtf(var[ch] + BN_EPSILON), a = gamma[ch] * is, mu = mean[ch];
    __shared__ double s1[GPU_THREADS], s2[GPU_THREADS];
    double sdy = 0, sdyx = 0;
    for (size_t k = threadIdx.x; k < (size_t)n * hw; k += blockDim.x) {
        size_t i = (k / hw * c + ch) * hw + k % hw;
        float d = to_f(dy[i]);
        sdy += d;
        sdyx += d * ((to_f(x[i]) - mu) * is);
        if (dx) dx[i] = from_f<T>(acc ? to_f(dx[i]) + a * d : a * d);
    }
    s1[threadIdx.x] = sdy;
    s2[threadIdx.x] = sdyx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            s1[threadIdx.x] += s1[threadIdx.x + s];
            s2[threadIdx.x] += s2[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        dgamma[ch] += (float)s2[0];
        dbeta[ch] += (float)s1[0];
    }
}

static void bn_backward(GpuNet *g, Layer *l, int li) {
    BnGpu *p = (BnGpu *)g->lp[li];
    const Bn *b = (const Bn *)l->priv;
    Net *net = g->net;
    const float one = 1.0f;
    const float *gamma = gpu_param(g, l->param0);
    float *dgamma = gpu_grad(g, l->param0), *dbeta = gpu_grad(g, l->param0 + 1);
    void *dx = g->dx[l->in[0]];
    if (!p->training) {
        Shape s = net->node[l->in[0]].shape;
        GPU_DISPATCH(g, T,
                     LAUNCH(k_bn_backward_fixed<T>, b->c, GPU_THREADS, 0, g->s, (const T *)g->x[l->in[0]], (const T *)g->dx[l->out], (T *)dx, gamma,
                                                                   g->state + net->buf[l->buf0].off,
                                                                   g->state + net->buf[l->buf0 + 1].off, dgamma, dbeta, s.n, b->c,
                                                                   b->hw, gpu_acc(g, li, 0)));
        return;
    }
    float beta_dx = gpu_acc(g, li, 0) ? 1.0f : 0.0f;
    if (!dx) { /* cuDNN always writes dx */
        dx = p->discard;
        beta_dx = 0.0f;
    }
    CUDNN_CHECK(cudnnBatchNormalizationBackward(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &beta_dx, &one, &one, p->x, g->x[l->in[0]], p->x,
                                                g->dx[l->out], p->x, dx, p->p, gamma, dgamma, dbeta, (double)BN_EPSILON, p->save_mean,
                                                p->save_invstd));
}

static void bn_destroy(GpuNet *g, Layer *l, int li) {
    (void)l;
    BnGpu *p = (BnGpu *)g->lp[li];
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->p);
}

const GpuLayerImpl gpu_bn_impl = {"bn", bn_plan, bn_bind, bn_forward, bn_backward, bn_destroy, NULL};
