/* mkrecords.c: nvcnn-mkrecords, writes TFRecord shards of tf.train.Example in the layout of
 * TensorFlow's build_imagenet_data.py (<subset>-00000-of-0000N, labels 1-based) from
 *   - an ImageNet-style folder tree: one subfolder per class; class folders sorted by name get
 *     labels 1..K and image/class/text = image/class/synset = the folder name; JPEG/PNG files
 *     (.jpg, .jpeg, .png in any case) are stored as they are, other files skipped and counted
 *     (--strict: refused); so are folders inside a class folder (not read: one class per folder
 *     of the top level, its images directly inside it, as TensorFlow's image folder layout), files
 *     at the top level (no class) and symbolic links to nothing;
 *   - an IDX pair (MNIST, Fashion-MNIST): idx3-ubyte images and idx1-ubyte labels, plain or
 *     gzip-compressed; the images are encoded as PNG (lossless) or JPEG.
 * Images are assigned to shards in a shuffled order fixed by --seed: the shuffled list is cut into
 * --shards consecutive ranges of equal size (up to one).
 *
 * The output folder holds one set per subset. A run writes the subsets it owns: a folder tree's
 * run --subset (train) and validation-* (whether or not it writes validation this time: an old
 * split left beside new training shards would be trained on), an IDX run --subset alone (the test
 * pair goes into the same folder by a second run). Shards of those subsets already in the folder
 * stop the run before it reads anything, unless --overwrite; a file named <subset>-* that is not a
 * shard always does (nvcnn would read it with the shards; the converter never removes it).
 *
 * Every shard is written under a hidden temporary name (.train-00000-of-00008.tmp). Only when all
 * of the run's shards are complete are the old shards removed (--overwrite) and the new ones
 * renamed into place, with SIGINT/SIGTERM/SIGHUP held off meanwhile. An error or one of those
 * signals before that removes the temporary files and leaves the folder as it was, old shards
 * included; one inside the renames removes the new shards renamed so far. So the folder holds the
 * old set or the new one, never parts of both (short of SIGKILL or a crash in the renames, after
 * which nvcnn finds the set incomplete and says so).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/example.h"
#include "io/image.h"
#include "io/shards.h"
#include "io/tfrecord.h"
#include "util.h"

static const char *usage_text =
    "usage: nvcnn-mkrecords --output_dir=DIR (--input_dir=DIR | --idx_images=FILE --idx_labels=FILE) [options]\n"
    "Writes TFRecord shards of tf.train.Example (<subset>-00000-of-0000N) as build_imagenet_data.py does.\n"
    "Flags take their value as --flag=value or --flag value.\n"
    "\n"
    "Sources:\n"
    "  --input_dir=DIR          folder tree with one subfolder per class; sorted folder names get\n"
    "                           labels 1..K; .jpg, .jpeg and .png files (any case) are copied as they\n"
    "                           are; other files are skipped and counted (hidden ones ignored), as\n"
    "                           are folders inside a class folder and files beside the class\n"
    "                           folders (not read) and links to nothing\n"
    "  --validation_dir=DIR     a second folder tree (same class folders) written as validation-*\n"
    "  --validation_split=F     hold out a fraction F (0 <= F < 1) of --input_dir as validation-*\n"
    "                           (default: 0)\n"
    "  --idx_images=FILE        IDX images (idx3-ubyte, optionally .gz), e.g. MNIST, Fashion-MNIST\n"
    "  --idx_labels=FILE        IDX labels (idx1-ubyte, optionally .gz), written 1-based\n"
    "  --strict                 a file of a folder tree that is not .jpg, .jpeg or .png, a folder\n"
    "                           inside a class folder, a file beside the class folders or a link\n"
    "                           to nothing is an error (exit 4)\n"
    "                           instead of skipped\n"
    "Output:\n"
    "  --output_dir=DIR         where the shards go (created if missing; not inside --input_dir);\n"
    "                           one conversion at a time (it holds .nvcnn-mkrecords.lock there)\n"
    "  --subset=NAME            name of the shards from --input_dir or the IDX pair (default: train)\n"
    "  --shards=N               shards for that subset (default: 8)\n"
    "  --validation_shards=N    shards for validation-* (default: --shards)\n"
    "  --overwrite              replace the shards of an earlier conversion in --output_dir (below)\n"
    "  --format=png|jpeg        encoding of IDX images (default: png)\n"
    "  --quality=Q              JPEG quality 1..100 (default: 95)\n"
    "  --class_names=A,B,...    image/class/text for IDX labels 1, 2, ... (default: the label number)\n"
    "  --seed=N                 seed of the shuffled assignment to shards (default: 12345)\n"
    "  -h, --help               this text\n"
    "\n"
    "A folder tree's run owns --subset and validation-* in --output_dir (also when it writes no\n"
    "validation); an IDX run owns --subset only, so the test pair can follow with --subset=validation.\n"
    "Shards of an owned subset already there (any shard count, the same conversion again included)\n"
    "stop the run (exit 2) unless --overwrite, which removes them once every new shard is complete.\n"
    "A file named <subset>-* that is not a shard (<subset>-NNNNN-of-NNNNN) always stops it: move it.\n"
    "Shards are written under hidden temporary names and renamed when all are complete: an error or\n"
    "SIGINT/SIGTERM leaves --output_dir as it was.\n"
    "Exit codes: 0 success, 1 I/O error, 2 bad usage, 4 bad input data.\n";

typedef struct Item {
    char *path;   /* folder tree: the image file; IDX: NULL */
    size_t index; /* IDX: the image number */
    int label;    /* 1-based */
} Item;

