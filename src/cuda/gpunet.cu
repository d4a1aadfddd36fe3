/* gpunet.cu: the GPU backend's core (gpunet.h): the arenas and their plan, the traversals
 * (forward, backward), and where a failure happened. The rest of src/cuda/: transfer.cu (host <->
 * device copies and the staged batches), allreduce.cu (NCCL inside backward), optim.cu (the
 * update and the step's statistics), device.cu (the device primitives of gpu_backend.h), and one
 * file per layer type (conv.cu, bn.cu, ...). */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "gpunet_internal.h"

extern "C" {
#include "memplan.h"
}

static const GpuLayerImpl *impl_of(const char *type) {
    static const GpuLayerImpl *const all[] = {&gpu_conv_impl,    &gpu_bn_impl,      &gpu_maxpool_impl, &gpu_avgpool_impl,
                                              &gpu_fc_impl,      &gpu_dropout_impl, &gpu_flatten_impl, &gpu_avg_impl,
                                              &gpu_concat_impl,  &gpu_add_impl,     &gpu_xent_impl};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->type, type) == 0) return all[i];
    static const char *const acts[] = {"linear", "relu", "relu6", "elu", "sigmoid", "tanh", "lrelu"};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(acts[i], type) == 0) return &gpu_act_impl;
    return NULL;
}

static cudnnTensorDescriptor_t tensor_desc(cudnnDataType_t t, Shape s, int nhwc) {
    cudnnTensorDescriptor_t d;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, t, s.n, s.c, s.h, s.w));
    return d;
}

cudnnTensorDescriptor_t gpu_tensor_desc(const GpuNet *g, Shape s) { return tensor_desc(g->dtype, s, g->nhwc); }
cudnnTensorDescriptor_t gpu_tensor_desc_f32(Shape s) { return tensor_desc(CUDNN_DATA_FLOAT, s, 0); }

int gpunet_nhwc(const GpuNet *g) { return g->nhwc; }

void gpu_training_only(const GpuNet *g, const char *what) {
    if (g->inference) die("%s on a GPU net built for inference only (GPUNET_INFERENCE: no gradients)", what);
}

cudnnMathType_t gpu_math(const GpuNet *g) {
    return g->prec == PREC_FP32 ? CUDNN_FMA_MATH : g->prec == PREC_TF32 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
}

/* w (storage type) = (T)params, over the whole arena */
template <typename T> __global__ void k_cast_params(const float *p, T *w, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) w[i] = from_f<T>(p[i]);
}

/* fp16/bf16: refresh the storage-type weights from the fp32 master weights */
void gpu_cast_params(GpuNet *g) {
    size_t n = g->P;
    if (!gpu_half(g) || n == 0) return;
    GPU_DISPATCH(g, T, LAUNCH(k_cast_params<T>, gpu_blocks(n), GPU_THREADS, 0, g->s, g->params, (T *)g->wh, n));
}

static int dev_alloc(GpuNet *g, void **p, size_t bytes, char *err, size_t errlen, int *oom);

/* fp16/bf16: the convolutions' weight gradients, which cuDNN writes in the storage type (gh), into
 * the fp32 gradients. One launch casts every convolution's range that overlaps [lo, hi) (range
 * blockIdx.y, the elements on x), instead of one launch per convolution as it finishes: at the end
 * of backward, or before each NCCL bucket (allreduce.cu), whose ranges it clips to. */
template <typename T> __global__ void k_grad_from_half(const size_t *range, const T *h, float *gr, size_t lo, size_t hi) {
    size_t a = range[2 * blockIdx.y], b = a + range[2 * blockIdx.y + 1];
    if (a < lo) a = lo;
    if (b > hi) b = hi;
    for (size_t i = a + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < b; i += (size_t)gridDim.x * blockDim.x) gr[i] = to_f(h[i]);
}

void gpu_grads_from_half(GpuNet *g, size_t lo, size_t hi) {
    int r0 = 0, r1 = g->nhalf;
    const size_t *h = g->half_host;
    while (r0 < r1 && h[2 * r0] + h[2 * r0 + 1] <= lo) r0++; /* ranges in arena order */
    while (r1 > r0 && h[2 * (r1 - 1)] >= hi) r1--;
    if (r0 == r1) return;
    GPU_DISPATCH(g, T,
                 LAUNCH(k_grad_from_half<T>, dim3(gpu_blocks(g->half_max), (unsigned)(r1 - r0)), GPU_THREADS, 0, g->s, g->half_dev + 2 * r0,
                        (const T *)g->gh, g->grads, lo, hi));
}

/* The convolutions' weight ranges (offset, length), in arena order, on the host and the device. */
static int plan_half_grads(GpuNet *g, char *err, size_t errlen, int *oom) {
    const Net *net = g->net;
    if (!gpu_half(g)) return 0;
    g->half_host = (size_t *)xcalloc(2 * (size_t)net->nlayer + 2, sizeof(size_t));
    for (int i = 0; i < net->nlayer; i++)
        if (g->impl[i] == &gpu_conv_impl) {
            const Param *pp = &net->param[((const Conv *)net->layer[i].priv)->pw];
            const size_t off = g->poff[((const Conv *)net->layer[i].priv)->pw];
            if (g->nhalf > 0 && off < g->half_host[2 * g->nhalf - 2]) die("gpunet_new: convolution weights out of arena order");
            g->half_host[2 * g->nhalf] = off;
            g->half_host[2 * g->nhalf + 1] = pp->count;
            if (pp->count > g->half_max) g->half_max = pp->count;
            g->nhalf++;
        }
    const size_t bytes = (2 * (size_t)g->nhalf + 2) * sizeof(size_t);
    if (dev_alloc(g, (void **)&g->half_dev, bytes, err, errlen, oom)) return -1;
    CUDA_CHECK(cudaMemcpyAsync(g->half_dev, g->half_host, bytes, cudaMemcpyHostToDevice, g->s));
    gpunet_sync(g); /* the host table stays: no wait for it later */
    return 0;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* cudaMalloc that reports instead of dying: 0 on success. */
static int dev_alloc(GpuNet *g, void **p, size_t bytes, char *err, size_t errlen, int *oom) {
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        snprintf(err, errlen, "out of GPU memory: %zu bytes requested (%.2f GiB) with %zu held, %.2f GiB free of %.2f GiB",
                 bytes, (double)bytes / 1073741824.0, g->bytes, (double)fr / 1073741824.0, (double)tot / 1073741824.0);
        if (oom) *oom = 1;
        *p = NULL;
        return -1;
    }
    g->bytes += bytes;
    return 0;
}

