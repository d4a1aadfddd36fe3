/* main.c: command line -> configuration, the backend, and the training loop. The loop's parts
 * live in their own files: input.c (batches), report.c (what the user sees and the logs),
 * lifecycle.c (checkpoints and signals), evaluate.c (validation). */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "dist.h"
#include "evaluate.h"
#include "export.h"
#include "gpu.h"
#include "input.h"
#include "io/tfrecord.h"
#include "lifecycle.h"
#include "models.h"
#include "net.h"
#include "onednn.h"
#include "optim.h"
#include "placement.h"
#include "profile.h"
#include "report.h"
#include "run.h"
#include "signals.h"
#include "train.h"
#include "util.h"
#include "watchdog.h"

extern void openblas_set_num_threads(int);

/* Picks the backend. --device=gpu: the GPU backend (fp32, tf32, fp16, bf16) on the GPU of this
 * rank's local rank, or exit 2 with the reason when there is none. Without --device the CPU
 * backend is used, with one line saying so: the GPU backend has not yet passed its parity tests
 * on a GPU, so it is only used when asked for. */
static void choose_device(Run *r) {
    char why[256] = "", as[256];
    int ngpu = gpu_count(why, sizeof why);
    if (r->cfg.device == DEVICE_GPU) {
        if (config_given_as(&r->cfg, &r->cfg.cpu_impl, as, sizeof as))
            die_code(EXIT_USAGE, "%s needs the CPU backend; --device=gpu uses the GPU backend", as);
        if (ngpu == 0) {
            char drv[512];
            die_code(EXIT_USAGE, "--device=gpu: no usable GPU: %s", gpu_driver_problem(drv, sizeof drv) ? drv : why);
        }
        /* fp16 without --loss_scale: dynamic loss scaling, as mixed-precision training expects */
        if (r->cfg.precision == PREC_FP16 && !r->cfg.given_loss_scale) {
            r->cfg.dynamic_loss_scale = 1;
            r->cfg.loss_scale = 65536;
        }
        r->gpu = 1;
        r->gpu_device = r->dist.local_rank % ngpu;
        r->gpu_flags = (r->cfg.deterministic ? GPUNET_DETERMINISTIC : 0) |
                       (r->cfg.data_format == DATA_FORMAT_NHWC ? GPUNET_NHWC : r->cfg.data_format == DATA_FORMAT_NCHW ? GPUNET_NCHW : 0) |
                       (!config_given(&r->cfg, &r->cfg.fuse) ? 0 : r->cfg.fuse ? GPUNET_FUSE : GPUNET_NOFUSE) |
                       (r->cfg.eval || r->cfg.forward_only ? GPUNET_INFERENCE : 0); /* no gradients, activations shared */
        char err[256];
        r->nhwc = gpunet_layout((int)r->cfg.precision, r->gpu_flags, err, sizeof err);
        if (r->nhwc < 0) die_code(EXIT_USAGE, "%s", err);
        gpu_select(r->gpu_device); /* before anything makes a CUDA context (the loader's pinned batches) */
        /* one GPU per rank, or exit 2 naming the node; --allreduce=mpi lets ranks share GPUs */
        placement_check_gpus(&r->dist, r->gpu_device, r->cfg.allreduce == ALLREDUCE_MPI);
        return;
    }
    if (r->cfg.precision == PREC_BF16) {
        /* bf16 mixed precision on oneDNN's layers (onednn_plan_bf16) where this CPU has bf16 that
         * oneDNN can use; choose_cpu_impl refuses --cpu_impl=reference with it */
        char isa[64];
        if (!onednn_built())
            die_code(EXIT_USAGE, "--precision=bf16 on the CPU: this nvcnn was built without oneDNN, which bf16 needs; use "
                                 "--precision=fp32 or --device=gpu");
        if (!onednn_bf16_capable(isa, sizeof isa))
            die_code(EXIT_USAGE,
                     "--precision=bf16 on the CPU: this CPU gives oneDNN %s, and bf16 needs avx512_core or later "
                     "(native bf16 from avx512_core_bf16); use --precision=fp32 or --device=gpu",
                     isa);
    } else if (r->cfg.precision != PREC_FP32)
        die_code(EXIT_USAGE, "%s needs the GPU backend (--device=gpu); the CPU backend trains in fp32 or bf16",
                 config_given_as(&r->cfg, &r->cfg.precision, as, sizeof as));
    if (r->cfg.data_format == DATA_FORMAT_NHWC)
        die_code(EXIT_USAGE, "--data_format=NHWC needs the GPU backend (--device=gpu); the CPU backend computes in NCHW");
    const struct {
        const void *field;
        const char *why;
    } gpu_only[] = {{&r->cfg.fuse, "it sets the GPU backend's fusion of batch norm with the ReLU and the add"},
                    {&r->cfg.cuda_graph, "the CPU backend runs no CUDA Graphs"},
                    {&r->cfg.cudnn_workspace_mb, "the CPU backend does not use cuDNN"}};
    for (size_t i = 0; i < sizeof gpu_only / sizeof gpu_only[0]; i++)
        if (config_given_as(&r->cfg, gpu_only[i].field, as, sizeof as))
            die_code(EXIT_USAGE, "%s needs the GPU backend (--device=gpu); %s", as, gpu_only[i].why);
    if (r->cfg.device == DEVICE_AUTO) {
        char drv[512];
        if (ngpu == 0 && gpu_driver_problem(drv, sizeof drv))
            printf("No usable GPU (%s): using the CPU backend\n", drv);
        else if (ngpu == 0)
            printf("No GPU found (%s): using the CPU backend\n", why);
        else
            printf("Found %d GPU(s): using the CPU backend (the GPU backend is new: ask for it with --device=gpu)\n", ngpu);
        r->cfg.device = DEVICE_CPU;
    }
}

/* The CPU backend's layers: oneDNN's where this build has them (--cpu_impl=onednn, the default),
 * else the hand-written reference (--cpu_impl=reference). Asking for oneDNN without it is exit 2.
 * Fills the header's description; plan_cpu() creates them. */
