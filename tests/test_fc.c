/* test_fc.c: fully connected layer against a naive double-precision matrix product, backward
 * against finite differences, and its shape checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_death.h"
#include "layers/layers.h"
#include "testutil.h"

static Net *fc_net(int n, int nin, int nout, int bias, uint64_t seed) {
    Net *net = net_new(n, nin, 1, 1);
    fc_create(net, 0, nout, bias);
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed + 11);
    tu_fill_uniform(net->node[0].data, (size_t)n * nin, -1, 1, &r);
    if (bias) tu_fill_uniform(net_param(net, 1), (size_t)nout, -0.5f, 0.5f, &r);
    return net;
}

TEST(fc_create_params) {
    Net *net = net_new(3, 20, 1, 1);
    int y = fc_create(net, 0, 7, 1);
    int z = fc_create(net, y, 4, 0);
    net_finalize(net, 5);
    CHECK(strcmp(net->layer[0].ops->type, "fc") == 0);
    CHECK(shape_eq(net_node(net, y)->shape, shape4(3, 7, 1, 1)));
    CHECK(shape_eq(net_node(net, z)->shape, shape4(3, 4, 1, 1)));
    CHECK(net->nparam == 3 && net->layer[0].nparam == 2 && net->layer[1].nparam == 1);
    CHECK(strcmp(net->param[0].name, "fc0/weights") == 0 && strcmp(net->param[1].name, "fc0/biases") == 0);
    CHECK(net->param[0].count == 140 && net->param[1].count == 7 && net->param[2].count == 28);
    CHECK(net->param[0].fan_in == 20 && net->param[0].fan_out == 7);
    CHECK_NEAR(net->layer[0].flops, 2.0 * 3 * 20 * 7, 1e-9);
    /* Glorot-uniform weights inside the limit, zero biases */
    double lim = sqrt(6.0 / 27), maxw = 0;
    for (int i = 0; i < 140; i++) maxw = fmax(maxw, fabs(net_param(net, 0)[i]));
    CHECK(maxw > 0 && maxw <= lim);
    for (int i = 0; i < 7; i++) CHECK(net_param(net, 1)[i] == 0);
    net_free(net);
}

TEST(fc_forward_matches_naive_matmul) {
    const int cfg[][4] = {{4, 13, 6, 1}, {1, 5, 9, 1}, {7, 33, 10, 0}, {16, 300, 40, 1}};
    for (int k = 0; k < 4; k++) {
        int n = cfg[k][0], nin = cfg[k][1], nout = cfg[k][2], bias = cfg[k][3];
        Net *net = fc_net(n, nin, nout, bias, 20 + k);
        net->layer[0].ops->forward(&net->layer[0], net);
        const float *x = net->node[0].data, *W = net_param(net, 0), *y = net->node[1].data;
        double maxd = 0;
        for (int i = 0; i < n; i++)
            for (int o = 0; o < nout; o++) {
                double s = bias ? net_param(net, 1)[o] : 0;
                for (int j = 0; j < nin; j++) s += (double)x[i * nin + j] * W[o * nin + j];
                maxd = fmax(maxd, fabs(s - y[i * nout + o]));
            }
        CHECK_MSG(maxd < 1e-5, "case %d: max difference %g", k, maxd);
        net_free(net);
    }
}

TEST(fc_backward_matches_finite_differences) {
    const int cfg[][4] = {{4, 13, 6, 1}, {3, 8, 5, 0}};
    for (int k = 0; k < 2; k++) {
        Net *net = fc_net(cfg[k][0], cfg[k][1], cfg[k][2], cfg[k][3], 30 + k);
        GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 200, 1e-2, 3 + k);
        CHECK_MSG(g.max_rel_err < 2e-3, "case %d: max relative error %g", k, g.max_rel_err);
        net_free(net);
    }
}

TEST(fc_backward_accumulates) {
    Net *net = fc_net(2, 3, 2, 1, 44);
    net->node[0].grad = calloc(6, sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    for (int i = 0; i < 4; i++) net->node[1].grad[i] = (float)(i + 1);
    net_param(net, 0)[0] = 0.25f;
    memset(net->grads, 0, net->params_total * sizeof(float));
    net->layer[0].ops->backward(&net->layer[0], net);
    net->layer[0].ops->backward(&net->layer[0], net);
    /* db[o] = 2 * sum_n dy[n][o]; dW[o][i] = 2 * sum_n dy[n][o] x[n][i] */
    CHECK_NEAR(net_grad(net, 1)[0], 2 * (1 + 3), 1e-6);
    CHECK_NEAR(net_grad(net, 1)[1], 2 * (2 + 4), 1e-6);
    const float *x = net->node[0].data;
    CHECK_NEAR(net_grad(net, 0)[0], 2 * (1 * x[0] + 3 * x[3]), 1e-5);
    const float *W = net_param(net, 0);
    CHECK_NEAR(net->node[0].grad[0], 2 * (1 * W[0] + 2 * W[3]), 1e-5);
    net_free(net);
}

static void fc_on_4d(void *arg) {
    (void)arg;
    Net *net = net_new(2, 3, 4, 4);
    fc_create(net, 0, 10, 1);
}

TEST(fc_rejects_4d_input) {
    char msg[512];
    int st = ld_run_child(fc_on_4d, NULL, msg, sizeof msg);
    CHECK_MSG(st > 0, "exit status %d", st);
    CHECK_MSG(strstr(msg, "fc") && strstr(msg, "2-D"), "message: %s", msg);
}