typedef struct Opts {
    const char *output_dir, *input_dir, *validation_dir, *idx_images, *idx_labels, *subset, *class_names;
    double validation_split;
    int shards, validation_shards, quality, png, overwrite, strict;
    const char *idx_only; /* the last flag given that applies to IDX input only, or NULL */
    uint64_t seed;
} Opts;

/* ---- flags ------------------------------------------------------------------------------- */

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die_code(EXIT_USAGE, "--%s=%s: expected an integer in [%ld, %ld]", flag, v, lo, hi);
    return x;
}

/* Flags with a value (--flag=value or --flag value); the switches are --overwrite and --strict. */
static const char *const valued_flags[] = {"output_dir", "input_dir",  "validation_dir",    "validation_split",
                                           "idx_images", "idx_labels", "subset",            "class_names",
                                           "shards",     "quality",    "validation_shards", "seed",
                                           "format",     NULL};

static void parse_args(int argc, char **argv, Opts *o) {
    memset(o, 0, sizeof *o);
    o->subset = "train";
    o->shards = 8;
    o->quality = 95;
    o->png = 1;
    o->seed = 12345;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) die_code(EXIT_USAGE, "unexpected argument '%s' (see --help)", a);
        const char *eq = strchr(a, '=');
        size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        char key[64];
        if (kl >= sizeof key) die_code(EXIT_USAGE, "unknown flag %.*s (see --help)", (int)(kl + 2), a);
        memcpy(key, a + 2, kl);
        key[kl] = 0;
        if (!strcmp(key, "overwrite") || !strcmp(key, "strict")) {
            if (eq) die_code(EXIT_USAGE, "--%s takes no value (got %s)", key, a);
            if (!strcmp(key, "overwrite")) o->overwrite = 1;
            else o->strict = 1;
            continue;
        }
        int known = 0;
        for (int k = 0; valued_flags[k]; k++) known |= !strcmp(key, valued_flags[k]);
        if (!known) die_code(EXIT_USAGE, "unknown flag --%s (see --help)", key);
        const char *v;
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
            v = argv[++i];
        else
            die_code(EXIT_USAGE, "--%s needs a value: --%s=... or --%s ... (see --help)", key, key, key);
        if (!*v) die_code(EXIT_USAGE, "--%s needs a value", key);
        if (!strcmp(key, "quality") || !strcmp(key, "format") || !strcmp(key, "class_names")) o->idx_only = key;
        if (!strcmp(key, "output_dir")) o->output_dir = v;
        else if (!strcmp(key, "input_dir")) o->input_dir = v;
        else if (!strcmp(key, "validation_dir")) o->validation_dir = v;
        else if (!strcmp(key, "idx_images")) o->idx_images = v;
        else if (!strcmp(key, "idx_labels")) o->idx_labels = v;
        else if (!strcmp(key, "subset")) o->subset = v;
        else if (!strcmp(key, "class_names")) o->class_names = v;
        else if (!strcmp(key, "shards")) o->shards = (int)parse_long(key, v, 1, 99999);
        else if (!strcmp(key, "validation_shards")) o->validation_shards = (int)parse_long(key, v, 1, 99999);
        else if (!strcmp(key, "quality")) o->quality = (int)parse_long(key, v, 1, 100);
        else if (!strcmp(key, "seed")) o->seed = (uint64_t)parse_long(key, v, 0, 0x7fffffffffffffffL);
        else if (!strcmp(key, "format")) {
            if (!strcmp(v, "png")) o->png = 1;
            else if (!strcmp(v, "jpeg") || !strcmp(v, "jpg")) o->png = 0;
            else die_code(EXIT_USAGE, "--format=%s: expected png or jpeg", v);
        } else { /* validation_split */
            char *end;
            o->validation_split = strtod(v, &end);
            if (end == v || *end || !(o->validation_split >= 0 && o->validation_split < 1))
                die_code(EXIT_USAGE, "--validation_split=%s: expected a fraction in [0, 1)", v);
        }
    }
    if (!o->output_dir) die_code(EXIT_USAGE, "--output_dir is required (see --help)");
    int tree = o->input_dir != NULL, idx = o->idx_images || o->idx_labels;
    if (tree == idx) die_code(EXIT_USAGE, "give either --input_dir or --idx_images with --idx_labels (see --help)");
    if (idx && !(o->idx_images && o->idx_labels)) die_code(EXIT_USAGE, "--idx_images and --idx_labels go together");
    if (idx && (o->validation_dir || o->validation_split > 0))
        die_code(EXIT_USAGE, "--validation_dir and --validation_split apply to --input_dir; convert the test IDX pair "
                             "with --subset=validation");
    if (tree && o->idx_only)
        die_code(EXIT_USAGE, "--%s applies to --idx_images (a folder tree's files are copied as they are, its class "
                             "names are its folder names)",
                 o->idx_only);
    if (idx && o->strict) die_code(EXIT_USAGE, "--strict applies to --input_dir (an IDX file holds images only)");
    if (o->validation_dir && o->validation_split > 0)
        die_code(EXIT_USAGE, "--validation_dir and --validation_split exclude each other");
    if (strchr(o->subset, '/') || !o->subset[0])
        die_code(EXIT_USAGE, "--subset=%s: not a file name prefix", o->subset);
    if (!strcmp(o->subset, "validation") && (o->validation_dir || o->validation_split > 0))
        die_code(EXIT_USAGE, "--subset=validation with --%s would write validation-* twice",
                 o->validation_dir ? "validation_dir" : "validation_split");
    if (!o->validation_shards) o->validation_shards = o->shards;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* What a folder tree's run leaves out, by kind: counted, the first one named in the summary;
 * --strict refuses each (tree_items). */
