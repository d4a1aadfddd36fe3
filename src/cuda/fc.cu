/* fc.cu: the GPU half of fc (src/layers/fc.c) on cuBLAS. Row-major y[n][nout] = x[n][nin] W^T + b
 * is column-major y^T = W x^T: one GEMM each for forward, input gradient and weight gradient.
 * fp32 and tf32: SGEMM (the handle's math mode says whether TF32 may be used). fp16 and bf16:
 * GemmEx with the storage type in and fp32 accumulation; the weight gradient is written straight
 * into the fp32 gradients. */
#include "gpunet_internal.h"

/* y[i][j] += b[j] */
template <typename T> __global__ void k_add_bias(T *y, const float *b, int n, int nout) {
    size_t total = (size_t)n * nout;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from_f<T>(to_f(y[i]) + b[i % nout]);
}

/* db[j] += sum_i dy[i][j] (one thread per column; n is a batch, so this stays short) */
template <typename T> __global__ void k_col_sum(const T *dy, float *db, int n, int nout) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nout; j += gridDim.x * blockDim.x) {
        float s = 0;
        for (int i = 0; i < n; i++) s += to_f(dy[(size_t)i * nout + j]);
        db[j] += s;
    }
}

/* C (m x n, column-major) = alpha op(A) op(B) + beta C; A, B in the storage type, C in ctype */
static void gemm(GpuNet *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A, int lda, const void *B,
                 int ldb, const float *beta, void *C, cudaDataType_t ctype, int ldc) {
    const float one = 1.0f;
    if (!gpu_half(g)) {
        CUBLAS_CHECK(cublasSgemm(g->blas, ta, tb, m, n, k, &one, (const float *)A, lda, (const float *)B, ldb, beta, (float *)C, ldc));
        return;
    }
    CUBLAS_CHECK(cublasGemmEx(g->blas, ta, tb, m, n, k, &one, A, g->ctype, lda, B, g->ctype, ldb, beta, C, ctype, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void fc_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    const Fc *f = (const Fc *)l->priv;
    const int n = g->net->node[l->in[0]].shape.n;
    const float zero = 0.0f;
    gemm(g, CUBLAS_OP_T, CUBLAS_OP_N, f->nout, n, f->nin, gpu_weights(g, l->param0), f->nin, g->x[l->in[0]], f->nin, &zero,
         g->x[l->out], g->ctype, f->nout);
    if (f->bias)
        GPU_DISPATCH(g, T,
                     LAUNCH(k_add_bias<T>, gpu_blocks((size_t)n * f->nout), GPU_THREADS, 0, g->s, (T *)g->x[l->out],
                                                                                     gpu_param(g, l->param0 + 1), n,
                                                                                     f->nout));
}

static void fc_backward(GpuNet *g, Layer *l, int li) {
    const Fc *f = (const Fc *)l->priv;
    const int n = g->net->node[l->in[0]].shape.n;
    const float one = 1.0f;
    const void *dy = g->dx[l->out];
    float *dW = gpu_grad(g, l->param0);
    /* dW^T (nin x nout, column-major) += x^T dy, in fp32 */
    gemm(g, CUBLAS_OP_N, CUBLAS_OP_T, f->nin, f->nout, n, g->x[l->in[0]], f->nin, dy, f->nout, &one, dW, CUDA_R_32F, f->nin);
    if (f->bias)
        GPU_DISPATCH(g, T,
                     LAUNCH(k_col_sum<T>, (f->nout + GPU_THREADS - 1) / GPU_THREADS, GPU_THREADS, 0, g->s, (const T *)dy, gpu_grad(g, l->param0 + 1), n,
                                                                          f->nout));
    void *dx = g->dx[l->in[0]];
    if (dx) /* dx^T (nin x n) (+)= W^T dy^T */
        gemm(g, CUBLAS_OP_N, CUBLAS_OP_N, f->nin, n, f->nout, gpu_weights(g, l->param0), f->nin, dy, f->nout, gpu_beta(g, li, 0), dx,
             g->ctype, f->nin);
}

const GpuLayerImpl gpu_fc_impl = {"fc", NULL, NULL, fc_forward, fc_backward, NULL, NULL};
