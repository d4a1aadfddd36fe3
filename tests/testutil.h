/* testutil.h: helpers shared by the layer tests: random fills and a finite-difference gradient
 * checker for one layer of a finalized net. */
#ifndef NVCNN_TEST_UTIL_H
#define NVCNN_TEST_UTIL_H

#include <math.h>
#include <string.h>

#include "net.h"
#include "train.h"

/* The whole file, NUL-terminated (malloc'd); NULL if it cannot be read. *len may be NULL. */
uint8_t *tu_read_file(const char *path, size_t *len);

/* Uniform in [lo, hi). */
void tu_fill_uniform(float *x, size_t n, float lo, float hi, Rng *r);

typedef struct GradCheck {
    double max_rel_err; /* max over checked elements of |analytic - numeric| / max(|a|, |n|, floor) */
    int checked;        /* elements compared */
} GradCheck;

/* Checks layer `li` of a finalized net (usually input node 0 -> layer 0): the loss is
 * L = sum(out * R) for a fixed random R; analytic gradients come from the layer's backward with
 * out.grad = R, numeric ones from central differences (step eps) of the layer's forward, the loss
 * summed in double. Compares every input node's gradient (a gradient buffer is allocated for the
 * network input if it has none) and every parameter's, at up to `max_per_tensor` sampled
 * elements each. net->rng is re-seeded before every forward so dropout masks stay fixed.
 * `floor` is the magnitude under which errors count as absolute. */
GradCheck tu_gradcheck_layer(Net *net, int li, double eps, int max_per_tensor, double floor, uint64_t seed);

/* The GPUs a GPU test may use. None: the test is skipped ("no GPU"; tests/harness.c then runs it
 * on the emulated device where there is one), unless NVIDIA's driver sees GPUs that the CUDA
 * runtime cannot use (a driver too old for this build): then the test FAILS, naming the driver
 * version needed, since skipping would hide a machine that cannot run what it should. */
int tu_gpus(void);
/* tu_gpus() > 0, and then GPU 0 selected for this process (gpu_select): for tests that use the
 * GPU backend in their own process. */
int tu_select_gpu(void);

/* The larger of m and d, for the largest of differences: a NaN d (a NaN on either side of a
 * difference) makes it infinite. fmax() would skip the NaN, and a result that is NaN where the
 * reference is not would pass as no difference at all. */
static inline double tu_worse(double m, double d) { return d != d ? INFINITY : fmax(m, d); }
/* Two random batches of NHWC bytes and labels (in [0, 10)) for net's input, in pinned memory
 * (gpu_host_free each). */
void tu_staged_batches(const Net *net, uint64_t seed, uint8_t *img[2], int32_t *lab[2]);
void tu_staged_batches_free(uint8_t *img[2], int32_t *lab[2]);
/* A trainer's configuration with nvcnn's optimizer defaults (momentum 0.9, Nesterov, weight decay
 * 1e-4: config.c) and a dynamic loss scale starting at loss_scale; the rest zero. */
static inline void tu_trainer_defaults(TrainerConfig *tc, double loss_scale) {
    memset(tc, 0, sizeof *tc);
    tc->opt.momentum = 0.9;
    tc->opt.nesterov = 1;
    tc->opt.weight_decay = 1e-4;
    tc->loss_scale = loss_scale;
    tc->dynamic_loss_scale = 1;
}
/* 1 if there are at least n GPUs. Fewer: 0, and the test is skipped, "needs n GPUs, k visible:
 * <why>" (none: tu_gpus()'s "no GPU", so that the emulated device, which has two, runs it). A test
 * that needs several GPUs never passes having run nothing. */
int tu_need_gpus(int n, const char *why);

/* Runs the test runner of the build folder `dir` (in dir/root, its view of the repository) on the
 * tests that `names` (run_tests' arguments) selects, with the environment assignments `env`
 * ("VAR=value ...", or "") before it. 1 if every selected test passed: at least one was selected,
 * none failed and none skipped (a run of skips tests nothing). *out: all it printed (malloc'd);
 * summary: its last line, "N passed, N failed, N skipped", or what it printed instead. */
int tu_run_tests(const char *dir, const char *env, const char *names, char **out, char *summary, size_t n);

/* th_tmpdir()/name (into dir, dlen bytes) holding train-00000-of-00001 with ntrain images and
 * validation-00000-of-00001 with nval: 28x28 gray PNGs where record k shows a white band at rows
 * 2c+2..2c+5 of class c = k % 10, labelled c + 1, except the validation records from `mislabel` on,
 * labelled (c + 5) % 10 + 1 (a model that learnt the bands gets those wrong). 0 on success. */
int tu_band_set(char *dir, size_t dlen, const char *name, int ntrain, int nval, int mislabel);

/* The parameters of checkpoint `path` of model `model` (built for num_classes classes): malloc'd,
 * their count in *n; NULL, and the test fails naming the file, if it cannot be read. */
float *tu_ckpt_params(const char *path, const char *model, int num_classes, size_t *n);

/* gpunet_new(net, 0, precision, GPUNET_WORKSPACE_DEFAULT, flags, ...) on GPU 0, or NULL with the
 * test failed on its message. */
struct GpuNet;
struct GpuNet *tu_gpunet(Net *net, int precision, unsigned flags);

/* One row of the parity table that scripts/gpu_check.sh collects from every GPU test with a
 * numeric limit (its worst row against its limit is the test's line of the summary):
 *     parity | TEST | WHAT | PRECISION | MAX ABS | MAX REL | TOLERANCE | pass or FAIL
 * MAX REL is the figure held against the tolerance (passes when rel <= tol). */
void tu_parity_row(const char *what, const char *precision, double abs_err, double rel, double tol);
/* The same for a figure that must reach a floor (an accuracy, a fraction): passes when
 * value >= floor; the row's MAX REL column holds floor / value, its TOLERANCE 1, so that the
 * summary's ratio reads the same way (above 1: failed). */
void tu_parity_floor_row(const char *what, const char *precision, double value, double floor);

/* "timeout 180 mpirun -np N --oversubscribe [--allow-run-as-root] " in buf (n bytes), or NULL
 * where the build has no MPI or there is no mpirun (the test then skips). */
const char *tu_mpirun(int np, char *buf, size_t n);

#endif