static void choose_cpu_impl(Run *r) {
    char why[256];
    if (r->gpu) return;
    cpu_isa_check(onednn_version());
    if (r->cfg.cpu_impl == CPU_IMPL_AUTO) r->cfg.cpu_impl = onednn_built() ? CPU_IMPL_ONEDNN : CPU_IMPL_REFERENCE;
    if (r->cfg.cpu_impl == CPU_IMPL_ONEDNN && !onednn_built()) {
        onednn_describe(why, sizeof why);
        die_code(EXIT_USAGE, "--cpu_impl=onednn: oneDNN is %s", why);
    }
    if (r->cfg.cpu_impl == CPU_IMPL_ONEDNN) {
        onednn_check_env();
        onednn_describe(why, sizeof why);
        char isa[64] = "";
        if (r->cfg.precision == PREC_BF16) onednn_bf16_capable(isa, sizeof isa);
        snprintf(r->cpu_layers, sizeof r->cpu_layers, "onednn (%.150s)%s%s%s", why, isa[0] ? ", bf16 on " : "", isa,
                 !isa[0] ? "" : strcmp(isa, "avx512_core") == 0 ? " (bf16 dot products emulated)" : "");
    } else {
        if (r->cfg.precision == PREC_BF16)
            die_code(EXIT_USAGE, "--precision=bf16 on the CPU needs --cpu_impl=onednn (the reference layers are fp32)");
        snprintf(r->cpu_layers, sizeof r->cpu_layers, "reference (im2col + OpenBLAS)");
    }
}

/* Creates the oneDNN layers of a finalized CPU net when they are chosen; says what it made into
 * what (for the Planning line). */
static void plan_cpu(Run *r, Net *net, char *what, size_t n) {
    if (r->gpu || r->cfg.cpu_impl != CPU_IMPL_ONEDNN) return;
    char err[256];
    const int bf16 = r->cfg.precision == PREC_BF16;
    if ((bf16 ? onednn_plan_bf16 : onednn_plan)(net, err, sizeof err) != 0)
        die_code(EXIT_USAGE, "--cpu_impl=onednn%s: %s", bf16 ? " --precision=bf16" : "", err);
    snprintf(what, n, " (oneDNN primitives for %d of %d layers)", onednn_layers(net), net->nlayer);
}

/* Flags whose features are not in this build yet: refused, never silently ignored. */
static void refuse_unsupported(const Config *c) {
    if (!c->data_dir) {
        if (c->distort_color) die_code(EXIT_USAGE, "--distort_color needs --data_dir (synthetic data is not augmented)");
        if (c->input_threads) die_code(EXIT_USAGE, "--input_threads needs --data_dir (synthetic data has no input pipeline)");
        if (c->skip_corrupt) die_code(EXIT_USAGE, "--skip_corrupt needs --data_dir");
        if (config_given(c, &c->shuffle_buffer)) die_code(EXIT_USAGE, "--shuffle_buffer needs --data_dir (synthetic data has no records to shuffle)");
        if (config_given(c, &c->crop_area_min)) die_code(EXIT_USAGE, "--crop_area_min needs --data_dir (synthetic data is not cropped)");
    }
}

/* How the ranks average gradients. The CPU backend: MPI. The GPU backend: NCCL, unless asked for
 * MPI (or none); choose_device has made sure that every rank has a GPU of its own otherwise. */
static void choose_allreduce(Run *r) {
    const Config *c = &r->cfg;
    if (c->allreduce == ALLREDUCE_NCCL && !r->gpu)
        die_code(EXIT_USAGE, "--allreduce=nccl needs the GPU backend (--device=gpu); the CPU backend averages with MPI");
    if (!r->gpu || r->dist.size == 1 || c->allreduce == ALLREDUCE_MPI || c->allreduce == ALLREDUCE_NONE) return;
    r->nccl = 1;
}

/* Threads per rank: OMP_NUM_THREADS where the user set it; else the CPUs this process may run on
 * when a launcher bound it to some (mpirun's binding, Slurm's task binding), or the CPUs Slurm
 * gave the task (--cpus-per-task) where it did not bind it, or the node's online CPUs shared by
 * its ranks. */
/* OMP_NUM_THREADS's first count as libgomp reads the variable (blanks, a count, more counts after
 * commas for nested levels); 0 where it is unset; exit 2 where libgomp would call it invalid (and
 * ignore it) or where it asks for more than 16 threads a CPU, which libgomp may not even start
 * (65,536 crashed it). Before any parallel region: signals_install() has one. */
static long omp_threads_given(void) {
    const char *v = getenv("OMP_NUM_THREADS");
    if (!v) return 0;
    const long online = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    long first = 0;
    const char *p = v;
    int ok = 1;
    do {
        while (isspace((unsigned char)*p)) p++;
        if (*p == '+') p++;
        if (!isdigit((unsigned char)*p)) {
            ok = 0;
            break;
        }
        char *end;
        errno = 0;
        const long n = strtol(p, &end, 10);
        if (errno || n <= 0) ok = 0;
        if (first == 0) first = n;
        p = end;
        while (isspace((unsigned char)*p)) p++;
    } while (ok && *p == ',' && ++p); /* a comma: another count must follow */
    if (!ok || *p)
        die_code(EXIT_USAGE, "OMP_NUM_THREADS=%s: not a thread count (a positive integer, e.g. OMP_NUM_THREADS=%ld)", v, online);
    if (first > 16 * online)
        die_code(EXIT_USAGE, "OMP_NUM_THREADS=%s: more than 16 threads a CPU (this node has %ld)", v, online);
    return first;
}

static int default_threads(int local_size, int rank) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    const long given = omp_threads_given();
    if (given > 0) {
        const long ranks = local_size > 0 ? local_size : 1;
        cpu_set_t mine;
        const long bound = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 0; /* a launcher's binding */
        if (bound > 0 && bound < online && given > bound && rank == 0)
            warn("OMP_NUM_THREADS=%ld is more threads than the %ld CPU%s this process is bound to: the threads will take turns on them "
                 "(slower)",
                 given, bound, bound == 1 ? "" : "s");
        else if (online > 0 && given * ranks > online && rank == 0 && ranks > 1)
            warn("OMP_NUM_THREADS=%ld for each of this node's %ld ranks is %ld threads on its %ld CPUs: the threads will take turns on "
                 "them (slower)",
                 given, ranks, given * ranks, online);
        else if (online > 0 && given > online && rank == 0)
            warn("OMP_NUM_THREADS=%ld is more threads than the %ld CPUs of this node: the threads will take turns on them (slower)", given,
                 online);
        return (int)given;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < online) return CPU_COUNT(&set);
    const char *slurm_cpus = getenv("SLURM_CPUS_PER_TASK");
    if (slurm_cpus && atoi(slurm_cpus) > 0 && atoi(slurm_cpus) < online) return atoi(slurm_cpus);
    long t = online / (local_size > 0 ? local_size : 1);
    return t > 0 ? (int)t : 1;
}

