/* device.h: CUDA's device programming model on the host, for the kernels of src/cuda/ compiled
 * as host C++ in the emulated build (make GPU_EMU=1; src/cuda/common.h includes this after the
 * toolkit's headers). A kernel is an ordinary function; LAUNCH (common.h) hands it, its grid and
 * its arguments to emu_launch(), which queues the grid on the stream. When the stream runs it,
 * the grid's blocks run one after another in a shuffled order, and each block's threads run as
 * fibers in a shuffled order (kernel.cc): a thread runs until it finishes or waits at
 * __syncthreads() or a warp intrinsic, and only then does another thread of its block run.
 *
 * What a kernel sees:
 *   threadIdx, blockIdx, blockDim, gridDim, warpSize   the running thread's coordinates
 *   __shared__                                         fixed-size shared memory: a static local,
 *       one per kernel, refilled with the poison pattern before each block of a grid that declared
 *       one (the build moves these statics into the section emu_shared: see the Makefile)
 *   __syncthreads()                                    a block barrier; threads that reach
 *       different barriers, or a barrier while others of the block have exited, are reported
 *   __shfl_{down,up,xor}_sync, __shfl_sync, __syncwarp the warp's lanes meet as on the GPU
 *   atomicAdd/Max/Min/Exch/CAS                         (blocks and threads never run at once)
 *   __fadd_rn, __fmul_rn, rsqrtf, __expf, ...          with the GPU's rounding where it is exact
 */
#ifndef NVCNN_EMU_DEVICE_H
#define NVCNN_EMU_DEVICE_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---- the running thread (set by kernel.cc before a thread runs or resumes) ---- */
extern uint3 emu_threadIdx, emu_blockIdx;
extern dim3 emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
static const int warpSize = 32;

/* A __shared__ declaration also notes, each time a thread passes it, that the running grid uses
 * shared memory (kernel.cc then refills the section before each of its blocks). Every __shared__
 * array of src/cuda/ is a kernel's local: the note is a statement before the static. */
extern int emu_shared_declared;
#undef __shared__
#define __shared__                                                                                                                     \
    emu_shared_declared = 1;                                                                                                           \
    static

/* ---- barriers and warp exchange (kernel.cc) ---- */
/* A block barrier (kernel.cc). Each __syncthreads of the source has a site of its own, the
 * address of a static the macro declares there (not the call's return address: the compiler may
 * copy a call into two paths, which are still one barrier), and the threads of a block must meet
 * at the same one. */
extern "C" void emu_syncthreads_at(const void *site);
#define __syncthreads()                                                                                                                \
    do {                                                                                                                               \
        static const char emu_barrier_site_ = 0;                                                                                       \
        emu_syncthreads_at(&emu_barrier_site_);                                                                                        \
    } while (0)

namespace emu {
enum ShflKind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
/* The warp's lanes in `mask` exchange 8-byte values: returns the value of the lane that `kind`
 * and `arg` select within segments of `width` lanes (the caller's own when out of range). */
uint64_t warp_shuffle(unsigned mask, uint64_t value, ShflKind kind, int arg, int width);
void warp_sync(unsigned mask);

template <typename T> static inline T shfl(unsigned mask, T v, ShflKind kind, int arg, int width) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "__shfl_*_sync of this type");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = warp_shuffle(mask, bits, kind, arg, width);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
} // namespace emu

template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return emu::shfl(mask, v, emu::SHFL_DOWN, (int)delta, width);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return emu::shfl(mask, v, emu::SHFL_UP, (int)delta, width);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return emu::shfl(mask, v, emu::SHFL_XOR, lane_mask, width);
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return emu::shfl(mask, v, emu::SHFL_IDX, src, width);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_sync(mask); }

/* ---- atomics: one thread of the device runs at a time ---- */
template <typename T> static inline T atomicAdd(T *a, T v) {
    T old = *a;
    *a = old + v;
    return old;
}
template <typename T> static inline T atomicMax(T *a, T v) {
    T old = *a;
    if (v > old) *a = v;
    return old;
}
template <typename T> static inline T atomicMin(T *a, T v) {
    T old = *a;
    if (v < old) *a = v;
    return old;
}
template <typename T> static inline T atomicExch(T *a, T v) {
    T old = *a;
    *a = v;
    return old;
}
template <typename T> static inline T atomicCAS(T *a, T cmp, T v) {
    T old = *a;
    if (old == cmp) *a = v;
    return old;
}

/* ---- arithmetic intrinsics ---- */
/* _rn: IEEE round to nearest, never contracted into an FMA (volatile keeps the compiler from it) */
static inline float __fadd_rn(float a, float b) {
    volatile float r = a + b;
    return r;
}
static inline float __fmul_rn(float a, float b) {
    volatile float r = a * b;
    return r;
}
static inline double __dadd_rn(double a, double b) {
    volatile double r = a + b;
    return r;
}
static inline double __dmul_rn(double a, double b) {
    volatile double r = a * b;
    return r;
}
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }

/* ---- vector types: every load and store of a whole vector checks its alignment ---- */
/* On a GPU an access of n bytes (a float4, a uint4, a __half2) at an address that is not a
 * multiple of n faults ("misaligned address"); the host's loads do not. In the emulated build the
 * kernels' vector types (float4, uint4, __half2, ...: the macros below, defined after the
 * toolkit's headers) are these, which derive from the toolkit's own: a copy from one (a load) or
 * into one (a store) at a misaligned address ends the run naming the kernel, its block and
 * thread, and the address. Their members (v.x) are scalar accesses, as on the GPU. A vector built
 * with braces ({a, b, c, d}) does not compile here: use make_float4(a, b, c, d). */