/* An out-of-memory failure of planning: the message, *oom = 1. */
static int no_room(char *err, size_t errlen, int *oom, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int no_room(char *err, size_t errlen, int *oom, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (oom) *oom = 1;
    return -1;
}

/* The streams and library handles, all on the compute stream g->s. fp32: cuBLAS's default math,
 * which keeps fp32's precision and range in SGEMM (no TF32, no BF16x9 emulation: those need their
 * own math modes) without PEDANTIC's slower standardized path. tf32: TF32 tensor cores. fp16/bf16:
 * GemmEx with CUBLAS_COMPUTE_32F, and split-K reductions kept in fp32 too rather than in the
 * 16-bit output type. */
static void open_libraries(GpuNet *g) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
    CUDNN_CHECK(cudnnCreate(&g->dnn));
    CUDNN_CHECK(cudnnSetStream(g->dnn, g->s));
    CUBLAS_CHECK(cublasCreate(&g->blas));
    CUBLAS_CHECK(cublasSetStream(g->blas, g->s));
    CUBLAS_CHECK(cublasSetMathMode(g->blas, g->prec == PREC_TF32   ? CUBLAS_TF32_TENSOR_OP_MATH
                                             : g->prec == PREC_FP32 ? CUBLAS_DEFAULT_MATH
                                                                    : (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                                                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
}

/* The parameter arenas' layout: parameter p at poff[p], a multiple of 64 elements. Backward hands
 * gradients on (NCCL buckets, on_ready) by arena offset: once layer i's backward is done,
 * everything from its first parameter's offset up must be final. That holds only if the layers'
 * parameters lie in the arena in layer order, each layer's contiguous: checked here. */
static void layout_params(GpuNet *g) {
    const Net *net = g->net;
    g->poff = (size_t *)xcalloc((size_t)net->nparam + 1, sizeof *g->poff);
    g->P = 0;
    for (int p = 0; p < net->nparam; p++) {
        g->poff[p] = g->P;
        g->P += (net->param[p].count + 63) & ~(size_t)63;
    }
    for (int i = 0, next = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (l->nparam > 0 && l->param0 != next)
            die("gpunet_new: layer %s's parameters start at %d, not %d: the gradient arena must follow the layer order", l->name,
                l->param0, next);
        next += l->nparam;
    }
    g->host = (float *)xcalloc(g->P ? g->P : 1, sizeof(float));
}

/* Everything but the activation arena: parameters, gradients, velocity, state, the 16-bit weights,
 * labels and the step's statistics, the optimizer's tables, the two staged batches. 0, or -1. */
static int alloc_fixed(GpuNet *g, char *err, size_t errlen, int *oom) {
    const Net *net = g->net;
    const size_t P = g->P ? g->P : 1, S = net->state_total ? net->state_total : 1;
    const int train = !g->inference; /* an inference net keeps no gradients and no velocity */
    if (dev_alloc(g, (void **)&g->params, P * sizeof(float), err, errlen, oom) ||
        (train && dev_alloc(g, (void **)&g->grads, P * sizeof(float), err, errlen, oom)) ||
        (train && dev_alloc(g, (void **)&g->velocity, P * sizeof(float), err, errlen, oom)) ||
        dev_alloc(g, (void **)&g->state, S * sizeof(float), err, errlen, oom) ||
        dev_alloc(g, (void **)&g->labels, (size_t)net->batch * sizeof(int32_t), err, errlen, oom) ||
        dev_alloc(g, &g->step, gpu_step_bytes(), err, errlen, oom) ||
        (gpu_half(g) && dev_alloc(g, &g->wh, P * g->esize, err, errlen, oom)) ||
        (gpu_half(g) && train && dev_alloc(g, &g->gh, P * g->esize, err, errlen, oom)))
        return -1;
    CUDA_CHECK(cudaHostAlloc((void **)&g->lr_ring, GPUNET_RESULTS * sizeof(double), cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc((void **)&g->res_host, GPUNET_RESULTS * sizeof(GpuStepResult), cudaHostAllocDefault));
    CUDA_CHECK(cudaMemsetAsync(g->step, 0, gpu_step_bytes(), g->s));
    for (int k = 0; k < GPUNET_RESULTS; k++) {
        CUDA_CHECK(cudaEventCreate(&g->step_end[k]));
        CUDA_CHECK(cudaEventCreate(&g->step_start[k]));
    }
    gpunet_step_state(g, 1.0, 0, 0);
    int nchunks = 0;
    if (dev_alloc(g, (void **)&g->optim_mem, gpu_optim_bytes(net, &nchunks), err, errlen, oom)) return -1;
    gpu_optim_bind(g, g->optim_mem, nchunks);
    g->stage_bytes = shape_count(net->node[net->input].shape);
    for (int k = 0; k < 2; k++)
        if (dev_alloc(g, (void **)&g->stage[k], g->stage_bytes, err, errlen, oom) ||
            dev_alloc(g, (void **)&g->stage_lab[k], (size_t)net->batch * sizeof(int32_t), err, errlen, oom))
            return -1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->xs, cudaStreamNonBlocking));
    for (int k = 0; k < 2; k++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&g->staged[k], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&g->consumed[k], cudaEventDisableTiming));
    }
    /* the one arena that needs zeros: momentum starts from none (gpunet_upload_velocity replaces
     * it on a resumed run). The parameters are uploaded whole, gaps included, before anything
     * reads them (gpunet_new), and every backward zeroes the gradients first. */
    if (train) CUDA_CHECK(cudaMemsetAsync(g->velocity, 0, P * sizeof(float), g->s));
    return 0;
}

