/* main.c: command line -> configuration, header lines, the training loop, the summary. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "config.h"
#include "dist.h"
#include "events.h"
#include "gpu.h"
#include "io/loader.h"
#include "models.h"
#include "net.h"
#include "onednn.h"
#include "optim.h"
#include "signals.h"
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
    int gpu;         /* 1: the GPU backend on device gpu_device */
    int gpu_device;
    int nccl;        /* 1: the GPU backend averages gradients with NCCL */
    char cpu_layers[160]; /* the CPU backend's layers, for the header */
} Run;

/* Picks the backend. --device=gpu: the GPU backend (fp32, tf32, fp16, bf16) on the GPU of this
 * rank's local rank, or exit 2 with the reason when there is none. Without --device the CPU
 * backend is used, with one line saying so: the GPU backend has not yet passed its parity tests
 * on a GPU, so it is only used when asked for. */
static void choose_device(Run *r) {
    char why[256] = "";
    int ngpu = gpu_count(why, sizeof why);
    if (r->cfg.device == DEVICE_GPU) {
        if (ngpu == 0) die_code(EXIT_USAGE, "--device=gpu: no usable GPU: %s", why);
        /* fp16 without --loss_scale: dynamic loss scaling, as mixed-precision training expects */
        if (r->cfg.precision == PREC_FP16 && !r->cfg.given_loss_scale) {
            r->cfg.dynamic_loss_scale = 1;
            r->cfg.loss_scale = 65536;
        }
        r->gpu = 1;
        r->gpu_device = r->dist.local_rank % ngpu;
        return;
    }
    if (r->cfg.device == DEVICE_AUTO) {
        if (ngpu == 0)
            printf("No GPU found (%s): using the CPU backend\n", why);
        else
            printf("Found %d GPU(s): using the CPU backend (the GPU backend is new: ask for it with --device=gpu)\n", ngpu);
        r->cfg.device = DEVICE_CPU;
    }
    if (r->cfg.precision != PREC_FP32)
        die_code(EXIT_USAGE, "--precision=%s needs the GPU backend; the CPU backend trains in fp32",
                 precision_name(r->cfg.precision));
}

/* The CPU backend's layers: oneDNN's where this build has them (--cpu_impl=onednn, the default),
 * else the hand-written reference (--cpu_impl=reference). Asking for oneDNN without it is exit 2. */
static void choose_cpu_impl(Run *r) {
    char why[256];
    if (r->gpu) return;
    if (r->cfg.cpu_impl == CPU_IMPL_AUTO) r->cfg.cpu_impl = onednn_built() ? CPU_IMPL_ONEDNN : CPU_IMPL_REFERENCE;
    if (r->cfg.cpu_impl == CPU_IMPL_ONEDNN && !onednn_built()) {
        onednn_describe(why, sizeof why);
        die_code(EXIT_USAGE, "--cpu_impl=onednn: oneDNN is %s", why);
    }
}

/* Plans the oneDNN layers of a finalized CPU net when they are chosen. */
static void plan_cpu(Run *r, Net *net) {
    if (r->gpu) return;
    if (r->cfg.cpu_impl != CPU_IMPL_ONEDNN) {
        snprintf(r->cpu_layers, sizeof r->cpu_layers, "reference (im2col + OpenBLAS)");
        return;
    }
    char err[256], desc[128];
    if (onednn_plan(net, err, sizeof err) != 0) die_code(EXIT_USAGE, "--cpu_impl=onednn: %s", err);
    onednn_describe(desc, sizeof desc);
    snprintf(r->cpu_layers, sizeof r->cpu_layers, "onednn (%s; %d of %d layers)", desc, onednn_layers(net), net->nlayer);
}

/* Flags whose features are not in this build yet: refused, never silently ignored. */
static void refuse_unsupported(const Config *c) {
    if (!c->data_dir) {
        if (c->distort_color) die_code(EXIT_USAGE, "--distort_color needs --data_dir (synthetic data is not augmented)");
        if (c->input_threads) die_code(EXIT_USAGE, "--input_threads needs --data_dir (synthetic data has no input pipeline)");
        if (c->skip_corrupt) die_code(EXIT_USAGE, "--skip_corrupt needs --data_dir");
    }
}

