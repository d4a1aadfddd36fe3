/* test_gpu_determinism.c: --deterministic (gpunet.h: GPUNET_DETERMINISTIC). A deterministic GpuNet
 * runs only algorithms that cuDNN reports CUDNN_DETERMINISTIC, chosen from cuDNN's heuristics
 * (whose order does not depend on timings), so the same step gives the same bits on every call
 * and in every run; ./nvcnn --deterministic says so in its header and its plan line.
 *
 * On the emulated device NVCNN_EMU_FIND=nondeterministic ranks the non-deterministic algorithms
 * (backward data ALGO_0, backward filter ALGO_0 and ALGO_3: atomics) first in Find and in the
 * heuristics, and those add their partial sums in an order drawn afresh for every call (seeded
 * by NVCNN_EMU_SEED): a run that took one of them gives other bits on its next call or with
 * another seed, which the tests show too (without --deterministic), so that they can fail. On a
 * GPU the same checks run with whatever cuDNN ranks first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "layers/layers.h"
#include "models.h"
#include "testutil.h"
#include "train.h"
#ifdef NVCNN_GPU_EMU
#include "emu/emu_counts.h"
#endif

/* A reduced resnet18 (32x32, widths / 16, batch 4): 3x3, 1x1 and 7x7 convolutions, strided
 * and not, so that every direction has several algorithms to choose from. */
static Net *small_resnet(void) {
    Net *net = model_build_reduced(model_find("resnet18"), 4, 10, 32, 16, ACT_RELU);
    net_finalize(net, 7);
    Rng r;
    rng_seed(&r, 21);
    tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
    return net;
}

