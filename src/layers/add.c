/* add.c: elementwise weighted sum y = ca * a + cb * b of two tensors of the same shape (residual
 * connections; ca = cb = 1 for a plain sum), CPU reference backend. Input k receives ck times the
 * output gradient; a == b receives (ca + cb) times it. */
#include <stdlib.h>

#include "layers.h"
#include "priv.h"

#define ADD_PAR_MIN 32768

static void add_forward(Layer *l, Net *net) {
    const AddPriv *p = l->priv;
    const float *a = net_node(net, l->in[0])->data, *b = net_node(net, l->in[1])->data;
    const Node *out = net_node(net, l->out);
    float *y = out->data;
    const long n = (long)shape_count(out->shape);
    const float ca = p->ca, cb = p->cb;
    if (ca == 1.0f && cb == 1.0f) {
#pragma omp parallel for schedule(static) if (n > ADD_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = a[i] + b[i];
    } else {
#pragma omp parallel for schedule(static) if (n > ADD_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = ca * a[i] + cb * b[i];
    }
}

static void add_backward(Layer *l, Net *net) {
    const AddPriv *p = l->priv;
    const Node *out = net_node(net, l->out);
    const float *dy = out->grad;
    const long n = (long)shape_count(out->shape);
    for (int k = 0; k < 2; k++) {
        float *dx = net_node(net, l->in[k])->grad;
        const float ck = k ? p->cb : p->ca;
        if (!dx) continue;
#pragma omp parallel for schedule(static) if (n > ADD_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += ck * dy[i];
    }
}

/* empty for a plain sum, else the coefficients: "1 a + 0.2 b" */
static void add_describe(const Layer *l, char *buf, size_t n) {
    const AddPriv *p = l->priv;
    if (p->ca == 1.0f && p->cb == 1.0f)
        buf[0] = 0;
    else
        snprintf(buf, n, "%g a + %g b", (double)p->ca, (double)p->cb);
}

static const LayerOps add_ops = {"add", add_forward, add_backward, NULL, add_describe, NULL};

int add_create(Net *net, int a, int b) { return add_create_scaled(net, a, b, 1.0f, 1.0f); }

int add_create_scaled(Net *net, int a, int b, float ca, float cb) {
    if (a < 0 || a >= net->nnode || b < 0 || b >= net->nnode) die("add: bad input handles %d, %d", a, b);
    Shape sa = net_node(net, a)->shape, sb = net_node(net, b)->shape;
    if (!shape_eq(sa, sb))
        die("add: shapes differ: %dx%dx%dx%d + %dx%dx%dx%d", sa.n, sa.c, sa.h, sa.w, sb.n, sb.c, sb.h, sb.w);
    AddPriv *p = xcalloc(1, sizeof *p);
    p->ca = ca;
    p->cb = cb;
    int in[2] = {a, b};
    Layer *l = net_add_layer(net, &add_ops, in, 2, sa, p);
    l->flops = (ca == 1.0f && cb == 1.0f ? 1.0 : 3.0) * (double)shape_count(sa);
    return l->out;
}
