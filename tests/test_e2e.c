/* test_e2e.c: end to end on real data: lenet trained on Fashion-MNIST (converted by `make data`
 * into data/fashion-mnist/) for 2 epochs with scripts/fashion_mnist.sh's recipe reaches the
 * threshold below in validation top-1. Fashion-MNIST's benchmark table lists the TensorFlow
 * tutorial's 2-conv model, which lenet reproduces, at 91.6% after longer training.
 * The threshold comes from a sweep over the CPUs this can run on (scripts/sweep_cpus.sh e2e, table
 * in docs/performance.md): oneDNN's kernels capped at SSE4.1, AVX2 and AVX-512, the reference
 * layers with OpenBLAS's Haswell, SkylakeX, Zen, Sandybridge and Nehalem kernels, each with 1 and
 * 2 threads, gave 88.0-88.7 %: rounding differences steer 1,875 steps apart by a few tenths of a
 * point. The threshold sits more than 1 point under the lowest. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "harness.h"
#include "testutil.h"

#define E2E_MIN_TOP1 87.0

/* device: "cpu" or "gpu" (the GPU backend: pinned batches staged on the device while the previous
 * step runs; the last validation batch is short: 10000 = 156 x 64 + 16) */
static void fashion_two_epochs(const char *device) {
    if (access("data/fashion-mnist/train-00000-of-00008", R_OK) != 0) {
        th_fail(__FILE__, __LINE__, "data/fashion-mnist is missing: run `make data`");
        return;
    }
    char *o = NULL, cmd[1024];
    snprintf(cmd, sizeof cmd, "scripts/fashion_mnist.sh lenet 2 --device=%s --log_dir=%s/fm-%s", device, th_tmpdir(), device);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    const char *v = o ? strstr(o, "Validation Top-1: ") : NULL;
    CHECK_MSG(v != NULL, "no validation line in:\n%s", o);
    if (v) {
        double top1 = atof(v + strlen("Validation Top-1: "));
        printf("    Fashion-MNIST lenet, 2 epochs on the %s: validation top-1 %.2f %%\n", device, top1);
        CHECK_MSG(top1 >= E2E_MIN_TOP1, "validation top-1 %.2f %% < %.1f %%", top1, E2E_MIN_TOP1);
    }
    CHECK(o && strstr(o, "Num images:  60000\n") != NULL);
    CHECK(o && strstr(o, "Validation Top-5: ") != NULL);
    /* --eval of the checkpoint the run left gives the same accuracy */
    char *e = NULL;
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=%s --data_dir=data/fashion-mnist --num_classes=10 --batch_size=64 --eval "
             "--log_dir=%s/fm-%s",
             device, th_tmpdir(), device);
    rc = th_run(cmd, &e);
    CHECK_MSG(rc == 0, "--eval exit %d:\n%s", rc, e);
    const char *ve = e ? strstr(e, "Validation Top-1: ") : NULL;
    CHECK_MSG(ve && v && strncmp(ve, v, strcspn(v, "\n")) == 0, "--eval gave:\n%s", e);
    CHECK(e && strstr(e, "Restored from checkpoint ") && strstr(e, "Num images:  10000\n"));
    free(e);
    free(o);
}

/* about two minutes on two idle cores; far longer on a busy machine */
TEST_LIMIT(e2e_fashion_mnist_lenet_two_epochs, 3600) { fashion_two_epochs("cpu"); }

TEST(e2e_fashion_mnist_lenet_two_epochs_gpu) {
    if (tu_gpus() == 0) return;
    fashion_two_epochs("gpu");
}
