/* test_badinput.c: bad data as a user meets it through ./nvcnn: each case gives one clear
 * "nvcnn: error:" line naming the file (and offset) and a non-zero exit, never a crash. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"
#include "testutil.h"

/* A 32x32 RGB JPEG of a gradient. */
static uint8_t *small_jpeg(size_t *len) {
    uint8_t px[32 * 32 * 3];
    for (int i = 0; i < 32 * 32 * 3; i++) px[i] = (uint8_t)(i * 7 % 251);
    uint8_t *out = NULL;
    if (image_encode_jpeg(px, 32, 32, 3, 90, &out, len) != 0) return NULL;
    return out;
}

/* Writes `n` records to dir/name; record k gets `image` (NULL: no image/encoded) and label. */
static void write_shard(const char *dir, const char *name, int n, const uint8_t *image, size_t ilen, int64_t label) {
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TfrWriter *w = tfr_writer_open(path, err, sizeof err);
    if (!w) {
        th_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    for (int k = 0; k < n; k++) {
        ExampleBuilder *b = example_builder_new();
        if (image) example_add_bytes(b, "image/encoded", image, ilen);
        example_add_int64s(b, "image/class/label", &label, 1);
        size_t len;
        uint8_t *buf = example_serialize(b, &len);
        tfr_write(w, buf, len);
        free(buf);
        example_builder_free(b);
    }
    tfr_writer_close(w);
}

static char *mkdir_case(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", th_tmpdir(), name);
    mkdir(path, 0755);
    return path;
}

static void expect(const char *args, int code, const char *needle) {
    char cmd[1024], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 %s", args);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == code, "'%s' exited %d, want %d:\n%s", args, rc, code, o);
    CHECK_MSG(o && strstr(o, needle), "'%s' printed no '%s':\n%s", args, needle, o);
    CHECK_MSG(o && strstr(o, "nvcnn: error: ") && !strstr(o, "Segmentation") && !strstr(o, "Aborted"),
              "'%s': no clear error line:\n%s", args, o);
    free(o);
}

TEST(badinput_missing_and_empty_data_dir) {
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s/does-not-exist", th_tmpdir());
    expect(arg, 2, "does-not-exist");
    char *d = mkdir_case("empty");
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 2, "no train-* files");
    expect("--data_dir=", 2, "--data_dir=");
}

TEST(badinput_no_train_files) {
    char *d = mkdir_case("only-validation");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "validation-00000-of-00001", 4, jpg, len, 1);
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 2, "no train-* files");
    free(jpg);
}

/* junk: a JPEG start, then nothing decodable (a record's framing is sound, its image is not) */
static void undecodable_jpeg(uint8_t junk[64]) {
    memcpy(junk, "\xff\xd8\xff\xe0", 4);
    memset(junk + 4, 0x5a, 60);
}

/* A text file at path: named as a shard, not a TFRecord file */
static void write_text_shard(const char *path) {
    FILE *f = fopen(path, "w");
    fputs("this is a text file, not a TFRecord shard\n", f);
    fclose(f);
}

TEST(badinput_files_that_are_not_tfrecords) {
    char *d = mkdir_case("not-tfrecords");
    char path[600];
    snprintf(path, sizeof path, "%s/train-00000-of-00001", d);
    write_text_shard(path);
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 4, "train-00000-of-00001");
    expect(arg, 4, "not a TFRecord");
}

/* Replaces the file at path by its deflate stream: gzip's framing (gzip 1) or zlib's (gzip 0), as
 * TensorFlow's TFRecordOptions(compression_type="GZIP" / "ZLIB") write it. */
static void compress_file(const char *path, int gzip) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        th_fail(__FILE__, __LINE__, "cannot read %s", path);
        return;
    }
    uint8_t *in = malloc(1 << 20);
    size_t n = fread(in, 1, 1 << 20, f);
    fclose(f);
    uLongf cap = compressBound(n) + 64;
    uint8_t *out = malloc(cap);
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, gzip ? 16 + 15 : 15, 8, Z_DEFAULT_STRATEGY);
    z.next_in = in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    f = fopen(path, "wb");
    fwrite(out, 1, z.total_out, f);
    fclose(f);
    deflateEnd(&z);
    free(in);
    free(out);
}

/* Shards compressed as TensorFlow's GZIP and ZLIB options write them: exit 4 naming the format and
 * what to do, with --skip_corrupt too (not corruption: skipping would drop the whole file). */
