/* augment.c: from encoded bytes to one network input image, with nvcnn's semantics (augment.h).
 * The crop is chosen from the header's dimensions first, so the decoder reads only the crop, at
 * the coarsest DCT scale that keeps it at least the output size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE4_1__
#include <smmintrin.h>
#endif

#include "io/augment_internal.h"
#include "io/image.h"

static float uniformf(Rng *r, float lo, float hi) { return lo + (hi - lo) * (float)rng_uniform(r); }

/* One candidate crop of the given aspect ratio with an area in [min_area, max_area] pixels,
 * following TensorFlow's GenerateRandomCrop, except for the position: TensorFlow draws the offset
 * from [0, W - w - 1], so that a crop never touches the right and bottom edges and one a pixel
 * smaller than the image always sits in its top-left corner (on 28x28 images, a crop in four);
 * here every position [0, W - w] is equally likely. 0 if none fits. */
static int random_crop(int W, int H, float min_rel, float max_rel, float aspect, Rng *rng, CropBox *out) {
    const float min_area = min_rel * (float)W * (float)H, max_area = max_rel * (float)W * (float)H;
    int height = (int)lrintf(sqrtf(min_area / aspect));
    int max_height = (int)lrintf(sqrtf(max_area / aspect));
    if (lrintf((float)max_height * aspect) > W) {
        const float eps = 0.0000001f;
        max_height = (int)(((float)W + 0.5f - eps) / aspect);
        if (lrintf((float)max_height * aspect) > W) max_height -= 1;
    }
    if (max_height > H) max_height = H;
    if (height >= max_height) height = max_height;
    if (height < max_height) height += (int)rng_below(rng, (uint32_t)(max_height - height + 1));
    int width = (int)lrintf((float)height * aspect);
    float area = (float)width * (float)height;
    if (area < min_area) {
        height += 1;
        width = (int)lrintf((float)height * aspect);
        area = (float)width * (float)height;
    }
    if (area > max_area) {
        height -= 1;
        width = (int)lrintf((float)height * aspect);
        area = (float)width * (float)height;
    }
    if (area < min_area || area > max_area || width > W || height > H || width <= 0 || height <= 0) return 0;
    out->y = height < H ? (int)rng_below(rng, (uint32_t)(H - height + 1)) : 0;
    out->x = width < W ? (int)rng_below(rng, (uint32_t)(W - width + 1)) : 0;
    out->w = width;
    out->h = height;
    return 1;
}

/* The crop covers at least `min_cov` of some box (boxes in pixels). */
static int covers(const CropBox *c, const float (*b)[4], int nb, float min_cov) {
    for (int i = 0; i < nb; i++) {
        float ix0 = fmaxf((float)c->x, b[i][0]), iy0 = fmaxf((float)c->y, b[i][1]);
        float ix1 = fminf((float)(c->x + c->w), b[i][2]), iy1 = fminf((float)(c->y + c->h), b[i][3]);
        float inter = (ix1 > ix0 && iy1 > iy0) ? (ix1 - ix0) * (iy1 - iy0) : 0;
        float barea = (b[i][2] - b[i][0]) * (b[i][3] - b[i][1]);
        if (barea > 0 && inter / barea >= min_cov) return 1;
    }
    return 0;
}

