/* test_evaluate.c: the validation pass as a user meets it through ./nvcnn: a short last batch
 * counts each of its images once, like every other image; evaluations while training. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "testutil.h"

/* 10 validation images in batches of 8: steps of 8 and 2 images. The top-1 line is the share of
 * the 10 that are right (a multiple of 10 %), not the mean of the two steps' percentages. */
TEST(eval_short_last_batch_counts_each_image_once) {
    char dir[600], cmd[1600], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-short", 40, 10, 8) == 0); /* the last step's 2: wrong */
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=8 --num_batches=25 --display_every=1 "
             "--learning_rate=0.05 --crop_area_min=1 --data_dir=%s",
             dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    const char *ev = o ? strstr(o, "Evaluating on 10 validation images\n  Step  Top-1  Top-5\n") : NULL;
    CHECK_MSG(ev != NULL, "%s", o);
    double s1 = -1, s2 = -1, t5a, t5b, top1 = -1;
    if (ev) {
        ev = strchr(strchr(ev, '\n') + 1, '\n') + 1;
        CHECK_MSG(sscanf(ev, " 1 %lf%% %lf%%\n 2 %lf%% %lf%%", &s1, &t5a, &s2, &t5b) == 4, "%s", ev);
        const char *v = strstr(ev, "Validation Top-1: ");
        CHECK(v && sscanf(v, "Validation Top-1: %lf", &top1) == 1);
        /* two steps: no error estimate (as Images/sec), never "+/- nan" */
        CHECK_MSG(v && strstr(v, " % (2 steps: too few for an error estimate)\nValidation Top-5: ") && !strstr(o, "nan"), "%s", v);
    }
    /* steps: 8 and 2 images; right answers a = s1 * 8 / 100, b = s2 * 2 / 100 */
    double right = s1 * 8 / 100 + s2 * 2 / 100;
    printf("    validation steps of 8 and 2 images: %.1f %% and %.1f %%; top-1 %.1f %%\n", s1, s2, top1);
    /* the two steps differ, so the mean of their percentages would not be the answer */
    CHECK_MSG(s1 != s2, "steps %.1f %% and %.1f %%: pick other images", s1, s2);
    CHECK_MSG(fabs(top1 - 10.0 * right) < 1e-3, "top-1 %.3f %% for %g of 10 right (steps %.1f %%, %.1f %%)", top1, right, s1, s2);
    free(o);
}

/* The table rows' losses of a run's output, in order, into v (at most n); returns how many. */
static int row_losses(const char *o, double *v, int n) {
    int k = 0;
    for (const char *p = o; p && k < n && (p = strchr(p, '\n')); p++) {
        long step, ep;
        double rate, loss, lr;
        if (sscanf(p + 1, "%ld %ld %lf %lf %lf", &step, &ep, &rate, &loss, &lr) == 5) v[k++] = loss;
    }
    return k;
}

/* --eval_every_epochs: a line per evaluation while training, in metrics.csv too; the training itself
 * is the same as without it (the evaluations share the net and, on the GPU, the staging slots);
 * --target_top1 stops at the first evaluation that reaches it, with a checkpoint whose --eval gives
 * the same accuracy. On the CPU, and on the GPU backend where there is one (the emulated device in
 * make test). */
