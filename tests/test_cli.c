/* test_cli.c: the command line as a user meets it: errors, help, device fallback, output format.
 * Runs the ./nvcnn binary built by `make`. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "onednn.h"
#include "harness.h"
#include "report.h"
#include "testutil.h"

static int nv(const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./nvcnn %s", args);
    return th_run(cmd, out);
}

/* A folder of Fashion-MNIST's training shards only (links to data/fashion-mnist's), for runs whose
 * checks are all in the training: with validation-* beside them a run ends by evaluating all
 * 10,000 validation images, which at these tests' batch sizes took most of their time. Its path
 * in dir; 0, or -1 (the test failed) when there is no data or the links cannot be made. */
static int train_only_data(char *dir, size_t n) {
    if (access("data/fashion-mnist/train-00000-of-00008", R_OK) != 0) {
        th_fail(__FILE__, __LINE__, "data/fashion-mnist is missing: run `make data`");
        return -1;
    }
    snprintf(dir, n, "%s/fm-train", th_tmpdir());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && ln -sf \"$PWD\"/data/fashion-mnist/train-* %s/", dir, dir);
    int rc = th_run(cmd, NULL);
    CHECK_MSG(rc == 0, "%s: exit %d", cmd, rc);
    return rc == 0 ? 0 : -1;
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
        /* an abbreviation that begins several flags: named with them (one that begins one is that flag) */
        {"--model=lenet --lr_decay=2", "--lr_decay is ambiguous: it begins --lr_decay_policy, --lr_decay_epochs, --lr_decay_rate"},
        {"--model=lenet --display_every=0", "--display_every=0"},
        {"--model=lenet --lr_decay_policy=cosine", "--lr_decay_policy=cosine"},
        {"--model=lenet --learning_rate=-1", "--learning_rate=-1"},
        {"--model=lenet --num_epochs=2", "--num_epochs"},
        {"--model=lenet --larc_mode=both", "--larc_mode=both"},
        {"--model=lenet --loss_scale=0", "--loss_scale=0"},
        {"--model=lenet --batch_size", "needs a value"},
        /* a flag whose value was left out does not take the next flag for it */
        {"--model=lenet --log_dir --num_batches=2", "flag --log_dir needs a value (--flag=value or --flag value); it was followed by --num_batches=2"},
        {"--model=lenet stray", "unexpected argument"},
        {"--model=lenet --verbose=1", "flag --verbose takes no value"},
        {"--model=lenet --num_batches=1.5", "--num_batches=1.5"},
        {"--model=lenet --cuda_graph=maybe", "--cuda_graph=maybe"},
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

