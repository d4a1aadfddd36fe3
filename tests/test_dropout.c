/* test_dropout.c: dropout in inference (identity) and training (mask statistics, scaling, the
 * same mask in backward), against finite differences with a fixed generator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_death.h"
#include "layers/layers.h"
#include "testutil.h"

static Net *drop_net(int n, int c, int h, int w, float keep, uint64_t seed) {
    Net *net = net_new(n, c, h, w);
    dropout_create(net, 0, keep);
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed + 1);
    /* inputs away from zero so that a zero output always means a dropped element */
    size_t cnt = shape_count(net->node[0].shape);
    tu_fill_uniform(net->node[0].data, cnt, 0.5f, 2.0f, &r);
    for (size_t i = 0; i < cnt; i += 2) net->node[0].data[i] = -net->node[0].data[i];
    return net;
}

TEST(dropout_inference_is_identity) {
    Net *net = drop_net(2, 3, 4, 5, 0.5f, 1);
    CHECK(strcmp(net->layer[0].ops->type, "dropout") == 0);
    net->training = 0;
    size_t n = shape_count(net->node[0].shape);
    net->node[0].grad = calloc(n, sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK(memcmp(net->node[0].data, net->node[1].data, n * sizeof(float)) == 0);
    for (size_t i = 0; i < n; i++) net->node[1].grad[i] = (float)i;
    net->layer[0].ops->backward(&net->layer[0], net);
    int same = 1;
    for (size_t i = 0; i < n; i++) same &= net->node[0].grad[i] == (float)i;
    CHECK(same);
    net_free(net);
}

TEST(dropout_training_mask_statistics_and_scale) {
    const float keeps[] = {0.7f, 0.5f, 0.1f};
    for (int k = 0; k < 3; k++) {
        const float keep = keeps[k];
        Net *net = drop_net(4, 16, 40, 40, keep, 10 + k); /* 102400 elements */
        net->layer[0].ops->forward(&net->layer[0], net);
        size_t n = shape_count(net->node[0].shape), kept = 0;
        double maxd = 0;
        for (size_t i = 0; i < n; i++) {
            float x = net->node[0].data[i], y = net->node[1].data[i];
            if (y != 0) {
                kept++;
                maxd = fmax(maxd, fabs((double)y - (double)x / keep) / fabs((double)x / keep));
            }
        }
        double frac = (double)kept / (double)n, sd = sqrt(keep * (1 - keep) / (double)n);
        CHECK_MSG(fabs(frac - keep) < 5 * sd, "keep %g: kept fraction %g", keep, frac);
        CHECK_MSG(maxd < 1e-6, "keep %g: kept values off by %g relative", keep, maxd);
        /* the mean of the output stays close to the mean of the input */
        double sx = 0, sy = 0;
        for (size_t i = 0; i < n; i++) {
            sx += fabs(net->node[0].data[i]);
            sy += fabs(net->node[1].data[i]);
        }
        CHECK_REL(sy, sx, 0.03, 0);
        net_free(net);
    }
}

TEST(dropout_masks_differ_between_steps) {
    Net *net = drop_net(2, 8, 8, 8, 0.5f, 20);
    size_t n = shape_count(net->node[0].shape);
    float *first = malloc(n * sizeof *first);
    net->layer[0].ops->forward(&net->layer[0], net);
    memcpy(first, net->node[1].data, n * sizeof *first);
    net->layer[0].ops->forward(&net->layer[0], net);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += (first[i] == 0) != (net->node[1].data[i] == 0);
    /* two independent masks disagree on about half the elements */
    CHECK_MSG(differ > n / 4 && differ < 3 * n / 4, "%zu of %zu differ", differ, n);
    /* the same generator state gives the same mask */
    rng_seed(&net->rng, 77);
    net->layer[0].ops->forward(&net->layer[0], net);
    memcpy(first, net->node[1].data, n * sizeof *first);
    rng_seed(&net->rng, 77);
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK(memcmp(first, net->node[1].data, n * sizeof *first) == 0);
    free(first);
    net_free(net);
}

TEST(dropout_backward_uses_forward_mask) {
    const float keep = 0.6f;
    Net *net = drop_net(3, 5, 6, 6, keep, 30);
    size_t n = shape_count(net->node[0].shape);
    net->node[0].grad = calloc(n, sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    for (size_t i = 0; i < n; i++) {
        net->node[1].grad[i] = 1.0f + (float)(i % 7);
        net->node[0].grad[i] = 0.25f;
    }
    net->layer[0].ops->backward(&net->layer[0], net);
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double want = 0.25 + (net->node[1].data[i] != 0 ? (1.0 + (double)(i % 7)) / keep : 0.0);
        maxd = fmax(maxd, fabs(net->node[0].grad[i] - want));
    }
    CHECK_MSG(maxd < 1e-5, "max difference %g", maxd);
    net_free(net);
}

TEST(dropout_backward_matches_finite_differences) {
    Net *net = drop_net(2, 4, 5, 5, 0.75f, 40);
    GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 200, 1e-2, 9);
    CHECK_MSG(g.checked == 200 && g.max_rel_err < 2e-3, "max relative error %g", g.max_rel_err);
    net_free(net);
}

TEST(dropout_keep_one_is_identity_in_training) {
    Net *net = drop_net(2, 3, 3, 3, 1.0f, 50);
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK(memcmp(net->node[0].data, net->node[1].data, shape_count(net->node[0].shape) * sizeof(float)) == 0);
    net_free(net);
}

static void dropout_keep(void *arg) {
    Net *net = net_new(1, 2, 2, 2);
    dropout_create(net, 0, *(float *)arg);
}

TEST(dropout_rejects_bad_keep_prob) {
    const float bad[] = {0.0f, -0.5f, 1.5f, NAN};
    for (int k = 0; k < 4; k++) {
        char msg[512];
        float v = bad[k];
        int st = ld_run_child(dropout_keep, &v, msg, sizeof msg);
        CHECK_MSG(st > 0 && strstr(msg, "keep_prob"), "keep %g: status %d, message %s", (double)v, st, msg);
    }
}
