/* gpu_none.c: the device primitives (gpu_backend.h) of a build without CUDA. */
#ifndef NVCNN_CUDA
#include <stdio.h>
#include <stdlib.h>

#include "gpu_backend.h"
#include "util.h"

int gpu_backend_built(void) { return 0; }

int gpu_backend_cuda_version(void) { return 0; }

int gpu_backend_count(char *why, size_t whylen) {
    if (why) snprintf(why, whylen, "this nvcnn was built without CUDA (CUDA=0)");
    return 0;
}

void gpu_backend_describe(int device, char *buf, size_t n) { snprintf(buf, n, "gpu %d (not built)", device); }

void gpu_backend_pci_bus_id(int device, char *buf, size_t n) { snprintf(buf, n, "none:%d", device); }

void gpu_backend_set_device(int device) { (void)device; }

void gpu_backend_mem_info(size_t *free_bytes, size_t *total_bytes) { *free_bytes = *total_bytes = 0; }

void *gpu_backend_host_alloc(size_t bytes) { return xmalloc_aligned(bytes); }

void gpu_backend_host_free(void *p) { free(p); }
#else
typedef int gpu_none_unused; /* ISO C forbids an empty translation unit */
#endif
