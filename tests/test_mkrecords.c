/* test_mkrecords.c: nvcnn-mkrecords end to end: an IDX pair and a folder tree converted into
 * shards, read back with the TFRecord reader and the Example parser, compared with the input
 * (labels 1-based, pixels, bytes of copied files); determinism; errors. Runs the binary
 * ./nvcnn-mkrecords built by `make` (or $NVCNN_MKRECORDS). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
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
    /* a file with an image's extension that is not an image: exit 4 naming it */
    snprintf(sub, sizeof sub, "%s/kiwi/notes.png", root);
    FILE *f = xfopen(sub, "w");
    fputs("not an image\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s/y --shards=1", root, out);
    CHECK(mk(args, &o) == 4 && strstr(o, "notes.png: not a JPEG or PNG image"));
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
    /* flags of IDX input given with a folder tree (whose files are copied as they are) are refused,
     * not ignored */
    const char *idx_only[] = {"--quality=80", "--format=jpeg", "--class_names=a,b"};
    for (int i = 0; i < 3; i++) {
        char a[200], w[100];
        snprintf(a, sizeof a, "--output_dir=/tmp/x --input_dir=/tmp %s", idx_only[i]);
        snprintf(w, sizeof w, "error: --%.*s applies to --idx_images (", (int)(strchr(idx_only[i], '=') - idx_only[i] - 2),
                 idx_only[i] + 2);
        int rc = mk(a, &o);
        CHECK_MSG(rc == 2 && o && strstr(o, w), "%s: rc %d: %s", idx_only[i], rc, o);
        free(o);
    }

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
    /* --class_names too short: the message names the label byte and the label it becomes, which
     * are one apart (IDX labels are 0-based, the records' 1-based) */
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/o --class_names=a,b", img, lab, dir);
    CHECK(mk(args, &o) == 4 && o);
    int byte = -1, label = -1;
    const char *at = o ? strstr(o, "the label byte ") : NULL;
    CHECK_MSG(at && sscanf(at, "the label byte %d at byte offset %*d (label %d in the records)", &byte, &label) == 2 &&
                  label == byte + 1 && label > 2 && strstr(o, "has no name in --class_names (2 names, for labels 1 to 2)"),
              "got: %s", o);
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

/* ---- the output folder, failures, signals, flags ------------------------------------------- */

/* The names in dir, hidden ones included (but for the converter's lock file, which stays), sorted
 * and joined by spaces ("" when dir is missing). */
static char *listing(const char *dir) {
    char **v = NULL;
    int n = 0;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".nvcnn-mkrecords.lock"))
                continue;
            v = realloc(v, (size_t)(n + 1) * sizeof *v);
            v[n++] = strdup(e->d_name);
        }
        closedir(d);
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(v[j], v[i]) < 0) {
                char *t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(v[i]) + 1;
    char *s = calloc(1, len);
    for (int i = 0; i < n; i++) {
        if (i) strcat(s, " ");
        strcat(s, v[i]);
        free(v[i]);
    }
    free(v);
    return s;
}

/* "<subset>-00000-of-0000N ... <subset>-0000(N-1)-of-0000N" as listing() shows a set. */
static void set_names(char *buf, size_t len, const char *subset, int n) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < n; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s-%05d-of-%05d", k ? " " : "", subset, k, n);
}

/* 1 if s is one line ending in a newline. */
static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == 0;
}

/* 1 if the files a and b hold the same bytes. */
static int same_file(const char *a, const char *b) {
    size_t la, lb;
    uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static void count_record(const ExampleMsg *m, void *arg) {
    (void)m;
    (*(int *)arg)++;
}

/* A tree of 3 classes x 4 images under <tmp>/<name>. */
static void small_tree(char *root, size_t len, const char *name) {
    snprintf(root, len, "%s/%s", th_tmpdir(), name);
    mkdir(root, 0755);
    const char *cls[] = {"apple", "kiwi", "pear"};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 4; i++) {
            char f[32];
            snprintf(f, sizeof f, "i%d.%s", i, i % 2 ? "jpg" : "png");
            tree_file(root, cls[c], f, 4 * c + i, i % 2);
        }
}

