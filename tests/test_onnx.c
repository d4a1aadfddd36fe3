/* test_onnx.c: --export_onnx. ONNX Runtime and ONNX's own checker (PyPI's onnxruntime and onnx,
 * installed into .deps/venv by scripts/install-deps.sh; without them these tests fail) read every
 * exported model, and its outputs on a fixed batch must agree with nvcnn's own forward-only
 * (inference) pass of the same weights within 1e-4 relatively (scripts/onnx_check.py says how):
 * every model of the zoo in its reduced variant (tests/reduced.h) with every parameter and
 * batch-norm statistic made non-trivial, and the full googlenet and resnet50 through ./nvcnn, from
 * a checkpoint and from the run just finished. Bad input: one line, exit 2, nothing written. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "io/proto/onnx.pb-c.h"
#include "harness.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "models.h"
#include "onednn.h"
#include "onnx.h"
#include "reduced.h"
#include "testutil.h"

#define BATCH 8 /* images per case (the reduced models'; the full ones run 2) */
#define CLASSES 10

/* The Python of the test dependencies: $NVCNN_PYTHON, else the repository's .deps/venv. A missing
 * one fails the test (ONNX Runtime is this feature's reference: no skipping). */
static const char *python(void) {
    const char *p = getenv("NVCNN_PYTHON");
    return p && *p ? p : ".deps/venv/bin/python3";
}

/* th_tmpdir()/name, made */
static void subdir(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "%s/%s", th_tmpdir(), name);
    mkdir(dir, 0755);
}

static int python_ready(void) {
    char cmd[512], *o = NULL;
    snprintf(cmd, sizeof cmd, "%s -c 'import onnx, onnxruntime, numpy'", python());
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "%s cannot import onnx and onnxruntime (run scripts/install-deps.sh, which installs them from PyPI): %s",
              python(), o ? o : "");
    free(o);
    return rc == 0;
}

static void write_raw(const char *path, const float *x, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f && fwrite(x, sizeof *x, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

/* nvcnn's forward-only pass of `net` (finalized, its weights set) on x: the logits and the
 * softmax probabilities (the loss layer's), with the case's files for onnx_check.py. */
static void dump_case(Net *net, const char *dir, const char *name, const float *x) {
    Node *in = &net->node[net->input];
    const size_t nin = shape_count(in->shape);
    memcpy(in->data, x, nin * sizeof *x);
    int32_t labels[BATCH] = {0};
    net->labels = labels;
    net->training = 0;
    net_forward(net);
    const Node *lg = &net->node[net->logits];
    const size_t k = shape_sample(lg->shape), n = (size_t)lg->shape.n;
    float *out = xmalloc(2 * n * k * sizeof *out);
    memcpy(out, lg->data, n * k * sizeof *out);
    const Xent *xe = net->layer[net->nlayer - 1].priv;
    memcpy(out + n * k, xe->prob, n * k * sizeof *out);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "%d %d %d %d %zu\n", in->shape.n, in->shape.c, in->shape.h, in->shape.w, k);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/%s.input", dir, name);
    write_raw(path, x, nin);
    snprintf(path, sizeof path, "%s/%s.expected", dir, name);
    write_raw(path, out, 2 * n * k);
    free(out);
}

/* The CPU layers nvcnn runs by default: oneDNN's where built. */
static void plan_default(Net *net) {
    char err[256];
    if (onednn_built()) CHECK_MSG(onednn_plan(net, err, sizeof err) == 0, "%s", err);
}

static float *random_batch(Shape s, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    float *x = xmalloc(shape_count(s) * sizeof *x);
    tu_fill_uniform(x, shape_count(s), -1.0f, 1.0f, &r);
    return x;
}

/* Every parameter and statistic the export carries made non-trivial, so that one written in the
 * wrong place or order shows: biases and batch norm's beta around 0, gamma around 1 (their
 * initial values are 0 and 1), and the running statistics from another batch `xs` (one
 * training-mode pass of the reference layers): its mean, and its variance plus the mean's square
 * (the second moment), so that no channel is normalised by a spread much smaller than its values.
 * Deep nets of random weights map every image to nearly the same features, and their batch
 * variance alone, tiny against the mean, magnified float32's rounding in the subtraction: nvcnn's
 * own two implementations (oneDNN, reference) then differed by up to 6e-4 of the largest logit;
 * with the second moment they differ by at most 5e-6 (2.5e-5 in the softmax), as ONNX Runtime
 * does from nvcnn. Last, the classifier is scaled so that the statistics batch's largest logit is
 * 5 (a trained model's are of that order): float32's relative rounding of the logits is the
 * softmax's relative error, and logits of hundreds would exceed 1e-4 in any implementation. */
static void make_weights_nontrivial(Net *net, const float *xs, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int p = 0; p < net->nparam; p++) {
        const char *name = strrchr(net->param[p].name, '/') + 1;
        float *w = net_param(net, p);
        float lo = 0, hi = 0;
        if (strcmp(name, "biases") == 0 || strcmp(name, "beta") == 0) lo = -0.2f, hi = 0.2f;
        if (strcmp(name, "gamma") == 0) lo = 0.7f, hi = 1.3f;
        if (hi > lo) tu_fill_uniform(w, net->param[p].count, lo, hi, &r);
    }
    memcpy(net->node[net->input].data, xs, shape_count(net->node[net->input].shape) * sizeof *xs);
    int32_t labels[BATCH] = {0};
    net->labels = labels;
    net->training = 1;
    net_forward(net); /* the reference layers (no plan yet): Bn keeps the batch's statistics */
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "bn") != 0) continue;
        const Bn *b = l->priv;
        float *mean = net_buffer(net, l->buf0), *var = net_buffer(net, l->buf0 + 1);
        for (int c = 0; c < b->c; c++) {
            const double v = 1.0 / ((double)b->invstd[c] * b->invstd[c]) - BN_EPSILON;
            mean[c] = b->mean[c];
            var[c] = (float)((v > 0 ? v : 0) + (double)b->mean[c] * b->mean[c]);
        }
    }
    net->training = 0;
    net_forward(net);
    const Node *lg = &net->node[net->logits];
    float big = 0;
    for (size_t k = 0; k < shape_count(lg->shape); k++) big = fmaxf(big, fabsf(lg->data[k]));
    const Layer *fc = &net->layer[lg->producer];
    for (int p = fc->param0; p < fc->param0 + fc->nparam && big > 0; p++)
        for (size_t k = 0; k < net->param[p].count; k++) net_param(net, p)[k] *= 5.0f / big;
}

