/* profile.h: --profile=FILE, a per-layer profile of some training steps (--profile_steps=N:K,
 * by default 3 steps after the burn-in) as a Chrome trace: the JSON trace-event format that
 * Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * For each profiled step, on the host's track, a "step N" event holds the input's wait, a
 * "forward" event with one event per layer, the weight-decay loss, a "backward" event with the
 * zeroing of the gradients and one event per layer, the wait for the gradients' allreduce and the
 * optimizer; each gradient bucket's allreduce (launch to the wait that returned it) is on a track
 * of its own. Every event is a begin/end pair ("B"/"E") with the layer's name, its type and its
 * output shape. On the CPU backend the times are the wall clock around each layer (every layer
 * runs synchronously there); on the GPU backend each layer's forward and backward are timed by
 * CUDA events recorded on the compute stream, on a track of their own, placed on the host's clock
 * at the step's first event; on the emulated device those events exist but their times are the
 * emulator's, which the file's metadata ("otherData") says. With several ranks each writes its
 * own file, FILE.rankN. The file is written after the last profiled step; at the end of the run
 * rank 0 prints the 10 layers that took the most time, their share of the step, the time by layer
 * type and the step's time outside every layer.
 *
 * Outside the profiled steps nothing is timed (the net's per-layer hook is not set), and the
 * profiled steps compute what they would compute without --profile: the same bits.
 */
#ifndef NVCNN_PROFILE_H
#define NVCNN_PROFILE_H

#include "net.h"
#include "run.h"
#include "train.h"

typedef struct Profiler Profiler;

/* The host's phases other than the layers. */
typedef enum {
    PROF_INPUT,          /* waiting for this step's batch */
    PROF_L2,             /* the weight-decay term of the loss */
    PROF_ZERO,           /* backward's zeroing of the gradients */
    PROF_LAUNCH,         /* during backward, launching the finished gradient buckets' allreduces */
    PROF_ALLREDUCE_WAIT, /* after backward, waiting for the gradients' allreduce */
    PROF_OPTIMIZER,      /* unscaling, the inf/nan check and the update */
    PROF_NPHASES
} ProfPhase;

/* The profile of this run (NULL without --profile): the steps of --profile_steps, which must lie
 * within the run's steps step0+1 .. r->nstep (exit 2 otherwise; the default moves to the run's
 * last steps when the run ends before the burn-in is over). Sets tr->prof. */
Profiler *profile_open(Run *r, Net *net, Trainer *tr, long step0);
/* Around step `step` (0-based) of the training loop: begin before the step's batch is fetched;
 * end after its update, with the step's wall-clock start and end. Both do nothing with p NULL or
 * for a step that is not profiled. */
void profile_step_begin(Profiler *p, long step);
void profile_step_end(Profiler *p, long step, double t0, double t1);
/* 1 when the host must wait for step `step` before its end is timed: the GPU backend queues its
 * steps without waiting, so the profiled steps, and the one before them, are waited for (a host
 * clock around a queued step sees only the queueing). */
int profile_waits(const Profiler *p, long step);
/* A phase of the current step, from t0 to t1 (wall clock): recorded only in a profiled step. */
void profile_span(Profiler *p, ProfPhase phase, double t0, double t1);
/* The end of the run: the table (rank 0), and the file if the run ended inside the profiled
 * steps; frees p. Returns 0, or 1 (an I/O error, after an error line) when the file could not be
 * written. */
int profile_close(Profiler *p);
/* Whether this rank's --profile file can be written (exit 2 naming the path and why, otherwise):
 * before anything is trained. before_log_dir: --log_dir is not made yet (a path inside it is
 * checked in the second call). Refuses a path that is one of --log_dir's own files. */
void profile_check_path(const Run *r, int before_log_dir);

#endif
