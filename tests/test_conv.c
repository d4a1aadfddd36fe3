/* test_conv.c: convolution forward against a direct 7-loop reference (double accumulation),
 * backward against finite differences, output sizes against TensorFlow's padding rules; grouped
 * convolutions against the same reference and against their groups run as separate
 * convolutions and concatenated; the oneDNN plan's own kernels (weight gradients, Winograd) against
 * the definition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_cases.h"
#include "harness.h"
#include "layer_death.h"
#include "layers/layers.h"
#include "onednn/blkconv.h"
#include "onednn/wino.h"
#include "testutil.h"

static int groups_of(const ConvCase *cc) { return cc->groups > 1 ? cc->groups : 1; }

static int make_conv(Net *net, const ConvCase *cc) {
    return conv_create_grouped(net, 0, cc->cout, cc->kh, cc->kw, cc->sh, cc->sw, cc->pad, cc->bias, groups_of(cc));
}

/* TensorFlow's padding, written out independently of conv_out_size. */
static void tf_pad(int in, int k, int s, Padding pad, int *out, int *before) {
    if (pad == PAD_VALID) {
        *out = (int)ceil((double)(in - k + 1) / s);
        *before = 0;
    } else if (pad == PAD_SAME) {
        *out = (int)ceil((double)in / s);
        int total = (*out - 1) * s + k - in;
        *before = total > 0 ? total / 2 : 0;
    } else { /* explicit pad k-1 split low-first, then VALID */
        *before = (k - 1) / 2;
        *out = (int)ceil((double)(in + k - 1 - k + 1) / s);
    }
}

static double max_rel_forward_error(const ConvCase *cc, uint64_t seed) {
    Net *net = net_new(cc->n, cc->cin, cc->h, cc->w);
    int y = make_conv(net, cc);
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed);
    Node *in = net_node(net, 0);
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    if (cc->bias) tu_fill_uniform(net_param(net, 1), (size_t)cc->cout, -0.5f, 0.5f, &r);
    net->layer[0].ops->forward(&net->layer[0], net);
    int oh, ow, pt, pl;
    tf_pad(cc->h, cc->kh, cc->sh, cc->pad, &oh, &pt);
    tf_pad(cc->w, cc->kw, cc->sw, cc->pad, &ow, &pl);
    Shape os = net_node(net, y)->shape;
    CHECK_MSG(os.n == cc->n && os.c == cc->cout && os.h == oh && os.w == ow, "shape %dx%dx%dx%d, want %dx%d", os.n,
              os.c, os.h, os.w, oh, ow);
    const float *W = net_param(net, 0), *x = in->data, *out = net_node(net, y)->data;
    /* grouped: output channel co reads the cg input channels of its group, weights [cout][cg][kh][kw] */
    const int G = groups_of(cc), cg = cc->cin / G, og = cc->cout / G;
    double maxerr = 0;
    for (int n = 0; n < cc->n; n++)
        for (int co = 0; co < cc->cout; co++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double s = cc->bias ? net_param(net, 1)[co] : 0;
                    for (int k = 0; k < cg; k++)
                        for (int i = 0; i < cc->kh; i++)
                            for (int j = 0; j < cc->kw; j++) {
                                int ci = co / og * cg + k;
                                int yy = oy * cc->sh - pt + i, xx = ox * cc->sw - pl + j;
                                if (yy < 0 || yy >= cc->h || xx < 0 || xx >= cc->w) continue;
                                s += (double)W[((co * cg + k) * cc->kh + i) * cc->kw + j] *
                                     x[((n * cc->cin + ci) * cc->h + yy) * cc->w + xx];
                            }
                    double got = out[((n * cc->cout + co) * oh + oy) * ow + ox];
                    double err = fabs(got - s) / fmax(fabs(s), 1.0);
                    if (err > maxerr) maxerr = err;
                }
    net_free(net);
    return maxerr;
}

static const ConvCase cases[] = {
    CONV_CASES_COMMON,
    /* grouped: ResNeXt's 3x3 (4 in, 4 out per group), strided with uneven padding, 1x1, one
     * channel per group (depthwise), unequal in/out per group, a 1x7 */
    {2, 16, 7, 7, 16, 3, 3, 1, 1, PAD_SAME, 0, 4},    {2, 6, 10, 10, 6, 3, 3, 2, 2, PAD_SAME, 1, 3},
    {2, 8, 6, 6, 4, 1, 1, 1, 1, PAD_SAME, 0, 2},      {2, 5, 7, 7, 5, 3, 3, 1, 1, PAD_SAME_RESNET, 1, 5},
    {1, 4, 8, 9, 12, 3, 3, 1, 1, PAD_VALID, 1, 2},    {2, 6, 9, 9, 3, 1, 7, 1, 1, PAD_SAME, 0, 3},
};

