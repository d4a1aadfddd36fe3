/* test_example.c: tf.train.Example parsing: the records TensorFlow wrote into the fixture with
 * their exact field values, packed and unpacked repeated fields built byte by byte from the
 * protobuf wire format, the errors, and the builder used by the converter. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "harness.h"
#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"
#include "util.h"

/* ---- a protobuf wire-format writer, independent of the parser under test ------------------ */

typedef struct W {
    uint8_t b[8192];
    size_t n;
} W;

static void put(W *w, const void *p, size_t n) {
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void varint(W *w, uint64_t v) {
    while (v >= 0x80) {
        w->b[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->b[w->n++] = (uint8_t)v;
}
static void tag(W *w, int field, int wt) { varint(w, (uint64_t)(field << 3 | wt)); }
static void lenfield(W *w, int field, const void *p, size_t n) {
    tag(w, field, 2);
    varint(w, n);
    put(w, p, n);
}

/* One map entry {key, Feature} appended to a Features message. */
static void entry(W *features, const char *key, const W *feature) {
    W e = {.n = 0};
    lenfield(&e, 1, key, strlen(key));
    lenfield(&e, 2, feature->b, feature->n);
    lenfield(features, 1, e.b, e.n);
}
static void f_bytes(W *fs, const char *key, const void *p, size_t n) {
    W list = {.n = 0}, f = {.n = 0};
    lenfield(&list, 1, p, n);
    lenfield(&f, 1, list.b, list.n);
    entry(fs, key, &f);
}
/* A bytes_list of n copies of p. */
static void f_bytes_n(W *fs, const char *key, const void *p, size_t len, int n) {
    W list = {.n = 0}, f = {.n = 0};
    for (int i = 0; i < n; i++) lenfield(&list, 1, p, len);
    lenfield(&f, 1, list.b, list.n);
    entry(fs, key, &f);
}
static void f_int64(W *fs, const char *key, const int64_t *v, int n, int packed) {
    W list = {.n = 0}, f = {.n = 0};
    if (packed) {
        W body = {.n = 0};
        for (int i = 0; i < n; i++) varint(&body, (uint64_t)v[i]);
        lenfield(&list, 1, body.b, body.n);
    } else {
        for (int i = 0; i < n; i++) {
            tag(&list, 1, 0);
            varint(&list, (uint64_t)v[i]);
        }
    }
    lenfield(&f, 3, list.b, list.n);
    entry(fs, key, &f);
}
static void f_float(W *fs, const char *key, const float *v, int n, int packed) {
    W list = {.n = 0}, f = {.n = 0};
    if (packed) {
        W body = {.n = 0};
        for (int i = 0; i < n; i++) put(&body, &v[i], 4); /* little-endian host */
        lenfield(&list, 1, body.b, body.n);
    } else {
        for (int i = 0; i < n; i++) {
            tag(&list, 1, 5);
            put(&list, &v[i], 4);
        }
    }
    lenfield(&f, 2, list.b, list.n);
    entry(fs, key, &f);
}
static void finish(const W *features, W *example) {
    example->n = 0;
    lenfield(example, 1, features->b, features->n);
}

static const float XMIN[] = {0.1f, 0.5f, 0.0f}, YMIN[] = {0.2f, 0.25f, 0.0f}, XMAX[] = {0.9f, 0.75f, 1.0f},
                   YMAX[] = {0.8f, 1.0f, 1.0f};

static void build(W *ex, int packed_ints, int packed_floats, int64_t label) {
    W fs = {.n = 0};
    const uint8_t img[] = {0xff, 0xd8, 0xff, 0xe0, 1, 2, 3};
    f_bytes(&fs, "image/encoded", img, sizeof img);
    f_int64(&fs, "image/class/label", &label, 1, packed_ints);
    int64_t hw[2] = {480, 640};
    f_int64(&fs, "image/height", &hw[0], 1, packed_ints);
    f_bytes(&fs, "image/class/text", "n01440764", 9);
    f_float(&fs, "image/object/bbox/xmin", XMIN, 3, packed_floats);
    f_float(&fs, "image/object/bbox/ymin", YMIN, 3, packed_floats);
    f_float(&fs, "image/object/bbox/xmax", XMAX, 3, packed_floats);
    f_float(&fs, "image/object/bbox/ymax", YMAX, 3, packed_floats);
    finish(&fs, ex);
}

TEST(example_packed_and_unpacked_lists) {
    for (int pi = 0; pi < 2; pi++)
        for (int pf = 0; pf < 2; pf++) {
            W ex;
            build(&ex, pi, pf, 300);
            ExampleImage e;
            char err[256];
            CHECK_MSG(example_parse_image(ex.b, ex.n, &e, err, sizeof err) == 0, "packed %d/%d: %s", pi, pf, err);
            CHECK(e.label == 300);
            CHECK(e.encoded_len == 7 && e.encoded[0] == 0xff && e.encoded[6] == 3);
            CHECK(e.text_len == 9 && memcmp(e.text, "n01440764", 9) == 0);
            CHECK(e.nbox == 3);
            for (int i = 0; i < 3 && e.nbox == 3; i++)
                CHECK(e.xmin[i] == XMIN[i] && e.ymin[i] == YMIN[i] && e.xmax[i] == XMAX[i] && e.ymax[i] == YMAX[i]);
            example_image_free(&e);
            ExampleMsg *m = example_unpack(ex.b, ex.n);
            CHECK(m != NULL);
            size_t n;
            CHECK(example_feature(m, "image/height", &n) == 3 && n == 1 && example_int64(m, "image/height", 0) == 480);
            CHECK(example_feature(m, "image/object/bbox/ymax", &n) == 2 && n == 3);
            CHECK(example_float(m, "image/object/bbox/ymax", 1) == 1.0f);
            CHECK(example_feature(m, "image/nothing", &n) == 0 && n == 0);
            example_msg_free(m);
        }
    /* a negative label survives the varint round trip (10-byte two's complement) */
    W ex;
    build(&ex, 0, 1, -5);
    ExampleImage e;
    char err[256];
    CHECK(example_parse_image(ex.b, ex.n, &e, err, sizeof err) == 0 && e.label == -5);
    example_image_free(&e);
}

TEST(example_errors_name_the_problem) {
    char err[256];
    ExampleImage e;
    const int64_t one = 1;
    const float f = 1.0f;
    const uint8_t img[] = {0x89, 'P', 'N', 'G'};
    struct {
        int variant;
        const char *msg;
    } cases[] = {{0, "no image/encoded"},        {1, "image/encoded is a int64_list"}, {2, "no image/class/label"},
                 {3, "image/class/label is a float_list"}, {4, "bounding box lists differ"},
                 {5, "image/object/bbox/xmin is a bytes_list"}, {6, "image/class/label holds 2 values, expected 1"},
                 {7, "image/class/label holds 2 values, expected 1"}, {8, "image/encoded holds 2 images, expected 1"}};
    const int64_t two[] = {1, 2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        W fs = {.n = 0}, ex;
        int v = cases[c].variant;
        if (v == 1)
            f_int64(&fs, "image/encoded", &one, 1, 1);
        else if (v == 8)
            f_bytes_n(&fs, "image/encoded", img, sizeof img, 2);
        else if (v != 0)
            f_bytes(&fs, "image/encoded", img, sizeof img);
        if (v == 3)
            f_float(&fs, "image/class/label", &f, 1, 1);
        else if (v == 6 || v == 7)
            f_int64(&fs, "image/class/label", two, 2, v == 6);
        else if (v != 2)
            f_int64(&fs, "image/class/label", &one, 1, 1);
        if (v == 4) {
            f_float(&fs, "image/object/bbox/xmin", XMIN, 3, 1);
            f_float(&fs, "image/object/bbox/ymin", YMIN, 2, 1);
            f_float(&fs, "image/object/bbox/xmax", XMAX, 3, 1);
            f_float(&fs, "image/object/bbox/ymax", YMAX, 3, 1);
        }
        if (v == 5) f_bytes(&fs, "image/object/bbox/xmin", "x", 1);
        finish(&fs, &ex);
        CHECK_MSG(example_parse_image(ex.b, ex.n, &e, err, sizeof err) == -1, "case %d parsed", v);
        CHECK_MSG(strstr(err, cases[c].msg) != NULL, "case %d: '%s'", v, err);
    }
    const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0x0f, 1, 2};
    CHECK(example_parse_image(garbage, sizeof garbage, &e, err, sizeof err) == -1 && strstr(err, "not a valid"));
    CHECK(example_parse_image(garbage, 0, &e, err, sizeof err) == -1 && strstr(err, "no image/encoded"));
    CHECK(example_unpack(garbage, sizeof garbage) == NULL);
}

TEST(example_duplicate_key_last_wins) {
    W fs = {.n = 0}, ex;
    int64_t a = 3, b = 9;
    f_bytes(&fs, "image/encoded", "abc", 3);
    f_int64(&fs, "image/class/label", &a, 1, 1);
    f_int64(&fs, "image/class/label", &b, 1, 0);
    finish(&fs, &ex);
    ExampleImage e;
    char err[256];
    CHECK(example_parse_image(ex.b, ex.n, &e, err, sizeof err) == 0 && e.label == 9 && e.nbox == 0 && !e.text);
    example_image_free(&e);
}

TEST(example_builder_round_trip_packed) {
    ExampleBuilder *b = example_builder_new();
    const int64_t ints[] = {1, 2, 300};
    const float fl[] = {0.5f, -2.25f};
    example_add_string(b, "image/class/text", "tabby cat");
    example_add_int64s(b, "image/class/label", ints, 3);
    example_add_floats(b, "image/object/bbox/xmin", fl, 2);
    example_add_bytes(b, "image/encoded", "\x00\x01\x02", 3);
    size_t n;
    uint8_t *buf = example_serialize(b, &n);
    example_builder_free(b);
    /* int64 list packed: field 1, wire type 2, 4 bytes 01 02 ac 02 */
    const uint8_t packed_ints[] = {0x0a, 0x04, 0x01, 0x02, 0xac, 0x02};
    CHECK(memmem(buf, n, packed_ints, sizeof packed_ints) != NULL);
    /* float list packed: field 1, wire type 2, 8 bytes */
    const uint8_t packed_floats[] = {0x0a, 0x08, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x10, 0xc0};
    CHECK(memmem(buf, n, packed_floats, sizeof packed_floats) != NULL);
    ExampleMsg *m = example_unpack(buf, n);
    CHECK(m != NULL);
    size_t k, len;
    CHECK(example_feature(m, "image/class/label", &k) == 3 && k == 3 && example_int64(m, "image/class/label", 2) == 300);
    CHECK(example_feature(m, "image/object/bbox/xmin", &k) == 2 && k == 2 &&
          example_float(m, "image/object/bbox/xmin", 1) == -2.25f);
    const uint8_t *t = example_bytes(m, "image/class/text", 0, &len);
    CHECK(len == 9 && memcmp(t, "tabby cat", 9) == 0);
    t = example_bytes(m, "image/encoded", 0, &len);
    CHECK(len == 3 && t[0] == 0 && t[2] == 2);
    example_msg_free(m);
    free(buf);
}

/* Every field of the three records TensorFlow wrote, and the pixels of the first image. */
TEST(example_reads_tensorflow_fixture) {
    FILE *f = fopen("data/fixtures/tf-examples.expected", "r");
    CHECK(f != NULL);
    if (!f) return;
    char err[512];
    TfrReader *r = tfr_open("data/fixtures/tf-examples.tfrecord", 0, err, sizeof err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) {
        fclose(f);
        return;
    }
    char line[8192];
    int nrec = 0;
    uint8_t *first_png = NULL;
    size_t first_len = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "pixels", 6) == 0) {
            int h, w, pos;
            CHECK(sscanf(line, "pixels %d %d %n", &h, &w, &pos) == 2);
            uint8_t *px;
            int dw, dh;
            CHECK_MSG(first_png && image_decode_rgb(first_png, first_len, &px, &dw, &dh, err, sizeof err) == 0, "%s",
                      err);
            if (!first_png) break;
            CHECK(dw == w && dh == h);
            int same = 1;
            for (int i = 0; i < w * h * 3; i++) {
                unsigned v;
                sscanf(line + pos + 2 * i, "%2x", &v);
                same &= px[i] == v;
            }
            CHECK_MSG(same, "decoded pixels differ from what TensorFlow encoded");
            free(px);
            continue;
        }
        char *save, *tok = strtok_r(line, " \n", &save);
        unsigned long long off = strtoull(tok, NULL, 10);
        size_t plen = strtoull(strtok_r(NULL, " \n", &save), NULL, 10);
        long long label = strtoll(strtok_r(NULL, " \n", &save), NULL, 10);
        char text[256];
        snprintf(text, sizeof text, "%s", strtok_r(NULL, " \n", &save));
        for (char *p = text; *p; p++)
            if (*p == '_') *p = ' ';
        int nbox = atoi(strtok_r(NULL, " \n", &save));
        float box[8][4];
        for (int i = 0; i < nbox; i++)
            for (int k = 0; k < 4; k++) box[i][k] = strtof(strtok_r(NULL, " \n", &save), NULL);
        size_t enc_len = strtoull(strtok_r(NULL, " \n", &save), NULL, 10);
        unsigned long crc = strtoul(strtok_r(NULL, " \n", &save), NULL, 10);

        TfrRecord rec;
        CHECK(tfr_next(r, &rec) == TFR_OK);
        CHECK(rec.offset == off && rec.len == plen);
        ExampleImage e;
        CHECK_MSG(example_parse_image(rec.data, rec.len, &e, err, sizeof err) == 0, "%s", err);
        CHECK(e.label == label);
        CHECK(e.text_len == strlen(text) && memcmp(e.text, text, e.text_len) == 0);
        CHECK(e.nbox == nbox);
        for (int i = 0; i < nbox && e.nbox == nbox; i++)
            CHECK(e.xmin[i] == box[i][0] && e.ymin[i] == box[i][1] && e.xmax[i] == box[i][2] && e.ymax[i] == box[i][3]);
        CHECK(e.encoded_len == enc_len);
        CHECK(crc32(0, e.encoded, (uInt)e.encoded_len) == crc);
        CHECK(image_sniff(e.encoded, e.encoded_len) == IMG_PNG);
        if (nrec == 0) {
            first_png = xmalloc(e.encoded_len);
            memcpy(first_png, e.encoded, e.encoded_len);
            first_len = e.encoded_len;
        }
        example_image_free(&e);
        nrec++;
    }
    CHECK(nrec == 3);
    free(first_png);
    fclose(f);
    tfr_close(r);
}