enum { SKIP_NOT_IMAGE, SKIP_SUBFOLDER, SKIP_BROKEN_LINK, SKIP_LOOSE, SKIP_SPECIAL, SKIP_KINDS };
typedef struct Skipped {
    size_t n[SKIP_KINDS];
    char *first[SKIP_KINDS]; /* the first one's path */
} Skipped;

static void skip(Skipped *sk, int kind, const char *path) {
    if (!sk->first[kind]) sk->first[kind] = xstrdup(path);
    sk->n[kind]++;
}

/* Sorted names in dir of entries that are directories (want_dir) or regular files (symbolic links
 * followed), hidden ones left out. With sk (NULL: not looked at), the entries left out that a
 * user may have meant to be read: symbolic links to nothing (in any folder; --strict refuses
 * them), in a class folder (!want_dir) folders, and at the tree's top level (want_dir) files: neither
 * is read (one class per folder of the tree's top level, its images directly inside it; --strict
 * refuses them). */
static int list_dir(const Opts *o, const char *dir, int want_dir, char ***names, Skipped *sk) {
    DIR *d = opendir(dir);
    if (!d) die_code(EXIT_USAGE, "cannot open directory %s: %s", dir, strerror(errno));
    char **v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) {
            struct stat ln;
            const int err = errno;
            if (lstat(p, &ln) == 0 && S_ISLNK(ln.st_mode) && (err == ENOENT || err == ELOOP || err == ENOTDIR)) {
                if (!sk) continue;
                char to[4096];
                ssize_t k = readlink(p, to, sizeof to - 1);
                to[k > 0 ? k : 0] = 0;
                if (o->strict)
                    die_code(EXIT_DATA, "%s: a symbolic link to %s, which %s (--strict; without it, it is skipped)", p, to,
                             err == ELOOP ? "is a loop of links" : "does not exist");
                skip(sk, SKIP_BROKEN_LINK, p);
                continue;
            }
            die_code(EXIT_DATA, "%s: %s", p, strerror(err));
        }
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
            if (sk && S_ISDIR(st.st_mode)) {
                if (o->strict)
                    die_code(EXIT_DATA, "%s: a folder inside a class folder: not read (each folder of the tree's top level is "
                                        "one class, its images directly inside it; --strict; without it, it is skipped)",
                             p);
                skip(sk, SKIP_SUBFOLDER, p);
            } else if (sk && !want_dir) { /* a FIFO, socket or device: never an image file */
                if (o->strict)
                    die_code(EXIT_DATA, "%s: not a regular file (a FIFO, socket or device; --strict; without it, it is "
                                        "skipped)",
                             p);
                skip(sk, SKIP_SPECIAL, p);
            } else if (sk && want_dir) {
                if (o->strict)
                    die_code(EXIT_DATA, "%s: a file outside the class folders: not read (it has no class; --strict; "
                                        "without it, it is skipped)",
                             p);
                skip(sk, SKIP_LOOSE, p);
            }
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            v = xrealloc(v, (size_t)cap * sizeof *v);
        }
        v[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    return n;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = xfopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = xmalloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) buf = xrealloc(buf, cap *= 2);
    }
    if (ferror(f)) die("read error on %s: %s", path, strerror(errno));
    fclose(f);
    *len = n;
    return buf;
}

static void shuffle_items(Item *v, size_t n, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(&r, (uint32_t)i);
        Item t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* Folders that mkdir_p() created, deepest last: an error or a signal before the commit removes
 * them again (remove_partial), so a failed run leaves no empty --output_dir behind. Each entry is
 * filled before the count grows (read by the signal handler). */
static char *made_dir[64];
static volatile sig_atomic_t nmade;

static void mkdir_p(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) == 0) {
                if (nmade < (sig_atomic_t)(sizeof made_dir / sizeof made_dir[0])) {
                    made_dir[nmade] = xstrdup(p);
                    nmade++;
                }
            } else if (errno != EEXIST) /* (a read-only or unwritable parent, a file on the path: what was asked cannot be) */
                die_code(EXIT_USAGE, "--output_dir=%s: cannot create %s: %s", dir, p, strerror(errno));
            *s = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        const int e = errno;
        char link[4200];
        if (util_dangling_link(dir, e, link, sizeof link)) die_code(EXIT_USAGE, "--output_dir=%s %s", dir, link);
        die_code(EXIT_USAGE, "--output_dir=%s: %s", dir, strerror(e));
    }
    if (!S_ISDIR(st.st_mode)) die_code(EXIT_USAGE, "--output_dir=%s: Not a directory", dir);
}

