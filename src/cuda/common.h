/* common.h: error-checking macros for CUDA, cuDNN, cuBLAS and NCCL calls: each failure reports
 * the file, the line, the call and the library's error string, and, when it happens inside a
 * layer's forward or backward, the layer and the model (gpu_where), then exits. */
#ifndef NVCNN_CUDA_COMMON_H
#define NVCNN_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

/* LAUNCH(kernel, grid, block, shared_bytes, stream, args...): kernel<<<grid, block, shared_bytes,
 * stream>>>(args...). Every launch goes through it, so that the emulated build (make GPU_EMU=1,
 * tests/emu/) can run the same kernels on the host: there the kernels are host functions and
 * tests/emu/device.h provides threadIdx, __shared__, __syncthreads and the rest. */
/* A launch the device refuses (a grid or block outside its limits) is reported at the launch, with
 * its file and line: LAUNCH checks cudaGetLastError() after it (a host-side call, no
 * synchronisation). */
#ifdef NVCNN_GPU_EMU
#include "emu/device.h"
#define LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                                             \
    do {                                                                                                                   \
        emu_launcher(#kernel, kernel, grid, block, shared_bytes, stream)(__VA_ARGS__);                                     \
        KERNEL_CHECK_OF(#kernel);                                                                                          \
    } while (0)
#else
#define LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                                             \
    do {                                                                                                                   \
        kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__);                                                        \
        KERNEL_CHECK_OF(#kernel);                                                                                          \
    } while (0)
#endif

extern "C" {
#include "util.h"
/* " (in the forward of layer conv7 (conv, layer 12 of 160) of resnet50 ...)" while a layer runs,
 * else "" (gpunet.cu). */
void gpu_where(char *buf, size_t n);
}

#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)
static inline void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        char w[512];
        gpu_where(w, sizeof w);
        die("CUDA: %s failed at %s:%d: %s%s", what, file, line, cudaGetErrorString(e), w);
    }
}

#ifdef CUDNN_MAJOR
#define CUDNN_CHECK(call) cudnn_check_((call), #call, __FILE__, __LINE__)
static inline void cudnn_check_(cudnnStatus_t e, const char *what, const char *file, int line) {
    if (e != CUDNN_STATUS_SUCCESS) {
        char w[512];
        gpu_where(w, sizeof w);
        die("cuDNN: %s failed at %s:%d: %s%s", what, file, line, cudnnGetErrorString(e), w);
    }
}
#endif

#ifdef CUBLAS_VER_MAJOR
#define CUBLAS_CHECK(call) cublas_check_((call), #call, __FILE__, __LINE__)
static inline void cublas_check_(cublasStatus_t e, const char *what, const char *file, int line) {
    if (e != CUBLAS_STATUS_SUCCESS) {
        char w[512];
        gpu_where(w, sizeof w);
        die("cuBLAS: %s failed at %s:%d: %s%s", what, file, line, cublasGetStatusString(e), w);
    }
}
#endif

#ifdef NCCL_MAJOR
#define NCCL_CHECK(call) nccl_check_((call), #call, __FILE__, __LINE__)
static inline void nccl_check_(ncclResult_t e, const char *what, const char *file, int line) {
    if (e != ncclSuccess) {
        char w[512];
        gpu_where(w, sizeof w);
        die("NCCL: %s failed at %s:%d: %s%s", what, file, line, ncclGetErrorString(e), w);
    }
}
#endif

/* Launch-error check after a kernel launch. */
#define KERNEL_CHECK() cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
#define KERNEL_CHECK_OF(name) cuda_check_(cudaGetLastError(), "the launch of " name, __FILE__, __LINE__)

#endif
