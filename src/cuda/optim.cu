/* optim.cu: the optimizer and the step's statistics on the device (gpunet.h): the loss and the
 * weights' sum of squares, the non-finite check, unscaling, momentum SGD and LARC.
 *
 * Every sum here is deterministic: blocks write partial sums and one thread adds them in order
 * (no atomics), so that ranks that hold the same gradients compute the same bits.
 *
 * LARC needs a factor per parameter tensor from the norms of its weights and its decayed
 * gradient. Instead of four launches per tensor (160 tensors in resnet50: 640 launches), the
 * arena is cut into chunks that never straddle two tensors (gpu_optim_plan), and three launches
 * do the whole step: every chunk's partial sums (adding the weight decay into the gradient on
 * the way, as optim.c does), every tensor's factor from its chunks' sums in order, and every
 * chunk's update with its tensor's factor. */
#include <math.h>

#include "gpunet_internal.h"

/* elements per LARC chunk: GPU_THREADS threads, 128 elements each */
#define LARC_CHUNK ((size_t)GPU_THREADS * 128)
/* blocks of the sum-of-squares partials (and the size of their array) */
#define RED_BLOCKS 1024

struct LarcChunk {
    int tensor; /* parameter index */
    size_t lo, n; /* arena offset and length, within the tensor */
};

size_t gpu_optim_bytes(const Net *net, int *nchunks) {
    size_t k = 0;
    for (int p = 0; p < net->nparam; p++) k += (net->param[p].count + LARC_CHUNK - 1) / LARC_CHUNK;
    *nchunks = (int)k;
    return k * sizeof(LarcChunk) + (size_t)(net->nparam + 1) * sizeof(int) + 2 * k * sizeof(double) +
           (size_t)net->nparam * sizeof(float) + RED_BLOCKS * sizeof(double) + 5 * 256;
}

void gpu_optim_bind(GpuNet *g, char *mem, int nchunks) {
    const Net *net = g->net;
    const size_t chunk_bytes = (size_t)nchunks * sizeof(LarcChunk), first_bytes = (size_t)(net->nparam + 1) * sizeof(int);
    auto next = [&mem](size_t bytes) {
        char *p = mem;
        mem += (bytes + 255) & ~(size_t)255;
        return p;
    };
    g->larc_chunk = next(chunk_bytes);
    g->larc_first = (int *)next(first_bytes);
    g->larc_part = (double *)next(2 * (size_t)nchunks * sizeof(double));
    g->larc_factor = (float *)next((size_t)net->nparam * sizeof(float));
    g->red_part = (double *)next(RED_BLOCKS * sizeof(double));
    g->larc_nchunk = nchunks;
    /* the tables, made on the host */
    LarcChunk *c = (LarcChunk *)xmalloc(chunk_bytes ? chunk_bytes : 1);
    int *first = (int *)xmalloc(first_bytes);
    int k = 0;
    for (int p = 0; p < net->nparam; p++) {
        first[p] = k;
        for (size_t at = 0; at < net->param[p].count; at += LARC_CHUNK, k++) {
            c[k].tensor = p;
            c[k].lo = g->poff[p] + at;
            c[k].n = net->param[p].count - at < LARC_CHUNK ? net->param[p].count - at : LARC_CHUNK;
        }
    }
    first[net->nparam] = k;
    if (chunk_bytes) CUDA_CHECK(cudaMemcpyAsync(g->larc_chunk, c, chunk_bytes, cudaMemcpyHostToDevice, g->s));
    CUDA_CHECK(cudaMemcpyAsync(g->larc_first, first, first_bytes, cudaMemcpyHostToDevice, g->s));
    gpunet_sync(g); /* the host tables go now */
    free(c);
    free(first);
}

/* ---- elementwise ---- */
__global__ void k_scale(float *g, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) g[i] *= s;
}

__global__ void k_nonfinite(const float *g, size_t n, int *flag) {
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        bad |= !isfinite(g[i]);
    if (bad) *flag = 1;
}

/* ---- block sums ---- */
/* The sum over the block of every thread's x (GPU_THREADS threads); valid in thread 0. */
__device__ static double block_sum(double x) {
    __shared__ double s[GPU_THREADS];
    s[threadIdx.x] = x;
    __syncthreads();
    for (int k = GPU_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    double r = s[0];
    __syncthreads(); /* s is reused by the next call */
    return r;
}

/* partial[block] = sum of a[i]^2 over the block's grid-stride share */
__global__ void k_sumsq_partial(const float *a, size_t n, double *partial) {
    double x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x += (double)a[i] * a[i];
    x = block_sum(x);
    if (threadIdx.x == 0) partial[blockIdx.x] = x;
}

/* *out = sum of partial[0 .. nb) in order (one thread) */
__global__ void k_sum_partials(const double *partial, int nb, double *out) {
    double s = 0;
    for (int b = 0; b < nb; b++) s += partial[b];
    *out = s;
}

/* *out = sum of a[0 .. n) (one block) */
__global__ void k_sum(const float *a, size_t n, double *out) {
    double x = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) x += a[i];
    x = block_sum(x);
    if (threadIdx.x == 0) *out = x;
}

static unsigned red_blocks(size_t n) {
    size_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
    return (unsigned)(b > RED_BLOCKS ? RED_BLOCKS : (b ? b : 1));
}

void gpunet_scale_grads(GpuNet *g, float s) {
    size_t n = g->P;
    if (n == 0 || s == 1.0f) return;
    LAUNCH(k_scale, gpu_blocks(n), GPU_THREADS, 0, g->s, g->grads, n, s);
}