TEST(badinput_compressed_shards_are_named) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    for (int gzip = 0; gzip < 2; gzip++) {
        char *d = mkdir_case(gzip ? "gzip-shards" : "zlib-shards");
        write_shard(d, "train-00000-of-00002", 6, jpg, len, 1);
        write_shard(d, "train-00001-of-00002", 6, jpg, len, 1);
        char path[600], arg[700], want[700];
        snprintf(path, sizeof path, "%s/train-00001-of-00002", d);
        compress_file(path, gzip);
        snprintf(want, sizeof want, "%s: a %s-compressed file, not TFRecords", path, gzip ? "GZIP" : "ZLIB");
        snprintf(arg, sizeof arg, "--data_dir=%s", d);
        expect(arg, 4, want);
        snprintf(arg, sizeof arg, "--data_dir=%s --skip_corrupt", d);
        expect(arg, 4, want);
    }
    free(jpg);
}

/* A TFRecord shard whose first record is 35615 (0x8b1f) or 40056 (0x9c78) bytes long begins with
 * gzip's magic or a zlib header; with a record further on whose framing is corrupt and
 * --skip_corrupt it trains (that record skipped by the scan), and is not taken for a compressed
 * file. */
TEST(badinput_tfrecords_that_begin_like_compressed_files_train) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    const size_t lens[2] = {0x8b1f, 0x9c78};
    for (int c = 0; c < 2; c++) {
        char *d = mkdir_case(c ? "zlib-lookalike" : "gzip-lookalike");
        char path[600], err[256];
        snprintf(path, sizeof path, "%s/train-00000-of-00001", d);
        TfrWriter *w = tfr_writer_open(path, err, sizeof err);
        CHECK_MSG(w, "%s", err);
        if (!w) break;
        size_t first = 0, elen = 0;
        for (int k = 0; k < 8; k++) {
            /* record 0: padded (a feature the loader does not read) to exactly lens[c] bytes */
            size_t pad = k == 0 ? lens[c] - len - 64 : 0;
            uint8_t *buf = NULL;
            for (int tries = 0; tries < 8; tries++) {
                ExampleBuilder *b = example_builder_new();
                example_add_bytes(b, "image/encoded", jpg, len);
                int64_t label = 1;
                example_add_int64s(b, "image/class/label", &label, 1);
                if (pad) {
                    uint8_t *zeros = calloc(pad, 1);
                    example_add_bytes(b, "image/padding", zeros, pad);
                    free(zeros);
                }
                free(buf);
                buf = example_serialize(b, &elen);
                example_builder_free(b);
                if (k != 0 || elen == lens[c]) break;
                pad = pad + lens[c] - elen;
            }
            if (k == 0) first = elen;
            tfr_write(w, buf, elen);
            free(buf);
        }
        tfr_writer_close(w);
        CHECK_MSG(first == lens[c], "the first record is %zu bytes, want %zu", first, lens[c]);
        /* one byte of record 5's length CRC flipped: the scan skips it (resynchronising) */
        FILE *f = fopen(path, "r+b");
        const long at = (long)(first + 16 + 4 * (elen + 16) + 9);
        fseek(f, at, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(ch ^ 0x40, f);
        fclose(f);
        FILE *h = fopen(path, "rb");
        uint8_t head[2] = {0, 0};
        CHECK(fread(head, 1, 2, h) == 2);
        fclose(h);
        CHECK_MSG(head[0] == (c ? 0x78 : 0x1f) && head[1] == (c ? 0x9c : 0x8b), "the shard begins %02x %02x", head[0], head[1]);
        char cmd[900], *o = NULL;
        snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=2 --num_batches=2 --data_dir=%s --skip_corrupt", d);
        const int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0 && o && !strstr(o, "-compressed file") && strstr(o, "corrupt records skipped"), "exit %d:\n%s", rc, o);
        /* the record the scan skipped is named once, with its file and offset */
        char want[800];
        snprintf(want, sizeof want, "nvcnn: warning: %s: corrupt record at byte offset %zu (length CRC mismatch); skipped (--skip_corrupt)\n",
                 path, first + 16 + 4 * (elen + 16));
        const char *w1 = o ? strstr(o, want) : NULL;
        CHECK_MSG(w1 && !strstr(w1 + 1, want), "once, %s\n%s", want, o);
        free(o);
    }
    free(jpg);
}

