/* conv.c: convolution on oneDNN: forward (bias fused), backward data, backward weights and bias.
 *
 * The primitives pick their layouts (format "any"); the plan converts at the edges only where
 * they differ from what the neighbours hold: the input node's layout, the weights' [cout][cin][kh]
 * [kw] in the parameter arena (converted once per forward, the backward-data primitive reusing the
 * copy when it wants the same layout), and the weight gradient written back into the gradient
 * arena. Parameter gradients are written, not added (each parameter has one layer), so
 * net_backward does not zero them (NetRunner.writes_param_grads). Grouped convolutions use oneDNN's grouped weights [g][cout/g][cin/g]
 * [kh][kw], the same bytes as the reference's [cout][cin/g][kh][kw].
 *
 * 3x3 and 5x5 stride-1 convolutions on nChw8c or nChw16c tensors run their forward and backward
 * data by Winograd's F(4x4, 3x3) or F(2x2, 5x5) in wino.c instead of oneDNN's direct kernels, and
 * their weight gradient too where wino.c's sums fit (on CPUs with AVX2; NVCNN_ONEDNN_WINOGRAD=off in
 * the environment leaves them to oneDNN and blkconv.c); their primitives are planned all the same,
 * for the layouts they choose.
 *
 * In a bf16 plan (Dn.dt) the input, output and weights of the primitives are bf16, the bias, the
 * weight and bias gradients fp32.
 *
 * A relu that is the output's only consumer is fused: the forward applies it (an eltwise post-op)
 * and writes the relu's output node; backward first turns the relu's output gradient into this
 * layer's output gradient (oneDNN's relu backward from the relu's output), then goes on as usual.
 */
#ifdef NVCNN_DNNL
#include <omp.h>
#include <stdlib.h>

#include "blkconv.h"
#include "internal.h"
#include "wino.h"

typedef struct DnConv {
    DnPrim fwd, bwd_data, bwd_w;
    int has_bwd_data;
    DnIn src, w;            /* forward: input, weights */
    dnnl_memory_t bias, dst_mem;
    DnOut dst;
    DnIn ddst, wd;          /* backward data: output gradient, weights (wd.mem may be w.mem) */
    DnOut dsrc;
    DnIn src_w, ddst_w;     /* backward weights: input, output gradient (each may reuse the above) */
    DnOut dw;
    dnnl_memory_t db;
    int relu;               /* a fused relu: its backward below */
    DnPrim relu_bwd;
    dnnl_memory_t relu_y, relu_dy, relu_dx;
    int blk_dw;             /* the weight and bias gradients by blkconv.c, not bwd_w */
    int first;              /* ... by firstconv.c, from the plain input x */
    const float *x;
    DnBlkConv bc;
    float *dW, *dB;
    int wino;               /* forward and backward data by wino.c, not fwd and bwd_data */
    int wino_dw;            /* the weight and bias gradients by wino.c (blk_dw set too) */
    DnWino wg;
    const float *W, *B;     /* the weights [cout][cin][3][3] and the bias (NULL: none) in the arena */
} DnConv;

/* The weights descriptor: 4-D, or 5-D grouped, of element type dt. */
static Md weights_md(const Conv *c, int G, dnnl_format_tag_t tag, dnnl_data_type_t dt) {
    if (G == 1) {
        dnnl_dims_t d = {c->cout, c->cin, c->kh, c->kw};
        return dn_md_dims_t(4, d, tag, dt);
    }
    dnnl_dims_t d = {G, c->cout / G, c->cin / G, c->kh, c->kw};
    return dn_md_dims_t(5, d, tag == dnnl_format_tag_any ? tag : dnnl_goihw, dt);
}

/* An activation's descriptor: format "any" (the primitive chooses), or nChw16c where the plan is
 * told to (Dn.force16: the layout oneDNN chooses on AVX-512, for tests on any CPU) and the
 * channels fill its blocks. */
static Md conv_md(const Dn *dn, const dnnl_dim_t *d) {
    return dn_md_dims_t(4, d, dn->force16 && d[1] % 16 == 0 && d[2] * d[3] > 1 ? dnnl_aBcd16b : dnnl_format_tag_any, dn->dt);
}

/* TensorFlow's padding as oneDNN's: the padding after is what the last window needs (never
 * negative: a window that ends inside the input needs none). */
static dnnl_dim_t pad_after(int in, int out, int k, int s, int before) {
    int p = (out - 1) * s + k - in - before;
    return p > 0 ? p : 0;
}

