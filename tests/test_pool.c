/* test_pool.c: max and average pooling against a naive reference (TensorFlow semantics),
 * backward against finite differences on inputs without ties; the oneDNN plan's blocked max
 * pooling against the reference layer. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "onednn/blkpool.h"
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

/* ---- the blocked max pooling of the oneDNN plan (src/onednn/blkpool.c) ---- */

/* [n][c][h][w] -> [n][c / b][h][w][b] */
static void to_blocked(const float *x, float *xb, int n, int c, int hw, int b) {
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++)
                xb[(((size_t)i * (c / b) + ch / b) * hw + p) * b + ch % b] = x[((size_t)i * c + ch) * hw + p];
}

/* Every max pooling case of pcases (and googlenet's and resnet's shapes), in blocks of 8 and of
 * 16 channels, against the reference layer: the output and the positions bit for bit (the same
 * elements picked: the inputs are rounded to a few values, so windows hold ties, which both
 * sides must break alike), the input gradient bit for bit when written (the same sums in the same
 * order) and within 1 ulp-scale rounding (2e-7 relative) when added to what another consumer
 * wrote first (the reference adds each output's gradient to it in turn, blkpool.c their sum). */
TEST(pool_blocked_max_matches_reference_in_blocks_of_8_and_16) {
    static const PoolCase extra[] = {
        {POOL_MAX, 2, 32, 15, 15, 3, 3, 2, 2, PAD_SAME, 8, 8},  {POOL_MAX, 1, 16, 14, 14, 3, 3, 1, 1, PAD_SAME, 14, 14},
        {POOL_MAX, 2, 16, 10, 11, 5, 4, 3, 2, PAD_VALID, 2, 4}, {POOL_MAX, 1, 48, 5, 5, 2, 2, 1, 1, PAD_SAME, 5, 5},
    };
    PoolCase all[sizeof pcases / sizeof pcases[0] + sizeof extra / sizeof extra[0]];
    int nc = 0;
    for (size_t k = 0; k < sizeof pcases / sizeof pcases[0]; k++)
        if (pcases[k].kind == POOL_MAX && pcases[k].h < 100) all[nc++] = pcases[k];
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) all[nc++] = extra[k];
    int checked = 0, avx2 = 0;
    for (int k = 0; k < nc; k++)
        for (int b = 8; b <= 16; b += 8)
            for (int add = 0; add <= 1; add++) {
                PoolCase pc = all[k];
                pc.c = (pc.c + b - 1) / b * b; /* whole blocks */
                Net *net = net_new(pc.n, pc.c, pc.h, pc.w);
                int y = pool_create(net, 0, POOL_MAX, pc.kh, pc.kw, pc.sh, pc.sw, pc.pad);
                net_finalize(net, 1);
                Layer *l = &net->layer[0];
                const Pool *q = l->priv;
                Node *in = &net->node[0], *out = net_node(net, y);
                const size_t ni = shape_count(in->shape), no = shape_count(out->shape);
                const int ihw = pc.h * pc.w, ohw = out->shape.h * out->shape.w;
                Rng r;
                rng_seed(&r, 900 + (uint64_t)k);
                for (size_t i = 0; i < ni; i++) in->data[i] = (float)((int)rng_below(&r, 7) - 3) * 0.5f;
                tu_fill_uniform(out->grad, no, -1, 1, &r);
                float *dx0 = malloc(ni * sizeof(float));
                tu_fill_uniform(dx0, ni, -1, 1, &r);
                in->grad = calloc(ni, sizeof(float));
                if (add) memcpy(in->grad, dx0, ni * sizeof(float));
                l->ops->forward(l, net);
                l->ops->backward(l, net);
                float *xb = malloc(ni * sizeof(float)), *yb = malloc(no * sizeof(float)), *dyb = malloc(no * sizeof(float)),
                      *dxb = malloc(ni * sizeof(float)), *yr = malloc(no * sizeof(float)), *dyr = malloc(no * sizeof(float)),
                      *dxr = malloc(ni * sizeof(float));
                to_blocked(in->data, xb, pc.n, pc.c, ihw, b);
                to_blocked(out->grad, dyb, pc.n, pc.c, ohw, b);
                to_blocked(out->data, yr, pc.n, pc.c, ohw, b);
                to_blocked(in->grad, dxr, pc.n, pc.c, ihw, b);
                to_blocked(dx0, dxb, pc.n, pc.c, ihw, b);
                DnBlkPool g = {pc.n, pc.c / b, b, pc.h, pc.w, out->shape.h, out->shape.w, q->kh, q->kw, q->sh, q->sw,
                               q->pt, q->pl, malloc(no)};
                for (int simd = 0; simd < 2; simd++) {
                    /* SSE4.1's kernels, then AVX2's where the CPU has them */
                    if (!simd) {
                        dn_blkpool_avx2(0);
                    } else if (!dn_blkpool_avx2(1)) {
                        break;
                    } else {
                        avx2 = 1;
                        to_blocked(dx0, dxb, pc.n, pc.c, ihw, b);
                    }
                    dn_blkpool_forward(&g, xb, yb);
                    dn_blkpool_backward(&g, dyb, dxb, add);
                    size_t bad_y = 0, bad_pos = 0;
                    double dmax = 0, gmax = 1e-30;
                    for (size_t i = 0; i < no; i++) bad_y += yb[i] != yr[i];
                    /* the position the reference picked, as the window offset blkpool.c keeps */
                    for (int i = 0; i < pc.n; i++)
                        for (int ch = 0; ch < pc.c; ch++)
                            for (int p = 0; p < ohw; p++) {
                                int oy = p / out->shape.w, ox = p % out->shape.w;
                                int am = q->argmax[((size_t)i * pc.c + ch) * ohw + p];
                                int k2 = (am / pc.w - (oy * q->sh - q->pt)) * q->kw + (am % pc.w - (ox * q->sw - q->pl));
                                bad_pos += g.pos[(((size_t)i * (pc.c / b) + ch / b) * ohw + p) * b + ch % b] != k2;
                            }
                    for (size_t i = 0; i < ni; i++) {
                        dmax = fmax(dmax, fabs((double)dxb[i] - (double)dxr[i]));
                        gmax = fmax(gmax, fabs((double)dxr[i]));
                    }
                    const double tol = add ? 2e-7 : 0;
                    CHECK_MSG(bad_y == 0 && bad_pos == 0 && dmax / gmax <= tol,
                              "%dx%d/%dx%d on %dx%dx%d, blocks of %d%s, %s: %zu outputs and %zu positions differ; input "
                              "gradient relative difference %.3g (limit %.1g)",
                              pc.kh, pc.kw, pc.sh, pc.sw, pc.c, pc.h, pc.w, b, add ? ", added" : "", simd ? "AVX2" : "SSE4.1",
                              bad_y, bad_pos, dmax / gmax, tol);
                    checked++;
                    /* the next kernels must write every output and position */
                    for (size_t i = 0; i < no; i++) g.pos[i] = 0xff, yb[i] = NAN;
                }
                dn_blkpool_avx2(-1);
                free(g.pos);
                free(xb), free(yb), free(dyb), free(dxb), free(yr), free(dyr), free(dxr), free(dx0);
                net_free(net);
            }
    printf("    %d cases checked (windows, blocks of 8 and 16, input gradient written and added; SSE4.1's kernels%s)\n",
           checked, avx2 ? " and AVX2's" : ", this CPU has no AVX2");
}
