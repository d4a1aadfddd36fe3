/* net.h: Layer, Net, forward/backward traversal, parameter arenas.
 *
 * A Net is a list of layers in execution order over a list of nodes (activation tensors).
 * Every trainable parameter lives in one arena (net->params) and its gradient at the same
 * offset in a second arena (net->grads), in creation order, so the gradient allreduce is one
 * contiguous buffer. Non-trainable state (batch-norm running mean/variance) lives in a third
 * arena (net->state). Arenas and activations are allocated once by net_finalize().
 *
 * Conventions for every layer (CPU reference backend):
 *   - activations are float32 NCHW; 2-D tensors have h = w = 1;
 *   - conv weights are [cout][cin][kh][kw], FC weights [nout][nin], biases [cout];
 *   - forward writes its output node's data (it never reads it first);
 *   - backward ACCUMULATES (+=) into its input nodes' grad and its parameters' grads.
 *     net_backward() zeroes every node grad and every parameter grad first. A node whose grad
 *     is NULL (the network input) needs no gradient: skip it.
 *
 *
 * The net knows no layer type: the layers (src/layers/) add themselves through the functions
 * below, and the builder that models call (builder.h) sits above both.
 */
#ifndef NVCNN_NET_H
#define NVCNN_NET_H

#include <stdint.h>
#include <stdio.h>

#include "tensor.h"
#include "util.h"

typedef struct Net Net;
typedef struct Layer Layer;

typedef enum { PAD_SAME, PAD_VALID, PAD_SAME_RESNET } Padding;
typedef enum { ACT_LINEAR, ACT_RELU, ACT_RELU6, ACT_ELU, ACT_SIGMOID, ACT_TANH, ACT_LRELU } Act;
typedef enum { POOL_MAX, POOL_AVG } PoolKind;
typedef enum { INIT_ZERO, INIT_ONE, INIT_GLOROT_UNIFORM } InitKind;

/* One activation tensor. */
typedef struct Node {
    Shape shape;
    float *data;  /* [n][c][h][w] */
    float *grad;  /* [n][c][h][w], d loss / d data; NULL for the network input */
    int producer; /* index of the layer that writes it, -1 for the input */
} Node;

/* One trainable parameter tensor: a slice of the params/grads arenas. */
typedef struct Param {
    char name[48];
    size_t off;   /* in floats, into net->params and net->grads */
    size_t count;
    InitKind init;
    int fan_in, fan_out; /* for Glorot-uniform initialisation */
    int layer;    /* index of the owning layer */
} Param;

/* One non-trainable state tensor (batch-norm running statistics): a slice of net->state. */
typedef struct Buffer {
    char name[48];
    size_t off;
    size_t count;
    float init; /* initial value of every element */
} Buffer;

typedef struct LayerOps {
    const char *type;                       /* "conv", "bn", "relu"... */
    void (*forward)(Layer *l, Net *net);    /* reads net->training, net->rng */
    void (*backward)(Layer *l, Net *net);
    void (*destroy)(Layer *l);              /* frees l->priv; NULL means free(l->priv) */
    /* Optional: the layer's settings for the summary ("3x3/2 VALID", "keep 0.8"); NULL: none. */
    void (*describe)(const Layer *l, char *buf, size_t n);
    /* Optional, activations only: 1 if this layer may write its output over its input (its
     * backward needs only its output); NULL: the layer is no activation. */
    int (*in_place)(const Layer *l);
} LayerOps;

struct Layer {
    const LayerOps *ops;
    char name[32];   /* "conv3": type + per-type counter */
    int *in;         /* input node ids [nin] */
    int nin;
    int out;         /* output node id */
    int param0, nparam; /* net->param[param0 .. param0 + nparam) */
    int buf0, nbuf;     /* net->buf[buf0 .. buf0 + nbuf) */
    double flops;    /* forward floating-point operations for the whole batch (summary line) */
    void *priv;      /* the layer type's own state */
    char *section;   /* heading printed above this layer in the summary (nb_section), or NULL */
};

