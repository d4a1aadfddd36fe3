/* pool.cu: the GPU half of max and average pooling (src/layers/pool.c) as kernels of its own:
 * TensorFlow's uneven SAME padding, max over in-bounds elements routed back to the first maximum,
 * average over the in-bounds count. */
#include <float.h>

#include "gpunet_internal.h"

typedef struct PoolGpu {
    int32_t *argmax; /* max: one per output element (in its layout), the pixel y * w + x of the input */
} PoolGpu;

struct PoolDims {
    int h, w, oh, ow, kh, kw, sh, sw, pt, pl;
    int c, nhwc; /* channels; 1: [n][h][w][c], 0: [n][c][h][w] */
};

static PoolDims dims(const GpuNet *g, const Layer *l, const Pool *p) {
    PoolDims d = {p->h, p->w, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw, p->pt, p->pl, g->net->node[l->in[0]].shape.c, g->nhwc};
    return d;
}

/* Element i of a [n][c][h][w] tensor (NCHW) or [n][h][w][c] (NHWC) as its pixel (y * w + x) and
 * the offset of its (sample, channel)'s pixel 0; pixels lie 1 (NCHW) or c (NHWC) elements apart. */
struct PoolAt {
    int pix;
    size_t base;
};
template <typename I> __device__ static PoolAt pool_at(I i, int h, int w, const PoolDims &d) {
    PoolAt a;
    const I hw = (I)h * (I)w;
    if (d.nhwc) {
        const I r = i / (I)d.c;
        a.pix = (int)(r % hw);
        a.base = (size_t)(r / hw * hw * (I)d.c + i % (I)d.c);
    } else {
        a.pix = (int)(i % hw);
        a.base = (size_t)(i - (I)a.pix);
    }
    return a;
}

/* the same (sample, channel)'s pixel 0 in a tensor of h2 x w2 pixels */
template <typename I> __device__ static size_t pool_rebase(I base, int h, int w, int h2, int w2, const PoolDims &d) {
    if (d.nhwc) return (size_t)(base / ((I)h * w * d.c) * ((I)h2 * w2 * d.c) + base % (I)d.c);
    return (size_t)(base / ((I)h * w) * ((I)h2 * w2));
}

__device__ static void window(const PoolDims &d, int oy, int ox, int *y0, int *y1, int *x0, int *x1) {
    int ys = oy * d.sh - d.pt, xs = ox * d.sw - d.pl;
    *y0 = ys < 0 ? 0 : ys;
    *x0 = xs < 0 ? 0 : xs;
    *y1 = ys + d.kh > d.h ? d.h : ys + d.kh;
    *x1 = xs + d.kw > d.w ? d.w : xs + d.kw;
}

/* The outputs whose windows hold input pixel (yy, xx): oy with oy*sh - pt <= yy < oy*sh - pt + kh,
 * in [*oy_lo, *oy_hi], and ox likewise */
__device__ static void covering(const PoolDims &d, int yy, int xx, int *oy_lo, int *oy_hi, int *ox_lo, int *ox_hi) {
    *oy_lo = yy + d.pt - d.kh + 1 < 0 ? 0 : (yy + d.pt - d.kh + d.sh) / d.sh;
    *ox_lo = xx + d.pl - d.kw + 1 < 0 ? 0 : (xx + d.pl - d.kw + d.sw) / d.sw;
    *oy_hi = (yy + d.pt) / d.sh;
    *ox_hi = (xx + d.pl) / d.sw;
    if (*oy_hi > d.oh - 1) *oy_hi = d.oh - 1;
    if (*ox_hi > d.ow - 1) *ox_hi = d.ow - 1;
}

/* The element-wise kernels' index arithmetic in I: 32-bit where input and output both have fewer
 * than 2^31 elements (pool_narrow), where each element's pixel, sample and channel cost a few 32-bit
 * divisions instead of 64-bit ones of a few dozen instructions each. */