/* The activation arena's plan: node data, node gradients (sharing memory by lifetime), each
 * layer's scratch, and cuDNN's workspace, in that order. */
typedef struct ArenaPlan {
    size_t *xoff;      /* [nnode] node data */
    MemBlock *grad;    /* [nnode] node gradients, offsets within the gradient region */
    size_t *scratch;   /* [nlayer] bytes of each layer's scratch */
    size_t *soff;      /* [nlayer] where it goes */
    size_t data_bytes; /* node data and gradients */
    size_t end;        /* the arena without the workspace */
    size_t ws;         /* the workspace */
} ArenaPlan;

#define NO_DATA ((size_t)-1) /* ArenaPlan.xoff of a node without memory */
static void plan_free(ArenaPlan *a) { free(a->xoff), free(a->grad), free(a->scratch), free(a->soff); }

/* An inference net's node data (GPUNET_INFERENCE): every storage (a node and the activations that
 * run in place over it) lives from the forward step that first writes it to the last that reads
 * it, and storages never alive together share memory (memplan). A fused batch norm writes its
 * ReLU's node at its own step and reads the add's other input there; the layers it absorbed read
 * nothing. The input (staged before the forward), the logits (read after it) and the nodes that
 * nothing consumes (the loss) live over the whole forward and are never shared. Sets a->xoff and
 * g->kept; returns the bytes of the node data. */
static size_t plan_inference_data(GpuNet *g, ArenaPlan *a, const int *alias, const char *none) {
    const Net *net = g->net;
    const int nn = net->nnode, nl = net->nlayer;
    MemBlock *d = (MemBlock *)xcalloc((size_t)nn, sizeof(MemBlock));
    int *ncons = (int *)xcalloc((size_t)nn, sizeof(int));
    for (int v = 0; v < nn; v++) d[v].first = d[v].last = net->node[v].producer < 0 ? 0 : net->node[v].producer;
    for (int i = 0; i < nl; i++)
        for (int k = 0; k < net->layer[i].nin; k++) {
            const int v = net->layer[i].in[k];
            ncons[v]++;
            if (!g->absorbed[i] && d[v].last < i) d[v].last = i;
        }
    for (int b = 0; b < nl; b++) {
        const GpuFused *f = &g->fused[b];
        if (f->out < 0) continue;
        if (d[f->out].first > b) d[f->out].first = b;
        if (f->z >= 0 && d[f->z].last < b) d[f->z].last = b;
    }
    g->kept = (char *)xcalloc((size_t)nn, 1);
    for (int v = 0; v < nn; v++)
        if (v == net->input || v == net->logits || ncons[v] == 0) {
            g->kept[v] = 1;
            d[v].first = 0;
            d[v].last = nl;
        }
    /* a storage's lifetime: its own and those of the activations in place over it */
    for (int v = 0; v < nn; v++) {
        if (alias[v] < 0) continue;
        int r = alias[v];
        while (alias[r] >= 0) r = alias[r];
        if (d[r].first > d[v].first) d[r].first = d[v].first;
        if (d[r].last < d[v].last) d[r].last = d[v].last;
    }
    for (int v = 0; v < nn; v++) {
        const int root = alias[v] < 0;
        d[v].bytes = root && !none[v] ? align256(shape_count(net->node[v].shape) * g->esize) : 0;
    }
    const size_t bytes = memplan(d, nn, 256);
    for (int v = 0; v < nn; v++) {
        int r = v;
        while (alias[r] >= 0) r = alias[r];
        if (a->xoff[r] != NO_DATA) a->xoff[v] = d[r].off;
        if (alias[v] >= 0 && g->kept[r]) g->kept[v] = 1; /* an activation in place over a kept node */
    }
    free(d);
    free(ncons);
    return bytes;
}

/* Node data and gradients. Gradients: who writes, who adds, when each is alive
 * (net_grad_schedule), and gradients never alive together share memory (memplan). Data: an
 * activation overwrites its input when nothing else reads that input (one consumer, not the
 * net's input) and the input's producer does not need its own output in backward (everything
 * but another activation). */
static void plan_nodes(GpuNet *g, ArenaPlan *a) {
    const Net *net = g->net;
    const int nn = net->nnode;
    int *first = (int *)xmalloc((size_t)nn * sizeof(int)), *last = (int *)xmalloc((size_t)nn * sizeof(int));
    char *zero = (char *)xmalloc((size_t)nn);
    g->acc = (char *)xmalloc((size_t)net_input_slots(net) + 1);
    net_grad_schedule(net, first, last, zero, g->acc);
    gpu_fuse_lifetimes(g, last);
    g->slot0 = (int *)xcalloc((size_t)net->nlayer, sizeof(int));
    g->zero_at = (int *)xmalloc((size_t)net->nlayer * sizeof(int));
    for (int i = 0, k = 0; i < net->nlayer; k += net->layer[i].nin, i++) {
        g->slot0[i] = k;
        g->zero_at[i] = zero[net->layer[i].out] ? net->layer[i].out : -1;
    }
    a->grad = (MemBlock *)xcalloc((size_t)nn, sizeof(MemBlock));
    for (int v = 0; v < nn; v++) {
        a->grad[v].bytes = v == net->input ? 0 : shape_count(net->node[v].shape) * g->esize;
        a->grad[v].first = first[v];
        a->grad[v].last = last[v];
    }
    free(first), free(last), free(zero);
    int *alias = (int *)xmalloc((size_t)nn * sizeof(int));
    net_act_in_place(net, alias);
    /* A node that fusion took off the step and that no activation runs in place over holds
     * nothing (fuse.cu: a batch norm followed by the residual add writes the add's ReLU's output,
     * never its own, which only the add read): no memory (in resnet50 the 16 such batch norms'
     * outputs, 2.8 GB at batch 256 in fp16). */
    char *none = (char *)xcalloc((size_t)nn, 1);
    for (int i = 0; i < nn; i++) none[i] = gpunet_fused_away(g, i) >= 0;
    for (int i = 0; i < nn; i++)
        if (alias[i] >= 0) none[alias[i]] = 0;
    size_t off = 0;
    a->xoff = (size_t *)xcalloc((size_t)nn, sizeof *a->xoff);
    for (int i = 0; i < nn; i++) {
        if (alias[i] >= 0) continue;
        if (none[i]) {
            a->xoff[i] = NO_DATA;
            continue;
        }
        a->xoff[i] = off;
        off += align256(shape_count(net->node[i].shape) * g->esize);
    }
    for (int i = 0; i < nn; i++)
        if (alias[i] >= 0) a->xoff[i] = a->xoff[alias[i]];
    if (g->inference) off = plan_inference_data(g, a, alias, none);
    free(alias);
    free(none);
    g->grad_off = off;
    g->grad_bytes = g->inference ? 0 : memplan(a->grad, nn, 256);
    a->data_bytes = off + align256(g->grad_bytes);
}

