/* example.c: see example.h. Parsing and serialization through protobuf-c's generated code for
 * data/example.proto and data/feature.proto. */
#include "io/example.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/proto/example.pb-c.h"
#include "util.h"

struct ExampleMsg {
    Tensorflow__Example *ex;
};

static const char *kind_name(Tensorflow__Feature__KindCase k) {
    switch (k) {
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST: return "bytes_list";
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST: return "float_list";
    case TENSORFLOW__FEATURE__KIND_INT64_LIST: return "int64_list";
    default: return "empty feature";
    }
}

/* The feature for key (the last one if the map repeats a key, as protobuf map semantics). */
static const Tensorflow__Feature *find(const Tensorflow__Example *ex, const char *key) {
    if (!ex || !ex->features) return NULL;
    const Tensorflow__Features *fs = ex->features;
    const Tensorflow__Feature *hit = NULL;
    for (size_t i = 0; i < fs->n_feature; i++) {
        const Tensorflow__Features__FeatureEntry *e = fs->feature[i];
        if (e && e->key && strcmp(e->key, key) == 0) hit = e->value;
    }
    return hit;
}

static int kind_index(const Tensorflow__Feature *f, size_t *n) {
    *n = 0;
    if (!f) return 0;
    switch (f->kind_case) {
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST:
        *n = f->bytes_list ? f->bytes_list->n_value : 0;
        return 1;
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
        *n = f->float_list ? f->float_list->n_value : 0;
        return 2;
    case TENSORFLOW__FEATURE__KIND_INT64_LIST:
        *n = f->int64_list ? f->int64_list->n_value : 0;
        return 3;
    default: return 0;
    }
}

/* Fetches a float list of `key`: 0 if absent, its count otherwise, -1 on a wrong kind. */
static long float_list(const Tensorflow__Example *ex, const char *key, const float **v, char *err, size_t errlen) {
    const Tensorflow__Feature *f = find(ex, key);
    *v = NULL;
    if (!f || f->kind_case == TENSORFLOW__FEATURE__KIND__NOT_SET) return 0;
    if (f->kind_case != TENSORFLOW__FEATURE__KIND_FLOAT_LIST) {
        snprintf(err, errlen, "%s is a %s, expected float_list", key, kind_name(f->kind_case));
        return -1;
    }
    if (!f->float_list) return 0;
    *v = f->float_list->value;
    return (long)f->float_list->n_value;
}

int example_parse_image(const uint8_t *buf, size_t len, ExampleImage *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    Tensorflow__Example *ex = tensorflow__example__unpack(NULL, len, buf);
    if (!ex) {
        snprintf(err, errlen, "not a valid tf.train.Example (protobuf decoding failed)");
        return -1;
    }
    out->msg_ = ex;
    const Tensorflow__Feature *f = find(ex, "image/encoded");
    if (!f) {
        snprintf(err, errlen, "no image/encoded feature");
        goto fail;
    }
    if (f->kind_case != TENSORFLOW__FEATURE__KIND_BYTES_LIST) {
        snprintf(err, errlen, "image/encoded is a %s, expected bytes_list", kind_name(f->kind_case));
        goto fail;
    }
    if (!f->bytes_list || f->bytes_list->n_value < 1 || f->bytes_list->value[0].len == 0) {
        snprintf(err, errlen, "image/encoded is empty");
        goto fail;
    }
    if (f->bytes_list->n_value > 1) {
        snprintf(err, errlen, "image/encoded holds %zu images, expected 1", f->bytes_list->n_value);
        goto fail;
    }
    out->encoded = f->bytes_list->value[0].data;
    out->encoded_len = f->bytes_list->value[0].len;

    f = find(ex, "image/class/label");
    if (!f) {
        snprintf(err, errlen, "no image/class/label feature");
        goto fail;
    }
    if (f->kind_case != TENSORFLOW__FEATURE__KIND_INT64_LIST) {
        snprintf(err, errlen, "image/class/label is a %s, expected int64_list", kind_name(f->kind_case));
        goto fail;
    }
    if (!f->int64_list || f->int64_list->n_value < 1) {
        snprintf(err, errlen, "image/class/label is empty");
        goto fail;
    }
    if (f->int64_list->n_value > 1) {
        snprintf(err, errlen, "image/class/label holds %zu values, expected 1", f->int64_list->n_value);
        goto fail;
    }
    out->label = f->int64_list->value[0];

    f = find(ex, "image/class/text");
    if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST && f->bytes_list && f->bytes_list->n_value > 0) {
        out->text = f->bytes_list->value[0].data;
        out->text_len = f->bytes_list->value[0].len;
    }
    f = find(ex, "image/filename");
    if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST && f->bytes_list && f->bytes_list->n_value > 0) {
        out->filename = f->bytes_list->value[0].data;
        out->filename_len = f->bytes_list->value[0].len;
    }

    static const char *const keys[4] = {"image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
                                        "image/object/bbox/ymax"};
    const float *v[4];
    long n[4];
    for (int k = 0; k < 4; k++)
        if ((n[k] = float_list(ex, keys[k], &v[k], err, errlen)) < 0) goto fail;
    if (n[0] != n[1] || n[0] != n[2] || n[0] != n[3]) {
        snprintf(err, errlen, "bounding box lists differ in length (xmin %ld, ymin %ld, xmax %ld, ymax %ld)", n[0],
                 n[1], n[2], n[3]);
        goto fail;
    }
    if (n[0] > 0) {
        out->nbox = (int)n[0];
        out->xmin = v[0];
        out->ymin = v[1];
        out->xmax = v[2];
        out->ymax = v[3];
    }
    return 0;