namespace emu {
[[noreturn]] void misaligned(const char *type, size_t bytes, const void *p, bool write);
template <typename V> const char *vec_name();
template <typename V> struct Vec : V {
    static inline void check(const void *p, bool write) {
        if ((uintptr_t)p & (alignof(V) - 1)) misaligned(vec_name<V>(), sizeof(V), p, write);
    }
    static inline const V &load(const Vec &o) {
        check(&o, false);
        return o;
    }
    Vec() = default;
    Vec(const V &v) : V(v) {}
    Vec(const Vec &o) : V(load(o)) {}
    Vec &operator=(const Vec &o) {
        const V &v = load(o);
        check(this, true);
        V::operator=(v);
        return *this;
    }
    Vec &operator=(const V &v) {
        check(this, true);
        V::operator=(v);
        return *this;
    }
};
} // namespace emu
#define EMU_VECTOR(T)                                                                                                      \
    template <> inline const char *emu::vec_name<::T>() { return #T; }                                                     \
    typedef emu::Vec<::T> emu_vec_##T;
EMU_VECTOR(char2)
EMU_VECTOR(uchar2)
EMU_VECTOR(char4)
EMU_VECTOR(uchar4)
EMU_VECTOR(short2)
EMU_VECTOR(ushort2)
EMU_VECTOR(short4)
EMU_VECTOR(ushort4)
EMU_VECTOR(int2)
EMU_VECTOR(uint2)
EMU_VECTOR(float2)
EMU_VECTOR(int4)
EMU_VECTOR(uint4)
EMU_VECTOR(float4)
EMU_VECTOR(longlong2)
EMU_VECTOR(ulonglong2)
EMU_VECTOR(double2)
EMU_VECTOR(__half2)
EMU_VECTOR(__nv_bfloat162)
#undef EMU_VECTOR
#define char2 emu_vec_char2
#define uchar2 emu_vec_uchar2
#define char4 emu_vec_char4
#define uchar4 emu_vec_uchar4
#define short2 emu_vec_short2
#define ushort2 emu_vec_ushort2
#define short4 emu_vec_short4
#define ushort4 emu_vec_ushort4
#define int2 emu_vec_int2
#define uint2 emu_vec_uint2
#define float2 emu_vec_float2
#define int4 emu_vec_int4
#define uint4 emu_vec_uint4
#define float4 emu_vec_float4
#define longlong2 emu_vec_longlong2
#define ulonglong2 emu_vec_ulonglong2
#define double2 emu_vec_double2
#define __half2 emu_vec___half2
#define __nv_bfloat162 emu_vec___nv_bfloat162

/* ---- lifetimes ---- */
namespace emu {
/* Fills [p, p + bytes) of device memory with the poison pattern in stream order on s: the host
 * code calls it where a tensor's lifetime starts (src/cuda/gpunet.cu), so that a read before the
 * tensor is written gives NaN. */
void poison_async(void *p, size_t bytes, cudaStream_t s);
} // namespace emu

/* ---- launches ---- */
namespace emu {
/* Checks that a kernel's pointer argument can be reached from the device (NULL, device memory
 * or pinned host memory); anything else ends the run naming the kernel and the argument. */
void check_kernel_pointer(const char *kernel, int index, const void *p);
/* A launch's kernel and the copy of its arguments that every thread of the grid calls it with,
 * behind two plain functions: each kernel signature instantiates only LaunchArgsOf's two (not
 * std::function and std::shared_ptr, which took a third of the time to compile src/cuda/). */
struct LaunchArgs {
    void (*call)(const LaunchArgs *); /* one thread of the grid */
    void (*drop)(LaunchArgs *);       /* when the grid is gone (or refused) */
};
template <typename... P> struct LaunchArgsOf : LaunchArgs {
    void (*kernel)(P...);
    std::tuple<P...> args;
    LaunchArgsOf(void (*k)(P...), P... a) : LaunchArgs{run, free}, kernel(k), args(a...) {}
    static void run(const LaunchArgs *b) {
        const LaunchArgsOf *l = static_cast<const LaunchArgsOf *>(b);
        std::apply(l->kernel, l->args);
    }
    static void free(LaunchArgs *b) { delete static_cast<LaunchArgsOf *>(b); }
};
/* Queues the grid on the stream (kernel.cc), which owns args from here on; a bad configuration
 * sets the error that cudaGetLastError() returns and runs nothing, as on the GPU. */
void launch(const char *kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t s, LaunchArgs *args);

template <typename T> static inline void check_arg(const char *kernel, int index, const T &v) {
    if constexpr (std::is_pointer<T>::value) check_kernel_pointer(kernel, index, (const void *)v);
    (void)kernel, (void)index, (void)v;
}
template <typename Tuple, size_t... I> static inline void check_args(const char *kernel, const Tuple &t, std::index_sequence<I...>) {
    (check_arg(kernel, (int)I + 1, std::get<I>(t)), ...);
}
} // namespace emu

/* kernel<<<grid, block, shared, stream>>>(args...) is LAUNCH(kernel, grid, block, shared, stream,
 * args...) (common.h), which here is emu_launcher(...)(args...): the call converts the arguments to
 * the kernel's parameter types as a launch does (NULL to a pointer, int to size_t), they are copied
 * now, and each thread of the grid calls the kernel with them. */
template <typename... P> struct EmuLauncher {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    void operator()(P... args) const {
        emu::LaunchArgsOf<P...> *a = new emu::LaunchArgsOf<P...>(kernel, args...);
        emu::check_args(name, a->args, std::index_sequence_for<P...>{});
        emu::launch(name, grid, block, shared_bytes, stream, a);
    }
};
template <typename... P>
static inline EmuLauncher<P...> emu_launcher(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
                                             cudaStream_t stream) {
    return EmuLauncher<P...>{name, kernel, grid, block, shared_bytes, stream};
}

#endif
