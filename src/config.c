/* config.c: flags (getopt_long: --flag=value and --flag value), defaults, validation: all from
 * one table. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"
#include "util.h"

/* ---- the flag table ---------------------------------------------------------------------
 * One row per spelling: the long name, nvcnn.py's one-letter name (-m, -b, -g) or 0, the parser
 * (which also says whether the flag takes a value), the Config field it sets, the accepted range
 * or choices, the default and the help text. Parsing, --help, --help=markdown (the README's flag
 * table) and the header's "Cmd line args:" are all read from it: a new flag is one row here plus
 * its field in Config. `init` is the default written as a command-line value: it goes through
 * the row's parser before argv does. */
typedef struct Flag Flag;
typedef void (*FlagParse)(Config *cfg, const Flag *f, const char *v);

struct Flag {
    const char *name;
    char short_name;
    FlagParse parse;
    int has_arg;          /* 0: none, 1: required, 2: optional (--help=markdown) */
    size_t off;           /* the field: offsetof(Config, x); 0: none */
    size_t size;          /* integers: the field's size (int, long, uint64_t) */
    long ilo, ihi;        /* integers: the range */
    double dlo, dhi;      /* numbers: the range */
    int lo_open;          /* numbers: dlo itself excluded */
    const char *choices;  /* "a|b|c": the field gets choice_base + the index */
    int choice_base;
    int set;              /* flags without a value: what they store */
    const char *init;     /* the default as a value of the flag; NULL: the field starts at zero */
    const char *def;      /* the default as --help shows it; NULL: init, or nothing */
    const char *help;
};

static void parse_str(Config *cfg, const Flag *f, const char *v);
static void parse_path(Config *cfg, const Flag *f, const char *v);
static void parse_int(Config *cfg, const Flag *f, const char *v);
static void parse_num(Config *cfg, const Flag *f, const char *v);
static void parse_choice(Config *cfg, const Flag *f, const char *v);
static void parse_set(Config *cfg, const Flag *f, const char *v);
static void parse_loss_scale(Config *cfg, const Flag *f, const char *v);
static void parse_help(Config *cfg, const Flag *f, const char *v);
static void parse_profile_steps(Config *cfg, const Flag *f, const char *v);

#define FIELD(x) .off = offsetof(Config, x)
#define STR(x) .parse = parse_str, .has_arg = 1, FIELD(x)
#define PATH(x) .parse = parse_path, .has_arg = 1, FIELD(x)
#define INT(x, lo, hi) .parse = parse_int, .has_arg = 1, FIELD(x), .size = sizeof(((Config *)0)->x), .ilo = (lo), .ihi = (hi)
#define NUM(x, lo, hi) .parse = parse_num, .has_arg = 1, FIELD(x), .dlo = (lo), .dhi = (hi)
#define POS(x, hi) NUM(x, 0, hi), .lo_open = 1 /* > 0 */
#define CHOICE(x, list, base) .parse = parse_choice, .has_arg = 1, FIELD(x), .choices = (list), .choice_base = (base)
#define SET(x, value) .parse = parse_set, FIELD(x), .set = (value)
#define ON(x) SET(x, 1), .def = "off"