static void eval_while_training(const char *device) {
    char dir[600], cmd[2000], *plain = NULL, *with = NULL, *o = NULL;
    snprintf(cmd, sizeof cmd, "eval-during-%s", device);
    CHECK(tu_band_set(dir, sizeof dir, cmd, 200, 40, 40) == 0);
    const char *common = "./nvcnn --model=lenet --num_classes=10 --batch_size=20 --num_epochs=3 --display_every=1 --learning_rate=0.05 "
                         "--crop_area_min=1 --nstep_burnin=0";
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s", common, device, dir);
    int rc = th_run(cmd, &plain);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, plain);
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s --eval_every_epochs=1 --log_dir=%s/logs", common, device, dir, dir);
    rc = th_run(cmd, &with);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, with);
    /* 10 steps an epoch: evaluations after steps 10 and 20; step 30 is the run's end (the usual pass) */
    CHECK_MSG(with && strstr(with, "\nValidation at step 10 (epoch 1.00): top-1 ") && strstr(with, "\nValidation at step 20 (epoch 2.00): top-1 ") &&
                  !strstr(with, "Validation at step 30") && strstr(with, "Evaluating on 40 validation images"),
              "%s", with);
    double a[64], b[64];
    int na = plain ? row_losses(plain, a, 64) : 0, nb = with ? row_losses(with, b, 64) : 0;
    CHECK_MSG(na == 30 && nb == 30, "%d and %d rows", na, nb);
    for (int i = 0; i < na && i < nb; i++) CHECK_MSG(a[i] == b[i], "step %d: loss %.6f without evaluations, %.6f with", i + 1, a[i], b[i]);
    /* metrics.csv: the evaluations at steps 10, 20 and 30, with the accuracy the lines print */
    char csv[700];
    snprintf(csv, sizeof csv, "%s/logs/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    double top1 = -1;
    const char *line = with ? strstr(with, "Validation at step 20 (epoch 2.00): top-1 ") : NULL;
    if (line) top1 = atof(line + strlen("Validation at step 20 (epoch 2.00): top-1 "));
    char want[64];
    snprintf(want, sizeof want, "\n20,2.000000,,,,,,%.6g,", top1);
    CHECK_MSG(m && strstr(m, "\n10,1.000000,,,,,,") && strstr(m, want) && strstr(m, "\n30,3.000000,,,,,,"), "want %s in\n%s", want, m);
    free(m);
    /* a target that the first evaluation reaches: the run ends there, with its checkpoint */
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s --target_top1=1 --log_dir=%s/target", common, device, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "\nReached --target_top1=1 at step 10 (epoch 1.00): validation top-1 ") &&
                  strstr(o, "/target/ckpt-10.nvcnn at step 10") && !strstr(o, "\n    11     2 ") && !strstr(o, "Evaluating on"),
              "exit %d:\n%s", rc, o);
    const char *at = o ? strstr(o, "Validation at step 10 (epoch 1.00): top-1 ") : NULL;
    double reached = at ? atof(at + strlen("Validation at step 10 (epoch 1.00): top-1 ")) : -1;
    free(o);
    /* the same command again: its run is done (it used to train on to the planned length) */
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s --target_top1=1 --log_dir=%s/target", common, device, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "/target/ckpt-10.nvcnn is at step 10, where its run reached --target_top1=1 (validation top-1 ") &&
                  strstr(o, "nothing left to train") && !strstr(o, "\n    11     2 "),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --num_classes=10 --batch_size=20 --device=%s --data_dir=%s --eval --log_dir=%s/target",
             device, dir, dir);
    rc = th_run(cmd, &o);
    const char *v = o ? strstr(o, "Validation Top-1: ") : NULL;
    CHECK_MSG(rc == 0 && v && fabs(atof(v + strlen("Validation Top-1: ")) - reached) < 1e-3, "reached %.3f %%; --eval:\n%s", reached,
              o ? o : "");
    if (v && strcmp(device, "gpu") == 0) /* the printed accuracies (3 decimals): one image more or less is 2.5 points */
        tu_parity_row("--eval of the target's checkpoint vs the accuracy it reached (points)", "fp32",
                      fabs(atof(v + strlen("Validation Top-1: ")) - reached), fabs(atof(v + strlen("Validation Top-1: ")) - reached), 1e-3);
    free(o);
    /* one epoch: the only evaluation is the run's final one, after its last step; a target reached
     * there is said in the same line (it was not: a run that ended above its target read as one that
     * missed it), and one above what it reaches is said to be missed */
    const char *one = "./nvcnn --model=lenet --num_classes=10 --batch_size=20 --num_epochs=1 --display_every=1 --crop_area_min=1 "
                      "--nstep_burnin=0";
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s --target_top1=1 --learning_rate=0.05", one, device, dir);
    rc = th_run(cmd, &o);
    const char *fin = o ? strstr(o, "Validation Top-1: ") : NULL;
    const double last = fin ? atof(fin + strlen("Validation Top-1: ")) : -1;
    char want_line[160];
    snprintf(want_line, sizeof want_line, "\nReached --target_top1=1 at step 10 (epoch 1.00): validation top-1 %.3f %% (the final evaluation)\n", last);
    CHECK_MSG(rc == 0 && fin && last >= 1 && strstr(fin, want_line) && !strstr(o, "Validation at step"), "exit %d, want%s in:\n%s", rc, want_line,
              o ? o : "");
    free(o);
    /* a target above what the run reaches: untrained (a learning rate of 1e-9), so below 100 % */
    snprintf(cmd, sizeof cmd, "%s --device=%s --data_dir=%s --target_top1=100 --learning_rate=1e-9", one, device, dir);
    rc = th_run(cmd, &o);
    fin = o ? strstr(o, "Validation Top-1: ") : NULL;
    const double untrained = fin ? atof(fin + strlen("Validation Top-1: ")) : -1;
    snprintf(want_line, sizeof want_line, "\nNot reached: --target_top1=100; validation top-1 %.3f %% at the end of the run (step 10, epoch 1.00)\n",
             untrained);
    CHECK_MSG(rc == 0 && fin && untrained >= 0 && untrained < 100 && strstr(fin, want_line) && !strstr(o, "Reached --target_top1"),
              "exit %d, want%s in:\n%s", rc, want_line, o ? o : "");
    free(o);
    free(plain);
    free(with);
}

