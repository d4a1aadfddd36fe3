/* test_conv.c: convolution forward against a direct 7-loop reference (double accumulation),
 * backward against finite differences, output sizes against TensorFlow's padding rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "testutil.h"

typedef struct ConvCase {
    int n, cin, h, w, cout, kh, kw, sh, sw;
    Padding pad;
    int bias;
} ConvCase;

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
    int y = conv_create(net, 0, cc->cout, cc->kh, cc->kw, cc->sh, cc->sw, cc->pad, cc->bias);
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
    double maxerr = 0;
    for (int n = 0; n < cc->n; n++)
        for (int co = 0; co < cc->cout; co++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double s = cc->bias ? net_param(net, 1)[co] : 0;
                    for (int ci = 0; ci < cc->cin; ci++)
                        for (int i = 0; i < cc->kh; i++)
                            for (int j = 0; j < cc->kw; j++) {
                                int yy = oy * cc->sh - pt + i, xx = ox * cc->sw - pl + j;
                                if (yy < 0 || yy >= cc->h || xx < 0 || xx >= cc->w) continue;
                                s += (double)W[((co * cc->cin + ci) * cc->kh + i) * cc->kw + j] *
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
    {2, 3, 9, 9, 4, 1, 1, 1, 1, PAD_SAME, 1},     {2, 5, 8, 7, 6, 3, 3, 1, 1, PAD_SAME, 0},
    {3, 4, 9, 10, 5, 3, 3, 2, 2, PAD_SAME, 1},    {2, 3, 10, 10, 4, 3, 3, 2, 2, PAD_VALID, 1},
    {2, 3, 11, 12, 7, 5, 5, 1, 1, PAD_SAME, 1},   {1, 3, 16, 16, 5, 7, 7, 2, 2, PAD_SAME_RESNET, 0},
    {1, 3, 16, 15, 5, 7, 7, 2, 2, PAD_SAME, 0},   {2, 6, 9, 9, 3, 1, 7, 1, 1, PAD_SAME, 1},
    {2, 6, 9, 9, 3, 7, 1, 1, 1, PAD_SAME, 1},     {1, 3, 27, 27, 4, 11, 11, 4, 4, PAD_VALID, 1},
    {2, 7, 13, 13, 9, 3, 3, 1, 1, PAD_SAME_RESNET, 0}, {2, 4, 8, 8, 8, 1, 1, 2, 2, PAD_SAME, 0},
    {2, 4, 7, 7, 3, 3, 3, 2, 2, PAD_SAME_RESNET, 1}, {1, 2, 5, 6, 3, 2, 2, 2, 2, PAD_SAME, 1},
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
        conv_create(net, 0, cc->cout, cc->kh, cc->kw, cc->sh, cc->sw, cc->pad, cc->bias);
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