static const Flag flags[] = {
    {"model", 'm', STR(model), .def = "(required)", .help = "model to train (see the list below)"},
    {"data_dir", 0, PATH(data_dir), .def = "(none: synthetic data)", .help = "TFRecord shards train-* and validation-*"},
    {"batch_size", 'b', INT(batch_size, 1, 1 << 20), .init = "64", .help = "images per device per step"},
    {"num_batches", 0, INT(num_batches, 1, LONG_MAX), .init = "50", .help = "steps to run"},
    {"num_iter", 0, INT(num_batches, 1, LONG_MAX), .help = "alias of --num_batches"},
    {"num_epochs", 0, POS(num_epochs, 1e9), .def = "(none)",
     .help = "epochs to run (needs --data_dir; overrides --num_batches, as nvcnn.py)"},
    {"display_every", 0, INT(display_every, 1, 1 << 30), .init = "10",
     .help = "print a row every N steps (and at the first and last step); not given: every 10, or as often as a row about every 10 s needs"},
    {"precision", 0, CHOICE(precision, "fp32|tf32|fp16|bf16", PREC_FP32), .init = "fp32",
     .help = "fp32 | tf32 | fp16 | bf16 (the CPU backend: fp32, and bf16 where the CPU has AVX-512; fp32 is true fp32 on the GPU: no TF32 in any convolution algorithm)"},
    {"fp16", 0, SET(precision, PREC_FP16), .help = "alias of --precision=fp16"},
    {"nofp16", 0, SET(precision, PREC_FP32), .help = "alias of --precision=fp32"},
    {"device", 0, CHOICE(device, "cpu|gpu", DEVICE_CPU), .def = "cpu (gpu: opt-in, see README)", .help = "gpu | cpu"},
    {"num_gpus", 'g', INT(num_gpus, 1, 4096), .init = "1",
     .help = "GPUs per process: 1 (run one process per GPU under mpirun or srun)"},
    {"data_format", 0, CHOICE(data_format, "NCHW|NHWC", DATA_FORMAT_NCHW), .def = "NHWC on the GPU in fp16 and bf16, else NCHW",
     .help = "layout of the activations, their gradients and the filters (KRSC in NHWC) on the GPU backend; the CPU backend "
             "computes in NCHW (checkpoints are one format whatever the layout)"},
    {"log_dir", 0, PATH(log_dir), .def = "(none)", .help = "checkpoints, TensorBoard events and metrics.csv"},
    {"learning_rate", 0, POS(learning_rate, 1e9), .def = "model default",
     .help = "alexnet 0.03, googlenet 0.04, vgg 0.02, inception3 0.2, inception4 and inception-resnet2 0.045, resnext "
             "0.1, resnet 1.0 x total batch / 1024, others 0.001"},
    {"momentum", 0, NUM(momentum, 0, 1), .init = "0.9", .help = "momentum of SGD"},
    {"nesterov", 0, SET(nesterov, 1), .init = "on", .help = "Nesterov momentum, as nvcnn.py"},
    {"nonesterov", 0, SET(nesterov, 0), .help = "plain (heavy-ball) momentum"},
    {"weight_decay", 0, NUM(weight_decay, 0, 1e9), .init = "1e-4", .help = "L2 weight decay added to the loss"},
    {"lr_decay_policy", 0, CHOICE(lr_decay_policy, "poly|step", LR_POLY), .init = "poly",
     .help = "poly (to 0 at the end of the run) | step"},
    {"lr_poly_power", 0, NUM(lr_poly_power, 0, 1e9), .init = "2", .help = "power of the polynomial decay"},
    {"lr_decay_epochs", 0, POS(lr_decay_epochs, 1e9), .init = "30", .help = "step policy: epochs between decays"},
    {"lr_decay_rate", 0, POS(lr_decay_rate, 1), .init = "0.1", .help = "step policy: factor per decay"},
    {"warmup_epochs", 0, NUM(warmup_epochs, 0, 1e9), .init = "0", .help = "linear learning-rate warmup"},
    {"loss_scale", 0, .parse = parse_loss_scale, .has_arg = 1, FIELD(loss_scale), .init = "1", .def = "1; dynamic for fp16",
     .help = "N (static) or dynamic (from 65536: halved on overflow, doubled after 2000 good steps)"},
    {"larc_eta", 0, POS(larc_eta, 1e9), .def = "(off)", .help = "LARC trust coefficient"},
    {"larc_mode", 0, CHOICE(larc_mode, "clip|scale", LARC_CLIP), .init = "clip", .help = "clip | scale"},
    {"eval", 0, ON(eval), .help = "evaluate the newest checkpoint of --log_dir on validation-*"},
    {"eval_every_epochs", 0, POS(eval_every_epochs, 1e9), .def = "(off; 1 with --target_top1)",
     .help = "evaluate on validation-* every N epochs while training (N may be a fraction): a line each, TensorBoard "
             "and metrics.csv"},
    {"target_top1", 0, NUM(target_top1, 0, 100), .lo_open = 1, .def = "(none)",
     .help = "stop training once an evaluation while training reaches this validation top-1 (%), with a checkpoint "
             "(--log_dir); the final evaluation says whether it reached it"},
    {"noeval", 0, SET(eval, 0),
     .help = "train (the opposite of --eval), without the validation pass at the end of training (not with "
             "--eval_every_epochs or --target_top1)"},
    {"forward_only", 0, ON(forward_only),
     .help = "inference benchmark: forward passes with batch norm in inference mode, no backward, no update; with --log_dir, "
             "of its newest checkpoint's weights (nothing is written there)"},
    {"distort_color", 0, ON(distort_color), .help = "random brightness/saturation/hue/contrast"},
    {"image_size", 0, INT(image_size, 1, 8192), .def = "the model's",
     .help = "input height and width of the fully convolutional models (resnet*, resnext*, googlenet, inception*), "
             "from each one's smallest (inception 75); images are resized to it"},
    {"crop_area_min", 0, POS(crop_area_min, 1), .init = "0.1",
     .help = "smallest training crop, as a fraction of the image area (1: no crop)"},
    {"input_threads", 0, INT(input_threads, 1, 4096), .def = "cores / ranks per node", .help = "decode workers"},
    {"shuffle_buffer", 0, INT(shuffle_buffer, 0, 1 << 30), .init = "10000", .help = "records in the shuffle buffer"},
    {"skip_corrupt", 0, ON(skip_corrupt), .help = "skip and count corrupt records instead of exiting 4"},
    {"num_classes", 0, INT(num_classes, 1, 1 << 24), .init = "1000", .help = "classes of the final layer"},
    {"seed", 0, INT(seed, 0, LONG_MAX), .init = "1234", .help = "seed of initialisation, data order and augmentation"},
    {"nstep_burnin", 0, INT(nstep_burnin, 0, 1 << 30), .init = "20", .help = "steps left out of Images/sec"},
    {"num_warmup_batches", 0, INT(nstep_burnin, 0, 1 << 30), .help = "alias of --nstep_burnin"},
    {"allreduce", 0, CHOICE(allreduce, "nccl|mpi|none", ALLREDUCE_NCCL), .def = "nccl on GPU, mpi on CPU",
     .help = "nccl (GPU backend, one GPU per rank) | mpi (also lets ranks share a GPU) | none (measurement only: "
             "replicas drift)"},
    {"bucket_mb", 0, POS(bucket_mb, 1e6), .init = "25", .help = "gradient allreduce bucket size in MiB"},
    {"cudnn_workspace_mb", 0, NUM(cudnn_workspace_mb, 0, 1 << 24), .init = "4096",
     .help = "GPU backend: cuDNN's workspace at most this many MiB (each convolution takes the fastest algorithm within it "
             "and the memory free), room left for cuBLAS and NCCL"},
    {"fuse", 0, CHOICE(fuse, "off|on", 0), .init = "on",
     .help = "GPU backend: batch norm with the ReLU, or the residual add and the ReLU, that follow it as one pass forward and one "
             "backward (the header's Fusion line says how many); off: every layer alone"},
    {"deterministic", 0, ON(deterministic),
     .help = "GPU backend: bitwise-reproducible runs: each convolution takes the first of cuDNN's deterministic algorithms "
             "in its heuristics' order instead of the fastest it measures (everything else of a step is deterministic "
             "already). Costs convolution speed on a GPU: the fastest backward algorithms are often non-deterministic "
             "(atomics) and the heuristics' choice is not timed; the emulated device cannot measure how much"},
    {"cuda_graph", 0, CHOICE(cuda_graph, "off|on", 0), .init = "on",
     .help = "GPU backend: each training step (forward, backward, NCCL's allreduce, the update; with --forward_only the "
             "forward and its loss) as one CUDA Graph, captured at the second step and replayed; off: the step's work queued call "
             "by call. Not used with dropout (in training) or NVCNN_SYNC_CHECK=1, for --profile's steps, nor where MPI averages "
             "through the host (the header's CUDA Graph line says which; on, given where the step cannot be one, is refused: "
             "dropout, NVCNN_SYNC_CHECK=1, MPI through the host)"},
    {"save_interval", 0, INT(save_interval, 1, 1 << 30), .init = "43200", .help = "seconds between checkpoints"},
    {"step_timeout", 0, NUM(step_timeout, 0, 1e9), .init = "600",
     .help = "seconds a rank may wait in one phase of a step (a collective, the input) before it exits 5 with a line "
             "naming the phase and the rank (a lost peer); 0: no limit"},
    {"summary_interval", 0, INT(summary_interval, 0, 1 << 30), .init = "3600",
     .help = "seconds between TensorBoard summaries (also written at the first and last step)"},
    {"verbose", 0, ON(verbose), .help = "every rank prints"},
    {"cpu_impl", 0, CHOICE(cpu_impl, "reference|onednn", CPU_IMPL_REFERENCE), .def = "onednn where built, else reference",
     .help = "onednn | reference: the CPU backend's layers (oneDNN, or the hand-written reference)"},
    {"print_layers", 0, ON(print_layers),
     .help = "print the layers: settings, shape, parameters, GFLOPs, inputs where it branches; modules as headings; "
             "then train only where --num_batches or --num_epochs is given"},
    {"export_onnx", 0, PATH(export_onnx), .def = "(none)",
     .help = "write the model as ONNX (opset 17) to this file: the newest checkpoint of --log_dir when neither "
             "--num_batches nor --num_epochs is given, else the model at the end of the run"},
    {"profile", 0, PATH(profile), .def = "(none)",
     .help = "write a Chrome trace (JSON) of the --profile_steps to this file (FILE.rankN per rank with several ranks) "
             "and print the layers that took the most time"},
    {"profile_steps", 0, .parse = parse_profile_steps, .has_arg = 1, FIELD(profile_first), .init = "0:3", .def = "3 steps after the burn-in",
     .help = "N:K: --profile's steps, N to N+K-1 (counted from 1, as the table's Step)"},
    {"help", 'h', .parse = parse_help, .has_arg = 2,
     .help = "this help (--help=markdown: the flag table of the README)"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))
