/* test_act.c: every activation against a double-precision formula, layer type names, and
 * backward against finite differences on inputs kept away from the kinks (0 and 6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "testutil.h"

typedef struct ActCase {
    Act act;
    float alpha;
    const char *type;
} ActCase;

static const ActCase acases[] = {
    {ACT_LINEAR, 0, "linear"},     {ACT_RELU, 0, "relu"}, {ACT_RELU6, 0, "relu6"},    {ACT_ELU, 0, "elu"},
    {ACT_SIGMOID, 0, "sigmoid"}, {ACT_TANH, 0, "tanh"}, {ACT_LRELU, 0.2f, "lrelu"},
};

static double ref_act(Act act, double alpha, double x) {
    switch (act) {
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_RELU6: return x < 0 ? 0 : (x > 6 ? 6 : x);
    case ACT_ELU: return x > 0 ? x : exp(x) - 1;
    case ACT_SIGMOID: return 1 / (1 + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_LRELU: return x > 0 ? x : alpha * x; /* max(alpha x, x) for alpha < 1 */
    default: return x;
    }
}

/* Values in [-4, -0.1] u [0.1, 5.9] u [6.1, 8]: a 1e-2 step never crosses a kink. */
static void fill_off_kinks(float *x, size_t n, Rng *r) {
    for (size_t i = 0; i < n; i++) {
        double u = rng_uniform(r);
        uint32_t band = rng_below(r, 3);
        x[i] = (float)(band == 0 ? -4 + 3.9 * u : band == 1 ? 0.1 + 5.8 * u : 6.1 + 1.9 * u);
    }
}

TEST(act_types_and_shapes) {
    for (size_t k = 0; k < sizeof acases / sizeof acases[0]; k++) {
        Net *net = net_new(2, 3, 4, 5);
        int y = act_create(net, 0, acases[k].act, acases[k].alpha);
        int y2 = act_create(net, y, acases[k].act, acases[k].alpha);
        net_finalize(net, 1);
        CHECK_MSG(strcmp(net->layer[0].ops->type, acases[k].type) == 0, "type %s, want %s", net->layer[0].ops->type,
                  acases[k].type);
        char want[32];
        snprintf(want, sizeof want, "%s1", acases[k].type);
        CHECK_MSG(strcmp(net->layer[1].name, want) == 0, "name %s, want %s", net->layer[1].name, want);
        CHECK(shape_eq(net_node(net, y2)->shape, net->node[0].shape));
        CHECK(net->layer[0].nparam == 0);
        net_free(net);
    }
}

TEST(act_forward_matches_reference) {
    for (size_t k = 0; k < sizeof acases / sizeof acases[0]; k++) {
        /* enough elements that the threaded path runs too */
        Net *net = net_new(4, 8, 40, 40);
        int y = act_create(net, 0, acases[k].act, acases[k].alpha);
        net_finalize(net, 1);
        size_t n = shape_count(net->node[0].shape);
        Rng r;
        rng_seed(&r, 100 + k);
        tu_fill_uniform(net->node[0].data, n, -9, 9, &r);
        net->node[0].data[0] = 0;
        net->node[0].data[1] = 6;
        net->node[0].data[2] = -90; /* exp underflow: sigmoid 0, elu -1 */
        net->node[0].data[3] = 90;  /* exp overflow avoided: sigmoid 1 */
        net->layer[0].ops->forward(&net->layer[0], net);
        const float *x = net->node[0].data, *o = net_node(net, y)->data;
        double maxd = 0;
        int finite = 1;
        for (size_t i = 0; i < n; i++) {
            maxd = fmax(maxd, fabs(ref_act(acases[k].act, acases[k].alpha, x[i]) - o[i]));
            finite &= isfinite(o[i]) != 0;
        }
        CHECK(finite);
        CHECK_MSG(maxd < 1e-6, "%s: max difference %g", acases[k].type, maxd);
        net_free(net);
    }
}

TEST(act_lrelu_other_alpha_and_relu6_clip) {
    Net *net = net_new(1, 1, 1, 4);
    int a = act_create(net, 0, ACT_LRELU, 0.01f);
    int b = act_create(net, 0, ACT_RELU6, 0);
    net_finalize(net, 1);
    const float x[4] = {-3, -0.5f, 2, 7.5f};
    memcpy(net->node[0].data, x, sizeof x);
    net_forward(net);
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(net_node(net, a)->data[i], x[i] > 0 ? x[i] : 0.01 * x[i], 1e-7);
        CHECK_NEAR(net_node(net, b)->data[i], x[i] < 0 ? 0 : (x[i] > 6 ? 6 : x[i]), 1e-7);
    }
    net_free(net);
}

TEST(act_backward_matches_finite_differences) {
    for (size_t k = 0; k < sizeof acases / sizeof acases[0]; k++) {
        Net *net = net_new(2, 3, 5, 4);
        act_create(net, 0, acases[k].act, acases[k].alpha);
        net_finalize(net, 1);
        Rng r;
        rng_seed(&r, 200 + k);
        fill_off_kinks(net->node[0].data, shape_count(net->node[0].shape), &r);
        GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 120, 1e-2, 7 + k);
        CHECK_MSG(g.checked == 120 && g.max_rel_err < 5e-3, "%s: max relative error %g", acases[k].type,
                  g.max_rel_err);
        net_free(net);
    }
}

TEST(act_backward_accumulates_and_skips_input) {
    Net *net = net_new(1, 2, 2, 2);
    int y = act_create(net, 0, ACT_TANH, 0);
    act_create(net, y, ACT_RELU, 0);
    net_finalize(net, 1);
    Rng r;
    rng_seed(&r, 4);
    tu_fill_uniform(net->node[0].data, 8, -2, 2, &r);
    net_forward(net);
    for (int i = 0; i < 8; i++) {
        net->node[2].grad[i] = 1;
        net->node[1].grad[i] = 0.5f; /* already there: backward adds to it */
    }
    net->layer[1].ops->backward(&net->layer[1], net);
    net->layer[0].ops->backward(&net->layer[0], net); /* input has no grad: nothing to do */
    for (int i = 0; i < 8; i++) {
        double t = tanh(net->node[0].data[i]);
        CHECK_NEAR(net->node[1].grad[i], 0.5 + (t > 0 ? 1 : 0), 1e-6);
    }
    net_free(net);
}
