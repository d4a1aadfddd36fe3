/* conv.cu: the GPU half of conv (src/layers/conv.c) on cuDNN.
 *
 * Each direction (forward, backward data, backward filter) has a convolution descriptor of its
 * own. plan() measures every algorithm of each direction (cudnnFind*, which reports the math type
 * each ran with and its determinism), once per distinct shape (the GpuNet's cache), and not the
 * backward data of a layer whose input is the network's (its gradient is never used); a
 * deterministic GpuNet (GPUNET_DETERMINISTIC) asks cuDNN's heuristics instead
 * (cudnnGet*Algorithm_v7), whose order does not depend on timings. Once the arena is planned,
 * choose() takes per direction the fastest result the precision accepts (convalgo.h: true fp32
 * takes no tensor-op result, nor WINOGRAD_NONFUSED on a filter above 3x3, whose error is TF32's;
 * a deterministic GpuNet only CUDNN_DETERMINISTIC ones, in the
 * heuristics' order) whose workspace fits the memory the arena leaves, sets the direction's
 * descriptor to the math type it was measured with, and takes its workspace from
 * cudnnGet*WorkspaceSize on that final descriptor. conv_desc() is the one place a descriptor is
 * made.
 *
 * cuDNN pads symmetrically; TensorFlow's SAME padding is uneven when the total is odd, so such
 * layers copy their input into a zero-padded buffer and convolve it without padding. The bias,
 * forward and backward, is bias.cu's (cuDNN's bias functions are not documented for bf16). */
#include <string.h>

#include "gpunet_internal.h"

typedef struct ConvGpu {
    cudnnTensorDescriptor_t x, y, xp;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cd[CONV_NDIR]; /* per direction, with its algorithm's math type */
    ConvAlgoList found[CONV_NDIR];               /* cudnnFind*'s measurements (plan; n 0: not needed) */
    int algo[CONV_NDIR];                         /* the chosen algorithm of each direction (choose) */
    int det[CONV_NDIR];                          /* its determinism as cuDNN reports it */
    size_t ws[CONV_NDIR];                        /* its workspace on cd[dir] */
    int cpad;         /* NHWC, 16-bit, one group, cin not a multiple of 8: the channels cuDNN sees (cin rounded
                         up to 8: gpu_conv_pad_channels), 0: cin */
    void *xc, *wc;    /* cpad: the input [n][h][w][cpad] and filter [cout][kh][kw][cpad], zeros after cin */
    void *dwc, *dxc;  /* cpad: their gradients from cuDNN (dxc NULL when the input is the network's) */
    int padded;       /* 1: explicit padding through xpad */
    int hp, wp;       /* padded input size */
    void *xpad;       /* [n][cin or cpad][hp][wp] (padded only), storage type */
    void *dxpad;      /* its gradient (NULL when the input is the network's: never computed) */
    float *bias_part; /* the bias gradient's partial sums (gpu_bias_scratch) */
} ConvGpu;

static const char *const dir_name[CONV_NDIR] = {"forward", "backward-data", "backward-filter"};

/* The position of padded element i: (image p, row yy, column xx) with, in NHWC, its channel ch
 * (NCHW: p counts (sample, channel) planes and ch is 0). */
struct PadAt {
    size_t p;
    int yy, xx, ch;
};
template <typename I> __device__ static PadAt pad_at(I i, int c, int h, int w, int nhwc) {
    PadAt a;
    a.ch = nhwc ? (int)(i % (I)c) : 0;
    const I r = nhwc ? i / (I)c : i, rw = r / (I)w;
    a.xx = (int)(r - rw * (I)w);
    a.yy = (int)(rw % (I)h);
    a.p = (size_t)(rw / (I)h);
    return a;
}
/* element (p, yy, xx, ch) of an image of h x w (and c channels in NHWC) */
__device__ static size_t pad_index(PadAt a, int yy, int xx, int c, int h, int w, int nhwc) {
    return nhwc ? ((a.p * h + yy) * w + xx) * (size_t)c + a.ch : (a.p * h + yy) * w + xx;
}