/* ---- IDX --------------------------------------------------------------------------------- */

typedef struct Idx {
    uint8_t *data; /* the whole file, decompressed */
    size_t len;
    size_t n, rows, cols;
    const uint8_t *body;
} Idx;

static void idx_read(const char *path, int want_dims, Idx *x) {
    gzFile g = gzopen(path, "rb");
    if (!g) die_code(EXIT_USAGE, "cannot open %s: %s", path, strerror(errno ? errno : ENOENT));
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        int k = gzread(g, buf + n, (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n));
        if (k < 0) {
            int zerr;
            const char *msg = gzerror(g, &zerr);
            die_code(EXIT_DATA, "%s: corrupt compressed data after %zu bytes (%s)", path, n, msg);
        }
        if (k == 0) break;
        n += (size_t)k;
        if (n == cap) buf = xrealloc(buf, cap *= 2);
    }
    gzclose(g);
    if (n < 4) die_code(EXIT_DATA, "%s: truncated IDX header at byte offset %zu (%zu of 4 bytes)", path, n, n);
    if (buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08)
        die_code(EXIT_DATA, "%s: not an IDX file of unsigned bytes (magic %02x %02x %02x %02x at byte offset 0)", path,
                 buf[0], buf[1], buf[2], buf[3]);
    if (buf[3] != want_dims)
        die_code(EXIT_DATA, "%s: IDX file has %d dimensions, expected %d (%s)", path, buf[3], want_dims,
                 want_dims == 3 ? "images" : "labels");
    size_t hdr = 4 + 4 * (size_t)want_dims;
    if (n < hdr) die_code(EXIT_DATA, "%s: truncated IDX header at byte offset %zu (%zu of %zu bytes)", path, n, n, hdr);
    size_t dims[3] = {1, 1, 1};
    for (int d = 0; d < want_dims; d++) {
        const uint8_t *p = buf + 4 + 4 * d;
        dims[d] = ((size_t)p[0] << 24) | ((size_t)p[1] << 16) | ((size_t)p[2] << 8) | p[3];
    }
    size_t body = dims[0] * dims[1] * dims[2];
    if (want_dims == 3 && (dims[1] == 0 || dims[2] == 0 || dims[1] > 65500 || dims[2] > 65500))
        die_code(EXIT_DATA, "%s: bad image size %zux%zu in the IDX header", path, dims[1], dims[2]);
    if (n - hdr < body)
        die_code(EXIT_DATA, "%s: truncated IDX data at byte offset %zu (%zu items need %zu bytes after the header)", path,
                 n, dims[0], body);
    if (n - hdr > body)
        die_code(EXIT_DATA, "%s: %zu unexpected bytes after the IDX data at byte offset %zu", path, n - hdr - body,
                 hdr + body);
    x->data = buf;
    x->len = n;
    x->n = dims[0];
    x->rows = dims[1];
    x->cols = dims[2];
    x->body = buf + hdr;
}

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct Source {
    const Opts *o;
    char **classes; /* folder tree: class names [nclasses]; IDX: --class_names or NULL */
    int nclasses;
    Idx images, labels; /* IDX */
} Source;

static uint8_t *build_record(const Source *s, const Item *it, size_t *len) {
    ExampleBuilder *b = example_builder_new();
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    int w = 0, h = 0;
    const char *fmt;
    char fname[4096];
    if (it->path) {
        enc = read_file(it->path, &enc_len);
        ImageFormat f = image_sniff(enc, enc_len);
        if (f == IMG_UNKNOWN) die_code(EXIT_DATA, "%s: not a JPEG or PNG image", it->path);
        char err[256];
        if (image_dims(enc, enc_len, &w, &h, err, sizeof err) != 0) die_code(EXIT_DATA, "%s: %s", it->path, err);
        fmt = f == IMG_JPEG ? "JPEG" : "PNG";
        const char *base = strrchr(it->path, '/');
        snprintf(fname, sizeof fname, "%s", base ? base + 1 : it->path);
    } else {
        const Idx *im = &s->images;
        w = (int)im->cols;
        h = (int)im->rows;
        const uint8_t *px = im->body + it->index * im->rows * im->cols;
        int rc = s->o->png ? image_encode_png(px, w, h, 1, &enc, &enc_len)
                           : image_encode_jpeg(px, w, h, 1, s->o->quality, &enc, &enc_len);
        if (rc != 0) die("cannot encode image %zu of %s", it->index, s->o->idx_images);
        fmt = s->o->png ? "PNG" : "JPEG";
        const char *base = strrchr(s->o->idx_images, '/');
        snprintf(fname, sizeof fname, "%s:%zu", base ? base + 1 : s->o->idx_images, it->index);
        example_add_int64s(b, "image/channels", &(int64_t){1}, 1);
        example_add_string(b, "image/colorspace", "Grayscale");
    }
    int64_t v;
    example_add_bytes(b, "image/encoded", enc, enc_len);
    example_add_string(b, "image/format", fmt);
    example_add_string(b, "image/filename", fname);
    v = h;
    example_add_int64s(b, "image/height", &v, 1);
    v = w;
    example_add_int64s(b, "image/width", &v, 1);
    v = it->label;
    example_add_int64s(b, "image/class/label", &v, 1);
    char num[32];
    const char *text = NULL;
    if (s->classes && it->label >= 1 && it->label <= s->nclasses) text = s->classes[it->label - 1];
    if (!text) {
        snprintf(num, sizeof num, "%d", it->label);
        text = num;
    }
    example_add_string(b, "image/class/text", text);
    if (it->path) example_add_string(b, "image/class/synset", text);
    uint8_t *out = example_serialize(b, len);
    example_builder_free(b);
    free(enc);
    return out;
}

