/* test_mkrecords.c: nvcnn-mkrecords end to end: an IDX pair and a folder tree converted into
 * shards, read back with the TFRecord reader and the Example parser, compared with the input
 * (labels 1-based, pixels, bytes of copied files); determinism; errors. Runs the binary
 * ./nvcnn-mkrecords built by `make` (or $NVCNN_MKRECORDS). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "harness.h"
#include "testutil.h"
#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"
#include "util.h"

static const char *tool(void) {
    const char *t = getenv("NVCNN_MKRECORDS");
    return t && *t ? t : "./nvcnn-mkrecords";
}

static int mk(const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", tool(), args);
    return th_run(cmd, out);
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#define NIMG 23
#define ROWS 7
#define COLS 5

/* Images: smooth gradients shifted per image (so JPEG stays close); labels i % 10. */
static void idx_pixels(uint8_t *px) {
    for (int i = 0; i < NIMG; i++)
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < COLS; x++) px[(i * ROWS + y) * COLS + x] = (uint8_t)(40 + 8 * i + 10 * y + 6 * x);
}

static void write_idx(const char *dir, char *img_path, char *lab_path, size_t plen) {
    uint8_t px[NIMG * ROWS * COLS], hdr[16], lab[NIMG], lhdr[8];
    idx_pixels(px);
    snprintf(img_path, plen, "%s/images-idx3-ubyte.gz", dir);
    snprintf(lab_path, plen, "%s/labels-idx1-ubyte", dir);
    be32(hdr, 0x803);
    be32(hdr + 4, NIMG);
    be32(hdr + 8, ROWS);
    be32(hdr + 12, COLS);
    gzFile g = gzopen(img_path, "wb");
    gzwrite(g, hdr, 16);
    gzwrite(g, px, sizeof px);
    gzclose(g);
    for (int i = 0; i < NIMG; i++) lab[i] = (uint8_t)(i % 10);
    be32(lhdr, 0x801);
    be32(lhdr + 4, NIMG);
    FILE *f = xfopen(lab_path, "wb");
    fwrite(lhdr, 1, 8, f);
    fwrite(lab, 1, NIMG, f);
    fclose(f);
}

/* Reads every record of <dir>/<subset>-0000k-of-0000n, calling fn on each; returns the count and
 * fills per-shard counts. */
static int read_shards(const char *dir, const char *subset, int nshards, int *per_shard,
                       void (*fn)(const ExampleMsg *, void *), void *arg) {
    int total = 0;
    for (int s = 0; s < nshards; s++) {
        char path[700], err[512];
        snprintf(path, sizeof path, "%s/%s-%05d-of-%05d", dir, subset, s, nshards);
        TfrReader *r = tfr_open(path, 0, err, sizeof err);
        CHECK_MSG(r != NULL, "%s", err);
        if (!r) continue;
        TfrRecord rec;
        int st, n = 0;
        while ((st = tfr_next(r, &rec)) == TFR_OK) {
            ExampleMsg *m = example_unpack(rec.data, rec.len);
            CHECK(m != NULL);
            if (m) fn(m, arg);
            example_msg_free(m);
            n++;
        }
        CHECK_MSG(st == TFR_EOF, "%s", tfr_error(r));
        tfr_close(r);
        if (per_shard) per_shard[s] = n;
        total += n;
    }
    return total;
}

typedef struct IdxCheck {
    int seen[NIMG];
    int max_err;
    int png;
} IdxCheck;