/* x [n][c][h][w] -> xp [n][c][hp][wp] at (pt, pl), zeros around (NHWC: [n][h][w][c] ->
 * [n][hp][wp][c]) */
/* (the element's position by 32-bit divisions below 2^31 elements: a 64-bit one is a few dozen
 * instructions) */
template <typename T, typename I>
__device__ void pad_range(const T *x, T *xp, I total, int c, int h, int w, int hp, int wp, int pt, int pl, int nhwc) {
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const PadAt a = pad_at<I>(i, c, hp, wp, nhwc);
        int sy = a.yy - pt, sx = a.xx - pl;
        xp[i] = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? x[pad_index(a, sy, sx, c, h, w, nhwc)] : from_f<T>(0.0f);
    }
}
template <typename T> __global__ void k_pad(const T *x, T *xp, size_t total, int c, int h, int w, int hp, int wp, int pt, int pl, int nhwc) {
    if (total < GPU_NARROW)
        pad_range<T, unsigned>(x, xp, (unsigned)total, c, h, w, hp, wp, pt, pl, nhwc);
    else
        pad_range<T, size_t>(x, xp, total, c, h, w, hp, wp, pt, pl, nhwc);
}

/* dx (+)= the part of dxp that lies over x (adds if acc) */
template <typename T, typename I>
__device__ void unpad_add_range(const T *dxp, T *dx, I total, int c, int h, int w, int hp, int wp, int pt, int pl, int nhwc, int acc) {
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const PadAt a = pad_at<I>(i, c, h, w, nhwc);
        int py = a.yy + pt, px = a.xx + pl;
        float v = (py < hp && px < wp) ? to_f(dxp[pad_index(a, py, px, c, hp, wp, nhwc)]) : 0.0f;
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + v : v);
    }
}
template <typename T>
__global__ void k_unpad_add(const T *dxp, T *dx, size_t total, int c, int h, int w, int hp, int wp, int pt, int pl, int nhwc, int acc) {
    if (total < GPU_NARROW)
        unpad_add_range<T, unsigned>(dxp, dx, (unsigned)total, c, h, w, hp, wp, pt, pl, nhwc, acc);
    else
        unpad_add_range<T, size_t>(dxp, dx, total, c, h, w, hp, wp, pt, pl, nhwc, acc);
}

/* NHWC with channels in 16-byte vectors (c a multiple of V = 16 / sizeof(T), both tensors
 * 16-byte aligned, fewer than 2^31 vectors; the padded tensor's vectors are G = c / V a pixel):
 * k_pad and k_unpad_add a vector a thread, their positions found by 32-bit divisions once per
 * vector (the kernels above divide 3 to 4 times per element). */
template <typename T>
__global__ void k_pad_nhwc_vec(const T *x, T *xp, unsigned nvec, unsigned G, int h, int w, int hp, int wp, int pt, int pl) {
    for (unsigned v = blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += gridDim.x * blockDim.x) {
        const unsigned gv = v % G, r = v / G, xx = r % (unsigned)wp, rr = r / (unsigned)wp, yy = rr % (unsigned)hp, img = rr / (unsigned)hp;
        const int sy = (int)yy - pt, sx = (int)xx - pl;
        alignas(16) T a[16 / sizeof(T)];
        if (sy >= 0 && sy < h && sx >= 0 && sx < w)
            gpu_load16(a, x, (((size_t)img * h + sy) * w + sx) * G + gv);
        else
            *reinterpret_cast<uint4 *>(a) = make_uint4(0, 0, 0, 0);
        gpu_store16(xp, v, a);
    }
}
template <typename T>
__global__ void k_unpad_add_nhwc_vec(const T *dxp, T *dx, unsigned nvec, unsigned G, int h, int w, int hp, int wp, int pt, int pl, int acc) {
    constexpr int V = 16 / sizeof(T);
    for (unsigned v = blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += gridDim.x * blockDim.x) {
        const unsigned gv = v % G, r = v / G, xx = r % (unsigned)w, rr = r / (unsigned)w, yy = rr % (unsigned)h, img = rr / (unsigned)h;
        const int py = (int)yy + pt, px = (int)xx + pl;
        alignas(16) T a[V];
        if (py < hp && px < wp)
            gpu_load16(a, dxp, (((size_t)img * hp + py) * wp + px) * G + gv);
        else
            *reinterpret_cast<uint4 *>(a) = make_uint4(0, 0, 0, 0);
        gpu_store16_acc(dx, v, a, acc);
    }
}
/* whether the NHWC vector kernels take a padding of `c` channels between tensors a and b of at
 * most `total` elements */
