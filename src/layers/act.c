/* act.c: elementwise activations, CPU reference backend. One layer type per function, so layer
 * names read "relu3", "elu0", ... The derivative is taken from the input (RELU, RELU6, ELU,
 * LRELU) or from the output (SIGMOID, TANH). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "priv.h"

/* below this many elements the loops stay on one thread */
#define ACT_PAR_MIN 32768

static void act_forward(Layer *l, Net *net) {
    const ActPriv *a = l->priv;
    const Node *in = net_node(net, l->in[0]);
    const float *x = in->data;
    float *y = net_node(net, l->out)->data;
    const long n = (long)shape_count(in->shape);
    const float alpha = a->alpha;
    switch (a->act) {
    case ACT_LINEAR:
        memcpy(y, x, (size_t)n * sizeof *y);
        break;
    case ACT_RELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
        break;
    case ACT_RELU6:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = x[i] > 0 ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
        break;
    case ACT_ELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : expm1f(x[i]);
        break;
    case ACT_SIGMOID:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) {
            /* written so that exp never overflows */
            float v = x[i];
            if (v >= 0) {
                y[i] = 1.0f / (1.0f + expf(-v));
            } else {
                float e = expf(v);
                y[i] = e / (1.0f + e);
            }
        }
        break;
    case ACT_TANH:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case ACT_LRELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) {
            float s = alpha * x[i];
            y[i] = s > x[i] ? s : x[i];
        }
        break;
    default:
        die("activation: unknown function %d", (int)a->act);
    }
}

static void act_backward(Layer *l, Net *net) {
    const ActPriv *a = l->priv;
    const Node *in = net_node(net, l->in[0]);
    if (!in->grad) return;
    const Node *out = net_node(net, l->out);
    const float *x = in->data, *y = out->data, *dy = out->grad;
    float *dx = in->grad;
    const long n = (long)shape_count(in->shape);
    const float alpha = a->alpha;
    switch (a->act) {
    case ACT_LINEAR:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += dy[i];
        break;
    case ACT_RELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++)
            if (x[i] > 0) dx[i] += dy[i];
        break;
    case ACT_RELU6:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++)
            if (x[i] > 0 && x[i] < 6.0f) dx[i] += dy[i];
        break;
    case ACT_ELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += x[i] > 0 ? dy[i] : dy[i] * (y[i] + 1.0f);
        break;
    case ACT_SIGMOID:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
        break;
    case ACT_TANH:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
        break;
    case ACT_LRELU:
#pragma omp parallel for schedule(static) if (n > ACT_PAR_MIN)
        for (long i = 0; i < n; i++) dx[i] += alpha * x[i] > x[i] ? alpha * dy[i] : dy[i];
        break;
    default:
        die("activation: unknown function %d", (int)a->act);
    }
}

static const LayerOps linear_ops = {"linear", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps relu_ops = {"relu", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps relu6_ops = {"relu6", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps elu_ops = {"elu", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps sigmoid_ops = {"sigmoid", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps tanh_ops = {"tanh", act_forward, act_backward, NULL, NULL, act_in_place_ok};
static const LayerOps lrelu_ops = {"lrelu", act_forward, act_backward, NULL, NULL, act_in_place_ok};

int act_is(const Layer *l) { return l->ops->forward == act_forward; }

int act_in_place_ok(const Layer *l) {
    const ActPriv *a = l->priv;
    return act_is(l) && (a->act != ACT_LRELU || a->alpha > 0);
}

int act_create(Net *net, int in, Act act, float alpha) {
    if (in < 0 || in >= net->nnode) die("activation: bad input handle %d", in);
    const LayerOps *ops;
    double per = 1; /* rough flops per element */
    switch (act) {
    case ACT_LINEAR: ops = &linear_ops; break;
    case ACT_RELU: ops = &relu_ops; break;
    case ACT_RELU6: ops = &relu6_ops; per = 2; break;
    case ACT_ELU: ops = &elu_ops; per = 4; break;
    case ACT_SIGMOID: ops = &sigmoid_ops; per = 4; break;
    case ACT_TANH: ops = &tanh_ops; per = 4; break;
    case ACT_LRELU:
        if (!isfinite(alpha)) die("lrelu: alpha %g is not finite", (double)alpha);
        ops = &lrelu_ops;
        per = 2;
        break;
    default: die("activation: unknown function %d", (int)act);
    }
    Shape s = net_node(net, in)->shape;
    ActPriv *a = xcalloc(1, sizeof *a);
    a->act = act;
    a->alpha = alpha;
    Layer *l = net_add_layer(net, ops, &in, 1, s, a);
    l->flops = per * (double)shape_count(s);
    return l->out;
}
