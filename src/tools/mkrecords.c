/* mkrecords.c: nvcnn-mkrecords, writes TFRecord shards of tf.train.Example in the layout of
 * TensorFlow's build_imagenet_data.py (<subset>-00000-of-0000N, labels 1-based) from
 *   - an ImageNet-style folder tree: one subfolder per class; class folders sorted by name get
 *     labels 1..K and image/class/text = image/class/synset = the folder name; JPEG/PNG files are
 *     stored as they are;
 *   - an IDX pair (MNIST, Fashion-MNIST): idx3-ubyte images and idx1-ubyte labels, plain or
 *     gzip-compressed; the images are encoded as PNG (lossless) or JPEG.
 * Images are assigned to shards in a shuffled order fixed by --seed: the shuffled list is cut into
 * --shards consecutive ranges of equal size (up to one). Each shard is written under a hidden
 * temporary name and renamed when complete, so an interrupted run leaves no partial shard.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"
#include "util.h"

static const char *usage_text =
    "usage: nvcnn-mkrecords --output_dir=DIR (--input_dir=DIR | --idx_images=FILE --idx_labels=FILE) [options]\n"
    "Writes TFRecord shards of tf.train.Example (<subset>-00000-of-0000N) as build_imagenet_data.py does.\n"
    "\n"
    "Sources:\n"
    "  --input_dir=DIR          folder tree with one subfolder per class; sorted folder names get\n"
    "                           labels 1..K; JPEG/PNG files are copied as they are\n"
    "  --validation_dir=DIR     a second folder tree (same class folders) written as validation-*\n"
    "  --validation_split=F     hold out a fraction F (0 <= F < 1) of --input_dir as validation-*\n"
    "                           (default: 0)\n"
    "  --idx_images=FILE        IDX images (idx3-ubyte, optionally .gz), e.g. MNIST, Fashion-MNIST\n"
    "  --idx_labels=FILE        IDX labels (idx1-ubyte, optionally .gz), written 1-based\n"
    "Output:\n"
    "  --output_dir=DIR         where the shards go (created if missing)\n"
    "  --subset=NAME            name of the shards from --input_dir or the IDX pair (default: train)\n"
    "  --shards=N               shards for that subset (default: 8)\n"
    "  --validation_shards=N    shards for validation-* (default: --shards)\n"
    "  --format=png|jpeg        encoding of IDX images (default: png)\n"
    "  --quality=Q              JPEG quality 1..100 (default: 95)\n"
    "  --class_names=A,B,...    image/class/text for IDX labels 1, 2, ... (default: the label number)\n"
    "  --seed=N                 seed of the shuffled assignment to shards (default: 12345)\n"
    "  --help                   this text\n"
    "Exit codes: 0 success, 1 I/O error, 2 bad usage, 4 bad input data.\n";

typedef struct Item {
    char *path;   /* folder tree: the image file; IDX: NULL */
    size_t index; /* IDX: the image number */
    int label;    /* 1-based */
} Item;

typedef struct Opts {
    const char *output_dir, *input_dir, *validation_dir, *idx_images, *idx_labels, *subset, *class_names;
    double validation_split;
    int shards, validation_shards, quality, png;
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
        if (strncmp(a, "--", 2) != 0) die_code(EXIT_USAGE, "unexpected argument '%s' (see --help)", a);
        const char *eq = strchr(a, '=');
        if (!eq) die_code(EXIT_USAGE, "%s needs a value: %s=... (see --help)", a, a);
        size_t kl = (size_t)(eq - a - 2);
        char key[64];
        if (kl >= sizeof key) die_code(EXIT_USAGE, "unknown flag %.*s (see --help)", (int)(eq - a), a);
        memcpy(key, a + 2, kl);
        key[kl] = 0;
        const char *v = eq + 1;
        if (!*v) die_code(EXIT_USAGE, "--%s needs a value", key);
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
        } else if (!strcmp(key, "validation_split")) {
            char *end;
            o->validation_split = strtod(v, &end);
            if (end == v || *end || !(o->validation_split >= 0 && o->validation_split < 1))
                die_code(EXIT_USAGE, "--validation_split=%s: expected a fraction in [0, 1)", v);
        } else
            die_code(EXIT_USAGE, "unknown flag --%s (see --help)", key);
    }
    if (!o->output_dir) die_code(EXIT_USAGE, "--output_dir is required (see --help)");
    int tree = o->input_dir != NULL, idx = o->idx_images || o->idx_labels;
    if (tree == idx) die_code(EXIT_USAGE, "give either --input_dir or --idx_images with --idx_labels (see --help)");
    if (idx && !(o->idx_images && o->idx_labels)) die_code(EXIT_USAGE, "--idx_images and --idx_labels go together");
    if (idx && (o->validation_dir || o->validation_split > 0))
        die_code(EXIT_USAGE, "--validation_dir and --validation_split apply to --input_dir; convert the test IDX pair "
                             "with --subset=validation");
    if (o->validation_dir && o->validation_split > 0)
        die_code(EXIT_USAGE, "--validation_dir and --validation_split exclude each other");
    if (strchr(o->subset, '/') || !o->subset[0]) die_code(EXIT_USAGE, "--subset=%s: not a file name prefix", o->subset);
    if (!o->validation_shards) o->validation_shards = o->shards;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in dir of entries that are directories (want_dir) or regular files, hidden ones
 * left out. */
