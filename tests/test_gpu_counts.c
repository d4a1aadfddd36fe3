/* test_gpu_counts.c: what one training step asks of the device, counted by the emulated device
 * (tests/emu/emu_counts.h) for resnet50 in fp16 (docs/performance.md, "The GPU step in counts"):
 * kernel launches (in all and per kernel), host synchronisations, cuDNN and cuBLAS calls, and a
 * model of the bytes that the kernels other than the convolutions read and write per image,
 * computed from the plan of the full-size net, against what a 7,000 img/s step on an H100 leaves
 * for them. The counts per step do not depend on the batch or the image size (every layer makes
 * the same calls whatever its shape, and channel padding is the same where every width is a
 * multiple of 8, as the full net's are), so the step runs resnet50 reduced (32x32, channels / 8)
 * at batch 32; the byte model uses the full net (224x224, full width).
 *
 * NVCNN_COUNTS_TABLE=1 prints the per-kernel table as well:
 *   cd build-emu/root && NVCNN_COUNTS_TABLE=1 NVCNN_BUILD=$PWD/.. ../run_tests gpu_step_counts
 * Where no GPU exists the test skips with "no GPU" and the runner hands it to the emulated device;
 * on a real GPU it skips (the counts come from the emulator). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the byte model ---- */
/* Bytes per image that the non-convolution kernels of one training step move, by layer type, as
 * the code does it today (a model: each kernel counted as whole passes over the tensors it reads
 * and writes, in the storage type of esize bytes; caches and partial-sum arrays left out):
 *   bn      batch norm: forward reads x for the statistics, reads it again and writes y (3
 *           passes); backward reads x and dy for the sums, reads them again and writes dx, reading
 *           dx too where it adds into it (5 or 6)
 *   fused   (the design with --fuse=on, src/cuda/fuse.cu) bn+relu: forward 3 passes as bn, writing
 *           the ReLU's output; backward reads x, dy and y (the ReLU's mask) for the sums, reads
 *           them again and writes dx (7, +1 where it adds); bn+add+relu: forward also reads the
 *           shortcut z (4); backward also writes z's gradient (8, +1 for each that adds). The
 *           absorbed ReLU and add move nothing.
 *   act     forward reads x, writes y (2); backward reads y and dy, writes dx (+1 where it adds)
 *   add     forward reads both inputs, writes y (3); backward copies dy into each input's gradient
 *           (2 per input, +1 where it adds)
 *   maxpool forward reads x, writes y; backward reads dy and the argmax (4 bytes per output),
 *           writes dx; avg and flatten likewise, over their smaller tensors
 *   the rest (fc's bias, the loss) is counted as a read and a write of their tensors.
 * The convolutions (cuDNN) and the fully connected GEMM (cuBLAS) are left out: their traffic is
 * the convolutions' business, except, in 16 bits with NCHW tensors, the transposes cuDNN makes to
 * run its NHWC tensor-core kernels (the emulated cuDNN counts them: emu_cudnn_transposes): modelled
 * as each activation operand of each direction (x and y forward, dy and dx backward data, x and dy
 * backward filter) read and written once more. The optimizer's passes over the parameter arenas (fp32 master
 * weights, gradients, momentum; 16-bit weights and convolution gradients) are per step, so per
 * image they shrink with the batch: reported separately, for a batch of 256. */
typedef struct ByteModel {
    double fwd, bwd; /* per image */
    double by_type[8];
} ByteModel;

enum { BM_BN, BM_ACT, BM_ADD, BM_POOL, BM_OTHER, BM_TRANSPOSE, BM_TYPES };
static const char *const bm_names[BM_TYPES] = {"batch norm", "activation", "residual add", "pooling", "other", "transposes"};

/* The layer consuming node v alone, or -1 (none or several). */
static int sole_consumer(const Net *net, int v) {
    int who = -1;
    for (int i = 0; i < net->nlayer; i++)
        for (int k = 0; k < net->layer[i].nin; k++)
            if (net->layer[i].in[k] == v) {
                if (who >= 0) return -1;
                who = i;
            }
    return who;
}

