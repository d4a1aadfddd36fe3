/* reshape.c: flatten on oneDNN: one reorder from the input's layout (blocked or NCHW) into NHWC,
 * which is the flattened [n][h*w*c] output byte for byte; backward reorders the gradient back,
 * adding where another consumer wrote the input's gradient first. */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "internal.h"

typedef struct DnFlatten {
    DnReorder *fwd, *bwd;
} DnFlatten;

static void *flatten_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    Md nhwc = dn_md(in->shape, dnnl_nhwc);
    DnFlatten *f = xcalloc(1, sizeof *f);
    dn->md[l->out] = dn_md(out->shape, dnnl_nchw);
    f->fwd = dn_reorder(dn, &dn->md[l->in[0]], in->data, &nhwc, out->data, 0);
    if (in->grad) f->bwd = dn_reorder(dn, &nhwc, out->grad, &dn->md[l->in[0]], in->grad, dn_acc(dn, li, 0));
    return f;
}

static void flatten_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    dn_reorder_run(dn, ((DnFlatten *)st)->fwd);
}

static void flatten_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnFlatten *f = st;
    if (f->bwd) dn_reorder_run(dn, f->bwd);
}

const DnImpl dn_flatten_impl = {"flatten", flatten_plan, flatten_forward, flatten_backward, NULL};
#endif
