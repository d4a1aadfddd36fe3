/* gpunet.h: the GPU backend of a finalized Net (src/cuda/, on cuDNN and cuBLAS).
 *
 * A GpuNet mirrors a Net on one device: the params, grads and state arenas (fp32, same layout
 * and offsets as the host arenas, so the gradient allreduce sees one contiguous buffer), one
 * planned arena for every activation and activation gradient (gradients that are never alive
 * together share memory: see net_grad_schedule and memplan), one cuDNN workspace sized for
 * the algorithms chosen (by measurement) when the net is planned, and each layer's GPU state.
 * Nothing is allocated on the device after gpunet_new(): a training step does no cudaMalloc.
 *
 * Conventions are the CPU reference's (net.h): NCHW activations; backward accumulates into the
 * parameters' gradients after the step zeroes them, and into the activations' gradients except
 * for each node's first consumer, which writes (no zeroing pass). Precision: PREC_FP32 is true
 * fp32 (no TF32 anywhere), PREC_TF32 lets cuDNN and cuBLAS use TF32 tensor cores. PREC_FP16 and
 * PREC_BF16 keep activations and their gradients in the 16-bit type (NCHW, tensor-op math,
 * fp32 accumulation), the master weights, their gradients, the optimizer state and batch-norm
 * statistics in fp32: the weights are cast to 16 bits after every update, and the convolutions'
 * 16-bit weight gradients are cast into the fp32 gradients as each layer finishes. The loss
 * layer keeps its per-sample losses in fp32.
 *
 * The work runs on one compute stream (batch copies and NCCL buckets on streams of their own,
 * ordered by events); calls return once the work is queued, except those that hand a
 * value to the host (gpunet_loss, gpunet_download_*, gpunet_step_results), which synchronise.
 * With NVCNN_SYNC_CHECK=1 (gpu.h) forward and backward also synchronise after every layer and
 * report a failure as that layer's, with the model's name.
 */
#ifndef NVCNN_GPUNET_H
#define NVCNN_GPUNET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "net.h"

typedef struct GpuNet GpuNet;

/* Builds the GPU mirror of `net` on `device` and uploads its parameters and state. cuDNN's
 * workspace is at most workspace_cap bytes (and what the arena leaves free, less a margin for the
 * libraries): each convolution direction takes the fastest algorithm within it. Returns NULL
 * with a message in err when it cannot (precision not supported, out of device memory: the
 * message names the bytes requested; *oom is set to 1 in that case). */
#define GPUNET_WORKSPACE_DEFAULT ((size_t)4096 << 20) /* 4 GiB, TensorFlow's default limit */
/* flags: GPUNET_DETERMINISTIC makes every step's bits a function of its inputs alone
 * (--deterministic): each convolution direction takes the first result of cuDNN's heuristics
 * (cudnnGet*Algorithm_v7: a function of the shapes, the GPU and cuDNN's version, never of
 * timings) that cuDNN reports CUDNN_DETERMINISTIC and whose workspace fits, instead of the fastest
 * that cudnnFind* measured (timings vary from run to run, and so would the algorithms). The rest
 * of a step is deterministic either way: nvcnn's kernels add partial sums in a fixed order (no
 * atomics), cuBLAS's GEMMs give the same bits on GPUs of one architecture and SM count with one
 * stream per handle (its documentation's "Results reproducibility"; the handle here has one),
 * dropout's masks are a hash of a seed. */
#define GPUNET_DETERMINISTIC 1u
/* The layout of activations, their gradients and the convolutions' filters on the device:
 * GPUNET_NHWC (filters KRSC), GPUNET_NCHW (filters KCRS), or neither: NVCNN_GPU_DATA_FORMAT=NCHW|NHWC
 * if set (tests run the whole suite either way), else NHWC in fp16 and bf16 (cuDNN's tensor-core
 * kernels are NHWC: given NCHW they transpose internally) and NCHW in fp32 and tf32. Everything
 * the host sees is NCHW whatever the layout: nodes (gpunet_download_node, gpunet_set_input) and
 * parameters, velocity and gradients (KCRS filters) are converted in the copies, so checkpoints
 * are one format. */
#define GPUNET_NHWC 2u
#define GPUNET_NCHW 4u
/* Fusion (--fuse): batch norm with the ReLU, and with the residual add and the ReLU, that follow
 * it, each one pass forward and one backward (src/cuda/fuse.cu). GPUNET_NOFUSE turns it off,
 * GPUNET_FUSE on; neither: NVCNN_GPU_FUSE=on|off if set (tests run everything either way), else
 * on. */
