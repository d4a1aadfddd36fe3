/* input.h: the batches of a run, staged for the backend: synthetic data (one batch made once, as
 * nvcnn.py does; on the GPU uploaded once), or the loader's batches: converted into the input
 * node on the CPU, or on the GPU double-buffered: batch k+1 is fetched and its copy queued while
 * step k runs. Also counts corrupt records per epoch (--skip_corrupt). */
#ifndef NVCNN_INPUT_H
#define NVCNN_INPUT_H

#include <stdint.h>

#include "io/loader.h"
#include "run.h"
#include "train.h"

typedef struct Input {
    Run *r;
    Trainer *tr;
    Loader *ld;              /* NULL: synthetic data */
    LoaderBatch *staged[2];  /* GPU: batches whose copies are queued, by slot */
    int cur;                 /* GPU: this step's slot */
    int32_t *labels;         /* [batch] this step's labels */
    long step0;              /* the step the run starts at */
    long last_epoch;         /* corrupt-record reports: the last epoch reported */
} Input;

/* The loader of `subset` (train or validation) for this rank, from sample `start` of its stream;
 * training: augmented and endless. */
Loader *input_open_loader(const Run *r, const char *subset, int training, uint64_t start);
/* The one-pass loader of validation-* for an evaluation; defer_errors: its threads' data errors end
 * the pass, not the process (loader_error(): an evaluation while training stops the run cleanly). */
Loader *input_open_validation(const Run *r, int defer_errors);
/* The records of `subset` over all ranks, its shards listed and scanned as the loader would
 * (with its errors) without reading them: shards that a run reads later checked before it starts. */
size_t input_scan(const Run *r, const char *subset);
/* Starts the input of a run that begins at step0: takes `ld` (the training loader opened at 0,
 * or NULL for synthetic data), reopened at step0's position when step0 > 0. */
void input_start(Input *in, Run *r, Trainer *tr, Loader *ld, long step0);
/* This step's batch, ready for trainer_step_begin() (CPU: in the input node; GPU: on the device);
 * returns its labels. */
const int32_t *input_next(Input *in, long step);
/* While the device runs this step: gives back its batch and, if `more`, fetches the next and
 * queues its copy (GPU with real data; nothing otherwise). */
void input_prefetch(Input *in, int more);
/* GPU: a staging slot that holds no training batch now (for an evaluation between steps). */
int input_free_slot(const Input *in);
/* Ends the input at the end of the run (`last`: the number of steps done). */
void input_finish(Input *in, long last);

#endif
