/* test_bn.c: batch normalisation against a plain double-precision reference (training and
 * inference), the running-average updates, and backward against finite differences. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "testutil.h"

/* Per-channel batch statistics of x [n][c][hw]: mean and biased variance, in double. */
static void ref_stats(const float *x, int n, int c, int hw, double *mean, double *var) {
    for (int ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < hw; k++) s += x[((size_t)i * c + ch) * hw + k];
        double m = s / ((double)n * hw);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < hw; k++) {
                double d = x[((size_t)i * c + ch) * hw + k] - m;
                ss += d * d;
            }
        mean[ch] = m;
        var[ch] = ss / ((double)n * hw);
    }
}

static double ref_norm_maxdiff(const float *x, const float *y, int n, int c, int hw, const double *mean,
                               const double *var, const float *gamma, const float *beta) {
    double maxd = 0;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int k = 0; k < hw; k++) {
                size_t idx = ((size_t)i * c + ch) * hw + k;
                double r = gamma[ch] * (x[idx] - mean[ch]) / sqrt(var[ch] + 1e-4) + beta[ch];
                maxd = fmax(maxd, fabs(r - y[idx]));
            }
    return maxd;
}

static Net *bn_net(int n, int c, int h, int w, uint64_t seed) {
    Net *net = net_new(n, c, h, w);
    bn_create(net, 0);
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed * 7 + 1);
    tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -1.5f, 2.5f, &r);
    tu_fill_uniform(net_param(net, 0), (size_t)c, 0.5f, 1.5f, &r); /* gamma */
    tu_fill_uniform(net_param(net, 1), (size_t)c, -0.5f, 0.5f, &r); /* beta */
    return net;
}

TEST(bn_create_params_and_buffers) {
    Net *net = net_new(2, 3, 4, 4);
    int y = bn_create(net, 0);
    net_finalize(net, 1);
    Layer *l = &net->layer[0];
    CHECK(strcmp(l->ops->type, "bn") == 0);
    CHECK(shape_eq(net_node(net, y)->shape, net->node[0].shape));
    CHECK(l->nparam == 2 && l->nbuf == 2);
    CHECK(strcmp(net->param[0].name, "bn0/gamma") == 0 && strcmp(net->param[1].name, "bn0/beta") == 0);
    CHECK(strcmp(net->buf[0].name, "bn0/moving_mean") == 0 && strcmp(net->buf[1].name, "bn0/moving_variance") == 0);
    for (int ch = 0; ch < 3; ch++) {
        CHECK(net_param(net, 0)[ch] == 1.0f && net_param(net, 1)[ch] == 0.0f);
        CHECK(net_buffer(net, 0)[ch] == 0.0f && net_buffer(net, 1)[ch] == 1.0f);
    }
    CHECK(l->flops > 0);
    net_free(net);
}

TEST(bn_forward_training_matches_reference) {
    const int dims[][4] = {{4, 3, 5, 5}, {2, 5, 1, 7}, {6, 4, 1, 1}};
    for (int d = 0; d < 3; d++) {
        int n = dims[d][0], c = dims[d][1], hw = dims[d][2] * dims[d][3];
        Net *net = bn_net(n, c, dims[d][2], dims[d][3], 10 + d);
        net->training = 1;
        net->layer[0].ops->forward(&net->layer[0], net);
        double mean[8], var[8];
        ref_stats(net->node[0].data, n, c, hw, mean, var);
        double maxd = ref_norm_maxdiff(net->node[0].data, net->node[1].data, n, c, hw, mean, var, net_param(net, 0),
                                       net_param(net, 1));
        CHECK_MSG(maxd < 2e-5, "case %d: max difference %g", d, maxd);
        net_free(net);
    }
}

TEST(bn_forward_inference_uses_moving_statistics) {
    const int n = 3, c = 4, h = 3, w = 2, hw = h * w;
    Net *net = bn_net(n, c, h, w, 21);
    Rng r;
    rng_seed(&r, 99);
    float *mm = net_buffer(net, 0), *mv = net_buffer(net, 1);
    tu_fill_uniform(mm, c, -0.5f, 0.5f, &r);
    tu_fill_uniform(mv, c, 0.2f, 2.0f, &r);
    float mm0[4], mv0[4];
    memcpy(mm0, mm, sizeof mm0);
    memcpy(mv0, mv, sizeof mv0);
    net->training = 0;
    net->layer[0].ops->forward(&net->layer[0], net);
    double mean[4], var[4];
    for (int ch = 0; ch < c; ch++) {
        mean[ch] = mm0[ch];
        var[ch] = mv0[ch];
    }
    double maxd =
        ref_norm_maxdiff(net->node[0].data, net->node[1].data, n, c, hw, mean, var, net_param(net, 0), net_param(net, 1));
    CHECK_MSG(maxd < 2e-5, "inference: max difference %g", maxd);
    CHECK(memcmp(mm, mm0, sizeof mm0) == 0 && memcmp(mv, mv0, sizeof mv0) == 0);

    /* training mode on the same data gives the batch-statistics result instead */
    float *inf = malloc((size_t)n * c * hw * sizeof *inf);
    memcpy(inf, net->node[1].data, (size_t)n * c * hw * sizeof *inf);
    net->training = 1;
    net->layer[0].ops->forward(&net->layer[0], net);
    ref_stats(net->node[0].data, n, c, hw, mean, var);
    maxd = ref_norm_maxdiff(net->node[0].data, net->node[1].data, n, c, hw, mean, var, net_param(net, 0),
                            net_param(net, 1));
    CHECK_MSG(maxd < 2e-5, "training: max difference %g", maxd);
    double diff = 0;
    for (int i = 0; i < n * c * hw; i++) diff = fmax(diff, fabs(inf[i] - net->node[1].data[i]));
    CHECK_MSG(diff > 0.05, "training and inference outputs agree (%g)", diff);
    free(inf);
    net_free(net);
}

