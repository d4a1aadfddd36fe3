/* test_concat.c: channel concatenation and elementwise (weighted) add: forward against index arithmetic,
 * backward against finite differences, repeated inputs, shape checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_death.h"
#include "layers/layers.h"
#include "testutil.h"

/* Fills every node of a net with random values: the layer under test reads nodes made by other
 * layers (concatenations of the input with itself), whose data are set directly. */
static void fill_nodes(Net *net, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < net->nnode; i++)
        tu_fill_uniform(net->node[i].data, shape_count(net->node[i].shape), -1, 1, &r);
}

TEST(concat_three_inputs_forward_backward) {
    const int n = 3, h = 4, w = 5, hw = h * w;
    Net *net = net_new(n, 1, h, w);
    const int in0 = 0;
    int two[2] = {in0, in0}, three[3] = {in0, in0, in0};
    int b2 = concat_create(net, two, 2);   /* 2 channels */
    int b3 = concat_create(net, three, 3); /* 3 channels */
    int ins[3] = {b2, b3, in0};
    int y = concat_create(net, ins, 3);
    net_finalize(net, 1);
    CHECK(strcmp(net->layer[2].ops->type, "concat") == 0 && strcmp(net->layer[2].name, "concat2") == 0);
    Shape s = net_node(net, y)->shape;
    CHECK(shape_eq(s, shape4(n, 6, h, w)));
    fill_nodes(net, 3);
    Layer *l = &net->layer[2];
    l->ops->forward(l, net);
    const int cs[3] = {2, 3, 1}, offs[3] = {0, 2, 5};
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        const float *x = net_node(net, ins[k])->data;
        for (int i = 0; i < n; i++)
            for (int ch = 0; ch < cs[k]; ch++)
                for (int p = 0; p < hw; p++)
                    bad += net_node(net, y)->data[((size_t)i * 6 + offs[k] + ch) * hw + p] !=
                           x[((size_t)i * cs[k] + ch) * hw + p];
    }
    CHECK_MSG(bad == 0, "%d misplaced elements", bad);
    /* every element of the three inputs (120 + 180 + 60) */
    GradCheck g = tu_gradcheck_layer(net, 2, 1e-2, 200, 1e-2, 4);
    CHECK_MSG(g.checked == 120 + 180 + 60 && g.max_rel_err < 1e-3, "max relative error %g (%d checked)",
              g.max_rel_err, g.checked);
    net_free(net);
}

TEST(concat_repeated_input_gets_both_gradients) {
    const int n = 2, c = 2, hw = 6;
    Net *net = net_new(n, c, 2, 3);
    int ins[3] = {0, 0, 0};
    int y = concat_create(net, ins, 3);
    net_finalize(net, 1);
    net->node[0].grad = calloc((size_t)n * c * hw, sizeof(float));
    fill_nodes(net, 5);
    net->layer[0].ops->forward(&net->layer[0], net);
    Rng r;
    rng_seed(&r, 6);
    tu_fill_uniform(net_node(net, y)->grad, shape_count(net_node(net, y)->shape), -1, 1, &r);
    net->layer[0].ops->backward(&net->layer[0], net);
    double maxd = 0;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++) {
                double s = 0;
                for (int k = 0; k < 3; k++) s += net_node(net, y)->grad[((size_t)i * 6 + k * c + ch) * hw + p];
                maxd = fmax(maxd, fabs(s - net->node[0].grad[((size_t)i * c + ch) * hw + p]));
            }
    CHECK_MSG(maxd < 1e-6, "max difference %g", maxd);
    net_free(net);
}

static void concat_mismatch(void *arg) {
    (void)arg;
    Net *net = net_new(2, 3, 8, 8);
    int p = spatial_avg_create(net, 0);
    int ins[2] = {0, p};
    concat_create(net, ins, 2);
}

TEST(concat_rejects_mismatched_spatial_size) {
    char msg[512];
    int st = ld_run_child(concat_mismatch, NULL, msg, sizeof msg);
    CHECK_MSG(st > 0 && strstr(msg, "concat"), "status %d, message %s", st, msg);
}

TEST(add_forward_backward) {
    const int n = 2, c = 3, h = 4, w = 4;
    Net *net = net_new(n, c, h, w);
    int one = 0;
    int a = concat_create(net, &one, 1);
    int b = concat_create(net, &one, 1);
    int y = add_create(net, a, b);
    net_finalize(net, 1);
    CHECK(strcmp(net->layer[2].ops->type, "add") == 0);
    CHECK(shape_eq(net_node(net, y)->shape, shape4(n, c, h, w)));
    fill_nodes(net, 8);
    Layer *l = &net->layer[2];
    l->ops->forward(l, net);
    double maxd = 0;
    for (size_t i = 0; i < shape_count(net_node(net, y)->shape); i++)
        maxd = fmax(maxd, fabs((double)net_node(net, a)->data[i] + net_node(net, b)->data[i] - net_node(net, y)->data[i]));
    CHECK(maxd < 1e-6);
    GradCheck g = tu_gradcheck_layer(net, 2, 1e-2, 100, 1e-2, 9);
    CHECK_MSG(g.checked == 2 * 96 && g.max_rel_err < 1e-3, "max relative error %g", g.max_rel_err);
    net_free(net);
}

