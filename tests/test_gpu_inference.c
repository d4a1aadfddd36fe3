/* test_gpu_inference.c: a GPU net built for inference only (GPUNET_INFERENCE: --forward_only,
 * --eval), whose activations share memory by their forward lifetimes and which holds no
 * gradients, against a training net of the same Net:
 *   - the same logits and loss, bit for bit (both nets take cuDNN's deterministic algorithms), for
 *     reduced models with branches (googlenet's concats, inception3's), residual adds (resnet50,
 *     resnext50) and in-place ReLUs (vgg11), fused and unfused, fp32 NCHW and fp16 NHWC, over two
 *     batches in a row (the emulated device fills every tensor with NaN where its lifetime
 *     starts, so a tensor read after another took its memory shows there);
 *   - the logits of a forward still there after the next batch is converted into the input, as
 *     the --forward_only loop does before it reads them;
 *   - fewer bytes: no gradients, velocity or activation gradients, activations by lifetime;
 *   - backward, the step and gradient copies die on such a net, as does the download of a node
 *     whose memory it shares. */
#include <math.h>
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
#include "reduced.h"
#include "testutil.h"
#include "train.h"
#ifdef NVCNN_GPU_EMU
#include "emu/emu_counts.h"
#endif

static const Reduced *reduced_of(const char *name) {
    for (int i = 0; i < REDUCED_COUNT; i++)
        if (strcmp(reduced[i].name, name) == 0) return &reduced[i];
    return NULL;
}

/* Logits and loss of inference-mode forwards on batches k = 0 and 1 (inputs and labels of seed
 * k), on a GpuNet of net built with flags; its bytes and activation bytes. */
typedef struct Fwd {
    float *logits[2];
    double loss[2];
    size_t bytes, acts, scratch, largest, xent; /* largest: the largest layer's scratch but the loss's; xent: the loss layer's */
    int backward_only;                    /* layers that reserve scratch an inference net must not: max pooling's argmax, dropout's mask */
} Fwd;

static int forwards(Net *net, int precision, unsigned flags, Fwd *f) {
    GpuNet *g = tu_gpunet(net, precision, flags | GPUNET_DETERMINISTIC);
    if (!g) return 0;
    const size_t ni = shape_count(net->node[net->input].shape), nl = shape_count(net->node[net->logits].shape);
    float *x = xmalloc(ni * sizeof *x);
    int32_t *lab = xmalloc((size_t)net->batch * sizeof *lab);
    for (int k = 0; k < 2; k++) {
        Rng r;
        rng_seed(&r, 40 + (uint64_t)k);
        for (size_t i = 0; i < ni; i++) x[i] = (float)(rng_uniform(&r) * 2 - 1);
        labels_synthetic(lab, net->batch, 10, &r);
        gpunet_set_input(g, x);
        gpunet_set_labels(g, lab);
        net->training = 0;
        gpunet_forward(g);
        net->training = 1;
        f->loss[k] = gpunet_loss(g);
        f->logits[k] = xmalloc(nl * sizeof(float));
        gpunet_download_node(g, net->logits, f->logits[k], 0);
    }
    f->bytes = gpunet_bytes(g);
    f->acts = gpunet_activation_bytes(g);
    f->scratch = gpunet_scratch_bytes(g);
    for (int i = 0; i < net->nlayer; i++) {
        const size_t s = (gpunet_layer_scratch(g, i) + 255) & ~(size_t)255;
        const char *t = net->layer[i].ops->type;
        if (s > f->largest && strcmp(t, "softmax_xent") != 0) f->largest = s;
        if (gpunet_layer_scratch(g, i) && (strcmp(t, "dropout") == 0 || strcmp(t, "maxpool") == 0)) f->backward_only++;
        if (strcmp(t, "softmax_xent") == 0) f->xent += s;
    }
    gpunet_free(g);
    free(x), free(lab);
    return 1;
}

static void fwd_free(Fwd *f) { free(f->logits[0]), free(f->logits[1]); }

