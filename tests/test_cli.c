/* test_cli.c: the command line as a user meets it: errors, help, device fallback, output format.
 * Runs the ./nvcnn binary built by `make`. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "harness.h"

static int nv(const char *args, char **out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./nvcnn %s", args);
    return th_run(cmd, out);
}

static int count_lines_with(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

TEST(cli_missing_model) {
    char *o;
    CHECK(nv("", &o) == 2);
    CHECK(strstr(o, "--model is required") != NULL);
    free(o);
}

TEST(cli_unknown_model_lists_valid_models) {
    char *o;
    CHECK(nv("--model=resnet51", &o) == 2);
    CHECK(strstr(o, "resnet51") && strstr(o, "valid models"));
    CHECK(strstr(o, "resnet50") && strstr(o, "googlenet") && strstr(o, "inception3") && strstr(o, "vgg19"));
    CHECK(count_lines_with(o, "\n") == 1); /* one line */
    free(o);
}

TEST(cli_bad_values_exit_2_with_one_line) {
    const char *cases[][2] = {
        {"--model=lenet --batch_size=0", "--batch_size=0"},
        {"--model=lenet --batch_size=-3", "--batch_size=-3"},
        {"--model=lenet --batch_size=abc", "--batch_size=abc"},
        {"--model=lenet --precision=fp17", "--precision=fp17"},
        {"--model=lenet --device=tpu", "--device=tpu"},
        {"--model=lenet --bogus_flag=1", "unknown flag --bogus_flag"},
        {"--model=lenet --display_every=0", "--display_every=0"},
        {"--model=lenet --lr_decay_policy=cosine", "--lr_decay_policy=cosine"},
        {"--model=lenet --learning_rate=-1", "--learning_rate=-1"},
        {"--model=lenet --num_epochs=2", "--num_epochs"},
        {"--model=lenet --larc_mode=both", "--larc_mode=both"},
        {"--model=lenet --loss_scale=0", "--loss_scale=0"},
        {"--model=lenet --batch_size", "needs a value"},
        {"--model=lenet stray", "unexpected argument"},
        {"--model=lenet --verbose=1", "flag --verbose takes no value"},
        {"--model=lenet --num_batches=1.5", "--num_batches=1.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o;
        int rc = nv(cases[i][0], &o);
        CHECK_MSG(rc == 2, "'%s' exited %d", cases[i][0], rc);
        CHECK_MSG(strstr(o, cases[i][1]) != NULL, "'%s' printed: %s", cases[i][0], o);
        CHECK_MSG(count_lines_with(o, "\n") == 1 && strncmp(o, "nvcnn: error: ", 14) == 0,
                  "'%s' should print one error line, printed: %s", cases[i][0], o);
        free(o);
    }
}

TEST(cli_help_lists_every_flag_and_model) {
    char *o;
    CHECK(nv("--help", &o) == 0);
    const char *need[] = {"--model", "--data_dir", "--batch_size", "--num_batches", "--num_iter", "--num_epochs",
                          "--display_every", "--precision", "--fp16", "--device", "--log_dir", "--learning_rate",
                          "--momentum", "--weight_decay", "--lr_decay_policy", "--lr_poly_power",
                          "--lr_decay_epochs", "--lr_decay_rate", "--warmup_epochs", "--loss_scale", "--larc_eta",
                          "--larc_mode", "--eval", "--distort_color", "--input_threads", "--num_classes", "--seed",
                          "trivial", "lenet", "alexnet", "overfeat", "googlenet", "vgg11", "vgg13", "vgg16", "vgg19",
                          "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "inception3"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) CHECK_MSG(strstr(o, need[i]) != NULL, "--help lacks %s", need[i]);
    CHECK(strstr(o, "default: 64") != NULL);
    free(o);
}

TEST(cli_device_gpu_without_gpu_exits_2) {
    if (gpu_count(NULL, 0) > 0) {
        th_skip("a GPU is present");
        return;
    }
    char *o;
    CHECK(nv("--model=lenet --device=gpu --num_batches=1", &o) == 2);
    CHECK(strstr(o, "--device=gpu") && strstr(o, "no usable GPU"));
    free(o);
}

TEST(cli_synthetic_training_output_format) {
    char *o;
    /* the "--flag value" form, and the CPU fallback line when --device is not given */
    int rc = nv("--model lenet --batch_size 8 --num_batches 12 --display_every 5 --nstep_burnin 2", &o);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, o);
    const char *order[] = {"using the CPU", "Cmd line args:\n  --model\n  lenet\n", "Num ranks:   1\n",
                           "Num images:  Synthetic\n", "Model:       lenet\n", "Parameters:  ",
                           "Batch size:  8 per device\n             8 total\n", "Devices:     cpu",
                           "Data format: NCHW\n", "Data type:   fp32\n", "Training\n",
                           "  Step Epoch Img/sec   Loss   LR\n", "     1     1 ", "     5     1 ", "    10     1 ",
                           "----------------------------------------------------------------\nImages/sec: ",
                           " +/- ", " (jitter = ",
                           ")\n----------------------------------------------------------------\n"};
    const char *p = o;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *q = strstr(p, order[i]);
        CHECK_MSG(q != NULL, "missing (in order) '%s' in:\n%s", order[i], o);
        if (q) p = q + strlen(order[i]);
    }
    /* lenet with 1000 classes: 5*5*3*32+32 + 5*5*32*64+64 + 7*7*64*512+512 + 512*1000+1000 */
    CHECK(strstr(o, "Parameters:  2172840\n") != NULL);
    /* rows at steps 1, 5, 10 and the last (12) only */
    CHECK(strstr(o, "\n     2     1 ") == NULL && strstr(o, "\n    11     1 ") == NULL);
    CHECK_MSG(strstr(o, "\n    12     1 ") != NULL, "no row for the last step in:\n%s", o);
    free(o);
}

/* Runs too short for an error estimate print the figure alone; none timed: nvcnn's line. */
TEST(cli_short_runs_print_no_meaningless_figures) {
    char *o;
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=3 --nstep_burnin=1", &o) == 0);
    CHECK_MSG(strstr(o, "Images/sec: ") && strstr(o, "(2 timed steps: too few for an error estimate)\n") &&
                  !strstr(o, "nan"),
              "%s", o);
    free(o);
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=2 --nstep_burnin=2", &o) == 0);
    CHECK_MSG(strstr(o, "No results, did not get past burn-in phase (2 steps)\n") && !strstr(o, "Images/sec:"), "%s", o);
    free(o);
}

/* --precision=fp16 on the CPU: one error line, nothing before it */
TEST(cli_half_precision_on_cpu_is_one_line) {
    const char *cases[] = {"--model=lenet --precision=fp16 --num_batches=1", "--model=lenet --fp16 --device=cpu"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o;
        CHECK(nv(cases[i], &o) == 2);
        CHECK_MSG(count_lines_with(o, "\n") == 1 && strncmp(o, "nvcnn: error: --precision=fp16", 30) == 0, "%s", o);
        free(o);
    }
}

TEST(cli_unsupported_flags_are_refused_not_ignored) {
    char *o;
    CHECK(nv("--model=lenet --precision=fp16 --device=cpu --num_batches=1", &o) == 2);
    CHECK(strstr(o, "fp16") != NULL);
    free(o);
    /* NCCL averages device buffers: the CPU backend refuses it */
    CHECK(nv("--model=lenet --allreduce=nccl --device=cpu --num_batches=1", &o) == 2);
    CHECK_MSG(strstr(o, "--allreduce=nccl needs the GPU backend") != NULL, "%s", o);
    free(o);
}
