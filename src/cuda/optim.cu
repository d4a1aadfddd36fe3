/* optim.cu: the optimizer and the step's statistics on the device (gpunet.h): the loss and the
 * weights' sum of squares, the non-finite check, the skip of a step, the dynamic loss scale,
 * unscaling, momentum SGD and LARC, all decided on the device (gpunet_step).
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

/* ---- the step's state on the device ----
 * The step decides on the device what the host decided before (the host then had to wait for
 * the gradients before queueing the update): whether every gradient is finite, the skip of a step
 * that is not, the dynamic loss scale's move, LARC's factors. Kernels read the learning rate and the
 * loss scale from here, so that the same launches serve every step. Each finished step leaves its
 * loss and statistics in a ring of GPUNET_RESULTS results that the host reads when it wants them
 * (gpunet_step_results: one synchronisation for up to that many steps). */
struct StepState {
    double lr;                 /* this step's learning rate (copied from the host's ring before the update) */
    float scale;               /* the loss scale of backward (the loss layer reads it) */
    int bad;                   /* 1 if a gradient of this step is inf or nan */
    long long good, skipped;   /* good steps in a row, skipped steps in all */
    long long done;            /* steps finished: the next result's place in the ring is done % GPUNET_RESULTS */
    double sums[2];            /* this step's sum of per-sample losses and of squared weights */
    GpuStepResult ring[GPUNET_RESULTS];
};

size_t gpu_step_bytes(void) { return sizeof(StepState); }
float *gpu_loss_scale(GpuNet *g) { return &((StepState *)g->step)->scale; }

/* the state's counters and scale, from the host (the start, a restored checkpoint) */
__global__ void k_step_state(StepState *st, float scale, long long good, long long skipped) {
    st->scale = scale;
    st->good = good;
    st->skipped = skipped;
}

void gpunet_step_state(GpuNet *g, double loss_scale, long good, long skipped) {
    LAUNCH(k_step_state, 1, 1, 0, g->s, (StepState *)g->step, (float)loss_scale, (long long)good, (long long)skipped);
}

void gpunet_step_setup(GpuNet *g, const GpuStepConfig *c) { g->stepc = *c; }

/* *flag = 1 if any of g[0 .. n) is inf or nan (every writer writes the same value: no race that
 * matters) */
__global__ void k_nonfinite(const float *g, size_t n, int *flag) {
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        bad |= !isfinite(g[i]);
    if (bad) *flag = 1;
}

/* ---- block sums ---- */
/* The sum over the block of every thread's x (GPU_THREADS threads); valid in thread 0. Once per
 * kernel (its shared array is not reused). */
__device__ static double block_sum(double x) {
    __shared__ double s[1][GPU_THREADS];
    gpu_block_reduce<1>(s, &x);
    return x;
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

/* sums[0] = sum of a[0 .. n) (one block); sums[1] = 0 and the step's flag cleared */
__global__ void k_step_begin(const float *a, size_t n, StepState *st) {
    double x = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) x += a[i];
    x = block_sum(x);
    if (threadIdx.x == 0) {
        st->sums[0] = x;
        st->sums[1] = 0;
        st->bad = 0;
    }
}

/* Blocks for a grid-stride pass over n parameters: at most RED_BLOCKS (resnet50's 25.6M take
 * them all), and at least 16 elements a thread (a smaller net's pass would otherwise start a
 * thread per element, which spends more on the block's reduction than on the loads). */
static unsigned red_blocks(size_t n) {
    size_t b = (n + GPU_THREADS * 16 - 1) / (GPU_THREADS * 16);
    return (unsigned)(b > RED_BLOCKS ? RED_BLOCKS : (b ? b : 1));
}

/* The step's first half, queued after forward: the loss's sum, the flag cleared, and (with_l2) the
 * weights' sum of squares before the update. */
void gpunet_queue_stats(GpuNet *g, int with_l2) {
    Net *n = g->net;
    StepState *st = (StepState *)g->step;
    LAUNCH(k_step_begin, 1, GPU_THREADS, 0, g->s, g->loss_vec, g->loss_vec ? (size_t)n->batch : 0, st);
    if (with_l2 && g->P) {
        const unsigned nb = red_blocks(g->P);
        LAUNCH(k_sumsq_partial, nb, GPU_THREADS, 0, g->s, g->params, g->P, g->red_part);
        LAUNCH(k_sum_partials, 1, 1, 0, g->s, g->red_part, (int)nb, &st->sums[1]);
    }
}

/* The step's last kernel (one thread): the result into the ring, and the skip and the loss scale
 * accounted as train.c's account_step does on the host (halved on overflow down to 1, doubled
 * after 2000 good steps in a row up to 2^24). */
__global__ void k_step_end(StepState *st, int dynamic) {
    GpuStepResult *r = &st->ring[st->done % GPUNET_RESULTS];
    r->loss_sum = st->sums[0];
    r->l2 = st->sums[1];
    r->scale = st->scale;
    r->finite = !st->bad;
    if (st->bad) {
        st->skipped++;
        st->good = 0;
        if (dynamic && st->scale > 1) st->scale *= 0.5f;
    } else {
        st->good++;
        if (dynamic && st->good % 2000 == 0 && st->scale < 16777216.0f) st->scale *= 2;
    }
    st->done++;
}

