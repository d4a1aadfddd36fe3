/* main.c: command line -> configuration, header lines, the training loop, the summary. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "dist.h"
#include "gpu.h"
#include "models.h"
#include "net.h"
#include "optim.h"
#include "train.h"
#include "util.h"

extern void openblas_set_num_threads(int);

typedef struct Run {
    Config cfg;
    Dist dist;
    const ModelInfo *model;
    int total_batch;
    int threads;
    long nstep;
    size_t nrecord;  /* images per epoch over all ranks */
    double base_lr;
} Run;

/* Picks the backend. There is no GPU backend in this build: --device=gpu is refused with the
 * reason, and without --device one line says that the CPU is used. */
static void choose_device(Run *r) {
    char why[256] = "";
    int ngpu = gpu_count(why, sizeof why);
    if (r->cfg.device == DEVICE_GPU) {
        if (ngpu == 0) die_code(EXIT_USAGE, "--device=gpu: no usable GPU: %s", why);
        die_code(EXIT_USAGE, "--device=gpu: this build has no GPU training backend yet; use --device=cpu");
    }
    if (r->cfg.device == DEVICE_AUTO) {
        if (ngpu == 0)
            printf("No GPU found (%s): using the CPU backend\n", why);
        else
            printf("Found %d GPU(s), but this build has no GPU training backend yet: using the CPU backend\n", ngpu);
        r->cfg.device = DEVICE_CPU;
    }
    if (r->cfg.precision != PREC_FP32)
        die_code(EXIT_USAGE, "--precision=%s needs the GPU backend; the CPU backend trains in fp32",
                 precision_name(r->cfg.precision));
}

/* Flags whose features are not in this build yet: refused, never silently ignored. */
static void refuse_unsupported(const Config *c) {
    if (c->data_dir) die_code(EXIT_USAGE, "--data_dir: training from TFRecords is not supported yet; omit it for synthetic data");
    if (c->eval) die_code(EXIT_USAGE, "--eval is not supported yet");
    if (c->log_dir) die_code(EXIT_USAGE, "--log_dir: checkpoints and logs are not supported yet");
    if (c->distort_color) die_code(EXIT_USAGE, "--distort_color applies to real data (--data_dir), not supported yet");
    if (c->input_threads) die_code(EXIT_USAGE, "--input_threads applies to real data (--data_dir), not supported yet");
    if (c->skip_corrupt) die_code(EXIT_USAGE, "--skip_corrupt applies to real data (--data_dir), not supported yet");
    if (c->allreduce == ALLREDUCE_NCCL) die_code(EXIT_USAGE, "--allreduce=nccl needs the GPU backend; the CPU backend uses MPI");
}

static void print_header(const Run *r, const Net *net) {
    const Config *c = &r->cfg;
    printf("Cmd line args:\n");
    for (int i = 1; i < c->argc; i++) printf("  %s\n", c->argv[i]);
    printf("Num ranks:   %d\n", r->dist.size);
    if (c->data_dir)
        printf("Num images:  %zu\n", r->nrecord);
    else
        printf("Num images:  Synthetic\n");
    printf("Model:       %s\n", r->model->name);
    printf("Parameters:  %zu\n", net_num_params(net));
    printf("Batch size:  %d per device\n", c->batch_size);
    printf("             %d total\n", r->total_batch);
    if (r->dist.size == 1)
        printf("Devices:     cpu (%d threads)\n", r->threads);
    else
        printf("Devices:     %d x cpu (%d threads each)\n", r->dist.size, r->threads);
    printf("Data format: NCHW\n");
    printf("Data type:   %s\n", precision_name(c->precision));
    printf("Learning rate: %g (%s)\n", r->base_lr, c->given_learning_rate ? "given" : "model default");
    fflush(stdout);
}

static void print_speed_summary(const double *rates, long n, int burnin) {
    printf("----------------------------------------------------------------\n");
    if (n > 0) {
        Stats s = stats_compute(rates, (size_t)n);
        printf("Images/sec: %.1f +/- %.1f (jitter = %.1f)\n", s.mean, s.stderr_, s.jitter);
    } else {
        printf("No results, did not get past burn-in phase (%d steps)\n", burnin);
    }
    printf("----------------------------------------------------------------\n");
}