TEST(badinput_truncated_shard) {
    char *d = mkdir_case("truncated");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00001", 6, jpg, len, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/train-00000-of-00001", d);
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 10) == 0);
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 4, "byte offset");
    free(jpg);
}

TEST(badinput_records_without_image) {
    char *d = mkdir_case("no-image");
    write_shard(d, "train-00000-of-00001", 8, NULL, 0, 1);
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 4, "image/encoded");
}

TEST(badinput_undecodable_jpeg_and_skip_corrupt) {
    char *d = mkdir_case("bad-jpeg");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00002", 8, jpg, len, 2);
    uint8_t junk[64];
    undecodable_jpeg(junk);
    write_shard(d, "train-00001-of-00002", 1, junk, sizeof junk, 3);
    char arg[700];
    snprintf(arg, sizeof arg, "--data_dir=%s --shuffle_buffer=0", d);
    expect(arg, 4, "train-00001-of-00002");
    /* with --skip_corrupt the record is skipped, counted and the run finishes */
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=3 --num_batches=4 --data_dir=%s "
             "--skip_corrupt",
             d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    CHECK_MSG(o && strstr(o, "corrupt records skipped") && !strstr(o, ": 0 corrupt records skipped"), "no skipped count:\n%s", o);
    CHECK_MSG(o && strstr(o, "skipped: "), "no warning naming the record:\n%s", o);
    free(o);
    /* a resumed run counts what it read itself, and says from where (9 records, 3 a step: epoch
     * 2 ends at step 6) */
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=3 --num_batches=%d --data_dir=%s "
                 "--skip_corrupt --noeval --log_dir=%s/log",
                 k ? 8 : 4, d, d);
        rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0 && o && (k == 0 || (strstr(o, "Epoch 2: ") && strstr(o, " corrupt records skipped so far (since the resume at step 4)\n"))),
                  "exit %d:\n%s", rc, o);
        free(o);
    }
    free(jpg);
}

TEST(badinput_label_out_of_range) {
    char *d = mkdir_case("bad-label");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 11); /* 1-based 11 with 10 classes */
    char arg[600];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    expect(arg, 4, "label 11");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 0); /* 0 is below the 1-based range */
    expect(arg, 4, "label 0");
    free(jpg);
}

/* Shards of two conversions in one folder, or an incomplete validation set: one line naming the
 * files, exit 4, before any training (a broken validation set would otherwise end a long run). */
TEST(badinput_shards_not_one_set) {
    char *d = mkdir_case("two-sets");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00002", 3, jpg, len, 1);
    write_shard(d, "train-00001-of-00002", 3, jpg, len, 1);
    write_shard(d, "train-00000-of-00001", 3, jpg, len, 1);
    char arg[700], want[900];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want,
             "nvcnn: error: --data_dir=%s: train-* holds two sets of shards: train-00000-of-00001 ... (1 file) and "
             "train-00000-of-00002 ... (2 files): remove one set\n",
             d);
    expect(arg, 4, want);

    d = mkdir_case("val-incomplete");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    write_shard(d, "validation-00001-of-00003", 2, jpg, len, 1);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want,
             "--data_dir=%s: validation-00000-of-00003 and validation-00002-of-00003 are missing (1 of the 3 shards of "
             "validation-*-of-00003 is here)",
             d);
    expect(arg, 4, want);
    char cmd[1024], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 %s", arg);
    th_run(cmd, &o);
    CHECK_MSG(o && !strstr(o, "Training"), "trained before refusing validation-*:\n%s", o);
    free(o);
    free(jpg);
}

/* Writes dir/name: three good records, then one whose image/encoded holds `nimg` images and whose
 * label holds `nlab` values; returns the byte offset of that record. */
static uint64_t write_shard_with_lists(const char *dir, const char *name, const uint8_t *jpg, size_t ilen, int nimg,
                                       int nlab) {
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TfrWriter *w = tfr_writer_open(path, err, sizeof err);
    if (!w) {
        th_fail(__FILE__, __LINE__, "%s", err);
        return 0;
    }
    const void *imgs[2] = {jpg, jpg};
    const size_t lens[2] = {ilen, ilen};
    const int64_t good = 1, labels[2] = {1, 2};
    uint64_t off = 0;
    for (int k = 0; k < 4; k++) {
        ExampleBuilder *b = example_builder_new();
        example_add_bytes_list(b, "image/encoded", imgs, lens, k == 3 ? (size_t)nimg : 1);
        example_add_int64s(b, "image/class/label", k == 3 ? labels : &good, k == 3 ? (size_t)nlab : 1);
        size_t len;
        uint8_t *buf = example_serialize(b, &len);
        tfr_write(w, buf, len);
        if (k < 3) off += len + TFR_HEADER_BYTES + TFR_FOOTER_BYTES;
        free(buf);
        example_builder_free(b);
    }
    tfr_writer_close(w);
    return off;
}