/* ---- temporary files, signals --------------------------------------------------------------
 * tmp_path[0, ntmp): the run's temporary shards, which may exist on disk; done_path[0, ndone):
 * final shards renamed into place by commit() so far. Both arrays are allocated before the first
 * file is created and an entry is filled before its count grows, so the handler below (unlink(),
 * signal() and raise() only: async-signal-safe) and the die hook always see whole paths. */
static char **tmp_path, **done_path;
static volatile sig_atomic_t ntmp, ndone;

static char lock_path[4200];    /* --output_dir's lock file, */
static volatile sig_atomic_t locked; /* held by this run */

static void remove_partial(void) {
    for (sig_atomic_t i = 0; i < ntmp; i++) unlink(tmp_path[i]);
    for (sig_atomic_t i = 0; i < ndone; i++) unlink(done_path[i]);
    if (nmade && locked) unlink(lock_path); /* the folder is this run's own: nothing of it stays */
    for (sig_atomic_t i = nmade; i > 0; i--) rmdir(made_dir[i - 1]); /* fails, harmlessly, where not empty */
}

static void on_signal(int sig) {
    remove_partial();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered on return: the process ends by the signal, as it would have */
}

static const int caught_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void catch_signals(int total_shards) {
    tmp_path = xcalloc((size_t)total_shards, sizeof *tmp_path);
    done_path = xcalloc((size_t)total_shards, sizeof *done_path);
    util_set_die_hook(remove_partial);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++) {
        struct sigaction was;
        /* a signal ignored from the start (nohup, a background job) stays ignored */
        if (sigaction(caught_signals[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN) continue;
        sigaction(caught_signals[i], &sa, NULL);
    }
}

static void hold_signals(int hold, sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof caught_signals / sizeof caught_signals[0]; i++) sigaddset(&set, caught_signals[i]);
    sigprocmask(hold ? SIG_BLOCK : SIG_SETMASK, hold ? &set : old, hold ? old : NULL);
}

/* ---- the output folder --------------------------------------------------------------------- */

/* Subsets that a run owns in --output_dir (see the top of the file). */
typedef struct Owned {
    const char *name[2];
    int n;
} Owned;

static Owned owned_subsets(const Opts *o) {
    Owned w = {{o->subset, NULL}, 1};
    if (o->input_dir && strcmp(o->subset, "validation") != 0) w.name[w.n++] = "validation";
    return w;
}

/* Files of the owned subsets in --output_dir, sorted: shards (<subset>-NNNNN-of-NNNNN...) and
 * others named <subset>-*. A missing folder holds none. */
typedef struct Found {
    char **shard, **other;
    int nshard, nother;
    int per_subset[2]; /* shards of owned subset k */
    char *first[2];    /* its first shard */
} Found;