_Static_assert(offsetof(Config, args) == 0, "the flag table's field offset 0 means none");

const char *precision_name(Precision p) {
    switch (p) {
    case PREC_TF32: return "tf32";
    case PREC_FP16: return "fp16";
    case PREC_BF16: return "bf16";
    default: return "fp32";
    }
}

static const char *flag_default(const Flag *f) { return f->def ? f->def : f->init ? f->init : ""; }

static void flag_spelling(const Flag *d, char *out, size_t len) {
    if (d->short_name)
        snprintf(out, len, "-%c, --%s%s", d->short_name, d->name, d->has_arg == 1 ? "=V" : "");
    else
        snprintf(out, len, "--%s%s", d->name, d->has_arg == 1 ? "=V" : "");
}

void config_print_usage(FILE *f) {
    fprintf(f, "Usage: nvcnn --model=NAME [flags]   (flags as --flag=value or --flag value)\n\nFlags:\n");
    for (int i = 0; i < NFLAGS; i++) {
        char left[64];
        flag_spelling(&flags[i], left, sizeof left);
        fprintf(f, "  %-26s %s", left, flags[i].help);
        if (flag_default(&flags[i])[0]) fprintf(f, " [default: %s]", flag_default(&flags[i]));
        fputc('\n', f);
    }
    fprintf(f, "\nModels:\n");
    int n;
    const ModelInfo *m = model_list(&n);
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-18s %3dx%-3d  %s\n", m[i].name, m[i].image_size, m[i].image_size, m[i].description);
}

/* a table cell: '|' escaped */
static void md_cell(FILE *f, const char *t) {
    for (; *t; t++) {
        if (*t == '|') fputc('\\', f);
        fputc(*t, f);
    }
}

void config_print_markdown(FILE *f) {
    fprintf(f, "| flag | default | |\n| --- | --- | --- |\n");
    for (int i = 0; i < NFLAGS; i++) {
        char left[64];
        flag_spelling(&flags[i], left, sizeof left);
        fprintf(f, "| `%s` | ", left);
        md_cell(f, flag_default(&flags[i]));
        fputs(" | ", f);
        md_cell(f, flags[i].help);
        fputs(" |\n", f);
    }
}

void config_print_args(const Config *cfg, FILE *f) {
    for (int i = 0; i < cfg->nargs; i++) {
        const ConfigArg *a = &cfg->args[i];
        if (a->value)
            fprintf(f, "  --%s=%s\n", flags[a->flag].name, a->value);
        else
            fprintf(f, "  --%s\n", flags[a->flag].name);
    }
}

/* Flags whose values may differ between ranks: a node's own paths and resources, and what only
 * rank 0 acts on. Of the paths (--data_dir, --log_dir, --profile, --export_onnx) only whether
 * they are given counts. */
static const char *const per_rank[] = {"input_threads", "shuffle_buffer", "verbose", "step_timeout", "save_interval", "cudnn_workspace_mb"};

static int flag_per_rank(const Flag *f) {
    for (size_t i = 0; i < sizeof per_rank / sizeof per_rank[0]; i++)
        if (strcmp(f->name, per_rank[i]) == 0) return 1;
    return 0;
}

const char *config_per_rank_flags(void) {
    return "the paths of --data_dir, --log_dir, --profile and --export_onnx, --input_threads, --shuffle_buffer, --verbose, "
           "--step_timeout, --save_interval, --cudnn_workspace_mb";
}

