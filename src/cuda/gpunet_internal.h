/* gpunet_internal.h: what the GPU halves of the layers share with the core (gpunet.cu). */
#ifndef NVCNN_GPUNET_INTERNAL_H
#define NVCNN_GPUNET_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <nccl.h>

#include "common.h"

extern "C" {
#include "config.h"
#include "convalgo.h"
#include "gpu.h"
#include "gpunet.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "net.h"
#include "util.h"
}

/* The GPU half of one layer type. plan() runs once, before the activation arena exists: it
 * creates descriptors, measures algorithms, and reports the device scratch bytes the layer needs
 * for itself (kept across forward and backward) and any shared cuDNN workspace it needs
 * whatever the algorithms. Once every layer is planned and the arena's size is known, choose()
 * picks the layer's algorithms, the fastest whose workspace fits in `limit` bytes (the memory
 * left after the arena and a margin), and returns the shared workspace they need. bind() hands
 * the layer its scratch (256-byte aligned). Layers that need none of these leave them NULL.
 * destroy() releases what the layer's state holds (descriptors); the core frees g->lp[li]. */
/* What the fusion pass (fuse.cu) gave batch norm layer li: out, the node it writes (-1: not
 * fused: its own output); z, the residual it adds before the ReLU (-1: none); relu, 1 when a
 * ReLU follows; add_li and add_k, the absorbed add and z's slot in it (z's gradient is written
 * or added as that add's backward would have, gpu_acc). */
typedef struct GpuFused {
    int out, z, relu, add_li, add_k;
} GpuFused;

typedef struct GpuLayerImpl {
    const char *type;
    void (*plan)(GpuNet *g, Layer *l, int li, size_t *scratch, size_t *workspace);
    void (*bind)(GpuNet *g, Layer *l, int li, char *scratch);
    void (*forward)(GpuNet *g, Layer *l, int li);
    void (*backward)(GpuNet *g, Layer *l, int li);
    void (*destroy)(GpuNet *g, Layer *l, int li);
    size_t (*choose)(GpuNet *g, Layer *l, int li, size_t limit);
} GpuLayerImpl;