/* Creates --log_dir if needed and checks that it can be written: a clear error now rather than
 * a lost checkpoint hours later. */
static void prepare_log_dir(const char *dir) {
    char path[4096];
    /* its files' names (the event file's carries the host name) must fit a path */
    const size_t longest = strlen("/events.out.tfevents.") + 20 + 1 + 255 + 1;
    if (strlen(dir) + longest >= sizeof path)
        die_code(EXIT_USAGE, "--log_dir=%.80s...: %zu characters long: the paths of the files written there would pass %zu", dir,
                 strlen(dir), sizeof path - 1);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) die_code(EXIT_USAGE, "--log_dir=%s: cannot create %s: %s", dir, path, strerror(errno));
            *p = '/';
        }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die_code(EXIT_USAGE, "--log_dir=%s: cannot create it: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0) {
        const int e = errno;
        if (util_dangling_link(dir, e, path, sizeof path)) die_code(EXIT_USAGE, "--log_dir=%s %s", dir, path);
        die_code(EXIT_USAGE, "--log_dir=%s: %s", dir, strerror(e));
    }
    if (!S_ISDIR(st.st_mode)) die_code(EXIT_USAGE, "--log_dir=%s: not a directory", dir);
    snprintf(path, sizeof path, "%s/.nvcnn-write-test.%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) die_code(EXIT_USAGE, "--log_dir=%s: not writable: %s", dir, strerror(errno));
    fclose(f);
    unlink(path);
    lifecycle_lock_log_dir(dir); /* one run at a time in a folder */
}

/* The GPU mirror of net when the run uses the GPU backend; a batch that does not fit ends the
 * run with exit 3 naming the model, the batch and the bytes. */
static GpuNet *make_gpu(const Run *r, Net *net) {
    if (!r->gpu) return NULL;
    char err[512];
    int oom = 0;
    GpuNet *g = gpunet_new(net, r->gpu_device, (int)r->cfg.precision, (size_t)(r->cfg.cudnn_workspace_mb * 1048576.0),
                           r->gpu_flags, err, sizeof err, &oom);
    if (!g) {
        if (oom) die_code(EXIT_OOM, "--model=%s --batch_size=%d does not fit on the GPU: %s", r->model->name, r->cfg.batch_size, err);
        die_code(EXIT_USAGE, "%s", err);
    }
    gpunet_print_plan(g, stdout);
    return g;
}

/* The model as a net of layers and shapes (nothing allocated yet: plan()); an allocation that fails
 * from here names the parameters' share beside the batch's (util_set_oom_hint) */
static Net *build_net(Run *r) {
    Net *net = model_build_sized(r->model, r->cfg.batch_size, r->cfg.num_classes, r->image_size);
    char hint[400];
    const int fc = model_fully_convolutional(r->model);
    snprintf(hint, sizeof hint,
             "--model=%s --batch_size=%d at %dx%d: its %zu parameters take %.2f GiB a copy (weights, gradients, momentum), its "
             "activations grow with the batch%s",
             r->model->name, r->cfg.batch_size, r->image_size, r->image_size, net->params_total, (double)net->params_total * 4 / 1073741824.0,
             r->cfg.batch_size > 1 ? (fc ? " (a smaller --batch_size or --image_size needs less)" : " (a smaller --batch_size needs less)")
                                   : (fc ? " (a smaller --image_size needs less)" : ""));
    util_set_oom_hint(hint);
    return net;
}

/* The trainer (and the GPU backend's net) for this run. */
static GpuNet *start_trainer(Run *r, Net *net, Trainer *tr) {
    const Config *c = &r->cfg;
    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = c->momentum;
    tc.opt.nesterov = c->nesterov;
    tc.opt.weight_decay = c->weight_decay;
    tc.opt.larc_eta = c->larc_eta;
    tc.opt.larc_scale = c->larc_mode == LARC_SCALE;
    tc.loss_scale = c->eval || c->forward_only ? 1 : c->loss_scale;
    tc.dynamic_loss_scale = c->dynamic_loss_scale && !c->eval && !c->forward_only;
    tc.no_cuda_graph = !c->cuda_graph;
    tc.bucket_mb = c->bucket_mb;
    tc.no_allreduce = c->allreduce == ALLREDUCE_NONE || c->eval || c->forward_only;
    tc.nccl = r->nccl;
    GpuNet *gpu = make_gpu(r, net);
    trainer_init(tr, net, &r->dist, &tc, gpu);
    return gpu;
}

/* What takes time before the first step, once the header is out: the net's memory and initial
 * parameters, the oneDNN primitives or the GPU backend's algorithm search and device memory, and
 * the trainer. One line with its time. */
/* The header's CUDA Graph line: whether the training step (--forward_only's: the forward and its
 * loss) runs as one graph, and why not. A
 * --cuda_graph=on given where the step cannot be one is refused, as every flag the run would not
 * use (it was passed over without a word). */
static void say_cuda_graph(const Run *r, const GpuNet *gpu, const Trainer *tr) {
    const Config *c = &r->cfg;
    const char *why = c->eval          ? "--eval runs no training step"
                      : !c->cuda_graph ? NULL
                      : gpunet_graph_refusal(gpu) ? gpunet_graph_refusal(gpu)
                      : !tr->nccl && tr->sync && r->dist.size > 1 ? "MPI averages the gradients through the host"
                                                                   : NULL;
    char as[64];
    if (why && c->cuda_graph && !c->eval && config_given_as(c, &c->cuda_graph, as, sizeof as)) /* (--eval takes the training's flags) */
        die_code(EXIT_USAGE, "%s: %s: the step cannot be one CUDA Graph here", as, why);
    if (!c->cuda_graph && !c->eval)
        printf("CUDA Graph:  off (--cuda_graph=off)\n");
    else if (why)
        printf("CUDA Graph:  off (%s)\n", why);
    else if (!tr->graph)
        printf("CUDA Graph:  off (NVCNN_CUDA_GRAPH=off)\n");
    else if (r->nstep < 2) /* (a resumed run's length is known later: its line says on) */
        printf("CUDA Graph:  off (a run of one step: the graph is captured at the second)\n");
    else
        printf("CUDA Graph:  on (each %s step, captured at the second%s)\n", c->forward_only ? "forward" : "training",
               c->profile ? "; not --profile's steps" : "");
}

