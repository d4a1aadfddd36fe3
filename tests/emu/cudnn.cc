/* cudnn.cc: the cuDNN subset of the emulated device (emu.h): handles, tensor, filter and
 * convolution descriptors, convolution in its three directions with Find, the heuristics
 * (Get*Algorithm_v7) and workspaces, and the legacy spatial batch normalisation. Everything is
 * checked at the call, as cuDNN's API reference says, and a call that cuDNN would reject returns
 * its status after a line saying why; the work itself runs on the handle's stream with every
 * argument captured at the call.
 *
 * The maths is written with plain loops, independently of src/layers/. The convolution algorithms
 * (cudnn_algo.cc) each compute in their own order and rounding, as cuDNN 9 documents them, and
 * support what cuDNN 9's tables say they support; this file reads the operands into dense fp32
 * copies (16-bit data exactly), hands them to the algorithm and rounds its result once, to the
 * output's type: y = alpha * result + beta * y, and beta == 0 never reads y (a NaN there does not
 * matter). Batch norm statistics accumulate in double.
 *
 * Find (cudnnFind*) lists every algorithm once with the descriptor's math type and, when that is
 * not DEFAULT, once more with CUDNN_DEFAULT_MATH (cuDNN 9 reports results per algorithm and math
 * type), each with its determinism as cuDNN reports it; unsupported ones and those whose workspace
 * exceeds the free memory as failing entries at the end; the others sorted by an emulated time:
 * the algorithm's arithmetic over its speed (tensor cores where it and the math type use them,
 * cudnn_algo.cc's model_ms) times a seeded noise of +-10 % drawn afresh for each result of each
 * call, as a GPU's timings vary (two Finds of one shape, in runs with different NVCNN_EMU_SEED,
 * may choose differently where two algorithms are close). The heuristics (Get*Algorithm_v7) list
 * the same results in the order of the noiseless model, time -1. NVCNN_EMU_FIND (a comma-separated
 * list) changes Find and the heuristics for tests: `duplicates` adds three more DEFAULT-math copies
 * of every supported algorithm ahead of everything; an algorithm's name (IMPLICIT_GEMM, FFT,
 * WINOGRAD_NONFUSED, ALGO_0, ..., as cuDNN's enums spell it without their prefix) or
 * `nondeterministic` puts those algorithms first in every direction where they are supported. The
 * compute calls refuse an unsupported algorithm and a workspace smaller than their algorithm
 * needs, and fill the one they use with the poison pattern.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cudnn_algo.h"
#include "emu.h"
#include "emu_counts.h"

struct cudnnContext {
    cudaStream_t stream = 0;
};

struct cudnnTensorStruct {
    bool set = false;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int n = 0, c = 0, h = 0, w = 0;
    int ns = 0, cs = 0, hs = 0, ws = 0; /* strides in elements */
};

struct cudnnFilterStruct {
    bool set = false;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
    int k = 0, c = 0, h = 0, w = 0;
};