/* onnx_check.py over the cases; its lines into the test's output. Returns its exit status. */
static int onnx_check(const char *dir, const char *names, int count) {
    char cmd[8192], *o = NULL;
    snprintf(cmd, sizeof cmd, "%s scripts/onnx_check.py %s %s", python(), dir, names);
    int rc = th_run(cmd, &o);
    printf("%s", o ? o : "");
    char want[64];
    snprintf(want, sizeof want, "%d of %d models agree", count, count);
    CHECK_MSG(rc == 0 && o && strstr(o, want), "onnx_check.py: exit %d:\n%s", rc, o ? o : "");
    free(o);
    return rc;
}

/* Every model of the zoo, reduced: export, ONNX Runtime against nvcnn's forward. */
/* 1 core: a whole run measured 13.8 CPU seconds in 14.1 s (the exports and Python's start, one
 * thing at a time); ONNX Runtime takes as many threads as the test's share (scripts/onnx_check.py:
 * OMP_NUM_THREADS); likewise the other tests that call it */
TEST_WITH(onnx_zoo_matches_onnxruntime, 300, 1) {
    if (!python_ready()) return;
    char dir[1024], names[2048] = "", err[512];
    subdir(dir, sizeof dir, "onnx_zoo");
    int n;
    model_list(&n);
    CHECK(n == REDUCED_COUNT); /* every model of --help has its reduced variant here */
    for (int i = 0; i < REDUCED_COUNT; i++) {
        const Reduced *rd = &reduced[i];
        const ModelInfo *m = model_find(rd->name);
        Net *net = model_build_reduced(m, BATCH, CLASSES, rd->size, rd->div, ACT_RELU);
        net_finalize(net, 100 + (uint64_t)i);
        float *x = random_batch(net->node[net->input].shape, 200 + (uint64_t)i),
              *xs = random_batch(net->node[net->input].shape, 400 + (uint64_t)i);
        make_weights_nontrivial(net, xs, 300 + (uint64_t)i);
        free(xs);
        plan_default(net);
        dump_case(net, dir, rd->name, x);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, rd->name);
        const OnnxInfo info = {rd->name, 0, "test_onnx.c"};
        CHECK_MSG(onnx_export(net, &info, path, err, sizeof err) == 0, "%s: %s", rd->name, err);
        strncat(names, " ", sizeof names - strlen(names) - 1);
        strncat(names, rd->name, sizeof names - strlen(names) - 1);
        free(x);
        net_free(net);
    }
    onnx_check(dir, names, REDUCED_COUNT);
}

