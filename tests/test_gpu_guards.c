/* test_gpu_guards.c: the GPU backend's limits and guards (issue 21 §3.5-3.7), each a test that
 * fails when its fix is undone:
 *   - a padded convolution on the network's input reserves no gradient buffer for that input
 *     (conv.cu: the gradient of the input is never computed);
 *   - the bias gradient handles more than 65,535 channels (bias.cu: channels on the grid's x,
 *     whose limit is 2^31 - 1, not on y, whose limit is 65,535), and in NHWC sums a vector of
 *     channels a thread wherever the channels fill vectors;
 *   - parameters out of layer order end gpunet_new with a message (gpunet.cu: NCCL's buckets and
 *     on_ready hand gradients on by arena offset, which needs the layer order);
 *   - LARC is three launches per step whatever the number of parameter tensors (optim.cu): counted
 *     by the emulated device (tests/emu/emu_counts.h), so that test runs only there.
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
#include "layer_death.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "models.h"
#include "testutil.h"
#ifdef NVCNN_GPU_EMU
#include "emu/emu_counts.h"
#endif

/* net's input and labels filled at random (seed), the GpuNet made in `precision` with gpunet_new's
 * layout `flags` (0: the precision's default). */
static GpuNet *gpu_of_in(Net *net, int32_t *labels, uint64_t seed, int precision, unsigned flags) {
    Rng r;
    rng_seed(&r, seed);
    tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
    int classes = net->node[net->layer[net->nlayer - 1].in[0]].shape.c;
    for (int i = 0; i < net->batch; i++) labels[i] = (int32_t)rng_below(&r, classes);
    char err[512];
    int oom;
    GpuNet *g = gpunet_new(net, 0, precision, GPUNET_WORKSPACE_DEFAULT, flags, err, sizeof err, &oom);
    CHECK_MSG(g != NULL, "gpunet_new: %s", err);
    if (g) {
        gpunet_set_input(g, net->node[net->input].data);
        gpunet_set_labels(g, labels);
    }
    return g;
}

/* ... in fp32. */
static GpuNet *gpu_of(Net *net, int32_t *labels, uint64_t seed) { return gpu_of_in(net, labels, seed, PREC_FP32, 0); }

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

/* A padded convolution's padded input: (oh - 1) sh + kh rows, (ow - 1) sw + kw columns. */
static size_t padded_input_bytes(const Net *net, int li) {
    const Conv *c = (const Conv *)net->layer[li].priv;
    size_t hp = (size_t)(c->oh - 1) * c->sh + c->kh, wp = (size_t)(c->ow - 1) * c->sw + c->kw;
    return round256((size_t)net->batch * c->cin * hp * wp * sizeof(float));
}

/* cuDNN pads symmetrically; TensorFlow's SAME with an odd total padding (a 7x7/2 SAME convolution
 * on an even input, as googlenet's stem) is padded explicitly into a scratch buffer, and its
 * input gradient comes back through a second one. The network's input has no gradient: the
 * first convolution reserves the padded input alone, a later one both. */
