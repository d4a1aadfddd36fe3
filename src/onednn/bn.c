/* bn.c: batch normalisation on oneDNN, in the layout of its input (blocked or NCHW, 2-D too).
 *
 * Training: oneDNN's batch statistics (mean and biased variance, as the reference), then the
 * running averages moved here as the reference moves them (the running variance gets the
 * unbiased batch variance). Inference: the running statistics as oneDNN's global statistics.
 * Backward follows the mode of the last forward. gamma, beta, the running statistics and the
 * gradients of gamma and beta are used in place in the arenas (the gradients written, not added,
 * so net_backward does not zero them). A relu that is the output's only consumer is fused (oneDNN's
 * fuse_norm_relu, with the positions of the positive outputs kept in a workspace for backward):
 * this layer writes the relu's output node and reads its gradient. Not where oneDNN has the fused
 * kernel in its reference implementation only and an optimised one without (oneDNN 2.6 on SSE4.1):
 * the relu runs on its own there. */
#ifdef NVCNN_DNNL
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct DnBn {
    DnPrim fwd_train, fwd_infer, bwd_train, bwd_infer;
    dnnl_memory_t src, dst, scale, shift, mean, var, run_mean, run_var;
    dnnl_memory_t ddst, dscale, dshift, ws;
    DnOut dsrc;
    float *mean_buf, *var_buf;
    int c;
    double m;     /* samples per channel: n*h*w */
    int training; /* mode of the last forward */
} DnBn;

/* The forward (training, inference) and backward (training, inference) primitive descriptors of
 * batch norm on data, with the relu fused or not: 1 with all four in pd, 0 (pd[0] NULL) where
 * oneDNN has not all of them. */
static int bn_pds(Dn *dn, const Md *data, int relu, dnnl_primitive_desc_t pd[4]) {
    const unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t d;
    memset(pd, 0, 4 * sizeof *pd);
    DN_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, data, BN_EPSILON, flags));
    pd[0] = dn_pd(dn, &d, NULL);
    DN_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, data, BN_EPSILON, flags | dnnl_use_global_stats));
    pd[1] = dn_pd(dn, &d, NULL);
    if (pd[0] && pd[1]) {
        DN_CHECK(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, data, data, BN_EPSILON, flags));
        pd[2] = dn_pd(dn, &d, pd[0]);
        DN_CHECK(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, data, data, BN_EPSILON, flags | dnnl_use_global_stats));
        pd[3] = dn_pd(dn, &d, pd[1]);
    }
    if (pd[0] && pd[1] && pd[2] && pd[3]) return 1;
    for (int i = 0; i < 4; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    pd[0] = NULL;
    return 0;
}

static int bn_pds_ref(dnnl_primitive_desc_t pd[4]) {
    for (int i = 0; i < 4; i++)
        if (dn_pd_is_ref(pd[i])) return 1;
    return 0;
}