/* How the ranks average gradients. The CPU backend: MPI. The GPU backend: NCCL, unless asked for
 * MPI or unless two ranks on one host drive the same GPU (NCCL needs one GPU per rank): then the
 * default falls back to MPI with a line saying so, and an explicit --allreduce=nccl is an error
 * naming the ranks and the GPU. */
static void choose_allreduce(Run *r) {
    const Config *c = &r->cfg;
    if (c->allreduce == ALLREDUCE_NCCL && !r->gpu)
        die_code(EXIT_USAGE, "--allreduce=nccl needs the GPU backend (--device=gpu); the CPU backend averages with MPI");
    if (!r->gpu || r->dist.size == 1 || c->allreduce == ALLREDUCE_MPI || c->allreduce == ALLREDUCE_NONE) return;
    enum { KEY = 320 };
    char mine[KEY];
    memset(mine, 0, sizeof mine);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    char bus[64] = "";
    gpu_pci_bus_id(r->gpu_device, bus, sizeof bus);
    snprintf(mine, sizeof mine, "%s|%s", host, bus);
    char *all = xmalloc((size_t)r->dist.size * KEY);
    dist_allgather(&r->dist, mine, all, KEY);
    int a = -1, b = -1;
    for (int i = 0; i < r->dist.size && a < 0; i++)
        for (int j = i + 1; j < r->dist.size; j++)
            if (strncmp(all + (size_t)i * KEY, all + (size_t)j * KEY, KEY) == 0) {
                a = i, b = j;
                break;
            }
    if (a >= 0) {
        char *key = all + (size_t)a * KEY, *sep = strchr(key, '|');
        if (sep) *sep = 0;
        if (c->allreduce == ALLREDUCE_NCCL)
            die_code(EXIT_USAGE, "--allreduce=nccl: ranks %d and %d share the GPU %s on %s, and NCCL needs one GPU per rank: "
                                 "use --allreduce=mpi or one rank per GPU", a, b, sep ? sep + 1 : "?", key);
        printf("Ranks %d and %d share the GPU %s on %s: gradients are averaged with MPI (NCCL needs one GPU per rank)\n", a, b,
               sep ? sep + 1 : "?", key);
    } else {
        r->nccl = 1;
    }
    free(all);
}

static Loader *open_loader_from(const Run *r, const char *subset, int training, uint64_t start);
static Loader *open_loader(const Run *r, const char *subset, int training) { return open_loader_from(r, subset, training, 0); }
/* The training loader, resuming after `start` samples of this rank's stream. */
static Loader *open_loader_at(const Run *r, uint64_t start) { return open_loader_from(r, "train", 1, start); }

static Loader *open_loader_from(const Run *r, const char *subset, int training, uint64_t start) {
    const Config *c = &r->cfg;
    LoaderConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.data_dir = c->data_dir;
    lc.subset = subset;
    lc.batch = c->batch_size;
    lc.height = lc.width = r->model->image_size;
    lc.training = training;
    lc.distort_color = training && c->distort_color;
    lc.crop_area_min = (float)c->crop_area_min;
    lc.start_sample = start;
    lc.repeat = training;
    lc.rank = r->dist.rank;
    lc.nranks = r->dist.size;
    lc.threads = c->input_threads > 0 ? c->input_threads : r->threads; /* cores / ranks on this node */
    lc.shuffle_buffer = training ? c->shuffle_buffer : 0;
    lc.seed = c->seed;
    lc.skip_corrupt = c->skip_corrupt;
    lc.num_classes = c->num_classes;
    if (r->gpu) { /* pinned batches: their copies to the device overlap the step */
        lc.host_alloc = gpu_host_alloc;
        lc.host_free = gpu_host_free;
    }
    return loader_open(&lc);
}

/* One pass over validation-* in inference mode; prints nvcnn's Validation Top-1/Top-5 lines
 * (per-step accuracies over all ranks: mean +/- standard error, jitter). */
