/* test_augment.c: augmentation invariants with nvcnn's semantics: crops inside the image, the
 * area/aspect ranges and min_object_covered, the eval central crop, resize, flip, determinism. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "io/augment_internal.h"
#include "io/image.h"

TEST(augment_crop_stays_inside_and_respects_ranges) {
    Rng r;
    rng_seed(&r, 77);
    const int sizes[][2] = {{500, 375}, {28, 28}, {1, 1}, {3, 200}, {640, 17}, {224, 224}, {33, 34}};
    int whole = 0, total = 0;
    double amin = 1, asp_lo = 10, asp_hi = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int i = 0; i < 3000; i++) {
            int W = sizes[s][0], H = sizes[s][1];
            CropBox c = sample_distorted_crop(W, H, NULL, 0, 0, &r);
            total++;
            CHECK_MSG(c.x >= 0 && c.y >= 0 && c.w > 0 && c.h > 0 && c.x + c.w <= W && c.y + c.h <= H,
                      "%dx%d: crop %d,%d %dx%d", W, H, c.x, c.y, c.w, c.h);
            if (c.w == W && c.h == H) {
                whole++;
                continue;
            }
            double area = (double)c.w * c.h / ((double)W * H), aspect = (double)c.w / c.h;
            /* nvcnn 1.6: area 0.1-1, aspect 0.8-1.25 */
            CHECK_MSG(area >= 0.1 - 1e-6 && area <= 1.0, "area %g", area);
            /* rounding to whole pixels moves the aspect a little on small crops */
            CHECK_MSG(aspect >= 0.8 * (1 - 1.0 / c.h) - 1e-6 && aspect <= 1.25 * (1 + 1.0 / c.h) + 1e-6, "aspect %g (%dx%d)", aspect, c.w, c.h);
            if (W == 500) { /* on a large image the ranges are used to their ends */
                amin = fmin(amin, area);
                asp_lo = fmin(asp_lo, aspect);
                asp_hi = fmax(asp_hi, aspect);
            }
        }
    CHECK(whole < total); /* real crops happen */
    CHECK_MSG(amin < 0.12 && asp_lo < 0.82 && asp_hi > 1.22, "area from %g, aspect %g-%g", amin, asp_lo, asp_hi);
}

/* Every position of a crop is equally likely: for each crop width w < W, the offsets 0 .. W - w
 * are each drawn with frequency 1 / (W - w + 1), within 5 binomial standard deviations (the same
 * for heights). TensorFlow's sampler never draws W - w: a crop one pixel narrower than a 28-pixel
 * image would always sit at x = 0, and the right column and bottom row would be cut more often. */
TEST(augment_crop_offsets_uniform_over_every_position) {
    const int sizes[][2] = {{28, 28}, {40, 30}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int W = sizes[s][0], H = sizes[s][1];
        static long cx[41][41], cy[41][41]; /* [size][offset] */
        static long nx[41], ny[41];
        memset(cx, 0, sizeof cx);
        memset(cy, 0, sizeof cy);
        memset(nx, 0, sizeof nx);
        memset(ny, 0, sizeof ny);
        Rng r;
        rng_seed(&r, 2024 + s);
        for (int i = 0; i < 200000; i++) {
            CropBox c = sample_distorted_crop(W, H, NULL, 0, 0.6f, &r);
            cx[c.w][c.x]++;
            nx[c.w]++;
            cy[c.h][c.y]++;
            ny[c.h]++;
        }
        int checked = 0;
        for (int axis = 0; axis < 2; axis++) {
            const int D = axis ? H : W;
            for (int w = 1; w < D; w++) {
                long n = axis ? ny[w] : nx[w];
                if (n < 2000) continue;
                const int k = D - w + 1; /* positions */
                const double p = 1.0 / k, sd = sqrt(n * p * (1 - p));
                for (int o = 0; o < k; o++) {
                    long got = axis ? cy[w][o] : cx[w][o];
                    CHECK_MSG(fabs(got - n * p) <= 5 * sd, "%dx%d, %s %d: offset %d drawn %ld times of %ld (expected %.0f)", W, H,
                              axis ? "height" : "width", w, o, got, n, n * p);
                }
                checked++;
            }
        }
        CHECK_MSG(checked >= 6, "%dx%d: only %d crop sizes drawn often enough", W, H, checked);
    }
}