void gpunet_queue_stats(GpuNet *g, int with_l2) {
    Net *n = g->net;
    CUDA_CHECK(cudaMemsetAsync(g->stats, 0, 2 * sizeof(double), g->s));
    if (g->loss_vec) LAUNCH(k_sum, 1, GPU_THREADS, 0, g->s, g->loss_vec, (size_t)n->batch, g->stats); /* the per-sample losses */
    if (with_l2 && g->P) {
        const unsigned nb = red_blocks(g->P);
        LAUNCH(k_sumsq_partial, nb, GPU_THREADS, 0, g->s, g->params, g->P, g->red_part);
        LAUNCH(k_sum_partials, 1, 1, 0, g->s, g->red_part, (int)nb, g->stats + 1);
    }
}

void gpunet_read_stats(GpuNet *g, double *loss, double *l2, int *finite) {
    Net *n = g->net;
    size_t P = g->P;
    double h[2] = {0, 0};
    int flag = 0;
    CUDA_CHECK(cudaMemsetAsync(g->flag, 0, sizeof(int), g->s));
    if (P) LAUNCH(k_nonfinite, red_blocks(P), GPU_THREADS, 0, g->s, g->grads, P, g->flag);
    CUDA_CHECK(cudaMemcpyAsync(h, g->stats, sizeof h, cudaMemcpyDeviceToHost, g->s));
    CUDA_CHECK(cudaMemcpyAsync(&flag, g->flag, sizeof flag, cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
    int bs = n->batch > 0 ? n->batch : 1;
    *loss = h[0] / bs;
    n->loss = *loss;
    *l2 = 0.5 * h[1];
    *finite = !flag;
}

/* ---- the update ---- */
/* g += wd w; v = m v + g; w -= lr (nesterov ? g + m v : v) over the whole arena (no LARC), as
 * optim.c */
__global__ void k_sgd(float *w, float *gr, float *v, size_t n, float lr, float m, int nest, float wd) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = gr[i];
        if (wd != 0.0f) gr[i] = gi = gi + wd * w[i];
        float vi = m * v[i] + gi;
        v[i] = vi;
        w[i] -= nest ? lr * (gi + m * vi) : lr * vi;
    }
}

/* block k (chunk k): g += wd w over the chunk (in place: the factor sees the decayed gradient),
 * part[2k] = sum of w^2, part[2k + 1] = sum of g^2 */
__global__ void k_larc_norms(const LarcChunk *chunk, const float *w, float *gr, float wd, double *part) {
    const LarcChunk c = chunk[blockIdx.x];
    double ww = 0, gg = 0;
    for (size_t i = c.lo + threadIdx.x; i < c.lo + c.n; i += blockDim.x) {
        float gi = gr[i];
        if (wd != 0.0f) gr[i] = gi = gi + wd * w[i];
        ww += (double)w[i] * w[i];
        gg += (double)gi * gi;
    }
    ww = block_sum(ww);
    gg = block_sum(gg);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = ww;
        part[2 * blockIdx.x + 1] = gg;
    }
}

/* thread t (tensor t): its factor from its chunks' sums, added in order, as optim.c: eta |w| / |g|
 * (1 when either norm is 0), clipped to lr (min(local / lr, 1)) unless scale_mode */
__global__ void k_larc_factors(const int *first, int ntensors, const double *part, float *factor, double eta, double lr, int scale_mode) {
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < ntensors; t += gridDim.x * blockDim.x) {
        double ww = 0, gg = 0;
        for (int k = first[t]; k < first[t + 1]; k++) {
            ww += part[2 * k];
            gg += part[2 * k + 1];
        }
        double wn = sqrt(ww), gn = sqrt(gg);
        double local = (wn != 0 && gn != 0) ? eta * wn / gn : 1.0;
        if (!scale_mode) local = fmin(local / lr, 1.0);
        factor[t] = (float)local;
    }
}

/* block k (chunk k): the momentum update of the chunk with its tensor's factor */
__global__ void k_larc_sgd(const LarcChunk *chunk, float *w, const float *gr, float *v, const float *factor, float lr, float m, int nest) {
    const LarcChunk c = chunk[blockIdx.x];
    const float s = factor[c.tensor];
    for (size_t i = c.lo + threadIdx.x; i < c.lo + c.n; i += blockDim.x) {
        float gi = gr[i] * s;
        float vi = m * v[i] + gi;
        v[i] = vi;
        w[i] -= nest ? lr * (gi + m * vi) : lr * vi;
    }
}

void gpunet_sgd(GpuNet *g, double lr, double momentum, int nesterov, double weight_decay, double larc_eta, int larc_scale) {
    Net *n = g->net;
    if (g->P == 0) return;
    if (larc_eta <= 0) {
        LAUNCH(k_sgd, gpu_blocks(g->P), GPU_THREADS, 0, g->s, g->params, g->grads, g->velocity, g->P, (float)lr, (float)momentum,
               nesterov, (float)weight_decay);
    } else if (g->larc_nchunk > 0) {
        const LarcChunk *chunks = (const LarcChunk *)g->larc_chunk;
        LAUNCH(k_larc_norms, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, chunks, g->params, g->grads, (float)weight_decay,
               g->larc_part);
        LAUNCH(k_larc_factors, (unsigned)((n->nparam + GPU_THREADS - 1) / GPU_THREADS), GPU_THREADS, 0, g->s, g->larc_first, n->nparam,
               g->larc_part, g->larc_factor, larc_eta, lr, larc_scale);
        LAUNCH(k_larc_sgd, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, chunks, g->params, g->grads, g->velocity, g->larc_factor,
               (float)lr, (float)momentum, nesterov);
    }
    gpu_cast_params(g);
}