static void evaluate(Run *r, Trainer *tr, double *top1, double *top5) {
    const Config *c = &r->cfg;
    Loader *ld = open_loader(r, "validation", 0);
    Net *net = tr->net;
    Node *in = net_node(net, net->input);
    size_t cap = 64, n = 0;
    double *t1 = xmalloc(cap * sizeof *t1), *t5 = xmalloc(cap * sizeof *t5);
    printf("Evaluating on %zu validation images\n", loader_num_records(ld));
    printf("  Step  Top-1  Top-5\n");
    for (long step = 0;; step++) {
        LoaderBatch *b = loader_next(ld);
        double acc[4] = {0, 0, 0, b ? 0 : 1}; /* top1, top5, count, ranks done */
        if (b) {
            int c1, c5;
            /* a short last batch: the slots past count hold stale bytes; give them a valid label */
            for (int i = b->count; i < c->batch_size; i++) b->labels[i] = 0;
            if (tr->gpu) {
                gpunet_stage_batch(tr->gpu, 0, b->images, b->labels);
                gpunet_use_batch(tr->gpu, 0);
                gpunet_stage_wait(tr->gpu, 0);
                tr->device_input = 1;
            } else {
                input_from_u8_nhwc(in->data, b->images, c->batch_size, 3, in->shape.h, in->shape.w);
            }
            trainer_eval(tr, b->labels, b->count, &c1, &c5);
            acc[0] = c1;
            acc[1] = c5;
            acc[2] = b->count;
            loader_release(ld, b);
        }
        dist_allreduce_sum_d(&r->dist, acc, 4);
        if (acc[2] > 0) {
            if (n == cap) {
                cap *= 2;
                t1 = xrealloc(t1, cap * sizeof *t1);
                t5 = xrealloc(t5, cap * sizeof *t5);
            }
            t1[n] = 100.0 * acc[0] / acc[2];
            t5[n] = 100.0 * acc[1] / acc[2];
            if (step == 0 || (step + 1) % c->display_every == 0) printf("%6ld %5.1f%% %5.1f%%\n", step + 1, t1[n], t5[n]);
            n++;
        }
        if ((int)acc[3] == r->dist.size) break;
    }
    *top1 = *top5 = NAN;
    printf("----------------------------------------------------------------\n");
    if (n > 0) {
        Stats s1 = stats_compute(t1, n), s5 = stats_compute(t5, n);
        *top1 = s1.mean;
        *top5 = s5.mean;
        printf("Validation Top-1: %.3f %% +/- %.2f (jitter = %.1f)\n", s1.mean, s1.stderr_, s1.jitter);
        printf("Validation Top-5: %.3f %% +/- %.2f (jitter = %.1f)\n", s5.mean, s5.stderr_, s5.jitter);
    } else {
        printf("No validation images\n");
    }
    printf("----------------------------------------------------------------\n");
    size_t skipped = loader_skipped(ld);
    double sk = (double)skipped;
    dist_allreduce_sum_d(&r->dist, &sk, 1);
    if (sk > 0) printf("Skipped corrupt validation records: %.0f\n", sk);
    free(t1);
    free(t5);
    loader_close(ld);
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
    if (r->gpu) {
        char desc[256];
        gpu_describe(r->gpu_device, desc, sizeof desc);
        if (r->dist.size == 1)
            printf("Devices:     gpu: %s\n", desc);
        else
            printf("Devices:     %d x gpu: %s\n", r->dist.size, desc);
    } else if (r->dist.size == 1) {
        printf("Devices:     cpu (%d threads)\n", r->threads);
    } else {
        printf("Devices:     %d x cpu (%d threads each)\n", r->dist.size, r->threads);
    }
    if (!r->gpu) printf("CPU layers:  %s\n", r->cpu_layers);
    printf("Data format: NCHW\n");
    printf("Data type:   %s\n", precision_name(c->precision));
    if (c->dynamic_loss_scale)
        printf("Loss scale:  dynamic (from %g)\n", c->loss_scale);
    else if (c->loss_scale != 1)
        printf("Loss scale:  %g\n", c->loss_scale);
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

/* Creates --log_dir if needed and checks that it can be written: a clear error now rather than
 * a lost checkpoint hours later. */
static void prepare_log_dir(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) die_code(EXIT_USAGE, "--log_dir=%s: cannot create %s: %s", dir, path, strerror(errno));
            *p = '/';
        }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die_code(EXIT_USAGE, "--log_dir=%s: cannot create it: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) die_code(EXIT_USAGE, "--log_dir=%s: not a directory", dir);
    snprintf(path, sizeof path, "%s/.nvcnn-write-test.%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) die_code(EXIT_USAGE, "--log_dir=%s: not writable: %s", dir, strerror(errno));
    fclose(f);
    unlink(path);
}

static void fill_meta(const Run *r, const Net *net, const Trainer *tr, long step, CkptMeta *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->model, sizeof m->model, "%s", r->model->name);
    m->num_classes = r->cfg.num_classes;
    Shape in = net->node[net->input].shape;
    m->in_c = in.c;
    m->in_h = in.h;
    m->in_w = in.w;
    m->precision = (int32_t)r->cfg.precision;
    m->step = step;
    m->epoch = (double)step * r->total_batch / (double)r->nrecord;
    m->seed = r->cfg.seed;
    m->world_size = r->dist.size;
    m->loss_scale = tr->loss_scale;
    m->good_steps = tr->good_steps;
    m->skipped_steps = tr->skipped_steps;
    m->data_position = (uint64_t)step * (uint64_t)r->total_batch;
    memcpy(m->rng, net->rng.s, sizeof m->rng);
}