size_t config_rank_text(const Config *cfg, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < NFLAGS; i++) {
        const Flag *f = &flags[i];
        int seen = !f->off || f->parse == parse_help || flag_per_rank(f);
        for (int j = 0; j < i && !seen; j++) seen = flags[j].off == f->off; /* an alias: said under the first name */
        if (seen) continue;
        const char *at = (const char *)cfg + f->off;
        char v[160];
        if (f->parse == parse_str || f->parse == parse_path) {
            const char *t = *(const char *const *)(const void *)at;
            if (f->parse == parse_path)
                snprintf(v, sizeof v, "%s", t ? "(given)" : "(none)");
            else
                snprintf(v, sizeof v, "%s", t ? t : "(none)");
        } else if (f->parse == parse_int && f->size != sizeof(int)) {
            int64_t x;
            memcpy(&x, at, sizeof x);
            snprintf(v, sizeof v, "%lld", (long long)x);
        } else if (f->parse == parse_num) {
            double x;
            memcpy(&x, at, sizeof x);
            snprintf(v, sizeof v, "%.9g", x);
        } else if (f->parse == parse_loss_scale) {
            snprintf(v, sizeof v, "%.9g%s", cfg->loss_scale, cfg->dynamic_loss_scale ? " (dynamic)" : "");
        } else if (f->parse == parse_profile_steps) {
            snprintf(v, sizeof v, "%ld:%d", cfg->profile_first, cfg->profile_count);
        } else { /* int fields: integers, choices, switches */
            int x;
            memcpy(&x, at, sizeof x);
            snprintf(v, sizeof v, "%d", x);
            const char *c = f->parse == parse_choice ? f->choices : NULL; /* a choice by its name */
            for (int k = x - f->choice_base; c && k > 0; k--) c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL;
            if (c && x >= f->choice_base) snprintf(v, sizeof v, "%.*s", (int)strcspn(c, "|"), c);
        }
        /* a flag left out shows as such with its default: whether it was given counts too (a
         * default given and one left out can differ: --loss_scale given keeps fp16's scale static,
         * --display_every given fixes the rows' interval, --num_batches given makes --print_layers
         * train) */
        if (!config_given(cfg, at) && f->parse != parse_path && f->off != offsetof(Config, eval))
            snprintf(v, sizeof v, "(left out: %s)", flag_default(f)[0] ? flag_default(f) : "off");
        const int w = snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "--%s=%s\n", f->name, v);
        if (w > 0) len += (size_t)w;
    }
    /* --noeval sets --eval's field as its default does, and also leaves out the final validation */
    const int w = snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "--noeval %s\n", cfg->noeval ? "given" : "left out");
    if (w > 0) len += (size_t)w;
    return len;
}

int config_given(const Config *cfg, const void *field) {
    for (int i = 0; i < cfg->nargs; i++) {
        const Flag *f = &flags[cfg->args[i].flag];
        if (f->off && (const char *)cfg + f->off == (const char *)field) return 1;
    }
    return 0;
}

/* A flag as given, under its long name: "--name=value", or "--name" for one without a value. */
static const char *arg_text(const ConfigArg *a, char *buf, size_t n) {
    if (a->value)
        snprintf(buf, n, "--%s=%s", flags[a->flag].name, a->value);
    else
        snprintf(buf, n, "--%s", flags[a->flag].name);
    return buf;
}

const char *config_given_as(const Config *cfg, const void *field, char *buf, size_t n) {
    for (int i = cfg->nargs - 1; i >= 0; i--) {
        const Flag *f = &flags[cfg->args[i].flag];
        if (f->off && (const char *)cfg + f->off == (const char *)field) return arg_text(&cfg->args[i], buf, n);
    }
    return NULL;
}

/* ---- parsers ----------------------------------------------------------------------------- */

static void *field_of(Config *cfg, const Flag *f) { return (char *)cfg + f->off; }

static void bad_value(const char *flag, const char *value, const char *why) {
    die_code(EXIT_USAGE, "--%s=%s: %s", flag, value, why);
}

/* strtol and strtod skip leading blanks, and strtod reads hexadecimal: a flag's number is decimal,
 * written without blanks (as the integer flags always were) */
static int plain_number(const char *v) {
    const char *d = v + (*v == '+' || *v == '-');
    return *v && !isspace((unsigned char)*v) && !(d[0] == '0' && (d[1] == 'x' || d[1] == 'X'));
}

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || !plain_number(v)) bad_value(flag, v, "not an integer");
    if (errno == ERANGE || x < lo || x > hi) { /* ERANGE: beyond a long, so beyond any range */
        char why[96];
        if (hi == LONG_MAX && errno != ERANGE)
            snprintf(why, sizeof why, "must be >= %ld", lo);
        else
            snprintf(why, sizeof why, "must be in [%ld, %ld]", lo, hi);
        bad_value(flag, v, why);
    }
    return x;
}

/* A number in [lo, hi], or (lo, hi] with lo_open; `alt` names what else the flag takes ("" none). */
static double parse_double(const char *flag, const char *v, double lo, double hi, int lo_open, const char *alt) {
    char *end, why[128];
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || !plain_number(v) || isnan(x) || (!errno && !isfinite(x))) {
        snprintf(why, sizeof why, "not a number%s", alt);
        bad_value(flag, v, why);
    }
    if (errno == ERANGE && fabs(x) <= DBL_MIN) { /* an underflow */
        snprintf(why, sizeof why, "too close to 0 for a double%s", alt);
        bad_value(flag, v, why);
    }
    if (x < lo || x > hi || (lo_open && x == lo)) {
        snprintf(why, sizeof why, "must be in %c%.15g, %.15g]%s", lo_open ? '(' : '[', lo, hi, alt);
        bad_value(flag, v, why);
    }
    return x;
}

/* The index of v among the '|'-separated names, or exit 2 listing them. */
static int pick(const char *flag, const char *v, const char *names) {
    int i = 0;
    for (const char *p = names;; i++) {
        size_t len = strcspn(p, "|");
        if (strlen(v) == len && strncmp(v, p, len) == 0) return i;
        if (!p[len]) break;
        p += len + 1;
    }
    char why[160];
    snprintf(why, sizeof why, "expected one of: %s", names);
    for (char *q = why; *q; q++)
        if (*q == '|') *q = ' ';
    bad_value(flag, v, why);
    return -1;
}

static void parse_str(Config *cfg, const Flag *f, const char *v) { *(const char **)field_of(cfg, f) = v; }

static void parse_path(Config *cfg, const Flag *f, const char *v) {
    if (!*v) bad_value(f->name, v, "empty path (an unset shell variable?); leave the flag out for none");
    parse_str(cfg, f, v);
}

static void parse_int(Config *cfg, const Flag *f, const char *v) {
    long x = parse_long(f->name, v, f->ilo, f->ihi);
    if (f->size == sizeof(int))
        *(int *)field_of(cfg, f) = (int)x;
    else
        *(int64_t *)field_of(cfg, f) = x; /* long, uint64_t */
}

static void parse_num(Config *cfg, const Flag *f, const char *v) {
    *(double *)field_of(cfg, f) = parse_double(f->name, v, f->dlo, f->dhi, f->lo_open, "");
}

