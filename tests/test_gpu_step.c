/* test_gpu_step.c: the training step decided on the device (gpunet.h: gpunet_step):
 *   - its update against the CPU optimizer (optim.c) on the same gradients, for plain SGD,
 *     momentum, Nesterov, weight decay, LARC clip and LARC scale, with the gradients scaled by a
 *     loss scale that the device removes;
 *   - non-finite gradients (from an infinite input) skip the step on the device: weights and momentum keep
 *     their bits, the dynamic loss scale halves (down to 1, not below), and grows after 2000 good
 *     steps in a row, as the host's rule (train.c) says; the host's account agrees;
 *   - reading the results late (Trainer.lazy, as nvcnn's loop does) gives the same losses and
 *     weights, bit for bit, as reading them every step.
 * Where no GPU exists every test skips with "no GPU" and the runner hands it to the emulated
 * device (tests/harness.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "layers/layers.h"
#include "optim.h"
#include "testutil.h"
#include "train.h"
#include "util.h"

enum { B = 4, CLASSES = 5 };

/* A small net with every kind of parameter tensor (convolution weights and bias, batch-norm scale
 * and offset, fully connected weights and bias), its input and labels drawn from seed. */
static Net *small_net(uint64_t seed, int32_t *labels) {
    Net *net = net_new(B, 3, 8, 8);
    int x = conv_create(net, net->input, 6, 3, 3, 1, 1, PAD_SAME, 1);
    x = act_create(net, bn_create(net, x), ACT_RELU, 0);
    x = conv_create(net, x, 8, 3, 3, 2, 2, PAD_SAME, 0);
    softmax_xent_create(net, fc_create(net, flatten_create(net, x), CLASSES, 1));
    net_finalize(net, seed);
    Rng r;
    rng_seed(&r, seed + 100);
    tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
    for (int i = 0; i < B; i++) labels[i] = (int32_t)rng_below(&r, CLASSES);
    return net;
}

static GpuNet *gpu_for(Net *net, int precision) {
    char err[256];
    int oom;
    GpuNet *g = gpunet_new(net, 0, precision, GPUNET_WORKSPACE_DEFAULT, GPUNET_DETERMINISTIC, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "gpunet_new: %s", err);
    return g;
}

typedef struct StepCase {
    const char *name;
    double momentum, weight_decay, larc_eta;
    int nesterov, larc_scale;
} StepCase;

/* Two device steps (the second with momentum from the first) against optim_step on the gradients
 * the device computed, unscaled on the host as train.c's CPU path does. The limit: a GPU may fuse
 * each multiply-add of the update (nvcc contracts a * b + c), which changes each of its four
 * roundings by up to half an ulp of the terms added, not of the sum; and LARC's norms are double
 * sums in another order, whose float factor may land one ulp away. So each difference is taken
 * relative to the terms that make the element: m |v'| + |g| for the momentum v = m v' + g (g the
 * step's gradient after weight decay and LARC), |w'| + lr (|g| + m |v|) (Nesterov) or |w'| + lr |v|
 * for the weight; 2^-20 of that allows 16 ulps. Relative to |v| alone, a momentum whose two terms
 * nearly cancel failed on an H200 (3.2e-06, Nesterov) with the right update; the emulated device
 * measured 0 (the same operations as the host, none fused). */
