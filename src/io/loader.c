/* loader.c: see loader.h.
 *
 * Opening. The shards <data_dir>/<subset>-* must form one set (shards.h: not two conversions side
 * by side, none missing), or carry names outside the shard pattern altogether (train-0.tfrecord,
 * ...: nothing to check). They are sorted by name and their framing is scanned
 * (headers only, several files at once) into an index of (file, offset, length). The records in
 * that order, file after file, form the global order; record g goes to rank g % nranks. Every
 * record is thus read by exactly one rank, the ranks' counts differ by at most one, and a rank
 * never parses another rank's records (it preads its own at their indexed offsets).
 *
 * One epoch of a rank. Without shuffling (shuffle_buffer 0 or 1) the rank's records come in the
 * global order. With shuffling, the groups of records from each file are first put in a random
 * order, then the sequence goes through a shuffle buffer of shuffle_buffer slots (fill the
 * buffer; then repeatedly emit a random slot and refill it with the next record; drain at the end
 * of the epoch). The buffer holds index entries, not payloads: the result is the same order as a
 * buffer of records, without holding shuffle_buffer records in memory. Epochs do not mix: the
 * buffer is drained at the end of each epoch, so epoch e is exactly the samples
 * [e * rank_records, (e + 1) * rank_records) of the rank's stream (less skipped corrupt records).
 *
 * Threads. One reader thread walks the epochs, preads each record, checks both CRCs and hands
 * (record, batch, slot) tasks to the decode workers through a bounded queue; sample k of the
 * rank's stream goes to slot k % batch of batch k / batch. Workers parse the Example, check the
 * label and call augment_image() into the batch's slot. Batches are handed out by loader_next()
 * strictly in order; a batch buffer comes from the free queue and goes back with loader_release().
 *
 * Determinism. Sample k of rank r draws its augmentation randomness from a generator seeded by
 * (seed, r, k) and uses colour order k % 2, independent of which worker decodes it; orders come
 * from generators seeded by (seed, r, epoch). So for a given seed the batches are identical run
 * to run, whatever the number of workers.
 *
 * Errors. Framing errors (CRC mismatches, truncation) and records whose framing is sound but whose
 * content is unusable (not an Example, no image/encoded, an image that does not decode) exit with
 * EXIT_DATA naming the file and the record's offset. With skip_corrupt each is named in a warning
 * and counted once (l->bad marks it: later epochs pass it over unread), and its slot stays empty
 * (label -1): loader_next() refills it in training (refill: a record drawn at random) and drops
 * it in a one-pass run. A label out of range always exits: it means the data set and
 * --num_classes disagree. A shard that cannot be opened or read exits 1 (I/O). */
#define _GNU_SOURCE
#include "io/loader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/augment.h"
#include "io/example.h"
#include "io/shards.h"
#include "io/tfrecord.h"
#include "util.h"

#define NUM_BATCH_BUFS 4
#define FD_CACHE 32

typedef struct RecRef {
    uint32_t file;
    uint64_t offset, len;
} RecRef;

typedef struct BatchBuf {
    LoaderBatch pub;    /* first member: a LoaderBatch * is a BatchBuf * */
    uint64_t first_seq; /* the stream's sample number of slot 0 (slot k: first_seq + k) */
    size_t *refs;       /* [batch]: the record in each slot (l->mine[refs[k]]) */
    int pending;        /* tasks issued and not finished */
    int closed;      /* the reader issued all of its samples */
    struct BatchBuf *next;
} BatchBuf;

typedef struct Task {
    BatchBuf *batch;
    int slot;
    size_t ref; /* the record: l->mine[ref] */
    uint64_t seq;
    uint8_t *rec; /* the whole framed record */
} Task;

struct Loader {
    LoaderConfig cfg;
    char **paths;
    int nfiles;
    RecRef *mine;
    size_t nmine, total;
    size_t *group_start; /* this rank's records grouped by file: [ngroups + 1] */
    size_t ngroups;
    size_t skipped_scan, skipped_read, skipped_decode;
    unsigned char *bad; /* [nmine]: 1 once the record was found corrupt (skip_corrupt): not read again */
    int report_scan;    /* warn of each record the scan skips (loader_open on rank 0) */
    int nworkers;
    size_t img_bytes;

    pthread_t reader;
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_task, cv_space, cv_ready;
    BatchBuf bufs[NUM_BATCH_BUFS];
    BatchBuf *freeq[NUM_BATCH_BUFS];
    int nfree;
    BatchBuf *fifo_head, *fifo_tail;
    Task *tasks;
    size_t task_cap, task_head, task_count;
    int stop, reader_done;
    int failed;         /* defer_errors: the exit code of the error that ended the pass */
    char fail_msg[1200];

    int fd[FD_CACHE];
    uint32_t fd_file[FD_CACHE];
    int fd_next;
};

/* Tells every thread to stop and wakes the waiting ones (l->mu held). */
static void stop_all(Loader *l) {
    l->stop = 1;
    pthread_cond_broadcast(&l->cv_free);
    pthread_cond_broadcast(&l->cv_space);
    pthread_cond_broadcast(&l->cv_task);
    pthread_cond_broadcast(&l->cv_ready);
}

