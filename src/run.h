/* run.h: one invocation of nvcnn: the configuration and what main() derived from it, shared by
 * the files of the training loop (input.c, report.c, lifecycle.c, evaluate.c). */
#ifndef NVCNN_RUN_H
#define NVCNN_RUN_H

#include <stddef.h>

#include "ckpt_opt.h"
#include "config.h"
#include "dist.h"
#include "models.h"

typedef struct Run {
    Config cfg;
    Dist dist;
    const ModelInfo *model;
    int total_batch;
    int image_size;  /* the input's height and width: --image_size or the model's */
    int threads;
    long nstep;      /* the step the run ends at (a stop signal moves it) */
    size_t nrecord;  /* images per epoch over all ranks */
    double base_lr;
    long bn_values;  /* the fewest values a training batch norm normalises a channel over (0: none) */
    char bn_layer[64]; /* that batch norm's name */
    int gpu;         /* 1: the GPU backend on device gpu_device */
    int gpu_device;
    int nccl;        /* 1: the GPU backend averages gradients with NCCL */
    unsigned gpu_flags; /* gpunet_new's flags (gpunet.h): --deterministic, --data_format */
    int nhwc;        /* 1: the GPU backend computes in NHWC (gpunet_layout) */
    char cpu_layers[256]; /* the CPU backend's layers, for the header */
    double loss_avg[2];   /* nvcnn.py's logged loss average (decay 0.9, debiased): its sum and weight,
                             kept across a resume by the checkpoint */
    double target_reached; /* the validation top-1 (%) with which --target_top1 ended the run (0: not) */
    int eval_pending;      /* a stop signal ended the evaluation after the step being checkpointed */
    long resume_eval;      /* the restored checkpoint's step when its evaluation is pending (0: none) */
    const struct LrSchedule *sched; /* the run's learning-rate schedule, once made (for its checkpoints) */
    double resumed_opt[CKPT_OPT_FIELDS]; /* the restored checkpoint's optimizer settings (CkptMeta.opt; [0] 0: none) */
    int resumed_precision; /* ... and its precision (-1: no checkpoint restored) */
    int final_eval_pending; /* the newest checkpoint says a stop ended the validation pass at the end of its run */
} Run;

#endif
