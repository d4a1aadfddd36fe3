/* dropout.c: dropout, CPU reference backend. Training keeps each element with probability
 * keep_prob and scales it by 1/keep_prob; the mask is kept for backward. The mask comes from one
 * draw of net->rng that seeds independent streams per block of elements, so it does not depend on
 * the number of threads. Inference is the identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "priv.h"

#define DROPOUT_BLOCK 4096

static void dropout_destroy(Layer *l) {
    Dropout *d = l->priv;
    free(d->mask);
    free(d);
}

static void dropout_forward(Layer *l, Net *net) {
    Dropout *d = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const float *x = in->data;
    const size_t n = shape_count(in->shape);
    d->training = net->training != 0;
    if (!d->training) {
        memcpy(y, x, n * sizeof *y);
        return;
    }
    if (!d->mask) d->mask = xmalloc(n);
    const uint64_t seed = rng_u64(&net->rng);
    const float keep = d->keep, scale = 1.0f / d->keep;
    const long nblocks = (long)((n + DROPOUT_BLOCK - 1) / DROPOUT_BLOCK);
#pragma omp parallel for schedule(static) if (nblocks > 8)
    for (long b = 0; b < nblocks; b++) {
        Rng r;
        rng_seed_stream(&r, seed, (uint64_t)b);
        size_t lo = (size_t)b * DROPOUT_BLOCK, hi = lo + DROPOUT_BLOCK < n ? lo + DROPOUT_BLOCK : n;
        for (size_t i = lo; i < hi; i++) {
            uint8_t k = rng_uniform(&r) < keep;
            d->mask[i] = k;
            y[i] = k ? x[i] * scale : 0.0f;
        }
    }
}

static void dropout_backward(Layer *l, Net *net) {
    const Dropout *d = l->priv;
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const float *dy = net_node(net, l->out)->grad;
    float *dx = in->grad;
    const long n = (long)shape_count(in->shape);
    if (!d->training || !d->mask) {
        for (long i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    const float scale = 1.0f / d->keep;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (long i = 0; i < n; i++)
        if (d->mask[i]) dx[i] += dy[i] * scale;
}

static void dropout_describe(const Layer *l, char *buf, size_t n) {
    snprintf(buf, n, "keep %g", (double)((const Dropout *)l->priv)->keep);
}

static const LayerOps dropout_ops = {"dropout", dropout_forward, dropout_backward, dropout_destroy, dropout_describe, NULL};

int dropout_create(Net *net, int in, float keep_prob) {
    if (in < 0 || in >= net->nnode) die("dropout: bad input handle %d", in);
    if (!(keep_prob > 0.0f && keep_prob <= 1.0f)) die("dropout: keep_prob %g is not in (0, 1]", (double)keep_prob);
    Shape s = net_node(net, in)->shape;
    Dropout *d = xcalloc(1, sizeof *d);
    d->keep = keep_prob;
    Layer *l = net_add_layer(net, &dropout_ops, &in, 1, s, d);
    l->flops = (double)shape_count(s);
    return l->out;
}