static void inference_matches(const char *model, int precision, unsigned flags) {
    const Reduced *rd = reduced_of(model);
    const char *pn = precision_name((Precision)precision);
    const char *how = flags & GPUNET_NHWC ? "NHWC" : "NCHW", *fz = flags & GPUNET_FUSE ? "fused" : "unfused";
    Net *net = model_build_reduced(model_find(model), 3, 10, rd->size, rd->div, ACT_RELU);
    net_finalize(net, 7);
    Fwd t, i;
    memset(&t, 0, sizeof t), memset(&i, 0, sizeof i);
    if (forwards(net, precision, flags, &t) && forwards(net, precision, flags | GPUNET_INFERENCE, &i)) {
        const size_t nl = shape_count(net->node[net->logits].shape);
        for (int k = 0; k < 2; k++) {
            size_t off = 0, first = 0;
            for (size_t e = 0; e < nl; e++)
                if (memcmp(&t.logits[k][e], &i.logits[k][e], sizeof(float)) != 0 && off++ == 0) first = e;
            CHECK_MSG(off == 0 && memcmp(&t.loss[k], &i.loss[k], sizeof(double)) == 0,
                      "%s %s %s %s, batch %d: %zu of %zu logits differ (first [%zu]: %.9g inference, %.9g training), loss %.9g vs %.9g",
                      model, pn, how, fz, k, off, nl, first, (double)i.logits[k][first], (double)t.logits[k][first], i.loss[k], t.loss[k]);
            CHECK_MSG(isfinite(i.loss[k]), "%s %s: inference loss %g", model, pn, i.loss[k]);
        }
        /* the training net holds the gradients and the velocity (2 P floats) more, and its
         * activations each their own memory */
        const size_t grads = 2 * net->params_total * sizeof(float);
        printf("    %-10s %s %s %-7s device bytes %9zu training, %9zu inference; activations %8zu, %8zu\n", model, pn, how, fz, t.bytes,
               i.bytes, t.acts, i.acts);
        CHECK_MSG(i.bytes + grads <= t.bytes, "%s %s: inference net %zu bytes, training %zu: want at least %zu less", model, pn, i.bytes, t.bytes,
                  grads);
        CHECK_MSG(i.acts < t.acts, "%s %s: inference activations %zu bytes, training %zu", model, pn, i.acts, t.acts);
        /* the layers' scratch: one region as large as the largest layer's (and the loss's, read after
         * the forward, apart), none of it for a backward */
        CHECK_MSG(i.scratch == i.largest + i.xent && i.scratch <= t.scratch && i.backward_only == 0,
                  "%s %s: inference scratch %zu bytes (largest layer %zu, training %zu), %d layers with a backward's scratch", model, pn,
                  i.scratch, i.largest, t.scratch, i.backward_only);
    }
    fwd_free(&t), fwd_free(&i);
    net_free(net);
}

TEST(gpu_inference_net_matches_the_training_net) {
    if (!tu_select_gpu()) return;
    const char *models[] = {"lenet", "alexnet", "vgg11", "googlenet", "resnet50", "resnext50", "inception3"};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        inference_matches(models[m], PREC_FP32, GPUNET_NCHW | GPUNET_FUSE);
        inference_matches(models[m], PREC_FP32, GPUNET_NCHW | GPUNET_NOFUSE);
    }
    inference_matches("resnet50", PREC_FP16, GPUNET_NHWC | GPUNET_FUSE);
    inference_matches("inception3", PREC_BF16, GPUNET_NHWC | GPUNET_FUSE);
}

/* The --forward_only loop converts the next staged batch into the input before it reads the
 * logits of the step before (the display row): the two never share memory. */
