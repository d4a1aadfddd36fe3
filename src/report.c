/* report.c: see report.h. */
#include "models.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "gpunet.h"
#include "util.h"

void report_header(const Run *r, const Net *net) {
    const Config *c = &r->cfg;
    printf("Cmd line args:\n");
    config_print_args(c, stdout);
    printf("Num ranks:   %d\n", r->dist.size);
    if (c->data_dir)
        printf("Num images:  %zu\n", r->nrecord);
    else
        printf("Num images:  Synthetic\n");
    printf("Model:       %s\n", r->model->name);
    printf("Image size:  %dx%d%s\n", r->image_size, r->image_size, r->image_size != r->model->image_size ? " (--image_size)" : "");
    printf("Parameters:  %zu\n", net_num_params(net));
    printf("Batch size:  %d per device\n", c->batch_size);
    printf("             %d total\n", r->total_batch);
    if (r->gpu) {
        char desc[256];
        gpu_describe(r->gpu_device, desc, sizeof desc);
        if (r->dist.size == 1)
            printf("Devices:     gpu: %s\n", desc);
        else
            printf("Devices:     %d x gpu: %s\n", r->dist.size, desc);
    } else {
        /* how OpenMP's idle threads wait: the user's setting, or nvcnn's default (main.c) */
        char wait[96] = "";
        const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
        if (policy) snprintf(wait, sizeof wait, ", OMP_WAIT_POLICY=%.60s", policy);
        else if (spin) snprintf(wait, sizeof wait, ", GOMP_SPINCOUNT=%.60s", spin);
        if (r->dist.size == 1)
            printf("Devices:     cpu (%d thread%s%s)\n", r->threads, r->threads == 1 ? "" : "s", wait);
        else
            printf("Devices:     %d x cpu (%d thread%s each%s)\n", r->dist.size, r->threads, r->threads == 1 ? "" : "s", wait);
    }
    if (!r->gpu) printf("CPU layers:  %s\n", r->cpu_layers);
    if (r->gpu)
        printf(c->deterministic ? "Deterministic: yes (--deterministic: cuDNN's deterministic algorithms, by its heuristics)\n"
                                : "Deterministic: no (cuDNN's fastest measured algorithms: bits may differ between runs; --deterministic)\n");
    else if (c->deterministic) /* what the CPU backend gives anyway: said, as the flag asks for it */
        printf("Deterministic: yes (the CPU backend: the same bits with the same flags, ranks and threads, with or without "
               "--deterministic)\n");
    printf("Data format: %s\n", r->nhwc ? "NHWC (activations and their gradients; filters KRSC)" : "NCHW");
    printf("Data type:   %s\n", precision_name(c->precision));
    if (c->forward_only)
        printf("Mode:        forward only (inference: batch norm on its moving statistics, no backward, no update)\n");
    if (c->dynamic_loss_scale && !c->forward_only && !c->eval) /* (an evaluation has no backward to scale) */
        printf("Loss scale:  dynamic (from %g)\n", c->loss_scale);
    else if (c->loss_scale != 1 && !c->forward_only && !c->eval)
        printf("Loss scale:  %g\n", c->loss_scale);
    if (!c->eval && !c->forward_only)
        printf("Learning rate: %g (%s)\n", r->base_lr, c->given_learning_rate ? "given" : "model default");
    if (c->print_layers) {
        printf("Layers:      (GFLOPs: each layer's forward pass over one batch of %d)\n", net->batch);
        net_print_summary(net, stdout);
        const double gf = net_forward_flops(net) / 1e9;
        printf("Total:       %zu parameters, %.3f GFLOPs a forward pass of the batch (%.3f an image)\n", net->params_total, gf,
               gf / (net->batch > 0 ? net->batch : 1));
    }
    fflush(stdout);
}

/* The divergence warnings' other cause: batch norm over a handful of values a channel (a small batch
 * on small maps) makes gradients of any size, whatever the learning rate; "" where none does. */
