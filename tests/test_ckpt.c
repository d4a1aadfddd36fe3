/* test_ckpt.c: checkpoints (format, refusal, corruption, atomicity under kill -9), exact resume,
 * signals, logs, --log_dir and --eval through the binary. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt.h"
#include "harness.h"
#include "io/proto/event.pb-c.h"
#include "io/tfrecord.h"
#include "models.h"
#include "testutil.h"
#include "train.h"

/* A small net with batch norm and dropout: conv-bn-relu, pool, flatten, fc-relu, dropout, fc. */
static Net *small_net_sized(int classes, int size) {
    Net *nb = net_new(4, 3, size, size);
    NbT x = nb_conv(nb, nb_input(nb), 6, 3, 3, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID);
    x = nb_flatten(nb, x);
    x = nb_fc(nb, x, 16, ACT_RELU);
    x = nb_dropout(nb, x, 0.5f);
    nb_softmax_xent(nb, nb_fc(nb, x, classes, ACT_LINEAR));
    return nb;
}

static Net *small_net(int classes) { return small_net_sized(classes, 12); }

static void batch_for(Net *net, long step, int32_t *labels) {
    Rng r;
    rng_seed_stream(&r, 555, (uint64_t)step);
    tu_fill_uniform(net->node[0].data, shape_count(net->node[0].shape), -1, 1, &r);
    for (int i = 0; i < net->batch; i++) labels[i] = (int32_t)rng_below(&r, 5);
}

static Dist one_rank(void) {
    Dist d = {0, 1, 0, 1, 0};
    return d;
}

static CkptMeta meta_for(const Net *net, const Trainer *t, long step) {
    CkptMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "small");
    m.num_classes = 5;
    m.in_c = 3;
    m.in_h = 12;
    m.in_w = 12;
    m.step = step;
    m.loss_scale = t->loss_scale;
    m.good_steps = t->good_steps;
    memcpy(m.rng, net->rng.s, sizeof m.rng);
    return m;
}

static TrainerConfig tcfg(void) {
    TrainerConfig c;
    memset(&c, 0, sizeof c);
    c.opt.momentum = 0.9;
    c.opt.nesterov = 1;
    c.opt.weight_decay = 1e-4;
    c.loss_scale = 1;
    return c;
}

/* small_net(classes), finalized (seed 1), with its trainer t on one rank d; a checkpoint
 * directory th_tmpdir()/name made, into dir. */
static Net *small_trained(int classes, Trainer *t, Dist *d, char *dir, size_t dlen, const char *name) {
    snprintf(dir, dlen, "%s/%s", th_tmpdir(), name);
    mkdir(dir, 0755);
    Net *n = small_net(classes);
    net_finalize(n, 1);
    *d = one_rank();
    TrainerConfig tc = tcfg();
    trainer_init(t, n, d, &tc, NULL);
    return n;
}

TEST(ckpt_exact_resume_is_bitwise) {
    const int N = 5;
    Dist d = one_rank();
    TrainerConfig tc = tcfg();
    int32_t lab[4];
    /* 2N steps in one run */
    Net *a = small_net(5);
    net_finalize(a, 3);
    Trainer ta;
    trainer_init(&ta, a, &d, &tc, NULL);
    for (long s = 0; s < 2 * N; s++) {
        batch_for(a, s, lab);
        trainer_step(&ta, lab, 0.05);
    }
    /* N steps, save, a fresh process state (new net and trainer), load, N steps */
    Net *b = small_net(5);
    net_finalize(b, 3);
    Trainer tb;
    trainer_init(&tb, b, &d, &tc, NULL);
    for (long s = 0; s < N; s++) {
        batch_for(b, s, lab);
        trainer_step(&tb, lab, 0.05);
    }
    char err[512], path[4096];
    CkptMeta m = meta_for(b, &tb, N);
    CHECK_MSG(ckpt_save(th_tmpdir(), b, tb.opt.velocity, &m, path, sizeof path, err, sizeof err) == 0, "%s", err);
    trainer_free(&tb);
    net_free(b);
    Net *c = small_net(5);
    net_finalize(c, 99); /* different init: everything must come from the checkpoint */
    Trainer tcc;
    trainer_init(&tcc, c, &d, &tc, NULL);
    CkptMeta got;
    CHECK_MSG(ckpt_load(path, "small", c, tcc.opt.velocity, &got, err, sizeof err) == 0, "%s", err);
    memcpy(c->rng.s, got.rng, sizeof got.rng);
    CHECK(got.step == N);
    for (long s = N; s < 2 * N; s++) {
        batch_for(c, s, lab);
        trainer_step(&tcc, lab, 0.05);
    }
    CHECK(memcmp(a->params, c->params, a->params_total * sizeof(float)) == 0);
    CHECK(memcmp(a->state, c->state, a->state_total * sizeof(float)) == 0);
    CHECK(memcmp(ta.opt.velocity, tcc.opt.velocity, a->params_total * sizeof(float)) == 0);
    trainer_free(&ta);
    trainer_free(&tcc);
    net_free(a);
    net_free(c);
}

