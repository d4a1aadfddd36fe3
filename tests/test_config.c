/* test_config.c: the flag table in-process: the defaults are nvcnn.py 1.6's (and this program's
 * documented ones), --help shows the defaults the parser sets, and config_given() sees a flag
 * under any of its spellings. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"

static void parse(Config *c, const char *line) {
    static char buf[8][512];
    static int slot;
    char *b = buf[slot++ % 8];
    snprintf(b, sizeof buf[0], "nvcnn %s", line);
    char *argv[64];
    int argc = 0;
    for (char *t = strtok(b, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    config_parse(c, argc, argv);
}

/* The two configurations alike, leaving out the record of what was given. */
static int same_settings(Config a, Config b) {
    if (strcmp(a.model, b.model) != 0) return 0;
    if (!a.data_dir != !b.data_dir || (a.data_dir && strcmp(a.data_dir, b.data_dir) != 0)) return 0;
    if (!a.log_dir != !b.log_dir || (a.log_dir && strcmp(a.log_dir, b.log_dir) != 0)) return 0;
    a.model = b.model = a.data_dir = b.data_dir = a.log_dir = b.log_dir = NULL;
    a.args = b.args = NULL;
    a.nargs = b.nargs = 0;
    a.given_larc_mode = b.given_larc_mode = a.given_loss_scale = b.given_loss_scale = 0;
    a.given_learning_rate = b.given_learning_rate = a.given_display_every = b.given_display_every = 0;
    return memcmp(&a, &b, sizeof a) == 0;
}

TEST(config_defaults_are_nvcnn_py_s) {
    Config c;
    parse(&c, "-m lenet");
    CHECK(strcmp(c.model, "lenet") == 0 && c.data_dir == NULL && c.log_dir == NULL);
    CHECK(c.batch_size == 64 && c.num_batches == 50 && c.num_epochs == 0 && c.display_every == 10);
    CHECK(c.precision == PREC_FP32 && c.device == DEVICE_AUTO && c.num_gpus == 1);
    CHECK(c.learning_rate == 0 && c.momentum == 0.9 && c.nesterov == 1 && c.weight_decay == 1e-4);
    CHECK(c.lr_decay_policy == LR_POLY && c.lr_poly_power == 2 && c.lr_decay_epochs == 30 && c.lr_decay_rate == 0.1);
    CHECK(c.warmup_epochs == 0 && c.loss_scale == 1 && !c.dynamic_loss_scale && c.larc_eta == 0 && c.larc_mode == LARC_CLIP);
    CHECK(!c.eval && !c.forward_only && !c.distort_color && c.crop_area_min == 0.1 && c.input_threads == 0);
    CHECK(c.shuffle_buffer == 10000 && !c.skip_corrupt && c.num_classes == 1000 && c.seed == 1234);
    CHECK(c.nstep_burnin == 20 && c.allreduce == ALLREDUCE_AUTO && c.bucket_mb == 25 && c.save_interval == 43200);
    CHECK(c.summary_interval == 3600 && !c.verbose && c.cpu_impl == CPU_IMPL_AUTO && !c.print_layers);
    CHECK(c.nargs == 1 && !c.given_learning_rate && !c.given_loss_scale && !c.given_display_every);
}

/* Giving a flag its default as --help shows it changes nothing (beside the flags that it needs, if
 * any: the third column). */
TEST(config_help_shows_the_defaults_the_parser_sets) {
    static const char *const given[][3] = {
        {"batch_size", "64", ""},      {"num_batches", "50", ""},   {"display_every", "10", ""},  {"precision", "fp32", ""},
        {"num_gpus", "1", ""},         {"momentum", "0.9", ""},     {"weight_decay", "1e-4", ""}, {"lr_decay_policy", "poly", ""},
        {"lr_poly_power", "2", ""},    {"warmup_epochs", "0", " --data_dir=d"},
        {"lr_decay_epochs", "30", " --data_dir=d --lr_decay_policy=step"},
        {"lr_decay_rate", "0.1", " --data_dir=d --lr_decay_policy=step"},
        {"loss_scale", "1", ""},       {"larc_mode", "clip", " --larc_eta=0.001"}, {"crop_area_min", "0.1", ""},
        {"shuffle_buffer", "10000", ""}, {"num_classes", "1000", ""}, {"seed", "1234", ""},     {"nstep_burnin", "20", ""},
        {"bucket_mb", "25", ""},       {"save_interval", "43200", " --log_dir=l"}, {"summary_interval", "3600", " --log_dir=l"}};
    char *help = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    config_print_usage(f);
    fclose(f);
    Config def;
    parse(&def, "-m lenet");
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        char want[128], line[256];
        snprintf(want, sizeof want, "--%s=V ", given[i][0]);
        const char *row = strstr(help, want);
        const char *eol = row ? strchr(row, '\n') : NULL;
        snprintf(want, sizeof want, "[default: %s", given[i][1]); /* then ']' or "; <more>]" */
        const char *d = row && eol ? memmem(row, (size_t)(eol - row), want, strlen(want)) : NULL;
        CHECK_MSG(d && (d[strlen(want)] == ']' || d[strlen(want)] == ';'), "--help's --%s lacks %s]", given[i][0], want);
        Config c, base;
        snprintf(line, sizeof line, "-m lenet%s", given[i][2]);
        parse(&base, line);
        snprintf(line, sizeof line, "-m lenet%s --%s=%s", given[i][2], given[i][0], given[i][1]);
        parse(&c, line);
        CHECK_MSG(same_settings(c, base), "--%s=%s is not the default", given[i][0], given[i][1]);
    }
    free(help);
    /* and the flags without a value: their defaults; --noeval also leaves out the validation pass
     * at the end of training (its own setting), otherwise the default */
    Config c;
    parse(&c, "-m lenet --nesterov --noeval --nofp16");
    CHECK(c.noeval == 1 && def.noeval == 0 && !c.eval);
    c.noeval = 0;
    CHECK(same_settings(c, def));
}

TEST(config_given_sees_every_spelling) {
    Config c;
    parse(&c, "-m lenet --num_iter=5 --display_every 3 --fp16 --learning_rate=0.1");
    CHECK(config_given(&c, &c.num_batches) && c.num_batches == 5);
    CHECK(config_given(&c, &c.display_every) && c.given_display_every && c.display_every == 3);
    CHECK(config_given(&c, &c.precision) && c.precision == PREC_FP16);
    CHECK(c.given_learning_rate && c.learning_rate == 0.1);
    CHECK(!config_given(&c, &c.batch_size) && config_given(&c, &c.model));
    CHECK(!config_given(&c, &c.nstep_burnin) && !c.given_loss_scale);
    parse(&c, "-m lenet --num_warmup_batches=3 --loss_scale=dynamic");
    CHECK(config_given(&c, &c.nstep_burnin) && c.nstep_burnin == 3 && c.given_loss_scale && c.dynamic_loss_scale);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    config_print_args(&c, f);
    fclose(f);
    CHECK_MSG(strcmp(out, "  --model=lenet\n  --num_warmup_batches=3\n  --loss_scale=dynamic\n") == 0, "%s", out);
    free(out);
}
