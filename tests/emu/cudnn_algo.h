/* cudnn_algo.h: the convolution algorithms of the emulated cuDNN (cudnn_algo.cc), for cudnn.cc.
 *
 * Each algorithm of each direction is modelled as cuDNN 9 documents it: which configurations it
 * supports, how much workspace it needs, whether its results are deterministic, what it costs
 * (the emulated time of Find and the order of the heuristics), and how it computes: its own
 * summation order and, where the real one transforms its operands, the transform in fp32 with
 * its operands rounded as the arithmetic it runs on takes them. The non-deterministic ones
 * (backward data ALGO_0, backward filter ALGO_0 and ALGO_3) add their partial sums in an order
 * drawn afresh for every call (seeded by NVCNN_EMU_SEED, so a run is reproducible).
 */
#ifndef NVCNN_EMU_CUDNN_ALGO_H
#define NVCNN_EMU_CUDNN_ALGO_H

#include <cudnn.h>
#include <stddef.h>

#include <vector>

namespace emu {
namespace dnn {

/* A 2-D convolution's geometry, checked (cudnn.cc's geometry()). */
struct Geo {
    int n, c, h, w;  /* input */
    int k, cg, r, s; /* filter: outputs, input channels per group, height, width */
    int g;           /* groups */
    int oh, ow;      /* output */
    int ph, pw, u, v, dh, dw;
    bool flip;      /* CUDNN_CONVOLUTION: the filter is flipped */
    bool hw_packed; /* x and y (dx and dy) NCHW with packed HW planes, as FFT wants them */
    bool chw_packed; /* x and y (dx and dy) NCHW and packed: [n][c][h][w] */
};

enum Dir { FWD, BWD_DATA, BWD_FILTER };
extern const int algo_count[3];

/* An algorithm's name as cuDNN's enum spells it, without the prefix ("IMPLICIT_PRECOMP_GEMM"). */
const char *algo_name(Dir d, int algo);

/* The data, compute and math types of a call. */
struct Arith {
    cudnnDataType_t data;    /* x, w and y */
    cudnnDataType_t compute; /* the convolution descriptor's */
    cudnnMathType_t math;    /* the descriptor's */
};

/* NULL when cuDNN 9 runs `algo` on this configuration, else the documented rule it breaks. */
const char *unsupported_because(Dir d, int algo, const Geo &g, const Arith &a);
/* The workspace `algo` needs (the same in Find, Get*WorkspaceSize and the compute call). */
size_t workspace(Dir d, int algo, const Geo &g, const Arith &a);
/* cuDNN's determinism of `algo` (cudnn_cnn.h marks the non-deterministic ones). */
cudnnDeterminism_t determinism(Dir d, int algo);
/* Whether `algo` computes its products on tensor cores with this arithmetic (16-bit data, or fp32
 * data whose math type allows TF32, in the families that use them). */
bool uses_tensor_cores(Dir d, int algo, const Arith &a);
/* The emulated time of `algo` in ms, without noise: its arithmetic over a per-kind speed, with
 * tensor cores where the algorithm and the math type use them. */
double model_ms(Dir d, int algo, const Geo &g, const Arith &a);

/* Runs `algo` on dense float copies of its operands, [n][c][h][w] tensors and [k][c/g][r][s]
 * filters, as stored (16-bit values exactly): forward in0 = x, in1 = w, out = y; backward data
 * in0 = dy, in1 = w, out = dx; backward filter in0 = x, in1 = dy, out = dw. out is the result
 * before alpha and beta. */
void compute(Dir d, int algo, const Geo &g, const Arith &a, const std::vector<float> &in0, const std::vector<float> &in1,
             std::vector<float> &out);

/* Seeded noise for Find's times: a factor in [1 - spread, 1 + spread], a new one per call, from
 * the sequence NVCNN_EMU_SEED starts. */
double noise(double spread);

} // namespace dnn
} // namespace emu

#endif
