/* fc.cu: the GPU half of fc (src/layers/fc.c) on cuBLAS. Row-major y[n][nout] = x[n][nin] W^T + b
 * is column-major y^T = W x^T: one SGEMM each for forward, input gradient and weight gradient. */
#include "gpunet_internal.h"

/* y[i][j] += b[j] */
__global__ void k_add_bias(float *y, const float *b, int n, int nout) {
    size_t total = (size_t)n * nout;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) y[i] += b[i % nout];
}

/* db[j] += sum_i dy[i][j] (one thread per column; n is a batch, so this stays short) */
__global__ void k_col_sum(const float *dy, float *db, int n, int nout) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nout; j += gridDim.x * blockDim.x) {
        float s = 0;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * nout + j];
        db[j] += s;
    }
}

static void fc_forward(GpuNet *g, Layer *l, int li) {
    (void)li;
    const Fc *f = (const Fc *)l->priv;
    const int n = g->net->node[l->in[0]].shape.n;
    const float one = 1.0f, zero = 0.0f;
    const float *W = g->params + g->net->param[l->param0].off;
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, f->nout, n, f->nin, &one, W, f->nin, g->x[l->in[0]], f->nin, &zero,
                             g->x[l->out], f->nout));
    if (f->bias)
        k_add_bias<<<gpu_blocks((size_t)n * f->nout), 256, 0, g->s>>>(g->x[l->out], g->params + g->net->param[l->param0 + 1].off, n,
                                                                     f->nout);
}

static void fc_backward(GpuNet *g, Layer *l, int li) {
    const Fc *f = (const Fc *)l->priv;
    const int n = g->net->node[l->in[0]].shape.n;
    const float one = 1.0f;
    const float *W = g->params + g->net->param[l->param0].off, *dy = g->dx[l->out];
    float *dW = g->grads + g->net->param[l->param0].off;
    /* dW^T (nin x nout, column-major) += x^T dy */
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, f->nin, f->nout, n, &one, g->x[l->in[0]], f->nin, dy, f->nout, &one, dW,
                             f->nin));
    if (f->bias)
        k_col_sum<<<(f->nout + 255) / 256, 256, 0, g->s>>>(dy, g->grads + g->net->param[l->param0 + 1].off, n, f->nout);
    float *dx = g->dx[l->in[0]];
    if (dx) /* dx^T (nin x n) (+)= W^T dy^T */
        CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, f->nin, n, f->nout, &one, W, f->nin, dy, f->nout, gpu_beta(g, li, 0),
                                 dx, f->nin));
}

const GpuLayerImpl gpu_fc_impl = {"fc", NULL, NULL, fc_forward, fc_backward, NULL};