struct GpuNet {
    Net *net;
    int device, prec;
    int nhwc;                                 /* 1: activations, gradients NHWC and filters KRSC (gpunet.h) */
    int fuse;                                 /* 1: the fusion pass ran (fuse.cu) */
    GpuFused *fused;                          /* [nlayer] (fuse.cu) */
    char *absorbed;                           /* [nlayer] 1: runs inside a fused batch norm (skipped) */
    int nfused_relu, nfused_add;              /* batch norms fused with a ReLU; with an add and a ReLU */
    cudaStream_t s;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    float *params, *grads, *state, *velocity; /* arenas, fp32; parameter p at poff[p] (64-element aligned) */
    size_t *poff, P;                          /* [nparam] device offsets; arena length (floats) */
    float *host;                              /* [P] staging for host <-> device copies */
    /* activations and their gradients hold elements of the precision's storage type (float,
     * __half or __nv_bfloat16: esize bytes, cuDNN type dtype, cuBLAS type ctype) */
    void **x, **dx;                           /* [nnode] node data and grad (dx[input] NULL) */
    size_t esize;
    cudnnDataType_t dtype;
    cudaDataType_t ctype;
    /* fp16/bf16: the weights in the storage type (cast from the fp32 master copy after every
     * update) and the convolutions' weight gradients in it (cast into grads per layer) */
    void *wh, *gh;
    size_t *half_host, *half_dev, half_max;   /* the convolutions' weight ranges (offset, length) in gh */
    int nhalf;
    float *loss_vec;                          /* [batch] per-sample losses (fp32, the loss layer's) */
    char *acts;                               /* activation arena: data, grads, scratch, workspace */
    size_t acts_bytes, grad_off, grad_bytes;  /* the node gradients region (planned by lifetime) */
    size_t *scratch;                          /* [nlayer] bytes of each layer's scratch in the arena */
#ifdef NVCNN_GPU_EMU
    char **scratch_at;                        /* [nlayer] where it is (the emulated build's lifetimes) */
#endif
    void *ws;                                 /* shared cuDNN workspace */
    size_t ws_bytes;
    size_t ws_limit, mem_free, mem_margin;    /* the workspace's limit: min(cap, free - arena - margin) */
    size_t ws_cap;                            /* the cap asked for (gpunet_new) */
    /* cuDNN's convolution measurements, cached by shape (convalgo.h), and what they cost */
    struct ConvAlgoCache *algo_cache;
    double search_s;                          /* seconds in cudnnFind* (or the heuristics) */
    int searches, searches_cached, searches_skipped;
    int deterministic;                        /* GPUNET_DETERMINISTIC: cuDNN's heuristics, deterministic algorithms */
    int inference;                            /* GPUNET_INFERENCE: forward in inference mode only */
    char *kept;                               /* [nnode], inference: 1 where a node's data outlives the forward */
    size_t scratch_region;                    /* the arena's bytes of layer scratch (gpunet_scratch_bytes) */
    int sync_check;                           /* NVCNN_SYNC_CHECK=1: synchronise after every layer */
    int32_t *labels;                          /* [batch] on the device */
    /* the optimizer's device tables (optim.cu): LARC's chunks, each tensor's first chunk, the
     * chunks' partial sums, the tensors' factors; the partial sums of the weights' squares */
    char *optim_mem;
    void *larc_chunk;
    int *larc_first, larc_nchunk;
    double *larc_part, *red_part;
    float *larc_factor;
    /* the step decided on the device (optim.cu): its state (the loss scale, which the loss layer
     * reads, the learning rate, the flag, the counters, the results' ring), the constants, the
     * learning rates' ring in pinned memory and the results read back there; steps queued, read */
    void *step;
    GpuStepConfig stepc;
    double *lr_ring;
    GpuStepResult *res_host;
    long long queued, taken;
    /* each queued step's end, and the start of those timed from their start (from_start[k]) */
    cudaEvent_t step_end[GPUNET_RESULTS], step_start[GPUNET_RESULTS];
    unsigned char from_start[GPUNET_RESULTS];
    /* the step as one CUDA Graph (gpunet_graph_*): its executable form; 1 while it is captured */
    cudaGraphExec_t graph;
    int capturing, graph_with_l2;
    uint64_t dropout_seed, dropout_calls;     /* per-forward masks */
    const GpuLayerImpl **impl;                /* [nlayer] */
    void **lp;                                /* [nlayer] each layer's GPU state (host struct) */
    size_t bytes;                             /* device bytes held */
    /* NCCL gradient averaging (gpunet_nccl_init): buckets cut from the grads arena's end, each
     * launched on stream cs once backward has produced it */
    ncclComm_t comm;
    int nranks, nb, next;
    size_t *blo, *bhi;                        /* [nb] float offsets */
    cudaStream_t cs;
    cudaEvent_t *lev;                         /* [nlayer] "this layer's backward is done" */
    cudaEvent_t ev_b0, ev_b1, ev_b2, ev_done; /* backward start, end, end of the wait; comm done */
    int timed;                                /* ev_b0..2 recorded by the last backward */
    /* the real-data path: two slots of NHWC bytes + labels, copied on stream xs */
    cudaStream_t xs;
    uint8_t *stage[2];
    int32_t *stage_lab[2];
    cudaEvent_t staged[2], consumed[2];
    size_t stage_bytes;
    /* activation gradients share memory by lifetime (net_grad_schedule + memplan) */
    char *acc;                                /* [input slots] 1: add into the input's gradient */
    int *slot0;                               /* [nlayer] layer i's first input slot */
    int *zero_at;                             /* [nlayer] unconsumed node to zero before layer i's backward, or -1 */
    /* --profile (gpunet_profile): events before each layer and after the last, forward and backward */
    int prof, prof_fwd, prof_bwd;             /* on; forward, backward recorded since it was turned on */
    cudaEvent_t *pev_f, *pev_b;               /* [nlayer + 1] each */
    cudaEvent_t *pev_nccl;                    /* [2 * nb] before and after each bucket's allreduce (stream cs) */
    int prof_nccl;                            /* buckets recorded */
    double prof_host0;                        /* the host clock when the device passed pev_ref */
    cudaEvent_t pev_ref;                      /* recorded on an idle device as the profiled step began */
};

/* Whether layer li's backward adds into its input k's gradient (1) or writes it (0). Gradients
 * share memory by lifetime: the first consumer of a node that backward reaches finds the buffer
 * holding another gradient's leftovers and must overwrite it; the later consumers add. */
static inline int gpu_acc(const GpuNet *g, int li, int k) { return g->acc[g->slot0[li] + k]; }
/* The same as cuDNN's beta (output = alpha * result + beta * output). */
static inline const float *gpu_beta(const GpuNet *g, int li, int k) {
    static const float zero = 0.0f, one = 1.0f;
    return gpu_acc(g, li, k) ? &one : &zero;
}

