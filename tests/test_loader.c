/* test_loader.c: the input pipeline over small TFRecord datasets written here: every record read
 * by exactly one rank, batches in order and complete, epochs, reproducibility under a seed with
 * any number of workers, the label offset and its range check, corrupt records, and the errors
 * for missing or bad input (run in a forked child, since they end the process). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "testutil.h"
#include "io/example.h"
#include "io/image.h"
#include "io/loader.h"
#include "io/tfrecord.h"
#include "util.h"

#define SIDE 6 /* images are SIDE x SIDE */

/* A solid image whose colour encodes id: R = 5 * id % 256, G = id / 51, B = 77 (colours of
 * neighbouring ids differ by 5, so a resize that is off by one still identifies the image). */
static uint8_t *solid_png(int id, size_t *len) {
    uint8_t px[SIDE * SIDE * 3];
    for (int i = 0; i < SIDE * SIDE; i++) {
        px[3 * i] = (uint8_t)(5 * id % 256);
        px[3 * i + 1] = (uint8_t)(id / 51);
        px[3 * i + 2] = 77;
    }
    uint8_t *out = NULL;
    if (image_encode_png(px, SIDE, SIDE, 3, &out, len) != 0) die("image_encode_png failed");
    return out;
}

/* A noisy 16x12 image, so that crops and flips show. */
static uint8_t *noise_png(int id, size_t *len) {
    uint8_t px[12 * 16 * 3];
    Rng r;
    rng_seed(&r, (uint64_t)id + 1000);
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)rng_u64(&r);
    uint8_t *out = NULL;
    if (image_encode_png(px, 16, 12, 3, &out, len) != 0) die("image_encode_png failed");
    return out;
}

/* One record: an Example of image bytes img (ilen) and label, written to w (the image freed). */
static void write_example(TfrWriter *w, uint8_t *img, size_t ilen, int64_t label) {
    size_t rlen;
    ExampleBuilder *b = example_builder_new();
    example_add_bytes(b, "image/encoded", img, ilen);
    example_add_int64s(b, "image/class/label", &label, 1);
    uint8_t *rec = example_serialize(b, &rlen);
    if (tfr_write(w, rec, rlen) != 0) die("write failed");
    free(rec);
    free(img);
    example_builder_free(b);
}

/* Writes files <dir>/<subset>-0000k-of-0000n with counts[k] records; record g (global) has
 * image id g and label label_of(g) (stored as written, i.e. 1-based). */
static void make_dataset(const char *dir, const char *subset, const int *counts, int nfiles, int noise,
                         int64_t (*label_of)(int)) {
    mkdir(dir, 0755);
    int g = 0;
    for (int f = 0; f < nfiles; f++) {
        char path[600], err[256];
        snprintf(path, sizeof path, "%s/%s-%05d-of-%05d", dir, subset, f, nfiles);
        TfrWriter *w = tfr_writer_open(path, err, sizeof err);
        if (!w) die("%s", err);
        for (int i = 0; i < counts[f]; i++, g++) {
            size_t ilen;
            uint8_t *img = noise ? noise_png(g, &ilen) : solid_png(g, &ilen);
            write_example(w, img, ilen, label_of(g));
        }
        if (tfr_writer_close(w) != 0) die("close failed");
    }
}

static int64_t label_id(int g) { return g + 1; }
static int64_t label_mod(int g) { return g % 10 + 1; }

static LoaderConfig base_cfg(const char *dir) {
    LoaderConfig c = {.data_dir = dir,
                      .subset = "train",
                      .batch = 8,
                      .height = 4,
                      .width = 4,
                      .training = 0,
                      .repeat = 0,
                      .rank = 0,
                      .nranks = 1,
                      .threads = 2,
                      .shuffle_buffer = 0,
                      .seed = 1,
                      .num_classes = 1000};
    return c;
}

