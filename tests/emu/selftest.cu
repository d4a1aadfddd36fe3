/* selftest.cu: kernels and stream sequences that the emulated device must run right, or must
 * catch, for tests/test_emu.c. Written as any kernel of src/cuda/ (LAUNCH, __shared__,
 * __syncthreads, __shfl_down_sync): compiled only in the emulated build (make GPU_EMU=1), whose
 * rules for .cu files they follow. Each function selects device 0 first (but
 * emu_st_nccl_id, which runs before the ranks are forked). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "cuda/common.h"
#include "emu/emu.h"

extern "C" {
#include "emu_selftest.h"
#include "gpu.h"
}

/* ---- kernels ---- */
/* out[block] = sum of a over the block's 256 elements: shuffles within warps, then shared memory */
__global__ void k_st_reduce(const float *a, float *out) {
    __shared__ float warp_sum[8];
    float v = a[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0;
        for (int w = 0; w < 8; w++) t += warp_sum[w];
        out[blockIdx.x] = t;
    }
}

/* out[i] = i + 1 (mod 256) read back through shared memory; `sync` 0 leaves out the barrier
 * between the writes and the reads */
__global__ void k_st_neighbour(float *out, int sync) {
    __shared__ float s[256];
    s[threadIdx.x] = (float)threadIdx.x;
    if (sync) __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 256];
}

/* out[block][i] = s[i] of the block's shared array, which blocks with (block & writers_mask) != 0
 * (or all, when writers_mask is 0 and `all`) wrote first: the others read what no one wrote */
__global__ void k_st_shared_stale(float *out, int writers_mask, int all) {
    __shared__ float s[64];
    if (all || (blockIdx.x & writers_mask)) s[threadIdx.x] = (float)(1 + blockIdx.x);
    __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
}

/* a barrier that the first 5 threads never reach */
__global__ void k_st_divergent(float *out) {
    if (threadIdx.x < 5) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* half the threads at one __syncthreads, half at another: two barriers */
__global__ void k_st_two_barriers(float *out) {
    if (threadIdx.x & 1) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    } else {
        __syncthreads();
        out[threadIdx.x] = 2.0f;
    }
}

/* out[at + i] = 1 for each thread i */
__global__ void k_st_write(float *out, int at) { out[at + (int)threadIdx.x] = 1.0f; }

/* dst[i] = src[i] * 2 */
__global__ void k_st_double(const float *src, float *dst, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i] * 2.0f;
}

/* dst[i] = the sum of the float4 at src + offset (in floats), element i */
__global__ void k_st_vec_load(const float *src, float *dst, int offset) {
    const float4 v = reinterpret_cast<const float4 *>(src + offset)[threadIdx.x];
    dst[threadIdx.x] = v.x + v.y + v.z + v.w;
}

/* the __half2 at dst + offset (in halves), element i, = (1, 2) */
__global__ void k_st_half2_store(__half *dst, int offset) {
    reinterpret_cast<__half2 *>(dst + offset)[threadIdx.x] = __floats2half2_rn(1.0f, 2.0f);
}

