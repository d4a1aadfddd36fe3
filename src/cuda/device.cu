/* device.cu: GPU discovery, device selection and pinned memory for the host program. */
#include <stdio.h>

#include "common.h"

extern "C" {
#include "gpu.h"

int gpu_count(char *why, size_t whylen) {
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

void gpu_describe(int device, char *buf, size_t n) {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    snprintf(buf, n, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor, (double)p.totalGlobalMem / (1u << 30));
}

/* The only cudaSetDevice of the program (gpu_select in gpu_select.c calls it). */
void gpu_set_device_backend(int device) { CUDA_CHECK(cudaSetDevice(device)); }

size_t gpu_mem_used(int device) {
    gpu_require("gpu_mem_used");
    if (device != gpu_selected()) die("gpu_mem_used(%d): this process uses GPU %d", device, gpu_selected());
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return tot - fr;
}

void gpu_pci_bus_id(int device, char *buf, size_t n) { CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)n, device)); }

void *gpu_host_alloc(size_t bytes) {
    gpu_require("gpu_host_alloc");
    void *p = NULL;
    CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return p;
}

void gpu_host_free(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

int gpu_built(void) { return 1; }
}
