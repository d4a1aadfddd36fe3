/* pool.c: max and average pooling, CPU reference backend. Padding as TensorFlow: max ignores
 * padded positions; average divides by the number of in-bounds elements of the window. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "priv.h"

static void pool_destroy(Layer *l) {
    Pool *p = l->priv;
    free(p->argmax);
    free(p);
}

/* Clipped window of output (oy, ox): rows [y0, y1), columns [x0, x1). */
static inline void window(const Pool *p, int oy, int ox, int *y0, int *y1, int *x0, int *x1) {
    int ys = oy * p->sh - p->pt, xs = ox * p->sw - p->pl;
    *y0 = ys < 0 ? 0 : ys;
    *x0 = xs < 0 ? 0 : xs;
    *y1 = ys + p->kh > p->h ? p->h : ys + p->kh;
    *x1 = xs + p->kw > p->w ? p->w : xs + p->kw;
}

static void pool_forward(Layer *l, Net *net) {
    Pool *p = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const int planes = in->shape.n * p->c;
    const size_t ihw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    if (p->kind == POOL_MAX && !p->argmax) p->argmax = xmalloc((size_t)planes * ohw * sizeof *p->argmax);
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *x = in->data + (size_t)pl * ihw;
        float *o = y + (size_t)pl * ohw;
        int32_t *am = p->argmax ? p->argmax + (size_t)pl * ohw : NULL;
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++) {
                int y0, y1, x0, x1;
                window(p, oy, ox, &y0, &y1, &x0, &x1);
                if (p->kind == POOL_MAX) {
                    float best = -FLT_MAX;
                    int bi = y0 * p->w + x0;
                    for (int yy = y0; yy < y1; yy++)
                        for (int xx = x0; xx < x1; xx++) {
                            float v = x[yy * p->w + xx];
                            if (v > best) {
                                best = v;
                                bi = yy * p->w + xx;
                            }
                        }
                    o[oy * p->ow + ox] = x[bi];
                    am[oy * p->ow + ox] = bi;
                } else {
                    float s = 0;
                    for (int yy = y0; yy < y1; yy++)
                        for (int xx = x0; xx < x1; xx++) s += x[yy * p->w + xx];
                    o[oy * p->ow + ox] = s / (float)((y1 - y0) * (x1 - x0));
                }
            }
    }
}

static void pool_backward(Layer *l, Net *net) {
    Pool *p = l->priv;
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const float *dy = net_node(net, l->out)->grad;
    const int planes = in->shape.n * p->c;
    const size_t ihw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        float *dx = in->grad + (size_t)pl * ihw;
        const float *g = dy + (size_t)pl * ohw;
        if (p->kind == POOL_MAX) {
            const int32_t *am = p->argmax + (size_t)pl * ohw;
            for (size_t k = 0; k < ohw; k++) dx[am[k]] += g[k];
        } else {
            for (int oy = 0; oy < p->oh; oy++)
                for (int ox = 0; ox < p->ow; ox++) {
                    int y0, y1, x0, x1;
                    window(p, oy, ox, &y0, &y1, &x0, &x1);
                    float v = g[oy * p->ow + ox] / (float)((y1 - y0) * (x1 - x0));
                    for (int yy = y0; yy < y1; yy++)
                        for (int xx = x0; xx < x1; xx++) dx[yy * p->w + xx] += v;
                }
        }
    }
}

static void pool_describe(const Layer *l, char *buf, size_t n) {
    const Pool *p = l->priv;
    net_window_text(buf, n, p->kh, p->kw, p->sh, p->sw, p->pad);
}

static const LayerOps maxpool_ops = {"maxpool", pool_forward, pool_backward, pool_destroy, pool_describe, NULL};
static const LayerOps avgpool_ops = {"avgpool", pool_forward, pool_backward, pool_destroy, pool_describe, NULL};

int pool_create(Net *net, int in, PoolKind kind, int kh, int kw, int sh, int sw, Padding pad) {
    Shape s = net_node(net, in)->shape;
    if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0) die("pool: bad window %dx%d / stride %dx%d", kh, kw, sh, sw);
    if (pad == PAD_SAME_RESNET) die("pool: SAME_RESNET padding is for convolutions");
    Pool *p = xcalloc(1, sizeof *p);
    p->kind = kind;
    p->c = s.c;
    p->h = s.h;
    p->w = s.w;
    p->kh = kh;
    p->kw = kw;
    p->sh = sh;
    p->sw = sw;
    p->pad = pad;
    p->oh = net_window_out(net, "pool", s.h, kh, sh, pad, &p->pt);
    p->ow = net_window_out(net, "pool", s.w, kw, sw, pad, &p->pl);
    Layer *l = net_add_layer(net, kind == POOL_MAX ? &maxpool_ops : &avgpool_ops, &in, 1,
                             shape4(s.n, s.c, p->oh, p->ow), p);
    l->flops = (double)s.n * s.c * p->oh * p->ow * kh * kw;
    return l->out;
}
