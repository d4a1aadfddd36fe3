/* conv.cu: the GPU half of conv (src/layers/conv.c) on cuDNN. The algorithms (forward, backward
 * data, backward filter) are chosen once per layer by measurement (cudnnFind*). cuDNN pads
 * symmetrically; TensorFlow's SAME padding is uneven when the total is odd, so such layers copy
 * their input into a zero-padded buffer and convolve it without padding. */
#include "gpunet_internal.h"

typedef struct ConvGpu {
    cudnnTensorDescriptor_t x, y, xp, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    int padded;       /* 1: explicit padding through xpad */
    int hp, wp;       /* padded input size */
    void *xpad;       /* [n][cin][hp][wp] (padded only), storage type */
    void *dxpad;      /* its gradient */
} ConvGpu;

/* x [n][c][h][w] -> xp [n][c][hp][wp] at (pt, pl), zeros around */
template <typename T> __global__ void k_pad(const T *x, T *xp, int nc, int h, int w, int hp, int wp, int pt, int pl) {
    size_t total = (size_t)nc * hp * wp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int xx = (int)(i % wp), yy = (int)(i / wp % hp);
        size_t p = i / ((size_t)wp * hp);
        int sy = yy - pt, sx = xx - pl;
        xp[i] = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? x[(p * h + sy) * w + sx] : from_f<T>(0.0f);
    }
}

/* dx (+)= the part of dxp that lies over x (adds if acc) */
template <typename T>
__global__ void k_unpad_add(const T *dxp, T *dx, int nc, int h, int w, int hp, int wp, int pt, int pl, int acc) {
    size_t total = (size_t)nc * h * w;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int xx = (int)(i % w), yy = (int)(i / w % h);
        size_t p = i / ((size_t)w * h);
        int py = yy + pt, px = xx + pl;
        float v = (py < hp && px < wp) ? to_f(dxp[(p * hp + py) * wp + px]) : 0.0f;
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + v : v);
    }
}

/* The fastest measured algorithm that ran; in fp32 only those without tensor-op math qualify. */
template <typename Perf> static const Perf *pick(const Perf *perf, int got, int want_fma, const Layer *l, const char *what) {
    for (int k = 0; k < got; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS && !(want_fma && perf[k].mathType == CUDNN_TENSOR_OP_MATH)) return &perf[k];
    die("%s: cuDNN found no %s algorithm", l->name, what);
}

static void conv_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    const Conv *c = (const Conv *)l->priv;
    const Net *net = g->net;
    const int n = net->node[l->in[0]].shape.n;
    ConvGpu *p = (ConvGpu *)xcalloc(1, sizeof *p);
    g->lp[li] = p;
    p->x = gpu_tensor_desc(g, net->node[l->in[0]].shape);
    p->y = gpu_tensor_desc(g, net->node[l->out].shape);
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    /* grouped: the filter holds cin / groups input channels per output channel */
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, g->dtype, CUDNN_TENSOR_NCHW, c->cout, c->cin / c->groups, c->kh, c->kw));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    /* symmetric padding (pt, pl) gives TensorFlow's output size when the total padding is even */
    int ph = c->pt, pw = c->pl;
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, ph, pw, c->sh, c->sw, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, c->groups)); /* grouped convolution (1: plain) */
    int on, oc, oh, ow;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
    cudnnTensorDescriptor_t in = p->x;
    if (oh != c->oh || ow != c->ow) {
        p->padded = 1;
        p->hp = (c->oh - 1) * c->sh + c->kh;
        p->wp = (c->ow - 1) * c->sw + c->kw;
        p->xp = gpu_tensor_desc(g, shape4(n, c->cin, p->hp, p->wp));
        CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, 0, 0, c->sh, c->sw, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, c->groups)); /* grouped convolution (1: plain) */
        CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->xp, p->w, &on, &oc, &oh, &ow));
        if (oh != c->oh || ow != c->ow) die("%s: cuDNN output %dx%d, expected %dx%d", l->name, oh, ow, c->oh, c->ow);
        in = p->xp;
        *scratch = 2 * (((size_t)n * c->cin * p->hp * p->wp * g->esize + 255) & ~(size_t)255);
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, gpu_math(g)));
    if (c->pb >= 0) {
        p->bias = gpu_tensor_desc(g, shape4(1, c->cout, 1, 1));
    }
    /* choose by measurement */
    const int want_fma = g->prec == PREC_FP32;
    int got = 0;
    size_t ws = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g->dnn, in, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
    const cudnnConvolutionFwdAlgoPerf_t *f = pick(fp, got, want_fma, l, "forward");
    p->fwd = f->algo;
    ws = f->memory;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(g->dnn, p->w, p->y, p->conv, in, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp));
    const cudnnConvolutionBwdDataAlgoPerf_t *d = pick(dp, got, want_fma, l, "backward-data");
    p->bwd_data = d->algo;
    if (d->memory > ws) ws = d->memory;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(g->dnn, in, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp));
    const cudnnConvolutionBwdFilterAlgoPerf_t *w = pick(wp, got, want_fma, l, "backward-filter");
    p->bwd_filter = w->algo;
    if (w->memory > ws) ws = w->memory;
    *workspace = ws;
}