/* The report's case: a conversion with a split, then the default one into the same folder. The
 * second is refused, naming what is there; --overwrite replaces the whole earlier set, the old
 * validation-* included, so that no validation image is trained on. */
TEST(mkrecords_refuses_earlier_shards_and_overwrite_replaces_them) {
    char root[600], out[700], args[3000], want[3000], names[2000], *o;
    small_tree(root, sizeof root, "mk-sets-tree");
    snprintf(out, sizeof out, "%s/mk-sets-out", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=2 --validation_split=0.25", root, out);
    CHECK(mk(args, NULL) == 0);
    char *before = listing(out);
    CHECK_MSG(!strcmp(before, "train-00000-of-00002 train-00001-of-00002 validation-00000-of-00002 "
                              "validation-00001-of-00002"),
              "got: %s", before);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: --output_dir=%s holds the shards of an earlier conversion: train-00000-of-00002 "
             "... (2 files) and validation-00000-of-00002 ... (2 files); --overwrite replaces them, or choose another "
             "--output_dir\n",
             out);
    const char *again[] = {"", "--shards=2 --validation_split=0.25"}; /* another set, and the same one again */
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s %s", root, out, again[k]);
        int rc = mk(args, &o);
        CHECK_MSG(rc == 2 && o && !strcmp(o, want), "rc %d: %s", rc, o);
        free(o);
        char *now = listing(out);
        CHECK_MSG(!strcmp(now, before), "the refused run changed the folder: %s", now);
        free(now);
    }
    snprintf(args, sizeof args, "--input_dir %s --output_dir %s --overwrite", root, out);
    int rc = mk(args, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "wrote 12 records to ") && strstr(o, "removed 4 shards of the earlier "
                                                                               "conversion (--overwrite)"),
              "rc %d: %s", rc, o);
    free(o);
    char *after = listing(out);
    set_names(names, sizeof names, "train", 8);
    CHECK_MSG(!strcmp(after, names), "got: %s", after);
    int n = 0;
    CHECK(read_shards(out, "train", 8, NULL, count_record, &n) == 12);
    free(before);
    free(after);

    /* a file named like a shard but not one: refused even with --overwrite, and left alone */
    char stray[800];
    snprintf(stray, sizeof stray, "%s/train-notes.txt", out);
    FILE *f = xfopen(stray, "w");
    fputs("notes\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --overwrite", root, out);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: --output_dir=%s holds train-notes.txt, not a shard but named like one: nvcnn "
             "would read it with the shards; move it away\n",
             out);
    CHECK_MSG(rc == 2 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    CHECK(access(stray, F_OK) == 0);
}

/* An IDX run owns its --subset only: the training pair and the test pair go into one folder in two
 * runs (as make data does), and --overwrite of one leaves the other alone. */
TEST(mkrecords_idx_runs_own_their_subset) {
    char dir[600], img[700], lab[700], out[700], args[3000], want[2000], *o;
    snprintf(dir, sizeof dir, "%s/mk-own", th_tmpdir());
    mkdir(dir, 0755);
    write_idx(dir, img, lab, sizeof img);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=2", img, lab, out);
    CHECK(mk(args, NULL) == 0);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=1 --subset=validation", img,
             lab, out);
    CHECK(mk(args, NULL) == 0);
    char val[800], keep[800];
    snprintf(val, sizeof val, "%s/validation-00000-of-00001", out);
    snprintf(keep, sizeof keep, "%s/kept", dir);
    size_t len;
    uint8_t *b = tu_read_file(val, &len);
    FILE *f = xfopen(keep, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
    free(b);

    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=3", img, lab, out);
    int rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: --output_dir=%s holds the shards of an earlier conversion: train-00000-of-00002 "
             "... (2 files); --overwrite replaces them, or choose another --output_dir\n",
             out);
    CHECK_MSG(rc == 2 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=3 --overwrite", img, lab, out);
    CHECK(mk(args, NULL) == 0);
    char *now = listing(out);
    CHECK_MSG(!strcmp(now, "train-00000-of-00003 train-00001-of-00003 train-00002-of-00003 validation-00000-of-00001"),
              "got: %s", now);
    free(now);
    CHECK(same_file(val, keep));
}

