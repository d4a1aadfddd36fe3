/* train.c: see train.h. */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "watchdog.h"

static void on_grad_ready(void *ctx, size_t final_from) { gradsync_ready(ctx, final_from); }

void trainer_init(Trainer *t, Net *net, Dist *dist, const TrainerConfig *c, GpuNet *gpu) {
    memset(t, 0, sizeof *t);
    t->gpu = gpu;
    t->net = net;
    t->dist = dist;
    t->loss_scale = c->loss_scale > 0 ? c->loss_scale : 1.0;
    t->time_restart = 1;
    t->dynamic = c->dynamic_loss_scale;
    optim_init(&t->opt, &c->opt, net->params_total);
    dist_bcast(dist, net->params, net->params_total * sizeof(float));
    dist_bcast(dist, net->state, net->state_total * sizeof(float));
    if (gpu) {
        gpunet_upload_params(gpu);
        const GpuStepConfig sc = {c->opt.momentum, c->opt.weight_decay, c->opt.larc_eta, c->opt.nesterov, c->opt.larc_scale, t->dynamic};
        gpunet_step_setup(gpu, &sc);
        gpunet_step_state(gpu, t->loss_scale, 0, 0);
        const char *env = getenv("NVCNN_CUDA_GRAPH");
        if (env && strcmp(env, "off") != 0 && strcmp(env, "on") != 0) die_code(EXIT_USAGE, "NVCNN_CUDA_GRAPH=%s: want on or off", env);
        t->graph = !c->no_cuda_graph && !(env && strcmp(env, "off") == 0);
    }
    double mb = c->bucket_mb > 0 ? c->bucket_mb : 25;
    if (gpu && c->nccl && !c->no_allreduce && dist->size > 1) {
        char id[GPUNET_NCCL_ID_BYTES] = {0};
        if (dist->rank == 0) gpunet_nccl_id(id);
        dist_bcast(dist, id, sizeof id);
        gpunet_nccl_init(gpu, id, dist->rank, dist->size, (size_t)(mb * 1048576.0));
        t->nccl = 1;
        return;
    }
    t->sync = c->no_allreduce ? NULL : gradsync_new(dist, net->grads, net->params_total, (size_t)(mb * 1048576.0));
    if (dist->size > 1 && t->sync && !gpu) {
        net->on_grad_ready = on_grad_ready;
        net->on_grad_ready_ctx = t->sync;
    }
}

void trainer_free(Trainer *t) {
    optim_free(&t->opt);
    gradsync_free(t->sync);
    if (t->net->on_grad_ready_ctx == t->sync) {
        t->net->on_grad_ready = NULL;
        t->net->on_grad_ready_ctx = NULL;
    }
}

/* On the bits (exponent all ones: inf or NaN), so that it runs in vector registers. */
static int all_finite(const float *g, size_t n) {
    uint32_t bad = 0;
#pragma omp parallel for simd reduction(| : bad) schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, g + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad == 0;
}

/* Counts the step as skipped (inf/nan gradients) or good, and moves a dynamic loss scale: halved
 * on overflow, doubled after 2000 good steps in a row. Returns finite: whether to update. */
static int account_step(Trainer *t, int finite) {
    if (!finite) {
        t->skipped_steps++;
        t->good_steps = 0;
        if (t->dynamic && t->loss_scale > 1) t->loss_scale *= 0.5;
        return 0;
    }
    t->good_steps++;
    if (t->dynamic && t->good_steps % 2000 == 0 && t->loss_scale < 16777216.0) t->loss_scale *= 2;
    return 1;
}

static void gpu_fetch(Trainer *t);

void trainer_sync_host(Trainer *t) {
    if (!t->gpu) return;
    t->time_restart = 1;
    gpu_fetch(t); /* the loss scale and the counters as the device has them */
    gpunet_download_params(t->gpu);
    gpunet_download_velocity(t->gpu, t->opt.velocity);
}

void trainer_sync_device(Trainer *t) {
    if (!t->gpu) return;
    t->time_restart = 1;
    gpunet_step_state(t->gpu, t->loss_scale, t->good_steps, t->skipped_steps);
    gpunet_upload_params(t->gpu);
    gpunet_upload_velocity(t->gpu, t->opt.velocity);
}

/* The step on the GPU backend, in two halves so that the caller can prepare the next batch
 * while the device works: gpu_begin() queues forward, the loss and l2 sums and backward (with
 * NCCL's buckets inside); gpu_end() averages through the host when MPI does it, and queues the
 * step's tail, which decides on the device whether the gradients are finite, updates or skips,
 * and moves the loss scale (gpunet_step). The host learns the outcome when it reads the step's
 * result: at once, or with t->lazy when trainer_fetch() asks (or the device's ring of results is
 * full), and then keeps its own account of the skips and the loss scale from the results, by the
 * same rule as the device (account_step), and checks that the two agree. */