/* fuse: the batch norms that fuse as fuse.cu decides on nets like resnet's (a batch norm whose
 * output only a ReLU reads, or only an add whose output only a ReLU reads); the test checks the
 * count against what the emulated GpuNet fused. nchw16: a 16-bit NCHW step (cuDNN transposes). */
static void byte_model(const Net *net, double esize, int fuse, int nchw16, ByteModel *m, int *nfused) {
    memset(m, 0, sizeof *m);
    const int nn = net->nnode;
    int *first = malloc((size_t)nn * sizeof *first), *last = malloc((size_t)nn * sizeof *last);
    char *zero = malloc((size_t)nn), *acc = malloc((size_t)net_input_slots(net) + 1);
    net_grad_schedule(net, first, last, zero, acc);
    const double per = 1.0 / net->batch;
    char *absorbed = calloc((size_t)net->nlayer, 1);
    *nfused = 0;
    /* from the last layer back: of a projection block's two batch norms into one add, the later
     * (whose shortcut input is made before it) takes the add, as fuse.cu's rule has it */
    for (int i = net->nlayer - 1; fuse && i >= 0; i--) {
        if (strcmp(net->layer[i].ops->type, "bn") != 0) continue;
        const int a = sole_consumer(net, net->layer[i].out);
        if (a < 0) continue;
        if (strcmp(net->layer[a].ops->type, "relu") == 0) {
            absorbed[a] = 1, (*nfused)++;
        } else if (strcmp(net->layer[a].ops->type, "add") == 0) {
            const int r = sole_consumer(net, net->layer[a].out);
            if (r >= 0 && strcmp(net->layer[r].ops->type, "relu") == 0 && !absorbed[a]) absorbed[a] = absorbed[r] = 2, (*nfused)++;
        }
    }
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        const char *t = l->ops->type;
        const double in = (double)shape_count(net->node[l->in[0]].shape) * esize * per;
        const double out = (double)shape_count(net->node[l->out].shape) * esize * per;
        const int a0 = acc[net_input_slot(net, i)];
        double f = 0, b = 0;
        int kind = BM_OTHER;
        if (absorbed[i]) continue;
        if (strcmp(t, "conv") == 0) {
            if (!nchw16) continue;
            kind = BM_TRANSPOSE;
            f = 2 * (in + out);
            b = 2 * (out + in) + (l->in[0] != net->input ? 2 * (out + in) : 0); /* filter; data unless on the input */
        } else if (strcmp(t, "fc") == 0) {
            continue;
        } else if (strcmp(t, "bn") == 0) {
            kind = BM_BN;
            const int a = fuse ? sole_consumer(net, l->out) : -1;
            const int with = a >= 0 && absorbed[a] ? absorbed[a] : 0; /* 1: relu, 2: add and relu */
            f = 2 * in + out + (with == 2 ? in : 0);
            b = 3 * in + 2 * out + (with ? 2 * out : 0) + (a0 ? in : 0) + (with == 2 ? in : 0);
            if (with == 2) { /* z's gradient: written, or added where the add's plan adds */
                const Layer *la = &net->layer[a];
                const int zk = la->in[0] == l->out ? 1 : 0;
                b += acc[net_input_slot(net, a) + zk] ? in : 0;
            }
        } else if (strcmp(t, "add") == 0) {
            kind = BM_ADD;
            for (int k = 0; k < l->nin; k++) {
                const double x = (double)shape_count(net->node[l->in[k]].shape) * esize * per;
                f += x;
                b += out + x + (acc[net_input_slot(net, i) + k] ? x : 0);
            }
            f += out;
        } else if (strcmp(t, "maxpool") == 0 || strcmp(t, "avgpool") == 0) {
            kind = BM_POOL;
            const double argmax = (double)shape_count(net->node[l->out].shape) * 4 * per;
            f = in + out + (t[0] == 'm' ? argmax : 0);
            b = out + (t[0] == 'm' ? argmax : 0) + in + (a0 ? in : 0);
        } else if (strcmp(t, "avg") == 0 || strcmp(t, "flatten") == 0) {
            kind = BM_POOL;
            f = in + out;
            b = out + in + (a0 ? in : 0);
        } else if (strcmp(t, "softmax_xent") == 0) {
            f = in + out;
            b = in;
        } else { /* the activations */
            kind = BM_ACT;
            f = in + out;
            b = 2 * out + in + (a0 ? in : 0);
        }
        m->fwd += f;
        m->bwd += b;
        m->by_type[kind] += f + b;
    }
    free(first), free(last), free(zero), free(acc), free(absorbed);
}