struct cudnnConvolutionStruct {
    bool set = false;
    int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    int groups = 1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace {

typedef cudnnTensorStruct TD;
typedef cudnnFilterStruct FD;
typedef cudnnConvolutionStruct CD;

cudnnStatus_t bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cudnnStatus_t bad(const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emu::reject("%s", msg);
    return CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t unsupported(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cudnnStatus_t unsupported(const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emu::reject("%s", msg);
    return CUDNN_STATUS_NOT_SUPPORTED;
}

const char *type_name(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "another type";
    }
}

size_t type_size(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_DOUBLE: return 8;
    default: return 4;
    }
}

bool known_type(cudnnDataType_t t) {
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_DOUBLE || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

float load(const void *p, cudnnDataType_t t, size_t i) {
    switch (t) {
    case CUDNN_DATA_HALF: return __half2float(((const __half *)p)[i]);
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case CUDNN_DATA_DOUBLE: return (float)((const double *)p)[i];
    default: return ((const float *)p)[i];
    }
}

void store(void *p, cudnnDataType_t t, size_t i, double v) {
    switch (t) {
    case CUDNN_DATA_HALF: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case CUDNN_DATA_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    case CUDNN_DATA_DOUBLE: ((double *)p)[i] = v; break;
    default: ((float *)p)[i] = (float)v; break;
    }
}


/* the element (n, c, h, w) of a described tensor */
size_t at(const TD &d, int n, int c, int h, int w) { return (size_t)n * d.ns + (size_t)c * d.cs + (size_t)h * d.hs + (size_t)w * d.ws; }

/* bytes from the tensor's first element to just past its last */
size_t extent(const TD &d) { return (at(d, d.n - 1, d.c - 1, d.h - 1, d.w - 1) + 1) * type_size(d.type); }
size_t extent(const FD &f) { return (size_t)f.k * f.c * f.h * f.w * type_size(f.type); }

/* a dense float copy [n][c][h][w] of a tensor */
std::vector<float> dense(const TD &d, const void *p) {
    std::vector<float> out((size_t)d.n * d.c * d.h * d.w);
    size_t i = 0;
    for (int n = 0; n < d.n; n++)
        for (int c = 0; c < d.c; c++)
            for (int h = 0; h < d.h; h++)
                for (int w = 0; w < d.w; w++, i++) {
                    out[i] = load(p, d.type, at(d, n, c, h, w));
                }
    return out;
}

/* a dense float copy [k][c][h][w] of a filter (NCHW or NHWC in memory) */
std::vector<float> dense(const FD &f, const void *p) {
    std::vector<float> out((size_t)f.k * f.c * f.h * f.w);
    size_t i = 0;
    for (int k = 0; k < f.k; k++)
        for (int c = 0; c < f.c; c++)
            for (int h = 0; h < f.h; h++)
                for (int w = 0; w < f.w; w++, i++) {
                    size_t a = f.format == CUDNN_TENSOR_NHWC ? (((size_t)k * f.h + h) * f.w + w) * f.c + c : i;
                    out[i] = load(p, f.type, a);
                }
    return out;
}

/* y = alpha * r + beta * y over a tensor, r dense [n][c][h][w] */
void blend(const TD &d, void *y, const std::vector<float> &r, float alpha, float beta) {
    size_t i = 0;
    for (int n = 0; n < d.n; n++)
        for (int c = 0; c < d.c; c++)
            for (int h = 0; h < d.h; h++)
                for (int w = 0; w < d.w; w++, i++) {
                    size_t a = at(d, n, c, h, w);
                    double v = (double)alpha * r[i];
                    if (beta != 0.0f) v += (double)beta * load(y, d.type, a);
                    store(y, d.type, a, v);
                }
}

void blend(const FD &f, void *y, const std::vector<float> &r, float alpha, float beta) {
    size_t i = 0;
    for (int k = 0; k < f.k; k++)
        for (int c = 0; c < f.c; c++)
            for (int h = 0; h < f.h; h++)
                for (int w = 0; w < f.w; w++, i++) {
                    size_t a = f.format == CUDNN_TENSOR_NHWC ? (((size_t)k * f.h + h) * f.w + w) * f.c + c : i;
                    double v = (double)alpha * r[i];
                    if (beta != 0.0f) v += (double)beta * load(y, f.type, a);
                    store(y, f.type, a, v);
                }
}

float scalar(const void *p, cudnnDataType_t data) {
    /* alpha and beta: double for double data, float otherwise (cuDNN's scaling parameters) */
    return data == CUDNN_DATA_DOUBLE ? (float)*(const double *)p : *(const float *)p;
}

/* ---- convolution geometry ---- */
using emu::dnn::Arith;
using emu::dnn::Dir;
using emu::dnn::Geo;
using emu::dnn::BWD_DATA;
using emu::dnn::BWD_FILTER;
using emu::dnn::FWD;

int out_dim(int in, int pad, int filt, int dil, int stride) { return 1 + (in + 2 * pad - ((filt - 1) * dil + 1)) / stride; }

/* Checks x, w, conv and (if given) y against each other, as the compute calls do. */
cudnnStatus_t geometry(const char *call, const TD *x, const FD *w, const CD *cd, const TD *y, Geo *g) {
    if (!x || !w || !cd || !x->set || !w->set || !cd->set) return bad("%s: a descriptor is NULL or was never set", call);
    if (x->c != w->c * cd->groups)
        return bad("%s: the input has %d channels, the filter %d per group with %d groups (%d)", call, x->c, w->c, cd->groups,
                   w->c * cd->groups);
    if (w->k % cd->groups) return bad("%s: %d output channels do not divide into %d groups", call, w->k, cd->groups);
    g->n = x->n, g->c = x->c, g->h = x->h, g->w = x->w;
    g->k = w->k, g->cg = w->c, g->r = w->h, g->s = w->w, g->g = cd->groups;
    g->ph = cd->pad_h, g->pw = cd->pad_w, g->u = cd->u, g->v = cd->v, g->dh = cd->dil_h, g->dw = cd->dil_w;
    g->flip = cd->mode == CUDNN_CONVOLUTION;
    /* FFT's layouts: NCHW with each HW plane packed */
    g->hw_packed = x->ws == 1 && x->hs == x->w && (!y || (y->ws == 1 && y->hs == y->w));
    g->chw_packed = g->hw_packed && x->cs == x->h * x->w && x->ns == x->c * x->cs && (!y || (y->cs == y->h * y->w && y->ns == y->c * y->cs));
    g->oh = out_dim(x->h, cd->pad_h, w->h, cd->dil_h, cd->u);
    g->ow = out_dim(x->w, cd->pad_w, w->w, cd->dil_w, cd->v);
    if (g->oh < 1 || g->ow < 1)
        return bad("%s: a %dx%d filter (dilation %dx%d) does not fit the %dx%d input with padding %dx%d", call, w->h, w->w, cd->dil_h,
                   cd->dil_w, x->h, x->w, cd->pad_h, cd->pad_w);
    if (y && (!y->set || y->n != x->n || y->c != w->k || y->h != g->oh || y->w != g->ow))
        return bad("%s: the output descriptor is %dx%dx%dx%d, the convolution gives %dx%dx%dx%d", call, y ? y->n : 0, y ? y->c : 0,
                   y ? y->h : 0, y ? y->w : 0, x->n, w->k, g->oh, g->ow);
    /* the supported configurations: x, w, y of one type; FLOAT computes FLOAT, DOUBLE DOUBLE, HALF
     * FLOAT (PSEUDO_HALF) or HALF (TRUE_HALF), BFLOAT16 FLOAT (PSEUDO_BFLOAT16, sm_80 and later) */
    if (x->type != w->type || (y && y->type != x->type))
        return unsupported("%s: data types %s (input), %s (filter), %s (output) differ", call, type_name(x->type), type_name(w->type),
                           y ? type_name(y->type) : "-");
    const bool cfg = (x->type == CUDNN_DATA_FLOAT && cd->compute == CUDNN_DATA_FLOAT) ||
                     (x->type == CUDNN_DATA_DOUBLE && cd->compute == CUDNN_DATA_DOUBLE) ||
                     (x->type == CUDNN_DATA_HALF && (cd->compute == CUDNN_DATA_FLOAT || cd->compute == CUDNN_DATA_HALF)) ||
                     (x->type == CUDNN_DATA_BFLOAT16 && cd->compute == CUDNN_DATA_FLOAT);
    if (!cfg)
        return unsupported("%s: %s data with %s computation is not one of cuDNN's supported configurations", call, type_name(x->type),
                           type_name(cd->compute));
    return CUDNN_STATUS_SUCCESS;
}

/* ---- Find and the heuristics ---- */
struct Result {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnMathType_t math;
    cudnnDeterminism_t determinism;
};

/* NVCNN_EMU_FIND: whether it holds `token` (its comma-separated items) */
bool find_mode(const char *token) {
    const char *v = emu::env("NVCNN_EMU_FIND");
    if (!v) return false;
    const size_t n = strlen(token);
    for (const char *p = v; *p;) {
        const size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, token, n) == 0) return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* Checks NVCNN_EMU_FIND's items: duplicates, nondeterministic, or an algorithm's name. */
void check_find_mode() {
    const char *v = emu::env("NVCNN_EMU_FIND");
    for (const char *p = v ? v : ""; *p;) {
        const size_t len = strcspn(p, ",");
        std::string item(p, len);
        bool known = item == "duplicates" || item == "nondeterministic";
        for (int d = 0; d < 3 && !known; d++)
            for (int a = 0; a < emu::dnn::algo_count[d] && !known; a++) known = item == emu::dnn::algo_name((Dir)d, a);
        if (!known)
            emu::fatal("NVCNN_EMU_FIND=%s: '%s' is none of duplicates, nondeterministic, or an algorithm's name (IMPLICIT_GEMM, FFT, ALGO_0, ...)",
                       v, item.c_str());
        p += len + (p[len] == ',');
    }
}

/* whether NVCNN_EMU_FIND puts `algo` first */
bool preferred(Dir d, int algo) {
    return find_mode(emu::dnn::algo_name(d, algo)) || (find_mode("nondeterministic") && emu::dnn::determinism(d, algo) == CUDNN_NON_DETERMINISTIC);
}

/* Every algorithm in the descriptor's math type and (when that is not DEFAULT) in DEFAULT: the
 * supported ones by time (measured: the model with noise; heuristic: the model alone, reported as
 * -1), the failing ones after them. */
std::vector<Result> find(Dir d, const Geo &g, const CD &cd, cudnnDataType_t t, bool measured) {
    std::vector<Result> ok, failed;
    check_find_mode();
    const bool dups = measured && find_mode("duplicates");
    const size_t free_bytes = emu::mem_free();
    std::vector<double> key;
    for (int a = 0; a < emu::dnn::algo_count[d]; a++) {
        cudnnMathType_t maths[2] = {cd.math, CUDNN_DEFAULT_MATH};
        for (int m = 0; m < (cd.math == CUDNN_DEFAULT_MATH ? 1 : 2); m++) {
            const Arith ar = {t, cd.compute, maths[m]};
            Result r = {a, CUDNN_STATUS_SUCCESS, 0, emu::dnn::workspace(d, a, g, ar), maths[m], emu::dnn::determinism(d, a)};
            if (emu::dnn::unsupported_because(d, a, g, ar)) {
                r.status = CUDNN_STATUS_NOT_SUPPORTED, r.time = -1, r.memory = 0;
                failed.push_back(r);
            } else if (r.memory > free_bytes) {
                r.status = CUDNN_STATUS_ALLOC_FAILED, r.time = -1, r.memory = 0;
                failed.push_back(r);
            } else {
                double ms = emu::dnn::model_ms(d, a, g, ar) * (measured ? emu::dnn::noise(0.1) : 1.0);
                if (preferred(d, a)) ms *= 1e-3;
                r.time = measured ? (float)ms : -1.0f;
                key.push_back(ms);
                ok.push_back(r);
            }
        }
    }
    std::vector<size_t> order(ok.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key[x] < key[y]; });
    std::vector<Result> out;
    if (dups)
        for (int copy = 0; copy < 3; copy++)
            for (size_t i : order)
                if (ok[i].math == CUDNN_DEFAULT_MATH || cd.math == CUDNN_DEFAULT_MATH) {
                    Result q = ok[i];
                    q.math = CUDNN_DEFAULT_MATH;
                    q.time = ok[i].time * 0.5f;
                    out.push_back(q);
                }
    for (size_t i : order) out.push_back(ok[i]);
    out.insert(out.end(), failed.begin(), failed.end());
    return out;
}

template <typename Perf> void report(const std::vector<Result> &all, int requested, int *returned, Perf *perf) {
    int n = 0;
    for (const Result &r : all) {
        if (n == requested) break;
        Perf p;
        memset(&p, 0, sizeof p);
        p.algo = (decltype(p.algo))r.algo;
        p.status = r.status;
        p.time = r.time;
        p.memory = r.memory;
        p.determinism = r.determinism;
        p.mathType = r.math;
        perf[n++] = p;
    }
    *returned = n;
}

/* Checks a compute call's algorithm and workspace. */
cudnnStatus_t check_algo(const char *call, Dir d, int algo, const Geo &g, const Arith &ar, const void *ws, size_t ws_bytes, size_t *need) {
    if (algo < 0 || algo >= emu::dnn::algo_count[d]) return bad("%s: algorithm %d is not one of cuDNN's", call, algo);
    if (const char *why = emu::dnn::unsupported_because(d, algo, g, ar))
        return unsupported("%s: algorithm %d (%s) does not support this configuration: %s", call, algo, emu::dnn::algo_name(d, algo), why);
    *need = emu::dnn::workspace(d, algo, g, ar);
    if (ws_bytes < *need)
        return bad("%s: algorithm %d needs %zu bytes of workspace, %zu given", call, algo, *need, ws_bytes);
    if (*need && (!ws || !emu::is_device_range(ws, *need)))
        emu::fatal("%s: the workspace (%zu bytes needed) is not inside a device allocation", call, *need);
    return CUDNN_STATUS_SUCCESS;
}

void need_device(const char *call, const char *what, const void *p, size_t bytes) {
    if (!emu::is_device_range(p, bytes)) {
        char d[200];
        emu::describe_pointer(p, d, sizeof d);
        emu::fatal("%s: %s (%zu bytes) is %s, not inside one device allocation", call, what, bytes, d);
    }
}

bool valid_math(cudnnMathType_t m) {
    return m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || m == CUDNN_FMA_MATH;
}

} // namespace

extern "C" {

/* ---- handles ---- */
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t s) {
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    emu::Lock lock;
    if (!h) return bad("cudnnCreate: handle NULL");
    *h = new cudnnContext;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
    emu::Lock lock;
    if (!h) return bad("cudnnDestroy: handle NULL");
    emu::sync_stream(h->stream);
    delete h;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
    if (!h) return bad("cudnnSetStream: handle NULL");
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s) {
    if (!h || !s) return bad("cudnnGetStream: NULL argument");
    *s = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- tensor descriptors ---- */
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
    if (!d) return bad("cudnnCreateTensorDescriptor: NULL");
    *d = new cudnnTensorStruct;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t t, int n, int c, int h, int w, int ns, int cs, int hs,
                                           int ws) {
    if (!d) return bad("cudnnSetTensor4dDescriptorEx: descriptor NULL");
    if (!known_type(t)) return bad("cudnnSetTensor4dDescriptorEx: data type %d", (int)t);
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || ns <= 0 || cs <= 0 || hs <= 0 || ws <= 0)
        return bad("cudnnSetTensor4dDescriptorEx: dimensions %dx%dx%dx%d, strides %d,%d,%d,%d: all must be positive", n, c, h, w, ns, cs,
                   hs, ws);
    /* cuDNN limits a tensor, its padding included, to 2^31 elements */
    if ((double)(n - 1) * ns + (double)(c - 1) * cs + (double)(h - 1) * hs + (double)(w - 1) * ws + 1 > 2147483647.0)
        return unsupported("cudnnSetTensor4dDescriptorEx: more than 2^31 elements");
    d->set = true;
    d->type = t;
    d->n = n, d->c = c, d->h = h, d->w = w;
    d->ns = ns, d->cs = cs, d->hs = hs, d->ws = ws;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h, int w) {
    if (f == CUDNN_TENSOR_NCHW) return cudnnSetTensor4dDescriptorEx(d, t, n, c, h, w, c * h * w, h * w, w, 1);
    if (f == CUDNN_TENSOR_NHWC) return cudnnSetTensor4dDescriptorEx(d, t, n, c, h, w, h * w * c, 1, w * c, c);
    return bad("cudnnSetTensor4dDescriptor: format %d (NCHW and NHWC are emulated)", (int)f);
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb, const int dims[], const int strides[]) {
    if (nb != 4 || !dims || !strides) return unsupported("cudnnSetTensorNdDescriptor: %d dimensions (4 are emulated)", nb);
    return cudnnSetTensor4dDescriptorEx(d, t, dims[0], dims[1], dims[2], dims[3], strides[0], strides[1], strides[2], strides[3]);
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t *t, int *n, int *c, int *h, int *w, int *ns,
                                         int *cs, int *hs, int *ws) {
    if (!d || !d->set) return bad("cudnnGetTensor4dDescriptor: descriptor NULL or not set");
    *t = d->type, *n = d->n, *c = d->c, *h = d->h, *w = d->w, *ns = d->ns, *cs = d->cs, *hs = d->hs, *ws = d->ws;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- filter descriptors ---- */
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
    if (!d) return bad("cudnnCreateFilterDescriptor: NULL");
    *d = new cudnnFilterStruct;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h, int w) {
    if (!d) return bad("cudnnSetFilter4dDescriptor: descriptor NULL");
    if (!known_type(t) || (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC))
        return bad("cudnnSetFilter4dDescriptor: data type %d, format %d", (int)t, (int)f);
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return bad("cudnnSetFilter4dDescriptor: dimensions %dx%dx%dx%d must be positive", k, c, h, w);
    d->set = true;
    d->type = t;
    d->format = f;
    d->k = k, d->c = c, d->h = h, d->w = w;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- convolution descriptors ---- */
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    if (!d) return bad("cudnnCreateConvolutionDescriptor: NULL");
    *d = new cudnnConvolutionStruct;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u, int v, int dh, int dw,
                                              cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
    if (!d) return bad("cudnnSetConvolution2dDescriptor: descriptor NULL");
    if (ph < 0 || pw < 0 || u <= 0 || v <= 0 || dh <= 0 || dw <= 0)
        return bad("cudnnSetConvolution2dDescriptor: padding %dx%d must be >= 0, strides %dx%d and dilations %dx%d > 0", ph, pw, u, v, dh,
                   dw);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return bad("cudnnSetConvolution2dDescriptor: mode %d", (int)mode);
    if (!known_type(compute)) return bad("cudnnSetConvolution2dDescriptor: compute type %d", (int)compute);
    d->set = true;
    d->pad_h = ph, d->pad_w = pw, d->u = u, d->v = v, d->dil_h = dh, d->dil_w = dw;
    d->mode = mode;
    d->compute = compute;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
    if (!d || groups < 1) return bad("cudnnSetConvolutionGroupCount: %d groups", groups);
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int *groups) {
    if (!d || !groups) return bad("cudnnGetConvolutionGroupCount: NULL argument");
    *groups = d->groups;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
    if (!d || !valid_math(m)) return bad("cudnnSetConvolutionMathType: math type %d", (int)m);
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t *m) {
    if (!d || !m) return bad("cudnnGetConvolutionMathType: NULL argument");
    *m = d->math;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n, int *c, int *h, int *wo) {
    Geo g{};
    cudnnStatus_t st = geometry("cudnnGetConvolution2dForwardOutputDim", x, w, cd, nullptr, &g);
    if (st) return st;
    *n = g.n, *c = g.k, *h = g.oh, *wo = g.ow;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- Find and workspaces ---- */
} /* extern "C" */

