/* fc.c: the fully connected layer's GEMMs on oneDNN (dnnl_sgemm, row-major, on the step's OpenMP
 * threads): y = x W^T + b, dW += dy^T x, db += sum over the batch of dy, dx = dy W (added where
 * another consumer wrote dx first). FC inputs and outputs are 2-D, so always NCHW (fp32).
 *
 * In a bf16 plan: oneDNN's inner product primitives instead, on bf16 copies of the input, the
 * weights (each forward) and the output gradient; the output, the input gradient, the bias and the
 * weight and bias gradients fp32 (oneDNN accumulates them so). The weights' bf16 copy and the
 * weight gradient are asked for in the reference's plain [nout][nin] layout: converting the fp32
 * weights into oneDNN's blocked bf16 layout (AB8b64a2b) and its blocked fp32 gradient back cost 5x
 * and 2x the plain passes (alexnet's fc0, 9216x4096: 19.4 ms and 10.1 ms a step against a 3.9 ms
 * conversion and no reorder), more than the blocked GEMMs gain at any batch measured (alexnet
 * batch 8: 63 -> 91 img/s, batch 64: 162 -> 179, batch 256: 196 -> 198). The blocked layouts are
 * the fallback where oneDNN has no primitive for the plain ones. */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "internal.h"

typedef struct DnFc {
    const Fc *f;       /* the reference's shapes */
    int bf16;          /* the primitives below, not dnnl_sgemm */
    DnPrim fwd, bwd_data, bwd_w;
    int has_bwd_data;
    DnIn src, w, ddst, wd, src_w, ddst_w;
    dnnl_memory_t dst, bias, db;
    DnOut dsrc, dw;
} DnFc;

/* wtag: the layout asked for the weights' bf16 copy and the weight gradient (dnnl_ab, or
 * dnnl_format_tag_any: oneDNN's choice); NULL where oneDNN has no primitive for it */
static DnFc *plan_bf16_tag(Dn *dn, Layer *l, int li, const Fc *f, dnnl_format_tag_t wtag) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    const int N = in->shape.n;
    const dnnl_dims_t sd = {N, f->nin}, wdims = {f->nout, f->nin}, dd = {N, f->nout}, bd = {f->nout};
    Md src_any = dn_md_dims_t(2, sd, dnnl_format_tag_any, dnnl_bf16), src_f32 = dn_md_dims(2, sd, dnnl_ab),
       w_any = dn_md_dims_t(2, wdims, wtag, dnnl_bf16), w_f32 = dn_md_dims(2, wdims, dnnl_ab),
       dw_any = dn_md_dims(2, wdims, wtag), dst_f32 = dn_md_dims(2, dd, dnnl_ab),
       ddst_any = dn_md_dims_t(2, dd, dnnl_format_tag_any, dnnl_bf16), b_md = dn_md_dims(1, bd, dnnl_x);
    dnnl_inner_product_desc_t d;
    DN_CHECK(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_training, &src_any, &w_any, f->bias ? &b_md : NULL, &dst_f32));
    dnnl_primitive_desc_t fpd = dn_pd(dn, &d, NULL), dpd = NULL, wpd = NULL;
    if (!fpd) return NULL;
    if (in->grad) {
        DN_CHECK(dnnl_inner_product_backward_data_desc_init(&d, &src_any, &w_any, &ddst_any));
        dpd = dn_pd(dn, &d, fpd);
    }
    DN_CHECK(dnnl_inner_product_backward_weights_desc_init(&d, &src_any, &dw_any, f->bias ? &b_md : NULL, &ddst_any));
    wpd = dn_pd(dn, &d, fpd);
    if (!wpd || (in->grad && !dpd)) {
        dnnl_primitive_desc_destroy(fpd);
        if (dpd) dnnl_primitive_desc_destroy(dpd);
        if (wpd) dnnl_primitive_desc_destroy(wpd);
        return NULL;
    }
    DnFc *k = xcalloc(1, sizeof *k);
    k->f = f;
    k->bf16 = 1;
    float *W = net_param(net, l->param0);
    const Md f_src = *dn_query(fpd, dnnl_query_src_md), f_w = *dn_query(fpd, dnnl_query_weights_md);
    k->src = dn_in(dn, &f_src, &src_f32, in->data);
    k->w = dn_in(dn, &f_w, &w_f32, W);
    k->dst = dn_mem(dn, &dst_f32, out->data);
    k->bias = f->bias ? dn_mem(dn, &b_md, net_param(net, l->param0 + 1)) : NULL;
    k->fwd = dn_prim(dn, fpd);
    Md b_ddst = ddst_any;
    if (dpd) {
        const Md b_dsrc = *dn_query(dpd, dnnl_query_diff_src_md), b_w = *dn_query(dpd, dnnl_query_weights_md);
        b_ddst = *dn_query(dpd, dnnl_query_diff_dst_md);
        k->has_bwd_data = 1;
        k->ddst = dn_in(dn, &b_ddst, &dst_f32, out->grad);
        k->wd = dn_md_eq(&b_w, &f_w) ? (DnIn){k->w.mem, NULL, NULL} : dn_in(dn, &b_w, &w_f32, W);
        k->dsrc = dn_out(dn, &b_dsrc, &src_f32, in->grad, dn_acc(dn, li, 0));
        k->bwd_data = dn_prim(dn, dpd);
    }
    const Md w_src = *dn_query(wpd, dnnl_query_src_md), w_ddst = *dn_query(wpd, dnnl_query_diff_dst_md),
             w_dw = *dn_query(wpd, dnnl_query_diff_weights_md);
    k->src_w = dn_md_eq(&w_src, &f_src) ? (DnIn){k->src.mem, NULL, NULL} : dn_in(dn, &w_src, &src_f32, in->data);
    k->ddst_w = dpd && dn_md_eq(&w_ddst, &b_ddst) ? (DnIn){k->ddst.mem, NULL, NULL} : dn_in(dn, &w_ddst, &dst_f32, out->grad);
    k->dw = dn_out(dn, &w_dw, &w_f32, net_grad(net, l->param0), 0);
    k->db = f->bias ? dn_mem(dn, &b_md, net_grad(net, l->param0 + 1)) : NULL;
    k->bwd_w = dn_prim(dn, wpd);
    return k;
}