static void bn_hint(const Run *r, char *buf, size_t n) {
    buf[0] = 0;
    if (r->bn_values > 0 && r->bn_values <= 16)
        snprintf(buf, n, "; or batch norm %s over %ld value%s a channel: a larger --batch_size%s", r->bn_layer, r->bn_values,
                 r->bn_values == 1 ? "" : "s", model_fully_convolutional(r->model) ? " or --image_size" : "");
}

/* NVCNN_TEST_CLOCK_SCALE (report.h): read once. */
static double clock_scale(void) {
    static double scale = 0;
    if (scale == 0) {
        const char *v = getenv("NVCNN_TEST_CLOCK_SCALE");
        scale = 1;
        if (v) {
            char *end;
            scale = strtod(v, &end);
            if (end == v || *end || !(scale > 0 && isfinite(scale)))
                die_code(EXIT_USAGE, "NVCNN_TEST_CLOCK_SCALE=%s: expected a number > 0", v);
        }
    }
    return scale;
}

double report_clock(void) { return now_seconds() * clock_scale(); }

long report_test_pause_ms(void) {
    static long ms = -1;
    if (ms < 0) {
        const char *v = getenv("NVCNN_TEST_STEP_PAUSE_MS");
        ms = 0;
        if (v) {
            char *end;
            errno = 0;
            ms = strtol(v, &end, 10);
            if (end == v || *end || errno || ms < 0 || ms > 600000)
                die_code(EXIT_USAGE, "NVCNN_TEST_STEP_PAUSE_MS=%s: expected milliseconds from 0 to 600000", v);
        }
    }
    return ms;
}

