/* bn.c: batch normalisation, CPU reference backend.
 *
 * Statistics are per channel over (n, h, w) (2-D inputs: over n). Training uses the batch mean
 * and the biased batch variance and moves the running averages (the running variance gets the
 * unbiased batch variance, as TensorFlow's fused batch norm); inference uses the running
 * statistics. The mean and 1/sqrt(var + eps) used by the last forward stay in the layer for the
 * backward pass, with the mode they were computed in. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"
#include "priv.h"

static void bn_destroy(Layer *l) {
    Bn *b = l->priv;
    free(b->mean);
    free(b->invstd);
    free(b);
}

static void bn_forward(Layer *l, Net *net) {
    Bn *b = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const float *x = in->data;
    const int n = in->shape.n, c = b->c;
    const size_t hw = b->hw, chw = (size_t)c * hw;
    const float *gamma = net_param(net, l->param0), *beta = net_param(net, l->param0 + 1);
    float *mm = net_buffer(net, l->buf0), *mv = net_buffer(net, l->buf0 + 1);
    const int training = net->training != 0;
    const double m = (double)n * (double)hw;
    b->training = training;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double mean, invstd;
        if (training) {
            double s = 0;
            for (int i = 0; i < n; i++) {
                const float *p = x + (size_t)i * chw + (size_t)ch * hw;
                for (size_t k = 0; k < hw; k++) s += p[k];
            }
            mean = s / m;
            double ss = 0;
            for (int i = 0; i < n; i++) {
                const float *p = x + (size_t)i * chw + (size_t)ch * hw;
                for (size_t k = 0; k < hw; k++) {
                    double d = p[k] - mean;
                    ss += d * d;
                }
            }
            double var = ss / m;
            double unbiased = m > 1 ? ss / (m - 1) : var;
            invstd = 1.0 / sqrt(var + (double)BN_EPSILON);
            mm[ch] = (float)(BN_DECAY * (double)mm[ch] + (1.0 - BN_DECAY) * mean);
            mv[ch] = (float)(BN_DECAY * (double)mv[ch] + (1.0 - BN_DECAY) * unbiased);
        } else {
            mean = mm[ch];
            invstd = 1.0 / sqrt((double)mv[ch] + (double)BN_EPSILON);
        }
        b->mean[ch] = (float)mean;
        b->invstd[ch] = (float)invstd;
        const float scale = (float)(gamma[ch] * invstd);
        const float shift = (float)(beta[ch] - gamma[ch] * invstd * mean);
        for (int i = 0; i < n; i++) {
            const float *p = x + (size_t)i * chw + (size_t)ch * hw;
            float *q = y + (size_t)i * chw + (size_t)ch * hw;
            for (size_t k = 0; k < hw; k++) q[k] = p[k] * scale + shift;
        }
    }
}

static void bn_backward(Layer *l, Net *net) {
    Bn *b = l->priv;
    const Node *in = net_node(net, l->in[0]);
    const float *dy = net_node(net, l->out)->grad;
    const float *x = in->data;
    float *dx = in->grad;
    const int n = in->shape.n, c = b->c;
    const size_t hw = b->hw, chw = (size_t)c * hw;
    const float *gamma = net_param(net, l->param0);
    float *dgamma = net_grad(net, l->param0), *dbeta = net_grad(net, l->param0 + 1);
    const double m = (double)n * (double)hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        const double mean = b->mean[ch], invstd = b->invstd[ch];
        double sdy = 0, sdyx = 0; /* sum dy, sum dy * xhat */
        for (int i = 0; i < n; i++) {
            const float *p = x + (size_t)i * chw + (size_t)ch * hw;
            const float *g = dy + (size_t)i * chw + (size_t)ch * hw;
            for (size_t k = 0; k < hw; k++) {
                sdy += g[k];
                sdyx += g[k] * ((p[k] - mean) * invstd);
            }
        }
        dgamma[ch] += (float)sdyx;
        dbeta[ch] += (float)sdy;
        if (!dx) continue;
        const double gs = gamma[ch] * invstd;
        if (b->training) {
            /* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
            const float a = (float)gs, mdy = (float)(sdy / m), mdyx = (float)(sdyx / m);
            const float mu = (float)mean, is = (float)invstd;
            for (int i = 0; i < n; i++) {
                const float *p = x + (size_t)i * chw + (size_t)ch * hw;
                const float *g = dy + (size_t)i * chw + (size_t)ch * hw;
                float *d = dx + (size_t)i * chw + (size_t)ch * hw;
                for (size_t k = 0; k < hw; k++) d[k] += a * (g[k] - mdy - (p[k] - mu) * is * mdyx);
            }
        } else {
            const float a = (float)gs;
            for (int i = 0; i < n; i++) {
                const float *g = dy + (size_t)i * chw + (size_t)ch * hw;
                float *d = dx + (size_t)i * chw + (size_t)ch * hw;
                for (size_t k = 0; k < hw; k++) d[k] += a * g[k];
            }
        }
    }
}

static const LayerOps bn_ops = {"bn", bn_forward, bn_backward, bn_destroy, NULL, NULL};

int bn_create(Net *net, int in) {
    if (in < 0 || in >= net->nnode) die("bn: bad input handle %d", in);
    Shape s = net_node(net, in)->shape;
    Bn *b = xcalloc(1, sizeof *b);
    b->c = s.c;
    b->hw = (size_t)s.h * (size_t)s.w;
    b->mean = xcalloc((size_t)s.c, sizeof *b->mean);
    b->invstd = xcalloc((size_t)s.c, sizeof *b->invstd);
    b->training = 1;
    Layer *l = net_add_layer(net, &bn_ops, &in, 1, s, b);
    /* two passes for the statistics, one multiply-add for the output */
    l->flops = 5.0 * (double)shape_count(s);
    net_add_param(net, "gamma", (size_t)s.c, INIT_ONE, 0, 0);
    net_add_param(net, "beta", (size_t)s.c, INIT_ZERO, 0, 0);
    net_add_buffer(net, "moving_mean", (size_t)s.c, 0.0f);
    net_add_buffer(net, "moving_variance", (size_t)s.c, 1.0f);
    return l->out;
}