TEST(ckpt_refuses_other_models_shapes_and_corruption) {
    char dir[600], path[4096], err[1024];
    Trainer t;
    Dist d;
    Net *n5 = small_trained(5, &t, &d, dir, sizeof dir, "refuse");
    CkptMeta m = meta_for(n5, &t, 7);
    CHECK(ckpt_save(dir, n5, t.opt.velocity, &m, path, sizeof path, err, sizeof err) == 0);
    CHECK(ckpt_latest(dir, path, sizeof path) && strstr(path, "ckpt-7.nvcnn"));
    /* another model name */
    CHECK(ckpt_load(path, "resnet50", n5, NULL, NULL, err, sizeof err) == CKPT_EMISMATCH && strstr(err, "model small, not resnet50"));
    /* another number of classes: a different final layer */
    Net *n7 = small_net(7);
    net_finalize(n7, 1);
    CHECK_MSG(ckpt_load(path, "small", n7, NULL, NULL, err, sizeof err) == CKPT_EMISMATCH && strstr(err, "is a checkpoint of 5 classes, this run has 7 (--num_classes=5 for it)"),
              "%s", err);
    /* another model: a lenet (its tensors differ) */
    Net *le = model_build_net(model_find("lenet"), 2, 10);
    net_finalize(le, 1);
    CHECK_MSG(ckpt_load(path, NULL, le, NULL, NULL, err, sizeof err) == CKPT_EMISMATCH && strstr(err, "parameter tensors"), "%s", err);
    /* the same layers on 16x16 inputs: the first fully connected layer's weights are another size */
    Net *n16 = small_net_sized(5, 16);
    net_finalize(n16, 1);
    CHECK_MSG(ckpt_load(path, "small", n16, NULL, NULL, err, sizeof err) == CKPT_EMISMATCH && strstr(err, "elements"), "%s", err);
    /* one input channel against three */
    Net *g = net_new(4, 1, 12, 12);
    nb_softmax_xent(g, nb_fc(g, nb_flatten(g, nb_input(g)), 5, ACT_LINEAR));
    net_finalize(g, 1);
    CHECK_MSG(ckpt_load(path, NULL, g, NULL, NULL, err, sizeof err) == CKPT_EMISMATCH && strstr(err, "input 3x12x12, this net's is 1x12x12"), "%s", err);
    /* corruption: one flipped byte anywhere is caught by the checksum */
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    for (long off = 20; off < size; off += size / 5) {
        fseek(f, off, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, off, SEEK_SET);
        fputc(ch ^ 0x10, f);
        fflush(f);
        CHECK_MSG(ckpt_load(path, "small", n5, NULL, NULL, err, sizeof err) == CKPT_ECORRUPT && strstr(err, "checksum"), "flip at %ld: %s", off, err);
        fseek(f, off, SEEK_SET);
        fputc(ch, f);
        fflush(f);
    }
    fclose(f);
    CHECK(ckpt_load(path, "small", n5, NULL, NULL, err, sizeof err) == 0);
    /* truncation */
    CHECK(truncate(path, size - 100) == 0);
    CHECK(ckpt_load(path, "small", n5, NULL, NULL, err, sizeof err) == CKPT_ECORRUPT && strstr(err, "checksum"));
    CHECK(truncate(path, 10) == 0);
    CHECK(ckpt_load(path, "small", n5, NULL, NULL, err, sizeof err) == CKPT_ECORRUPT && strstr(err, "too short"));
    /* only the newest CKPT_KEEP are kept */
    for (int s = 10; s < 15; s++) {
        m.step = s;
        CHECK(ckpt_save(dir, n5, t.opt.velocity, &m, NULL, 0, err, sizeof err) == 0);
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/ckpt-11.nvcnn", dir);
    CHECK(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/ckpt-12.nvcnn", dir);
    CHECK(access(p, F_OK) == 0);
    trainer_free(&t);
    net_free(n5);
    net_free(n7);
    net_free(le);
    net_free(n16);
    net_free(g);
}

/* A fully convolutional net (convolutions, batch norm, a global average, the classifier) saved at
 * 12x12 loads into the same layers built for 20x20: every weight, batch-norm statistic and
 * momentum value arrives unchanged, and the header keeps the size it was saved at. */
static Net *conv_net_sized(int size) {
    Net *nb = net_new(4, 3, size, size);
    NbT x = nb_conv_ex(nb, nb_input(nb), 6, 3, 3, 2, 2, PAD_SAME, ACT_RELU, 1);
    x = nb_conv_ex(nb, x, 8, 3, 3, 1, 1, PAD_SAME, ACT_RELU, 1);
    nb_softmax_xent(nb, nb_fc(nb, nb_spatial_avg(nb, x), 5, ACT_LINEAR));
    return nb;
}

TEST(ckpt_fully_convolutional_net_loads_at_another_input_size) {
    char dir[600], path[4096], err[1024];
    snprintf(dir, sizeof dir, "%s/resize", th_tmpdir());
    mkdir(dir, 0755);
    Net *a = conv_net_sized(12), *b = conv_net_sized(20);
    net_finalize(a, 3);
    net_finalize(b, 4); /* other initial weights */
    Dist d = one_rank();
    TrainerConfig tc = tcfg();
    Trainer ta, tb;
    trainer_init(&ta, a, &d, &tc, NULL);
    trainer_init(&tb, b, &d, &tc, NULL);
    int32_t lab[4];
    for (long s = 0; s < 3; s++) {
        batch_for(a, s, lab);
        trainer_step(&ta, lab, 0.05);
    }
    trainer_sync_host(&ta);
    CkptMeta m = meta_for(a, &ta, 3), got;
    CHECK(ckpt_save(dir, a, ta.opt.velocity, &m, path, sizeof path, err, sizeof err) == 0);
    CHECK(a->params_total == b->params_total && a->state_total == b->state_total);
    CHECK(memcmp(a->params, b->params, a->params_total * sizeof(float)) != 0);
    CHECK_MSG(ckpt_load(path, "small", b, tb.opt.velocity, &got, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(a->params, b->params, a->params_total * sizeof(float)) == 0);
    CHECK(memcmp(a->state, b->state, a->state_total * sizeof(float)) == 0);
    CHECK(memcmp(ta.opt.velocity, tb.opt.velocity, a->params_total * sizeof(float)) == 0);
    CHECK(got.in_h == 12 && got.in_w == 12 && got.step == 3);
    trainer_free(&ta);
    trainer_free(&tb);
    net_free(a);
    net_free(b);
}

TEST(ckpt_kill_9_while_writing_leaves_a_readable_checkpoint) {
    char dir[600], err[1024], path[4096];
    snprintf(dir, sizeof dir, "%s/kill9", th_tmpdir());
    mkdir(dir, 0755);
    Net *net = model_build_net(model_find("lenet"), 2, 10); /* 13 MB checkpoints: writes take a while */
    net_finalize(net, 1);
    CkptMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "lenet");
    m.in_c = 3;
    m.in_h = m.in_w = 28;
    m.step = 1;
    CHECK(ckpt_save(dir, net, NULL, &m, NULL, 0, err, sizeof err) == 0);
    int checked = 0;
    for (int trial = 0; trial < 6; trial++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (long s = 2 + trial * 1000;; s++) {
                m.step = s;
                net->params[0] = (float)s;
                if (ckpt_save(dir, net, NULL, &m, NULL, 0, err, sizeof err) != 0) _exit(3);
            }
        }
        usleep(20000 + 37000 * trial);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st));
        CHECK(ckpt_latest(dir, path, sizeof path));
        CkptMeta got;
        CHECK_MSG(ckpt_load(path, "lenet", net, NULL, &got, err, sizeof err) == 0, "after kill: %s", err);
        CHECK(net->params[0] == (float)got.step || got.step == 1);
        checked++;
    }
    CHECK(checked == 6);
    net_free(net);
}

