/* gpu.h: what the host program needs to know about GPUs (gpu.c, over the device primitives of
 * gpu_backend.h: src/cuda/device.cu when built with CUDA, else gpu_none.c). */
#ifndef NVCNN_GPU_H
#define NVCNN_GPU_H

#include <stddef.h>

/* Which GPU this process uses. gpu_select() is the one function that sets the device
 * (cudaSetDevice, which also creates the process's CUDA context on it), and a process calls it
 * once, right after MPI start-up and before any other CUDA call that creates or uses a context:
 * pinned host memory, allocations, streams, library handles. A context created before it would
 * land on GPU 0 in every rank (a stray context per rank on a multi-GPU node, and an error on GPUs
 * in EXCLUSIVE_PROCESS mode). Every function of the GPU backend that needs a context calls
 * gpu_require(), which dies naming the caller when no device has been selected yet. The queries
 * gpu_count, gpu_describe and gpu_pci_bus_id create no context and may come before.
 * Selecting the same device again does nothing; another device is an error. */
void gpu_select(int device);
/* The selected device, or -1. */
int gpu_selected(void);
/* How many times gpu_select() has set the device (1 after any number of calls for one device). */
int gpu_select_count(void);
/* Dies with "<what> before the GPU was selected" unless gpu_select() has run. */
void gpu_require(const char *what);

/* Usable CUDA devices; 0 when there is no device or no driver. If `why` is given it receives the
 * reason when the count is 0. */
int gpu_count(char *why, size_t whylen);
/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" into buf. */
void gpu_describe(int device, char *buf, size_t n);
/* Bytes in use on the device (total minus free): the process's arenas, workspaces and context.
 * The GPU backend allocates nothing during a step, so at the end of a run this is its peak.
 * `device` must be the selected one. */
size_t gpu_mem_used(int device);
/* The device's PCI bus id ("0000:1b:00.0") into buf: two ranks on one host with the same id share
 * a GPU, whatever each one's CUDA_VISIBLE_DEVICES numbering. */
void gpu_pci_bus_id(int device, char *buf, size_t n);
/* Page-locked host memory (cudaHostAlloc) for the loader's batches, so that their copies to the
 * device are asynchronous; plain aligned memory in a build without CUDA. Dies on failure, and
 * before gpu_select() (pinned memory belongs to a context). */
void *gpu_host_alloc(size_t bytes);
void gpu_host_free(void *p);
/* 1 if this build has the CUDA backend compiled in. */
int gpu_built(void);

/* 1 when NVIDIA's driver sees GPUs (nvidia-smi lists them) but the CUDA runtime finds none, which
 * is what a driver older than this build's CUDA needs gives: msg then names the GPUs, the driver's
 * version and the version needed. 0 when there is a GPU, or no driver (no nvidia-smi) at all. */
int gpu_driver_problem(char *msg, size_t n);
/* Its decision on given output of `nvidia-smi --query-gpu=driver_version --format=csv,noheader`
 * (a line per GPU) and a CUDA version (13000 for 13.0), for tests. */
int gpu_driver_problem_of(const char *smi_output, int cuda_version, char *msg, size_t n);

/* The checking mode, NVCNN_SYNC_CHECK=1: the GPU backend synchronises after every layer's forward
 * and backward, so that a kernel fault or a library failure is reported at the layer that caused
 * it, named with its model, instead of at some later call (slow: for finding faults). Unset,
 * empty or 0: off; 1: on; anything else ends the run (exit 2). Read once. */
int gpu_sync_check(void);
/* The parse of one value of NVCNN_SYNC_CHECK (NULL: unset): 0 or 1, or -1 with a message. */
int gpu_sync_check_parse(const char *value, char *err, size_t errlen);
/* Where a failure happened, for error messages: "the backward of layer conv7 (conv, layer 12 of
 * 160) of resnet50" (model NULL: "of a net built by hand"). */
void gpu_layer_where(char *buf, size_t n, const char *phase, const char *layer, const char *type, int index, int count,
                     const char *model);

#endif