TEST(eval_while_training_and_target_top1) { eval_while_training("cpu"); }

TEST(eval_while_training_and_target_top1_gpu) {
    if (tu_gpus() == 0) return;
    eval_while_training("gpu");
}

/* A fully convolutional model trained at one --image_size is evaluated, and trains on, at another:
 * the header shows the new size, a line says the size it was saved at, and a model whose weights
 * depend on the size is still refused. */
TEST(eval_and_resume_at_another_image_size) {
    char dir[600], cmd[2000], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-resize", 20, 10, 10) == 0);
    const char *common = "./nvcnn --model=resnet18 --device=cpu --num_classes=10 --batch_size=10 --learning_rate=0.01 --crop_area_min=1 "
                         "--nstep_burnin=0 --display_every=1";
    snprintf(cmd, sizeof cmd, "%s --image_size=32 --num_epochs=1 --data_dir=%s --log_dir=%s/logs", common, dir, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "/logs/ckpt-2.nvcnn at step 2"), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --image_size=48 --eval --data_dir=%s --log_dir=%s/logs", common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Image size:  48x48 (--image_size)\n") &&
                  strstr(o, "/logs/ckpt-2.nvcnn at step 2\n(saved at 32x32, now 48x48: ") && strstr(o, "\nValidation Top-1: "),
              "exit %d:\n%s", rc, o);
    free(o);
    /* one more epoch at 40x40, from step 2 */
    snprintf(cmd, sizeof cmd, "%s --image_size=40 --num_epochs=2 --data_dir=%s --log_dir=%s/logs", common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "at step 2\n(saved at 32x32, now 40x40: ") && strstr(o, "\n     3     2 ") && !strstr(o, "\n     2     1 ") &&
                  strstr(o, "/logs/ckpt-4.nvcnn at step 4"),
              "exit %d:\n%s", rc, o);
    free(o);
    /* resnet34's layers are not resnet18's */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=resnet34 --device=cpu --num_classes=10 --batch_size=10 --image_size=32 --eval --data_dir=%s --log_dir=%s/logs",
             dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "checkpoint of model resnet18, not resnet34"), "exit %d:\n%s", rc, o);
    free(o);
}

