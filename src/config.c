/* config.c: flags (getopt_long: --flag=value and --flag value), defaults, validation. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"
#include "util.h"

enum {
    OPT_MODEL = 256, OPT_DATA_DIR, OPT_BATCH_SIZE, OPT_NUM_BATCHES, OPT_NUM_EPOCHS, OPT_DISPLAY_EVERY,
    OPT_PRECISION, OPT_FP16, OPT_NO_FP16, OPT_DEVICE, OPT_NUM_GPUS, OPT_DATA_FORMAT, OPT_LOG_DIR, OPT_LEARNING_RATE,
    OPT_MOMENTUM, OPT_NESTEROV, OPT_NO_NESTEROV, OPT_WEIGHT_DECAY, OPT_LR_DECAY_POLICY, OPT_LR_POLY_POWER,
    OPT_LR_DECAY_EPOCHS, OPT_LR_DECAY_RATE, OPT_WARMUP_EPOCHS, OPT_LOSS_SCALE, OPT_LARC_ETA, OPT_LARC_MODE, OPT_EVAL,
    OPT_NO_EVAL, OPT_FORWARD_ONLY, OPT_DISTORT_COLOR, OPT_INPUT_THREADS, OPT_SHUFFLE_BUFFER, OPT_SKIP_CORRUPT,
    OPT_NUM_CLASSES, OPT_SEED, OPT_BURNIN, OPT_CROP_AREA_MIN, OPT_ALLREDUCE, OPT_BUCKET_MB, OPT_SAVE_INTERVAL,
    OPT_SUMMARY_INTERVAL, OPT_VERBOSE, OPT_PRINT_LAYERS, OPT_CPU_IMPL, OPT_HELP
};

/* One flag: its long name, its one-letter name (nvcnn.py's -m, -b, -g) or 0, whether it takes a
 * value, the default and the help text. --help and the README's flag table (--help=markdown)
 * are both printed from this list. */
typedef struct FlagDoc {
    int id;
    const char *name;
    char short_name;
    int has_arg;
    const char *def;
    const char *help;
} FlagDoc;

