/* convalgo.h: how the GPU backend chooses cuDNN's convolution algorithms, in plain C so that the
 * rules can be tested without a GPU (src/cuda/conv.cu fills these from cudnnFind* and applies
 * the choice).
 *
 * For each direction (forward, backward data, backward filter) cudnnFind* times every algorithm
 * and reports its status, time, workspace and the math type it ran with. A result serves a
 * precision only if its math type keeps that precision's arithmetic (true fp32 takes no tensor-op
 * result: no TF32; nothing but fp16 takes a result that converted its data to fp16). Of those,
 * true fp32 takes no WINOGRAD_NONFUSED on a filter larger than 3x3 either (convalgo_accurate).
 * Of those, the fastest whose workspace fits a limit is chosen; if none fits, the one with the smallest
 * workspace. A deterministic run (--deterministic) takes only results that cuDNN reports
 * CUDNN_DETERMINISTIC, from its heuristics' list instead of its measurements (their order does
 * not depend on timings), in that list's order. Measurements are cached by what they depend on
 * (ConvKey: direction, precision, shapes, padding, strides), so that a network's repeated shapes
 * are measured once.
 */
#ifndef NVCNN_CONVALGO_H
#define NVCNN_CONVALGO_H

#include <stddef.h>

#include "layers/priv.h"

typedef enum { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 } ConvDir;
#define CONV_NDIR 3

/* cuDNN's math types, with cudnnMathType_t's values */
enum { CONVALGO_MATH_DEFAULT = 0, CONVALGO_MATH_TENSOR_OP = 1, CONVALGO_MATH_TENSOR_OP_CONVERT = 2, CONVALGO_MATH_FMA = 3 };

/* One measured algorithm. */
typedef struct ConvAlgoPerf {
    int algo;      /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    int ok;        /* it ran (CUDNN_STATUS_SUCCESS) */
    float ms;      /* its time */
    size_t memory; /* its workspace in bytes, as measured */
    int math;      /* the math type it ran with */
    int deterministic; /* cuDNN reports it CUDNN_DETERMINISTIC (the same bits every call) */
} ConvAlgoPerf;

/* cudnnFind* returns one result per algorithm AND math type (FMA, DEFAULT, TENSOR_OP, ...), so a
 * direction's list is longer than its algorithm count: up to 8 forward algorithms times 4 math
 * types. Asking for fewer can leave out every result that a precision accepts (fp32's FMA results
 * pushed out by DEFAULT-math duplicates). */
#define CONVALGO_MAX 32
/* One direction's measurements. */
typedef struct ConvAlgoList {
    int n;
    ConvAlgoPerf p[CONVALGO_MAX];
} ConvAlgoList;

/* Whether a result measured with math type `math` may serve `precision` (a Precision). */
int convalgo_math_ok(int precision, int math);
/* cuDNN's WINOGRAD_NONFUSED in each direction (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t;
 * src/cuda/conv.cu asserts that they are cuDNN's values) */
enum { CONVALGO_FWD_WINOGRAD_NONFUSED = 7, CONVALGO_BWD_DATA_WINOGRAD_NONFUSED = 5, CONVALGO_BWD_FILTER_WINOGRAD_NONFUSED = 5 };
/* Whether algorithm `algo` of direction `dir` (a ConvDir) keeps `precision`'s accuracy on a
 * kh x kw filter. cuDNN 9 reports its WINOGRAD_NONFUSED on a 5x5 filter with CUDNN_FMA_MATH, yet
 * on an H200 it gave the same bits with and without TF32 allowed, 1.2e-3 to 8.1e-3 of the largest
 * element away from a double reference in every direction (the other algorithms in TF32: up to 3.3e-4),
 * where its 3x3 kernels and every other algorithm stayed under 3e-6 (docs/gpu-runs,
 * tests/test_cudnn.c): true fp32 does not take it on a filter larger than 3x3. Every other
 * algorithm, and every algorithm in the other precisions, keeps the precision's accuracy. */
int convalgo_accurate(int precision, int dir, int algo, int kh, int kw);
/* The math type to set on the direction's descriptor for a result measured with `math`: the
 * measured one, except that fp32 always runs with FMA math (never TF32). */
int convalgo_desc_math(int precision, int math);
/* The candidates in the order to try them: indexes into l->p of the results of direction `dir`
 * for a kh x kw filter that ran, serve `precision` (its math type and convalgo_accurate; and are
 * deterministic, when `deterministic`) and need at most `limit` bytes of
 * workspace, fastest first (equal times in the list's order). When none fits, the one result that
 * serves with the smallest workspace, and *over = 1. Returns how many (0: nothing serves).
 * idx holds CONVALGO_MAX entries. */
int convalgo_order(const ConvAlgoList *l, int dir, int kh, int kw, int precision, int deterministic, size_t limit, int *idx, int *over);

/* The list as one line for an error message: "algo 1 FMA 0.120 ms 0 B, algo 0 FMA 0.100 ms 0 B
 * non-deterministic, algo 6 DEFAULT failed, ...". */
void convalgo_describe(const ConvAlgoList *l, char *buf, size_t n);

/* What a measurement depends on. Zero the whole key (memset) before filling it: keys compare
 * as bytes. */
typedef struct ConvKey {
    int dir, precision;
    int n, cin, h, w;   /* the input as cuDNN sees it (after any explicit padding) */
    int cout, kh, kw;
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    int groups;
} ConvKey;

/* 1 when cuDNN's symmetric padding (pt, pl) would miss TensorFlow's output size (an odd total
 * of SAME padding): the layer then pads its input explicitly into hp x wp and convolves it
 * without padding. */
int convalgo_explicit_pad(const Conv *c, int *hp, int *wp);
/* The key of direction `dir` of conv layer c at batch n. */
void convalgo_key(const Conv *c, int n, int dir, int precision, ConvKey *k);

typedef struct ConvAlgoCache ConvAlgoCache;
ConvAlgoCache *convalgo_cache_new(void);
void convalgo_cache_free(ConvAlgoCache *c);
/* The cached measurements of key, or NULL. */
const ConvAlgoList *convalgo_cache_get(const ConvAlgoCache *c, const ConvKey *key);
/* Stores a copy of l under key (replacing an earlier one). */
void convalgo_cache_put(ConvAlgoCache *c, const ConvKey *key, const ConvAlgoList *l);
/* Keys held. */
int convalgo_cache_size(const ConvAlgoCache *c);

#endif