static void check_idx_record(const ExampleMsg *m, void *arg) {
    IdxCheck *c = arg;
    uint8_t px[NIMG * ROWS * COLS];
    idx_pixels(px);
    size_t len, n;
    const uint8_t *fname = example_bytes(m, "image/filename", 0, &len);
    const uint8_t *colon = memchr(fname, ':', len);
    CHECK(colon != NULL);
    if (!colon) return;
    char num[16]; /* "images-idx3-ubyte.gz:<i>", not NUL terminated */
    int i;
    size_t nl = len - (size_t)(colon + 1 - fname);
    memcpy(num, colon + 1, nl < 15 ? nl : 15);
    num[nl < 15 ? nl : 15] = 0;
    i = atoi(num);
    CHECK(i >= 0 && i < NIMG);
    if (i < 0 || i >= NIMG) return;
    c->seen[i]++;
    CHECK(example_feature(m, "image/class/label", &n) == 3 && example_int64(m, "image/class/label", 0) == i % 10 + 1);
    CHECK(example_int64(m, "image/height", 0) == ROWS && example_int64(m, "image/width", 0) == COLS);
    const uint8_t *enc = example_bytes(m, "image/encoded", 0, &len);
    CHECK(image_sniff(enc, len) == (c->png ? IMG_PNG : IMG_JPEG));
    uint8_t *rgb;
    int w, h;
    char err[256];
    CHECK_MSG(image_decode_rgb(enc, len, &rgb, &w, &h, err, sizeof err) == 0, "%s", err);
    CHECK(w == COLS && h == ROWS);
    if (w != COLS || h != ROWS) return;
    for (int p = 0; p < ROWS * COLS; p++)
        for (int k = 0; k < 3; k++) {
            int d = abs((int)rgb[3 * p + k] - (int)px[i * ROWS * COLS + p]);
            if (d > c->max_err) c->max_err = d;
        }
    free(rgb);
}

TEST(mkrecords_idx_round_trip_png_and_jpeg) {
    char dir[600], img[700], lab[700], out[700], args[3000], *o;
    snprintf(dir, sizeof dir, "%s/mk-idx", th_tmpdir());
    mkdir(dir, 0755);
    write_idx(dir, img, lab, sizeof img);
    for (int png = 1; png >= 0; png--) {
        snprintf(out, sizeof out, "%s/out-%s", dir, png ? "png" : "jpeg");
        snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=3 --format=%s --quality=95",
                 img, lab, out, png ? "png" : "jpeg");
        int rc = mk(args, &o);
        CHECK_MSG(rc == 0, "rc %d: %s", rc, o);
        free(o);
        IdxCheck c = {.png = png};
        int per[3];
        CHECK(read_shards(out, "train", 3, per, check_idx_record, &c) == NIMG);
        CHECK(per[0] == 7 && per[1] == 8 && per[2] == 8); /* 23 * k / 3 boundaries */
        for (int i = 0; i < NIMG; i++) CHECK_MSG(c.seen[i] == 1, "image %d seen %d times", i, c.seen[i]);
        if (png)
            CHECK_MSG(c.max_err == 0, "PNG is lossless, max error %d", c.max_err);
        else
            /* quality 95, decoded as nvcnn does (JDCT_IFAST): the fast DCT adds a few levels on
             * the sharp synthetic pattern, up to 14 seen */
            CHECK_MSG(c.max_err <= 16, "JPEG max error %d", c.max_err);
    }
    /* deterministic: the same command writes the same bytes; shuffled: not in IDX order */
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/again --shards=3", img, lab, dir);
    CHECK(mk(args, NULL) == 0);
    for (int s = 0; s < 3; s++) {
        char p1[800], p2[800];
        size_t l1, l2;
        snprintf(p1, sizeof p1, "%s/out-png/train-%05d-of-00003", dir, s);
        snprintf(p2, sizeof p2, "%s/again/train-%05d-of-00003", dir, s);
        uint8_t *a = tu_read_file(p1, &l1), *b = tu_read_file(p2, &l2);
        CHECK(a && b && l1 == l2 && memcmp(a, b, l1) == 0);
        free(a);
        free(b);
    }
    /* --subset names the shards, --class_names fills image/class/text */
    snprintf(args, sizeof args,
             "--idx_images=%s --idx_labels=%s --output_dir=%s/val --shards=1 --subset=validation "
             "--class_names=zero,one,two,three,four,five,six,seven,eight,nine",
             img, lab, dir);
    CHECK(mk(args, NULL) == 0);
    char p[800];
    snprintf(p, sizeof p, "%s/val/validation-00000-of-00001", dir);
    TfrReader *r = tfr_open(p, 0, args, sizeof args);
    CHECK(r != NULL);
    if (r) {
        TfrRecord rec;
        int n = 0;
        while (tfr_next(r, &rec) == TFR_OK) {
            ExampleImage e;
            char err[256];
            CHECK(example_parse_image(rec.data, rec.len, &e, err, sizeof err) == 0);
            static const char *names[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
            CHECK(e.label >= 1 && e.label <= 10);
            if (e.label >= 1 && e.label <= 10)
                CHECK(e.text_len == strlen(names[e.label - 1]) && memcmp(e.text, names[e.label - 1], e.text_len) == 0);
            example_image_free(&e);
            n++;
        }
        CHECK(n == NIMG);
        tfr_close(r);
    }
}