TEST(bn_running_averages_after_two_forwards) {
    const int n = 4, c = 3, h = 2, w = 3, hw = h * w;
    const double m = (double)n * hw;
    Net *net = bn_net(n, c, h, w, 31);
    double emm[3] = {0, 0, 0}, emv[3] = {1, 1, 1};
    Rng r;
    rng_seed(&r, 5);
    for (int step = 0; step < 2; step++) {
        tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -1.0f + step, 3.0f + 2 * step, &r);
        double mean[3], var[3];
        ref_stats(net->node[0].data, n, c, hw, mean, var);
        for (int ch = 0; ch < c; ch++) {
            emm[ch] = 0.9 * emm[ch] + 0.1 * mean[ch];
            emv[ch] = 0.9 * emv[ch] + 0.1 * var[ch] * m / (m - 1);
        }
        net->layer[0].ops->forward(&net->layer[0], net);
    }
    for (int ch = 0; ch < c; ch++) {
        CHECK_REL(net_buffer(net, 0)[ch], emm[ch], 1e-5, 1e-6);
        CHECK_REL(net_buffer(net, 1)[ch], emv[ch], 1e-5, 1e-6);
    }
    /* inference forwards leave the averages alone */
    net->training = 0;
    net->layer[0].ops->forward(&net->layer[0], net);
    for (int ch = 0; ch < c; ch++) CHECK_REL(net_buffer(net, 0)[ch], emm[ch], 1e-5, 1e-6);
    net_free(net);
}

static void bn_gradcheck(int n, int c, int h, int w, int training, uint64_t seed, double *worst) {
    Net *net = bn_net(n, c, h, w, seed);
    net->training = training;
    if (!training) {
        Rng r;
        rng_seed(&r, seed + 3);
        tu_fill_uniform(net_buffer(net, 0), (size_t)c, -0.3f, 0.3f, &r);
        tu_fill_uniform(net_buffer(net, 1), (size_t)c, 0.5f, 1.5f, &r);
    }
    GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 300, 1e-2, seed);
    CHECK_MSG(g.checked > 0 && g.max_rel_err < 1e-2, "%dx%dx%dx%d training %d: max relative error %g (%d checked)", n,
              c, h, w, training, g.max_rel_err, g.checked);
    if (g.max_rel_err > *worst) *worst = g.max_rel_err;
    net_free(net);
}

TEST(bn_backward_training_4d_matches_finite_differences) {
    double worst = 0;
    bn_gradcheck(4, 3, 4, 5, 1, 41, &worst);
    bn_gradcheck(4, 2, 3, 3, 1, 42, &worst);
    printf("    bn 4-D training: max relative error %.3g\n", worst);
}

TEST(bn_backward_training_2d_matches_finite_differences) {
    double worst = 0;
    bn_gradcheck(4, 6, 1, 1, 1, 51, &worst);
    printf("    bn 2-D training: max relative error %.3g\n", worst);
}

TEST(bn_backward_inference_matches_finite_differences) {
    double worst = 0;
    bn_gradcheck(4, 3, 3, 4, 0, 61, &worst);
    bn_gradcheck(4, 5, 1, 1, 0, 62, &worst);
    printf("    bn inference: max relative error %.3g\n", worst);
}

TEST(bn_backward_accumulates) {
    Net *net = bn_net(4, 2, 2, 2, 71);
    net->node[0].grad = calloc(shape_count(net->node[0].shape), sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    size_t nx = shape_count(net->node[0].shape);
    Rng r;
    rng_seed(&r, 3);
    tu_fill_uniform(net->node[1].grad, nx, -1, 1, &r);
    memset(net->grads, 0, net->params_total * sizeof(float));
    net->layer[0].ops->backward(&net->layer[0], net);
    float *once = malloc(nx * sizeof *once), dg0 = net_grad(net, 0)[0], db0 = net_grad(net, 1)[0];
    memcpy(once, net->node[0].grad, nx * sizeof *once);
    net->layer[0].ops->backward(&net->layer[0], net);
    double maxd = 0;
    for (size_t i = 0; i < nx; i++) maxd = fmax(maxd, fabs(net->node[0].grad[i] - 2 * once[i]));
    CHECK(maxd < 1e-5);
    CHECK_NEAR(net_grad(net, 0)[0], 2 * dg0, 1e-5);
    CHECK_NEAR(net_grad(net, 1)[0], 2 * db0, 1e-5);
    free(once);
    net_free(net);
}