static bool pad_vec_ok(const GpuNet *g, int c, const void *a, const void *b, size_t total) {
    const size_t V = 16 / g->esize;
    return g->nhwc && (size_t)c % V == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0 && total / V < 0x80000000u;
}

/* Channel padding: dst [rows][cp] = src [rows][c] with zeros in channels c..cp-1 (the first
 * convolution's input in 16-bit NHWC, every step: 32-bit divisions below 2^31 elements) */
template <typename T, typename I> __device__ void chan_pad_range(const T *src, T *dst, I total, int c, int cp) {
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const I r = i / (I)cp;
        const int ch = (int)(i - r * (I)cp);
        dst[i] = ch < c ? src[(size_t)r * c + ch] : from_f<T>(0.0f);
    }
}
template <typename T> __global__ void k_chan_pad(const T *src, T *dst, size_t rows, int c, int cp) {
    const size_t total = rows * (size_t)cp;
    if (total < GPU_NARROW)
        chan_pad_range<T, unsigned>(src, dst, (unsigned)total, c, cp);
    else
        chan_pad_range<T, size_t>(src, dst, total, c, cp);
}

/* and back: dst [rows][c] (+)= the first c channels of src [rows][cp] (adds if acc) */
template <typename T> __global__ void k_chan_unpad(const T *src, T *dst, size_t rows, int c, int cp, int acc) {
    const size_t total = rows * (size_t)c;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)c;
        const float v = to_f(src[r * cp + (i - r * c)]);
        dst[i] = from_f<T>(acc ? to_f(dst[i]) + v : v);
    }
}

/* The channels cuDNN sees for layer c's input: cuDNN's 16-bit tensor-core kernels want the input
 * and output channels in multiples of 8 (its developer guide's Tensor Core requirements; NHWC
 * only, where those kernels work without transposes), so an NHWC 16-bit convolution of one group
 * whose cin is not one (the first layer's 3 colours) convolves an input and a filter padded with
 * zero channels up to the next multiple of 8. 0: no padding. */
static int gpu_conv_pad_channels(const GpuNet *g, const Conv *c) {
    if (!g->nhwc || !gpu_half(g) || c->groups != 1 || c->cin % 8 == 0) return 0;
    return (c->cin + 7) / 8 * 8;
}

/* A convolution descriptor of layer c with math type `math`: cuDNN's symmetric padding (none
 * when the input is padded explicitly), the strides, no dilation, cross-correlation as
 * TensorFlow, c->groups channel groups, fp32 accumulation in every precision. */
static cudnnConvolutionDescriptor_t conv_desc(const Conv *c, int padded, cudnnMathType_t math) {
    cudnnConvolutionDescriptor_t d;
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, padded ? 0 : c->pt, padded ? 0 : c->pl, c->sh, c->sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, c->groups)); /* grouped convolution (1: plain) */
    CUDNN_CHECK(cudnnSetConvolutionMathType(d, math));
    return d;
}

/* The convolution's input as cuDNN sees it: x, or its padded copy. */
static cudnnTensorDescriptor_t in_desc(const ConvGpu *p) { return p->padded ? p->xp : p->x; }

/* cuDNN's measurements (any of its three perf types) as a ConvAlgoList; the heuristics' list
 * (`ranked`) with each result's rank as its time, so that their order is kept. */