/* ---- what tests/test_emu.c calls ---- */
extern "C" {

int emu_st_reduce(double *max_err) {
    gpu_select(0);
    const int nb = 16, n = nb * 256;
    float *h = (float *)malloc(n * sizeof(float)), got[16];
    for (int i = 0; i < n; i++) h[i] = (float)((i * 7919) % 97) * 0.25f;
    float *d, *o;
    CUDA_CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&o, nb * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    LAUNCH(k_st_reduce, nb, 256, 0, 0, d, o);
    CUDA_CHECK(cudaMemcpy(got, o, sizeof got, cudaMemcpyDeviceToHost));
    *max_err = 0;
    for (int b = 0; b < nb; b++) {
        double want = 0;
        for (int i = 0; i < 256; i++) want += h[b * 256 + i];
        *max_err = fmax(*max_err, fabs(got[b] - want));
    }
    cudaFree(d);
    cudaFree(o);
    free(h);
    return nb;
}

int emu_st_neighbour(int sync) {
    gpu_select(0);
    float *o, h[256];
    CUDA_CHECK(cudaMalloc((void **)&o, sizeof h));
    LAUNCH(k_st_neighbour, 1, 256, 0, 0, o, sync);
    CUDA_CHECK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    cudaFree(o);
    int wrong = 0;
    for (int i = 0; i < 256; i++) wrong += h[i] != (float)((i + 1) % 256);
    return wrong;
}

int emu_st_shared_stale(int writers_mask, int all, int blocks, int *stale) {
    gpu_select(0);
    float *o, h[64 * 64];
    if (blocks > 64) return -1;
    CUDA_CHECK(cudaMalloc((void **)&o, sizeof h));
    LAUNCH(k_st_shared_stale, blocks, 64, 0, 0, o, writers_mask, all);
    CUDA_CHECK(cudaMemcpy(h, o, (size_t)blocks * 64 * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(o);
    int wrong = 0;
    *stale = 0;
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < 64; i++) {
            const float v = h[b * 64 + i];
            if (all || (b & writers_mask))
                wrong += v != (float)(1 + b);
            else
                *stale += !isnan(v);
        }
    return wrong;
}

void emu_st_divergent_barrier(void) {
    gpu_select(0);
    float *o;
    CUDA_CHECK(cudaMalloc((void **)&o, 64 * sizeof(float)));
    LAUNCH(k_st_divergent, 1, 64, 0, 0, o);
    CUDA_CHECK(cudaDeviceSynchronize());
}

void emu_st_two_barriers(void) {
    gpu_select(0);
    float *o;
    CUDA_CHECK(cudaMalloc((void **)&o, 64 * sizeof(float)));
    LAUNCH(k_st_two_barriers, 1, 64, 0, 0, o);
    CUDA_CHECK(cudaDeviceSynchronize());
}

void emu_st_write_past_end(int at) {
    gpu_select(0);
    float *o;
    CUDA_CHECK(cudaMalloc((void **)&o, 1000 * sizeof(float)));
    LAUNCH(k_st_write, 1, 32, 0, 0, o, at); /* elements at .. at + 31 of 1000 */
    CUDA_CHECK(cudaDeviceSynchronize());
}

void emu_st_use_after_free(void) {
    gpu_select(0);
    float *a, *b;
    CUDA_CHECK(cudaMalloc((void **)&a, 4096));
    CUDA_CHECK(cudaMalloc((void **)&b, 4096));
    CUDA_CHECK(cudaFree(a));
    LAUNCH(k_st_double, 1, 32, 0, 0, b, a, 32); /* writes the freed block */
    CUDA_CHECK(cudaDeviceSynchronize());
}

void emu_st_host_pointer(void) {
    gpu_select(0);
    float *o, host[32];
    CUDA_CHECK(cudaMalloc((void **)&o, sizeof host));
    LAUNCH(k_st_double, 1, 32, 0, 0, host, o, 32);
    CUDA_CHECK(cudaDeviceSynchronize());
}

int emu_st_fresh_memory_nan(void) {
    gpu_select(0);
    float *o, h[64];
    CUDA_CHECK(cudaMalloc((void **)&o, sizeof h));
    CUDA_CHECK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    cudaFree(o);
    int nan = 0;
    for (int i = 0; i < 64; i++) nan += isnan(h[i]) != 0;
    return nan;
}

int emu_st_bad_launch(void) {
    gpu_select(0);
    float *o;
    CUDA_CHECK(cudaMalloc((void **)&o, 4096));
    cudaGetLastError();
    emu_launcher("k_st_write", k_st_write, 1, 2048, 0, 0)(o, 0); /* 2048 threads per block: too many */
    int e = (int)cudaGetLastError();
    cudaFree(o);
    return e;
}

int emu_st_oom(size_t *free_bytes) {
    gpu_select(0);
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    *free_bytes = fr;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, fr + ((size_t)1 << 20));
    cudaGetLastError();
    void *q = NULL;
    cudaError_t f = cudaMalloc(&q, fr / 2); /* what is free can still be had */
    if (q) cudaFree(q);
    return e == cudaErrorMemoryAllocation && f == cudaSuccess && !p;
}

/* What the two-stream sequences below share: a copy stream and a compute stream, an event, n
 * floats of pinned host memory h (1..n), device buffers src and dst, and back for dst's copy. */
typedef struct TwoStreams {
    int n;
    float *h, *src, *dst, *back;
    cudaStream_t copy, compute;
    cudaEvent_t ev;
} TwoStreams;

static void two_streams_open(TwoStreams *t, int n) {
    gpu_select(0);
    t->n = n;
    t->h = (float *)gpu_host_alloc(n * sizeof(float));
    t->back = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) t->h[i] = (float)(i + 1);
    CUDA_CHECK(cudaStreamCreateWithFlags(&t->copy, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&t->compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&t->ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc((void **)&t->src, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&t->dst, n * sizeof(float)));
}

/* Copies dst back on the compute stream, waits for the device, frees everything: how many
 * elements of dst are 2 x (i + 1). */
static int two_streams_close(TwoStreams *t) {
    CUDA_CHECK(cudaMemcpyAsync(t->back, t->dst, t->n * sizeof(float), cudaMemcpyDeviceToHost, t->compute));
    CUDA_CHECK(cudaDeviceSynchronize());
    int right = 0;
    for (int i = 0; i < t->n; i++) right += t->back[i] == 2.0f * (float)(i + 1);
    cudaFree(t->src);
    cudaFree(t->dst);
    gpu_host_free(t->h);
    free(t->back);
    cudaEventDestroy(t->ev);
    cudaStreamDestroy(t->copy);
    cudaStreamDestroy(t->compute);
    return right;
}

/* A copy stream fills `src` with 1..n from pinned host memory; the compute stream doubles it into
 * dst, after cudaStreamWaitEvent when `wait`. Returns how many elements of dst are 2 x (i + 1): all
 * of them with the wait; without it the compute stream may run first and see the poison pattern. */
int emu_st_stream_order(int wait) {
    TwoStreams t;
    two_streams_open(&t, 1024);
    LAUNCH(k_st_double, 4, 256, 0, t.compute, t.src, t.dst, t.n); /* the compute stream has run a kernel */
    CUDA_CHECK(cudaStreamSynchronize(t.compute));
    CUDA_CHECK(cudaMemcpyAsync(t.src, t.h, t.n * sizeof(float), cudaMemcpyHostToDevice, t.copy));
    CUDA_CHECK(cudaEventRecord(t.ev, t.copy));
    if (wait) CUDA_CHECK(cudaStreamWaitEvent(t.compute, t.ev, 0));
    LAUNCH(k_st_double, 4, 256, 0, t.compute, t.src, t.dst, t.n);
    return two_streams_close(&t);
}

/* The compute stream doubles src (1..n) into dst; then a copy stream writes other values into
 * src, after cudaStreamWaitEvent on an event recorded after the kernel when `wait`. Returns how
 * many elements of dst are 2 x (i + 1): all of them with the wait; without it the copy may run
 * before the kernel, which then doubles the new values. */
int emu_st_copy_overwrite(int wait) {
    TwoStreams t;
    two_streams_open(&t, 1024);
    CUDA_CHECK(cudaMemcpy(t.src, t.h, t.n * sizeof(float), cudaMemcpyHostToDevice));
    for (int i = 0; i < t.n; i++) t.h[i] = -1.0f;
    LAUNCH(k_st_double, 4, 256, 0, t.compute, t.src, t.dst, t.n);
    CUDA_CHECK(cudaEventRecord(t.ev, t.compute));
    if (wait) CUDA_CHECK(cudaStreamWaitEvent(t.copy, t.ev, 0));
    CUDA_CHECK(cudaMemcpyAsync(t.src, t.h, t.n * sizeof(float), cudaMemcpyHostToDevice, t.copy));
    return two_streams_close(&t);
}

void emu_st_set_streams(const char *order) { emu::set_streams(order); }

int emu_st_vectors_aligned(void) {
    gpu_select(0);
    float *src, *dst, h[128], back[32];
    __half *hv, hb[64];
    for (int i = 0; i < 128; i++) h[i] = (float)i;
    CUDA_CHECK(cudaMalloc((void **)&src, sizeof h));
    CUDA_CHECK(cudaMalloc((void **)&dst, sizeof back));
    CUDA_CHECK(cudaMalloc((void **)&hv, sizeof hb));
    CUDA_CHECK(cudaMemcpy(src, h, sizeof h, cudaMemcpyHostToDevice));
    LAUNCH(k_st_vec_load, 1, 32, 0, 0, src, dst, 0);
    LAUNCH(k_st_half2_store, 1, 32, 0, 0, hv, 0);
    CUDA_CHECK(cudaMemcpy(back, dst, sizeof back, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hb, hv, sizeof hb, cudaMemcpyDeviceToHost));
    int right = 0;
    for (int i = 0; i < 32; i++) right += back[i] == (float)(16 * i + 6) && __half2float(hb[2 * i]) == 1.0f && __half2float(hb[2 * i + 1]) == 2.0f;
    cudaFree(src);
    cudaFree(dst);
    cudaFree(hv);
    return right;
}

void emu_st_misaligned_load(void) {
    gpu_select(0);
    float *src, *dst;
    CUDA_CHECK(cudaMalloc((void **)&src, 132 * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&dst, 32 * sizeof(float)));
    CUDA_CHECK(cudaMemset(src, 0, 132 * sizeof(float)));
    LAUNCH(k_st_vec_load, 1, 1, 0, 0, src, dst, 1); /* a float4 at byte 4 */
    CUDA_CHECK(cudaDeviceSynchronize());
}

void emu_st_misaligned_store(void) {
    gpu_select(0);
    __half *hv;
    CUDA_CHECK(cudaMalloc((void **)&hv, 66 * sizeof(__half)));
    LAUNCH(k_st_half2_store, 1, 1, 0, 0, hv, 1); /* a __half2 at byte 2 */
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* An asynchronous copy from pinned memory reads the memory when it runs, not when it is queued:
 * the host writes 7 after queuing a copy of 5, then waits; the device holds 7. */
int emu_st_pinned_read_when_run(void) {
    gpu_select(0);
    float *h = (float *)gpu_host_alloc(sizeof(float)), *d, back = 0;
    cudaStream_t copy;
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc((void **)&d, sizeof(float)));
    *h = 5.0f;
    CUDA_CHECK(cudaMemcpyAsync(d, h, sizeof(float), cudaMemcpyHostToDevice, copy));
    *h = 7.0f; /* a race on a GPU: the copy may or may not have read the 5 */
    CUDA_CHECK(cudaStreamSynchronize(copy));
    CUDA_CHECK(cudaMemcpy(&back, d, sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d);
    gpu_host_free(h);
    cudaStreamDestroy(copy);
    return (int)back;
}

} /* extern "C" */

extern "C" int emu_st_nccl_average(const void *id, int rank, int nranks, float *out, int n) {
    gpu_select(0);
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, nranks, *(const ncclUniqueId *)id, rank));
    float *h = (float *)malloc((size_t)n * sizeof(float)), *d;
    for (int i = 0; i < n; i++) h[i] = (float)(rank + 1) * 0.1f + (float)i * 1e-3f;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc((void **)&d, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(d, d, (size_t)n, ncclFloat, ncclAvg, comm, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaMemcpy(out, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    NCCL_CHECK(ncclCommDestroy(comm));
    cudaFree(d);
    cudaStreamDestroy(s);
    free(h);
    return 0;
}

/* No device selected: the ranks are children forked after this call, and a child of a process
 * that initialised CUDA cannot use it. */
extern "C" void emu_st_nccl_id(void *id) { NCCL_CHECK(ncclGetUniqueId((ncclUniqueId *)id)); }