#define GPUNET_FUSE 8u
#define GPUNET_NOFUSE 16u
/* GPUNET_INFERENCE: a net that only ever runs forward in inference mode (--forward_only, --eval).
 * No parameter gradients, velocity or 16-bit gradient arena, no activation gradients, no
 * backward algorithms measured; the activations share memory by their forward lifetimes (a node
 * is live from the layer that writes it to the last layer that reads it, as memplan places the
 * gradients of a training net), except the input, the logits and the nodes nothing consumes,
 * which stay until the next forward. gpunet_backward, gpunet_step, gpunet_graph_step and the
 * gradient copies die on such a net, as gpunet_download_node does on a node it does not keep;
 * the velocity copies copy nothing (there is none to keep). */
#define GPUNET_INFERENCE 32u
/* Whether gpunet_new fuses with these flags: 1, 0, or -1 (a message in err) when NVCNN_GPU_FUSE is
 * neither on nor off. */
static inline int gpunet_fusion(unsigned flags, char *err, size_t errlen) {
    if (flags & GPUNET_FUSE) return 1;
    if (flags & GPUNET_NOFUSE) return 0;
    const char *v = getenv("NVCNN_GPU_FUSE");
    if (v && *v) {
        if (strcmp(v, "on") == 0) return 1;
        if (strcmp(v, "off") == 0) return 0;
        snprintf(err, errlen, "NVCNN_GPU_FUSE=%s: expected on or off", v);
        return -1;
    }
    return 1;
}
/* How many batch norms g fused: in all (returned), with a ReLU, with an add and a ReLU. */
int gpunet_fused(const GpuNet *g, int *bn_relu, int *bn_add_relu);
/* The layout gpunet_new takes with these flags: 1 NHWC, 0 NCHW, -1 (a message in err) when
 * NVCNN_GPU_DATA_FORMAT is neither NCHW nor NHWC. */
static inline int gpunet_layout(int precision, unsigned flags, char *err, size_t errlen) {
    if (flags & GPUNET_NHWC) return 1;
    if (flags & GPUNET_NCHW) return 0;
    const char *v = getenv("NVCNN_GPU_DATA_FORMAT");
    if (v && *v) {
        if (strcmp(v, "NHWC") == 0) return 1;
        if (strcmp(v, "NCHW") == 0) return 0;
        snprintf(err, errlen, "NVCNN_GPU_DATA_FORMAT=%s: expected NCHW or NHWC", v);
        return -1;
    }
    return precision == PREC_FP16 || precision == PREC_BF16;
}
GpuNet *gpunet_new(Net *net, int device, int precision, size_t workspace_cap, unsigned flags, char *err, size_t errlen, int *oom);
void gpunet_free(GpuNet *g);
/* 1 when g computes in NHWC */
int gpunet_nhwc(const GpuNet *g);
/* Conv layer li's input channels as cuDNN sees them (more than the layer's where NHWC pads them
 * with zero channels for the tensor cores), -1 if li is no convolution. */
int gpunet_conv_channels(const GpuNet *g, int li);
/* The filter conv layer li convolved with in its last forward, as the device holds it (KRSC in
 * NHWC, with the padding channels where gpunet_conv_channels pads), into dst as floats; returns
 * the element count (0 if li is no convolution). */
size_t gpunet_download_conv_filter(GpuNet *g, int li, float *dst);

/* The cuDNN algorithm that conv layer li runs in direction dir (ConvDir, convalgo.h), -1 if none
 * (not a convolution, or a direction never run); *deterministic (may be NULL) receives whether
 * cuDNN reports it CUDNN_DETERMINISTIC. */
int gpunet_conv_algorithm(const GpuNet *g, int li, int dir, int *deterministic);

/* Device bytes this GpuNet allocated (arenas, scratch, workspace). */
size_t gpunet_bytes(const GpuNet *g);
/* Bytes of the activation arena that layer li holds as its own scratch, as planned (a padded
 * convolution's padded input and its gradient, bias partial sums, batch-norm statistics). */
size_t gpunet_layer_scratch(const GpuNet *g, int li);
/* Bytes of the arena that the layers' scratch takes in all: their sum, or in an inference net the
 * largest one's (every layer's forward uses the one region in turn). */
size_t gpunet_scratch_bytes(const GpuNet *g);
/* What planning did, one line each: the time cuDNN's algorithm search took (and how many
 * measurements the cache and the first layer saved), the cuDNN workspace chosen and the limit
 * it was chosen under. */
void gpunet_print_plan(const GpuNet *g, FILE *f);