/* An image that does not decode halfway through: exit 4 naming it, and no shard of the run and no
 * temporary file left; over an earlier set with --overwrite, that set is left as it was. */
TEST(mkrecords_failure_leaves_the_folder_as_it_was) {
    char root[600], out[700], args[3000], bad[800], want[1200], *o;
    small_tree(root, sizeof root, "mk-fail-tree");
    snprintf(bad, sizeof bad, "%s/kiwi/zz-broken.jpg", root);
    FILE *f = xfopen(bad, "wb");
    fputs("\xff\xd8 this is not really a JPEG\n", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/mk-fail-out", th_tmpdir());
    /* one image per shard: in the default seed's order the broken image is in shard 1 of 13, so
     * shard 0 is complete (and a temporary file open) when it fails */
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=13", root, out);
    int rc = mk(args, &o);
    snprintf(want, sizeof want, "nvcnn-mkrecords: error: %s: ", bad);
    CHECK_MSG(rc == 4 && o && !strncmp(o, want, strlen(want)) && one_line(o), "rc %d: %s", rc, o);
    free(o);
    char *now = listing(out);
    CHECK_MSG(!strcmp(now, ""), "left behind: %s", now);
    free(now);
    CHECK_MSG(access(out, F_OK) != 0, "%s: the folder the failed run created is left behind", out);
    /* folders it created on the way are removed too, those that were there kept */
    char deep[800];
    snprintf(deep, sizeof deep, "%s/mk-fail-new/a/b", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=13", root, deep);
    CHECK(mk(args, NULL) == 4);
    snprintf(deep, sizeof deep, "%s/mk-fail-new", th_tmpdir());
    CHECK_MSG(access(deep, F_OK) != 0 && access(th_tmpdir(), F_OK) == 0, "%s left behind", deep);

    /* the same failure with --overwrite over a complete earlier set */
    unlink(bad);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=2 --validation_split=0.25", root, out);
    CHECK(mk(args, NULL) == 0);
    char copy[800], cmd[2000];
    snprintf(copy, sizeof copy, "%s/mk-fail-copy", th_tmpdir());
    snprintf(cmd, sizeof cmd, "cp -r %s %s", out, copy);
    CHECK(th_run(cmd, NULL) == 0);
    f = xfopen(bad, "wb");
    fputs("\xff\xd8 this is not really a JPEG\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=13 --overwrite", root, out);
    CHECK(mk(args, NULL) == 4);
    char *a = listing(out), *b = listing(copy);
    CHECK_MSG(!strcmp(a, b) && !strcmp(a, "train-00000-of-00002 train-00001-of-00002 validation-00000-of-00002 "
                                          "validation-00001-of-00002"),
              "now: %s, before: %s", a, b);
    free(a);
    free(b);
    const char *names[] = {"train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00002",
                           "validation-00001-of-00002"};
    for (int k = 0; k < 4; k++) {
        char p1[900], p2[900];
        snprintf(p1, sizeof p1, "%s/%s", out, names[k]);
        snprintf(p2, sizeof p2, "%s/%s", copy, names[k]);
        CHECK_MSG(same_file(p1, p2), "%s changed", p1);
    }
    unlink(bad);
}

/* n noisy 28x28 images (PNG compresses noise slowly: a conversion that takes a while) and labels. */
static void write_big_idx(const char *img, const char *lab, int n) {
    uint8_t hdr[16];
    be32(hdr, 0x803);
    be32(hdr + 4, (uint32_t)n);
    be32(hdr + 8, 28);
    be32(hdr + 12, 28);
    FILE *f = xfopen(img, "wb");
    fwrite(hdr, 1, 16, f);
    Rng r;
    rng_seed(&r, 7);
    uint8_t px[28 * 28];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 28 * 28; k++) px[k] = (uint8_t)rng_u64(&r);
        fwrite(px, 1, sizeof px, f);
    }
    fclose(f);
    f = xfopen(lab, "wb");
    be32(hdr, 0x801);
    be32(hdr + 4, (uint32_t)n);
    fwrite(hdr, 1, 8, f);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    fclose(f);
}