TEST(gpu_padded_first_conv_reserves_no_input_gradient) {
    if (!tu_select_gpu()) return;
    Net *net = net_new(2, 3, 16, 16);
    int a = conv_create(net, net->input, 4, 7, 7, 2, 2, PAD_SAME, 0); /* 16 -> 8: padding 2 + 3 */
    int b = conv_create(net, a, 4, 3, 3, 2, 2, PAD_SAME, 0);          /* 8 -> 4: padding 0 + 1 */
    softmax_xent_create(net, fc_create(net, flatten_create(net, b), 5, 1));
    net_finalize(net, 3);
    int32_t labels[2];
    GpuNet *g = gpu_of(net, labels, 4);
    if (!g) return;
    const size_t one = padded_input_bytes(net, 0), two = 2 * padded_input_bytes(net, 1);
    printf("    scratch: first conv %zu bytes (padded input %zu), second conv %zu bytes (padded input and its gradient %zu)\n",
           gpunet_layer_scratch(g, 0), one, gpunet_layer_scratch(g, 1), two);
    CHECK_MSG(gpunet_layer_scratch(g, 0) == one, "the first convolution reserves %zu bytes, want %zu (its padded input alone)",
              gpunet_layer_scratch(g, 0), one);
    CHECK_MSG(gpunet_layer_scratch(g, 1) == two, "the second convolution reserves %zu bytes, want %zu", gpunet_layer_scratch(g, 1),
              two);
    /* and the step runs (the emulated device faults on a write outside the arena's pieces) */
    gpunet_forward(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    double loss = gpunet_loss(g);
    CHECK_MSG(isfinite(loss), "loss %g", loss);
    gpunet_free(g);
    net_free(net);
}

/* More channels than a grid's y may hold (65,535): the bias gradient of a 1x1 convolution with
 * 65,537 outputs against the sum of its output's gradient, over the batch and the positions, on
 * the host in double. */
TEST(gpu_bias_gradient_over_65535_channels) {
    if (!tu_select_gpu()) return;
    enum { N = 2, C = 65537 };
    Net *net = net_new(N, 2, 2, 2);
    int y = conv_create(net, net->input, C, 1, 1, 1, 1, PAD_SAME, 1);
    softmax_xent_create(net, fc_create(net, flatten_create(net, y), 3, 1));
    net_finalize(net, 5);
    int32_t labels[N];
    GpuNet *g = gpu_of(net, labels, 6);
    if (!g) return;
    gpunet_forward(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    const size_t ny = shape_count(net->node[y].shape), hw = 4;
    float *dy = malloc(ny * sizeof *dy);
    gpunet_download_node(g, y, dy, 1); /* the node nearest the input: its gradient is still there */
    gpunet_download_grads(g);
    const Conv *c = (const Conv *)net->layer[0].priv;
    const float *db = net->grads + net->param[c->pb].off;
    double worst = 0, scale = 1e-30;
    int bad = -1;
    for (int ch = 0; ch < C; ch++) {
        double s = 0;
        for (int i = 0; i < N; i++)
            for (size_t p = 0; p < hw; p++) s += dy[((size_t)i * C + ch) * hw + p];
        scale = fmax(scale, fabs(s));
        double e = fabs(s - db[ch]);
        if (e > worst) worst = e, bad = ch;
    }
    printf("    %d channels: largest |bias gradient - sum of dy| %.3e (channel %d), largest sum %.3e\n", C, worst, bad, scale);
    CHECK_MSG(worst <= 1e-5 * scale, "channel %d: bias gradient off by %.3g (largest sum %.3g)", bad, worst, scale);
    /* 8 fp32 values per channel, summed in another order than here: a few units of 2^-24 */
    tu_parity_row("bias gradient of 65,537 channels against the sums of dy", "fp32", worst, worst / scale, 1e-5);
    CHECK_MSG(scale > 1e-12, "the output's gradient is all zero");
    free(dy);
    gpunet_free(g);
    net_free(net);
}

/* The NHWC bias gradient a 16-byte vector of channels a thread (bias.cu's k_bias_partial_nhwc_vec)
 * and a channel a thread where the channels do not fill vectors: a 1x1 convolution with bias, in
 * NHWC, its bias gradient against the sums of its output's gradient (downloaded) in double, in
 * fp32, fp16 and bf16, for channel counts that make one vector column (8 in 16 bits), several
 * (24, 64: a block's lanes of 10 and 4 rows), more columns than a block holds (2056: 514 in fp32,
 * 257 in 16 bits, two and three blocks across) and no whole vectors (13, 2: the scalar kernel),
 * over enough rows (8 x 16 x 16 = 2048) for several splits. The limit: fp32 sums of up to 2048
 * values in another order, 2e-6 of the sum of their magnitudes (measured: below). */
TEST(gpu_bias_gradient_nhwc_vectors_match_sums) {
    if (!tu_select_gpu()) return;
    const int precs[3] = {PREC_FP32, PREC_FP16, PREC_BF16}, chans[6] = {8, 24, 64, 2056, 13, 2};
    double worst_all = 0;
    for (int pi = 0; pi < 3; pi++)
        for (int ci = 0; ci < 6; ci++) {
            const int N = 8, H = 16, W = 16, C = chans[ci];
            Net *net = net_new(N, 3, H, W);
            int y = conv_create(net, net->input, C, 1, 1, 1, 1, PAD_SAME, 1);
            softmax_xent_create(net, fc_create(net, flatten_create(net, y), 3, 1));
            net_finalize(net, 5);
            int32_t labels[N];
            GpuNet *g = gpu_of_in(net, labels, 40 + (uint64_t)ci, precs[pi], GPUNET_NHWC);
            if (!g) {
                net_free(net);
                continue;
            }
            gpunet_forward(g);
            gpunet_backward(g, 1.0f, NULL, NULL);
            const size_t ny = shape_count(net->node[y].shape), hw = (size_t)H * W;
            float *dy = malloc(ny * sizeof *dy);
            gpunet_download_node(g, y, dy, 1);
            gpunet_download_grads(g);
            const Conv *c = (const Conv *)net->layer[0].priv;
            const float *db = net->grads + net->param[c->pb].off;
            double worst = 0, mags = 0;
            int bad = -1;
            for (int ch = 0; ch < C; ch++) {
                double sum = 0, mag = 0;
                for (int i = 0; i < N; i++)
                    for (size_t p = 0; p < hw; p++) {
                        const double v = dy[((size_t)i * C + ch) * hw + p];
                        sum += v, mag += fabs(v);
                    }
                mags = fmax(mags, mag);
                const double e = fabs(sum - db[ch]) / fmax(mag, 1e-30);
                if (e > worst) worst = e, bad = ch;
            }
            CHECK_MSG(mags > 1e-12, "%s, %d channels: the output's gradient is all zero", precision_name((Precision)precs[pi]), C);
            CHECK_MSG(worst <= 2e-6, "%s, %d channels: channel %d's bias gradient off by %.3g of its values' magnitudes",
                      precision_name((Precision)precs[pi]), C, bad, worst);
            worst_all = fmax(worst_all, worst);
            free(dy);
            gpunet_free(g);
            net_free(net);
        }
    printf("    NHWC bias gradients, 6 channel counts in fp32, fp16, bf16: largest error %.3e of the summed magnitudes\n", worst_all);
    tu_parity_row("NHWC bias gradient, 2 to 2056 channels, against the sums of dy", "all", worst_all, worst_all, 2e-6);
}

/* googlenet in fp16 NHWC (its widths, 32x32 images, batch 2): a training step takes the vector
 * kernels for every bias gradient, concat and explicit padding (its channel counts are multiples of
 * 8, the first convolution's 3 colours padded to 8), and never the element-a-thread ones, which
 * the H200 measured googlenet's NHWC step losing to NCHW with (docs/performance.md, fourth GPU
 * session). Counted by the emulated device, so the test runs only there. */
TEST(gpu_nhwc_googlenet_takes_the_vector_kernels) {
#ifndef NVCNN_GPU_EMU
    if (tu_gpus() == 0) return;
    th_skip("launch counts come from the emulated device (make GPU_EMU=1), which make test builds");
    return;
#else
    if (!tu_select_gpu()) return;
    Net *net = model_build_reduced(model_find("googlenet"), 2, 10, 32, 1, ACT_RELU);
    net_finalize(net, 11);
    int32_t labels[2];
    GpuNet *g = gpu_of_in(net, labels, 12, PREC_FP16, GPUNET_NHWC);
    if (!g) {
        net_free(net);
        return;
    }
    int convs = 0, concats = 0;
    for (int i = 0; i < net->nlayer; i++) {
        convs += strcmp(net->layer[i].ops->type, "conv") == 0;
        concats += strcmp(net->layer[i].ops->type, "concat") == 0;
    }
    static const char *const names[6] = {"k_bias_partial_nhwc_vec<T>", "k_bias_partial_nhwc<T>", "k_concat_vec<T>", "k_concat<T>",
                                         "k_pad_nhwc_vec<T>", "k_pad<T>"};
    long before[6];
    for (int k = 0; k < 6; k++) before[k] = emu_launches(names[k]);
    gpunet_forward(g);
    gpunet_backward(g, 1.0f, NULL, NULL);
    long d[6];
    for (int k = 0; k < 6; k++) d[k] = emu_launches(names[k]) - before[k];
    printf("    googlenet fp16 NHWC, one step: %d convolutions, %d concats; launches: %s %ld, %s %ld, %s %ld, %s %ld, %s %ld, %s %ld\n", convs,
           concats, names[0], d[0], names[1], d[1], names[2], d[2], names[3], d[3], names[4], d[4], names[5], d[5]);
    /* every convolution has a bias: one bias gradient each; a concat copies each input forward and
     * backward; the first convolution (7x7/2 SAME on an even size) pads explicitly */
    CHECK_MSG(d[0] == convs && d[1] == 0, "bias gradients: %ld vector, %ld scalar, %d convolutions", d[0], d[1], convs);
    CHECK_MSG(concats == 9 && d[2] == 2 * 4 * concats && d[3] == 0, "concat copies: %ld vector, %ld scalar, %d concats", d[2], d[3], concats);
    CHECK_MSG(d[4] == 1 && d[5] == 0, "explicit padding: %ld vector, %ld scalar", d[4], d[5]);
    gpunet_free(g);
    net_free(net);
#endif
}

/* gpunet_new on a net whose layers' parameters are not in layer order (two convolutions' tensors
 * exchanged): in a child process, which must die with the message. */
static void out_of_order(void *arg) {
    Net *net = (Net *)arg;
    char err[256];
    int oom;
    gpunet_new(net, 0, PREC_FP32, GPUNET_WORKSPACE_DEFAULT, 0, err, sizeof err, &oom);
}

TEST(gpu_parameters_out_of_layer_order_are_refused) {
    if (!tu_select_gpu()) return;
    Net *net = net_new(2, 3, 6, 6);
    int a = conv_create(net, net->input, 4, 3, 3, 1, 1, PAD_SAME, 0);
    int b = conv_create(net, a, 4, 3, 3, 1, 1, PAD_SAME, 0);
    softmax_xent_create(net, fc_create(net, flatten_create(net, b), 5, 1));
    net_finalize(net, 3);
    Layer *l0 = &net->layer[0], *l1 = &net->layer[1];
    CHECK(l0->nparam == 1 && l1->nparam == 1 && l0->param0 == 0 && l1->param0 == 1);
    l0->param0 = 1, l1->param0 = 0;
    net->param[0].layer = 1, net->param[1].layer = 0;
    char msg[1024], want[256];
    int rc = ld_run_child(out_of_order, net, msg, sizeof msg);
    snprintf(want, sizeof want, "layer %s's parameters start at 1, not 0: the gradient arena must follow the layer order", l0->name);
    printf("    exit %d: %s", rc, msg);
    CHECK_MSG(rc == 1 && strstr(msg, want), "exit %d, want '%s' in: %s", rc, want, msg);
    /* in order again: accepted */
    l0->param0 = 0, l1->param0 = 1;
    net->param[0].layer = 0, net->param[1].layer = 1;
    int32_t labels[2];
    GpuNet *g = gpu_of(net, labels, 1);
    gpunet_free(g);
    net_free(net);
}

/* LARC's update is three launches per step (partial sums, factors, update) whatever the number
 * of parameter tensors: 2 and 3 steps of a net with 24 tensors, one of them cut into several
 * chunks, differ by exactly one launch of each LARC kernel and none of the plain update. */
TEST(gpu_larc_is_three_launches_per_step) {
#ifndef NVCNN_GPU_EMU
    if (tu_gpus() == 0) return;
    th_skip("launch counts come from the emulated device (make GPU_EMU=1), which make test builds");
    return;
#else
    if (!tu_select_gpu()) return;
    Net *net = net_new(2, 3, 8, 8);
    int x = net->input;
    /* conv6's weights (72 x 72 x 9) span two of LARC's chunks of 32K elements */
    for (int k = 0; k < 11; k++) x = conv_create(net, x, k == 5 || k == 6 ? 72 : 4, 3, 3, 1, 1, PAD_SAME, 1);
    softmax_xent_create(net, fc_create(net, flatten_create(net, x), 5, 1));
    net_finalize(net, 7);
    CHECK(net->nparam == 24);
    int32_t labels[2];
    GpuNet *g = gpu_of(net, labels, 8);
    if (!g) return;
    static const char *const kernels[] = {"k_larc_norms", "k_larc_factors", "k_larc_sgd<T>", "k_sgd<T>"};
    long at[2][4];
    for (int step = 1; step <= 3; step++) {
        gpunet_forward(g);
        gpunet_backward(g, 1.0f, NULL, NULL);
        gpunet_sgd(g, 0.05, 0.9, 1, 1e-4, 0.002, 0);
        gpunet_sync(g);
        if (step >= 2)
            for (int k = 0; k < 4; k++) at[step - 2][k] = emu_launches(kernels[k]);
    }
    for (int k = 0; k < 4; k++) {
        long d = at[1][k] - at[0][k];
        printf("    %s: %ld launches after 2 steps, %ld after 3\n", kernels[k], at[0][k], at[1][k]);
        CHECK_MSG(d == (k < 3 ? 1 : 0), "%s: %ld launches in one step of %d tensors, want %d", kernels[k], d, net->nparam, k < 3);
    }
    gpunet_free(g);
    net_free(net);
#endif
}