static void find_owned(const Opts *o, const Owned *w, Found *f) {
    memset(f, 0, sizeof *f);
    DIR *d = opendir(o->output_dir);
    if (!d) {
        if (errno == ENOENT) return;
        die_code(EXIT_USAGE, "--output_dir=%s: %s", o->output_dir, strerror(errno));
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int k = -1;
        for (int j = 0; j < w->n; j++) {
            size_t pl = strlen(w->name[j]);
            if (strncmp(e->d_name, w->name[j], pl) == 0 && e->d_name[pl] == '-') k = j;
        }
        if (k < 0) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", o->output_dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || S_ISDIR(st.st_mode)) continue;
        int is_shard = shard_name_parse(e->d_name, w->name[k], NULL, NULL, NULL);
        if (f->nshard + f->nother == cap) {
            cap = cap ? 2 * cap : 64;
            f->shard = xrealloc(f->shard, (size_t)cap * sizeof *f->shard);
            f->other = xrealloc(f->other, (size_t)cap * sizeof *f->other);
        }
        if (is_shard) {
            f->shard[f->nshard++] = xstrdup(e->d_name);
            f->per_subset[k]++;
            if (!f->first[k] || strcmp(e->d_name, f->first[k]) < 0) f->first[k] = f->shard[f->nshard - 1];
        } else
            f->other[f->nother++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (f->nshard) qsort(f->shard, (size_t)f->nshard, sizeof *f->shard, cmp_str);
    if (f->nother) qsort(f->other, (size_t)f->nother, sizeof *f->other, cmp_str);
}

static void free_found(Found *f) {
    for (int i = 0; i < f->nshard; i++) free(f->shard[i]);
    for (int i = 0; i < f->nother; i++) free(f->other[i]);
    free(f->shard);
    free(f->other);
}

/* "train-00000-of-00002 ... (2 files) and validation-00000-of-00002 ... (2 files)" */
static void describe_found(const Owned *w, const Found *f, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < w->n; k++) {
        if (!f->per_subset[k]) continue;
        at += (size_t)snprintf(buf + at, len - at, "%s%s%s (%d file%s)", at ? " and " : "", f->first[k],
                               f->per_subset[k] > 1 ? " ..." : "", f->per_subset[k], f->per_subset[k] > 1 ? "s" : "");
        if (at >= len) break;
    }
}

/* Stops the run when --output_dir holds what it must not touch: files named <subset>-* that are
 * not shards (always), shards of an owned subset (unless --overwrite). */
static void check_output(const Opts *o, const Owned *w, Found *f) {
    find_owned(o, w, f);
    if (f->nother)
        die_code(EXIT_USAGE,
                 "--output_dir=%s holds %s%s, not a shard but named like one: nvcnn would read it with the shards; "
                 "move it away",
                 o->output_dir, f->other[0], f->nother > 1 ? " (and more)" : "");
    if (f->nshard && !o->overwrite) {
        char what[2048];
        describe_found(w, f, what, sizeof what);
        die_code(EXIT_USAGE,
                 "--output_dir=%s holds the shards of an earlier conversion: %s; --overwrite replaces them, or choose "
                 "another --output_dir",
                 o->output_dir, what);
    }
}

/* Takes --output_dir's lock (a hidden file there, held until the process ends): two conversions
 * into one folder at once would write the same temporary files and remove each other's shards.
 * Then, no other conversion writing there, temporary shards of the owned subsets are ones a killed
 * run left: removed. */
static void lock_output(const Opts *o, const Owned *w) {
    snprintf(lock_path, sizeof lock_path, "%s/.nvcnn-mkrecords.lock", o->output_dir);
    char who[128];
    const int got = util_lock_file(lock_path, who, sizeof who);
    if (got < 0) die("--output_dir=%s: cannot create %s: %s", o->output_dir, lock_path, strerror(errno));
    if (got == UTIL_LOCK_BUSY)
        die_code(EXIT_USAGE,
                 "--output_dir=%s is in use by another nvcnn-mkrecords (%s): two conversions into one folder would mix "
                 "their shards; wait for it to end or choose another --output_dir",
                 o->output_dir, who);
    if (got == UTIL_LOCK_NONE) return; /* a file system without locks: go on unlocked */
    locked = 1;
    DIR *d = opendir(o->output_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] != '.' || nl < 6 || strcmp(e->d_name + nl - 4, ".tmp") != 0) continue;
        char name[512];
        if (nl - 5 >= sizeof name) continue;
        memcpy(name, e->d_name + 1, nl - 5);
        name[nl - 5] = 0;
        for (int k = 0; k < w->n; k++) {
            if (!shard_name_parse(name, w->name[k], NULL, NULL, NULL)) continue;
            char p[4600];
            snprintf(p, sizeof p, "%s/%s", o->output_dir, e->d_name);
            unlink(p);
        }
    }
    if (d) closedir(d);
}

/* The absolute, symbolic-link-free form of path, whose last components may not exist yet: they are
 * appended to the real path of the deepest folder of it that does. 0, or -1. */
static int resolve_path(const char *path, char *out, size_t len) {
    char head[4096], rp[PATH_MAX];
    snprintf(head, sizeof head, "%s", path);
    size_t tail = strlen(head); /* head[tail...] of path: the components that do not exist */
    for (;;) {
        char saved = head[tail];
        head[tail] = 0;
        const char *dir = head[0] ? head : (path[0] == '/' ? "/" : ".");
        int ok = realpath(dir, rp) != NULL;
        head[tail] = saved;
        if (ok) {
            const char *rest = path + tail;
            if (!strcmp(rp, "/") && rest[0] == '/') rest++;
            snprintf(out, len, "%s%s%s", rp, rest[0] && rest[0] != '/' && strcmp(rp, "/") ? "/" : "", rest);
            return 0;
        }
        if (errno != ENOENT || tail == 0) return -1;
        while (tail > 0 && head[tail - 1] == '/') tail--; /* the component before */
        while (tail > 0 && head[tail - 1] != '/') tail--;
        if (tail > 0) tail--; /* at its '/': path + tail starts "/name" */
    }
}

/* --output_dir inside a folder tree that is read: its shards (or the folder itself, as a class
 * with no images) would be read by the next conversion of that tree, its labels shifted. */
static void refuse_output_inside(const Opts *o, const char *flag, const char *tree) {
    char out[8192], in[8192];
    if (!tree || resolve_path(o->output_dir, out, sizeof out) != 0 || !realpath(tree, in)) return;
    size_t il = strlen(in);
    if (strncmp(out, in, il) == 0 && (out[il] == 0 || out[il] == '/' || (il == 1 && in[0] == '/')))
        die_code(EXIT_USAGE,
                 "--output_dir=%s lies inside --%s=%s, the tree it converts: the next conversion would find the shards "
                 "(or their folder, as a class of its own, shifting the labels) among the images; choose an --output_dir "
                 "outside it",
                 o->output_dir, flag, tree);
}

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct Job {
    const char *subset;
    Item *items;
    size_t n;
    int shards;
} Job;

