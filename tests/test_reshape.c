/* test_reshape.c: flatten's NHWC element order on a hand-checkable tensor and against the index
 * formula, spatial average against a plain mean, both backwards against finite differences. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "testutil.h"

TEST(flatten_nhwc_order_by_hand) {
    /* x[c][y][x] = 100 c + 10 y + x, c = 2, h = 2, w = 3 */
    Net *net = net_new(1, 2, 2, 3);
    int y = flatten_create(net, 0);
    net_finalize(net, 1);
    CHECK(strcmp(net->layer[0].ops->type, "flatten") == 0);
    CHECK(shape_eq(net_node(net, y)->shape, shape4(1, 12, 1, 1)));
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < 2; r++)
            for (int q = 0; q < 3; q++) net->node[0].data[(c * 2 + r) * 3 + q] = (float)(100 * c + 10 * r + q);
    net->layer[0].ops->forward(&net->layer[0], net);
    /* pixel by pixel, channels innermost */
    const float want[12] = {0, 100, 1, 101, 2, 102, 10, 110, 11, 111, 12, 112};
    for (int i = 0; i < 12; i++) CHECK_MSG(net_node(net, y)->data[i] == want[i], "[%d] = %g, want %g", i,
                                           (double)net_node(net, y)->data[i], (double)want[i]);
    net_free(net);
}

TEST(flatten_forward_backward_batch) {
    const int n = 3, c = 4, h = 3, w = 5;
    Net *net = net_new(n, c, h, w);
    int y = flatten_create(net, 0);
    net_finalize(net, 1);
    Rng r;
    rng_seed(&r, 2);
    tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -1, 1, &r);
    net->layer[0].ops->forward(&net->layer[0], net);
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int yy = 0; yy < h; yy++)
                for (int xx = 0; xx < w; xx++)
                    bad += net_node(net, y)->data[i * c * h * w + (yy * w + xx) * c + ch] !=
                           net->node[0].data[((i * c + ch) * h + yy) * w + xx];
    CHECK(bad == 0);
    GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 400, 1e-2, 3);
    CHECK_MSG(g.checked > 0 && g.max_rel_err < 1e-3, "max relative error %g", g.max_rel_err);
    net_free(net);
}

TEST(flatten_of_2d_is_identity) {
    Net *net = net_new(2, 7, 1, 1);
    int y = flatten_create(net, 0);
    net_finalize(net, 1);
    for (int i = 0; i < 14; i++) net->node[0].data[i] = (float)i * 0.5f;
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK(shape_eq(net_node(net, y)->shape, shape4(2, 7, 1, 1)));
    CHECK(memcmp(net_node(net, y)->data, net->node[0].data, 14 * sizeof(float)) == 0);
    net_free(net);
}

TEST(spatial_avg_forward_backward) {
    const int n = 2, c = 5, h = 7, w = 6;
    Net *net = net_new(n, c, h, w);
    int y = spatial_avg_create(net, 0);
    net_finalize(net, 1);
    CHECK(strcmp(net->layer[0].ops->type, "avg") == 0);
    CHECK(shape_eq(net_node(net, y)->shape, shape4(n, c, 1, 1)));
    Rng r;
    rng_seed(&r, 4);
    tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -3, 5, &r);
    net->layer[0].ops->forward(&net->layer[0], net);
    double maxd = 0;
    for (int p = 0; p < n * c; p++) {
        double s = 0;
        for (int k = 0; k < h * w; k++) s += net->node[0].data[p * h * w + k];
        maxd = fmax(maxd, fabs(s / (h * w) - net_node(net, y)->data[p]));
    }
    CHECK_MSG(maxd < 1e-6, "max difference %g", maxd);
    GradCheck g = tu_gradcheck_layer(net, 0, 1e-2, 300, 1e-3, 5);
    CHECK_MSG(g.checked > 0 && g.max_rel_err < 5e-3, "max relative error %g", g.max_rel_err);
    net_free(net);
}