static const char *dataset_ids(void) {
    static char dir[600];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/ids", th_tmpdir());
        const int counts[] = {13, 11, 13}; /* 37 records */
        make_dataset(dir, "train", counts, 3, 0, label_id);
    }
    return dir;
}

/* Reads a one-pass loader to the end: the ids in delivery order (from the label, checked against
 * the image colour) and the batch sizes. Returns the number of samples. */
static int drain(Loader *l, int *ids, int max, int *sizes, int *nbatches) {
    int n = 0, nb = 0;
    LoaderBatch *b;
    while ((b = loader_next(l))) {
        if (sizes) sizes[nb] = b->count;
        nb++;
        for (int i = 0; i < b->count; i++) {
            int id = b->labels[i];
            const uint8_t *px = b->images + (size_t)i * 4 * 4 * 3;
            int ok = 1;
            for (int p = 0; p < 16; p++)
                ok &= abs(px[3 * p] - 5 * id % 256) <= 1 && abs(px[3 * p + 1] - id / 51) <= 1 && abs(px[3 * p + 2] - 77) <= 1;
            CHECK_MSG(ok, "image of sample %d does not match its label %d", i, id);
            if (n < max) ids[n] = id;
            n++;
        }
        loader_release(l, b);
    }
    CHECK(loader_next(l) == NULL);
    if (nbatches) *nbatches = nb;
    return n;
}

TEST(loader_rank_shares_disjoint_and_complete) {
    const char *dir = dataset_ids();
    for (int R = 1; R <= 4; R++) {
        int seen[37] = {0};
        for (int r = 0; r < R; r++) {
            LoaderConfig c = base_cfg(dir);
            c.rank = r;
            c.nranks = R;
            c.batch = 5;
            Loader *l = loader_open(&c);
            CHECK(loader_num_records(l) == 37);
            size_t want = 37 / R + (r < 37 % R);
            CHECK_MSG(loader_rank_records(l) == want, "R %d r %d: %zu records", R, r, loader_rank_records(l));
            int ids[64];
            int n = drain(l, ids, 64, NULL, NULL);
            CHECK(n == (int)want);
            for (int i = 0; i < n && i < 64; i++) {
                CHECK_MSG(ids[i] == r + i * R, "R %d r %d: sample %d is record %d", R, r, i, ids[i]);
                if (ids[i] >= 0 && ids[i] < 37) seen[ids[i]]++;
            }
            loader_close(l);
        }
        for (int g = 0; g < 37; g++) CHECK_MSG(seen[g] == 1, "R %d: record %d read %d times", R, g, seen[g]);
    }
}

TEST(loader_one_pass_partial_last_batch) {
    LoaderConfig c = base_cfg(dataset_ids());
    Loader *l = loader_open(&c);
    int ids[64], sizes[16], nb;
    CHECK(drain(l, ids, 64, sizes, &nb) == 37);
    CHECK(nb == 5);
    for (int i = 0; i < 4; i++) CHECK(sizes[i] == 8);
    CHECK(sizes[4] == 5);
    for (int i = 0; i < 37; i++) CHECK(ids[i] == i);
    CHECK(loader_skipped(l) == 0);
    loader_close(l);
}

/* Shuffled and repeated: each epoch is a permutation of the rank's records, epochs are tagged,
 * and batches straddle epoch boundaries. */