TEST(conv_forward_matches_direct_reference) {
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = max_rel_forward_error(&cases[i], 100 + i);
        CHECK_MSG(e < 1e-5, "case %zu: relative error %g", i, e);
        if (e > worst) worst = e;
    }
    printf("    conv forward: max relative error %.2e over %zu cases\n", worst, sizeof cases / sizeof cases[0]);
}

TEST(conv_backward_matches_finite_differences) {
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ConvCase *cc = &cases[i];
        Net *net = net_new(cc->n, cc->cin, cc->h, cc->w);
        make_conv(net, cc);
        net_finalize(net, 7 + i);
        Rng r;
        rng_seed(&r, 9 + i);
        tu_fill_uniform(net_node(net, 0)->data, shape_count(net_node(net, 0)->shape), -1, 1, &r);
        /* conv is linear in x and W: a large step has no truncation error and less float rounding noise */
        GradCheck g = tu_gradcheck_layer(net, 0, 5e-2, 40, 1e-2, 21 + i);
        CHECK_MSG(g.max_rel_err < 2e-3, "case %zu: max relative error %g over %d", i, g.max_rel_err, g.checked);
        if (g.max_rel_err > worst) worst = g.max_rel_err;
        net_free(net);
    }
    printf("    conv backward: max relative error %.2e\n", worst);
}

TEST(conv_chunked_batch_equals_per_sample) {
    /* a batch large enough to be cut into chunks must give what one sample at a time gives */
    const int N = 6;
    Net *big = net_new(N, 64, 40, 40), *one = net_new(1, 64, 40, 40);
    conv_create(big, 0, 16, 3, 3, 1, 1, PAD_SAME, 1);
    conv_create(one, 0, 16, 3, 3, 1, 1, PAD_SAME, 1);
    net_finalize(big, 3);
    net_finalize(one, 3);
    Rng r;
    rng_seed(&r, 4);
    tu_fill_uniform(big->node[0].data, shape_count(big->node[0].shape), -1, 1, &r);
    big->layer[0].ops->forward(&big->layer[0], big);
    size_t per_in = 64 * 40 * 40, per_out = 16 * 40 * 40;
    double maxd = 0;
    for (int n = 0; n < N; n++) {
        memcpy(one->node[0].data, big->node[0].data + n * per_in, per_in * sizeof(float));
        one->layer[0].ops->forward(&one->layer[0], one);
        for (size_t k = 0; k < per_out; k++)
            maxd = fmax(maxd, fabs(one->node[1].data[k] - big->node[1].data[n * per_out + k]));
    }
    CHECK_MSG(maxd < 1e-5, "max difference %g", maxd);
    net_free(big);
    net_free(one);
}

/* A grouped convolution is its groups run as separate convolutions on their channel slices and
 * concatenated: forward output, input gradient, weight and bias gradients, slice by slice. */
static void grouped_vs_branches(const ConvCase *cc, uint64_t seed, double *worst) {
    const int G = cc->groups, cg = cc->cin / G, og = cc->cout / G;
    Net *net = net_new(cc->n, cc->cin, cc->h, cc->w);
    int y = make_conv(net, cc);
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed + 1);
    Node *in = net_node(net, 0), *out = net_node(net, y);
    in->grad = xcalloc(shape_count(in->shape), sizeof(float));
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    if (cc->bias) tu_fill_uniform(net_param(net, 1), (size_t)cc->cout, -0.5f, 0.5f, &r);
    Layer *l = &net->layer[0];
    l->ops->forward(l, net);
    tu_fill_uniform(out->grad, shape_count(out->shape), -1, 1, &r);
    memset(net->grads, 0, net->params_total * sizeof(float));
    l->ops->backward(l, net);
    const size_t hw = (size_t)cc->h * cc->w, ohw = (size_t)out->shape.h * out->shape.w;
    const size_t wg = (size_t)og * cg * cc->kh * cc->kw; /* one group's weights */
    double maxd = 0, maxv = 1e-6;
