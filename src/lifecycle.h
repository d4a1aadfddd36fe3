/* lifecycle.h: the run's life around its steps: resuming from --log_dir's newest checkpoint,
 * periodic checkpoints (--save_interval), signals (SIGTERM/SIGINT: checkpoint and exit 0;
 * SIGUSR1: checkpoint and carry on), on which every rank agrees, and the final checkpoint. */
#ifndef NVCNN_LIFECYCLE_H
#define NVCNN_LIFECYCLE_H

#include "net.h"
#include "run.h"
#include "train.h"

typedef struct Lifecycle {
    Run *r;
    Net *net;
    Trainer *tr;
    double last_save;  /* wall clock of the last checkpoint (or of the start) */
    int stopped;       /* a stop signal ended the run */
    long unsaved;      /* the step whose final checkpoint could not be written (0: none) */
    long saved;        /* the step of the newest checkpoint there is: this run's last written, or the one it resumed (0: none) */
    int save_deferred; /* a checkpoint (periodic or SIGUSR1) fell due at a step an evaluation follows:
                          it is written after the evaluation, so that it records it as done */
    char save_err[512]; /* why the last checkpoint could not be written */
    /* called before a checkpoint is written while training (NULL: none): the steps' results the
     * GPU backend has not handed over yet go into the run's logged loss average, which it keeps */
    void (*flush)(void *ctx);
    void *flush_ctx;
    /* called when a stop signal ends the run after step `step` (0-based), on every rank, before
     * its checkpoint and message (NULL: none): the report's row and summary of that step */
    void (*before_stop)(void *ctx, long step);
} Lifecycle;

/* Locks --log_dir for this run (rank 0, before anything is written there): a second run on the
 * same folder, which would overwrite this one's checkpoints, metrics and events, exits 2 naming
 * the holder. The lock is the file .nvcnn.lock, held until the process ends. */
void lifecycle_lock_log_dir(const char *dir);
/* Why a --log_dir to read checkpoints from holds none: "does not exist", "is not a directory", "is a
 * dangling symbolic link", "cannot be reached: <reason>" (a mistyped path, not lost checkpoints);
 * NULL for a folder. */
const char *lifecycle_log_dir_missing(const char *dir);
/* 1 where dir holds another program's checkpoints (TensorFlow's, as nvcnn.py writes them: a file
 * "checkpoint", NAME.index), named in `what` ("TensorFlow checkpoints (checkpoint)"); else 0. */
int lifecycle_foreign_checkpoint(const char *dir, char *what, size_t n);
/* Checks the file path that output flag `flag` (without its dashes) will write: exit 2 naming
 * it when it cannot be written there (check_output_path) or is one of --log_dir's own files (`what`
 * names the output in the message). With before_log_dir, a path inside a --log_dir that is not
 * made yet is left for the call after it is made: returns 1 then, else 0. */
int lifecycle_check_output(const Config *c, const char *flag, const char *path, int before_log_dir, const char *what);
/* Whether path names one of the files a run writes in --log_dir dir (checkpoints, metrics.csv,
 * TensorBoard events, the lock): another output flag must not overwrite them. */
int log_dir_owns(const char *dir, const char *path);

/* Restores the newest checkpoint of --log_dir (rank 0 reads it, every rank receives it) and
 * returns the step to resume from (0: none). A checkpoint of another model or shape ends the run
 * with exit 2 and the reason. */
long lifecycle_restore(Run *r, Net *net, Trainer *tr);
/* The step of --log_dir's newest checkpoint when it is of this net (model, classes, input shape),
 * read from its header by rank 0 and known to every rank (its file name into path on rank 0); -1
 * when there is none, -2 when it is of another net or unreadable (lifecycle_restore says why):
 * before anything is allocated, whether the run has anything left to do. *target_top1 (NULL: not
 * asked): the validation top-1 with which --target_top1 ended that checkpoint's run (0: it did not). */
long lifecycle_saved_step(Run *r, const Net *net, char *path, size_t plen, double *target_top1);
/* The validation pass at the end of a run, after its final checkpoint: pending = 1 where a stop
 * signal ended it (the checkpoint is written again saying so, with the line a batch script requeues
 * on, and the resumed run does the pass); 0 where a resumed run has done it (the mark cleared). On
 * every rank; nothing without --log_dir. */
void lifecycle_final_eval(Lifecycle *life, int pending);
/* lifecycle_restore(), then the signal handlers; returns the step to start from. */
long lifecycle_start(Lifecycle *life, Run *r, Net *net, Trainer *tr);
/* After step `step` (0-based): acts on signals and the checkpoint interval, agreed by every rank.
 * Returns 1 when the run must stop (a stop signal; r->nstep becomes step + 1). */
int lifecycle_poll(Lifecycle *life, long step);
/* The end of a run that made steps: the final checkpoint (unless a stop signal wrote it). */
void lifecycle_finish(Lifecycle *life, long step0);
/* The run's exit code as far as its checkpoints go: 0, or 1 (an I/O error) after one error line
 * when the final checkpoint (at the end, or at a stop signal) could not be written, so that a
 * script or scheduler does not take a lost model for success. */
int lifecycle_exit_code(const Lifecycle *life);

#endif
