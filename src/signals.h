/* signals.h: SIGTERM, SIGINT and SIGHUP (Slurm preemption, Ctrl-C, a closed terminal; SIGHUP not
 * where nohup started the run) ask the run to finish its step, write a checkpoint and exit 0; SIGUSR1 asks for a checkpoint and the run carries on. The handlers only
 * set flags; the training loop reads them between steps (and agrees on them across ranks). */
#ifndef NVCNN_SIGNALS_H
#define NVCNN_SIGNALS_H

enum { SIG_STOP = 1, SIG_CHECKPOINT = 2 };

/* Installs the handlers (once; nvcnn does it at its start, so that a signal during the start-up
 * waits for the first step, its checkpoint and its line, rather than killing the run; SIGINT before
 * signals_training() ends the process at once, 130: Ctrl-C while nothing is trained). */
void signals_install(void);
/* The first step is under way: SIGINT, too, stops the run after its step from now on. */
void signals_training(void);
/* SIG_STOP | SIG_CHECKPOINT bits received since the last call (clears SIG_CHECKPOINT). */
int signals_take(void);
/* The number of the signal that asked to stop (SIGTERM or SIGINT), 0 if none. */
int signals_stop_signal(void);
enum { SIGNALS_NCOUNTS = 3 };
/* This rank's stop signal as counts for a sum across ranks: v[0] = 1 where it is SIGTERM, v[1]
 * where SIGINT, v[2] where SIGHUP (else 0). */
void signals_stop_counts(double v[SIGNALS_NCOUNTS]);
/* The name of the stop signal from those counts summed over the ranks: "SIGTERM" where any rank got
 * it, else "SIGINT", else "SIGHUP" where any did, else "a stop signal". Every rank names it alike,
 * whichever rank the signal reached first (a batch script looks for "Received SIG...: checkpoint
 * written"). */
const char *signals_stop_name(const double summed[SIGNALS_NCOUNTS]);

#endif