/* The batch onto the device, unless it is there already (device_input) */
static void gpu_upload_batch(Trainer *t, const int32_t *labels) {
    if (t->device_input) return;
    gpunet_set_input(t->gpu, t->net->node[t->net->input].data);
    gpunet_set_labels(t->gpu, labels);
}

static void gpu_begin(Trainer *t, const int32_t *labels) {
    Net *net = t->net;
    GpuNet *g = t->gpu;
    gpu_upload_batch(t, labels);
    net->labels = labels;
    net->training = 1;
    /* the graph: from the second step (the first lets the libraries allocate what they allocate on
     * first use, which CUDA refuses during capture), where nothing of the step runs on the host */
    const int host_average = !t->nccl && t->sync && t->dist->size > 1;
    t->graph_step = t->graph && t->gpu_steps > 0 && !host_average && !gpunet_graph_refusal(g);
    t->gpu_steps++;
    if (t->time_restart) gpunet_step_time_from_start(g);
    t->time_restart = 0;
    if (t->graph_step) return; /* queued whole by gpu_end */
    gpunet_forward(g);
    gpunet_queue_stats(g, t->opt.c.weight_decay != 0);
    gpunet_backward(g, GPUNET_DEVICE_SCALE, NULL, NULL);
}

/* The results of the steps queued and not read yet, into t->losses (synchronises). */
static void gpu_fetch(Trainer *t) {
    GpuNet *g = t->gpu;
    if (gpunet_step_pending(g) == 0) return;
    GpuStepResult r[GPUNET_RESULTS];
    if (t->nccl) watchdog_enter(WD_NCCL, 0, 0); /* the wait includes NCCL's */
    const int k = gpunet_step_results(g, r);
    watchdog_leave();
    double bms, ems; /* the last step's backward, counted for each step read (events of one step are kept) */
    gpunet_backward_ms(g, &bms, &ems);
    t->backward_seconds += k * bms * 1e-3;
    if (t->nccl) t->exposed_seconds += k * ems * 1e-3;
    const int bs = t->net->batch > 0 ? t->net->batch : 1;
    const double wd = t->opt.c.weight_decay;
    for (int i = 0; i < k; i++) {
        if ((double)r[i].scale != t->loss_scale)
            die("the device's loss scale %g differs from the host's %g (step result %d of %d)", (double)r[i].scale, t->loss_scale, i, k);
        const double loss = r[i].loss_sum / bs;
        t->net->loss = loss;
        account_step(t, r[i].finite);
        if (t->nlosses == TRAINER_LOSSES) die("trainer: %d step losses not taken (trainer_next_loss)", TRAINER_LOSSES);
        const int at = (t->loss0 + t->nlosses++) % TRAINER_LOSSES;
        t->losses[at] = loss + wd * 0.5 * r[i].l2;
        t->step_seconds[at] = r[i].seconds;
    }
}

static double gpu_end(Trainer *t, double lr) {
    GpuNet *g = t->gpu;
    if (!t->nccl && t->sync && t->dist->size > 1) {
        gpunet_sync(g);
        double t1 = now_seconds();
        gpunet_download_grads(g);
        /* one bucket at a time: all are final at once, so launching them together would overlap
         * nothing (and two ranks sharing an H200 with 13 buckets in flight together ended 0.8
         * away from one process in 3 of 5 runs, not understood: docs/performance.md) */
        gradsync_begin(t->sync);
        gradsync_all_in_turn(t->sync);
        gpunet_upload_grads(g);
        t->exposed_seconds += now_seconds() - t1;
    }
    if (t->graph_step)
        gpunet_graph_step(g, lr, t->opt.c.weight_decay != 0);
    else
        gpunet_step(g, lr);
    if (t->lazy && gpunet_step_pending(g) < GPUNET_RESULTS) return NAN;
    gpu_fetch(t);
    if (t->lazy) return NAN;
    double loss = NAN;
    while (trainer_next_loss(t, &loss)) {
    }
    return loss;
}

void trainer_fetch(Trainer *t) {
    if (t->gpu) gpu_fetch(t);
}

int trainer_next_loss(Trainer *t, double *loss) { return trainer_next_result(t, loss, NULL); }

int trainer_next_result(Trainer *t, double *loss, double *seconds) {
    if (t->nlosses == 0) return 0;
    *loss = t->losses[t->loss0];
    if (seconds) *seconds = t->step_seconds[t->loss0];
    t->loss0 = (t->loss0 + 1) % TRAINER_LOSSES;
    t->nlosses--;
    return 1;
}

void trainer_step_begin(Trainer *t, const int32_t *labels) {
    t->pending_labels = labels;
    if (t->gpu) gpu_begin(t, labels);
}

double trainer_step_end(Trainer *t, double lr) {
    if (t->gpu) return gpu_end(t, lr);
    return trainer_step(t, t->pending_labels, lr);
}