static long finds_made, heuristics_made, transposes_made; /* emu_counts.h */

/* Find (synchronous: it runs the algorithms, so it waits for the stream first), or the
 * heuristics (`measured` 0: nothing runs). */
template <typename Perf>
static cudnnStatus_t find_call(const char *call, Dir d, cudnnHandle_t h, const TD *x, const FD *w, const CD *cd, const TD *y, int requested,
                               int *returned, Perf *perf, bool measured) {
    emu::Lock lock;
    Geo g{};
    if (!h || !returned || !perf || requested <= 0) return bad("%s: NULL argument or count %d", call, requested);
    cudnnStatus_t st = geometry(call, x, w, cd, y, &g);
    if (st) return st;
    if (measured && emu::capture_refuses(call)) return CUDNN_STATUS_EXECUTION_FAILED_CUDART; /* it synchronises and allocates */
    if (measured) emu::sync_stream(h->stream);
    report(find(d, g, *cd, x->type, measured), requested, returned, perf);
    (measured ? finds_made : heuristics_made)++;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" {

long emu_cudnn_finds(void) { return finds_made; }
long emu_cudnn_transposes(void) { return transposes_made; }
long emu_cudnn_heuristics(void) { return heuristics_made; }

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t y, const int requested,
                                                   int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    return find_call("cudnnFindConvolutionForwardAlgorithm", FWD, h, x, w, cd, y, requested, returned, perf, true);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                        const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dx,
                                                        const int requested, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    return find_call("cudnnFindConvolutionBackwardDataAlgorithm", BWD_DATA, h, dx, w, cd, dy, requested, returned, perf, true);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                          const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t cd,
                                                          const cudnnFilterDescriptor_t dw, const int requested, int *returned,
                                                          cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    return find_call("cudnnFindConvolutionBackwardFilterAlgorithm", BWD_FILTER, h, x, dw, cd, dy, requested, returned, perf, true);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t y,
                                                     const int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    return find_call("cudnnGetConvolutionForwardAlgorithm_v7", FWD, h, x, w, cd, y, requested, returned, perf, false);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dx,
                                                          const int requested, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    return find_call("cudnnGetConvolutionBackwardDataAlgorithm_v7", BWD_DATA, h, dx, w, cd, dy, requested, returned, perf, false);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t cd,
                                                            const cudnnFilterDescriptor_t dw, const int requested, int *returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    return find_call("cudnnGetConvolutionBackwardFilterAlgorithm_v7", BWD_FILTER, h, x, dw, cd, dy, requested, returned, perf, false);
}

