/* config.h: nvcnn's command-line flags, defaults and validation. */
#ifndef NVCNN_CONFIG_H
#define NVCNN_CONFIG_H

#include <stdint.h>
#include <stdio.h>

typedef enum { DEVICE_AUTO = 0, DEVICE_CPU, DEVICE_GPU } DeviceKind;
typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_FP16, PREC_BF16 } Precision;
typedef enum { LR_POLY = 0, LR_STEP } LrPolicy;
typedef enum { LARC_CLIP = 0, LARC_SCALE } LarcMode;
typedef enum { CPU_IMPL_AUTO = 0, CPU_IMPL_REFERENCE, CPU_IMPL_ONEDNN } CpuImplKind;
typedef enum { ALLREDUCE_AUTO = 0, ALLREDUCE_NCCL, ALLREDUCE_MPI, ALLREDUCE_NONE } AllreduceKind;

typedef struct Config {
    const char *model;
    const char *data_dir;      /* NULL: synthetic data */
    int batch_size;            /* per device */
    long num_batches;          /* 0: not given */
    double num_epochs;         /* 0: not given */
    int display_every;
    Precision precision;
    DeviceKind device;
    const char *log_dir;       /* NULL: none */
    double learning_rate;      /* < 0: model default */
    double momentum;
    int nesterov;
    double weight_decay;
    LrPolicy lr_decay_policy;
    double lr_poly_power;
    double lr_decay_epochs;
    double lr_decay_rate;
    double warmup_epochs;
    double loss_scale;         /* 1: off */
    int dynamic_loss_scale;
    double larc_eta;           /* 0: LARC off */
    LarcMode larc_mode;
    int eval;
    int distort_color;
    double crop_area_min;      /* training crop area range [crop_area_min, 1] */
    int input_threads;         /* 0: cores / ranks on the node */
    int shuffle_buffer;
    int skip_corrupt;
    int num_classes;
    uint64_t seed;
    int nstep_burnin;
    AllreduceKind allreduce;
    double bucket_mb;
    int save_interval;         /* seconds */
    int verbose;
    int print_layers;
    int forward_only;          /* inference benchmark: no backward, no update */
    int summary_interval;      /* seconds between TensorBoard summaries */
    int num_gpus;              /* GPUs per process: only 1 (one process per GPU) */
    CpuImplKind cpu_impl;      /* AUTO: oneDNN where built */
    /* The command line as given, for the header. */
    int argc;
    char **argv;
    /* Which flags were given explicitly (for "not yet supported" checks). */
    int given_larc_mode, given_loss_scale, given_learning_rate;
} Config;

/* Parses argv into cfg. On --help prints usage and exits 0; on an unknown flag, a bad value or
 * an unknown model prints one "nvcnn: error: ..." line and exits 2. */
void config_parse(Config *cfg, int argc, char **argv);
void config_print_usage(FILE *f);
/* The flag table of the README (markdown), from the same list as --help. */
void config_print_markdown(FILE *f);
const char *precision_name(Precision p);

#endif
