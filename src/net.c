/* net.c: the net container, parameter arenas, the builder API and the traversal. */
#include "net.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


Net *net_new(int batch, int c, int h, int w) {
    if (batch <= 0 || c <= 0 || h <= 0 || w <= 0)
        die("net_new: bad input shape %dx%dx%dx%d", batch, c, h, w);
    Net *net = xcalloc(1, sizeof *net);
    net->batch = batch;
    net->logits = -1;
    net->training = 1;
    net->use_batch_norm = 1;
    net->width_div = 1;
    net->activation = ACT_RELU;
    net->lrelu_alpha = 0.1f;
    net->cap_node = 64;
    net->node = xcalloc((size_t)net->cap_node, sizeof *net->node);
    net->nnode = 1;
    net->node[0].shape = shape4(batch, c, h, w);
    net->node[0].producer = -1;
    net->input = 0;
    rng_seed(&net->rng, 1);
    return net;
}

void net_free(Net *net) {
    if (!net) return;
    if (net->runner) {
        net->runner->destroy(net->runner->ctx);
        free(net->runner);
    }
    for (int i = 0; i < net->nlayer; i++) {
        Layer *l = &net->layer[i];
        if (l->ops->destroy)
            l->ops->destroy(l);
        else
            free(l->priv);
        free(l->in);
        free(l->section);
    }
    free(net->pending_section);
    for (int i = 0; i < net->nnode; i++) {
        free(net->node[i].data);
        free(net->node[i].grad);
    }
    free(net->node);
    free(net->layer);
    free(net->param);
    free(net->buf);
    free(net->params);
    free(net->grads);
    free(net->state);
    free(net);
}

static const char *layer_name_for(Net *net, const char *type, int *idx) {
    for (int i = 0; i < net->ntypes; i++)
        if (strcmp(net->type_name[i], type) == 0) {
            *idx = net->type_count[i]++;
            return type;
        }
    if (net->ntypes == (int)(sizeof net->type_count / sizeof net->type_count[0]))
        die("too many layer types");
    net->type_name[net->ntypes] = type;
    net->type_count[net->ntypes] = 1;
    net->ntypes++;
    *idx = 0;
    return type;
}

Layer *net_add_layer(Net *net, const LayerOps *ops, const int *in, int nin, Shape out, void *priv) {
    if (net->finalized) die("net_add_layer after net_finalize");
    if (out.n <= 0 || out.c <= 0 || out.h <= 0 || out.w <= 0)
        die("layer %s: output shape %dx%dx%dx%d is empty (input too small for the model?)", ops->type,
            out.n, out.c, out.h, out.w);
    for (int i = 0; i < nin; i++)
        if (in[i] < 0 || in[i] >= net->nnode) die("layer %s: bad input handle %d", ops->type, in[i]);
    if (net->nnode == net->cap_node) {
        net->cap_node *= 2;
        net->node = xrealloc(net->node, (size_t)net->cap_node * sizeof *net->node);
    }
    if (net->nlayer == net->cap_layer) {
        net->cap_layer = net->cap_layer ? net->cap_layer * 2 : 64;
        net->layer = xrealloc(net->layer, (size_t)net->cap_layer * sizeof *net->layer);
    }
    int id = net->nnode++;
    Node *nd = &net->node[id];
    memset(nd, 0, sizeof *nd);
    nd->shape = out;
    nd->producer = net->nlayer;

    Layer *l = &net->layer[net->nlayer++];
    memset(l, 0, sizeof *l);
    l->ops = ops;
    int idx;
    layer_name_for(net, ops->type, &idx);
    snprintf(l->name, sizeof l->name, "%s%d", ops->type, idx);
    l->in = xmalloc((size_t)(nin > 0 ? nin : 1) * sizeof *l->in);
    memcpy(l->in, in, (size_t)nin * sizeof *l->in);
    l->nin = nin;
    l->out = id;
    l->param0 = net->nparam;
    l->buf0 = net->nbuf;
    l->priv = priv;
    l->section = net->pending_section;
    net->pending_section = NULL;
    return l;
}

