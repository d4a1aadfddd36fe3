/* test_cublas_load.c: cuBLAS is loaded by the GPU backend's first call to it
 * (src/cuda/cublas_load.cu), not when nvcnn starts: ./nvcnn does not name it among the libraries
 * it needs, this process has not mapped it before the first call, and after it the calls reach
 * NVIDIA's library (its own text for a status, a handle made where there is a GPU, an error
 * status, not a crash, where there is none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "harness.h"
#include "testutil.h"

#if defined(NVCNN_CUDA) && !defined(NVCNN_GPU_EMU)
#include <cublas_v2.h>

/* whether this process has a file whose name contains `name` mapped */
static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}
#endif

TEST(cublas_is_loaded_on_first_use_not_at_start) {
#if !defined(NVCNN_CUDA)
    th_skip("built without CUDA: no cuBLAS to load");
#elif defined(NVCNN_GPU_EMU)
    th_skip("the emulated device's cuBLAS is part of the build (tests/emu/cublas.cc)");
#else
    char *o = NULL;
    int rc = th_run("readelf -d ./nvcnn", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "(NEEDED)") && strstr(o, "libcudnn"), "readelf -d ./nvcnn: exit %d\n%s", rc, o);
    CHECK_MSG(o && !strstr(o, "libcublas"), "./nvcnn still needs cuBLAS at start:\n%s", o);
    free(o);
    /* a test runs in a process of its own, forked from the runner, which calls no cuBLAS */
    CHECK_MSG(mapped("libcublas.so") == 0, "cuBLAS was mapped before the first call");
    const char *s = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
    CHECK_MSG(s && *s && !strstr(s, "could not be loaded"), "cublasGetStatusString: %s", s ? s : "(null)");
    CHECK_MSG(mapped("libcublas.so") == 1, "cuBLAS is not mapped after the first call");
    CHECK_MSG(mapped("libcublasLt.so") == 1, "cuBLASLt (which cuBLAS needs) is not mapped after the first call");
    cublasHandle_t h = NULL;
    cublasStatus_t st = cublasCreate(&h);
    char why[256];
    if (gpu_count(why, sizeof why) > 0) {
        CHECK_MSG(st == CUBLAS_STATUS_SUCCESS, "cublasCreate on a GPU: %s", cublasGetStatusString(st));
        if (st == CUBLAS_STATUS_SUCCESS) CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    } else {
        CHECK_MSG(st != CUBLAS_STATUS_SUCCESS, "cublasCreate without a GPU succeeded");
        printf("    without a GPU, cublasCreate returns %s\n", cublasGetStatusString(st));
    }
#endif
}