template <typename Perf> static void to_list(const Perf *perf, int got, int ranked, ConvAlgoList *out) {
    out->n = 0;
    for (int k = 0; k < got && out->n < CONVALGO_MAX; k++) {
        ConvAlgoPerf *q = &out->p[out->n++];
        q->algo = (int)perf[k].algo;
        q->ok = perf[k].status == CUDNN_STATUS_SUCCESS;
        q->ms = ranked ? (float)k : perf[k].time;
        q->memory = perf[k].memory;
        q->math = (int)perf[k].mathType;
        q->deterministic = perf[k].determinism == CUDNN_DETERMINISTIC;
    }
}

/* Measures every algorithm of direction `dir` on cd[dir] (set to the precision's math type), or
 * in a deterministic GpuNet lists them as cuDNN's heuristics rank them. cuDNN reports each
 * algorithm once per math type it ran with: room for CONVALGO_MAX results (at least four times
 * the algorithm count), so that a precision's acceptable results are never pushed off the end of
 * the list by results it must refuse. */
static void find_all(GpuNet *g, ConvGpu *p, int dir, ConvAlgoList *out) {
    static_assert(CONVALGO_MAX >= 4 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT && CONVALGO_MAX >= 4 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT &&
                      CONVALGO_MAX >= 4 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                  "room for every algorithm in every math type");
    int got = 0;
    const int h = g->deterministic;
    cudnnTensorDescriptor_t in = in_desc(p);
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t r[CONVALGO_MAX];
        if (h)
            CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g->dnn, in, p->w, p->cd[dir], p->y, CONVALGO_MAX, &got, r));
        else
            CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g->dnn, in, p->w, p->cd[dir], p->y, CONVALGO_MAX, &got, r));
        to_list(r, got, h, out);
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t r[CONVALGO_MAX];
        if (h)
            CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->dnn, p->w, p->y, p->cd[dir], in, CONVALGO_MAX, &got, r));
        else
            CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(g->dnn, p->w, p->y, p->cd[dir], in, CONVALGO_MAX, &got, r));
        to_list(r, got, h, out);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CONVALGO_MAX];
        if (h)
            CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->dnn, in, p->y, p->cd[dir], p->w, CONVALGO_MAX, &got, r));
        else
            CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(g->dnn, in, p->y, p->cd[dir], p->w, CONVALGO_MAX, &got, r));
        to_list(r, got, h, out);
    }
}