int net_add_param(Net *net, const char *suffix, size_t count, InitKind init, int fan_in, int fan_out) {
    if (net->nlayer == 0) die("net_add_param without a layer");
    Layer *l = &net->layer[net->nlayer - 1];
    if (net->nparam == net->cap_param) {
        net->cap_param = net->cap_param ? net->cap_param * 2 : 64;
        net->param = xrealloc(net->param, (size_t)net->cap_param * sizeof *net->param);
    }
    Param *p = &net->param[net->nparam];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s/%s", l->name, suffix);
    p->off = net->params_total;
    p->count = count;
    p->init = init;
    p->fan_in = fan_in;
    p->fan_out = fan_out;
    p->layer = net->nlayer - 1;
    net->params_total += count;
    l->nparam++;
    return net->nparam++;
}

int net_add_buffer(Net *net, const char *suffix, size_t count, float init) {
    if (net->nlayer == 0) die("net_add_buffer without a layer");
    Layer *l = &net->layer[net->nlayer - 1];
    if (net->nbuf == net->cap_buf) {
        net->cap_buf = net->cap_buf ? net->cap_buf * 2 : 64;
        net->buf = xrealloc(net->buf, (size_t)net->cap_buf * sizeof *net->buf);
    }
    Buffer *b = &net->buf[net->nbuf];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s/%s", l->name, suffix);
    b->off = net->state_total;
    b->count = count;
    b->init = init;
    net->state_total += count;
    l->nbuf++;
    return net->nbuf++;
}

void net_init_params(Net *net, uint64_t seed) {
    for (int i = 0; i < net->nparam; i++) {
        Param *p = &net->param[i];
        float *w = net->params + p->off;
        Rng r;
        /* one stream per parameter: adding a layer does not change the others' values */
        rng_seed_stream(&r, seed, (uint64_t)i);
        switch (p->init) {
        case INIT_ZERO:
            memset(w, 0, p->count * sizeof *w);
            break;
        case INIT_ONE:
            for (size_t k = 0; k < p->count; k++) w[k] = 1.0f;
            break;
        case INIT_GLOROT_UNIFORM: {
            double limit = sqrt(6.0 / (double)(p->fan_in + p->fan_out));
            for (size_t k = 0; k < p->count; k++) w[k] = (float)((2.0 * rng_uniform(&r) - 1.0) * limit);
            break;
        }
        }
    }
    for (int i = 0; i < net->nbuf; i++) {
        Buffer *b = &net->buf[i];
        for (size_t k = 0; k < b->count; k++) net->state[b->off + k] = b->init;
    }
    rng_seed_stream(&net->rng, seed, 0xd0d0ULL);
}

static void finalize(Net *net, uint64_t seed, int lean);

void net_finalize(Net *net, uint64_t seed) { finalize(net, seed, 0); }

void net_finalize_for_device(Net *net, uint64_t seed) { finalize(net, seed, 1); }

void net_shape_error(Net *net, const char *fmt, ...) {
    if (net->shape_error[0]) return; /* the first is the cause */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(net->shape_error, sizeof net->shape_error, fmt, ap);
    va_end(ap);
}

int net_window_out(Net *net, const char *type, int in, int k, int s, Padding pad, int *pad_before) {
    int out = conv_out_size(in, k, s, pad, pad_before);
    if (out > 0) return out;
    net_shape_error(net, "layer %d (%s): a window of %d with stride %d does not fit its input of %d", net->nlayer, type, k, s, in);
    return 1;
}

static void finalize(Net *net, uint64_t seed, int lean) {
    if (net->finalized) return;
    if (net->shape_error[0]) die("%s", net->shape_error);
    net->params = xmalloc_aligned((net->params_total ? net->params_total : 1) * sizeof(float));
    net->grads = xmalloc_aligned((net->params_total ? net->params_total : 1) * sizeof(float));
    net->state = xmalloc_aligned((net->state_total ? net->state_total : 1) * sizeof(float));
    memset(net->grads, 0, net->params_total * sizeof(float));
    for (int i = 0; i < net->nnode; i++) {
        Node *nd = &net->node[i];
        size_t n = shape_count(nd->shape);
        if (lean && i != net->input && i != net->logits) continue;
        nd->data = xmalloc_aligned(n * sizeof(float));
        memset(nd->data, 0, n * sizeof(float));
        nd->grad = (i == net->input || lean) ? NULL : xmalloc_aligned(n * sizeof(float));
    }
    net_init_params(net, seed);
    net->finalized = 1;
}

