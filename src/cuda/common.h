/* common.h: error-checking macros for CUDA, cuDNN, cuBLAS and NCCL calls: each failure reports
 * the file, the line, the call and the library's error string, then exits. */
#ifndef NVCNN_CUDA_COMMON_H
#define NVCNN_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)
static inline void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "nvcnn: error: CUDA: %s failed at %s:%d: %s\n", what, file, line, cudaGetErrorString(e));
        exit(1);
    }
}

#ifdef CUDNN_MAJOR
#define CUDNN_CHECK(call) cudnn_check_((call), #call, __FILE__, __LINE__)
static inline void cudnn_check_(cudnnStatus_t e, const char *what, const char *file, int line) {
    if (e != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "nvcnn: error: cuDNN: %s failed at %s:%d: %s\n", what, file, line, cudnnGetErrorString(e));
        exit(1);
    }
}
#endif

#ifdef CUBLAS_VER_MAJOR
#define CUBLAS_CHECK(call) cublas_check_((call), #call, __FILE__, __LINE__)
static inline void cublas_check_(cublasStatus_t e, const char *what, const char *file, int line) {
    if (e != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "nvcnn: error: cuBLAS: %s failed at %s:%d: %s\n", what, file, line, cublasGetStatusString(e));
        exit(1);
    }
}
#endif

/* Launch-error check after a kernel launch. */
#define KERNEL_CHECK() cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

#endif