CropBox sample_distorted_crop(int W, int H, const BBox *boxes, int nbox, float min_area, Rng *rng) {
    if (!(min_area > 0)) min_area = CROP_MIN_AREA;
    CropBox whole = {0, 0, W, H};
    float local[16][4];
    float (*b)[4] = nbox > 16 ? xmalloc((size_t)nbox * sizeof *b) : local;
    int nb = 0;
    for (int i = 0; i < nbox; i++) {
        float x0 = fminf(fmaxf(boxes[i].xmin, 0), 1), y0 = fminf(fmaxf(boxes[i].ymin, 0), 1);
        float x1 = fminf(fmaxf(boxes[i].xmax, 0), 1), y1 = fminf(fmaxf(boxes[i].ymax, 0), 1);
        if (!(x1 > x0 && y1 > y0)) continue; /* degenerate or NaN */
        b[nb][0] = x0 * (float)W;
        b[nb][1] = y0 * (float)H;
        b[nb][2] = x1 * (float)W;
        b[nb][3] = y1 * (float)H;
        nb++;
    }
    if (nb == 0) {
        b[0][0] = 0;
        b[0][1] = 0;
        b[0][2] = (float)W;
        b[0][3] = (float)H;
        nb = 1;
    }
    CropBox c = whole;
    int found = 0;
    for (int a = 0; a < CROP_ATTEMPTS && !found; a++) {
        float aspect = uniformf(rng, CROP_MIN_ASPECT, CROP_MAX_ASPECT);
        CropBox t;
        if (random_crop(W, H, min_area, CROP_MAX_AREA, aspect, rng, &t) && covers(&t, (const float (*)[4])b, nb, CROP_MIN_OBJECT_COVERED)) {
            c = t;
            found = 1;
        }
    }
    if (b != local) free(b);
    return c;
}

CropBox central_crop(int W, int H) {
    const double f = 0.875;
    int y0 = (int)(((double)H - (double)H * f) / 2), x0 = (int)(((double)W - (double)W * f) / 2);
    CropBox c = {x0, y0, W - 2 * x0, H - 2 * y0};
    return c;
}

/* Bilinear resize with TensorFlow's legacy mapping (src = dst * in / out, no half-pixel offset),
 * in fixed point with weights in 1/2048 both ways, rounded once at the end.
 * Vertical pass first: each output row blends its two source rows into a 32-bit row (vectorised,
 * 16 bytes at a time); the horizontal pass then reads that row once per output pixel. */
enum { ONE = 2048, SHIFT = 22 }; /* ONE * ONE == 1 << SHIFT; 255 * ONE * ONE < 2^31 */

static void vblend(const uint8_t *restrict s0, const uint8_t *restrict s1, uint32_t wy, int n,
                   uint32_t *restrict v) {
    const uint32_t w1 = wy, w0 = ONE - wy;
    int i = 0;
#ifdef __SSE4_1__
    /* pairs (s0[i], s1[i]) against (w0, w1) with pmaddwd */
    const __m128i z = _mm_setzero_si128(), w = _mm_set1_epi32((int)(w0 | (w1 << 16)));
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s0 + i)), b = _mm_loadu_si128((const __m128i *)(s1 + i));
        __m128i alo = _mm_unpacklo_epi8(a, z), ahi = _mm_unpackhi_epi8(a, z);
        __m128i blo = _mm_unpacklo_epi8(b, z), bhi = _mm_unpackhi_epi8(b, z);
        _mm_storeu_si128((__m128i *)(v + i), _mm_madd_epi16(_mm_unpacklo_epi16(alo, blo), w));
        _mm_storeu_si128((__m128i *)(v + i + 4), _mm_madd_epi16(_mm_unpackhi_epi16(alo, blo), w));
        _mm_storeu_si128((__m128i *)(v + i + 8), _mm_madd_epi16(_mm_unpacklo_epi16(ahi, bhi), w));
        _mm_storeu_si128((__m128i *)(v + i + 12), _mm_madd_epi16(_mm_unpackhi_epi16(ahi, bhi), w));
    }
#endif
    for (; i < n; i++) v[i] = s0[i] * w0 + s1[i] * w1;
}