static void parse_choice(Config *cfg, const Flag *f, const char *v) {
    *(int *)field_of(cfg, f) = f->choice_base + pick(f->name, v, f->choices);
}

static void parse_set(Config *cfg, const Flag *f, const char *v) {
    (void)v;
    *(int *)field_of(cfg, f) = f->set;
}

static void parse_loss_scale(Config *cfg, const Flag *f, const char *v) {
    cfg->dynamic_loss_scale = strcmp(v, "dynamic") == 0;
    /* from 1e-30: the gradients are scaled back by 1 / loss_scale in fp32 (below about 3e-39 that
     * is infinite, and every step would be skipped) */
    /* as a float: the GPU backend keeps it in one (and checks that the host's is the same) */
    cfg->loss_scale = cfg->dynamic_loss_scale ? 65536 : (double)(float)parse_double(f->name, v, 1e-30, 1e30, 0, " or dynamic");
}

static int warnings_on = 1; /* config_set_warnings */

static void parse_help(Config *cfg, const Flag *f, const char *v) {
    (void)cfg;
    if (v && strcmp(v, "markdown") != 0) bad_value(f->name, v, "expected --help or --help=markdown");
    if (!warnings_on) exit(0); /* a rank other than 0: rank 0 prints it */
    if (v)
        config_print_markdown(stdout);
    else
        config_print_usage(stdout);
    exit(0);
}

/* N:K, both positive on the command line (the default, parsed before any flag is recorded, is 0:3:
 * N = 0 means after the burn-in, see profile.h) */
static void parse_profile_steps(Config *cfg, const Flag *f, const char *v) {
    char *end, *end2 = NULL;
    errno = 0;
    const long n = strtol(v, &end, 10), k = *end == ':' ? strtol(end + 1, &end2, 10) : 0;
    if (errno || !isdigit((unsigned char)v[0]) || *end != ':' || !isdigit((unsigned char)end[1]) || *end2)
        bad_value(f->name, v, "expected N:K (K steps from step N, counted from 1)");
    if (n < (cfg->nargs > 0 ? 1 : 0) || k < 1)
        bad_value(f->name, v, "N and K must be >= 1 (K steps from step N, counted from 1)");
    if (k > (1 << 20)) bad_value(f->name, v, "K must be <= 1048576 (the steps profiled are kept in memory)");
    if (n - 1 > LONG_MAX - k) bad_value(f->name, v, "N + K - 1 is past the last step a run can have");
    cfg->profile_first = n;
    cfg->profile_count = (int)k;
}

/* ---- the command line -------------------------------------------------------------------- */

/* The row of the long flag named by the first len characters of name, exactly or by an unambiguous
 * prefix as getopt_long takes it; -1: none or ambiguous. */
static int long_row(const char *name, size_t len) {
    int row = -1, prefixes = 0;
    for (int i = 0; i < NFLAGS; i++) {
        if (strncmp(flags[i].name, name, len) != 0) continue;
        if (strlen(flags[i].name) == len) return i;
        row = i;
        prefixes++;
    }
    return prefixes == 1 ? row : -1;
}

/* -g N / --num_gpus=N with N > 1: nvcnn.py drives N GPUs from one process; here each GPU has its
 * own process. One line with the equivalent command: the same flags under mpirun -np N. */
static int world_ranks = 1; /* config_set_ranks() */

void config_set_ranks(int n) { world_ranks = n > 0 ? n : 1; }

/* -g N / --num_gpus=N with N > 1: nvcnn.py drives N GPUs from one process; here each GPU has its
 * own process. One line with the equivalent command: the same flags, on the GPU backend (which
 * nvcnn.py's user meant; --device as given where it is), under mpirun -np N (N times the ranks
 * where the command ran under mpirun already). */
/* " word" onto cmd, single-quoted for a shell where it holds more than [A-Za-z0-9_./=:,+@%-]. */
static int append_word(char *cmd, size_t size, int len, const char *w) {
    if (len >= (int)size) return len;
    if (w[0] && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+@%-") == strlen(w))
        return len + snprintf(cmd + len, size - (size_t)len, " %s", w);
    len += snprintf(cmd + len, size - (size_t)len, " '");
    for (const char *c = w; *c && len < (int)size; c++)
        len += *c == '\'' ? snprintf(cmd + len, size - (size_t)len, "'\\''") : snprintf(cmd + len, size - (size_t)len, "%c", *c);
    if (len < (int)size) len += snprintf(cmd + len, size - (size_t)len, "'");
    return len;
}

static void refuse_num_gpus(int n, int argc, char **argv) {
    char cmd[4096];
    const long np = (long)n * world_ranks;
    int len = snprintf(cmd, sizeof cmd, "mpirun -np %ld", np), device = 0;
    len = append_word(cmd, sizeof cmd, len, argv[0] && argv[0][0] ? argv[0] : "./nvcnn"); /* as it was started */
    for (int i = 1; i < argc && len < (int)sizeof cmd; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-g") == 0) {
            i++; /* and its value */
            continue;
        }
        if (a[0] == '-' && a[1] == 'g' && a[2]) continue;
        if (a[0] == '-' && a[1] == '-' && a[2]) { /* a long flag as getopt_long took it: whole or an unambiguous prefix */
            const size_t n = strcspn(a + 2, "=");
            const int row = long_row(a + 2, n);
            const int separate = row >= 0 && flags[row].has_arg == 1 && !a[2 + n] && i + 1 < argc; /* its value: the next word */
            if (row >= 0 && strcmp(flags[row].name, "num_gpus") == 0) {
                i += separate;
                continue;
            }
            if (row >= 0 && strcmp(flags[row].name, "device") == 0) device = 1;
            len = append_word(cmd, sizeof cmd, len, a);
            if (separate) len = append_word(cmd, sizeof cmd, len, argv[++i]);
            continue;
        }
        len = append_word(cmd, sizeof cmd, len, a);
    }
    if (!device && len < (int)sizeof cmd) snprintf(cmd + len, sizeof cmd - (size_t)len, " --device=gpu");
    if (world_ranks > 1)
        die_code(EXIT_USAGE, "--num_gpus=%d: nvcnn runs one process per GPU; for %d ranks x %d GPUs run: %s", n, world_ranks, n, cmd);
    die_code(EXIT_USAGE, "--num_gpus=%d: nvcnn runs one process per GPU; run: %s", n, cmd);
}