static void step_against_cpu(const StepCase *k) {
    int32_t labels[B];
    Net *net = small_net(3, labels);
    GpuNet *g = gpu_for(net, PREC_FP32);
    if (!g) return;
    const size_t P = net->params_total;
    OptimConfig oc = {k->momentum, k->nesterov, k->weight_decay, k->larc_eta, k->larc_scale};
    Optimizer o;
    optim_init(&o, &oc, P);
    const GpuStepConfig sc = {k->momentum, k->weight_decay, k->larc_eta, k->nesterov, k->larc_scale, 0};
    gpunet_step_setup(g, &sc);
    const double scale = 64, lr = 0.05;
    gpunet_step_state(g, scale, 0, 0);
    gpunet_set_input(g, net->node[net->input].data);
    gpunet_set_labels(g, labels);
    net->labels = labels;
    net->training = 1;
    float *w0 = malloc(P * sizeof *w0), *wc = malloc(P * sizeof *wc), *v = malloc(P * sizeof *v), *v0 = malloc(P * sizeof *v0);
    double worst = 0;
    for (int s = 0; s < 2; s++) {
        gpunet_download_params(g);
        memcpy(w0, net->params, P * sizeof *w0);
        gpunet_forward(g);
        gpunet_queue_stats(g, 1);
        gpunet_backward(g, GPUNET_DEVICE_SCALE, NULL, NULL);
        gpunet_download_grads(g); /* scaled by 64: the device unscales in its update */
        const float inv = (float)(1.0 / scale);
        for (size_t i = 0; i < P; i++) net->grads[i] *= inv;
        memcpy(v0, o.velocity, P * sizeof *v0);
        optim_step(&o, net, lr); /* on the host copy: net->params = w0 */
        memcpy(wc, net->params, P * sizeof *wc);
        gpunet_step(g, lr);
        GpuStepResult r[GPUNET_RESULTS];
        int nr = gpunet_step_results(g, r);
        CHECK_MSG(nr == 1 && r[0].finite && r[0].scale == (float)scale, "%s: %d results, finite %d, scale %g", k->name, nr, nr ? r[0].finite : -1,
                  nr ? (double)r[0].scale : 0.0);
        gpunet_download_params(g);
        gpunet_download_velocity(g, v);
        for (size_t i = 0; i < P; i++) {
            const double vm = k->momentum * fabs(v0[i]), gi = fabs(o.velocity[i] - k->momentum * v0[i]);
            const double tv = vm + gi + 1e-30;
            const double tw = fabs(w0[i]) + lr * (k->nesterov ? gi + k->momentum * fabs(o.velocity[i]) : fabs(o.velocity[i])) + 1e-30;
            worst = tu_worse(worst, fabs((double)net->params[i] - wc[i]) / tw);
            worst = tu_worse(worst, fabs((double)v[i] - o.velocity[i]) / tv);
        }
        const double moved = fabs((double)wc[0] - w0[0]) + fabs((double)wc[P / 2] - w0[P / 2]);
        CHECK_MSG(moved > 0, "%s: the update moved nothing", k->name);
    }
    printf("    %-22s weights and momentum, largest difference %.3g of the element (limit 2^-20)\n", k->name, worst);
    char what[128];
    snprintf(what, sizeof what, "device step against optim.c, %s: weights and momentum", k->name);
    tu_parity_row(what, "fp32", worst, worst, 0x1p-20);
    CHECK_MSG(worst <= 0x1p-20, "%s: %.3g", k->name, worst);
    optim_free(&o);
    free(w0), free(wc), free(v), free(v0);
    gpunet_free(g);
    net_free(net);
}

