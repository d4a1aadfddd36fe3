/* events.h: training logs in a log directory, for TensorBoard and for people without it.
 *  - events.out.tfevents.<time>.<host>: TFRecord-framed tensorboard.Event protos (protobuf-c); the
 *    first record carries file_version "brain.Event:2", then one Event per logged step with scalar
 *    summaries (loss, learning_rate, images_per_sec, train/top1, train/top5, eval/top1, eval/top5);
 *  - metrics.csv: step,epoch,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5 with
 *    empty cells where a value does not apply.
 * Every write is flushed, so a run killed at any point leaves whole records behind. */
#ifndef NVCNN_EVENTS_H
#define NVCNN_EVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct EventLog EventLog;

/* NULL with a message in err if the directory cannot be written. */
EventLog *events_open(const char *dir, char *err, size_t errlen);
/* One row/event; pass NAN for values that do not apply. */
void events_log(EventLog *e, int64_t step, double epoch, double loss, double lr, double img_per_sec, double top1,
                double top5, double eval_top1, double eval_top5);
void events_close(EventLog *e);
/* The event file's path. */
const char *events_path(const EventLog *e);

#endif