static int train(Run *r) {
    Config *c = &r->cfg;
    Net *net = model_build_net(r->model, c->batch_size, c->num_classes);
    net_finalize(net, c->seed);
    if (c->print_layers) net_print_summary(net, stdout);

    if (c->num_batches > 0)
        r->nstep = c->num_batches;
    else
        r->nstep = 100;
    r->nrecord = (size_t)r->nstep * (size_t)r->total_batch;
    long steps_per_epoch = r->nstep;

    r->base_lr = c->learning_rate > 0 ? c->learning_rate : model_default_lr(r->model, r->total_batch);
    print_header(r, net);

    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = c->momentum;
    tc.opt.nesterov = c->nesterov;
    tc.opt.weight_decay = c->weight_decay;
    tc.opt.larc_eta = c->larc_eta;
    tc.opt.larc_scale = c->larc_mode == LARC_SCALE;
    tc.loss_scale = c->loss_scale;
    tc.dynamic_loss_scale = c->dynamic_loss_scale;
    Trainer tr;
    trainer_init(&tr, net, &r->dist, &tc);

    LrSchedule sched = {0};
    sched.base = r->base_lr;
    sched.policy = c->lr_decay_policy == LR_STEP ? SCHED_STEP : SCHED_POLY;
    sched.poly_power = c->lr_poly_power;
    sched.total_steps = r->nstep;
    sched.steps_per_epoch = steps_per_epoch;
    sched.decay_epochs = c->lr_decay_epochs;
    sched.decay_rate = c->lr_decay_rate;
    sched.warmup_steps = (long)llround(c->warmup_epochs * (double)steps_per_epoch);

    /* Synthetic data as nvcnn: one random batch per rank, generated once. */
    Node *in = net_node(net, net->input);
    Rng drng;
    rng_seed_stream(&drng, c->seed, 1000 + (uint64_t)r->dist.rank);
    input_synthetic(in->data, shape_count(in->shape), &drng);
    int32_t *labels = xmalloc((size_t)c->batch_size * sizeof *labels);
    labels_synthetic(labels, c->batch_size, c->num_classes, &drng);

    int burnin = c->nstep_burnin;
    if (burnin > r->nstep / 2) burnin = (int)(r->nstep / 2);
    double *rates = xmalloc((size_t)(r->nstep > 0 ? r->nstep : 1) * sizeof *rates);
    long nrates = 0;
    double ema = 0, ema_w = 0;

    printf("Training\n");
    printf("  Step Epoch Img/sec   Loss   LR\n");
    fflush(stdout);
    for (long step = 0; step < r->nstep; step++) {
        double lr = lr_at(&sched, step);
        double t0 = now_seconds();
        double loss = trainer_step(&tr, labels, lr);
        double elapsed = now_seconds() - t0;
        ema = 0.9 * ema + 0.1 * loss;
        ema_w = 0.9 * ema_w + 0.1;
        double rate = (double)r->total_batch / elapsed;
        if (step >= burnin) rates[nrates++] = rate;
        if (step == 0 || (step + 1) % c->display_every == 0 || step + 1 == r->nstep) {
            double avg = ema / ema_w;
            dist_allreduce_sum_d(&r->dist, &avg, 1);
            avg /= r->dist.size;
            long epoch = (long)((double)step * r->total_batch / (double)r->nrecord);
            printf("%6ld %5ld %7.1f %7.3f %7.5f\n", step + 1, epoch + 1, rate, avg, lr);
            fflush(stdout);
        }
    }
    print_speed_summary(rates, nrates, burnin);
    if (tr.skipped_steps) printf("Skipped steps (inf/nan gradients): %ld\n", tr.skipped_steps);
    free(rates);
    free(labels);
    trainer_free(&tr);
    net_free(net);
    return 0;
}

int main(int argc, char **argv) {
    Run r;
    memset(&r, 0, sizeof r);
    setvbuf(stdout, NULL, _IOLBF, 0);
    dist_init(&r.dist, &argc, &argv);
    config_parse(&r.cfg, argc, argv);
    if (r.dist.rank != 0 && !r.cfg.verbose) {
        if (!freopen("/dev/null", "w", stdout)) die("cannot silence rank %d's output", r.dist.rank);
    }
    refuse_unsupported(&r.cfg);
    r.model = model_find(r.cfg.model);
    choose_device(&r);
    r.total_batch = r.cfg.batch_size * r.dist.size;

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r.threads = (int)(cores / (r.dist.local_size > 0 ? r.dist.local_size : 1));
    if (r.threads < 1) r.threads = 1;
    omp_set_num_threads(r.threads);
    openblas_set_num_threads(r.threads);

    int rc = train(&r);
    dist_finalize(&r.dist);
    return rc;
}