/* The loader thread (reader or worker) that runs this, or NULL on any other thread. */
static _Thread_local const Loader *tl_loader;

/* An error of the data (code EXIT_DATA) or of reading it: the process ends with it, or with
 * defer_errors, when a loader thread finds it, the pass ends: the first error is kept for
 * loader_error(), every thread is told to stop and this one exits. */
__attribute__((format(printf, 3, 4), noreturn)) static void fail(Loader *l, int code, const char *fmt, ...) {
    char msg[sizeof l->fail_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!l->cfg.defer_errors || tl_loader != l) die_code(code, "%s", msg);
    pthread_mutex_lock(&l->mu);
    if (!l->failed) {
        l->failed = code;
        snprintf(l->fail_msg, sizeof l->fail_msg, "%s", msg);
    }
    stop_all(l);
    pthread_mutex_unlock(&l->mu);
    pthread_exit(NULL);
}

/* ---- listing ----------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted paths dir/<subset>-* must be one set of shards (shards.h): two sets side by side,
 * a missing shard or a stray file among the shards exit 4 naming the files. */
static void check_set(const char *dir, const char *subset, char **paths, int n) {
    size_t skip = strlen(dir) + 1;
    char **names = xmalloc((size_t)n * sizeof *names);
    for (int i = 0; i < n; i++) names[i] = paths[i] + skip;
    char err[2048];
    if (shard_set_check(names, n, subset, err, sizeof err) != 0) die_code(EXIT_DATA, "--data_dir=%s: %s", dir, err);
    free(names);
}

/* An entry dir/<subset>-* that is not a regular file: one named as a shard (a directory, a
 * symbolic link to nothing, a FIFO, ...) would otherwise be passed over, leaving its set a shard
 * short or the subset absent. Exit 2 naming it for what it is. A directory named outside the
 * shard pattern (train-images, say) is not taken for a shard and is passed over. */
static void refuse_non_file(const char *path, const char *name, const char *subset) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            if (!shard_name_parse(name, subset, NULL, NULL, NULL)) return;
            die_code(EXIT_USAGE, "%s is a directory, not a TFRecord file", path);
        }
        const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
        die_code(EXIT_USAGE, "%s is %s, not a TFRecord file", path, what);
    }
    const int err = errno;
    char link[4200];
    if (util_dangling_link(path, err, link, sizeof link)) die_code(EXIT_USAGE, "%s %s", path, link);
    die_code(EXIT_USAGE, "%s: %s", path, strerror(err));
}

static int list_matching(const char *dir, const char *subset, char ***paths, int die_on_missing) {
    DIR *d = opendir(dir);
    if (!d) {
        if (!die_on_missing) return 0;
        die_code(EXIT_USAGE, "data directory %s: %s", dir, strerror(errno));
    }
    size_t plen = strlen(subset);
    char **v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, subset, plen) != 0 || e->d_name[plen] != '-') continue;
        size_t need = strlen(dir) + strlen(e->d_name) + 2;
        char *p = xmalloc(need);
        snprintf(p, need, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            refuse_non_file(p, e->d_name, subset);
            free(p);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            v = xrealloc(v, (size_t)cap * sizeof *v);
        }
        v[n++] = p;
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    if (n) check_set(dir, subset, v, n);
    if (paths)
        *paths = v;
    else {
        for (int i = 0; i < n; i++) free(v[i]);
        free(v);
    }
    return n;
}

int loader_list_shards(const char *dir, const char *subset, char ***paths) {
    struct stat st;
    if (stat(dir, &st) != 0) die_code(EXIT_USAGE, "data directory %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) die_code(EXIT_USAGE, "data directory %s: not a directory", dir);
    *paths = NULL;
    return list_matching(dir, subset, paths, 1);
}

int loader_has_subset(const char *dir, const char *subset) { return list_matching(dir, subset, NULL, 0) > 0; }

/* ---- scanning ---------------------------------------------------------------------------- */

typedef struct ScanJob {
    char **paths;
    int nfiles, skip, report;
    int next;
    pthread_mutex_t mu;
    TfrIndexEntry **ix;
    long long *count;
    size_t *skipped;
    char (*err)[600];
} ScanJob;

static void scan_skipped(void *ctx, const char *msg) {
    (void)ctx;
    warn("%s; skipped (--skip_corrupt)", msg);
}

static void *scan_thread(void *arg) {
    ScanJob *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int f = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (f >= j->nfiles) return NULL;
        j->count[f] = tfr_scan_reporting(j->paths[f], j->skip, &j->ix[f], &j->skipped[f], j->err[f], sizeof j->err[f],
                                         j->report ? scan_skipped : NULL, NULL);
    }
}

/* skip_corrupt, and the scan skipped every record of the shards (skipped[f] in file f): exit 4
 * saying so, with the counts and the files, rather than calling the shards empty. */
