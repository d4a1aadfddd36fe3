/* test_gpu_graph.c: the training step as one CUDA Graph (--cuda_graph, gpunet_graph_step):
 *   - graph on and off give the same losses and weights, bit for bit, over steps whose learning
 *     rate changes every step and whose batches come through the real-data path's two staged
 *     slots in turn (a replay that ran a stale learning rate, a stale batch or the first step's
 *     loss scale would differ); the graph is made at the second step, not the first;
 *   - CUDA's refusals during stream capture, called directly: synchronising with a capturing
 *     stream or the device, cudaMalloc, a synchronous cudaMemcpy beside a blocking stream's
 *     capture (and not beside a non-blocking one's), querying an event recorded in the capture, a
 *     wait on an event recorded outside it, a fork never joined back, and cuDNN's Find. On the
 *     emulated device these test its emulation; on a GPU, CUDA itself (the same expectations).
 * The two-rank NCCL run with the graph is test_dist.c's nvcnn runs (--cuda_graph defaults to on).
 * Where no GPU exists every test skips with "no GPU" and the runner hands it to the emulated
 * device (tests/harness.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpu.h"
#include "gpunet.h"
#include "harness.h"
#include "layers/layers.h"
#include "models.h"
#include "testutil.h"
#include "train.h"

#ifdef NVCNN_CUDA /* a build without the GPU backend (CUDA=0) has neither CUDA nor these tests */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#ifdef NVCNN_GPU_EMU
#include "emu/emu_counts.h"
#endif

/* 6 steps of resnet18 reduced in fp16, batches staged in the two slots in turn, the learning rate
 * changing every step; the losses and the weights after them. */
static void graph_run(int graph, double *loss, float **w, size_t *P, int *made_after_first) {
    enum { B = 4, STEPS = 6 };
    Net *net = model_build_reduced(model_find("resnet18"), B, 10, 32, 16, ACT_RELU);
    net_finalize(net, 11);
    GpuNet *g = tu_gpunet(net, PREC_FP16, GPUNET_DETERMINISTIC);
    if (!g) return;
    uint8_t *img[2];
    int32_t *lab[2];
    tu_staged_batches(net, 12, img, lab);
    Dist d = {0, 1, 0, 1, 0};
    TrainerConfig tc;
    tu_trainer_defaults(&tc, 128);
    tc.no_cuda_graph = !graph;
    Trainer t;
    trainer_init(&t, net, &d, &tc, g);
    t.device_input = 1;
    t.lazy = 1;
    for (int s = 0; s < STEPS; s++) {
        const int k = s % 2;
        gpunet_stage_batch(g, k, img[k], lab[k]);
        gpunet_use_batch(g, k);
        trainer_step_begin(&t, lab[k]);
        trainer_step_end(&t, 0.02 + 0.01 * s);
        if (s == 0) *made_after_first = gpunet_graph_made(g);
        gpunet_stage_wait(g, k); /* the slot's bytes may be written again */
    }
    trainer_fetch(&t);
    for (int s = 0; s < STEPS; s++) CHECK_MSG(trainer_next_loss(&t, &loss[s]), "loss %d missing", s);
    CHECK_MSG(!graph || gpunet_graph_made(g), "the graph was not made");
    CHECK_MSG(t.skipped_steps == 0, "%ld steps skipped", t.skipped_steps);
    trainer_sync_host(&t);
    *P = net->params_total;
    *w = malloc(*P * sizeof(float));
    memcpy(*w, net->params, *P * sizeof(float));
    trainer_free(&t);
    gpunet_free(g);
    net_free(net);
    tu_staged_batches_free(img, lab);
}

TEST(gpu_graph_on_and_off_give_the_same_bits) {
    if (!tu_select_gpu()) return;
    const char *env = getenv("NVCNN_CUDA_GRAPH");
    if (env && strcmp(env, "off") == 0) {
        th_skip("NVCNN_CUDA_GRAPH=off");
        return;
    }
    double loss[2][6];
    float *w[2] = {NULL, NULL};
    size_t P[2] = {0, 0};
    int made[2] = {0, 0};
#ifdef NVCNN_GPU_EMU
    const long g0 = emu_graph_launches();
#endif
    for (int graph = 0; graph < 2; graph++) graph_run(graph, loss[graph], &w[graph], &P[graph], &made[graph]);
    if (!w[0] || !w[1]) return;
#ifdef NVCNN_GPU_EMU
    const long launched = emu_graph_launches() - g0;
    CHECK_MSG(launched == 5, "%ld graph launches for 6 steps with the graph (want 5: the first step runs without)", launched);
#endif
    CHECK_MSG(!made[1] && !made[0], "a graph existed after the first step (it is captured at the second)");
    for (int s = 0; s < 6; s++)
        CHECK_MSG(loss[0][s] == loss[1][s], "step %d: loss %.9g without the graph, %.9g with it", s, loss[0][s], loss[1][s]);
    CHECK_MSG(P[0] == P[1] && memcmp(w[0], w[1], P[0] * sizeof(float)) == 0, "the weights differ with the graph");
    printf("    resnet18 /16 fp16, 6 steps, staged batches in both slots, learning rate 0.02 .. 0.07: losses %.6f .. %.6f, "
           "weights equal bit for bit with and without the graph\n",
           loss[1][0], loss[1][5]);
    free(w[0]), free(w[1]);
}

