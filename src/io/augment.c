/* augment.c: from encoded bytes to one network input image, with nvcnn's semantics (augment.h).
 * The crop is chosen from the header's dimensions first, so the decoder reads only the crop, at
 * the coarsest DCT scale that keeps it at least the output size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/augment_internal.h"
#include "io/image.h"

static float uniformf(Rng *r, float lo, float hi) { return lo + (hi - lo) * (float)rng_uniform(r); }

/* One candidate crop of the given aspect ratio with an area in [min_area, max_area] pixels,
 * following TensorFlow's GenerateRandomCrop. 0 if none fits. */
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
    out->y = height < H ? (int)rng_below(rng, (uint32_t)(H - height)) : 0;
    out->x = width < W ? (int)rng_below(rng, (uint32_t)(W - width)) : 0;
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

/* Horizontal pass of one source row into o[dw*3] (weights in 1/ONE). */
static void hrow(const uint8_t *s, const int *xo, const int *xw, int dw, int one, int *o) {
    for (int x = 0; x < dw; x++) {
        const uint8_t *p = s + xo[x] * 3, *q = p + (xw[x] ? 3 : 0);
        int w1 = xw[x], w0 = one - w1;
        o[3 * x] = p[0] * w0 + q[0] * w1;
        o[3 * x + 1] = p[1] * w0 + q[1] * w1;
        o[3 * x + 2] = p[2] * w0 + q[2] * w1;
    }
}

/* Fixed-point bilinear, weights in 1/2048; each source row's horizontal pass is computed once
 * and kept while output rows still need it. */
void resize_bilinear_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    enum { ONE = 2048 };
    int *xo = xmalloc((size_t)dw * 2 * sizeof *xo), *xw = xo + dw;
    const double xs = (double)sw / dw, ys = (double)sh / dh;
    for (int x = 0; x < dw; x++) {
        double fx = x * xs;
        int x0 = (int)fx;
        if (x0 > sw - 1) x0 = sw - 1;
        xo[x] = x0;
        xw[x] = x0 + 1 <= sw - 1 ? (int)lround((fx - x0) * ONE) : 0;
    }
    int *buf[2];
    buf[0] = xmalloc((size_t)dw * 3 * 2 * sizeof(int));
    buf[1] = buf[0] + dw * 3;
    int tag[2] = {-1, -1};
    for (int y = 0; y < dh; y++) {
        double fy = y * ys;
        int y0 = (int)fy;
        if (y0 > sh - 1) y0 = sh - 1;
        int y1 = y0 + 1 < sh ? y0 + 1 : y0;
        int wy = y1 != y0 ? (int)lround((fy - y0) * ONE) : 0;
        int need[2] = {y0, y1}, slot[2];
        for (int k = 0; k < 2; k++) {
            if (tag[0] == need[k])
                slot[k] = 0;
            else if (tag[1] == need[k])
                slot[k] = 1;
            else {
                /* overwrite the buffer that the other needed row does not use */
                int other = need[1 - k];
                slot[k] = tag[0] == other ? 1 : 0;
                hrow(src + (size_t)need[k] * sw * 3, xo, xw, dw, ONE, buf[slot[k]]);
                tag[slot[k]] = need[k];
            }
        }
        const int *a = buf[slot[0]], *b = buf[slot[1]];
        uint8_t *d = dst + (size_t)y * dw * 3;
        const long w1 = wy, w0 = ONE - wy;
        for (int i = 0; i < dw * 3; i++) d[i] = (uint8_t)(((long)a[i] * w0 + (long)b[i] * w1 + ONE * ONE / 2) / (ONE * ONE));
    }
    free(buf[0]);
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
