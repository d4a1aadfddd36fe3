/* test_softmax_xent.c: softmax cross-entropy against a naive long-double log-sum-exp, large
 * logits, the logits' gradient against a formula and finite differences, bad labels. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_death.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "testutil.h"

/* -log softmax(z)[label] without any shift: long double has the range for |z| ~ 1000. */
static long double naive_xent(const float *z, int c, int label) {
    long double s = 0;
    for (int j = 0; j < c; j++) s += expl((long double)z[j]);
    return logl(s) - (long double)z[label];
}

static Net *xent_net(int n, int c, int32_t *labels) {
    Net *net = net_new(n, c, 1, 1);
    softmax_xent_create(net, 0);
    net_finalize(net, 1);
    net->labels = labels;
    return net;
}

static void check_forward(Net *net, const int32_t *labels, double tol, const char *what) {
    int n = net->node[0].shape.n, c = net->node[0].shape.c;
    net->layer[0].ops->forward(&net->layer[0], net);
    long double total = 0;
    double maxd = 0;
    int finite = isfinite(net->loss) != 0;
    for (int i = 0; i < n; i++) {
        long double li = naive_xent(net->node[0].data + (size_t)i * c, c, labels[i]);
        total += li;
        float got = net->node[1].data[i];
        finite &= isfinite(got) != 0;
        maxd = fmax(maxd, fabs((double)li - got) / fmax(1.0, fabs((double)li)));
    }
    CHECK_MSG(finite, "%s: non-finite loss", what);
    CHECK_MSG(maxd < tol, "%s: per-sample loss off by %g", what, maxd);
    CHECK_REL(net->loss, (double)(total / n), tol, 1e-7);
}

TEST(softmax_xent_forward_matches_naive) {
    int32_t labels[5] = {0, 9, 3, 3, 7};
    Net *net = xent_net(5, 10, labels);
    CHECK(strcmp(net->layer[0].ops->type, "softmax_xent") == 0);
    CHECK(net->logits == 0);
    CHECK(shape_eq(net->node[1].shape, shape4(5, 1, 1, 1)));
    Rng r;
    rng_seed(&r, 1);
    tu_fill_uniform(net->node[0].data, 50, -4, 4, &r);
    check_forward(net, labels, 1e-6, "uniform logits");
    /* equal logits: loss log(c) */
    for (int i = 0; i < 50; i++) net->node[0].data[i] = 0.3f;
    net->layer[0].ops->forward(&net->layer[0], net);
    CHECK_NEAR(net->loss, log(10.0), 1e-6);
    net_free(net);
}

/* A batch large enough for the threads (64 x 1000, ImageNet's classes): the probabilities against
 * the naive softmax element by element, the loss against the naive one, and the same bits with one
 * and two threads. */
TEST_CORES(softmax_xent_thousand_classes_in_threads_match_naive, 2) {
    enum { N = 64, C = 1000 };
    int32_t labels[N];
    for (int i = 0; i < N; i++) labels[i] = (int32_t)((i * 37) % C);
    Net *net = xent_net(N, C, labels);
    Rng r;
    rng_seed(&r, 9);
    tu_fill_uniform(net->node[0].data, (size_t)N * C, -8, 8, &r);
    const Xent *x = net->layer[0].priv;
    float *p1 = malloc((size_t)N * C * sizeof(float));
    double loss1 = 0;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        check_forward(net, labels, 1e-6, threads == 1 ? "64 x 1000, one thread" : "64 x 1000, two threads");
        if (threads == 1) {
            memcpy(p1, x->prob, (size_t)N * C * sizeof(float));
            loss1 = net->loss;
            continue;
        }
        CHECK_MSG(net->loss == loss1, "loss %.17g with one thread, %.17g with two", loss1, net->loss);
        CHECK(memcmp(p1, x->prob, (size_t)N * C * sizeof(float)) == 0);
    }
    /* each probability within a float's rounding (2^-24, and a little for the exp) of the naive one */
    double worst = 0;
    for (int i = 0; i < N; i++) {
        const float *z = net->node[0].data + (size_t)i * C;
        long double s = 0;
        for (int j = 0; j < C; j++) s += expl((long double)z[j]);
        for (int j = 0; j < C; j++) {
            const long double want = expl((long double)z[j]) / s;
            worst = fmax(worst, (double)(fabsl((long double)p1[(size_t)i * C + j] - want) / want));
        }
    }
    CHECK_MSG(worst <= 1.2e-7, "probabilities off by %.3g relative", worst);
    free(p1);
    net_free(net);
}

TEST(softmax_xent_large_logits_stay_finite) {
    int32_t labels[4] = {1, 0, 2, 5};
    Net *net = xent_net(4, 6, labels);
    Rng r;
    rng_seed(&r, 2);
    float *z = net->node[0].data;
    for (int i = 0; i < 24; i++) z[i] = 1000.0f + (float)(rng_uniform(&r) * 10 - 5);
    z[6 + 0] = 1000.0f; /* label logit of sample 1 far below the others: loss around 1000 */
    for (int j = 1; j < 6; j++) z[6 + j] = 2000.0f;
    for (int j = 0; j < 6; j++) z[12 + j] = -1000.0f - (float)j; /* all very negative */
    check_forward(net, labels, 1e-6, "large logits");
    CHECK_REL(net->node[1].data[1], 1000.0 + log(5.0), 1e-6, 0);
    net->node[0].grad = calloc(24, sizeof(float));
    net->layer[0].ops->backward(&net->layer[0], net);
    int finite = 1;
    for (int i = 0; i < 24; i++) finite &= isfinite(net->node[0].grad[i]) != 0;
    CHECK(finite);
    net_free(net);
}

