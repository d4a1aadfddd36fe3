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
 * sums each (one dependent chain of adds per element ran at a quarter of the memory's speed);
 * the same bits for any number of threads up to the final sum of the blocks. */
#define L2_BLOCK 4096
double optim_l2(const Net *net) {
    const float *w = net->params;
    const size_t n = net->params_total, nb = (n + L2_BLOCK - 1) / L2_BLOCK;
    double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        const float *p = w + b * L2_BLOCK;
        const size_t m = b + 1 < nb ? L2_BLOCK : n - b * L2_BLOCK;
        double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = 0;
        for (; i + 8 <= m; i += 8)
            for (int j = 0; j < 8; j++) a[j] += (double)p[i + j] * (double)p[i + j];
        for (; i < m; i++) a[0] += (double)p[i] * (double)p[i];
        s += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
    return 0.5 * s;
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

void optim_step(Optimizer *o, Net *net, double lr) {
    const float wd = (float)o->c.weight_decay;
    const float m = (float)o->c.momentum;
    const int nest = o->c.nesterov;
    if (o->c.larc_eta <= 0) {
        /* no per-tensor scale: one pass over the whole arena, split evenly among the threads
         * (per tensor, one thread would get alexnet's 38M-weight fc6 alone), in vector registers;
         * the same operations per element as below (the gradient arena is read, not written) */
        float *w = net->params, *v = o->velocity;
        const float *g = net->grads;
        /* branch-free: Nesterov w -= lr (g' + m v'), plain w -= lr (0 g' + 1 v') (g' is finite
         * here, so 0 g' adds nothing) */
        const float flr = (float)lr, cg = nest ? 1.0f : 0.0f, cv = nest ? m : 1.0f;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < net->params_total; i++) {
            const float gi = g[i] + wd * w[i];
            const float vi = m * v[i] + gi;
            v[i] = vi;
            w[i] -= flr * (cg * gi + cv * vi);
        }
        return;
    }
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
