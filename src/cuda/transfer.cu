/* transfer.cu: host <-> device copies of the GPU backend (gpunet.h): parameters, state, velocity
 * and gradients (the device arenas hold each tensor at a multiple of 64 elements, the host's
 * packed), single nodes in the storage type, the batch and its labels, and the real-data path's
 * two staged slots, copied on a stream of their own. */
#include <string.h>

#include "gpunet_internal.h"

/* [n][c][hw] <-> [n][hw][c] on the host (to_nhwc says which way) */
static void host_layout(const float *src, float *dst, Shape s, int to_nhwc) {
    const size_t C = (size_t)s.c, HW = (size_t)s.h * s.w;
    for (size_t i = 0; i < (size_t)s.n; i++, src += C * HW, dst += C * HW)
        for (size_t c = 0; c < C; c++)
            for (size_t p = 0; p < HW; p++) {
                if (to_nhwc)
                    dst[p * C + c] = src[c * HW + p];
                else
                    dst[c * HW + p] = src[p * C + c];
            }
}

/* NHWC: every convolution's filter in g->host between the host's KCRS ([cout][cin/groups][kh][kw])
 * and the device's KRSC ([cout][kh][kw][cin/groups]): host_layout's transpose with the output
 * channels for n and the kernel's positions for hw; to_krsc says which way. */
static void permute_filters(GpuNet *g, int to_krsc) {
    const Net *n = g->net;
    if (!g->nhwc) return;
    for (int i = 0; i < n->nlayer; i++) {
        const Layer *l = &n->layer[i];
        if (strcmp(l->ops->type, "conv") != 0) continue;
        const Conv *c = (const Conv *)l->priv;
        const Shape s = {c->cout, c->cin / c->groups, c->kh * c->kw, 1};
        const size_t count = shape_count(s);
        float *w = g->host + g->poff[c->pw], *t = (float *)xmalloc(count * sizeof(float));
        host_layout(w, t, s, to_krsc);
        memcpy(w, t, count * sizeof(float));
        free(t);
    }
}

/* The device arenas place each parameter tensor at a multiple of 64 elements (g->poff) so that
 * every tensor the libraries see is aligned; the gaps hold zeros. Host <-> device copies go
 * through g->host (P floats) and a gather or scatter on the host (and, in NHWC, the filters'
 * permutation). */
static void to_device(GpuNet *g, float *dev, const float *host) {
    const Net *n = g->net;
    memset(g->host, 0, g->P * sizeof(float));
    for (int p = 0; p < n->nparam; p++) memcpy(g->host + g->poff[p], host + n->param[p].off, n->param[p].count * sizeof(float));
    permute_filters(g, 1);
    CUDA_CHECK(cudaMemcpyAsync(dev, g->host, g->P * sizeof(float), cudaMemcpyHostToDevice, g->s));
    gpunet_sync(g);
}

