/* test_gpu_select.c: the process's GPU is chosen by gpu_select() before anything creates a CUDA
 * context. A call that needs a context before the selection dies naming itself, so any code path
 * that reaches one too early (the loader's pinned batches opened before the device was chosen)
 * fails loudly instead of putting a stray context on GPU 0. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "harness.h"
#include "testutil.h"
#include "layer_death.h"

static void pinned_alloc(void *arg) {
    (void)arg;
    gpu_host_alloc(64);
}

static void select_twice(void *arg) {
    (void)arg;
    gpu_select(0);
    gpu_select(0);
    if (gpu_select_count() != 1 || gpu_selected() != 0) _exit(5);
    gpu_select(1); /* another GPU: refused */
}

static void select_zero(void *arg) {
    (void)arg;
    gpu_select(0);
}

/* CUDA does not survive fork(): a child of a process that initialised the driver gets
 * cudaErrorInitializationError from its first call. So the test process never touches CUDA
 * itself; a child counts the GPUs (exit 10 + whether there is one). */
static void count_gpus(void *arg) {
    (void)arg;
    _exit(10 + (gpu_count(NULL, 0) > 0));
}

TEST(gpu_select_comes_before_any_context) {
    CHECK(gpu_selected() == -1 && gpu_select_count() == 0);
    char msg[512];
    /* pinned memory before the selection: one error line naming the call, exit 1 */
    int rc = ld_run_child(pinned_alloc, NULL, msg, sizeof msg);
    CHECK_MSG(rc == 1 && strstr(msg, "gpu_host_alloc before the GPU was selected"), "exit %d: %s", rc, msg);
    const int counted = ld_run_child(count_gpus, NULL, msg, sizeof msg);
    CHECK_MSG(counted == 10 || counted == 11, "counting the GPUs in a child: exit %d: %s", counted, msg);
    if (!gpu_built() || counted == 11) {
        /* the device is set once; a second device is refused */
        rc = ld_run_child(select_twice, NULL, msg, sizeof msg);
        CHECK_MSG(rc == 1 && strstr(msg, "gpu_select(1): this process already uses GPU 0"), "exit %d: %s", rc, msg);
    } else {
        /* a CUDA build without a device: cudaSetDevice's error, reported, not a crash */
        rc = ld_run_child(select_zero, NULL, msg, sizeof msg);
        CHECK_MSG(rc == 1 && strstr(msg, "cudaSetDevice"), "exit %d: %s", rc, msg);
    }
}

/* The GPU backend on real data: the loader's batches are pinned memory, which needs the context;
 * the run must select its GPU first (else gpu_host_alloc dies). The data: two classes of the
 * fixture JPEGs, converted by nvcnn-mkrecords. */
TEST(gpu_real_data_run_selects_its_gpu_first) {
    if (tu_gpus() == 0) return;
    char cmd[2048], *o = NULL;
    const char *t = th_tmpdir();
    snprintf(cmd, sizeof cmd,
             "set -e; rm -rf %s/sel; mkdir -p %s/sel/img/a %s/sel/img/b; "
             "for f in img_420 img_444 img_progressive img_422_odd; do cp data/fixtures/$f.jpg %s/sel/img/a/; done; "
             "for f in img_gray img_cmyk img_large img_420; do cp data/fixtures/$f.jpg %s/sel/img/b/; done; "
             "./nvcnn-mkrecords --input_dir=%s/sel/img --output_dir=%s/sel/rec --shards=1",
             t, t, t, t, t, t, t);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "making the records: exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=gpu --data_dir=%s/sel/rec --num_classes=3 --batch_size=4 --num_batches=4 "
             "--display_every=1 --nstep_burnin=0",
             t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Images/sec: ") && strstr(o, "Num images:  8\n"), "exit %d:\n%s", rc, o);
    free(o);
}

/* The driver check's decision on nvidia-smi's output: GPUs listed (one line each) but none for the
 * CUDA runtime names the driver and the version the build's CUDA needs; no output: no driver. */
TEST(gpu_driver_problem_names_the_driver_needed) {
    char msg[512] = "";
    CHECK(gpu_driver_problem_of("", 13000, msg, sizeof msg) == 0);
    CHECK(gpu_driver_problem_of(NULL, 13000, msg, sizeof msg) == 0);
    CHECK(gpu_driver_problem_of("550.54.15\n550.54.15\n", 13000, msg, sizeof msg) == 1);
    CHECK_MSG(strstr(msg, "nvidia-smi lists 2 GPUs (driver 550.54.15)") && strstr(msg, "CUDA 13.0, which needs NVIDIA driver 580.65.06 or newer"),
              "%s", msg);
    CHECK(gpu_driver_problem_of("470.57.02\r\n", 12040, msg, sizeof msg) == 1);
    CHECK_MSG(strstr(msg, "1 GPU (driver 470.57.02)") && strstr(msg, "CUDA 12.4, which needs NVIDIA driver 525.60.13"), "%s", msg);
}