TEST(augment_crop_honours_min_object_covered) {
    Rng r;
    rng_seed(&r, 5);
    BBox box = {0.70f, 0.70f, 0.95f, 0.95f}; /* ymin, xmin, ymax, xmax: a small box in a corner */
    for (int i = 0; i < 2000; i++) {
        CropBox c = sample_distorted_crop(400, 300, &box, 1, 0, &r);
        double bx0 = 0.70 * 400, by0 = 0.70 * 300, bx1 = 0.95 * 400, by1 = 0.95 * 300;
        double ix = fmin(c.x + c.w, bx1) - fmax(c.x, bx0), iy = fmin(c.y + c.h, by1) - fmax(c.y, by0);
        double inter = (ix > 0 && iy > 0) ? ix * iy : 0;
        CHECK_MSG(inter / ((bx1 - bx0) * (by1 - by0)) >= 0.1 - 1e-6, "crop %d,%d %dx%d covers %g of the box", c.x, c.y,
                  c.w, c.h, inter / ((bx1 - bx0) * (by1 - by0)));
    }
}

TEST(augment_central_crop_geometry) {
    CropBox c = central_crop(500, 375);
    /* TensorFlow: start = int((dim - dim * 0.875) / 2), size = dim - 2 * start */
    CHECK(c.x == 31 && c.w == 438 && c.y == 23 && c.h == 329);
    c = central_crop(28, 28);
    CHECK(c.x == 1 && c.w == 26);
}

TEST(augment_resize_bilinear_as_tensorflow_legacy) {
    /* 2x2 -> 4x4 with src = dst * in/out (no half-pixel): rows/cols 0..3 map to 0, .5, 1, 1 */
    uint8_t src[2 * 2 * 3] = {0, 0, 0, 100, 100, 100, 200, 200, 200, 40, 40, 40};
    uint8_t dst[4 * 4 * 3];
    resize_bilinear_rgb(src, 2, 2, dst, 4, 4);
    CHECK(dst[0] == 0);
    CHECK(dst[3 * 1] == 50);                /* (0, .5) */
    CHECK(dst[3 * 2] == 100 && dst[3 * 3] == 100);
    CHECK(dst[3 * 4] == 100);               /* (.5, 0) */
    CHECK(dst[3 * 5] == 85);                /* (.5,.5): (0+100+200+40)/4 */
    CHECK(dst[3 * 15] == 40);
    /* a constant image stays constant, any size */
    uint8_t c[7 * 5 * 3], o[13 * 3 * 3];
    memset(c, 123, sizeof c);
    resize_bilinear_rgb(c, 7, 5, o, 13, 3);
    for (size_t i = 0; i < sizeof o; i++) CHECK(o[i] == 123);
}

TEST(augment_resize_within_one_level_of_exact_bilinear) {
    /* against bilinear in double precision with TensorFlow's legacy mapping, on random images,
     * up- and down-scaling, odd sizes, one-pixel sources */
    static const int sz[][4] = {{350, 260, 224, 224}, {500, 375, 224, 224}, {97, 61, 224, 224}, {1, 1, 5, 3},
                                {2, 9, 7, 4},         {449, 449, 224, 224}, {33, 17, 31, 19},  {8, 8, 1, 1}};
    Rng r;
    rng_seed(&r, 77);
    int worst = 0;
    for (size_t k = 0; k < sizeof sz / sizeof sz[0]; k++) {
        int sw = sz[k][0], sh = sz[k][1], dw = sz[k][2], dh = sz[k][3];
        uint8_t *src = xmalloc((size_t)sw * sh * 3), *dst = xmalloc((size_t)dw * dh * 3 + 1);
        for (int i = 0; i < sw * sh * 3; i++) src[i] = (uint8_t)rng_below(&r, 256);
        dst[dw * dh * 3] = 0xA5;
        resize_bilinear_rgb(src, sw, sh, dst, dw, dh);
        CHECK_MSG(dst[dw * dh * 3] == 0xA5, "case %zu wrote past the output", k);
        for (int y = 0; y < dh; y++)
            for (int x = 0; x < dw; x++)
                for (int c = 0; c < 3; c++) {
                    double fy = y * (double)sh / dh, fx = x * (double)sw / dw;
                    int y0 = (int)fy, x0 = (int)fx;
                    int y1 = y0 + 1 < sh ? y0 + 1 : y0, x1 = x0 + 1 < sw ? x0 + 1 : x0;
                    double ty = fy - y0, tx = fx - x0;
#define PX(yy, xx) (double)src[((size_t)(yy) * sw + (xx)) * 3 + c]
                    double e = (1 - ty) * ((1 - tx) * PX(y0, x0) + tx * PX(y0, x1)) +
                               ty * ((1 - tx) * PX(y1, x0) + tx * PX(y1, x1));
#undef PX
                    int d = abs((int)dst[((size_t)y * dw + x) * 3 + c] - (int)lround(e));
                    if (d > worst) worst = d;
                }
        free(src);
        free(dst);
    }
    printf("    resize: max |diff| %d level(s) from exact bilinear\n", worst);
    CHECK_MSG(worst <= 1, "max difference %d levels", worst);
}