/* Every layer's GPU half plans: descriptors, cuDNN's measurements, scratch (placed after the node
 * data and gradients; in an inference net, one region that every layer's forward uses in turn) and
 * any workspace it needs whatever the algorithms. */
static void plan_layers(GpuNet *g, ArenaPlan *a) {
    Net *net = g->net;
    a->scratch = (size_t *)xcalloc((size_t)net->nlayer, sizeof *a->scratch);
    a->soff = (size_t *)xcalloc((size_t)net->nlayer, sizeof *a->soff);
    a->ws = 0;
    for (int i = 0; i < net->nlayer; i++) {
        Layer *l = &net->layer[i];
        g->impl[i] = g->absorbed[i] ? &gpu_absorbed_impl : impl_of(l->ops->type);
        if (!g->impl[i]) die("the GPU backend has no '%s' layer", l->ops->type);
        size_t w = 0;
        if (g->impl[i]->plan) g->impl[i]->plan(g, l, i, &a->scratch[i], &w);
        if (w > a->ws) a->ws = w;
    }
    size_t off = a->data_bytes;
    for (int i = 0; i < net->nlayer; i++) {
        a->soff[i] = off;
        off += align256(a->scratch[i]);
    }
    a->end = off;
    if (!g->inference) return;
    /* an inference net: a layer's scratch lives within its forward (no backward keeps it), so every
     * layer's starts at the same place; but the loss's, whose per-sample losses are read after the
     * forward (gpunet_loss, the step's results), has its own after that region */
    size_t most = 0;
    for (int i = 0; i < net->nlayer; i++)
        if (g->impl[i] != &gpu_xent_impl) {
            a->soff[i] = a->data_bytes;
            if (align256(a->scratch[i]) > most) most = align256(a->scratch[i]);
        }
    off = a->data_bytes + most;
    for (int i = 0; i < net->nlayer; i++)
        if (g->impl[i] == &gpu_xent_impl) {
            a->soff[i] = off;
            off += align256(a->scratch[i]);
        }
    a->end = off;
}

/* The algorithms: per convolution direction the fastest whose workspace fits under the cap and in
 * what the arena leaves free, less a margin for what the libraries allocate later (cuBLAS's
 * workspace, NCCL's buffers). Then the whole arena and the margin must fit. 0, or -1. */
static int choose_algorithms(GpuNet *g, ArenaPlan *a, size_t workspace_cap, char *err, size_t errlen, int *oom) {
    Net *net = g->net;
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    g->mem_free = fr;
    g->mem_margin = tot / 64 > ((size_t)256 << 20) ? tot / 64 : (size_t)256 << 20;
    g->ws_limit = fr > a->end + g->mem_margin ? fr - a->end - g->mem_margin : 0;
    g->ws_cap = workspace_cap;
    if (g->ws_limit > workspace_cap) g->ws_limit = workspace_cap;
    for (int i = 0; i < net->nlayer; i++)
        if (g->impl[i]->choose) {
            size_t w = g->impl[i]->choose(g, &net->layer[i], i, g->ws_limit);
            if (w > a->ws) a->ws = w;
        }
    if (a->end + align256(a->ws) + g->mem_margin > fr) {
        const double GiB = 1073741824.0;
        const size_t all = a->end + align256(a->ws);
        return no_room(err, errlen, oom,
                       "out of GPU memory: %zu bytes requested (%.2f GiB: %s %.2f GiB, layer scratch "
                       "%.2f GiB, cuDNN workspace %.2f GiB) and a margin of %.2f GiB for the libraries, with %zu held, %.2f GiB free of "
                       "%.2f GiB",
                       all, (double)all / GiB, g->inference ? "activations" : "activations and their gradients", (double)a->data_bytes / GiB, (double)(a->end - a->data_bytes) / GiB, (double)a->ws / GiB,
                       (double)g->mem_margin / GiB, g->bytes, (double)fr / GiB, (double)tot / GiB);
    }
    return 0;
}

/* The arena as planned: allocated, its pieces handed out. 0, or -1. Nothing in it is zeroed:
 * every tensor is written in its step before it is read (the emulated device checks it: below). */
static int bind_arena(GpuNet *g, const ArenaPlan *a, char *err, size_t errlen, int *oom) {
    Net *net = g->net;
    g->acts_bytes = a->end + align256(a->ws);
    g->ws_bytes = a->ws;
    g->scratch_region = a->end - a->data_bytes;
    if (dev_alloc(g, (void **)&g->acts, g->acts_bytes, err, errlen, oom)) return -1;
    for (int i = 0; i < net->nnode; i++) {
        g->x[i] = a->xoff[i] == NO_DATA ? NULL : g->acts + a->xoff[i];
        g->dx[i] = i == net->input || g->inference ? NULL : (void *)(g->acts + g->grad_off + a->grad[i].off);
    }
    g->ws = a->ws ? g->acts + a->end : NULL;
    memcpy(g->scratch, a->scratch, (size_t)net->nlayer * sizeof *g->scratch);
#ifdef NVCNN_GPU_EMU
    g->scratch_at = (char **)xcalloc((size_t)net->nlayer, sizeof *g->scratch_at);
    for (int i = 0; i < net->nlayer; i++) g->scratch_at[i] = a->scratch[i] ? g->acts + a->soff[i] : NULL;
#endif
    for (int i = 0; i < net->nlayer; i++)
        if (g->impl[i]->bind) g->impl[i]->bind(g, &net->layer[i], i, a->scratch[i] ? g->acts + a->soff[i] : NULL);
    return 0;
}

