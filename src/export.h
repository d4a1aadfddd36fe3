/* export.h: --export_onnx=FILE for a run (the model format: onnx.h). Alone with --log_dir (neither
 * --num_batches nor --num_epochs given) it exports the newest checkpoint there, at the size it was
 * trained at, and nothing is trained; with training flags the run trains and exports its model at
 * the end. Rank 0 writes the file. A checkpoint of another model, classes or size, a path that
 * cannot be written, or a layer that ONNX cannot express: one line naming it and exit 2, with
 * nothing written. */
#ifndef NVCNN_EXPORT_H
#define NVCNN_EXPORT_H

#include "net.h"
#include "run.h"
#include "train.h"

/* 1 when this run only exports (--export_onnx with --log_dir and no training flags). */
int export_only_run(const Run *r);
/* Before anything is written: exit 2 when --export_onnx's path cannot be written (rank 0). Called
 * before --log_dir is created (before_log_dir 1: a file directly in --log_dir waits) and after. */
void export_check_path(const Run *r, int before_log_dir);
/* The run that only exports: the newest checkpoint of --log_dir to --export_onnx. Returns 0. */
int export_checkpoint(Run *r);
/* The end of a training run: its model (after `step` steps) to --export_onnx (rank 0). */
void export_trained(Run *r, Net *net, Trainer *tr, long step);

#endif