fail:
    example_image_free(out);
    return -1;
}

void example_image_free(ExampleImage *e) {
    if (e->msg_) tensorflow__example__free_unpacked(e->msg_, NULL);
    memset(e, 0, sizeof *e);
}

/* ---- generic access ---------------------------------------------------------------------- */

ExampleMsg *example_unpack(const uint8_t *buf, size_t len) {
    Tensorflow__Example *ex = tensorflow__example__unpack(NULL, len, buf);
    if (!ex) return NULL;
    ExampleMsg *m = xmalloc(sizeof *m);
    m->ex = ex;
    return m;
}

void example_msg_free(ExampleMsg *m) {
    if (!m) return;
    tensorflow__example__free_unpacked(m->ex, NULL);
    free(m);
}

int example_feature(const ExampleMsg *m, const char *key, size_t *n) { return kind_index(find(m->ex, key), n); }

const uint8_t *example_bytes(const ExampleMsg *m, const char *key, size_t i, size_t *len) {
    const Tensorflow__Feature *f = find(m->ex, key);
    if (!f || f->kind_case != TENSORFLOW__FEATURE__KIND_BYTES_LIST || !f->bytes_list || i >= f->bytes_list->n_value)
        die("example_bytes: no bytes value %zu for %s", i, key);
    *len = f->bytes_list->value[i].len;
    return f->bytes_list->value[i].data;
}

float example_float(const ExampleMsg *m, const char *key, size_t i) {
    const Tensorflow__Feature *f = find(m->ex, key);
    if (!f || f->kind_case != TENSORFLOW__FEATURE__KIND_FLOAT_LIST || !f->float_list || i >= f->float_list->n_value)
        die("example_float: no float value %zu for %s", i, key);
    return f->float_list->value[i];
}

int64_t example_int64(const ExampleMsg *m, const char *key, size_t i) {
    const Tensorflow__Feature *f = find(m->ex, key);
    if (!f || f->kind_case != TENSORFLOW__FEATURE__KIND_INT64_LIST || !f->int64_list || i >= f->int64_list->n_value)
        die("example_int64: no int64 value %zu for %s", i, key);
    return f->int64_list->value[i];
}

/* ---- builder ----------------------------------------------------------------------------- */

typedef struct BuiltFeature {
    char *key;
    int kind; /* 1 bytes, 2 float, 3 int64 */
    size_t n;
    void *values;    /* float[n] or int64_t[n] */
    ProtobufCBinaryData *bytes; /* [n], data malloc'd */
} BuiltFeature;

struct ExampleBuilder {
    BuiltFeature *f;
    size_t n, cap;
};

ExampleBuilder *example_builder_new(void) { return xcalloc(1, sizeof(ExampleBuilder)); }

static BuiltFeature *add_feature(ExampleBuilder *b, const char *key, int kind, size_t n) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 16;
        b->f = xrealloc(b->f, b->cap * sizeof *b->f);
    }
    BuiltFeature *f = &b->f[b->n++];
    memset(f, 0, sizeof *f);
    f->key = xstrdup(key);
    f->kind = kind;
    f->n = n;
    return f;
}

