/* test_core.c: statistics, learning-rate policies, the optimizer, padding arithmetic, RNG. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "net.h"
#include "optim.h"
#include "util.h"

TEST(core_stats_as_nvcnn) {
    /* numpy: mean, std(ddof=1)/sqrt(n), 1.4826*median(|x - median(x)|) */
    double v[] = {10, 12, 11, 13, 50, 12, 11};
    Stats s = stats_compute(v, 7);
    CHECK_NEAR(s.mean, 17.0, 1e-12);
    /* deviations -7,-5,-6,-4,33,-5,-6: ddof=1 std = sqrt(1276/6) */
    CHECK_NEAR(s.stderr_, sqrt(1276.0 / 6.0) / sqrt(7.0), 1e-12);
    /* median 12; |dev| = 2,0,1,1,38,0,1 -> sorted 0,0,1,1,1,2,38 -> median 1 */
    CHECK_NEAR(s.jitter, 1.4826, 1e-12);
    double w[] = {4, 8};
    Stats t = stats_compute(w, 2);
    CHECK_NEAR(t.mean, 6, 1e-12);
    CHECK(isnan(t.stderr_));
    CHECK_NEAR(t.jitter, 1.4826 * 2, 1e-12);
}

TEST(core_lr_poly_step_warmup) {
    LrSchedule s = {0};
    s.base = 0.4;
    s.policy = SCHED_POLY;
    s.poly_power = 2;
    s.total_steps = 100;
    s.steps_per_epoch = 10;
    CHECK_NEAR(lr_at(&s, 0), 0.4, 1e-12);
    CHECK_NEAR(lr_at(&s, 50), 0.4 * 0.25, 1e-12);
    CHECK_NEAR(lr_at(&s, 100), 0.0, 1e-12);
    CHECK_NEAR(lr_at(&s, 150), 0.0, 1e-12);
    s.policy = SCHED_STEP;
    s.decay_epochs = 3;
    s.decay_rate = 0.1;
    CHECK_NEAR(lr_at(&s, 29), 0.4, 1e-12);
    CHECK_NEAR(lr_at(&s, 30), 0.04, 1e-12);
    CHECK_NEAR(lr_at(&s, 65), 0.004, 1e-12);
    s.warmup_steps = 10;
    CHECK_NEAR(lr_at(&s, 0), 0.04, 1e-12);
    CHECK_NEAR(lr_at(&s, 4), 0.2, 1e-12);
    CHECK_NEAR(lr_at(&s, 9), 0.4, 1e-12);
    s.policy = SCHED_POLY;
    s.poly_power = 1;
    /* after warmup, poly decays over the remaining 90 steps */
    CHECK_NEAR(lr_at(&s, 10), 0.4, 1e-12);
    CHECK_NEAR(lr_at(&s, 55), 0.2, 1e-12);
}

/* A one-parameter net: a 1x1 conv has exactly one weight. We drive optim_step directly. */
static Net *tiny_param_net(int n) {
    Net *net = xcalloc(1, sizeof *net);
    net->nparam = 1;
    net->param = xcalloc(1, sizeof *net->param);
    net->param[0].count = (size_t)n;
    net->params_total = (size_t)n;
    net->params = xcalloc((size_t)n, sizeof(float));
    net->grads = xcalloc((size_t)n, sizeof(float));
    return net;
}
static void tiny_free(Net *net) {
    free(net->param);
    free(net->params);
    free(net->grads);
    free(net);
}

TEST(core_momentum_nesterov_matches_tensorflow_formula) {
    /* TensorFlow ApplyMomentum(use_nesterov): accum = m*accum + g; var -= lr*g + lr*m*accum */
    double w = 1.5, acc = 0;
    const double m = 0.9, lr = 0.1, wd = 0.01;
    Net *net = tiny_param_net(1);
    net->params[0] = (float)w;
    OptimConfig c = {m, 1, wd, 0, 0};
    Optimizer o;
    optim_init(&o, &c, 1);
    for (int it = 0; it < 5; it++) {
        double g = 0.3 - 0.1 * it;
        net->grads[0] = (float)g;
        optim_step(&o, net, lr);
        double gt = g + wd * w;
        acc = m * acc + gt;
        w -= lr * gt + lr * m * acc;
        CHECK_NEAR(net->params[0], w, 1e-6);
    }
    optim_free(&o);
    /* plain momentum: accum = m*accum + g; var -= lr*accum */
    OptimConfig p = {m, 0, 0, 0, 0};
    optim_init(&o, &p, 1);
    net->params[0] = 2.0f;
    w = 2.0;
    acc = 0;
    for (int it = 0; it < 4; it++) {
        net->grads[0] = 0.5f;
        optim_step(&o, net, lr);
        acc = m * acc + 0.5;
        w -= lr * acc;
        CHECK_NEAR(net->params[0], w, 1e-6);
    }
    optim_free(&o);
    tiny_free(net);
}