/* ---- the update ----
 * One pass over the parameter arena does the whole update: unscaling, weight decay, momentum
 * (Nesterov as TensorFlow), the weights, and their 16-bit copy in fp16/bf16 (wh; NULL in fp32 and
 * tf32). In the trainer's step (use_state 1) every kernel first looks at the step's flag and does
 * nothing when a gradient was not finite (the step is skipped: weights and momentum keep their
 * bits), and unscales by the loss scale of the step's backward; gpunet_sgd (use_state 0) updates
 * unconditionally without unscaling. The learning rate is the state's. The gradients are left
 * unscaled and decayed in the arena, as before. */
__device__ __forceinline__ float step_inv_scale(const StepState *st, int use_state) {
    /* as the host did: (float)(1.0 / scale), 1 when the scale is 1 */
    return use_state && st->scale != 1.0f ? (float)(1.0 / (double)st->scale) : 1.0f;
}

template <typename T> __device__ __forceinline__ void put_weight(float *w, T *wh, size_t i, float v) {
    w[i] = v;
    if (wh) wh[i] = from_f<T>(v);
}

/* g = g / scale + wd w; v = m v + g; w -= lr (nesterov ? g + m v : v) over the whole arena (no LARC),
 * as optim.c */
template <typename T>
__global__ void k_sgd(const StepState *st, int use_state, float *w, float *gr, float *v, T *wh, size_t n, float m, int nest, float wd) {
    if (use_state && st->bad) return;
    const float inv = step_inv_scale(st, use_state), lr = (float)st->lr;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = gr[i];
        if (inv != 1.0f) gr[i] = gi = gi * inv;
        if (wd != 0.0f) gr[i] = gi = gi + wd * w[i];
        float vi = m * v[i] + gi;
        v[i] = vi;
        put_weight(w, wh, i, w[i] - (nest ? lr * (gi + m * vi) : lr * vi));
    }
}

/* block k (chunk k): g = g / scale + wd w over the chunk (in place: the factor sees the decayed
 * gradient), part[2k] = sum of w^2, part[2k + 1] = sum of g^2 */
__global__ void k_larc_norms(const StepState *st, int use_state, const LarcChunk *chunk, const float *w, float *gr, float wd, double *part) {
    if (use_state && st->bad) return;
    const float inv = step_inv_scale(st, use_state);
    const LarcChunk c = chunk[blockIdx.x];
    double ww = 0, gg = 0;
    for (size_t i = c.lo + threadIdx.x; i < c.lo + c.n; i += blockDim.x) {
        float gi = gr[i];
        if (inv != 1.0f) gr[i] = gi = gi * inv;
        if (wd != 0.0f) gr[i] = gi = gi + wd * w[i];
        ww += (double)w[i] * w[i];
        gg += (double)gi * gi;
    }
    __shared__ double sh[2][GPU_THREADS];
    double v[2] = {ww, gg};
    gpu_block_reduce<2>(sh, v);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = v[0];
        part[2 * blockIdx.x + 1] = v[1];
    }
}

/* thread t (tensor t): its factor from its chunks' sums, added in order, as optim.c: eta |w| / |g|
 * (1 when either norm is 0), clipped to lr (min(local / lr, 1)) unless scale_mode */