/* Before getopt_long, which would read -batch_size=4 as -b with the value "atch_size=4" and -b=4
 * as -b with "=4": a long flag with one dash, or a one-letter flag with '=', is exit 2 with the
 * spelling to use. Values given as separate words are skipped. */
static void check_dashes(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return;
        if (a[0] != '-' || !a[1]) continue;
        if (a[1] == '-') {
            const int row = long_row(a + 2, strcspn(a + 2, "="));
            if (row >= 0 && flags[row].has_arg == 1 && !strchr(a, '=')) i++; /* its value */
            continue;
        }
        const size_t len = strcspn(a + 1, "=");
        const int row = len > 1 ? long_row(a + 1, len) : -1;
        if (row >= 0)
            die_code(EXIT_USAGE, "%s: unknown flag (long flags take two dashes: --%s%s)", a, flags[row].name, a + 1 + len);
        const Flag *f = NULL;
        for (int k = 0; k < NFLAGS && !f; k++)
            if (flags[k].short_name && flags[k].short_name == a[1]) f = &flags[k];
        if (!f) continue;
        if (a[2] == '=' && f->has_arg == 1)
            die_code(EXIT_USAGE, "%s: a one-letter flag takes no '=': -%c %s, -%c%s or --%s=%s", a, a[1], a + 3, a[1], a + 3,
                     f->name, a + 3);
        if (a[2] == '=')
            die_code(EXIT_USAGE, "%s: -%c takes no value (--%s%s)", a, a[1], f->name, f->has_arg == 2 ? a + 2 : "");
        if (f->has_arg == 1 && !a[2]) i++; /* its value */
    }
}

/* The edit distance of a and b (each at most 63 characters: more count as far), after taking '-'
 * for '_' and upper case for lower. */
