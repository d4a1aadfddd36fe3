/* pool.c: max and average pooling, and the spatial average, on oneDNN, in the layout of the
 * input. TensorFlow's padding: max pooling never picks a padded position, average pooling divides
 * by the in-bounds elements of the window (oneDNN's avg_exclude_padding); the padding after is
 * what the last window needs. Max pooling keeps oneDNN's workspace (the position of each
 * maximum) for backward. The spatial average is an average pooling over the whole plane.
 * Max pooling of a blocked fp32 input (whole blocks of 8 or 16 channels) runs blkpool.c's loops
 * instead of oneDNN's. In a bf16 plan the output keeps the input's element type (a 1x1 output is
 * converted into its fp32 NCHW node). */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "blkpool.h"
#include "internal.h"

typedef struct DnPool {
    DnPrim fwd, bwd;
    int has_bwd;
    dnnl_memory_t src, ws;
    DnOut dst;
    DnIn ddst;
    DnOut dsrc;
    DnBlkPool *blk; /* not NULL: max pooling by dn_blkpool_forward and _backward, no primitives */
    const float *x;
    float *y, *dy, *dx;
    int add; /* backward adds into dx */
} DnPool;

/* The blocked max pooling of layer l when it applies: a max window of at most 255 elements over
 * an input in whole blocks of b = 8 or 16 channels whose output node keeps that layout. */
static DnPool *plan_blk(Dn *dn, Layer *l, int li, int b, const Md *dst_want, int kh, int kw, int sh, int sw, int pt,
                        int pl) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    Shape si = in->shape, so = out->shape;
    if ((b != 8 && b != 16) || si.c % b != 0 || kh * kw > 255 || so.h * so.w <= 1 || !dn_is_f32(dst_want)) return NULL;
    const Md *node_out = dn_node_layout(dn, l->out, dst_want);
    if (!dn_md_eq(node_out, dst_want)) return NULL;
    DnPool *p = xcalloc(1, sizeof *p);
    DnBlkPool *g = p->blk = xcalloc(1, sizeof *g);
    *g = (DnBlkPool){si.n, si.c / b, b, si.h, si.w, so.h, so.w, kh, kw, sh, sw, pt, pl, NULL};
    g->pos = (uint8_t *)dn_buf(dn, shape_count(so));
    p->x = in->data;
    p->y = out->data;
    p->has_bwd = in->grad != NULL;
    p->dy = out->grad;
    p->dx = in->grad;
    p->add = p->has_bwd && dn_acc(dn, li, 0);
    return p;
}

static dnnl_dim_t pad_after(int in, int out, int k, int s, int before) {
    int p = (out - 1) * s + k - in - before;
    return p > 0 ? p : 0;
}

/* Plans pooling of layer l with window kh x kw, strides sh, sw, padding before pt, pl.
 * out_md: NULL, or the layout to write the output node in (the spatial average's 1x1 output). */