/* ---- through the binary ---- */

/* Starts ./nvcnn with args, output to a file; returns the pid. */
static pid_t spawn(const char *args, const char *out) {
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec ./nvcnn %s", args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static char *slurp_text(const char *path) {
    char *t = (char *)tu_read_file(path, NULL);
    return t ? t : calloc(1, 1);
}

/* Waits until the output file contains `needle` (up to 60 s). */
static int wait_for(const char *path, const char *needle) {
    for (int i = 0; i < 600; i++) {
        char *t = slurp_text(path);
        int found = strstr(t, needle) != NULL;
        free(t);
        if (found) return 1;
        usleep(100000);
    }
    return 0;
}

static int params_equal(const char *p1, const char *p2) {
    Net *a = model_build_net(model_find("lenet"), 2, 10), *b = model_build_net(model_find("lenet"), 2, 10);
    net_finalize(a, 1);
    net_finalize(b, 2);
    char err[1024];
    int ok = ckpt_load(p1, "lenet", a, NULL, NULL, err, sizeof err) == 0 && ckpt_load(p2, "lenet", b, NULL, NULL, err, sizeof err) == 0 &&
             memcmp(a->params, b->params, a->params_total * sizeof(float)) == 0;
    net_free(a);
    net_free(b);
    return ok;
}

TEST(ckpt_sigterm_then_resume_equals_an_uninterrupted_run) {
    char a[600], b[600], args[1400], out[700];
    snprintf(a, sizeof a, "%s/run-a", th_tmpdir());
    snprintf(b, sizeof b, "%s/run-b", th_tmpdir());
    const char *common = "--model=lenet --device=cpu --num_classes=10 --batch_size=128 --num_batches=24 --display_every=1";
    snprintf(args, sizeof args, "%s --log_dir=%s", common, a);
    char run[1500];
    snprintf(run, sizeof run, "./nvcnn %s", args);
    CHECK(th_run(run, NULL) == 0);
    /* the same run, stopped by SIGTERM after a few steps, then resumed with the same flags */
    snprintf(args, sizeof args, "%s --log_dir=%s", common, b);
    snprintf(out, sizeof out, "%s/b.out", th_tmpdir());
    pid_t pid = spawn(args, out);
    CHECK(wait_for(out, "\n     4     1 "));
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    char *t = slurp_text(out);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s", st, t);
    CHECK_MSG(strstr(t, "Received SIGTERM: checkpoint written to ") && strstr(t, "; exiting"), "%s", t);
    free(t);
    char cmd[1500], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn %s", args);
    CHECK(th_run(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "Restored from checkpoint ") && strstr(o, " at step "), "%s", o);
    free(o);
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/ckpt-24.nvcnn", a);
    snprintf(pb, sizeof pb, "%s/ckpt-24.nvcnn", b);
    CHECK_MSG(params_equal(pa, pb), "resumed parameters differ from the uninterrupted run's");
    /* the logged loss average (metrics.csv's loss, TensorBoard's "total loss avg") goes on as in the
     * uninterrupted run: the checkpoint keeps its state (it used to start afresh at the resume) */
    double la = -1, lb = -2;
    for (int k = 0; k < 2; k++) {
        char pm[700];
        snprintf(pm, sizeof pm, "%s/metrics.csv", k ? b : a);
        char *m = slurp_text(pm);
        const char *row = m ? strstr(m, "\n24,") : NULL;
        /* epochs_done empty: synthetic data */
        CHECK_MSG(row && sscanf(row + 1, "24,,%lf", k ? &lb : &la) == 1, "%s: no row of step 24", pm);
        free(m);
    }
    CHECK_MSG(fabs(la - lb) <= 1e-5 * fabs(la), "step 24's logged loss average: %.6f uninterrupted, %.6f resumed", la, lb);
}

TEST(ckpt_sigusr1_writes_a_checkpoint_and_carries_on) {
    char d[600], args[1400], out[700];
    snprintf(d, sizeof d, "%s/usr1", th_tmpdir());
    snprintf(args, sizeof args, "--model=lenet --device=cpu --num_classes=10 --batch_size=128 --num_batches=14 --display_every=1 --log_dir=%s", d);
    snprintf(out, sizeof out, "%s/usr1.out", th_tmpdir());
    pid_t pid = spawn(args, out);
    CHECK(wait_for(out, "\n     3     1 "));
    kill(pid, SIGUSR1);
    int st;
    waitpid(pid, &st, 0);
    char *t = slurp_text(out);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    CHECK_MSG(strstr(t, "Checkpoint written to ") && strstr(t, "    14     1 "), "%s", t);
    /* two checkpoints: the one asked for and the final one */
    const char *first = strstr(t, "Checkpoint written to ");
    CHECK(first && strstr(first + 1, "Checkpoint written to "));
    free(t);
}

TEST(ckpt_unwritable_log_dir_and_other_model_are_refused) {
    char f[600], cmd[1400], *o = NULL;
    snprintf(f, sizeof f, "%s/a-file", th_tmpdir());
    FILE *fp = fopen(f, "w");
    fclose(fp);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_batches=1 --log_dir=%s/sub", f);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "nvcnn: error: --log_dir=") && strstr(o, "a-file"), "%s", o);
    free(o);
    char d[600];
    snprintf(d, sizeof d, "%s/other-model", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=trivial --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "checkpoint of model lenet, not trivial"), "%s", o);
    free(o);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=7 --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "--num_classes"), "%s", o);
    free(o);
}

