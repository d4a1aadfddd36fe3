/* emu.h: the emulated CUDA device's internal interface, shared by its parts (the .cc files of tests/emu).
 *
 * The emulated device is a test instrument (make GPU_EMU=1), never linked into the nvcnn that
 * users run. It implements the subsets of the CUDA runtime, cuDNN, cuBLAS and NCCL that
 * src/cuda/ calls, on host memory, against the toolkit's own headers (so a signature mismatch is a
 * compile error), and runs the backend's kernels as host code (device.h). It is stricter than a
 * real GPU where it can be: guarded and poisoned memory, adversarial stream order, validated
 * descriptors. Its maths is written here with plain loops, independently of src/layers/.
 *
 * Parts (tests/emu/): runtime.cc (devices, memory, streams and events, errors), kernel.cc (grids, blocks and
 * threads as fibers), cudnn.cc (with cudnn_algo.cc: the convolution algorithms), cublas.cc, nccl.cc.
 */
#ifndef NVCNN_EMU_H
#define NVCNN_EMU_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

namespace emu {

/* ---- diagnostics ---- */
/* A fault of the emulated device (an access outside device memory, a kernel that breaks the
 * programming model, ...): prints "nvcnn emulated device: <message>" with the work that was
 * running, and exits 1 (what a CUDA_CHECK of cudaErrorIllegalAddress would do). */
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A call the emulated library rejects (returning an error status): the reason, printed to stderr
 * as "nvcnn emulated device: <message>" so that the caller's check macro has context. */
void reject(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- configuration (environment, read once) ---- */
/* NVCNN_EMU_SEED: the seed of every shuffle (block and thread order, and the streams' random order
 * unless NVCNN_EMU_STREAMS names a seed of its own); default 1. */
uint64_t seed();
/* A variable of the environment, or NULL. */
const char *env(const char *name);

/* ---- the API lock ---- */
/* Every entry point of the emulated libraries holds it for the whole call (the emulator's state
 * and the work it runs are not thread-safe otherwise). Recursive. */
struct Lock {
    Lock();
    ~Lock();
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;
};

/* ---- device memory ---- */
/* 1 if [p, p + bytes) lies inside one live device allocation (cudaMalloc). */
bool is_device_range(const void *p, size_t bytes);
/* 1 if [p, p + bytes) lies inside one live device allocation or pinned host allocation
 * (cudaHostAlloc: reachable from the device through unified addressing). */
bool is_device_reachable(const void *p, size_t bytes);
/* A description of where p points for error messages: "offset 128 of a 4096-byte device
 * allocation", "a freed device allocation", "host memory". */
void describe_pointer(const void *p, char *buf, size_t n);
/* Fills [p, p + bytes) with the poison pattern: 0xFF bytes, a NaN in fp32, fp64, fp16 and bf16
 * and -1 in every integer type. Fresh device memory and every cuDNN workspace hold it. */
void poison(void *p, size_t bytes);
/* Device memory free now (what cudaMemGetInfo reports). */
size_t mem_free();

/* ---- streams ---- */
/* Queues `work` on stream s (0: the legacy default stream). It runs in stream order, when the
 * emulator's stream policy decides (at once, later, or when something waits for it):
 * anything it reads from the host must be captured by value at the call. `what` names it in
 * diagnostics ("cudnnConvolutionForward"). `compute` marks work that a GPU would run on its SMs
 * (kernels and library computations: the stream becomes a compute stream), as opposed to copies
 * and communication. `collective` marks work that waits for other processes (NCCL's exchange):
 * it runs only when something waits for it (runtime.cc says why). */
void enqueue(cudaStream_t s, const char *what, std::function<void()> work, bool compute = true, bool collective = false);
/* The stream order from now on, as NVCNN_EMU_STREAMS would set it ("random", a seed,
 * "compute-first", "side-first"): for the emulator's self-tests. */
void set_streams(const char *order);
/* Runs everything queued on s (the host waits for it). */
void sync_stream(cudaStream_t s);
/* A library call that would synchronise or allocate (cuDNN's Find) while a stream is being
 * captured: true, and the capture is invalidated, as CUDA's global capture mode does (runtime.cc). */
bool capture_refuses(const char *call);
/* The name of the work running now (for diagnostics), or NULL. */
const char *running();

/* ---- arithmetic ---- */
/* fp32 -> TF32 as the tensor cores take it: 10 explicit mantissa bits, rounded to nearest even
 * (NaN and inf kept). cuDNN and cuBLAS round both factors of every product so when their math
 * mode allows TF32 for fp32 data. */
static inline float tf32(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return v;
    u += 0xfffu + ((u >> 13) & 1u);
    u &= 0xffffe000u;
    memcpy(&v, &u, 4);
    return v;
}

/* ---- between the runtime and the kernels ---- */
/* The kernel, block and thread running now ("" outside a kernel), for fault reports. */
void running_thread(char *buf, size_t n);
/* A launch the device refuses: the error cudaGetLastError() will return, and why. */
void set_launch_error(cudaError_t e, const char *why);

} // namespace emu

#endif
