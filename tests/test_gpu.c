/* test_gpu.c: the GPU backend against the CPU reference: every layer type's forward and backward
 * on random inputs, and whole training steps of small models. Where no GPU exists every test
 * prints "skipped: no GPU" and counts as skipped.
 *
 * Each comparison prints one row of the parity table (scripts/gpu_check.sh collects them):
 *     parity | TEST | LAYER | PRECISION | MAX ABS | MAX REL | TOLERANCE | pass or FAIL
 * MAX ABS is the largest |gpu - cpu| over everything compared; MAX REL the largest of the
 * quantities' relative errors (max |gpu - cpu| over max |cpu| per quantity), the figure held
 * against the tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "models.h"
#include "optim.h"
#include "testutil.h"
#include "train.h"

/* 1 if there is a GPU; 0 (test skipped) without one. Tests that launch ./nvcnn use this alone:
 * a context in the test's own process could keep the program off a GPU in EXCLUSIVE_PROCESS mode. */
static int gpu_present(void) { return tu_gpus() > 0; }

/* gpu_present(), and GPU 0 selected for this test's process (tests that use the backend here). */
static int have_gpu(void) {
    if (!gpu_present()) return 0;
    gpu_select(0);
    return 1;
}

/* max |a - b| / max(max |b|, 1e-6); *abs_err = max(*abs_err, max |a - b|) */
static double rel_err(const float *a, const float *b, size_t n, double *abs_err) {
    double d = 0, m = 1e-6;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    *abs_err = fmax(*abs_err, d);
    return d / m;
}

/* One row of the parity table (see the top of the file). */
static void parity_row(const char *what, int precision, double abs_err, double rel, double tol) {
    printf("    parity | %s | %s | %s | %.3e | %.3e | %.1e | %s\n", th_current_test(), what, precision_name((Precision)precision), abs_err,
           rel, tol, rel <= tol ? "pass" : "FAIL");
}

/* Builds input -> linear -> LAYER -> [flatten] -> fc(7) -> softmax_xent with `make`, runs one
 * forward and backward on the CPU and on the GPU from the same parameters and batch, and
 * compares the layer's output, its input gradient, every parameter gradient, the loss and the
 * state. */
typedef int (*MakeLayer)(Net *net, int in);

