/* watchdog.h: a rank that waits too long in one phase of a step ends the run.
 *
 * A collective waits for every rank, so a rank whose peer died (its node crashed, its link was
 * cut) waits forever: with TCP nothing tells it that the peer is gone. The places where a rank
 * waits on others or on its input mark their phase (watchdog_enter ... watchdog_leave); a thread
 * of the watchdog checks the time spent in the current phase, and when it passes --step_timeout
 * seconds prints one line on stderr naming the rank, its host, the phase and the step:
 *
 *   nvcnn: error: rank 0 on node1: no progress for 30.2 s in the allreduce of gradient bucket 2 of 5
 *   at step 41 (--step_timeout=30): a peer rank is lost or stalled; exiting with code 5
 *
 * and ends the process with EXIT_STALLED (5) at once, wherever the main thread is blocked. A
 * checkpoint being written is never a watched phase, so the last checkpoint is complete (and the
 * writes are atomic in any case). Before watchdog_start, and with a timeout of 0, marks cost a
 * load and a branch. */
#ifndef NVCNN_WATCHDOG_H
#define NVCNN_WATCHDOG_H

typedef enum {
    WD_IDLE = 0,
    WD_INPUT,       /* waiting for the next batch from the input pipeline */
    WD_BUCKET,      /* the allreduce of gradient bucket a (1-based) of b */
    WD_NCCL,        /* the GPU backend: the step's NCCL allreduce and the device's work */
    WD_ALLREDUCE,   /* a blocking allreduce of a values (statistics, signals, counts) */
    WD_BCAST,       /* a broadcast of a bytes from rank 0 (start, restore) */
    WD_BARRIER,
    WD_ALLGATHER,   /* a bytes per rank */
    WD_FINALIZE     /* MPI_Finalize */
} WatchdogPhase;

/* Starts the watch for rank `rank` with `timeout` seconds (0: no watch). */
void watchdog_start(double timeout, int rank);
/* The step under way (0-based), for the message. */
void watchdog_step(long step);
/* The calling thread waits in `phase` from now on (a, b: its numbers, see WatchdogPhase). */
void watchdog_enter(WatchdogPhase phase, long a, long b);
/* The phase is over. */
void watchdog_leave(void);

#endif