/* Tensor descriptor of a shape (n, c, h, w) in g's layout, in the storage type (gpu_tensor_desc);
 * the fp32 one (batch norm's per-channel parameters, 1 x c x 1 x 1) is NCHW. */
/* Dies naming `what` when g is an inference net (GPUNET_INFERENCE), which has no gradients. */
void gpu_training_only(const GpuNet *g, const char *what);
cudnnTensorDescriptor_t gpu_tensor_desc(const GpuNet *g, Shape s);
cudnnTensorDescriptor_t gpu_tensor_desc_f32(Shape s);
/* 1 in fp16 and bf16 */
static inline int gpu_half(const GpuNet *g) { return g->prec == PREC_FP16 || g->prec == PREC_BF16; }
/* The weights a layer computes with (param p): the storage-type copy in fp16/bf16. */
static inline const void *gpu_weights(const GpuNet *g, int p) {
    size_t off = g->poff[p];
    return gpu_half(g) ? (const void *)((const char *)g->wh + off * g->esize) : (const void *)(g->params + off);
}
/* Where cuDNN writes a convolution's weight gradient (param p): fp32 grads, or the storage-type
 * buffer that gpu_grads_from_half() then casts into grads. */
static inline void *gpu_conv_dw(const GpuNet *g, int p) {
    size_t off = g->poff[p];
    return gpu_half(g) ? (void *)((char *)g->gh + off * g->esize) : (void *)(g->grads + off);
}
/* 16-bit storage-type values (fp16 or bf16, g's) as floats, on the host */
void gpu_host_from_storage(const GpuNet *g, const void *src, float *dst, size_t n);
/* The casts of the convolutions' storage-type weight gradients into grads, over [lo, hi) of the
 * arena: one launch (gpunet.cu), at the end of backward or before an NCCL bucket. */
void gpu_grads_from_half(GpuNet *g, size_t lo, size_t hi);
/* fp16/bf16: the storage-type weights refreshed from the fp32 master weights (after an update or
 * an upload); nothing in fp32 and tf32. */
void gpu_cast_params(GpuNet *g);

/* The fusion pass (fuse.cu): fills g->fused and g->absorbed (nothing fused when !on), their
 * release, and the plan's line. */
void gpu_fuse_plan(GpuNet *g, int on);
void gpu_fuse_free(GpuNet *g);
/* The gradients' lifetimes (net_grad_schedule's last[], backward steps) extended to what the
 * fused batch norms read: the fused ReLU's output gradient, at the batch norm's turn. */
void gpu_fuse_lifetimes(const GpuNet *g, int *last);
void gpu_fuse_print(const GpuNet *g, FILE *f);

/* NCCL inside backward (allreduce.cu): after layer backward made every gradient from arena offset
 * final_from up final, queue the buckets lying wholly above it (after `ready`, recorded on the
 * compute stream); at the end of backward, the rest and the compute stream's wait for them all;
 * and the communicator's release. */
void gpu_allreduce_ready(GpuNet *g, size_t final_from, cudaEvent_t ready);
void gpu_allreduce_finish(GpuNet *g);
void gpu_allreduce_free(GpuNet *g);

/* The optimizer's device tables (optim.cu): their bytes for `net` (and the LARC chunk count), and
 * their set-up in `mem` (that many bytes of device memory, 256-byte aligned) once g->poff is
 * known. */
size_t gpu_optim_bytes(const Net *net, int *nchunks);
void gpu_optim_bind(GpuNet *g, char *mem, int nchunks);
/* The step's device state (optim.cu): its bytes, and the loss scale in it (a device pointer the
 * loss layer's backward reads). */
size_t gpu_step_bytes(void);
float *gpu_loss_scale(GpuNet *g);
/* gpunet_step in its two halves: the learning rate's copy into the state, and the tail's kernels
 * (what a CUDA Graph of the step captures). */
void gpu_step_lr(GpuNet *g, double lr);
void gpu_step_tail(GpuNet *g);
void gpu_step_timed(GpuNet *g);
/* gpunet_infer_step's work without its timing (what gpunet_graph_infer captures) */
void gpu_infer_tail(GpuNet *g);

/* A per-channel bias over NCHW activations (bias.cu): forward y[n][c][p] += b[c], backward
 * db[c] += sum of dy[n][c][p], with b and db fp32 (the master arenas) and y, dy of the storage
 * type. Backward needs gpu_bias_scratch(n, c, hw) bytes of device scratch (256-byte aligned) for
 * its partial sums. */
