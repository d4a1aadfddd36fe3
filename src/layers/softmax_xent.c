/* softmax_xent.c: softmax cross-entropy loss, CPU reference backend. Per sample, with
 * m = max(z): log p_j = z_j - m - log(sum_k exp(z_k - m)), loss = -log p_label. Forward keeps the
 * probabilities and the labels for backward, which writes (p - onehot) / n into the logits'
 * gradient; the output's own gradient is not used (this is the last layer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "priv.h"

static void xent_destroy(Layer *l) {
    Xent *x = l->priv;
    free(x->prob);
    free(x->label);
    free(x->e);
    free(x->li);
    free(x);
}

static void xent_forward(Layer *l, Net *net) {
    Xent *x = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *loss = net_node(net, l->out)->data;
    const int n = in->shape.n, c = x->classes;
    if (!net->labels) die("softmax_xent: no labels set for the batch");
    /* labels first, before any thread starts */
    for (int i = 0; i < n; i++) {
        int32_t lab = net->labels[i];
        if (lab < 0 || lab >= c)
            die("softmax_xent: label %d of batch index %d is outside [0, %d)", (int)lab, i, c);
        x->label[i] = lab;
    }
    /* one exp per logit (p_j = e_j / s: within a double's rounding of exp(z_j - lse)), in
     * parallel from 16K logits (lenet's 64 x 1000 ran on one thread), the samples' losses added in
     * their order afterwards: the same bits for any number of threads */
#pragma omp parallel for schedule(static) if (n > 1 && (long)n * c >= 16384)
    for (int i = 0; i < n; i++) {
        const float *z = in->data + (size_t)i * c;
        float *p = x->prob + (size_t)i * c;
        double *e = x->e + (size_t)i * c;
        float m = z[0];
        for (int j = 1; j < c; j++)
            if (z[j] > m) m = z[j];
        double s = 0;
        for (int j = 0; j < c; j++) s += e[j] = exp((double)z[j] - (double)m);
        for (int j = 0; j < c; j++) p[j] = (float)(e[j] / s);
        const double li = (double)m + log(s) - (double)z[x->label[i]];
        loss[i] = (float)li;
        x->li[i] = li;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += x->li[i];
    net->loss = total / (double)n;
}

static void xent_backward(Layer *l, Net *net) {
    const Xent *x = l->priv;
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const int n = in->shape.n, c = x->classes;
    const float inv = 1.0f / (float)n;
#pragma omp parallel for schedule(static) if (n > 1 && (long)n * c > 65536)
    for (int i = 0; i < n; i++) {
        float *g = in->grad + (size_t)i * c;
        const float *p = x->prob + (size_t)i * c;
        for (int j = 0; j < c; j++) g[j] += p[j] * inv;
        g[x->label[i]] -= inv;
    }
}

static const LayerOps xent_ops = {"softmax_xent", xent_forward, xent_backward, xent_destroy, NULL, NULL};

int softmax_xent_create(Net *net, int logits) {
    if (logits < 0 || logits >= net->nnode) die("softmax_xent: bad input handle %d", logits);
    Shape s = net_node(net, logits)->shape;
    if (s.h != 1 || s.w != 1)
        die("softmax_xent: logits are %dx%dx%d, a 2-D [n][classes] tensor is needed", s.c, s.h, s.w);
    Xent *x = xcalloc(1, sizeof *x);
    x->classes = s.c;
    x->prob = xcalloc(shape_count(s), sizeof *x->prob);
    x->label = xcalloc((size_t)s.n, sizeof *x->label);
    x->e = xcalloc(shape_count(s), sizeof *x->e);
    x->li = xcalloc((size_t)s.n, sizeof *x->li);
    Layer *l = net_add_layer(net, &xent_ops, &logits, 1, shape4(s.n, 1, 1, 1), x);
    l->flops = 4.0 * (double)shape_count(s);
    net->logits = logits;
    return l->out;
}
