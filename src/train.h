/* train.h: one data-parallel training step on the CPU reference backend:
 * forward, backward (with loss scaling), gradient averaging over ranks, weight decay, LARC,
 * momentum update. Steps whose averaged gradients hold inf/nan are skipped and counted. */
#ifndef NVCNN_TRAIN_H
#define NVCNN_TRAIN_H

#include <stdint.h>

#include "dist.h"
#include "gpunet.h"
#include "net.h"
#include "optim.h"

typedef struct TrainerConfig {
    OptimConfig opt;
    double loss_scale;      /* 1: off */
    int dynamic_loss_scale; /* halve on overflow, double after 2000 good steps */
    double bucket_mb;       /* gradient allreduce bucket size (MiB); 0: 25 */
    int no_allreduce;       /* measurement only: ranks do not average (replicas drift apart) */
    int nccl;               /* GPU backend: average with NCCL inside backward (else MPI via the host) */
    int no_cuda_graph;      /* GPU backend: queue each step call by call (--cuda_graph=off; else one CUDA Graph per
                               step where it applies: gpunet_graph_step). NVCNN_CUDA_GRAPH=off in the environment
                               has the same effect (so that every GPU test can run both ways) */
} TrainerConfig;

typedef struct Trainer {
    Net *net;
    Dist *dist;
    Optimizer opt;
    double loss_scale;
    int dynamic;
    long good_steps;
    long skipped_steps;
    GradSync *sync;         /* bucketed gradient averaging, overlapped with backward; NULL: none */
    double backward_seconds; /* summed over steps: backward, with the buckets launched inside */
    double exposed_seconds;  /* summed over steps: waiting for the allreduce after backward */
    GpuNet *gpu;             /* the GPU backend, or NULL: the CPU reference */
    int nccl;                /* the GPU backend averages with NCCL (gpunet_nccl_init done) */
    int device_input;        /* GPU backend: the batch and labels are already on the device (staged
                                or uploaded once): steps do not copy the host input node */
    const int32_t *pending_labels; /* trainer_step_begin()'s labels */
    int lazy;                /* GPU backend: trainer_step_end() returns NAN and leaves the step's
                                result on the device until trainer_fetch() (or the device's ring
                                of results is full); trainer_next_loss() then hands the losses */
#define TRAINER_LOSSES 128
    double losses[TRAINER_LOSSES]; /* fetched and not yet taken, oldest at loss0 */
    double step_seconds[TRAINER_LOSSES]; /* their steps' periods on the device (GpuStepResult) */
    int loss0, nlosses;
    int time_restart;        /* GPU backend: the next step is timed from its own start (the first,
                                and after other work went through the device: an evaluation's
                                forward, a checkpoint's copies) */
    int graph;               /* GPU backend: steps may run as one CUDA Graph (after the first) */
    long gpu_steps;          /* training steps queued on the GPU backend */
    int graph_step;          /* this step runs as the graph (gpu_begin decided) */
    struct Profiler *prof;   /* --profile (profile.h): the steps' phases; NULL: none */
} Trainer;

/* Broadcasts rank 0's parameters and batch-norm statistics so every replica starts equal. With
 * `gpu` (built on `net`, or NULL for the CPU), steps run on the GPU backend: the batch is taken
 * from the input node's host data; parameters stay on the device until trainer_sync_host(). */
void trainer_init(Trainer *t, Net *net, Dist *dist, const TrainerConfig *c, GpuNet *gpu);
/* GPU backend: copies the device's parameters, state and velocity into the host net and
 * optimizer (before a checkpoint), or the host's onto the device (after a restore). */
void trainer_sync_host(Trainer *t);
void trainer_sync_device(Trainer *t);
void trainer_free(Trainer *t);
/* One step on the batch already in the net's input node, with `labels` [batch] (on the GPU
 * backend with device_input set, on the batch already on the device). Returns this rank's loss
 * (mean cross-entropy + weight_decay/2 ||w||^2) before the update. */
double trainer_step(Trainer *t, const int32_t *labels, double lr);
/* trainer_step() in two halves: begin queues forward and backward on the GPU backend and
 * returns, so that the caller can fetch and stage the next batch while the device works; end
 * finishes the step (averaging, update) and returns what trainer_step() returns. On the CPU
 * backend begin only records the labels and end runs the whole step. */
void trainer_step_begin(Trainer *t, const int32_t *labels);
double trainer_step_end(Trainer *t, double lr);
/* GPU backend with t->lazy: trainer_fetch() waits for the steps queued and reads their results
 * (losses, skips, the loss scale: the host's skipped_steps, good_steps and loss_scale are current
 * after it); trainer_next_loss() hands the fetched losses one by one, oldest first (0 when none is
 * left). Without lazy, trainer_step_end() fetches every step itself. */
void trainer_fetch(Trainer *t);
int trainer_next_loss(Trainer *t, double *loss);
/* trainer_next_loss() with the step's period on the device in seconds (NAN where there is none:
 * the CPU backend's steps are timed by the caller's clock) */
int trainer_next_result(Trainer *t, double *loss, double *seconds);
/* --forward_only's step, in two halves as trainer_step_begin/_end: forward in inference mode
 * (batch norm on its moving statistics, no dropout) on this step's batch; end returns the mean
 * cross-entropy. No backward, no update. */
void trainer_forward_begin(Trainer *t, const int32_t *labels);
double trainer_forward_end(Trainer *t);
/* The same for --forward_only's loop: on the GPU backend the step's loss and period go to the
 * device's ring of results (gpunet_infer_step), read as a training step's are (t->lazy:
 * trainer_fetch when a row prints, or when the ring is full; end then returns NAN). */
void trainer_infer_begin(Trainer *t, const int32_t *labels);
double trainer_infer_end(Trainer *t);
/* Forward in inference mode; returns top-1 and top-5 correct counts of the batch's first
 * `count` samples. */
void trainer_eval(Trainer *t, const int32_t *labels, int count, int *top1, int *top5);

/* nvcnn's input layer: NHWC bytes -> NCHW floats scaled to [-1, 1] (x / 127.5 - 1). */
void input_from_u8_nhwc(float *dst, const uint8_t *src, int n, int c, int h, int w);
/* nvcnn's synthetic images: truncated normal, stddev 0.1, through the same scaling. */
void input_synthetic(float *dst, size_t count, Rng *r);
/* nvcnn's synthetic labels: uniform in [0, num_classes - 1). */
void labels_synthetic(int32_t *labels, int n, int num_classes, Rng *r);

#endif