/* cudnnGet*WorkspaceSize of `algo` on cd[dir] as it is now set. */
static cudnnStatus_t workspace_of(GpuNet *g, ConvGpu *p, int dir, int algo, size_t *bytes) {
    cudnnTensorDescriptor_t in = in_desc(p);
    if (dir == CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(g->dnn, in, p->w, p->cd[dir], p->y, (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (dir == CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(g->dnn, p->w, p->y, p->cd[dir], in, (cudnnConvolutionBwdDataAlgo_t)algo,
                                                            bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(g->dnn, in, p->y, p->cd[dir], p->w, (cudnnConvolutionBwdFilterAlgo_t)algo,
                                                          bytes);
}

/* Chooses direction dir's algorithm from its measurements: the fastest acceptable one whose
 * workspace, taken on the descriptor set to its measured math type, is at most `limit` (or, if
 * none fits, the acceptable one with the smallest workspace). Leaves cd[dir] set for it. */
static void choose_dir(GpuNet *g, const Layer *l, ConvGpu *p, int dir, const ConvAlgoList *found, size_t limit) {
    static_assert((int)CONVALGO_FWD_WINOGRAD_NONFUSED == (int)CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED &&
                      (int)CONVALGO_BWD_DATA_WINOGRAD_NONFUSED == (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED &&
                      (int)CONVALGO_BWD_FILTER_WINOGRAD_NONFUSED == (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                  "convalgo.h's algorithm numbers are cuDNN's");
    const Conv *c = (const Conv *)l->priv;
    int idx[CONVALGO_MAX], over = 0;
    int k = convalgo_order(found, dir, c->kh, c->kw, g->prec, g->deterministic, limit, idx, &over);
    for (int i = 0; i < k; i++) {
        const ConvAlgoPerf *q = &found->p[idx[i]];
        CUDNN_CHECK(cudnnSetConvolutionMathType(p->cd[dir], (cudnnMathType_t)convalgo_desc_math(g->prec, q->math)));
        size_t ws = 0;
        if (workspace_of(g, p, dir, q->algo, &ws) != CUDNN_STATUS_SUCCESS) continue; /* not with this math type */
        if (ws > limit && !over) continue;
        p->algo[dir] = q->algo;
        p->det[dir] = q->deterministic;
        p->ws[dir] = ws;
        return;
    }
    char list[2048];
    convalgo_describe(found, list, sizeof list);
    die("%s: cuDNN found no %s%s algorithm for %s among the %d results it returned: %s", l->name,
        g->deterministic ? "deterministic " : "", dir_name[dir], precision_name((Precision)g->prec), found->n, list);
}

/* Direction dir's measurements: from the cache when this shape was measured before. */
static void measure(GpuNet *g, const Conv *c, ConvGpu *p, int n, int dir, ConvAlgoList *out) {
    ConvKey key;
    convalgo_key(c, n, dir, g->prec, &key);
    const ConvAlgoList *known = convalgo_cache_get(g->algo_cache, &key);
    if (known) {
        *out = *known;
        g->searches_cached++;
        return;
    }
    double t0 = now_seconds();
    find_all(g, p, dir, out);
    g->search_s += now_seconds() - t0;
    g->searches++;
    convalgo_cache_put(g->algo_cache, &key, out);
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
    /* NHWC: the filter KRSC ([cout][kh][kw][cin / groups]: gpunet.h's layout, converted in transfer.cu) */
    const cudnnTensorFormat_t wf = g->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    p->cpad = gpu_conv_pad_channels(g, c);
    const int cin = p->cpad ? p->cpad : c->cin; /* the input's channels as cuDNN sees them */
    if (p->cpad) {
        cudnnDestroyTensorDescriptor(p->x);
        p->x = gpu_tensor_desc(g, shape4(n, cin, c->h, c->w));
        CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, g->dtype, wf, c->cout, cin, c->kh, c->kw));
    } else {
        CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, g->dtype, wf, c->cout, c->cin / c->groups, c->kh, c->kw));
    }
    /* symmetric padding (pt, pl) gives TensorFlow's output size when the total padding is even */
    p->padded = convalgo_explicit_pad(c, &p->hp, &p->wp);
    /* the gradients' pieces: not where the input is the network's (its gradient is never computed),
     * nor in an inference net (no backward) */
    const size_t grads = l->in[0] == net->input || g->inference ? 1 : 2;
    if (p->padded) {
        p->xp = gpu_tensor_desc(g, shape4(n, cin, p->hp, p->wp));
        *scratch = grads * (((size_t)n * cin * p->hp * p->wp * g->esize + 255) & ~(size_t)255); /* xpad [dxpad] */
    }
    if (p->cpad) /* xc [dxc], wc [dwc] */
        *scratch += grads * (((size_t)n * c->h * c->w * cin * g->esize + 255) & ~(size_t)255) +
                    (g->inference ? 1 : 2) * (((size_t)c->cout * c->kh * c->kw * cin * g->esize + 255) & ~(size_t)255);
    for (int d = 0; d < CONV_NDIR; d++) p->cd[d] = conv_desc(c, p->padded, gpu_math(g));
    int on, oc, oh, ow;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cd[CONV_FWD], in_desc(p), p->w, &on, &oc, &oh, &ow));
    if (oh != c->oh || ow != c->ow) die("%s: cuDNN output %dx%d, expected %dx%d", l->name, oh, ow, c->oh, c->ow);
    if (c->pb >= 0 && !g->inference) *scratch += gpu_bias_scratch(n, c->cout, (size_t)c->oh * c->ow);
    for (int d = 0; d < CONV_NDIR; d++) {
        if ((d == CONV_BWD_DATA && l->in[0] == net->input) || (d != CONV_FWD && g->inference)) { /* never run */
            p->found[d].n = 0;
            g->searches_skipped++;
            continue;
        }
        measure(g, c, p, n, d, &p->found[d]);
    }
    *workspace = 0; /* choose() says, once the arena is known */
}

static size_t conv_choose(GpuNet *g, Layer *l, int li, size_t limit) {
    ConvGpu *p = (ConvGpu *)g->lp[li];
    size_t ws = 0;
    for (int d = 0; d < CONV_NDIR; d++) {
        if ((d == CONV_BWD_DATA && l->in[0] == g->net->input) || (d != CONV_FWD && g->inference)) continue; /* not measured */
        choose_dir(g, l, p, d, &p->found[d], limit);
        if (p->ws[d] > ws) ws = p->ws[d];
    }
    return ws;
}

/* scratch: [xpad][dxpad] (padded only; no dxpad on the network's input), [xc][dxc][wc][dwc]
 * (channel-padded only; no dxc on the network's input), then the bias's partial sums (with a
 * bias); an inference net's: xpad, xc and wc alone */
static void conv_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    ConvGpu *p = (ConvGpu *)g->lp[li];
    const Conv *c = (const Conv *)l->priv;
    if (p->padded) {
        size_t n = (size_t)g->net->node[l->in[0]].shape.n * (p->cpad ? p->cpad : c->cin) * p->hp * p->wp,
               b = (n * g->esize + 255) & ~(size_t)255;
        p->xpad = scratch;
        scratch += b;
        if (l->in[0] != g->net->input && !g->inference) {
            p->dxpad = scratch;
            scratch += b;
        }
    }
    if (p->cpad) {
        const size_t bx = ((size_t)g->net->node[l->in[0]].shape.n * c->h * c->w * p->cpad * g->esize + 255) & ~(size_t)255,
                     bw = ((size_t)c->cout * c->kh * c->kw * p->cpad * g->esize + 255) & ~(size_t)255;
        p->xc = scratch;
        scratch += bx;
        if (l->in[0] != g->net->input && !g->inference) {
            p->dxc = scratch;
            scratch += bx;
        }
        p->wc = scratch;
        scratch += bw;
        if (!g->inference) {
            p->dwc = scratch;
            scratch += bw;
        }
    }
    if (c->pb >= 0 && !g->inference) p->bias_part = (float *)scratch;
}