static void parity(const char *what, int n, int c, int h, int w, MakeLayer make, int precision, double tol) {
    Net *net = net_new(n, c, h, w);
    int x = act_create(net, net->input, ACT_LINEAR, 0);
    int y = make(net, x);
    int z = y;
    Shape sy = net_node(net, y)->shape;
    if (sy.h != 1 || sy.w != 1) z = flatten_create(net, z);
    z = fc_create(net, z, 7, 1);
    softmax_xent_create(net, z);
    net_finalize(net, 11);
    Rng r;
    rng_seed(&r, 5);
    tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
    int32_t *labels = xmalloc((size_t)n * sizeof *labels);
    for (int i = 0; i < n; i++) labels[i] = (int32_t)rng_below(&r, 7);
    char err[512];
    int oom;
    GpuNet *g = gpunet_new(net, 0, precision, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "%s: %s", what, err);
    if (!g) return;
    /* CPU */
    net->labels = labels;
    net->training = 1;
    net_forward(net);
    net_backward(net);
    double cpu_loss = net->loss;
    size_t ny = shape_count(sy), nx = shape_count(net_node(net, x)->shape);
    float *cy = xmalloc(ny * 4), *cdx = xmalloc(nx * 4), *cg = xmalloc((net->params_total + 1) * 4),
          *cs = xmalloc((net->state_total + 1) * 4);
    memcpy(cy, net_node(net, y)->data, ny * 4);
    memcpy(cdx, net_node(net, x)->grad, nx * 4);
    memcpy(cg, net->grads, net->params_total * 4);
    memcpy(cs, net->state, net->state_total * 4);
    /* GPU */
    gpunet_set_input(g, net->node[net->input].data);
    gpunet_set_labels(g, labels);
    gpunet_forward(g);
    double gpu_loss = gpunet_loss(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    float *gy = xmalloc(ny * 4), *gdx = xmalloc(nx * 4);
    gpunet_download_node(g, y, gy, 0);
    gpunet_download_node(g, x, gdx, 1);
    gpunet_download_grads(g);
    gpunet_download_params(g);
    double abs_err = fabs(gpu_loss - cpu_loss);
    double e[5] = {rel_err(gy, cy, ny, &abs_err), rel_err(gdx, cdx, nx, &abs_err), rel_err(net->grads, cg, net->params_total, &abs_err),
                   fabs(gpu_loss - cpu_loss) / fmax(fabs(cpu_loss), 1e-6), rel_err(net->state, cs, net->state_total, &abs_err)};
    const char *names[5] = {"output", "input gradient", "parameter gradients", "loss", "state"};
    double worst = 0;
    for (int k = 0; k < 5; k++) {
        CHECK_MSG(e[k] <= tol, "%s %s: %s relative error %.3g > %.3g", what, precision_name((Precision)precision), names[k], e[k], tol);
        worst = fmax(worst, e[k]);
    }
    parity_row(what, precision, abs_err, worst, tol);
    gpunet_free(g);
    net_free(net);
    free(labels), free(cy), free(cdx), free(cg), free(cs), free(gy), free(gdx);
}

static int mk_conv_same(Net *n, int x) { return conv_create(n, x, 8, 3, 3, 1, 1, PAD_SAME, 1); }
static int mk_conv_same_s2_uneven(Net *n, int x) { return conv_create(n, x, 6, 3, 3, 2, 2, PAD_SAME, 0); }
static int mk_conv_resnet7(Net *n, int x) { return conv_create(n, x, 4, 7, 7, 2, 2, PAD_SAME_RESNET, 0); }
static int mk_conv_valid11(Net *n, int x) { return conv_create(n, x, 5, 11, 11, 4, 4, PAD_VALID, 1); }
static int mk_conv_1x7(Net *n, int x) { return conv_create(n, x, 4, 1, 7, 1, 1, PAD_SAME, 1); }
static int mk_conv_1x1_s2(Net *n, int x) { return conv_create(n, x, 8, 1, 1, 2, 2, PAD_SAME, 0); }
/* many channels: the bias gradient's blocks each sum several samples (bias.cu) */
static int mk_conv_1x1_bias512(Net *n, int x) { return conv_create(n, x, 512, 1, 1, 1, 1, PAD_SAME, 1); }
static int mk_bn(Net *n, int x) { return bn_create(n, x); }
static int mk_maxpool(Net *n, int x) { return pool_create(n, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME); }
static int mk_maxpool_valid(Net *n, int x) { return pool_create(n, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); }
static int mk_avgpool(Net *n, int x) { return pool_create(n, x, POOL_AVG, 3, 3, 1, 1, PAD_SAME); }
static int mk_avgpool_s2(Net *n, int x) { return pool_create(n, x, POOL_AVG, 2, 2, 2, 2, PAD_SAME); }
static int mk_spatial_avg(Net *n, int x) { return spatial_avg_create(n, x); }
static int mk_fc_relu(Net *n, int x) { return act_create(n, fc_create(n, flatten_create(n, x), 9, 1), ACT_RELU, 0); }
static int mk_concat(Net *n, int x) {
    int a = conv_create(n, x, 3, 1, 1, 1, 1, PAD_SAME, 1), b = conv_create(n, x, 2, 3, 3, 1, 1, PAD_SAME, 1);
    int in[3] = {a, b, x};
    return concat_create(n, in, 3);
}
static int act_shape_c(Net *n, int x) { return n->node[x].shape.c; }
static int mk_add(Net *n, int x) { return add_create(n, conv_create(n, x, 3, 3, 3, 1, 1, PAD_SAME, 0), x); }
static int mk_conv_g4(Net *n, int x) { return conv_create_grouped(n, x, 8, 3, 3, 1, 1, PAD_SAME, 1, 4); }
static int mk_conv_g2_s2_uneven(Net *n, int x) { return conv_create_grouped(n, x, 6, 3, 3, 2, 2, PAD_SAME, 0, 2); }
static int mk_conv_depthwise(Net *n, int x) { return conv_create_grouped(n, x, 6, 3, 3, 1, 1, PAD_SAME_RESNET, 0, 6); }
static int mk_conv_g32(Net *n, int x) { return conv_create_grouped(n, x, 128, 3, 3, 1, 1, PAD_SAME, 0, 32); }
static int mk_add_scaled(Net *n, int x) {
    return add_create_scaled(n, x, conv_create(n, x, act_shape_c(n, x), 3, 3, 1, 1, PAD_SAME, 0), 1.0f, 0.2f);
}
static int mk_dropout_keep1(Net *n, int x) { return dropout_create(n, x, 1.0f); }
static Act cur_act;
static int mk_act(Net *n, int x) { return act_create(n, x, cur_act, 0.2f); }

TEST(gpu_conv_matches_cpu) {
    if (!have_gpu()) return;
    parity("conv 3x3 SAME + bias", 3, 3, 9, 10, mk_conv_same, PREC_FP32, 1e-4);
    parity("conv 3x3/2 SAME uneven pad", 2, 4, 10, 10, mk_conv_same_s2_uneven, PREC_FP32, 1e-4);
    parity("conv 7x7/2 SAME_RESNET", 2, 3, 16, 16, mk_conv_resnet7, PREC_FP32, 1e-4);
    parity("conv 11x11/4 VALID + bias", 2, 3, 27, 27, mk_conv_valid11, PREC_FP32, 1e-4);
    parity("conv 1x7 SAME", 2, 5, 9, 9, mk_conv_1x7, PREC_FP32, 1e-4);
    parity("conv 1x1/2", 2, 6, 8, 8, mk_conv_1x1_s2, PREC_FP32, 1e-4);
    parity("conv 1x1 + bias, 512 channels", 5, 3, 4, 4, mk_conv_1x1_bias512, PREC_FP32, 1e-4);
    parity("conv 3x3 tf32", 3, 3, 9, 10, mk_conv_same, PREC_TF32, 2e-2);
}

/* Grouped convolutions (cuDNN's group count) and the weighted residual sum (Inception-ResNet). */
TEST(gpu_grouped_conv_and_scaled_add_match_cpu) {
    if (!have_gpu()) return;
    parity("conv 3x3 4 groups + bias", 2, 8, 9, 9, mk_conv_g4, PREC_FP32, 1e-4);
    parity("conv 3x3/2 2 groups uneven pad", 2, 4, 10, 10, mk_conv_g2_s2_uneven, PREC_FP32, 1e-4);
    parity("conv 3x3 depthwise", 2, 6, 7, 7, mk_conv_depthwise, PREC_FP32, 1e-4);
    parity("conv 3x3 32 groups of 4", 2, 128, 6, 6, mk_conv_g32, PREC_FP32, 1e-4);
    parity("residual a + 0.2 b", 2, 3, 6, 6, mk_add_scaled, PREC_FP32, 1e-4);
    parity("conv 3x3 4 groups tf32", 2, 8, 9, 9, mk_conv_g4, PREC_TF32, 2e-2);
    parity("conv 3x3 32 groups fp16", 2, 128, 6, 6, mk_conv_g32, PREC_FP16, 1e-2);
    parity("conv 3x3/2 2 groups bf16", 2, 4, 10, 10, mk_conv_g2_s2_uneven, PREC_BF16, 6e-2);
    parity("residual a + 0.2 b fp16", 2, 3, 6, 6, mk_add_scaled, PREC_FP16, 1e-2);
    parity("residual a + 0.2 b bf16", 2, 3, 6, 6, mk_add_scaled, PREC_BF16, 6e-2);
}

TEST(gpu_bn_pool_reshape_match_cpu) {
    if (!have_gpu()) return;
    parity("bn 4-D", 4, 5, 6, 7, mk_bn, PREC_FP32, 1e-4);
    parity("maxpool 3x3/2 SAME", 2, 3, 9, 10, mk_maxpool, PREC_FP32, 1e-5);
    parity("maxpool 3x3/2 VALID", 2, 3, 9, 9, mk_maxpool_valid, PREC_FP32, 1e-5);
    parity("avgpool 3x3/1 SAME", 2, 3, 7, 6, mk_avgpool, PREC_FP32, 1e-5);
    parity("avgpool 2x2/2 SAME odd", 2, 3, 7, 7, mk_avgpool_s2, PREC_FP32, 1e-5);
    parity("spatial average", 3, 4, 5, 5, mk_spatial_avg, PREC_FP32, 1e-5);
    parity("fc + relu", 4, 3, 5, 5, mk_fc_relu, PREC_FP32, 1e-4);
    parity("concat of 3", 2, 3, 6, 6, mk_concat, PREC_FP32, 1e-4);
    parity("residual add", 2, 3, 6, 6, mk_add, PREC_FP32, 1e-4);
    parity("dropout keep 1", 2, 3, 4, 4, mk_dropout_keep1, PREC_FP32, 1e-5);
}

TEST(gpu_activations_match_cpu) {
    if (!have_gpu()) return;
    const Act acts[] = {ACT_RELU, ACT_RELU6, ACT_ELU, ACT_SIGMOID, ACT_TANH, ACT_LRELU};
    const char *names[] = {"relu", "relu6", "elu", "sigmoid", "tanh", "lrelu"};
    for (int i = 0; i < 6; i++) {
        cur_act = acts[i];
        parity(names[i], 2, 3, 5, 5, mk_act, PREC_FP32, 1e-5);
    }
}

/* fp16 and bf16 (storage type on the device, fp32 master weights) against the fp32 CPU
 * reference: every layer type, within the storage type's rounding (fp16 keeps 11 bits, bf16 8). */
TEST(gpu_half_precision_layers_match_cpu) {
    if (!have_gpu()) return;
    const int precs[2] = {PREC_FP16, PREC_BF16};
    const double tol[2] = {1e-2, 6e-2};
    for (int k = 0; k < 2; k++) {
#define HALF(what, n, c, h, w, mk) parity(what, n, c, h, w, mk, precs[k], tol[k])
        HALF("conv 3x3 SAME + bias", 3, 3, 9, 10, mk_conv_same);
        HALF("conv 3x3/2 uneven pad", 2, 4, 10, 10, mk_conv_same_s2_uneven);
        HALF("conv 1x1/2", 2, 8, 8, 8, mk_conv_1x1_s2);
        HALF("conv 1x1 + bias, 512 channels", 5, 3, 4, 4, mk_conv_1x1_bias512);
        HALF("bn 4-D", 4, 5, 6, 7, mk_bn);
        HALF("maxpool 3x3/2 SAME", 2, 3, 9, 10, mk_maxpool);
        HALF("avgpool 2x2/2 SAME odd", 2, 3, 7, 7, mk_avgpool_s2);
        HALF("spatial average", 3, 4, 5, 5, mk_spatial_avg);
        HALF("fc + relu", 4, 3, 5, 5, mk_fc_relu);
        HALF("concat of 3", 2, 3, 6, 6, mk_concat);
        HALF("residual add", 2, 3, 6, 6, mk_add);
        HALF("dropout keep 1", 2, 3, 4, 4, mk_dropout_keep1);
        cur_act = ACT_TANH;
        HALF("tanh", 2, 3, 5, 5, mk_act);
        cur_act = ACT_LRELU;
        HALF("lrelu", 2, 3, 5, 5, mk_act);
#undef HALF
    }
}

TEST(gpu_dropout_mask_law_and_backward) {
    if (!have_gpu()) return;
    Net *net = net_new(4, 8, 16, 16);
    int x = act_create(net, net->input, ACT_LINEAR, 0);
    int y = dropout_create(net, x, 0.5f);
    int z = fc_create(net, flatten_create(net, y), 3, 1);
    softmax_xent_create(net, z);
    net_finalize(net, 3);
    size_t n = shape_count(net->node[x].shape);
    for (size_t i = 0; i < n; i++) net->node[net->input].data[i] = 1.0f + (float)(i % 7);
    int32_t labels[4] = {0, 1, 2, 0};
    char err[256];
    int oom;
    GpuNet *g = gpunet_new(net, 0, PREC_FP32, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "%s", err);
    if (!g) return;
    net->training = 1;
    gpunet_set_input(g, net->node[net->input].data);
    gpunet_set_labels(g, labels);
    gpunet_forward(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    float *yo = xmalloc(n * 4), *dy = xmalloc(n * 4), *dx = xmalloc(n * 4);
    gpunet_download_node(g, y, yo, 0);
    gpunet_download_node(g, y, dy, 1);
    gpunet_download_node(g, x, dx, 1);
    size_t kept = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float in = 1.0f + (float)(i % 7);
        if (yo[i] == 0.0f) {
            bad |= dx[i] != 0.0f;
        } else {
            kept++;
            bad |= fabsf(yo[i] - 2 * in) > 1e-6f || fabsf(dx[i] - 2 * dy[i]) > 1e-6f * fmaxf(1, fabsf(dy[i]));
        }
    }
    double frac = (double)kept / n;
    CHECK_MSG(!bad, "kept elements must be x / keep, dropped ones get no gradient");
    CHECK_MSG(fabs(frac - 0.5) < 0.03, "kept fraction %.3f", frac);
    /* a second forward draws a different mask */
    float *y2 = xmalloc(n * 4);
    gpunet_forward(g);
    gpunet_download_node(g, y, y2, 0);
    CHECK(memcmp(yo, y2, n * 4) != 0);
    gpunet_free(g);
    net_free(net);
    free(yo), free(dy), free(dx), free(y2);
}

/* N training steps of a model (at image size `size` with its widths divided by `div`, see
 * model_build_reduced) on both backends from the same start, same batch: parameters and losses
 * agree. */
static void steps_agree_sized(const char *model, int size, int div, int batch, int steps, int precision, double loss_scale,
                              double tol) {
    const ModelInfo *mi = model_find(model);
    Net *a = model_build_reduced(mi, batch, 10, size, div, ACT_RELU), *b = model_build_reduced(mi, batch, 10, size, div, ACT_RELU);
    /* the backends draw different dropout masks: keep everything */
    for (int i = 0; i < a->nlayer; i++)
        if (strcmp(a->layer[i].ops->type, "dropout") == 0) {
            ((Dropout *)a->layer[i].priv)->keep = 1.0f;
            ((Dropout *)b->layer[i].priv)->keep = 1.0f;
        }
    net_finalize(a, 1);
    net_finalize(b, 1);
    Rng r;
    rng_seed(&r, 2);
    size_t ni = shape_count(a->node[a->input].shape);
    for (size_t i = 0; i < ni; i++) a->node[a->input].data[i] = (float)(rng_uniform(&r) * 2 - 1);
    memcpy(b->node[b->input].data, a->node[a->input].data, ni * 4);
    int32_t *labels = xmalloc((size_t)batch * 4);
    labels_synthetic(labels, batch, 10, &r);
    Dist d = {0, 1, 0, 1, 0}; /* one rank, no MPI */
    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = 0.9;
    tc.opt.nesterov = 1;
    tc.opt.weight_decay = 1e-4;
    tc.loss_scale = loss_scale;
    char err[256];
    int oom;
    GpuNet *g = gpunet_new(b, 0, precision, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "%s", err);
    if (!g) return;
    Trainer tcpu, tgpu;
    trainer_init(&tcpu, a, &d, &tc, NULL);
    trainer_init(&tgpu, b, &d, &tc, g);
    double worst_loss = 0;
    for (int s = 0; s < steps; s++) {
        double la = trainer_step(&tcpu, labels, 0.01), lb = trainer_step(&tgpu, labels, 0.01);
        worst_loss = fmax(worst_loss, fabs(la - lb) / fmax(fabs(la), 1e-6));
    }
    trainer_sync_host(&tgpu);
    double abs_err = 0, e = rel_err(b->params, a->params, a->params_total, &abs_err);
    CHECK_MSG(e <= tol && worst_loss <= tol, "%s %dx%d /%d %s: parameters %.3g, loss %.3g > %.3g", model, size, size, div,
              precision_name((Precision)precision), e, worst_loss, tol);
    char what[128];
    snprintf(what, sizeof what, "%s %dx%d /%d, %d training steps (parameters, loss)", model, size, size, div, steps);
    parity_row(what, precision, abs_err, fmax(e, worst_loss), tol);
    trainer_free(&tcpu);
    trainer_free(&tgpu);
    gpunet_free(g);
    net_free(a);
    net_free(b);
    free(labels);
}

static void steps_agree(const char *model, int batch, int steps, int precision, double loss_scale, double tol) {
    steps_agree_sized(model, model_find(model)->image_size, 1, batch, steps, precision, loss_scale, tol);
}

/* The models on grouped convolutions and weighted residual sums, at a quarter of their widths on
 * small inputs (the CPU reference at full size would take minutes). */
TEST(gpu_training_steps_match_cpu_resnext_inception) {
    if (!have_gpu()) return;
    steps_agree_sized("resnext50", 64, 4, 4, 2, PREC_FP32, 1, 1e-2);
    steps_agree_sized("inception4", 107, 4, 4, 2, PREC_FP32, 1, 1e-2);
    steps_agree_sized("inception-resnet2", 107, 4, 4, 2, PREC_FP32, 1, 1e-2);
    steps_agree_sized("resnext50", 64, 4, 4, 2, PREC_FP16, 128, 5e-2);
}

TEST(gpu_training_steps_match_cpu) {
    if (!have_gpu()) return;
    steps_agree("lenet", 16, 5, PREC_FP32, 1, 1e-3);
    steps_agree("resnet18", 2, 3, PREC_FP32, 1, 1e-2);
    steps_agree("lenet", 16, 5, PREC_TF32, 1, 2e-2);
    /* fp16 with a static loss scale (the CPU run has the same scale: exact in fp32) */
    steps_agree("lenet", 16, 5, PREC_FP16, 128, 3e-2);
    steps_agree("resnet18", 2, 3, PREC_FP16, 128, 5e-2);
    steps_agree("lenet", 16, 5, PREC_BF16, 1, 1e-1);
}

/* The real-data path: two batches of bytes staged in the two slots, taken in either order, give
 * exactly the host's conversion (x / 127.5 - 1, NHWC -> NCHW) and the same loss as uploading the
 * host's floats. */
TEST(gpu_staged_batches_match_host_conversion) {
    if (!have_gpu()) return;
    const int B = 3;
    Net *net = model_build_net(model_find("lenet"), B, 10);
    net_finalize(net, 4);
    Shape s = net->node[net->input].shape;
    size_t nb = shape_count(s);
    uint8_t *img[2];
    int32_t *lab[2];
    Rng r;
    rng_seed(&r, 8);
    for (int k = 0; k < 2; k++) {
        img[k] = gpu_host_alloc(nb);
        lab[k] = gpu_host_alloc((size_t)B * sizeof(int32_t));
        for (size_t i = 0; i < nb; i++) img[k][i] = (uint8_t)rng_below(&r, 256);
        for (int i = 0; i < B; i++) lab[k][i] = (int32_t)rng_below(&r, 10);
    }
    char err[256];
    int oom;
    GpuNet *g = gpunet_new(net, 0, PREC_FP32, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "%s", err);
    if (!g) return;
    float *want = xmalloc(nb * 4), *got = xmalloc(nb * 4);
    gpunet_stage_batch(g, 0, img[0], lab[0]);
    gpunet_stage_batch(g, 1, img[1], lab[1]);
    const int order[3] = {1, 0, 1};
    for (int t = 0; t < 3; t++) {
        int k = order[t];
        gpunet_use_batch(g, k);
        gpunet_download_node(g, net->input, got, 0);
        input_from_u8_nhwc(want, img[k], B, s.c, s.h, s.w);
        CHECK_MSG(memcmp(got, want, nb * 4) == 0, "slot %d: the device's conversion differs from the host's", k);
        net->training = 0;
        gpunet_forward(g);
        double staged = gpunet_loss(g);
        gpunet_set_input(g, want);
        gpunet_set_labels(g, lab[k]);
        gpunet_forward(g);
        double uploaded = gpunet_loss(g);
        CHECK_MSG(staged == uploaded, "slot %d: loss %.9g staged vs %.9g uploaded (labels not taken?)", k, staged, uploaded);
    }
    gpunet_stage_wait(g, 0);
    gpunet_stage_wait(g, 1);
    gpunet_free(g);
    net_free(net);
    for (int k = 0; k < 2; k++) {
        gpu_host_free(img[k]);
        gpu_host_free(lab[k]);
    }
    free(want), free(got);
}

/* A batch that does not fit: exit 3, one line naming the model, the batch and the bytes. */
TEST(gpu_out_of_memory_exits_3) {
    if (!gpu_present()) return;
    char *o = NULL;
    int rc = th_run("./nvcnn --model=resnet50 --batch_size=4096 --device=gpu --num_batches=1", &o);
    CHECK_MSG(rc == 3, "exit %d:\n%s", rc, o);
    CHECK_MSG(o && strstr(o, "--model=resnet50 --batch_size=4096 does not fit on the GPU") && strstr(o, "bytes requested"), "%s", o);
    free(o);
}

/* The plan lines of a GPU run: the algorithm search, each distinct convolution shape measured
 * once (resnet18, counted by hand: 20 convolutions of 11 shapes, the stem's backward data not
 * needed: 11 x 3 - 1 = 32 measured, 60 - 32 - 1 = 27 from the cache), and the cuDNN workspace
 * chosen, within the limit it was chosen under. */
TEST(gpu_run_reports_its_search_and_workspace) {
    if (!gpu_present()) return;
    char *o = NULL;
    int rc = th_run("./nvcnn --model=resnet18 --device=gpu --batch_size=16 --num_batches=2 --nstep_burnin=0", &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    const char *sl = o ? strstr(o, "cuDNN algorithm search: ") : NULL;
    double secs = -1;
    int measured = -1, cached = -1, skipped = -1;
    CHECK_MSG(sl && sscanf(sl, "cuDNN algorithm search: %lf s (%d measured, %d repeated shapes from the cache, %d not needed)", &secs,
                           &measured, &cached, &skipped) == 4,
              "%s", o);
    printf("    resnet18 bs16: search %.2f s, %d measured, %d cached, %d skipped\n", secs, measured, cached, skipped);
    CHECK(measured == 32 && cached == 27 && skipped == 1);
    const char *l = o ? strstr(o, "cuDNN workspace: ") : NULL;
    double ws = -1, limit = -1;
    CHECK_MSG(l && sscanf(l, "cuDNN workspace: %lf MiB (each algorithm the fastest within %lf GiB", &ws, &limit) == 2, "%s", o);
    printf("    resnet18 bs16: cuDNN workspace %.1f MiB, limit %.2f GiB\n", ws, limit);
    CHECK_MSG(ws >= 0 && ws / 1024 <= limit, "workspace %.1f MiB over the limit %.2f GiB", ws, limit);
    free(o);
}