TEST(gpu_inference_logits_outlive_the_next_batch) {
    if (!tu_select_gpu()) return;
    const Reduced *rd = reduced_of("resnet18");
    Net *net = model_build_reduced(model_find("resnet18"), 2, 10, rd->size, rd->div, ACT_RELU);
    net_finalize(net, 3);
    GpuNet *g = tu_gpunet(net, PREC_FP32, GPUNET_INFERENCE | GPUNET_DETERMINISTIC);
    if (g) {
        uint8_t *img[2];
        int32_t *lab[2];
        tu_staged_batches(net, 5, img, lab);
        const size_t nl = shape_count(net->node[net->logits].shape);
        float *a = xmalloc(nl * 4), *b = xmalloc(nl * 4), *c = xmalloc(nl * 4);
        net->training = 0;
        gpunet_stage_batch(g, 0, img[0], lab[0]);
        gpunet_stage_batch(g, 1, img[1], lab[1]);
        gpunet_use_batch(g, 0);
        gpunet_forward(g);
        gpunet_download_node(g, net->logits, a, 0);
        gpunet_use_batch(g, 1);
        gpunet_forward(g);
        gpunet_use_batch(g, 0); /* the next batch's input, queued before the logits are read */
        gpunet_download_node(g, net->logits, b, 0);
        gpunet_forward(g);
        gpunet_download_node(g, net->logits, c, 0);
        CHECK_MSG(memcmp(a, b, nl * 4) != 0, "two different batches gave the same logits: the comparison tests nothing");
        CHECK_MSG(memcmp(a, c, nl * 4) == 0, "batch 0's logits differ between its two forwards");
        gpunet_stage_wait(g, 0);
        gpunet_stage_wait(g, 1);
        /* b against batch 1's own forward, read before anything else was queued */
        gpunet_use_batch(g, 1);
        gpunet_forward(g);
        gpunet_download_node(g, net->logits, c, 0);
        net->training = 1;
        CHECK_MSG(memcmp(b, c, nl * 4) == 0, "batch 1's logits changed when the next input was converted before they were read");
        gpunet_stage_wait(g, 1);
        tu_staged_batches_free(img, lab);
        free(a), free(b), free(c);
        gpunet_free(g);
    }
    net_free(net);
}

/* What an inference net cannot do dies naming itself. */
static GpuNet *death_g;
static Net *death_net;
static void call_backward(void *arg) {
    (void)arg;
    gpunet_backward(death_g, 1.0f, NULL, NULL);
}
static void call_step(void *arg) {
    (void)arg;
    gpunet_step(death_g, 0.1);
}
static void call_grads(void *arg) {
    (void)arg;
    gpunet_download_grads(death_g);
}
static void call_node(void *arg) {
    gpunet_download_node(death_g, *(const int *)arg, death_net->node[*(const int *)arg].data, 0);
}

TEST(gpu_inference_net_refuses_training_calls) {
    if (!tu_select_gpu()) return;
    Net *net = model_build_net(model_find("lenet"), 2, 10);
    net_finalize(net, 3);
    death_net = net;
    death_g = tu_gpunet(net, PREC_FP32, GPUNET_INFERENCE);
    if (death_g) {
        char msg[1024];
        struct {
            const char *what;
            void (*fn)(void *);
        } calls[] = {{"gpunet_backward", call_backward}, {"gpunet_step", call_step}, {"gpunet_download_grads", call_grads}};
        for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
            const int st = ld_run_child(calls[k].fn, NULL, msg, sizeof msg);
            CHECK_MSG(st != 0 && strstr(msg, calls[k].what) && strstr(msg, "inference only"), "%s: status %d, stderr: %s", calls[k].what, st,
                      msg);
        }
        /* the first convolution's output: shared memory, not kept; the logits are */
        const int mid = net->layer[0].out;
        const int st = ld_run_child(call_node, (void *)&mid, msg, sizeof msg);
        CHECK_MSG(st != 0 && strstr(msg, "not kept"), "download of node %d: status %d, stderr: %s", mid, st, msg);
        /* (the logits download: gpu_inference_logits_outlive_the_next_batch; a forked child has no
         * device to copy from) */
        /* the velocity copies copy nothing (a checkpoint's velocity stays on the host) */
        float *v = xcalloc(net->params_total + 1, sizeof *v);
        v[0] = 3.0f;
        gpunet_upload_velocity(death_g, v);
        gpunet_download_velocity(death_g, v);
        CHECK(v[0] == 3.0f);
        free(v);
        gpunet_free(death_g);
    }
    net_free(net);
}

/* The Loss column of a run's step rows (at most n), from the "  Step Epoch" heading on. */
static int loss_rows(const char *o, double *loss, int n) {
    const char *p = o ? strstr(o, "  Step Epoch") : NULL;
    int k = 0;
    while (p && k < n && (p = strchr(p, '\n')) != NULL) {
        long step, epoch;
        double rate, l;
        if (sscanf(++p, "%ld %ld %lf %lf", &step, &epoch, &rate, &l) != 4) break;
        loss[k++] = l;
    }
    return k;
}