#define CMP(a, b)                                                                                                      \
    do {                                                                                                               \
        maxd = fmax(maxd, fabs((double)(a) - (double)(b)));                                                           \
        maxv = fmax(maxv, fabs((double)(b)));                                                                          \
    } while (0)
    for (int k = 0; k < G; k++) {
        Net *b = net_new(cc->n, cg, cc->h, cc->w);
        int by = conv_create(b, 0, og, cc->kh, cc->kw, cc->sh, cc->sw, cc->pad, cc->bias);
        net_finalize(b, 1);
        Node *bin = net_node(b, 0), *bout = net_node(b, by);
        bin->grad = xcalloc(shape_count(bin->shape), sizeof(float));
        for (int n = 0; n < cc->n; n++) /* input channels [k*cg, (k+1)*cg) */
            memcpy(bin->data + (size_t)n * cg * hw, in->data + ((size_t)n * cc->cin + (size_t)k * cg) * hw,
                   (size_t)cg * hw * sizeof(float));
        memcpy(net_param(b, 0), net_param(net, 0) + k * wg, wg * sizeof(float));
        if (cc->bias) memcpy(net_param(b, 1), net_param(net, 1) + k * og, (size_t)og * sizeof(float));
        Layer *bl = &b->layer[0];
        bl->ops->forward(bl, b);
        for (int n = 0; n < cc->n; n++) /* output channels [k*og, (k+1)*og), and their gradient */
            for (size_t i = 0; i < (size_t)og * ohw; i++) {
                size_t at = ((size_t)n * cc->cout + (size_t)k * og) * ohw + i;
                CMP(out->data[at], bout->data[(size_t)n * og * ohw + i]);
                bout->grad[(size_t)n * og * ohw + i] = out->grad[at];
            }
        memset(b->grads, 0, b->params_total * sizeof(float));
        bl->ops->backward(bl, b);
        for (int n = 0; n < cc->n; n++)
            for (size_t i = 0; i < (size_t)cg * hw; i++)
                CMP(in->grad[((size_t)n * cc->cin + (size_t)k * cg) * hw + i], bin->grad[(size_t)n * cg * hw + i]);
        for (size_t i = 0; i < wg; i++) CMP(net_grad(net, 0)[k * wg + i], net_grad(b, 0)[i]);
        if (cc->bias)
            for (int i = 0; i < og; i++) CMP(net_grad(net, 1)[k * og + i], net_grad(b, 1)[i]);
        net_free(b);
    }
#undef CMP
    double rel = maxd / maxv;
    CHECK_MSG(rel < 1e-6, "groups %d: max difference %.3g (relative %.3g)", G, maxd, rel);
    *worst = fmax(*worst, rel);
    net_free(net);
}

TEST(conv_grouped_equals_its_groups_concatenated) {
    double worst = 0;
    int ncase = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].groups > 1) {
            grouped_vs_branches(&cases[i], 300 + i, &worst);
            ncase++;
        }
    /* ResNeXt's size: 32 groups of 4 channels */
    const ConvCase resnext = {2, 128, 6, 6, 128, 3, 3, 1, 1, PAD_SAME, 0, 32};
    grouped_vs_branches(&resnext, 77, &worst);
    CHECK(ncase == 6);
    printf("    grouped conv vs separate groups: max relative difference %.2e over %d cases\n", worst, ncase + 1);
}

/* A grouped convolution's weights hold cin/groups channels per output, initialised with one
 * group's Glorot fans; groups that do not divide the channels are refused. */
TEST(conv_grouped_parameters_and_bad_groups) {
    Net *net = net_new(1, 128, 4, 4);
    conv_create_grouped(net, 0, 256, 3, 3, 1, 1, PAD_SAME, 1, 32);
    CHECK(net->param[0].count == 256u * 4 * 9 && net->param[1].count == 256);
    CHECK(net->param[0].fan_in == 4 * 9 && net->param[0].fan_out == 8 * 9);
    CHECK_NEAR(net->layer[0].flops, 2.0 * 256 * 16 * 4 * 9, 0.5);
    net_free(net);
}

static void bad_groups(void *arg) {
    Net *net = net_new(1, 6, 4, 4);
    conv_create_grouped(net, 0, 8, 3, 3, 1, 1, PAD_SAME, 0, *(int *)arg);
}

TEST(conv_grouped_rejects_groups_not_dividing_channels) {
    int bad[3] = {4, 3, 0}; /* 4 does not divide 6; 3 does not divide 8; 0 */
    for (int i = 0; i < 3; i++) {
        char msg[512];
        int st = ld_run_child(bad_groups, &bad[i], msg, sizeof msg);
        CHECK_MSG(st > 0 && strstr(msg, "groups"), "groups %d: status %d, message %s", bad[i], st, msg);
    }
}

/* Checks a weight gradient dw[cout][cin][kh][kw] (and the bias gradient db[cout] unless NULL)
 * against the definition summed in double, element by element, relative to the sum of the terms'
 * magnitudes (at most bound; the bias gradient's 1e-6); x is blocked [n][cin / 8][h][w][8]
 * (x_blocked) or plain [n][cin][h][w], dy blocked [n][cout / 8][oh][ow][8]. k names the geometry in
 * messages; *worst keeps the largest error seen. */