/* A label or an image/encoded of two values is as malformed as a missing one: exit 4 naming the
 * file and the record's offset. */
TEST(badinput_two_labels_or_two_images) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    const struct {
        const char *dir;
        int nimg, nlab;
        const char *what;
    } cases[] = {{"two-labels", 1, 2, "image/class/label holds 2 values, expected 1"},
                 {"two-images", 2, 1, "image/encoded holds 2 images, expected 1"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *d = mkdir_case(cases[i].dir);
        uint64_t off = write_shard_with_lists(d, "train-00000-of-00001", jpg, len, cases[i].nimg, cases[i].nlab);
        char arg[700], want[900];
        snprintf(arg, sizeof arg, "--data_dir=%s", d);
        snprintf(want, sizeof want, "%s/train-00000-of-00001: record at byte offset %llu: %s\n", d,
                 (unsigned long long)off, cases[i].what);
        expect(arg, 4, want);
    }
    free(jpg);
}

/* An entry named as a shard that is not a regular file is named for what it is (exit 2), not
 * passed over (a validation pass silently dropped) nor reported as a missing shard. */
TEST(badinput_shard_names_that_are_not_files) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    char arg[700], want[900], path[700];

    char *d = mkdir_case("validation-dir");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    snprintf(path, sizeof path, "%s/validation-00000-of-00001", d);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s is a directory, not a TFRecord file\n", path);
    expect(arg, 2, want);

    d = mkdir_case("train-dir");
    write_shard(d, "train-00000-of-00002", 8, jpg, len, 1);
    snprintf(path, sizeof path, "%s/train-00001-of-00002", d);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s is a directory, not a TFRecord file\n", path);
    expect(arg, 2, want);

    d = mkdir_case("train-dangling");
    write_shard(d, "train-00000-of-00002", 8, jpg, len, 1);
    snprintf(path, sizeof path, "%s/train-00001-of-00002", d);
    CHECK(symlink("no-such-shard", path) == 0);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s is a dangling symbolic link (to no-such-shard, which does not exist)\n",
             path);
    expect(arg, 2, want);

    /* a folder that is not named as a shard is not taken for one */
    d = mkdir_case("train-folder");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    snprintf(path, sizeof path, "%s/train-images", d);
    CHECK(mkdir(path, 0755) == 0);
    char cmd[1024], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --data_dir=%s", d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d beside a folder train-images:\n%s", rc, o);
    free(o);
    free(jpg);
}

/* --skip_corrupt on shards whose every record is corrupt: that is what is said (how many, in
 * which files), exit 4, not that the shards hold no records. */
TEST(badinput_skip_corrupt_every_record) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    char *d = mkdir_case("all-corrupt");
    char path[700], arg[1200], want[900];
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/train-%05d-of-00002", d, k);
        write_text_shard(path);
    }
    snprintf(arg, sizeof arg, "--data_dir=%s --skip_corrupt", d);
    snprintf(want, sizeof want,
             "nvcnn: error: %s/train-*: every record was corrupt and skipped (--skip_corrupt): 2 in all, 1 in "
             "train-00000-of-00002 and 1 in train-00001-of-00002\n",
             d);
    expect(arg, 4, want);

    /* validation-* too, before training */
    d = mkdir_case("all-corrupt-validation");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    snprintf(path, sizeof path, "%s/validation-00000-of-00001", d);
    write_text_shard(path);
    snprintf(arg, sizeof arg, "--data_dir=%s --skip_corrupt", d);
    snprintf(want, sizeof want,
             "nvcnn: error: %s/validation-*: every record was corrupt and skipped (--skip_corrupt): 1 in "
             "validation-00000-of-00001\n",
             d);
    expect(arg, 4, want);

    /* validation records whose framing is sound but whose every image is undecodable: found at
     * evaluation, after training (its checkpoint written), and said so with exit 4, not "No
     * validation images" and exit 0 */
    d = mkdir_case("all-undecodable-validation");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    uint8_t junk[64];
    undecodable_jpeg(junk);
    write_shard(d, "validation-00000-of-00001", 3, junk, sizeof junk, 1);
    snprintf(arg, sizeof arg, "--data_dir=%s --skip_corrupt --log_dir=%s/log", d, d);
    snprintf(want, sizeof want,
             "nvcnn: error: %s/validation-*: every image was corrupt and skipped (--skip_corrupt): 3 records, none evaluated\n", d);
    expect(arg, 4, want);
    snprintf(path, sizeof path, "%s/log/ckpt-2.nvcnn", d);
    CHECK_MSG(access(path, R_OK) == 0, "no checkpoint %s before the evaluation's error", path);
    free(jpg);
}