/* --forward_only through the binary: the GPU run (its net built for inference only) prints the
 * same losses as the CPU run from the same weights and batches, and says its memory. */
TEST(gpu_forward_only_run_matches_the_cpu) {
    if (!tu_select_gpu()) return;
    double loss[2][3];
    int rows[2] = {0, 0};
    const char *dev[2] = {"cpu", "gpu"};
    for (int k = 0; k < 2; k++) {
        char cmd[512], *o = NULL;
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=%s --forward_only --batch_size=8 --num_batches=3 --display_every=1 2>&1",
                 dev[k]);
        const int rc = th_run(cmd, &o);
        rows[k] = loss_rows(o, loss[k], 3);
        CHECK_MSG(rc == 0 && rows[k] == 3, "%s: exit %d, %d rows\n%s", cmd, rc, rows[k], o ? o : "");
        if (k == 1) CHECK_MSG(o && strstr(o, "GPU memory: "), "no GPU memory line:\n%s", o ? o : "");
        free(o);
    }
    for (int s = 0; s < 3 && rows[0] == 3 && rows[1] == 3; s++)
        CHECK_MSG(fabs(loss[0][s] - loss[1][s]) <= 1.5e-3, "step %d: loss %.3f on the cpu, %.3f on the gpu", s + 1, loss[0][s], loss[1][s]);
}

/* --forward_only's steps on the GPU queue their losses into the device's ring of results instead
 * of waiting for each forward (it synchronised once a step: the device idled while the host queued
 * the next forward): 24 steps, counted by the emulated device, against the same steps read one by
 * one; the losses are the same bits either way. */
TEST(gpu_forward_only_steps_wait_for_nothing) {
    if (!tu_select_gpu()) return;
#ifndef NVCNN_GPU_EMU
    th_skip("host synchronisations are counted by the emulated device");
#else
    Net *net = model_build_net(model_find("lenet"), 4, 10);
    net_finalize(net, 5);
    const int steps = 24;
    double loss[2][24];
    long syncs[2];
    for (int lazy = 0; lazy < 2; lazy++) {
        GpuNet *g = tu_gpunet(net, PREC_FP32, GPUNET_INFERENCE);
        if (!g) break;
        Dist d = {0, 1, 0, 1, 0};
        TrainerConfig tc;
        tu_trainer_defaults(&tc, 1);
        tc.no_allreduce = 1;
        Trainer t;
        trainer_init(&t, net, &d, &tc, g);
        t.lazy = lazy;
        int32_t lab[4] = {1, 2, 3, 4};
        Rng r;
        rng_seed(&r, 3);
        const size_t ni = shape_count(net->node[net->input].shape);
        for (size_t i = 0; i < ni; i++) net->node[net->input].data[i] = (float)(rng_uniform(&r) * 2 - 1);
        gpunet_set_input(g, net->node[net->input].data); /* once, as synthetic data stays on the device */
        gpunet_set_labels(g, lab);
        t.device_input = 1;
        const long s0 = emu_host_syncs();
        int got = 0;
        for (int s = 0; s < steps; s++) {
            trainer_infer_begin(&t, lab);
            const double l = trainer_infer_end(&t);
            if (!lazy) loss[0][got++] = l;
        }
        syncs[lazy] = emu_host_syncs() - s0;
        if (lazy) {
            trainer_fetch(&t);
            double l, sec;
            while (got < steps && trainer_next_result(&t, &l, &sec)) loss[1][got++] = l;
        }
        CHECK_MSG(got == steps, "lazy %d: %d losses of %d steps", lazy, got, steps);
        trainer_free(&t);
        gpunet_free(g);
    }
    printf("    lenet --forward_only, %d steps: %ld host synchronisations one by one, %ld queued\n", steps, syncs[0], syncs[1]);
    CHECK_MSG(syncs[0] >= steps && syncs[1] == 0, "host synchronisations: %ld one by one, %ld queued (want 0)", syncs[0], syncs[1]);
    for (int s = 0; s < steps; s++)
        CHECK_MSG(memcmp(&loss[0][s], &loss[1][s], sizeof(double)) == 0 && isfinite(loss[0][s]), "step %d: loss %.9g one by one, %.9g queued",
                  s + 1, loss[0][s], loss[1][s]);
    net_free(net);
#endif
}

