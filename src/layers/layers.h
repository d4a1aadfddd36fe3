/* layers.h: constructors of every layer type (one file per type in src/layers/).
 *
 * Each constructor checks its input shape (dies with a clear message on a mismatch), infers the
 * output shape, calls net_add_layer() and then net_add_param()/net_add_buffer() for its
 * parameters (in the order listed here), and returns the id of its output node.
 * The layer's forward and backward follow the conventions in net.h.
 */
#ifndef NVCNN_LAYERS_H
#define NVCNN_LAYERS_H

#include "../net.h"

/* conv.c: 2-D convolution, any kernel and stride. Padding as TensorFlow: SAME (pad_total =
 * max((out-1)*s + k - in, 0), pad_before = pad_total/2), VALID (none), SAME_RESNET (nvcnn's
 * explicit pad: pad_total = k-1, pad_before = (k-1)/2, then VALID).
 * Params: "weights" [cout][cin][kh][kw] (Glorot uniform, fan_in cin*kh*kw, fan_out cout*kh*kw),
 * then "biases" [cout] (zero) if `bias`. Layer type "conv". */
int conv_create(Net *net, int in, int cout, int kh, int kw, int sh, int sw, Padding pad, int bias);
/* conv_create with `groups` channel groups (groups must divide cin and cout): output channels
 * [k*cout/groups, (k+1)*cout/groups) read only input channels [k*cin/groups, (k+1)*cin/groups),
 * the same as `groups` separate convolutions on those channel slices, concatenated. "weights" is
 * [cout][cin/groups][kh][kw], Glorot fans of one group (fan_in cin/groups*kh*kw, fan_out
 * cout/groups*kh*kw). groups = 1 is conv_create. */
int conv_create_grouped(Net *net, int in, int cout, int kh, int kw, int sh, int sw, Padding pad, int bias, int groups);

/* bn.c: batch normalisation over (n, h, w) per channel (2-D inputs too). Training: batch
 * statistics (biased variance), running averages updated as r = 0.9 r + 0.1 batch (unbiased
 * batch variance for the running variance, as TensorFlow's fused batch norm), eps 1e-4.
 * Inference (net->training == 0): running statistics. Params: "gamma" [c] (one), "beta" [c]
 * (zero). Buffers: "moving_mean" [c] (0), "moving_variance" [c] (1). Type "bn". */
#define BN_DECAY 0.9f
#define BN_EPSILON 1e-4f
int bn_create(Net *net, int in);

/* act.c: elementwise activation. RELU, RELU6 (min(max(x,0),6)), ELU (x>0 ? x : e^x-1),
 * SIGMOID, TANH, LRELU (max(alpha*x, x)), LINEAR (identity copy). Type named after the
 * function ("relu", "elu", ...). */
int act_create(Net *net, int in, Act act, float alpha);
/* 1 if l is an activation layer; act_in_place_ok: 1 if its gradient can be computed from its
 * output alone, so that the output may overwrite the input (all but leaky relu with alpha <= 0). */
int act_is(const Layer *l);
int act_in_place_ok(const Layer *l);

/* pool.c: max or average pooling, SAME or VALID (padding as conv). Max ignores padding; average
 * divides by the number of in-bounds elements in the window (TensorFlow's SAME average).
 * Max backward routes to the first maximum in the window. Type "maxpool" / "avgpool". */
int pool_create(Net *net, int in, PoolKind kind, int kh, int kw, int sh, int sw, Padding pad);

/* fc.c: fully connected, y = x W^T + b on a 2-D input [n][nin]. Params "weights" [nout][nin]
 * (Glorot uniform, fan_in nin, fan_out nout), then "biases" [nout] (zero) if `bias`.
 * Type "fc". */
int fc_create(Net *net, int in, int nout, int bias);

/* dropout.c: training: keep each element with probability keep_prob and scale kept ones by
 * 1/keep_prob (mask drawn from net->rng); inference: identity. Type "dropout". */
int dropout_create(Net *net, int in, float keep_prob);

/* reshape.c: flatten 4-D -> [n][h*w*c] in NHWC element order (as nvcnn flattens); and spatial
 * average 4-D -> [n][c] (mean over h and w). Types "flatten", "avg". */
int flatten_create(Net *net, int in);
int spatial_avg_create(Net *net, int in);

/* concat.c: concatenation along channels of inputs with equal n, h, w. Type "concat". */
int concat_create(Net *net, const int *in, int n);

/* add.c: elementwise sum of two inputs of the same shape (residual). Type "add". */
int add_create(Net *net, int a, int b);
/* add.c: the weighted sum ca * a + cb * b (Inception-ResNet's scaled residual: ca 1, cb 0.2). */
int add_create_scaled(Net *net, int a, int b, float ca, float cb);

/* softmax_xent.c: softmax cross-entropy of 2-D logits [n][classes] against net->labels (int32,
 * 0-based; a label outside [0, classes) dies with the batch index and value). Forward sets
 * net->loss to the batch mean and the output node [n][1] to per-sample losses; backward writes
 * (softmax - onehot) / n into the logits' grad. Sets net->logits. Type "softmax_xent". */
int softmax_xent_create(Net *net, int logits);

#endif