GpuNet *gpunet_new(Net *net, int device, int precision, size_t workspace_cap, unsigned flags, char *err, size_t errlen, int *oom) {
    if (oom) *oom = 0;
    if (!net->finalized) die("gpunet_new before net_finalize");
    if (precision != PREC_FP32 && precision != PREC_TF32 && precision != PREC_FP16 && precision != PREC_BF16) {
        snprintf(err, errlen, "the GPU backend has no precision %d", precision);
        return NULL;
    }
    const int nhwc = gpunet_layout(precision, flags, err, errlen), fuse = gpunet_fusion(flags, err, errlen);
    if (nhwc < 0 || fuse < 0) return NULL;
    gpu_require("gpunet_new");
    if (device != gpu_selected()) die("gpunet_new on GPU %d: this process uses GPU %d", device, gpu_selected());
    GpuNet *g = (GpuNet *)xcalloc(1, sizeof *g);
    g->net = net;
    g->device = device;
    g->prec = precision;
    g->nhwc = nhwc;
    g->fuse = fuse;
    g->deterministic = (flags & GPUNET_DETERMINISTIC) != 0;
    g->inference = (flags & GPUNET_INFERENCE) != 0;
    g->esize = gpu_half(g) ? 2 : 4;
    g->dtype = precision == PREC_FP16 ? CUDNN_DATA_HALF : precision == PREC_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    g->ctype = precision == PREC_FP16 ? CUDA_R_16F : precision == PREC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    g->impl = (const GpuLayerImpl **)xcalloc((size_t)net->nlayer, sizeof *g->impl);
    g->lp = (void **)xcalloc((size_t)net->nlayer, sizeof *g->lp);
    g->x = (void **)xcalloc((size_t)net->nnode, sizeof *g->x);
    g->dx = (void **)xcalloc((size_t)net->nnode, sizeof *g->dx);
    g->scratch = (size_t *)xcalloc((size_t)net->nlayer, sizeof *g->scratch);
    g->dropout_seed = 0x6a09e667f3bcc909ULL;
    g->algo_cache = convalgo_cache_new();
    g->sync_check = gpu_sync_check();
    layout_params(g); /* host work only: a net it refuses dies before anything touches the device */
    open_libraries(g);
    ArenaPlan a;
    memset(&a, 0, sizeof a);
    int failed = alloc_fixed(g, err, errlen, oom);
    if (!failed) {
        gpu_fuse_plan(g, g->fuse); /* before the plan: a fused batch norm reads gradients later, plans its own kernels */
        plan_nodes(g, &a);
        /* a batch that cannot fit fails here, before cuDNN's measurements allocate anything */
        size_t fr = 0, tot = 0;
        CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
        if (a.data_bytes > fr)
            failed = no_room(err, errlen, oom,
                             "out of GPU memory: %zu bytes requested (%.2f GiB) for %s, with %zu held, "
                             "%.2f GiB free of %.2f GiB",
                             a.data_bytes, (double)a.data_bytes / 1073741824.0, g->inference ? "activations" : "activations and their gradients", g->bytes, (double)fr / 1073741824.0,
                             (double)tot / 1073741824.0);
    }
    if (!failed) {
        plan_layers(g, &a);
        failed = plan_half_grads(g, err, errlen, oom);
    }
    if (!failed) {
        failed = choose_algorithms(g, &a, workspace_cap, err, errlen, oom) || bind_arena(g, &a, err, errlen, oom);
    }
    plan_free(&a);
    if (failed) {
        gpunet_free(g);
        return NULL;
    }
    gpunet_upload_params(g);
    gpunet_sync(g);
    return g;
}

void gpunet_free(GpuNet *g) {
    if (!g) return;
    if (g->impl)
        for (int i = 0; i < g->net->nlayer; i++) {
            if (g->impl[i] && g->impl[i]->destroy && g->lp[i]) g->impl[i]->destroy(g, &g->net->layer[i], i);
            free(g->lp[i]);
        }
    gpu_allreduce_free(g);
    gpu_fuse_free(g);
    for (int i = 0; g->pev_f && i <= g->net->nlayer; i++) {
        cudaEventDestroy(g->pev_f[i]);
        cudaEventDestroy(g->pev_b[i]);
    }
    for (int i = 0; g->pev_nccl && i < 2 * g->nb; i++) cudaEventDestroy(g->pev_nccl[i]);
    if (g->pev_f) cudaEventDestroy(g->pev_ref);
    free(g->pev_f);
    free(g->pev_b);
    free(g->pev_nccl);
    if (g->ev_b0) {
        cudaEventDestroy(g->ev_b0);
        cudaEventDestroy(g->ev_b1);
        cudaEventDestroy(g->ev_b2);
    }
    for (int k = 0; k < 2; k++) {
        cudaFree(g->stage[k]);
        cudaFree(g->stage_lab[k]);
        if (g->staged[k]) cudaEventDestroy(g->staged[k]);
        if (g->consumed[k]) cudaEventDestroy(g->consumed[k]);
    }
    if (g->xs) cudaStreamDestroy(g->xs);
    cudaFree(g->acts);
    cudaFree(g->params);
    cudaFree(g->grads);
    cudaFree(g->velocity);
    cudaFree(g->state);
    cudaFree(g->labels);
    cudaFree(g->wh);
    cudaFree(g->gh);
    if (g->graph) cudaGraphExecDestroy(g->graph);
    cudaFree(g->step);
    cudaFree(g->half_dev);
    free(g->half_host);
    if (g->lr_ring) cudaFreeHost(g->lr_ring);
    for (int k = 0; k < GPUNET_RESULTS; k++) {
        if (g->step_end[k]) cudaEventDestroy(g->step_end[k]);
        if (g->step_start[k]) cudaEventDestroy(g->step_start[k]);
    }
    if (g->res_host) cudaFreeHost(g->res_host);
    cudaFree(g->optim_mem);
    if (g->blas) cublasDestroy(g->blas);
    if (g->dnn) cudnnDestroy(g->dnn);
    if (g->s) cudaStreamDestroy(g->s);
    convalgo_cache_free(g->algo_cache);
    free(g->impl);
    free(g->lp);
    free(g->acc);
    free(g->poff);
    free(g->host);
    free(g->slot0);
    free(g->zero_at);
    free(g->kept);
    free(g->x);
    free(g->dx);
    free(g->scratch);
#ifdef NVCNN_GPU_EMU
    free(g->scratch_at);
#endif
    free(g);
}