TEST(core_larc_clip_and_scale) {
    Net *net = tiny_param_net(2);
    OptimConfig c = {0, 0, 0, 0.002, 0};
    Optimizer o;
    /* |w| = 5, |g| = 1e-3 -> eta*|w|/|g| = 10; clip: min(10/lr, 1) = 1 with lr 0.1 */
    net->params[0] = 3;
    net->params[1] = 4;
    net->grads[0] = 0.0006f;
    net->grads[1] = 0.0008f;
    optim_init(&o, &c, 2);
    optim_step(&o, net, 0.1);
    CHECK_NEAR(net->params[0], 3 - 0.1 * 0.0006, 1e-6);
    optim_free(&o);
    /* |g| = 1 -> local 0.01 -> clip: 0.01/0.1 = 0.1 -> step lr*0.1*g */
    net->params[0] = 3;
    net->params[1] = 4;
    net->grads[0] = 0.6f;
    net->grads[1] = 0.8f;
    optim_init(&o, &c, 2);
    optim_step(&o, net, 0.1);
    CHECK_NEAR(net->params[0], 3 - 0.1 * 0.1 * 0.6, 1e-6);
    optim_free(&o);
    /* scale mode: g *= 0.01 */
    c.larc_scale = 1;
    net->params[0] = 3;
    net->params[1] = 4;
    net->grads[0] = 0.6f;
    net->grads[1] = 0.8f;
    optim_init(&o, &c, 2);
    optim_step(&o, net, 0.1);
    CHECK_NEAR(net->params[1], 4 - 0.1 * 0.01 * 0.8, 1e-6);
    optim_free(&o);
    tiny_free(net);
}

TEST(core_padding_arithmetic_as_tensorflow) {
    int pb;
    CHECK(conv_out_size(224, 7, 2, PAD_SAME, &pb) == 112 && pb == 2);
    CHECK(conv_out_size(224, 7, 2, PAD_SAME_RESNET, &pb) == 112 && pb == 3);
    CHECK(conv_out_size(227, 11, 4, PAD_VALID, &pb) == 55 && pb == 0);
    CHECK(conv_out_size(112, 3, 2, PAD_SAME, &pb) == 56 && pb == 0);
    CHECK(conv_out_size(56, 3, 1, PAD_SAME, &pb) == 56 && pb == 1);
    CHECK(conv_out_size(299, 3, 2, PAD_VALID, &pb) == 149);
    CHECK(conv_out_size(35, 3, 2, PAD_VALID, &pb) == 17);
    CHECK(conv_out_size(7, 1, 2, PAD_SAME, &pb) == 4 && pb == 0);
}

TEST(core_rng_deterministic_and_streams_differ) {
    Rng a, b, c;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    rng_seed_stream(&c, 42, 1);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_u64(&a), y = rng_u64(&b), z = rng_u64(&c);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same);
    CHECK(diff > 95);
    /* uniform mean and normal moments */
    double s = 0, s2 = 0;
    for (int i = 0; i < 100000; i++) {
        double z = rng_normal(&a);
        s += z;
        s2 += z * z;
    }
    CHECK_NEAR(s / 1e5, 0, 0.02);
    CHECK_NEAR(s2 / 1e5, 1, 0.02);
    int hist[7] = {0};
    for (int i = 0; i < 70000; i++) hist[rng_below(&a, 7)]++;
    for (int i = 0; i < 7; i++) CHECK_NEAR(hist[i], 10000, 500);
}

/* A rank's fatal error waits (util_set_error_delay; a quiet rank likewise) so that the launcher,
 * ending the job at rank 0's same error, has the line said once: SIGTERM meanwhile ends the process
 * with the error's own exit code and no line (it ended with the signal's, 143, which srun reported
 * as the job's code over rank 0's 2). Without a signal the line comes after the wait. */
TEST(core_a_waiting_error_ends_with_its_own_code) {
    for (int k = 0; k < 3; k++) {
        int p[2];
        CHECK(pipe(p) == 0);
        fflush(NULL);
        const pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            dup2(p[1], 2);
            if (k == 2) util_set_quiet_usage(1);
            else util_set_error_delay(k == 0 ? 5000 : 200);
            die_code(EXIT_USAGE, "the error of case %d", k);
        }
        close(p[1]);
        if (k != 1) {
            struct timespec t = {0, 300000000};
            nanosleep(&t, NULL);
            kill(pid, SIGTERM);
        }
        char buf[256] = "";
        const ssize_t n = read(p[0], buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        close(p[0]);
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_USAGE, "case %d: status %d", k, st);
        if (k == 1)
            CHECK_MSG(strstr(buf, "error: the error of case 1\n") != NULL, "case 1: '%s'", buf);
        else
            CHECK_MSG(buf[0] == 0, "case %d said '%s'", k, buf);
    }
}
