/* add.c: elementwise sum of two tensors of the same shape (residual connections), CPU reference
 * backend. Both inputs receive the output gradient; a == b receives it twice. */
#include <stdlib.h>

#include "layers.h"

#define ADD_PAR_MIN 32768

static void add_forward(Layer *l, Net *net) {
    const float *a = net_node(net, l->in[0])->data, *b = net_node(net, l->in[1])->data;
    const Node *out = net_node(net, l->out);
    float *y = out->data;
    const long n = (long)shape_count(out->shape);
#pragma omp parallel for schedule(static) if (n > ADD_PAR_MIN)
    for (long i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void add_backward(Layer *l, Net *net) {
    const Node *out = net_node(net, l->out);
    const float *dy = out->grad;
    const long n = (long)shape_count(out->shape);
    for (int k = 0; k < 2; k++) {
        float *dx = net_node(net, l->in[k])->grad;
        if (!dx) continue;
#pragma omp parallel for schedule(static) if (n > ADD_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += dy[i];
    }
}

static const LayerOps add_ops = {"add", add_forward, add_backward, NULL};

int add_create(Net *net, int a, int b) {
    if (a < 0 || a >= net->nnode || b < 0 || b >= net->nnode) die("add: bad input handles %d, %d", a, b);
    Shape sa = net_node(net, a)->shape, sb = net_node(net, b)->shape;
    if (!shape_eq(sa, sb))
        die("add: shapes differ: %dx%dx%dx%d + %dx%dx%dx%d", sa.n, sa.c, sa.h, sa.w, sb.n, sb.c, sb.h, sb.w);
    int in[2] = {a, b};
    Layer *l = net_add_layer(net, &add_ops, in, 2, sa, NULL);
    l->flops = (double)shape_count(sa);
    return l->out;
}