/* The optimizer's bytes per step over the parameter arenas of P floats, today's passes: zeroing
 * the gradients (write 4), the convolutions' 16-bit gradients cast into fp32 (read 2, write 4),
 * unscaling (read 4, write 4), the non-finite check (read 4), the weights' sum of squares (read 4),
 * the update with weight decay (read w, g, v; write g, v, w: 24), the 16-bit weights (read 4,
 * write 2). */
static double optimizer_bytes_before(double P) { return P * (4 + 6 + 8 + 4 + 4 + 24 + 6); }
/* ... and the device-side step's: zeroing (4), the one cast of the convolutions' gradients (6), the
 * non-finite check (4), the sum of squares (4), and one fused pass that unscales, decays, updates and
 * writes the 16-bit weights (read w, g, v; write g, v, w, and 2 for the 16-bit copy: 26). */
static double optimizer_bytes_after(double P) { return P * (4 + 6 + 4 + 4 + 26); }

/* ---- the counts ---- */
#ifdef NVCNN_GPU_EMU
#define MAX_KERNELS 256
typedef struct Counts {
    long launches, syncs, cudnn, cublas, nccl, copies, memsets, events, graphs, kernels_run, transposes;
    int nk;
    const char *name[MAX_KERNELS];
    long per[MAX_KERNELS];
} Counts;

static void counts_now(Counts *c) {
    c->launches = 0;
    c->nk = emu_launch_table(c->name, c->per, MAX_KERNELS);
    if (c->nk > MAX_KERNELS) c->nk = MAX_KERNELS;
    for (int k = 0; k < c->nk; k++) c->launches += c->per[k];
    c->syncs = emu_host_syncs();
    c->cudnn = emu_cudnn_calls();
    c->cublas = emu_stream_ops("cublas");
    c->nccl = emu_stream_ops("ncclAllReduce (reads"); /* one of the two pieces of each allreduce */
    c->copies = emu_stream_ops("cudaMemcpyAsync");
    c->memsets = emu_stream_ops("cudaMemsetAsync");
    c->events = emu_stream_ops("cudaEventRecord") + emu_stream_ops("cudaStreamWaitEvent");
    c->graphs = emu_graph_launches();
    c->kernels_run = emu_stream_ops("k_"); /* every kernel is named k_... (src/cuda/) */
    c->transposes = emu_cudnn_transposes();
}

/* b - a, kernel by kernel (names are kept in b's order) */
static void counts_diff(const Counts *a, const Counts *b, Counts *d) {
    memset(d, 0, sizeof *d);
    d->launches = b->launches - a->launches;
    d->syncs = b->syncs - a->syncs;
    d->cudnn = b->cudnn - a->cudnn;
    d->cublas = b->cublas - a->cublas;
    d->nccl = b->nccl - a->nccl;
    d->copies = b->copies - a->copies;
    d->memsets = b->memsets - a->memsets;
    d->events = b->events - a->events;
    d->graphs = b->graphs - a->graphs;
    d->kernels_run = b->kernels_run - a->kernels_run;
    d->transposes = b->transposes - a->transposes;
    for (int k = 0; k < b->nk; k++) {
        long before = 0;
        for (int j = 0; j < a->nk; j++)
            if (strcmp(a->name[j], b->name[k]) == 0) before = a->per[j];
        if (b->per[k] - before == 0) continue;
        d->name[d->nk] = b->name[k];
        d->per[d->nk++] = b->per[k] - before;
    }
}