/* The evaluation table's rows of a run's output: steps and top-1 % into step/top1 (at most max);
 * returns how many. */
static int eval_rows(const char *o, long *step, double *top1, int max) {
    const char *p = o ? strstr(o, "  Step  Top-1  Top-5\n") : NULL;
    int k = 0;
    for (p = p ? strchr(p, '\n') + 1 : NULL; p && k < max && strncmp(p, "----", 4) != 0; p = strchr(p, '\n') + 1) {
        double t5;
        if (sscanf(p, "%ld %lf%% %lf%%", &step[k], &top1[k], &t5) != 3) break;
        k++;
    }
    return k;
}

/* A checkpoint of lenet on the bands in th_tmpdir()/name/logs, for --eval; 15 validation images,
 * the last 5 mislabelled. 0 on success. */
static int trained(char *dir, size_t dlen, const char *name) {
    if (tu_band_set(dir, dlen, name, 40, 15, 10) != 0) return -1;
    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=10 --num_batches=20 --learning_rate=0.05 "
             "--crop_area_min=1 --data_dir=%s --log_dir=%s/logs",
             dir, dir);
    return th_run(cmd, NULL);
}

static char *eval_run(const char *env, const char *dir, const char *flags) {
    char cmd[2000], *o = NULL;
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet --device=cpu --num_classes=10 --eval --data_dir=%s --log_dir=%s/logs %s", env, dir,
             dir, flags);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d: %s\n%s", rc, cmd, o);
    return o;
}

/* The evaluation's rows follow training's rules: step 1, every --display_every steps and the last
 * step; without --display_every every 10 steps, or each step where steps are slow (the clock made
 * a million times faster: each step takes well over 10 s). */
TEST(eval_rows_follow_trainings_rules_last_step_included) {
    char dir[600];
    CHECK(trained(dir, sizeof dir, "eval-rows") == 0);
    long st[32];
    double t1[32];
    /* 2 steps of 10 and 5 images: both rows; the top-1 line weighs them by their images */
    char *o = eval_run("", dir, "--batch_size=10");
    int n = eval_rows(o, st, t1, 32);
    const char *v = o ? strstr(o, "Validation Top-1: ") : NULL;
    CHECK_MSG(n == 2 && st[0] == 1 && st[1] == 2 && v, "%d rows:\n%s", n, o);
    if (n == 2 && v) CHECK_MSG(fabs(atof(v + 18) - (t1[0] * 10 + t1[1] * 5) / 15) < 0.01, "%s", o);
    free(o);
    /* 3 steps (6, 6, 3 images): steps 1 and 3 */
    o = eval_run("", dir, "--batch_size=6");
    n = eval_rows(o, st, t1, 32);
    CHECK_MSG(n == 2 && st[0] == 1 && st[1] == 3, "%d rows:\n%s", n, o);
    free(o);
    /* 15 steps, fast: 1, 10, 15 */
    o = eval_run("", dir, "--batch_size=1");
    n = eval_rows(o, st, t1, 32);
    CHECK_MSG(n == 3 && st[0] == 1 && st[1] == 10 && st[2] == 15, "%d rows:\n%s", n, o);
    free(o);
    /* 15 slow steps: every step */
    o = eval_run("NVCNN_TEST_CLOCK_SCALE=1e6", dir, "--batch_size=1");
    n = eval_rows(o, st, t1, 32);
    int each = n == 15;
    for (int i = 0; i < n; i++) each &= st[i] == i + 1;
    CHECK_MSG(each, "%d rows:\n%s", n, o);
    free(o);
    /* a --display_every given is kept, however slow the steps */
    o = eval_run("NVCNN_TEST_CLOCK_SCALE=1e6", dir, "--batch_size=1 --display_every=4");
    n = eval_rows(o, st, t1, 32);
    CHECK_MSG(n == 5 && st[0] == 1 && st[1] == 4 && st[2] == 8 && st[3] == 12 && st[4] == 15, "%d rows:\n%s", n, o);
    free(o);
}

