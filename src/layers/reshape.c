/* reshape.c: flatten (4-D -> 2-D in NHWC element order, as nvcnn flattens its NHWC tensors) and
 * spatial average (mean over h and w), CPU reference backend. */
#include <stdlib.h>

#include "layers.h"

static void flatten_forward(Layer *l, Net *net) {
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const int n = in->shape.n, c = in->shape.c;
    const size_t hw = (size_t)in->shape.h * in->shape.w, chw = (size_t)c * hw;
#pragma omp parallel for schedule(static) if (n > 1 && chw * n > 32768)
    for (int i = 0; i < n; i++) {
        const float *x = in->data + (size_t)i * chw;
        float *o = y + (size_t)i * chw;
        for (int ch = 0; ch < c; ch++)
            for (size_t p = 0; p < hw; p++) o[p * c + ch] = x[(size_t)ch * hw + p];
    }
}

static void flatten_backward(Layer *l, Net *net) {
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const float *dy = net_node(net, l->out)->grad;
    const int n = in->shape.n, c = in->shape.c;
    const size_t hw = (size_t)in->shape.h * in->shape.w, chw = (size_t)c * hw;
#pragma omp parallel for schedule(static) if (n > 1 && chw * n > 32768)
    for (int i = 0; i < n; i++) {
        float *dx = in->grad + (size_t)i * chw;
        const float *g = dy + (size_t)i * chw;
        for (int ch = 0; ch < c; ch++)
            for (size_t p = 0; p < hw; p++) dx[(size_t)ch * hw + p] += g[p * c + ch];
    }
}

static void avg_forward(Layer *l, Net *net) {
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const int planes = in->shape.n * in->shape.c;
    const size_t hw = (size_t)in->shape.h * in->shape.w;
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
    for (int pl = 0; pl < planes; pl++) {
        const float *x = in->data + (size_t)pl * hw;
        double s = 0;
        for (size_t k = 0; k < hw; k++) s += x[k];
        y[pl] = (float)(s / (double)hw);
    }
}

static void avg_backward(Layer *l, Net *net) {
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const float *dy = net_node(net, l->out)->grad;
    const int planes = in->shape.n * in->shape.c;
    const size_t hw = (size_t)in->shape.h * in->shape.w;
    const float inv = 1.0f / (float)hw;
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
    for (int pl = 0; pl < planes; pl++) {
        float *dx = in->grad + (size_t)pl * hw;
        const float g = dy[pl] * inv;
        for (size_t k = 0; k < hw; k++) dx[k] += g;
    }
}

static const LayerOps flatten_ops = {"flatten", flatten_forward, flatten_backward, NULL, NULL, NULL};
static const LayerOps avg_ops = {"avg", avg_forward, avg_backward, NULL, NULL, NULL};

int flatten_create(Net *net, int in) {
    if (in < 0 || in >= net->nnode) die("flatten: bad input handle %d", in);
    Shape s = net_node(net, in)->shape;
    size_t feat = shape_sample(s);
    if (feat > (size_t)0x7fffffff) die("flatten: %zu features per sample is too many", feat);
    Layer *l = net_add_layer(net, &flatten_ops, &in, 1, shape4(s.n, (int)feat, 1, 1), NULL);
    l->flops = 0;
    return l->out;
}

int spatial_avg_create(Net *net, int in) {
    if (in < 0 || in >= net->nnode) die("spatial average: bad input handle %d", in);
    Shape s = net_node(net, in)->shape;
    Layer *l = net_add_layer(net, &avg_ops, &in, 1, shape4(s.n, s.c, 1, 1), NULL);
    l->flops = (double)shape_count(s);
    return l->out;
}