int net_window_text(char *buf, size_t n, int kh, int kw, int sh, int sw, Padding pad) {
    static const char *const pads[] = {"SAME", "VALID", "SAME_RESNET"};
    const char *ps = (unsigned)pad < 3 ? pads[pad] : "?";
    if (sh == 1 && sw == 1) return snprintf(buf, n, "%dx%d %s", kh, kw, ps);
    if (sh == sw) return snprintf(buf, n, "%dx%d/%d %s", kh, kw, sh, ps);
    return snprintf(buf, n, "%dx%d/%dx%d %s", kh, kw, sh, sw, ps);
}

/* ---- Traversal ---- */
void net_forward(Net *net) {
    if (!net->finalized) die("net_forward before net_finalize");
    NetRunner *r = net->runner;
    for (int i = 0; i < net->nlayer; i++) {
        if (net->on_layer) net->on_layer(net->on_layer_ctx, i, 0, 0);
        if (r)
            r->forward(net, i, r->ctx);
        else
            net->layer[i].ops->forward(&net->layer[i], net);
        if (net->on_layer) net->on_layer(net->on_layer_ctx, i, 0, 1);
    }
}

/* Zeroes the parameter gradients that backward adds into: all of them, or, with a runner that
 * writes some layers' gradients outright, those of the other layers. */
static void zero_param_grads(Net *net) {
    const char *w = net->runner ? net->runner->writes_param_grads : NULL;
    if (!w) {
        float *g = net->grads;
#pragma omp parallel for schedule(static) if (net->params_total > 65536)
        for (size_t i = 0; i < net->params_total; i++) g[i] = 0.0f;
        return;
    }
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (w[i]) continue;
        for (int p = l->param0; p < l->param0 + l->nparam; p++)
            memset(net->grads + net->param[p].off, 0, net->param[p].count * sizeof(float));
    }
}

void net_backward_scaled(Net *net, float loss_scale) {
    if (net->on_layer) net->on_layer(net->on_layer_ctx, -1, 1, 0);
    zero_param_grads(net);
    if (net->runner)
        net->runner->zero_grads(net, net->runner->ctx);
    else
        for (int i = 0; i < net->nnode; i++)
            if (net->node[i].grad) memset(net->node[i].grad, 0, shape_count(net->node[i].shape) * sizeof(float));
    if (net->on_layer) net->on_layer(net->on_layer_ctx, -1, 1, 1);
    for (int i = net->nlayer - 1; i >= 0; i--) {
        Layer *l = &net->layer[i];
        if (net->on_layer) net->on_layer(net->on_layer_ctx, i, 1, 0);
        if (net->runner)
            net->runner->backward(net, i, net->runner->ctx);
        else
            l->ops->backward(l, net);
        if (loss_scale != 1.0f && i == net->nlayer - 1 && net->logits >= 0) {
            Node *lg = &net->node[net->logits];
            size_t n = shape_count(lg->shape);
            for (size_t k = 0; k < n; k++) lg->grad[k] *= loss_scale;
        }
        if (net->on_layer) net->on_layer(net->on_layer_ctx, i, 1, 1);
        if (l->nparam > 0 && net->on_grad_ready) {
            if (net->on_layer) net->on_layer(net->on_layer_ctx, -2, 1, 0);
            net->on_grad_ready(net->on_grad_ready_ctx, net->param[l->param0].off);
            if (net->on_layer) net->on_layer(net->on_layer_ctx, -2, 1, 1);
        }
    }
}

void net_backward(Net *net) { net_backward_scaled(net, 1.0f); }

int net_label_rank(const float *row, int c, int label) {
    const float v = row[label];
    int ahead = 0;
    for (int j = 0; j < c; j++) {
        if (!isfinite(row[j])) return c; /* no prediction (as TensorFlow's in_top_k): never correct */
        if (row[j] > v || (row[j] == v && j < label)) ahead++;
    }
    return ahead;
}

int net_topk_correct(const Net *net, int k) {
    if (net->logits < 0 || !net->labels) return 0;
    const Node *nd = &net->node[net->logits];
    int n = nd->shape.n, c = (int)shape_sample(nd->shape), correct = 0;
    for (int i = 0; i < n; i++) {
        int lab = net->labels[i];
        if (lab >= 0 && lab < c && net_label_rank(nd->data + (size_t)i * (size_t)c, c, lab) < k) correct++;
    }
    return correct;
}

