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
    double prof_host0;                        /* the host clock when the first of them was queued */
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

/* Tensor descriptor of an NCHW shape in the storage type (gpu_tensor_desc) or in fp32. */
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
/* The casts of the convolutions' storage-type weight gradients into grads, over [lo, hi) of the
 * arena: one launch (gpunet.cu), at the end of backward or before an NCCL bucket. */
void gpu_grads_from_half(GpuNet *g, size_t lo, size_t hi);
/* fp16/bf16: the storage-type weights refreshed from the fp32 master weights (after an update or
 * an upload); nothing in fp32 and tf32. */
void gpu_cast_params(GpuNet *g);

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
/* Threads per block of every kernel of the backend. The block reductions (shared arrays of
 * GPU_THREADS elements halved in a loop, warp sums of GPU_THREADS / 32 warps) are written for it:
 * launches and arrays use this one constant, so they cannot disagree. */
#define GPU_THREADS 256
static_assert(GPU_THREADS >= 32 && GPU_THREADS <= 1024 && (GPU_THREADS & (GPU_THREADS - 1)) == 0 && GPU_THREADS % 32 == 0,
              "the block reductions need a power of two of whole warps, at most 1024 threads");
/* Blocks for a grid-stride loop over n elements. */
static inline unsigned gpu_blocks(size_t n) {
    size_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
    return (unsigned)(b > 65535 * 8 ? 65535 * 8 : (b ? b : 1));
}

extern const GpuLayerImpl gpu_conv_impl, gpu_bn_impl, gpu_maxpool_impl, gpu_avgpool_impl, gpu_fc_impl,
    gpu_dropout_impl, gpu_flatten_impl, gpu_avg_impl, gpu_concat_impl, gpu_add_impl, gpu_xent_impl, gpu_act_impl;

#endif
