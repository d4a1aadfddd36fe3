/* concat.c: concatenation along channels on oneDNN, in bf16 plans only (an fp32 plan runs the
 * reference's concat on the inputs' shared layout, core.c's layout_free). Forward: oneDNN's concat
 * primitive from the inputs' bf16 layouts into the output's; backward: each input's gradient is a
 * reorder of its channels' part of the output's gradient (a sub-memory at its channel offset),
 * written, or added where another consumer wrote that gradient first (the plan's schedule).
 * Planned where every input is bf16 in the same channel block (8 or 16, nChw8c / nChw16c, or 1:
 * NCHW) with whole blocks of channels, so each input's part starts at a block; else the reference
 * runs, on fp32 NCHW copies. */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "internal.h"

#define CONCAT_MAX 14 /* dn_exec takes 15 arguments: the inputs and the output */

typedef struct DnConcat {
    DnPrim fwd;
    int n;
    dnnl_memory_t src[CONCAT_MAX], dst;
    DnReorder *bwd[CONCAT_MAX]; /* NULL: that input has no gradient */
} DnConcat;

static void *concat_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    const Node *out = &net->node[l->out];
    const Shape so = out->shape;
    if (dn->dt != dnnl_bf16 || l->nin < 1 || l->nin > CONCAT_MAX || so.h * so.w <= 1) return NULL;
    int b = -1;
    Md src[CONCAT_MAX];
    for (int k = 0; k < l->nin; k++) {
        const Node *nd = &net->node[l->in[k]];
        const Md *m = &dn->md[l->in[k]];
        const int bk = dn_block(m, nd->shape);
        if (m->data_type != dnnl_bf16 || bk == 0 || (b >= 0 && bk != b) || nd->shape.c % bk != 0) return NULL;
        b = bk;
        src[k] = *m;
    }
    Md dst = dn_md_block_t(so, b, dnnl_bf16);
    if (!dn_md_eq(dn_node_layout(dn, l->out, &dst), &dst)) return NULL;
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_concat_primitive_desc_create(&pd, &dst, l->nin, 1, src, dn->attr, dn->eng);
    if (st == dnnl_unimplemented) return NULL;
    DN_CHECK(st);
    DnConcat *c = xcalloc(1, sizeof *c);
    c->n = l->nin;
    c->fwd = dn_prim(dn, pd);
    c->dst = dn_mem(dn, &dst, out->data);
    int off = 0;
    for (int k = 0; k < l->nin; k++) {
        const Node *nd = &net->node[l->in[k]];
        c->src[k] = dn_mem(dn, &src[k], nd->data);
        if (nd->grad) {
            const dnnl_dims_t dims = {nd->shape.n, nd->shape.c, nd->shape.h, nd->shape.w}, offs = {0, off, 0, 0};
            Md part;
            DN_CHECK(dnnl_memory_desc_init_submemory(&part, &dst, dims, offs));
            c->bwd[k] = dn_reorder(dn, &part, out->grad, &src[k], nd->grad, dn_acc(dn, li, k));
        }
        off += nd->shape.c;
    }
    return c;
}

static void concat_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnConcat *c = st;
    dnnl_exec_arg_t a[CONCAT_MAX + 1];
    for (int k = 0; k < c->n; k++) a[k] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + k, c->src[k]};
    a[c->n] = (dnnl_exec_arg_t){DNNL_ARG_DST, c->dst};
    dn_exec(dn, &c->fwd, c->n + 1, a);
}

static void concat_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnConcat *c = st;
    for (int k = 0; k < c->n; k++)
        if (c->bwd[k]) dn_reorder_run(dn, c->bwd[k]);
}

const DnImpl dn_concat_impl = {"concat", concat_plan, concat_forward, concat_backward, NULL};
#endif