size_t gpu_bias_scratch(int n, int c, size_t hw);
void gpu_bias_forward(GpuNet *g, void *y, const float *b, int n, int c, size_t hw);
void gpu_bias_backward(GpuNet *g, const void *dy, float *db, int n, int c, size_t hw, float *partial);

/* A parameter's fp32 value and gradient on the device. */
static inline float *gpu_param(const GpuNet *g, int p) { return g->params + g->poff[p]; }
static inline float *gpu_grad(const GpuNet *g, int p) { return g->grads + g->poff[p]; }

/* Where element (sample, channel, pixel) of a [n][c][hw] activation lies in g's layout, as the
 * three strides of those indices (elements). */
typedef struct GpuStrides {
    size_t n, c, p;
} GpuStrides;
static inline GpuStrides gpu_strides(const GpuNet *g, int c, size_t hw) {
    GpuStrides s = {(size_t)c * hw, g->nhwc ? 1 : hw, g->nhwc ? (size_t)c : 1};
    return s;
}
/* The channel of flat element i of a [n][c][hw] activation: NCHW (i / hw) % c, NHWC i % c; in 32-bit
 * arithmetic where i and hw allow (a 64-bit division is a few dozen instructions, as many as a
 * 16-byte vector's memory time on a GPU of 4.8 TB/s). */
__device__ __forceinline__ int gpu_chan(size_t i, int c, size_t hw, int nhwc) {
    if (nhwc || hw == 1) return (i >> 32) == 0 ? (int)((unsigned)i % (unsigned)c) : (int)(i % (size_t)c);
    if (((i | hw) >> 32) == 0) return (int)((unsigned)i / (unsigned)hw % (unsigned)c);
    return (int)(i / hw % (size_t)c);
}

/* Storage-type conversions for kernels templated on T (float, __half, __nv_bfloat16). */
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* Runs the statement with T the storage type of g's precision. */
#define GPU_DISPATCH(g, T, ...)                                                                                        \
    do {                                                                                                               \
        if ((g)->prec == PREC_FP16) {                                                                                  \
            typedef __half T;                                                                                          \
            __VA_ARGS__;                                                                                               \
        } else if ((g)->prec == PREC_BF16) {                                                                           \
            typedef __nv_bfloat16 T;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } else {                                                                                                       \
            typedef float T;                                                                                           \
            __VA_ARGS__;                                                                                               \
        }                                                                                                              \
    } while (0)
/* cuDNN math type of the precision (fp32: no tensor cores; tf32: tensor-op math allowed). */
cudnnMathType_t gpu_math(const GpuNet *g);
/* Threads per block of every kernel of the backend. The block reductions (gpu_block_reduce's
 * shared arrays of GPU_THREADS elements, warp sums of GPU_THREADS / 32 warps) are written for it:
 * launches and arrays use this one constant, so they cannot disagree. */
#define GPU_THREADS 256
static_assert(GPU_THREADS >= 32 && GPU_THREADS <= 1024 && (GPU_THREADS & (GPU_THREADS - 1)) == 0 && GPU_THREADS % 32 == 0,
              "the block reductions need a power of two of whole warps, at most 1024 threads");
/* The block's reduction of each thread's v[0..N) (sums, or maxima with MAX), left in thread 0's
 * v: the values to sh (the caller's __shared__ double[N][GPU_THREADS]), one barrier, then each
 * lane of the first warp folds its GPU_THREADS / 32 values in order and the lanes meet in a fixed
 * tree of shuffles (deterministic). One barrier where a tree in shared memory takes
 * log2(GPU_THREADS) + 1 = 9. A caller that writes sh again (or reads another thread's v) needs a
 * barrier first. */
/* The sum (or with MAX the maximum) of a whole warp's r, in lane 0: the lanes meet in a fixed
 * tree of shuffles (deterministic). Every lane of the warp must call it. */
