/* cublas.cc: the cuBLAS subset of the emulated device (emu.h): handles, streams, math modes,
 * cublasSgemm and cublasGemmEx. Column-major C = alpha op(A) op(B) + beta C with fp32 accumulation
 * over k in order; 16-bit data read as float and C rounded once at the end; beta == 0 ignores
 * what C held (NaNs included), as cuBLAS does. TF32: CUBLAS_TF32_TENSOR_OP_MATH (Sgemm) and
 * CUBLAS_COMPUTE_32F_FAST_TF32 (GemmEx) round both factors of every product to TF32 (10 explicit
 * mantissa bits, round to nearest even). Arguments are validated as the cuBLAS reference says:
 * m, n, k >= 0, lda >= max(1, rows of op(A) as stored), ldb likewise, ldc >= max(1, m), the
 * (Atype, Btype, Ctype, computeType) combinations of cublasGemmEx's table that the backend's
 * precisions use, device pointers covering the whole matrices. Written independently of
 * src/layers/. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "emu.h"

struct cublasContext {
    cudaStream_t stream = 0;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {


float load(const void *p, cudaDataType_t t, size_t i) {
    switch (t) {
    case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

void store(void *p, cudaDataType_t t, size_t i, float v) {
    switch (t) {
    case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn(v); break;
    case CUDA_R_16BF: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

size_t type_size(cudaDataType_t t) { return t == CUDA_R_16F || t == CUDA_R_16BF ? 2 : 4; }

/* op(X) of an r x c column-major matrix stored with leading dimension ld, as a dense float copy
 * [rows of op][cols of op] in column-major order (element (i, j) at i + j * rows). */
std::vector<float> unpack(const void *x, cudaDataType_t t, cublasOperation_t op, int rows, int cols, int ld, bool round) {
    std::vector<float> out((size_t)rows * cols);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) {
            size_t at = op == CUBLAS_OP_N ? (size_t)i + (size_t)j * ld : (size_t)j + (size_t)i * ld;
            float v = load(x, t, at);
            out[(size_t)i + (size_t)j * rows] = round ? emu::tf32(v) : v;
        }
    return out;
}

/* bytes a column-major matrix of `rows` x `cols` with leading dimension ld spans */
size_t span(int rows, int cols, int ld, size_t es) { return rows && cols ? ((size_t)(cols - 1) * ld + rows) * es : 0; }

cublasStatus_t gemm(const char *call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    const void *A, cudaDataType_t at, int lda, const void *B, cudaDataType_t bt, int ldb, float beta, void *C,
                    cudaDataType_t ct, int ldc, bool round) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    const bool ok_op = (ta == CUBLAS_OP_N || ta == CUBLAS_OP_T || ta == CUBLAS_OP_C) && (tb == CUBLAS_OP_N || tb == CUBLAS_OP_T || tb == CUBLAS_OP_C);
    const int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
    const int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
    if (!ok_op || m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1)) {
        emu::reject("%s: m %d, n %d, k %d, lda %d (op(A) rows %d), ldb %d (op(B) rows %d), ldc %d: invalid", call, m, n, k, lda, arows, ldb,
                    brows, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    const size_t abytes = span(arows, acols, lda, type_size(at)), bbytes = span(brows, bcols, ldb, type_size(bt)),
                 cbytes = span(m, n, ldc, type_size(ct));
    if (k > 0 && (!emu::is_device_range(A, abytes) || !emu::is_device_range(B, bbytes)))
        emu::fatal("%s: A (%zu bytes) or B (%zu bytes) is not inside a device allocation", call, abytes, bbytes);
    if (!emu::is_device_range(C, cbytes)) emu::fatal("%s: C (%zu bytes) is not inside a device allocation", call, cbytes);
    emu::enqueue(h->stream, call, [=]() {
        std::vector<float> a = unpack(A, at, ta, m, k, lda, round), b = unpack(B, bt, tb, k, n, ldb, round);
#pragma omp parallel for schedule(static) if (2.0 * m * n * k > 4e6)
        for (int j = 0; j < n; j++) {
            std::vector<float> acc((size_t)m, 0.0f);
            for (int p = 0; p < k; p++) {
                const float bv = b[(size_t)p + (size_t)j * k];
                const float *ac = &a[(size_t)p * m];
                for (int i = 0; i < m; i++) acc[(size_t)i] += ac[i] * bv;
            }
            for (int i = 0; i < m; i++) {
                const size_t at_c = (size_t)i + (size_t)j * ldc;
                float v = alpha * acc[(size_t)i];
                if (beta != 0.0f) v += beta * load(C, ct, at_c);
                store(C, ct, at_c, v);
            }
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    emu::Lock lock;
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    emu::Lock lock;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    emu::sync_stream(h->stream); /* its work completes first */
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s) return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    const unsigned base = (unsigned)mode & 0xfu, flags = (unsigned)mode & ~0xfu;
    if (base > CUBLAS_TF32_TENSOR_OP_MATH || (flags & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) {
        emu::reject("cublasSetMathMode: mode %d is not one of cuBLAS's", (int)mode);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->math;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc) {
    emu::Lock lock;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    /* TF32 only when the handle's math mode asks for it */
    const bool round = ((unsigned)h->math & 0xfu) == CUBLAS_TF32_TENSOR_OP_MATH;
    return gemm("cublasSgemm", h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, CUDA_R_32F, ldc, round);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    emu::Lock lock;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    (void)algo; /* every algorithm computes the same here */
    /* cublasGemmEx's table, the fp32-compute rows: (16F, 16F) -> 16F or 32F, (16BF, 16BF) -> 16BF
     * or 32F, (32F, 32F) -> 32F, with CUBLAS_COMPUTE_32F, _32F_PEDANTIC or _32F_FAST_TF32 (the
     * latter for 32F data only); alpha and beta are floats. */
    const bool f32 = computeType == CUBLAS_COMPUTE_32F || computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
                     computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
    const bool types = Atype == Btype && ((Atype == CUDA_R_16F && (Ctype == CUDA_R_16F || Ctype == CUDA_R_32F)) ||
                                          (Atype == CUDA_R_16BF && (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F)) ||
                                          (Atype == CUDA_R_32F && Ctype == CUDA_R_32F));
    if (!f32) {
        emu::reject("cublasGemmEx: compute type %d is not emulated (the fp32 compute types are)", (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!types || (computeType == CUBLAS_COMPUTE_32F_FAST_TF32 && Atype != CUDA_R_32F)) {
        emu::reject("cublasGemmEx: A type %d, B type %d, C type %d with compute type %d: not a combination of cublasGemmEx's table",
                    (int)Atype, (int)Btype, (int)Ctype, (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const bool round = computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                       (computeType == CUBLAS_COMPUTE_32F && Atype == CUDA_R_32F && ((unsigned)h->math & 0xfu) == CUBLAS_TF32_TENSOR_OP_MATH);
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, *(const float *)alpha, A, Atype, lda, B, Btype, ldb, *(const float *)beta, C, Ctype,
                ldc, round);
}

} /* extern "C" */