/* A number out of range: the line gives the interval, its open and closed ends as the flag takes them. */
TEST(cli_range_errors_give_the_interval) {
    const char *cases[][2] = {
        {"--learning_rate=1e20", "--learning_rate=1e20: must be in (0, 1000000000]"},
        {"--learning_rate=0", "--learning_rate=0: must be in (0, 1000000000]"},
        {"--momentum=1.5", "--momentum=1.5: must be in [0, 1]"},
        {"--momentum=-0.1", "--momentum=-0.1: must be in [0, 1]"},
        {"--lr_decay_rate=1.5", "--lr_decay_rate=1.5: must be in (0, 1]"},
        {"--crop_area_min=1.5", "--crop_area_min=1.5: must be in (0, 1]"},
        {"--target_top1=101", "--target_top1=101: must be in (0, 100]"},
        {"--loss_scale=1e38", "--loss_scale=1e38: must be in [1e-30, 1e+30] or dynamic"},
        /* a static scale whose reciprocal is infinite in fp32 would skip every step */
        {"--loss_scale=1e-39", "--loss_scale=1e-39: must be in [1e-30, 1e+30] or dynamic"},
        /* decimal, without blanks, as the integer flags always were */
        {"--learning_rate=0x10", "--learning_rate=0x10: not a number"},
        {"'--learning_rate= 0.1'", "--learning_rate= 0.1: not a number"},
        {"'--batch_size= 4'", "--batch_size= 4: not an integer"},
        /* beyond a double or a long: said as a range, not as "not a number" */
        {"--learning_rate=1e-400", "--learning_rate=1e-400: too close to 0 for a double"},
        {"--seed=99999999999999999999", "--seed=99999999999999999999: must be in [0, 9223372036854775807]"},
        {"--loss_scale=big", "--loss_scale=big: not a number or dynamic"},
        {"--cudnn_workspace_mb=-1", "--cudnn_workspace_mb=-1: must be in [0, 16777216]"},
        {"--num_classes=0", "--num_classes=0: must be in [1, 16777216]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256], want[256], *o;
        snprintf(args, sizeof args, "--model=lenet --batch_size=8 --device=cpu %s", cases[i][0]);
        snprintf(want, sizeof want, "nvcnn: error: %s\n", cases[i][1]);
        int rc = nv(args, &o);
        CHECK_MSG(rc == 2 && o && strcmp(o, want) == 0, "'%s': exit %d: %s", cases[i][0], rc, o);
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
                          "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "inception3", "resnext50",
                          "resnext101", "resnext152", "inception4", "inception-resnet2"};
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
    const char *order[] = {"using the CPU",
                           "Cmd line args:\n  --model=lenet\n  --batch_size=8\n  --num_batches=12\n  --display_every=5\n"
                           "  --nstep_burnin=2\nNum ranks:   1\n",
                           "Num images:  Synthetic\n", "Model:       lenet\n", "Parameters:  ",
                           "Batch size:  8 per device\n             8 total\n", "Devices:     cpu",
                           "Data format: NCHW\n", "Data type:   fp32\n", "Planning:    ", " s (oneDNN", "Training\n",
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

/* The header comes out at once; what takes time before the first step (the net's memory, oneDNN's
 * primitives) comes after it, in one line with its time. */
TEST(cli_header_comes_before_the_planning_line) {
    char *o;
    CHECK(nv("--model=lenet --batch_size=4 --num_batches=2 --nstep_burnin=0 --cpu_impl=reference", &o) == 0);
    const char *lr = o ? strstr(o, "Learning rate: ") : NULL, *pl = o ? strstr(o, "\nPlanning:    ") : NULL;
    const char *tr = o ? strstr(o, "\nTraining\n") : NULL;
    double secs = -1;
    CHECK_MSG(lr && pl && tr && lr < pl && pl < tr && sscanf(pl, "\nPlanning: %lf s\n", &secs) == 1 && secs >= 0 && secs < 60,
              "%s", o);
    free(o);
    /* oneDNN's layers: the header says which implementation, the planning line what it made */
    CHECK(nv("--model=lenet --batch_size=4 --num_batches=2 --nstep_burnin=0", &o) == 0);
    CHECK_MSG(o && (strstr(o, "CPU layers:  reference") ||
                    (strstr(o, "CPU layers:  onednn (oneDNN ") && strstr(o, " s (oneDNN primitives for ") && strstr(o, " layers)\nTraining\n"))),
              "%s", o);
    free(o);
}

/* Without --display_every: nvcnn's every 10 steps where steps are fast, more often where they are
 * slow (a row about every 10 s), and an ETA line a minute on long runs. */
TEST(cli_rows_follow_the_pace_without_display_every) {
    CHECK(report_row_interval(0.001, 10) == 10 && report_row_interval(1.5, 10) == 5 && report_row_interval(4, 10) == 2);
    CHECK(report_row_interval(13, 10) == 1 && report_row_interval(0.5, 100) == 20 && report_row_interval(0.01, 100) == 100);
    CHECK(report_row_interval(3, 1) == 1 && report_row_interval(0.3, 25) == 20 && report_row_interval(1e-9, 1000000) == 1000000);
    char t[64];
    report_duration_text(t, sizeof t, 44.6);
    CHECK_MSG(strcmp(t, "45 s") == 0, "%s", t);
    report_duration_text(t, sizeof t, 187);
    CHECK_MSG(strcmp(t, "3 min 07 s") == 0, "%s", t);
    report_duration_text(t, sizeof t, 7500);
    CHECK_MSG(strcmp(t, "2 h 05 min") == 0, "%s", t);
    /* fast steps: rows at 1, 10, 20, 30 */
    char *o;
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=30 --nstep_burnin=1", &o) == 0);
    CHECK_MSG(o && strstr(o, "\n     1     1 ") && strstr(o, "\n    10     1 ") && strstr(o, "\n    20     1 ") &&
                  strstr(o, "\n    30     1 ") && !strstr(o, "\n     2     1 ") && !strstr(o, "\n    15     1 "),
              "%s", o);
    free(o);
}

/* NVCNN_TEST_STEP_PAUSE_MS (the Slurm scenarios' slow steps without their CPU time): 4 steps with
 * 150 ms pauses take at least 0.6 s of wall clock; an invalid value exits 2
 * with one line before any output. */
TEST(cli_test_step_pause) {
    char *o = NULL;
    const double t0 = now_seconds();
    int rc = th_run("NVCNN_TEST_STEP_PAUSE_MS=150 ./nvcnn --model=trivial --batch_size=2 --num_batches=4 --nstep_burnin=0", &o);
    const double dt = now_seconds() - t0;
    CHECK_MSG(rc == 0 && dt >= 0.6, "exit %d after %.2f s:\n%s", rc, dt, o);
    free(o);
    const char *bad[] = {"x", "-1", "600001", "5ms"};
    for (int k = 0; k < 4; k++) {
        char cmd[256], want[128];
        snprintf(cmd, sizeof cmd, "NVCNN_TEST_STEP_PAUSE_MS=%s ./nvcnn --model=trivial --num_batches=2 2>&1", bad[k]);
        snprintf(want, sizeof want, "nvcnn: error: NVCNN_TEST_STEP_PAUSE_MS=%s: expected milliseconds from 0 to 600000\n", bad[k]);
        rc = th_run(cmd, &o);
        CHECK_MSG(rc == 2 && o && strcmp(o, want) == 0, "%s: exit %d: %s", cmd, rc, o);
        free(o);
    }
}

/* The ETA line: its text from the steps done, the run's steps and the seconds a step (worked by
 * hand), and a run whose steps look long (NVCNN_TEST_CLOCK_SCALE: its clock a million times
 * faster, so each step takes well over a minute) prints one under every row but the last, with
 * the time left that its own s/step gives; the same run on the real clock prints none. */
TEST(cli_eta_line_on_long_runs) {
    char t[160];
    report_eta_text(t, sizeof t, 35, 300, 1.23); /* 265 x 1.23 = 325.95 s */
    CHECK_MSG(strcmp(t, "  ETA: 5 min 26 s (step 35 of 300, 1.23 s/step)") == 0, "%s", t);
    report_eta_text(t, sizeof t, 120, 5004, 13.1); /* 4884 x 13.1 = 63980.4 s */
    CHECK_MSG(strcmp(t, "  ETA: 17 h 46 min (step 120 of 5004, 13.1 s/step)") == 0, "%s", t);
    report_eta_text(t, sizeof t, 49, 50, 0.4);
    CHECK_MSG(strcmp(t, "  ETA: 0 s (step 49 of 50, 0.4 s/step)") == 0, "%s", t);
    char *o;
    CHECK(th_run("NVCNN_TEST_CLOCK_SCALE=1e6 ./nvcnn --model=trivial --batch_size=2 --num_batches=6 --nstep_burnin=0", &o) == 0);
    int etas = 0;
    for (long step = 1; o && step <= 6; step++) {
        char row[32];
        snprintf(row, sizeof row, "\n%6ld     1 ", step);
        const char *r = strstr(o, row), *next = r ? strchr(r + 1, '\n') : NULL;
        CHECK_MSG(r && next, "no row %ld:\n%s", step, o);
        if (!next) continue;
        long at, of;
        double per = 0, a = 0, b = 0, h = 0, m = 0, sec = 0;
        char eta[128];
        if (sscanf(next + 1, "  ETA: %127[^(](step %ld of %ld, %lf s/step)", eta, &at, &of, &per) != 4) continue;
        etas++;
        CHECK_MSG(at == step && of == 6 && step < 6, "%s", next + 1);
        /* the time left: (6 - step) steps at the printed s/step, within its 3 digits */
        int ok = 1;
        if (strstr(eta, " h ") && sscanf(eta, "%lf h %lf min", &a, &b) == 2) h = a, m = b;
        else if (strstr(eta, " min ") && sscanf(eta, "%lf min %lf s", &a, &b) == 2) m = a, sec = b;
        else if (sscanf(eta, "%lf s", &a) == 1) sec = a;
        else ok = 0;
        if (ok) {
            const double left = 3600 * h + 60 * m + sec, want = per * (double)(6 - step);
            CHECK_MSG(fabs(left - want) <= 0.005 * want + (h > 0 ? 60 : 1), "%s: want %.0f s", next + 1, want);
        } else {
            CHECK_MSG(0, "%s", next + 1);
        }
    }
    CHECK_MSG(etas == 5, "%d ETA lines:\n%s", etas, o);
    free(o);
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=6 --nstep_burnin=0", &o) == 0);
    CHECK_MSG(o && !strstr(o, "ETA") && strstr(o, "\n     6     1 "), "%s", o);
    free(o);
}

/* A run whose steps all fall in the burn-in says so before it trains, and what to pass. */
TEST(cli_a_run_inside_the_burn_in_is_told_before_training) {
    char *o;
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=3", &o) == 0);
    const char *n = o ? strstr(o, "Note: this run makes 3 steps and --nstep_burnin=20 leaves the first 20 untimed: "
                                  "no speed figure (pass --num_batches=30 or more, or --nstep_burnin=2 or less)\n")
                      : NULL;
    const char *t = o ? strstr(o, "\nTraining\n") : NULL;
    CHECK_MSG(n && t && n < t && strstr(o, "No results, did not get past burn-in phase (20 steps)\n"), "%s", o);
    free(o);
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=21", &o) == 0);
    CHECK_MSG(o && !strstr(o, "Note: ") && strstr(o, "Images/sec: "), "%s", o);
    free(o);
    /* the burn-in's alias, named as given */
    CHECK(nv("--model=trivial --batch_size=2 --num_batches=3 --num_warmup_batches=5", &o) == 0);
    CHECK_MSG(o && strstr(o, "Note: this run makes 3 steps and --num_warmup_batches=5 leaves the first 5 untimed: no speed figure "
                             "(pass --num_batches=15 or more, or --num_warmup_batches=2 or less)\n"),
              "%s", o);
    free(o);
}

/* With --num_epochs (which overrides --num_batches) the advice is in epochs, and following it
 * gives the figure; likewise the line of a finished run resumed with fewer epochs. */
TEST(cli_burn_in_and_finished_run_advice_with_num_epochs_is_in_epochs) {
    char data[600], common[700], *o, cmd[1600];
    if (train_only_data(data, sizeof data) != 0) return;
    snprintf(common, sizeof common, "--model=lenet --num_classes=10 --data_dir=%s --batch_size=7", data);
    /* 60000 images x 0.002 epoch / 7 = 17.1: 17 steps; 25 + 10 steps take 35 x 7 / 60000 = 0.0040833
     * epochs: 0.00409 in 3 digits (0.00408 makes 34 steps) */
    snprintf(cmd, sizeof cmd, "%s --num_epochs=0.002 --num_batches=100 --nstep_burnin=25", common);
    CHECK(nv(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "Note: this run makes 17 steps and --nstep_burnin=25 leaves the first 25 untimed: no speed figure "
                             "(pass --num_epochs=0.00409 or more, or --nstep_burnin=16 or less)\n") &&
                  strstr(o, "No results, did not get past burn-in phase (25 steps)\n"),
              "%s", o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --num_epochs=0.00409 --nstep_burnin=25", common);
    CHECK(nv(cmd, &o) == 0);
    CHECK_MSG(o && !strstr(o, "Note: ") && strstr(o, "\n    35     1 ") && strstr(o, "Images/sec: "), "%s", o);
    free(o);
    /* 0.0011 epoch: 9 steps, saved; 0.001 epoch (8 steps) is past it; 10 steps take 70 / 60000 =
     * 0.0011667 epochs: 0.00117 */
    char d[400];
    snprintf(d, sizeof d, "%s/epochs-finished", th_tmpdir());
    snprintf(cmd, sizeof cmd, "%s --num_epochs=0.0011 --nstep_burnin=0 --log_dir=%s", common, d);
    CHECK(nv(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "%s --num_epochs=0.001 --log_dir=%s", common, d);
    CHECK(nv(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "ckpt-9.nvcnn is at step 9, past the end of this run (8 steps): nothing left to train (--eval evaluates it; "
                             "--num_epochs=0.00117 or more trains on from it)\n"),
              "%s", o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --num_epochs=0.00117 --nstep_burnin=0 --log_dir=%s", common, d);
    CHECK(nv(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "Restored from checkpoint ") && strstr(o, "\n    10     1 ") && !strstr(o, "nothing left"), "%s", o);
    free(o);
}

/* --image_size: the fully convolutional models at other sizes, said in the header; the others and
 * sizes below a model's smallest are one line and exit 2. */
TEST(cli_image_size) {
    char *o;
    CHECK(nv("--model=resnet18 --image_size=32 --batch_size=2 --num_batches=2 --nstep_burnin=0", &o) == 0);
    CHECK_MSG(o && strstr(o, "Model:       resnet18\nImage size:  32x32 (--image_size)\nParameters:  11689512\n"), "%s", o);
    free(o);
    CHECK(nv("--model=lenet --batch_size=2 --num_batches=1", &o) == 0);
    CHECK_MSG(o && strstr(o, "Image size:  28x28\n"), "%s", o);
    free(o);
    CHECK(nv("--model=alexnet --image_size=64", &o) == 2);
    CHECK_MSG(o && count_lines_with(o, "\n") == 1 && strstr(o, "--image_size=64: alexnet's fully connected layers are sized for its 227x227 input"),
              "%s", o);
    free(o);
    CHECK(nv("--model=inception3 --image_size=74", &o) == 2);
    CHECK_MSG(o && count_lines_with(o, "\n") == 1 && strstr(o, "--image_size=74: inception3's smallest input is 75x75"), "%s", o);
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

/* --precision=fp16 on the CPU: one error line, nothing before it, naming the flag as given */
TEST(cli_half_precision_on_cpu_is_one_line) {
    const char *cases[][2] = {{"--model=lenet --precision=fp16 --num_batches=1", "nvcnn: error: --precision=fp16 needs the GPU backend"},
                              {"--model=lenet --fp16 --device=cpu", "nvcnn: error: --fp16 needs the GPU backend"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o;
        CHECK(nv(cases[i][0], &o) == 2);
        CHECK_MSG(count_lines_with(o, "\n") == 1 && strncmp(o, cases[i][1], strlen(cases[i][1])) == 0, "%s", o);
        free(o);
    }
}

/* A flag that implies another (--target_top1 sets --eval_every_epochs=1): an error about it names
 * the flag the user gave. */
TEST(cli_errors_name_the_flag_given_not_the_one_it_implies) {
    const char *cases[][2] = {
        {"--num_batches=3 --target_top1=50", "nvcnn: error: --target_top1=50 needs --data_dir with validation-* shards\n"},
        {"--num_batches=3 --eval_every_epochs=2", "nvcnn: error: --eval_every_epochs=2 needs --data_dir with validation-* shards\n"},
        {"--num_batches=3 --target_top1=50 --eval_every_epochs=2",
         "nvcnn: error: --eval_every_epochs=2 needs --data_dir with validation-* shards\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256], *o;
        snprintf(args, sizeof args, "--model=lenet --batch_size=8 --device=cpu %s", cases[i][0]);
        int rc = nv(args, &o);
        CHECK_MSG(rc == 2 && o && strcmp(o, cases[i][1]) == 0, "'%s': exit %d: %s", cases[i][0], rc, o);
        free(o);
    }
}

/* The largest |a - b| over the largest |b| of two checkpoints' weights. */
static double weights_apart(const float *a, const float *b, size_t n) {
    double d = 0, m = 1e-12;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

/* bf16 training on the CPU where oneDNN has bf16: the header says so, and the checkpoint (fp32
 * master weights, one format) resumes across precisions: 4 + 4 + 4 steps bf16 -> fp32 -> bf16
 * against 12 in fp32 from the same start, with the weights' difference (bf16's gradients differ
 * from fp32's by some 1e-2: onednn_bf16_training_steps_match_fp32_reference) under 5e-2 and under
 * half of what the last 8 steps move the weights by, so that a resume which lost the weights or
 * started over would fail. */
static void bf16_trains_and_resumes(const char *isa) {
    const char *t = th_tmpdir();
    const char *common = "--model=lenet --num_classes=10 --batch_size=16 --nstep_burnin=0 --device=cpu";
    char args[1024], want[600], path[600], *o = NULL;
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "%s --num_batches=%d --log_dir=%s/bf32", common, 4 * (k + 1), t);
        CHECK(nv(args, NULL) == 0);
    }
    const char *prec[3] = {"bf16", "fp32", "bf16"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "%s --precision=%s --num_batches=%d --log_dir=%s/bf16", common, prec[k], 4 * (k + 1), t);
        int rc = nv(args, &o);
        CHECK_MSG(rc == 0, "%s: exit %d\n%s", args, rc, o);
        if (k != 1) {
            snprintf(want, sizeof want, ", bf16 on %s", isa);
            CHECK_MSG(o && strstr(o, want) && strstr(o, "Data type:   bf16\n"), "want '%s' and the data type in:\n%s", want, o);
        }
        if (k > 0) {
            snprintf(want, sizeof want, "Restored from checkpoint %s/bf16/ckpt-%d.nvcnn at step %d\n", t, 4 * k, 4 * k);
            CHECK_MSG(o && strstr(o, want), "want '%s' in:\n%s", want, o);
        }
        free(o);
        o = NULL;
    }
    size_t na = 0, nb = 0, n4 = 0;
    snprintf(path, sizeof path, "%s/bf16/ckpt-12.nvcnn", t);
    float *a = tu_ckpt_params(path, "lenet", 10, &na);
    snprintf(path, sizeof path, "%s/bf32/ckpt-12.nvcnn", t);
    float *b = tu_ckpt_params(path, "lenet", 10, &nb);
    snprintf(path, sizeof path, "%s/bf32/ckpt-4.nvcnn", t);
    float *b4 = tu_ckpt_params(path, "lenet", 10, &n4);
    CHECK(a && b && b4 && na == nb && n4 == nb);
    if (a && b && b4 && na == nb && n4 == nb) {
        const double e = weights_apart(a, b, nb), moved = weights_apart(b4, b, nb);
        printf("    4 + 4 + 4 steps bf16 -> fp32 -> bf16 against fp32: weights %.2e apart; the last 8 steps move them %.2e\n",
               e, moved);
        CHECK_MSG(e <= 5e-2 && 2 * e < moved, "weights %.3g apart (limit 5e-2), moved %.3g", e, moved);
    }
    free(a);
    free(b);
    free(b4);
}

/* --precision=bf16 on the CPU (issue: bf16 on oneDNN). On a CPU whose oneDNN has no bf16 (below
 * avx512_core): exit 2 with one line that names the instruction set oneDNN found, the same one
 * the header's "CPU layers:" line shows, and what bf16 needs. Where it has bf16: the run trains,
 * and resumes across precisions (above). The test prints which. */
TEST(cli_bf16_on_cpu_names_the_instruction_set) {
    char *o, *hdr;
    CHECK(nv("--model=lenet --device=cpu --batch_size=2 --num_batches=1", &hdr) == 0);
    const char *l = strstr(hdr, "CPU layers:");
    char isa[64] = "";
    /* "CPU layers:  onednn (oneDNN 2.6.3, avx2)": the instruction set is the last item in the brackets */
    const char *c = l ? strchr(l, ',') : NULL, *e = c ? strchr(c, ')') : NULL;
    if (c && e && e - c - 2 > 0 && e - c - 2 < (long)sizeof isa) memcpy(isa, c + 2, (size_t)(e - c - 2));
    CHECK_MSG(isa[0], "no instruction set in the header's CPU layers line: %s", hdr);
    char cap[64];
    if (onednn_bf16_capable(cap, sizeof cap)) {
        CHECK_MSG(strcmp(cap, isa) == 0, "oneDNN gives %s, the header %s", cap, isa);
        CHECK_MSG(!strstr(hdr, "bf16 on"), "an fp32 run's header names bf16:\n%s", hdr);
        bf16_trains_and_resumes(isa);
        CHECK(nv("--model=lenet --device=cpu --precision=bf16 --cpu_impl=reference --num_batches=1", &o) == 2);
        CHECK_MSG(o && strstr(o, "--precision=bf16 on the CPU needs --cpu_impl=onednn"), "%s", o);
        free(o);
        printf("    this CPU: oneDNN %s: bf16 trains; resumed across precisions\n", isa);
        free(hdr);
        return;
    }
    CHECK(nv("--model=lenet --device=cpu --precision=bf16 --num_batches=1", &o) == 2);
    CHECK_MSG(count_lines_with(o, "\n") == 1 && strncmp(o, "nvcnn: error: --precision=bf16 on the CPU: ", 43) == 0, "%s", o);
    char want[96];
    snprintf(want, sizeof want, "gives oneDNN %s, and bf16 needs avx512_core", isa);
    CHECK_MSG(strstr(o, want) != NULL, "wanted '%s' in: %s", want, o);
    printf("    this CPU: oneDNN %s: refused for want of bf16 arithmetic (so bf16 training and its resume are not run here)\n", isa);
    free(o);
    free(hdr);
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

/* Refusals, one line each: exit 2 and the line, or (want NULL) a run that exits 0 and says
 * nothing of nvcnn's; each case after the flags in common. */
static void refusals(const char *common, const char *const cases[][2], size_t n) {
    for (size_t i = 0; i < n; i++) {
        char args[1200], want[600], *o;
        snprintf(args, sizeof args, "%s %s", common, cases[i][0]);
        int rc = nv(args, &o);
        if (cases[i][1]) {
            snprintf(want, sizeof want, "nvcnn: error: %s\n", cases[i][1]);
            CHECK_MSG(rc == 2 && o && strcmp(o, want) == 0, "'%s': exit %d: %s", cases[i][0], rc, o);
        } else {
            CHECK_MSG(rc == 0 && o && !strstr(o, "nvcnn: "), "'%s': exit %d: %s", cases[i][0], rc, o);
        }
        free(o);
    }
}

/* Settings of a feature that is off, or of a learning-rate policy that is not in use, are refused
 * when given; their defaults are not in the way. */
TEST(cli_settings_of_what_is_off_are_refused) {
    const char *const cases[][2] = {
        {"--larc_mode=scale", "--larc_mode=scale needs --larc_eta (LARC is off without it)"},
        {"--larc_mode=clip", "--larc_mode=clip needs --larc_eta (LARC is off without it)"},
        {"--larc_mode=scale --larc_eta=0.002", NULL},
        {"--lr_decay_epochs=10", "--lr_decay_epochs=10 is a setting of --lr_decay_policy=step: the poly policy does not use it"},
        {"--lr_decay_rate=0.5", "--lr_decay_rate=0.5 is a setting of --lr_decay_policy=step: the poly policy does not use it"},
        {"--lr_decay_policy=poly --lr_decay_rate=0.5",
         "--lr_decay_rate=0.5 is a setting of --lr_decay_policy=step: the poly policy does not use it"},
        {"--lr_decay_policy=step --lr_poly_power=1",
         "--lr_poly_power=1 is a setting of --lr_decay_policy=poly: the step policy does not use it"},
        {"--lr_poly_power=1", NULL},
        {"--lr_decay_policy=poly --lr_poly_power=3", NULL},
    };
    refusals("--model=lenet --batch_size=8 --num_batches=1 --nstep_burnin=0", cases, sizeof cases / sizeof cases[0]);
}

/* --eval trains nothing: the run's length and the evaluations while training are refused with
 * it (as --profile and --export_onnx are), the evaluations while training with --forward_only. */
TEST(cli_training_flags_with_eval_or_forward_only_are_refused) {
    const char *const with_eval[][2] = {
        {"--num_batches=3", "--num_batches=3 with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
        {"--num_iter=3", "--num_iter=3 with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
        {"--num_epochs=2", "--num_epochs=2 with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
        {"--eval_every_epochs=1",
         "--eval_every_epochs=1 with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
        {"--target_top1=90", "--target_top1=90 with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
        {"--forward_only", "--forward_only with --eval: --eval evaluates the newest checkpoint of --log_dir and trains nothing"},
    };
    refusals("--model=lenet --data_dir=. --log_dir=. --eval", with_eval, sizeof with_eval / sizeof with_eval[0]);
    const char *const with_forward_only[][2] = {
        {"--eval_every_epochs=1", "--eval_every_epochs=1 with --forward_only: an inference benchmark trains nothing to evaluate"},
        {"--target_top1=90", "--target_top1=90 with --forward_only: an inference benchmark trains nothing to evaluate"},
    };
    refusals("--model=lenet --data_dir=. --forward_only", with_forward_only, sizeof with_forward_only / sizeof with_forward_only[0]);
}

/* Synthetic data has no epochs (one would be the whole run): the flags counted in epochs need
 * --data_dir, as --num_epochs does; with it they run. */
TEST(cli_epoch_flags_need_data_dir) {
    const char *const cases[][2] = {
        {"--num_epochs=1", "--num_epochs=1 needs --data_dir (synthetic data has no epochs; use --num_batches)"},
        {"--warmup_epochs=1", "--warmup_epochs=1 needs --data_dir (synthetic data has no epochs)"},
        {"--warmup_epochs=0", "--warmup_epochs=0 needs --data_dir (synthetic data has no epochs)"},
        {"--lr_decay_policy=step --lr_decay_epochs=1", "--lr_decay_epochs=1 needs --data_dir (synthetic data has no epochs)"},
        {"--lr_decay_policy=step --lr_decay_rate=0.5",
         "--lr_decay_policy=step needs --data_dir (synthetic data has no epochs to decay at)"},
        {"--lr_decay_policy=step", "--lr_decay_policy=step needs --data_dir (synthetic data has no epochs to decay at)"},
        /* the input pipeline's settings, as --input_threads and --distort_color */
        {"--shuffle_buffer=5", "--shuffle_buffer needs --data_dir (synthetic data has no records to shuffle)"},
        {"--crop_area_min=0.5", "--crop_area_min needs --data_dir (synthetic data is not cropped)"},
    };
    refusals("--model=lenet --batch_size=8 --num_batches=1 --nstep_burnin=0", cases, sizeof cases / sizeof cases[0]);
    char dir[600], common[800];
    CHECK(tu_band_set(dir, sizeof dir, "cli-epochs", 40, 10, 10) == 0);
    snprintf(common, sizeof common, "--model=lenet --num_classes=10 --batch_size=10 --num_batches=2 --nstep_burnin=0 --data_dir=%s", dir);
    const char *const with_data[][2] = {
        {"--warmup_epochs=0.25 --lr_decay_policy=step --lr_decay_epochs=0.25 --lr_decay_rate=0.5", NULL},
        {"--shuffle_buffer=5 --crop_area_min=0.5", NULL},
    };
    refusals(common, with_data, sizeof with_data / sizeof with_data[0]);
}

/* The GPU backend's own settings on the CPU backend (asked for, or chosen without --device), and
 * the CPU backend's with --device=gpu: one line, before the line that says which backend runs, as
 * --data_format=NHWC. */
TEST(cli_one_backends_flags_on_the_other_are_refused) {
    const char *const cases[][2] = {
        {"--fuse=off", "--fuse=off needs the GPU backend (--device=gpu); it sets the GPU backend's fusion of batch norm with the ReLU and the add"},
        {"--device=cpu --fuse=on",
         "--fuse=on needs the GPU backend (--device=gpu); it sets the GPU backend's fusion of batch norm with the ReLU and the add"},
        {"--cuda_graph=off", "--cuda_graph=off needs the GPU backend (--device=gpu); the CPU backend runs no CUDA Graphs"},
        {"--device=cpu --cudnn_workspace_mb=4096",
         "--cudnn_workspace_mb=4096 needs the GPU backend (--device=gpu); the CPU backend does not use cuDNN"},
        {"--data_format=NHWC", "--data_format=NHWC needs the GPU backend (--device=gpu); the CPU backend computes in NCHW"},
        {"--device=gpu --cpu_impl=reference", "--cpu_impl=reference needs the CPU backend; --device=gpu uses the GPU backend"},
        {"--device=cpu --cpu_impl=reference --data_format=NCHW", NULL},
    };
    refusals("--model=lenet --batch_size=8 --num_batches=1 --nstep_burnin=0", cases, sizeof cases / sizeof cases[0]);
    /* --deterministic asks for what the CPU backend gives anyway: accepted, and the header says so */
    char *o = NULL;
    CHECK(nv("--model=lenet --device=cpu --batch_size=8 --num_batches=1 --nstep_burnin=0 --deterministic", &o) == 0);
    CHECK_MSG(o && strstr(o, "\nDeterministic: yes (the CPU backend: the same bits with the same flags, ranks and threads"), "%s", o);
    free(o);
}

/* The README's flag table is --help=markdown: the two cannot drift apart. */
TEST(cli_readme_flag_table_is_the_help) {
    char *o = NULL;
    CHECK(nv("--help=markdown", &o) == 0);
    char *readme = (char *)tu_read_file("README.md", NULL);
    CHECK(readme != NULL);
    const char *begin = readme ? strstr(readme, "<!-- flags: generated by ./nvcnn --help=markdown -->\n") : NULL;
    const char *end = begin ? strstr(begin, "<!-- end of flags -->") : NULL;
    CHECK_MSG(begin && end, "README.md has no generated flag table");
    if (begin && end && o) {
        begin = strchr(begin, '\n') + 1;
        CHECK_MSG((size_t)(end - begin) == strlen(o) && strncmp(begin, o, strlen(o)) == 0,
                  "README.md's flag table differs from ./nvcnn --help=markdown; put this between the markers:\n%s", o);
    }
    /* every flag of --help is in the table */
    char *h = NULL;
    CHECK(nv("--help", &h) == 0);
    for (const char *p = h; p && (p = strstr(p, "\n  -")); p++) {
        char flag[64];
        if (sscanf(p + 3, "%63[a-z_-]", flag) == 1 && o) CHECK_MSG(strstr(o, flag) != NULL, "--%s missing", flag);
    }
    CHECK(nv("--help=json", NULL) == 2);
    free(h);
    free(readme);
    free(o);
}

/* "Cmd line args:" lists each flag once with its value as given, under its long name (one-letter
 * flags and aliases included), in the order given; -h is --help. */
TEST(cli_args_echo_one_line_per_flag_and_dash_h) {
    char *o;
    int rc = nv("-m trivial -b 2 --num_iter 3 --noeval -mtrivial --learning_rate 0.5 --nstep_burnin=1", &o);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, o);
    CHECK_MSG(o && strstr(o, "Cmd line args:\n  --model=trivial\n  --batch_size=2\n  --num_iter=3\n  --noeval\n"
                             "  --model=trivial\n  --learning_rate=0.5\n  --nstep_burnin=1\nNum ranks:"),
              "%s", o);
    free(o);
    char *h = NULL;
    CHECK(nv("-h", &o) == 0 && nv("--help", &h) == 0);
    CHECK_MSG(o && h && strcmp(o, h) == 0 && strstr(o, "-h, --help"), "-h printed:\n%s", o);
    free(o);
    free(h);
}

/* nvcnn.py's spellings: -m, -b, -g 1, --noeval, --nofp16, --num_warmup_batches, --data_format */
TEST(cli_nvcnn_spellings) {
    char *o;
    int rc = nv("-m lenet -b 8 --num_batches 3 -g 1 --noeval --fp16 --nofp16 --num_warmup_batches=1 --data_format=NCHW", &o);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, o);
    CHECK_MSG(o && strstr(o, "Model:       lenet\n") && strstr(o, "Batch size:  8 per device\n") &&
                  strstr(o, "Data type:   fp32\n") && strstr(o, "(2 timed steps: too few for an error estimate)"),
              "%s", o);
    free(o);
    CHECK(nv("-mlenet -b8 --num_batches=1", &o) == 0);
    free(o);
    const char *bad[][2] = {{"-m lenet -b 0", "--batch_size=0"},
                            {"-m lenet --data_format=NHWC", "--data_format=NHWC"},
                            {"-m lenet --data_format=nhwc", "--data_format=nhwc"},
                            {"-m lenet --summary_interval=-1", "--summary_interval=-1"},
                            /* nvcnn.py's flag not provided here, and its empty --log_dir (its default): said as such */
                            {"-m lenet --use_placeholder", "unknown flag --use_placeholder: nvcnn.py's placeholder input is not provided here"},
                            {"-m lenet --log_dir=", "--log_dir=: empty path (an unset shell variable?); leave the flag out for none"},
                            /* what --log_dir alone holds, without it: refused, not ignored */
                            {"-m lenet --summary_interval=60", "--summary_interval=60 needs --log_dir: without it no TensorBoard summaries are written"},
                            {"-m lenet --save_interval 60", "--save_interval=60 needs --log_dir: without it no checkpoints are written"},
                            {"-m lenet -x", "unknown flag -x"},
                            {"-m", "needs a value"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = nv(bad[i][0], &o);
        CHECK_MSG(rc == 2 && strstr(o, bad[i][1]) && count_lines_with(o, "\n") == 1, "'%s': exit %d: %s", bad[i][0], rc, o);
        free(o);
    }
}

/* A long flag with one dash, which getopt_long reads as a one-letter flag and its value
 * (-batch_size=4 as -b "atch_size=4"), and a one-letter flag with '=' (-b=4 as -b "=4"): one line
 * with the spelling to use, for every one-letter flag. A path that starts with a dash, given as
 * the next word, is refused as a flag taken for a value (cli_careless_inputs_are_named); with '='
 * it is a path. */
TEST(cli_one_dash_long_flags_and_one_letter_flags_with_equals) {
    const char *cases[][2] = {
        {"--model=lenet -batch_size=4", "-batch_size=4: unknown flag (long flags take two dashes: --batch_size=4)"},
        {"--model=lenet -num_batches=3", "-num_batches=3: unknown flag (long flags take two dashes: --num_batches=3)"},
        {"--model=lenet -batch 4", "-batch: unknown flag (long flags take two dashes: --batch_size)"},
        {"-model=lenet", "-model=lenet: unknown flag (long flags take two dashes: --model=lenet)"},
        {"--model=lenet -help", "-help: unknown flag (long flags take two dashes: --help)"},
        {"--model=lenet -b=4", "-b=4: a one-letter flag takes no '=': -b 4, -b4 or --batch_size=4"},
        {"-m=lenet", "-m=lenet: a one-letter flag takes no '=': -m lenet, -mlenet or --model=lenet"},
        {"--model=lenet -g=1", "-g=1: a one-letter flag takes no '=': -g 1, -g1 or --num_gpus=1"},
        {"--model=lenet -h=markdown", "-h=markdown: -h takes no value (--help=markdown)"},
        {"-m lenet -xy", "unknown flag -x (see --help)"},
        {"--model lenet --data_dir -batch_size=4", "flag --data_dir needs a value (--flag=value or --flag value); it was followed by "
                                                   "-batch_size=4 (a path of that name: --data_dir=./-batch_size=4)"},
        {"--model lenet --data_dir=-batch_size=4", "data directory -batch_size=4: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[256], *o;
        snprintf(want, sizeof want, "nvcnn: error: %s", cases[i][1]);
        int rc = nv(cases[i][0], &o);
        const char *e = o ? strstr(o, "nvcnn: error: ") : NULL;
        CHECK_MSG(rc == 2 && e && strncmp(e, want, strlen(want)) == 0 && count_lines_with(e, "\n") == 1, "'%s': exit %d: %s",
                  cases[i][0], rc, o);
        free(o);
    }
}

/* A flag given twice, or with its alias: the last one wins (wrapper scripts append their caller's
 * flags to their own), with one warning line first where the two differ; none where they agree. */
TEST(cli_a_flag_given_twice_warns_when_the_values_differ) {
    const char *cases[][3] = {
        {"--num_batches=2 --model=lenet --model=trivial", "nvcnn: warning: --model given twice (lenet, then trivial): using trivial\n", "Model:       trivial\n"},
        {"-m lenet --model=trivial --num_batches=3 --num_iter=2",
         "nvcnn: warning: --model given twice (lenet, then trivial): using trivial\n"
         "nvcnn: warning: --num_batches given twice (--num_batches=3, then --num_iter=2): using 2\n",
         "\n     2     1 "},
        {"--num_batches=2 --model=trivial --learning_rate=0.1 --learning_rate=0.5",
         "nvcnn: warning: --learning_rate given twice (0.1, then 0.5): using 0.5\n", "Learning rate: 0.5 (given)\n"},
        {"--num_batches=2 --model=trivial --nesterov --nonesterov", "nvcnn: warning: --nesterov given twice (--nesterov, then --nonesterov): using --nonesterov\n",
         "Cmd line args:"},
        {"--num_batches=2 --model=trivial --loss_scale=dynamic --loss_scale=65536",
         "nvcnn: warning: --loss_scale given twice (dynamic, then 65536): using 65536\n", "Loss scale:  65536\n"},
        {"--model=trivial -mtrivial --num_batches=2 --num_iter=2 --batch_size=2 -b 02 --precision=fp32 --nofp16", "", "Model:       trivial\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], *o;
        snprintf(args, sizeof args, "--batch_size=2 --nstep_burnin=0 %s", cases[i][0]);
        const int rc = nv(args, &o);
        const char *rest = o && strncmp(o, cases[i][1], strlen(cases[i][1])) == 0 ? o + strlen(cases[i][1]) : NULL;
        CHECK_MSG(rc == 0 && rest && !strstr(rest, "nvcnn: ") && strstr(rest, cases[i][2]), "'%s': exit %d: %s", cases[i][0], rc, o);
        free(o);
    }
}

/* -g N > 1: one line with the equivalent mpirun command (one process per GPU), on the GPU backend
 * (the command used to leave --device out: its ranks ran on the CPU, and with --fp16 it failed);
 * a --device given stays as given; under mpirun, N GPUs for each of its ranks. */
TEST(cli_num_gpus_above_one_names_the_mpirun_command) {
    char *o, mr[200], cmd[600];
    CHECK(nv("-m resnet50 -g 4 -b 64 --num_batches=10 --fp16", &o) == 2);
    CHECK_MSG(o && count_lines_with(o, "\n") == 1 && strstr(o, "one process per GPU") &&
                  strstr(o, "mpirun -np 4 ./nvcnn -m resnet50 -b 64 --num_batches=10 --fp16 --device=gpu\n"),
              "%s", o);
    free(o);
    CHECK(nv("--model=lenet --num_gpus=2", &o) == 2);
    CHECK_MSG(o && strstr(o, "mpirun -np 2 ./nvcnn --model=lenet --device=gpu\n"), "%s", o);
    free(o);
    CHECK(nv("--model=lenet --device=cpu -g 2", &o) == 2);
    CHECK_MSG(o && strstr(o, "mpirun -np 2 ./nvcnn --model=lenet --device=cpu\n"), "%s", o);
    free(o);
    /* a value a shell would split or expand, quoted so that the command can be pasted */
    CHECK(th_run("./nvcnn --model=lenet -g 2 '--log_dir=my run' \"--data_dir=/d/it's\" 2>&1", &o) == 2);
    CHECK_MSG(o && strstr(o, "mpirun -np 2 ./nvcnn --model=lenet '--log_dir=my run' '--data_dir=/d/it'\\''s' --device=gpu\n"), "%s", o);
    free(o);
    if (!tu_mpirun(2, mr, sizeof mr)) return;
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet -g 2 2>&1", mr);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "nvcnn: error: --num_gpus=2: nvcnn runs one process per GPU; for 2 ranks x 2 GPUs run: mpirun -np 4 ./nvcnn "
                             "--model=lenet --device=gpu\n"),
              "%s", o);
    free(o);
}

/* nvcnn.py's defaults: 50 batches; ResNets' learning rate 1.0 x total batch / 1024 */
TEST(cli_nvcnn_defaults) {
    char *o;
    CHECK(nv("--model=trivial --batch_size=1 --display_every=1000", &o) == 0);
    CHECK_MSG(o && strstr(o, "\n    50     1 ") && !strstr(o, "\n    51 ") && strstr(o, "Images/sec: "), "%s", o);
    free(o);
    CHECK(nv("--model=resnet18 --batch_size=2 --num_batches=1", &o) == 0);
    CHECK_MSG(o && strstr(o, "Learning rate: 0.00195312 (model default)\n"), "%s", o);
    free(o);
}

/* --num_epochs overrides --num_batches (nvcnn.py's rule) */
TEST(cli_num_epochs_overrides_num_batches) {
    char data[600], cmd[900], *o;
    if (train_only_data(data, sizeof data) != 0) return;
    /* 60000 images x 0.01 epoch / 60 per step = 10 steps, whatever --num_batches says */
    snprintf(cmd, sizeof cmd, "--model=lenet --num_classes=10 --data_dir=%s --batch_size=60 --num_epochs=0.01 --num_batches=3 --display_every=5",
             data);
    int rc = nv(cmd, &o);
    CHECK_MSG(rc == 0 && strstr(o, "\n    10     1 ") && !strstr(o, "\n     3     1 "), "exit %d: %s", rc, o);
    free(o);
}

/* A run length far beyond what a run reaches (4e9 steps, inside --num_batches' range) allocates
 * nothing by it: the run starts, trains and, stopped by SIGTERM, prints its speed summary (it used
 * to end at once with "out of host memory allocating 32000000000 bytes"). */
TEST(cli_a_huge_run_length_starts_and_stops_cleanly) {
    char *o = NULL;
    const int rc = th_run("timeout --preserve-status -s TERM 4 ./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=4000000000 --nstep_burnin=2 "
                          "--display_every=1 2>&1", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Received SIGTERM") && strstr(o, "\nImages/sec: ") && !strstr(o, "out of host memory"),
              "exit %d:\n%s", rc, o);
    free(o);
}

/* fp32 steps whose gradients are inf or nan (a learning rate far too high) are skipped, which
 * leaves the loss column frozen: the run says the training diverged, not only how many were
 * skipped, and says it at the rows as it happens (it used to say it only at the end of the run),
 * the rows' counts adding up to the run's. */
TEST(cli_diverged_training_is_said) {
    char *o = NULL;
    const int rc = nv("--model=lenet --batch_size=2 --num_batches=6 --display_every=2 --learning_rate=1e9", &o);
    const char *w = o ? strstr(o, "Skipped steps (inf/nan gradients): ") : NULL;
    int n = 0;
    CHECK_MSG(rc == 0 && w && sscanf(w, "Skipped steps (inf/nan gradients): %d", &n) == 1 && n >= 3, "exit %d: %s", rc, o);
    char want[200];
    snprintf(want, sizeof want, "nvcnn: warning: %d of the run's steps had inf or nan gradients and did not update the parameters: the training diverged (a lower --learning_rate)\n", n);
    CHECK_MSG(o && strstr(o, want), "want %s in: %s", want, o);
    long said = 0, rows = 0, last = -1;
    for (const char *p = o; p && (p = strstr(p, "nvcnn: warning: step")); p++) {
        long a, b, k;
        if (sscanf(p, "nvcnn: warning: steps %ld-%ld: %ld had inf or nan gradients", &a, &b, &k) == 3 && a > last && b >= a &&
            k <= b - a + 1)
            last = b;
        else if (sscanf(p, "nvcnn: warning: step %ld had inf or nan gradients", &a) == 1 && a > last)
            last = a, k = 1;
        else
            k = -1000;
        said += k;
        rows++;
    }
    CHECK_MSG(rows >= 2 && said == n && strstr(o, "in the run): the training is diverging (a lower --learning_rate)\n"),
              "%ld warnings at the rows saying %ld skipped steps, want %d:\n%s", rows, said, n, o);
    free(o);
    /* a loss past 1e6 keeps the column's width: 1.407e+72, not 73 digits */
    char *d = NULL;
    const int rc2 = th_run("./nvcnn --model=lenet --device=cpu --num_classes=10 --data_dir=data/fashion-mnist --batch_size=16 --num_batches=4 "
                "--display_every=1 --learning_rate=1e9 --noeval 2>&1",
                &d);
    const char *row = d ? strstr(d, "\n     4     1 ") : NULL;
    CHECK_MSG(rc2 == 0 && row && strstr(row, "e+") && strstr(row, "e+") < strchr(row + 1, '\n'), "the last row's loss:\n%s", d);
    free(d);
}

/* A warmup longer than the run: the learning rate never reaches its value, and the run says so
 * with the rate it ends at (40 images, 10 a step: 4 steps an epoch; 8 steps of warmup, 2 run). */
TEST(cli_warmup_longer_than_the_run_is_said) {
    char dir[600], cmd[1200], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "cli-warmup", 40, 10, 10) == 0);
    snprintf(cmd, sizeof cmd, "--model=lenet --num_classes=10 --batch_size=10 --num_batches=2 --learning_rate=0.08 --warmup_epochs=2 --data_dir=%s", dir);
    CHECK(nv(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "nvcnn: warning: --warmup_epochs=2 is 8 steps, longer than this run (2): the learning rate never reaches 0.08 (it ends at 0.02)"),
              "%s", o);
    free(o);
}

/* --forward_only: inference steps, said in the header; no learning rate, no checkpoint */
TEST(cli_forward_only_benchmark) {
    char *o, cmd[800];
    int rc = nv("--model=lenet --batch_size=4 --num_batches=4 --num_warmup_batches=1 --forward_only", &o);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, o);
    CHECK_MSG(o && strstr(o, "Mode:        forward only") && strstr(o, "Forward only\n  Step Epoch Img/sec   Loss\n") &&
                  strstr(o, "\n     4     1 ") && !strstr(o, "Learning rate:") && !strstr(o, "Checkpoint written") &&
                  strstr(o, "Images/sec: "),
              "%s", o);
    free(o);
    /* a --log_dir without a checkpoint (a mistyped one): refused, nothing created (it benchmarked
     * the initial weights, and created the folder) */
    snprintf(cmd, sizeof cmd, "--model=lenet --batch_size=4 --num_batches=4 --forward_only --log_dir=%s/fwd-typo", th_tmpdir());
    rc = nv(cmd, &o);
    char typo[600];
    snprintf(typo, sizeof typo, "%s/fwd-typo", th_tmpdir());
    CHECK_MSG(rc == 2 && o && strstr(o, "nvcnn: error: --forward_only: --log_dir=") && access(typo, F_OK) != 0, "exit %d: %s", rc, o);
    free(o);
    /* after training into that --log_dir: the checkpoint's weights, and the benchmark's own steps
     * (it used to take the checkpoint's step for steps done and run none) */
    snprintf(cmd, sizeof cmd, "--model=lenet --batch_size=4 --num_batches=6 --log_dir=%s/fwd", th_tmpdir());
    CHECK(nv(cmd, &o) == 0);
    free(o);
    /* ... which leaves the training's metrics.csv and event files as they were (its rows, from step
     * 1, were appended to them), and whose Loss column starts from its own losses (it went on from
     * the training's running average): lenet's one synthetic batch has the same loss every step */
    char csv[600], ls[700], *before = NULL, *after = NULL, *files0 = NULL, *files1 = NULL;
    size_t n0 = 0, n1 = 0;
    snprintf(csv, sizeof csv, "%s/fwd/metrics.csv", th_tmpdir());
    snprintf(ls, sizeof ls, "ls %s/fwd | grep -c events.out", th_tmpdir());
    before = (char *)tu_read_file(csv, &n0);
    th_run(ls, &files0);
    snprintf(cmd, sizeof cmd, "--model=lenet --batch_size=4 --num_batches=4 --num_warmup_batches=1 --display_every=1 --forward_only --log_dir=%s/fwd",
             th_tmpdir());
    rc = nv(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "/fwd/ckpt-6.nvcnn at step 6") &&
                  strstr(o, "(--forward_only: the checkpoint's weights, 4 inference steps from step 1; nothing is written to --log_dir)") &&
                  strstr(o, "\n     4     1 ") && strstr(o, "Images/sec: ") && !strstr(o, "Checkpoint written"),
              "exit %d: %s", rc, o);
    after = (char *)tu_read_file(csv, &n1);
    th_run(ls, &files1);
    CHECK_MSG(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "metrics.csv changed by --forward_only:\n%.*s", (int)n1,
              after ? after : "");
    CHECK_MSG(files0 && files1 && strcmp(files0, files1) == 0, "event files: %s before, %s after", files0 ? files0 : "?", files1 ? files1 : "?");
    const char *r1 = o ? strstr(o, "\n     1     1 ") : NULL, *r4 = o ? strstr(o, "\n     4     1 ") : NULL;
    double l1 = -1, l4 = -2, rate;
    long a, b;
    if (r1) sscanf(r1, "%ld %ld %lf %lf", &a, &b, &rate, &l1);
    if (r4) sscanf(r4, "%ld %ld %lf %lf", &a, &b, &rate, &l4);
    CHECK_MSG(l1 == l4 && l1 > 0, "Loss column: step 1 %.3f, step 4 %.3f (the same batch, the same loss)", l1, l4);
    free(o), free(before), free(after), free(files0), free(files1);
}

/* OpenMP's idle threads spin 1,000 rounds before they sleep unless the user chose otherwise
 * (libgomp's own default, 300,000, holds the cores a shared machine's other processes need):
 * libgomp itself reports the setting it runs with (OMP_DISPLAY_ENV, printed when it loads: once
 * before nvcnn runs itself again with the setting, once after), and the header says it. */
static const char *last_spincount(const char *o) {
    const char *last = NULL;
    for (const char *p = o; (p = strstr(p, "GOMP_SPINCOUNT = '")); p++) last = p + strlen("GOMP_SPINCOUNT = '");
    return last;
}

TEST(cli_openmp_threads_spin_briefly_unless_told_otherwise) {
    char *o;
    const char *run = "OMP_DISPLAY_ENV=verbose ./nvcnn --model=trivial --batch_size=2 --num_batches=1";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT %s", run);
    CHECK(th_run(cmd, &o) == 0);
    const char *spin = o ? last_spincount(o) : NULL;
    CHECK_MSG(spin && strncmp(spin, "1000'", 5) == 0, "%s", o);
    CHECK_MSG(o && strstr(o, ", GOMP_SPINCOUNT=1000)\n"), "%s", o);
    free(o);
    /* the user's settings win, and nvcnn adds nothing to them */
    snprintf(cmd, sizeof cmd, "env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=20000 %s", run);
    CHECK(th_run(cmd, &o) == 0);
    spin = o ? last_spincount(o) : NULL;
    CHECK_MSG(spin && strncmp(spin, "20000'", 6) == 0, "%s", o);
    CHECK_MSG(o && strstr(o, ", GOMP_SPINCOUNT=20000)\n"), "%s", o);
    free(o);
    snprintf(cmd, sizeof cmd, "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive %s", run);
    CHECK(th_run(cmd, &o) == 0);
    spin = o ? last_spincount(o) : NULL;
    CHECK_MSG(spin && strncmp(spin, "0'", 2) == 0, "%s", o); /* passive: no spinning */
    CHECK_MSG(o && strstr(o, ", OMP_WAIT_POLICY=passive)\n") && !strstr(o, "GOMP_SPINCOUNT=1000"), "%s", o);
    free(o);
}

/* Threads: OMP_NUM_THREADS when set; else the CPUs a launcher bound the process to */
/* alone: run beside other tests it would be given OMP_NUM_THREADS, which outranks the binding it checks */
TEST_SERIAL(cli_threads_follow_omp_num_threads_and_cpu_binding) {
    char *o;
    CHECK(th_run("OMP_NUM_THREADS=3 ./nvcnn --model=trivial --batch_size=2 --num_batches=1", &o) == 0);
    CHECK_MSG(o && strstr(o, "Devices:     cpu (3 threads"), "%s", o);
    free(o);
    CHECK(th_run("taskset -c 0 ./nvcnn --model=trivial --batch_size=2 --num_batches=1", &o) == 0);
    CHECK_MSG(o && strstr(o, "Devices:     cpu (1 thread"), "%s", o);
    free(o);
    /* a Slurm task that Slurm did not bind: the CPUs it was given (--cpus-per-task) */
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1) {
        CHECK(th_run("env -u OMP_NUM_THREADS SLURM_CPUS_PER_TASK=1 ./nvcnn --model=trivial --batch_size=2 --num_batches=1", &o) == 0);
        CHECK_MSG(o && strstr(o, "Devices:     cpu (1 thread"), "%s", o);
        free(o);
    }
}

/* --print_layers alone prints the layer table and trains nothing (it used to train the default 50
 * steps after it: resnet50 for minutes on a CPU); with a run length it trains as asked. */
TEST(cli_print_layers_alone_trains_nothing) {
    char *o = NULL;
    int rc = nv("--model=resnet50 --print_layers", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Layers:      (GFLOPs: each layer's forward pass over one batch of 64)\n") && strstr(o, "fc0 ") &&
                  strstr(o, "(--print_layers without --num_batches or --num_epochs: nothing trained)\n") &&
                  !strstr(o, "Training\n") && !strstr(o, "Images/sec"),
              "exit %d:\n%s", rc, o);
    free(o);
    rc = nv("--model=lenet --print_layers --num_batches=2 --batch_size=4 --nstep_burnin=0", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Layers:      (") && strstr(o, "Training\n") && strstr(o, "Images/sec"), "exit %d:\n%s", rc, o);
    /* the Total line: the rows' parameters exactly, their GFLOPs within the rows' rounding; lenet
     * at batch 4: 2 x (conv0 28x28x32x75 + conv1 14x14x64x800 + fc0 3136x512 + fc1 512x1000) x 4
     * multiply-adds and the layers' elementwise work, about 0.1 GFLOPs */
    size_t params = 0, rows = 0, total_p = 0;
    double gf = 0, total_gf = -1, per_image = -1;
    for (const char *p = o ? strstr(o, "Layers:") : NULL; p && (p = strchr(p, '\n')) != NULL;) {
        p++;
        const char *pp = strstr(p, " params "), *nl = strchr(p, '\n');
        if (strncmp(p, "Total:", 6) == 0) {
            CHECK(sscanf(p, "Total: %zu parameters, %lf GFLOPs a forward pass of the batch (%lf an image)", &total_p, &total_gf, &per_image) == 3);
            break;
        }
        if (!pp || (nl && pp > nl)) continue;
        size_t np;
        double g;
        if (sscanf(pp, " params %zu %lf GFLOPs", &np, &g) == 2) params += np, gf += g, rows++;
    }
    CHECK_MSG(rows == 11 && total_p == params && total_p == 2172840 && fabs(total_gf - gf) <= 0.0005 * (double)rows &&
                  fabs(per_image * 4 - total_gf) <= 0.002 && total_gf > 0.05 && total_gf < 0.2,
              "%zu rows, parameters %zu (total %zu), GFLOPs %.3f (total %.3f, %.3f an image)\n%s", rows, params, total_p, gf, total_gf,
              per_image, o ? o : "");
    free(o);
    rc = nv("--model=lenet --print_layers --profile=/tmp/nvcnn-layers.json", &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "--profile with --print_layers alone, which trains nothing"), "exit %d:\n%s", rc, o);
    free(o);
}

/* Under mpirun every rank parses the same command line: its error is one line (rank 0's), not one
 * per rank, and --help is printed once. */
TEST(cli_errors_under_mpirun_are_said_once) {
    char mr[200], cmd[600], *o = NULL;
    if (!tu_mpirun(3, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet --batch_size=abc 2>&1", mr);
    int rc = th_run(cmd, &o);
    const char *line = "nvcnn: error: --batch_size=abc: not an integer\n", *first = o ? strstr(o, line) : NULL;
    CHECK_MSG(rc == 2 && first && !strstr(first + 1, line), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --help", mr);
    rc = th_run(cmd, &o);
    first = o ? strstr(o, "Usage: nvcnn ") : NULL;
    CHECK_MSG(rc == 0 && first && !strstr(first + 1, "Usage: nvcnn "), "exit %d:\n%s", rc, o);
    free(o);
    /* errors every rank meets alike after the command line (each rank used to print its own line,
     * or "see rank 0"): rank 0's line alone */
    const char *alike[][2] = {
        {"--data_dir=/nonexistent-nvcnn-data", "nvcnn: error: data directory /nonexistent-nvcnn-data: No such file or directory\n"},
        {"--allreduce=nccl --device=cpu", "nvcnn: error: --allreduce=nccl needs the GPU backend"},
        {"--eval --data_dir=data/fashion-mnist --log_dir=tests", "nvcnn: error: --eval: no checkpoint in --log_dir=tests"},
    };
    for (size_t k = 0; k < sizeof alike / sizeof alike[0]; k++) {
        snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet --num_classes=10 %s 2>&1", mr, alike[k][0]);
        rc = th_run(cmd, &o);
        first = o ? strstr(o, "nvcnn: error: ") : NULL;
        CHECK_MSG(rc == 2 && first && strstr(o, alike[k][1]) && !strstr(first + 1, "nvcnn: error: "), "'%s': exit %d:\n%s", alike[k][0], rc, o);
        free(o);
    }
}

/* --log_dir that cannot be what it should: named for what it is before anything runs. A path so
 * long that its files' paths would not fit (it trained, then lost its checkpoint, its event file's
 * name cut short), a dangling symbolic link ("not a directory"), and, for --eval and --export_onnx,
 * a folder that does not exist or a file (it said "no checkpoint in", as if checkpoints were lost). */
TEST(cli_log_dirs_that_cannot_be_are_named) {
    char dir[700], cmd[6000], want[6000], *o = NULL;
    snprintf(dir, sizeof dir, "%s", th_tmpdir());
    char *longdir = malloc(4000);
    int n = snprintf(longdir, 4000, "%s/long", dir);
    while (n < 3850) n += snprintf(longdir + n, 4000 - (size_t)n, "/%.200s", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=2 --log_dir=%s 2>&1", longdir);
    int rc = th_run(cmd, &o);
    snprintf(want, sizeof want, " characters long: the paths of the files written there would pass 4095\n");
    CHECK_MSG(rc == 2 && o && strstr(o, "nvcnn: error: --log_dir=") && strstr(o, want) && !strstr(o, "Training"), "exit %d:\n%s", rc, o);
    free(o);
    free(longdir);
    snprintf(cmd, sizeof cmd, "ln -sfn %s/nowhere %s/dangling && ./nvcnn --model=lenet --device=cpu --num_batches=2 --log_dir=%s/dangling 2>&1", dir,
             dir, dir);
    rc = th_run(cmd, &o);
    snprintf(want, sizeof want, "nvcnn: error: --log_dir=%s/dangling is a dangling symbolic link (to %s/nowhere, which does not exist)\n", dir, dir);
    CHECK_MSG(rc == 2 && o && strstr(o, want), "exit %d:\n%s", rc, o);
    free(o);
    const char *what[][2] = {{"--eval --data_dir=data/fashion-mnist --num_classes=10", "--eval"}, {"--export_onnx=%s/x.onnx", "--export_onnx"}};
    const char *where[][2] = {{"%s/absent", "does not exist"}, {"README.md", "is not a directory"}, {"%s/dangling", "is a dangling symbolic link"}};
    for (int k = 0; k < 2; k++)
        for (int w = 0; w < 3; w++) {
            char flag[800], ld[800];
            snprintf(flag, sizeof flag, what[k][0], dir);
            snprintf(ld, sizeof ld, where[w][0], dir);
            snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu %s --log_dir=%s 2>&1", flag, ld);
            rc = th_run(cmd, &o);
            snprintf(want, sizeof want, "nvcnn: error: %s: --log_dir=%s %s", what[k][1], ld, where[w][1]);
            if (w == 2) /* the link's target named too */
                snprintf(want + strlen(want), sizeof want - strlen(want), " (to %s/nowhere, which does not exist)", dir);
            snprintf(want + strlen(want), sizeof want - strlen(want), "\n");
            CHECK_MSG(rc == 2 && o && strstr(o, want), "exit %d, want '%s':\n%s", rc, want, o);
            free(o);
        }
}

/* Inputs a careless command line or environment gives, each refused with one line naming it (exit
 * 2) or warned about, where they used to be taken silently as something else:
 *   - a path flag followed by a word that is a flag, "-" or "--" (it became the file's name, and
 *     the flag meant was dropped);
 *   - OMP_NUM_THREADS that libgomp calls invalid (nvcnn read "8x" as 8 and "1e3" as 1);
 *   - the oneDNN plan's comparison switches with a value they do not know (ignored), and an
 *     ONEDNN_MAX_CPU_ISA oneDNN does not know (ignored by oneDNN: no cap);
 *   - --profile_steps whose last step overflows; an empty value; a misspelt flag (a suggestion);
 *   - -g N's command with abbreviated flags (it kept --num_gpu=2 and added --device=gpu after --dev=cpu);
 *   - --num_batches beside --num_epochs (unused: said), --num_classes=1 (nothing trains: said). */
TEST(cli_careless_inputs_are_named) {
    static const struct {
        const char *env, *args;
        int rc;
        const char *want;
    } c[] = {
        {"", "--model=lenet --num_batches=1 --profile -b8", 2,
         "nvcnn: error: flag --profile needs a value (--flag=value or --flag value); it was followed by -b8 (a path of that name: --profile=./-b8)\n"},
        {"", "--model=lenet --num_batches=1 --export_onnx -", 2, "it was followed by - (a path of that name: --export_onnx=./-)\n"},
        {"", "--model=lenet --num_batches=1 --log_dir --", 2, "flag --log_dir needs a value"},
        {"OMP_NUM_THREADS=8x", "--model=lenet --num_batches=1", 2,
         "nvcnn: error: OMP_NUM_THREADS=8x: not a thread count (a positive integer, e.g. OMP_NUM_THREADS="},
        {"OMP_NUM_THREADS=1e3", "--model=lenet --num_batches=1", 2, "nvcnn: error: OMP_NUM_THREADS=1e3: not a thread count"},
        {"OMP_NUM_THREADS=0", "--model=lenet --num_batches=1", 2, "nvcnn: error: OMP_NUM_THREADS=0: not a thread count"},
        {"OMP_NUM_THREADS=1,1", "--model=lenet --num_batches=1 --batch_size=2", 0, "Devices:     cpu (1 thread"},
        {"OMP_NUM_THREADS=", "--model=lenet --num_batches=1 --batch_size=2", 2, "nvcnn: error: OMP_NUM_THREADS=: not a thread count"},
        {"OMP_NUM_THREADS=2,", "--model=lenet --num_batches=1 --batch_size=2", 2, "nvcnn: error: OMP_NUM_THREADS=2,: not a thread count"},
        {"OMP_NUM_THREADS=+1", "--model=lenet --num_batches=1 --batch_size=2", 0, "Devices:     cpu (1 thread"},
        {"OMP_NUM_THREADS=100000", "--model=lenet --num_batches=1", 2, "nvcnn: error: OMP_NUM_THREADS=100000: more than 16 threads a CPU"},
        {"NVCNN_ONEDNN_WINOGRAD=OFF", "--model=lenet --num_batches=1 --device=cpu", 2,
         "nvcnn: error: NVCNN_ONEDNN_WINOGRAD=OFF: expected on or off\n"},
        {"NVCNN_ONEDNN_BN_STATS=1", "--model=lenet --num_batches=1 --device=cpu", 2,
         "nvcnn: error: NVCNN_ONEDNN_BN_STATS=1: expected onednn or own\n"},
        {"ONEDNN_MAX_CPU_ISA=AVX1", "--model=lenet --num_batches=1 --device=cpu", 2,
         "nvcnn: error: ONEDNN_MAX_CPU_ISA=AVX1: not an instruction set oneDNN "},
        {"", "--model=lenet --num_batches=4 --profile=p.json --profile_steps=9223372036854775807:2", 2,
         "nvcnn: error: --profile_steps=9223372036854775807:2: N + K - 1 is past the last step a run can have\n"},
        {"", "--model=lenet --batch_size=", 2, "nvcnn: error: --batch_size=: an empty value (--help says what it takes)\n"},
        {"", "--model=lenet --batch-size=2", 2, "nvcnn: error: unknown flag --batch-size: did you mean --batch_size? (see --help)\n"},
        {"", "--model=lenet --forwrd_only", 2, "nvcnn: error: unknown flag --forwrd_only: did you mean --forward_only? (see --help)\n"},
        {"", "--model=lenet --nofuse", 2, "nvcnn: error: unknown flag --nofuse: did you mean --fuse=off? (see --help)\n"},
        {"", "--model=lenet --noverbose", 2, "nvcnn: error: unknown flag --noverbose: --verbose is off unless given (leave it out) (see --help)\n"},
        {"", "--model=lenet --xyzzy", 2, "nvcnn: error: unknown flag --xyzzy (see --help)\n"},
        {"", "--model=lenet --num_batches=1 --num_gpu=2", 2,
         "run: mpirun -np 2 ./nvcnn --model=lenet --num_batches=1 --device=gpu\n"},
        {"", "--model=lenet --num_batches=1 -g 2 --dev=cpu", 2, "run: mpirun -np 2 ./nvcnn --model=lenet --num_batches=1 --dev=cpu\n"},
        {"", "--model=lenet --num_batches=1 --num_g 2 --log_dir /x", 2,
         "run: mpirun -np 2 ./nvcnn --model=lenet --num_batches=1 --log_dir /x --device=gpu\n"},
        {"", "--model=lenet --num_classes=10 --data_dir=data/fashion-mnist --noeval --num_epochs=0.0001 --num_batches=2 --batch_size=2", 0,
         "nvcnn: warning: --num_batches=2 is left unused: --num_epochs=0.0001 sets the run's length (it overrides --num_batches, as in "
         "nvcnn.py)\n"},
        {"", "--model=lenet --num_classes=1 --num_batches=1 --batch_size=2", 0,
         "nvcnn: warning: --num_classes=1: the softmax of one class is 1 whatever the logits, so the loss is 0 and nothing trains"},
    };
    const int dnn = onednn_built();
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        if (!dnn && (strstr(c[i].env, "ONEDNN") || strstr(c[i].env, "NVCNN_ONEDNN"))) continue;
        char cmd[1024], *o = NULL;
        snprintf(cmd, sizeof cmd, "env %s ./nvcnn %s 2>&1", c[i].env, c[i].args);
        const int rc = th_run(cmd, &o);
        CHECK_MSG(rc == c[i].rc && o && strstr(o, c[i].want), "%s: exit %d (want %d), want \"%s\" in:\n%s", cmd, rc, c[i].rc, c[i].want,
                  o ? o : "");
        free(o);
    }
    unlink("p.json");
    /* an instruction set that a later oneDNN knows, given to 2.x (which would ignore it) */
    if (dnn && onednn_version() <= 206) {
        char *o = NULL;
        const int rc = th_run("ONEDNN_MAX_CPU_ISA=AVX2_VNNI_2 ./nvcnn --model=lenet --num_batches=1 --device=cpu 2>&1", &o);
        CHECK_MSG(rc == 2 && o && strstr(o, "nvcnn: error: ONEDNN_MAX_CPU_ISA=AVX2_VNNI_2: not an instruction set oneDNN 2."),
                  "exit %d:\n%s", rc, o ? o : "");
        free(o);
    }
    /* the warnings of a run that trains are not given where nothing trains (--print_layers alone) */
    char *o = NULL;
    const int rc = th_run("./nvcnn --model=resnet18 --image_size=32 --batch_size=1 --num_classes=1 --print_layers --device=cpu 2>&1", &o);
    CHECK_MSG(rc == 0 && o && !strstr(o, "warning"), "exit %d:\n%s", rc, o ? o : "");
    free(o);
}

/* A batch that does not fit in host memory: exit 3 (as on the GPU), naming the model, the batch
 * and the image size, where it was "out of host memory allocating N bytes", exit 1. Batch norm over
 * one value a channel (its output its bias alone) and over a few (the divergence warnings name
 * it beside the learning rate). */
TEST(cli_host_memory_and_tiny_batch_norm_are_named) {
    char *o = NULL;
    int rc = th_run("bash -c 'ulimit -v 4000000; exec env OMP_NUM_THREADS=1 ./nvcnn --model=vgg16 --batch_size=512 --num_batches=1 --device=cpu' 2>&1", &o);
    CHECK_MSG(rc == 3 && o &&
                  strstr(o, "GiB) could not be allocated for --model=vgg16 --batch_size=512 at 224x224: its 138357544 parameters take 0.52 GiB "
                            "a copy (weights, gradients, momentum), its activations grow with the batch (a smaller --batch_size needs less)\n"),
              "exit %d:\n%s", rc, o ? o : "");
    free(o);
    /* the parameters alone do not fit: no smaller batch is suggested (it is 1) */
    rc = th_run("bash -c 'ulimit -v 2000000; exec env OMP_NUM_THREADS=1 ./nvcnn --model=vgg16 --batch_size=1 --num_batches=1 --device=cpu' 2>&1", &o);
    CHECK_MSG(rc == 3 && o && strstr(o, "--model=vgg16 --batch_size=1 at 224x224: its 138357544 parameters take 0.52 GiB a copy") &&
                  !strstr(o, "smaller --batch_size"),
              "exit %d:\n%s", rc, o ? o : "");
    free(o);
    rc = nv("--model=resnet18 --image_size=32 --batch_size=1 --num_batches=1 --num_classes=10 --device=cpu 2>&1", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "normalises each channel over 1 value (--batch_size=1 at 32x32: its maps are 1x1): its output is its "
                                         "bias alone, the logits do not depend on the image and nothing trains; a larger --batch_size or "
                                         "--image_size\n"),
              "exit %d:\n%s", rc, o ? o : "");
    free(o);
    rc = nv("--model=resnet50 --image_size=5 --batch_size=2 --num_batches=3 --num_classes=10 --learning_rate=10 --device=cpu 2>&1", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "the training diverged (a lower --learning_rate; or batch norm ") &&
                  strstr(o, " over 2 values a channel: a larger --batch_size or --image_size)\n"),
              "exit %d:\n%s", rc, o ? o : "");
    free(o);
}