/* The weights cuDNN convolves with: the layer's, or (channel-padded) wc, refreshed from them */
static const void *conv_weights(GpuNet *g, const Conv *c, ConvGpu *p, int refresh) {
    if (!p->cpad) return gpu_weights(g, c->pw);
    if (refresh) {
        const size_t rows = (size_t)c->cout * c->kh * c->kw;
        GPU_DISPATCH(g, T,
                     LAUNCH(k_chan_pad<T>, gpu_blocks(rows * p->cpad), GPU_THREADS, 0, g->s, (const T *)gpu_weights(g, c->pw), (T *)p->wc, rows,
                            c->cin, p->cpad));
    }
    return p->wc;
}

static void conv_forward(GpuNet *g, Layer *l, int li) {
    const Conv *c = (const Conv *)l->priv;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    const float one = 1.0f, zero = 0.0f;
    const void *x = g->x[l->in[0]];
    const int n = g->net->node[l->in[0]].shape.n, cin = p->cpad ? p->cpad : c->cin;
    if (p->cpad) {
        const size_t rows = (size_t)n * c->h * c->w;
        GPU_DISPATCH(g, T,
                     LAUNCH(k_chan_pad<T>, gpu_blocks(rows * p->cpad), GPU_THREADS, 0, g->s, (const T *)x, (T *)p->xc, rows, c->cin, p->cpad));
        x = p->xc;
    }
    if (p->padded) {
        const size_t total = (size_t)n * cin * p->hp * p->wp, V = 16 / g->esize;
        if (pad_vec_ok(g, cin, x, p->xpad, total))
            GPU_DISPATCH(g, T,
                         LAUNCH(k_pad_nhwc_vec<T>, gpu_blocks(total / V), GPU_THREADS, 0, g->s, (const T *)x, (T *)p->xpad, (unsigned)(total / V),
                                (unsigned)((size_t)cin / V), c->h, c->w, p->hp, p->wp, c->pt, c->pl));
        else
            GPU_DISPATCH(g, T,
                         LAUNCH(k_pad<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)x, (T *)p->xpad, total, cin, c->h, c->w, p->hp,
                                p->wp, c->pt, c->pl, g->nhwc));
        x = p->xpad;
    }
    CUDNN_CHECK(cudnnConvolutionForward(g->dnn, &one, in_desc(p), x, p->w, conv_weights(g, c, p, 1), p->cd[CONV_FWD],
                                        (cudnnConvolutionFwdAlgo_t)p->algo[CONV_FWD], g->ws, g->ws_bytes, &zero, p->y, g->x[l->out]));
    if (c->pb >= 0)
        gpu_bias_forward(g, g->x[l->out], gpu_param(g, c->pb), g->net->node[l->out].shape.n, c->cout, (size_t)c->oh * c->ow);
}