typedef struct TreeCheck {
    const char *root;
    int n, bad;
} TreeCheck;

/* The record's bytes equal the file <root>/<text>/<filename>; label matches the sorted class. */
static void check_tree_record(const ExampleMsg *m, void *arg) {
    TreeCheck *c = arg;
    size_t tl, fl, el;
    const uint8_t *text = example_bytes(m, "image/class/text", 0, &tl);
    const uint8_t *fname = example_bytes(m, "image/filename", 0, &fl);
    const uint8_t *enc = example_bytes(m, "image/encoded", 0, &el);
    char path[1200];
    snprintf(path, sizeof path, "%s/%.*s/%.*s", c->root, (int)tl, (const char *)text, (int)fl, (const char *)fname);
    size_t len;
    uint8_t *file = tu_read_file(path, &len);
    CHECK_MSG(file && len == el && memcmp(file, enc, len) == 0, "%s differs from its record", path);
    free(file);
    int64_t want = (tl == 5 && memcmp(text, "apple", 5) == 0) ? 1 : (tl == 4 && memcmp(text, "kiwi", 4) == 0) ? 2 : 3;
    CHECK(example_int64(m, "image/class/label", 0) == want);
    size_t sl;
    const uint8_t *syn = example_bytes(m, "image/class/synset", 0, &sl);
    CHECK(sl == tl && memcmp(syn, text, tl) == 0);
    c->n++;
}

static void tree_file(const char *dir, const char *cls, const char *name, int v, int jpeg) {
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, cls);
    mkdir(p, 0755);
    uint8_t px[8 * 9 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(v * 17 + (int)i);
    uint8_t *enc;
    size_t len;
    int rc = jpeg ? image_encode_jpeg(px, 9, 8, 3, 90, &enc, &len) : image_encode_png(px, 9, 8, 3, &enc, &len);
    CHECK(rc == 0);
    snprintf(p, sizeof p, "%s/%s/%s", dir, cls, name);
    FILE *f = xfopen(p, "wb");
    fwrite(enc, 1, len, f);
    fclose(f);
    free(enc);
}

