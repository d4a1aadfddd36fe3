/* evaluate.h: one pass over validation-* in inference mode, with nvcnn.py's Validation Top-1/Top-5
 * lines: the accuracy over every image of every rank (nvcnn.py leaves out the images of a short
 * last batch; here they count, each as much as any other image), +/- the standard error and the
 * jitter of the per-step accuracies, as nvcnn.py. */
#ifndef NVCNN_EVALUATE_H
#define NVCNN_EVALUATE_H

#include "run.h"
#include "train.h"

/* top1/top5 receive the accuracies in % (NAN without images). verbose: prints the table and the
 * two lines (the pass at the end of a run, --eval); otherwise nothing (evaluations while
 * training print their own line). GPU backend: the batches are staged in slot `slot`, one that
 * holds no training batch. Returns 0. in_training (an evaluation between two training steps):
 * an error of the validation data on any rank (a corrupt record, a label out of range, every
 * image skipped, a read error) is printed by the rank that found it and every rank returns its
 * exit code (4, or 1 for a read error) together, so that the run can write its checkpoint before
 * it ends; otherwise such an error ends the process. A stop signal (SIGINT, SIGTERM) on any rank
 * ends the pass on every rank after the step under way, with a line saying so, and -1. */
int evaluate(Run *r, Trainer *tr, int slot, int verbose, int in_training, double *top1, double *top5);
/* --eval_every_epochs: 1 when the step ending at step + 1 (0-based `step`) crosses a multiple of
 * every_epochs epochs of the run's images, the last step of the run excepted (the pass at the
 * end evaluates it). */
int evaluate_due(const Run *r, long step);

#endif
