/* gpu_backend.h: the device primitives under gpu.h, implemented by src/cuda/device.cu in a build
 * with CUDA and by gpu_none.c without it. They hold no state and check no rule: gpu.c, the one
 * caller, keeps which device this process uses and refuses what needs a device before it is
 * chosen. (Dependencies go one way: gpu.c calls these, never the other way round.) */
#ifndef NVCNN_GPU_BACKEND_H
#define NVCNN_GPU_BACKEND_H

#include <stddef.h>

/* 1 if the CUDA backend is compiled in. */
int gpu_backend_built(void);
/* The CUDA runtime version it is built with (13000 for 13.0), 0 without CUDA. */
int gpu_backend_cuda_version(void);
/* Usable devices (0 with the reason in `why` when given); creates no context. */
int gpu_backend_count(char *why, size_t whylen);
/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"; creates no context. */
void gpu_backend_describe(int device, char *buf, size_t n);
/* The device's PCI bus id; creates no context. */
void gpu_backend_pci_bus_id(int device, char *buf, size_t n);
/* Makes `device` this process's current device (cudaSetDevice: its context). */
void gpu_backend_set_device(int device);
/* Free and total bytes of the current device. */
void gpu_backend_mem_info(size_t *free_bytes, size_t *total_bytes);
/* Page-locked host memory (plain aligned memory without CUDA); dies on failure. */
void *gpu_backend_host_alloc(size_t bytes);
void gpu_backend_host_free(void *p);

#endif