/* Resuming a run that has ended: one line saying so, nothing trained, evaluated or written. */
TEST(ckpt_resuming_a_finished_run_says_so_in_one_line) {
    char d[600], cmd[1400], *o = NULL;
    snprintf(d, sizeof d, "%s/finished", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=trivial --device=cpu --num_classes=10 --batch_size=4 --num_batches=3 --log_dir=%s", d);
    CHECK(th_run(cmd, NULL) == 0);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/ckpt-3.nvcnn", d);
    struct stat before, after;
    CHECK(stat(ck, &before) == 0);
    CHECK(th_run(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "The checkpoint ") && strstr(o, "ckpt-3.nvcnn is at step 3, the last of this run (3 steps): nothing left "
                                                          "to train (--eval evaluates it; --num_batches=4 or more trains on from it)\n"),
              "%s", o);
    /* that line only */
    int lines = 0;
    for (const char *p = o; p && (p = strchr(p, '\n')); p++) lines++;
    CHECK_MSG(lines == 1 && !strstr(o, "Training") && !strstr(o, "No results"), "%s", o);
    CHECK(stat(ck, &after) == 0 && after.st_mtime == before.st_mtime && after.st_size == before.st_size);
    free(o);
    /* a shorter run than the checkpoint's: past its end, and the number that trains on */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=trivial --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "ckpt-3.nvcnn is at step 3, past the end of this run (2 steps): nothing left to train (--eval evaluates it; "
                             "--num_batches=4 or more trains on from it)\n") &&
                  !strstr(o, "the last of") && !strstr(o, "Training"),
              "%s", o);
    free(o);
    /* a longer run carries on from it */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=trivial --device=cpu --num_classes=10 --batch_size=4 --num_batches=5 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "Restored from checkpoint ") && strstr(o, "\n     5     1 ") && !strstr(o, "\n     3     1 "), "%s", o);
    free(o);
}

/* --eval of a --log_dir that does not exist fails before anything is printed or created. */
TEST(ckpt_eval_of_a_missing_log_dir_creates_nothing) {
    char d[600], cmd[1400], *o = NULL;
    snprintf(d, sizeof d, "%s/no-such-run/sub", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --eval --data_dir=%s --log_dir=%s", th_tmpdir(), d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "nvcnn: error: --eval: --log_dir=") && strstr(o, "/no-such-run/sub does not exist\n") && !strstr(o, "Cmd line args"),
              "%s", o);
    char parent[600];
    snprintf(parent, sizeof parent, "%s/no-such-run", th_tmpdir());
    CHECK_MSG(access(parent, F_OK) != 0, "%s was created", parent);
    free(o);
}

/* A checkpoint that cannot be written at the end of a run is an error, exit 1 (an I/O error), not
 * a warning after which the run reports success: here the file size limit (nvcnn ignores SIGXFSZ, so
 * write() fails with EFBIG) lets metrics.csv and the events through but not the checkpoint. And
 * at a stop signal, the same. */
TEST(ckpt_unwritten_final_checkpoint_exits_1) {
    char d[600], cmd[1600], *o = NULL;
    snprintf(d, sizeof d, "%s/fsize", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "ulimit -f 200; ./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 1);
    CHECK_MSG(o && strstr(o, "nvcnn: error: the checkpoint of step 2 was not written (cannot write checkpoint ") &&
                  strstr(o, "File too large): the model trained in this run is not saved\n") && !strstr(o, "Checkpoint written"),
              "%s", o);
    free(o);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/ckpt-2.nvcnn", d);
    CHECK(access(ck, F_OK) != 0);
    /* a run resumed from a checkpoint: the error names it as the newest there is (it said that the
     * model trained in this run was not saved, as if there were none) */
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --log_dir=%s-resumed > /dev/null && ulimit -f 200 && "
             "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=4 --log_dir=%s-resumed 2>&1",
             d, d);
    CHECK(th_run(cmd, &o) == 1);
    char want[1600];
    snprintf(want, sizeof want, "File too large): the newest one is %s-resumed/ckpt-2.nvcnn; the steps after 2 are not saved\n", d);
    CHECK_MSG(o && strstr(o, "nvcnn: error: the checkpoint of step 4 was not written (") && strstr(o, want), "want '%s':\n%s", want, o);
    free(o);
    /* SIGTERM mid-run */
    char out[700];
    snprintf(out, sizeof out, "%s/fsize-term.out", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "ulimit -f 200; exec ./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=1000000 "
             "--display_every=1 --log_dir=%s-term > %s 2>&1",
             d, out);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    CHECK(wait_for(out, "\n     2 "));
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    char *t = slurp_text(out);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, t);
    CHECK_MSG(strstr(t, "the checkpoint could NOT be written") && strstr(t, "nvcnn: error: the checkpoint of step "), "%s", t);
    free(t);
}

/* Two runs on one --log_dir would overwrite each other's checkpoints, metrics and events: the
 * second is refused (exit 2, naming the first's pid) while the first holds the folder, and a run
 * after it has ended goes ahead. */
TEST(ckpt_log_dir_held_by_a_run_refuses_a_second) {
    char d[600], out[700], args[1600], cmd[1800], *o = NULL;
    snprintf(d, sizeof d, "%s/held", th_tmpdir());
    snprintf(out, sizeof out, "%s/held.out", th_tmpdir());
    snprintf(args, sizeof args, "--model=lenet --device=cpu --batch_size=4 --num_batches=1000000 --display_every=1 --log_dir=%s", d);
    pid_t pid = spawn(args, out);
    CHECK(wait_for(out, "\n     2 "));
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    char want[128];
    snprintf(want, sizeof want, "is in use by another nvcnn run (pid %d on ", (int)pid);
    CHECK_MSG(o && strstr(o, "nvcnn: error: --log_dir=") && strstr(o, want), "%s", o);
    free(o);
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the folder is free again: a run finds the first one's checkpoint (past its one step) */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=1 --log_dir=%s", d);
    o = NULL;
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "The checkpoint ") && strstr(o, "past the end of this run"), "exit %d: %s", rc, o);
    free(o);
}

/* Checkpoint names that nvcnn never writes (leading zeros, a step too large for its counter) are
 * neither resumed from nor pruned; a truncated checkpoint is corrupt data (exit 4), even when its
 * header says the run is finished; a checkpoint of another model is a usage error (exit 2). */