static int counts_equal(const Counts *a, const Counts *b) {
    if (a->launches != b->launches || a->syncs != b->syncs || a->cudnn != b->cudnn || a->cublas != b->cublas || a->nk != b->nk ||
        a->copies != b->copies || a->memsets != b->memsets || a->events != b->events || a->graphs != b->graphs ||
        a->kernels_run != b->kernels_run || a->transposes != b->transposes)
        return 0;
    for (int k = 0; k < a->nk; k++)
        if (strcmp(a->name[k], b->name[k]) != 0 || a->per[k] != b->per[k]) return 0;
    return 1;
}

static long launches_of(const Counts *c, const char *name) {
    for (int k = 0; k < c->nk; k++)
        if (strcmp(c->name[k], name) == 0) return c->per[k];
    return 0;
}
#endif

static int count_type(const Net *net, const char *type) {
    int n = 0;
    for (int i = 0; i < net->nlayer; i++) n += strcmp(net->layer[i].ops->type, type) == 0;
    return n;
}

#ifdef NVCNN_GPU_EMU
/* The counts of a steady-state step of resnet50 fp16 (reduced: the counts do not depend on the
 * sizes), queued call by call (graph 0) or as one CUDA Graph (graph 1), read late as nvcnn's loop
 * does; *fetch: what reading the results of every step so far costs. */
static void step_counts(int graph, unsigned flags, Counts *step, Counts *fetch, int *nconv, int *nbn, int *nlayer, int *fused) {
    const int B = 32;
    /* 32x32 and 1/8 of the channels: every width a multiple of 8, as the full net's (a narrower
     * one would pad channels for the tensor cores where the full net does not) */
    Net *net = model_build_reduced(model_find("resnet50"), B, 10, 32, 8, ACT_RELU);
    net_finalize(net, 1);
    *nconv = count_type(net, "conv"), *nbn = count_type(net, "bn"), *nlayer = net->nlayer;
    Rng r;
    rng_seed(&r, 3);
    tu_fill_uniform(net->node[net->input].data, shape_count(net->node[net->input].shape), -1, 1, &r);
    int32_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = (int32_t)rng_below(&r, 10);
    GpuNet *g = tu_gpunet(net, PREC_FP16, flags);
    if (!g) return;
    *fused = gpunet_fused(g, NULL, NULL);
    Dist d = {0, 1, 0, 1, 0};
    TrainerConfig tc;
    /* dynamic from 128, not main.c's 65536: that overflows in this net's first steps, and a skipped
     * step has no update to count */
    tu_trainer_defaults(&tc, 128);
    tc.no_cuda_graph = !graph;
    Trainer t;
    trainer_init(&t, net, &d, &tc, g);
    if (graph && !t.graph) { /* NVCNN_CUDA_GRAPH=off */
        trainer_free(&t);
        gpunet_free(g);
        net_free(net);
        memset(step, 0, 3 * sizeof *step);
        return;
    }
    gpunet_set_input(g, net->node[net->input].data);
    gpunet_set_labels(g, labels);
    t.device_input = 1; /* the batch stays on the device, as with staged real data */
    t.lazy = 1;         /* as nvcnn's training loop: the results are read on the steps that print */
    Counts c[4];
    for (int s = 0; s < 5; s++) {
        if (s >= 1) counts_now(&c[s - 1]);
        trainer_step_begin(&t, labels);
        trainer_step_end(&t, 0.01);
    }
    trainer_fetch(&t); /* a step that prints: its results (and every one before) read */
    Counts after;
    counts_now(&after);
    counts_diff(&c[3], &after, fetch);
    for (int k = 0; k < 3; k++) counts_diff(&c[k], &c[k + 1], &step[k]);
    double loss;
    int nloss = 0;
    while (trainer_next_loss(&t, &loss)) nloss += isfinite(loss) != 0;
    CHECK_MSG(nloss == 5, "%d finite losses read for 5 steps", nloss);
    CHECK_MSG(t.skipped_steps == 0, "%ld steps skipped: the counts are not those of a step that updates", t.skipped_steps);
    CHECK_MSG(!graph || gpunet_graph_made(g), "the graph was not made");
    trainer_free(&t);
    gpunet_free(g);
    net_free(net);
}
#endif