static void conv_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    (void)l;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    if (!p->padded) return;
    const Conv *c = (const Conv *)l->priv;
    size_t n = (size_t)g->net->node[l->in[0]].shape.n * c->cin * p->hp * p->wp;
    p->xpad = scratch;
    p->dxpad = scratch + ((n * g->esize + 255) & ~(size_t)255);
}

static void conv_forward(GpuNet *g, Layer *l, int li) {
    const Conv *c = (const Conv *)l->priv;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    const float one = 1.0f, zero = 0.0f;
    const void *x = g->x[l->in[0]];
    cudnnTensorDescriptor_t in = p->x;
    if (p->padded) {
        int nc = g->net->node[l->in[0]].shape.n * c->cin;
        GPU_DISPATCH(g, T,
                     k_pad<T><<<gpu_blocks((size_t)nc * p->hp * p->wp), 256, 0, g->s>>>((const T *)x, (T *)p->xpad, nc, c->h, c->w, p->hp,
                                                                                     p->wp, c->pt, c->pl));
        x = p->xpad;
        in = p->xp;
    }
    CUDNN_CHECK(cudnnConvolutionForward(g->dnn, &one, in, x, p->w, gpu_weights(g, c->pw), p->conv, p->fwd, g->ws, g->ws_bytes, &zero,
                                        p->y, g->x[l->out]));
    if (c->pb >= 0) CUDNN_CHECK(cudnnAddTensor(g->dnn, &one, p->bias, gpu_weights(g, c->pb), &one, p->y, g->x[l->out]));
}

static void conv_backward(GpuNet *g, Layer *l, int li) {
    const Conv *c = (const Conv *)l->priv;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    const float one = 1.0f, zero = 0.0f;
    /* fp32: add into the zeroed fp32 gradients; fp16/bf16: write the storage-type buffer, then cast */
    const float *beta_w = gpu_half(g) ? &zero : &one;
    const void *dy = g->dx[l->out];
    const void *x = p->padded ? p->xpad : g->x[l->in[0]];
    cudnnTensorDescriptor_t in = p->padded ? p->xp : p->x;
    if (c->pb >= 0) {
        CUDNN_CHECK(cudnnConvolutionBackwardBias(g->dnn, &one, p->y, dy, beta_w, p->bias, gpu_conv_dw(g, c->pb)));
        if (gpu_half(g)) gpu_grad_from_half(g, c->pb);
    }
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->dnn, &one, in, x, p->y, dy, p->conv, p->bwd_filter, g->ws, g->ws_bytes, beta_w, p->w,
                                               gpu_conv_dw(g, c->pw)));
    if (gpu_half(g)) gpu_grad_from_half(g, c->pw);
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    const void *w = gpu_weights(g, c->pw);
    if (!p->padded) {
        CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, w, p->y, dy, p->conv, p->bwd_data, g->ws, g->ws_bytes,
                                                 gpu_beta(g, li, 0), p->x, dx));
        return;
    }
    CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, w, p->y, dy, p->conv, p->bwd_data, g->ws, g->ws_bytes, &zero, p->xp,
                                             p->dxpad));
    int nc = g->net->node[l->in[0]].shape.n * c->cin;
    GPU_DISPATCH(g, T,
                 k_unpad_add<T><<<gpu_blocks((size_t)nc * c->h * c->w), 256, 0, g->s>>>((const T *)p->dxpad, (T *)dx, nc, c->h, c->w,
                                                                                      p->hp, p->wp, c->pt, c->pl, gpu_acc(g, li, 0)));
}

static void conv_destroy(GpuNet *g, Layer *l, int li) {
    (void)l;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->y);
    if (p->xp) cudnnDestroyTensorDescriptor(p->xp);
    if (p->bias) cudnnDestroyTensorDescriptor(p->bias);
    cudnnDestroyFilterDescriptor(p->w);
    cudnnDestroyConvolutionDescriptor(p->conv);
}

const GpuLayerImpl gpu_conv_impl = {"conv", conv_plan, conv_bind, conv_forward, conv_backward, conv_destroy};
