/* augment.h: one image from its encoded bytes to the network's input, with nvcnn's semantics.
 *
 * Training: a distorted bounding-box crop (as TensorFlow's sample_distorted_bounding_box with
 * min_object_covered 0.1, aspect ratio [0.8, 1.25], area [min_area, 1.0], 100 attempts, the whole
 * image if none fits; every position of the crop equally likely), a bilinear resize to
 * out_h x out_w, a random left-right flip, and with distort_color brightness +/-32/255, saturation
 * [0.5,1.5], hue +/-0.2, contrast [0.5,1.5] in one of two orders (order = worker index % 2).
 * Eval: a central crop of 87.5% then a bilinear resize.
 * Decoding reads only what the crop needs (DCT scaling, jpeg_crop_scanline, jpeg_skip_scanlines).
 */
#ifndef NVCNN_IO_AUGMENT_H
#define NVCNN_IO_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct BBox {
    float ymin, xmin, ymax, xmax; /* normalised [0, 1] */
} BBox;

typedef struct AugmentParams {
    int out_h, out_w;
    int training;
    int distort_color;
    int color_order; /* 0: brightness, saturation, hue, contrast; 1: brightness, contrast, saturation, hue */
    float min_area;  /* smallest crop area as a fraction of the image; 0: nvcnn's 0.1 */
} AugmentParams;

/* Decodes (JPEG or PNG; grayscale and CMYK come out RGB) and augments into out_hwc
 * [out_h][out_w][3]. Returns 0 on success, -1 with a message in err if the image cannot be
 * decoded. `boxes` may be NULL when nbox == 0. */
int augment_image(const uint8_t *encoded, size_t len, const BBox *boxes, int nbox, const AugmentParams *p,
                  Rng *rng, uint8_t *out_hwc, char *err, size_t errlen);

#endif
