/* test_pool.c: max and average pooling against a naive reference (TensorFlow semantics),
 * backward against finite differences on inputs without ties. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "layers/layers.h"
#include "testutil.h"

typedef struct PoolCase {
    PoolKind kind;
    int n, c, h, w, kh, kw, sh, sw;
    Padding pad;
    int oh, ow; /* expected */
} PoolCase;

static const PoolCase pcases[] = {
    {POOL_MAX, 2, 3, 9, 9, 3, 3, 2, 2, PAD_VALID, 4, 4},  {POOL_MAX, 2, 3, 8, 8, 2, 2, 2, 2, PAD_VALID, 4, 4},
    {POOL_MAX, 1, 2, 7, 9, 3, 3, 2, 2, PAD_SAME, 4, 5},   {POOL_MAX, 2, 2, 6, 6, 3, 3, 1, 1, PAD_SAME, 6, 6},
    {POOL_MAX, 1, 3, 7, 7, 1, 1, 2, 2, PAD_VALID, 4, 4},  {POOL_AVG, 2, 3, 6, 6, 3, 3, 1, 1, PAD_SAME, 6, 6},
    {POOL_AVG, 2, 2, 9, 8, 3, 3, 2, 2, PAD_VALID, 4, 3},  {POOL_AVG, 1, 2, 7, 7, 2, 2, 2, 2, PAD_SAME, 4, 4},
    {POOL_MAX, 1, 2, 112, 112, 3, 3, 2, 2, PAD_SAME, 56, 56},
};

static void naive_pool(const PoolCase *pc, const float *x, int pt, int pl, double *out) {
    for (int n = 0; n < pc->n; n++)
        for (int c = 0; c < pc->c; c++)
            for (int oy = 0; oy < pc->oh; oy++)
                for (int ox = 0; ox < pc->ow; ox++) {
                    double best = -DBL_MAX, sum = 0;
                    int cnt = 0;
                    for (int i = 0; i < pc->kh; i++)
                        for (int j = 0; j < pc->kw; j++) {
                            int y = oy * pc->sh - pt + i, xx = ox * pc->sw - pl + j;
                            if (y < 0 || y >= pc->h || xx < 0 || xx >= pc->w) continue;
                            double v = x[((n * pc->c + c) * pc->h + y) * pc->w + xx];
                            if (v > best) best = v;
                            sum += v;
                            cnt++;
                        }
                    out[((n * pc->c + c) * pc->oh + oy) * pc->ow + ox] = pc->kind == POOL_MAX ? best : sum / cnt;
                }
}

/* Distinct values spaced 0.05 apart in random order: no ties, no kinks crossed by a 1e-2 step. */
static void fill_distinct(float *x, size_t n, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.05 * (double)i - 0.025 * (double)n);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_below(r, (uint32_t)(i + 1));
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

TEST(pool_forward_matches_naive_reference) {
    for (size_t k = 0; k < sizeof pcases / sizeof pcases[0]; k++) {
        const PoolCase *pc = &pcases[k];
        Net *net = net_new(pc->n, pc->c, pc->h, pc->w);
        int y = pool_create(net, 0, pc->kind, pc->kh, pc->kw, pc->sh, pc->sw, pc->pad);
        net_finalize(net, 1);
        Shape s = net_node(net, y)->shape;
        CHECK_MSG(s.h == pc->oh && s.w == pc->ow, "case %zu: %dx%d, want %dx%d", k, s.h, s.w, pc->oh, pc->ow);
        if (s.h != pc->oh || s.w != pc->ow) {
            net_free(net);
            continue;
        }
        Rng r;
        rng_seed(&r, k);
        tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -2, 2, &r);
        net->layer[0].ops->forward(&net->layer[0], net);
        int pt = 0, pl = 0;
        if (pc->pad == PAD_SAME) {
            int th = (pc->oh - 1) * pc->sh + pc->kh - pc->h, tw = (pc->ow - 1) * pc->sw + pc->kw - pc->w;
            pt = th > 0 ? th / 2 : 0;
            pl = tw > 0 ? tw / 2 : 0;
        }
        size_t no = shape_count(s);
        double *ref = malloc(no * sizeof *ref), maxd = 0;
        naive_pool(pc, net->node[0].data, pt, pl, ref);
        for (size_t i = 0; i < no; i++) maxd = fmax(maxd, fabs(ref[i] - net_node(net, y)->data[i]));
        CHECK_MSG(maxd < 1e-6, "case %zu: max difference %g", k, maxd);
        free(ref);
        net_free(net);
    }
}

TEST(pool_backward_matches_finite_differences) {
    for (size_t k = 0; k < sizeof pcases / sizeof pcases[0] - 1; k++) {
        const PoolCase *pc = &pcases[k];
        Net *net = net_new(pc->n, pc->c, pc->h, pc->w);
        pool_create(net, 0, pc->kind, pc->kh, pc->kw, pc->sh, pc->sw, pc->pad);
        net_finalize(net, 1);
        Rng r;
        rng_seed(&r, 50 + k);
        fill_distinct(net->node[0].data, shape_count(net->node[0].shape), &r);
        GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 200, 1e-2, 5 + k);
        CHECK_MSG(g.max_rel_err < 5e-3, "case %zu: max relative error %g", k, g.max_rel_err);
        net_free(net);
    }
}

TEST(pool_max_routes_gradient_to_first_maximum) {
    Net *net = net_new(1, 1, 2, 2);
    int y = pool_create(net, 0, POOL_MAX, 2, 2, 2, 2, PAD_VALID);
    net_finalize(net, 1);
    float v[4] = {1, 3, 3, 2};
    for (int i = 0; i < 4; i++) net->node[0].data[i] = v[i];
    net->node[0].grad = calloc(4, sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK(net_node(net, y)->data[0] == 3);
    net_node(net, y)->grad[0] = 1;
    net->layer[0].ops->backward(&net->layer[0], net);
    CHECK(net->node[0].grad[1] == 1 && net->node[0].grad[2] == 0);
    net_free(net);
}