/* Writes the job's shards under their temporary names. */
static void write_shards(const Source *s, const Job *j) {
    const Opts *o = s->o;
    for (int sh = 0; sh < j->shards; sh++) {
        size_t lo = j->n * (size_t)sh / (size_t)j->shards, hi = j->n * (size_t)(sh + 1) / (size_t)j->shards;
        char final[4096], tmp[4200], err[512];
        snprintf(final, sizeof final, "%s/%s-%05d-of-%05d", o->output_dir, j->subset, sh, j->shards);
        snprintf(tmp, sizeof tmp, "%s/.%s-%05d-of-%05d.tmp", o->output_dir, j->subset, sh, j->shards);
        done_path[ntmp] = xstrdup(final);
        tmp_path[ntmp] = xstrdup(tmp);
        ntmp++;
        TfrWriter *w = tfr_writer_open(tmp, err, sizeof err);
        if (!w) die("%s", err);
        for (size_t i = lo; i < hi; i++) {
            size_t len;
            uint8_t *rec = build_record(s, &j->items[i], &len);
            if (tfr_write(w, rec, len) != 0) die("write error on %s: %s", tmp, strerror(errno));
            free(rec);
        }
        if (tfr_writer_close(w) != 0) die("write error on %s: %s", tmp, strerror(errno));
    }
}

/* Every shard is complete: the old shards of the owned subsets go (--overwrite; looked for again,
 * the folder may have changed during the run), the new ones take their names. Returns the number
 * of old shards removed. done_path[] holds the final names in the order of tmp_path[]; ndone
 * counts the renamed ones, which an error here removes again. */
static int commit(const Opts *o, const Owned *w) {
    sigset_t old;
    hold_signals(1, &old);
    Found f;
    check_output(o, w, &f);
    for (int i = 0; i < f.nshard; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", o->output_dir, f.shard[i]);
        if (unlink(p) != 0 && errno != ENOENT) die("cannot remove %s: %s", p, strerror(errno));
    }
    int removed = f.nshard;
    free_found(&f);
    int n = ntmp;
    for (int i = 0; i < n; i++) {
        if (rename(tmp_path[i], done_path[i]) != 0)
            die("cannot rename %s to %s: %s", tmp_path[i], done_path[i], strerror(errno));
        ndone = i + 1;
    }
    ntmp = 0;
    ndone = 0;
    nmade = 0; /* the folders hold the new shards now */
    hold_signals(0, &old);
    return removed;
}

/* ---- folder trees -------------------------------------------------------------------------- */

/* Files of a folder tree that are images by their extension: .jpg, .jpeg, .png, any case. */
static int image_extension(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

/* Items of a folder tree; labels from the class list `classes` (sorted). Files without an image
 * extension are skipped and counted in *sk, or with --strict refused. */
static Item *tree_items(const Opts *o, const char *dir, char **classes, int nclasses, size_t *n_out, Skipped *sk) {
    char **sub;
    int nsub = list_dir(o, dir, 1, &sub, sk);
    if (nsub == 0) die_code(EXIT_USAGE, "%s has no class subfolders", dir);
    Item *v = NULL;
    size_t n = 0, cap = 0;
    for (int c = 0; c < nsub; c++) {
        char **hit = bsearch(&sub[c], classes, (size_t)nclasses, sizeof *classes, cmp_str);
        if (!hit) die_code(EXIT_USAGE, "%s/%s: class folder not among the training classes", dir, sub[c]);
        int label = (int)(hit - classes) + 1;
        char cdir[4096];
        snprintf(cdir, sizeof cdir, "%s/%s", dir, sub[c]);
        char **files;
        int nf = list_dir(o, cdir, 0, &files, sk);
        for (int i = 0; i < nf; i++) {
            size_t pl = strlen(cdir) + strlen(files[i]) + 2;
            char *path = xmalloc(pl);
            snprintf(path, pl, "%s/%s", cdir, files[i]);
            free(files[i]);
            if (!image_extension(path)) {
                if (o->strict)
                    die_code(EXIT_DATA, "%s: not a .jpg, .jpeg or .png file (--strict; without it, it is skipped)",
                             path);
                skip(sk, SKIP_NOT_IMAGE, path);
                free(path);
                continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                v = xrealloc(v, cap * sizeof *v);
            }
            v[n].path = path;
            v[n].index = n;
            v[n].label = label;
            n++;
        }
        free(files);
        free(sub[c]);
    }
    free(sub);
    *n_out = n;
    return v;
}

static void free_items(Item *v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i].path);
    free(v);
}

/* A job of n items into `shards` shards; refuses more shards than images. */
static Job make_job(const Opts *o, const char *subset, Item *items, size_t n, int shards) {
    if (n == 0) die_code(EXIT_USAGE, "no images for %s", subset);
    if ((size_t)shards > n)
        die_code(EXIT_USAGE, "%d shards for %zu %s images: use --%sshards=%zu or fewer", shards, n, subset,
                 strcmp(subset, "validation") == 0 && o->input_dir ? "validation_" : "", n);
    Job j = {subset, items, n, shards};
    return j;
}