static void hblend(const uint32_t *restrict v, const int *restrict xo, const uint32_t *restrict xw, int dw,
                   uint8_t *restrict d) {
    int x = 0;
#ifdef __SSE4_1__
    /* one pixel per iteration in 32-bit lanes; the 4-byte store's last byte is overwritten by the
     * next pixel, so the last pixel goes through the scalar loop. v has 8 elements of slack. */
    const __m128i round = _mm_set1_epi32(1 << (SHIFT - 1)), one = _mm_set1_epi32(ONE);
    for (; x < dw - 1; x++) {
        const uint32_t *p = v + xo[x];
        __m128i w1 = _mm_set1_epi32((int)xw[x]), w0 = _mm_sub_epi32(one, w1);
        __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 3));
        __m128i r = _mm_add_epi32(_mm_add_epi32(_mm_mullo_epi32(a, w0), _mm_mullo_epi32(b, w1)), round);
        r = _mm_srli_epi32(r, SHIFT);
        r = _mm_packus_epi16(_mm_packs_epi32(r, r), r);
        int32_t px = _mm_cvtsi128_si32(r);
        memcpy(d + 3 * x, &px, 4);
    }
#endif
    for (; x < dw; x++) {
        const uint32_t *p = v + xo[x];
        const uint32_t w1 = xw[x], w0 = ONE - w1;
        const int q = w1 ? 3 : 0;
        d[3 * x] = (uint8_t)((p[0] * w0 + p[q] * w1 + (1u << (SHIFT - 1))) >> SHIFT);
        d[3 * x + 1] = (uint8_t)((p[1] * w0 + p[q + 1] * w1 + (1u << (SHIFT - 1))) >> SHIFT);
        d[3 * x + 2] = (uint8_t)((p[2] * w0 + p[q + 2] * w1 + (1u << (SHIFT - 1))) >> SHIFT);
    }
}

void resize_bilinear_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    int *xo = xmalloc((size_t)dw * sizeof *xo);
    uint32_t *xw = xmalloc((size_t)dw * sizeof *xw);
    uint32_t *v = xcalloc((size_t)sw * 3 + 8, sizeof *v); /* slack for the 4-wide loads */
    const double xs = (double)sw / dw, ys = (double)sh / dh;
    for (int x = 0; x < dw; x++) {
        double fx = x * xs;
        int x0 = (int)fx;
        if (x0 > sw - 1) x0 = sw - 1;
        xo[x] = 3 * x0;
        xw[x] = x0 + 1 <= sw - 1 ? (uint32_t)lround((fx - x0) * ONE) : 0;
    }
    for (int y = 0; y < dh; y++) {
        double fy = y * ys;
        int y0 = (int)fy;
        if (y0 > sh - 1) y0 = sh - 1;
        int y1 = y0 + 1 < sh ? y0 + 1 : y0;
        uint32_t wy = y1 != y0 ? (uint32_t)lround((fy - y0) * ONE) : 0;
        /* only the columns the horizontal pass reads */
        int c0 = xo[0], c1 = xo[dw - 1] + 6 <= sw * 3 ? xo[dw - 1] + 6 : sw * 3;
        vblend(src + (size_t)y0 * sw * 3 + c0, src + (size_t)y1 * sw * 3 + c0, wy, c1 - c0, v + c0);
        hblend(v, xo, xw, dw, dst + (size_t)y * dw * 3);
    }
    free(v);
    free(xw);
    free(xo);
}

/* ---- color distortion (TensorFlow's random_brightness/saturation/hue/contrast) ---- */
static void rgb_to_hsv(float r, float g, float b, float *h, float *s, float *v) {
    float mx = fmaxf(r, fmaxf(g, b)), mn = fminf(r, fminf(g, b)), d = mx - mn;
    *v = mx;
    *s = mx > 0 ? d / mx : 0;
    if (d <= 0) {
        *h = 0;
        return;
    }
    float hh;
    if (mx == r)
        hh = (g - b) / d;
    else if (mx == g)
        hh = 2 + (b - r) / d;
    else
        hh = 4 + (r - g) / d;
    hh /= 6;
    if (hh < 0) hh += 1;
    *h = hh;
}

