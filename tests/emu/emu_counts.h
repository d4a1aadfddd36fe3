/* emu_counts.h: what the emulated device counts, for tests of how the GPU backend uses the device
 * (tests/test_gpu_guards.c). Only the emulated build (make GPU_EMU=1) has it. */
#ifndef NVCNN_EMU_COUNTS_H
#define NVCNN_EMU_COUNTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Launches of `kernel` that the device accepted so far in this process, by the name LAUNCH
 * gives it (src/cuda/common.h: the kernel as written, "k_larc_norms" or "k_bias_partial<T>"). */
long emu_launches(const char *kernel);
/* Calls of cuDNN's Find (cudnnFind*ConvolutionForward/BackwardData/BackwardFilterAlgorithm: the
 * timed measurements) and of its heuristics (cudnnGet*Algorithm_v7) so far in this process. */
long emu_cudnn_finds(void);
long emu_cudnn_heuristics(void);
/* The NCHW <-> NHWC transposes cuDNN runs inside its convolutions (tests/emu/cudnn.cc: a 16-bit
 * tensor-op convolution given NCHW operands transposes each) so far in this process. */
long emu_cudnn_transposes(void);
/* Every kernel that has been launched so far and its launches, in the order of their names: up to
 * max of them into names[] and counts[]; returns how many there are (which may be more than max).
 * The names stay valid until the process exits. */
int emu_launch_table(const char **names, long *counts, int max);
/* The times the host waited for the device so far: cudaStreamSynchronize, cudaDeviceSynchronize,
 * cudaEventSynchronize, cudaFree, cudaMemcpy, cudaMemset, and cudaMemcpyAsync into pageable host
 * memory (synchronous by CUDA's documented behaviour). */
long emu_host_syncs(void);
/* The stream work queued so far whose name starts with prefix: a library's ("cudnn", "cublas";
 * "ncclAllReduce (reads" once per allreduce), copies ("cudaMemcpyAsync"), memsets
 * ("cudaMemsetAsync"), "cudaEventRecord", "cudaStreamWaitEvent", a kernel by its LAUNCH name; and
 * emu_stream_ops("cudnn"): cuDNN's computations (convolutions, batch norm, ...). */
long emu_stream_ops(const char *prefix);
long emu_cudnn_calls(void);
/* cudaGraphLaunch calls so far, and the graphs' ops (kernels, library calls, copies, memsets) they
 * queued; those ops count in emu_stream_ops as they are queued, not in emu_launches. */
long emu_graph_launches(void);
long emu_graph_ops(void);

#ifdef __cplusplus
}
#endif

#endif
