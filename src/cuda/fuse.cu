/* fuse.cu: the fusion pass (gpunet.h: GPUNET_NOFUSE, --fuse). It decides, once per GpuNet before
 * the layers plan, which batch norms take over the layers after them:
 *   bn -> relu             one forward pass y = max(0, bn(x)), one backward pass through the
 *                          ReLU's derivative and batch norm's;
 *   bn -> add(., z) -> relu  y = max(0, bn(x) + z): its backward yields the ReLU's gradient once
 *                          and writes it into z's gradient (the shortcut's, as the add would
 *                          have: written or added by the add's own plan) in the same pass that
 *                          makes batch norm's input gradient; the add copies nothing.
 * The absorbed ReLU and add run nothing (gpu_absorbed_impl); the fused batch norm writes the
 * ReLU's output node and reads its gradient. The intermediate nodes (batch norm's output, the
 * add's) are never computed.
 *
 * The kernels are bn.cu's own (fp32 statistics from double partial sums, NHWC or NCHW), not
 * cuDNN's cudnnBatchNormalizationForwardTrainingEx / BackwardEx with
 * CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION: those are deprecated in cuDNN 9, documented for NHWC
 * half data with C a multiple of 4 only (the emulated side would need an independent model of
 * them, and a fallback for every other case), and bf16 has no legacy batch norm at all; our
 * kernels serve every precision, layout and channel count the same way, with one tested code path.
 *
 * What may fuse: a training-capable batch norm whose output has one consumer; a ReLU (not relu6,
 * elu, ...) as that consumer, or a plain add (ca = cb = 1) whose output has one consumer, a ReLU,
 * where the add's other input z is produced before the batch norm and no layer between the batch
 * norm and the add (in layer order) consumes z: backward then reaches z's gradient in the same
 * order as without fusion (the add's turn moves to the batch norm's, and nothing in between
 * touches it). */
#include <string.h>

#include "gpunet_internal.h"

static int is_relu(const Layer *l) {
    return strcmp(l->ops->type, "relu") == 0 && ((const ActPriv *)l->priv)->act == ACT_RELU;
}

void gpu_fuse_plan(GpuNet *g, int on) {
    const Net *net = g->net;
    const int nl = net->nlayer, nn = net->nnode;
    g->fused = (GpuFused *)xmalloc((size_t)nl * sizeof *g->fused);
    g->absorbed = (char *)xcalloc((size_t)nl, 1);
    g->nfused_relu = g->nfused_add = 0;
    for (int i = 0; i < nl; i++) g->fused[i] = (GpuFused){-1, -1, 0, -1, -1};
    if (!on) return;
    /* each node's consumers: their count and the only one (-1: none or several) */
    int *ncons = (int *)xcalloc((size_t)nn, sizeof(int)), *cons = (int *)xmalloc((size_t)nn * sizeof(int));
    for (int v = 0; v < nn; v++) cons[v] = -1;
    for (int i = 0; i < nl; i++)
        for (int k = 0; k < net->layer[i].nin; k++) {
            const int v = net->layer[i].in[k];
            ncons[v]++;
            cons[v] = ncons[v] == 1 ? i : -1;
        }
    for (int b = 0; b < nl; b++) {
        const Layer *lb = &net->layer[b];
        if (strcmp(lb->ops->type, "bn") != 0 || ncons[lb->out] != 1) continue;
        const int a = cons[lb->out];
        const Layer *la = &net->layer[a];
        if (is_relu(la)) {
            g->fused[b] = (GpuFused){la->out, -1, 1, -1, -1};
            g->absorbed[a] = 1;
            g->nfused_relu++;
            continue;
        }
        if (strcmp(la->ops->type, "add") != 0 || la->nin != 2 || ncons[la->out] != 1) continue;
        const AddPriv *ap = (const AddPriv *)la->priv;
        const int r = cons[la->out];
        if (ap->ca != 1.0f || ap->cb != 1.0f || !is_relu(&net->layer[r])) continue;
        const int k = la->in[0] == lb->out ? 1 : 0; /* z's slot */
        const int z = la->in[k];
        if (z == lb->out || z == net->input || net->node[z].producer >= b) continue;
        int between = 0;
        for (int i = b + 1; i < a && !between; i++)
            for (int q = 0; q < net->layer[i].nin; q++) between |= net->layer[i].in[q] == z;
        if (between) continue;
        g->fused[b] = (GpuFused){net->layer[r].out, z, 1, a, k};
        g->absorbed[a] = g->absorbed[r] = 1;
        g->nfused_add++;
    }
    free(ncons);
    free(cons);
}

static void absorbed_run(GpuNet *g, Layer *l, int li) { (void)g, (void)l, (void)li; }
const GpuLayerImpl gpu_absorbed_impl = {"absorbed", NULL, NULL, absorbed_run, absorbed_run, NULL, NULL};

void gpu_fuse_lifetimes(const GpuNet *g, int *last) {
    const int nl = g->net->nlayer;
    for (int b = 0; b < nl; b++) {
        const int out = g->fused[b].out, t = nl - 1 - b; /* batch norm b's backward step */
        if (out >= 0 && last[out] < t) last[out] = t;
    }
}

void gpu_fuse_free(GpuNet *g) {
    free(g->fused);
    free(g->absorbed);
    g->fused = NULL;
    g->absorbed = NULL;
}

int gpunet_fused(const GpuNet *g, int *bn_relu, int *bn_add_relu) {
    if (bn_relu) *bn_relu = g->nfused_relu;
    if (bn_add_relu) *bn_add_relu = g->nfused_add;
    return g->nfused_relu + g->nfused_add;
}

void gpu_fuse_print(const GpuNet *g, FILE *f) {
    const int n = g->nfused_relu + g->nfused_add, absorbed = g->nfused_relu + 2 * g->nfused_add;
    if (!g->fuse) {
        fprintf(f, "Fusion:      off (--fuse=off: every layer runs alone)\n");
        return;
    }
    fprintf(f, "Fusion:      %d of %d layers fused into %d batch norms (%d bn+relu, %d bn+add+relu)\n", n + absorbed, g->net->nlayer, n,
            g->nfused_relu, g->nfused_add);
}
