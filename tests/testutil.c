/* testutil.c: see testutil.h. */
#include "testutil.h"

#include "ckpt.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "models.h"
#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint8_t *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = xmalloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = n > 0 ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    b[got] = 0;
    if (len) *len = got;
    return b;
}

void tu_fill_uniform(float *x, size_t n, float lo, float hi, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)rng_uniform(r);
}

static double layer_loss(Net *net, Layer *l, const float *R, uint64_t seed) {
    rng_seed(&net->rng, seed);
    l->ops->forward(l, net);
    Node *o = &net->node[l->out];
    size_t n = shape_count(o->shape);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)o->data[i] * (double)R[i];
    return s;
}

static void check_tensor(Net *net, Layer *l, const float *R, uint64_t seed, float *x, const float *g, size_t n,
                          double eps, int maxn, double floor, Rng *pick, GradCheck *gc) {
    int count = (int)n < maxn ? (int)n : maxn;
    for (int k = 0; k < count; k++) {
        size_t i = ((int)n <= maxn) ? (size_t)k : (size_t)rng_below(pick, (uint32_t)n);
        float orig = x[i];
        float xp = (float)(orig + eps), xm = (float)(orig - eps);
        x[i] = xp;
        double lp = layer_loss(net, l, R, seed);
        x[i] = xm;
        double lm = layer_loss(net, l, R, seed);
        x[i] = orig;
        double num = (lp - lm) / ((double)xp - (double)xm); /* the step actually taken in float */
        double an = g[i];
        double m = fabs(an) > fabs(num) ? fabs(an) : fabs(num);
        if (m < floor) m = floor;
        double err = fabs(an - num) / m;
        if (err > gc->max_rel_err) gc->max_rel_err = err;
        gc->checked++;
    }
}

GradCheck tu_gradcheck_layer(Net *net, int li, double eps, int max_per_tensor, double floor, uint64_t seed) {
    GradCheck gc = {0, 0};
    Layer *l = &net->layer[li];
    Node *o = &net->node[l->out];
    size_t no = shape_count(o->shape);
    float *R = malloc(no * sizeof *R);
    Rng r;
    rng_seed(&r, seed ^ 0x5eed);
    tu_fill_uniform(R, no, -1, 1, &r);
    for (int i = 0; i < l->nin; i++) {
        Node *in = &net->node[l->in[i]];
        if (!in->grad) in->grad = xcalloc(shape_count(in->shape), sizeof(float));
    }
    /* analytic */
    uint64_t fseed = seed + 1;
    layer_loss(net, l, R, fseed);
    for (int i = 0; i < l->nin; i++) {
        Node *in = &net->node[l->in[i]];
        memset(in->grad, 0, shape_count(in->shape) * sizeof(float));
    }
    memset(net->grads, 0, net->params_total * sizeof(float));
    memcpy(o->grad, R, no * sizeof *R);
    l->ops->backward(l, net);
    /* copies: a later forward must not disturb them */
    for (int i = 0; i < l->nin; i++) {
        Node *in = &net->node[l->in[i]];
        size_t n = shape_count(in->shape);
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= (l->in[j] == l->in[i]);
        if (dup) continue;
        float *g = malloc(n * sizeof *g);
        memcpy(g, in->grad, n * sizeof *g);
        check_tensor(net, l, R, fseed, in->data, g, n, eps, max_per_tensor, floor, &r, &gc);
        free(g);
    }
    for (int p = l->param0; p < l->param0 + l->nparam; p++) {
        size_t n = net->param[p].count;
        float *g = malloc(n * sizeof *g);
        memcpy(g, net_grad(net, p), n * sizeof *g);
        check_tensor(net, l, R, fseed, net_param(net, p), g, n, eps, max_per_tensor, floor, &r, &gc);
        free(g);
    }
    free(R);
    /* scripts/sweep_cpus.sh collects every check's worst error across emulated CPUs */
    if (getenv("NVCNN_PRINT_GRADCHECK"))
        printf("    %s (finite differences): max relative error %.2e\n", net->layer[li].name, gc.max_rel_err);
    return gc;
}

int tu_gpus(void) {
    static int n = -1;
    if (n < 0) n = gpu_count(NULL, 0);
    if (n > 0) return n;
    char msg[512];
    if (gpu_driver_problem(msg, sizeof msg))
        th_fail(__FILE__, __LINE__, "%s", msg);
    else
        th_skip("no GPU");
    return 0;
}

int tu_select_gpu(void) {
    if (tu_gpus() == 0) return 0;
    gpu_select(0);
    return 1;
}

int tu_need_gpus(int n, const char *why) {
    int have = tu_gpus();
    if (have == 0) return 0;
    if (have >= n) return 1;
    char msg[256];
    snprintf(msg, sizeof msg, "needs %d GPUs, %d visible: %s", n, have, why);
    th_skip(msg);
    return 0;
}

int tu_run_tests(const char *dir, const char *env, const char *names, char **out, char *summary, size_t n) {
    char cmd[4096], *list = NULL;
    *out = NULL;
    snprintf(summary, n, "(no summary line)");
    snprintf(cmd, sizeof cmd, "cd '%s/root' && ../run_tests --list %s", dir, names);
    int selected = 0;
    if (th_run(cmd, &list) == 0)
        for (const char *p = list; p && *p; p++) selected += *p == '\n';
    free(list);
    /* NVCNN_EMU empty: a test that skips there is not handed to yet another build */
    snprintf(cmd, sizeof cmd, "cd '%s/root' && NVCNN_BUILD='%s' NVCNN_EMU= %s ../run_tests %s", dir, dir, env, names);
    int rc = th_run(cmd, out);
    /* the last line "N passed, N failed, N skipped" */
    const char *last = NULL;
    for (const char *p = *out ? strstr(*out, " passed, ") : NULL; p; p = strstr(p + 1, " passed, ")) last = p;
    while (last && last > *out && last[-1] != '\n') last--;
    if (last) snprintf(summary, n, "%.*s", (int)strcspn(last, "\n"), last);
    int passed = -1, failed = -1, skipped = -1;
    if (!last || sscanf(last, "%d passed, %d failed, %d skipped", &passed, &failed, &skipped) != 3) return 0;
    return rc == 0 && selected > 0 && passed == selected && failed == 0 && skipped == 0;
}

