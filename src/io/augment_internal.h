/* augment_internal.h: the pieces of augment.c that tests check on their own. */
#ifndef NVCNN_IO_AUGMENT_INTERNAL_H
#define NVCNN_IO_AUGMENT_INTERNAL_H

#include <stdint.h>

#include "io/augment.h"

typedef struct CropBox {
    int x, y, w, h; /* pixels */
} CropBox;

/* TensorFlow's sample_distorted_bounding_box as nvcnn calls it: min_object_covered 0.1, aspect
 * ratio [0.8, 1.25], area [min_area, 1], 100 attempts, the whole image if none fits; the offset
 * uniform over [0, W - w] (TensorFlow's leaves out W - w: augment.c). With no boxes
 * the whole image is the box. */
CropBox sample_distorted_crop(int W, int H, const BBox *boxes, int nbox, float min_area, Rng *rng);
/* TensorFlow's central_crop(image, 0.875). */
CropBox central_crop(int W, int H);
/* Bilinear resize (align_corners = False, no half-pixel offset), RGB. */
void resize_bilinear_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);
/* nvcnn's color distortion on an RGB image in place. */
void distort_color(uint8_t *img, int npix, int order, Rng *rng);

#define CROP_MIN_OBJECT_COVERED 0.1f
#define CROP_MIN_AREA 0.1f
#define CROP_MAX_AREA 1.0f
#define CROP_MIN_ASPECT 0.8f
#define CROP_MAX_ASPECT 1.25f
#define CROP_ATTEMPTS 100

#endif