template <typename T, typename I> __device__ void pool_forward_range(const T *x, T *y, int32_t *am, I total, const PoolDims &d, int is_max) {
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const PoolAt o = pool_at<I>(i, d.oh, d.ow, d);
        const int ox = o.pix % d.ow, oy = o.pix / d.ow, step = d.nhwc ? d.c : 1;
        const T *xp = x + pool_rebase<I>((I)o.base, d.oh, d.ow, d.h, d.w, d);
        int y0, y1, x0, x1;
        window(d, oy, ox, &y0, &y1, &x0, &x1);
        if (is_max) {
            float best = -FLT_MAX;
            int bi = y0 * d.w + x0;
            for (int yy = y0; yy < y1; yy++)
                for (int xx = x0; xx < x1; xx++) {
                    float v = to_f(xp[(size_t)(yy * d.w + xx) * step]);
                    if (v > best) {
                        best = v;
                        bi = yy * d.w + xx;
                    }
                }
            y[i] = xp[(size_t)bi * step];
            if (am) am[i] = bi;
        } else {
            float s = 0;
            for (int yy = y0; yy < y1; yy++)
                for (int xx = x0; xx < x1; xx++) s += to_f(xp[(size_t)(yy * d.w + xx) * step]);
            y[i] = from_f<T>(s / (float)((y1 - y0) * (x1 - x0)));
        }
    }
}
template <typename T> __global__ void k_pool_forward(const T *x, T *y, int32_t *am, size_t total, PoolDims d, int is_max, int narrow) {
    if (narrow)
        pool_forward_range<T, unsigned>(x, y, am, (unsigned)total, d, is_max);
    else
        pool_forward_range<T, size_t>(x, y, am, total, d, is_max);
}

/* gather form: each input element sums the outputs whose window holds it (no atomics) */
template <typename T, typename I>
__device__ void pool_backward_range(const T *dy, const int32_t *am, T *dx, I total, const PoolDims &d, int is_max, int acc) {
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const PoolAt at = pool_at<I>(i, d.h, d.w, d);
        const int xx = at.pix % d.w, yy = at.pix / d.w, step = d.nhwc ? d.c : 1;
        const size_t ob = pool_rebase<I>((I)at.base, d.h, d.w, d.oh, d.ow, d);
        const T *g = dy + ob;
        const int32_t *a = is_max ? am + ob : NULL;
        int oy_lo, oy_hi, ox_lo, ox_hi;
        covering(d, yy, xx, &oy_lo, &oy_hi, &ox_lo, &ox_hi);
        float s = 0;
        const int self = yy * d.w + xx;
        for (int oy = oy_lo; oy <= oy_hi; oy++)
            for (int ox = ox_lo; ox <= ox_hi; ox++) {
                const size_t k = (size_t)(oy * d.ow + ox) * step;
                if (is_max) {
                    if (a[k] == self) s += to_f(g[k]);
                } else {
                    int y0, y1, x0, x1;
                    window(d, oy, ox, &y0, &y1, &x0, &x1);
                    s += to_f(g[k]) / (float)((y1 - y0) * (x1 - x0));
                }
            }
        dx[i] = from_f<T>(acc ? to_f(dx[i]) + s : s);
    }
}
template <typename T>
__global__ void k_pool_backward(const T *dy, const int32_t *am, T *dx, size_t total, PoolDims d, int is_max, int acc, int narrow) {
    if (narrow)
        pool_backward_range<T, unsigned>(dy, am, dx, (unsigned)total, d, is_max, acc);
    else
        pool_backward_range<T, size_t>(dy, am, dx, total, d, is_max, acc);
}

/* NHWC with c a multiple of the 16-byte vector's V = 16 / sizeof(T) elements, every tensor 16-byte
 * aligned and fewer than 2^31 vectors (pool_vec): a thread takes a vector of V channels of one
 * pixel, its window walked once for all V (the kernels above take one element at a time, each
 * finding its pixel, sample and channel by several divisions). The same results, element for
 * element: the first maximum in the window's order (the output is that input element, as above),
 * the argmax in the output's layout, the sums in the same order. */