static DnFc *plan_bf16(Dn *dn, Layer *l, int li, const Fc *f) {
    DnFc *k = plan_bf16_tag(dn, l, li, f, dnnl_ab);
    return k ? k : plan_bf16_tag(dn, l, li, f, dnnl_format_tag_any);
}

static void *fc_plan(Dn *dn, Layer *l, int li) {
    dn->md[l->out] = dn_md(dn->net->node[l->out].shape, dnnl_nchw);
    if (dn->dt == dnnl_bf16) return plan_bf16(dn, l, li, l->priv);
    DnFc *k = xcalloc(1, sizeof *k);
    k->f = l->priv;
    return k;
}

static void fc_forward_bf16(Dn *dn, DnFc *k) {
    dn_in_run(dn, &k->src);
    dn_in_run(dn, &k->w);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, k->src.mem}, {DNNL_ARG_WEIGHTS, k->w.mem}, {DNNL_ARG_DST, k->dst},
                            {DNNL_ARG_BIAS, k->bias}};
    dn_exec(dn, &k->fwd, k->bias ? 4 : 3, a);
}

static void fc_backward_bf16(Dn *dn, DnFc *k) {
    if (k->has_bwd_data) {
        dn_in_run(dn, &k->ddst);
        dn_in_run(dn, &k->wd);
    }
    dn_in_run(dn, &k->src_w);
    dn_in_run(dn, &k->ddst_w);
    dnnl_exec_arg_t w[4] = {{DNNL_ARG_SRC, k->src_w.mem}, {DNNL_ARG_DIFF_DST, k->ddst_w.mem},
                            {DNNL_ARG_DIFF_WEIGHTS, k->dw.mem}, {DNNL_ARG_DIFF_BIAS, k->db}};
    dn_exec(dn, &k->bwd_w, k->db ? 4 : 3, w);
    dn_out_run(dn, &k->dw);
    if (k->has_bwd_data) {
        dnnl_exec_arg_t d[3] = {{DNNL_ARG_DIFF_DST, k->ddst.mem}, {DNNL_ARG_WEIGHTS, k->wd.mem}, {DNNL_ARG_DIFF_SRC, k->dsrc.mem}};
        dn_exec(dn, &k->bwd_data, 3, d);
        dn_out_run(dn, &k->dsrc);
    }
}

static void fc_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)li;
    DnFc *k = st;
    if (k->bf16) {
        fc_forward_bf16(dn, k);
        return;
    }
    const Fc *f = k->f;
    Net *net = dn->net;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const int n = in->shape.n;
    float beta = 0.0f;
    if (f->bias) {
        const float *b = net_param(net, l->param0 + 1);
        for (int i = 0; i < n; i++)
            for (int o = 0; o < f->nout; o++) y[(size_t)i * f->nout + o] = b[o];
        beta = 1.0f;
    }
    DN_CHECK(dnnl_sgemm('N', 'T', n, f->nout, f->nin, 1.0f, in->data, f->nin, net_param(net, l->param0), f->nin, beta,
                        y, f->nout));
}

static void fc_backward(Dn *dn, Layer *l, int li, void *st) {
    DnFc *k = st;
    if (k->bf16) {
        fc_backward_bf16(dn, k);
        return;
    }
    const Fc *f = k->f;
    Net *net = dn->net;
    const Node *in = net_node(net, l->in[0]);
    const float *dy = net_node(net, l->out)->grad;
    const int n = in->shape.n;
    DN_CHECK(dnnl_sgemm('T', 'N', f->nout, f->nin, n, 1.0f, dy, f->nout, in->data, f->nin, 0.0f,
                        net_grad(net, l->param0), f->nin));
    if (f->bias) {
        float *db = net_grad(net, l->param0 + 1);
        for (int o = 0; o < f->nout; o++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += dy[(size_t)i * f->nout + o];
            db[o] = (float)s;
        }
    }
    if (in->grad)
        DN_CHECK(dnnl_sgemm('N', 'N', n, f->nin, f->nout, 1.0f, dy, f->nout, net_param(net, l->param0), f->nin,
                            dn_acc(dn, li, 0) ? 1.0f : 0.0f, in->grad, f->nin));
}

const DnImpl dn_fc_impl = {"fc", fc_plan, fc_forward, fc_backward, NULL};
#endif