/* The newest checkpoint of dir, loaded into a net of `model` at size x size; nvcnn's forward on a
 * fixed batch into the case `name`. */
static void case_from_checkpoint(const char *ckdir, const char *model, int size, const char *dir, const char *name) {
    char path[4096], err[512];
    CHECK_MSG(ckpt_latest(ckdir, path, sizeof path), "no checkpoint in %s", ckdir);
    const ModelInfo *m = model_find(model);
    Net *net = model_build_sized(m, 2, CLASSES, size); /* 2 images: the full models are slow */
    net_finalize(net, 7);
    CHECK_MSG(ckpt_load(path, model, net, NULL, NULL, err, sizeof err) == 0, "%s", err);
    plan_default(net);
    float *x = random_batch(net->node[net->input].shape, 77);
    dump_case(net, dir, name, x);
    free(x);
    net_free(net);
}

/* The full googlenet and resnet50 at 224x224 through ./nvcnn: googlenet trains one step into a
 * checkpoint which --export_onnx alone exports; resnet50 trains one step and exports at the end of
 * the run. ONNX Runtime against nvcnn's forward of each checkpoint. */
TEST_WITH(onnx_full_models_from_nvcnn, 300, 1) {
    if (!python_ready()) return;
    char dir[512], cmd[8192], *o = NULL;
    subdir(dir, sizeof dir, "onnx_full");
    /* the two runs side by side (each mostly starting up and planning, on one thread) */
    snprintf(cmd, sizeof cmd,
             "export OMP_NUM_THREADS=1; "
             "(./nvcnn --model=googlenet --num_classes=%d --batch_size=2 --num_batches=1 --nstep_burnin=0 --log_dir=%s/g && "
             "./nvcnn --model=googlenet --log_dir=%s/g --export_onnx=%s/googlenet.onnx) >%s/g.log 2>&1 & g=$!; "
             "./nvcnn --model=resnet50 --num_classes=%d --batch_size=2 --num_batches=1 --nstep_burnin=0 --log_dir=%s/r "
             "--export_onnx=%s/resnet50.onnx >%s/r.log 2>&1; r=$?; wait $g; g=$?; cat %s/g.log %s/r.log; [ $g = 0 ] && [ $r = 0 ]",
             CLASSES, dir, dir, dir, dir, CLASSES, dir, dir, dir, dir, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && strstr(o, "Exported googlenet (step 1, 224x224, 10 classes)") &&
                  strstr(o, "Exported resnet50 (step 1, 224x224, 10 classes)"),
              "exit %d: %s", rc, o);
    free(o);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/g", dir);
    case_from_checkpoint(sub, "googlenet", 224, dir, "googlenet");
    snprintf(sub, sizeof sub, "%s/r", dir);
    case_from_checkpoint(sub, "resnet50", 224, dir, "resnet50");
    onnx_check(dir, "googlenet resnet50", 2);
}

/* The names in dir (for "nothing written"): "a b c" */
static void list_dir(const char *dir, char *out, size_t n) {
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(out + strlen(out), n - strlen(out), "%s ", e->d_name);
    closedir(d);
}

static int one_line(const char *o) { return o && strchr(o, '\n') == strrchr(o, '\n'); }

/* exit 2, one error line (after the device line) containing `want`, and nothing new in dir */
static void refused(const char *args, const char *want, const char *dir) {
    char cmd[9000], before[4096], after[4096], *o = NULL;
    list_dir(dir, before, sizeof before);
    snprintf(cmd, sizeof cmd, "{ ./nvcnn %s 2>&1 >/dev/null; }", args);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o && strstr(o, want) && one_line(o), "./nvcnn %s: exit %d, want 2 and one line with '%s': %s", args, rc, want,
              o ? o : "");
    list_dir(dir, after, sizeof after);
    CHECK_MSG(strcmp(before, after) == 0, "./nvcnn %s left files: before '%s', after '%s'", args, before, after);
    free(o);
}

