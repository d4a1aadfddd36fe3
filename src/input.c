/* input.c: see input.h. */
#include "input.h"

#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "util.h"
#include "watchdog.h"

/* The loader's configuration for `subset` on this rank (input_open_loader's arguments). */
static LoaderConfig loader_config(const Run *r, const char *subset, int training, uint64_t start) {
    const Config *c = &r->cfg;
    LoaderConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.data_dir = c->data_dir;
    lc.subset = subset;
    lc.batch = c->batch_size;
    lc.height = lc.width = r->image_size;
    /* --forward_only reads the training shards as inference does: central crops, endless */
    lc.training = training && !c->forward_only;
    lc.distort_color = lc.training && c->distort_color;
    lc.crop_area_min = (float)c->crop_area_min;
    lc.start_sample = start;
    lc.repeat = training;
    lc.rank = r->dist.rank;
    lc.nranks = r->dist.size;
    lc.threads = c->input_threads > 0 ? c->input_threads : r->threads; /* cores / ranks on this node */
    lc.shuffle_buffer = training ? c->shuffle_buffer : 0;
    lc.seed = c->seed;
    lc.skip_corrupt = c->skip_corrupt;
    lc.num_classes = c->num_classes;
    if (r->gpu) { /* pinned batches: their copies to the device overlap the step */
        lc.host_alloc = gpu_host_alloc;
        lc.host_free = gpu_host_free;
    }
    return lc;
}

Loader *input_open_loader(const Run *r, const char *subset, int training, uint64_t start) {
    const LoaderConfig lc = loader_config(r, subset, training, start);
    return loader_open(&lc);
}

Loader *input_open_validation(const Run *r, int defer_errors) {
    LoaderConfig lc = loader_config(r, "validation", 0, 0);
    lc.defer_errors = defer_errors;
    return loader_open(&lc);
}

size_t input_scan(const Run *r, const char *subset) {
    const LoaderConfig lc = loader_config(r, subset, 0, 0);
    return loader_scan(&lc);
}

void input_start(Input *in, Run *r, Trainer *tr, Loader *ld, long step0) {
    memset(in, 0, sizeof *in);
    in->r = r;
    in->tr = tr;
    in->step0 = step0;
    const Config *c = &r->cfg;
    in->labels = xmalloc((size_t)c->batch_size * sizeof *in->labels);
    in->last_epoch = (long)((double)step0 * r->total_batch / (double)r->nrecord);
    if (ld && step0 > 0) { /* resume: this rank's stream continues after the samples trained */
        loader_close(ld);
        ld = input_open_loader(r, "train", 1, (uint64_t)step0 * (uint64_t)c->batch_size);
    }
    in->ld = ld;
    if (ld) {
        if (tr->gpu) tr->device_input = 1; /* staged batch by batch */
        return;
    }
    /* synthetic data as nvcnn.py: one random batch per rank, made once */
    Net *net = tr->net;
    Node *x = net_node(net, net->input);
    Rng drng;
    rng_seed_stream(&drng, c->seed, 1000 + (uint64_t)r->dist.rank);
    input_synthetic(x->data, shape_count(x->shape), &drng);
    labels_synthetic(in->labels, c->batch_size, c->num_classes, &drng);
    if (tr->gpu) { /* uploaded once: it stays on the device */
        gpunet_set_input(tr->gpu, x->data);
        gpunet_set_labels(tr->gpu, in->labels);
        tr->device_input = 1;
    }
}

/* The loader's next batch: a phase of its own for the watchdog. */
static LoaderBatch *fetch(Input *in) {
    watchdog_enter(WD_INPUT, 0, 0);
    LoaderBatch *b = loader_next(in->ld);
    watchdog_leave();
    return b;
}

/* --skip_corrupt: the corrupt records skipped so far, once per epoch (every rank takes part); a
 * resumed run counts what it read itself, from its first step */
static void report_skipped(Input *in, long epoch) {
    double sk = (double)loader_skipped(in->ld);
    dist_allreduce_sum_d(&in->r->dist, &sk, 1);
    if (!in->r->cfg.skip_corrupt) return;
    if (in->step0 > 0)
        printf("Epoch %ld: %.0f corrupt records skipped so far (since the resume at step %ld)\n", epoch, sk, in->step0);
    else
        printf("Epoch %ld: %.0f corrupt records skipped so far\n", epoch, sk);
}

const int32_t *input_next(Input *in, long step) {
    watchdog_step(step); /* the step begins here */
    if (!in->ld) return in->labels;
    const Run *r = in->r;
    long epoch = (long)((double)step * r->total_batch / (double)r->nrecord);
    if (epoch > in->last_epoch) { /* the previous step finished an epoch */
        report_skipped(in, in->last_epoch + 1);
        in->last_epoch = epoch;
    }
    const int n = r->cfg.batch_size;
    GpuNet *g = in->tr->gpu;
    if (g) {
        int k = in->cur;
        if (!in->staged[k]) { /* the first step (later ones were prefetched) */
            in->staged[k] = fetch(in);
            gpunet_stage_batch(g, k, in->staged[k]->images, in->staged[k]->labels);
        }
        gpunet_use_batch(g, k);
        memcpy(in->labels, in->staged[k]->labels, (size_t)n * sizeof *in->labels);
        return in->labels;
    }
    Net *net = in->tr->net;
    Node *x = net_node(net, net->input);
    LoaderBatch *b = fetch(in);
    input_from_u8_nhwc(x->data, b->images, n, 3, x->shape.h, x->shape.w);
    memcpy(in->labels, b->labels, (size_t)n * sizeof *in->labels);
    loader_release(in->ld, b);
    return in->labels;
}

void input_prefetch(Input *in, int more) {
    GpuNet *g = in->tr->gpu;
    if (!in->ld || !g) return;
    int k = in->cur;
    /* this batch's copy was queued a step ago: once it is done, its buffer goes back */
    gpunet_stage_wait(g, k);
    loader_release(in->ld, in->staged[k]);
    in->staged[k] = NULL;
    if (more) {
        in->staged[1 - k] = fetch(in);
        gpunet_stage_batch(g, 1 - k, in->staged[1 - k]->images, in->staged[1 - k]->labels);
    }
    in->cur = 1 - k;
}

int input_free_slot(const Input *in) { return in->staged[in->cur] ? 1 - in->cur : in->cur; }

void input_finish(Input *in, long last) {
    for (int k = 0; k < 2; k++)
        if (in->staged[k]) { /* fetched for a step that a stop signal cancelled */
            gpunet_stage_wait(in->tr->gpu, k);
            loader_release(in->ld, in->staged[k]);
            in->staged[k] = NULL;
        }
    if (in->ld) {
        if (last > in->step0) report_skipped(in, in->last_epoch + 1);
        loader_close(in->ld);
    }
    free(in->labels);
    in->ld = NULL;
}