/* x: [n][cin / xb][h][w][xb], or [n][cin][h][w] with xb 0; dy [n][cout / yb][oh][ow][yb] */
static void check_dw_definition(const DnBlkConv *g, size_t k, const float *x, int xb, const float *dy, int yb, const float *dw,
                                const float *db, double bound, double *worst) {
    const int hw = g->h * g->w, ohw = g->oh * g->ow;
    for (int o = 0; o < g->cout; o++) {
        if (db) {
            double sb = 0, ab = 0;
            for (int n = 0; n < g->n; n++)
                for (int p = 0; p < ohw; p++) {
                    double v = dy[(((size_t)n * (g->cout / yb) + o / yb) * ohw + p) * yb + o % yb];
                    sb += v;
                    ab += fabs(v);
                }
            double eb = fabs(sb - db[o]) / ab;
            CHECK_MSG(eb <= 1e-6, "geometry %zu: bias gradient %d: %.9g, defined %.9g", k, o, db[o], sb);
        }
        for (int i = 0; i < g->cin; i++)
            for (int a = 0; a < g->kh; a++)
                for (int b = 0; b < g->kw; b++) {
                    double s = 0, m = 1e-30;
                    for (int n = 0; n < g->n; n++)
                        for (int oh = 0; oh < g->oh; oh++)
                            for (int ow = 0; ow < g->ow; ow++) {
                                int ih = oh + a - g->pt, iw = ow + b - g->pl;
                                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
                                const size_t xi = xb ? (((size_t)n * (g->cin / xb) + i / xb) * hw + (size_t)ih * g->w + iw) * xb + i % xb
                                                     : ((size_t)n * g->cin + i) * hw + (size_t)ih * g->w + iw;
                                double v = (double)x[xi] * dy[(((size_t)n * (g->cout / yb) + o / yb) * ohw + (size_t)oh * g->ow + ow) * yb + o % yb];
                                s += v;
                                m += fabs(v);
                            }
                    float got = dw[(((size_t)o * g->cin + i) * g->kh + a) * g->kw + b];
                    double e = fabs(got - s) / m;
                    CHECK_MSG(e <= bound, "geometry %zu: dw[%d][%d][%d][%d] = %.9g, defined %.9g", k, o, i, a, b, got, s);
                    if (e > *worst) *worst = e;
                }
    }
}

/* ---- the weight gradient of the oneDNN plan's blocked convolutions (src/onednn/blkconv.c) ----
 * Against the definition summed in double, element by element, relative to the sum of the
 * terms' magnitudes: the loops add the same fp32 products in a fixed order with fused
 * multiply-adds, so the error does not depend on the CPU (1.8e-7 at most measured here, the
 * bound 1e-6). Geometries: 3 columns, 1 to 7 rows, SAME, VALID, uneven and over-wide
 * padding, an output wider than the input and narrower than the padding leaves, images whose
 * rows are shorter than the filter's reach, several images and channel blocks, images too large for
 * one pass to take them all. */
TEST(conv_blocked_weight_gradient_matches_definition) {
    static const DnBlkConv geo[] = {
        /* n cin cout  h   w  oh  ow kh kw pt pl */
        {2, 8, 16, 7, 8, 7, 8, 3, 3, 1, 1},   {2, 16, 8, 6, 6, 4, 4, 3, 3, 0, 0},  {1, 8, 8, 5, 5, 7, 7, 3, 3, 2, 2},
        {3, 16, 24, 9, 10, 7, 12, 5, 3, 1, 2}, {2, 8, 8, 4, 3, 4, 5, 1, 3, 0, 2},  {1, 24, 8, 3, 2, 5, 6, 7, 3, 3, 4},
        {2, 8, 8, 12, 2, 12, 1, 3, 3, 1, 0},   {1, 8, 16, 2, 9, 2, 9, 1, 3, 0, 1}, {4, 32, 32, 7, 7, 7, 7, 3, 3, 1, 1},
        /* images of which a pass over the rows takes 2 at a time (the last pass 1), and 1 */
        {3, 8, 16, 28, 28, 28, 28, 3, 3, 1, 1}, {3, 8, 8, 40, 40, 40, 40, 3, 3, 1, 1},
    };
    if (!dn_blkconv_dw_ok(&geo[0])) {
        th_skip("no AVX2 and FMA (this CPU, or ONEDNN_MAX_CPU_ISA below AVX2): the oneDNN plan keeps oneDNN's weight gradients");
        return;
    }
    double worst = 0;
    for (size_t k = 0; k < sizeof geo / sizeof geo[0]; k++) {
        const DnBlkConv *g = &geo[k];
        CHECK_MSG(dn_blkconv_dw_ok(g), "geometry %zu refused", k);
        const size_t nx = (size_t)g->n * g->cin * g->h * g->w, nd = (size_t)g->n * g->cout * g->oh * g->ow;
        const size_t nw = (size_t)g->cout * g->cin * g->kh * g->kw;
        float *x = malloc(nx * sizeof(float)), *dy = malloc(nd * sizeof(float)), *dw = malloc(nw * sizeof(float)),
              *db = malloc((size_t)g->cout * sizeof(float));
        Rng r;
        rng_seed(&r, 4100 + k);
        tu_fill_uniform(x, nx, -1, 1, &r); /* blocked: [n][cin / 8][h][w][8] */
        tu_fill_uniform(dy, nd, -1, 1, &r);
        for (size_t i = 0; i < nw; i++) dw[i] = NAN; /* every element must be written */
        dn_blkconv_dw(g, x, dy, dw, db);
        check_dw_definition(g, k, x, 8, dy, 8, dw, db, 1e-6, &worst);
        free(x);
        free(dy);
        free(dw);
        free(db);
    }
    printf("    %zu geometries: worst relative error %.2g (bound 1e-6)\n", sizeof geo / sizeof geo[0], worst);
    /* what it leaves to oneDNN */
    DnBlkConv no[5] = {geo[0], geo[0], geo[0], geo[0], geo[0]};
    no[0].kw = 5;
    no[1].cin = 12;
    no[2].cout = 20;
    no[3].kh = 9;
    no[4].kw = 1;
    for (int k = 0; k < 5; k++) CHECK_MSG(!dn_blkconv_dw_ok(&no[k]), "geometry refusal %d accepted", k);
}

