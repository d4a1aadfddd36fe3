/* events.h: training logs in a log directory, for TensorBoard and for people without it.
 *  - events.out.tfevents.<time>.<host>: TFRecord-framed tensorboard.Event protos (protobuf-c); the
 *    first record carries file_version "brain.Event:2", then one Event per summary with scalars
 *    under nvcnn.py's tags ("total loss raw", "total loss avg", "learning rate", "train accuracy
 *    top-1 %", "train accuracy top-5 %") and this program's ("images/sec", "validation accuracy
 *    top-1 %", "validation accuracy top-5 %"). Every scalar is written, zeros included;
 *  - metrics.csv: step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5
 *    with empty cells where a value does not apply (epochs_done with synthetic data).
 * Every write is flushed, so a run killed at any point leaves whole records behind. */
#ifndef NVCNN_EVENTS_H
#define NVCNN_EVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct EventLog EventLog;

/* A run that starts after step0 (0: from the beginning; else the checkpoint it resumed): its event
 * file begins with file_version and a SessionLog START at step0 + 1, after which TensorBoard drops
 * the events of earlier runs at that step or later, and metrics.csv's rows past step0 (a run that
 * ended without a checkpoint there) are removed likewise. NULL with a message in err if the
 * directory cannot be written. */
EventLog *events_open(const char *dir, long step0, char *err, size_t errlen);
/* One TensorBoard event at `step` with the scalars tags[i] = vals[i] (NAN: left out). */
void events_scalars(EventLog *e, int64_t step, const char *const *tags, const double *vals, int n);
/* One row of metrics.csv; pass NAN for values that do not apply (epoch included). */
void events_csv(EventLog *e, int64_t step, double epoch, double loss, double lr, double img_per_sec, double top1,
                double top5, double eval_top1, double eval_top5);
/* The TFRecord-framed bytes of a scalar Event (what events_scalars() writes), in *out (free()). */
size_t events_encode(double wall_time, int64_t step, const char *const *tags, const double *vals, int n, uint8_t **out);
/* The TFRecord-framed bytes of the SessionLog START event at `step` that events_open() writes. */
size_t events_encode_start(double wall_time, int64_t step, uint8_t **out);
void events_close(EventLog *e);
/* The event file's path. */
const char *events_path(const EventLog *e);

#endif