static GpuNet *plan(Run *r, Net *net, Trainer *tr) {
    const double t0 = now_seconds();
    char what[128] = "";
    if (r->gpu)
        net_finalize_for_device(net, r->cfg.seed);
    else
        net_finalize(net, r->cfg.seed);
    plan_cpu(r, net, what, sizeof what);
    GpuNet *gpu = start_trainer(r, net, tr);
    if (r->gpu) snprintf(what, sizeof what, " (cuDNN algorithms, device memory)");
    printf("Planning:    %.1f s%s\n", now_seconds() - t0, what);
    if (gpu) say_cuda_graph(r, gpu, tr);
    fflush(stdout);
    return gpu;
}

/* --eval: the newest checkpoint of --log_dir on validation-*. */
static int eval_only(Run *r) {
    Config *c = &r->cfg;
    char ck[4096];
    Net *net = build_net(r);
    if (lifecycle_saved_step(r, net, ck, sizeof ck, NULL) == -1) {
        const char *why = lifecycle_log_dir_missing(c->log_dir);
        if (why) die_code(EXIT_USAGE, "--eval: --log_dir=%s %s", c->log_dir, why);
        char tf[512];
        if (lifecycle_foreign_checkpoint(c->log_dir, tf, sizeof tf))
            die_code(EXIT_USAGE, "--eval: no checkpoint of nvcnn in --log_dir=%s: it holds %s, which nvcnn cannot read", c->log_dir, tf);
        die_code(EXIT_USAGE, "--eval: no checkpoint in --log_dir=%s", c->log_dir);
    }
    if (!loader_has_subset(c->data_dir, "validation")) die_code(EXIT_USAGE, "--eval: no validation-* files in %s", c->data_dir);
    Loader *count = input_open_loader(r, "validation", 0, 0);
    r->nrecord = loader_num_records(count);
    loader_close(count);
    report_header(r, net);
    Trainer tr;
    GpuNet *gpu = plan(r, net, &tr);
    if (!lifecycle_restore(r, net, &tr)) die_code(EXIT_USAGE, "--eval: no checkpoint in --log_dir=%s", c->log_dir);
    double t1, t5;
    evaluate(r, &tr, 0, 1, 0, &t1, &t5);
    trainer_free(&tr);
    gpunet_free(gpu);
    net_free(net);
    return 0;
}

/* The run's length: --num_epochs when given (it overrides --num_batches, as in nvcnn.py), else
 * --num_batches (50). With --data_dir, opens the training loader to count the images per epoch. */
static Loader *plan_steps(Run *r) {
    const Config *c = &r->cfg;
    Loader *ld = NULL;
    if (c->data_dir) {
        ld = input_open_loader(r, "train", 1, 0);
        r->nrecord = loader_num_records(ld);
        if (r->nrecord == 0) die_code(EXIT_DATA, "%s: the train-* shards hold no records", c->data_dir);
        /* a run that evaluates: validation-* that cannot be read stops it now, not after training */
        if (!c->forward_only && loader_has_subset(c->data_dir, "validation")) input_scan(r, "validation");
    }
    if (c->data_dir && r->dist.size > 1) { /* one data set: node-local copies may sit at other paths, not differ */
        uint64_t *n = xmalloc((size_t)r->dist.size * 2 * sizeof *n);
        const uint64_t mine[2] = {(uint64_t)r->nrecord, (uint64_t)loader_has_subset(c->data_dir, "validation")};
        dist_allgather(&r->dist, mine, n, sizeof mine);
        int k = 1;
        while (k < r->dist.size && n[2 * k] == n[0] && n[2 * k + 1] == n[1]) k++;
        if (k < r->dist.size) {
            util_set_quiet_usage(r->dist.rank != k);
            util_set_error_delay(0);
            if (n[2 * k] != n[0])
                die_code(EXIT_USAGE, "rank %d's --data_dir=%s holds %llu training records, rank 0's %llu: every rank needs the same data set%s",
                         k, c->data_dir, (unsigned long long)n[2 * k], (unsigned long long)n[0],
                         c->skip_corrupt ? " (--skip_corrupt passes over empty or corrupt shards: one rank's copy may have some)" : "");
            die_code(EXIT_USAGE, "rank %d's --data_dir=%s has %svalidation-* shards, rank 0's has %s: every rank needs the same data set",
                     k, c->data_dir, n[2 * k + 1] ? "" : "no ", n[1] ? "them" : "none");
        }
        free(n);
    }
    if (c->num_epochs > 0)
        r->nstep = (long)(c->num_epochs * (double)r->nrecord / r->total_batch);
    else
        r->nstep = c->num_batches > 0 ? c->num_batches : 50;
    if (r->nstep < 1) r->nstep = 1;
    if (!c->data_dir) r->nrecord = (size_t)r->nstep * (size_t)r->total_batch; /* synthetic: one epoch */
    return ld;
}

/* The learning rate by step: --lr_decay_policy over the run, after --warmup_epochs. */
static LrSchedule schedule(const Run *r) {
    const Config *c = &r->cfg;
    long steps_per_epoch = (long)(r->nrecord / (size_t)r->total_batch);
    if (steps_per_epoch < 1) steps_per_epoch = 1;
    LrSchedule s = {0};
    s.base = r->base_lr;
    s.policy = c->lr_decay_policy == LR_STEP ? SCHED_STEP : SCHED_POLY;
    s.poly_power = c->lr_poly_power;
    s.total_steps = r->nstep;
    s.steps_per_epoch = steps_per_epoch;
    s.decay_epochs = c->lr_decay_epochs;
    s.decay_rate = c->lr_decay_rate;
    s.warmup_steps = (long)llround(c->warmup_epochs * (double)steps_per_epoch);
    if (s.warmup_steps > r->nstep && r->dist.rank == 0) /* the run ends while the rate still climbs */
        warn("--warmup_epochs=%g is %ld steps, longer than this run (%ld): the learning rate never reaches %g (it ends at %.3g)",
             c->warmup_epochs, s.warmup_steps, r->nstep, s.base, s.base * (double)r->nstep / (double)s.warmup_steps);
    return s;
}

/* The flag that sets the run's length, with the smallest value that makes it `steps` steps long:
 * "--num_epochs=3" when the length came from --num_epochs (which overrides --num_batches; the
 * epochs rounded up to 3 significant digits), else "--num_batches=30". */