__global__ void k_larc_factors(const StepState *st, int use_state, const int *first, int ntensors, const double *part, float *factor,
                               double eta, int scale_mode) {
    if (use_state && st->bad) return;
    const double lr = st->lr;
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
template <typename T>
__global__ void k_larc_sgd(const StepState *st, int use_state, const LarcChunk *chunk, float *w, const float *gr, float *v, T *wh,
                           const float *factor, float m, int nest) {
    if (use_state && st->bad) return;
    const float lr = (float)st->lr;
    const LarcChunk c = chunk[blockIdx.x];
    const float s = factor[c.tensor];
    for (size_t i = c.lo + threadIdx.x; i < c.lo + c.n; i += blockDim.x) {
        float gi = gr[i] * s;
        float vi = m * v[i] + gi;
        v[i] = vi;
        put_weight(w, wh, i, w[i] - (nest ? lr * (gi + m * vi) : lr * vi));
    }
}

/* The update's kernels; the learning rate is already in the state. */
static void queue_update(GpuNet *g, int use_state, const GpuStepConfig *c) {
    Net *n = g->net;
    const StepState *st = (const StepState *)g->step;
    if (g->P == 0) return;
    GPU_DISPATCH(g, T, {
        T *wh = gpu_half(g) ? (T *)g->wh : NULL;
        if (c->larc_eta <= 0) {
            LAUNCH(k_sgd<T>, gpu_blocks(g->P), GPU_THREADS, 0, g->s, st, use_state, g->params, g->grads, g->velocity, wh, g->P,
                   (float)c->momentum, c->nesterov, (float)c->weight_decay);
        } else if (g->larc_nchunk > 0) {
            const LarcChunk *chunks = (const LarcChunk *)g->larc_chunk;
            LAUNCH(k_larc_norms, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, st, use_state, chunks, g->params, g->grads,
                   (float)c->weight_decay, g->larc_part);
            LAUNCH(k_larc_factors, (unsigned)((n->nparam + GPU_THREADS - 1) / GPU_THREADS), GPU_THREADS, 0, g->s, st, use_state,
                   g->larc_first, n->nparam, g->larc_part, g->larc_factor, c->larc_eta, c->larc_scale);
            LAUNCH(k_larc_sgd<T>, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, st, use_state, chunks, g->params, g->grads, g->velocity,
                   wh, g->larc_factor, (float)c->momentum, c->nesterov);
        }
    });
}

void gpunet_sgd(GpuNet *g, double lr, double momentum, int nesterov, double weight_decay, double larc_eta, int larc_scale) {
    StepState *st = (StepState *)g->step;
    GpuStepConfig c = {momentum, weight_decay, larc_eta, nesterov, larc_scale, 0};
    /* pageable memory: CUDA stages the value before the call returns */
    CUDA_CHECK(cudaMemcpyAsync(&st->lr, &lr, sizeof lr, cudaMemcpyHostToDevice, g->s));
    queue_update(g, 0, &c);
}

/* The learning rate of the next step's tail, from the host's ring (pinned: the copy reads it when it
 * runs, and the slot is not written again before GPUNET_RESULTS more steps, whose results the host
 * has read by then). Queued outside a CUDA Graph: the graph's kernels read the state. */
void gpu_step_lr(GpuNet *g, double lr) {
    StepState *st = (StepState *)g->step;
    if (g->queued - g->taken >= GPUNET_RESULTS) die("gpunet_step: %d steps' results not read (gpunet_step_results)", GPUNET_RESULTS);
    double *slot = &g->lr_ring[g->queued % GPUNET_RESULTS];
    *slot = lr;
    CUDA_CHECK(cudaMemcpyAsync(&st->lr, slot, sizeof *slot, cudaMemcpyHostToDevice, g->s));
}

/* The step's tail, after backward: the non-finite check, the update (nothing when a gradient is
 * not finite), the accounting. No synchronisation, and the same launches every step. */
void gpu_step_tail(GpuNet *g) {
    StepState *st = (StepState *)g->step;
    if (g->P) LAUNCH(k_nonfinite, red_blocks(g->P), GPU_THREADS, 0, g->s, g->grads, g->P, &st->bad);
    queue_update(g, 1, &g->stepc);
    LAUNCH(k_step_end, 1, 1, 0, g->s, st, g->stepc.dynamic);
}

/* The step queued: its end event (outside any capture), and it counts as queued. */
void gpu_step_timed(GpuNet *g) {
    CUDA_CHECK(cudaEventRecord(g->step_end[g->queued % GPUNET_RESULTS], g->s));
    g->queued++;
}

void gpunet_step(GpuNet *g, double lr) {
    gpu_training_only(g, "gpunet_step");
    gpu_step_lr(g, lr);
    gpu_step_tail(g);
    gpu_step_timed(g);
}

void gpu_infer_tail(GpuNet *g) {
    gpunet_queue_stats(g, 0);
    LAUNCH(k_step_end, 1, 1, 0, g->s, (StepState *)g->step, 0); /* finite (no gradient), the scale as it is */
}

void gpunet_infer_step(GpuNet *g) {
    gpu_infer_tail(g);
    gpu_step_timed(g);
}

int gpunet_step_pending(const GpuNet *g) { return (int)(g->queued - g->taken); }

void gpunet_step_time_from_start(GpuNet *g) {
    const int k = (int)(g->queued % GPUNET_RESULTS);
    CUDA_CHECK(cudaEventRecord(g->step_start[k], g->s));
    g->from_start[k] = 1;
}

int gpunet_step_results(GpuNet *g, GpuStepResult *out) {
    const int k = gpunet_step_pending(g);
    if (k == 0) return 0;
    StepState *st = (StepState *)g->step;
    CUDA_CHECK(cudaMemcpyAsync(g->res_host, st->ring, sizeof st->ring, cudaMemcpyDeviceToHost, g->s));
    gpunet_sync(g);
    for (int i = 0; i < k; i++) {
        const long long q = g->taken + i;
        const int slot = (int)(q % GPUNET_RESULTS);
        out[i] = g->res_host[slot];
        /* the previous step's end event is still in its slot: fewer than GPUNET_RESULTS are queued */
        const int first = g->from_start[slot];
        float ms = 0;
        if (first || q > 0) {
            CUDA_CHECK(cudaEventElapsedTime(&ms, first ? g->step_start[slot] : g->step_end[(q - 1) % GPUNET_RESULTS], g->step_end[slot]));
            out[i].seconds = ms * 1e-3;
        } else {
            out[i].seconds = NAN; /* the first step, with no start marked */
        }
        g->from_start[slot] = 0;
    }
    g->taken = g->queued;
    return k;
}