static const FlagDoc flags[] = {
    {OPT_MODEL, "model", 'm', 1, "(required)", "model to train (see the list below)"},
    {OPT_DATA_DIR, "data_dir", 0, 1, "(none: synthetic data)", "TFRecord shards train-* and validation-*"},
    {OPT_BATCH_SIZE, "batch_size", 'b', 1, "64", "images per device per step"},
    {OPT_NUM_BATCHES, "num_batches", 0, 1, "50", "steps to run"},
    {OPT_NUM_BATCHES, "num_iter", 0, 1, "", "alias of --num_batches"},
    {OPT_NUM_EPOCHS, "num_epochs", 0, 1, "(none)", "epochs to run (needs --data_dir; overrides --num_batches, as nvcnn.py)"},
    {OPT_DISPLAY_EVERY, "display_every", 0, 1, "10", "print a row every N steps (and at the first and last step)"},
    {OPT_PRECISION, "precision", 0, 1, "fp32", "fp32 | tf32 | fp16 | bf16 (the CPU backend: fp32 only)"},
    {OPT_FP16, "fp16", 0, 0, "", "alias of --precision=fp16"},
    {OPT_NO_FP16, "nofp16", 0, 0, "", "alias of --precision=fp32"},
    {OPT_DEVICE, "device", 0, 1, "cpu (gpu: opt-in, see README)", "gpu | cpu"},
    {OPT_NUM_GPUS, "num_gpus", 'g', 1, "1", "GPUs per process: 1 (run one process per GPU under mpirun or srun)"},
    {OPT_DATA_FORMAT, "data_format", 0, 1, "NCHW", "layout of the activations: NCHW"},
    {OPT_LOG_DIR, "log_dir", 0, 1, "(none)", "checkpoints, TensorBoard events and metrics.csv"},
    {OPT_LEARNING_RATE, "learning_rate", 0, 1, "model default",
     "alexnet 0.03, googlenet 0.04, vgg 0.02, inception3 0.2, inception4 and inception-resnet2 0.045, resnext 0.1, "
     "resnet 1.0 x total batch / 1024, others 0.001"},
    {OPT_MOMENTUM, "momentum", 0, 1, "0.9", "momentum of SGD"},
    {OPT_NESTEROV, "nesterov", 0, 0, "on", "Nesterov momentum, as nvcnn.py"},
    {OPT_NO_NESTEROV, "nonesterov", 0, 0, "", "plain (heavy-ball) momentum"},
    {OPT_WEIGHT_DECAY, "weight_decay", 0, 1, "1e-4", "L2 weight decay added to the loss"},
    {OPT_LR_DECAY_POLICY, "lr_decay_policy", 0, 1, "poly", "poly (to 0 at the end of the run) | step"},
    {OPT_LR_POLY_POWER, "lr_poly_power", 0, 1, "2", "power of the polynomial decay"},
    {OPT_LR_DECAY_EPOCHS, "lr_decay_epochs", 0, 1, "30", "step policy: epochs between decays"},
    {OPT_LR_DECAY_RATE, "lr_decay_rate", 0, 1, "0.1", "step policy: factor per decay"},
    {OPT_WARMUP_EPOCHS, "warmup_epochs", 0, 1, "0", "linear learning-rate warmup"},
    {OPT_LOSS_SCALE, "loss_scale", 0, 1, "1; dynamic for fp16",
     "N (static) or dynamic (from 65536: halved on overflow, doubled after 2000 good steps)"},
    {OPT_LARC_ETA, "larc_eta", 0, 1, "(off)", "LARC trust coefficient"},
    {OPT_LARC_MODE, "larc_mode", 0, 1, "clip", "clip | scale"},
    {OPT_EVAL, "eval", 0, 0, "off", "evaluate the newest checkpoint of --log_dir on validation-*"},
    {OPT_NO_EVAL, "noeval", 0, 0, "", "train (the opposite of --eval)"},
    {OPT_FORWARD_ONLY, "forward_only", 0, 0, "off",
     "inference benchmark: forward passes with batch norm in inference mode, no backward, no update"},
    {OPT_DISTORT_COLOR, "distort_color", 0, 0, "off", "random brightness/saturation/hue/contrast"},
    {OPT_CROP_AREA_MIN, "crop_area_min", 0, 1, "0.1", "smallest training crop, as a fraction of the image area (1: no crop)"},
    {OPT_INPUT_THREADS, "input_threads", 0, 1, "cores / ranks per node", "decode workers"},
    {OPT_SHUFFLE_BUFFER, "shuffle_buffer", 0, 1, "10000", "records in the shuffle buffer"},
    {OPT_SKIP_CORRUPT, "skip_corrupt", 0, 0, "off", "skip and count corrupt records instead of exiting 4"},
    {OPT_NUM_CLASSES, "num_classes", 0, 1, "1000", "classes of the final layer"},
    {OPT_SEED, "seed", 0, 1, "1234", "seed of initialisation, data order and augmentation"},
    {OPT_BURNIN, "nstep_burnin", 0, 1, "20", "steps left out of Images/sec"},
    {OPT_BURNIN, "num_warmup_batches", 0, 1, "", "alias of --nstep_burnin"},
    {OPT_ALLREDUCE, "allreduce", 0, 1, "nccl on GPU, mpi on CPU", "nccl (GPU backend, one GPU per rank) | mpi (also lets ranks share a GPU) | none (measurement only: replicas drift)"},
    {OPT_BUCKET_MB, "bucket_mb", 0, 1, "25", "gradient allreduce bucket size in MiB"},
    {OPT_SAVE_INTERVAL, "save_interval", 0, 1, "43200", "seconds between checkpoints"},
    {OPT_SUMMARY_INTERVAL, "summary_interval", 0, 1, "3600",
     "seconds between TensorBoard summaries (also written at the first and last step)"},
    {OPT_VERBOSE, "verbose", 0, 0, "off", "every rank prints"},
    {OPT_CPU_IMPL, "cpu_impl", 0, 1, "onednn where built, else reference",
     "onednn | reference: the CPU backend's layers (oneDNN, or the hand-written reference)"},
    {OPT_PRINT_LAYERS, "print_layers", 0, 0, "off", "print the layers: settings, shape, parameters, GFLOPs, inputs where it branches; modules as headings"},
    {OPT_HELP, "help", 0, 0, "", "this help (--help=markdown: the flag table of the README)"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

const char *precision_name(Precision p) {
    switch (p) {
    case PREC_TF32: return "tf32";
    case PREC_FP16: return "fp16";
    case PREC_BF16: return "bf16";
    default: return "fp32";
    }
}

static void flag_spelling(const FlagDoc *d, char *out, size_t len) {
    if (d->short_name)
        snprintf(out, len, "-%c, --%s%s", d->short_name, d->name, d->has_arg ? "=V" : "");
    else
        snprintf(out, len, "--%s%s", d->name, d->has_arg ? "=V" : "");
}

void config_print_usage(FILE *f) {
    fprintf(f, "Usage: nvcnn --model=NAME [flags]   (flags as --flag=value or --flag value)\n\nFlags:\n");
    for (int i = 0; i < NFLAGS; i++) {
        char left[64];
        flag_spelling(&flags[i], left, sizeof left);
        fprintf(f, "  %-26s %s", left, flags[i].help);
        if (flags[i].def[0]) fprintf(f, " [default: %s]", flags[i].def);
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
        md_cell(f, flags[i].def);
        fputs(" | ", f);
        md_cell(f, flags[i].help);
        fputs(" |\n", f);
    }
}

static void bad_value(const char *flag, const char *value, const char *why) {
    die_code(EXIT_USAGE, "--%s=%s: %s", flag, value, why);
}

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || !*v) bad_value(flag, v, "not an integer");
    if (x < lo || x > hi) {
        char why[96];
        if (hi == __LONG_MAX__)
            snprintf(why, sizeof why, "must be >= %ld", lo);
        else
            snprintf(why, sizeof why, "must be in [%ld, %ld]", lo, hi);
        bad_value(flag, v, why);
    }
    return x;
}