/* 1 if dir holds a file whose name ends in ".tmp". */
static int has_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) found = 1;
    }
    closedir(d);
    return found;
}

/* Starts the tool on the IDX pair into out (with `extra`, "" or one flag), waits until its first
 * temporary shard exists, sends `sig` and returns the wait status. */
static int convert_and_signal(const char *img, const char *lab, const char *out, const char *extra, int sig) {
    char a1[800], a2[800], a3[800];
    snprintf(a1, sizeof a1, "--idx_images=%s", img);
    snprintf(a2, sizeof a2, "--idx_labels=%s", lab);
    snprintf(a3, sizeof a3, "--output_dir=%s", out);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
        if (*extra)
            execl(tool(), tool(), a1, a2, a3, "--shards=2", extra, (char *)NULL);
        else
            execl(tool(), tool(), a1, a2, a3, "--shards=2", (char *)NULL);
        _exit(98);
    }
    int st = 0, seen = 0;
    for (int i = 0; i < 20000 && !seen; i++) { /* up to 20 s */
        if (waitpid(pid, &st, WNOHANG) == pid) return st; /* ended before it was signalled */
        seen = has_tmp(out);
        if (!seen) usleep(1000);
    }
    kill(pid, seen ? sig : SIGKILL);
    waitpid(pid, &st, 0);
    return st;
}

/* SIGTERM or SIGINT during a conversion: the process ends by the signal, its temporary file is
 * removed, and the folder holds what it held before (nothing, or the earlier set with --overwrite). */
TEST(mkrecords_signal_removes_temporary_files) {
    char dir[600], img[700], lab[700], out[700], args[3000];
    snprintf(dir, sizeof dir, "%s/mk-signal", th_tmpdir());
    mkdir(dir, 0755);
    snprintf(img, sizeof img, "%s/big-idx3-ubyte", dir);
    snprintf(lab, sizeof lab, "%s/big-idx1-ubyte", dir);
    write_big_idx(img, lab, 40000);
    snprintf(out, sizeof out, "%s/out-term", dir);
    int st = convert_and_signal(img, lab, out, "", SIGTERM);
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "not ended by SIGTERM mid-run: status %#x", st);
    char *now = listing(out);
    CHECK_MSG(!strcmp(now, ""), "left behind: %s", now);
    free(now);
    CHECK_MSG(access(out, F_OK) != 0, "%s: the folder the failed run created is left behind", out);

    /* an earlier set, then an interrupted --overwrite: the earlier set stays, whole */
    char small_img[700], small_lab[700];
    write_idx(dir, small_img, small_lab, sizeof small_img);
    snprintf(out, sizeof out, "%s/out-int", dir);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s --shards=2", small_img, small_lab, out);
    CHECK(mk(args, NULL) == 0);
    char p0[800], p1[800], c0[800], c1[800];
    snprintf(p0, sizeof p0, "%s/train-00000-of-00002", out);
    snprintf(p1, sizeof p1, "%s/train-00001-of-00002", out);
    snprintf(c0, sizeof c0, "%s/copy0", dir);
    snprintf(c1, sizeof c1, "%s/copy1", dir);
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "cp %s %s && cp %s %s", p0, c0, p1, c1);
    CHECK(th_run(cmd, NULL) == 0);
    st = convert_and_signal(img, lab, out, "--overwrite", SIGINT);
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "not ended by SIGINT mid-run: status %#x", st);
    now = listing(out);
    CHECK_MSG(!strcmp(now, "train-00000-of-00002 train-00001-of-00002"), "got: %s", now);
    free(now);
    CHECK(same_file(p0, c0) && same_file(p1, c1));
}