double trainer_step(Trainer *t, const int32_t *labels, double lr) {
    if (t->gpu) {
        gpu_begin(t, labels);
        return gpu_end(t, lr);
    }
    Net *net = t->net;
    net->labels = labels;
    net->training = 1;
    net_forward(net);
    const double data_loss = net->loss;
    double t0 = now_seconds();
    if (t->sync) gradsync_begin(t->sync);
    net_backward_scaled(net, (float)t->loss_scale);
    double t1 = now_seconds();
    if (t->sync) gradsync_finish(t->sync);
    const double t2 = now_seconds();
    t->backward_seconds += t1 - t0;
    t->exposed_seconds += t2 - t1;
    if (t->sync && t->dist->size > 1) profile_span(t->prof, PROF_ALLREDUCE_WAIT, t1, t2);
    if (t->loss_scale != 1.0) {
        const float inv = (float)(1.0 / t->loss_scale);
        float *g = net->grads;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < net->params_total; i++) g[i] *= inv;
    }
    /* identical on every rank: the averaged gradients are the same everywhere. The loss's
     * weight-decay term is of the weights the forward used: the update takes it in its pass over
     * them, and a skipped step in a pass of its own. */
    const int wd = t->opt.c.weight_decay != 0;
    double l2 = 0;
    if (account_step(t, all_finite(net->grads, net->params_total))) {
        optim_step_l2(&t->opt, net, lr, wd ? &l2 : NULL);
        profile_span(t->prof, PROF_OPTIMIZER, t2, now_seconds());
    } else if (wd) {
        const double tl = now_seconds();
        l2 = optim_l2(net);
        profile_span(t->prof, PROF_OPTIMIZER, t2, tl);
        profile_span(t->prof, PROF_L2, tl, now_seconds());
    }
    return data_loss + t->opt.c.weight_decay * l2;
}

void trainer_forward_begin(Trainer *t, const int32_t *labels) {
    Net *net = t->net;
    net->labels = labels;
    net->training = 0;
    if (t->gpu) {
        t->time_restart = 1;
        gpu_upload_batch(t, labels);
        gpunet_forward(t->gpu);
    } else {
        net_forward(net);
    }
    net->training = 1;
}

double trainer_forward_end(Trainer *t) { return t->gpu ? gpunet_loss(t->gpu) : t->net->loss; }

void trainer_infer_begin(Trainer *t, const int32_t *labels) {
    Net *net = t->net;
    if (!t->gpu) {
        trainer_forward_begin(t, labels);
        return;
    }
    gpu_upload_batch(t, labels);
    net->labels = labels;
    /* the graph from the second step, as a training step's (gpu_begin) */
    const int graph = t->graph && t->gpu_steps > 0 && !gpunet_graph_refusal(t->gpu);
    t->gpu_steps++;
    if (t->time_restart) gpunet_step_time_from_start(t->gpu);
    t->time_restart = 0;
    if (graph) {
        gpunet_graph_infer(t->gpu);
        return;
    }
    net->training = 0;
    gpunet_forward(t->gpu);
    net->training = 1;
    gpunet_infer_step(t->gpu);
}

double trainer_infer_end(Trainer *t) {
    if (!t->gpu) return t->net->loss;
    if (t->lazy && gpunet_step_pending(t->gpu) < GPUNET_RESULTS) return NAN;
    gpu_fetch(t);
    if (t->lazy) return NAN;
    double loss = NAN;
    while (trainer_next_loss(t, &loss)) {
    }
    return loss;
}

void trainer_eval(Trainer *t, const int32_t *labels, int count, int *top1, int *top5) {
    Net *net = t->net;
    trainer_forward_begin(t, labels);
    if (t->gpu) gpunet_download_node(t->gpu, net->logits, net->node[net->logits].data, 0);
    /* count only the valid samples: the net's topk looks at the whole batch */
    const Node *nd = &net->node[net->logits];
    int c = (int)shape_sample(nd->shape), c1 = 0, c5 = 0;
    for (int i = 0; i < count; i++) {
        const int ahead = net_label_rank(nd->data + (size_t)i * (size_t)c, c, labels[i]);
        c1 += ahead < 1;
        c5 += ahead < 5;
    }
    *top1 = c1;
    *top5 = c5;
}

void input_from_u8_nhwc(float *dst, const uint8_t *src, int n, int c, int h, int w) {
    const size_t hw = (size_t)h * (size_t)w;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * hw * (size_t)c;
        float *d = dst + (size_t)i * hw * (size_t)c;
        for (size_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++) d[(size_t)ch * hw + p] = (float)s[p * (size_t)c + (size_t)ch] * (1.0f / 127.5f) - 1.0f;
    }
}

void input_synthetic(float *dst, size_t count, Rng *r) {
    for (size_t i = 0; i < count; i++) dst[i] = (float)(0.1 * rng_truncated_normal(r)) * (1.0f / 127.5f) - 1.0f;
}

void labels_synthetic(int32_t *labels, int n, int num_classes, Rng *r) {
    uint32_t span = num_classes > 1 ? (uint32_t)(num_classes - 1) : 1;
    for (int i = 0; i < n; i++) labels[i] = (int32_t)rng_below(r, span);
}