static cudnnStatus_t ws_size(const char *call, Dir d, int algo, const TD *x, const FD *w, const CD *cd, const TD *y, size_t *bytes) {
    Geo g{};
    if (!bytes) return bad("%s: NULL size", call);
    cudnnStatus_t st = geometry(call, x, w, cd, y, &g);
    if (st) return st;
    if (algo < 0 || algo >= emu::dnn::algo_count[d]) return bad("%s: algorithm %d is not one of cuDNN's", call, algo);
    const Arith ar = {x->type, cd->compute, cd->math};
    if (const char *why = emu::dnn::unsupported_because(d, algo, g, ar))
        return unsupported("%s: algorithm %d (%s) does not support this configuration: %s", call, algo, emu::dnn::algo_name(d, algo), why);
    *bytes = emu::dnn::workspace(d, algo, g, ar);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_size("cudnnGetConvolutionForwardWorkspaceSize", FWD, (int)algo, x, w, cd, y, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_size("cudnnGetConvolutionBackwardDataWorkspaceSize", BWD_DATA, (int)algo, dx, w, cd, dy, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", BWD_FILTER, (int)algo, x, dw, cd, dy, bytes);
}

/* ---- the convolutions ---- */
} /* extern "C" */

/* "cudnnConvolutionForward (FFT)": the work's name in diagnostics and NVCNN_EMU_PROFILE's table
 * (kept for the process's life, one per call and algorithm) */
static const char *work_name(const char *call, Dir d, int algo) {
    static std::vector<std::string> names[3];
    std::vector<std::string> &v = names[d];
    if (v.empty())
        for (int a = 0; a < emu::dnn::algo_count[d]; a++) v.push_back(std::string(call) + " (" + emu::dnn::algo_name(d, a) + ")");
    return v[(size_t)algo].c_str();
}

/* One convolution call: direction d reads two of x, w and y (dy) and writes the third into `out`
 * (out = alpha * result + beta * out). */
static cudnnStatus_t convolve(const char *call, Dir d, cudnnHandle_t h, const void *alpha, const void *beta, const TD *xd, const void *x,
                              const FD *wd, const void *w, const TD *yd, const void *y, void *out, const CD *cd, int algo, void *ws,
                              size_t ws_bytes) {
    emu::Lock lock;
    Geo g{};
    size_t need = 0;
    if (!h || !alpha || !beta) return bad("%s: NULL handle, alpha or beta", call);
    cudnnStatus_t st = geometry(call, xd, wd, cd, yd, &g);
    const Arith ar = {xd->type, cd->compute, cd->math};
    if (!st) st = check_algo(call, d, algo, g, ar, ws, ws_bytes, &need);
    if (st) return st;
    need_device(call, d == BWD_DATA ? "dx" : "x", d == BWD_DATA ? out : x, extent(*xd));
    need_device(call, d == BWD_FILTER ? "dw" : "w", d == BWD_FILTER ? out : w, extent(*wd));
    need_device(call, d == FWD ? "y" : "dy", d == FWD ? out : y, extent(*yd));
    /* cuDNN's tensor-core kernels are NHWC: given NCHW operands, a 16-bit (or TF32) tensor-op
     * convolution transposes each of them to NHWC first and its result back (the developer
     * guide's "Tensor Core Operations": NCHW data are transformed internally, at a cost). One
     * transpose counted per NCHW operand (the two tensors, the filter). */
    if (emu::dnn::uses_tensor_cores(d, algo, ar) && (xd->type == CUDNN_DATA_HALF || xd->type == CUDNN_DATA_BFLOAT16))
        transposes_made += (xd->cs != 1) + (yd->cs != 1) + (wd->format == CUDNN_TENSOR_NCHW);
    const TD X = *xd, Y = *yd;
    const FD W = *wd;
    const float a = scalar(alpha, xd->type), b = scalar(beta, xd->type);
    emu::enqueue(h->stream, work_name(call, d, algo), [=]() {
        if (need) emu::poison(ws, need);
        if (d == FWD) {
            std::vector<float> yv((size_t)g.n * g.k * g.oh * g.ow);
            emu::dnn::compute(d, algo, g, ar, dense(X, x), dense(W, w), yv);
            blend(Y, out, yv, a, b);
        } else if (d == BWD_DATA) {
            std::vector<float> dxv((size_t)g.n * g.c * g.h * g.w);
            emu::dnn::compute(d, algo, g, ar, dense(Y, y), dense(W, w), dxv);
            blend(X, out, dxv, a, b);
        } else {
            std::vector<float> dwv((size_t)g.k * g.cg * g.r * g.s);
            emu::dnn::compute(d, algo, g, ar, dense(X, x), dense(Y, y), dwv);
            blend(W, out, dwv, a, b);
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" {

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                      const cudnnTensorDescriptor_t yd, void *y) {
    return convolve("cudnnConvolutionForward", FWD, h, alpha, beta, xd, x, wd, w, yd, nullptr, y, cd, (int)algo, ws, ws_bytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx) {
    return convolve("cudnnConvolutionBackwardData", BWD_DATA, h, alpha, beta, dxd, nullptr, wd, w, dyd, dy, dx, cd, (int)algo, ws, ws_bytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw) {
    return convolve("cudnnConvolutionBackwardFilter", BWD_FILTER, h, alpha, beta, xd, x, dwd, nullptr, dyd, dy, dw, cd, (int)algo, ws,
                    ws_bytes);
}

} /* extern "C" */

/* ---- batch normalisation (legacy, spatial) ---- */
/* xDesc, yDesc of one data type (float, half or double: the legacy calls' types; bf16 is refused:
 * the backend has batch norm kernels of its own for it), the scale/bias/mean/variance descriptor
 * (1, C, 1, 1) in float (double for double data), epsilon >= CUDNN_BN_MIN_EPSILON. */
static cudnnStatus_t bn_check(const char *call, cudnnBatchNormMode_t mode, const TD *x, const TD *y, const TD *p, double eps) {
    if (!x || !y || !p || !x->set || !y->set || !p->set) return bad("%s: a descriptor is NULL or was never set", call);
    if (mode != CUDNN_BATCHNORM_SPATIAL) return unsupported("%s: mode %d (the spatial mode is emulated)", call, (int)mode);
    if (x->n != y->n || x->c != y->c || x->h != y->h || x->w != y->w)
        return bad("%s: x is %dx%dx%dx%d, y %dx%dx%dx%d", call, x->n, x->c, x->h, x->w, y->n, y->c, y->h, y->w);
    if (x->type != y->type) return bad("%s: x is %s, y %s", call, type_name(x->type), type_name(y->type));
    if (x->type != CUDNN_DATA_FLOAT && x->type != CUDNN_DATA_HALF && x->type != CUDNN_DATA_DOUBLE)
        return unsupported("%s: %s data", call, type_name(x->type));
    if (p->n != 1 || p->c != x->c || p->h != 1 || p->w != 1)
        return bad("%s: the parameter descriptor is %dx%dx%dx%d, want 1x%dx1x1", call, p->n, p->c, p->h, p->w, x->c);
    if (p->type != (x->type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT))
        return bad("%s: the parameters are %s for %s data", call, type_name(p->type), type_name(x->type));
    if (!(eps >= CUDNN_BN_MIN_EPSILON) || eps <= 0) return bad("%s: epsilon %g", call, eps);
    if (x->n * x->h * x->w < 2 && strstr(call, "Training")) return bad("%s: one value per channel has no variance", call);
    return CUDNN_STATUS_SUCCESS;
}

/* per channel c: sum over n, h, w of f(n, c, h, w) in double, in order */
template <typename F> static double channel_sum(const TD &d, int c, F f) {
    double s = 0;
    for (int n = 0; n < d.n; n++)
        for (int h = 0; h < d.h; h++)
            for (int w = 0; w < d.w; w++) s += f(at(d, n, c, h, w));
    return s;
}

extern "C" {

cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
                                                     const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t yd, void *y,
                                                     const cudnnTensorDescriptor_t pd, const void *scale, const void *bias, double factor,
                                                     void *run_mean, void *run_var, double eps, void *save_mean, void *save_invstd) {
    emu::Lock lock;
    const char *call = "cudnnBatchNormalizationForwardTraining";
    if (!h || !alpha || !beta || !scale || !bias) return bad("%s: NULL argument", call);
    cudnnStatus_t st = bn_check(call, mode, xd, yd, pd, eps);
    if (st) return st;
    if ((run_mean == nullptr) != (run_var == nullptr)) return bad("%s: one of the running averages is NULL, not both", call);
    if ((save_mean == nullptr) != (save_invstd == nullptr)) return bad("%s: one of the saved statistics is NULL, not both", call);
    const size_t pb = (size_t)xd->c * type_size(pd->type);
    need_device(call, "x", x, extent(*xd));
    need_device(call, "y", y, extent(*yd));
    need_device(call, "scale", scale, pb);
    need_device(call, "bias", bias, pb);
    if (run_mean) need_device(call, "the running mean", run_mean, pb), need_device(call, "the running variance", run_var, pb);
    if (save_mean) need_device(call, "the saved mean", save_mean, pb), need_device(call, "the saved inverse variance", save_invstd, pb);
    const TD X = *xd, Y = *yd;
    const cudnnDataType_t pt = pd->type;
    const float a = scalar(alpha, xd->type), b = scalar(beta, xd->type);
    emu::enqueue(h->stream, call, [=]() {
        const double m = (double)X.n * X.h * X.w;
#pragma omp parallel for schedule(static) if ((double)X.n * X.c * X.h * X.w > 65536)
        for (int c = 0; c < X.c; c++) {
            const double mean = channel_sum(X, c, [&](size_t i) { return (double)load(x, X.type, i); }) / m;
            const double var = channel_sum(X, c, [&](size_t i) {
                                   double d = load(x, X.type, i) - mean;
                                   return d * d;
                               }) / m;
            const double invstd = 1.0 / sqrt(var + eps), g = load(scale, pt, (size_t)c), bb = load(bias, pt, (size_t)c);
            for (int n = 0; n < X.n; n++)
                for (int hh = 0; hh < X.h; hh++)
                    for (int w = 0; w < X.w; w++) {
                        const size_t xi = at(X, n, c, hh, w), yi = at(Y, n, c, hh, w);
                        double v = a * (g * (load(x, X.type, xi) - mean) * invstd + bb);
                        if (b != 0.0f) v += b * load(y, Y.type, yi);
                        store(y, Y.type, yi, v);
                    }
            if (run_mean) { /* the running variance uses the unbiased variance (cuDNN's documentation) */
                store(run_mean, pt, (size_t)c, (1 - factor) * load(run_mean, pt, (size_t)c) + factor * mean);
                store(run_var, pt, (size_t)c, (1 - factor) * load(run_var, pt, (size_t)c) + factor * var * m / (m - 1));
            }
            if (save_mean) {
                store(save_mean, pt, (size_t)c, mean);
                store(save_invstd, pt, (size_t)c, invstd);
            }
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
                                                      const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t yd, void *y,
                                                      const cudnnTensorDescriptor_t pd, const void *scale, const void *bias,
                                                      const void *est_mean, const void *est_var, double eps) {
    emu::Lock lock;
    const char *call = "cudnnBatchNormalizationForwardInference";
    if (!h || !alpha || !beta || !scale || !bias || !est_mean || !est_var) return bad("%s: NULL argument", call);
    cudnnStatus_t st = bn_check(call, mode, xd, yd, pd, eps);
    if (st) return st;
    const size_t pb = (size_t)xd->c * type_size(pd->type);
    need_device(call, "x", x, extent(*xd));
    need_device(call, "y", y, extent(*yd));
    need_device(call, "scale", scale, pb);
    need_device(call, "bias", bias, pb);
    need_device(call, "the estimated mean", est_mean, pb);
    need_device(call, "the estimated variance", est_var, pb);
    const TD X = *xd, Y = *yd;
    const cudnnDataType_t pt = pd->type;
    const float a = scalar(alpha, xd->type), b = scalar(beta, xd->type);
    emu::enqueue(h->stream, call, [=]() {
#pragma omp parallel for schedule(static) if ((double)X.n * X.c * X.h * X.w > 65536)
        for (int c = 0; c < X.c; c++) {
            const double mean = load(est_mean, pt, (size_t)c), invstd = 1.0 / sqrt((double)load(est_var, pt, (size_t)c) + eps);
            const double g = load(scale, pt, (size_t)c), bb = load(bias, pt, (size_t)c);
            for (int n = 0; n < X.n; n++)
                for (int hh = 0; hh < X.h; hh++)
                    for (int w = 0; w < X.w; w++) {
                        const size_t xi = at(X, n, c, hh, w), yi = at(Y, n, c, hh, w);
                        double v = a * (g * (load(x, X.type, xi) - mean) * invstd + bb);
                        if (b != 0.0f) v += b * load(y, Y.type, yi);
                        store(y, Y.type, yi, v);
                    }
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha_d, const void *beta_d,
                                              const void *alpha_p, const void *beta_p, const cudnnTensorDescriptor_t xd, const void *x,
                                              const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnTensorDescriptor_t dxd, void *dx,
                                              const cudnnTensorDescriptor_t pd, const void *scale, void *dscale, void *dbias, double eps,
                                              const void *saved_mean, const void *saved_invstd) {
    emu::Lock lock;
    const char *call = "cudnnBatchNormalizationBackward";
    if (!h || !alpha_d || !beta_d || !alpha_p || !beta_p || !scale || !dscale || !dbias) return bad("%s: NULL argument", call);
    cudnnStatus_t st = bn_check(call, mode, xd, dyd, pd, eps);
    if (!st) st = bn_check(call, mode, xd, dxd, pd, eps);
    if (st) return st;
    if ((saved_mean == nullptr) != (saved_invstd == nullptr)) return bad("%s: one of the saved statistics is NULL, not both", call);
    const size_t pb = (size_t)xd->c * type_size(pd->type);
    need_device(call, "x", x, extent(*xd));
    need_device(call, "dy", dy, extent(*dyd));
    need_device(call, "dx", dx, extent(*dxd));
    need_device(call, "scale", scale, pb);
    need_device(call, "the scale's gradient", dscale, pb);
    need_device(call, "the bias's gradient", dbias, pb);
    if (saved_mean) need_device(call, "the saved mean", saved_mean, pb), need_device(call, "the saved inverse variance", saved_invstd, pb);
    const TD X = *xd, DY = *dyd, DX = *dxd;
    const cudnnDataType_t pt = pd->type;
    const float ad = scalar(alpha_d, xd->type), bd = scalar(beta_d, xd->type), ap = scalar(alpha_p, xd->type), bp = scalar(beta_p, xd->type);
    emu::enqueue(h->stream, call, [=]() {
        const double m = (double)X.n * X.h * X.w;
#pragma omp parallel for schedule(static) if ((double)X.n * X.c * X.h * X.w > 65536)
        for (int c = 0; c < X.c; c++) {
            double mean, invstd;
            if (saved_mean) {
                mean = load(saved_mean, pt, (size_t)c);
                invstd = load(saved_invstd, pt, (size_t)c);
            } else { /* recomputed from x */
                mean = channel_sum(X, c, [&](size_t i) { return (double)load(x, X.type, i); }) / m;
                const double var = channel_sum(X, c, [&](size_t i) {
                                       double d = load(x, X.type, i) - mean;
                                       return d * d;
                                   }) / m;
                invstd = 1.0 / sqrt(var + eps);
            }
            double sdy = 0, sdyx = 0;
            for (int n = 0; n < X.n; n++)
                for (int hh = 0; hh < X.h; hh++)
                    for (int w = 0; w < X.w; w++) {
                        const double d = load(dy, DY.type, at(DY, n, c, hh, w)), xh = (load(x, X.type, at(X, n, c, hh, w)) - mean) * invstd;
                        sdy += d;
                        sdyx += d * xh;
                    }
            const double g = load(scale, pt, (size_t)c);
            for (int n = 0; n < X.n; n++)
                for (int hh = 0; hh < X.h; hh++)
                    for (int w = 0; w < X.w; w++) {
                        const size_t di = at(DX, n, c, hh, w);
                        const double xh = (load(x, X.type, at(X, n, c, hh, w)) - mean) * invstd;
                        double v = ad * (g * invstd * (load(dy, DY.type, at(DY, n, c, hh, w)) - (sdy + xh * sdyx) / m));
                        if (bd != 0.0f) v += bd * load(dx, DX.type, di);
                        store(dx, DX.type, di, v);
                    }
            double ds = ap * sdyx, db = ap * sdy;
            if (bp != 0.0f) ds += bp * load(dscale, pt, (size_t)c), db += bp * load(dbias, pt, (size_t)c);
            store(dscale, pt, (size_t)c, ds);
            store(dbias, pt, (size_t)c, db);
        }
    });
    return CUDNN_STATUS_SUCCESS;
}

} /* extern "C" */