TEST_LIMIT(onnx_bad_input_exit_2_nothing_written, 120) {
    char dir[1024], args[8192], *o = NULL;
    subdir(dir, sizeof dir, "onnx_bad");
    /* a lenet checkpoint (10 classes) and a resnet18 one at 32x32 */
    snprintf(args, sizeof args,
             "./nvcnn --model=lenet --num_classes=10 --batch_size=2 --num_batches=1 --nstep_burnin=0 --log_dir=%s/lenet && "
             "./nvcnn --model=resnet18 --num_classes=10 --image_size=32 --batch_size=2 --num_batches=1 --nstep_burnin=0 "
             "--log_dir=%s/r18",
             dir, dir);
    CHECK(th_run(args, &o) == 0);
    free(o);
    /* each with --log_dir and --export_onnx in the test's folder (the two %s) */
    static const char *const bad[][2] = {
        {"--model=trivial --log_dir=%s/lenet --export_onnx=%s/x.onnx", "is a checkpoint of lenet, not of --model=trivial"},
        {"--model=lenet --num_classes=5 --log_dir=%s/lenet --export_onnx=%s/x.onnx", "has 10 classes, not --num_classes=5"},
        {"--model=resnet18 --image_size=64 --log_dir=%s/r18 --export_onnx=%s/x.onnx", "was trained at 32x32, not --image_size=64"},
        {"--model=lenet --log_dir=%s --export_onnx=%s/x.onnx", "--export_onnx: no checkpoint in --log_dir"},
        {"--model=lenet --log_dir=%s/lenet --export_onnx=%s/no/such/dir/x.onnx",
         "/no/such/dir/x.onnx: cannot write there: No such file or directory"},
        {"--model=lenet --log_dir=%s/lenet --export_onnx=%s/", "not a file name"},
        {"--model=lenet --log_dir=%s/lenet --export_onnx=%s/lenet", "/lenet: is a directory"},
        {"--model=lenet --num_batches=2 --log_dir=%s/lenet4 --export_onnx=%s/lenet", "/lenet: is a directory"},
        /* with training flags the path is checked before anything is trained */
        {"--model=lenet --num_batches=2 --log_dir=%s/lenet2 --export_onnx=%s/no/x.onnx", "cannot write there"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, bad[i][0], dir, dir);
        refused(args, bad[i][1], dir);
    }
    char sub[1200], names[4096];
    snprintf(sub, sizeof sub, "%s/lenet2", dir);
    list_dir(sub, names, sizeof names);
    CHECK_MSG(!strstr(names, "ckpt-"), "trained before refusing: %s", names);
    refused("--model=lenet --eval --data_dir=. --log_dir=. --export_onnx=x.onnx", "--export_onnx with --eval", dir);
    /* a write that fails (here the file size limit, SIGXFSZ ignored: EFBIG) is an I/O error, exit 1 */
    snprintf(args, sizeof args, "ulimit -f 100; ./nvcnn --model=lenet --log_dir=%s/lenet --export_onnx=%s/big.onnx",
             dir, dir);
    list_dir(dir, names, sizeof names);
    int rc = th_run(args, &o);
    CHECK_MSG(rc == 1 && o && strstr(o, "big.onnx: cannot write it: File too large"), "exit %d: %s", rc, o ? o : "");
    free(o);
    char names2[4096];
    list_dir(dir, names2, sizeof names2);
    CHECK_MSG(strcmp(names, names2) == 0, "left files: before '%s', after '%s'", names, names2);
    /* the model at the checkpoint's own size and classes when neither flag is given */
    snprintf(args, sizeof args, "./nvcnn --model=resnet18 --log_dir=%s/r18 --export_onnx=%s/r18.onnx", dir, dir);
    CHECK(th_run(args, &o) == 0 && strstr(o, "Exported resnet18 (step 1, 32x32, 10 classes)"));
    free(o);
}

/* A layer type the exporter does not know: refused with its name and type, no file, no
 * temporary file beside it. */
static void mystery_forward(Layer *l, Net *net) {
    (void)l, (void)net;
}
static const LayerOps mystery_ops = {"mystery", mystery_forward, mystery_forward, NULL, NULL, NULL};

TEST(onnx_unknown_layer_refused) {
    char dir[1024], path[1200], err[512], names[4096];
    subdir(dir, sizeof dir, "onnx_mystery");
    Net *net = net_new(1, 3, 8, 8);
    int x = conv_create(net, net->input, 4, 3, 3, 1, 1, PAD_SAME, 1);
    Layer *l = net_add_layer(net, &mystery_ops, &x, 1, net->node[x].shape, NULL);
    x = flatten_create(net, l->out);
    x = fc_create(net, x, 3, 1);
    softmax_xent_create(net, x);
    net_finalize(net, 1);
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    const OnnxInfo info = {"hand-built", 0, NULL};
    CHECK(onnx_export(net, &info, path, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "layer mystery0 (type mystery) has no ONNX form"), "%s", err);
    list_dir(dir, names, sizeof names);
    CHECK_MSG(names[0] == 0, "left: %s", names);
    net_free(net);
}

