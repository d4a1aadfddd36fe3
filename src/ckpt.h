/* ckpt.h: checkpoints in a log directory.
 *
 * File "ckpt-<step>.nvcnn", little-endian, format version 1 (docs/checkpoints.md):
 *   "NVCNNCKP" | u32 version | u32 header bytes | header | params | state | velocity | u32 CRC32C
 * The header holds the model name, number of classes, input shape, precision, step, epoch, seed,
 * world size, loss-scale state, data position, the dropout RNG, and the name and element count of
 * every parameter and state tensor, so a checkpoint of another model or shape is refused with an
 * error naming the difference. The CRC32C covers every byte before it.
 * Writes go to a temporary file in the same directory, are fsynced, renamed into place, and the
 * directory is fsynced: a kill at any moment leaves the previous checkpoint readable. The three
 * newest checkpoints are kept.
 */
#ifndef NVCNN_CKPT_H
#define NVCNN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_opt.h"

#include "net.h"

#define CKPT_VERSION 1u
#define CKPT_KEEP 3

typedef struct CkptMeta {
    char model[32];
    int32_t num_classes;
    int32_t in_c, in_h, in_w;
    int32_t precision;
    int64_t step;          /* steps completed */
    double epoch;          /* epochs completed (fractional) */
    uint64_t seed;
    int32_t world_size;    /* at save time; a checkpoint loads with any number of ranks */
    double loss_scale;
    int64_t good_steps, skipped_steps;
    uint64_t data_position; /* samples consumed per rank */
    uint64_t rng[4];        /* the net's dropout RNG */
    /* after the state tensors' list (a header written before 2026-11-28 ends without them: read
     * as 0, and a reader of that time passes over them) */
    double loss_avg_sum, loss_avg_weight; /* the logged loss average's state */
    double target_top1;     /* the validation top-1 (%) with which --target_top1 ended the run; 0: not */
    double eval_pending;    /* 1: a stop signal ended the evaluation due after this step (--eval_every_epochs),
                               which the resumed run does first; 0 (also in older headers): none */
    double train_images;    /* the training records of the run's --data_dir; 0: synthetic data (or an older header) */
    double opt[CKPT_OPT_FIELDS]; /* (since 2026-11-28, optional likewise) the optimizer settings, ckpt_opt.h */
} CkptMeta;

/* Why a checkpoint could not be read (ckpt_read_meta and ckpt_load return one, 0 on success):
 * the file system (an I/O error), the file itself (not a checkpoint, truncated, corrupt), or a
 * checkpoint that does not fit (another model, shape, class count or format version). */
enum { CKPT_EIO = -1, CKPT_ECORRUPT = -2, CKPT_EMISMATCH = -3 };
/* The exit code for such a failure: 1 (I/O), 4 (corrupt data), 2 (usage: the wrong checkpoint). */
int ckpt_exit_code(int rc);

/* Writes dir/ckpt-<meta->step>.nvcnn atomically and removes all but the CKPT_KEEP newest.
 * Returns 0, or -1 with a message in err (nothing is left half-written). */
int ckpt_save(const char *dir, const Net *net, const float *velocity, const CkptMeta *meta, char *path_out,
              size_t path_len, char *err, size_t errlen);
/* The step in a checkpoint's file name (<dir>/ckpt-<step>.nvcnn, as ckpt_save names it): 1 and
 * *step, or 0 for a name ckpt_save never writes. */
int ckpt_step_of_name(const char *path, long long *step);
/* The newest checkpoint in dir into path (1), or 0 if there is none. */
int ckpt_latest(const char *dir, char *path, size_t path_len);
/* The fixed fields of a checkpoint's header (model, shapes, step, ...) without reading or verifying
 * the rest: what a run needs to know before it builds anything. Returns 0, or a CKPT_E* code with a
 * reason. */
int ckpt_read_meta(const char *path, CkptMeta *meta, char *err, size_t errlen);
/* Whether the file is a whole checkpoint (magic, format version, checksum) without checking what
 * it holds against a net: 0, or a CKPT_E* code with the reason. */
int ckpt_verify(const char *path, char *err, size_t errlen);
/* Verifies the file and checks that it matches `net` (model, classes, input channels, every
 * tensor's name and size: the input's height and width may differ, as a fully convolutional
 * model's weights fit any size); then fills params, state, velocity (if not NULL) and meta.
 * Returns 0, or a CKPT_E* code with a one-line reason in err; the net is untouched on failure. `model` is the
 * expected model name. */
int ckpt_load(const char *path, const char *model, Net *net, float *velocity, CkptMeta *meta, char *err,
              size_t errlen);

#endif