static double parse_double(const char *flag, const char *v, double lo, double hi, int lo_open) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !*v || !isfinite(x)) bad_value(flag, v, "not a number");
    if (x < lo || x > hi || (lo_open && x == lo)) {
        char why[96];
        snprintf(why, sizeof why, "must be %s %g%s", lo_open ? ">" : ">=", lo, hi < 1e300 ? " and in range" : "");
        bad_value(flag, v, why);
    }
    return x;
}

static int pick(const char *flag, const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) return i;
    char why[160] = "expected one of:";
    for (int i = 0; i < n; i++) {
        strncat(why, " ", sizeof why - strlen(why) - 1);
        strncat(why, names[i], sizeof why - strlen(why) - 1);
    }
    bad_value(flag, v, why);
    return -1;
}

/* -g N / --num_gpus=N with N > 1: nvcnn.py drives N GPUs from one process; here each GPU has its
 * own process. One line with the equivalent command: the same flags under mpirun -np N. */
static void refuse_num_gpus(int n, int argc, char **argv) {
    char cmd[2048];
    int len = snprintf(cmd, sizeof cmd, "mpirun -np %d ./nvcnn", n);
    for (int i = 1; i < argc && len < (int)sizeof cmd; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-g") == 0 || strcmp(a, "--num_gpus") == 0) {
            i++; /* and its value */
            continue;
        }
        if (strncmp(a, "--num_gpus=", 11) == 0 || (a[0] == '-' && a[1] == 'g' && a[2])) continue;
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", a);
    }
    die_code(EXIT_USAGE, "--num_gpus=%d: nvcnn runs one process per GPU; run: %s", n, cmd);
}