template <typename T> __global__ void k_pool_forward_nhwc(const T *x, T *y, int32_t *am, unsigned nvec, PoolDims d, int is_max) {
    constexpr int V = 16 / sizeof(T);
    const unsigned G = (unsigned)d.c / V, opix = (unsigned)(d.oh * d.ow);
    for (unsigned v = blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += gridDim.x * blockDim.x) {
        const unsigned gv = v % G, p = v / G, n = p / opix, pix = p % opix;
        const int oy = (int)pix / d.ow, ox = (int)pix % d.ow;
        const size_t in0 = (size_t)n * (size_t)(d.h * d.w); /* the sample's pixel 0 */
        int y0, y1, x0, x1;
        window(d, oy, ox, &y0, &y1, &x0, &x1);
        alignas(16) T out[V];
        if (is_max) {
            float best[V];
            alignas(16) int32_t bi[V];
            bool first = true;
            for (int yy = y0; yy < y1; yy++)
                for (int xx = x0; xx < x1; xx++) {
                    alignas(16) T a[V];
                    const int at = yy * d.w + xx;
                    gpu_load16(a, x, (in0 + (size_t)at) * G + gv);
#pragma unroll
                    for (int k = 0; k < V; k++) {
                        const float f = to_f(a[k]);
                        if (first) { /* the window's first element stands until one is greater */
                            out[k] = a[k];
                            bi[k] = at;
                            best[k] = f > -FLT_MAX ? f : -FLT_MAX;
                        } else if (f > best[k]) {
                            best[k] = f;
                            out[k] = a[k];
                            bi[k] = at;
                        }
                    }
                    first = false;
                }
            if (am)
                for (int k = 0; k < V; k += 4) reinterpret_cast<int4 *>(am)[((size_t)v * V + k) / 4] = *reinterpret_cast<const int4 *>(&bi[k]);
        } else {
            float sum[V];
#pragma unroll
            for (int k = 0; k < V; k++) sum[k] = 0;
            for (int yy = y0; yy < y1; yy++)
                for (int xx = x0; xx < x1; xx++) {
                    alignas(16) T a[V];
                    gpu_load16(a, x, (in0 + (size_t)(yy * d.w + xx)) * G + gv);
#pragma unroll
                    for (int k = 0; k < V; k++) sum[k] += to_f(a[k]);
                }
            const float cnt = (float)((y1 - y0) * (x1 - x0));
#pragma unroll
            for (int k = 0; k < V; k++) out[k] = from_f<T>(sum[k] / cnt);
        }
        gpu_store16(y, v, out);
    }
}

template <typename T>
__global__ void k_pool_backward_nhwc(const T *dy, const int32_t *am, T *dx, unsigned nvec, PoolDims d, int is_max, int acc) {
    constexpr int V = 16 / sizeof(T);
    const unsigned G = (unsigned)d.c / V, ipix = (unsigned)(d.h * d.w);
    for (unsigned v = blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += gridDim.x * blockDim.x) {
        const unsigned gv = v % G, p = v / G, n = p / ipix, pix = p % ipix;
        const int yy = (int)pix / d.w, xx = (int)pix % d.w, self = (int)pix;
        const size_t out0 = (size_t)n * (size_t)(d.oh * d.ow);
        int oy_lo, oy_hi, ox_lo, ox_hi;
        covering(d, yy, xx, &oy_lo, &oy_hi, &ox_lo, &ox_hi);
        float s[V];
#pragma unroll
        for (int k = 0; k < V; k++) s[k] = 0;
        for (int oy = oy_lo; oy <= oy_hi; oy++)
            for (int ox = ox_lo; ox <= ox_hi; ox++) {
                const size_t ov = (out0 + (size_t)(oy * d.ow + ox)) * G + gv;
                alignas(16) T g[V];
                gpu_load16(g, dy, ov);
                if (is_max) {
                    alignas(16) int32_t a[V];
                    for (int k = 0; k < V; k += 4) *reinterpret_cast<int4 *>(&a[k]) = reinterpret_cast<const int4 *>(am)[(ov * V + k) / 4];
#pragma unroll
                    for (int k = 0; k < V; k++)
                        if (a[k] == self) s[k] += to_f(g[k]);
                } else {
                    int y0, y1, x0, x1;
                    window(d, oy, ox, &y0, &y1, &x0, &x1);
                    const float cnt = (float)((y1 - y0) * (x1 - x0));
#pragma unroll
                    for (int k = 0; k < V; k++) s[k] += to_f(g[k]) / cnt;
                }
            }
        alignas(16) T o[V];
        if (acc) gpu_load16(o, dx, v);
#pragma unroll
        for (int k = 0; k < V; k++) o[k] = from_f<T>(acc ? to_f(o[k]) + s[k] : s[k]);
        gpu_store16(dx, v, o);
    }
}