/* An evaluation while training (--eval_every_epochs, --target_top1) that meets bad validation data
 * (here a label outside --num_classes, found only when the record is decoded) stops the run at that
 * step with its checkpoint written, then exits 4 naming the record: the training is not lost. With
 * two ranks the bad record is rank 1's (records go to ranks in turn): rank 0 writes the checkpoint
 * all the same. */
TEST_CORES(badinput_validation_error_while_training_keeps_the_checkpoint, 1) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    char *d = mkdir_case("validation-label-while-training");
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    write_shard(d, "validation-00000-of-00002", 3, jpg, len, 1);
    write_shard(d, "validation-00001-of-00002", 1, jpg, len, 11); /* global record 3: rank 1 of 2 */
    char cmd[1600], want[900], ck[800], *o = NULL;
    for (int np = 1; np <= 2; np++) {
        char mr[200] = "";
        if (np == 2 && !tu_mpirun(2, mr, sizeof mr)) {
            th_skip("no MPI in this build or no mpirun (the one-rank case passed)");
            break;
        }
        /* 8 images, 4 a step over all ranks: the evaluation after step 2 */
        snprintf(cmd, sizeof cmd,
                 "%s ./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=%d --num_batches=6 --data_dir=%s "
                 "--eval_every_epochs=1 --log_dir=%s/log%d 2>&1",
                 mr, 4 / np, d, d, np);
        const int rc = th_run(cmd, &o);
        snprintf(want, sizeof want, "nvcnn: error: %s/validation-00001-of-00002: record at byte offset 0: image/class/label 11 is outside [1, 10]", d);
        snprintf(ck, sizeof ck, "Checkpoint written to %s/log%d/ckpt-2.nvcnn at step 2", d, np);
        CHECK_MSG(rc == 4 && o && strstr(o, want) && strstr(o, ck) &&
                      strstr(o, "nvcnn: error: the evaluation after step 2 failed on the validation data (above): training stopped there, "
                                "its checkpoint written"),
                  "%d rank(s): exit %d:\n%s", np, rc, o);
        free(o);
        snprintf(ck, sizeof ck, "%s/log%d/ckpt-2.nvcnn", d, np);
        CHECK_MSG(access(ck, R_OK) == 0, "%d rank(s): no %s", np, ck);
    }
    free(jpg);
}

/* Empty validation shards are refused up front, not after the whole training run. */
TEST(badinput_empty_validation_before_training) {
    char *d = mkdir_case("empty-validation");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00001", 8, jpg, len, 1);
    write_shard(d, "validation-00000-of-00001", 0, NULL, 0, 1);
    char arg[700], want[900];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s/validation-*: the 1 file holds no records\n", d);
    expect(arg, 2, want);
    char cmd[1024], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 %s", arg);
    th_run(cmd, &o);
    CHECK_MSG(o && !strstr(o, "Training"), "trained before refusing validation-*:\n%s", o);
    free(o);
    /* --forward_only evaluates nothing: validation-* is not read */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --forward_only %s", arg);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "--forward_only exited %d:\n%s", rc, o);
    free(o);

    d = mkdir_case("empty-train");
    write_shard(d, "train-00000-of-00002", 0, NULL, 0, 1);
    write_shard(d, "train-00001-of-00002", 0, NULL, 0, 1);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s/train-*: the 2 files hold no records\n", d);
    expect(arg, 2, want);
    free(jpg);
}

/* A record whose image does not decode (a JPEG cut short, as a converter that reads headers only
 * lets through) is named by file and offset and, where the Example says it as build_imagenet_data.py
 * writes it, by its source image's image/filename: control bytes escaped, UTF-8 as it is. */
