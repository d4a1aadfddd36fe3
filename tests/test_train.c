/* test_train.c: whole training steps on the CPU backend. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models.h"
#include "optim.h"
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
    TrainerConfig tc = {{0.9, 1, 1e-4, 0, 0}, 1.0, 0, 0, 0, 0, 0};
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
    TrainerConfig ta = {{0.9, 1, 1e-4, 0, 0}, 1.0, 0, 0, 0, 0, 0}, tb = {{0.9, 1, 1e-4, 0, 0}, 1024.0, 0, 0, 0, 0, 0};
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
    TrainerConfig tc = {{0.9, 1, 1e-4, 0, 0}, 65536.0, 1, 0, 0, 0, 0};
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

/* 0.5 sum w^2 in long double, one element after another: the naive reference */
static double naive_half_sumsq(const float *w, size_t n) {
    long double s = 0;
    for (size_t i = 0; i < n; i++) s += (long double)w[i] * w[i];
    return (double)(0.5L * s);
}

/* The loss a step returns is the forward's loss plus wd/2 ||w||^2 of the weights that forward
 * used, whether the update takes the term in its pass (a step that updates) or not (a skipped one:
 * a static loss scale so large that the gradients overflow to inf while the loss is finite). */
TEST(train_loss_weight_decay_term_is_of_the_forwards_weights) {
    const int N = 4, K = 5;
    const double wd = 0.05;
    for (int skip = 0; skip < 2; skip++) {
        Net *net = model_build_net(model_find("lenet"), N, K);
        net_finalize(net, 13);
        Rng r;
        rng_seed(&r, 4);
        tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -1, 1, &r);
        int32_t labels[4] = {0, 1, 2, 3};
        Dist d = one_rank();
        TrainerConfig tc = {{0.9, 1, wd, 0, 0}, skip ? 3e38 : 1.0, 0, 0, 0, 0, 0};
        Trainer t;
        trainer_init(&t, net, &d, &tc, NULL);
        for (int s = 0; s < 3; s++) {
            const double l2 = naive_half_sumsq(net->params, net->params_total);
            const double loss = trainer_step(&t, labels, 0.2), want = net->loss + wd * l2;
            /* the term is about 9 here (lenet's 0.43M weights); the double sums differ from the
             * long double one by ~1e-16 relative */
            CHECK_MSG(fabs(loss - want) <= 1e-12 * fabs(want), "skip %d step %d: loss %.17g, forward's loss + wd l2 %.17g", skip, s,
                      loss, want);
            CHECK_MSG(wd * l2 > 0.1 * net->loss, "skip %d: the term %g is too small to be seen beside %g", skip, wd * l2, net->loss);
        }
        /* (with the scale of 3e38, 2 of the 3 steps overflow) */
        CHECK_MSG(skip ? t.skipped_steps >= 1 : t.skipped_steps == 0, "skip %d: %ld steps skipped", skip, (long)t.skipped_steps);
        trainer_free(&t);
        net_free(net);
    }
}

/* optim_l2 gives the same bits with 1 and 2 threads, and the update's pass (optim_step_l2) the
 * same bits as optim_l2 of the weights before it, with and without LARC. */
TEST_CORES(train_weight_decay_sums_agree_across_threads_and_passes, 2) {
    Net *net = model_build_net(model_find("lenet"), 4, 10);
    net_finalize(net, 17);
    Rng r;
    rng_seed(&r, 6);
    tu_fill_uniform(net->grads, net->params_total, -1, 1, &r);
    omp_set_num_threads(1);
    const double one = optim_l2(net);
    omp_set_num_threads(2);
    const double two = optim_l2(net);
    CHECK_MSG(one == two, "optim_l2: %.17g with 1 thread, %.17g with 2", one, two);
    const double naive = naive_half_sumsq(net->params, net->params_total);
    CHECK_MSG(fabs(one - naive) <= 1e-13 * naive, "optim_l2 %.17g, naive %.17g", one, naive);
    for (int larc = 0; larc < 2; larc++) {
        OptimConfig c = {0.9, 1, 1e-3, larc ? 0.002 : 0, 0};
        Optimizer o;
        optim_init(&o, &c, net->params_total);
        for (int s = 0; s < 2; s++) {
            const double before = optim_l2(net);
            double got = -1;
            optim_step_l2(&o, net, 0.1, &got);
            CHECK_MSG(got == before, "larc %d step %d: the update's %.17g, optim_l2's %.17g", larc, s, got, before);
            CHECK_MSG(optim_l2(net) != before, "larc %d step %d: the weights did not move", larc, s);
        }
        optim_free(&o);
    }
    net_free(net);
}