TEST(ckpt_foreign_names_and_corrupt_files) {
    char d[600], src[700], dst[800], cmd[1600], *o = NULL;
    snprintf(d, sizeof d, "%s/names", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=5 --log_dir=%s", d);
    CHECK(th_run(cmd, NULL) == 0);
    snprintf(src, sizeof src, "%s/ckpt-5.nvcnn", d);
    size_t n = 0;
    unsigned char *b = tu_read_file(src, &n);
    CHECK(b && n > 5000);
    static const char *const foreign[] = {"ckpt-99999999999999999999.nvcnn", "ckpt-0007.nvcnn", "ckpt-9223372036854775808.nvcnn"};
    for (int i = 0; i < 3; i++) {
        snprintf(dst, sizeof dst, "%s/%s", d, foreign[i]);
        FILE *f = fopen(dst, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=7 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 0);
    CHECK_MSG(o && strstr(o, "Restored from checkpoint ") && strstr(o, "/ckpt-5.nvcnn at step 5") &&
                  strstr(o, "Checkpoint written to ") && strstr(o, "ckpt-7.nvcnn at step 7"),
              "%s", o);
    free(o);
    for (int i = 0; i < 3; i++) {
        snprintf(dst, sizeof dst, "%s/%s", d, foreign[i]);
        CHECK_MSG(access(dst, F_OK) == 0, "%s was removed", foreign[i]);
    }
    /* ckpt-7 cut short: its header still says step 7, the end of a 7-step run */
    snprintf(dst, sizeof dst, "%s/ckpt-7.nvcnn", d);
    CHECK(truncate(dst, 5000) == 0);
    CHECK(th_run(cmd, &o) == 4);
    CHECK_MSG(o && strstr(o, "nvcnn: error: cannot resume from --log_dir=") && strstr(o, "checksum mismatch"), "%s", o);
    free(o);
    CHECK(unlink(dst) == 0);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=trivial --device=cpu --batch_size=4 --num_batches=7 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    /* said before the net is planned (minutes on a GPU), with no burn-in note before it */
    CHECK_MSG(o && strstr(o, "is a checkpoint of model lenet, not trivial") && !strstr(o, "Planning:") && !strstr(o, "Note: "), "%s", o);
    free(o);
    /* another --num_classes (one left out) named as such, for a resume and for --eval; a folder
     * named as a checkpoint named as one */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=7 --num_classes=10 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "nvcnn: error: cannot resume from --log_dir=") &&
                  strstr(o, "/ckpt-5.nvcnn is a checkpoint of 1000 classes, this run has 10 (--num_classes=1000 for it)"),
              "%s", o);
    free(o);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --eval --data_dir=data/fashion-mnist --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "nvcnn: error: cannot evaluate the checkpoint of --log_dir=") && strstr(o, "1000 classes, this run has 10"), "%s", o);
    free(o);
    snprintf(dst, sizeof dst, "%s/ckpt-6.nvcnn", d);
    CHECK(mkdir(dst, 0755) == 0);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=7 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "/ckpt-6.nvcnn is a directory, not a checkpoint: move it away"), "%s", o);
    free(o);
    CHECK(rmdir(dst) == 0);
    /* a copy under a later step's name: resuming from it, the run's own next checkpoint (ckpt-7)
     * ranked below it and was removed at once; refused, naming what to do */
    snprintf(dst, sizeof dst, "%s/ckpt-102.nvcnn", d);
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=7 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 2);
    CHECK_MSG(o && strstr(o, "ckpt-102.nvcnn holds the checkpoint of step 5, not 102 (renamed or copied?): name it ckpt-5.nvcnn or move it away"),
              "%s", o);
    free(o);
    free(b);
}

/* --export_onnx and --profile must not overwrite the files the run keeps in --log_dir (its
 * checkpoints, metrics.csv, the events, the lock): refused before anything is trained. */
TEST(ckpt_outputs_must_not_overwrite_log_dir_files) {
    char d[600], cmd[1800], *o = NULL;
    snprintf(d, sizeof d, "%s/owned", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --log_dir=%s", d);
    CHECK(th_run(cmd, NULL) == 0);
    static const char *const flag[][2] = {{"export_onnx", "ckpt-2.nvcnn"}, {"export_onnx", "metrics.csv"},
                                          {"profile", ".nvcnn.lock"},       {"profile", "../owned/ckpt-9.nvcnn"}};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=4 --log_dir=%s --%s=%s/%s", d,
                 flag[i][0], d, flag[i][1]);
        CHECK(th_run(cmd, &o) == 2);
        CHECK_MSG(o && strstr(o, "'s own (checkpoints, metrics.csv, events, the lock)") && !strstr(o, "Training"), "%s", o);
        free(o);
    }
    char ck[700];
    snprintf(ck, sizeof ck, "%s/ckpt-2.nvcnn", d);
    CHECK_MSG(ckpt_verify(ck, cmd, sizeof cmd) == 0, "%s", cmd);
}

/* A checkpoint trained on --data_dir resumed without it goes on with synthetic data: said in a
 * warning (it used to go on in silence, with a line about the data order that was not true). A
 * checkpoint of synthetic data resumed without --data_dir says nothing. */
TEST(ckpt_real_data_checkpoint_resumed_on_synthetic_data_is_said) {
    char data[600], cmd[3000], *o = NULL;
    CHECK(tu_band_set(data, sizeof data, "ckpt-realdata", 20, 10, 10) == 0);
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=3 --data_dir=%s --log_dir=%s/log 2>&1 && "
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=5 --log_dir=%s/log 2>&1 && "
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=7 --log_dir=%s/log 2>&1",
             data, data, data, data);
    CHECK(th_run(cmd, &o) == 0);
    const char *w = o ? strstr(o, "/log/ckpt-3.nvcnn was trained on --data_dir images (6 read); this run has no --data_dir and goes on "
                                  "with synthetic data") : NULL;
    CHECK_MSG(w && !strstr(w + 40, "was trained on --data_dir images"), "%s", o);
    free(o);
}

/* A checkpoint's temporary file that a killed run left in --log_dir (.ckpt-N.nvcnn.tmp.PID, half
 * written) is removed by the next run, which holds the folder's lock (no other run writes there);
 * other hidden files stay. */
