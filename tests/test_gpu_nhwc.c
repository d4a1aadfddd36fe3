/* test_gpu_nhwc.c: the GPU backend's NHWC layout (gpunet.h: GPUNET_NHWC, --data_format). The host
 * sees NCHW whatever the device computes in, so that checkpoints are one format:
 *   - parameters and momentum uploaded to an NHWC GpuNet (filters permuted to KRSC) and
 *     downloaded again (permuted back) keep every bit, and so in NCHW;
 *   - a run's checkpoint moves CPU -> GPU NHWC -> GPU NCHW -> CPU, each run resuming at its step,
 *     and its weights stay close to the same chain run on the CPU alone;
 *   - on the emulated device, cuDNN runs no NCHW <-> NHWC transposes in NHWC, where NCHW in the
 *     16-bit precisions pays them (tests/emu/cudnn.cc counts them as cuDNN documents them).
 * The layers' parity in the other layout, and every model's steps, are test_gpu.c's
 * (gpu_layers_match_cpu_in_the_other_layout, gpu_every_model_other_layout_*). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "config.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "models.h"
#include "testutil.h"
#include "train.h"
#ifdef NVCNN_GPU_EMU
#include "emu/emu_counts.h"
#endif

/* A small net with every filter shape the permutation meets: 3 input channels (not a multiple of
 * anything), 5x3 kernels (rows and columns told apart), a grouped convolution, a bias. */
static Net *filters_net(void) {
    Net *net = net_new(2, 3, 9, 8);
    int x = conv_create(net, net->input, 6, 5, 3, 1, 1, PAD_SAME, 1);
    x = conv_create_grouped(net, x, 4, 3, 3, 2, 2, PAD_SAME, 0, 2);
    x = fc_create(net, flatten_create(net, x), 5, 1);
    softmax_xent_create(net, x);
    net_finalize(net, 3);
    return net;
}

TEST(gpu_nhwc_parameters_and_momentum_survive_both_layouts) {
    if (!tu_select_gpu()) return;
    Net *net = filters_net();
    const size_t P = net->params_total;
    Rng r;
    rng_seed(&r, 9);
    float *w = xmalloc(P * 4), *v = xmalloc(P * 4), *back = xmalloc(P * 4);
    tu_fill_uniform(w, P, -1, 1, &r);
    tu_fill_uniform(v, P, -1, 1, &r);
    const unsigned layouts[2] = {GPUNET_NHWC, GPUNET_NCHW};
    const int precs[2] = {PREC_FP32, PREC_FP16};
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < 2; p++) {
            const char *what = layouts[k] == GPUNET_NHWC ? "NHWC" : "NCHW";
            memcpy(net->params, w, P * 4);
            char err[512];
            int oom;
            GpuNet *g = gpunet_new(net, 0, precs[p], GPUNET_WORKSPACE_DEFAULT, layouts[k], err, sizeof err, &oom);
            CHECK_MSG(g != NULL, "%s: %s", what, err);
            if (!g) continue;
            CHECK_MSG(gpunet_nhwc(g) == (layouts[k] == GPUNET_NHWC), "%s: gpunet_nhwc says %d", what, gpunet_nhwc(g));
            gpunet_upload_velocity(g, v);
            memset(net->params, 0, P * 4);
            gpunet_download_params(g);
            gpunet_download_velocity(g, back);
            CHECK_MSG(memcmp(net->params, w, P * 4) == 0, "%s %s: the parameters changed on their way through the device", what,
                      precision_name((Precision)precs[p]));
            CHECK_MSG(memcmp(back, v, P * 4) == 0, "%s %s: the momentum changed on its way through the device", what,
                      precision_name((Precision)precs[p]));
            gpunet_free(g);
        }
    net_free(net);
    free(w), free(v), free(back);
}

/* 3 + 3 + 3 + 3 steps of lenet, fp32: CPU, then GPU NHWC, GPU NCHW and CPU again, each from the
 * last one's checkpoint and resuming at its step; the last checkpoint's weights against the same
 * four runs on the CPU alone, within 1e-4 of the largest weight (gpu_checkpoint_resumes_on_cpu_
 * and_back's limit for 12 steps through the GPU in fp32; measured here on the emulated device:
 * 5.6e-7). The 9 steps after the first checkpoint move the weights by several 1e-3 of the
 * largest: a resume that lost or scrambled them (a filter left in KRSC) misses by that much. */