static void length_flag(const Run *r, long steps, char *buf, size_t n) {
    if (r->cfg.num_epochs <= 0) {
        snprintf(buf, n, "--num_batches=%ld", steps);
        return;
    }
    const double per_epoch = (double)r->nrecord / r->total_batch;
    double e = (double)steps / per_epoch;
    const int digits = 2 - (int)floor(log10(e)); /* after the point: 3 significant digits */
    const double unit = pow(10, -digits);
    e = ceil(e / unit - 1e-9) * unit;
    char num[64];
    for (;; e += unit) { /* the printed value, read as plan_steps reads it, gives the steps */
        snprintf(num, sizeof num, "%.*f", digits > 0 ? digits : 0, e);
        if ((long)(strtod(num, NULL) * (double)r->nrecord / r->total_batch) >= steps) break;
    }
    if (strchr(num, '.')) { /* "3.00" -> "3", "2.50" -> "2.5" */
        char *z = num + strlen(num) - 1;
        while (*z == '0') *z-- = 0;
        if (*z == '.') *z = 0;
    }
    snprintf(buf, n, "--num_epochs=%s", num);
}

/* Before training: a run whose steps all fall in the burn-in times none of them (nvcnn.py's
 * "No results" after the whole run); say so now, with what to pass instead. */
static void warn_untimed(const Run *r, long step0) {
    const long steps = r->nstep - step0, burnin = r->cfg.nstep_burnin;
    if (steps > burnin || steps <= 0) return; /* (none: a resumed run's pending validation pass alone) */
    char longer[96], as[256];
    length_flag(r, step0 + burnin + 10, longer, sizeof longer);
    /* the burn-in's flag as the user spelled it (--num_warmup_batches is its alias) */
    const char *name = config_given_as(&r->cfg, &r->cfg.nstep_burnin, as, sizeof as) ? as : "--nstep_burnin";
    const int nlen = (int)strcspn(name, "=");
    printf("Note: this run makes %ld step%s and %.*s=%ld leaves the first %ld untimed: no speed figure "
           "(pass %s or more, or %.*s=%ld or less)\n",
           steps, steps == 1 ? "" : "s", nlen, name, burnin, burnin, longer, nlen, name, steps > 1 ? steps - 1 : 0);
}

/* --eval_every_epochs: after a step that completes a multiple of N epochs, the validation
 * accuracy in one line (and TensorBoard and metrics.csv). Returns 1 when it reaches --target_top1:
 * the run then ends at this step (its final checkpoint is written at this step). When the
 * validation data fails (a corrupt record, a label out of range: the rank that found it has said
 * which), the run ends at this step too, its checkpoint written, and *failed gets the exit code.
 * -1: a stop signal ended the evaluation (the caller stops the run as the signal asks). */
static int eval_while_training(Run *r, Trainer *tr, Input *in, Report *rep, long step, int *failed) {
    const Config *c = &r->cfg;
    if (c->forward_only || !evaluate_due(r, step)) return 0;
    const double t0 = now_seconds();
    double t1, t5;
    const int e = evaluate(r, tr, input_free_slot(in), 0, 1, &t1, &t5);
    if (e < 0) return -1;
    if ((*failed = e)) {
        r->nstep = step + 1;
        return 1;
    }
    const double secs = now_seconds() - t0, epochs = (double)(step + 1) * r->total_batch / (double)r->nrecord;
    printf("Validation at step %ld (epoch %.2f): top-1 %.3f %%, top-5 %.3f %% (%.1f s)\n", step + 1, epochs, t1, t5, secs);
    report_validation(rep, step + 1, t1, t5);
    report_pause(rep, secs); /* the rows' pace and speed leave the evaluation out */
    if (c->target_top1 > 0 && t1 >= c->target_top1) {
        printf("Reached --target_top1=%g at step %ld (epoch %.2f): validation top-1 %.3f %%\n", c->target_top1, step + 1, epochs, t1);
        r->nstep = step + 1;
        r->target_reached = t1; /* in the final checkpoint: the same command again trains no further */
        return 1;
    }
    return 0;
}

/* --target_top1 and the run's final evaluation (after its last step, where --eval_every_epochs
 * evaluates nothing): reached there too, in the line scripts read; or not reached, said. */
static void final_target(const Run *r, double t1) {
    const Config *c = &r->cfg;
    if (c->target_top1 <= 0 || !(t1 >= 0)) return; /* (no validation images: no accuracy) */
    const double epochs = (double)r->nstep * r->total_batch / (double)r->nrecord;
    if (t1 >= c->target_top1)
        printf("Reached --target_top1=%g at step %ld (epoch %.2f): validation top-1 %.3f %% (the final evaluation)\n", c->target_top1,
               r->nstep, epochs, t1);
    else
        printf("Not reached: --target_top1=%g; validation top-1 %.3f %% at the end of the run (step %ld, epoch %.2f)\n", c->target_top1,
               t1, r->nstep, epochs);
}

/* Lifecycle's flush: the GPU steps' results not read yet, into the report (and the run's loss
 * average, which a checkpoint keeps). */
typedef struct Flush {
    Trainer *tr;
    Report *rep;
    const LrSchedule *sched;
} Flush;
static void flush_results(void *ctx) {
    Flush *f = ctx;
    trainer_fetch(f->tr);
    report_results(f->rep, f->tr);
}
/* Lifecycle's before_stop: the stopped run's last step gets its row and summary, as a run's last */
static void report_stopped_step(void *ctx, long step) {
    Flush *f = ctx;
    report_force(f->rep, step);
    report_step(f->rep, step, NAN, lr_at(f->sched, step), NAN);
}

/* A resumed run whose settings differ from its checkpoint's run says so, once (they apply from the
 * next step; nothing is refused: a longer run, a new rate or schedule are what a user may mean):
 * the learning rate of the next step where it differs from the one the saved run had for it (a
 * longer run re-stretches poly's decay: a jump up from about 0), the optimizer's settings, the
 * precision. */