static void conv_backward(GpuNet *g, Layer *l, int li) {
    const Conv *c = (const Conv *)l->priv;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    const float one = 1.0f, zero = 0.0f;
    /* fp32: add into the zeroed fp32 gradients; fp16/bf16: write the storage-type buffer, cast for
     * every convolution at once after backward (gpu_grads_from_half) */
    const float *beta_w = gpu_half(g) ? &zero : &one;
    const void *dy = g->dx[l->out];
    const void *x = p->padded ? p->xpad : p->cpad ? p->xc : g->x[l->in[0]];
    const int n = g->net->node[l->in[0]].shape.n, cin = p->cpad ? p->cpad : c->cin;
    if (c->pb >= 0) /* straight into the fp32 gradient */
        gpu_bias_backward(g, dy, gpu_grad(g, c->pb), g->net->node[l->out].shape.n, c->cout, (size_t)c->oh * c->ow, p->bias_part);
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->dnn, &one, in_desc(p), x, p->y, dy, p->cd[CONV_BWD_FILTER],
                                               (cudnnConvolutionBwdFilterAlgo_t)p->algo[CONV_BWD_FILTER], g->ws, g->ws_bytes, beta_w,
                                               p->w, p->cpad ? p->dwc : gpu_conv_dw(g, c->pw)));
    if (p->cpad) { /* the real channels' gradient; the padding's has no weight to go to */
        const size_t rows = (size_t)c->cout * c->kh * c->kw;
        GPU_DISPATCH(g, T,
                     LAUNCH(k_chan_unpad<T>, gpu_blocks(rows * c->cin), GPU_THREADS, 0, g->s, (const T *)p->dwc, (T *)gpu_conv_dw(g, c->pw), rows,
                            c->cin, p->cpad, 0));
    }
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    const void *w = conv_weights(g, c, p, 0);
    const cudnnConvolutionBwdDataAlgo_t algo = (cudnnConvolutionBwdDataAlgo_t)p->algo[CONV_BWD_DATA];
    /* cuDNN writes dx, or dxpad (padded), or dxc (channel-padded); then each is cut back */
    void *dxs = p->cpad ? p->dxc : dx;
    if (!p->padded) {
        CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, w, p->y, dy, p->cd[CONV_BWD_DATA], algo, g->ws, g->ws_bytes,
                                                 p->cpad ? &zero : gpu_beta(g, li, 0), p->x, dxs));
    } else {
        CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, w, p->y, dy, p->cd[CONV_BWD_DATA], algo, g->ws, g->ws_bytes, &zero,
                                                 p->xp, p->dxpad));
        const size_t total = (size_t)n * cin * c->h * c->w, V = 16 / g->esize;
        if (pad_vec_ok(g, cin, p->dxpad, dxs, (size_t)n * cin * p->hp * p->wp)) /* (the padded tensor is the larger) */
            GPU_DISPATCH(g, T,
                         LAUNCH(k_unpad_add_nhwc_vec<T>, gpu_blocks(total / V), GPU_THREADS, 0, g->s, (const T *)p->dxpad, (T *)dxs,
                                (unsigned)(total / V), (unsigned)((size_t)cin / V), c->h, c->w, p->hp, p->wp, c->pt, c->pl,
                                p->cpad ? 0 : gpu_acc(g, li, 0)));
        else
            GPU_DISPATCH(g, T,
                         LAUNCH(k_unpad_add<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)p->dxpad, (T *)dxs, total, cin, c->h, c->w,
                                p->hp, p->wp, c->pt, c->pl, g->nhwc, p->cpad ? 0 : gpu_acc(g, li, 0)));
    }
    if (p->cpad) {
        const size_t rows = (size_t)n * c->h * c->w;
        GPU_DISPATCH(g, T,
                     LAUNCH(k_chan_unpad<T>, gpu_blocks(rows * c->cin), GPU_THREADS, 0, g->s, (const T *)p->dxc, (T *)dx, rows, c->cin, p->cpad,
                            gpu_acc(g, li, 0)));
    }
}