TEST(gpu_step_update_matches_cpu_optimizer) {
    if (!tu_select_gpu()) return;
    static const StepCase cases[] = {
        {"SGD", 0, 0, 0, 0, 0},
        {"momentum", 0.9, 0, 0, 0, 0},
        {"Nesterov", 0.9, 0, 0, 1, 0},
        {"Nesterov, weight decay", 0.9, 1e-2, 0, 1, 0},
        {"LARC clip", 0.9, 1e-2, 0.002, 1, 0},
        {"LARC scale", 0.9, 1e-2, 0.002, 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) step_against_cpu(&cases[k]);
}

/* A step whose gradients are not finite: an infinite input makes the loss and every gradient
 * inf or NaN (the step's work is then the same whether it runs as a CUDA Graph or not). */
static void step_with_inf(Trainer *t, const int32_t *labels, int inject) {
    float *x = t->net->node[t->net->input].data;
    const float keep = x[7];
    if (inject) x[7] = INFINITY;
    trainer_step_begin(t, labels);
    trainer_step_end(t, 0.05);
    x[7] = keep;
}

TEST(gpu_step_skips_non_finite_and_moves_the_loss_scale) {
    if (!tu_select_gpu()) return;
    int32_t labels[B];
    Net *net = small_net(5, labels);
    GpuNet *g = gpu_for(net, PREC_FP32);
    if (!g) return;
    const size_t P = net->params_total;
    Dist d = {0, 1, 0, 1, 0};
    TrainerConfig tc;
    tu_trainer_defaults(&tc, 4);
    Trainer t;
    trainer_init(&t, net, &d, &tc, g);
    t.lazy = 1; /* the host learns of the skips only when it reads the results */
    float *w = malloc(P * 4), *v = malloc(P * 4), *w2 = malloc(P * 4), *v2 = malloc(P * 4);
    step_with_inf(&t, labels, 0);
    trainer_sync_host(&t); /* reads the result: the host's account follows the device's */
    CHECK_MSG(t.skipped_steps == 0 && t.loss_scale == 4, "a good step: %ld skipped, scale %g", t.skipped_steps, t.loss_scale);
    memcpy(w, net->params, P * 4);
    memcpy(v, t.opt.velocity, P * 4);
    /* two overflows in a row, read together: scale 4 -> 2 -> 1, and not below 1 on a third */
    step_with_inf(&t, labels, 1);
    step_with_inf(&t, labels, 1);
    step_with_inf(&t, labels, 1);
    trainer_sync_host(&t);
    CHECK_MSG(t.skipped_steps == 3 && t.good_steps == 0 && t.loss_scale == 1, "three overflows: %ld skipped, %ld good, scale %g",
              t.skipped_steps, t.good_steps, t.loss_scale);
    CHECK_MSG(memcmp(w, net->params, P * 4) == 0 && memcmp(v, t.opt.velocity, P * 4) == 0,
              "a skipped step changed the weights or the momentum");
    double loss;
    int n = 0;
    while (trainer_next_loss(&t, &loss)) n++;
    CHECK_MSG(n == 4, "%d losses for 4 steps (a skipped step has its forward's loss too)", n);
    /* growth: 999 good steps in a row so far (as a checkpoint restores them), then one more: not
     * yet; 1999, then one more: doubled */
    t.good_steps = 999;
    t.loss_scale = 8;
    trainer_sync_device(&t);
    step_with_inf(&t, labels, 0);
    trainer_sync_host(&t);
    CHECK_MSG(t.loss_scale == 8 && t.good_steps == 1000, "after 1000 good steps: scale %g, %ld good", t.loss_scale, t.good_steps);
    step_with_inf(&t, labels, 0); /* its result carries the scale the device used: the host dies if it is not 8 */
    trainer_sync_host(&t);
    t.good_steps = 1999;
    trainer_sync_device(&t);
    step_with_inf(&t, labels, 0);
    trainer_sync_host(&t);
    CHECK_MSG(t.loss_scale == 16 && t.good_steps == 2000, "after 2000 good steps: scale %g, %ld good", t.loss_scale, t.good_steps);
    memcpy(w2, net->params, P * 4);
    memcpy(v2, t.opt.velocity, P * 4);
    CHECK_MSG(memcmp(w, w2, P * 4) != 0 && memcmp(v, v2, P * 4) != 0, "a good step did not update");
    printf("    skips: 3 (scale 4 -> 2 -> 1 -> 1), weights and momentum unchanged; 1000th good step: scale 8; 2000th: 8 -> 16\n");
    trainer_free(&t);
    gpunet_free(g);
    net_free(net);
    free(w), free(v), free(w2), free(v2);
}

/* The same 6 steps read every step and read once at the end: the same losses and weights, bit for
 * bit (the host reading late changes nothing on the device). In fp16, whose 16-bit weights and
 * gradients the step's tail handles too. */
TEST(gpu_step_results_read_late_are_the_same) {
    if (!tu_select_gpu()) return;
    double loss[2][6];
    float *w[2];
    for (int lazy = 0; lazy < 2; lazy++) {
        int32_t labels[B];
        Net *net = small_net(7, labels);
        GpuNet *g = gpu_for(net, PREC_FP16);
        if (!g) return;
        Dist d = {0, 1, 0, 1, 0};
        TrainerConfig tc;
        tu_trainer_defaults(&tc, 128);
        Trainer t;
        trainer_init(&t, net, &d, &tc, g);
        t.lazy = lazy;
        for (int s = 0; s < 6; s++) {
            trainer_step_begin(&t, labels);
            double l = trainer_step_end(&t, 0.05 * (s + 1)); /* a learning rate that changes every step */
            if (!lazy) loss[0][s] = l;
            CHECK_MSG(lazy ? isnan(l) : isfinite(l), "step %d: %g returned (lazy %d)", s, l, lazy);
        }
        if (lazy) {
            trainer_fetch(&t);
            for (int s = 0; s < 6; s++) {
                double secs = NAN;
                CHECK_MSG(trainer_next_result(&t, &loss[1][s], &secs), "loss %d missing", s);
                CHECK_MSG(secs > 0 && secs < 60, "step %d: its device time %g s", s, secs);
            }
            double extra;
            CHECK(!trainer_next_loss(&t, &extra));
        }
        trainer_sync_host(&t);
        w[lazy] = malloc(net->params_total * 4);
        memcpy(w[lazy], net->params, net->params_total * 4);
        if (lazy) CHECK_MSG(memcmp(w[0], w[1], net->params_total * 4) == 0, "the weights differ when the results are read late");
        trainer_free(&t);
        gpunet_free(g);
        net_free(net);
    }
    for (int s = 0; s < 6; s++) CHECK_MSG(loss[0][s] == loss[1][s], "step %d: loss %.9g read at once, %.9g read late", s, loss[0][s], loss[1][s]);
    printf("    6 fp16 steps: losses %.6f .. %.6f, the same bits read at once and late\n", loss[0][0], loss[0][5]);
    free(w[0]), free(w[1]);
}

/* Images/sec is the device's pace: nvcnn queues its GPU steps without waiting for them (the
 * results are read on the rows), so a host clock around each step sees how long queueing took,
 * not how long the step took, and their mean rate came out hundreds of times too high (the first
 * GPU run: 1.46 million img/s for resnet50). The steps are timed by events on the device
 * (GpuStepResult.seconds). The check, independent of startup: two runs that differ only in their
 * number of steps; the extra steps' wall time gives the pace the run really kept, and the reported
 * rate must lie within [1/1.5, 3] of it. Above: a step's device time cannot be much less than the
 * pace where the device is the bottleneck (the queueing clock was 500 times less); below: the device
 * cannot take longer than the wall clock. 3, not 1.5, above: where the host is the bottleneck, the
 * device idles between steps, outside the events. So that the device is the bottleneck and the
 * check can fail, the model is one the device needs time for: resnet50 fp16 at batch 128 on a GPU
 * (about 30 ms a step on an H100, 40 extra steps), lenet on the emulated device (whose every
 * kernel runs on this CPU, 16 extra steps). */
/* alone: it compares times with the wall clock */
TEST_SERIAL(gpu_images_per_sec_is_the_devices_pace) {
    if (tu_gpus() == 0) return;
#ifdef NVCNN_GPU_EMU
    const char *model = "--model=lenet --batch_size=8";
    enum { BATCH = 8, FEW = 6, MANY = 22, BURNIN = 4 };
#else
    const char *model = "--model=resnet50 --precision=fp16 --batch_size=128";
    enum { BATCH = 128, FEW = 10, MANY = 50, BURNIN = 4 };
#endif
    const int steps[2] = {FEW, MANY};
    double wall[2] = {0, 0}, rate[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char cmd[512], *o = NULL;
        snprintf(cmd, sizeof cmd, "./nvcnn %s --device=gpu --num_batches=%d --nstep_burnin=%d --display_every=%d", model, steps[k], BURNIN,
                 steps[k]);
        const double t0 = now_seconds();
        const int rc = th_run(cmd, &o);
        wall[k] = now_seconds() - t0;
        const char *q = o ? strstr(o, "Images/sec: ") : NULL;
        CHECK_MSG(rc == 0 && q && sscanf(q, "Images/sec: %lf", &rate[k]) == 1 && rate[k] > 0, "exit %d, no Images/sec line:\n%s", rc,
                  o ? o : "");
        free(o);
    }
    const double pace = (double)(MANY - FEW) * BATCH / (wall[1] - wall[0]); /* img/s of the extra steps */
    printf("    %s: %d and %d steps in %.2f and %.2f s: the %d extra steps' pace %.1f img/s; reported %.1f and %.1f img/s (%.2f and %.2f of it)\n",
           model, FEW, MANY, wall[0], wall[1], MANY - FEW, pace, rate[0], rate[1], rate[0] / pace, rate[1] / pace);
    CHECK_MSG(wall[1] > wall[0], "%d steps took %.2f s, %d steps %.2f s", MANY, wall[1], FEW, wall[0]);
    CHECK_MSG(rate[1] <= 3 * pace, "Images/sec %.1f: %.1f times the pace the run kept (%.1f img/s)", rate[1], rate[1] / pace, pace);
    CHECK_MSG(rate[1] >= pace / 1.5, "Images/sec %.1f: %.2f of the pace the run kept (%.1f img/s)", rate[1], rate[1] / pace, pace);
}

/* --loss_scale=3.3, which a float cannot hold: the device keeps the scale as a float, the host kept
 * the double and found them different at the first step ("the device's loss scale 3.3 differs
 * from the host's 3.3", exit 1). And a run resumed with --loss_scale given uses it, as its header
 * says (it took the checkpoint's: 1e10 in fp16 went on skipping every step under
 * "--loss_scale=1"), with the skipped steps it reports its own. */
TEST(gpu_loss_scale_a_float_cannot_hold_and_given_on_a_resume) {
    if (tu_gpus() == 0) return;
    char cmd[1600], d[700], *o = NULL;
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --num_classes=10 --batch_size=4 --num_batches=2 --nstep_burnin=0 --device=gpu --loss_scale=3.3 2>&1");
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Loss scale:  3.3\n") && strstr(o, "\n     2     1 ") && !strstr(o, "nvcnn: error"), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(d, sizeof d, "%s/scale-resume", th_tmpdir());
    const char *common = "./nvcnn --model=lenet --num_classes=10 --batch_size=4 --nstep_burnin=0 --device=gpu --precision=fp16";
    snprintf(cmd, sizeof cmd, "%s --num_batches=2 --loss_scale=1e10 --log_dir=%s 2>&1", common, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Skipped steps (inf/nan gradients): 2\n"), "1e10 in fp16: exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --num_batches=4 --loss_scale=1 --log_dir=%s 2>&1", common, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Restored from checkpoint ") && !strstr(o, "Skipped steps") && !strstr(o, "inf or nan"),
              "resumed with --loss_scale=1: exit %d:\n%s", rc, o);
    free(o);
}