static void *conv_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    const Conv *c = l->priv;
    const int G = dn_conv_groups(c);
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    const int N = in->shape.n;
    dnnl_dims_t sd = {N, c->cin, c->h, c->w}, dd = {N, c->cout, c->oh, c->ow}, bd = {c->cout};
    Md src_any = conv_md(dn, sd), dst_any = conv_md(dn, dd);
    /* in bf16 the weights too (a copy each forward); their gradient fp32 (oneDNN accumulates it so) */
    Md w_any = weights_md(c, G, dnnl_format_tag_any, dn->dt), w_plain = weights_md(c, G, dnnl_oihw, dnnl_f32),
       dw_any = weights_md(c, G, dnnl_format_tag_any, dnnl_f32);
    Md b_md = dn_md_dims(1, bd, dnnl_x);
    const int has_bias = c->pb >= 0;
    dnnl_dims_t strides = {c->sh, c->sw}, pl = {c->pt, c->pl},
                pr = {pad_after(c->h, c->oh, c->kh, c->sh, c->pt), pad_after(c->w, c->ow, c->kw, c->sw, c->pl)};

    dnnl_convolution_desc_t fd, bdd, wd;
    DN_CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src_any, &w_any,
                                                has_bias ? &b_md : NULL, &dst_any, strides, pl, pr));
    const int relu_li = dn_relu_after(dn, l->out);
    dnnl_primitive_desc_t fpd = relu_li >= 0 ? dn_pd_relu(dn, &fd) : dn_pd(dn, &fd, NULL);
    if (!fpd) return NULL;
    const int need_dx = in->grad != NULL;
    dnnl_primitive_desc_t dpd = NULL, wpd;
    if (need_dx) {
        DN_CHECK(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &src_any, &w_any, &dst_any,
                                                          strides, pl, pr));
        dpd = dn_pd(dn, &bdd, fpd);
    }
    /* the weight gradient by blkconv.c where it computes this shape and the input and the output
     * gradient are nChw8c (oneDNN's choice on AVX2); by firstconv.c where it computes this shape
     * (few input channels), the input node is plain and the output gradient nChw8c */
    DnBlkConv bc = {N, c->cin, c->cout, c->h, c->w, c->oh, c->ow, c->kh, c->kw, c->pt, c->pl};
    int blk_dw = dn->blk_dw && G == 1 && c->sh == 1 && c->sw == 1, first = 0;
    if (blk_dw) {
        Md s8 = dn_md_dims(4, sd, dnnl_aBcd8b), d8 = dn_md_dims(4, dd, dnnl_aBcd8b);
        const int d8_dy = dn_md_eq(dn_query(fpd, dnnl_query_dst_md), &d8) &&
                          (!dpd || dn_md_eq(dn_query(dpd, dnnl_query_diff_dst_md), &d8));
        first = d8_dy && dn_firstconv_ok(&bc) && dn_is_nchw(&dn->md[l->in[0]], in->shape);
        blk_dw = first || (d8_dy && dn_blkconv_dw_ok(&bc) && dn_md_eq(dn_query(fpd, dnnl_query_src_md), &s8));
    }
    /* the forward and backward data by wino.c where it computes this shape (3x3 or 5x5, stride 1) and
     * oneDNN's primitives would read and write nChw8c (its choice on AVX2) or nChw16c (AVX-512) */
    DnWino wg = {N, c->cin, c->cout, c->h, c->w, c->oh, c->ow, c->pt, c->pl, c->kh, 0};
    int wino = 0;
    const int wino_shape = dn->wino && G == 1 && c->kh == c->kw && c->sh == 1 && c->sw == 1;
    for (int b = 8; b <= 16 && wino_shape && !wino; b += 8) {
        wg.blk = b;
        if (!dn_wino_ok(&wg)) continue;
        const dnnl_format_tag_t tag = b == 8 ? dnnl_aBcd8b : dnnl_aBcd16b;
        Md sb = dn_md_dims(4, sd, tag), db = dn_md_dims(4, dd, tag);
        wino = dn_md_eq(dn_query(fpd, dnnl_query_src_md), &sb) && dn_md_eq(dn_query(fpd, dnnl_query_dst_md), &db) &&
               (!dpd || (dn_md_eq(dn_query(dpd, dnnl_query_diff_dst_md), &db) &&
                         dn_md_eq(dn_query(dpd, dnnl_query_diff_src_md), &sb)));
    }
    /* and the weight gradient by wino.c too where its sums fit (else blkconv.c's) */
    const int wino_dw = wino && dn->blk_dw && dn_wino_dw_ok(&wg);
    if (wino_dw) blk_dw = 1, first = 0;
    wpd = NULL;
    if (!blk_dw) {
        DN_CHECK(dnnl_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct, &src_any, &dw_any,
                                                             has_bias ? &b_md : NULL, &dst_any, strides, pl, pr));
        wpd = dn_pd(dn, &wd, fpd);
    }
    if ((need_dx && !dpd) || (!blk_dw && !wpd)) {
        dnnl_primitive_desc_destroy(fpd);
        if (dpd) dnnl_primitive_desc_destroy(dpd);
        if (wpd) dnnl_primitive_desc_destroy(wpd);
        return NULL;
    }
    DnConv *k = xcalloc(1, sizeof *k);
    float *W = net_param(net, c->pw), *dW = net_grad(net, c->pw);

    /* forward */
    Md f_src = *dn_query(fpd, dnnl_query_src_md), f_w = *dn_query(fpd, dnnl_query_weights_md),
       f_dst = *dn_query(fpd, dnnl_query_dst_md);
    const Md *node_out = dn_node_layout(dn, l->out, &f_dst);
    k->src = dn_in(dn, &f_src, &dn->md[l->in[0]], in->data);
    if (!wino) k->w = dn_in(dn, &f_w, &w_plain, W); /* wino.c reads W itself */
    k->bias = has_bias ? dn_mem(dn, &b_md, net_param(net, c->pb)) : NULL;
    if (relu_li >= 0) {
        /* the relu's output node holds what the forward writes, in this node's layout */
        const Node *ro = &net->node[net->layer[relu_li].out];
        dn->md[net->layer[relu_li].out] = *node_out;
        dnnl_eltwise_desc_t ef, eb;
        DN_CHECK(dnnl_eltwise_forward_desc_init(&ef, dnnl_forward_training, dnnl_eltwise_relu_use_dst_for_bwd, node_out,
                                                0.0f, 0.0f));
        DN_CHECK(dnnl_eltwise_backward_desc_init(&eb, dnnl_eltwise_relu_use_dst_for_bwd, node_out, node_out, 0.0f, 0.0f));
        dnnl_primitive_desc_t efpd = dn_pd(dn, &ef, NULL), ebpd = efpd ? dn_pd(dn, &eb, efpd) : NULL;
        if (!ebpd) die("oneDNN has no relu backward for layer %s", l->name);
        DN_CHECK(dnnl_primitive_desc_destroy(efpd));
        k->relu = 1;
        k->relu_bwd = dn_prim(dn, ebpd);
        k->relu_y = dn_mem(dn, node_out, ro->data);
        k->relu_dy = dn_mem(dn, node_out, ro->grad);
        k->relu_dx = dn_mem(dn, node_out, out->grad);
        k->dst = dn_out(dn, &f_dst, node_out, ro->data, 0);
        dn_fuse(dn, relu_li);
    } else {
        k->dst = dn_out(dn, &f_dst, node_out, out->data, 0);
    }
    k->fwd = dn_prim(dn, fpd);

    /* backward data */
    Md b_ddst = f_dst;
    if (need_dx) {
        Md b_dsrc = *dn_query(dpd, dnnl_query_diff_src_md), b_w = *dn_query(dpd, dnnl_query_weights_md);
        b_ddst = *dn_query(dpd, dnnl_query_diff_dst_md);
        k->has_bwd_data = 1;
        k->ddst = dn_in(dn, &b_ddst, node_out, out->grad);
        if (!wino) /* (wino.c reads W itself) */
            k->wd = dn_md_eq(&b_w, &f_w) ? (DnIn){k->w.mem, NULL, NULL} /* the forward's copy */
                                         : dn_in(dn, &b_w, &w_plain, W);
        k->dsrc = dn_out(dn, &b_dsrc, &dn->md[l->in[0]], in->grad, dn_acc(dn, li, 0));
        k->bwd_data = dn_prim(dn, dpd);
    }

    if (wino) {
        k->wino = 1;
        k->wg = wg;
        k->W = W;
        k->B = has_bias ? net_param(net, c->pb) : NULL;
        const size_t bytes = dn_wino_scratch_floats(&wg, omp_get_max_threads()) * sizeof(float);
        if (bytes > dn->scratch_bytes) dn->scratch_bytes = bytes;
        dn->nwino++;
    }

    /* backward weights */
    if (blk_dw) {
        k->blk_dw = 1;
        k->first = first;
        k->wino_dw = wino_dw;
        k->x = in->data;
        k->bc = bc;
        k->dW = dW;
        k->dB = has_bias ? net_grad(net, c->pb) : NULL;
        k->src_w = (DnIn){k->src.mem, NULL, NULL};
        k->ddst_w = need_dx ? (DnIn){k->ddst.mem, NULL, NULL} : dn_in(dn, &f_dst, node_out, out->grad);
        dn->nblk_dw++;
        return k;
    }
    Md w_src = *dn_query(wpd, dnnl_query_src_md), w_ddst = *dn_query(wpd, dnnl_query_diff_dst_md),
       w_dw = *dn_query(wpd, dnnl_query_diff_weights_md);
    if (dn_md_eq(&w_src, &f_src))
        k->src_w = (DnIn){k->src.mem, NULL, NULL}; /* the forward's input, converted or not */
    else
        k->src_w = dn_in(dn, &w_src, &dn->md[l->in[0]], in->data);
    if (need_dx && dn_md_eq(&w_ddst, &b_ddst))
        k->ddst_w = (DnIn){k->ddst.mem, NULL, NULL};
    else
        k->ddst_w = dn_in(dn, &w_ddst, node_out, out->grad);
    k->dw = dn_out(dn, &w_dw, &w_plain, dW, 0);
    k->db = has_bias ? dn_mem(dn, &b_md, net_grad(net, c->pb)) : NULL;
    k->bwd_w = dn_prim(dn, wpd);
    return k;
}

