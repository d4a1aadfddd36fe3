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
typedef enum { DATA_FORMAT_AUTO = 0, DATA_FORMAT_NCHW, DATA_FORMAT_NHWC } DataFormat;

/* A flag as given on the command line: its row in the flag table and its value (NULL for a flag
 * that takes none). */
typedef struct ConfigArg {
    int flag;
    const char *value;
} ConfigArg;

typedef struct Config {
    /* The flags as given, in order (the header's "Cmd line args:"). First, so that no flag's field
     * sits at offset 0 (the flag table's "no field"). */
    ConfigArg *args;
    int nargs;
    const char *model;
    const char *data_dir;      /* NULL: synthetic data */
    int batch_size;            /* per device */
    long num_batches;          /* 0: not given */
    double num_epochs;         /* 0: not given */
    int display_every;
    Precision precision;
    DeviceKind device;
    const char *log_dir;       /* NULL: none */
    double learning_rate;      /* 0: model default */
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
    int image_size;            /* 0: the model's */
    double eval_every_epochs;  /* 0: no evaluation while training */
    double target_top1;        /* 0: none; else stop at this validation top-1 (%) */
    int input_threads;         /* 0: cores / ranks on the node */
    int shuffle_buffer;
    int skip_corrupt;
    int num_classes;
    uint64_t seed;
    int nstep_burnin;
    AllreduceKind allreduce;
    double bucket_mb;
    double cudnn_workspace_mb; /* GPU backend: the cap of cuDNN's workspace */
    int deterministic;         /* GPU backend: bitwise-reproducible steps (gpunet.h: GPUNET_DETERMINISTIC) */
    DataFormat data_format;    /* GPU backend's layout; AUTO: NHWC in fp16 and bf16, NCHW otherwise */
    int fuse;                  /* GPU backend: 1 fuse batch norm with ReLU and add (gpunet.h: GPUNET_FUSE), 0 not */
    int cuda_graph;            /* GPU backend: the training step as one CUDA Graph (1, the default) */
    int save_interval;         /* seconds */
    double step_timeout;       /* seconds a rank may wait in one phase (watchdog.h); 0: forever */
    int verbose;
    int print_layers;
    int forward_only;          /* inference benchmark: no backward, no update */
    int summary_interval;      /* seconds between TensorBoard summaries */
    int num_gpus;              /* GPUs per process: only 1 (one process per GPU) */
    CpuImplKind cpu_impl;      /* AUTO: oneDNN where built */
    const char *export_onnx;   /* --export_onnx=FILE: the model as ONNX (export.h); NULL: none */
    const char *profile;       /* --profile=FILE: a Chrome trace of some steps (profile.h); NULL: none */
    long profile_first;        /* --profile_steps=N:K: the first step profiled (1-based); 0: after the burn-in */
    int profile_count;         /* K: steps profiled */
    /* Which flags were given explicitly (config_given() answers for any field). */
    int given_larc_mode, given_loss_scale, given_learning_rate, given_display_every;
    int noeval;                /* --noeval given (last of --eval/--noeval): no validation pass after training */
    int layers_only;           /* --print_layers without --num_batches or --num_epochs: print, train nothing */
} Config;

/* Parses argv into cfg. On --help (-h) prints usage and exits 0; on an unknown flag, a bad value or
 * an unknown model prints one "nvcnn: error: ..." line and exits 2. Every flag -- its spellings,
 * its parser, its field, its default and its help -- is one row of the flag table in config.c:
 * parsing, --help, --help=markdown and config_print_args all read that table. */
void config_parse(Config *cfg, int argc, char **argv);
/* Whether config_parse prints its warnings (a flag given twice with two values): on, and off on
 * every rank but rank 0 (every rank parses the same command line; one warning is enough). */
void config_set_warnings(int on);
/* The ranks the run has (1: one process), for the command -g N suggests. */
void config_set_ranks(int n);
void config_print_usage(FILE *f);
/* The flag table of the README (markdown), from the same list as --help. */
void config_print_markdown(FILE *f);
/* The flags as given, one per line: "  --name=value" (a one-letter flag under its long name,
 * -m lenet as --model=lenet; a flag without a value as --name), in the order given. */
void config_print_args(const Config *cfg, FILE *f);
/* 1 when a flag that sets `field` (a member of cfg, e.g. &cfg->display_every) was given. */
int config_given(const Config *cfg, const void *field);
/* The flag that set `field` last, as given and under its long name ("--fp16", "--precision=fp16",
 * -m lenet as "--model=lenet"), written into buf; NULL when no flag given sets it. */
const char *config_given_as(const Config *cfg, const void *field, char *buf, size_t n);
const char *precision_name(Precision p);
/* The values of the flags that every rank of a run must share, one "--name=value\n" line each in
 * the flag table's order (an alias under its first name; of a path flag, whether it is given),
 * written into buf (at most n bytes with the NUL); returns the length the whole text needs. */
size_t config_rank_text(const Config *cfg, char *buf, size_t n);
/* Those that may differ, in words (for the message that names a difference). */
const char *config_per_rank_flags(void);

#endif
