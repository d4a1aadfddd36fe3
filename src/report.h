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
    double *rates;        /* per timed step, images per second over all ranks (grown as steps come: a
                             run's length may be far beyond what it reaches) */
    long nrates, cap_rates;
    long ntimed;          /* steps timed so far (report_time), burn-in included */
    double last_rate;     /* the latest step's images per second */
    double last_summary;  /* wall clock of the last TensorBoard summary */
    double last_row;      /* report_clock() at the last table row (or at the start) */
    long last_row_step;   /* the steps done at the last row (or step0) */
    int row_every;        /* steps between rows (--display_every, or by the steps' pace) */
    double last_eta;      /* report_clock() at the last ETA line (or at the start) */
    double last_loss;     /* the latest loss given (report_loss) */
    long due_step;        /* report_due()'s step (-1: none) and what it decided */
    int due_row, due_summary;
    long force_step;      /* a step that reports as a run's last does (report_force; -1: none) */
    long row_step, summary_step; /* the steps of the last row and summary written (-1: none) */
    long rows_skipped;    /* the trainer's skipped steps when the last row was printed */
    long skipped0;        /* ... when the run started (a resumed one's earlier runs' included) */
} Report;

/* The header lines (and --print_layers' table). */
void report_header(const Run *r, const Net *net);
/* Opens --log_dir's event log on rank 0 and prints the table's head. */
void report_open(Report *rep, Run *r, Trainer *tr, long step0);
/* After step `step` (0-based) with this rank's loss, the learning rate and the step's seconds:
 * the row at step 1, every --display_every steps and the last step (values averaged over ranks:
 * every rank takes part; without --display_every rows come every 10 steps or, where steps are slow,
 * about every 10 s; a run that lasts over a minute gets an "ETA:" line under a row once a minute);
 * a TensorBoard summary on rank 0 at the first and last step and every --summary_interval seconds
 * (rank 0's values, as nvcnn_hvd.py). */
void report_step(Report *rep, long step, double loss, double lr, double seconds);
/* The same in pieces, for a trainer that reads its losses late (Trainer.lazy): report_due()
 * says whether step `step` prints a row or a summary (decided once: report_step keeps to it);
 * report_loss() takes each step's loss in order; report_step() with loss NAN then reports the
 * step on the losses given so far. */
int report_due(Report *rep, long step);
/* Step `step` reports as the last step does (a row, a summary), whatever --display_every and
 * --summary_interval say: the step an evaluation follows (which may end the run: --target_top1),
 * a step a stop signal ends the run at. Given after report_step() for that step, that call's
 * report_step(loss NAN, seconds NAN) writes what it left out; nothing is written twice. */
void report_force(Report *rep, long step);
void report_loss(Report *rep, double loss);
/* Each step's seconds in order, where they are known late (the GPU's steps, timed on the device
 * by events: GpuStepResult.seconds): report_step() is then given NAN seconds and its row shows
 * the latest step timed. */
void report_time(Report *rep, double seconds);
/* Every step result the trainer fetched and the report has not had: report_loss, report_time. */
void report_results(Report *rep, Trainer *tr);
/* The end-of-run lines. `steps`: the steps this run made. */
void report_end(Report *rep, long steps);
/* A validation accuracy after `step` steps (while training or at its end), into the logs. */
void report_validation(Report *rep, long step, double top1, double top5);
/* Work between steps that took `seconds` (an evaluation; the real clock's seconds): left out of
 * the rows' pace. */
void report_pause(Report *rep, double seconds);
void report_close(Report *rep);

/* Rows without --display_every: nvcnn.py's every --display_every (10) steps, or more often where
 * steps are slow, so that one appears about every REPORT_ROW_SECONDS: the largest of 1, 2, 5, 10,
 * 20, 50, ... steps that is no more than display_every and takes no more than REPORT_ROW_SECONDS
 * at per_step seconds a step. */
#define REPORT_ROW_SECONDS 10.0
int report_row_interval(double per_step, int display_every);
/* A duration as the ETA line says it: "45 s", "3 min 07 s", "2 h 05 min". */
void report_duration_text(char *buf, size_t n, double secs);
/* The ETA line after `done` of nstep steps at per_step seconds a step (no newline):
 * "  ETA: 5 min 26 s (step 35 of 300, 1.23 s/step)". */
void report_eta_text(char *buf, size_t n, long done, long nstep, double per_step);
/* The clock of the rows' pace and the ETA lines (training's and evaluation's), in seconds: the
 * monotonic clock, or, where the environment sets NVCNN_TEST_CLOCK_SCALE=K, that clock running K
 * times as fast. K is the tests' way to give a run of milliseconds the pace of a long one (rows
 * every step, ETA lines); the speed figures, the Planning: line and the summaries' interval keep
 * the real clock. An invalid K is an error (exit 2). */
double report_clock(void);
/* Where the environment sets NVCNN_TEST_STEP_PAUSE_MS=M, sleeps M milliseconds (once per training
 * step, after its row; the Images/sec of such a run count the pauses): the tests' way to give a run the wall-clock pace of
 * long steps without their CPU time (the Slurm scenarios that stop a job mid-way, beside other
 * tests). Unset: nothing. report_test_pause_ms() gives M (0 when unset); an invalid M is an error
 * (exit 2), which main() meets before any output. */
long report_test_pause_ms(void);
void report_test_pause(void);

#endif
