/* loader.h: the threaded input pipeline over TFRecord shards.
 *
 *  shards (data_dir/<subset>-*) --reader threads--> records (CRC checked) --> shuffle buffer
 *     --> decode/augment workers (--input_threads) --> full queue of batches --> loader_next()
 *  loader_release() returns a batch to the free queue.
 *
 * Each rank reads a disjoint share of the records. Seeds per rank and per worker make a run
 * reproducible for a given --seed.
 */
#ifndef NVCNN_IO_LOADER_H
#define NVCNN_IO_LOADER_H

#include <stddef.h>
#include <stdint.h>

typedef struct LoaderConfig {
    const char *data_dir;
    const char *subset;     /* "train" or "validation": files <data_dir>/<subset>-* */
    int batch;              /* per rank */
    int height, width;      /* output image size */
    int training;           /* 1: distorted crop + flip (+ color); 0: central crop 87.5% */
    int distort_color;
    float crop_area_min;    /* training crops: smallest area fraction; 0: nvcnn's 0.1 */
    int repeat;             /* 1: endless epochs (training); 0: one pass, then NULL */
    uint64_t start_sample;  /* resume: samples of this rank's stream already consumed */
    int rank, nranks;
    int threads;            /* decode workers; <= 0: cores / ranks on the node */
    int shuffle_buffer;     /* records; 0 or 1: no shuffling */
    uint64_t seed;
    int skip_corrupt;       /* 1: skip and count corrupt records; 0: report and exit 4 */
    int num_classes;        /* labels must be in [0, num_classes) after the -1 offset */
    int defer_errors;       /* one pass (repeat 0): an error that the loader's threads find (corrupt
                               data: exit 4; a read error: 1) ends the pass instead of the process:
                               loader_next() returns NULL and loader_error() says why */
    /* Host allocator for batch buffers (pinned memory on the GPU backend); NULL: malloc/free. */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
} LoaderConfig;

typedef struct LoaderBatch {
    uint8_t *images;        /* [batch][height][width][3], RGB, 0..255 */
    int32_t *labels;        /* [batch], 0-based */
    int count;              /* valid samples: batch, or fewer for the last batch of a one-pass run */
    int epoch;              /* 0-based epoch of this rank's data that the batch's first sample is in */
} LoaderBatch;

typedef struct Loader Loader;

/* Opens the shards and starts the threads. Bad input ends the process with a one-line error: exit
 * code 2 for no directory, no <subset>-* files, files that hold no records, or an entry named as a
 * shard that is not a regular file (a directory, a symbolic link to nothing); 4 for files that are
 * not TFRecords, or (skip_corrupt) shards whose every record was corrupt and skipped. */
Loader *loader_open(const LoaderConfig *cfg);
/* Lists and scans the shards as loader_open() does, ending the process on the same errors, and
 * returns the records of the subset over all ranks; reads no payload and starts no thread. A check
 * of shards that a run will read later (validation-* before training). */
size_t loader_scan(const LoaderConfig *cfg);
/* Records in the subset over all ranks. */
size_t loader_num_records(const Loader *l);
/* Records this rank reads per epoch. */
size_t loader_rank_records(const Loader *l);
/* The next batch (blocks). NULL after the last batch of a one-pass run. */
LoaderBatch *loader_next(Loader *l);
void loader_release(Loader *l, LoaderBatch *b);
/* defer_errors: the exit code of the error that ended the pass (0: none) and its message. */
int loader_error(Loader *l, const char **msg);
/* Corrupt records skipped so far (with skip_corrupt). */
size_t loader_skipped(const Loader *l);
void loader_close(Loader *l);

/* Lists <dir>/<subset>-* sorted; returns the count (0 if none), *paths malloc'd. Dies if dir is
 * missing or not a directory, or if an entry <subset>-* is a symbolic link to nothing, a FIFO, a
 * socket or a device, or a directory named as a shard (exit 2), or if the files are not one set of
 * shards (exit 4: two sets, a missing shard, a stray file among the shards; see shards.h). */
int loader_list_shards(const char *dir, const char *subset, char ***paths);
/* 1 if <dir>/<subset>-* files exist; dies as loader_list_shards() if they are not one set. */
int loader_has_subset(const char *dir, const char *subset);

#endif
