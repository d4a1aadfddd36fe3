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

#ifdef __cplusplus
}
#endif

#endif