TEST(mkrecords_folder_tree_and_validation) {
    char root[600], val[700], out[700], args[3000], *o;
    snprintf(root, sizeof root, "%s/mk-tree", th_tmpdir());
    snprintf(val, sizeof val, "%s/mk-tree-val", th_tmpdir());
    snprintf(out, sizeof out, "%s/mk-tree-out", th_tmpdir());
    mkdir(root, 0755);
    mkdir(val, 0755);
    /* classes in non-sorted creation order: labels follow the sorted names */
    const char *cls[] = {"pear", "apple", "kiwi"};
    int k = 0;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 4 + c; i++) {
            char name[32];
            snprintf(name, sizeof name, "img%d.%s", i, (i % 2) ? "jpg" : "png");
            tree_file(root, cls[c], name, k++, i % 2);
        }
    tree_file(val, "kiwi", "v0.png", 99, 0);
    tree_file(val, "apple", "v1.jpg", 98, 1);
    snprintf(args, sizeof args, "--input_dir=%s --validation_dir=%s --output_dir=%s --shards=2 --validation_shards=1",
             root, val, out);
    int rc = mk(args, &o);
    CHECK_MSG(rc == 0, "rc %d: %s", rc, o);
    free(o);
    TreeCheck c = {.root = root};
    CHECK(read_shards(out, "train", 2, NULL, check_tree_record, &c) == 15);
    CHECK(c.n == 15);
    TreeCheck v = {.root = val};
    CHECK(read_shards(out, "validation", 1, NULL, check_tree_record, &v) == 2);

    /* a split instead of a validation folder */
    snprintf(args, sizeof args, "--input_dir=%s --validation_split=0.2 --output_dir=%s/split --shards=1", root, out);
    CHECK(mk(args, NULL) == 0);
    char sub[800];
    snprintf(sub, sizeof sub, "%s/split", out);
    TreeCheck s1 = {.root = root}, s2 = {.root = root};
    CHECK(read_shards(sub, "train", 1, NULL, check_tree_record, &s1) == 12);
    CHECK(read_shards(sub, "validation", 1, NULL, check_tree_record, &s2) == 3);

    /* a validation class that training lacks, and a file that is not an image */
    tree_file(val, "mango", "m.png", 1, 0);
    snprintf(args, sizeof args, "--input_dir=%s --validation_dir=%s --output_dir=%s/x", root, val, out);
    CHECK(mk(args, &o) == 2 && strstr(o, "mango"));
    free(o);
    snprintf(sub, sizeof sub, "%s/kiwi/notes.txt", root);
    FILE *f = xfopen(sub, "w");
    fputs("not an image\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s/y --shards=1", root, out);
    CHECK(mk(args, &o) == 4 && strstr(o, "notes.txt: not a JPEG or PNG image"));
    free(o);
}

TEST(mkrecords_errors_and_help) {
    char *o;
    CHECK(mk("--help", &o) == 0);
    const char *flags[] = {"--output_dir", "--input_dir", "--validation_dir", "--validation_split", "--idx_images",
                           "--idx_labels", "--shards", "--format", "--quality", "--subset", "--seed"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) CHECK_MSG(strstr(o, flags[i]), "--help lacks %s", flags[i]);
    free(o);
    /* the tool's errors are its own: one line beginning with its name */
    CHECK(mk("--input_dir=/tmp", &o) == 2);
    CHECK_MSG(o && strcmp(o, "nvcnn-mkrecords: error: --output_dir is required (see --help)\n") == 0, "got: %s", o);
    free(o);
    CHECK(mk("--output_dir=/tmp/x --format=gif --input_dir=/tmp", &o) == 2 && strstr(o, "--format=gif"));
    free(o);
    CHECK(mk("--output_dir=/tmp/x --bogus=1", &o) == 2 && strstr(o, "unknown flag --bogus"));
    free(o);
    CHECK(mk("--output_dir=/tmp/x --input_dir=/nonexistent-dir", &o) == 2 && strstr(o, "/nonexistent-dir"));
    free(o);

    /* a truncated IDX file names the file and the offset */
    char dir[600], img[700], lab[700], args[3000], trunc[800];
    snprintf(dir, sizeof dir, "%s/mk-bad", th_tmpdir());
    mkdir(dir, 0755);
    write_idx(dir, img, lab, sizeof img);
    snprintf(trunc, sizeof trunc, "%s/short-idx1-ubyte", dir);
    size_t len;
    uint8_t *b = tu_read_file(lab, &len);
    FILE *f = xfopen(trunc, "wb");
    fwrite(b, 1, len - 3, f);
    fclose(f);
    free(b);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/o", img, trunc, dir);
    CHECK(mk(args, &o) == 4);
    char want[900];
    snprintf(want, sizeof want, "%s: truncated IDX data at byte offset %d", trunc, 8 + NIMG - 3);
    CHECK_MSG(strstr(o, want) != NULL, "got: %s", o);
    free(o);
    /* images and labels swapped */
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/o", lab, img, dir);
    CHECK(mk(args, &o) == 4 && strstr(o, "dimensions"));
    free(o);
    /* more shards than images */
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/o --shards=24", img, lab, dir);
    CHECK(mk(args, &o) == 2 && strstr(o, "24 shards"));
    free(o);
}