int main(int argc, char **argv) {
    util_set_program("nvcnn-mkrecords");
    signal(SIGXFSZ, SIG_IGN); /* a file size limit: a write error (EFBIG) reported, not a kill halfway */
    Opts o;
    parse_args(argc, argv, &o);
    Owned owned = owned_subsets(&o);
    Found before;
    refuse_output_inside(&o, "input_dir", o.input_dir);
    refuse_output_inside(&o, "validation_dir", o.validation_dir);
    check_output(&o, &owned, &before); /* before reading anything: the same check again in commit() */
    free_found(&before);

    Source s = {.o = &o};
    Job job[2];
    int njob = 0;
    Item *all = NULL, *val = NULL;
    size_t nall = 0, nval_dir = 0;
    Skipped sk = {{0}, {NULL}};
    if (o.input_dir) {
        s.nclasses = list_dir(&o, o.input_dir, 1, &s.classes, NULL); /* tree_items looks at what it leaves out */
        if (s.nclasses == 0) die_code(EXIT_USAGE, "%s has no class subfolders", o.input_dir);
        all = tree_items(&o, o.input_dir, s.classes, s.nclasses, &nall, &sk);
        if (nall == 0) die_code(EXIT_USAGE, "%s: no image files in its class subfolders", o.input_dir);
        shuffle_items(all, nall, o.seed);
        size_t nval = (size_t)((double)nall * o.validation_split + 0.5);
        if (o.validation_split > 0 && (nval == 0 || nval >= nall))
            die_code(EXIT_USAGE, "--validation_split=%g of %zu images leaves an empty subset", o.validation_split, nall);
        job[njob++] = make_job(&o, o.subset, all, nall - nval, o.shards);
        if (nval) job[njob++] = make_job(&o, "validation", all + (nall - nval), nval, o.validation_shards);
        if (o.validation_dir) {
            val = tree_items(&o, o.validation_dir, s.classes, s.nclasses, &nval_dir, &sk);
            if (nval_dir == 0) die_code(EXIT_USAGE, "%s: no image files in its class subfolders", o.validation_dir);
            shuffle_items(val, nval_dir, o.seed + 1);
            job[njob++] = make_job(&o, "validation", val, nval_dir, o.validation_shards);
        }
    } else {
        idx_read(o.idx_images, 3, &s.images);
        idx_read(o.idx_labels, 1, &s.labels);
        if (s.images.n != s.labels.n)
            die_code(EXIT_DATA, "%s holds %zu images but %s holds %zu labels", o.idx_images, s.images.n, o.idx_labels,
                     s.labels.n);
        if (o.class_names) {
            char *names = xstrdup(o.class_names);
            for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
                s.classes = xrealloc(s.classes, (size_t)(s.nclasses + 1) * sizeof *s.classes);
                s.classes[s.nclasses++] = xstrdup(tok);
            }
            free(names);
        }
        nall = s.images.n;
        all = xcalloc(nall ? nall : 1, sizeof *all);
        for (size_t i = 0; i < nall; i++) {
            all[i].index = i;
            all[i].label = (int)s.labels.body[i] + 1;
            if (s.classes && all[i].label > s.nclasses)
                die_code(EXIT_DATA,
                         "%s: the label byte %d at byte offset %zu (label %d in the records) has no name in --class_names "
                         "(%d names, for labels 1 to %d)",
                         o.idx_labels, all[i].label - 1, (size_t)(s.labels.body - s.labels.data) + i, all[i].label,
                         s.nclasses, s.nclasses);
        }
        shuffle_items(all, nall, o.seed);
        job[njob++] = make_job(&o, o.subset, all, nall, o.shards);
    }

    int total = 0;
    for (int k = 0; k < njob; k++) total += job[k].shards;
    catch_signals(total);
    mkdir_p(o.output_dir);
    lock_output(&o, &owned);
    for (int k = 0; k < njob; k++) write_shards(&s, &job[k]);
    int removed = commit(&o, &owned);

    for (int k = 0; k < njob; k++)
        printf("wrote %zu records to %s/%s-*-of-%05d (%d shard%s)\n", job[k].n, o.output_dir, job[k].subset,
               job[k].shards, job[k].shards, job[k].shards == 1 ? "" : "s");
    static const char *const what[SKIP_KINDS][3] = {
        {"non-image file", "non-image files", "(by extension: not .jpg, .jpeg or .png; --strict refuses them)"},
        {"folder inside a class folder", "folders inside a class folder",
         "(not read: each folder of the tree's top level is one class, its images directly inside it; --strict refuses "
         "them)"},
        {"symbolic link to nothing", "symbolic links to nothing", "(target missing; --strict refuses them)"},
        {"file outside the class folders", "files outside the class folders",
         "(not read: a file of the tree's top level has no class; --strict refuses them)"},
        {"special file", "special files", "(not a regular file: a FIFO, socket or device; --strict refuses them)"},
    };
    for (int k = 0; k < SKIP_KINDS; k++) {
        if (sk.n[k])
            printf("skipped %zu %s %s: %s%s\n", sk.n[k], what[k][sk.n[k] > 1], what[k][2], sk.first[k], sk.n[k] > 1 ? " ..." : "");
        free(sk.first[k]);
    }
    if (removed) printf("removed %d shard%s of the earlier conversion (--overwrite)\n", removed, removed == 1 ? "" : "s");

    for (int i = 0; i < total; i++) {
        free(tmp_path[i]);
        free(done_path[i]);
    }
    free(tmp_path);
    free(done_path);
    if (o.input_dir) {
        free_items(all, nall);
        if (val) free_items(val, nval_dir);
    } else {
        free(all);
        free(s.images.data);
        free(s.labels.data);
    }
    for (int i = 0; i < s.nclasses; i++) free(s.classes[i]);
    free(s.classes);
    return 0;
}
