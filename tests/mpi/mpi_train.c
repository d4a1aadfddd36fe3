/* mpi_train.c (run under mpirun by tests/test_dist.c): data-parallel lenet training on the CPU
 * backend. Rank r trains on samples [r*B, (r+1)*B) of a fixed batch of size*B; afterwards
 *   - every rank's parameters must equal rank 0's bit for bit;
 *   - rank 0 trains the same net in one process on the whole batch (batch size*B) and compares.
 * Prints "train ranks N identical I maxrel R" on rank 0.
 * Usage: mpi_train [bucket_mb] [steps] [cpu | gpu-mpi | gpu-nccl] [det]
 * gpu-*: the ranks train on the GPU backend (GPU local_rank % GPUs, fp32) and average through
 * the host with MPI or with NCCL inside backward; the reference stays the CPU process. det: cuDNN's
 * deterministic algorithms by its heuristics (--deterministic). Rank 0 also prints each step's
 * loss ("losses ..."), the steps the GPU skipped, and where the largest difference is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dist.h"
#include "gpu.h"
#include "models.h"
#include "train.h"
#include "util.h"

enum { B = 4, K = 10 };

enum { CPU, GPU_MPI, GPU_NCCL };

static int det; /* GPUNET_DETERMINISTIC or 0 */

/* Trains; rank 0 prints the losses, prefixed by what */
static void run(Net *net, Dist *d, double bucket_mb, int steps, const int32_t *labels, int mode, const char *what) {
    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = 0.9;
    tc.opt.nesterov = 1;
    tc.opt.weight_decay = 1e-4;
    tc.loss_scale = 1;
    tc.bucket_mb = bucket_mb;
    tc.nccl = mode == GPU_NCCL;
    GpuNet *g = NULL;
    if (mode != CPU) {
        char err[512];
        int ngpu = gpu_count(err, sizeof err);
        if (ngpu == 0) die("no GPU: %s", err);
        gpu_select(d->local_rank % ngpu);
        g = gpunet_new(net, d->local_rank % ngpu, PREC_FP32, GPUNET_WORKSPACE_DEFAULT, det, err, sizeof err, NULL);
        if (!g) die("gpunet_new: %s", err);
    }
    Trainer t;
    trainer_init(&t, net, d, &tc, g);
    if (d->rank == 0) printf("losses %s:", what);
    for (int s = 0; s < steps; s++) {
        const double loss = trainer_step(&t, labels, 0.05);
        if (d->rank == 0) printf(" %.7f", loss);
    }
    trainer_sync_host(&t);
    if (d->rank == 0) printf(" (%ld skipped)\n", t.skipped_steps);
    trainer_free(&t);
    gpunet_free(g);
}

int main(int argc, char **argv) {
    Dist d;
    dist_init(&d, &argc, &argv);
    double bucket_mb = argc > 1 ? atof(argv[1]) : 0.5;
    int steps = argc > 2 ? atoi(argv[2]) : 5;
    const char *ms = argc > 3 ? argv[3] : "cpu";
    int mode = strcmp(ms, "gpu-mpi") == 0 ? GPU_MPI : strcmp(ms, "gpu-nccl") == 0 ? GPU_NCCL : CPU;
    if (mode == CPU && strcmp(ms, "cpu") != 0) die("mpi_train: unknown mode '%s'", ms);
    if (argc > 4) {
        if (strcmp(argv[4], "det") != 0) die("mpi_train: unknown option '%s'", argv[4]);
        det = GPUNET_DETERMINISTIC;
    }
    const ModelInfo *m = model_find("lenet");
    const int total = B * d.size;
    /* the fixed global batch, the same on every rank */
    size_t per = 3 * 28 * 28;
    float *x = xmalloc((size_t)total * per * sizeof *x);
    int32_t *lab = xmalloc((size_t)total * sizeof *lab);
    Rng r;
    rng_seed(&r, 99);
    for (size_t i = 0; i < (size_t)total * per; i++) x[i] = (float)(2 * rng_uniform(&r) - 1);
    for (int i = 0; i < total; i++) lab[i] = (int32_t)rng_below(&r, K);

    Net *net = model_build_net(m, B, K);
    /* rank-dependent init: the broadcast must make the replicas equal */
    net_finalize(net, 7 + (uint64_t)d.rank);
    memcpy(net->node[net->input].data, x + (size_t)d.rank * B * per, (size_t)B * per * sizeof *x);
    run(net, &d, bucket_mb, steps, lab + d.rank * B, mode, ms);

    /* identical on every rank */
    float *p0 = xmalloc(net->params_total * sizeof *p0);
    memcpy(p0, net->params, net->params_total * sizeof *p0);
    dist_bcast(&d, p0, net->params_total * sizeof *p0);
    double mismatch = memcmp(p0, net->params, net->params_total * sizeof *p0) != 0;
    dist_allreduce_sum_d(&d, &mismatch, 1);

    if (d.rank == 0) {
        Dist one = {0, 1, 0, 1, 0};
        Net *ref = model_build_net(m, total, K);
        net_finalize(ref, 7);
        memcpy(ref->node[ref->input].data, x, (size_t)total * per * sizeof *x);
        run(ref, &one, bucket_mb, steps, lab, CPU, "one process");
        double maxrel = 0;
        size_t at = 0;
        for (size_t i = 0; i < ref->params_total; i++) {
            double a = net->params[i], b = ref->params[i];
            double rel = fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), 1e-2);
            if (rel > maxrel) maxrel = rel, at = i;
        }
        int p = 0;
        while (p + 1 < ref->nparam && ref->param[p + 1].off <= at) p++;
        printf("largest difference at %s[%zu]: ranks %.7g, one process %.7g\n", ref->param[p].name, at - ref->param[p].off,
               (double)net->params[at], (double)ref->params[at]);
        printf("train ranks %d identical %d maxrel %.3e\n", d.size, mismatch == 0, maxrel);
        net_free(ref);
    }
    free(p0);
    free(x);
    free(lab);
    net_free(net);
    dist_finalize(&d);
    return 0;
}