TEST(softmax_xent_gradient_formula_and_accumulation) {
    const int n = 4, c = 7;
    int32_t labels[4] = {6, 0, 2, 2};
    Net *net = xent_net(n, c, labels);
    Rng r;
    rng_seed(&r, 3);
    tu_fill_uniform(net->node[0].data, (size_t)n * c, -3, 3, &r);
    net->node[0].grad = malloc((size_t)n * c * sizeof(float));
    for (int i = 0; i < n * c; i++) net->node[0].grad[i] = 0.5f;
    net->node[1].grad[0] = 123.0f; /* ignored */
    net->layer[0].ops->forward(&net->layer[0], net);
    net->layer[0].ops->backward(&net->layer[0], net);
    double maxd = 0;
    for (int i = 0; i < n; i++) {
        const float *z = net->node[0].data + (size_t)i * c;
        long double s = 0;
        for (int j = 0; j < c; j++) s += expl((long double)z[j]);
        for (int j = 0; j < c; j++) {
            double p = (double)(expl((long double)z[j]) / s);
            double want = 0.5 + (p - (j == labels[i])) / n;
            maxd = fmax(maxd, fabs(want - net->node[0].grad[(size_t)i * c + j]));
        }
    }
    CHECK_MSG(maxd < 1e-6, "max difference %g", maxd);
    net_free(net);
}

TEST(softmax_xent_logits_gradient_matches_finite_differences) {
    const int n = 4, c = 9;
    int32_t labels[4] = {8, 1, 4, 0};
    Net *net = xent_net(n, c, labels);
    Rng r;
    rng_seed(&r, 4);
    tu_fill_uniform(net->node[0].data, (size_t)n * c, -2, 2, &r);
    /* mean loss, differentiated numerically over the logits */
    net->node[0].grad = calloc((size_t)n * c, sizeof(float));
    net->layer[0].ops->forward(&net->layer[0], net);
    net->layer[0].ops->backward(&net->layer[0], net);
    const double eps = 1e-2;
    double worst = 0;
    for (int i = 0; i < n * c; i++) {
        float orig = net->node[0].data[i];
        net->node[0].data[i] = (float)(orig + eps);
        net->layer[0].ops->forward(&net->layer[0], net);
        double lp = net->loss;
        net->node[0].data[i] = (float)(orig - eps);
        net->layer[0].ops->forward(&net->layer[0], net);
        double lm = net->loss;
        net->node[0].data[i] = orig;
        double num = (lp - lm) / (2 * eps), an = net->node[0].grad[i];
        worst = fmax(worst, fabs(num - an) / fmax(fmax(fabs(num), fabs(an)), 1e-2));
    }
    CHECK_MSG(worst < 2e-3, "max relative error %g", worst);
    printf("    softmax_xent: max relative error %.3g\n", worst);
    net_free(net);
}

typedef struct BadLabel {
    int32_t labels[4];
} BadLabel;

static void forward_with(void *arg) {
    BadLabel *b = arg;
    Net *net = xent_net(4, 5, b->labels);
    net->layer[0].ops->forward(&net->layer[0], net);
}

TEST(softmax_xent_bad_label_dies) {
    BadLabel cases[2] = {{{0, 4, 7, 1}}, {{-1, 0, 0, 0}}};
    const char *want[2][2] = {{"label 7", "index 2"}, {"label -1", "index 0"}};
    for (int k = 0; k < 2; k++) {
        char msg[512];
        int st = ld_run_child(forward_with, &cases[k], msg, sizeof msg);
        CHECK_MSG(st > 0 && strstr(msg, want[k][0]) && strstr(msg, want[k][1]), "case %d: status %d, message %s", k,
                  st, msg);
    }
    /* a good batch survives the same path */
    BadLabel ok = {{0, 4, 3, 1}};
    char msg[512];
    CHECK(ld_run_child(forward_with, &ok, msg, sizeof msg) == 0);
}

/* Top-k against a naive count over random rows with ties (the lower class first), and a row with
 * an inf or NaN logit anywhere, the label's own included, never correct (TensorFlow's in_top_k
 * says false there): a NaN used to rank behind every class, so a diverged model whose logits
 * were all NaN scored a high accuracy. */
static uint32_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

TEST(softmax_xent_topk_ranks_ties_and_non_finite_rows) {
    uint64_t s = 99;
    float row[12];
    for (int t = 0; t < 200; t++) {
        const int c = 2 + t % 11, lab = (int)(lcg(&s) % (uint32_t)c);
        for (int j = 0; j < c; j++) row[j] = (float)(lcg(&s) % 5); /* many ties */
        int naive = 0;
        for (int j = 0; j < c; j++) naive += row[j] > row[lab] || (row[j] == row[lab] && j < lab);
        CHECK_MSG(net_label_rank(row, c, lab) == naive, "row %d: %d, naive %d", t, net_label_rank(row, c, lab), naive);
        const float bad[3] = {NAN, INFINITY, -INFINITY};
        const int at = (int)(lcg(&s) % (uint32_t)c);
        const float keep = row[at];
        row[at] = bad[t % 3];
        CHECK_MSG(net_label_rank(row, c, lab) == c, "row %d with %g at class %d (label %d): rank %d", t, (double)row[at], at, lab,
                  net_label_rank(row, c, lab));
        row[at] = keep;
    }
}