/* Rank 0 writes a checkpoint of the state after `step` steps. Returns 0 on success. */
static int save_checkpoint(const Run *r, const Net *net, Trainer *tr, long step, char *path, size_t plen) {
    if (r->dist.rank != 0 || !r->cfg.log_dir) return 0;
    trainer_sync_host(tr);
    CkptMeta m;
    fill_meta(r, net, tr, step, &m);
    char err[512];
    if (ckpt_save(r->cfg.log_dir, net, tr->opt.velocity, &m, path, plen, err, sizeof err) != 0) {
        warn("%s", err);
        return -1;
    }
    return 0;
}

/* Restores the newest checkpoint of --log_dir (rank 0 reads it, every rank receives it).
 * Returns the step to resume from (0: none). A checkpoint of another model or shape ends the run
 * with a clear error. */
static long restore_checkpoint(Run *r, Net *net, Trainer *tr) {
    if (!r->cfg.log_dir) return 0;
    char path[4096] = "", err[1024] = "";
    double st[3] = {0, 0, 0}; /* found, ok, step */
    CkptMeta m;
    memset(&m, 0, sizeof m);
    if (r->dist.rank == 0 && ckpt_latest(r->cfg.log_dir, path, sizeof path)) {
        st[0] = 1;
        if (ckpt_load(path, r->model->name, net, tr->opt.velocity, &m, err, sizeof err) == 0) {
            st[1] = 1;
            st[2] = (double)m.step;
        }
    }
    dist_bcast(&r->dist, st, sizeof st);
    if (st[0] && !st[1]) die_code(EXIT_USAGE, "cannot resume from --log_dir=%s: %s", r->cfg.log_dir, r->dist.rank == 0 ? err : "see rank 0");
    if (!st[0]) return 0;
    dist_bcast(&r->dist, &m, sizeof m);
    dist_bcast(&r->dist, net->params, net->params_total * sizeof(float));
    dist_bcast(&r->dist, net->state, net->state_total * sizeof(float));
    dist_bcast(&r->dist, tr->opt.velocity, net->params_total * sizeof(float));
    tr->loss_scale = m.loss_scale;
    tr->good_steps = m.good_steps;
    tr->skipped_steps = m.skipped_steps;
    memcpy(net->rng.s, m.rng, sizeof m.rng);
    trainer_sync_device(tr);
    printf("Restored from checkpoint %s at step %lld\n", path, (long long)m.step);
    if (m.world_size != r->dist.size)
        printf("(saved with %d rank(s), resumed with %d: the data order continues from image %llu)\n", m.world_size,
               r->dist.size, (unsigned long long)m.data_position);
    return (long)m.step;
}

/* The GPU mirror of net when the run uses the GPU backend; a batch that does not fit ends the
 * run with exit 3 naming the model, the batch and the bytes. */
static GpuNet *make_gpu(const Run *r, Net *net) {
    if (!r->gpu) return NULL;
    char err[512];
    int oom = 0;
    GpuNet *g = gpunet_new(net, r->gpu_device, (int)r->cfg.precision, err, sizeof err, &oom);
    if (!g) {
        if (oom) die_code(EXIT_OOM, "--model=%s --batch_size=%d does not fit on the GPU: %s", r->model->name, r->cfg.batch_size, err);
        die_code(EXIT_USAGE, "%s", err);
    }
    return g;
}

