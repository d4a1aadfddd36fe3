/* test_gpu_debug.c: the GPU backend's checking mode, NVCNN_SYNC_CHECK: the values it takes, the
 * wording that names a failing layer and its model, and (on a GPU) a run in that mode. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "harness.h"
#include "testutil.h"

TEST(gpu_sync_check_values_and_layer_wording) {
    char err[256] = "";
    CHECK(gpu_sync_check_parse(NULL, err, sizeof err) == 0);
    CHECK(gpu_sync_check_parse("", err, sizeof err) == 0);
    CHECK(gpu_sync_check_parse("0", err, sizeof err) == 0);
    CHECK(gpu_sync_check_parse("1", err, sizeof err) == 1);
    CHECK(gpu_sync_check_parse("yes", err, sizeof err) == -1 && strstr(err, "NVCNN_SYNC_CHECK=yes") && strstr(err, "want 1"));
    char w[256];
    gpu_layer_where(w, sizeof w, "backward", "conv7", "conv", 11, 160, "resnet50");
    CHECK_MSG(strcmp(w, "the backward of layer conv7 (conv, layer 12 of 160) of resnet50") == 0, "%s", w);
    gpu_layer_where(w, sizeof w, "forward", "bn0", "bn", 0, 3, NULL);
    CHECK_MSG(strcmp(w, "the forward of layer bn0 (bn, layer 1 of 3) of a net built by hand") == 0, "%s", w);
}

/* On a GPU: a run in the checking mode trains and says so; a bad value is refused (exit 2). */
TEST(gpu_sync_check_run) {
    if (tu_gpus() == 0) return;
    char *o = NULL;
    int rc = th_run("NVCNN_SYNC_CHECK=1 ./nvcnn --model=lenet --device=gpu --batch_size=16 --num_batches=3 --display_every=1 --nstep_burnin=0", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "NVCNN_SYNC_CHECK=1: synchronising after every layer") && strstr(o, "Images/sec: "),
              "exit %d:\n%s", rc, o);
    free(o);
    rc = th_run("NVCNN_SYNC_CHECK=yes ./nvcnn --model=lenet --device=gpu --batch_size=16 --num_batches=3", &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "NVCNN_SYNC_CHECK=yes: want 1"), "exit %d:\n%s", rc, o);
    free(o);
}
