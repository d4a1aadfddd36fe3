/* evaluate.h: one pass over validation-* in inference mode, with nvcnn.py's Validation Top-1/Top-5
 * lines: the accuracy over every image of every rank (nvcnn.py leaves out the images of a short
 * last batch; here they count, each as much as any other image), +/- the standard error and the
 * jitter of the per-step accuracies, as nvcnn.py. */
#ifndef NVCNN_EVALUATE_H
#define NVCNN_EVALUATE_H

#include "run.h"
#include "train.h"

/* Prints the table and the two lines; top1/top5 receive the means (NAN without images). */
void evaluate(Run *r, Trainer *tr, double *top1, double *top5);

#endif