static void say_resume_changes(const Run *r, const LrSchedule *sched, long step0) {
    const Config *c = &r->cfg;
    const double *o = r->resumed_opt;
    if (r->resumed_precision >= 0 && r->resumed_precision != (int)c->precision)
        printf("(saved by a run in %s, resumed in %s)\n", precision_name((Precision)r->resumed_precision), precision_name(c->precision));
    if (!(o[CKPT_OPT_SAVED] > 0)) return; /* a checkpoint of before 2026-11-28: not recorded */
    const double now = lr_at(sched, step0), was = o[CKPT_OPT_NEXT_LR];
    if (fabs(now - was) > 1e-6 * fmax(fabs(now), fabs(was)) + 1e-12)
        printf("(step %ld's learning rate is %.4g, where the checkpoint's run had %.4g for it: another --learning_rate, run length "
               "or schedule%s)\n",
               step0 + 1, now, was, c->lr_decay_policy == LR_POLY && now > was ? " (poly decays to 0 over this run's own steps)" : "");
    char diff[512] = "";
    size_t n = 0;
    const struct {
        const char *name;
        double now, was;
    } v[] = {{"--momentum", c->momentum, o[CKPT_OPT_MOMENTUM]},
             {"--weight_decay", c->weight_decay, o[CKPT_OPT_WEIGHT_DECAY]},
             {"--nesterov", c->nesterov, o[CKPT_OPT_NESTEROV]},
             {"--larc_eta", c->larc_eta, o[CKPT_OPT_LARC_ETA]},
             {"--larc_mode", (double)c->larc_mode, o[CKPT_OPT_LARC_MODE]}};
    for (size_t i = 0; i < sizeof v / sizeof v[0] && n < sizeof diff; i++) {
        if (v[i].now == v[i].was) continue;
        if (i == 4 && (v[3].now == 0 || v[3].was == 0)) continue; /* a mode of LARC off: said with the eta */
        if (i == 3 && (v[i].now == 0 || v[i].was == 0)) {
            char was[64], now[64];
            snprintf(now, sizeof now, v[i].now ? "--larc_eta=%g" : "LARC off", v[i].now);
            snprintf(was, sizeof was, v[i].was ? "--larc_eta=%g" : "LARC off", v[i].was);
            n += (size_t)snprintf(diff + n, sizeof diff - n, "%s%s (the checkpoint's run: %s)", n ? ", " : "", now, was);
        } else if (i == 2)
            n += (size_t)snprintf(diff + n, sizeof diff - n, "%s%s (the checkpoint's run: %s)", n ? ", " : "",
                                  v[i].now ? "--nesterov" : "--nonesterov", v[i].was ? "--nesterov" : "--nonesterov");
        else if (i == 4)
            n += (size_t)snprintf(diff + n, sizeof diff - n, "%s--larc_mode=%s (the checkpoint's run: %s)", n ? ", " : "",
                                  v[i].now == LARC_SCALE ? "scale" : "clip", v[i].was == LARC_SCALE ? "scale" : "clip");
        else
            n += (size_t)snprintf(diff + n, sizeof diff - n, "%s%s=%g (the checkpoint's run: %g)", n ? ", " : "", v[i].name, v[i].now,
                                  v[i].was);
    }
    if (n) printf("(resumed with %s)\n", diff);
}

/* The batch norm that normalises a channel over the fewest values (a rank's batch times its map's
 * pixels) into r->bn_values and r->bn_layer. Over one value its output is its bias alone: the
 * logits no longer depend on the image and nothing trains, said here; over a few the gradients
 * grow large (report.c names it where steps diverge). */
static void batch_norm_values(Run *r, const Net *net) {
    r->bn_values = 0;
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "bn") != 0) continue;
        const Shape s = net->node[l->in[0]].shape;
        const long m = (long)s.n * s.h * s.w;
        if (r->bn_values == 0 || m < r->bn_values) {
            r->bn_values = m;
            snprintf(r->bn_layer, sizeof r->bn_layer, "%s", l->name);
        }
    }
    if (r->bn_values == 1 && !r->cfg.forward_only && !r->cfg.layers_only && r->dist.rank == 0)
        warn("batch norm %s normalises each channel over 1 value (--batch_size=%d at %dx%d: its maps are 1x1): its output is its "
             "bias alone, the logits do not depend on the image and nothing trains; a larger --batch_size%s",
             r->bn_layer, r->cfg.batch_size, r->image_size, r->image_size, model_fully_convolutional(r->model) ? " or --image_size" : "");
}