/* An evaluation of one step: its row once, and the accuracy without an error estimate (never
 * "nan"); the accuracy is the share of the 15 images that are right. */
TEST(eval_of_one_step_has_no_error_estimate) {
    char dir[600];
    CHECK(trained(dir, sizeof dir, "eval-one-step") == 0);
    long st[8];
    double t1[8];
    char *o = eval_run("", dir, "--batch_size=15");
    int n = eval_rows(o, st, t1, 8);
    const char *v = o ? strstr(o, "Validation Top-1: ") : NULL;
    CHECK_MSG(n == 1 && st[0] == 1 && v && strstr(v, " % (1 step: too few for an error estimate)\nValidation Top-5: ") &&
                  strstr(v, " % (1 step: too few for an error estimate)\n---") && !strstr(o, "nan") && !strstr(o, "+/-"),
              "%d rows:\n%s", n, o);
    if (n == 1 && v) {
        const double top1 = atof(v + 18), right = top1 * 15 / 100;
        CHECK_MSG(fabs(top1 - t1[0]) < 0.06 && fabs(right - floor(right + 0.5)) < 1e-3, "%s", o);
    }
    free(o);
}

/* A stop signal (Ctrl-C, SIGTERM) during the evaluation at the end of a run ends it after the step
 * under way, with a line saying so, and the run exits 0 (its checkpoint was written before the
 * evaluation): it used to be ignored until the whole pass was done, without a word. During an
 * evaluation while training, the run stops there as a signal between two steps would, with its
 * checkpoint and the line a scheduler looks for. */
TEST_CORES(eval_stop_signal_ends_the_evaluation, 1) {
    char dir[600], cmd[2400], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-signal", 40, 8000, 8000) == 0); /* 8000 validation images: 4000 steps */
    for (int during = 0; during < 2; during++) {
        /* wait for the evaluation's first line (or, while training, for step 20's row, after which
         * the evaluation of epoch 1 runs: 40 images, 2 a step), then SIGINT at once (the pass takes about
         * 2 s here) */
        snprintf(cmd, sizeof cmd,
                 "d=%s; rm -rf $d/log; ./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=%d --display_every=1 "
                 "--data_dir=$d --log_dir=$d/log %s > $d/out 2>&1 & p=$!; "
                 "for i in $(seq 600); do grep -q '%s' $d/out && break; sleep 0.05; done; kill -INT $p; wait $p; rc=$?; cat $d/out; exit $rc",
                 dir, during ? 60 : 2, during ? "--eval_every_epochs=1" : "", during ? "^    20 " : "^Evaluating on");
        const int rc = th_run(cmd, &o);
        const char *said = o ? strstr(o, "Received SIGINT: the evaluation stopped after ") : NULL;
        if (!during)
            CHECK_MSG(rc == 0 && said && strstr(o, "Checkpoint written to ") && !strstr(o, "Validation Top-1"), "exit %d:\n%s", rc, o);
        else
            CHECK_MSG(rc == 0 && said && strstr(said, "Received SIGINT: checkpoint written to ") && strstr(said, "ckpt-20.nvcnn at step 20; exiting") &&
                          !strstr(o, "Validation at step"),
                      "exit %d:\n%s", rc, o);
        free(o);
    }
    /* the run resumed: the evaluation the signal ended comes first, at its step (it used to be
     * lost), then training goes on */
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=21 --display_every=1 "
             "--data_dir=%s --log_dir=%s/log --eval_every_epochs=1",
             dir, dir);
    int rc = th_run(cmd, &o);
    const char *redo = o ? strstr(o, "(the evaluation after step 20 did not run before the run stopped: done now)\n") : NULL;
    const char *val = redo ? strstr(redo, "\nValidation at step 20 (epoch 1.00): top-1 ") : NULL;
    CHECK_MSG(rc == 0 && val && strstr(val, "\n    21     2 ") && strstr(o, "ckpt-21.nvcnn at step 21"), "exit %d:\n%s", rc, o);
    free(o);
    char csv[700];
    snprintf(csv, sizeof csv, "%s/log/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    CHECK_MSG(m && strstr(m, "\n20,1.000000,,,,,,"), "no evaluation row at step 20:\n%s", m ? m : "");
    free(m);
}