TEST(ckpt_stale_temporary_files_are_removed) {
    char d[600], p1[800], p2[800], cmd[1600];
    snprintf(d, sizeof d, "%s/stale", th_tmpdir());
    mkdir(d, 0755);
    snprintf(p1, sizeof p1, "%s/.ckpt-5.nvcnn.tmp.99999", d);
    snprintf(p2, sizeof p2, "%s/.notes", d);
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(k ? p2 : p1, "w");
        fputs("half written\n", f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=2 --log_dir=%s >/dev/null 2>&1", d);
    CHECK(th_run(cmd, NULL) == 0);
    CHECK_MSG(access(p1, F_OK) != 0, "%s is still there", p1);
    CHECK_MSG(access(p2, F_OK) == 0, "%s was removed", p2);
}

/* A checkpoint written before the fields after the state tensors' list (the loss average, the
 * --target_top1 flag) existed: its header ends at that list. Made here from a new one by taking the
 * 24 bytes of those fields out (the header length and the CRC written again): it loads, its
 * parameters whole, and the new fields read as 0. */
TEST(ckpt_header_without_the_later_fields_loads) {
    char dir[600], path[4096], err[512], old[700];
    Trainer t;
    Dist d;
    Net *n5 = small_trained(5, &t, &d, dir, sizeof dir, "oldfmt");
    for (size_t i = 0; i < n5->params_total; i++) n5->params[i] = (float)i * 0.25f;
    CkptMeta m = meta_for(n5, &t, 3);
    m.loss_avg_sum = 1.5;
    m.loss_avg_weight = 0.5;
    m.target_top1 = 91.25;
    CHECK(ckpt_save(dir, n5, t.opt.velocity, &m, path, sizeof path, err, sizeof err) == 0);
    CkptMeta got;
    CHECK(ckpt_read_meta(path, &got, err, sizeof err) == 0 && got.loss_avg_sum == 1.5 && got.loss_avg_weight == 0.5 &&
          got.target_top1 == 91.25);
    size_t n = 0;
    uint8_t *b = tu_read_file(path, &n);
    CHECK(b && n > 40);
    if (!b) return;
    uint32_t hb;
    memcpy(&hb, b + 12, 4);
    /* every field after the lists: the loss average (2), the target, the pending evaluation, the
     * training images, the optimizer's settings */
    const uint32_t cut = 5 * 8 + (uint32_t)sizeof m.opt;
    uint8_t *o = malloc(n - cut);
    memcpy(o, b, 16 + hb - cut);
    memcpy(o + 16 + hb - cut, b + 16 + hb, n - 16 - hb - 4);
    hb -= cut;
    memcpy(o + 12, &hb, 4);
    const uint32_t crc = crc32c(o, n - cut - 4);
    memcpy(o + n - cut - 4, &crc, 4);
    snprintf(old, sizeof old, "%s/ckpt-3.nvcnn", dir);
    FILE *f = fopen(old, "wb");
    fwrite(o, 1, n - cut, f);
    fclose(f);
    memset(&got, 0xff, sizeof got);
    CHECK_MSG(ckpt_read_meta(old, &got, err, sizeof err) == 0 && got.step == 3 && got.loss_avg_sum == 0 && got.loss_avg_weight == 0 &&
                  got.target_top1 == 0 && got.opt[CKPT_OPT_SAVED] == 0 && got.opt[CKPT_OPT_NEXT_LR] == 0,
              "%s", err);
    for (size_t i = 0; i < n5->params_total; i++) n5->params[i] = -1;
    CHECK_MSG(ckpt_load(old, NULL, n5, NULL, &got, err, sizeof err) == 0 && got.step == 3 && got.target_top1 == 0, "%s", err);
    int same = 1;
    for (size_t i = 0; i < n5->params_total; i++) same &= n5->params[i] == (float)i * 0.25f;
    CHECK(same);
    free(o);
    free(b);
    trainer_free(&t);
    net_free(n5);
}

/* A run that a stop signal ends between rows still writes its last step's row and metrics.csv row
 * (and TensorBoard summary), as a run's last step: the logs reach the checkpoint's step. */
TEST(ckpt_sigterm_between_rows_writes_the_last_steps_row) {
    char d[600], args[1400], out[700];
    snprintf(d, sizeof d, "%s/sig-row", th_tmpdir());
    snprintf(args, sizeof args,
             "--model=lenet --device=cpu --num_classes=10 --batch_size=8 --num_batches=1000000 --display_every=100000 "
             "--log_dir=%s",
             d);
    snprintf(out, sizeof out, "%s/sig-row.out", th_tmpdir());
    pid_t pid = spawn(args, out);
    CHECK(wait_for(out, "\n     1     1 "));
    usleep(300000);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    char *t = slurp_text(out);
    const char *rec = strstr(t, "Received SIGTERM: checkpoint written to ");
    const char *at = rec ? strstr(rec, " at step ") : NULL;
    const long n = at ? atol(at + strlen(" at step ")) : -1;
    char row[64];
    snprintf(row, sizeof row, "\n%6ld     1 ", n);
    const char *r = strstr(t, row);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n > 1 && r && r < rec, "status %d, step %ld:\n%s", st, n, t);
    free(t);
    char csv[700], want[64];
    snprintf(csv, sizeof csv, "%s/metrics.csv", d);
    char *m = slurp_text(csv);
    snprintf(want, sizeof want, "\n%ld,,", n);
    const char *last = strrchr(m, '\n');
    while (last && last > m && last[-1] != '\n') last--; /* the last row's start */
    CHECK_MSG(n > 1 && strstr(m, want) && last && strncmp(last, want + 1, strlen(want) - 1) == 0, "want a last row %ld in:\n%s", n, m);
    free(m);
}

/* A run resumed with another --seed than the checkpoint's says so: its data order, augmentation and
 * dropout follow the new seed from there (the same seed says nothing). */
TEST(ckpt_resume_with_another_seed_says_so) {
    char d[600], cmd[1400], *o = NULL;
    snprintf(d, sizeof d, "%s/seed-change", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --seed=1 --log_dir=%s", d);
    CHECK(th_run(cmd, NULL) == 0);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=%d --seed=%d --log_dir=%s",
                 3 + k, 2, d);
        int rc = th_run(cmd, &o);
        const char *said = o ? strstr(o, "(saved by a run with --seed=") : NULL;
        if (!k)
            CHECK_MSG(rc == 0 && said && strstr(said, "(saved by a run with --seed=1, resumed with --seed=2: the data order, augmentation and "
                                                      "dropout from here follow 2)\n"),
                      "exit %d:\n%s", rc, o);
        else /* the checkpoint of step 3 was written by the --seed=2 run: the same seed */
            CHECK_MSG(rc == 0 && o && strstr(o, "at step 3\n") && !said, "exit %d:\n%s", rc, o);
        free(o);
    }
}

/* A run on --data_dir resumed on another data set (here one of another size: the checkpoint keeps
 * its training image count) gets a warning naming both counts; the same data set, none. */
