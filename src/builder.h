/* builder.h: the API models are written in, as nvcnn.py's GPUNetworkBuilder:
 *     NbT x = nb_input(nb);
 *     x = nb_conv(nb, x, 64, 7, 7, 2, 2, PAD_SAME_RESNET);   // conv + BN-or-bias + activation
 *     x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);
 * Branches are explicit handles (NbT values), never relative indexes. The builder calls the layer
 * constructors (src/layers/layers.h), which add themselves to the net (net.h): builder -> layers
 * -> net, no file including another in a circle. The builder's settings (use_batch_norm,
 * activation, width_div) are fields of the Net under construction. */
#ifndef NVCNN_BUILDER_H
#define NVCNN_BUILDER_H

#include "net.h"

/* A handle to a tensor in a net under construction. */
typedef struct NbT {
    int id;
} NbT;

NbT nb_input(Net *nb);
Shape nb_shape(Net *nb, NbT x);
/* The channel count a layer asked for `c` outputs gets: c itself, or in a reduced variant
 * (nb->width_div = d > 1, for tests) ceil(c / d). Every nb_conv* and nb_fc below asks through it;
 * a model that compares a tensor's channels with a width it asked for compares with this. */
int nb_width(Net *nb, int c);
/* Convolution + (batch norm if nb->use_batch_norm else bias) + nb->activation. */
NbT nb_conv(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad);
/* As nb_conv with an explicit activation and batch-norm choice (use_bn: 1, 0, or -1 for the
 * builder default). */
NbT nb_conv_ex(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad, Act act,
               int use_bn);
/* As nb_conv, with the channels split into `groups` (ResNeXt's aggregated branches): `groups`
 * independent convolutions, each from cin/groups input channels to cout/groups output channels,
 * concatenated. In a reduced variant the groups shrink with the widths (groups / width_div, at
 * least 1), keeping cout / groups. */
NbT nb_conv_grouped(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad, int groups);
/* `branches` parallel nb_convs of `width` outputs each, all reading x, concatenated along
 * channels (ResNeXt's first 1x1 of every branch): computed as one convolution of
 * branches * width outputs, the same function and parameters, with its weights initialised as
 * the separate branches' would be (Glorot fan_out width*kh*kw). Reduced as nb_conv_grouped. */
NbT nb_conv_branches(Net *nb, NbT x, int branches, int width, int kh, int kw, int sh, int sw, Padding pad);
NbT nb_pool(Net *nb, NbT x, PoolKind kind, int kh, int kw, int sh, int sw, Padding pad);
/* Fully connected + bias + activation (input 2-D: flatten or spatial-average first). */
NbT nb_fc(Net *nb, NbT x, int nout, Act act);
NbT nb_activate(Net *nb, NbT x, Act act);
NbT nb_dropout(Net *nb, NbT x, float keep_prob);
NbT nb_flatten(Net *nb, NbT x);     /* 4-D -> 2-D in NHWC element order, as nvcnn */
NbT nb_spatial_avg(Net *nb, NbT x); /* mean over h, w: 4-D -> 2-D */
NbT nb_concat(Net *nb, const NbT *xs, int n); /* along channels (inception columns) */
NbT nb_add(Net *nb, NbT a, NbT b);  /* residual sum, same shapes */
NbT nb_add_scaled(Net *nb, NbT a, NbT b, float scale); /* a + scale * b (scaled residual) */
/* A heading for the layers that follow ("inception-A 1/4"), printed in the summary above the next
 * layer added (printf-style). */
void nb_section(Net *nb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Softmax cross-entropy over `logits` (2-D, c classes) against net->labels. Marks the logits. */
void nb_softmax_xent(Net *nb, NbT logits);

#endif