/* A step that an evaluation follows gets its row and its metrics.csv row whatever --display_every
 * says (the evaluation may end the run: --target_top1), so the run's last step is in its logs. */
TEST(eval_rows_at_the_evaluations_and_the_target) {
    char dir[600], cmd[2000], csv[700], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-rows", 200, 40, 40) == 0);
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --num_classes=10 --batch_size=20 --num_epochs=3 --display_every=1000 "
             "--learning_rate=0.05 --crop_area_min=1 --nstep_burnin=0 --device=cpu --data_dir=%s --target_top1=1 "
             "--log_dir=%s/t",
             dir, dir);
    int rc = th_run(cmd, &o);
    const char *row = o ? strstr(o, "\n    10     1 ") : NULL, *val = o ? strstr(o, "\nValidation at step 10 ") : NULL;
    CHECK_MSG(rc == 0 && row && val && row < val && strstr(o, "Reached --target_top1=1 at step 10"), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(csv, sizeof csv, "%s/t/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    const char *r10 = m ? strstr(m, "\n10,1.000000,") : NULL;
    CHECK_MSG(r10 && r10[strlen("\n10,1.000000,")] != ',' && strstr(m, "\n10,1.000000,,,,,,"),
              "no training row and evaluation row at step 10:\n%s", m ? m : "");
    free(m);
}

/* --noeval leaves out the validation pass at the end of training (which otherwise follows every
 * run whose --data_dir has validation-*); the evaluations while training contradict it. */
TEST(eval_noeval_leaves_out_the_final_pass) {
    char dir[600], cmd[2000], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "noeval", 60, 20, 20) == 0);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --num_classes=10 --batch_size=20 --num_batches=2 --device=cpu --data_dir=%s%s",
                 dir, k ? " --noeval" : "");
        int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0 && o && (strstr(o, "Evaluating on 20 validation images") == NULL) == k, "exit %d:\n%s", rc, o);
        free(o);
    }
    const char *bad[] = {"--target_top1=50", "--eval_every_epochs=1"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --num_classes=10 --data_dir=%s --noeval %s", dir, bad[k]);
        int rc = th_run(cmd, &o);
        char want[128];
        snprintf(want, sizeof want, "%s with --noeval: it evaluates while training", bad[k]);
        CHECK_MSG(rc == 2 && o && strstr(o, want), "exit %d:\n%s", rc, o);
        free(o);
    }
}

/* A stop signal between a step and the evaluation due after it (here during the step's pause,
 * NVCNN_TEST_STEP_PAUSE_MS, so always there): the checkpoint says the evaluation is pending and the
 * resumed run does it first, with the accuracy the uninterrupted run has at that step; where it
 * reaches --target_top1, the checkpoint is written again saying so, and the same command again has
 * nothing left to train. */
