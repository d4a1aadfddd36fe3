/* gpu.h: what the host program needs to know about GPUs (implemented in src/cuda/ when built with
 * CUDA, else by gpu_none.c). */
#ifndef NVCNN_GPU_H
#define NVCNN_GPU_H

#include <stddef.h>

/* Usable CUDA devices; 0 when there is no device or no driver. If `why` is given it receives the
 * reason when the count is 0. */
int gpu_count(char *why, size_t whylen);
/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" into buf. */
void gpu_describe(int device, char *buf, size_t n);
/* Bytes in use on the device (total minus free): the process's arenas, workspaces and context.
 * The GPU backend allocates nothing during a step, so at the end of a run this is its peak. */
size_t gpu_mem_used(int device);
/* The device's PCI bus id ("0000:1b:00.0") into buf: two ranks on one host with the same id share
 * a GPU, whatever each one's CUDA_VISIBLE_DEVICES numbering. */
void gpu_pci_bus_id(int device, char *buf, size_t n);
/* Page-locked host memory (cudaHostAlloc) for the loader's batches, so that their copies to the
 * device are asynchronous; plain aligned memory in a build without CUDA. Dies on failure. */
void *gpu_host_alloc(size_t bytes);
void gpu_host_free(void *p);
/* 1 if this build has the CUDA backend compiled in. */
int gpu_built(void);

#endif
