/* optim.c: see optim.h. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void optim_init(Optimizer *o, const OptimConfig *c, size_t nparams) {
    o->c = *c;
    o->n = nparams;
    o->velocity = xmalloc_aligned((nparams ? nparams : 1) * sizeof(float));
    memset(o->velocity, 0, nparams * sizeof(float));
}

void optim_free(Optimizer *o) {
    free(o->velocity);
    o->velocity = NULL;
}

/* The sum of squares in double, over blocks of L2_BLOCK elements with 8 independent partial
 * sums each (one dependent chain of adds per element ran at a quarter of the memory's speed), the
 * blocks' sums added in their order afterwards: the same bits for any number of threads, and the
 * same whether optim_l2 or the update (optim_step_l2) computes it. */
#define L2_BLOCK 4096
static size_t l2_blocks(size_t n) { return (n + L2_BLOCK - 1) / L2_BLOCK; }

static double block_sumsq(const float *p, size_t m) {
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= m; i += 8)
        for (int j = 0; j < 8; j++) a[j] += (double)p[i + j] * (double)p[i + j];
    for (; i < m; i++) a[0] += (double)p[i] * (double)p[i];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static double half_total(const double *s, size_t nb) {
    double t = 0;
    for (size_t b = 0; b < nb; b++) t += s[b];
    return 0.5 * t;
}

double optim_l2(const Net *net) {
    const float *w = net->params;
    const size_t n = net->params_total, nb = l2_blocks(n);
    double *s = xmalloc((nb ? nb : 1) * sizeof *s);
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) s[b] = block_sumsq(w + b * L2_BLOCK, b + 1 < nb ? L2_BLOCK : n - b * L2_BLOCK);
    const double r = half_total(s, nb);
    free(s);
    return r;
}

static void sumsq2(const float *a, const float *b, size_t n, double *sa, double *sb) {
    double x = 0, y = 0;
    for (size_t i = 0; i < n; i++) {
        x += (double)a[i] * (double)a[i];
        y += (double)b[i] * (double)b[i];
    }
    *sa = x;
    *sb = y;
}

void optim_step(Optimizer *o, Net *net, double lr) { optim_step_l2(o, net, lr, NULL); }

void optim_step_l2(Optimizer *o, Net *net, double lr, double *l2) {
    const float wd = (float)o->c.weight_decay;
    const float m = (float)o->c.momentum;
    const int nest = o->c.nesterov;
    if (o->c.larc_eta <= 0) {
        /* no per-tensor scale: one pass over the whole arena in blocks, split evenly among the
         * threads (per tensor, one thread would get alexnet's 38M-weight fc6 alone), in vector
         * registers; the same operations per element as below (the gradient arena is read, not
         * written). Each block's sum of squares is taken just before its update, from the cache:
         * the loss's weight-decay term without a pass of its own over the weights. */
        float *w = net->params, *v = o->velocity;
        const float *g = net->grads;
        const size_t n = net->params_total, nb = l2_blocks(n);
        double *s = l2 ? xmalloc((nb ? nb : 1) * sizeof *s) : NULL;
        /* branch-free: Nesterov w -= lr (g' + m v'), plain w -= lr (0 g' + 1 v') (g' is finite
         * here, so 0 g' adds nothing) */
        const float flr = (float)lr, cg = nest ? 1.0f : 0.0f, cv = nest ? m : 1.0f;
#pragma omp parallel for schedule(static)
        for (size_t b = 0; b < nb; b++) {
            const size_t lo = b * L2_BLOCK, hi = b + 1 < nb ? lo + L2_BLOCK : n;
            if (s) s[b] = block_sumsq(w + lo, hi - lo);
#pragma omp simd
            for (size_t i = lo; i < hi; i++) {
                const float gi = g[i] + wd * w[i];
                const float vi = m * v[i] + gi;
                v[i] = vi;
                w[i] -= flr * (cg * gi + cv * vi);
            }
        }
        if (s) {
            *l2 = half_total(s, nb);
            free(s);
        }
        return;
    }
    if (l2) *l2 = optim_l2(net);
#pragma omp parallel for schedule(dynamic, 1)
    for (int p = 0; p < net->nparam; p++) {
        const Param *pp = &net->param[p];
        float *w = net->params + pp->off, *g = net->grads + pp->off, *v = o->velocity + pp->off;
        size_t n = pp->count;
        if (wd != 0)
            for (size_t i = 0; i < n; i++) g[i] += wd * w[i];
        float scale = 1.0f;
        if (o->c.larc_eta > 0) {
            double ww, gg;
            sumsq2(w, g, n, &ww, &gg);
            double wn = sqrt(ww), gn = sqrt(gg), local;
            if (wn != 0 && gn != 0)
                local = o->c.larc_eta * wn / gn;
            else
                local = 1.0; /* nvcnn's larc_epsilon */
            if (!o->c.larc_scale) local = fmin(local / lr, 1.0);
            scale = (float)local;
        }
        const float flr = (float)lr;
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] * scale;
            float vi = m * v[i] + gi;
            v[i] = vi;
            w[i] -= nest ? flr * (gi + m * vi) : flr * vi;
        }
    }
}

double lr_at(const LrSchedule *s, long step) {
    if (s->warmup_steps > 0 && step < s->warmup_steps) return s->base * (double)(step + 1) / (double)s->warmup_steps;
    if (s->policy == SCHED_STEP) {
        double epoch = s->steps_per_epoch > 0 ? (double)step / (double)s->steps_per_epoch : 0;
        double k = s->decay_epochs > 0 ? floor(epoch / s->decay_epochs + 1e-9) : 0;
        return s->base * pow(s->decay_rate, k);
    }
    long start = s->warmup_steps > 0 ? s->warmup_steps : 0;
    long span = s->total_steps - start;
    if (span <= 0) return s->base;
    double t = (double)(step - start) / (double)span;
    if (t > 1) t = 1;
    if (t < 0) t = 0;
    return s->base * pow(1.0 - t, s->poly_power);
}