static void *plan_pool(Dn *dn, Layer *l, int li, dnnl_alg_kind_t alg, int kh, int kw, int sh, int sw, int pt,
                       int pl) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    Shape si = in->shape, so = out->shape;
    Md src = dn->md[l->in[0]];
    /* the output in the input's layout family when it stays dense (the 1x1 output of the spatial
     * average included: nChw16c of 1x1 with whole blocks is NCHW byte for byte) */
    int b = dn_block(&src, si);
    Md dst_want = dn_md_block_t(so, b > 0 && so.c % b == 0 ? b : 1, src.data_type);
    if (alg == dnnl_pooling_max) {
        DnPool *p = plan_blk(dn, l, li, b, &dst_want, kh, kw, sh, sw, pt, pl);
        if (p) return p;
    }
    dnnl_dims_t strides = {sh, sw}, kernel = {kh, kw}, dil = {0, 0}, padl = {pt, pl},
                padr = {pad_after(si.h, so.h, kh, sh, pt), pad_after(si.w, so.w, kw, sw, pl)};
    dnnl_pooling_v2_desc_t d;
    DN_CHECK(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_training, alg, &src, &dst_want, strides, kernel, dil,
                                               padl, padr));
    dnnl_primitive_desc_t fpd = dn_pd(dn, &d, NULL), bpd = NULL;
    if (!fpd) return NULL;
    const int has_bwd = in->grad != NULL;
    if (has_bwd) {
        DN_CHECK(dnnl_pooling_v2_backward_desc_init(&d, alg, &src, &dst_want, strides, kernel, dil, padl, padr));
        bpd = dn_pd(dn, &d, fpd);
        if (!bpd) {
            dnnl_primitive_desc_destroy(fpd);
            return NULL;
        }
    }
    DnPool *p = xcalloc(1, sizeof *p);
    /* a 1x1 output is an NCHW node: dst_want is that byte for byte when its block divides c */
    int same_bytes = so.h * so.w == 1 && dn_dense(&dst_want, so) && dn_is_f32(&dst_want);
    const Md *node_out = same_bytes ? &dst_want : dn_node_layout(dn, l->out, &dst_want);
    if (same_bytes) dn->md[l->out] = dn_md(so, dnnl_nchw);
    p->src = dn_mem(dn, &src, in->data);
    p->dst = dn_out(dn, &dst_want, node_out, out->data, 0);
    const Md *ws = dn_query(fpd, dnnl_query_workspace_md);
    if (ws && dn_md_bytes(ws)) p->ws = dn_mem(dn, ws, dn_buf(dn, dn_md_bytes(ws)));
    p->fwd = dn_prim(dn, fpd);
    if (has_bwd) {
        p->has_bwd = 1;
        p->ddst = dn_in(dn, &dst_want, node_out, out->grad);
        p->dsrc = dn_out(dn, &src, &src, in->grad, dn_acc(dn, li, 0));
        p->bwd = dn_prim(dn, bpd);
    }
    return p;
}

static void pool_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnPool *p = st;
    if (p->blk) {
        dn_blkpool_forward(p->blk, p->x, p->y);
        return;
    }
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_DST, p->dst.mem}, {DNNL_ARG_WORKSPACE, p->ws}};
    dn_exec(dn, &p->fwd, p->ws ? 3 : 2, a);
    dn_out_run(dn, &p->dst);
}

static void pool_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnPool *p = st;
    if (!p->has_bwd) return;
    if (p->blk) {
        dn_blkpool_backward(p->blk, p->dy, p->dx, p->add);
        return;
    }
    dn_in_run(dn, &p->ddst);
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, p->ddst.mem}, {DNNL_ARG_DIFF_SRC, p->dsrc.mem},
                            {DNNL_ARG_WORKSPACE, p->ws}};
    dn_exec(dn, &p->bwd, p->ws ? 3 : 2, a);
    dn_out_run(dn, &p->dsrc);
}

static void *pool_plan(Dn *dn, Layer *l, int li) {
    const Pool *q = l->priv;
    return plan_pool(dn, l, li, q->kind == POOL_MAX ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding, q->kh,
                     q->kw, q->sh, q->sw, q->pt, q->pl);
}

static void pool_destroy(void *st) {
    DnPool *p = st;
    free(p->blk);
    free(p);
}

static void *avg_plan(Dn *dn, Layer *l, int li) {
    Shape s = dn->net->node[l->in[0]].shape;
    return plan_pool(dn, l, li, dnnl_pooling_avg_exclude_padding, s.h, s.w, 1, 1, 0, 0);
}

const DnImpl dn_maxpool_impl = {"maxpool", pool_plan, pool_forward, pool_backward, pool_destroy};
const DnImpl dn_avgpool_impl = {"avgpool", pool_plan, pool_forward, pool_backward, pool_destroy};
const DnImpl dn_avg_impl = {"avg", avg_plan, pool_forward, pool_backward, pool_destroy};
#endif
