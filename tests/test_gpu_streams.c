/* test_gpu_streams.c: the GPU tests whose work runs on more than one stream (the staged batches'
 * copy stream, the next batch copied while a step runs, NCCL's stream inside backward), again in
 * other orders of the emulated device's streams. make test runs every GPU test in the random order
 * of NVCNN_EMU_SEED (1); this one runs those again in the two fixed orders (compute-first: a copy
 * or NCCL runs only when something waits for it; side-first: before the compute stream's work) and
 * under another seed of the random one (tests/emu/runtime.cc, docs/gpu-emulation.md): three times
 * those tests' time, 43 s on two cores shared with other work (13 s for one order). On a GPU the
 * streams really run side by side, in whatever order the hardware takes: there it skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testutil.h"

/* the tests with work on more than one stream (a prefix selects several) */
#define MULTI_STREAM_TESTS "gpu_staged dist_gpu_ranks dist_gpu_nvcnn gpu_real_data_run"

TEST_LIMIT(gpu_multi_stream_tests_pass_in_other_stream_orders, 1200) {
    if (tu_gpus() == 0) return;
#ifndef NVCNN_GPU_EMU
    th_skip("on a GPU: its streams run side by side; the multi-stream tests ran under their own names");
#else
    const char *dir = getenv("NVCNN_BUILD");
    if (!dir || !*dir) {
        th_skip("NVCNN_BUILD does not name the emulated build (the runner sets it: tests/harness.c)");
        return;
    }
    static const char *const orders[] = {"compute-first", "side-first", "2"};
    for (size_t k = 0; k < sizeof orders / sizeof orders[0]; k++) {
        char env[64], summary[200], *o = NULL;
        snprintf(env, sizeof env, "NVCNN_EMU_STREAMS=%s", orders[k]);
        int ok = tu_run_tests(dir, env, MULTI_STREAM_TESTS, &o, summary, sizeof summary);
        printf("    %s: %s\n", env, summary);
        size_t len = o ? strlen(o) : 0;
        CHECK_MSG(ok, "%s: %s; the end of its output:\n%s", env, summary, o ? o + (len > 4000 ? len - 4000 : 0) : "");
        free(o);
    }
#endif
}
