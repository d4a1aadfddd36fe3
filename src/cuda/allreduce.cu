/* allreduce.cu: NCCL averaging of the gradients over ranks, inside backward (gpunet.h): the
 * gradient arena is cut into buckets from its end; once backward has produced every gradient of a
 * bucket (a layer's backward is done, and the arena holds the layers' parameters in layer order:
 * gpunet_new checks it), the bucket's ncclAllReduce (average) is queued on a stream of its own,
 * after an event recorded on the compute stream; at the end of backward the compute stream waits
 * for them all. */
#include "gpunet_internal.h"

void gpunet_nccl_id(void *id) {
    gpu_require("gpunet_nccl_id");
    ncclUniqueId u;
    NCCL_CHECK(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
}

void gpunet_nccl_init(GpuNet *g, const void *id, int rank, int nranks, size_t bucket_bytes) {
    static_assert(sizeof(ncclUniqueId) == GPUNET_NCCL_ID_BYTES, "ncclUniqueId size");
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    NCCL_CHECK(ncclCommInitRank(&g->comm, nranks, u, rank));
    g->nranks = nranks;
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking));
    size_t n = g->P, per = bucket_bytes / sizeof(float);
    if (per == 0) per = 1;
    g->nb = n ? (int)((n + per - 1) / per) : 0;
    g->blo = (size_t *)xcalloc((size_t)g->nb + 1, sizeof *g->blo);
    g->bhi = (size_t *)xcalloc((size_t)g->nb + 1, sizeof *g->bhi);
    for (int i = 0; i < g->nb; i++) {
        g->bhi[i] = n - (size_t)i * per;
        g->blo[i] = g->bhi[i] > per ? g->bhi[i] - per : 0;
    }
    g->lev = (cudaEvent_t *)xcalloc((size_t)g->net->nlayer, sizeof *g->lev);
    for (int i = 0; i < g->net->nlayer; i++)
        if (g->net->layer[i].nparam > 0) CUDA_CHECK(cudaEventCreateWithFlags(&g->lev[i], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_done, cudaEventDisableTiming));
}

int gpunet_nccl_buckets(const GpuNet *g) { return g->comm ? g->nb : 0; }

void gpu_allreduce_ready(GpuNet *g, size_t final_from, cudaEvent_t ready) {
    if (g->next >= g->nb || g->blo[g->next] < final_from) return;
    if (gpu_half(g)) { /* the convolutions' 16-bit weight gradients of the buckets going now, in one launch */
        int last = g->next;
        while (last + 1 < g->nb && g->blo[last + 1] >= final_from) last++;
        gpu_grads_from_half(g, g->blo[last], g->bhi[g->next]);
    }
    CUDA_CHECK(cudaEventRecord(ready, g->s));
    CUDA_CHECK(cudaStreamWaitEvent(g->cs, ready, 0));
    for (; g->next < g->nb && g->blo[g->next] >= final_from; g->next++) {
        float *b = g->grads + g->blo[g->next];
        if (g->prof) CUDA_CHECK(cudaEventRecord(g->pev_nccl[2 * g->next], g->cs)); /* --profile */
        NCCL_CHECK(ncclAllReduce(b, b, g->bhi[g->next] - g->blo[g->next], ncclFloat, ncclAvg, g->comm, g->cs));
        if (g->prof) {
            CUDA_CHECK(cudaEventRecord(g->pev_nccl[2 * g->next + 1], g->cs));
            g->prof_nccl = g->next + 1;
        }
    }
}

void gpu_allreduce_finish(GpuNet *g) {
    gpu_allreduce_ready(g, 0, g->ev_b1); /* what is left (re-records ev_b1, the end of backward) */
    CUDA_CHECK(cudaEventRecord(g->ev_done, g->cs));
    CUDA_CHECK(cudaStreamWaitEvent(g->s, g->ev_done, 0));
}

void gpu_allreduce_free(GpuNet *g) {
    if (g->comm) {
        cudaStreamSynchronize(g->cs);
        ncclCommDestroy(g->comm);
        for (int i = 0; i < g->net->nlayer; i++)
            if (g->lev[i]) cudaEventDestroy(g->lev[i]);
        cudaEventDestroy(g->ev_done);
        cudaStreamDestroy(g->cs);
    }
    free(g->lev);
    free(g->blo);
    free(g->bhi);
}