TEST(ckpt_resume_on_another_data_set_warns) {
    char a[600], b[600], cmd[2000], *o = NULL;
    CHECK(tu_band_set(a, sizeof a, "data-a", 40, 8, 8) == 0);
    CHECK(tu_band_set(b, sizeof b, "data-b", 24, 8, 8) == 0);
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --noeval";
    snprintf(cmd, sizeof cmd, "%s --num_batches=2 --data_dir=%s --log_dir=%s/log", common, a, a);
    CHECK(th_run(cmd, NULL) == 0);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s --num_batches=%d --data_dir=%s --log_dir=%s/log", common, 3 + k, k ? a : b, a);
        int rc = th_run(cmd, &o);
        char want[1400];
        snprintf(want, sizeof want, "nvcnn: warning: %s/log/ckpt-2.nvcnn was trained on 40 training images; --data_dir=%s has 24: another data set?", a, b);
        if (!k)
            CHECK_MSG(rc == 0 && o && strstr(o, want), "exit %d, want '%s':\n%s", rc, want, o);
        else /* ckpt-3, written by the run on the 24 images: back on the 40 it warns again, naming them */
            CHECK_MSG(rc == 0 && o && strstr(o, "ckpt-3.nvcnn was trained on 24 training images; --data_dir=") && strstr(o, " has 40: another data set?"),
                      "exit %d:\n%s", rc, o);
        free(o);
    }
    snprintf(cmd, sizeof cmd, "%s --num_batches=5 --data_dir=%s --log_dir=%s/log", common, a, a);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "at step 4\n") && !strstr(o, "another data set"), "exit %d:\n%s", rc, o);
    free(o);
}

/* The newest "checkpoint" is not one: a FIFO (reading it waited for a writer for good, deaf to
 * SIGTERM), a dangling symbolic link, or a checkpoint whose model name a flipped byte changed
 * (--export_onnx believed the header and said "a checkpoint of Xenet", exit 2; a corrupt file is
 * exit 4, as for a resume and --eval). Each is named as what it is, for a resume, --eval and
 * --export_onnx alike. */
TEST(ckpt_a_newest_checkpoint_that_is_not_one_is_named) {
    char d[600], cmd[3000], *o = NULL;
    snprintf(d, sizeof d, "%s/not-a-checkpoint", th_tmpdir());
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=3 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 0);
    free(o);
    const char *runs[] = {"--num_batches=40", "--eval --data_dir=data/fashion-mnist", "--export_onnx=%s/x.onnx"};
    const char *prefix[] = {"cannot resume from --log_dir=%s: ", "cannot evaluate the checkpoint of --log_dir=%s: ", "--export_onnx: "};
    for (int kind = 0; kind < 3; kind++) {
        char make[1400], want[2600], p[700];
        snprintf(p, sizeof p, "%s/ckpt-%d.nvcnn", d, kind == 2 ? 3 : 30);
        if (kind == 0) snprintf(make, sizeof make, "mkfifo %s", p);
        if (kind == 1) snprintf(make, sizeof make, "rm -f %s/ckpt-30.nvcnn; ln -s /nonexistent-nvcnn %s", d, p);
        if (kind == 2) snprintf(make, sizeof make, "rm -f %s/ckpt-30.nvcnn; printf X | dd of=%s bs=1 seek=16 conv=notrunc 2>/dev/null", d, p);
        CHECK(th_run(make, NULL) == 0);
        const char *what[] = {" is a FIFO, not a checkpoint: move it away", " is a dangling symbolic link (to /nonexistent-nvcnn, which does not exist)",
                              ": checksum mismatch (truncated or corrupt checkpoint)"};
        const int code[] = {2, 1, 4};
        for (int k = 0; k < 3; k++) {
            char run[800], pre[800];
            snprintf(run, sizeof run, runs[k], d);
            snprintf(pre, sizeof pre, prefix[k], d);
            snprintf(cmd, sizeof cmd, "timeout -k 5 60 ./nvcnn --model=lenet --device=cpu --batch_size=2 --log_dir=%s %s 2>&1", d, run);
            const int rc = th_run(cmd, &o);
            snprintf(want, sizeof want, "nvcnn: error: %s%s%s\n", pre, p, what[kind]);
            CHECK_MSG(rc == code[kind] && o && strstr(o, want), "%s, then '%s': exit %d, want %d and '%s':\n%s", make, run, rc, code[kind],
                      want, o);
            free(o);
        }
    }
}

/* SIGHUP (a closed terminal, a dropped ssh session) stops the run as SIGTERM does: checkpoint,
 * exit 0 (it used to kill the run, exit 129, its checkpoints since the last periodic one lost);
 * started under nohup, the run ignores it. SIGUSR1 without --log_dir says it wrote nothing (it
 * was passed over without a word). */
TEST(ckpt_sighup_stops_with_a_checkpoint_and_sigusr1_without_log_dir_is_said) {
    char d[600], cmd[2400], *o = NULL;
    snprintf(d, sizeof d, "%s/hup", th_tmpdir());
    const char *run = "env NVCNN_TEST_STEP_PAUSE_MS=200 ./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=8 --display_every=1";
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd,
                 "d=%s; rm -rf $d; mkdir -p $d; %s %s %s > $d/out 2>&1 & p=$!; for i in $(seq 600); do grep -q '^     3 ' $d/out && break; "
                 "sleep 0.02; done; kill -%s $p; wait $p; rc=$?; cat $d/out; exit $rc",
                 d, k == 1 ? "nohup" : "", run, k == 2 ? "" : "--log_dir=$d/log", k == 2 ? "USR1" : "HUP");
        const int rc = th_run(cmd, &o);
        if (k == 0)
            CHECK_MSG(rc == 0 && o && strstr(o, "Received SIGHUP: checkpoint written to ") && strstr(o, "/log/ckpt-3.nvcnn at step 3; exiting\n"),
                      "SIGHUP: exit %d:\n%s", rc, o);
        if (k == 1)
            CHECK_MSG(rc == 0 && o && !strstr(o, "Received") && strstr(o, "ckpt-8.nvcnn at step 8"), "nohup, SIGHUP: exit %d:\n%s", rc, o);
        if (k == 2)
            CHECK_MSG(rc == 0 && o && strstr(o, "Received SIGUSR1: no --log_dir: no checkpoint written after step 3 (training goes on)\n") &&
                          strstr(o, "\n     8 "),
                      "SIGUSR1 without --log_dir: exit %d:\n%s", rc, o);
        free(o);
    }
}

/* A --log_dir of nvcnn.py's, holding TensorFlow's checkpoints: training says it cannot resume from
 * them and starts from step 1, --eval and --export_onnx say what the folder holds (they said
 * nothing, or "no checkpoint in", as if it held none). */
