/* device.cu: the device primitives of gpu_backend.h on the CUDA runtime: discovery, the current
 * device, memory figures and pinned host memory. gpu.c is their one caller. */
#include <stdio.h>

#include "common.h"

extern "C" {
#include "gpu_backend.h"

int gpu_backend_built(void) { return 1; }

int gpu_backend_cuda_version(void) { return CUDART_VERSION; }

int gpu_backend_count(char *why, size_t whylen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why) {
            if (e == cudaErrorNoDevice)
                snprintf(why, whylen, "no CUDA device");
            else if (e == cudaErrorInsufficientDriver)
                snprintf(why, whylen, "no NVIDIA driver, or one older than this build's CUDA %d.%d", CUDART_VERSION / 1000,
                         CUDART_VERSION % 1000 / 10);
            else
                snprintf(why, whylen, "%s", cudaGetErrorString(e));
        }
        cudaGetLastError(); /* clear the sticky-free error state */
        return 0;
    }
    if (n == 0 && why) snprintf(why, whylen, "no CUDA device found");
    return n;
}

void gpu_backend_describe(int device, char *buf, size_t n) {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    snprintf(buf, n, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor, (double)p.totalGlobalMem / (1u << 30));
}

/* The only cudaSetDevice of the program (gpu_select in gpu.c calls it). */
void gpu_backend_set_device(int device) { CUDA_CHECK(cudaSetDevice(device)); }

void gpu_backend_mem_info(size_t *free_bytes, size_t *total_bytes) { CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes)); }

void gpu_backend_pci_bus_id(int device, char *buf, size_t n) { CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)n, device)); }

void *gpu_backend_host_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return p;
}

void gpu_backend_host_free(void *p) { CUDA_CHECK(cudaFreeHost(p)); }
}