template <bool MAX = false> __device__ __forceinline__ double gpu_warp_reduce(double r) {
    for (int o = 16; o > 0; o >>= 1) {
        const double q = __shfl_down_sync(0xffffffffu, r, o);
        r = MAX ? fmax(r, q) : r + q;
    }
    return r;
}
template <int N, bool MAX = false> __device__ __forceinline__ void gpu_block_reduce(double (*sh)[GPU_THREADS], double *v) {
    for (int j = 0; j < N; j++) sh[j][threadIdx.x] = v[j];
    __syncthreads();
    if (threadIdx.x >= 32) return;
    for (int j = 0; j < N; j++) {
        double r = sh[j][threadIdx.x];
        for (int k = (int)threadIdx.x + 32; k < GPU_THREADS; k += 32) r = MAX ? fmax(r, sh[j][k]) : r + sh[j][k];
        v[j] = gpu_warp_reduce<MAX>(r);
    }
}
/* 16-byte vector accesses (item: kernels that stream whole tensors): V elements of T per uint4
 * load or store, taken where every pointer a kernel vectorises is 16-byte aligned (the arena's
 * tensors are 256-byte aligned; the emulated device faults on a misaligned vector access, as a
 * GPU does); the elements past the last whole vector, or every element when a pointer is not
 * aligned, go one at a time. gpu_vec_split says how many elements the vector loop covers. */
__device__ __forceinline__ bool gpu_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
template <typename T> __device__ __forceinline__ size_t gpu_vec_split(size_t n, bool aligned) { return aligned ? n / (16 / sizeof(T)) * (16 / sizeof(T)) : 0; }
template <typename T> __device__ __forceinline__ void gpu_load16(T *dst, const T *src, size_t v) {
    *reinterpret_cast<uint4 *>(dst) = reinterpret_cast<const uint4 *>(src)[v];
}
template <typename T> __device__ __forceinline__ void gpu_store16(T *dst, size_t v, const T *src) {
    reinterpret_cast<uint4 *>(dst)[v] = *reinterpret_cast<const uint4 *>(src);
}
/* dst's vector v = a, or (acc) dst's vector v + a, added in fp32 (a is overwritten with the sum) */
template <typename T> __device__ __forceinline__ void gpu_store16_acc(T *dst, size_t v, T *a, int acc) {
    if (acc) {
        alignas(16) T b[16 / sizeof(T)];
        gpu_load16(b, dst, v);
#pragma unroll
        for (int k = 0; k < (int)(16 / sizeof(T)); k++) a[k] = from_f<T>(to_f(b[k]) + to_f(a[k]));
    }
    gpu_store16(dst, v, a);
}
/* Element counts below this index in 32 bits in the element-wise kernels (a 64-bit division is a
 * few dozen instructions on the GPU, a 32-bit one a handful); a grid-stride loop's index plus its
 * stride (at most gpu_blocks' 524,280 blocks) stays below 2^32. */
#define GPU_NARROW ((size_t)1 << 31)
/* Blocks for a grid-stride loop over n elements. */
static inline unsigned gpu_blocks(size_t n) {
    size_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
    return (unsigned)(b > 65535 * 8 ? 65535 * 8 : (b ? b : 1));
}
/* ... and over n elements in 16-byte vectors of T */
template <typename T> static inline unsigned gpu_vec_blocks(size_t n) { return gpu_blocks((n + 16 / sizeof(T) - 1) / (16 / sizeof(T))); }

/* The channel of consecutive elements of a [n][c][hw] activation, from element i on: NCHW
 * (i / hw) % c, NHWC i % c, advanced one element at a time without a division. */
struct GpuChanWalk {
    int ch, c;
    size_t p, hw; /* NCHW: the pixel within the plane; NHWC: hw is 1 */
    __device__ GpuChanWalk(size_t i, int c_, size_t hw_, int nhwc) : c(c_), hw(nhwc ? 1 : hw_) {
        if (hw == 1) {
            p = 0;
            ch = gpu_chan(i, c, 1, 1);
        } else if (((i | hw) >> 32) == 0) { /* 32-bit, as gpu_chan */
            const unsigned q = (unsigned)i / (unsigned)hw;
            p = (unsigned)i - q * (unsigned)hw;
            ch = (int)(q % (unsigned)c);
        } else {
            p = i % hw;
            ch = (int)(i / hw % (size_t)c);
        }
    }
    __device__ void next() {
        if (++p == hw) {
            p = 0;
            if (++ch == c) ch = 0;
        }
    }
};

extern const GpuLayerImpl gpu_conv_impl, gpu_bn_impl, gpu_maxpool_impl, gpu_avgpool_impl, gpu_fc_impl,
    gpu_dropout_impl, gpu_flatten_impl, gpu_avg_impl, gpu_concat_impl, gpu_add_impl, gpu_xent_impl, gpu_act_impl,
    gpu_absorbed_impl; /* a layer fused into a batch norm (fuse.cu): runs nothing of its own */

#endif
