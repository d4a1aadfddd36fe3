/* train.c: see train.h. */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void on_grad_ready(void *ctx, size_t final_from) { gradsync_ready(ctx, final_from); }

void trainer_init(Trainer *t, Net *net, Dist *dist, const TrainerConfig *c) {
    memset(t, 0, sizeof *t);
    t->net = net;
    t->dist = dist;
    t->loss_scale = c->loss_scale > 0 ? c->loss_scale : 1.0;
    t->dynamic = c->dynamic_loss_scale;
    optim_init(&t->opt, &c->opt, net->params_total);
    dist_bcast(dist, net->params, net->params_total * sizeof(float));
    dist_bcast(dist, net->state, net->state_total * sizeof(float));
    double mb = c->bucket_mb > 0 ? c->bucket_mb : 25;
    t->sync = c->no_allreduce ? NULL : gradsync_new(dist, net->grads, net->params_total, (size_t)(mb * 1048576.0));
    if (dist->size > 1 && t->sync) {
        net->on_grad_ready = on_grad_ready;
        net->on_grad_ready_ctx = t->sync;
    }
}

void trainer_free(Trainer *t) {
    optim_free(&t->opt);
    gradsync_free(t->sync);
    if (t->net->on_grad_ready_ctx == t->sync) {
        t->net->on_grad_ready = NULL;
        t->net->on_grad_ready_ctx = NULL;
    }
}

static int all_finite(const float *g, size_t n) {
    int ok = 1;
#pragma omp parallel for reduction(& : ok) schedule(static)
    for (size_t i = 0; i < n; i++) ok &= isfinite(g[i]) ? 1 : 0;
    return ok;
}

double trainer_step(Trainer *t, const int32_t *labels, double lr) {
    Net *net = t->net;
    net->labels = labels;
    net->training = 1;
    net_forward(net);
    double l2 = t->opt.c.weight_decay != 0 ? optim_l2(net) : 0;
    double loss = net->loss + t->opt.c.weight_decay * l2;
    double t0 = now_seconds();
    if (t->sync) gradsync_begin(t->sync);
    net_backward_scaled(net, (float)t->loss_scale);
    double t1 = now_seconds();
    if (t->sync) gradsync_finish(t->sync);
    t->backward_seconds += t1 - t0;
    t->exposed_seconds += now_seconds() - t1;
    if (t->loss_scale != 1.0) {
        const float inv = (float)(1.0 / t->loss_scale);
        float *g = net->grads;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < net->params_total; i++) g[i] *= inv;
    }
    if (!all_finite(net->grads, net->params_total)) {
        /* identical on every rank: the averaged gradients are the same everywhere */
        t->skipped_steps++;
        t->good_steps = 0;
        if (t->dynamic && t->loss_scale > 1) t->loss_scale *= 0.5;
        return loss;
    }
    optim_step(&t->opt, net, lr);
    t->good_steps++;
    if (t->dynamic && t->good_steps % 2000 == 0 && t->loss_scale < 16777216.0) t->loss_scale *= 2;
    return loss;
}

void trainer_eval(Trainer *t, const int32_t *labels, int count, int *top1, int *top5) {
    Net *net = t->net;
    net->labels = labels;
    net->training = 0;
    net_forward(net);
    net->training = 1;
    /* count only the valid samples: the net's topk looks at the whole batch */
    const Node *nd = &net->node[net->logits];
    int c = (int)shape_sample(nd->shape), c1 = 0, c5 = 0;
    for (int i = 0; i < count; i++) {
        const float *row = nd->data + (size_t)i * (size_t)c;
        int lab = labels[i], greater = 0;
        float v = row[lab];
        for (int j = 0; j < c; j++)
            if (row[j] > v || (row[j] == v && j < lab)) greater++;
        c1 += greater < 1;
        c5 += greater < 5;
    }
    *top1 = c1;
    *top5 = c5;
}

void input_from_u8_nhwc(float *dst, const uint8_t *src, int n, int c, int h, int w) {
    const size_t hw = (size_t)h * (size_t)w;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * hw * (size_t)c;
        float *d = dst + (size_t)i * hw * (size_t)c;
        for (size_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++) d[(size_t)ch * hw + p] = (float)s[p * (size_t)c + (size_t)ch] * (1.0f / 127.5f) - 1.0f;
    }
}

void input_synthetic(float *dst, size_t count, Rng *r) {
    for (size_t i = 0; i < count; i++) dst[i] = (float)(0.1 * rng_truncated_normal(r)) * (1.0f / 127.5f) - 1.0f;
}

void labels_synthetic(int32_t *labels, int n, int num_classes, Rng *r) {
    uint32_t span = num_classes > 1 ? (uint32_t)(num_classes - 1) : 1;
    for (int i = 0; i < n; i++) labels[i] = (int32_t)rng_below(r, span);
}