TEST(gpu_nhwc_checkpoint_moves_cpu_gpu_nhwc_gpu_nchw_cpu) {
    if (tu_gpus() == 0) return;
    const char *t = th_tmpdir();
    const char *common = "./nvcnn --model=lenet --num_classes=10 --batch_size=16 --nstep_burnin=0";
    const char *runs[4] = {"--device=cpu", "--device=gpu --data_format=NHWC", "--device=gpu --data_format=NCHW", "--device=cpu"};
    const char *alone[4] = {"--device=cpu", "--device=cpu", "--device=cpu", "--device=cpu"};
    char cmd[1024], want[600], path[600], *o = NULL;
    float *w[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    for (int chain = 0; chain < 2; chain++) {
        const char *const *dev = chain == 0 ? runs : alone;
        for (int k = 0; k < 4; k++) {
            snprintf(cmd, sizeof cmd, "%s %s --num_batches=%d --log_dir=%s/c%d", common, dev[k], 3 * (k + 1), t, chain);
            int rc = th_run(cmd, &o);
            CHECK_MSG(rc == 0, "%s: exit %d\n%s", cmd, rc, o);
            if (k > 0) {
                snprintf(want, sizeof want, "Restored from checkpoint %s/c%d/ckpt-%d.nvcnn at step %d\n", t, chain, 3 * k, 3 * k);
                CHECK_MSG(o && strstr(o, want), "want '%s' in:\n%s", want, o);
            }
            if (chain == 0 && (k == 1 || k == 2)) {
                const char *line = k == 1 ? "Data format: NHWC" : "Data format: NCHW";
                CHECK_MSG(o && strstr(o, line), "%s: no '%s' in:\n%s", cmd, line, o);
            }
            free(o);
            o = NULL;
        }
        snprintf(path, sizeof path, "%s/c%d/ckpt-12.nvcnn", t, chain);
        w[chain] = tu_ckpt_params(path, "lenet", 10, &n[chain]);
    }
    if (w[0] && w[1] && n[0] == n[1]) {
        double d = 0, m = 1e-30;
        for (size_t i = 0; i < n[0]; i++) {
            d = tu_worse(d, fabs((double)w[0][i] - w[1][i]));
            m = fmax(m, fabs((double)w[1][i]));
        }
        printf("    3 + 3 + 3 + 3 steps cpu -> gpu NHWC -> gpu NCHW -> cpu against the cpu alone: weights' max relative difference %.2e\n",
               d / m);
        CHECK_MSG(d / m <= 1e-4, "weights differ by %.3g of the largest", d / m);
        tu_parity_row("lenet 3 + 3 + 3 + 3 steps cpu -> gpu NHWC -> gpu NCHW -> cpu: weights", "fp32", d, d / m, 1e-4);
    }
    free(w[0]), free(w[1]);
}

/* cuDNN's tensor-core kernels are NHWC: a 16-bit convolution given NCHW tensors transposes them
 * inside cuDNN (the emulated cuDNN counts each, as its developer guide describes them). In NHWC
 * there are none; in NCHW there are, so that the count is seen to count. */
TEST(gpu_nhwc_convolutions_run_no_transposes) {
#ifndef NVCNN_GPU_EMU
    if (tu_gpus() > 0) th_skip("the transposes inside cuDNN are counted on the emulated device only");
#else
    if (!tu_select_gpu()) return;
    const int precs[2] = {PREC_FP16, PREC_BF16};
    for (int p = 0; p < 2; p++) {
        long count[2];
        const unsigned layouts[2] = {GPUNET_NHWC, GPUNET_NCHW};
        for (int k = 0; k < 2; k++) {
            Net *net = model_build_reduced(model_find("resnet18"), 2, 10, 32, 16, ACT_RELU);
            net_finalize(net, 5);
            Rng r;
            rng_seed(&r, 4);
            tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
            int32_t labels[2] = {1, 2};
            char err[512];
            int oom;
            GpuNet *g = gpunet_new(net, 0, precs[p], GPUNET_WORKSPACE_DEFAULT, layouts[k], err, sizeof err, &oom);
            CHECK_MSG(g != NULL, "%s", err);
            if (!g) return;
            net->training = 1;
            gpunet_set_input(g, net->node[net->input].data);
            gpunet_set_labels(g, labels);
            const long t0 = emu_cudnn_transposes();
            gpunet_forward(g);
            gpunet_backward(g, 1.0f, NULL, NULL);
            gpunet_sync(g);
            count[k] = emu_cudnn_transposes() - t0;
            gpunet_free(g);
            net_free(net);
        }
        printf("    reduced resnet18 %s, one step: %ld transposes inside cuDNN in NHWC, %ld in NCHW\n", precision_name((Precision)precs[p]),
               count[0], count[1]);
        CHECK_MSG(count[0] == 0, "%s NHWC: %ld transposes", precision_name((Precision)precs[p]), count[0]);
        CHECK_MSG(count[1] > 0, "%s NCHW: no transposes counted: the count tests nothing", precision_name((Precision)precs[p]));
    }
#endif
}

/* NHWC in fp16 and bf16 pads a convolution's input channels to a multiple of 8 where they are not
 * one (gpunet_conv_channels: the first layer's 3 colours become 8), with zero channels in the
 * input and the filter. The filter's padding must stay zero through training (a value there
 * would meet the input's zero channels in forward and hide, but not in backward data); its real
 * channels must be the layer's weights (the KRSC permutation of the host's KCRS ones, in the
 * storage type: within its rounding, 2^-8 relative for bf16). 3 steps of a reduced resnet18 with
 * momentum and weight decay, then the filter as the device convolved with it. */
TEST(gpu_nhwc_padding_channels_stay_zero) {
    if (!tu_select_gpu()) return;
    const int precs[2] = {PREC_FP16, PREC_BF16};
    for (int p = 0; p < 2; p++) {
        const char *pn = precision_name((Precision)precs[p]);
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            Net *net = model_build_reduced(model_find("resnet18"), 2, 10, 32, 16, ACT_RELU);
            net_finalize(net, 6);
            int li = -1;
            for (int i = 0; i < net->nlayer && li < 0; i++)
                if (strcmp(net->layer[i].ops->type, "conv") == 0) li = i;
            const Conv *c = (const Conv *)net->layer[li].priv;
            char err[512];
            int oom;
            GpuNet *g = gpunet_new(net, 0, precs[p], GPUNET_WORKSPACE_DEFAULT, nhwc ? GPUNET_NHWC : GPUNET_NCHW, err, sizeof err, &oom);
            CHECK_MSG(g != NULL, "%s", err);
            if (!g) return;
            const int ch = gpunet_conv_channels(g, li);
            CHECK_MSG(ch == (nhwc ? 8 : 3), "%s %s: the first convolution's %d input channels are %d on the device", pn,
                      nhwc ? "NHWC" : "NCHW", c->cin, ch);
            if (!nhwc) {
                gpunet_free(g);
                net_free(net);
                continue;
            }
            Rng r;
            rng_seed(&r, 8);
            tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
            int32_t labels[2] = {3, 5};
            Dist d = {0, 1, 0, 1, 0};
            TrainerConfig tc;
            memset(&tc, 0, sizeof tc);
            tc.opt.momentum = 0.9;
            tc.opt.weight_decay = 1e-2;
            tc.loss_scale = precs[p] == PREC_FP16 ? 128 : 1;
            Trainer t;
            trainer_init(&t, net, &d, &tc, g);
            for (int s = 0; s < 3; s++) trainer_step(&t, labels, 0.05);
            trainer_sync_host(&t);
            gpunet_forward(g); /* the filter of a forward with the weights the steps left */
            const size_t n = (size_t)c->cout * c->kh * c->kw * 8;
            float *w = xmalloc(n * sizeof *w);
            CHECK(gpunet_download_conv_filter(g, li, w) == n);
            const float *host = net->params + net->param[c->pw].off; /* KCRS */
            size_t nonzero = 0, wrong = 0;
            double moved = 0;
            for (int k = 0; k < c->cout; k++)
                for (int rs = 0; rs < c->kh * c->kw; rs++)
                    for (int q = 0; q < 8; q++) {
                        const float v = w[((size_t)k * c->kh * c->kw + rs) * 8 + q];
                        if (q >= c->cin) {
                            nonzero += v != 0.0f;
                            continue;
                        }
                        const float h = host[((size_t)k * c->cin + q) * c->kh * c->kw + rs];
                        wrong += fabsf(v - h) > 0x1p-8f * fabsf(h) + 1e-30f;
                        moved = fmax(moved, fabs((double)h));
                    }
            printf("    %s NHWC: first convolution 3 -> 8 channels; after 3 steps %zu of %zu padding weights non-zero, %zu of %zu real "
                   "ones off the layer's weights\n",
                   pn, nonzero, n / 8 * 5, wrong, n / 8 * 3);
            CHECK_MSG(nonzero == 0, "%s: %zu padding weights are not zero", pn, nonzero);
            CHECK_MSG(wrong == 0 && moved > 0, "%s: %zu of the filter's real weights differ from the layer's", pn, wrong);
            free(w);
            trainer_free(&t);
            gpunet_free(g);
            net_free(net);
        }
    }
}
