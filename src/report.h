/* report.h: what a run tells its user: the header, one table row per displayed step, TensorBoard
 * summaries and metrics.csv in --log_dir, and the summary at the end (nvcnn.py's Images/sec line,
 * peak GPU memory, skipped steps, the allreduce's exposed time). */
#ifndef NVCNN_REPORT_H
#define NVCNN_REPORT_H

#include "events.h"
#include "run.h"
#include "train.h"

typedef struct Report {
    Run *r;
    Trainer *tr;
    EventLog *elog;       /* rank 0 with --log_dir; NULL otherwise */
    long step0;           /* the step the run starts at */
    int burnin;           /* steps left out of Images/sec */
    double *rates;        /* per timed step, images per second over all ranks */
    long nrates;
    double ema, ema_w;    /* nvcnn.py's loss average: decay 0.9, debiased */
    double last_summary;  /* wall clock of the last TensorBoard summary */
} Report;

/* The header lines (and --print_layers' table). */
void report_header(const Run *r, const Net *net);
/* Opens --log_dir's event log on rank 0 and prints the table's head. */
void report_open(Report *rep, Run *r, Trainer *tr, long step0);
/* After step `step` (0-based) with this rank's loss, the learning rate and the step's seconds:
 * the row at step 1, every --display_every steps and the last step (values averaged over ranks:
 * every rank takes part); a TensorBoard summary on rank 0 at the first and last step and every
 * --summary_interval seconds (rank 0's values, as nvcnn_hvd.py). */
void report_step(Report *rep, long step, double loss, double lr, double seconds);
/* The end-of-run lines. `steps`: the steps this run made. */
void report_end(Report *rep, long steps);
/* The validation accuracy at the end of training, into the logs. */
void report_validation(Report *rep, double top1, double top5);
void report_close(Report *rep);

#endif