/* Whether the vector kernels take a pooling of these tensors (NHWC, channels a multiple of V,
 * 16-byte aligned, the vectors of the larger of input and output countable in 31 bits) */
static bool pool_vec(const GpuNet *g, const Layer *l, size_t esize, const void *a, const void *b, const void *am) {
    const Shape si = g->net->node[l->in[0]].shape;
    const size_t V = 16 / esize;
    return g->nhwc && si.c % (int)V == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0 && ((uintptr_t)am & 15) == 0 &&
           shape_count(si) / V < 0x80000000u && shape_count(g->net->node[l->out].shape) / V < 0x80000000u;
}

/* Whether input and output both count fewer than 2^31 elements: the element-wise kernels' indices,
 * and those of the other tensor that they compute, in 32 bits */
static int pool_narrow(const GpuNet *g, const Layer *l) {
    return shape_count(g->net->node[l->in[0]].shape) < GPU_NARROW && shape_count(g->net->node[l->out].shape) < GPU_NARROW;
}

static void pool_plan(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace) {
    const Pool *p = (const Pool *)l->priv;
    g->lp[li] = xcalloc(1, sizeof(PoolGpu));
    /* max: the argmax the backward routes by (none in an inference net: the kernels skip it) */
    *scratch = p->kind == POOL_MAX && !g->inference ? shape_count(g->net->node[l->out].shape) * sizeof(int32_t) : 0;
    *workspace = 0;
}

static void pool_bind(GpuNet *g, Layer *l, int li, char *scratch) {
    (void)l;
    ((PoolGpu *)g->lp[li])->argmax = (int32_t *)scratch;
}

static void pool_forward(GpuNet *g, Layer *l, int li) {
    const Pool *p = (const Pool *)l->priv;
    size_t total = shape_count(g->net->node[l->out].shape);
    int32_t *am = ((PoolGpu *)g->lp[li])->argmax;
    const void *x = g->x[l->in[0]];
    void *y = g->x[l->out];
    if (pool_vec(g, l, g->esize, x, y, am)) {
        const unsigned nvec = (unsigned)(total / (16 / g->esize));
        GPU_DISPATCH(g, T,
                     LAUNCH(k_pool_forward_nhwc<T>, gpu_blocks(nvec), GPU_THREADS, 0, g->s, (const T *)x, (T *)y, am, nvec, dims(g, l, p),
                            p->kind == POOL_MAX));
        return;
    }
    GPU_DISPATCH(g, T,
                 LAUNCH(k_pool_forward<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)x, (T *)y, am, total, dims(g, l, p),
                        p->kind == POOL_MAX, pool_narrow(g, l)));
}

static void pool_backward(GpuNet *g, Layer *l, int li) {
    const Pool *p = (const Pool *)l->priv;
    void *dx = g->dx[l->in[0]];
    if (!dx) return;
    size_t total = shape_count(g->net->node[l->in[0]].shape);
    const int32_t *am = ((PoolGpu *)g->lp[li])->argmax;
    if (pool_vec(g, l, g->esize, g->dx[l->out], dx, am)) {
        const unsigned nvec = (unsigned)(total / (16 / g->esize));
        GPU_DISPATCH(g, T,
                     LAUNCH(k_pool_backward_nhwc<T>, gpu_blocks(nvec), GPU_THREADS, 0, g->s, (const T *)g->dx[l->out], am, (T *)dx, nvec,
                            dims(g, l, p), p->kind == POOL_MAX, gpu_acc(g, li, 0)));
        return;
    }
    GPU_DISPATCH(g, T,
                 LAUNCH(k_pool_backward<T>, gpu_blocks(total), GPU_THREADS, 0, g->s, (const T *)g->dx[l->out], ((PoolGpu *)g->lp[li])->argmax,
                                                                       (T *)dx, total, dims(g, l, p), p->kind == POOL_MAX, gpu_acc(g, li, 0),
                                                                       pool_narrow(g, l)));
}

const GpuLayerImpl gpu_maxpool_impl = {"maxpool", pool_plan, pool_bind, pool_forward, pool_backward, NULL, NULL};
const GpuLayerImpl gpu_avgpool_impl = {"avgpool", pool_plan, pool_bind, pool_forward, pool_backward, NULL, NULL};