/* An H100 SXM: HBM3 at 3.35 TB/s (NVIDIA's data sheet); 7,000 img/s is issue 34's goal for
 * resnet50 fp16 at batch 256. The convolutions' share of the step assumes cuDNN runs them at 60 %
 * of the 989 TFLOP/s of dense fp16 tensor math (the same data sheet): an assumption, printed. */
#define H100_BYTES_PER_S 3.35e12
#define GOAL_IMG_PER_S 7000.0
#define CONV_FLOPS_PER_S (0.6 * 989e12)

TEST_LIMIT(gpu_step_counts_resnet50_fp16, 900) {
    /* the byte model (host only) */
    Net *full = model_build_net(model_find("resnet50"), 1, 1000);
    net_finalize(full, 1);
    /* two designs: before (NCHW, nothing fused, the host-driven step: cuDNN transposes every
     * 16-bit convolution's operands) and after (NHWC, batch norm fused, the device-side step) */
    ByteModel mb, ma;
    int fused_before, fused_model;
    byte_model(full, 2.0, 0, 1, &mb, &fused_before);
    byte_model(full, 2.0, 1, 0, &ma, &fused_model);
    const double P = (double)full->params_total, flops = 3.0 * net_forward_flops(full) / full->batch;
    const double opt = optimizer_bytes_after(P) / 256.0, opt_before = optimizer_bytes_before(P) / 256.0;
    const double step_s = 1.0 / GOAL_IMG_PER_S, conv_s = flops / CONV_FLOPS_PER_S;
    const double budget = (step_s - conv_s) * H100_BYTES_PER_S;
    printf("    model: resnet50 224x224 fp16, bytes per image the non-convolution kernels (and cuDNN's transposes) move, "
           "before (NCHW, unfused, host-driven step) -> after (NHWC, %d batch norms fused, device-side step)\n", fused_model);
    for (int k = 0; k < BM_TYPES; k++)
        printf("    model:   %-13s %7.1f MB -> %7.1f MB\n", bm_names[k], mb.by_type[k] / 1e6, ma.by_type[k] / 1e6);
    printf("    model:   optimizer     %7.1f MB -> %7.1f MB at batch 256\n", opt_before / 1e6, opt / 1e6);
    printf("    model:   total         %7.1f MB -> %7.1f MB (forward %.1f -> %.1f, backward %.1f -> %.1f)\n",
           (mb.fwd + mb.bwd + opt_before) / 1e6, (ma.fwd + ma.bwd + opt) / 1e6, mb.fwd / 1e6, ma.fwd / 1e6, mb.bwd / 1e6, ma.bwd / 1e6);
    printf("    budget: a step at %.0f img/s is %.1f us per image; convolutions (%.1f GFLOP) at %.0f TFLOP/s take %.1f us, "
           "leaving %.1f us: %.1f MB at %.2f TB/s\n",
           GOAL_IMG_PER_S, step_s * 1e6, flops / 1e9, CONV_FLOPS_PER_S / 1e12, conv_s * 1e6, (step_s - conv_s) * 1e6, budget / 1e6,
           H100_BYTES_PER_S / 1e12);
    /* the model itself, against what the net is: 53 batch norms, 16 adds; 33 batch norms end in
     * a ReLU of their own and 16 in the block's add and ReLU (the last of each bottleneck) */
    CHECK(count_type(full, "bn") == 53 && count_type(full, "add") == 16);
    CHECK_MSG(fused_model == 49 && fused_before == 0, "model fused %d", fused_model);
    CHECK_MSG(mb.by_type[BM_BN] > mb.by_type[BM_ACT] && mb.by_type[BM_ACT] > 0 && mb.by_type[BM_ADD] > 0 && mb.by_type[BM_TRANSPOSE] > 0,
              "bn %g act %g add %g", mb.by_type[BM_BN], mb.by_type[BM_ACT], mb.by_type[BM_ADD]);
    /* fused, the ReLUs and adds that remain are those outside a bn (none in resnet50), and nothing is transposed */
    CHECK_MSG(ma.by_type[BM_ACT] == 0 && ma.by_type[BM_ADD] == 0 && ma.by_type[BM_TRANSPOSE] == 0, "act %g add %g transposes %g",
              ma.by_type[BM_ACT], ma.by_type[BM_ADD], ma.by_type[BM_TRANSPOSE]);
    CHECK(ma.fwd + ma.bwd < mb.fwd + mb.bwd);
    net_free(full);
#ifndef NVCNN_GPU_EMU
    if (tu_gpus() == 0) return;
    th_skip("the counts come from the emulated device (make GPU_EMU=1), which make test builds");
    return;
#else
    if (!tu_select_gpu()) return;
    const int table = getenv("NVCNN_COUNTS_TABLE") != NULL;
    /* the design before (NCHW, unfused, call by call: the host-driven step is gone, so this
     * is the layers' half of it), after call by call, after as one CUDA Graph (the default) */
    static const struct { const char *what; unsigned flags; int graph; } designs[] = {
        {"NCHW, unfused, call by call", GPUNET_NCHW | GPUNET_NOFUSE, 0},
        {"NHWC, fused, call by call", GPUNET_NHWC | GPUNET_FUSE, 0},
        {"NHWC, fused, as one CUDA Graph", GPUNET_NHWC | GPUNET_FUSE, 1},
    };
    long launches_unfused = 0, cudnn_unfused = 0;
    for (int d = 0; d < 3; d++) {
        const int graph = designs[d].graph;
        Counts step[3], fetch;
        memset(step, 0, sizeof step);
        memset(&fetch, 0, sizeof fetch);
        int nconv = 0, nbn = 0, nlayer = 0, fused = 0;
        step_counts(graph, designs[d].flags, step, &fetch, &nconv, &nbn, &nlayer, &fused);
        const Counts *s = &step[2];
        if (graph && s->graphs == 0 && s->launches == 0 && s->cudnn == 0) {
            printf("    resnet50 fp16 (emulated) as one CUDA Graph: not counted (NVCNN_CUDA_GRAPH=off)\n");
            continue;
        }
        printf("    resnet50 fp16 (emulated, batch 32), %s: %d batch norms fused, %ld NCHW<->NHWC transposes in cuDNN per step\n",
               designs[d].what, fused, s->transposes);
        /* the fusion pass fused what the byte model assumed; NHWC leaves cuDNN nothing to transpose */
        CHECK_MSG(fused == (d ? fused_model : 0), "%s: %d fused, the model %d", designs[d].what, fused, d ? fused_model : 0);
        CHECK_MSG(d ? s->transposes == 0 : s->transposes > 0, "%s: %ld transposes", designs[d].what, s->transposes);
        printf("    resnet50 fp16 (emulated, batch 32), %s: per step %ld kernel launches by the host (%d kernels), %ld graph launches "
               "(%ld kernels run in them), %ld host synchronisations, %ld cuDNN calls, %ld cuBLAS calls, %ld copies, %ld memsets, "
               "%ld event records and waits; reading the results of every step so far: %ld host synchronisations\n",
               designs[d].what, s->launches, s->nk, s->graphs, s->kernels_run, s->syncs, s->cudnn, s->cublas,
               s->copies, s->memsets, s->events, fetch.syncs - s->syncs);
        for (int k = 0; k < s->nk; k++)
            if (table || s->per[k] >= 16) printf("      %-28s %4ld\n", s->name[k], s->per[k]);
        /* fusion takes the ReLUs' and the adds' passes off the step (the batch norms' own kernels
         * run in their place: launches, which the graph makes cheap, are not what fusion saves) */
        const long eltwise = launches_of(s, "k_act_forward<T>") + launches_of(s, "k_act_backward<T>") + launches_of(s, "k_add2<T>") +
                             launches_of(s, "k_acc<T>");
        if (d == 0) {
            launches_unfused = s->launches;
            CHECK_MSG(eltwise > 0, "unfused: no ReLU or add launches");
        } else if (d == 1) {
            CHECK_MSG(eltwise == 0, "fused: %ld ReLU and add launches", eltwise);
            /* every batch norm and pooling of resnet50 in NHWC takes the 16-byte vector kernels (the
             * general ones ran 5-10 times slower than memory on an H200): no tensor fell back
             * through a channel count or an alignment */
            const long vec = launches_of(s, "(k_bn_partial_nhwc_vec<T, GRAD>)") + launches_of(s, "k_bn_apply_nhwc<T>") +
                             launches_of(s, "k_bn_grad_input_nhwc<T>"),
                       general = launches_of(s, "(k_bn_partial_nhwc<T, GRAD>)") + launches_of(s, "k_bn_apply<T>") +
                                 launches_of(s, "k_bn_grad_input<T>") + launches_of(s, "k_pool_forward<T>") + launches_of(s, "k_pool_backward<T>");
            CHECK_MSG(vec == 4L * nbn && general == 0 && launches_of(s, "k_pool_forward_nhwc<T>") == 1 && launches_of(s, "k_pool_backward_nhwc<T>") == 1,
                      "NHWC: %ld vector batch-norm launches for %d batch norms, %ld of the general kernels, pooling %ld + %ld vector", vec, nbn,
                      general, launches_of(s, "k_pool_forward_nhwc<T>"), launches_of(s, "k_pool_backward_nhwc<T>"));
            printf("    fused against unfused, call by call: %ld kernel launches and %ld cuDNN calls against %ld and %ld\n", s->launches, s->cudnn,
                   launches_unfused, cudnn_unfused);
        }
        if (d == 0) cudnn_unfused = s->cudnn;
        /* steady state: the second and the third measured steps ask the same of the device */
        CHECK_MSG(counts_equal(&step[1], &step[2]), "graph %d: steps 3 and 4 differ: %ld and %ld launches, %ld and %ld synchronisations",
                  graph, step[1].launches, step[2].launches, step[1].syncs, step[2].syncs);
        /* the design: a step that prints nothing never waits for the device; reading the results
         * waits once (and once more for the backward's timing events, which it reads then) */
        CHECK_MSG(s->syncs == 0, "graph %d: %ld host synchronisations in a step that prints nothing", graph, s->syncs);
        CHECK_MSG(fetch.syncs - s->syncs >= 1 && fetch.syncs - s->syncs <= 2, "graph %d: %ld host synchronisations to read the results",
                  graph, fetch.syncs - s->syncs);
        /* every convolution is at most 3 cuDNN calls (forward, backward data unless on the input,
         * backward filter), every batch norm at most 2; run by the graph or called */
        CHECK_MSG(s->cudnn <= 3L * nconv - 1 + 2L * nbn && s->cudnn > 0, "graph %d: %ld cuDNN calls, want at most %d", graph, s->cudnn,
                  3 * nconv - 1 + 2 * nbn);
        if (graph) { /* one launch of the graph, one copy (the learning rate) and nothing else from the host */
            CHECK_MSG(s->graphs == 1 && s->launches == 0 && s->copies == 1, "graph: %ld graph launches, %ld kernel launches, %ld copies",
                      s->graphs, s->launches, s->copies);
            CHECK_MSG(s->kernels_run > 0 && s->kernels_run <= 3L * nlayer + 7, "graph: %ld kernels run in the graph", s->kernels_run);
            continue;
        }
        /* the step's own kernels, whatever the layers: the loss's sum, the weights' sum of squares
         * (2), the convolutions' 16-bit weight gradients cast in one launch, the non-finite check,
         * the fused update, the accounting: 7 launches; and no layer launches more than 3 a step */
        static const char *const own[] = {"k_step_begin", "k_sumsq_partial", "k_sum_partials", "k_grad_from_half<T>",
                                          "k_nonfinite",  "k_sgd<T>",        "k_step_end"};
        long n_own = 0;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
            CHECK_MSG(launches_of(s, own[k]) == 1, "%s: %ld launches in a step, want 1", own[k], launches_of(s, own[k]));
            n_own += launches_of(s, own[k]);
        }
        CHECK_MSG(s->graphs == 0 && s->launches - n_own <= 3L * nlayer, "%ld launches for %d layers", s->launches - n_own, nlayer);
    }
#endif
}