TEST(loader_shuffled_epochs_are_permutations) {
    LoaderConfig c = base_cfg(dataset_ids());
    c.repeat = 1;
    c.shuffle_buffer = 10;
    c.nranks = 2;
    c.rank = 1; /* 18 records: 1, 3, ..., 35 */
    c.batch = 7;
    Loader *l = loader_open(&c);
    CHECK(loader_rank_records(l) == 18);
    int ids[18 * 3], epochs[18 * 3];
    int n = 0, first_batch_epoch[8], nb = 0;
    while (n < 18 * 3) {
        LoaderBatch *b = loader_next(l);
        CHECK(b && b->count == 7);
        if (!b) break;
        first_batch_epoch[nb++] = b->epoch;
        for (int i = 0; i < b->count && n < 18 * 3; i++, n++) {
            ids[n] = b->labels[i];
            epochs[n] = (n / 18);
        }
        loader_release(l, b);
    }
    loader_close(l);
    for (int e = 0; e < 3; e++) {
        int seen[37] = {0}, in_order = 1;
        for (int i = 0; i < 18; i++) {
            int id = ids[e * 18 + i];
            CHECK(id >= 0 && id < 37 && id % 2 == 1);
            if (id >= 0 && id < 37) seen[id]++;
            in_order &= id == 1 + 2 * i;
        }
        for (int g = 1; g < 37; g += 2) CHECK_MSG(seen[g] == 1, "epoch %d: record %d seen %d times", e, g, seen[g]);
        CHECK_MSG(!in_order, "epoch %d was not shuffled", e);
    }
    /* batch k starts at sample 7k: epoch floor(7k / 18) */
    for (int k = 0; k < nb; k++) CHECK(first_batch_epoch[k] == epochs[7 * k]);
    CHECK(memcmp(ids, ids + 18, 18 * sizeof *ids) != 0); /* a new order each epoch */
}

typedef struct Run {
    uint8_t *images;
    int32_t labels[64];
} Run;

static const char *dataset_noise(void) {
    static char dir[600];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/noise", th_tmpdir());
        const int counts[] = {9, 12};
        make_dataset(dir, "train", counts, 2, 1, label_mod);
    }
    return dir;
}

/* The first 4 batches of 6 of a training-mode run. */
static void run_training(uint64_t seed, int threads, Run *out) {
    LoaderConfig c = base_cfg(dataset_noise());
    c.training = 1;
    c.distort_color = 1;
    c.repeat = 1;
    c.shuffle_buffer = 8;
    c.batch = 6;
    c.height = 10;
    c.width = 10;
    c.num_classes = 10;
    c.threads = threads;
    c.seed = seed;
    size_t per = 6 * 10 * 10 * 3;
    out->images = xmalloc(4 * per);
    Loader *l = loader_open(&c);
    for (int k = 0; k < 4; k++) {
        LoaderBatch *b = loader_next(l);
        CHECK(b && b->count == 6);
        if (!b) break;
        memcpy(out->images + k * per, b->images, per);
        memcpy(out->labels + 6 * k, b->labels, 6 * sizeof(int32_t));
        loader_release(l, b);
    }
    loader_close(l);
}

TEST(loader_reproducible_under_seed_any_worker_count) {
    size_t bytes = 4 * 6 * 10 * 10 * 3;
    Run a, b, c, d;
    run_training(42, 1, &a);
    run_training(42, 3, &b);
    run_training(42, 3, &c);
    run_training(43, 3, &d);
    CHECK(memcmp(a.images, b.images, bytes) == 0 && memcmp(a.labels, b.labels, 24 * sizeof(int32_t)) == 0);
    CHECK(memcmp(b.images, c.images, bytes) == 0 && memcmp(b.labels, c.labels, 24 * sizeof(int32_t)) == 0);
    CHECK(memcmp(a.images, d.images, bytes) != 0);
    CHECK(memcmp(a.labels, d.labels, 24 * sizeof(int32_t)) != 0);
    for (int i = 0; i < 24; i++) CHECK(a.labels[i] >= 0 && a.labels[i] < 10);
    free(a.images);
    free(b.images);
    free(c.images);
    free(d.images);
}

static int n_alloc;
static void *count_alloc(size_t n) {
    n_alloc++;
    return malloc(n);
}
static void count_free(void *p) {
    n_alloc--;
    free(p);
}

TEST(loader_uses_host_allocator) {
    LoaderConfig c = base_cfg(dataset_ids());
    c.host_alloc = count_alloc;
    c.host_free = count_free;
    c.threads = 0; /* online cores / ranks */
    n_alloc = 0;
    Loader *l = loader_open(&c);
    CHECK(n_alloc > 0);
    LoaderBatch *b = loader_next(l);
    CHECK(b && b->count == 8 && b->labels[3] == 3);
    loader_release(l, b);
    loader_close(l);
    CHECK(n_alloc == 0);
}