static void hsv_to_rgb(float h, float s, float v, float *r, float *g, float *b) {
    h = h - floorf(h);
    float hh = h * 6;
    int i = (int)hh;
    float f = hh - (float)i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    switch (i % 6) {
    case 0: *r = v; *g = t; *b = p; break;
    case 1: *r = q; *g = v; *b = p; break;
    case 2: *r = p; *g = v; *b = t; break;
    case 3: *r = p; *g = q; *b = v; break;
    case 4: *r = t; *g = p; *b = v; break;
    default: *r = v; *g = p; *b = q; break;
    }
}

static void op_brightness(float *x, int n, float delta) {
    for (int i = 0; i < 3 * n; i++) x[i] += delta;
}

static void op_saturation_hue(float *x, int n, float sat, float hue) {
    for (int i = 0; i < n; i++) {
        float h, s, v;
        rgb_to_hsv(x[3 * i], x[3 * i + 1], x[3 * i + 2], &h, &s, &v);
        s = fminf(fmaxf(s * sat, 0), 1);
        h += hue;
        hsv_to_rgb(h, s, v, &x[3 * i], &x[3 * i + 1], &x[3 * i + 2]);
    }
}

static void op_contrast(float *x, int n, float factor) {
    double mean[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) mean[c] += x[3 * i + c];
    for (int c = 0; c < 3; c++) mean[c] /= n;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) x[3 * i + c] = (x[3 * i + c] - (float)mean[c]) * factor + (float)mean[c];
}

void distort_color(uint8_t *img, int npix, int order, Rng *rng) {
    float *x = xmalloc((size_t)npix * 3 * sizeof *x);
    for (int i = 0; i < 3 * npix; i++) x[i] = img[i] * (1.0f / 255.0f);
    float bright = uniformf(rng, -32.0f / 255.0f, 32.0f / 255.0f);
    op_brightness(x, npix, bright);
    if (order == 0) {
        float sat = uniformf(rng, 0.5f, 1.5f);
        op_saturation_hue(x, npix, sat, 0);
        float hue = uniformf(rng, -0.2f, 0.2f);
        op_saturation_hue(x, npix, 1, hue);
        op_contrast(x, npix, uniformf(rng, 0.5f, 1.5f));
    } else {
        op_contrast(x, npix, uniformf(rng, 0.5f, 1.5f));
        float sat = uniformf(rng, 0.5f, 1.5f);
        op_saturation_hue(x, npix, sat, 0);
        float hue = uniformf(rng, -0.2f, 0.2f);
        op_saturation_hue(x, npix, 1, hue);
    }
    for (int i = 0; i < 3 * npix; i++) {
        float v = fminf(fmaxf(x[i], 0), 1) * 255.0f;
        img[i] = (uint8_t)lrintf(v);
    }
    free(x);
}

int augment_image(const uint8_t *encoded, size_t len, const BBox *boxes, int nbox, const AugmentParams *p,
                  Rng *rng, uint8_t *out_hwc, char *err, size_t errlen) {
    int W, H;
    if (image_dims(encoded, len, &W, &H, err, errlen) != 0) return -1;
    CropBox c = p->training ? sample_distorted_crop(W, H, boxes, nbox, p->min_area, rng) : central_crop(W, H);
    uint8_t *region;
    int rw, rh;
    if (image_decode_region(encoded, len, c.x, c.y, c.w, c.h, p->out_w, p->out_h, &region, &rw, &rh, err, errlen) != 0)
        return -1;
    resize_bilinear_rgb(region, rw, rh, out_hwc, p->out_w, p->out_h);
    free(region);
    if (p->training && rng_uniform(rng) < 0.5) {
        for (int y = 0; y < p->out_h; y++) {
            uint8_t *row = out_hwc + (size_t)y * p->out_w * 3;
            for (int a = 0, b = p->out_w - 1; a < b; a++, b--)
                for (int ch = 0; ch < 3; ch++) {
                    uint8_t t = row[3 * a + ch];
                    row[3 * a + ch] = row[3 * b + ch];
                    row[3 * b + ch] = t;
                }
        }
    }
    if (p->training && p->distort_color) distort_color(out_hwc, p->out_w * p->out_h, p->color_order, rng);
    return 0;
}
