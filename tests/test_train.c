/* test_train.c: whole training steps on the CPU backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models.h"
#include "testutil.h"
#include "train.h"

static Dist one_rank(void) {
    Dist d = {0, 1, 0, 1, 0};
    return d;
}

TEST(train_loss_falls_on_fixed_batch_lenet) {
    const int N = 8, K = 10;
    Net *net = model_build_net(model_find("lenet"), N, K);
    net_finalize(net, 7);
    Rng r;
    rng_seed(&r, 3);
    Node *in = net_node(net, net->input);
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    int32_t labels[8];
    for (int i = 0; i < N; i++) labels[i] = (int32_t)(i % K);
    Dist d = one_rank();
    TrainerConfig tc = {{0.9, 1, 1e-4, 0, 0}, 1.0, 0, 0, 0, 0};
    Trainer t;
    trainer_init(&t, net, &d, &tc, NULL);
    double first = trainer_step(&t, labels, 0.01), last = first;
    for (int s = 0; s < 40; s++) last = trainer_step(&t, labels, 0.01);
    CHECK_MSG(isfinite(first) && isfinite(last), "loss %g -> %g", first, last);
    CHECK_MSG(last < 0.25 * first, "loss did not fall: %g -> %g", first, last);
    /* initial cross-entropy of a fresh net is about log(K) */
    CHECK(first > 0.5 * log((double)K) && first < 3 * log((double)K));
    int top1, top5;
    trainer_eval(&t, labels, N, &top1, &top5);
    CHECK(top1 == N && top5 == N);
    trainer_free(&t);
    net_free(net);
}

TEST(train_static_loss_scale_gives_same_step) {
    /* loss scaling (static) must not change an fp32 step beyond rounding */
    const int N = 4, K = 5;
    Net *a = model_build_net(model_find("lenet"), N, K), *b = model_build_net(model_find("lenet"), N, K);
    net_finalize(a, 11);
    net_finalize(b, 11);
    Rng r;
    rng_seed(&r, 5);
    tu_fill_uniform(a->node[0].data, shape_count(a->node[0].shape), -1, 1, &r);
    memcpy(b->node[0].data, a->node[0].data, shape_count(a->node[0].shape) * sizeof(float));
    int32_t labels[4] = {0, 1, 2, 3};
    Dist d = one_rank();
    TrainerConfig ta = {{0.9, 1, 1e-4, 0, 0}, 1.0, 0, 0, 0, 0}, tb = {{0.9, 1, 1e-4, 0, 0}, 1024.0, 0, 0, 0, 0};
    Trainer x, y;
    trainer_init(&x, a, &d, &ta, NULL);
    trainer_init(&y, b, &d, &tb, NULL);
    for (int s = 0; s < 3; s++) {
        trainer_step(&x, labels, 0.05);
        trainer_step(&y, labels, 0.05);
    }
    double maxrel = 0;
    for (size_t i = 0; i < a->params_total; i++) {
        double u = a->params[i], v = b->params[i];
        double m = fmax(fabs(u), 1e-3);
        if (fabs(u - v) / m > maxrel) maxrel = fabs(u - v) / m;
    }
    CHECK_MSG(maxrel < 1e-4, "max relative difference %g", maxrel);
    trainer_free(&x);
    trainer_free(&y);
    net_free(a);
    net_free(b);
}

TEST(train_nan_gradients_skip_the_step) {
    const int N = 2, K = 3;
    Net *net = model_build_net(model_find("lenet"), N, K);
    net_finalize(net, 1);
    for (size_t i = 0; i < shape_count(net->node[0].shape); i++) net->node[0].data[i] = 0.5f;
    net->node[0].data[7] = NAN;
    int32_t labels[2] = {0, 1};
    Dist d = one_rank();
    TrainerConfig tc = {{0.9, 1, 1e-4, 0, 0}, 65536.0, 1, 0, 0, 0};
    Trainer t;
    trainer_init(&t, net, &d, &tc, NULL);
    float *before = malloc(net->params_total * sizeof(float));
    memcpy(before, net->params, net->params_total * sizeof(float));
    trainer_step(&t, labels, 0.1);
    CHECK(t.skipped_steps == 1);
    CHECK(t.loss_scale == 32768.0);
    CHECK(memcmp(before, net->params, net->params_total * sizeof(float)) == 0);
    free(before);
    trainer_free(&t);
    net_free(net);
}
