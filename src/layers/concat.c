/* concat.c: concatenation along channels, CPU reference backend. Input k occupies channels
 * [off_k, off_k + c_k) of the output; an input listed twice gets both gradient slices. */
#include <stdlib.h>
#include <string.h>

#include "layers.h"

static void concat_forward(Layer *l, Net *net) {
    const Node *out = net_node(net, l->out);
    const int n = out->shape.n;
    const size_t hw = (size_t)out->shape.h * out->shape.w, ochw = shape_sample(out->shape);
#pragma omp parallel for schedule(static) if (n > 1 && ochw * n > 65536)
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        for (int k = 0; k < l->nin; k++) {
            const Node *in = net_node(net, l->in[k]);
            size_t len = (size_t)in->shape.c * hw;
            memcpy(out->data + (size_t)i * ochw + off, in->data + (size_t)i * len, len * sizeof(float));
            off += len;
        }
    }
}

static void concat_backward(Layer *l, Net *net) {
    const Node *out = net_node(net, l->out);
    const int n = out->shape.n;
    const size_t hw = (size_t)out->shape.h * out->shape.w, ochw = shape_sample(out->shape);
    /* inputs in the outer loop: a repeated input is never written by two threads at once */
    size_t off = 0;
    for (int k = 0; k < l->nin; k++) {
        const Node *in = net_node(net, l->in[k]);
        const size_t len = (size_t)in->shape.c * hw;
        if (in->grad) {
#pragma omp parallel for schedule(static) if (n > 1 && len * n > 65536)
            for (int i = 0; i < n; i++) {
                float *dx = in->grad + (size_t)i * len;
                const float *g = out->grad + (size_t)i * ochw + off;
                for (size_t j = 0; j < len; j++) dx[j] += g[j];
            }
        }
        off += len;
    }
}

static const LayerOps concat_ops = {"concat", concat_forward, concat_backward, NULL, NULL, NULL};

int concat_create(Net *net, const int *in, int n) {
    if (n < 1) die("concat: %d inputs", n);
    for (int k = 0; k < n; k++)
        if (in[k] < 0 || in[k] >= net->nnode) die("concat: bad input handle %d", in[k]);
    Shape s0 = net_node(net, in[0])->shape;
    long c = 0;
    for (int k = 0; k < n; k++) {
        Shape s = net_node(net, in[k])->shape;
        if (s.n != s0.n || s.h != s0.h || s.w != s0.w)
            die("concat: input %d is %dx%dx%dx%d, input 0 is %dx%dx%dx%d (n, h, w must match)", k, s.n, s.c, s.h,
                s.w, s0.n, s0.c, s0.h, s0.w);
        c += s.c;
    }
    if (c > 0x7fffffff) die("concat: %ld channels is too many", c);
    Layer *l = net_add_layer(net, &concat_ops, in, n, shape4(s0.n, (int)c, s0.h, s0.w), NULL);
    l->flops = 0;
    return l->out;
}
