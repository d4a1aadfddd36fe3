/* evaluate.c: see evaluate.h. */
#include "evaluate.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "input.h"
#include "report.h"
#include "signals.h"
#include "util.h"

/* One accuracy line; the error and jitter need 3 steps, as Images/sec's do. */
static void print_accuracy(const char *what, double acc, const Stats *s, size_t steps) {
    if (steps > 2)
        printf("Validation %s: %.3f %% +/- %.2f (jitter = %.1f)\n", what, acc, s->stderr_, s->jitter);
    else
        printf("Validation %s: %.3f %% (%zu step%s: too few for an error estimate)\n", what, acc, steps, steps == 1 ? "" : "s");
}

int evaluate_due(const Run *r, long step) {
    const double every = r->cfg.eval_every_epochs, per_epoch = (double)r->nrecord / r->total_batch;
    if (every <= 0 || step + 1 >= r->nstep) return 0;
    /* epochs done after a step, in units of `every`: the step that crosses an integer */
    return floor((double)(step + 1) / per_epoch / every) > floor((double)step / per_epoch / every);
}

int evaluate(Run *r, Trainer *tr, int slot, int verbose, int in_training, double *top1, double *top5) {
    const Config *c = &r->cfg;
    Loader *ld = input_open_validation(r, in_training);
    int failed = 0;
    Net *net = tr->net;
    Node *in = net_node(net, net->input);
    size_t cap = 64, n = 0;
    double total[3] = {0, 0, 0}; /* top-1 and top-5 correct, images: over all steps and ranks */
    double *t1 = xmalloc(cap * sizeof *t1), *t5 = xmalloc(cap * sizeof *t5);
    /* rows as training's (report.h): at step 1, every --display_every steps and the last step;
     * without --display_every, every 10 steps or as often as a row about every 10 s needs */
    int every = c->display_every;
    long shown = 0;
    double shown_t = report_clock();
    if (verbose) {
        printf("Evaluating on %zu validation images\n", loader_num_records(ld));
        printf("  Step  Top-1  Top-5\n");
    }
    for (long step = 0;; step++) {
        LoaderBatch *b = loader_next(ld);
        /* top1, top5, count, ranks done, ranks whose data failed (exit 4), whose reading failed (1),
         * ranks asked to stop, and the stop signal's counts */
        double acc[7 + SIGNALS_NCOUNTS] = {0, 0, 0, b ? 0 : 1, 0, 0, signals_stop_signal() ? 1 : 0};
        signals_stop_counts(acc + 7);
        const char *why;
        const int code = b ? 0 : loader_error(ld, &why);
        if (code) {
            error_line("%s", why);
            acc[code == EXIT_DATA ? 4 : 5] = 1;
        }
        if (b) {
            int c1, c5;
            /* a short last batch: the slots past count hold stale bytes; give them a valid label */
            for (int i = b->count; i < c->batch_size; i++) b->labels[i] = 0;
            if (tr->gpu) {
                gpunet_stage_batch(tr->gpu, slot, b->images, b->labels);
                gpunet_use_batch(tr->gpu, slot);
                gpunet_stage_wait(tr->gpu, slot);
                tr->device_input = 1;
            } else {
                input_from_u8_nhwc(in->data, b->images, c->batch_size, 3, in->shape.h, in->shape.w);
            }
            trainer_eval(tr, b->labels, b->count, &c1, &c5);
            acc[0] = c1;
            acc[1] = c5;
            acc[2] = b->count;
            loader_release(ld, b);
        }
        dist_allreduce_sum_d(&r->dist, acc, 7 + SIGNALS_NCOUNTS);
        if (acc[4] > 0 || acc[5] > 0) { /* every rank sees it after the same step */
            failed = acc[5] > 0 ? EXIT_FAILURE_GENERIC : EXIT_DATA;
            break;
        }
        if (acc[6] > 0) { /* a stop signal: the pass ends here, on every rank */
            printf("Received %s: the evaluation stopped after %ld of its steps (the figures of a part of the validation set "
                   "would not be the model's: none given)\n",
                   signals_stop_name(acc + 7), step);
            failed = -1;
            break;
        }
        if (acc[2] > 0) {
            if (n == cap) {
                cap *= 2;
                t1 = xrealloc(t1, cap * sizeof *t1);
                t5 = xrealloc(t5, cap * sizeof *t5);
            }
            for (int k = 0; k < 3; k++) total[k] += acc[k];
            t1[n] = 100.0 * acc[0] / acc[2];
            t5[n] = 100.0 * acc[1] / acc[2];
            n++;
            if (verbose && (step == 0 || (step + 1) % every == 0)) {
                printf("%6ld %5.1f%% %5.1f%%\n", step + 1, t1[n - 1], t5[n - 1]);
                const double t = report_clock();
                if (!c->given_display_every) every = report_row_interval((t - shown_t) / (double)(step + 1 - shown), c->display_every);
                shown = step + 1;
                shown_t = t;
            }
        }
        if ((int)acc[3] == r->dist.size) break;
    }
    *top1 = *top5 = NAN;
    if (failed) {
        free(t1);
        free(t5);
        loader_close(ld);
        return failed;
    }
    if (n > 0) { /* the accuracy over every image (a short last batch weighs by its images) */
        *top1 = 100.0 * total[0] / total[2];
        *top5 = 100.0 * total[1] / total[2];
    }
    size_t skipped = loader_skipped(ld);
    double sk = (double)skipped;
    dist_allreduce_sum_d(&r->dist, &sk, 1); /* every rank has the same n and sk: all end here alike */
    if (n == 0 && sk > 0) {
        if (!in_training)
            die_code(EXIT_DATA, "%s/validation-*: every image was corrupt and skipped (--skip_corrupt): %.0f records, none evaluated",
                     c->data_dir, sk);
        if (r->dist.rank == 0)
            error_line("%s/validation-*: every image was corrupt and skipped (--skip_corrupt): %.0f records, none evaluated",
                       c->data_dir, sk);
        free(t1);
        free(t5);
        loader_close(ld);
        return EXIT_DATA;
    }
    if (verbose) { /* the last step's row, then the error and jitter from the per-step figures, as nvcnn.py */
        if (n > 0 && shown != (long)n) printf("%6zu %5.1f%% %5.1f%%\n", n, t1[n - 1], t5[n - 1]);
        printf("----------------------------------------------------------------\n");
        if (n > 0) {
            Stats s1 = stats_compute(t1, n), s5 = stats_compute(t5, n);
            print_accuracy("Top-1", *top1, &s1, n);
            print_accuracy("Top-5", *top5, &s5, n);
        } else {
            printf("No validation images\n");
        }
        printf("----------------------------------------------------------------\n");
    }
    if (sk > 0) printf("Skipped corrupt validation records: %.0f\n", sk);
    free(t1);
    free(t5);
    loader_close(ld);
    return 0;
}