static void all_skipped(const Loader *l, const size_t *skipped) {
    char files[1024] = "";
    size_t len = 0, skip = strlen(l->cfg.data_dir) + 1;
    int n = 0, shown = 0;
    for (int f = 0; f < l->nfiles; f++) n += skipped[f] > 0;
    for (int f = 0; f < l->nfiles && shown < 3; f++) {
        if (skipped[f] == 0) continue;
        const char *sep = shown == 0 ? "" : shown == n - 1 ? " and " : ", ";
        int k = snprintf(files + len, sizeof files - len, "%s%zu in %s", sep, skipped[f], l->paths[f] + skip);
        if (k > 0) len += (size_t)k < sizeof files - len ? (size_t)k : sizeof files - len - 1;
        shown++;
    }
    if (n > shown) snprintf(files + len, sizeof files - len, " and %d more file%s", n - shown, n - shown == 1 ? "" : "s");
    char all[64] = "";
    if (n > 1) snprintf(all, sizeof all, "%zu in all, ", l->skipped_scan);
    die_code(EXIT_DATA, "%s/%s-*: every record was corrupt and skipped (--skip_corrupt): %s%s", l->cfg.data_dir,
             l->cfg.subset, all, files);
}

/* A shard that is a compressed stream (what TensorFlow writes with TFRecordOptions'
 * compression_type "GZIP" or "ZLIB", or a gzip'd file) rather than TFRecords: its name for the
 * format, or NULL. Asked only of a file whose first record did not frame (so a TFRecord whose first
 * length happens to begin like a zlib header is never taken for one): gzip's magic 1f 8b, or a
 * zlib header (deflate, a window of at most 32 KiB, a check value that is a multiple of 31). */
static const char *compressed_format(const char *path) {
    uint8_t h[2];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    ssize_t k = pread(fd, h, sizeof h, 0);
    close(fd);
    if (k != (ssize_t)sizeof h) return NULL;
    if (h[0] == 0x1f && h[1] == 0x8b) return "GZIP";
    if ((h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && (h[0] * 256u + h[1]) % 31 == 0 && !(h[1] & 0x20)) return "ZLIB";
    return NULL;
}

/* Exit 4 if shard f, whose first record did not frame, is a compressed stream: not corruption, so
 * --skip_corrupt does not pass over it (it would skip the whole file as records that do not frame). */
static void refuse_compressed(const Loader *l, int f) {
    const char *c = compressed_format(l->paths[f]);
    if (!c) return;
    die_code(EXIT_DATA,
             "%s: a %s-compressed file, not TFRecords (TensorFlow writes these with compression_type=\"%s\"); nvcnn reads "
             "uncompressed TFRecord shards: decompress each one first (%s)",
             l->paths[f], c, c, c[0] == 'G' ? "gzip -dc < SHARD > OUT" : "a zlib stream: Python's zlib.decompress");
}

/* Scans every shard and keeps this rank's records. */
static void build_index(Loader *l) {
    int nf = l->nfiles;
    ScanJob j = {.paths = l->paths, .nfiles = nf, .skip = l->cfg.skip_corrupt, .report = l->report_scan, .next = 0};
    pthread_mutex_init(&j.mu, NULL);
    j.ix = xcalloc((size_t)nf, sizeof *j.ix);
    j.count = xcalloc((size_t)nf, sizeof *j.count);
    j.skipped = xcalloc((size_t)nf, sizeof *j.skipped);
    j.err = xcalloc((size_t)nf, sizeof *j.err);
    int nt = nf < 8 ? nf : 8;
    pthread_t th[8];
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, scan_thread, &j) != 0) die("cannot start a thread");
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.mu);

    size_t total = 0;
    for (int f = 0; f < nf; f++) {
        /* the first record did not frame: an error at offset 0, or (skipping) no record at 0 */
        const int first_bad = j.count[f] < 0 ? strstr(j.err[f], "byte offset 0 (") != NULL
                                             : j.skipped[f] > 0 && (j.count[f] == 0 || j.ix[f][0].offset != 0);
        if (first_bad) refuse_compressed(l, f);
        if (j.count[f] == -2) die("%s", j.err[f]); /* cannot be opened or read: an I/O error (exit 1) */
        if (j.count[f] < 0) {
            if (strstr(j.err[f], "byte offset 0 (")) die_code(EXIT_DATA, "%s; not a TFRecord file", j.err[f]);
            die_code(EXIT_DATA, "%s", j.err[f]);
        }
        total += (size_t)j.count[f];
        l->skipped_scan += j.skipped[f];
    }
    for (int f = 0; f < nf && total > 0; f++) /* an empty file among shards of records: one lost in writing or copying */
        if (j.count[f] == 0 && j.skipped[f] == 0) {
            if (!l->cfg.skip_corrupt)
                die_code(EXIT_DATA, "%s is empty (0 bytes), one of the %d %s-* shards: a shard that was not written or copied whole "
                                    "(--skip_corrupt reads the others)",
                         l->paths[f], nf, l->cfg.subset);
            static char said[4096]; /* once a path (validation-* is opened more than once in a run) */
            if (l->cfg.rank == 0 && strcmp(said, l->paths[f]) != 0)
                warn("%s is empty (0 bytes): --skip_corrupt reads the other %d shard%s", l->paths[f], nf - 1, nf == 2 ? "" : "s");
            snprintf(said, sizeof said, "%s", l->paths[f]);
        }
    if (total == 0 && l->skipped_scan > 0) all_skipped(l, j.skipped);
    int R = l->cfg.nranks, r = l->cfg.rank;
    size_t mine = total / (size_t)R + ((size_t)r < total % (size_t)R);
    l->mine = xmalloc((mine ? mine : 1) * sizeof *l->mine);
    l->group_start = xmalloc(((size_t)nf + 1) * sizeof *l->group_start);
    size_t g = 0, k = 0;
    l->ngroups = 0;
    for (int f = 0; f < nf; f++) {
        size_t before = k;
        for (long long i = 0; i < j.count[f]; i++, g++) {
            if (g % (size_t)R != (size_t)r) continue;
            l->mine[k].file = (uint32_t)f;
            l->mine[k].offset = j.ix[f][i].offset;
            l->mine[k].len = j.ix[f][i].len;
            k++;
        }
        if (k > before) l->group_start[l->ngroups++] = before;
        free(j.ix[f]);
    }
    l->group_start[l->ngroups] = k;
    l->nmine = k;
    l->bad = xcalloc(k ? k : 1, 1);
    l->total = total;
    free(j.ix);
    free(j.count);
    free(j.skipped);
    free(j.err);
}