/* Another implementation of some layers (the oneDNN CPU layers, src/onednn/): when a net has a
 * runner, net_forward and net_backward call it for every layer instead of the layer's own
 * forward/backward (it falls back on those where it has nothing better), and net_backward lets
 * zero_grads zero the node gradients that need it (its layers may overwrite a gradient instead
 * of adding to zeros); net_free calls destroy. */
typedef struct NetRunner {
    void (*forward)(Net *net, int li, void *ctx);
    void (*backward)(Net *net, int li, void *ctx);
    void (*zero_grads)(Net *net, void *ctx);
    void (*destroy)(void *ctx);
    void *ctx;
    /* [nlayer] 1 where the runner's backward of the layer writes (not adds) the gradient of every
     * parameter of the layer: net_backward zeroes only the other layers' parameter gradients.
     * NULL: it zeroes them all. */
    const char *writes_param_grads;
} NetRunner;

struct Net {
    Node *node;
    int nnode, cap_node;
    Layer *layer;
    int nlayer, cap_layer;
    Param *param;
    int nparam, cap_param;
    Buffer *buf;
    int nbuf, cap_buf;
    size_t params_total; /* floats in the params (and grads) arena */
    size_t state_total;  /* floats in the state arena */
    float *params, *grads, *state;

    int batch;
    int input;           /* node id of the network input */
    int logits;          /* node id of the logits (set by softmax_xent_create) */
    int training;        /* 1: batch statistics and dropout; 0: inference */
    const int32_t *labels; /* [batch], read by the loss layer; set before forward */
    double loss;         /* mean cross-entropy of the last forward (no weight decay) */
    Rng rng;             /* dropout masks */
    int finalized;
    char shape_error[200]; /* "": every layer fits its input; else the first that does not */
    const char *model;   /* the model's registry name (model_build_net), NULL for a net built by hand */
    /* Called during backward after each layer that owns parameters, with the arena offset from
     * which every gradient is final (layers run backward in reverse creation order, so the
     * gradients become final from the end of the arena towards its start). Lets the gradient
     * allreduce start on finished buckets while backward goes on. NULL: not called. */
    void (*on_grad_ready)(void *ctx, size_t final_from);
    void *on_grad_ready_ctx;
    NetRunner *runner;   /* NULL: the reference layers (see NetRunner) */
    /* --profile (profile.h): called before (end 0) and after (end 1) each layer's forward (dir 0)
     * and backward (dir 1), around backward's zeroing of the gradients (layer -1, dir 1) and
     * around each call of on_grad_ready (layer -2, dir 1). NULL: not called (every step that is
     * not profiled). */
    void (*on_layer)(void *ctx, int layer, int dir, int end);
    void *on_layer_ctx;

    /* builder defaults */
    int use_batch_norm;  /* nb_conv: batch norm (1) or bias (0) */
    int width_div;       /* reduced variants (tests): see nb_width; 1 builds the model as published */
    char *pending_section; /* nb_section's text, taken by the next layer */
    Act activation;      /* nb_conv / nb_fc default activation */
    float lrelu_alpha;
    int type_count[32];  /* per-type counters for layer names */
    const char *type_name[32];
    int ntypes;
};

/* ---- Construction ---- */
Net *net_new(int batch, int c, int h, int w);
void net_free(Net *net);

/* Allocates arenas and activations, initialises parameters (Glorot uniform weights, zero
 * biases, BN gamma 1 / beta 0, running mean 0 / variance 1) from `seed`. */
void net_finalize(Net *net, uint64_t seed);
/* net_finalize for a net that a device backend runs: host memory only for the arenas, the input
 * node and the logits (the batch goes in, the logits come back for accuracy); no other node has
 * host data or gradients, so the CPU layers must not run on it. */
void net_finalize_for_device(Net *net, uint64_t seed);

/* Re-initialises parameters and state from `seed` (as net_finalize does). */
void net_init_params(Net *net, uint64_t seed);

/* ---- For layer implementations ---- */
/* Adds a layer with a new output node of shape `out`; `type` names it ("conv" -> "conv0").
 * `in` is copied. `priv` is owned by the layer from now on. */
Layer *net_add_layer(Net *net, const LayerOps *ops, const int *in, int nin, Shape out, void *priv);
/* Adds a trainable parameter to the most recently added layer. Returns its index. */
int net_add_param(Net *net, const char *suffix, size_t count, InitKind init, int fan_in,
                  int fan_out);