static void conv_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnConv *k = st;
    dn_in_run(dn, &k->src);
    if (k->wino) {
        void *x, *y;
        DN_CHECK(dnnl_memory_get_data_handle(k->src.mem, &x));
        DN_CHECK(dnnl_memory_get_data_handle(k->dst.mem, &y));
        dn_wino_fwd(&k->wg, x, k->W, k->B, k->relu, y, dn->scratch, dn->scratch_bytes / sizeof(float));
        dn_out_run(dn, &k->dst);
        return;
    }
    dn_in_run(dn, &k->w);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, k->src.mem}, {DNNL_ARG_WEIGHTS, k->w.mem}, {DNNL_ARG_DST, k->dst.mem},
                            {DNNL_ARG_BIAS, k->bias}};
    dn_exec(dn, &k->fwd, k->bias ? 4 : 3, a);
    dn_out_run(dn, &k->dst);
}

static void conv_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnConv *k = st;
    if (k->relu) {
        dnnl_exec_arg_t r[3] = {{DNNL_ARG_DST, k->relu_y}, {DNNL_ARG_DIFF_DST, k->relu_dy}, {DNNL_ARG_DIFF_SRC, k->relu_dx}};
        dn_exec(dn, &k->relu_bwd, 3, r);
    }
    if (k->has_bwd_data) {
        dn_in_run(dn, &k->ddst);
        if (!k->wino) dn_in_run(dn, &k->wd);
    }
    dn_in_run(dn, &k->src_w);
    dn_in_run(dn, &k->ddst_w);
    if (k->blk_dw) {
        void *x, *dy;
        DN_CHECK(dnnl_memory_get_data_handle(k->src_w.mem, &x));
        DN_CHECK(dnnl_memory_get_data_handle(k->ddst_w.mem, &dy));
        if (k->wino_dw)
            dn_wino_dw(&k->wg, x, dy, k->dW, k->dB, dn->scratch, dn->scratch_bytes / sizeof(float));
        else if (k->first)
            dn_firstconv_dw(&k->bc, k->x, dy, k->dW, k->dB);
        else
            dn_blkconv_dw(&k->bc, x, dy, k->dW, k->dB);
    } else {
        dnnl_exec_arg_t w[4] = {{DNNL_ARG_SRC, k->src_w.mem}, {DNNL_ARG_DIFF_DST, k->ddst_w.mem},
                                {DNNL_ARG_DIFF_WEIGHTS, k->dw.mem}, {DNNL_ARG_DIFF_BIAS, k->db}};
        dn_exec(dn, &k->bwd_w, k->db ? 4 : 3, w);
        dn_out_run(dn, &k->dw);
    }
    if (k->has_bwd_data && k->wino) {
        void *dy, *dx;
        DN_CHECK(dnnl_memory_get_data_handle(k->ddst.mem, &dy));
        DN_CHECK(dnnl_memory_get_data_handle(k->dsrc.mem, &dx));
        dn_wino_bwd_data(&k->wg, dy, k->W, dx, dn->scratch, dn->scratch_bytes / sizeof(float));
        dn_out_run(dn, &k->dsrc);
    } else if (k->has_bwd_data) {
        dnnl_exec_arg_t d[3] = {{DNNL_ARG_DIFF_DST, k->ddst.mem}, {DNNL_ARG_WEIGHTS, k->wd.mem},
                                {DNNL_ARG_DIFF_SRC, k->dsrc.mem}};
        dn_exec(dn, &k->bwd_data, 3, d);
        dn_out_run(dn, &k->dsrc);
    }
}

const DnImpl dn_conv_impl = {"conv", conv_plan, conv_forward, conv_backward, NULL};
#endif