TEST_CORES(eval_pending_at_a_stop_is_done_first_after_the_resume, 1) {
    char dir[600], cmd[2400], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-pending", 40, 40, 40) == 0); /* 20 steps an epoch at batch 2 */
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=40 --display_every=1 "
                         "--eval_every_epochs=0.5 --nstep_burnin=0";
    snprintf(cmd, sizeof cmd, "%s --data_dir=%s --log_dir=%s/straight", common, dir, dir);
    CHECK(th_run(cmd, &o) == 0);
    const char *v = o ? strstr(o, "\nValidation at step 10 (epoch 0.50): top-1 ") : NULL;
    char straight[32] = "";
    if (v) snprintf(straight, sizeof straight, "%.7s", v + strlen("\nValidation at step 10 (epoch 0.50): top-1 "));
    CHECK_MSG(v, "no evaluation at step 10:\n%s", o);
    free(o);
    snprintf(cmd, sizeof cmd,
             "d=%s; NVCNN_TEST_STEP_PAUSE_MS=400 %s --data_dir=$d --log_dir=$d/stopped > $d/out 2>&1 & p=$!; "
             "for i in $(seq 600); do grep -q '^    10 ' $d/out && break; sleep 0.02; done; kill -INT $p; wait $p; rc=$?; "
             "cat $d/out; exit $rc",
             dir, common);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "ckpt-10.nvcnn at step 10; exiting") && !strstr(o, "Validation at step 10"), "exit %d:\n%s", rc,
              o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --data_dir=%s --log_dir=%s/stopped --target_top1=1", common, dir, dir);
    for (int k = 0; k < 2; k++) {
        rc = th_run(cmd, &o);
        char want[160];
        snprintf(want, sizeof want, "\nValidation at step 10 (epoch 0.50): top-1 %s", straight);
        if (!k)
            CHECK_MSG(rc == 0 && o && strstr(o, "(the evaluation after step 10 did not run before the run stopped: done now)\n") &&
                          strstr(o, want) && strstr(o, "Reached --target_top1=1 at step 10") && strstr(o, "ckpt-10.nvcnn at step 10\n") &&
                          !strstr(o, "\n    11 "),
                      "exit %d, want '%s':\n%s", rc, want, o);
        else
            CHECK_MSG(rc == 0 && o && strstr(o, "where its run reached --target_top1=1") && strstr(o, "nothing left to train"), "exit %d:\n%s",
                      rc, o);
        free(o);
    }
}

/* A checkpoint that falls due at a step an evaluation follows (here asked for with SIGUSR1 during
 * step 10's pause) is written after the evaluation, saying it is done: a run killed (SIGKILL, a
 * lost node) before the next checkpoint resumes from it without doing that evaluation again. It
 * used to be written before the evaluation, saying it was pending, and the resumed run evaluated
 * step 10 a second time: two evaluation rows for step 10 in metrics.csv. */