int gpunet_conv_channels(const GpuNet *g, int li) {
    if (li < 0 || li >= g->net->nlayer || g->impl[li] != &gpu_conv_impl) return -1;
    const ConvGpu *p = (const ConvGpu *)g->lp[li];
    return p->cpad ? p->cpad : ((const Conv *)g->net->layer[li].priv)->cin;
}

size_t gpunet_download_conv_filter(GpuNet *g, int li, float *dst) {
    if (li < 0 || li >= g->net->nlayer || g->impl[li] != &gpu_conv_impl) return 0;
    const Conv *c = (const Conv *)g->net->layer[li].priv;
    const ConvGpu *p = (const ConvGpu *)g->lp[li];
    const size_t count = (size_t)c->cout * c->kh * c->kw * (p->cpad ? p->cpad : c->cin / c->groups);
    const void *src = p->cpad ? p->wc : gpu_weights(g, c->pw);
    if (!gpu_half(g)) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, g->s));
        gpunet_sync(g);
        return count;
    }
    void *tmp = xmalloc(count * g->esize);
    CUDA_CHECK(cudaMemcpyAsync(tmp, src, count * g->esize, cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
    gpu_host_from_storage(g, tmp, dst, count);
    free(tmp);
    return count;
}

static void conv_destroy(GpuNet *g, Layer *l, int li) {
    (void)l;
    ConvGpu *p = (ConvGpu *)g->lp[li];
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->y);
    if (p->xp) cudnnDestroyTensorDescriptor(p->xp);
    cudnnDestroyFilterDescriptor(p->w);
    for (int d = 0; d < CONV_NDIR; d++)
        if (p->cd[d]) cudnnDestroyConvolutionDescriptor(p->cd[d]);
}

const GpuLayerImpl gpu_conv_impl = {"conv", conv_plan, conv_bind, conv_forward, conv_backward, conv_destroy, conv_choose};

int gpunet_conv_algorithm(const GpuNet *g, int li, int dir, int *deterministic) {
    if (li < 0 || li >= g->net->nlayer || g->impl[li] != &gpu_conv_impl || dir < 0 || dir >= CONV_NDIR) return -1;
    const ConvGpu *p = (const ConvGpu *)g->lp[li];
    if ((dir == CONV_BWD_DATA && g->net->layer[li].in[0] == g->net->input) || (dir != CONV_FWD && g->inference)) return -1; /* never run */
    if (deterministic) *deterministic = p->det[dir];
    return p->algo[dir];
}
