/* test_image.c: JPEG and PNG decoding against reference decodes written by other
 * implementations (scripts/make_fixtures_image.py: TensorFlow's decode_jpeg with nvcnn's settings,
 * Pillow for CMYK and PNG), region and scaled decodes, corrupt input, encoders. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zlib.h>

#include "harness.h"
#include "testutil.h"
#include "io/image.h"

/* Binary PPM (P6, maxval 255). */
static uint8_t *read_ppm(const char *path, int *w, int *h) {
    size_t len;
    uint8_t *b = tu_read_file(path, &len);
    if (!b) return NULL;
    int maxv, off = 0;
    if (sscanf((char *)b, "P6 %d %d %d%n", w, h, &maxv, &off) != 3 || maxv != 255) {
        free(b);
        return NULL;
    }
    off++; /* one whitespace byte after maxval */
    uint8_t *px = malloc((size_t)*w * *h * 3);
    memcpy(px, b + off, (size_t)*w * *h * 3);
    free(b);
    return px;
}

typedef struct Diff {
    int max;
    double mean;
} Diff;

static Diff compare_fixture(const char *name) {
    Diff d = {999, 999};
    char p[256], r[256];
    snprintf(p, sizeof p, "data/fixtures/%s", name);
    snprintf(r, sizeof r, "data/fixtures/%s.ppm", name);
    size_t len;
    uint8_t *data = tu_read_file(p, &len);
    int rw, rh;
    uint8_t *ref = read_ppm(r, &rw, &rh);
    CHECK_MSG(data && ref, "fixture %s missing", name);
    if (!data || !ref) return d;
    uint8_t *img;
    int w, h;
    char err[256];
    int rc = image_decode_rgb(data, len, &img, &w, &h, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", name, err);
    if (rc == 0) {
        CHECK_MSG(w == rw && h == rh, "%s: %dx%d, reference %dx%d", name, w, h, rw, rh);
        if (w == rw && h == rh) {
            double s = 0;
            d.max = 0;
            for (int i = 0; i < w * h * 3; i++) {
                int e = abs((int)img[i] - (int)ref[i]);
                if (e > d.max) d.max = e;
                s += e;
            }
            d.mean = s / (w * h * 3);
        }
        free(img);
    }
    free(data);
    free(ref);
    return d;
}

TEST(image_jpeg_matches_tensorflow_integer_fast_decode) {
    const char *names[] = {"img_420.jpg", "img_444.jpg", "img_422_odd.jpg", "img_progressive.jpg", "img_gray.jpg"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        Diff d = compare_fixture(names[i]);
        printf("    %-20s max |diff| %d, mean %.3f (of 255)\n", names[i], d.max, d.mean);
        CHECK_MSG(d.max <= 2, "%s: max difference %d > 2", names[i], d.max);
    }
}

TEST(image_cmyk_jpeg_comes_out_rgb) {
    /* Pillow's CMYK->RGB (Adobe inverted) against ours; Pillow decodes with the accurate DCT and
     * fancy upsampling, so allow the difference of the fast DCT */
    Diff d = compare_fixture("img_cmyk.jpg");
    printf("    img_cmyk.jpg max |diff| %d, mean %.3f\n", d.max, d.mean);
    CHECK_MSG(d.mean < 2.0 && d.max <= 12, "CMYK: max %d mean %.3f", d.max, d.mean);
}

TEST(image_png_variants_decode_exactly) {
    /* img_rgb16.png and img_gray16_odd.png: 16-bit samples of any value, referenced by TensorFlow's
     * decode_png (which keeps the high byte) */
    const char *names[] = {"img_rgb.png", "img_rgba.png", "img_palette.png", "img_gray.png", "img_gray16.png", "img_rgb16.png",
                           "img_gray16_odd.png"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        Diff d = compare_fixture(names[i]);
        CHECK_MSG(d.max == 0, "%s: max difference %d", names[i], d.max);
    }
}

TEST(image_region_and_scaled_decode_match_full_decode) {
    size_t len;
    uint8_t *data = tu_read_file("data/fixtures/img_large.jpg", &len);
    CHECK(data != NULL);
    if (!data) return;
    char err[256];
    int w, h;
    CHECK(image_dims(data, len, &w, &h, err, sizeof err) == 0 && w == 500 && h == 375);
    uint8_t *full, *reg;
    int fw, fh, rw, rh;
    CHECK(image_decode_rgb(data, len, &full, &fw, &fh, err, sizeof err) == 0);
    /* unscaled region: exactly the full decode's pixels (crop_scanline widens to iMCU edges) */
    int x = 37, y = 51, cw = 203, ch = 150;
    CHECK(image_decode_region(data, len, x, y, cw, ch, cw, ch, &reg, &rw, &rh, err, sizeof err) == 0);
    CHECK(rw == cw && rh == ch);
    int maxd = 0;
    for (int r = 0; r < rh && rw == cw; r++)
        for (int c = 0; c < rw * 3; c++) {
            int e = abs((int)reg[r * rw * 3 + c] - (int)full[((y + r) * fw) * 3 + x * 3 + c]);
            if (e > maxd) maxd = e;
        }
    printf("    region 203x150 vs full decode: max |diff| %d\n", maxd);
    CHECK_MSG(maxd <= 1, "region differs from the full decode by %d", maxd);
    free(reg);
    /* 1/2 DCT scale: compare with 2x2 box averages of the full decode */
    CHECK(image_decode_region(data, len, 0, 0, 500, 374, 224, 160, &reg, &rw, &rh, err, sizeof err) == 0);
    /* rows 0..373 at 1/2 scale: ceil(374 / 2) = 187 rows, or 188 where the region's end rounds up */
    CHECK_MSG(rw == 250 && (rh == 187 || rh == 188), "scaled region %dx%d", rw, rh);
    double s = 0;
    int n = 0;
    for (int r = 0; r + 1 < rh && rw == 250; r++)
        for (int c = 0; c < rw; c++)
            for (int k = 0; k < 3; k++) {
                int a = full[((2 * r) * fw + 2 * c) * 3 + k] + full[((2 * r) * fw + 2 * c + 1) * 3 + k] +
                        full[((2 * r + 1) * fw + 2 * c) * 3 + k] + full[((2 * r + 1) * fw + 2 * c + 1) * 3 + k];
                s += fabs(a / 4.0 - reg[(r * rw + c) * 3 + k]);
                n++;
            }
    double mean = s / (n ? n : 1);
    printf("    1/2-scale decode vs 2x2 box average of the full decode: mean |diff| %.2f\n", mean);
    CHECK_MSG(mean < 4.0, "scaled decode mean difference %.2f", mean);
    free(reg);
    free(full);
    free(data);
}

TEST(image_corrupt_and_truncated_input_fail_cleanly) {
    size_t len;
    uint8_t *data = tu_read_file("data/fixtures/img_420.jpg", &len);
    CHECK(data != NULL);
    if (!data) return;
    char err[256];
    uint8_t *img = NULL;
    int w, h;
    for (size_t cut = 2; cut < len; cut += len / 7) {
        err[0] = 0;
        int rc = image_decode_rgb(data, cut, &img, &w, &h, err, sizeof err);
        CHECK_MSG(rc == -1 && err[0], "truncated at %zu: rc %d", cut, rc);
        if (rc == 0) free(img);
    }
    uint8_t *bad = malloc(len);
    memcpy(bad, data, len);
    for (size_t i = len / 3; i < len / 3 + 40; i++) bad[i] ^= 0x55;
    int rc = image_decode_rgb(bad, len, &img, &w, &h, err, sizeof err);
    if (rc == 0) free(img); /* a flipped entropy segment may still decode; it must not crash */
    uint8_t junk[16] = {'h', 'e', 'l', 'l', 'o'};
    CHECK(image_decode_rgb(junk, sizeof junk, &img, &w, &h, err, sizeof err) == -1 && strstr(err, "not a JPEG"));
    CHECK(image_sniff(data, len) == IMG_JPEG && image_sniff(junk, sizeof junk) == IMG_UNKNOWN);
    free(bad);
    free(data);
}

/* JPEGs that libjpeg decodes with a warning that leaves the pixels as meant: a JFIF revision 2.01
 * (an unknown major version) and 3 stray bytes before the SOS marker. TensorFlow's decode_jpeg
 * reads both (checked with TensorFlow 2.21: the same pixels as the clean file), so nvcnn must:
 * each decodes to exactly the clean file's pixels. A warning about damaged coded data (a premature
 * end of a scan) stays an error, not a gray-padded sample. */
TEST(image_harmless_jpeg_warnings_decode_as_tensorflow) {
    size_t len;
    uint8_t *data = tu_read_file("data/fixtures/img_420.jpg", &len);
    CHECK(data != NULL);
    if (!data) return;
    char err[256];
    uint8_t *clean = NULL, *img = NULL;
    int cw, ch, w, h;
    CHECK(image_decode_rgb(data, len, &clean, &cw, &ch, err, sizeof err) == 0);
    CHECK(memcmp(data + 6, "JFIF", 5) == 0);
    uint8_t *v2 = malloc(len);
    memcpy(v2, data, len);
    v2[11] = 2; /* APP0's major version */
    size_t sos = 0;
    for (size_t i = 2; i + 1 < len && !sos; i++)
        if (data[i] == 0xFF && data[i + 1] == 0xDA) sos = i;
    CHECK(sos > 0);
    uint8_t *junk = malloc(len + 3);
    memcpy(junk, data, sos);
    memcpy(junk + sos, "\x12\x34\x56", 3);
    memcpy(junk + sos + 3, data + sos, len - sos);
    const struct {
        const char *what;
        const uint8_t *d;
        size_t n;
    } cases[] = {{"JFIF 2.01", v2, len}, {"3 bytes before SOS", junk, len + 3}};
    for (int k = 0; k < 2; k++) {
        err[0] = 0;
        int rc = image_decode_rgb(cases[k].d, cases[k].n, &img, &w, &h, err, sizeof err);
        CHECK_MSG(rc == 0, "%s: %s", cases[k].what, err);
        if (rc != 0) continue;
        CHECK_MSG(w == cw && h == ch && clean && memcmp(img, clean, (size_t)w * h * 3) == 0, "%s: pixels differ", cases[k].what);
        free(img);
    }
    /* the scan cut short, the file's end marker kept: "premature end of data segment" */
    uint8_t *cut = malloc(len);
    size_t keep = sos + (len - sos) / 2;
    memcpy(cut, data, keep);
    cut[keep] = 0xFF;
    cut[keep + 1] = 0xD9;
    err[0] = 0;
    int rc = image_decode_rgb(cut, keep + 2, &img, &w, &h, err, sizeof err);
    CHECK_MSG(rc == -1 && strstr(err, "Corrupt JPEG data"), "a scan cut short: rc %d, %s", rc, err);
    if (rc == 0) free(img);
    free(cut);
    free(junk);
    free(v2);
    free(clean);
    free(data);
}

TEST(image_encoders_round_trip) {
    uint8_t px[20 * 10 * 3];
    for (int i = 0; i < 20 * 10 * 3; i++) px[i] = (uint8_t)((i * 13) % 256);
    uint8_t *enc, *dec;
    size_t n;
    int w, h;
    char err[128];
    CHECK(image_encode_png(px, 20, 10, 3, &enc, &n) == 0 && image_sniff(enc, n) == IMG_PNG);
    CHECK(image_decode_rgb(enc, n, &dec, &w, &h, err, sizeof err) == 0 && w == 20 && h == 10);
    CHECK(memcmp(dec, px, sizeof px) == 0);
    free(enc);
    free(dec);
    uint8_t g[16 * 8];
    for (int i = 0; i < 16 * 8; i++) g[i] = (uint8_t)(40 + (i % 16) * 8 + (i / 16) * 4); /* smooth */
    CHECK(image_encode_jpeg(g, 16, 8, 1, 95, &enc, &n) == 0 && image_sniff(enc, n) == IMG_JPEG);
    CHECK(image_decode_rgb(enc, n, &dec, &w, &h, err, sizeof err) == 0 && w == 16 && h == 8);
    int maxd = 0;
    for (int i = 0; i < 16 * 8; i++)
        for (int k = 0; k < 3; k++) maxd = abs(dec[3 * i + k] - g[i]) > maxd ? abs(dec[3 * i + k] - g[i]) : maxd;
    CHECK_MSG(maxd <= 6, "gray JPEG round trip max difference %d", maxd);
    free(enc);
    free(dec);
}

/* An Adam7-interlaced RGB PNG of w x h written with libpng (pixels: a pattern of x, y). */
static uint8_t *adam7_png(int w, int h, size_t *len) {
    FILE *f = tmpfile();
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    uint8_t *px = malloc((size_t)w * h * 3);
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++) {
        rows[y] = px + (size_t)y * w * 3;
        for (int x = 0; x < w; x++) {
            rows[y][3 * x] = (uint8_t)(7 * x + y);
            rows[y][3 * x + 1] = (uint8_t)(3 * y);
            rows[y][3 * x + 2] = (uint8_t)(x ^ y);
        }
    }
    png_set_rows(png, info, rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(px);
    *len = (size_t)ftell(f);
    uint8_t *d = malloc(*len);
    rewind(f);
    if (fread(d, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return d;
}

/* A PNG's region is read row by row down to its last row (an interlaced one whole): every region,
 * corners, single pixels and the whole image included, holds exactly the full decode's pixels. */
TEST(image_png_region_matches_full_decode) {
    const char *names[] = {"img_rgb.png", "img_palette.png", "img_gray16_odd.png", NULL};
    for (int k = 0; k < 4; k++) {
        size_t len = 0;
        uint8_t *data;
        if (names[k]) {
            char p[256];
            snprintf(p, sizeof p, "data/fixtures/%s", names[k]);
            data = tu_read_file(p, &len);
        } else
            data = adam7_png(37, 29, &len);
        const char *name = names[k] ? names[k] : "Adam7 37x29";
        CHECK_MSG(data && len, "%s missing", name);
        if (!data || !len) continue;
        uint8_t *full, *reg;
        int w, h, rw, rh;
        char err[256];
        CHECK_MSG(image_decode_rgb(data, len, &full, &w, &h, err, sizeof err) == 0, "%s: %s", name, err);
        const int boxes[][4] = {{0, 0, w, h}, {0, 0, 1, 1}, {w - 1, h - 1, 1, 1}, {w / 3, h / 4, w / 2, h / 2},
                                {w - 5, 0, 5, h}, {0, h - 3, w, 3}};
        for (int b = 0; b < 6; b++) {
            const int x = boxes[b][0], y = boxes[b][1], cw = boxes[b][2], ch = boxes[b][3];
            int rc = image_decode_region(data, len, x, y, cw, ch, 1, 1, &reg, &rw, &rh, err, sizeof err);
            CHECK_MSG(rc == 0 && rw == cw && rh == ch, "%s region %d,%d %dx%d: rc %d %dx%d %s", name, x, y, cw, ch, rc,
                      rw, rh, rc ? err : "");
            if (rc) continue;
            int same = rw == cw && rh == ch;
            for (int r = 0; r < ch && same; r++)
                same = !memcmp(reg + (size_t)r * cw * 3, full + ((size_t)(y + r) * w + x) * 3, (size_t)cw * 3);
            CHECK_MSG(same, "%s region %d,%d %dx%d differs from the full decode", name, x, y, cw, ch);
            free(reg);
        }
        CHECK(image_decode_region(data, len, w - 2, 0, 3, 1, 1, 1, &reg, &rw, &rh, err, sizeof err) == -1 &&
              strstr(err, "region outside"));
        free(full);
        free(data);
    }
}

/* Over 2^28 pixels: refused from the header alone, by image_dims (what the converter checks) and
 * the decoders, with the size and the limit in the message. */
TEST(image_over_the_pixel_limit_is_refused_from_the_header) {
    /* the signature, IHDR and an empty IDAT chunk: libpng reads the header up to the data */
    uint8_t png[45] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    const uint32_t W = 17000, H = 16000;
    for (int i = 0; i < 4; i++) {
        png[16 + i] = (uint8_t)(W >> (24 - 8 * i));
        png[20 + i] = (uint8_t)(H >> (24 - 8 * i));
    }
    png[24] = 8;
    png[25] = 2;
    uLong crc = crc32(0, png + 12, 17);
    for (int i = 0; i < 4; i++) png[29 + i] = (uint8_t)(crc >> (24 - 8 * i));
    memcpy(png + 37, "IDAT", 4);
    crc = crc32(0, png + 37, 4);
    for (int i = 0; i < 4; i++) png[41 + i] = (uint8_t)(crc >> (24 - 8 * i));
    char err[256];
    int w, h;
    uint8_t *img = NULL;
    const char *want = "PNG: 17000x16000 is 272000000 pixels, more than the 268435456 (2^28) nvcnn decodes";
    CHECK_MSG(image_dims(png, sizeof png, &w, &h, err, sizeof err) == -1 && !strcmp(err, want), "image_dims: %s", err);
    CHECK_MSG(image_decode_rgb(png, sizeof png, &img, &w, &h, err, sizeof err) == -1 && !strcmp(err, want), "decode: %s", err);
    CHECK(image_decode_region(png, sizeof png, 0, 0, 224, 224, 224, 224, &img, &w, &h, err, sizeof err) == -1 &&
          !strcmp(err, want));
    /* 16384 x 16384 is the limit itself: the header passes */
    for (int i = 0; i < 4; i++) png[16 + i] = png[20 + i] = (uint8_t)(16384u >> (24 - 8 * i));
    CHECK(image_dims(png, sizeof png, &w, &h, err, sizeof err) == 0 && w == 16384 && h == 16384);
}