static uint8_t *asym_png(size_t *len) {
    /* left half dark, right half bright, a vertical gradient: asymmetric under a flip */
    uint8_t px[40 * 40 * 3];
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 40; x++)
            for (int k = 0; k < 3; k++) px[(y * 40 + x) * 3 + k] = (uint8_t)((x < 20 ? 20 : 220) + y);
    uint8_t *out;
    image_encode_png(px, 40, 40, 3, &out, len);
    return out;
}

TEST(augment_output_size_flip_and_determinism) {
    size_t len;
    uint8_t *png = asym_png(&len);
    AugmentParams p = {.out_h = 24, .out_w = 24, .training = 1};
    uint8_t a[24 * 24 * 3], b[24 * 24 * 3];
    char err[128];
    int flipped = 0, straight = 0;
    for (int s = 0; s < 40; s++) {
        Rng r1, r2;
        rng_seed(&r1, (uint64_t)s);
        rng_seed(&r2, (uint64_t)s);
        CHECK(augment_image(png, len, NULL, 0, &p, &r1, a, err, sizeof err) == 0);
        CHECK(augment_image(png, len, NULL, 0, &p, &r2, b, err, sizeof err) == 0);
        CHECK(memcmp(a, b, sizeof a) == 0); /* same seed, same image */
        /* left-right brightness says whether it was flipped */
        int left = a[(12 * 24 + 0) * 3], right = a[(12 * 24 + 23) * 3];
        if (left > right) flipped++;
        if (left < right) straight++;
    }
    CHECK_MSG(flipped > 5 && straight > 5, "flips %d, straight %d of 40", flipped, straight);
    /* eval: deterministic, never flipped, central crop */
    AugmentParams e = {.out_h = 24, .out_w = 24, .training = 0};
    Rng r;
    rng_seed(&r, 1);
    CHECK(augment_image(png, len, NULL, 0, &e, &r, a, err, sizeof err) == 0);
    CHECK(a[(12 * 24 + 0) * 3] < a[(12 * 24 + 23) * 3]);
    /* flip symmetry: a flipped training output mirrored equals some unflipped crop geometry:
     * check it on an image that is itself mirror-symmetric */
    uint8_t sym[30 * 30 * 3];
    for (int y = 0; y < 30; y++)
        for (int x = 0; x < 30; x++)
            for (int k = 0; k < 3; k++) sym[(y * 30 + x) * 3 + k] = (uint8_t)(abs(2 * x - 29) * 4 + y);
    uint8_t *spng;
    size_t slen;
    image_encode_png(sym, 30, 30, 3, &spng, &slen);
    AugmentParams ev = {.out_h = 30, .out_w = 30, .training = 0};
    uint8_t o30[30 * 30 * 3];
    CHECK(augment_image(spng, slen, NULL, 0, &ev, &r, o30, err, sizeof err) == 0);
    for (int y = 0; y < 30; y++)
        for (int x = 0; x < 15; x++) CHECK(abs(o30[(y * 30 + x) * 3] - o30[(y * 30 + 29 - x) * 3]) <= 1);
    free(spng);
    free(png);
}

TEST(augment_color_distortion_changes_and_is_deterministic) {
    size_t len;
    uint8_t *png = asym_png(&len);
    AugmentParams p = {.out_h = 16, .out_w = 16, .training = 1, .distort_color = 1};
    uint8_t a[16 * 16 * 3], b[16 * 16 * 3], c[16 * 16 * 3];
    char err[128];
    Rng r1, r2, r3;
    rng_seed(&r1, 9);
    rng_seed(&r2, 9);
    rng_seed(&r3, 9);
    CHECK(augment_image(png, len, NULL, 0, &p, &r1, a, err, sizeof err) == 0);
    CHECK(augment_image(png, len, NULL, 0, &p, &r2, b, err, sizeof err) == 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    p.distort_color = 0;
    CHECK(augment_image(png, len, NULL, 0, &p, &r3, c, err, sizeof err) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    free(png);
}

TEST(augment_undecodable_image_is_an_error_not_a_crash) {
    uint8_t junk[100];
    memset(junk, 0xAB, sizeof junk);
    junk[0] = 0xFF;
    junk[1] = 0xD8;
    junk[2] = 0xFF;
    AugmentParams p = {.out_h = 8, .out_w = 8, .training = 1};
    uint8_t out[8 * 8 * 3];
    char err[128] = "";
    Rng r;
    rng_seed(&r, 1);
    CHECK(augment_image(junk, sizeof junk, NULL, 0, &p, &r, out, err, sizeof err) == -1 && err[0]);
}