/* --forward_only's step as one CUDA Graph (gpunet_graph_infer): from the second step, the same
 * loss bits as the steps queued call by call, over batches staged in the two slots in turn (a
 * replay of a stale batch would repeat a loss), for a model with dropout (which inference passes
 * through: it refuses a training graph) and one with batch norm in fp16 NHWC; on the emulated
 * device one graph launch a step after the first. */
static void infer_graph_run(const char *model, int precision, unsigned flags, int graph, double *loss, long *launches) {
    enum { B = 3, STEPS = 5 };
    const Reduced *rd = reduced_of(model);
    Net *net = model_build_reduced(model_find(model), B, 10, rd->size, rd->div, ACT_RELU);
    net_finalize(net, 9);
    GpuNet *g = tu_gpunet(net, precision, flags | GPUNET_INFERENCE | GPUNET_DETERMINISTIC);
    if (!g) {
        net_free(net);
        return;
    }
    uint8_t *img[2];
    int32_t *lab[2];
    tu_staged_batches(net, 21, img, lab);
    Dist d = {0, 1, 0, 1, 0};
    TrainerConfig tc;
    tu_trainer_defaults(&tc, 1);
    tc.no_allreduce = 1;
    tc.no_cuda_graph = !graph;
    Trainer t;
    trainer_init(&t, net, &d, &tc, g);
    t.device_input = 1;
    t.lazy = 1;
#ifdef NVCNN_GPU_EMU
    const long l0 = emu_graph_launches();
#endif
    for (int s = 0; s < STEPS; s++) {
        const int k = s % 2;
        gpunet_stage_batch(g, k, img[k], lab[k]);
        gpunet_use_batch(g, k);
        trainer_infer_begin(&t, lab[k]);
        trainer_infer_end(&t);
        gpunet_stage_wait(g, k);
    }
#ifdef NVCNN_GPU_EMU
    *launches = emu_graph_launches() - l0;
#else
    *launches = -1;
#endif
    trainer_fetch(&t);
    for (int s = 0; s < STEPS; s++) CHECK_MSG(trainer_next_loss(&t, &loss[s]), "%s: loss %d missing", model, s);
    CHECK_MSG(graph == gpunet_graph_made(g), "%s: graph %d, made %d", model, graph, gpunet_graph_made(g));
    trainer_free(&t);
    gpunet_free(g);
    net_free(net);
    tu_staged_batches_free(img, lab);
}

TEST(gpu_forward_only_graph_gives_the_same_bits) {
    if (!tu_select_gpu()) return;
    const struct {
        const char *model;
        int prec;
        unsigned flags;
    } c[] = {{"alexnet", PREC_FP32, GPUNET_NCHW}, {"resnet18", PREC_FP16, GPUNET_NHWC | GPUNET_FUSE}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        double loss[2][5] = {{0}};
        long launches[2] = {0, 0};
        for (int graph = 0; graph < 2; graph++) infer_graph_run(c[i].model, c[i].prec, c[i].flags, graph, loss[graph], &launches[graph]);
        for (int s = 0; s < 5; s++)
            CHECK_MSG(memcmp(&loss[0][s], &loss[1][s], sizeof(double)) == 0 && isfinite(loss[0][s]),
                      "%s step %d: loss %.9g call by call, %.9g as a graph", c[i].model, s + 1, loss[0][s], loss[1][s]);
        CHECK_MSG(loss[0][0] != loss[0][1], "%s: two batches gave the same loss: the comparison tests nothing", c[i].model);
        printf("    %s %s: 5 forward steps, graph launches %ld call by call, %ld as a graph\n", c[i].model, precision_name((Precision)c[i].prec),
               launches[0], launches[1]);
        CHECK_MSG(launches[0] <= 0 && (launches[1] == 4 || launches[1] < 0), "%s: graph launches %ld and %ld (want 0 and 4)", c[i].model,
                  launches[0], launches[1]);
    }
}