/* --eval: the newest checkpoint of --log_dir on validation-*. */
static int eval_only(Run *r) {
    Config *c = &r->cfg;
    Net *net = model_build_net(r->model, c->batch_size, c->num_classes);
    if (r->gpu)
        net_finalize_for_device(net, c->seed);
    else
        net_finalize(net, c->seed);
    plan_cpu(r, net);
    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.loss_scale = 1;
    tc.no_allreduce = 1;
    Trainer tr;
    GpuNet *gpu = make_gpu(r, net);
    trainer_init(&tr, net, &r->dist, &tc, gpu);
    if (!loader_has_subset(c->data_dir, "validation")) die_code(EXIT_USAGE, "--eval: no validation-* files in %s", c->data_dir);
    Loader *count = open_loader(r, "validation", 0);
    r->nrecord = loader_num_records(count);
    loader_close(count);
    print_header(r, net);
    if (!restore_checkpoint(r, net, &tr)) die_code(EXIT_USAGE, "--eval: no checkpoint in --log_dir=%s", c->log_dir);
    double t1, t5;
    evaluate(r, &tr, &t1, &t5);
    trainer_free(&tr);
    gpunet_free(gpu);
    net_free(net);
    return 0;
}

static int train(Run *r) {
    Config *c = &r->cfg;
    Net *net = model_build_net(r->model, c->batch_size, c->num_classes);
    if (r->gpu)
        net_finalize_for_device(net, c->seed);
    else
        net_finalize(net, c->seed);
    plan_cpu(r, net);

    Loader *ld = NULL;
    if (c->data_dir) {
        ld = open_loader(r, "train", 1);
        r->nrecord = loader_num_records(ld);
        if (r->nrecord == 0) die_code(EXIT_DATA, "%s: the train-* shards hold no records", c->data_dir);
        double epochs = c->num_epochs > 0 ? c->num_epochs : 90;
        r->nstep = c->num_batches > 0 ? c->num_batches : (long)(epochs * (double)r->nrecord / r->total_batch);
        if (r->nstep < 1) r->nstep = 1;
    } else {
        r->nstep = c->num_batches > 0 ? c->num_batches : 100;
        r->nrecord = (size_t)r->nstep * (size_t)r->total_batch;
    }
    long steps_per_epoch = (long)(r->nrecord / (size_t)r->total_batch);
    if (steps_per_epoch < 1) steps_per_epoch = 1;

    r->base_lr = c->learning_rate > 0 ? c->learning_rate : model_default_lr(r->model, r->total_batch);
    print_header(r, net);
    if (c->print_layers) {
        printf("Layers:\n");
        net_print_summary(net, stdout);
    }

    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = c->momentum;
    tc.opt.nesterov = c->nesterov;
    tc.opt.weight_decay = c->weight_decay;
    tc.opt.larc_eta = c->larc_eta;
    tc.opt.larc_scale = c->larc_mode == LARC_SCALE;
    tc.loss_scale = c->loss_scale;
    tc.dynamic_loss_scale = c->dynamic_loss_scale;
    tc.bucket_mb = c->bucket_mb;
    tc.no_allreduce = c->allreduce == ALLREDUCE_NONE;
    tc.nccl = r->nccl;
    Trainer tr;
    GpuNet *gpu = make_gpu(r, net);
    trainer_init(&tr, net, &r->dist, &tc, gpu);
    long step0 = restore_checkpoint(r, net, &tr);
    EventLog *elog = NULL;
    if (c->log_dir && r->dist.rank == 0) {
        char err[512];
        elog = events_open(c->log_dir, err, sizeof err);
        if (!elog) die_code(EXIT_USAGE, "--log_dir=%s: %s", c->log_dir, err);
    }
    signals_install();

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
    if (tr.gpu) {
        /* the GPU backend: synthetic data is uploaded once and stays on the device; real data is
         * staged batch by batch (double-buffered, copied while the previous step runs) */
        if (!ld) {
            gpunet_set_input(tr.gpu, in->data);
            gpunet_set_labels(tr.gpu, labels);
        }
        tr.device_input = 1;
    }
    LoaderBatch *staged[2] = {NULL, NULL};
    int cur = 0;
    long last_epoch = (long)((double)step0 * r->total_batch / (double)r->nrecord);
    if (ld && step0 > 0) {
        loader_close(ld);
        ld = open_loader_at(r, (uint64_t)step0 * (uint64_t)c->batch_size);
    }
    double last_save = now_seconds();
    int stopped = 0;

    int burnin = c->nstep_burnin;
    if (burnin > r->nstep / 2) burnin = (int)(r->nstep / 2);
    double *rates = xmalloc((size_t)(r->nstep > 0 ? r->nstep : 1) * sizeof *rates);
    long nrates = 0;
    double ema = 0, ema_w = 0;

    printf("Training\n");
    printf("  Step Epoch Img/sec   Loss   LR\n");
    fflush(stdout);
    if (step0 >= r->nstep) printf("The checkpoint is at step %ld: nothing left to train (--num_batches=%ld)\n", step0, r->nstep);
    for (long step = step0; step < r->nstep; step++) {
        double lr = lr_at(&sched, step);
        double t0 = now_seconds();
        double loss;
        if (ld && tr.gpu) {
            if (!staged[cur]) {
                staged[cur] = loader_next(ld);
                gpunet_stage_batch(tr.gpu, cur, staged[cur]->images, staged[cur]->labels);
            }
            gpunet_use_batch(tr.gpu, cur);
            memcpy(labels, staged[cur]->labels, (size_t)c->batch_size * sizeof *labels);
            trainer_step_begin(&tr, labels);
            /* while the device runs this step: give back this batch (its copy was queued a step
             * ago), fetch the next one and queue its copy */
            gpunet_stage_wait(tr.gpu, cur);
            loader_release(ld, staged[cur]);
            staged[cur] = NULL;
            if (step + 1 < r->nstep) {
                staged[1 - cur] = loader_next(ld);
                gpunet_stage_batch(tr.gpu, 1 - cur, staged[1 - cur]->images, staged[1 - cur]->labels);
            }
            loss = trainer_step_end(&tr, lr);
            cur = 1 - cur;
        } else if (ld) {
            LoaderBatch *b = loader_next(ld);
            input_from_u8_nhwc(in->data, b->images, c->batch_size, 3, in->shape.h, in->shape.w);
            memcpy(labels, b->labels, (size_t)c->batch_size * sizeof *labels);
            loader_release(ld, b);
            loss = trainer_step(&tr, labels, lr);
        } else {
            loss = trainer_step(&tr, labels, lr);
        }
        double elapsed = now_seconds() - t0;
        ema = 0.9 * ema + 0.1 * loss;
        ema_w = 0.9 * ema_w + 0.1;
        double rate = (double)r->total_batch / elapsed;
        if (step - step0 >= burnin) rates[nrates++] = rate;
        if (step == step0 || (step + 1) % c->display_every == 0) {
            if (tr.gpu) gpunet_download_node(tr.gpu, net->logits, net->node[net->logits].data, 0);
            double v[3] = {ema / ema_w, net_topk_correct(net, 1), net_topk_correct(net, 5)};
            dist_allreduce_sum_d(&r->dist, v, 3);
            double avg = v[0] / r->dist.size;
            long epoch = (long)((double)step * r->total_batch / (double)r->nrecord);
            printf("%6ld %5ld %7.1f %7.3f %7.5f\n", step + 1, epoch + 1, rate, avg, lr);
            fflush(stdout);
            events_log(elog, step + 1, (double)(step + 1) * r->total_batch / (double)r->nrecord, avg, lr, rate,
                       100.0 * v[1] / r->total_batch, 100.0 * v[2] / r->total_batch, NAN, NAN);
        }
        /* signals and periodic checkpoints: every rank agrees before acting */
        double sig[2] = {0, 0};
        int f = signals_take();
        sig[0] = (f & SIG_STOP) ? 1 : 0;
        sig[1] = ((f & SIG_CHECKPOINT) || (c->log_dir && now_seconds() - last_save >= c->save_interval)) ? 1 : 0;
        if (r->dist.size > 1) {
            if (r->dist.rank != 0) sig[1] = (f & SIG_CHECKPOINT) ? 1 : 0;
            dist_allreduce_sum_d(&r->dist, sig, 2);
        }
        if ((sig[0] || sig[1]) && step + 1 < r->nstep) {
            char path[4096] = "";
            int ok = save_checkpoint(r, net, &tr, step + 1, path, sizeof path) == 0;
            last_save = now_seconds();
            if (sig[0]) {
                int s = signals_stop_signal();
                const char *name = s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : "a stop signal";
                if (!c->log_dir)
                    printf("Received %s: stopping after step %ld (no --log_dir: no checkpoint written)\n", name, step + 1);
                else if (ok)
                    printf("Received %s: checkpoint written to %s at step %ld; exiting\n", name, path, step + 1);
                else
                    printf("Received %s: stopping after step %ld; the checkpoint could NOT be written\n", name, step + 1);
                stopped = 1;
                r->nstep = step + 1;
                break;
            } else if (ok && c->log_dir) {
                printf("Checkpoint written to %s at step %ld\n", path, step + 1);
            }
        }
        long epoch_done = (long)((double)(step + 1) * r->total_batch / (double)r->nrecord);
        if (ld && (epoch_done > last_epoch || step + 1 == r->nstep)) {
            double sk = (double)loader_skipped(ld);
            dist_allreduce_sum_d(&r->dist, &sk, 1);
            if (c->skip_corrupt) printf("Epoch %ld: %.0f corrupt records skipped so far\n", last_epoch + 1, sk);
            last_epoch = epoch_done;
        }
    }
    for (int k = 0; k < 2; k++)
        if (staged[k]) { /* a batch fetched for a step that a stop signal cancelled */
            gpunet_stage_wait(tr.gpu, k);
            loader_release(ld, staged[k]);
            staged[k] = NULL;
        }
    if (!stopped && r->nstep > step0) {
        char path[4096] = "";
        if (c->log_dir && save_checkpoint(r, net, &tr, r->nstep, path, sizeof path) == 0 && r->dist.rank == 0)
            printf("Checkpoint written to %s at step %ld\n", path, r->nstep);
    }
    print_speed_summary(rates, nrates, burnin);
    if (tr.gpu) printf("Peak GPU memory: %.2f GiB\n", (double)gpu_mem_used(r->gpu_device) / 1073741824.0);
    if (tr.skipped_steps) printf("Skipped steps (inf/nan gradients): %ld\n", tr.skipped_steps);
    if (r->dist.size > 1) {
        double t[2] = {tr.backward_seconds, tr.exposed_seconds};
        dist_allreduce_sum_d(&r->dist, t, 2);
        printf("Backward: %.2f ms/step; allreduce %s: %.2f ms/step exposed (after backward), %d bucket(s) of %g MiB\n",
               1e3 * t[0] / r->dist.size / (double)(r->nstep - step0 > 0 ? r->nstep - step0 : 1),
               tc.no_allreduce ? "off" : tr.nccl ? "on (nccl)" : "on (mpi)",
               1e3 * t[1] / r->dist.size / (double)(r->nstep - step0 > 0 ? r->nstep - step0 : 1),
               tr.nccl ? gpunet_nccl_buckets(tr.gpu) : tr.sync ? gradsync_buckets(tr.sync) : 0, c->bucket_mb);
    }
    if (ld) {
        loader_close(ld);
        if (!stopped && loader_has_subset(c->data_dir, "validation")) {
            double t1, t5;
            evaluate(r, &tr, &t1, &t5);
            events_log(elog, r->nstep, (double)r->nstep * r->total_batch / (double)r->nrecord, NAN, NAN, NAN, NAN, NAN, t1, t5);
        }
    }
    events_close(elog);
    free(rates);
    free(labels);
    trainer_free(&tr);
    gpunet_free(gpu);
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
    choose_cpu_impl(&r);
    choose_allreduce(&r);
    r.total_batch = r.cfg.batch_size * r.dist.size;

    /* compute threads: OMP_NUM_THREADS when set (e.g. to compare 1 and 2 threads), else the
     * node's cores shared among its ranks */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *omp = getenv("OMP_NUM_THREADS");
    r.threads = omp && atoi(omp) > 0 ? atoi(omp) : (int)(cores / (r.dist.local_size > 0 ? r.dist.local_size : 1));
    if (r.threads < 1) r.threads = 1;
    omp_set_num_threads(r.threads);
    openblas_set_num_threads(r.threads);

    if (r.cfg.log_dir && r.dist.rank == 0) prepare_log_dir(r.cfg.log_dir);
    dist_barrier(&r.dist);
    int rc = r.cfg.eval ? eval_only(&r) : train(&r);
    dist_finalize(&r.dist);
    return rc;
}