void example_add_bytes_list(ExampleBuilder *b, const char *key, const void *const *data, const size_t *len, size_t n) {
    BuiltFeature *f = add_feature(b, key, 1, n);
    f->bytes = xmalloc(n * sizeof *f->bytes);
    for (size_t i = 0; i < n; i++) {
        f->bytes[i].data = xmalloc(len[i]);
        if (len[i]) memcpy(f->bytes[i].data, data[i], len[i]);
        f->bytes[i].len = len[i];
    }
}

void example_add_bytes(ExampleBuilder *b, const char *key, const void *data, size_t len) {
    example_add_bytes_list(b, key, &data, &len, 1);
}

void example_add_string(ExampleBuilder *b, const char *key, const char *s) { example_add_bytes(b, key, s, strlen(s)); }

void example_add_int64s(ExampleBuilder *b, const char *key, const int64_t *v, size_t n) {
    BuiltFeature *f = add_feature(b, key, 3, n);
    f->values = xmalloc(n * sizeof(int64_t));
    if (n) memcpy(f->values, v, n * sizeof(int64_t));
}

void example_add_floats(ExampleBuilder *b, const char *key, const float *v, size_t n) {
    BuiltFeature *f = add_feature(b, key, 2, n);
    f->values = xmalloc(n * sizeof(float));
    if (n) memcpy(f->values, v, n * sizeof(float));
}

static int cmp_feature(const void *a, const void *b) {
    return strcmp((*(const BuiltFeature *const *)a)->key, (*(const BuiltFeature *const *)b)->key);
}

uint8_t *example_serialize(const ExampleBuilder *b, size_t *len) {
    size_t n = b->n;
    const BuiltFeature **sorted = xmalloc((n ? n : 1) * sizeof *sorted);
    for (size_t i = 0; i < n; i++) sorted[i] = &b->f[i];
    qsort(sorted, n, sizeof *sorted, cmp_feature);

    Tensorflow__Features__FeatureEntry *entries = xcalloc(n ? n : 1, sizeof *entries);
    Tensorflow__Features__FeatureEntry **eptr = xcalloc(n ? n : 1, sizeof *eptr);
    Tensorflow__Feature *feats = xcalloc(n ? n : 1, sizeof *feats);
    Tensorflow__BytesList *bl = xcalloc(n ? n : 1, sizeof *bl);
    Tensorflow__FloatList *fl = xcalloc(n ? n : 1, sizeof *fl);
    Tensorflow__Int64List *il = xcalloc(n ? n : 1, sizeof *il);
    for (size_t i = 0; i < n; i++) {
        const BuiltFeature *s = sorted[i];
        tensorflow__features__feature_entry__init(&entries[i]);
        tensorflow__feature__init(&feats[i]);
        entries[i].key = s->key;
        entries[i].value = &feats[i];
        eptr[i] = &entries[i];
        if (s->kind == 1) {
            tensorflow__bytes_list__init(&bl[i]);
            bl[i].n_value = s->n;
            bl[i].value = s->bytes;
            feats[i].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
            feats[i].bytes_list = &bl[i];
        } else if (s->kind == 2) {
            tensorflow__float_list__init(&fl[i]);
            fl[i].n_value = s->n;
            fl[i].value = s->values;
            feats[i].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
            feats[i].float_list = &fl[i];
        } else {
            tensorflow__int64_list__init(&il[i]);
            il[i].n_value = s->n;
            il[i].value = s->values;
            feats[i].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
            feats[i].int64_list = &il[i];
        }
    }
    Tensorflow__Features features;
    tensorflow__features__init(&features);
    features.n_feature = n;
    features.feature = eptr;
    Tensorflow__Example ex;
    tensorflow__example__init(&ex);
    ex.features = &features;
    size_t sz = tensorflow__example__get_packed_size(&ex);
    uint8_t *out = xmalloc(sz);
    size_t wrote = tensorflow__example__pack(&ex, out);
    if (wrote != sz) die("example_serialize: packed %zu bytes, expected %zu", wrote, sz);
    *len = sz;
    free(sorted);
    free(entries);
    free(eptr);
    free(feats);
    free(bl);
    free(fl);
    free(il);
    return out;
}

void example_builder_free(ExampleBuilder *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        BuiltFeature *f = &b->f[i];
        free(f->key);
        free(f->values);
        if (f->bytes) {
            for (size_t k = 0; k < f->n; k++) free(f->bytes[k].data);
            free(f->bytes);
        }
    }
    free(b->f);
    free(b);
}