TEST(badinput_undecodable_image_names_its_source_file) {
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    const char *names[] = {"n01440764_10026.JPEG", "caf\xc3\xa9\x01.jpg"};
    const char *shown[] = {"n01440764_10026.JPEG", "caf\xc3\xa9\\x01.jpg"};
    for (int i = 0; i < 2; i++) {
        char *d = mkdir_case(i ? "cut-jpeg-utf8" : "cut-jpeg");
        char path[700], err[256];
        snprintf(path, sizeof path, "%s/train-00000-of-00001", d);
        TfrWriter *w = tfr_writer_open(path, err, sizeof err);
        CHECK_MSG(w != NULL, "%s", err);
        if (!w) break;
        ExampleBuilder *b = example_builder_new();
        example_add_bytes(b, "image/encoded", jpg, len * 6 / 10);
        example_add_int64s(b, "image/class/label", &(int64_t){3}, 1);
        example_add_string(b, "image/filename", names[i]);
        size_t rl;
        uint8_t *rec = example_serialize(b, &rl);
        tfr_write(w, rec, rl);
        free(rec);
        example_builder_free(b);
        tfr_writer_close(w);
        char arg[700], want[900];
        snprintf(arg, sizeof arg, "--data_dir=%s", d);
        snprintf(want, sizeof want, "%s: record at byte offset 0: JPEG: ", path);
        expect(arg, 4, want);
        snprintf(want, sizeof want, " (image/filename %s)\n", shown[i]);
        expect(arg, 4, want);
    }
    free(jpg);
}

/* An empty file in a set of shards (a copy that stopped at its start, a shard whose writer died):
 * the set is a shard short as surely as with a missing one, which exits 4. It used to be read as a
 * shard of no records: half the data gone without a word. --skip_corrupt reads the others, saying
 * so; validation-* likewise. */
TEST(badinput_an_empty_shard_of_a_set) {
    char *d = mkdir_case("empty-shard");
    size_t len;
    uint8_t *jpg = small_jpeg(&len);
    write_shard(d, "train-00000-of-00002", 6, jpg, len, 1);
    write_shard(d, "train-00001-of-00002", 0, jpg, len, 1);
    write_shard(d, "validation-00000-of-00002", 3, jpg, len, 1);
    write_shard(d, "validation-00001-of-00002", 3, jpg, len, 1);
    char arg[900], want[900];
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want,
             "nvcnn: error: %s/train-00001-of-00002 is empty (0 bytes), one of the 2 train-* shards: a shard that was not written or "
             "copied whole (--skip_corrupt reads the others)\n",
             d);
    expect(arg, 4, want);
    snprintf(arg, sizeof arg, "--data_dir=%s --skip_corrupt 2>&1", d);
    char cmd[1400], *o = NULL;
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 %s", arg);
    int rc = th_run(cmd, &o);
    snprintf(want, sizeof want, "nvcnn: warning: %s/train-00001-of-00002 is empty (0 bytes): --skip_corrupt reads the other 1 shard\n", d);
    CHECK_MSG(rc == 0 && o && strstr(o, want) && strstr(o, "Num images:  6\n"), "exit %d:\n%s", rc, o);
    free(o);
    char p[700];
    snprintf(p, sizeof p, "%s/train-00001-of-00002", d);
    unlink(p);
    snprintf(p, sizeof p, "%s/train-00000-of-00002", d);
    char q[700];
    snprintf(q, sizeof q, "%s/train-00000-of-00001", d);
    CHECK(rename(p, q) == 0);
    snprintf(p, sizeof p, "%s/validation-00001-of-00002", d);
    CHECK(truncate(p, 0) == 0);
    snprintf(arg, sizeof arg, "--data_dir=%s", d);
    snprintf(want, sizeof want, "nvcnn: error: %s/validation-00001-of-00002 is empty (0 bytes), one of the 2 validation-* shards", d);
    expect(arg, 4, want);
    /* with --skip_corrupt: said once, though validation-* is opened at the start and for the evaluation */
    snprintf(cmd, sizeof cmd, "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=4 --num_batches=2 --data_dir=%s --skip_corrupt 2>&1", d);
    rc = th_run(cmd, &o);
    int said = 0;
    for (const char *p2 = o; p2 && (p2 = strstr(p2, "validation-00001-of-00002 is empty (0 bytes): --skip_corrupt reads")); p2++) said++;
    CHECK_MSG(rc == 0 && said == 1 && strstr(o, "Evaluating on 3 validation images"), "exit %d, said %d times:\n%s", rc, said, o);
    free(o);
    free(jpg);
}
