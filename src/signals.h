/* signals.h: SIGTERM and SIGINT (Slurm preemption, Ctrl-C) ask the run to finish its step, write
 * a checkpoint and exit 0; SIGUSR1 asks for a checkpoint and the run carries on. The handlers only
 * set flags; the training loop reads them between steps (and agrees on them across ranks). */
#ifndef NVCNN_SIGNALS_H
#define NVCNN_SIGNALS_H

enum { SIG_STOP = 1, SIG_CHECKPOINT = 2 };

void signals_install(void);
/* SIG_STOP | SIG_CHECKPOINT bits received since the last call (clears SIG_CHECKPOINT). */
int signals_take(void);
/* The number of the signal that asked to stop (SIGTERM or SIGINT), 0 if none. */
int signals_stop_signal(void);

#endif