/* The initializers of an ONNX file by name, read back with protobuf-c: 1 when a and b hold the same
 * names with the same bytes. */
static int same_initializers(const char *a, const char *b, char *why, size_t n) {
    size_t la, lb;
    uint8_t *da = tu_read_file(a, &la), *db = tu_read_file(b, &lb);
    Onnx__ModelProto *ma = da ? onnx__model_proto__unpack(NULL, la, da) : NULL, *mb = db ? onnx__model_proto__unpack(NULL, lb, db) : NULL;
    int same = ma && mb && ma->graph && mb->graph && ma->graph->n_initializer == mb->graph->n_initializer;
    snprintf(why, n, "%s", same ? "" : "unreadable, or another number of initializers");
    for (size_t i = 0; same && i < ma->graph->n_initializer; i++) {
        const Onnx__TensorProto *t = ma->graph->initializer[i], *u = mb->graph->initializer[i];
        same = strcmp(t->name, u->name) == 0 && t->raw_data.len == u->raw_data.len &&
               memcmp(t->raw_data.data, u->raw_data.data, t->raw_data.len) == 0;
        if (!same) snprintf(why, n, "initializer %s differs", t->name);
    }
    if (ma) onnx__model_proto__free_unpacked(ma, NULL);
    if (mb) onnx__model_proto__free_unpacked(mb, NULL);
    free(da);
    free(db);
    return same;
}

/* The GPU backend: the model exported at the end of a run without --log_dir (no checkpoint has
 * copied the device's weights to the host) holds the device's weights and statistics: the same
 * bytes as the export of the checkpoint of the same run with --log_dir. Two runs: --deterministic,
 * since on a GPU each run's algorithm search may pick other algorithms, and cuDNN's
 * non-deterministic ones give other bits on every call (conv0's weights differed on an H200). */
TEST_WITH(gpu_export_onnx_matches_checkpoint, 300, 1) {
    if (tu_gpus() == 0) return;
    char dir[1024], cmd[8192], why[256], a[1200], b[1200], *o = NULL;
    subdir(dir, sizeof dir, "onnx_gpu");
    const char *run = "./nvcnn --device=gpu --model=resnet18 --image_size=32 --num_classes=10 --batch_size=4 --num_batches=2 "
                      "--nstep_burnin=0 --deterministic";
    snprintf(cmd, sizeof cmd, "%s --log_dir=%s/r && %s --export_onnx=%s/run.onnx && ./nvcnn --model=resnet18 --log_dir=%s/r --export_onnx=%s/ckpt.onnx",
             run, dir, run, dir, dir, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d\n%s", rc, o);
    free(o);
    snprintf(a, sizeof a, "%s/run.onnx", dir);
    snprintf(b, sizeof b, "%s/ckpt.onnx", dir);
    CHECK_MSG(same_initializers(a, b, why, sizeof why), "%s", why);
}

/* A run that a stop signal ends before its last step writes no --export_onnx file (it exported the
 * model part-way over what the file held); it says so, and the resumed run exports at its end. */
TEST(onnx_a_stopped_run_exports_nothing_until_its_end) {
    char d[600], cmd[3000], *o = NULL;
    snprintf(d, sizeof d, "%s/export-stopped", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "d=%s; rm -rf $d; mkdir -p $d; echo earlier > $d/m.onnx; NVCNN_TEST_STEP_PAUSE_MS=100 ./nvcnn --model=lenet --device=cpu "
             "--batch_size=2 --num_batches=200 --display_every=1 --log_dir=$d/log --export_onnx=$d/m.onnx > $d/out 2>&1 & p=$!; "
             "for i in $(seq 600); do grep -q '^     3 ' $d/out && break; sleep 0.02; done; kill -TERM $p; wait $p; rc=$?; cat $d/out; "
             "echo \"file: $(cat $d/m.onnx)\"; exit $rc",
             d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(--export_onnx: the run stopped at step ") && strstr(o, "m.onnx not written; the resumed run writes it at its end)\n") &&
                  strstr(o, "file: earlier\n") && !strstr(o, "Exported "),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=5 --log_dir=%s/log --export_onnx=%s/m.onnx 2>&1", d, d);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Exported lenet (step 5, "), "exit %d:\n%s", rc, o);
    free(o);
}
