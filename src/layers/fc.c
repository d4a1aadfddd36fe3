/* fc.c: fully connected layer, CPU reference backend: y = x W^T + b with OpenBLAS GEMM. */
#include <cblas.h>
#include <stdlib.h>

#include "layers.h"
#include "priv.h"

static void fc_forward(Layer *l, Net *net) {
    const Fc *f = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const int n = in->shape.n;
    const float *W = net_param(net, l->param0);
    float beta = 0.0f;
    if (f->bias) {
        const float *b = net_param(net, l->param0 + 1);
        for (int i = 0; i < n; i++)
            for (int o = 0; o < f->nout; o++) y[(size_t)i * f->nout + o] = b[o];
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, f->nout, f->nin, 1.0f, in->data, f->nin, W, f->nin,
                beta, y, f->nout);
}

static void fc_backward(Layer *l, Net *net) {
    const Fc *f = l->priv;
    const Node *in = net_node(net, l->in[0]);
    const float *dy = net_node(net, l->out)->grad;
    const int n = in->shape.n;
    const float *W = net_param(net, l->param0);
    float *dW = net_grad(net, l->param0);
    /* dW[nout][nin] += dy^T x */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f->nout, f->nin, n, 1.0f, dy, f->nout, in->data, f->nin,
                1.0f, dW, f->nin);
    if (f->bias) {
        float *db = net_grad(net, l->param0 + 1);
        for (int o = 0; o < f->nout; o++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += dy[(size_t)i * f->nout + o];
            db[o] += (float)s;
        }
    }
    /* dx[n][nin] += dy W */
    if (in->grad)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, f->nin, f->nout, 1.0f, dy, f->nout, W, f->nin,
                    1.0f, in->grad, f->nin);
}

static const LayerOps fc_ops = {"fc", fc_forward, fc_backward, NULL, NULL, NULL};

int fc_create(Net *net, int in, int nout, int bias) {
    if (in < 0 || in >= net->nnode) die("fc: bad input handle %d", in);
    Shape s = net_node(net, in)->shape;
    if (s.h != 1 || s.w != 1)
        die("fc: input is %dx%dx%d, a 2-D [n][features] input is needed (flatten or spatial-average it first)",
            s.c, s.h, s.w);
    if (nout <= 0) die("fc: %d outputs", nout);
    Fc *f = xcalloc(1, sizeof *f);
    f->nin = s.c;
    f->nout = nout;
    f->bias = bias != 0;
    Layer *l = net_add_layer(net, &fc_ops, &in, 1, shape4(s.n, nout, 1, 1), f);
    l->flops = 2.0 * (double)s.n * (double)s.c * (double)nout;
    net_add_param(net, "weights", (size_t)nout * (size_t)s.c, INIT_GLOROT_UNIFORM, s.c, nout);
    if (f->bias) net_add_param(net, "biases", (size_t)nout, INIT_ZERO, 0, 0);
    return l->out;
}