/* Both flag forms (--flag=value and --flag value) give the same shards; switches take no value. */
TEST(mkrecords_flag_forms) {
    char dir[600], img[700], lab[700], args[3000], want[1000], *o, *h;
    snprintf(dir, sizeof dir, "%s/mk-forms", th_tmpdir());
    mkdir(dir, 0755);
    write_idx(dir, img, lab, sizeof img);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/eq --shards=3 --format=jpeg --seed=9",
             img, lab, dir);
    CHECK(mk(args, NULL) == 0);
    snprintf(args, sizeof args, "--idx_images %s --idx_labels %s --output_dir %s/sp --shards 3 --format jpeg --seed 9",
             img, lab, dir);
    int rc = mk(args, &o);
    CHECK_MSG(rc == 0, "rc %d: %s", rc, o);
    free(o);
    for (int k = 0; k < 3; k++) {
        char a[900], b[900];
        snprintf(a, sizeof a, "%s/eq/train-%05d-of-00003", dir, k);
        snprintf(b, sizeof b, "%s/sp/train-%05d-of-00003", dir, k);
        CHECK_MSG(same_file(a, b), "%s and %s differ", a, b);
    }
    CHECK(mk("-h", &h) == 0 && mk("--help", &o) == 0 && h && o && !strcmp(h, o) && strstr(o, "--overwrite") &&
          strstr(o, "--strict") && strstr(o, "--flag value"));
    free(h);
    free(o);
    snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/x --shards", img, lab, dir);
    rc = mk(args, &o);
    CHECK_MSG(rc == 2 && o && !strcmp(o, "nvcnn-mkrecords: error: --shards needs a value: --shards=... or --shards ... "
                                         "(see --help)\n"),
              "rc %d: %s", rc, o);
    free(o);
    snprintf(args, sizeof args, "--output_dir %s/x --idx_images --idx_labels=%s", dir, lab);
    CHECK(mk(args, &o) == 2 && o && strstr(o, "--idx_images needs a value"));
    free(o);
    CHECK(mk("--output_dir /tmp/x --overwrite=yes", &o) == 2 && o &&
          !strcmp(o, "nvcnn-mkrecords: error: --overwrite takes no value (got --overwrite=yes)\n"));
    free(o);
    CHECK(mk("--output_dir /tmp/x --bogus 1", &o) == 2 && o && strstr(o, "unknown flag --bogus"));
    free(o);
    snprintf(want, sizeof want, "nvcnn-mkrecords: error: --shards=0: expected an integer in [1, 99999]\n");
    CHECK(mk("--output_dir /tmp/x --shards 0", &o) == 2 && o && !strcmp(o, want));
    free(o);
}

/* Files of a folder tree without an image extension are skipped and counted; --strict refuses
 * them; extensions in any case count; hidden files are not looked at. */