static int list_dir(const char *dir, int want_dir, char ***names) {
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
        if (stat(p, &st) != 0) continue;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) continue;
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

static void mkdir_p(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) die("cannot create directory %s: %s", p, strerror(errno));
            *s = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) die("%s is not a directory", dir);
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

static void write_shards(const Source *s, const char *subset, Item *items, size_t n, int shards) {
    const Opts *o = s->o;
    if ((size_t)shards > n && n > 0)
        die_code(EXIT_USAGE, "%d shards for %zu %s images: use --%sshards=%zu or fewer", shards, n, subset,
                 strcmp(subset, "validation") == 0 && o->input_dir ? "validation_" : "", n);
    if (n == 0) die_code(EXIT_USAGE, "no images for %s", subset);
    for (int sh = 0; sh < shards; sh++) {
        size_t lo = n * (size_t)sh / (size_t)shards, hi = n * (size_t)(sh + 1) / (size_t)shards;
        char final[4096], tmp[4200], err[512];
        snprintf(final, sizeof final, "%s/%s-%05d-of-%05d", o->output_dir, subset, sh, shards);
        snprintf(tmp, sizeof tmp, "%s/.%s-%05d-of-%05d.tmp", o->output_dir, subset, sh, shards);
        TfrWriter *w = tfr_writer_open(tmp, err, sizeof err);
        if (!w) die("%s", err);
        for (size_t i = lo; i < hi; i++) {
            size_t len;
            uint8_t *rec = build_record(s, &items[i], &len);
            if (tfr_write(w, rec, len) != 0) die("write error on %s: %s", tmp, strerror(errno));
            free(rec);
        }
        if (tfr_writer_close(w) != 0) die("write error on %s: %s", tmp, strerror(errno));
        if (rename(tmp, final) != 0) die("cannot rename %s to %s: %s", tmp, final, strerror(errno));
    }
    printf("wrote %zu records to %s/%s-*-of-%05d (%d shard%s)\n", n, o->output_dir, subset, shards, shards,
           shards == 1 ? "" : "s");
}

/* Items of a folder tree; labels from the class list `classes` (sorted). */
static Item *tree_items(const char *dir, char **classes, int nclasses, size_t *n_out) {
    char **sub;
    int nsub = list_dir(dir, 1, &sub);
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
        int nf = list_dir(cdir, 0, &files);
        for (int i = 0; i < nf; i++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                v = xrealloc(v, cap * sizeof *v);
            }
            size_t pl = strlen(cdir) + strlen(files[i]) + 2;
            v[n].path = xmalloc(pl);
            snprintf(v[n].path, pl, "%s/%s", cdir, files[i]);
            v[n].index = n;
            v[n].label = label;
            n++;
            free(files[i]);
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

int main(int argc, char **argv) {
    util_set_program("nvcnn-mkrecords");
    Opts o;
    parse_args(argc, argv, &o);
    Source s = {.o = &o};
    if (o.input_dir) {
        s.nclasses = list_dir(o.input_dir, 1, &s.classes);
        if (s.nclasses == 0) die_code(EXIT_USAGE, "%s has no class subfolders", o.input_dir);
        size_t n;
        Item *items = tree_items(o.input_dir, s.classes, s.nclasses, &n);
        if (n == 0) die_code(EXIT_USAGE, "%s: no image files in its class subfolders", o.input_dir);
        mkdir_p(o.output_dir);
        shuffle_items(items, n, o.seed);
        size_t nval = (size_t)((double)n * o.validation_split + 0.5);
        if (o.validation_split > 0 && (nval == 0 || nval >= n))
            die_code(EXIT_USAGE, "--validation_split=%g of %zu images leaves an empty subset", o.validation_split, n);
        write_shards(&s, o.subset, items, n - nval, o.shards);
        if (nval) write_shards(&s, "validation", items + (n - nval), nval, o.validation_shards);
        free_items(items, n);
        if (o.validation_dir) {
            Item *vi = tree_items(o.validation_dir, s.classes, s.nclasses, &n);
            if (n == 0) die_code(EXIT_USAGE, "%s: no image files in its class subfolders", o.validation_dir);
            shuffle_items(vi, n, o.seed + 1);
            write_shards(&s, "validation", vi, n, o.validation_shards);
            free_items(vi, n);
        }
        for (int i = 0; i < s.nclasses; i++) free(s.classes[i]);
        free(s.classes);
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
        size_t n = s.images.n;
        Item *items = xcalloc(n ? n : 1, sizeof *items);
        for (size_t i = 0; i < n; i++) {
            items[i].index = i;
            items[i].label = (int)s.labels.body[i] + 1;
            if (s.classes && items[i].label > s.nclasses)
                die_code(EXIT_DATA, "%s: label %d at byte offset %zu has no name in --class_names (%d names)",
                         o.idx_labels, items[i].label - 1, (size_t)(s.labels.body - s.labels.data) + i, s.nclasses);
        }
        mkdir_p(o.output_dir);
        shuffle_items(items, n, o.seed);
        write_shards(&s, o.subset, items, n, o.shards);
        free(items);
        free(s.images.data);
        free(s.labels.data);
        for (int i = 0; i < s.nclasses; i++) free(s.classes[i]);
        free(s.classes);
    }
    return 0;
}