/* ---- the weight gradient of a net's first convolution in the oneDNN plan (src/onednn/firstconv.c):
 * few input channels, the plain input [n][cin][h][w], the output gradient nChw8c ----
 * Against the definition summed in double, element by element, relative to the sum of the terms'
 * magnitudes, as above: fp32 products added in a fixed order with fused multiply-adds (up to 784
 * terms a sum here, the batch's parts added at the end); 1.3e-7 at most measured on this machine,
 * the bound 1e-6. Geometries: 1 to 4 input channels; 8, 16 and 32 output channels; filters 1x1 to
 * 7x7 and rectangular ones (3 to 4 filter rows a pass for 1-3 columns, 2 for 4-5, 1 for 6-7, and
 * the last pass shorter); SAME (padding 0 to 3) and VALID; sizes that are multiples of nothing;
 * batch 1 and 3 (with one output block: 3 parts of the batch, added at the end). */
TEST(conv_first_weight_gradient_matches_definition) {
    static const DnBlkConv geo[] = {
        /* n cin cout  h   w  oh  ow kh kw pt pl */
        {3, 3, 32, 28, 28, 28, 28, 5, 5, 2, 2}, /* lenet's first */
        {1, 1, 8, 13, 11, 13, 11, 5, 5, 2, 2},  {3, 1, 16, 9, 10, 9, 10, 3, 3, 1, 1}, {3, 3, 8, 7, 9, 7, 9, 7, 7, 3, 3},
        {1, 3, 16, 11, 7, 5, 1, 7, 7, 0, 0},   {3, 1, 32, 6, 5, 6, 5, 1, 1, 0, 0},   {1, 2, 24, 10, 9, 8, 7, 3, 3, 0, 0},
        {3, 4, 8, 5, 12, 5, 12, 3, 5, 1, 2},   {1, 3, 16, 9, 9, 5, 5, 5, 5, 0, 0},   {3, 1, 8, 17, 3, 17, 3, 1, 7, 0, 3},
        {1, 3, 32, 4, 15, 4, 15, 7, 1, 3, 0},  {3, 2, 16, 8, 8, 8, 8, 4, 4, 1, 1},   {1, 1, 8, 6, 6, 6, 6, 2, 6, 0, 2},
        {3, 3, 16, 3, 3, 3, 3, 5, 5, 2, 2}, /* rows and columns shorter than the filter */
    };
    if (!dn_firstconv_ok(&geo[0])) {
        th_skip("no AVX2 and FMA (this CPU, or ONEDNN_MAX_CPU_ISA below AVX2): the oneDNN plan keeps oneDNN's weight gradients");
        return;
    }
    double worst = 0;
    for (size_t k = 0; k < sizeof geo / sizeof geo[0]; k++) {
        const DnBlkConv *g = &geo[k];
        CHECK_MSG(dn_firstconv_ok(g), "geometry %zu refused", k);
        const size_t nx = (size_t)g->n * g->cin * g->h * g->w, nd = (size_t)g->n * g->cout * g->oh * g->ow;
        const size_t nw = (size_t)g->cout * g->cin * g->kh * g->kw;
        float *x = malloc(nx * sizeof(float)), *dy = malloc(nd * sizeof(float)), *dw = malloc(nw * sizeof(float)),
              *db = malloc((size_t)g->cout * sizeof(float));
        Rng r;
        rng_seed(&r, 4300 + k);
        tu_fill_uniform(x, nx, -1, 1, &r); /* plain: [n][cin][h][w] */
        tu_fill_uniform(dy, nd, -1, 1, &r); /* blocked: [n][cout / 8][oh][ow][8] */
        for (size_t i = 0; i < nw; i++) dw[i] = NAN; /* every element must be written */
        for (int o = 0; o < g->cout; o++) db[o] = NAN;
        dn_firstconv_dw(g, x, dy, dw, k % 2 ? db : NULL); /* half of them without a bias */
        check_dw_definition(g, k, x, 0, dy, 8, dw, k % 2 ? db : NULL, 1e-6, &worst);
        for (int o = 0; o < g->cout && !(k % 2); o++)
            CHECK_MSG(isnan(db[o]), "geometry %zu: bias gradient %d written without a bias", k, o);
        free(x);
        free(dy);
        free(dw);
        free(db);
    }
    printf("    %zu geometries: worst relative error %.2g (bound 1e-6)\n", sizeof geo / sizeof geo[0], worst);
    /* what it leaves to oneDNN (or to blkconv.c) */
    DnBlkConv no[6] = {geo[0], geo[0], geo[0], geo[0], geo[0], geo[0]};
    no[0].cin = 5;
    no[1].cout = 20;
    no[2].kh = 8;
    no[3].kw = 9;
    no[4].pt = 5; /* padding beyond the filter */
    no[5].pl = -1;
    for (int k = 0; k < 6; k++) CHECK_MSG(!dn_firstconv_ok(&no[k]), "geometry refusal %d accepted", k);
}

