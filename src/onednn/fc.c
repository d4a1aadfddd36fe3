/* fc.c: the fully connected layer's GEMMs on oneDNN (dnnl_sgemm, row-major, on the step's OpenMP
 * threads): y = x W^T + b, dW += dy^T x, db += sum over the batch of dy, dx = dy W (added where
 * another consumer wrote dx first). FC inputs and outputs are 2-D, so always NCHW. */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "internal.h"

static void *fc_plan(Dn *dn, Layer *l, int li) {
    (void)li;
    dn->md[l->out] = dn_md(dn->net->node[l->out].shape, dnnl_nchw);
    return (void *)l->priv; /* the reference's shapes are all it needs; not owned */
}

static void fc_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)li;
    const Fc *f = st;
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
    const Fc *f = st;
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

static void fc_destroy(void *st) { (void)st; }

const DnImpl dn_fc_impl = {"fc", fc_plan, fc_forward, fc_backward, fc_destroy};
#endif