TEST(add_same_input_twice_doubles_gradient) {
    Net *net = net_new(1, 2, 3, 3);
    int one = 0;
    int a = concat_create(net, &one, 1);
    int y = add_create(net, a, a);
    net_finalize(net, 1);
    fill_nodes(net, 10);
    Layer *l = &net->layer[1];
    l->ops->forward(l, net);
    for (int i = 0; i < 18; i++) {
        CHECK_NEAR(net_node(net, y)->data[i], 2.0 * net_node(net, a)->data[i], 1e-6);
        net_node(net, y)->grad[i] = (float)i - 4.0f;
        net_node(net, a)->grad[i] = 1.0f;
    }
    l->ops->backward(l, net);
    for (int i = 0; i < 18; i++) CHECK_NEAR(net_node(net, a)->grad[i], 1.0 + 2.0 * (i - 4.0), 1e-6);
    GradCheck g = tu_gradcheck_layer(net, 1, 1e-2, 100, 1e-2, 11);
    CHECK_MSG(g.checked == 18 && g.max_rel_err < 1e-3, "max relative error %g", g.max_rel_err);
    net_free(net);
}

/* The weighted sum (Inception-ResNet's residual scale): y = ca a + cb b, input k gets ck dy. */
TEST(add_scaled_forward_backward) {
    const int n = 2, c = 3, h = 4, w = 5;
    Net *net = net_new(n, c, h, w);
    int one = 0;
    int a = concat_create(net, &one, 1);
    int b = concat_create(net, &one, 1);
    int y = add_create_scaled(net, a, b, 1.0f, 0.2f);
    int z = add_create_scaled(net, a, a, -0.5f, 3.0f); /* the same input twice: 2.5 x */
    net_finalize(net, 1);
    fill_nodes(net, 12);
    Layer *l = &net->layer[2], *l2 = &net->layer[3];
    l->ops->forward(l, net);
    l2->ops->forward(l2, net);
    const size_t cnt = shape_count(net_node(net, y)->shape);
    double maxd = 0;
    for (size_t i = 0; i < cnt; i++) {
        double av = net_node(net, a)->data[i], bv = net_node(net, b)->data[i];
        maxd = fmax(maxd, fabs(av + 0.2 * bv - net_node(net, y)->data[i]));
        maxd = fmax(maxd, fabs(2.5 * av - net_node(net, z)->data[i]));
    }
    CHECK_MSG(maxd < 1e-6, "max difference %g", maxd);
    /* backward by hand: dy = 1 everywhere */
    for (size_t i = 0; i < cnt; i++) {
        net_node(net, y)->grad[i] = 1.0f;
        net_node(net, a)->grad[i] = net_node(net, b)->grad[i] = 0.0f;
    }
    l->ops->backward(l, net);
    for (size_t i = 0; i < cnt; i++) {
        CHECK_NEAR(net_node(net, a)->grad[i], 1.0, 1e-7);
        CHECK_NEAR(net_node(net, b)->grad[i], 0.2, 1e-7);
    }
    GradCheck g = tu_gradcheck_layer(net, 2, 1e-2, 200, 1e-2, 13);
    CHECK_MSG(g.checked == 2 * 120 && g.max_rel_err < 1e-3, "max relative error %g", g.max_rel_err);
    GradCheck g2 = tu_gradcheck_layer(net, 3, 1e-2, 200, 1e-2, 14);
    CHECK_MSG(g2.checked == 120 && g2.max_rel_err < 1e-3, "repeated input: max relative error %g", g2.max_rel_err);
    printf("    scaled add: finite differences max relative error %.2e\n", fmax(g.max_rel_err, g2.max_rel_err));
    net_free(net);
}

static void add_mismatch(void *arg) {
    (void)arg;
    Net *net = net_new(2, 3, 4, 4);
    int p = spatial_avg_create(net, 0);
    add_create(net, 0, p);
}

TEST(add_rejects_shape_mismatch) {
    char msg[512];
    int st = ld_run_child(add_mismatch, NULL, msg, sizeof msg);
    CHECK_MSG(st > 0 && strstr(msg, "add"), "status %d, message %s", st, msg);
}