static int flag_distance(const char *a, size_t la, const char *b) {
    const size_t lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            const char x = a[i - 1] == '-' ? '_' : (char)tolower((unsigned char)a[i - 1]);
            int v = d[i - 1][j - 1] + (x != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* ": did you mean --NAME?" for the flag nearest to the len characters of name (dashes for
 * underscores, another case, or up to two characters off, a third of the name at most), or "". */
static void flag_suggestion(const char *name, size_t len, char *buf, size_t n) {
    /* --noX (nvcnn.py's --noeval, --nofp16, --nonesterov) for a switch X that has no such alias */
    for (int i = 0; len > 2 && strncmp(name, "no", 2) == 0 && i < NFLAGS; i++) {
        if (flag_distance(name + 2, len - 2, flags[i].name) != 0) continue;
        if (flags[i].parse == parse_set && flags[i].set == 1) {
            snprintf(buf, n, ": --%s is off unless given (leave it out)", flags[i].name);
            return;
        }
        if (flags[i].choices && strcmp(flags[i].choices, "off|on") == 0) {
            snprintf(buf, n, ": did you mean --%s=off?", flags[i].name);
            return;
        }
    }
    int best = -1, bd = 99;
    for (int i = 0; i < NFLAGS; i++) {
        const int d = flag_distance(name, len, flags[i].name);
        if (d < bd) bd = d, best = i;
    }
    buf[0] = 0;
    if (best >= 0 && (bd == 0 || (bd <= 2 && (size_t)bd * 3 <= len)))
        snprintf(buf, n, ": did you mean --%s?", flags[best].name);
}

/* getopt_long's view of a flag it refused: exit 2 with one line. */
static void refuse_flag(int c, char **argv) {
    if (c == ':') die_code(EXIT_USAGE, "flag %s needs a value (--flag=value or --flag value)", argv[optind - 1]);
    /* a one-letter flag (optopt: its letter; getopt_long leaves argv[optind - 1] at the word before
     * when the letter is not the last of its word) */
    if (optopt && optopt < 256) die_code(EXIT_USAGE, "unknown flag -%c (see --help)", optopt);
    const char *bad = argv[optind - 1];
    if (!bad) die_code(EXIT_USAGE, "unknown flag (see --help)");
    const char *eq = strchr(bad, '=');
    size_t len = eq ? (size_t)(eq - bad) : strlen(bad);
    /* a known flag given a value it does not take, e.g. --eval=1 */
    for (int i = 0; i < NFLAGS && eq && bad[0] == '-' && bad[1] == '-'; i++)
        if (!flags[i].has_arg && strlen(flags[i].name) == len - 2 && strncmp(flags[i].name, bad + 2, len - 2) == 0)
            die_code(EXIT_USAGE, "flag --%s takes no value (see --help)", flags[i].name);
    /* an abbreviation of several flags (getopt_long takes one that begins only one) */
    char which[1024] = "";
    size_t w = 0;
    int n = 0;
    for (int i = 0; i < NFLAGS && bad[0] == '-' && bad[1] == '-' && len > 2; i++)
        if (strncmp(flags[i].name, bad + 2, len - 2) == 0 && w < sizeof which) {
            w += (size_t)snprintf(which + w, sizeof which - w, "%s--%s", n ? ", " : "", flags[i].name);
            n++;
        }
    if (n > 1) die_code(EXIT_USAGE, "%.*s is ambiguous: it begins %s (see --help)", (int)len, bad, which);
    if ((len == 17 && strncmp(bad, "--use_placeholder", len) == 0) || (len == 19 && strncmp(bad, "--nouse_placeholder", len) == 0))
        die_code(EXIT_USAGE, "unknown flag %.*s: nvcnn.py's placeholder input is not provided here (synthetic data is made once, as "
                             "nvcnn.py does without it; see the README)", (int)len, bad);
    char mean[96] = "";
    if (bad[0] == '-' && bad[1] == '-' && len > 2) flag_suggestion(bad + 2, len - 2, mean, sizeof mean);
    die_code(EXIT_USAGE, "unknown flag %.*s%s (see --help)", (int)len, bad, mean);
}

/* The last flag given, which sets a field that a flag before it set too (the same flag or an
 * alias): the last one wins, as in nvcnn.py, with a warning when it changes what the earlier one
 * set (`before`: the settings before it). */

static void warn_twice(const Config *cfg, const Config *before) {
    const ConfigArg *now = &cfg->args[cfg->nargs - 1];
    if (now->value && !now->value[0]) return; /* an empty value: refused, or said of itself (--model=) */
    const size_t off = flags[now->flag].off, settings = offsetof(Config, model);
    const ConfigArg *was = NULL;
    for (int i = cfg->nargs - 2; i >= 0 && off && !was; i--)
        if (flags[cfg->args[i].flag].off == off) was = &cfg->args[i];
    if (!was) return;
    const Flag *first = &flags[now->flag];
    const int text = first->parse == parse_str || first->parse == parse_path; /* a string: compared by its characters */
    if (text ? strcmp(*(const char *const *)((const char *)before + off), *(const char *const *)((const char *)cfg + off)) == 0
             : memcmp((const char *)before + settings, (const char *)cfg + settings, sizeof *cfg - settings) == 0)
        return;
    for (int i = 0; i < NFLAGS; i++) /* the field's own flag, where an alias set it */
        if (flags[i].off == off) {
            first = &flags[i];
            break;
        }
    if (!warnings_on) return;
    if (was->flag == now->flag && was->value && now->value) {
        warn("--%s given twice (%s, then %s): using %s", first->name, was->value, now->value, now->value);
        return;
    }
    char a[256], b[256];
    arg_text(was, a, sizeof a);
    arg_text(now, b, sizeof b);
    warn("--%s given twice (%s, then %s): using %s", first->name, a, b, now->value ? now->value : b);
}

/* The checks between flags, once all are read. */
static void check_config(const Config *cfg) {
    char as[256];
    if (!cfg->model) die_code(EXIT_USAGE, "--model is required; one of: %s", model_names());
    if (!model_find(cfg->model))
        die_code(EXIT_USAGE, "--model=%s: unknown model; valid models: %s", cfg->model, model_names());
    if (cfg->num_epochs > 0 && !cfg->data_dir && !cfg->eval)
        die_code(EXIT_USAGE, "--num_epochs=%g needs --data_dir (synthetic data has no epochs; use --num_batches)",
                 cfg->num_epochs);
    char as2[256];
    if (cfg->num_epochs > 0 && warnings_on && config_given_as(cfg, &cfg->num_batches, as, sizeof as) &&
        config_given_as(cfg, &cfg->num_epochs, as2, sizeof as2) && !cfg->eval)
        warn("%s is left unused: %s sets the run's length (it overrides --num_batches, as in nvcnn.py)", as, as2);
    if (cfg->num_classes == 1 && warnings_on && !cfg->forward_only && !cfg->eval && !cfg->layers_only &&
        !(cfg->export_onnx && !config_given(cfg, &cfg->num_batches) && !config_given(cfg, &cfg->num_epochs)))
        warn("--num_classes=1: the softmax of one class is 1 whatever the logits, so the loss is 0 and nothing trains (weight decay aside)");
    if (cfg->eval && !cfg->data_dir) die_code(EXIT_USAGE, "--eval needs --data_dir with validation-* shards");
    if (cfg->eval && !cfg->log_dir) die_code(EXIT_USAGE, "--eval needs --log_dir holding a checkpoint");
    /* the run's length and the evaluations while training: nothing to do with --eval, nor (the
     * evaluations) with --forward_only */
    const void *not_with_eval[] = {&cfg->num_batches, &cfg->num_epochs, &cfg->eval_every_epochs, &cfg->target_top1, &cfg->forward_only};
    const void *not_with_forward_only[] = {&cfg->eval_every_epochs, &cfg->target_top1};
    for (size_t i = 0; i < sizeof not_with_eval / sizeof *not_with_eval && cfg->eval; i++)
        if (config_given_as(cfg, not_with_eval[i], as, sizeof as))
            die_code(EXIT_USAGE, "%s with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing", as);
    for (size_t i = 0; i < sizeof not_with_forward_only / sizeof *not_with_forward_only && cfg->forward_only; i++)
        if (config_given_as(cfg, not_with_forward_only[i], as, sizeof as))
            die_code(EXIT_USAGE, "%s with --forward_only: an inference benchmark trains nothing to evaluate", as);
    if ((cfg->eval_every_epochs > 0 || cfg->target_top1 > 0) && !cfg->data_dir) {
        const void *by = config_given(cfg, &cfg->eval_every_epochs) ? (const void *)&cfg->eval_every_epochs : &cfg->target_top1;
        die_code(EXIT_USAGE, "%s needs --data_dir with validation-* shards", config_given_as(cfg, by, as, sizeof as));
    }
    if (cfg->noeval && (cfg->eval_every_epochs > 0 || cfg->target_top1 > 0)) {
        const void *by = config_given(cfg, &cfg->target_top1) ? (const void *)&cfg->target_top1 : &cfg->eval_every_epochs;
        die_code(EXIT_USAGE, "%s with --noeval: it evaluates while training, --noeval evaluates nothing", config_given_as(cfg, by, as, sizeof as));
    }
    if (cfg->layers_only && cfg->profile)
        die_code(EXIT_USAGE, "--profile with --print_layers alone, which trains nothing: give --num_batches or --num_epochs to train");
    if (cfg->export_onnx && (cfg->eval || cfg->forward_only))
        die_code(EXIT_USAGE, "--export_onnx with --%s: it exports a trained model (alone with --log_dir: its newest checkpoint)",
                 cfg->eval ? "eval" : "forward_only");
    if (cfg->given_larc_mode && cfg->larc_eta <= 0)
        die_code(EXIT_USAGE, "%s needs --larc_eta (LARC is off without it)", config_given_as(cfg, &cfg->larc_mode, as, sizeof as));
    /* the learning-rate policy's own settings: poly's power, step's interval and factor */
    if (cfg->lr_decay_policy == LR_STEP) {
        if (config_given_as(cfg, &cfg->lr_poly_power, as, sizeof as))
            die_code(EXIT_USAGE, "%s is a setting of --lr_decay_policy=poly: the step policy does not use it", as);
    } else if (config_given_as(cfg, &cfg->lr_decay_epochs, as, sizeof as) || config_given_as(cfg, &cfg->lr_decay_rate, as, sizeof as)) {
        die_code(EXIT_USAGE, "%s is a setting of --lr_decay_policy=step: the poly policy does not use it", as);
    }
    /* synthetic data: "one epoch" would be the whole run */
    const void *in_epochs[] = {&cfg->warmup_epochs, &cfg->lr_decay_epochs};
    for (size_t i = 0; i < sizeof in_epochs / sizeof *in_epochs && !cfg->data_dir; i++)
        if (config_given_as(cfg, in_epochs[i], as, sizeof as))
            die_code(EXIT_USAGE, "%s needs --data_dir (synthetic data has no epochs)", as);
    if (cfg->lr_decay_policy == LR_STEP && !cfg->data_dir)
        die_code(EXIT_USAGE, "--lr_decay_policy=step needs --data_dir (synthetic data has no epochs to decay at)");
    /* what only --log_dir holds: checkpoints, TensorBoard's summaries */
    const void *in_log_dir[] = {&cfg->save_interval, &cfg->summary_interval};
    const char *what[] = {"checkpoints", "TensorBoard summaries"};
    for (size_t i = 0; i < sizeof in_log_dir / sizeof *in_log_dir && !cfg->log_dir; i++)
        if (config_given_as(cfg, in_log_dir[i], as, sizeof as))
            die_code(EXIT_USAGE, "%s needs --log_dir: without it no %s are written", as, what[i]);
    if (config_given(cfg, &cfg->profile_first) && !cfg->profile)
        die_code(EXIT_USAGE, "--profile_steps needs --profile=FILE");
    if (cfg->profile && cfg->eval) die_code(EXIT_USAGE, "--profile profiles training steps: not with --eval");
    const ModelInfo *m = model_find(cfg->model);
    if (cfg->image_size && cfg->image_size != m->image_size) {
        if (!model_fully_convolutional(m))
            die_code(EXIT_USAGE, "--image_size=%d: %s's fully connected layers are sized for its %dx%d input; the fully "
                                 "convolutional models (resnet*, resnext*, googlenet, inception*) take other sizes",
                     cfg->image_size, m->name, m->image_size, m->image_size);
        const int lo = model_min_image_size(m);
        if (cfg->image_size < lo)
            die_code(EXIT_USAGE, "--image_size=%d: %s's smallest input is %dx%d", cfg->image_size, m->name, lo, lo);
    }
}

void config_set_warnings(int on) { warnings_on = on; }

void config_parse(Config *cfg, int argc, char **argv) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < NFLAGS; i++)
        if (flags[i].init) flags[i].parse(cfg, &flags[i], flags[i].init);
    /* getopt_long permutes argv: keep the order as given for -g's message */
    char **argv_given = xmalloc((size_t)(argc + 1) * sizeof *argv_given);
    memcpy(argv_given, argv, (size_t)(argc + 1) * sizeof *argv_given);
    cfg->args = xcalloc((size_t)argc + 1, sizeof *cfg->args);

    struct option longopts[NFLAGS + 1];
    char shorts[2 * NFLAGS + 2] = ":";
    for (int i = 0; i < NFLAGS; i++) {
        const Flag *f = &flags[i];
        longopts[i] = (struct option){f->name, f->has_arg == 2 ? optional_argument : f->has_arg ? required_argument : no_argument,
                                      NULL, 256 + i};
        if (f->short_name) {
            size_t k = strlen(shorts);
            shorts[k] = f->short_name;
            shorts[k + 1] = f->has_arg == 1 ? ':' : '\0';
            shorts[k + 2] = '\0';
        }
    }
    memset(&longopts[NFLAGS], 0, sizeof longopts[NFLAGS]);

    check_dashes(argc, argv);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        int row = c >= 256 && c < 256 + NFLAGS ? c - 256 : -1;
        for (int i = 0; i < NFLAGS && row < 0; i++) /* a one-letter flag */
            if (c == flags[i].short_name) row = i;
        if (row < 0) refuse_flag(c, argv);
        /* "--log_dir --num_batches=2": the value was left out and the next flag taken for it */
        if (optarg && optarg == argv[optind - 1] && optarg[0] == '-' && optarg[1] == '-' && optarg[2])
            die_code(EXIT_USAGE, "flag %s needs a value (--flag=value or --flag value); it was followed by %s", argv[optind - 2], optarg);
        /* "--profile -b8", "--export_onnx -", "--log_dir --": a path taken from a word that is
         * a flag, or standard input/output, which nvcnn never reads or writes */
        if (optarg && optarg == argv[optind - 1] && optarg[0] == '-' && flags[row].parse == parse_path)
            die_code(EXIT_USAGE, "flag %s needs a value (--flag=value or --flag value); it was followed by %s (a path of that name: %s=./%s)",
                     argv[optind - 2], optarg, argv[optind - 2], optarg);
        if (optarg && !optarg[0] && flags[row].parse != parse_path && flags[row].parse != parse_str)
            die_code(EXIT_USAGE, "--%s=: an empty value (--help says what it takes)", flags[row].name);
        Config before;
        memcpy(&before, cfg, sizeof before);
        cfg->args[cfg->nargs++] = (ConfigArg){row, optarg};
        flags[row].parse(cfg, &flags[row], optarg);
        warn_twice(cfg, &before);
    }
    if (optind < argc) die_code(EXIT_USAGE, "unexpected argument '%s' (flags are --flag=value; see --help)", argv[optind]);
    cfg->given_learning_rate = config_given(cfg, &cfg->learning_rate);
    if (cfg->target_top1 > 0 && cfg->eval_every_epochs <= 0) cfg->eval_every_epochs = 1;
    cfg->given_loss_scale = config_given(cfg, &cfg->loss_scale);
    cfg->given_larc_mode = config_given(cfg, &cfg->larc_mode);
    cfg->given_display_every = config_given(cfg, &cfg->display_every);
    char as[64];
    cfg->noeval = !cfg->eval && config_given_as(cfg, &cfg->eval, as, sizeof as) != NULL;
    cfg->layers_only = cfg->print_layers && !cfg->eval && !cfg->export_onnx && !config_given(cfg, &cfg->num_batches) &&
                       !config_given(cfg, &cfg->num_epochs);
    if (cfg->num_gpus > 1) refuse_num_gpus(cfg->num_gpus, argc, argv_given);
    free(argv_given);
    check_config(cfg);
}