size_t gpunet_bytes(const GpuNet *g) { return g->bytes; }

size_t gpunet_layer_scratch(const GpuNet *g, int li) { return li >= 0 && li < g->net->nlayer ? g->scratch[li] : 0; }

size_t gpunet_scratch_bytes(const GpuNet *g) { return g->scratch_region; }

void gpunet_print_plan(const GpuNet *g, FILE *f) {
    const double MiB = 1048576.0, GiB = 1073741824.0;
    if (g->sync_check)
        fprintf(f, "NVCNN_SYNC_CHECK=1: synchronising after every layer's forward and backward (slow: names the layer at fault)\n");
    gpu_fuse_print(g, f);
    if (g->deterministic)
        fprintf(f, "cuDNN algorithm search: %.2f s (--deterministic: %d looked up in cuDNN's heuristics, deterministic algorithms only; "
                   "%d repeated shapes from the cache, %d not needed)\n",
                g->search_s, g->searches, g->searches_cached, g->searches_skipped);
    else
        fprintf(f, "cuDNN algorithm search: %.2f s (%d measured, %d repeated shapes from the cache, %d not needed)\n", g->search_s,
                g->searches, g->searches_cached, g->searches_skipped);
    fprintf(f, "cuDNN workspace: %.1f MiB (each algorithm %s within %.1f MiB: the cap of %.0f MiB "
               "(--cudnn_workspace_mb), or %.2f GiB free less the %.2f GiB arena and a %.2f GiB margin)\n",
            (double)g->ws_bytes / MiB, g->deterministic ? "the heuristics' first deterministic one" : "the fastest", (double)g->ws_limit / MiB, (double)g->ws_cap / MiB, (double)g->mem_free / GiB,
            (double)(g->acts_bytes - ((g->ws_bytes + 255) & ~(size_t)255)) / GiB, (double)g->mem_margin / GiB);
}

void gpunet_sync(GpuNet *g) { CUDA_CHECK(cudaStreamSynchronize(g->s)); }

/* ---- where a failure happens (error messages) and the checking mode ---- */
/* The layer running now, for the check macros' messages (common.h): the one piece of global
 * state, since the library checks cannot be handed the GpuNet. Set and cleared by the
 * traversals below, on the thread that drives the GPU. */
static struct {
    const GpuNet *g;
    int layer; /* -1: none */
    const char *phase;
} cur = {NULL, -1, NULL};

static void enter(const GpuNet *g, int layer, const char *phase) {
    cur.g = g;
    cur.layer = layer;
    cur.phase = phase;
}

static void where_of(const GpuNet *g, int li, const char *phase, char *buf, size_t n) {
    const Net *net = g->net;
    gpu_layer_where(buf, n, phase, net->layer[li].name, net->layer[li].ops->type, li, net->nlayer, net->model);
}

void gpu_where(char *buf, size_t n) {
    if (!cur.g || cur.layer < 0) {
        buf[0] = 0;
        return;
    }
    char w[256];
    where_of(cur.g, cur.layer, cur.phase, w, sizeof w);
    if (cur.g->sync_check)
        snprintf(buf, n, " (in %s)", w);
    else
        snprintf(buf, n, " (in %s; a kernel fault of an earlier layer can surface here: NVCNN_SYNC_CHECK=1 finds the layer at fault)", w);
}

/* NVCNN_SYNC_CHECK=1: waits for layer li's work and reports any error as that layer's. */
static void layer_done(GpuNet *g, int li, const char *phase) {
    if (!g->sync_check) return;
    cudaError_t e = cudaStreamSynchronize(g->s);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        char w[256];
        where_of(g, li, phase, w, sizeof w);
        die("CUDA: %s failed: %s (NVCNN_SYNC_CHECK=1: synchronised after every layer)", w, cudaGetErrorString(e));
    }
}

/* The lifetimes of the activation arena's tensors start where layer li's forward (its output,
 * unless it runs in place over an input, and its scratch, which it keeps for its backward) or
 * backward (every input gradient it writes first, by net_grad_schedule's plan, and its output's
 * gradient if nothing consumed the output) begins. The emulated device fills them with its poison pattern there
 * (memory that no one wrote this step reads as NaN: a read before the write shows at once);
 * nothing happens in the real build. */
#ifdef NVCNN_GPU_EMU
static void lifetimes_start(GpuNet *g, int li, int backward) {
    const Net *n = g->net;
    const Layer *l = &n->layer[li];
    if (g->absorbed[li]) return; /* a layer fused into a batch norm (fuse.cu): its nodes are the batch norm's */
    if (!backward) {
        if (g->scratch[li]) emu::poison_async(g->scratch_at[li], g->scratch[li], g->s);
        if (!g->x[l->out]) return; /* fused away (plan_nodes) */
        for (int k = 0; k < l->nin; k++)
            if (g->x[l->in[k]] == g->x[l->out]) return;
        emu::poison_async(g->x[l->out], shape_count(n->node[l->out].shape) * g->esize, g->s);
        return;
    }
    if (g->zero_at[li] >= 0) /* an output gradient that nothing wrote: zeros follow, unless the loss's */
        emu::poison_async(g->dx[l->out], shape_count(n->node[l->out].shape) * g->esize, g->s);
    for (int k = 0; k < l->nin; k++)
        if (g->dx[l->in[k]] && !gpu_acc(g, li, k))
            emu::poison_async(g->dx[l->in[k]], shape_count(n->node[l->in[k]].shape) * g->esize, g->s);
}
#else
static inline void lifetimes_start(GpuNet *, int, int) {}
#endif