TEST_CORES(eval_checkpoint_due_at_an_evaluation_follows_it, 1) {
    char dir[600], cmd[2400], csv[700], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-ckpt-after", 40, 40, 40) == 0); /* 20 steps an epoch at batch 2 */
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=14 --display_every=1 "
                         "--eval_every_epochs=0.5 --nstep_burnin=0";
    snprintf(cmd, sizeof cmd,
             "d=%s; rm -rf $d/log; NVCNN_TEST_STEP_PAUSE_MS=500 %s --data_dir=$d --log_dir=$d/log > $d/out 2>&1 & p=$!; "
             "for i in $(seq 1000); do grep -q '^    10 ' $d/out && break; sleep 0.02; done; kill -USR1 $p; "
             "for i in $(seq 1000); do grep -q '^    11 ' $d/out && break; sleep 0.02; done; kill -KILL $p; wait $p; rc=$?; "
             "cat $d/out; exit $rc",
             dir, common);
    int rc = th_run(cmd, &o);
    const char *val = o ? strstr(o, "\nValidation at step 10 (epoch 0.50): top-1 ") : NULL;
    const char *ck = o ? strstr(o, "Checkpoint written to ") : NULL;
    CHECK_MSG(rc == 137 && val && ck && val < ck && strstr(ck, "ckpt-10.nvcnn at step 10\n") && !strstr(o, "ckpt-11"),
              "want the evaluation of step 10, then its checkpoint, then SIGKILL in step 11 (exit 137); exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --data_dir=%s --log_dir=%s/log", common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Restored from checkpoint ") && strstr(o, "at step 10\n") &&
                  !strstr(o, "did not run before the run stopped") && !strstr(o, "Validation at step 10") && strstr(o, "\n    11 "),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(csv, sizeof csv, "%s/log/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    int evals = 0, rows11 = 0;
    for (const char *p = m; p && (p = strstr(p, "\n10,0.500000,,,,,,")); p++) evals++;
    for (const char *p = m; p && (p = strstr(p, "\n11,")); p++) rows11++;
    CHECK_MSG(evals == 1 && rows11 == 1, "%d evaluation rows at step 10, %d rows of step 11 (want 1 and 1):\n%s", evals, rows11,
              m ? m : "");
    free(m);
}

/* The evaluation a stop signal came before, resumed by a run that does not evaluate there (no
 * --eval_every_epochs): said, not dropped without a word. */
TEST_CORES(eval_pending_not_done_by_a_run_without_it_is_said, 1) {
    char dir[600], cmd[2400], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-pending-dropped", 40, 40, 40) == 0);
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=14 --display_every=1 --nstep_burnin=0";
    snprintf(cmd, sizeof cmd,
             "d=%s; rm -rf $d/log; NVCNN_TEST_STEP_PAUSE_MS=400 %s --eval_every_epochs=0.5 --data_dir=$d --log_dir=$d/log > $d/out 2>&1 & "
             "p=$!; for i in $(seq 600); do grep -q '^    10 ' $d/out && break; sleep 0.02; done; kill -INT $p; wait $p; rc=$?; "
             "cat $d/out; exit $rc",
             dir, common);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "ckpt-10.nvcnn at step 10; exiting"), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --noeval --data_dir=%s --log_dir=%s/log 2>&1", common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(the evaluation after step 10, which the stop came before, is not done: this run evaluates nothing "
                                        "while training)\n"),
              "exit %d:\n%s", rc, o);
    free(o);
}

/* A stop signal during the validation pass at the end of a run (a preemption just then): the final
 * checkpoint is written again saying the pass is pending, with the line a batch script requeues on;
 * the run resumed from it does the pass (its figures in metrics.csv), and then has nothing left to
 * do. The pass used to be lost: the requeued run found nothing left to train and ended without it. */
TEST_CORES(eval_a_stopped_final_pass_is_done_by_the_resumed_run, 1) {
    char dir[600], cmd[2400], csv[700], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "eval-final-stopped", 40, 8000, 8000) == 0);
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=4";
    snprintf(cmd, sizeof cmd,
             "d=%s; rm -rf $d/log; %s --data_dir=$d --log_dir=$d/log > $d/out 2>&1 & p=$!; "
             "for i in $(seq 600); do grep -q '^Evaluating on' $d/out && break; sleep 0.05; done; kill -TERM $p; wait $p; rc=$?; "
             "cat $d/out; exit $rc",
             dir, common);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Received SIGTERM: the evaluation stopped after ") &&
                  strstr(o, "Received SIGTERM: checkpoint written to ") && strstr(o, "/log/ckpt-4.nvcnn at step 4; exiting\n") &&
                  !strstr(o, "Validation Top-1"),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --data_dir=%s --log_dir=%s/log 2>&1", common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(the validation pass after step 4 did not run to its end before the run stopped: done now)\n") &&
                  strstr(o, "Validation Top-1: ") && !strstr(o, "\n     5 "),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(csv, sizeof csv, "%s/log/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    CHECK_MSG(m && strstr(m, "\n4,0.200000,,,,,,"), "no validation row at step 4:\n%s", m ? m : "");
    free(m);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "nothing left to train") && !strstr(o, "Validation Top-1"), "exit %d:\n%s", rc, o);
    free(o);
}