/* ---- orders ------------------------------------------------------------------------------ */

static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
                 (c + 0x2545f4914f6cdd1dULL) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

/* The order of this rank's records in `epoch` (indices into l->mine). */
static void epoch_order(const Loader *l, int epoch, size_t *out) {
    size_t n = l->nmine;
    int S = l->cfg.shuffle_buffer;
    if (S <= 1) {
        for (size_t i = 0; i < n; i++) out[i] = i;
        return;
    }
    Rng rng;
    rng_seed_stream(&rng, l->cfg.seed, mix3(1, (uint64_t)l->cfg.rank, (uint64_t)epoch));
    /* file groups in a random order */
    size_t ng = l->ngroups;
    size_t *perm = xmalloc((ng ? ng : 1) * sizeof *perm);
    for (size_t i = 0; i < ng; i++) perm[i] = i;
    for (size_t i = ng; i > 1; i--) {
        size_t j = rng_below(&rng, (uint32_t)i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    size_t *seq = xmalloc((n ? n : 1) * sizeof *seq);
    size_t k = 0;
    for (size_t gi = 0; gi < ng; gi++)
        for (size_t i = l->group_start[perm[gi]]; i < l->group_start[perm[gi] + 1]; i++) seq[k++] = i;
    free(perm);
    /* the shuffle buffer */
    size_t cap = (size_t)S < n ? (size_t)S : n;
    size_t *buf = xmalloc((cap ? cap : 1) * sizeof *buf);
    size_t in = 0, fill = 0, o = 0;
    while (fill < cap) buf[fill++] = seq[in++];
    while (fill > 0) {
        size_t j = rng_below(&rng, (uint32_t)fill);
        out[o++] = buf[j];
        if (in < n)
            buf[j] = seq[in++];
        else
            buf[j] = buf[--fill];
    }
    free(buf);
    free(seq);
}

/* ---- reader thread ----------------------------------------------------------------------- */

static int file_fd(Loader *l, uint32_t f) {
    for (int i = 0; i < FD_CACHE; i++)
        if (l->fd[i] >= 0 && l->fd_file[i] == f) return l->fd[i];
    int slot = l->fd_next;
    l->fd_next = (l->fd_next + 1) % FD_CACHE;
    if (l->fd[slot] >= 0) close(l->fd[slot]);
    l->fd[slot] = open(l->paths[f], O_RDONLY | O_CLOEXEC);
    if (l->fd[slot] < 0) fail(l, EXIT_FAILURE_GENERIC, "cannot open %s: %s", l->paths[f], strerror(errno));
    l->fd_file[slot] = f;
    return l->fd[slot];
}

/* Marks record ref corrupt (skip_corrupt) and counts it in *counter, once: the first finder warns
 * with msg, a record found again (a race between the reader and a refill) is neither counted nor
 * named twice. */
static void mark_bad(Loader *l, size_t ref, size_t *counter, const char *msg) {
    pthread_mutex_lock(&l->mu);
    const int first = !l->bad[ref];
    if (first) {
        __atomic_store_n(&l->bad[ref], 1, __ATOMIC_RELAXED);
        (*counter)++;
    }
    pthread_mutex_unlock(&l->mu);
    if (first) warn("%s", msg);
}

static int known_bad(const Loader *l, size_t ref) { return __atomic_load_n(&l->bad[ref], __ATOMIC_RELAXED); }

/* Reads record ref from fd and checks its framing; NULL if it is corrupt and skip_corrupt is set
 * (marked, counted and named), exit 4 naming the file and offset without it. */
static uint8_t *read_record(Loader *l, int fd, size_t ref) {
    const RecRef *rr = &l->mine[ref];
    size_t total = (size_t)rr->len + TFR_HEADER_BYTES + TFR_FOOTER_BYTES;
    uint8_t *buf = xmalloc(total);
    size_t got = 0;
    while (got < total) {
        ssize_t k = pread(fd, buf + got, total - got, (off_t)(rr->offset + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            fail(l, EXIT_FAILURE_GENERIC, "%s: read error at byte offset %" PRIu64 ": %s", l->paths[rr->file], rr->offset,
                 strerror(errno));
        if (k == 0)
            fail(l, EXIT_DATA, "%s: corrupt record at byte offset %" PRIu64 " (file shrank since it was scanned)",
                 l->paths[rr->file], rr->offset);
        got += (size_t)k;
    }
    const char *what;
    if (tfr_check_record(buf, rr->len, &what) != 0) {
        if (!l->cfg.skip_corrupt)
            fail(l, EXIT_DATA, "%s: corrupt record at byte offset %" PRIu64 " (%s)", l->paths[rr->file], rr->offset, what);
        char msg[1200];
        snprintf(msg, sizeof msg, "%s: corrupt record at byte offset %" PRIu64 " (%s); skipped (--skip_corrupt)", l->paths[rr->file],
                 rr->offset, what);
        mark_bad(l, ref, &l->skipped_read, msg);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Closes the batch being filled (the reader holds no lock). */
static void close_batch(Loader *l, BatchBuf *b) {
    pthread_mutex_lock(&l->mu);
    b->closed = 1;
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
}

static void *reader_main(void *arg) {
    Loader *l = arg;
    tl_loader = l;
    size_t n = l->nmine;
    size_t *order = xmalloc((n ? n : 1) * sizeof *order);
    /* resuming: start where sample number start_sample of this rank's stream would be */
    uint64_t seq = n ? l->cfg.start_sample : 0;
    BatchBuf *cur = NULL;
    int B = l->cfg.batch;
    int epoch0 = n ? (int)(seq / n) : 0;
    size_t i0 = n ? (size_t)(seq % n) : 0;
    for (int epoch = epoch0;; epoch++) {
        epoch_order(l, epoch, order);
        uint64_t produced = 0;
        for (size_t i = epoch == epoch0 ? i0 : 0; i < n; i++) {
            const size_t ref = order[i];
            const RecRef *rr = &l->mine[ref];
            /* a corrupt record (skip_corrupt) keeps its place in the stream as an empty slot
             * (label -1), which loader_next() refills: sample k stays record k of the order, so
             * a resumed run continues where the checkpoint was taken */
            uint8_t *rec = known_bad(l, ref) ? NULL : read_record(l, file_fd(l, rr->file), ref);
            pthread_mutex_lock(&l->mu);
            if (!cur) {
                while (l->nfree == 0 && !l->stop) pthread_cond_wait(&l->cv_free, &l->mu);
                if (l->stop) {
                    pthread_mutex_unlock(&l->mu);
                    free(rec);
                    goto out;
                }
                cur = l->freeq[--l->nfree];
                cur->pub.count = 0;
                cur->pub.epoch = epoch;
                cur->first_seq = seq;
                cur->pending = 0;
                cur->closed = 0;
                cur->next = NULL;
                if (l->fifo_tail)
                    l->fifo_tail->next = cur;
                else
                    l->fifo_head = cur;
                l->fifo_tail = cur;
            }
            cur->refs[cur->pub.count] = ref;
            if (!rec) {
                cur->pub.labels[cur->pub.count++] = -1;
                seq++;
                pthread_mutex_unlock(&l->mu);
                if (cur->pub.count == B) {
                    close_batch(l, cur);
                    cur = NULL;
                }
                continue;
            }
            while (l->task_count == l->task_cap && !l->stop) pthread_cond_wait(&l->cv_space, &l->mu);
            if (l->stop) {
                pthread_mutex_unlock(&l->mu);
                free(rec);
                goto out;
            }
            Task *t = &l->tasks[(l->task_head + l->task_count) % l->task_cap];
            t->batch = cur;
            t->slot = cur->pub.count++;
            t->ref = ref;
            t->seq = seq++;
            t->rec = rec;
            l->task_count++;
            cur->pending++;
            pthread_cond_signal(&l->cv_task);
            pthread_mutex_unlock(&l->mu);
            produced++;
            if (cur->pub.count == B) {
                close_batch(l, cur);
                cur = NULL;
            }
        }
        if (!l->cfg.repeat) break;
        if (produced == 0 && !(epoch == epoch0 && i0 > 0))
            die_code(EXIT_DATA, "rank %d: no readable records in %s/%s-* (all %zu were corrupt)", l->cfg.rank,
                     l->cfg.data_dir, l->cfg.subset, n);
    }
    if (cur) close_batch(l, cur);
out:
    free(order);
    pthread_mutex_lock(&l->mu);
    l->reader_done = 1;
    pthread_cond_broadcast(&l->cv_ready);
    pthread_cond_broadcast(&l->cv_task);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- decode workers ---------------------------------------------------------------------- */

/* Appends " (image/filename NAME)" to the message msg where the Example names its source image (as
 * build_imagenet_data.py and nvcnn-mkrecords write it): the file to look at, which the record's
 * offset alone does not say. Bytes outside printable ASCII are written as \xNN, the name cut at
 * 200 bytes. */
static void name_source(const ExampleImage *ex, char *msg, size_t len) {
    if (!ex->filename || !ex->filename_len || !len) return;
    size_t at = strlen(msg);
    at += (size_t)snprintf(msg + at, at < len ? len - at : 0, " (image/filename ");
    for (size_t i = 0; i < ex->filename_len && i < 200 && at < len; i++) {
        const uint8_t c = ex->filename[i];
        at += (size_t)(c >= 0x20 && c != 0x7f ? snprintf(msg + at, len - at, "%c", c)
                                             : snprintf(msg + at, len - at, "\\x%02x", c));
    }
    if (at < len) snprintf(msg + at, len - at, "%s)", ex->filename_len > 200 ? "..." : "");
}

/* Parses rec, the framed record ref, and decodes and augments its image into dst as sample number
 * seq of the stream: its label (0-based), or -1 with the reason in err when the Example or the
 * image is unusable. A label outside [1, num_classes] always exits: the data set and --num_classes
 * disagree. */
static int32_t decode_sample(Loader *l, const uint8_t *rec, size_t ref, uint64_t seq, uint8_t *dst, char *err, size_t errlen) {
    const RecRef *rr = &l->mine[ref];
    ExampleImage ex;
    if (example_parse_image(rec + TFR_HEADER_BYTES, (size_t)rr->len, &ex, err, errlen) != 0) return -1;
    int64_t label = ex.label - 1;
    if (label < 0 || (l->cfg.num_classes > 0 && label >= l->cfg.num_classes)) {
        char src[320] = "";
        name_source(&ex, src, sizeof src);
        fail(l, EXIT_DATA,
             "%s: record at byte offset %" PRIu64 ": image/class/label %" PRId64
             " is outside [1, %d] (labels are 1-based; %d class%s)%s",
             l->paths[rr->file], rr->offset, ex.label, l->cfg.num_classes, l->cfg.num_classes, l->cfg.num_classes == 1 ? "" : "es", src);
    }
    BBox boxes_local[8];
    BBox *boxes = ex.nbox <= 8 ? boxes_local : xmalloc((size_t)ex.nbox * sizeof *boxes);
    for (int i = 0; i < ex.nbox; i++) {
        boxes[i].xmin = ex.xmin[i];
        boxes[i].ymin = ex.ymin[i];
        boxes[i].xmax = ex.xmax[i];
        boxes[i].ymax = ex.ymax[i];
    }
    AugmentParams p = {.out_h = l->cfg.height,
                       .out_w = l->cfg.width,
                       .training = l->cfg.training,
                       .distort_color = l->cfg.distort_color,
                       .color_order = (int)(seq % 2),
                       .min_area = l->cfg.crop_area_min};
    Rng rng;
    rng_seed_stream(&rng, l->cfg.seed, mix3(2, (uint64_t)l->cfg.rank, seq));
    const int rc = augment_image(ex.encoded, ex.encoded_len, ex.nbox ? boxes : NULL, ex.nbox, &p, &rng, dst, err, errlen);
    if (rc != 0) name_source(&ex, err, errlen);
    if (boxes != boxes_local) free(boxes);
    example_image_free(&ex);
    return rc == 0 ? (int32_t)label : -1;
}

/* The unusable record ref (its framing sound): fatal (exit 4, naming the file and offset), or
 * with skip_corrupt marked, counted and named. */
static void unusable(Loader *l, size_t ref, const char *err) {
    const RecRef *rr = &l->mine[ref];
    if (!l->cfg.skip_corrupt) fail(l, EXIT_DATA, "%s: record at byte offset %" PRIu64 ": %s", l->paths[rr->file], rr->offset, err);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: record at byte offset %" PRIu64 " skipped: %s", l->paths[rr->file], rr->offset, err);
    mark_bad(l, ref, &l->skipped_decode, msg);
}

/* Decodes a task into its slot; an unusable record leaves the slot empty (label -1), which
 * loader_next() refills. */
static void run_task(Loader *l, const Task *t) {
    char err[512];
    uint8_t *dst = t->batch->pub.images + (size_t)t->slot * l->img_bytes;
    const int32_t label = decode_sample(l, t->rec, t->ref, t->seq, dst, err, sizeof err);
    if (label < 0) unusable(l, t->ref, err);
    t->batch->pub.labels[t->slot] = label;
}

static void *worker_main(void *arg) {
    Loader *l = arg;
    tl_loader = l;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (l->task_count == 0 && !l->stop && !l->reader_done) pthread_cond_wait(&l->cv_task, &l->mu);
        if (l->stop || (l->task_count == 0 && l->reader_done)) break;
        Task t = l->tasks[l->task_head];
        l->task_head = (l->task_head + 1) % l->task_cap;
        l->task_count--;
        pthread_cond_signal(&l->cv_space);
        pthread_mutex_unlock(&l->mu);
        run_task(l, &t);
        free(t.rec);
        pthread_mutex_lock(&l->mu);
        if (--t.batch->pending == 0 && t.batch->closed) pthread_cond_broadcast(&l->cv_ready);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- public ------------------------------------------------------------------------------ */

/* Checks the configuration, lists and scans the shards: a Loader with its index and no threads.
 * report: name each record the scan skips (rank 0 of a loader that reads: every rank scans
 * every shard, and loader_scan's check comes before a loader_open of the same shards). */
static Loader *open_index(const LoaderConfig *cfg, int report) {
    if (!cfg->data_dir || !cfg->data_dir[0]) die_code(EXIT_USAGE, "no data directory given");
    const char *subset = cfg->subset && cfg->subset[0] ? cfg->subset : "train";
    if (cfg->batch <= 0) die_code(EXIT_USAGE, "loader: batch size %d must be positive", cfg->batch);
    if (cfg->height <= 0 || cfg->width <= 0)
        die_code(EXIT_USAGE, "loader: image size %dx%d must be positive", cfg->height, cfg->width);
    if (cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks)
        die_code(EXIT_USAGE, "loader: rank %d of %d is invalid", cfg->rank, cfg->nranks);

    Loader *l = xcalloc(1, sizeof *l);
    l->cfg = *cfg;
    l->cfg.subset = subset;
    l->report_scan = report;
    l->nfiles = loader_list_shards(cfg->data_dir, subset, &l->paths);
    if (l->nfiles == 0) die_code(EXIT_USAGE, "no %s-* files in %s", subset, cfg->data_dir);
    build_index(l);
    if (l->total == 0)
        die_code(EXIT_USAGE, "%s/%s-*: the %d file%s no records", cfg->data_dir, subset, l->nfiles,
                 l->nfiles == 1 ? " holds" : "s hold");
    if (l->nmine == 0 && cfg->repeat)
        die_code(EXIT_USAGE, "%s/%s-*: %zu records cannot feed %d ranks", cfg->data_dir, subset, l->total, cfg->nranks);
    return l;
}

/* Frees what open_index() made. */
static void free_index(Loader *l) {
    for (int i = 0; i < l->nfiles; i++) free(l->paths[i]);
    free(l->paths);
    free(l->mine);
    free(l->bad);
    free(l->group_start);
    free(l);
}

size_t loader_scan(const LoaderConfig *cfg) {
    Loader *l = open_index(cfg, 0);
    size_t n = l->total;
    free_index(l);
    return n;
}

Loader *loader_open(const LoaderConfig *cfg) {
    Loader *l = open_index(cfg, cfg->rank == 0);
    int threads = cfg->threads;
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores > 0 ? cores : 1) / cfg->nranks;
        if (threads < 1) threads = 1;
    }
    l->nworkers = threads;
    l->img_bytes = (size_t)cfg->height * (size_t)cfg->width * 3;

    for (int i = 0; i < NUM_BATCH_BUFS; i++) {
        BatchBuf *b = &l->bufs[i];
        size_t ib = l->img_bytes * (size_t)cfg->batch, lb = sizeof(int32_t) * (size_t)cfg->batch;
        b->pub.images = cfg->host_alloc ? cfg->host_alloc(ib) : xmalloc_aligned(ib);
        b->pub.labels = cfg->host_alloc ? cfg->host_alloc(lb) : xmalloc_aligned(lb);
        b->refs = xmalloc((size_t)cfg->batch * sizeof *b->refs);
        if (!b->pub.images || !b->pub.labels) die("cannot allocate %zu bytes for a batch", ib);
        l->freeq[l->nfree++] = b;
    }
    l->task_cap = (size_t)(4 * threads > 64 ? 4 * threads : 64);
    l->tasks = xcalloc(l->task_cap, sizeof *l->tasks);
    for (int i = 0; i < FD_CACHE; i++) l->fd[i] = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_free, NULL);
    pthread_cond_init(&l->cv_task, NULL);
    pthread_cond_init(&l->cv_space, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    l->workers = xcalloc((size_t)threads, sizeof *l->workers);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&l->workers[i], NULL, worker_main, l) != 0) die("cannot start a decode thread");
    if (pthread_create(&l->reader, NULL, reader_main, l) != 0) die("cannot start the reader thread");
    return l;
}

size_t loader_num_records(const Loader *l) { return l->total; }
size_t loader_rank_records(const Loader *l) { return l->nmine; }

int loader_error(Loader *l, const char **msg) {
    pthread_mutex_lock(&l->mu);
    const int code = l->failed;
    pthread_mutex_unlock(&l->mu);
    if (msg) *msg = code ? l->fail_msg : NULL;
    return code;
}

size_t loader_skipped(const Loader *l) {
    Loader *m = (Loader *)l;
    pthread_mutex_lock(&m->mu);
    size_t n = l->skipped_scan + l->skipped_read + l->skipped_decode;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* Fills slot k of batch b, left empty by a corrupt or unusable record, with another record of
 * this rank, decoded and augmented as sample number first_seq + k of the stream: the record is
 * drawn at random (a generator seeded by the seed, the rank and that sample number: the same
 * record whatever the timing), among those not yet known corrupt and not in the batch already;
 * after 64 draws that miss, the search goes on record by record from the last draw, and where
 * every usable record is in the batch (a rank with fewer records than a batch), it takes one of
 * them. Exit 4 only if no record of the rank is usable. (Over an epoch the replacements are a
 * uniform sample of the usable records, so no image stands in for the corrupt ones more often
 * than another, and a batch whose every image is corrupt is filled all the same.) */
static void refill(Loader *l, BatchBuf *b, int k) {
    const uint64_t seq = b->first_seq + (uint64_t)k;
    const size_t n = l->nmine;
    Rng pick;
    rng_seed_stream(&pick, l->cfg.seed, mix3(3, (uint64_t)l->cfg.rank, seq));
    const uint32_t range = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    size_t ref = rng_below(&pick, range);
    uint8_t *dst = b->pub.images + (size_t)k * l->img_bytes;
    for (size_t tries = 0; tries < 2 * n + 64; tries++) {
        if (tries > 0) ref = tries < 64 ? rng_below(&pick, range) : (ref + 1) % n;
        if (known_bad(l, ref)) continue;
        int in_batch = 0;
        for (int i = 0; i < b->pub.count && tries < n + 64; i++) in_batch |= i != k && b->refs[i] == ref;
        if (in_batch) continue;
        const RecRef *rr = &l->mine[ref];
        int fd = open(l->paths[rr->file], O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("cannot open %s: %s", l->paths[rr->file], strerror(errno));
        uint8_t *rec = read_record(l, fd, ref);
        close(fd);
        if (!rec) continue;
        char err[512];
        const int32_t label = decode_sample(l, rec, ref, seq, dst, err, sizeof err);
        free(rec);
        if (label >= 0) {
            b->pub.labels[k] = label;
            b->refs[k] = ref;
            return;
        }
        unusable(l, ref, err);
    }
    die_code(EXIT_DATA, "rank %d: no usable record in %s/%s-* (all %zu were corrupt or unusable: --skip_corrupt)", l->cfg.rank,
             l->cfg.data_dir, l->cfg.subset, n);
}

/* The slots of corrupt or unusable records (label -1): an endless (training) run refills each
 * (refill), so every step sees a full batch of distinct draws; a one-pass run (evaluation) drops
 * them, the valid samples moving to the front, and returns fewer. */
static void close_gaps(Loader *l, BatchBuf *bb) {
    LoaderBatch *b = &bb->pub;
    if (l->cfg.repeat) {
        for (int i = 0; i < b->count; i++)
            if (b->labels[i] < 0) refill(l, bb, i);
        return;
    }
    int n = 0;
    for (int i = 0; i < b->count; i++) {
        if (b->labels[i] < 0) continue;
        if (n != i) {
            memcpy(b->images + (size_t)n * l->img_bytes, b->images + (size_t)i * l->img_bytes, l->img_bytes);
            b->labels[n] = b->labels[i];
        }
        n++;
    }
    b->count = n;
}

LoaderBatch *loader_next(Loader *l) {
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->failed) { /* defer_errors: a loader thread ended the pass */
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        BatchBuf *b = l->fifo_head;
        if (b && b->closed && b->pending == 0) {
            l->fifo_head = b->next;
            if (!l->fifo_head) l->fifo_tail = NULL;
            pthread_mutex_unlock(&l->mu);
            close_gaps(l, b);
            return &b->pub;
        }
        if (!b && l->reader_done) {
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        pthread_cond_wait(&l->cv_ready, &l->mu);
    }
}

void loader_release(Loader *l, LoaderBatch *pb) {
    if (!pb) return;
    BatchBuf *b = (BatchBuf *)pb;
    pthread_mutex_lock(&l->mu);
    l->freeq[l->nfree++] = b;
    pthread_cond_signal(&l->cv_free);
    pthread_mutex_unlock(&l->mu);
}

void loader_close(Loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    stop_all(l);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->reader, NULL);
    for (int i = 0; i < l->nworkers; i++) pthread_join(l->workers[i], NULL);
    for (size_t i = 0; i < l->task_count; i++) free(l->tasks[(l->task_head + i) % l->task_cap].rec);
    for (int i = 0; i < NUM_BATCH_BUFS; i++) {
        if (l->cfg.host_free) {
            l->cfg.host_free(l->bufs[i].pub.images);
            l->cfg.host_free(l->bufs[i].pub.labels);
        } else if (!l->cfg.host_alloc) {
            free(l->bufs[i].pub.images);
            free(l->bufs[i].pub.labels);
        }
    }
    for (int i = 0; i < NUM_BATCH_BUFS; i++) free(l->bufs[i].refs);
    for (int i = 0; i < FD_CACHE; i++)
        if (l->fd[i] >= 0) close(l->fd[i]);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_free);
    pthread_cond_destroy(&l->cv_task);
    pthread_cond_destroy(&l->cv_space);
    pthread_cond_destroy(&l->cv_ready);
    free(l->tasks);
    free(l->workers);
    free_index(l);
}