void report_test_pause(void) {
    const long ms = report_test_pause_ms();
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (ms > 0 && nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

void report_open(Report *rep, Run *r, Trainer *tr, long step0) {
    memset(rep, 0, sizeof *rep);
    rep->r = r;
    rep->tr = tr;
    rep->step0 = rep->last_row_step = step0;
    rep->due_step = rep->force_step = rep->row_step = rep->summary_step = -1;
    rep->rows_skipped = rep->skipped0 = tr->skipped_steps; /* a resumed run's earlier ones were said then */
    rep->burnin = r->cfg.nstep_burnin; /* nvcnn.py: the first steps of the run, however short */
    rep->cap_rates = 1024;
    rep->rates = xmalloc((size_t)rep->cap_rates * sizeof *rep->rates);
    rep->last_summary = now_seconds();
    rep->last_row = rep->last_eta = report_clock();
    rep->row_every = r->cfg.display_every;
    /* --forward_only, which numbers its own steps from 1 (an inference benchmark of the weights of
     * --log_dir's checkpoint), writes none of the training's metrics.csv and TensorBoard events:
     * its rows would mix with the training's under the same steps */
    if (r->cfg.log_dir && r->dist.rank == 0 && !r->cfg.forward_only) {
        char err[512];
        rep->elog = events_open(r->cfg.log_dir, step0, err, sizeof err);
        if (!rep->elog) /* a full disk is an I/O failure; a folder that cannot hold them, a usage error */
            die_code(errno == ENOSPC || errno == EDQUOT || errno == EIO ? EXIT_FAILURE_GENERIC : EXIT_USAGE, "--log_dir=%s: %s",
                     r->cfg.log_dir, err);
    }
    printf(r->cfg.forward_only ? "Forward only\n" : "Training\n");
    printf(r->cfg.forward_only ? "  Step Epoch Img/sec   Loss\n" : "  Step Epoch Img/sec   Loss   LR\n");
    fflush(stdout);
}

#define ETA_EVERY 60.0 /* seconds between ETA lines */
int report_row_interval(double per_step, int display_every) {
    int best = 1;
    for (long k = 1; k <= display_every; k *= 10) {
        const long cand[3] = {k, 2 * k, 5 * k};
        for (int i = 0; i < 3; i++)
            if (cand[i] <= display_every && (double)cand[i] * per_step <= REPORT_ROW_SECONDS) best = (int)cand[i];
    }
    return best;
}

void report_duration_text(char *buf, size_t n, double secs) {
    const long s = secs > 0 ? (long)(secs + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, n, "%ld h %02ld min", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        snprintf(buf, n, "%ld min %02ld s", s / 60, s % 60);
    else
        snprintf(buf, n, "%ld s", s);
}

void report_eta_text(char *buf, size_t n, long done, long nstep, double per_step) {
    char left[64];
    report_duration_text(left, sizeof left, per_step * (double)(nstep - done));
    snprintf(buf, n, "  ETA: %s (step %ld of %ld, %.3g s/step)", left, done, nstep, per_step);
}

int report_due(Report *rep, long step) {
    const Config *c = &rep->r->cfg;
    if (rep->due_step != step) {
        const int last = step + 1 == rep->r->nstep || step == rep->force_step;
        rep->due_step = step;
        rep->due_row = (step == rep->step0 || (step + 1) % rep->row_every == 0 || last) && rep->row_step != step;
        rep->due_summary = rep->elog && rep->summary_step != step &&
                           (step == rep->step0 || last || now_seconds() - rep->last_summary >= c->summary_interval);
    }
    return rep->due_row || rep->due_summary;
}

void report_force(Report *rep, long step) {
    rep->force_step = step;
    if (rep->due_step == step) rep->due_step = -1; /* decided again */
}

void report_loss(Report *rep, double loss) {
    double *avg = rep->r->loss_avg; /* the run's, which a checkpoint keeps */
    avg[0] = 0.9 * avg[0] + 0.1 * loss;
    avg[1] = 0.9 * avg[1] + 0.1;
    rep->last_loss = loss;
}

void report_time(Report *rep, double seconds) {
    const long i = rep->ntimed++;
    if (!(seconds > 0)) return;
    rep->last_rate = (double)rep->r->total_batch / seconds;
    if (i < rep->burnin || rep->nrates >= rep->r->nstep) return;
    if (rep->nrates == rep->cap_rates) {
        rep->cap_rates *= 2;
        rep->rates = xrealloc(rep->rates, (size_t)rep->cap_rates * sizeof *rep->rates);
    }
    rep->rates[rep->nrates++] = rep->last_rate;
}

void report_results(Report *rep, Trainer *tr) {
    for (double l, secs; trainer_next_result(tr, &l, &secs);) {
        report_loss(rep, l);
        report_time(rep, secs);
    }
}

void report_step(Report *rep, long step, double loss, double lr, double seconds) {
    Run *r = rep->r;
    const Config *c = &r->cfg;
    Net *net = rep->tr->net;
    if (!isnan(loss)) report_loss(rep, loss);
    loss = rep->last_loss;
    if (!isnan(seconds)) report_time(rep, seconds);
    const double rate = rep->last_rate;
    const int last = step + 1 == r->nstep || step == rep->force_step;
    report_due(rep, step);
    const int row = rep->due_row, summary = rep->due_summary;
    rep->due_step = -1;
    if (!row && !summary) return;
    /* top-1/top-5 from the logits (on the GPU backend: downloaded for the purpose) */
    if (rep->tr->gpu) gpunet_download_node(rep->tr->gpu, net->logits, net->node[net->logits].data, 0);
    const double top1 = net_topk_correct(net, 1), top5 = net_topk_correct(net, 5);
    /* synthetic data has no epochs (its nrecord is the run's length, to number the Epoch column) */
    const double epoch = c->data_dir ? (double)(step + 1) * r->total_batch / (double)r->nrecord : NAN;
    const double lr_or_none = c->forward_only ? NAN : lr;
    if (row) { /* every rank takes part in the average */
        const double t = report_clock();
        /* rank 0's seconds since the last row (the others add 0: every rank gets the same sum) */
        double v[4] = {rep->r->loss_avg[0] / rep->r->loss_avg[1], top1, top5, r->dist.rank == 0 ? t - rep->last_row : 0};
        dist_allreduce_sum_d(&r->dist, v, 4);
        const double avg = v[0] / r->dist.size;
        const long ep = (long)((double)step * r->total_batch / (double)r->nrecord);
        char loss_text[32]; /* a diverging loss in a column's width: 1.407e+72, not 73 digits */
        snprintf(loss_text, sizeof loss_text, fabs(avg) < 1e6 || !isfinite(avg) ? "%7.3f" : "%7.3e", avg);
        if (c->forward_only)
            printf("%6ld %5ld %7.1f %s\n", step + 1, ep + 1, rate, loss_text);
        else
            printf("%6ld %5ld %7.1f %s %7.5f\n", step + 1, ep + 1, rate, loss_text, lr);
        const Trainer *tr = rep->tr;
        /* (a dynamic scale skips steps while it comes down; at 1, a skipped step is a diverged one) */
        if (tr->skipped_steps > rep->rows_skipped && (!tr->dynamic || tr->loss_scale <= 1) && r->dist.rank == 0) {
            /* with a static loss scale (fp32's 1 included) a skipped step is a diverged one, said
             * as it happens rather than at the end of the run */
            const long k = tr->skipped_steps - rep->rows_skipped, from = rep->last_row_step + 1;
            char steps[96];
            if (from < step + 1)
                snprintf(steps, sizeof steps, "steps %ld-%ld: %ld", from, step + 1, k);
            else
                snprintf(steps, sizeof steps, "step %ld", from);
            char bn[160];
            bn_hint(r, bn, sizeof bn);
            warn("%s had inf or nan gradients and did not update the parameters (%ld in the run): the training is diverging "
                 "(a lower --learning_rate%s%s)",
                 steps, tr->skipped_steps - rep->skipped0, r->cfg.precision == PREC_FP16 && !tr->dynamic ? ", or --loss_scale=dynamic" : "", bn);
        }
        rep->rows_skipped = tr->skipped_steps;
        const double per_step = v[3] / (double)(step + 1 - rep->last_row_step);
        if (!c->given_display_every) rep->row_every = report_row_interval(per_step, c->display_every);
        if (!last && t - rep->last_eta >= ETA_EVERY) {
            char eta[160];
            report_eta_text(eta, sizeof eta, step + 1, r->nstep, per_step);
            printf("%s\n", eta);
            rep->last_eta = t;
        }
        fflush(stdout);
        rep->last_row = t;
        rep->last_row_step = step + 1;
        rep->row_step = step;
        events_csv(rep->elog, step + 1, epoch, avg, lr_or_none, rate, 100.0 * v[1] / r->total_batch,
                   100.0 * v[2] / r->total_batch, NAN, NAN);
    }
    if (summary) {
        const int n = c->batch_size;
        static const char *const tags[] = {"total loss raw", "total loss avg", "learning rate", "train accuracy top-1 %",
                                           "train accuracy top-5 %", "images/sec"};
        const double vals[] = {loss, rep->r->loss_avg[0] / rep->r->loss_avg[1], lr_or_none, 100.0 * top1 / n, 100.0 * top5 / n, rate};
        events_scalars(rep->elog, step + 1, tags, vals, 6);
        rep->last_summary = now_seconds();
        rep->summary_step = step;
    }
}

void report_validation(Report *rep, long step, double top1, double top5) {
    Run *r = rep->r;
    static const char *const tags[] = {"validation accuracy top-1 %", "validation accuracy top-5 %"};
    const double vals[] = {top1, top5};
    events_scalars(rep->elog, step, tags, vals, 2);
    events_csv(rep->elog, step, (double)step * r->total_batch / (double)r->nrecord, NAN, NAN, NAN, NAN, NAN, top1, top5);
}

void report_pause(Report *rep, double seconds) {
    rep->last_row += seconds * clock_scale();
    rep->last_eta += seconds * clock_scale();
}

/* nvcnn.py's summary: the mean rate of the steps after burn-in, its standard error and jitter. The
 * standard error needs 3 timed steps: with 1 or 2 the figure is printed without one. */
static void print_speed_summary(const double *rates, long n, int burnin) {
    printf("----------------------------------------------------------------\n");
    if (n > 2) {
        Stats s = stats_compute(rates, (size_t)n);
        printf("Images/sec: %.1f +/- %.1f (jitter = %.1f)\n", s.mean, s.stderr_, s.jitter);
    } else if (n > 0) {
        Stats s = stats_compute(rates, (size_t)n);
        printf("Images/sec: %.1f (%ld timed step%s: too few for an error estimate)\n", s.mean, n, n == 1 ? "" : "s");
    } else {
        printf("No results, did not get past burn-in phase (%d steps)\n", burnin);
    }
    printf("----------------------------------------------------------------\n");
}

void report_end(Report *rep, long steps) {
    Run *r = rep->r;
    const Trainer *tr = rep->tr;
    if (steps > 0) print_speed_summary(rep->rates, rep->nrates, rep->burnin); /* (none: a pending validation pass alone) */
    if (tr->gpu) /* nvcnn's own allocations (held from planning to the end: its peak), beside what the device says is in use */
        printf("GPU memory: %.2f GiB allocated by nvcnn (its arenas and cuDNN's workspace, held all run); %.2f GiB in use on the GPU "
               "at the end (the CUDA context, the libraries' own and any other process's included)\n",
               (double)gpunet_bytes(tr->gpu) / 1073741824.0, (double)gpu_mem_used(r->gpu_device) / 1073741824.0);
    const long skipped = tr->skipped_steps - rep->skipped0; /* this run's */
    if (skipped) printf("Skipped steps (inf/nan gradients): %ld\n", skipped);
    /* with a static loss scale, an inf or nan gradient is not an overflow the scale recovers from:
     * the training diverged, and the steps it skipped left the parameters (and the loss) as they were */
    if (skipped && (!tr->dynamic || tr->loss_scale <= 1) && r->dist.rank == 0) {
        char bn[160];
        bn_hint(r, bn, sizeof bn);
        warn("%ld of the run's steps had inf or nan gradients and did not update the parameters: the training diverged "
             "(a lower --learning_rate%s%s)",
             skipped, r->cfg.precision == PREC_FP16 && !tr->dynamic ? ", or --loss_scale=dynamic" : "", bn);
    }
    if (r->dist.size > 1 && !r->cfg.forward_only) {
        double t[2] = {tr->backward_seconds, tr->exposed_seconds};
        dist_allreduce_sum_d(&r->dist, t, 2);
        const double per = (double)r->dist.size * (double)(steps > 0 ? steps : 1);
        const int off = r->cfg.allreduce == ALLREDUCE_NONE;
        if (tr->gpu && gpunet_graph_made(tr->gpu)) { /* events inside a captured step are not timed */
            printf("Backward: not timed (the steps ran as one CUDA Graph: --cuda_graph=off times it); allreduce %s, %d bucket(s) of up to %g MiB (--bucket_mb)\n",
                   off ? "off" : tr->nccl ? "on (nccl)" : "on (mpi)", tr->nccl ? gpunet_nccl_buckets(tr->gpu) : 0, r->cfg.bucket_mb);
        } else {
            printf("Backward: %.2f ms/step; allreduce %s: %.2f ms/step exposed (after backward), %d bucket(s) of up to %g MiB (--bucket_mb)\n",
                   1e3 * t[0] / per, off ? "off" : tr->nccl ? "on (nccl)" : "on (mpi)", 1e3 * t[1] / per,
                   tr->nccl ? gpunet_nccl_buckets(tr->gpu) : tr->sync ? gradsync_buckets(tr->sync) : 0, r->cfg.bucket_mb);
        }
    }
}

void report_close(Report *rep) {
    events_close(rep->elog);
    free(rep->rates);
    rep->elog = NULL;
    rep->rates = NULL;
}