/* ---- the forward, backward data and weight gradient of 3x3 and 5x5 stride-1 convolutions by
 * Winograd's F(4x4, 3x3) and F(2x2, 5x5) on blocked tensors (src/onednn/wino.c) ----
 * Against the definition summed in double, element by element, relative to the sum of the terms'
 * magnitudes. The transforms scale the data by up to 100 (B: entries up to 5; A: up to 8) and
 * round G's sixths, twelfths and twenty-fourths, so the error is larger than a direct sum's
 * (1e-7 here). Measured on this machine, worst of the geometries below: 3x3 forward 3.1e-6,
 * backward data 2.4e-6, weight gradient 4e-6 (bounds 1e-5); 5x5 forward 2.2e-6, backward data
 * 3.2e-6 (bounds 1e-5), weight gradient 1.3e-5 (bound 4e-5: a corner tap's sum of few terms, which
 * the 5-tap G^T forms from large ones). The same operations in the same order on any AVX2 CPU:
 * the kernels are written in intrinsics with fused multiply-adds, and no sum depends on the
 * threads. Geometries: SAME with sizes that are multiples of nothing, VALID, padding k - 1 (an
 * output larger than the input) and uneven padding, a 1x1 image, 40 and 24 output channels (half
 * a block of 16 left over), more input channels than one panel (136 = 128 + 8), filters too large
 * to transform whole (512 x 232: the panels path, both ways), and more tiles than one pass takes
 * (4 x 112 x 112). */
static size_t blk_at(int b, int c, int h, int w, int n, int ch, int y, int x) {
    return ((((size_t)n * (c / b) + ch / b) * h + y) * w + x) * b + ch % b;
}