/* fp16 with a dynamic loss scale that has come down to 1 and still skips every step: the training
 * diverged, said at the rows and at the end as with a static scale (it skipped every step, the
 * Loss column nan, with the count at the end only). A run resumed from its checkpoint says that
 * its dynamic scale goes on from the checkpoint's, which the header does not show. */
TEST(gpu_dynamic_loss_scale_at_1_still_skipping_is_said) {
    if (tu_gpus() == 0) return;
    char cmd[1600], d[700], *o = NULL;
    snprintf(d, sizeof d, "%s/dyn-diverged", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "./nvcnn --device=gpu --model=lenet --num_classes=10 --batch_size=2 --precision=fp16 --learning_rate=1e5 --num_batches=24 "
             "--display_every=4 --nstep_burnin=0 --log_dir=%s 2>&1",
             d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "had inf or nan gradients and did not update the parameters (") &&
                  strstr(o, " of the run's steps had inf or nan gradients and did not update the parameters: the training diverged (a lower "
                            "--learning_rate)\n"),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "./nvcnn --device=gpu --model=lenet --num_classes=10 --batch_size=2 --precision=fp16 --num_batches=25 "
             "--nstep_burnin=0 --log_dir=%s 2>&1", d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Loss scale:  dynamic (from 65536)\n") && strstr(o, "(the dynamic loss scale goes on from the checkpoint's 1)\n"),
              "exit %d:\n%s", rc, o);
    free(o);
}