static void to_host(GpuNet *g, float *host, const float *dev) {
    const Net *n = g->net;
    CUDA_CHECK(cudaMemcpyAsync(g->host, dev, g->P * sizeof(float), cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
    permute_filters(g, 0);
    for (int p = 0; p < n->nparam; p++) memcpy(host + n->param[p].off, g->host + g->poff[p], n->param[p].count * sizeof(float));
}

void gpunet_upload_params(GpuNet *g) {
    const Net *n = g->net;
    to_device(g, g->params, n->params);
    CUDA_CHECK(cudaMemcpyAsync(g->state, n->state, n->state_total * sizeof(float), cudaMemcpyHostToDevice, g->s));
    gpu_cast_params(g);
    gpunet_sync(g);
}

void gpunet_download_params(GpuNet *g) {
    Net *n = g->net;
    to_host(g, n->params, g->params);
    CUDA_CHECK(cudaMemcpyAsync(n->state, g->state, n->state_total * sizeof(float), cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
}

/* an inference net has no velocity: the host's stays as it is */
void gpunet_upload_velocity(GpuNet *g, const float *v) {
    if (g->velocity) to_device(g, g->velocity, v);
}

void gpunet_download_velocity(GpuNet *g, float *v) {
    if (g->velocity) to_host(g, v, g->velocity);
}

void gpunet_download_grads(GpuNet *g) {
    gpu_training_only(g, "gpunet_download_grads");
    to_host(g, g->net->grads, g->grads);
}

void gpunet_upload_grads(GpuNet *g) {
    gpu_training_only(g, "gpunet_upload_grads");
    to_device(g, g->grads, g->net->grads);
}

/* host-side conversions between fp32 and the 16-bit storage types */
static void host_to_storage(const GpuNet *g, const float *src, void *dst, size_t n) {
    if (g->prec == PREC_FP16)
        for (size_t i = 0; i < n; i++) ((__half *)dst)[i] = __float2half_rn(src[i]);
    else
        for (size_t i = 0; i < n; i++) ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
}

void gpu_host_from_storage(const GpuNet *g, const void *src, float *dst, size_t n) {
    if (g->prec == PREC_FP16)
        for (size_t i = 0; i < n; i++) dst[i] = __half2float(((const __half *)src)[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = __bfloat162float(((const __nv_bfloat16 *)src)[i]);
}

/* Whether node data of shape s differs between NCHW and g's layout (NHWC with several channels
 * and pixels). */
static int node_permuted(const GpuNet *g, Shape s) { return g->nhwc && s.c > 1 && s.h * s.w > 1; }

/* The layer whose output node `id` is, when fusion left it unwritten: a fused batch norm's own
 * output, or a fused add's (the fused pass writes the last fused layer's node only); -1 otherwise */
int gpunet_fused_away(const GpuNet *g, int id) {
    if (!g->fused) return -1;
    const Net *net = g->net;
    for (int li = 0; li < net->nlayer; li++) {
        const GpuFused *f = &g->fused[li];
        if (f->out < 0 || f->out == id) continue;
        if (net->layer[li].out == id || (f->z >= 0 && f->add_li >= 0 && net->layer[f->add_li].out == id)) return li;
    }
    return -1;
}

size_t gpunet_activation_bytes(const GpuNet *g) { return g->grad_off; }

void gpunet_download_node(GpuNet *g, int id, float *dst, int grad) {
    const int by = gpunet_fused_away(g, id);
    if (by >= 0)
        die("gpunet_download_node: node %d's %s is never written: fused into batch norm %s's pass (--fuse=off keeps it)", id,
            grad ? "gradient" : "data", g->net->layer[by].name);
    if (g->inference && (grad || !g->kept[id]))
        die("gpunet_download_node: node %d's %s is not kept by a GPU net built for inference only (its memory is shared by lifetime)", id,
            grad ? "gradient" : "data");
    const void *src = grad ? g->dx[id] : g->x[id];
    if (!src) die("gpunet_download_node: node %d has no %s", id, grad ? "gradient" : "data");
    const Shape s = g->net->node[id].shape;
    const size_t n = shape_count(s);
    const int perm = node_permuted(g, s);
    float *out = perm ? (float *)xmalloc(n * sizeof(float)) : dst;
    if (!gpu_half(g)) {
        CUDA_CHECK(cudaMemcpyAsync(out, src, n * sizeof(float), cudaMemcpyDeviceToHost, g->s));
        gpunet_sync(g);
    } else {
        void *tmp = xmalloc(n * g->esize);
        CUDA_CHECK(cudaMemcpyAsync(tmp, src, n * g->esize, cudaMemcpyDeviceToHost, g->s));
        gpunet_sync(g);
        gpu_host_from_storage(g, tmp, out, n);
        free(tmp);
    }
    if (perm) {
        host_layout(out, dst, s, 0);
        free(out);
    }
}

void gpunet_upload_node(GpuNet *g, int id, const float *src) {
    const Shape s = g->net->node[id].shape;
    const size_t n = shape_count(s);
    float *in = NULL;
    if (node_permuted(g, s)) {
        in = (float *)xmalloc(n * sizeof(float));
        host_layout(src, in, s, 1);
        src = in;
    }
    if (!gpu_half(g)) {
        CUDA_CHECK(cudaMemcpyAsync(g->x[id], src, n * sizeof(float), cudaMemcpyHostToDevice, g->s));
        gpunet_sync(g);
    } else {
        void *tmp = xmalloc(n * g->esize);
        host_to_storage(g, src, tmp, n);
        CUDA_CHECK(cudaMemcpyAsync(g->x[id], tmp, n * g->esize, cudaMemcpyHostToDevice, g->s));
        gpunet_sync(g);
        free(tmp);
    }
    free(in);
}

void gpunet_set_input(GpuNet *g, const float *nchw) {
    /* synchronous: the caller refills its host buffer right after */
    gpunet_upload_node(g, g->net->input, nchw);
}

void gpunet_set_labels(GpuNet *g, const int32_t *labels) {
    Net *n = g->net;
    int classes = n->logits >= 0 ? (int)shape_sample(n->node[n->logits].shape) : 0;
    for (int i = 0; i < n->batch; i++)
        if (labels[i] < 0 || (classes && labels[i] >= classes))
            die("softmax_xent: label %d of batch index %d is outside [0, %d)", (int)labels[i], i, classes);
    CUDA_CHECK(cudaMemcpyAsync(g->labels, labels, (size_t)n->batch * sizeof(int32_t), cudaMemcpyHostToDevice, g->s));
    gpunet_sync(g);
    n->labels = labels;
}

/* NHWC bytes -> NHWC storage x / 127.5 - 1: a scale, element by element */
template <typename T> __global__ void k_u8_scale(const uint8_t *in, T *out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = from_f<T>(__fadd_rn(__fmul_rn((float)in[i], 1.0f / 127.5f), -1.0f)); /* as k_u8_to_input */
}

/* NHWC bytes -> NCHW floats x / 127.5 - 1, one thread per pixel */
template <typename T> __global__ void k_u8_to_input(const uint8_t *in, T *out, int n, int c, int hw) {
    const size_t pixels = (size_t)n * hw;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pixels; p += (size_t)gridDim.x * blockDim.x) {
        size_t i = p / hw, q = p % hw;
        const uint8_t *s = in + p * c;
        T *d = out + i * (size_t)c * hw + q;
        /* no FMA contraction: the same rounding as the host's input_from_u8_nhwc */
        for (int ch = 0; ch < c; ch++) d[(size_t)ch * hw] = from_f<T>(__fadd_rn(__fmul_rn((float)s[ch], 1.0f / 127.5f), -1.0f));
    }
}

void gpunet_stage_batch(GpuNet *g, int slot, const uint8_t *nhwc, const int32_t *labels) {
    Net *n = g->net;
    int classes = n->logits >= 0 ? (int)shape_sample(n->node[n->logits].shape) : 0;
    for (int i = 0; i < n->batch; i++)
        if (labels[i] < 0 || (classes && labels[i] >= classes))
            die("softmax_xent: label %d of batch index %d is outside [0, %d)", (int)labels[i], i, classes);
    /* the compute stream must be done with what this slot held before */
    CUDA_CHECK(cudaStreamWaitEvent(g->xs, g->consumed[slot], 0));
    CUDA_CHECK(cudaMemcpyAsync(g->stage[slot], nhwc, g->stage_bytes, cudaMemcpyHostToDevice, g->xs));
    CUDA_CHECK(cudaMemcpyAsync(g->stage_lab[slot], labels, (size_t)n->batch * sizeof(int32_t), cudaMemcpyHostToDevice, g->xs));
    CUDA_CHECK(cudaEventRecord(g->staged[slot], g->xs));
}

void gpunet_stage_wait(GpuNet *g, int slot) { CUDA_CHECK(cudaEventSynchronize(g->staged[slot])); }

void gpunet_use_batch(GpuNet *g, int slot) {
    Net *n = g->net;
    const Shape s = n->node[n->input].shape;
    CUDA_CHECK(cudaStreamWaitEvent(g->s, g->staged[slot], 0));
    if (g->nhwc)
        GPU_DISPATCH(g, T, LAUNCH(k_u8_scale<T>, gpu_blocks(shape_count(s)), GPU_THREADS, 0, g->s, g->stage[slot], (T *)g->x[n->input], shape_count(s)));
    else
        GPU_DISPATCH(g, T,
                 LAUNCH(k_u8_to_input<T>, gpu_blocks((size_t)s.n * s.h * s.w), GPU_THREADS, 0, g->s, g->stage[slot], (T *)g->x[n->input], s.n, s.c,
                                                                                        s.h * s.w));
    CUDA_CHECK(cudaMemcpyAsync(g->labels, g->stage_lab[slot], (size_t)n->batch * sizeof(int32_t), cudaMemcpyDeviceToDevice, g->s));
    CUDA_CHECK(cudaEventRecord(g->consumed[slot], g->s));
}

