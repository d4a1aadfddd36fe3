/* gpunet_none.c: the GPU backend's entry points (gpunet.h) in a build without CUDA. */
#ifndef NVCNN_CUDA
#include <stdio.h>
#include <stdlib.h>

#include "gpunet.h"
#include "util.h"

/* The GPU backend's entry points: unreachable without CUDA (gpu_count() is 0, so no run or test
 * gets as far as a GpuNet), and gpunet_new() says why if it is reached anyway. */
GpuNet *gpunet_new(Net *net, int device, int precision, size_t workspace_cap, unsigned flags, char *err, size_t errlen, int *oom) {
    (void)net, (void)device, (void)precision, (void)workspace_cap, (void)flags;
    if (oom) *oom = 0;
    snprintf(err, errlen, "this nvcnn was built without CUDA (CUDA=0)");
    return NULL;
}
void gpunet_free(GpuNet *g) { (void)g; }
int gpunet_fused(const GpuNet *g, int *bn_relu, int *bn_add_relu) {
    (void)g, (void)bn_relu, (void)bn_add_relu;
    return 0;
}
int gpunet_nhwc(const GpuNet *g) {
    (void)g;
    return 0;
}
#define NO_GPU die("GPU backend call in a build without CUDA")
size_t gpunet_bytes(const GpuNet *g) { (void)g; return 0; }
int gpunet_conv_algorithm(const GpuNet *g, int li, int dir, int *deterministic) {
    (void)g, (void)li, (void)dir, (void)deterministic;
    NO_GPU;
}
size_t gpunet_layer_scratch(const GpuNet *g, int li) { (void)g, (void)li; return 0; }
int gpunet_conv_channels(const GpuNet *g, int li) {
    (void)g, (void)li;
    NO_GPU;
}
size_t gpunet_download_conv_filter(GpuNet *g, int li, float *dst) {
    (void)g, (void)li, (void)dst;
    NO_GPU;
}
void gpunet_print_plan(const GpuNet *g, FILE *f) { (void)g, (void)f; NO_GPU; }
void gpunet_upload_params(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_download_params(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_upload_velocity(GpuNet *g, const float *v) { (void)g, (void)v; NO_GPU; }
void gpunet_download_velocity(GpuNet *g, float *v) { (void)g, (void)v; NO_GPU; }
void gpunet_download_grads(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_upload_grads(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_download_node(GpuNet *g, int id, float *dst, int grad) { (void)g, (void)id, (void)dst, (void)grad; NO_GPU; }
void gpunet_upload_node(GpuNet *g, int id, const float *src) { (void)g, (void)id, (void)src; NO_GPU; }
void gpunet_set_input(GpuNet *g, const float *nchw) { (void)g, (void)nchw; NO_GPU; }
void gpunet_set_labels(GpuNet *g, const int32_t *labels) { (void)g, (void)labels; NO_GPU; }
void gpunet_forward(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_stage_batch(GpuNet *g, int slot, const uint8_t *x, const int32_t *l) { (void)g, (void)slot, (void)x, (void)l; NO_GPU; }
void gpunet_stage_wait(GpuNet *g, int slot) { (void)g, (void)slot; NO_GPU; }
void gpunet_use_batch(GpuNet *g, int slot) { (void)g, (void)slot; NO_GPU; }
double gpunet_loss(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_backward(GpuNet *g, float s, void (*f)(void *, size_t), void *c) { (void)g, (void)s, (void)f, (void)c; NO_GPU; }
void gpunet_queue_stats(GpuNet *g, int w) { (void)g, (void)w; NO_GPU; }
void gpunet_step_setup(GpuNet *g, const GpuStepConfig *c) { (void)g, (void)c; NO_GPU; }
void gpunet_step_state(GpuNet *g, double s, long good, long skipped) { (void)g, (void)s, (void)good, (void)skipped; NO_GPU; }
void gpunet_step(GpuNet *g, double lr) { (void)g, (void)lr; NO_GPU; }
void gpunet_infer_step(GpuNet *g) { (void)g; NO_GPU; }
int gpunet_step_pending(const GpuNet *g) { (void)g; return 0; }
void gpunet_step_time_from_start(GpuNet *g) { (void)g; NO_GPU; }
int gpunet_step_results(GpuNet *g, GpuStepResult *r) { (void)g, (void)r; NO_GPU; }
const char *gpunet_graph_refusal(const GpuNet *g) { (void)g; return "no CUDA"; }
void gpunet_graph_step(GpuNet *g, double lr, int w) { (void)g, (void)lr, (void)w; NO_GPU; }
void gpunet_graph_infer(GpuNet *g) { (void)g; NO_GPU; }
int gpunet_graph_made(const GpuNet *g) { (void)g; return 0; }
int gpunet_fused_away(const GpuNet *g, int id) { (void)g, (void)id; return -1; }
size_t gpunet_activation_bytes(const GpuNet *g) { (void)g; return 0; }
size_t gpunet_scratch_bytes(const GpuNet *g) { (void)g; return 0; }
void gpunet_sgd(GpuNet *g, double lr, double m, int n, double wd, double eta, int sc) {
    (void)g, (void)lr, (void)m, (void)n, (void)wd, (void)eta, (void)sc;
    NO_GPU;
}
void gpunet_sync(GpuNet *g) { (void)g; NO_GPU; }
void gpunet_nccl_id(void *id) { (void)id; NO_GPU; }
void gpunet_nccl_init(GpuNet *g, const void *id, int rank, int nranks, size_t bucket_bytes) {
    (void)g, (void)id, (void)rank, (void)nranks, (void)bucket_bytes;
    NO_GPU;
}
int gpunet_nccl_buckets(const GpuNet *g) { (void)g; return 0; }
void gpunet_backward_ms(GpuNet *g, double *b, double *e) { (void)g, (void)b, (void)e; NO_GPU; }
void gpunet_profile(GpuNet *g, int on) { (void)g, (void)on; NO_GPU; }
int gpunet_profile_times(GpuNet *g, double *h, double *f, double *b) { (void)g, (void)h, (void)f, (void)b; NO_GPU; }
int gpunet_profile_buckets(GpuNet *g, double *t) { (void)g, (void)t; NO_GPU; }
int gpunet_emulated(void) { return 0; }
#else
typedef int gpunet_none_unused; /* ISO C forbids an empty translation unit */
#endif