/* dir/name with n band images (testutil.h); the records from `mislabel` on mislabelled. */
static int write_band_images(const char *dir, const char *name, int n, int mislabel) {
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TfrWriter *w = tfr_writer_open(path, err, sizeof err);
    if (!w) return -1;
    for (int k = 0; k < n; k++) {
        const int c = k % 10;
        uint8_t px[28 * 28];
        for (int i = 0; i < 28 * 28; i++) px[i] = (i / 28 >= 2 * c + 2 && i / 28 < 2 * c + 6) ? 255 : 0;
        uint8_t *png = NULL;
        size_t plen = 0;
        if (image_encode_png(px, 28, 28, 1, &png, &plen) != 0) return -1;
        int64_t label = k >= mislabel ? (c + 5) % 10 + 1 : c + 1;
        ExampleBuilder *b = example_builder_new();
        example_add_bytes(b, "image/encoded", png, plen);
        example_add_int64s(b, "image/class/label", &label, 1);
        size_t len;
        uint8_t *buf = example_serialize(b, &len);
        tfr_write(w, buf, len);
        free(buf);
        free(png);
        example_builder_free(b);
    }
    tfr_writer_close(w);
    return 0;
}

int tu_band_set(char *dir, size_t dlen, const char *name, int ntrain, int nval, int mislabel) {
    snprintf(dir, dlen, "%s/%s", th_tmpdir(), name);
    mkdir(dir, 0755);
    return write_band_images(dir, "train-00000-of-00001", ntrain, ntrain) ||
                   write_band_images(dir, "validation-00000-of-00001", nval, mislabel)
               ? -1
               : 0;
}

/* what, with '|' (the table's separator) written as '/' */
static const char *row_text(const char *what, char *buf, size_t n) {
    snprintf(buf, n, "%s", what);
    for (char *p = buf; *p; p++)
        if (*p == '|') *p = '/';
    return buf;
}

void tu_parity_row(const char *what, const char *precision, double abs_err, double rel, double tol) {
    char w[300];
    printf("    parity | %s | %s | %s | %.3e | %.3e | %.1e | %s\n", th_current_test(), row_text(what, w, sizeof w), precision, abs_err, rel,
           tol, rel <= tol ? "pass" : "FAIL");
}

void tu_parity_floor_row(const char *what, const char *precision, double value, double floor) {
    const double ratio = value > 0 ? floor / value : INFINITY;
    char w[300];
    printf("    parity | %s | %s (%.4g, at least %.4g) | %s | %.3e | %.3e | %.1e | %s\n", th_current_test(), row_text(what, w, sizeof w),
           value, floor, precision, value, ratio, 1.0, value >= floor ? "pass" : "FAIL");
}

float *tu_ckpt_params(const char *path, const char *model, int num_classes, size_t *n) {
    Net *net = model_build_net(model_find(model), 16, num_classes);
    net_finalize(net, 1);
    char err[512];
    CkptMeta meta;
    float *w = NULL;
    if (ckpt_load(path, model, net, NULL, &meta, err, sizeof err) != 0) {
        th_fail(__FILE__, __LINE__, "%s: %s", path, err);
    } else {
        *n = net->params_total;
        w = xmalloc(*n * sizeof *w);
        memcpy(w, net->params, *n * sizeof *w);
    }
    net_free(net);
    return w;
}

GpuNet *tu_gpunet(Net *net, int precision, unsigned flags) {
    char err[512];
    int oom;
    GpuNet *g = gpunet_new(net, 0, precision, GPUNET_WORKSPACE_DEFAULT, flags, err, sizeof err, &oom);
    if (!g) th_fail(__FILE__, __LINE__, "gpunet_new: %s", err);
    return g;
}

void tu_staged_batches(const Net *net, uint64_t seed, uint8_t *img[2], int32_t *lab[2]) {
    const size_t nb = shape_count(net->node[net->input].shape);
    Rng r;
    rng_seed(&r, seed);
    for (int k = 0; k < 2; k++) {
        img[k] = gpu_host_alloc(nb);
        lab[k] = gpu_host_alloc((size_t)net->batch * sizeof(int32_t));
        for (size_t i = 0; i < nb; i++) img[k][i] = (uint8_t)rng_below(&r, 256);
        for (int i = 0; i < net->batch; i++) lab[k][i] = (int32_t)rng_below(&r, 10);
    }
}

void tu_staged_batches_free(uint8_t *img[2], int32_t *lab[2]) {
    for (int k = 0; k < 2; k++) {
        gpu_host_free(img[k]);
        gpu_host_free(lab[k]);
    }
}

const char *tu_mpirun(int np, char *buf, size_t n) {
#ifndef NVCNN_MPI
    (void)np;
    (void)buf;
    (void)n;
    return NULL;
#else
    if (th_run("command -v mpirun", NULL) != 0) return NULL;
    snprintf(buf, n, "timeout 180 mpirun -np %d --oversubscribe %s", np, geteuid() == 0 ? "--allow-run-as-root" : "");
    return buf;
#endif
}