/* Training (or, with --forward_only, inference) for the planned steps, then validation. */
static int train(Run *r) {
    const Config *c = &r->cfg;
    Net *net = build_net(r);
    Loader *ld = plan_steps(r);
    char ck[4096];
    double reached = 0; /* the top-1 with which --target_top1 ended the run of that checkpoint */
    const long saved = lifecycle_saved_step(r, net, ck, sizeof ck, &reached);
    if (c->forward_only && c->log_dir && saved == -1) { /* a mistyped folder would benchmark the initial weights */
        const char *why = lifecycle_log_dir_missing(c->log_dir);
        if (why) die_code(EXIT_USAGE, "--forward_only: --log_dir=%s %s", c->log_dir, why);
        die_code(EXIT_USAGE, "--forward_only: no checkpoint in --log_dir=%s (it benchmarks the newest one's weights; without --log_dir, "
                             "the model's initial weights)",
                 c->log_dir);
    }
    if (saved > 0 && c->target_top1 > 0 && reached >= c->target_top1 && !c->forward_only) {
        printf("The checkpoint %s is at step %ld, where its run reached --target_top1=%g (validation top-1 %.3f %%): nothing left "
               "to train (a higher --target_top1 trains on from it)\n",
               ck, saved, c->target_top1, reached);
        loader_close(ld);
        net_free(net);
        return c->export_onnx ? export_checkpoint(r) : 0;
    }
    const int final_pass = saved == r->nstep && r->final_eval_pending && c->data_dir && !c->noeval && !c->forward_only &&
                           loader_has_subset(c->data_dir, "validation");
    if (final_pass)
        printf("(the validation pass after step %ld did not run to its end before the run stopped: done now)\n", saved);
    if (saved >= r->nstep && !c->forward_only && !final_pass) { /* a finished run, resumed: nothing to do */
        char longer[96];
        length_flag(r, saved + 1, longer, sizeof longer);
        printf("The checkpoint %s is at step %ld, %s this run (%ld step%s): nothing left to train "
               "(--eval evaluates it; %s or more trains on from it)\n",
               ck, saved, saved == r->nstep ? "the last of" : "past the end of", r->nstep, r->nstep == 1 ? "" : "s", longer);
        loader_close(ld);
        net_free(net);
        return c->export_onnx ? export_checkpoint(r) : 0; /* --export_onnx: that checkpoint */
    }
    /* looked at now: validation shards that are not one set stop the run before it trains */
    const int validate = c->data_dir && !c->forward_only && loader_has_subset(c->data_dir, "validation");
    if (c->eval_every_epochs > 0 && !validate && !c->forward_only)
        die_code(EXIT_USAGE, "--%s: no validation-* shards in --data_dir=%s", c->target_top1 > 0 ? "target_top1" : "eval_every_epochs",
                 c->data_dir);
    r->base_lr = c->learning_rate > 0 ? c->learning_rate : model_default_lr(r->model, r->total_batch);
    batch_norm_values(r, net); /* (a run with something to train: after the returns above) */
    report_header(r, net);
    if (c->layers_only) { /* --print_layers alone: the table is what was asked for */
        printf("(--print_layers without --num_batches or --num_epochs: nothing trained)\n");
        loader_close(ld);
        net_free(net);
        return 0;
    }
    Trainer tr;
    GpuNet *gpu = plan(r, net, &tr);
    tr.lazy = gpu != NULL; /* no host round trip on the steps that print nothing */
    Lifecycle life;
    const long step0 = lifecycle_start(&life, r, net, &tr);
    warn_untimed(r, step0); /* after the checkpoint's checks: a run they refuse has no such note */
    Input in;
    input_start(&in, r, &tr, ld, step0);
    util_set_oom_hint(NULL); /* the net, the trainer and the batches are allocated: a later failure is not the batch's */
    Profiler *prof = profile_open(r, net, &tr, step0); /* --profile */
    Report rep;
    report_open(&rep, r, &tr, step0);
    const LrSchedule sched = schedule(r);
    r->sched = &sched;
    if (step0 > 0 && !c->forward_only && r->dist.rank == 0) say_resume_changes(r, &sched, step0);
    Flush flush = {&tr, &rep, &sched};
    life.flush = flush_results;
    life.flush_ctx = &flush;
    life.before_stop = report_stopped_step;
    signals_training(); /* from here a Ctrl-C, too, stops after the step under way, with the checkpoint */
    int target = 0;      /* --target_top1 reached, or an evaluation failed */
    int eval_failed = 0; /* that evaluation's exit code */
    if (r->resume_eval == step0 && step0 > 0 && !evaluate_due(r, step0 - 1) && r->dist.rank == 0)
        printf("(the evaluation after step %ld, which the stop came before, is not done: this run evaluates %s)\n", step0,
               c->eval_every_epochs > 0 ? "at other steps" : "nothing while training");
    if (r->resume_eval == step0 && step0 > 0 && evaluate_due(r, step0 - 1)) { /* the evaluation the stop came before, first */
        printf("(the evaluation after step %ld did not run before the run stopped: done now)\n", step0);
        r->eval_pending = 1; /* until it is done */
        const int e = eval_while_training(r, &tr, &in, &rep, step0 - 1, &eval_failed);
        if (e < 0) { /* stopped again: the checkpoint, still pending (no row: no step was trained) */
            life.before_stop = NULL;
            lifecycle_poll(&life, step0 - 1);
            life.before_stop = report_stopped_step;
        }
        if (e > 0) target = 1;
        if (e >= 0) r->eval_pending = 0;
    }

    for (long step = step0; step < r->nstep; step++) {
        const double t0 = now_seconds(), lr = lr_at(&sched, step);
        const int eval_due = !c->forward_only && evaluate_due(r, step);
        if (eval_due) report_force(&rep, step); /* the row an evaluation follows */
        profile_step_begin(prof, step);
        const int32_t *labels = input_next(&in, step);        /* this step's batch, staged */
        profile_span(prof, PROF_INPUT, t0, now_seconds());
        double loss;
        if (c->forward_only) {
            trainer_infer_begin(&tr, labels);                  /* forward and its loss queued */
            input_prefetch(&in, step + 1 < r->nstep);
            loss = trainer_infer_end(&tr);
        } else {
            trainer_step_begin(&tr, labels);                   /* forward and backward queued */
            input_prefetch(&in, step + 1 < r->nstep);          /* the next batch copied meanwhile */
            loss = trainer_step_end(&tr, lr);                  /* averaged over ranks, update */
        }
        if (tr.lazy) { /* the GPU's step results: read on the steps that print, and when its ring is full */
            if (report_due(&rep, step) || profile_waits(prof, step)) trainer_fetch(&tr);
            report_results(&rep, &tr);
        }
        const double t1 = now_seconds();
        profile_step_end(prof, step, t0, t1);
        /* row, TensorBoard, CSV; the GPU's steps are timed on the device (a host clock sees
         * only how long queueing took while the device is behind) */
        report_step(&rep, step, loss, lr, tr.lazy ? NAN : t1 - t0);
        report_test_pause();                                   /* NVCNN_TEST_STEP_PAUSE_MS */
        /* a checkpoint written now comes before this step's evaluation (if one is due): it says
         * so, and the run resumed from it evaluates first */
        r->eval_pending = eval_due;
        if (lifecycle_poll(&life, step)) break;                /* signals, periodic checkpoint */
        const int e = eval_while_training(r, &tr, &in, &rep, step, &eval_failed); /* --eval_every_epochs */
        if (e < 0 && lifecycle_poll(&life, step)) break; /* a stop signal during it: the checkpoint (it is still pending), then stop */
        r->eval_pending = 0;
        if ((target = e > 0)) break;
        if (life.save_deferred && lifecycle_poll(&life, step)) break; /* the checkpoint due before the evaluation, now */
    }

    input_finish(&in, r->nstep);
    trainer_fetch(&tr); /* what a stop between rows left unread */
    report_results(&rep, &tr);
    if (!c->forward_only) lifecycle_finish(&life, step0);
    report_end(&rep, r->nstep - step0);
    int rc = profile_close(prof);
    if (validate && !life.stopped && !target && !c->noeval) { /* --noeval: none */
        double t1, t5;
        const int e = evaluate(r, &tr, 0, 1, 0, &t1, &t5);
        if (e == 0) report_validation(&rep, r->nstep, t1, t5);
        if (e == 0) final_target(r, t1);
        if (e < 0 || (e == 0 && final_pass)) lifecycle_final_eval(&life, e < 0); /* stopped: to do when resumed; done: said */
    }
    report_close(&rep);
    if (c->export_onnx && (life.stopped || eval_failed) && r->dist.rank == 0) /* a model part-way: not over what FILE holds */
        printf("(--export_onnx: the run stopped at step %ld before its end: %s not written; the resumed run writes it at its end)\n",
               r->nstep, c->export_onnx);
    else if (!c->forward_only)
        export_trained(r, net, &tr, r->nstep); /* --export_onnx */
    trainer_free(&tr);
    gpunet_free(gpu);
    net_free(net);
    const int saved_rc = lifecycle_exit_code(&life);
    if (eval_failed && !saved_rc) { /* said by the rank that found it; the checkpoint line above */
        if (r->dist.rank == 0)
            error_line("the evaluation after step %ld failed on the validation data (above): training stopped there%s", r->nstep,
                       c->log_dir ? ", its checkpoint written" : " (no --log_dir: no checkpoint)");
        return eval_failed;
    }
    return saved_rc ? saved_rc : rc;
}

