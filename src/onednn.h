/* onednn.h: the fast CPU layers on oneDNN (src/onednn/, built where oneDNN 2.x is installed;
 * onednn_none.c otherwise). The hand-written layers of src/layers/ stay the reference that the
 * tests hold these against.
 *
 * onednn_plan() gives a finalized net a runner (net.h's NetRunner) that executes convolution
 * (forward, backward data, backward weights, bias), max/average pooling, the spatial average,
 * batch normalisation, flatten and the FC GEMMs with oneDNN primitives created once, here (and in
 * a bf16 plan concat too, and the FC layers as inner products); every other layer type runs its
 * reference code. Activations keep the layout oneDNN prefers from one
 * oneDNN layer to the next (nChw16c on AVX-512, nChw8c on AVX2 and SSE4.1) and through the layers
 * that do not care about the layout (activations, add, dropout, and concat where every input's
 * channels fill whole blocks); a reference layer that needs NCHW gets its inputs converted into
 * NCHW copies, and its input gradients converted back. The network input and every 2-D node (FC
 * inputs and outputs, the logits) are always NCHW. The primitives run on the OpenMP threads of the
 * rest of the step (Debian's oneDNN is built on GNU OpenMP).
 *
 * After the plan the node buffers must not move (the primitives hold their addresses), and an
 * intermediate node may hold a blocked layout: read it with onednn_node_nchw().
 */
#ifndef NVCNN_ONEDNN_H
#define NVCNN_ONEDNN_H

#include <stddef.h>

#include "net.h"

/* 1 if this build has the oneDNN layers. */
int onednn_built(void);
/* The oneDNN plan's comparison switches in the environment (NVCNN_ONEDNN_*, NVCNN_WINO_*): a value
 * that is not one of a switch's choices is exit 2 naming it. */
void onednn_check_env(void);
/* The version of the oneDNN loaded, major * 100 + minor (0: not built with oneDNN). */
int onednn_version(void);
/* Whether oneDNN can train in bf16 on this CPU, with the instruction set it found in isa (e.g.
 * "avx2"; "none" without oneDNN). oneDNN 2.x runs bf16 primitives on avx512_core and later
 * (emulating the bf16 dot products on avx512_core, natively from avx512_core_bf16 on); 3.x adds
 * avx2_vnni_2. */
int onednn_bf16_capable(char *isa, size_t n);
/* "oneDNN 2.6.3, avx512_core" (the library's version and the instruction set its kernels use), or
 * why it is not there. */
void onednn_describe(char *buf, size_t n);
/* Plans the oneDNN layers for a finalized CPU net (see above). Returns 0, or -1 with the reason in
 * err (this build has no oneDNN). Dies on a oneDNN error other than an unsupported shape: a layer
 * that oneDNN cannot run keeps its reference code. */
int onednn_plan(Net *net, char *err, size_t errlen);
/* The same in bf16 mixed precision (--precision=bf16): the activations and their gradients in
 * bf16 wherever oneDNN's layers hand them on (4-D nodes between oneDNN layers; the network input,
 * 2-D nodes, the reference layers' inputs and outputs stay fp32 NCHW, converted at those edges), the
 * convolutions' weights converted to bf16 each forward from the fp32 parameters, and fp32 the
 * parameters, their gradients (oneDNN accumulates them in fp32), batch norm's statistics, scale and
 * shift, the FC layers, the loss and the optimizer. Returns -1 with the reason in err where this
 * CPU has no bf16 that oneDNN can use (onednn_bf16_capable) or the build has no oneDNN. */
int onednn_plan_bf16(Net *net, char *err, size_t errlen);
/* 1 when the net's plan is a bf16 one. */
int onednn_is_bf16(const Net *net);
/* Layers of the planned net that run on oneDNN (0 without a plan). */
int onednn_layers(const Net *net);
/* Convolutions of the planned net whose weight gradient src/onednn/blkconv.c computes (stride 1,
 * 3 filter columns, whole blocks of 8 channels, nChw8c tensors: on AVX2) or src/onednn/firstconv.c
 * (stride 1, 1 to 4 input channels from the plain input, filters up to 7x7, an nChw8c output
 * gradient: a net's first convolution on AVX2), not oneDNN's primitive; NVCNN_ONEDNN_WGRAD=onednn
 * in the environment at the plan leaves them all to oneDNN. */
int onednn_blkconv_layers(const Net *net);
/* Convolutions of the planned net whose forward and backward data src/onednn/wino.c computes by
 * Winograd's F(4x4, 3x3) (3x3, stride 1, whole blocks of 8 channels, nChw8c tensors: on AVX2), not
 * oneDNN's primitives; NVCNN_ONEDNN_WINOGRAD=off in the environment at the plan leaves them to
 * oneDNN. */
int onednn_winograd_layers(const Net *net);
/* Primitives of the plan that are oneDNN's reference (unoptimised) kernels: 0 wherever the plan
 * could choose (batch norm fuses its relu only where oneDNN has an optimised kernel for that). */
int onednn_ref_primitives(const Net *net);
/* Copies node `id`'s data (grad = 0) or gradient (grad = 1) into out[n][c][h][w], whatever the
 * layout the plan gave the node (a plain copy without a plan). */
void onednn_node_nchw(const Net *net, int id, int grad, float *out);

#endif
