/* gpu_none.c: the GPU queries of a build without CUDA. */
#ifndef NVCNN_CUDA
#include <stdio.h>

#include "gpu.h"

int gpu_count(char *why, size_t whylen) {
    if (why) snprintf(why, whylen, "this nvcnn was built without CUDA (CUDA=0)");
    return 0;
}

void gpu_describe(int device, char *buf, size_t n) { snprintf(buf, n, "gpu %d (not built)", device); }

int gpu_built(void) { return 0; }
#else
typedef int gpu_none_unused; /* ISO C forbids an empty translation unit */
#endif
