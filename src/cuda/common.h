/* common.h: error-checking macros for CUDA, cuDNN, cuBLAS and NCCL calls: each failure reports
 * the file, the line, the call and the library's error string, then exits. */
#ifndef NVCNN_CUDA_COMMON_H
#define NVCNN_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "util.h"
}

#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)
static inline void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        die("CUDA: %s failed at %s:%d: %s", what, file, line, cudaGetErrorString(e));
    }
}

#ifdef CUDNN_MAJOR
#define CUDNN_CHECK(call) cudnn_check_((call), #call, __FILE__, __LINE__)
static inline void cudnn_check_(cudnnStatus_t e, const char *what, const char *file, int line) {
    if (e != CUDNN_STATUS_SUCCESS) {
        die("cuDNN: %s failed at %s:%d: %s", what, file, line, cudnnGetErrorString(e));
    }
}
#endif

#ifdef CUBLAS_VER_MAJOR
#define CUBLAS_CHECK(call) cublas_check_((call), #call, __FILE__, __LINE__)
static inline void cublas_check_(cublasStatus_t e, const char *what, const char *file, int line) {
    if (e != CUBLAS_STATUS_SUCCESS) {
        die("cuBLAS: %s failed at %s:%d: %s", what, file, line, cublasGetStatusString(e));
    }
}
#endif

#ifdef NCCL_MAJOR
#define NCCL_CHECK(call) nccl_check_((call), #call, __FILE__, __LINE__)
static inline void nccl_check_(ncclResult_t e, const char *what, const char *file, int line) {
    if (e != ncclSuccess) die("NCCL: %s failed at %s:%d: %s", what, file, line, ncclGetErrorString(e));
}
#endif

/* Launch-error check after a kernel launch. */
#define KERNEL_CHECK() cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

#endif