TEST(conv_winograd_matches_definition) {
    static const DnWino geo[] = {
        /* n cin cout  h    w   oh   ow pt pl  k blk */
        {2, 8, 16, 7, 8, 7, 8, 1, 1, 3, 8},       {1, 16, 8, 6, 6, 4, 4, 0, 0, 3, 8},      {1, 8, 8, 5, 5, 7, 7, 2, 2, 3, 8},
        {3, 24, 40, 9, 10, 9, 10, 1, 1, 3, 8},    {2, 8, 24, 1, 1, 1, 1, 1, 1, 3, 8},      {1, 136, 24, 9, 11, 9, 11, 1, 1, 3, 8},
        {1, 8, 8, 12, 2, 12, 1, 1, 0, 3, 8},      {1, 512, 232, 3, 5, 3, 5, 1, 1, 3, 8},   {4, 8, 16, 112, 112, 112, 112, 1, 1, 3, 8},
        /* 5x5: SAME (lenet's second convolution, reduced), VALID, padding 4, uneven padding, more
         * channels than a panel, filters too large to transform whole, more tiles than a pass */
        {2, 32, 64, 14, 14, 14, 14, 2, 2, 5, 8}, {1, 16, 8, 9, 8, 5, 4, 0, 0, 5, 8},     {1, 8, 8, 3, 4, 7, 8, 4, 4, 5, 8},
        {3, 24, 40, 7, 11, 6, 10, 1, 3, 5, 8},   {1, 136, 16, 5, 7, 5, 7, 2, 2, 5, 8},   {1, 512, 232, 2, 3, 2, 3, 2, 2, 5, 8},
        {2, 8, 16, 96, 96, 96, 96, 2, 2, 5, 8},
        /* nChw16c (oneDNN's layout on AVX-512): SAME, VALID with 48 output channels (three blocks of
         * 16, a block of 16 output channels of the products spanning two), 144 input channels (a
         * panel and one block), filters too large to transform whole, uneven padding in 5x5 */
        {2, 16, 32, 7, 8, 7, 8, 1, 1, 3, 16},     {1, 32, 48, 6, 6, 4, 4, 0, 0, 3, 16},    {1, 144, 16, 9, 11, 9, 11, 1, 1, 3, 16},
        {1, 512, 240, 3, 5, 3, 5, 1, 1, 3, 16},   {2, 32, 64, 14, 14, 14, 14, 2, 2, 5, 16}, {3, 16, 48, 7, 11, 6, 10, 1, 3, 5, 16},
    };
    if (!dn_wino_ok(&geo[0])) {
        th_skip("no AVX2 and FMA (this CPU, or ONEDNN_MAX_CPU_ISA below AVX2): the oneDNN plan keeps oneDNN's 3x3 convolutions");
        return;
    }
    double worst[2][3] = {{0, 0, 0}, {0, 0, 0}}; /* [3x3, 5x5][forward, backward data, weight gradient] */
    for (size_t k = 0; k < sizeof geo / sizeof geo[0]; k++) {
        const DnWino *g = &geo[k];
        CHECK_MSG(dn_wino_ok(g), "geometry %zu refused", k);
        const size_t nx = (size_t)g->n * g->cin * g->h * g->w, ny = (size_t)g->n * g->cout * g->oh * g->ow;
        const int kk = g->k * g->k;
        double *wk = worst[g->k == 5];
        const size_t nw = (size_t)g->cout * g->cin * kk, sf = dn_wino_scratch_floats(g, 2);
        float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float)), *w = malloc(nw * sizeof(float));
        float *b = malloc((size_t)g->cout * sizeof(float)), *dx = malloc(nx * sizeof(float)),
              *dy = malloc(ny * sizeof(float)), *scratch = malloc(sf * sizeof(float));
        Rng r;
        rng_seed(&r, 4500 + k);
        tu_fill_uniform(x, nx, -1, 1, &r);
        tu_fill_uniform(w, nw, -1, 1, &r);
        tu_fill_uniform(b, (size_t)g->cout, -1, 1, &r);
        tu_fill_uniform(dy, ny, -1, 1, &r);
        const int relu = k % 2, bias = k % 3 != 2;
        /* the weight gradient where the sums fit (not the 512 x 2xx filters: blkconv.c's) */
        CHECK_MSG(dn_wino_dw_ok(g) == (g->cin * g->cout < 100000), "geometry %zu: weight gradient taken or refused wrongly", k);
        const int has_dw = dn_wino_dw_ok(g);
        float *dw = malloc(nw * sizeof(float)), *db = malloc((size_t)g->cout * sizeof(float));
        /* with AVX2's kernels, then with AVX-512's (on this CPU if it has AVX-512, else their source
         * compiled for AVX2), then with AVX2's in passes over many tiles even where the filters are
         * small enough for 6 tiles at a time through all three (dn_wino_unfused): the same bits */
        float *out[3][4];
        for (int kv = 0; kv < 3; kv++) {
            const char *what = dn_wino_kernels(kv == 1 ? DN_WINO_WIDE : DN_WINO_YMM);
            dn_wino_unfused(kv == 2);
            if (k == 0) printf("    products by %s%s\n", what, kv == 2 ? ", passes over many tiles" : "");
            const size_t sz[4] = {ny, nx, nw, (size_t)g->cout};
            for (int o = 0; o < 4; o++) {
                out[kv][o] = malloc(sz[o] * sizeof(float));
                for (size_t i = 0; i < sz[o]; i++) out[kv][o][i] = NAN; /* every element must be written */
            }
            for (size_t i = 0; i < sf; i++) scratch[i] = NAN; /* nothing may be read before it is written */
            dn_wino_fwd(g, x, w, bias ? b : NULL, relu, out[kv][0], scratch, sf);
            for (size_t i = 0; i < sf; i++) scratch[i] = NAN;
            dn_wino_bwd_data(g, dy, w, out[kv][1], scratch, sf);
            if (has_dw) {
                for (size_t i = 0; i < sf; i++) scratch[i] = NAN;
                dn_wino_dw(g, x, dy, out[kv][2], bias ? out[kv][3] : NULL, scratch, sf);
            }
            if (kv > 0) {
                static const char *name[4] = {"forward", "backward data", "weight gradient", "bias gradient"};
                for (int o = 0; o < 4; o++) {
                    if (o >= 2 && (!has_dw || (o == 3 && !bias))) continue;
                    CHECK_MSG(memcmp(out[0][o], out[kv][o], sz[o] * sizeof(float)) == 0, "geometry %zu: %s differs %s", k,
                              name[o], kv == 1 ? "between the two kernels' variants" : "between 6 tiles at a time and passes");
                }
            }
        }
        dn_wino_kernels(DN_WINO_AUTO);
        dn_wino_unfused(0);
        memcpy(y, out[0][0], ny * sizeof(float));
        memcpy(dx, out[0][1], nx * sizeof(float));
        memcpy(dw, out[0][2], nw * sizeof(float));
        memcpy(db, out[0][3], (size_t)g->cout * sizeof(float));
        for (int kv = 0; kv < 3; kv++)
            for (int o = 0; o < 4; o++) free(out[kv][o]);
        if (has_dw) {
            const DnBlkConv bc = {g->n, g->cin, g->cout, g->h, g->w, g->oh, g->ow, g->k, g->k, g->pt, g->pl};
            check_dw_definition(&bc, k, x, g->blk, dy, g->blk, dw, bias ? db : NULL, g->k == 3 ? 1e-5 : 4e-5, &wk[2]);
        }
        free(dw);
        free(db);
        for (int n = 0; n < g->n; n++)
            for (int o = 0; o < g->cout; o++)
                for (int oy = 0; oy < g->oh; oy++)
                    for (int ox = 0; ox < g->ow; ox++) {
                        double s = bias ? b[o] : 0, m = fabs(s) + 1e-30;
                        for (int c = 0; c < g->cin; c++)
                            for (int a = 0; a < g->k; a++)
                                for (int e = 0; e < g->k; e++) {
                                    const int iy = oy + a - g->pt, ix = ox + e - g->pl;
                                    if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                                    const double v = (double)x[blk_at(g->blk, g->cin, g->h, g->w, n, c, iy, ix)] *
                                                     w[((size_t)o * g->cin + c) * kk + a * g->k + e];
                                    s += v;
                                    m += fabs(v);
                                }
                        if (relu && s < 0) s = 0;
                        const float got = y[blk_at(g->blk, g->cout, g->oh, g->ow, n, o, oy, ox)];
                        const double err = fabs(got - s) / m;
                        CHECK_MSG(err <= 1e-5, "geometry %zu: y[%d][%d][%d][%d] = %.9g, defined %.9g", k, n, o, oy, ox, got, s);
                        if (err > wk[0]) wk[0] = err;
                    }
        for (int n = 0; n < g->n; n++)
            for (int c = 0; c < g->cin; c++)
                for (int iy = 0; iy < g->h; iy++)
                    for (int ix = 0; ix < g->w; ix++) {
                        double s = 0, m = 1e-30;
                        for (int o = 0; o < g->cout; o++)
                            for (int a = 0; a < g->k; a++)
                                for (int e = 0; e < g->k; e++) {
                                    const int oy = iy + g->pt - a, ox = ix + g->pl - e;
                                    if (oy < 0 || oy >= g->oh || ox < 0 || ox >= g->ow) continue;
                                    const double v = (double)dy[blk_at(g->blk, g->cout, g->oh, g->ow, n, o, oy, ox)] *
                                                     w[((size_t)o * g->cin + c) * kk + a * g->k + e];
                                    s += v;
                                    m += fabs(v);
                                }
                        const float got = dx[blk_at(g->blk, g->cin, g->h, g->w, n, c, iy, ix)];
                        const double err = fabs(got - s) / m;
                        CHECK_MSG(err <= 1e-5, "geometry %zu: dx[%d][%d][%d][%d] = %.9g, defined %.9g", k, n, c, iy, ix, got, s);
                        if (err > wk[1]) wk[1] = err;
                    }
        free(x);
        free(y);
        free(w);
        free(b);
        free(dx);
        free(dy);
        free(scratch);
    }
    for (int f = 0; f < 2; f++)
        printf("    %s: worst relative error forward %.2g, backward data %.2g, weight gradient %.2g (bounds 1e-5, 1e-5, %s)\n",
               f ? "5x5" : "3x3", worst[f][0], worst[f][1], worst[f][2], f ? "4e-5" : "1e-5");
    /* what it leaves to oneDNN */
    DnWino no[10] = {geo[0], geo[0], geo[0], geo[0], geo[0], geo[0], geo[9], geo[16], geo[16], geo[0]};
    no[0].cin = 12;
    no[1].cout = 20;
    no[2].pt = 3;
    no[3].pl = -1;
    no[4].n = 0;
    no[5].k = 7;
    no[6].pl = 5;
    no[7].cin = 24; /* nChw16c with a block half full: oneDNN's padding is not wino.c's */
    no[8].cout = 40;
    no[9].blk = 4;
    for (int k = 0; k < 10; k++) CHECK_MSG(!dn_wino_ok(&no[k]), "geometry refusal %d accepted", k);
}