TEST(mkrecords_skips_non_image_files) {
    char root[600], out[700], args[3000], want[2000], p[900], *o;
    snprintf(root, sizeof root, "%s/mk-skip", th_tmpdir());
    mkdir(root, 0755);
    tree_file(root, "ant", "a0.png", 1, 0);
    tree_file(root, "ant", "a1.jpeg", 2, 1);
    tree_file(root, "bee", "B0.JPG", 3, 1);
    tree_file(root, "bee", "b1.Png", 4, 0);
    const char *junk[] = {"ant/README.txt", "bee/notes.TXT", "bee/.DS_Store"};
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s", root, junk[k]);
        FILE *f = xfopen(p, "w");
        fputs("not an image\n", f);
        fclose(f);
    }
    snprintf(out, sizeof out, "%s/mk-skip-out", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=1", root, out);
    int rc = mk(args, &o);
    snprintf(want, sizeof want,
             "wrote 4 records to %s/train-*-of-00001 (1 shard)\nskipped 2 non-image files (by extension: not .jpg, "
             ".jpeg or .png; --strict refuses them): %s/ant/README.txt ...\n",
             out, root);
    CHECK_MSG(rc == 0 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    int n = 0;
    CHECK(read_shards(out, "train", 1, NULL, count_record, &n) == 4);

    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s-strict --shards=1 --strict", root, out);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: %s/ant/README.txt: not a .jpg, .jpeg or .png file (--strict; without it, it is "
             "skipped)\n",
             root);
    CHECK_MSG(rc == 4 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    snprintf(p, sizeof p, "%s-strict", out);
    char *now = listing(p);
    CHECK_MSG(!strcmp(now, ""), "left behind: %s", now);
    free(now);
}

/* A folder inside a class folder is not read (one class per folder of the top level) and a
 * symbolic link to nothing cannot be: both are counted and named in the summary, and --strict
 * refuses each, naming it; a link to an image is read as the image. */
TEST(mkrecords_nested_folders_and_links_to_nothing_are_counted_or_refused) {
    char root[600], out[700], args[3000], want[3000], p[900], to[900], *o;
    snprintf(root, sizeof root, "%s/mk-nested", th_tmpdir());
    mkdir(root, 0755);
    tree_file(root, "ant", "a0.png", 1, 0);
    tree_file(root, "bee", "b0.jpg", 2, 1);
    tree_file(root, "ant/sub", "a1.png", 3, 0);
    tree_file(root, "bee/more", "b1.png", 4, 0);
    tree_file(root, ".", "loose.png", 5, 0); /* an image with no class folder */
    snprintf(p, sizeof p, "%s/ant/link.png", root);
    snprintf(to, sizeof to, "%s/bee/b0.jpg", root);
    CHECK(symlink(to, p) == 0);
    snprintf(p, sizeof p, "%s/ant/gone.png", root);
    snprintf(to, sizeof to, "%s/nowhere.png", root);
    CHECK(symlink(to, p) == 0);
    snprintf(p, sizeof p, "%s/cat", root); /* a class folder's link, to nothing */
    snprintf(to, sizeof to, "%s/no-such-folder", root);
    CHECK(symlink(to, p) == 0);
    snprintf(out, sizeof out, "%s/mk-nested-out", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=1", root, out);
    int rc = mk(args, &o);
    snprintf(want, sizeof want,
             "wrote 3 records to %s/train-*-of-00001 (1 shard)\n"
             "skipped 2 folders inside a class folder (not read: each folder of the tree's top level is one class, its "
             "images directly inside it; --strict refuses them): %s/ant/sub ...\n"
             "skipped 2 symbolic links to nothing (target missing; --strict refuses them): %s/cat ...\n"
             "skipped 1 file outside the class folders (not read: a file of the tree's top level has no class; --strict "
             "refuses them): %s/loose.png\n",
             out, root, root, root);
    CHECK_MSG(rc == 0 && o && !strcmp(o, want), "rc %d: %s\nwant:\n%s", rc, o, want);
    free(o);
    int n = 0;
    CHECK(read_shards(out, "train", 1, NULL, count_record, &n) == 3); /* a0, b0 and the link to b0 */

    /* --strict: the link at the top level is met first, then (without the links) the folder, then
     * (without the folders) the file at the top level */
    snprintf(p, sizeof p, "%s/loose.png", root);
    CHECK(unlink(p) == 0);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s-strict --shards=1 --strict", root, out);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: %s/cat: a symbolic link to %s/no-such-folder, which does not exist (--strict; without "
             "it, it is skipped)\n",
             root, root);
    CHECK_MSG(rc == 4 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    snprintf(p, sizeof p, "%s/cat", root);
    CHECK(unlink(p) == 0);
    snprintf(p, sizeof p, "%s/ant/gone.png", root);
    CHECK(unlink(p) == 0);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: %s/ant/sub: a folder inside a class folder: not read (each folder of the tree's top "
             "level is one class, its images directly inside it; --strict; without it, it is skipped)\n",
             root);
    CHECK_MSG(rc == 4 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    static const char *const nested[] = {"ant/sub/a1.png", "ant/sub", "bee/more/b1.png", "bee/more"};
    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/%s", root, nested[k]);
        CHECK(remove(p) == 0);
    }
    tree_file(root, ".", "loose.png", 5, 0);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: %s/loose.png: a file outside the class folders: not read (it has no class; --strict; "
             "without it, it is skipped)\n",
             root);
    CHECK_MSG(rc == 4 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
    snprintf(p, sizeof p, "%s-strict", out);
    char *now = listing(p);
    CHECK_MSG(!strcmp(now, ""), "left behind: %s", now);
    free(now);
}

/* Two conversions into one folder: the second finds the first's lock (held here by the test, as a
 * conversion holds it) and stops before writing anything, naming the holder; once free, a run
 * removes the temporary shards a killed run left of its subsets (others' files kept). */
TEST(mkrecords_one_conversion_at_a_time_per_folder) {
    char root[600], out[700], args[3000], lock[800], *o;
    small_tree(root, sizeof root, "mk-lock-tree");
    snprintf(out, sizeof out, "%s/mk-lock-out", th_tmpdir());
    mkdir(out, 0755);
    snprintf(lock, sizeof lock, "%s/.nvcnn-mkrecords.lock", out);
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    CHECK(write(fd, "pid 4242 on othernode\n", 22) == 22);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=2", root, out);
    int rc = mk(args, &o);
    CHECK_MSG(rc == 2 && o && one_line(o) && strstr(o, "is in use by another nvcnn-mkrecords (pid 4242 on othernode)"),
              "rc %d: %s", rc, o);
    free(o);
    char *now = listing(out);
    CHECK_MSG(!strcmp(now, ""), "written while locked: %s", now);
    free(now);
    close(fd); /* released */
    const char *stale[] = {".train-00003-of-00009.tmp", ".validation-00000-of-00001.tmp", ".mine.tmp"};
    for (int i = 0; i < 3; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", out, stale[i]);
        FILE *f = xfopen(p, "wb");
        fputs("half a shard", f);
        fclose(f);
    }
    CHECK(mk(args, NULL) == 0);
    now = listing(out);
    CHECK_MSG(!strcmp(now, ".mine.tmp train-00000-of-00002 train-00001-of-00002"), "got: %s", now);
    free(now);
}

/* An --output_dir inside the tree it converts would be read back by the next conversion (a
 * folder of the top level is a class: the labels would shift): refused before anything is
 * written, also through a symbolic link and for --validation_dir. */
TEST(mkrecords_refuses_an_output_dir_inside_its_input) {
    char root[600], link[700], val[700], args[3000], where[900], *o;
    small_tree(root, sizeof root, "mk-inside-tree");
    small_tree(val, sizeof val, "mk-inside-val");
    snprintf(link, sizeof link, "%s/mk-inside-link", th_tmpdir());
    unlink(link);
    CHECK(symlink(root, link) == 0);
    const char *cases[][3] = {{root, "records", "input_dir"}, {root, "", "input_dir"}, {link, "x/y/", "input_dir"},
                              {val, "v", "validation_dir"}};
    for (int i = 0; i < 4; i++) {
        snprintf(where, sizeof where, "%s/%s", cases[i][0], cases[i][1]);
        if (i == 3)
            snprintf(args, sizeof args, "--input_dir=%s --validation_dir=%s --output_dir=%s", root, val, where);
        else
            snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s", i == 2 ? root : cases[i][0], where);
        int rc = mk(args, &o);
        char want[1200];
        snprintf(want, sizeof want, "--output_dir=%s lies inside --%s=", where, cases[i][2]);
        CHECK_MSG(rc == 2 && o && one_line(o) && strstr(o, want), "case %d: rc %d: %s", i, rc, o);
        free(o);
        if (cases[i][1][0]) CHECK_MSG(access(where, F_OK) != 0, "%s created", where);
    }
    /* beside it is fine */
    snprintf(where, sizeof where, "%s-records", root);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=1", link, where);
    CHECK(mk(args, NULL) == 0);
}

/* An image larger than the decoder takes (2^28 pixels) is refused at conversion, naming the file
 * and the limit, not hours later by the training run that meets it (only the header is read). */
TEST(mkrecords_refuses_images_the_trainer_would_refuse) {
    char root[600], big[800], out[700], args[3000], *o;
    small_tree(root, sizeof root, "mk-huge-tree");
    snprintf(big, sizeof big, "%s/kiwi/huge.png", root);
    uint8_t png[33] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    be32(png + 16, 17000);
    be32(png + 20, 16000);
    png[24] = 8; /* depth 8, RGB */
    png[25] = 2;
    be32(png + 29, (uint32_t)crc32(0, png + 12, 17));
    FILE *f = xfopen(big, "wb");
    fwrite(png, 1, sizeof png, f);
    fclose(f);
    snprintf(out, sizeof out, "%s/mk-huge-out", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=1", root, out);
    int rc = mk(args, &o);
    char want[1200];
    snprintf(want, sizeof want, "nvcnn-mkrecords: error: %s: PNG: 17000x16000 is 272000000 pixels, more than the "
                                "268435456 (2^28) nvcnn decodes", big);
    CHECK_MSG(rc == 4 && o && one_line(o) && !strncmp(o, want, strlen(want)), "rc %d: %s", rc, o);
    free(o);
}

/* A FIFO in a class folder (pipe.jpg: an image by its name) is not read (opening it would block
 * the conversion): counted in the summary as a special file, refused with --strict. */
TEST(mkrecords_special_files_are_counted_or_refused) {
    char root[600], out[700], args[3000], p[900], *o;
    snprintf(root, sizeof root, "%s/mk-fifo", th_tmpdir());
    mkdir(root, 0755);
    tree_file(root, "ant", "a0.png", 1, 0);
    tree_file(root, "bee", "b0.jpg", 2, 1);
    snprintf(p, sizeof p, "%s/bee/pipe.jpg", root);
    CHECK(mkfifo(p, 0644) == 0);
    snprintf(out, sizeof out, "%s/mk-fifo-out", th_tmpdir());
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s --shards=1", root, out);
    int rc = mk(args, &o);
    char want[2000];
    snprintf(want, sizeof want,
             "skipped 1 special file (not a regular file: a FIFO, socket or device; --strict refuses them): %s\n", p);
    CHECK_MSG(rc == 0 && o && strstr(o, want) && strstr(o, "wrote 2 records"), "rc %d: %s", rc, o);
    free(o);
    snprintf(args, sizeof args, "--input_dir=%s --output_dir=%s-strict --shards=1 --strict", root, out);
    rc = mk(args, &o);
    snprintf(want, sizeof want,
             "nvcnn-mkrecords: error: %s: not a regular file (a FIFO, socket or device; --strict; without it, it is "
             "skipped)\n",
             p);
    CHECK_MSG(rc == 4 && o && !strcmp(o, want), "rc %d: %s", rc, o);
    free(o);
}

/* An --output_dir that cannot be made or used: a file, a path through a file, a dangling symbolic
 * link, one under a read-only folder: each one line naming it and exit 2, as a usage error (a
 * dangling link said "is not a directory" and a folder that could not be made exited 1). */
TEST(mkrecords_output_dirs_that_cannot_be_are_named_exit_2) {
    char d[600], cmd[3200], *o = NULL;
    snprintf(d, sizeof d, "%s/bad-output", th_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s/ro && touch %s/afile && ln -sfn %s/nowhere %s/dangling && chmod 555 %s/ro", d, d, d, d, d);
    CHECK(th_run(cmd, NULL) == 0);
    char img[700], lab[700];
    write_idx(d, img, lab, sizeof img);
    const int root = geteuid() == 0; /* root writes under a mode-555 folder: no case then */
    const char *cases[][2] = {{"afile", "afile: Not a directory\n"},
                              {"afile/sub", "afile/sub: Not a directory\n"},
                              {"dangling", "dangling is a dangling symbolic link (to "},
                              {"ro/new", "ro/new: cannot create "}};
    for (int k = 0; k < 4 - root; k++) {
        char args[3000], want[1200];
        snprintf(args, sizeof args, "--idx_images=%s --idx_labels=%s --output_dir=%s/%s 2>&1", img, lab, d, cases[k][0]);
        const int rc = mk(args, &o);
        snprintf(want, sizeof want, "nvcnn-mkrecords: error: --output_dir=%s/%s", d, cases[k][1]);
        CHECK_MSG(rc == 2 && o && strstr(o, want), "%s: exit %d, want '%s':\n%s", cases[k][0], rc, want, o);
        free(o);
    }
}