/* ---- errors: run in a child process ------------------------------------------------------ */

typedef struct Child {
    int status;
    char msg[2048];
} Child;

static void open_and_drain(const LoaderConfig *c) {
    Loader *l = loader_open(c);
    LoaderBatch *b;
    while ((b = loader_next(l))) loader_release(l, b);
    loader_close(l);
}

static Child in_child(const LoaderConfig *c) {
    Child r = {.status = -1};
    char path[600];
    snprintf(path, sizeof path, "%s/child.err", th_tmpdir());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(path, "w", stderr)) _exit(99);
        open_and_drain(c);
        fflush(stderr);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(r.msg, 1, sizeof r.msg - 1, f);
        r.msg[n] = 0;
        fclose(f);
    }
    return r;
}

static int64_t label_zero_at_5(int g) { return g == 5 ? 0 : 1; }
static int64_t label_big_at_3(int g) { return g == 3 ? 11 : 10; }

TEST(loader_label_offset_and_range_errors) {
    char dir[600];
    const int counts[] = {3, 4};
    snprintf(dir, sizeof dir, "%s/lab0", th_tmpdir());
    make_dataset(dir, "train", counts, 2, 0, label_zero_at_5);
    LoaderConfig c = base_cfg(dir);
    c.num_classes = 10;
    Child r = in_child(&c);
    CHECK_MSG(r.status == EXIT_DATA, "status %d: %s", r.status, r.msg);
    /* record 5 is the third record of the second file */
    char path[700];
    snprintf(path, sizeof path, "%s/train-00001-of-00002", dir);
    TfrIndexEntry *ix;
    char err[256];
    CHECK(tfr_scan(path, 0, &ix, NULL, err, sizeof err) == 4);
    char want[900];
    snprintf(want, sizeof want, "%s: record at byte offset %llu: image/class/label 0 is outside [1, 10]", path,
             (unsigned long long)ix[2].offset);
    free(ix);
    CHECK_MSG(strstr(r.msg, want) != NULL, "got: %s", r.msg);

    snprintf(dir, sizeof dir, "%s/lab11", th_tmpdir());
    make_dataset(dir, "train", counts, 2, 0, label_big_at_3);
    c = base_cfg(dir);
    c.num_classes = 10;
    r = in_child(&c);
    CHECK(r.status == EXIT_DATA && strstr(r.msg, "image/class/label 11 is outside [1, 10]"));
    CHECK_MSG(strstr(r.msg, "train-00001-of-00002: record at byte offset 0:") != NULL, "got: %s", r.msg);
    /* label 10 with 10 classes is class 9: fine */
    c.num_classes = 11;
    r = in_child(&c);
    CHECK_MSG(r.status == 0, "status %d: %s", r.status, r.msg);
}

TEST(loader_bad_input_exit_codes) {
    LoaderConfig c = base_cfg("/nonexistent/nvcnn-data");
    Child r = in_child(&c);
    CHECK(r.status == EXIT_USAGE && strstr(r.msg, "/nonexistent/nvcnn-data"));

    char dir[600];
    snprintf(dir, sizeof dir, "%s/emptydir", th_tmpdir());
    mkdir(dir, 0755);
    c = base_cfg(dir);
    r = in_child(&c);
    CHECK(r.status == EXIT_USAGE && strstr(r.msg, "no train-* files in"));
    CHECK(!loader_has_subset(dir, "train") && loader_has_subset(dataset_ids(), "train"));
    CHECK(!loader_has_subset(dataset_ids(), "validation"));

    /* a file that is not a TFRecord file */
    char path[700];
    snprintf(path, sizeof path, "%s/train-00000-of-00001", dir);
    FILE *f = xfopen(path, "w");
    fputs("<html>not records</html>\n", f);
    fclose(f);
    r = in_child(&c);
    CHECK(r.status == EXIT_DATA && strstr(r.msg, path) && strstr(r.msg, "not a TFRecord file"));
    CHECK(strstr(r.msg, "corrupt record at byte offset 0"));
}