/* OpenMP's threads wait for the next parallel region by spinning, and libgomp's default spin
 * (300,000 rounds, about 0.2-0.5 ms) is longer than the gaps between most of a step's layers, so on
 * a machine that others share they hold their cores while they have nothing to do, and the step
 * stalls behind whoever wants those cores (docs/performance.md: lenet at a fraction of its speed
 * beside one busy process). A shorter spin costs nothing measurable on an idle machine. libgomp
 * reads its settings once, when it is loaded, before main: so where the user set neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT, nvcnn sets GOMP_SPINCOUNT and runs itself again (the same
 * process: exec keeps the pid that mpirun and Slurm know). If that fails it carries on with
 * libgomp's default. */
#define NVCNN_GOMP_SPINCOUNT "1000"
static void default_omp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", NVCNN_GOMP_SPINCOUNT, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT"); /* exec failed: libgomp already runs with its default */
}

/* Every rank must be given the same flags, but those config_per_rank_flags() names: ranks that
 * differ in the run's length, batch or model would wait for each other in a collective that never
 * matches (a hang until --step_timeout, or MPI's own abort), or train on silently wrong figures.
 * The lowest rank that differs from rank 0 names the first flag that does, once; every rank exits 2. */
static void check_ranks_agree(Run *r) {
    if (r->dist.size == 1) return;
    enum { TEXT = 16384 };
    char *mine = xmalloc(TEXT), *zero = xmalloc(TEXT);
    size_t len = config_rank_text(&r->cfg, mine, TEXT);
    if (len >= TEXT) len = TEXT - 1;
    const uint32_t h = crc32c(mine, len);
    uint32_t *all = xmalloc((size_t)r->dist.size * sizeof *all);
    dist_allgather(&r->dist, &h, all, sizeof h);
    int first = -1, more = 0;
    for (int k = 1; k < r->dist.size; k++)
        if (all[k] != all[0]) {
            if (first < 0)
                first = k;
            else
                more++;
        }
    free(all);
    if (first < 0) {
        free(mine);
        free(zero);
        return;
    }
    memcpy(zero, mine, TEXT);
    dist_bcast(&r->dist, zero, TEXT); /* rank 0's */
    util_set_quiet_usage(r->dist.rank != first);
    util_set_error_delay(0); /* the one line, said at once by the rank that says it */
    const char *a = mine, *b = zero;
    while (*a && *b) { /* the same flags, line by line: the first whose values differ */
        const size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la) != 0) break;
        a += la + (a[la] ? 1 : 0);
        b += lb + (b[lb] ? 1 : 0);
    }
    char more_text[64] = "";
    if (more) snprintf(more_text, sizeof more_text, " (and %d more rank%s)", more, more == 1 ? " differs" : "s differ");
    die_code(EXIT_USAGE, "the ranks were given different flags: rank %d has %.*s, rank 0 %.*s%s; every rank needs the same "
                         "flags (only %s may differ)",
             first, (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b, more_text, config_per_rank_flags());
}

int main(int argc, char **argv) {
    Run r;
    default_omp_wait(argv);
    memset(&r, 0, sizeof r);
    r.resumed_precision = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* a file size limit (ulimit -f) makes a write fail with EFBIG, which the writers report
     * (a checkpoint not written, an export or a profile lost, their temporary files removed),
     * instead of SIGXFSZ killing the process halfway through a file */
    signal(SIGXFSZ, SIG_IGN);
    /* a bad OMP_NUM_THREADS said before the first parallel region (signals_install), and before MPI
     * knows the ranks: the launcher's rank variables leave the line to rank 0 (util.h) */
    util_set_error_delay(dist_launcher_rank() > 0 ? 2000 : 0);
    omp_threads_given();
    /* a stop or checkpoint signal during the start-up (MPI's wire-up included, which can take long
     * at scale): acted on after the first step */
    signals_install();
    dist_init(&r.dist, &argc, &argv);
    config_set_warnings(r.dist.rank == 0);
    config_set_ranks(r.dist.size);
    /* the errors all ranks meet (the command line's among them): rank 0's line alone; a rank's own
     * (another command line) from that rank, 2 s later (util.h) */
    util_set_error_delay(r.dist.rank != 0 ? 2000 : 0);
    config_parse(&r.cfg, argc, argv);
    report_clock(); /* an invalid NVCNN_TEST_CLOCK_SCALE stops the run here, before any output */
    report_test_pause_ms(); /* likewise an invalid NVCNN_TEST_STEP_PAUSE_MS */
    watchdog_start(r.cfg.step_timeout, r.dist.rank); /* a rank stuck waiting for a lost peer exits 5 */
    check_ranks_agree(&r);
    if (r.dist.rank != 0 && !r.cfg.verbose) {
        if (!freopen("/dev/null", "w", stdout)) die("cannot silence rank %d's output", r.dist.rank);
    }
    refuse_unsupported(&r.cfg);
    r.model = model_find(r.cfg.model);
    choose_device(&r);
    choose_cpu_impl(&r);
    choose_allreduce(&r);
    r.total_batch = r.cfg.batch_size * r.dist.size;
    r.image_size = r.cfg.image_size ? r.cfg.image_size : r.model->image_size;

    r.threads = default_threads(r.dist.local_size, r.dist.rank);
    omp_set_num_threads(r.threads);
    openblas_set_num_threads(r.threads);

    export_check_path(&r, 1); /* --export_onnx: a path that cannot be written stops the run now */
    profile_check_path(&r, 1); /* --profile: the same */
    /* --eval and --forward_only write nothing to --log_dir (they read its checkpoint), nor does
     * --export_onnx alone */
    if (r.cfg.log_dir && r.dist.rank == 0 && !r.cfg.eval && !r.cfg.forward_only && !r.cfg.layers_only && !export_only_run(&r))
        prepare_log_dir(r.cfg.log_dir);
    export_check_path(&r, 0);
    profile_check_path(&r, 0);
    dist_barrier(&r.dist);
    int rc = r.cfg.eval ? eval_only(&r) : export_only_run(&r) ? export_checkpoint(&r) : train(&r);
    dist_finalize(&r.dist);
    return rc;
}
