/* cublas_load.cu: cuBLAS loaded when the GPU backend first asks for it, not when nvcnn starts.
 *
 * cuBLAS (with cuBLASLt, which it needs) is about 600 MB of shared objects whose relocations cost
 * every process that links them about 0.15 s of CPU and 26,000 page faults at start-up: a run on
 * the CPU, `nvcnn --help`, a bad flag and every rank of a CPU job paid it for a library only the
 * GPU backend's fully connected layers call. This file defines the seven cuBLAS functions nvcnn
 * calls (the names cublas_v2.h maps them to); the first of them loads libcublas.so.<major> (the
 * toolkit's major version, found the way the dynamic linker finds a linked library: nvcnn's
 * run path, LD_LIBRARY_PATH, the system's cache) and each forwards to the library's own. If the
 * library cannot be loaded, one line says which and why, and the calls return
 * CUBLAS_STATUS_NOT_INITIALIZED, which CUBLAS_CHECK reports where it was called.
 *
 * Not in the emulated build, whose cuBLAS is tests/emu/cublas.cc. */
#ifndef NVCNN_GPU_EMU
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define CUBLAS_LOAD_STR2(x) #x
#define CUBLAS_LOAD_STR(x) CUBLAS_LOAD_STR2(x)
#define CUBLAS_LOAD_SONAME "libcublas.so." CUBLAS_LOAD_STR(CUBLAS_VER_MAJOR)

namespace {
struct Table {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *, const float *, int,
                            const float *, int, const float *, float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *,
                              cudaDataType, int, const void *, cudaDataType, int, const void *, void *, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t);
};
Table table;
bool loaded;
pthread_once_t once = PTHREAD_ONCE_INIT;

template <typename F> bool find(void *lib, const char *name, F *f) {
    *f = (F)dlsym(lib, name);
    if (!*f) fprintf(stderr, "nvcnn: error: %s has no %s: %s\n", CUBLAS_LOAD_SONAME, name, dlerror());
    return *f != nullptr;
}

void load() {
    void *lib = dlopen(CUBLAS_LOAD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "nvcnn: error: cannot load cuBLAS (%s), which the GPU backend needs: %s\n", CUBLAS_LOAD_SONAME, dlerror());
        return;
    }
    Table t;
    loaded = find(lib, "cublasCreate_v2", &t.create) && find(lib, "cublasDestroy_v2", &t.destroy) &&
             find(lib, "cublasSetStream_v2", &t.set_stream) && find(lib, "cublasSetMathMode", &t.set_math_mode) &&
             find(lib, "cublasGetStatusString", &t.status_string) && find(lib, "cublasSgemm_v2", &t.sgemm) &&
             find(lib, "cublasGemmEx", &t.gemm_ex);
    if (loaded) table = t;
}

bool ready() {
    pthread_once(&once, load);
    return loaded;
}
} // namespace

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle) {
    return ready() ? table.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
    return ready() ? table.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    return ready() ? table.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    return ready() ? table.set_math_mode(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    if (ready()) return table.status_string(status);
    return status == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED (" CUBLAS_LOAD_SONAME " could not be loaded)"
                                                   : "a cuBLAS error (" CUBLAS_LOAD_SONAME " could not be loaded to name it)";
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                                           float *C, int ldc) {
    return ready() ? table.sgemm(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                                         int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                                         cublasGemmAlgo_t algo) {
    return ready() ? table.gemm_ex(handle, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo)
                   : CUBLAS_STATUS_NOT_INITIALIZED;
}
#endif