/* Host -> device: parameters and state (after a checkpoint load or a broadcast). */
void gpunet_upload_params(GpuNet *g);
/* Device -> host: parameters and state into net->params / net->state. */
void gpunet_download_params(GpuNet *g);
/* The optimizer's velocity (params_total floats, the params arena's layout) to or from the host. */
void gpunet_upload_velocity(GpuNet *g, const float *v);
void gpunet_download_velocity(GpuNet *g, float *v);
/* Device -> host: gradients into net->grads; host -> device from net->grads. */
void gpunet_download_grads(GpuNet *g);
void gpunet_upload_grads(GpuNet *g);
/* Device -> host: node `id`'s data (or grad) into dst (shape_count floats). Activation gradients
 * share memory by lifetime: after backward a node's gradient is still there only if no node
 * whose gradient lives later was given the same memory (true of the nodes nearest the input). */
/* The batch norm whose fused pass leaves node `id` unwritten (its own output, or a fused add's: the
 * pass writes the last fused layer's node only), or -1. gpunet_download_node dies on such a node. */
int gpunet_fused_away(const GpuNet *g, int id);
/* The bytes the arena holds for node data (activations): a node fused away that nothing runs in
 * place over holds none. */
size_t gpunet_activation_bytes(const GpuNet *g);
void gpunet_download_node(GpuNet *g, int id, float *dst, int grad);
/* Host -> device: node `id`'s data (tests feed intermediate nodes this way). */
void gpunet_upload_node(GpuNet *g, int id, const float *src);

/* The batch: NCHW floats for the input node, and labels (checked on the host: a label outside
 * [0, classes) dies with its batch index, as the CPU loss does). */
void gpunet_set_input(GpuNet *g, const float *nchw);
void gpunet_set_labels(GpuNet *g, const int32_t *labels);

/* The real-data path, double-buffered: gpunet_stage_batch() queues the copy of one batch (NHWC
 * bytes and labels; labels are checked here) into slot 0 or 1 on a copy stream, so that it runs
 * while the compute stream trains on the other slot. For the copy to be asynchronous the host
 * buffers must be pinned (gpu_host_alloc); they must stay untouched until gpunet_stage_wait()
 * for that slot has returned. gpunet_use_batch() makes the compute stream wait for the slot's
 * copy, then turns the bytes into the input node (x / 127.5 - 1, NCHW) and takes its labels. */
void gpunet_stage_batch(GpuNet *g, int slot, const uint8_t *nhwc, const int32_t *labels);
void gpunet_stage_wait(GpuNet *g, int slot);
void gpunet_use_batch(GpuNet *g, int slot);

/* Forward of every layer (net->training selects batch statistics and dropout). */
void gpunet_forward(GpuNet *g);
/* Mean cross-entropy of the last forward (synchronises). */
double gpunet_loss(GpuNet *g);
/* Zeroes the gradients, then backward of every layer with the loss gradient times loss_scale
 * (GPUNET_DEVICE_SCALE: the scale the device holds, which gpunet_step moves).
 * If `on_ready` is given it is called after each layer that owns parameters with the arena
 * offset from which every gradient is final (as net->on_grad_ready), after synchronising. */
#define GPUNET_DEVICE_SCALE 0.0f
void gpunet_backward(GpuNet *g, float loss_scale, void (*on_ready)(void *, size_t), void *ctx);

/* The training step decided on the device, without a host round trip:
 *   gpunet_step_setup()  the optimizer's constants (optim.h's; dynamic: the loss scale moves);
 *   gpunet_step_state()  the loss scale and the step counters (the start, a restored checkpoint);
 *   gpunet_queue_stats() after forward: the loss's sum and (with_l2) the weights' sum of squares;
 *   gpunet_backward(g, GPUNET_DEVICE_SCALE, ...);
 *   gpunet_step(g, lr)   the non-finite check, then one pass over the parameter arena: unscaling,
 *                        weight decay, LARC (eta 0: off; scale_mode 0: clip), momentum (Nesterov as
 *                        TensorFlow), the weights and their 16-bit copy, none of it when a gradient
 *                        is inf or nan (the step is skipped); then the loss scale halved on a
 *                        skip, doubled after 2000 good steps in a row (dynamic), as train.c does on
 *                        the CPU. The learning rate is read from device memory.
 * Nothing here waits for the device. Each step leaves a result on the device;
 * gpunet_step_results() synchronises and hands over those not read yet, oldest first (at most
 * GPUNET_RESULTS: gpunet_step dies if that many are unread). */