/* --profile: event k of forward (pev_f) or backward (pev_b) on the compute stream */
static void prof_mark(GpuNet *g, cudaEvent_t *ev, int k) {
    if (!g->prof) return;
    CUDA_CHECK(cudaEventRecord(ev[k], g->s));
}

void gpunet_profile(GpuNet *g, int on) {
    const int nl = g->net->nlayer;
    if (on && !g->pev_f) {
        g->pev_f = (cudaEvent_t *)xcalloc((size_t)nl + 1, sizeof *g->pev_f);
        g->pev_b = (cudaEvent_t *)xcalloc((size_t)nl + 1, sizeof *g->pev_b);
        for (int i = 0; i <= nl; i++) {
            CUDA_CHECK(cudaEventCreate(&g->pev_f[i]));
            CUDA_CHECK(cudaEventCreate(&g->pev_b[i]));
        }
        g->pev_nccl = (cudaEvent_t *)xcalloc(2 * (size_t)g->nb + 1, sizeof *g->pev_nccl);
        for (int i = 0; i < 2 * g->nb; i++) CUDA_CHECK(cudaEventCreate(&g->pev_nccl[i]));
        CUDA_CHECK(cudaEventCreate(&g->pev_ref));
    }
    if (on) {
        /* the events' place on the host's clock: one event that the host waits for on an idle
         * device, read at once. The host's clock when the step's first event was queued is not
         * it: on a GPU the device may still be running the step before (nvcnn queues a step before
         * it reads the last one's result), and the profiled steps' layers then overlapped. */
        gpunet_sync(g);
        CUDA_CHECK(cudaEventRecord(g->pev_ref, g->s));
        CUDA_CHECK(cudaEventSynchronize(g->pev_ref));
        g->prof_host0 = now_seconds();
        g->prof_fwd = g->prof_bwd = g->prof_nccl = 0;
    }
    g->prof = on;
}

int gpunet_profile_buckets(GpuNet *g, double *t) {
    if (!g->prof_fwd && !g->prof_bwd) return 0;
    gpunet_sync(g);
    if (g->comm) CUDA_CHECK(cudaStreamSynchronize(g->cs));
    cudaEvent_t ref = g->pev_ref;
    for (int i = 0; i < 2 * g->prof_nccl; i++) {
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ref, g->pev_nccl[i]));
        t[i] = ms;
    }
    return g->prof_nccl;
}

int gpunet_profile_times(GpuNet *g, double *host0, double *fwd, double *bwd) {
    const int nl = g->net->nlayer;
    if (!g->prof_fwd && !g->prof_bwd) return 0;
    gpunet_sync(g);
    cudaEvent_t ref = g->pev_ref;
    float a, b;
    for (int i = 0; i < nl; i++) {
        fwd[2 * i] = fwd[2 * i + 1] = bwd[2 * i] = bwd[2 * i + 1] = NAN;
        if (g->prof_fwd) {
            CUDA_CHECK(cudaEventElapsedTime(&a, ref, g->pev_f[i]));
            CUDA_CHECK(cudaEventElapsedTime(&b, ref, g->pev_f[i + 1]));
            fwd[2 * i] = a;
            fwd[2 * i + 1] = b;
        }
        if (g->prof_bwd) { /* backward runs from the last layer to the first: pev_b[nl] after layer 0 */
            CUDA_CHECK(cudaEventElapsedTime(&a, ref, g->pev_b[i]));
            CUDA_CHECK(cudaEventElapsedTime(&b, ref, g->pev_b[i > 0 ? i - 1 : nl]));
            bwd[2 * i] = a;
            bwd[2 * i + 1] = b;
        }
    }
    *host0 = g->prof_host0;
    return 1;
}

int gpunet_emulated(void) {
#ifdef NVCNN_GPU_EMU
    return 1;
#else
    return 0;
#endif
}

void gpunet_forward(GpuNet *g) {
    Net *n = g->net;
    g->dropout_calls++;
    for (int i = 0; i < n->nlayer; i++) {
        enter(g, i, "forward");
        prof_mark(g, g->pev_f, i);
        lifetimes_start(g, i, 0);
        g->impl[i]->forward(g, &n->layer[i], i);
        layer_done(g, i, "forward");
    }
    prof_mark(g, g->pev_f, n->nlayer);
    if (g->prof) g->prof_fwd = 1;
    enter(NULL, -1, NULL);
}