/* Adds a state buffer to the most recently added layer. Returns its index. */
int net_add_buffer(Net *net, const char *suffix, size_t count, float init);

/* "3x3/2 VALID" (the stride only when not 1) into buf, for the layers' describe(); returns the
 * length written as snprintf does. */
int net_window_text(char *buf, size_t n, int kh, int kw, int sh, int sw, Padding pad);

static inline Node *net_node(Net *net, int id) { return &net->node[id]; }
static inline float *net_param(Net *net, int p) { return net->params + net->param[p].off; }
static inline float *net_grad(Net *net, int p) { return net->grads + net->param[p].off; }
static inline float *net_buffer(Net *net, int b) { return net->state + net->buf[b].off; }


/* ---- Traversal ---- */
void net_forward(Net *net);
/* Zeroes all gradients, then runs backward in reverse order. Needs the loss layer last. */
void net_backward(Net *net);
/* As net_backward, with the loss gradient multiplied by `loss_scale` (loss scaling): every
 * gradient comes out multiplied by it. */
void net_backward_scaled(Net *net, float loss_scale);
/* Number of samples in the batch whose label is among the top-k logits. */
int net_topk_correct(const Net *net, int k);
/* How many of the `c` logits in `row` rank ahead of class `label` (ties go to the lower class):
 * the sample is top-k correct when this is below k. A row with an inf or NaN logit gives c (never
 * correct: a diverged model scores 0 %, as with TensorFlow's in_top_k). */
int net_label_rank(const float *row, int c, int label);

/* ---- Introspection ---- */
size_t net_num_params(const Net *net);

/* Backward's schedule of the activation gradients, for a backend that lets gradients that are
 * never alive together share memory. Backward runs layer i at step t = nlayer - 1 - i. For each
 * node v other than the input: its gradient is first written at first[v], the step of the first
 * of its consumers that backward reaches, and last read at last[v], the step of the layer that
 * produced v. A node that no layer consumes (the loss's output) is never written: first[v] =
 * last[v] = its producer's step, and zero[v] = 1 (it must read as zeros). acc has one entry per
 * (layer, input) pair, layer by layer (acc[net_input_slot(net, i) + k]): 0 for the consumer that
 * writes the gradient, 1 for those that add to it. For the input node first = last = -1. */
void net_grad_schedule(const Net *net, int *first, int *last, char *zero, char *acc);
/* Index of layer i's first input in net_grad_schedule's acc (the inputs of layers 0..i-1). */
int net_input_slot(const Net *net, int i);
int net_input_slots(const Net *net); /* all of them */
/* Activations that a backend may run in place: alias[v] = u when node v is the output of an
 * activation that may overwrite its input u, because nothing else reads u (one consumer, not the
 * net's input), u's producer does not need its own output in backward (anything but another
 * activation), and the activation's gradient follows from its output (act_in_place_ok); else -1. */
void net_act_in_place(const Net *net, int *alias);
double net_forward_flops(const Net *net);
/* One line per layer (darknet-style summary): name, settings (kernel/stride, padding, groups,
 * keep probability, coefficients), output shape, parameters, GFLOPs, and "<- inputs" where the
 * layer does not simply read the previous layer's output; the builder's sections as headings. */
void net_print_summary(const Net *net, FILE *f);
/* Output shape of the padding mode: out = ceil(in/s) for SAME/SAME_RESNET, ceil((in-k+1)/s)
 * for VALID; pad_before is the padding on the low side. 0 where a VALID window is larger than the
 * input. */
int conv_out_size(int in, int k, int s, Padding pad, int *pad_before);
/* conv_out_size() for a layer being added to net: where the window does not fit (an output of 0
 * or less) the net records why (net_shape_error) and the layer gets an output of 1, so that a
 * build goes on to its end and the caller decides (model_build_sized: exit 2; net_finalize: die). */
int net_window_out(Net *net, const char *type, int in, int k, int s, Padding pad, int *pad_before);
/* Records the first shape that cannot be built, printf-style, in net->shape_error. */
void net_shape_error(Net *net, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