typedef struct GpuStepConfig {
    double momentum, weight_decay, larc_eta;
    int nesterov, larc_scale, dynamic;
} GpuStepConfig;
#define GPUNET_RESULTS 64
typedef struct GpuStepResult {
    double loss_sum; /* sum of the per-sample losses (the mean cross-entropy is loss_sum / batch) */
    double l2;       /* sum of the squared weights before the update (0 without with_l2) */
    float scale;     /* the loss scale of the step's backward */
    int finite;      /* 1: every gradient finite, the step updated; 0: skipped */
    double seconds;  /* the step's period on the device: from the previous step's end to this one's
                        (from its own start after gpunet_step_time_from_start), read off events by
                        gpunet_step_results: what a host clock cannot see while steps are queued */
} GpuStepResult;
void gpunet_step_setup(GpuNet *g, const GpuStepConfig *c);
void gpunet_step_state(GpuNet *g, double loss_scale, long good, long skipped);
void gpunet_queue_stats(GpuNet *g, int with_l2);
void gpunet_step(GpuNet *g, double lr);
/* --forward_only's step after gpunet_forward: its loss into the ring of results as a training
 * step's (finite, l2 0, nothing updated), timed the same way, so that the host reads the steps'
 * losses and periods when it prints rather than waiting for every forward. */
void gpunet_infer_step(GpuNet *g);
int gpunet_step_pending(const GpuNet *g);
/* The next step's period is counted from its start (an event queued now, before its forward) and
 * not from the previous step's end: for the first step, and after work that is not a training
 * step (evaluation, checkpoints) went through the stream. */
void gpunet_step_time_from_start(GpuNet *g);
int gpunet_step_results(GpuNet *g, GpuStepResult *out);
/* The whole training step as one CUDA Graph: forward, gpunet_queue_stats(with_l2), backward (NCCL
 * inside) and gpunet_step's tail, captured on the first call (and again if with_l2 changes), then
 * one graph launch per call after the learning rate's copy. The step's result is read as
 * gpunet_step's. gpunet_graph_refusal() says why the graph cannot serve this GpuNet now (NULL:
 * it can). The batch is the one already on the device (gpunet_set_input/labels, gpunet_use_batch).
 * The first step is best run without it: libraries allocate and initialise on first use, which
 * CUDA refuses during capture. */
const char *gpunet_graph_refusal(const GpuNet *g);
void gpunet_graph_step(GpuNet *g, double lr, int with_l2);
/* --forward_only's step as one CUDA Graph on an inference net (GPUNET_INFERENCE): the forward in
 * inference mode and gpunet_infer_step's loss into the ring, captured on the first call, then one
 * graph launch a call. Dropout, which inference passes through, does not refuse it. */
void gpunet_graph_infer(GpuNet *g);
int gpunet_graph_made(const GpuNet *g);
/* The optimizer step of optim.h on the device, unconditionally and without unscaling (tests). */
void gpunet_sgd(GpuNet *g, double lr, double momentum, int nesterov, double weight_decay, double larc_eta,
                int larc_scale);
/* NCCL averaging of the gradients over ranks, inside backward: gpunet_nccl_id() makes the
 * communicator's id on one rank (GPUNET_NCCL_ID_BYTES), which every rank then passes to
 * gpunet_nccl_init() (collective: every rank calls it). From then on gpunet_backward() cuts the
 * gradient arena into buckets of bucket_bytes from its end and launches each bucket's
 * ncclAllReduce (average) on a separate stream as soon as backward has produced it; the compute
 * stream waits for them all at the end of backward. */
#define GPUNET_NCCL_ID_BYTES 128
void gpunet_nccl_id(void *id);
void gpunet_nccl_init(GpuNet *g, const void *id, int rank, int nranks, size_t bucket_bytes);
int gpunet_nccl_buckets(const GpuNet *g);
/* The last backward's device time (ms): backward itself, and the wait for the allreduce after it
 * (0 without NCCL). Synchronises. */
void gpunet_backward_ms(GpuNet *g, double *backward, double *exposed);

/* --profile (profile.h): while on, forward and backward record a CUDA event on the compute stream
 * before each layer and after the last. Turning it on waits for the device and records a reference
 * event, which the host waits for and reads its clock at. gpunet_profile_times() (synchronises)
 * gives the forward and backward recorded since it was turned on: layer i's start and end in ms
 * from the reference event (fwd[2i], fwd[2i+1], bwd likewise; NaN where not recorded) and the host
 * clock (now_seconds) at that event. Returns 0 when nothing was recorded. */
void gpunet_profile(GpuNet *g, int on);
int gpunet_profile_times(GpuNet *g, double *host0, double *fwd, double *bwd);
/* The NCCL buckets of the same backward (gpunet_nccl_init): bucket i's allreduce from t[2i] to
 * t[2i+1] ms on their stream, from the same reference event. Returns the buckets recorded (0 without
 * NCCL). */
int gpunet_profile_buckets(GpuNet *g, double *t);
/* 1 in the emulated device's build (make GPU_EMU=1): event times are the emulator's. */
int gpunet_emulated(void);

/* Waits for everything queued. */
void gpunet_sync(GpuNet *g);

#endif