static void *bn_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    const int C = in->shape.c;
    if (!in->grad) return NULL; /* bn on the network input: the reference's (oneDNN always writes diff_src) */
    Md data = dn->md[l->in[0]];
    int relu_li = dn_relu_after(dn, l->out);
    dnnl_primitive_desc_t pd[4];
    if (!bn_pds(dn, &data, relu_li >= 0, pd)) return NULL;
    if (relu_li >= 0 && bn_pds_ref(pd)) {
        /* oneDNN 2.6 on SSE4.1 has fuse_norm_relu in its reference kernels only (bnorm_ref:any, about
         * 10 times slower than bnorm_jit:sse41 at resnet50's shapes): the relu on its own there */
        dnnl_primitive_desc_t alone[4];
        if (bn_pds(dn, &data, 0, alone) && !bn_pds_ref(alone)) {
            for (int i = 0; i < 4; i++) dnnl_primitive_desc_destroy(pd[i]);
            memcpy(pd, alone, sizeof pd);
            relu_li = -1;
        } else if (alone[0]) {
            for (int i = 0; i < 4; i++) dnnl_primitive_desc_destroy(alone[i]);
        }
    }
    dnnl_primitive_desc_t ft = pd[0], fi = pd[1], bt = pd[2], bi = pd[3];
    DnBn *b = xcalloc(1, sizeof *b);
    b->c = C;
    b->m = (double)in->shape.n * in->shape.h * in->shape.w;
    b->training = 1;
    dn->md[l->out] = data;
    if (relu_li >= 0) { /* write the relu's output instead */
        out = &net->node[net->layer[relu_li].out];
        dn->md[net->layer[relu_li].out] = data;
        const Md *ws = dn_query(ft, dnnl_query_workspace_md);
        b->ws = dn_mem(dn, ws, dn_buf(dn, dn_md_bytes(ws)));
        dn_fuse(dn, relu_li);
    }
    dnnl_dims_t cd = {C};
    Md cmd = dn_md_dims(1, cd, dnnl_x);
    b->mean_buf = dn_buf(dn, (size_t)C * sizeof(float));
    b->var_buf = dn_buf(dn, (size_t)C * sizeof(float));
    b->src = dn_mem(dn, &data, in->data);
    b->dst = dn_mem(dn, &data, out->data);
    b->scale = dn_mem(dn, &cmd, net_param(net, l->param0));
    b->shift = dn_mem(dn, &cmd, net_param(net, l->param0 + 1));
    b->mean = dn_mem(dn, &cmd, b->mean_buf);
    b->var = dn_mem(dn, &cmd, b->var_buf);
    b->run_mean = dn_mem(dn, &cmd, net_buffer(net, l->buf0));
    b->run_var = dn_mem(dn, &cmd, net_buffer(net, l->buf0 + 1));
    b->ddst = dn_mem(dn, &data, out->grad);
    b->dscale = dn_mem(dn, &cmd, net_grad(net, l->param0));
    b->dshift = dn_mem(dn, &cmd, net_grad(net, l->param0 + 1));
    b->dsrc = dn_out(dn, &data, &data, in->grad, dn_acc(dn, li, 0));
    b->fwd_train = dn_prim(dn, ft);
    b->fwd_infer = dn_prim(dn, fi);
    b->bwd_train = dn_prim(dn, bt);
    b->bwd_infer = dn_prim(dn, bi);
    return b;
}

static void bn_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)li;
    DnBn *b = st;
    Net *net = dn->net;
    b->training = net->training != 0;
    if (!b->training) {
        dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, b->src},       {DNNL_ARG_DST, b->dst},
                                {DNNL_ARG_SCALE, b->scale},   {DNNL_ARG_SHIFT, b->shift},
                                {DNNL_ARG_MEAN, b->run_mean}, {DNNL_ARG_VARIANCE, b->run_var},
                                {DNNL_ARG_WORKSPACE, b->ws}};
        dn_exec(dn, &b->fwd_infer, b->ws ? 7 : 6, a);
        return;
    }
    dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, b->src},     {DNNL_ARG_DST, b->dst},   {DNNL_ARG_SCALE, b->scale},
                            {DNNL_ARG_SHIFT, b->shift}, {DNNL_ARG_MEAN, b->mean}, {DNNL_ARG_VARIANCE, b->var},
                            {DNNL_ARG_WORKSPACE, b->ws}};
    dn_exec(dn, &b->fwd_train, b->ws ? 7 : 6, a);
    float *mm = net_buffer(net, l->buf0), *mv = net_buffer(net, l->buf0 + 1);
    const double unbias = b->m > 1 ? b->m / (b->m - 1) : 1.0;
    for (int ch = 0; ch < b->c; ch++) {
        mm[ch] = (float)(BN_DECAY * (double)mm[ch] + (1.0 - BN_DECAY) * (double)b->mean_buf[ch]);
        mv[ch] = (float)(BN_DECAY * (double)mv[ch] + (1.0 - BN_DECAY) * (double)b->var_buf[ch] * unbias);
    }
}

static void bn_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnBn *b = st;
    dnnl_exec_arg_t a[10] = {{DNNL_ARG_SRC, b->src},
                            {DNNL_ARG_DIFF_DST, b->ddst},
                            {DNNL_ARG_SCALE, b->scale},
                            {DNNL_ARG_SHIFT, b->shift},
                            {DNNL_ARG_MEAN, b->training ? b->mean : b->run_mean},
                            {DNNL_ARG_VARIANCE, b->training ? b->var : b->run_var},
                            {DNNL_ARG_DIFF_SCALE, b->dscale},
                            {DNNL_ARG_DIFF_SHIFT, b->dshift},
                            {DNNL_ARG_DIFF_SRC, b->dsrc.mem},
                            {DNNL_ARG_WORKSPACE, b->ws}};
    dn_exec(dn, b->training ? &b->bwd_train : &b->bwd_infer, b->ws ? 10 : 9, a);
    dn_out_run(dn, &b->dsrc);
}

const DnImpl dn_bn_impl = {"bn", bn_plan, bn_forward, bn_backward, NULL};
#endif