TEST(loader_corrupt_record_exit_or_skip) {
    char dir[600];
    const int counts[] = {5, 6};
    snprintf(dir, sizeof dir, "%s/corrupt", th_tmpdir());
    make_dataset(dir, "train", counts, 2, 0, label_id);
    char path[700];
    snprintf(path, sizeof path, "%s/train-00000-of-00002", dir);
    TfrIndexEntry *ix;
    char err[256];
    CHECK(tfr_scan(path, 0, &ix, NULL, err, sizeof err) == 5);
    uint64_t off = ix[3].offset;
    free(ix);
    /* flip a payload byte of record 3: the framing scan passes, the read catches it */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    fseek(f, (long)(off + 20), SEEK_SET);
    int ch = fgetc(f);
    fseek(f, (long)(off + 20), SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    LoaderConfig c = base_cfg(dir);
    Child r = in_child(&c);
    char want[900];
    snprintf(want, sizeof want, "%s: corrupt record at byte offset %llu (data CRC mismatch)", path,
             (unsigned long long)off);
    CHECK(r.status == EXIT_DATA);
    CHECK_MSG(strstr(r.msg, want) != NULL, "got: %s", r.msg);
    c.skip_corrupt = 1;
    Loader *l = loader_open(&c);
    int ids[16];
    CHECK(drain(l, ids, 16, NULL, NULL) == 10);
    for (int i = 0; i < 10; i++) CHECK(ids[i] == (i < 3 ? i : i + 1));
    CHECK(loader_skipped(l) == 1);
    loader_close(l);
}

/* One shard of n records, id g with label g + 1; the ids in unusable[] get bytes that are no image
 * (their framing sound), and record crc_bad's payload is damaged after writing (its data CRC
 * fails). Returns the shard's path in path. */
static void make_flawed_shard(const char *dir, int n, const int *unusable, int nunusable, int crc_bad, char *path, size_t plen) {
    mkdir(dir, 0755);
    snprintf(path, plen, "%s/train-00000-of-00001", dir);
    char err[256];
    TfrWriter *w = tfr_writer_open(path, err, sizeof err);
    if (!w) die("%s", err);
    for (int g = 0; g < n; g++) {
        int bad = 0;
        for (int k = 0; k < nunusable; k++) bad |= unusable[k] == g;
        size_t ilen;
        uint8_t *img = bad ? (uint8_t *)xstrdup("not an image at all") : solid_png(g, &ilen);
        if (bad) ilen = strlen((char *)img);
        write_example(w, img, ilen, g + 1);
    }
    if (tfr_writer_close(w) != 0) die("close failed");
    TfrIndexEntry *ix;
    if (tfr_scan(path, 0, &ix, NULL, err, sizeof err) != n) die("%s", err);
    FILE *f = fopen(path, "r+b");
    fseek(f, (long)(ix[crc_bad].offset + 20), SEEK_SET);
    int ch = fgetc(f);
    fseek(f, (long)(ix[crc_bad].offset + 20), SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    free(ix);
}

/* The labels of `steps` training batches of a loader (every batch full, every image its label's). */
static void train_labels(const LoaderConfig *c, int steps, int *labels) {
    Loader *l = loader_open(c);
    for (int s = 0; s < steps; s++) {
        LoaderBatch *b = loader_next(l);
        CHECK(b && b->count == c->batch);
        if (!b) break;
        for (int i = 0; i < b->count; i++) {
            const int id = b->labels[i];
            const uint8_t *px = b->images + (size_t)i * 4 * 4 * 3;
            CHECK_MSG(id >= 0 && abs(px[0] - 5 * id % 256) <= 1 && abs(px[2] - 77) <= 1, "step %d slot %d: label %d", s, i, id);
            labels[s * c->batch + i] = id;
        }
        loader_release(l, b);
    }
    loader_close(l);
}

/* --skip_corrupt in training: a corrupt or unusable record keeps its place in the stream and is
 * replaced by another record drawn at random, so every batch is full, a batch whose every image is
 * unusable included (it used to end the run), no batch repeats its own samples for them, the draws
 * are the same whatever the workers' timing, a resumed loader continues with the same batches, and
 * each corrupt record is counted and named once, however many epochs read it. */
TEST(loader_skip_corrupt_refills_training_batches) {
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/refill", th_tmpdir());
    const int unusable[] = {4, 5, 6, 7}; /* the whole second batch */
    make_flawed_shard(dir, 12, unusable, 4, 2, path, sizeof path);
    LoaderConfig c = base_cfg(dir);
    c.batch = 4;
    c.repeat = 1;
    c.skip_corrupt = 1;
    enum { STEPS = 9 }; /* three epochs */
    int a[STEPS * 4], b[STEPS * 4], r[STEPS * 4];
    train_labels(&c, STEPS, a);
    for (int s = 0; s < STEPS; s++) {
        int seen[12] = {0};
        for (int i = 0; i < 4; i++) {
            const int k = s * 4 + i, g = k % 12, lab = a[k];
            const int bad = g == 2 || (g >= 4 && g <= 7);
            /* a usable record in its own place; a replacement is a usable record */
            if (!bad) CHECK_MSG(lab == g, "step %d slot %d: %d, not record %d", s, i, lab, g);
            CHECK_MSG(lab != 2 && (lab < 4 || lab > 7), "step %d slot %d: corrupt record %d delivered", s, i, lab);
            if (lab >= 0 && lab < 12) seen[lab]++;
        }
        /* the replacements are drawn among the records not in the batch (7 usable records here) */
        for (int id = 0; id < 12; id++) CHECK_MSG(seen[id] <= 1, "step %d: record %d twice", s, id);
    }
    /* the same draws with one worker; a loader resumed at step 4 continues as the first */
    c.threads = 1;
    train_labels(&c, STEPS, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    c.start_sample = 4 * 4;
    train_labels(&c, STEPS - 4, r);
    CHECK(memcmp(a + 16, r, (STEPS - 4) * 4 * sizeof *r) == 0);
    c.start_sample = 0;
    /* counted and named once over three epochs */
    char err_path[700];
    snprintf(err_path, sizeof err_path, "%s/refill.err", th_tmpdir());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(err_path, "w", stderr)) _exit(99);
        Loader *l = loader_open(&c);
        for (int s = 0; s < STEPS; s++) loader_release(l, loader_next(l));
        const size_t sk = loader_skipped(l);
        loader_close(l);
        fflush(stderr);
        _exit(sk == 5 ? 0 : 10 + (int)sk);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "skipped count: exit %d (10 + the count)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    size_t len;
    char *e = (char *)tu_read_file(err_path, &len);
    CHECK(e != NULL);
    if (!e) return;
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += e[i] == '\n';
    CHECK_MSG(lines == 5, "%d lines:\n%s", lines, e);
    char want[900];
    snprintf(want, sizeof want, "warning: %s: corrupt record at byte offset ", path);
    CHECK_MSG(strstr(e, want) && strstr(e, "(data CRC mismatch); skipped (--skip_corrupt)"), "%s", e);
    snprintf(want, sizeof want, "warning: %s: record at byte offset ", path);
    CHECK_MSG(strstr(e, want) && strstr(e, " skipped: "), "%s", e);
    free(e);
}

/* Two conversions into one folder, or a shard gone: the loader refuses the folder, naming the
 * files, instead of reading whatever is there; freely named files are read as before. */
TEST(loader_refuses_mixed_or_incomplete_sets) {
    char dir[600], path[800], to[800];
    const int two[] = {3, 4}, three[] = {2, 2, 2};
    snprintf(dir, sizeof dir, "%s/mixed", th_tmpdir());
    make_dataset(dir, "train", two, 2, 0, label_id);
    LoaderConfig c = base_cfg(dir);
    Loader *l = loader_open(&c);
    CHECK(loader_num_records(l) == 7);
    loader_close(l);
    make_dataset(dir, "train", three, 3, 0, label_id);
    Child r = in_child(&c);
    char want[1200];
    snprintf(want, sizeof want,
             "error: --data_dir=%s: train-* holds two sets of shards: train-00000-of-00002 ... (2 files) and "
             "train-00000-of-00003 ... (3 files): remove one set\n",
             dir);
    CHECK_MSG(r.status == EXIT_DATA && strstr(r.msg, want), "status %d: %s", r.status, r.msg);

    /* the older set removed, one shard of the newer one lost */
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/train-%05d-of-00002", dir, k);
        CHECK(unlink(path) == 0);
    }
    snprintf(path, sizeof path, "%s/train-00001-of-00003", dir);
    CHECK(unlink(path) == 0);
    r = in_child(&c);
    snprintf(want, sizeof want, "--data_dir=%s: train-00001-of-00003 is missing (2 of the 3 shards", dir);
    CHECK_MSG(r.status == EXIT_DATA && strstr(r.msg, want), "status %d: %s", r.status, r.msg);

    /* validation-* is checked by loader_has_subset too (nvcnn asks it before training) */
    snprintf(dir, sizeof dir, "%s/mixed-val", th_tmpdir());
    make_dataset(dir, "validation", two, 2, 0, label_id);
    CHECK(loader_has_subset(dir, "validation"));
    snprintf(path, sizeof path, "%s/validation-00000-of-00002", dir);
    CHECK(unlink(path) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        _exit(loader_has_subset(dir, "validation") ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_DATA, "loader_has_subset on a broken set: status %d", st);

    /* files named outside the pattern are read as they always were, every record once */
    snprintf(dir, sizeof dir, "%s/free-names", th_tmpdir());
    make_dataset(dir, "train", two, 2, 0, label_id);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/train-%05d-of-00002", dir, k);
        snprintf(to, sizeof to, "%s/train-%d.tfrecord", dir, k);
        CHECK(rename(path, to) == 0);
    }
    c = base_cfg(dir);
    l = loader_open(&c);
    int ids[16];
    CHECK(drain(l, ids, 16, NULL, NULL) == 7);
    for (int i = 0; i < 7; i++) CHECK(ids[i] == i);
    loader_close(l);
    /* ... but a shard-named file among them is ambiguous */
    make_dataset(dir, "train", three, 1, 0, label_id);
    r = in_child(&c);
    CHECK_MSG(r.status == EXIT_DATA && strstr(r.msg, "train-0.tfrecord and train-1.tfrecord are not named as shards"),
              "status %d: %s", r.status, r.msg);
}

/* loader_scan: the records over all ranks, and loader_open's errors, without reading a record. */
TEST(loader_scan_counts_as_open_does) {
    LoaderConfig c = base_cfg(dataset_ids());
    CHECK(loader_scan(&c) == 37);
    c.rank = 2;
    c.nranks = 3;
    CHECK(loader_scan(&c) == 37);

    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/scan-empty", th_tmpdir());
    const int none[] = {0};
    make_dataset(dir, "validation", none, 1, 0, label_id);
    c = base_cfg(dir);
    c.subset = "validation";
    snprintf(path, sizeof path, "%s/scan.err", th_tmpdir());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(path, "w", stderr)) _exit(99);
        loader_scan(&c);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_USAGE, "loader_scan on an empty shard: status %d", st);
    char msg[1024] = "";
    FILE *f = fopen(path, "r");
    if (f) {
        msg[fread(msg, 1, sizeof msg - 1, f)] = 0;
        fclose(f);
    }
    CHECK_MSG(strstr(msg, "validation-*: the 1 file holds no records"), "got: %s", msg);
}