/* ---- CUDA's refusals during capture ---- */
static void *dev_buf(size_t bytes) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, bytes) == cudaSuccess);
    return p;
}

/* Begins a capture on s with one kernel-free op in it (a memset of buf). */
static void begin(cudaStream_t s, void *buf) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMemsetAsync(buf, 0, 64, s) == cudaSuccess);
}

/* Ends the capture on s, expecting `want` (a graph only on success). */
static void end_expect(cudaStream_t s, cudaError_t want, const char *what) {
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    CHECK_MSG(e == want, "%s: cudaStreamEndCapture gave %s, want %s", what, cudaGetErrorName(e), cudaGetErrorName(want));
    CHECK_MSG((graph != NULL) == (want == cudaSuccess), "%s: graph %p", what, (void *)graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
}

TEST(gpu_graph_capture_refuses_what_cuda_refuses) {
    if (!tu_select_gpu()) return;
    cudaStream_t s, o;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&o, cudaStreamNonBlocking) == cudaSuccess);
    cudaEvent_t ev, outside;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming) == cudaSuccess);
    void *buf = dev_buf(256), *p = NULL;
    char host[64];
    cudaError_t e;
    /* a fork joined back: a graph, which replays */
    begin(s, buf);
    CHECK(cudaEventRecord(ev, s) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(o, ev, 0) == cudaSuccess);
    CHECK(cudaMemsetAsync((char *)buf + 64, 1, 64, o) == cudaSuccess);
    CHECK(cudaEventRecord(ev, o) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(s, ev, 0) == cudaSuccess);
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && graph);
    cudaGraphExec_t exec = NULL;
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    CHECK(cudaMemset(buf, 7, 256) == cudaSuccess);
    CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(cudaMemcpy(host, (char *)buf + 32, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK_MSG(host[0] == 0 && host[31] == 0 && host[32] == 1 && host[63] == 1, "the replay wrote %d %d %d %d", host[0], host[31], host[32],
              host[63]);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    /* a fork not joined back */
    begin(s, buf);
    CHECK(cudaEventRecord(ev, s) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(o, ev, 0) == cudaSuccess);
    CHECK(cudaMemsetAsync((char *)buf + 64, 1, 64, o) == cudaSuccess);
    end_expect(s, cudaErrorStreamCaptureUnjoined, "unjoined fork");
    /* synchronising with the capturing stream */
    begin(s, buf);
    e = cudaStreamSynchronize(s);
    CHECK_MSG(e == cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize: %s", cudaGetErrorName(e));
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after cudaStreamSynchronize");
    /* cudaMalloc */
    begin(s, buf);
    e = cudaMalloc(&p, 256);
    CHECK_MSG(e == cudaErrorStreamCaptureUnsupported, "cudaMalloc: %s", cudaGetErrorName(e));
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after cudaMalloc");
    /* a synchronous copy (the legacy stream): allowed beside a non-blocking stream's capture,
     * refused beside a blocking one's (the legacy stream would wait for it) */
    begin(s, buf);
    e = cudaMemcpy(host, buf, 64, cudaMemcpyDeviceToHost);
    CHECK_MSG(e == cudaSuccess, "cudaMemcpy beside a non-blocking stream's capture: %s", cudaGetErrorName(e));
    end_expect(s, cudaSuccess, "a cudaMemcpy beside it");
    cudaStream_t blocking;
    CHECK(cudaStreamCreate(&blocking) == cudaSuccess);
    begin(blocking, buf);
    e = cudaMemcpy(host, buf, 64, cudaMemcpyDeviceToHost);
    CHECK_MSG(e == cudaErrorStreamCaptureImplicit, "cudaMemcpy beside a blocking stream's capture: %s", cudaGetErrorName(e));
    end_expect(blocking, cudaErrorStreamCaptureInvalidated, "after cudaMemcpy");
    cudaStreamDestroy(blocking);
    /* the device synchronised */
    begin(s, buf);
    e = cudaDeviceSynchronize();
    CHECK_MSG(e == cudaErrorStreamCaptureUnsupported, "cudaDeviceSynchronize: %s", cudaGetErrorName(e));
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after cudaDeviceSynchronize");
    /* an event recorded in the capture, queried */
    begin(s, buf);
    CHECK(cudaEventRecord(ev, s) == cudaSuccess);
    e = cudaEventSynchronize(ev);
    CHECK_MSG(e == cudaErrorCapturedEvent, "cudaEventSynchronize: %s", cudaGetErrorName(e));
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after cudaEventSynchronize");
    /* a wait on work outside the capture */
    CHECK(cudaMemsetAsync(buf, 0, 64, o) == cudaSuccess);
    CHECK(cudaEventRecord(outside, o) == cudaSuccess);
    begin(s, buf);
    e = cudaStreamWaitEvent(s, outside, 0);
    CHECK_MSG(e == cudaErrorStreamCaptureIsolation, "cudaStreamWaitEvent on an outside event: %s", cudaGetErrorName(e));
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after the outside wait");
    /* cuDNN's Find (it synchronises and allocates) */
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cd;
    CHECK(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS && cudnnSetStream(h, s) == CUDNN_STATUS_SUCCESS);
    cudnnCreateTensorDescriptor(&x), cudnnCreateTensorDescriptor(&y), cudnnCreateFilterDescriptor(&w), cudnnCreateConvolutionDescriptor(&cd);
    CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 4) == CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 4) == CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, 3, 3) == CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int got = 0;
    begin(s, buf);
    cudnnStatus_t st = cudnnFindConvolutionForwardAlgorithm(h, x, w, cd, y, 8, &got, perf);
    CHECK_MSG(st != CUDNN_STATUS_SUCCESS, "cudnnFindConvolutionForwardAlgorithm succeeded during capture");
    end_expect(s, cudaErrorStreamCaptureInvalidated, "after cuDNN's Find");
    printf("    stream capture: a joined fork replays; refused: an unjoined fork, cudaStreamSynchronize, cudaMalloc, "
           "cudaDeviceSynchronize, cudaMemcpy beside a blocking stream's capture (allowed beside a non-blocking one's), cudaEventSynchronize "
           "on a captured event, a wait on an outside event, cuDNN's Find (status %d)\n",
           (int)st);
    cudnnDestroyTensorDescriptor(x), cudnnDestroyTensorDescriptor(y), cudnnDestroyFilterDescriptor(w), cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroy(h);
    cudaFree(buf);
    cudaEventDestroy(ev), cudaEventDestroy(outside);
    cudaStreamDestroy(s), cudaStreamDestroy(o);
}
#endif