/* One forward and backward pass on g: the parameter gradients into out (params_total floats). */
static void grads_of(GpuNet *g, Net *net, const int32_t *labels, float *out) {
    net->training = 1;
    gpunet_set_input(g, net->node[net->input].data);
    gpunet_set_labels(g, labels);
    gpunet_forward(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    gpunet_download_grads(g);
    memcpy(out, net->grads, net->params_total * sizeof *out);
}

/* How many convolution directions g runs, and how many of them with an algorithm cuDNN reports
 * non-deterministic. */
static void count_algorithms(const GpuNet *g, const Net *net, int *dirs, int *nondet) {
    *dirs = *nondet = 0;
    for (int li = 0; li < net->nlayer; li++)
        for (int d = 0; d < 3; d++) {
            int det = 1;
            if (gpunet_conv_algorithm(g, li, d, &det) < 0) continue;
            (*dirs)++;
            *nondet += !det;
        }
}

static void repeat_bits(int precision) {
    const char *pn = precision_name((Precision)precision);
    Net *net = small_resnet();
    int32_t labels[4] = {1, 7, 3, 0};
    const size_t P = net->params_total;
    float *a = xmalloc(P * 4), *b = xmalloc(P * 4), *c = xmalloc(P * 4);
    /* deterministic: two calls of one GpuNet, and a second GpuNet (planned again) */
#ifdef NVCNN_GPU_EMU
    const long finds = emu_cudnn_finds(), heuristics = emu_cudnn_heuristics();
#endif
    GpuNet *g = tu_gpunet(net, precision, GPUNET_DETERMINISTIC);
    if (!g) return;
#ifdef NVCNN_GPU_EMU
    /* its choice comes from the heuristics, never from timings (which vary from run to run) */
    CHECK_MSG(emu_cudnn_finds() == finds && emu_cudnn_heuristics() > heuristics, "%s --deterministic: %ld Find calls, %ld heuristics calls", pn,
              emu_cudnn_finds() - finds, emu_cudnn_heuristics() - heuristics);
#endif
    int dirs, nondet;
    count_algorithms(g, net, &dirs, &nondet);
    CHECK_MSG(dirs > 0 && nondet == 0, "%s --deterministic: %d of %d convolution directions run a non-deterministic algorithm", pn, nondet,
              dirs);
    grads_of(g, net, labels, a);
    grads_of(g, net, labels, b);
    gpunet_free(g);
    g = tu_gpunet(net, precision, GPUNET_DETERMINISTIC);
    if (!g) return;
    grads_of(g, net, labels, c);
    gpunet_free(g);
    CHECK_MSG(memcmp(a, b, P * 4) == 0, "%s --deterministic: a second backward pass gave other gradients", pn);
    CHECK_MSG(memcmp(a, c, P * 4) == 0, "%s --deterministic: a second GpuNet gave other gradients", pn);
    /* without it: the algorithms ranked first (non-deterministic ones on the emulated device) */
    g = tu_gpunet(net, precision, 0);
    if (!g) return;
    count_algorithms(g, net, &dirs, &nondet);
    grads_of(g, net, labels, a);
    grads_of(g, net, labels, b);
    gpunet_free(g);
    size_t differ = 0;
    for (size_t i = 0; i < P; i++) differ += memcmp(&a[i], &b[i], 4) != 0;
    printf("    %s: --deterministic: %d convolution directions, all deterministic, the same bits every time; without it %d of %d "
           "non-deterministic, %zu of %zu gradients changed on the second call\n",
           pn, dirs, nondet, dirs, differ, P);
#ifdef NVCNN_GPU_EMU
    /* the check above could not fail if nothing non-deterministic ran: here something did */
    CHECK_MSG(nondet > 0 && differ > 0, "%s without --deterministic: %d non-deterministic directions, %zu gradients changed", pn, nondet,
              differ);
#endif
    net_free(net);
    free(a), free(b), free(c);
}

TEST(gpu_deterministic_steps_repeat_bit_for_bit) {
#ifdef NVCNN_GPU_EMU
    setenv("NVCNN_EMU_FIND", "nondeterministic", 1);
#endif
    if (!tu_select_gpu()) return;
    repeat_bits(PREC_FP32);
    repeat_bits(PREC_TF32);
}

/* ./nvcnn --deterministic: the header and the plan line say so, and two runs (on the emulated
 * device with different NVCNN_EMU_SEED, as two runs on a GPU time their algorithms differently)
 * write the same checkpoint byte for byte; without it, on the emulated device, they do not. */
TEST(gpu_deterministic_runs_write_equal_checkpoints) {
    if (tu_gpus() == 0) return;
    const char *t = th_tmpdir();
    const char *common = "NVCNN_EMU_FIND=nondeterministic ./nvcnn --model=lenet --device=gpu --batch_size=4 --num_batches=3 "
                         "--nstep_burnin=0 --num_classes=10 --display_every=1";
    char cmd[2048], dir[400], *o = NULL;
    uint8_t *ck[2][2] = {{NULL, NULL}, {NULL, NULL}};
    size_t len[2][2] = {{0, 0}, {0, 0}};
    for (int det = 0; det < 2; det++)
        for (int run = 0; run < 2; run++) {
            snprintf(dir, sizeof dir, "%.300s/det%d-run%d", t, det, run);
            snprintf(cmd, sizeof cmd, "NVCNN_EMU_SEED=%d %s%s --log_dir=%s", 11 + run, common, det ? " --deterministic" : "", dir);
            int rc = th_run(cmd, &o);
            CHECK_MSG(rc == 0, "%s: exit %d\n%s", cmd, rc, o ? o : "");
            if (det) {
                CHECK_MSG(o && strstr(o, "Deterministic: yes (--deterministic") &&
                              strstr(o, "looked up in cuDNN's heuristics, deterministic algorithms only") &&
                              strstr(o, " MiB (each algorithm the heuristics' first deterministic one within "),
                          "want the deterministic header and plan lines in:\n%s", o ? o : "");
            } else {
                CHECK_MSG(o && strstr(o, "Deterministic: no (") && strstr(o, " measured, ") && strstr(o, " MiB (each algorithm the fastest within "),
                          "want the default lines in:\n%s", o ? o : "");
            }
            free(o);
            o = NULL;
            char f[450];
            snprintf(f, sizeof f, "%s/ckpt-3.nvcnn", dir);
            ck[det][run] = tu_read_file(f, &len[det][run]);
            CHECK_MSG(ck[det][run] != NULL, "no %s", f);
        }
    const int same_det = ck[1][0] && ck[1][1] && len[1][0] == len[1][1] && memcmp(ck[1][0], ck[1][1], len[1][0]) == 0;
    const int same_default = ck[0][0] && ck[0][1] && len[0][0] == len[0][1] && memcmp(ck[0][0], ck[0][1], len[0][0]) == 0;
    printf("    two runs' checkpoints: --deterministic %s, without it %s\n", same_det ? "equal" : "DIFFER", same_default ? "equal" : "differ");
    CHECK_MSG(same_det, "two --deterministic runs wrote different checkpoints");
#ifdef NVCNN_GPU_EMU
    CHECK_MSG(!same_default, "two runs without --deterministic, with non-deterministic algorithms and other seeds, wrote equal checkpoints");
#endif
    for (int i = 0; i < 2; i++) free(ck[i][0]), free(ck[i][1]);
}