size_t net_num_params(const Net *net) { return net->params_total; }

void net_act_in_place(const Net *net, int *alias) {
    const int nn = net->nnode;
    int *cons = xcalloc((size_t)nn, sizeof *cons), *prod = xmalloc((size_t)nn * sizeof *prod);
    for (int v = 0; v < nn; v++) prod[v] = alias[v] = -1;
    for (int i = 0; i < net->nlayer; i++) {
        prod[net->layer[i].out] = i;
        for (int k = 0; k < net->layer[i].nin; k++) cons[net->layer[i].in[k]]++;
    }
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (!l->ops->in_place || l->nin != 1) continue;
        int u = l->in[0];
        if (u != net->input && cons[u] == 1 && prod[u] >= 0 && !net->layer[prod[u]].ops->in_place && l->ops->in_place(l))
            alias[l->out] = u;
    }
    free(cons);
    free(prod);
}

int net_input_slot(const Net *net, int i) {
    int k = 0;
    for (int j = 0; j < i && j < net->nlayer; j++) k += net->layer[j].nin;
    return k;
}

int net_input_slots(const Net *net) { return net_input_slot(net, net->nlayer); }

void net_grad_schedule(const Net *net, int *first, int *last, char *zero, char *acc) {
    for (int v = 0; v < net->nnode; v++) {
        first[v] = last[v] = -1;
        zero[v] = 0;
    }
    char *written = xcalloc((size_t)net->nnode, 1);
    int slot = net_input_slots(net);
    for (int i = net->nlayer - 1; i >= 0; i--) {
        const Layer *l = &net->layer[i];
        const int t = net->nlayer - 1 - i;
        last[l->out] = t;
        if (first[l->out] < 0) { /* nothing consumed it: zeros, alive at this step only */
            first[l->out] = t;
            zero[l->out] = 1;
        }
        slot -= l->nin;
        for (int k = 0; k < l->nin; k++) {
            int v = l->in[k];
            acc[slot + k] = written[v];
            if (!written[v]) {
                written[v] = 1;
                if (v != net->input) first[v] = t;
            }
        }
    }
    free(written);
}

double net_forward_flops(const Net *net) {
    double f = 0;
    for (int i = 0; i < net->nlayer; i++) f += net->layer[i].flops;
    return f;
}

void net_print_summary(const Net *net, FILE *f) {
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (l->section) fprintf(f, "  -- %s\n", l->section);
        Shape s = net->node[l->out].shape;
        size_t np = 0;
        for (int p = l->param0; p < l->param0 + l->nparam; p++) np += net->param[p].count;
        char what[64] = "";
        if (l->ops->describe) l->ops->describe(l, what, sizeof what);
        /* the inputs, unless the layer reads just the previous layer's output */
        char from[256] = "";
        if (!(l->nin == 1 && i > 0 && l->in[0] == net->layer[i - 1].out)) {
            size_t off = 0;
            for (int k = 0; k < l->nin && off < sizeof from; k++) {
                int p = net->node[l->in[k]].producer;
                off += (size_t)snprintf(from + off, sizeof from - off, "%s%s", k ? ", " : "  <- ",
                                        p < 0 ? "input" : net->layer[p].name);
            }
        }
        fprintf(f, "  %-16s %-20s -> %5d x %4d x %4d   params %10zu   %8.3f GFLOPs%s\n", l->name, what, s.c, s.h, s.w,
                np, l->flops / 1e9, from);
    }
}

int conv_out_size(int in, int k, int s, Padding pad, int *pad_before) {
    int out, pb;
    if (k <= 0 || s <= 0) die("bad window %d / stride %d", k, s);
    switch (pad) {
    case PAD_VALID:
        out = (in - k) / s + 1;
        if (in < k) out = 0;
        pb = 0;
        break;
    case PAD_SAME: {
        out = (in + s - 1) / s;
        int total = (out - 1) * s + k - in;
        if (total < 0) total = 0;
        pb = total / 2;
        break;
    }
    case PAD_SAME_RESNET:
    default: {
        int total = k - 1;
        pb = total / 2;
        out = (in + total - k) / s + 1;
        break;
    }
    }
    if (pad_before) *pad_before = pb;
    return out;
}