void config_parse(Config *cfg, int argc, char **argv) {
    memset(cfg, 0, sizeof *cfg);
    /* getopt_long permutes argv: keep the order as given for the header and -g's message */
    char **argv_given = xmalloc((size_t)(argc + 1) * sizeof *argv_given);
    memcpy(argv_given, argv, (size_t)(argc + 1) * sizeof *argv_given);
    cfg->batch_size = 64;
    cfg->display_every = 10;
    cfg->learning_rate = -1;
    cfg->momentum = 0.9;
    cfg->nesterov = 1;
    cfg->weight_decay = 1e-4;
    cfg->lr_poly_power = 2;
    cfg->lr_decay_epochs = 30;
    cfg->lr_decay_rate = 0.1;
    cfg->loss_scale = 1;
    cfg->shuffle_buffer = 10000;
    cfg->crop_area_min = 0.1;
    cfg->summary_interval = 3600;
    cfg->num_gpus = 1;
    cfg->num_classes = 1000;
    cfg->seed = 1234;
    cfg->nstep_burnin = 20;
    cfg->bucket_mb = 25;
    cfg->save_interval = 43200;
    cfg->argc = argc;
    cfg->argv = argv_given;

    struct option longopts[NFLAGS + 1];
    char shorts[2 * NFLAGS + 2] = ":";
    for (int i = 0; i < NFLAGS; i++) {
        longopts[i].name = flags[i].name;
        longopts[i].has_arg = flags[i].has_arg ? required_argument : no_argument;
        if (flags[i].id == OPT_HELP) longopts[i].has_arg = optional_argument;
        longopts[i].flag = NULL;
        longopts[i].val = flags[i].id;
        if (flags[i].short_name) {
            size_t k = strlen(shorts);
            shorts[k] = flags[i].short_name;
            shorts[k + 1] = flags[i].has_arg ? ':' : '\0';
            shorts[k + 2] = '\0';
        }
    }
    memset(&longopts[NFLAGS], 0, sizeof longopts[NFLAGS]);

    opterr = 0;
    optind = 1;
    int c, idx;
    while ((idx = -1, c = getopt_long(argc, argv, shorts, longopts, &idx)) != -1) {
        const char *v = optarg;
        const char *name = "";
        for (int i = 0; i < NFLAGS; i++) /* a one-letter flag: its long name, for messages */
            if (c < 256 && c == flags[i].short_name) {
                c = flags[i].id;
                name = flags[i].name;
            }
        if (idx >= 0 && idx < NFLAGS) name = flags[idx].name;
        switch (c) {
        case OPT_MODEL: cfg->model = v; break;
        case OPT_DATA_DIR:
            if (!*v) bad_value(name, v, "empty path");
            cfg->data_dir = v;
            break;
        case OPT_BATCH_SIZE: cfg->batch_size = (int)parse_long(name, v, 1, 1 << 20); break;
        case OPT_NUM_BATCHES: cfg->num_batches = parse_long(name, v, 1, __LONG_MAX__); break;
        case OPT_NUM_EPOCHS: cfg->num_epochs = parse_double(name, v, 0, 1e9, 1); break;
        case OPT_DISPLAY_EVERY: cfg->display_every = (int)parse_long(name, v, 1, 1 << 30); break;
        case OPT_PRECISION: {
            static const char *const p[] = {"fp32", "tf32", "fp16", "bf16"};
            cfg->precision = (Precision)pick(name, v, p, 4);
            break;
        }
        case OPT_FP16: cfg->precision = PREC_FP16; break;
        case OPT_NO_FP16: cfg->precision = PREC_FP32; break;
        case OPT_NUM_GPUS: cfg->num_gpus = (int)parse_long(name, v, 1, 4096); break;
        case OPT_DATA_FORMAT: {
            static const char *const f[] = {"NCHW", "NHWC"};
            if (pick(name, v, f, 2) == 1)
                bad_value(name, v, "this version computes in NCHW only (NHWC is planned for the GPU backend's 16-bit path)");
            break;
        }
        case OPT_DEVICE: {
            static const char *const d[] = {"cpu", "gpu"};
            cfg->device = pick(name, v, d, 2) == 0 ? DEVICE_CPU : DEVICE_GPU;
            break;
        }
        case OPT_LOG_DIR:
            if (!*v) bad_value(name, v, "empty path");
            cfg->log_dir = v;
            break;
        case OPT_LEARNING_RATE:
            cfg->learning_rate = parse_double(name, v, 0, 1e9, 1);
            cfg->given_learning_rate = 1;
            break;
        case OPT_MOMENTUM: cfg->momentum = parse_double(name, v, 0, 1, 0); break;
        case OPT_NESTEROV: cfg->nesterov = 1; break;
        case OPT_NO_NESTEROV: cfg->nesterov = 0; break;
        case OPT_WEIGHT_DECAY: cfg->weight_decay = parse_double(name, v, 0, 1e9, 0); break;
        case OPT_LR_DECAY_POLICY: {
            static const char *const p[] = {"poly", "step"};
            cfg->lr_decay_policy = (LrPolicy)pick(name, v, p, 2);
            break;
        }
        case OPT_LR_POLY_POWER: cfg->lr_poly_power = parse_double(name, v, 0, 1e9, 0); break;
        case OPT_LR_DECAY_EPOCHS: cfg->lr_decay_epochs = parse_double(name, v, 0, 1e9, 1); break;
        case OPT_LR_DECAY_RATE: cfg->lr_decay_rate = parse_double(name, v, 0, 1, 1); break;
        case OPT_WARMUP_EPOCHS: cfg->warmup_epochs = parse_double(name, v, 0, 1e9, 0); break;
        case OPT_LOSS_SCALE:
            cfg->given_loss_scale = 1;
            if (strcmp(v, "dynamic") == 0) {
                cfg->dynamic_loss_scale = 1;
                cfg->loss_scale = 65536;
            } else {
                cfg->dynamic_loss_scale = 0;
                cfg->loss_scale = parse_double(name, v, 0, 1e30, 1);
            }
            break;
        case OPT_LARC_ETA: cfg->larc_eta = parse_double(name, v, 0, 1e9, 1); break;
        case OPT_LARC_MODE: {
            static const char *const m[] = {"clip", "scale"};
            cfg->larc_mode = (LarcMode)pick(name, v, m, 2);
            cfg->given_larc_mode = 1;
            break;
        }
        case OPT_EVAL: cfg->eval = 1; break;
        case OPT_NO_EVAL: cfg->eval = 0; break;
        case OPT_FORWARD_ONLY: cfg->forward_only = 1; break;
        case OPT_SUMMARY_INTERVAL: cfg->summary_interval = (int)parse_long(name, v, 0, 1 << 30); break;
        case OPT_DISTORT_COLOR: cfg->distort_color = 1; break;
        case OPT_CROP_AREA_MIN: cfg->crop_area_min = parse_double(name, v, 0, 1, 1); break;
        case OPT_INPUT_THREADS: cfg->input_threads = (int)parse_long(name, v, 1, 4096); break;
        case OPT_SHUFFLE_BUFFER: cfg->shuffle_buffer = (int)parse_long(name, v, 0, 1 << 30); break;
        case OPT_SKIP_CORRUPT: cfg->skip_corrupt = 1; break;
        case OPT_NUM_CLASSES: cfg->num_classes = (int)parse_long(name, v, 1, 1 << 24); break;
        case OPT_SEED: cfg->seed = (uint64_t)parse_long(name, v, 0, __LONG_MAX__); break;
        case OPT_BURNIN: cfg->nstep_burnin = (int)parse_long(name, v, 0, 1 << 30); break;
        case OPT_ALLREDUCE: {
            static const char *const a[] = {"nccl", "mpi", "none"};
            static const AllreduceKind k[] = {ALLREDUCE_NCCL, ALLREDUCE_MPI, ALLREDUCE_NONE};
            cfg->allreduce = k[pick(name, v, a, 3)];
            break;
        }
        case OPT_BUCKET_MB: cfg->bucket_mb = parse_double(name, v, 0, 1e6, 1); break;
        case OPT_SAVE_INTERVAL: cfg->save_interval = (int)parse_long(name, v, 1, 1 << 30); break;
        case OPT_VERBOSE: cfg->verbose = 1; break;
        case OPT_PRINT_LAYERS: cfg->print_layers = 1; break;
        case OPT_CPU_IMPL: {
            static const char *const m[] = {"reference", "onednn"};
            cfg->cpu_impl = pick(name, v, m, 2) == 0 ? CPU_IMPL_REFERENCE : CPU_IMPL_ONEDNN;
            break;
        }
        case OPT_HELP:
            if (v && strcmp(v, "markdown") == 0)
                config_print_markdown(stdout);
            else if (v)
                bad_value(name, v, "expected --help or --help=markdown");
            else
                config_print_usage(stdout);
            exit(0);
        case ':':
            die_code(EXIT_USAGE, "flag %s needs a value (--flag=value or --flag value)", argv[optind - 1]);
        case '?':
        default: {
            const char *bad = argv[optind - 1];
            if (optopt && optopt < 256 && bad && bad[0] == '-' && bad[1] != '-')
                die_code(EXIT_USAGE, "unknown flag -%c (see --help)", optopt);
            if (!bad) die_code(EXIT_USAGE, "unknown flag (see --help)");
            const char *eq = strchr(bad, '=');
            size_t len = eq ? (size_t)(eq - bad) : strlen(bad);
            /* a known flag given a value it does not take, e.g. --eval=1 */
            for (int i = 0; i < NFLAGS && eq && bad[0] == '-' && bad[1] == '-'; i++)
                if (!flags[i].has_arg && strlen(flags[i].name) == len - 2 && strncmp(flags[i].name, bad + 2, len - 2) == 0)
                    die_code(EXIT_USAGE, "flag --%s takes no value (see --help)", flags[i].name);
            die_code(EXIT_USAGE, "unknown flag %.*s (see --help)", (int)len, bad);
        }
        }
    }
    if (optind < argc) die_code(EXIT_USAGE, "unexpected argument '%s' (flags are --flag=value; see --help)", argv[optind]);
    if (cfg->num_gpus > 1) refuse_num_gpus(cfg->num_gpus, argc, argv_given);
    if (!cfg->model) die_code(EXIT_USAGE, "--model is required; one of: %s", model_names());
    if (!model_find(cfg->model))
        die_code(EXIT_USAGE, "--model=%s: unknown model; valid models: %s", cfg->model, model_names());
    if (cfg->num_epochs > 0 && !cfg->data_dir && !cfg->eval)
        die_code(EXIT_USAGE, "--num_epochs=%g needs --data_dir (synthetic data has no epochs; use --num_batches)",
                 cfg->num_epochs);
    if (cfg->eval && !cfg->data_dir) die_code(EXIT_USAGE, "--eval needs --data_dir with validation-* shards");
    if (cfg->eval && !cfg->log_dir) die_code(EXIT_USAGE, "--eval needs --log_dir holding a checkpoint");
}