double gpunet_loss(GpuNet *g) {
    Net *n = g->net;
    if (!g->loss_vec) return 0;
    int bs = n->batch;
    float *h = (float *)xmalloc((size_t)bs * sizeof(float));
    CUDA_CHECK(cudaMemcpyAsync(h, g->loss_vec, (size_t)bs * sizeof(float), cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
    double s = 0;
    for (int i = 0; i < bs; i++) s += h[i];
    free(h);
    n->loss = s / bs;
    return n->loss;
}

void gpunet_backward(GpuNet *g, float loss_scale, void (*on_ready)(void *, size_t), void *ctx) {
    Net *n = g->net;
    gpu_training_only(g, "gpunet_backward");
    if (loss_scale != GPUNET_DEVICE_SCALE) /* pageable memory: CUDA stages the value before the call returns */
        CUDA_CHECK(cudaMemcpyAsync(gpu_loss_scale(g), &loss_scale, sizeof loss_scale, cudaMemcpyHostToDevice, g->s));
    if (!g->ev_b0) {
        CUDA_CHECK(cudaEventCreate(&g->ev_b0));
        CUDA_CHECK(cudaEventCreate(&g->ev_b1));
        CUDA_CHECK(cudaEventCreate(&g->ev_b2));
    }
    if (!g->capturing) CUDA_CHECK(cudaEventRecord(g->ev_b0, g->s)); /* a graph's step is not timed */
    /* needed: the layers add their parameter gradients into the arena (cuDNN's backward filter
     * and cuBLAS with beta 1, the bias and batch-norm kernels' +=), and NCCL averages whole
     * buckets, the gaps between tensors included */
    CUDA_CHECK(cudaMemsetAsync(g->grads, 0, g->P * sizeof(float), g->s));
    g->next = 0;
    for (int i = n->nlayer - 1; i >= 0; i--) {
        Layer *l = &n->layer[i];
        /* a node nothing consumed reads as zeros, where its producer's backward reads it (the
         * loss's does not); every other gradient is written by its first consumer before
         * anything reads it */
        enter(g, i, "backward");
        prof_mark(g, g->pev_b, i);
        lifetimes_start(g, i, 1);
        if (g->zero_at[i] >= 0 && g->impl[i] != &gpu_xent_impl)
            CUDA_CHECK(cudaMemsetAsync(g->dx[g->zero_at[i]], 0, shape_count(n->node[g->zero_at[i]].shape) * g->esize, g->s));
        g->impl[i]->backward(g, l, i);
        layer_done(g, i, "backward");
        enter(NULL, -1, NULL);
        if (l->nparam > 0 && g->comm) gpu_allreduce_ready(g, g->poff[l->param0], g->lev[i]);
        if (l->nparam > 0 && on_ready) {
            if (gpu_half(g)) gpu_grads_from_half(g, g->poff[l->param0], g->P); /* the host reads them now */
            gpunet_sync(g);
            on_ready(ctx, n->param[l->param0].off);
        }
    }
    if (gpu_half(g) && !g->comm) gpu_grads_from_half(g, 0, g->P); /* with NCCL: bucket by bucket */
    prof_mark(g, g->pev_b, n->nlayer);
    if (g->prof) g->prof_bwd = 1;
    CUDA_CHECK(cudaEventRecord(g->ev_b1, g->s));
    if (g->comm) gpu_allreduce_finish(g); /* the compute stream waits for every bucket */
    if (!g->capturing) CUDA_CHECK(cudaEventRecord(g->ev_b2, g->s));
    g->timed = !g->capturing;
}

/* ---- the step as one CUDA Graph ----
 * Forward, the step's statistics, backward (NCCL's buckets on their stream, forked from the
 * compute stream and joined back by events, as CUDA's stream capture follows them) and the step's
 * tail are captured once and replayed by one cudaGraphLaunch per step. A replay runs the recorded
 * kernels with their recorded arguments, so everything that changes from step to step is read from
 * device memory: the learning rate (copied in before the launch), the loss scale and the step's
 * counters (the device's step state), the batch (the same input and label buffers: a staged batch
 * is converted into them before the launch). What still changes on the host refuses the graph:
 * dropout's per-forward seed, --profile's events, NVCNN_SYNC_CHECK's per-layer waits. */
const char *gpunet_graph_refusal(const GpuNet *g) {
    if (g->sync_check) return "NVCNN_SYNC_CHECK=1 synchronises after every layer";
    if (g->prof) return "--profile records events around every layer";
    for (int i = 0; i < g->net->nlayer && !g->inference; i++) /* (inference passes dropout through) */
        if (g->impl[i] == &gpu_dropout_impl) return "dropout draws a new mask from a host counter every forward";
    return NULL;
}

void gpunet_graph_infer(GpuNet *g) {
    if (!g->inference) die("gpunet_graph_infer on a GPU net built for training");
    if (!g->graph) {
        cudaGraph_t graph;
        const int training = g->net->training;
        g->net->training = 0;
        g->capturing = 1;
        CUDA_CHECK(cudaStreamBeginCapture(g->s, cudaStreamCaptureModeGlobal));
        gpunet_forward(g);
        gpu_infer_tail(g);
        CUDA_CHECK(cudaStreamEndCapture(g->s, &graph));
        g->capturing = 0;
        g->net->training = training;
        CUDA_CHECK(cudaGraphInstantiate(&g->graph, graph, 0));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaGraphLaunch(g->graph, g->s));
    gpu_step_timed(g);
}

void gpunet_graph_step(GpuNet *g, double lr, int with_l2) {
    gpu_training_only(g, "gpunet_graph_step");
    if (g->graph && g->graph_with_l2 != with_l2) {
        CUDA_CHECK(cudaGraphExecDestroy(g->graph));
        g->graph = NULL;
    }
    if (!g->graph) {
        cudaGraph_t graph;
        g->capturing = 1;
        CUDA_CHECK(cudaStreamBeginCapture(g->s, cudaStreamCaptureModeGlobal));
        gpunet_forward(g);
        gpunet_queue_stats(g, with_l2);
        gpunet_backward(g, GPUNET_DEVICE_SCALE, NULL, NULL);
        gpu_step_tail(g);
        CUDA_CHECK(cudaStreamEndCapture(g->s, &graph));
        g->capturing = 0;
        CUDA_CHECK(cudaGraphInstantiate(&g->graph, graph, 0));
        CUDA_CHECK(cudaGraphDestroy(graph));
        g->graph_with_l2 = with_l2;
    }
    gpu_step_lr(g, lr);
    CUDA_CHECK(cudaGraphLaunch(g->graph, g->s));
    gpu_step_timed(g);
}

int gpunet_graph_made(const GpuNet *g) { return g->graph != NULL; }

void gpunet_backward_ms(GpuNet *g, double *backward, double *exposed) {
    *backward = *exposed = 0;
    if (!g->timed) return;
    float b = 0, e = 0;
    CUDA_CHECK(cudaEventSynchronize(g->ev_b2));
    CUDA_CHECK(cudaEventElapsedTime(&b, g->ev_b0, g->ev_b1));
    CUDA_CHECK(cudaEventElapsedTime(&e, g->ev_b1, g->ev_b2));
    *backward = b;
    *exposed = e;
}