/* The header says whether the training step (--forward_only's: the forward) runs as one CUDA
 * Graph, and why not; --cuda_graph=on given where the step cannot be one (dropout in training) is
 * refused, exit 2 (it was passed over without a word); a bad NVCNN_CUDA_GRAPH is a usage error
 * (exit 2, it was 1). --forward_only's steps are graphs too, dropout's models' included (inference
 * passes dropout through). */
TEST(gpu_graph_the_header_says_it_and_an_unused_on_is_refused) {
    if (tu_gpus() == 0) return;
    const char *env = getenv("NVCNN_CUDA_GRAPH");
    if (env && strcmp(env, "off") == 0) {
        th_skip("NVCNN_CUDA_GRAPH=off");
        return;
    }
    const char *cases[][3] = {
        {"--model=lenet", "0", "CUDA Graph:  on (each training step, captured at the second)\n"},
        {"--model=lenet --cuda_graph=off", "0", "CUDA Graph:  off (--cuda_graph=off)\n"},
        {"--model=lenet --forward_only", "0", "CUDA Graph:  on (each forward step, captured at the second)\n"},
        {"--model=alexnet --forward_only", "0", "CUDA Graph:  on (each forward step, captured at the second)\n"},
        {"--model=alexnet", "0", "CUDA Graph:  off (dropout draws a new mask from a host counter every forward)\n"},
        {"--model=alexnet --cuda_graph=on", "2",
         "nvcnn: error: --cuda_graph=on: dropout draws a new mask from a host counter every forward: the step cannot be one CUDA Graph here\n"},
        {"--model=lenet --cuda_graph=on --forward_only", "0", "CUDA Graph:  on (each forward step, captured at the second)\n"},
        {"--model=lenet --cuda_graph=off --forward_only", "0", "CUDA Graph:  off (--cuda_graph=off)\n"},
        {"--model=lenet --num_batches=1", "0", "CUDA Graph:  off (a run of one step: the graph is captured at the second)\n"},
        {"--model=lenet NVCNN_CUDA_GRAPH=maybe", "2", "nvcnn: error: NVCNN_CUDA_GRAPH=maybe: want on or off\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cmd[800], flags[300], *o = NULL;
        snprintf(flags, sizeof flags, "%s", cases[k][0]);
        char *e = strstr(flags, " NVCNN_");
        if (e) *e++ = 0;
        snprintf(cmd, sizeof cmd, "%s ./nvcnn --num_batches=2 %s --num_classes=10 --batch_size=1 --device=gpu 2>&1", e ? e : "", flags);
        const int rc = th_run(cmd, &o);
        CHECK_MSG(rc == atoi(cases[k][1]) && o && strstr(o, cases[k][2]), "'%s': exit %d, want %s and '%s':\n%s", cases[k][0], rc,
                  cases[k][1], cases[k][2], o);
        free(o);
    }
}