extern void openblas_set_num_threads(int);

/* A small net with every reduction the CPU backend has: convolutions (bias and batch-norm), batch
 * norm's batch statistics, pooling, a residual add, dropout, FC, the loss. */
static Net *reduction_net(int batch) {
    Net *nb = net_new(batch, 3, 20, 20);
    nb->use_batch_norm = 1;
    NbT x = nb_conv(nb, nb_input(nb), 16, 3, 3, 1, 1, PAD_SAME);
    NbT y = nb_conv(nb, x, 16, 3, 3, 1, 1, PAD_SAME);
    x = nb_activate(nb, nb_add(nb, x, y), ACT_RELU);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);
    nb->use_batch_norm = 0;
    x = nb_conv(nb, x, 24, 3, 3, 1, 1, PAD_VALID);
    x = nb_spatial_avg(nb, x);
    x = nb_dropout(nb, nb_fc(nb, x, 32, ACT_RELU), 0.75f);
    nb_softmax_xent(nb, nb_fc(nb, x, 10, ACT_LINEAR));
    return nb;
}

/* 4 training steps of reduction_net with `threads` OpenMP threads and `blas` OpenBLAS threads;
 * the parameters and statistics after them (malloc'd) and the last loss. */
static float *steps_with_threads(int threads, int blas, size_t *count, double *loss) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(blas);
    const int N = 16;
    Net *net = reduction_net(N);
    net_finalize(net, 21);
    Rng r;
    rng_seed(&r, 8);
    Node *in = net_node(net, net->input);
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    int32_t labels[16];
    for (int i = 0; i < N; i++) labels[i] = (int32_t)((i * 7) % 10);
    Dist d = one_rank();
    TrainerConfig tc = {{0.9, 1, 1e-4, 0, 0}, 1.0, 0, 0, 0, 0, 0};
    Trainer t;
    trainer_init(&t, net, &d, &tc, NULL);
    for (int s = 0; s < 4; s++) *loss = trainer_step(&t, labels, 0.05);
    *count = net->params_total + net->state_total;
    float *after = xmalloc(*count * sizeof(float));
    memcpy(after, net->params, net->params_total * sizeof(float));
    memcpy(after + net->params_total, net->state, net->state_total * sizeof(float));
    trainer_free(&t);
    net_free(net);
    int all = omp_get_num_procs();
    omp_set_num_threads(all);
    openblas_set_num_threads(all);
    return after;
}

/* This program's own loops split work over channels or samples, each output summed by one thread
 * in a fixed order: 1 and 2 OpenMP threads give identical bits (OpenBLAS held at one thread).
 * OpenBLAS itself does not promise that: its threaded GEMM driver blocks the inner dimension
 * differently from the single-thread one, so with OpenBLAS's threads varied too the results
 * differ in the last bits; the test prints how much (the Fashion-MNIST sweep in
 * docs/performance.md shows what that does to accuracy). */
/* 2 cores: it runs 2 OpenMP threads whatever it is given */
TEST_CORES(train_same_bits_with_one_and_two_threads, 2) {
    size_t count = 0;
    double loss[2];
    float *a = steps_with_threads(1, 1, &count, &loss[0]);
    float *b = steps_with_threads(2, 1, &count, &loss[1]);
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    CHECK_MSG(differ == 0, "%zu of %zu parameters/statistics differ between 1 and 2 threads", differ, count);
    /* the reported loss sums in double across threads: equal to rounding */
    CHECK_MSG(fabs(loss[0] - loss[1]) <= 1e-12 * fabs(loss[0]), "loss %.17g vs %.17g", loss[0], loss[1]);
    float *c = steps_with_threads(2, 2, &count, &loss[1]);
    double maxrel = 0;
    for (size_t i = 0; i < count; i++) {
        double d = fabs((double)a[i] - (double)c[i]) / fmax(fabs((double)a[i]), 1e-3);
        if (d > maxrel) maxrel = d;
    }
    printf("    OpenBLAS with 2 threads instead of 1: max relative difference %.2e after 4 steps\n", maxrel);
    CHECK_MSG(maxrel < 1e-3, "OpenBLAS's thread count moved a parameter by %g relative", maxrel);
    free(a);
    free(b);
    free(c);
}