TEST(ckpt_a_log_dir_of_tensorflow_checkpoints_is_said) {
    char d[600], cmd[4000], want[1600], *o = NULL;
    snprintf(d, sizeof d, "%s/tf-log-dir", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && printf 'model_checkpoint_path: \"model.ckpt-100\"\\n' > %s/checkpoint && touch %s/model.ckpt-100.index "
             "%s/model.ckpt-100.data-00000-of-00001",
             d, d, d, d);
    CHECK(th_run(cmd, NULL) == 0);
    const char *runs[] = {"--eval --data_dir=data/fashion-mnist", "--export_onnx=%s/x.onnx", "--num_batches=2"};
    const char *said[] = {"nvcnn: error: --eval: no checkpoint of nvcnn in --log_dir=%s: it holds TensorFlow checkpoints (",
                          "nvcnn: error: --export_onnx: no checkpoint of nvcnn in --log_dir=%s: it holds TensorFlow checkpoints (",
                          "nvcnn: warning: --log_dir=%s holds TensorFlow checkpoints ("};
    for (int k = 0; k < 3; k++) {
        char run[800];
        snprintf(run, sizeof run, runs[k], d);
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=2 --log_dir=%s %s 2>&1", d, run);
        const int rc = th_run(cmd, &o);
        snprintf(want, sizeof want, said[k], d);
        CHECK_MSG(rc == (k < 2 ? 2 : 0) && o && strstr(o, want) && strstr(o, "which nvcnn cannot read") && (k < 2 || strstr(o, "\n     1 ")),
                  "'%s': exit %d, want '%s':\n%s", run, rc, want, o);
        free(o);
    }
}

/* A run resumed with other settings than its checkpoint's run says so (they were taken without a
 * word): a longer run, whose poly decay starts again from a quarter of the rate where the saved run
 * ended at 0; the optimizer's settings; the same settings say nothing. A checkpoint of synthetic
 * data resumed on --data_dir says where in the data it starts. */
TEST(ckpt_a_resume_with_other_settings_says_so) {
    char d[600], cmd[2400], *o = NULL;
    snprintf(d, sizeof d, "%s/resume-changes", th_tmpdir());
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --display_every=1 --learning_rate=0.05";
    snprintf(cmd, sizeof cmd, "%s --num_batches=10 --log_dir=%s > /dev/null && %s --num_batches=20 --log_dir=%s 2>&1", common, d, common, d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(step 11's learning rate is 0.0125, where the checkpoint's run had 0 for it: another --learning_rate, "
                                        "run length or schedule (poly decays to 0 over this run's own steps))\n") &&
                  strstr(o, "\n    11     1 ") && !strstr(o, "(resumed with"),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s --num_batches=40 --log_dir=%s --momentum=0.8 --nonesterov --weight_decay=0 2>&1", common, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(resumed with --momentum=0.8 (the checkpoint's run: 0.9), --weight_decay=0 (the checkpoint's run: "
                                        "0.0001), --nonesterov (the checkpoint's run: --nesterov))\n"),
              "exit %d:\n%s", rc, o);
    free(o);
    /* LARC turned off: said as such (not as --larc_eta=0, which the command line refuses), without its mode */
    snprintf(cmd, sizeof cmd,
             "%s --num_batches=44 --log_dir=%s --larc_eta=0.002 --larc_mode=scale > /dev/null && %s --num_batches=48 --log_dir=%s 2>&1", common, d,
             common, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "LARC off (the checkpoint's run: --larc_eta=0.002)") && !strstr(o, "larc_mode"), "exit %d:\n%s", rc, o);
    free(o);
    /* the same settings, stopped by a signal and resumed: nothing to say */
    snprintf(cmd, sizeof cmd,
             "d=%s-same; rm -rf $d; mkdir -p $d; NVCNN_TEST_STEP_PAUSE_MS=100 %s --num_batches=30 --log_dir=$d/log > $d/out 2>&1 & p=$!; "
             "for i in $(seq 600); do grep -q '^     3 ' $d/out && break; sleep 0.02; done; kill -TERM $p; wait $p; "
             "%s --num_batches=30 --log_dir=$d/log 2>&1",
             d, common, common);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Restored from checkpoint ") && !strstr(o, "learning rate is") && !strstr(o, "(resumed with"),
              "exit %d:\n%s", rc, o);
    free(o);
    char band[600];
    CHECK(tu_band_set(band, sizeof band, "resume-synthetic", 40, 10, 10) == 0);
    snprintf(cmd, sizeof cmd, "%s --num_batches=3 --log_dir=%s-syn > /dev/null && %s --num_batches=5 --noeval --data_dir=%s --log_dir=%s-syn 2>&1",
             common, d, common, band, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "/ckpt-3.nvcnn was trained on synthetic data (3 steps); this run reads --data_dir from image 12, as "
                                        "after that many steps of it, and counts its epochs from there\n"),
              "exit %d:\n%s", rc, o);
    free(o);
}

/* A signal during the start-up (the data's index, planning: minutes for a large model on a GPU):
 * SIGTERM (a scheduler's preemption) stops the run after its first step with the checkpoint and
 * the line a batch script requeues on, SIGUSR1 asks for a checkpoint then; both used to kill the
 * run without a word (143, 138). Ctrl-C then ends it at once, saying that nothing was trained. */
TEST_CORES(ckpt_signals_during_the_start_up, 1) {
    char d[600], cmd[2400], *o = NULL;
    snprintf(d, sizeof d, "%s/start-up-signal", th_tmpdir());
    const char *sig[] = {"TERM", "INT"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "d=%s; rm -rf $d; mkdir -p $d; ./nvcnn --model=resnet50 --device=cpu --num_classes=10 --batch_size=2 --num_batches=3 "
                 "--noeval --log_dir=$d/log > $d/out 2>&1 & p=$!; for i in $(seq 1000); do grep -q '^Num ranks:' $d/out && break; "
                 "sleep 0.01; done; kill -%s $p; wait $p; rc=$?; cat $d/out; exit $rc",
                 d, sig[k]);
        const int rc = th_run(cmd, &o);
        if (!k)
            CHECK_MSG(rc == 0 && o && strstr(o, "Received SIGTERM: checkpoint written to ") && strstr(o, "/log/ckpt-1.nvcnn at step 1; exiting\n"),
                      "SIGTERM: exit %d:\n%s", rc, o);
        else
            CHECK_MSG(rc == 130 && o && strstr(o, "Received SIGINT before the first step: exiting (nothing trained)\n"), "SIGINT: exit %d:\n%s",
                      rc, o);
        free(o);
    }
}
