/* image.h: JPEG (libjpeg-turbo, jpeglib.h API) and PNG (libpng) decoding and encoding.
 * Decoding uses JDCT_IFAST and no fancy upsampling, as nvcnn. */
#ifndef NVCNN_IO_IMAGE_H
#define NVCNN_IO_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { IMG_UNKNOWN = 0, IMG_JPEG, IMG_PNG } ImageFormat;

ImageFormat image_sniff(const uint8_t *data, size_t len);
/* The largest image decoded, in pixels (2^28: 16384 x 16384): larger ones are refused, by
 * image_dims() too (so the converter refuses at conversion what training would). */
#define IMAGE_MAX_PIXELS (1ull << 28)
/* Width and height from the header. 0 on success, -1 with err (also over IMAGE_MAX_PIXELS). */
int image_dims(const uint8_t *data, size_t len, int *w, int *h, char *err, size_t errlen);
/* Decodes the region (x, y, cw, ch) of the image, reduced by the largest DCT scale 1/s
 * (s in 1,2,4,8) that keeps the region at least min_w x min_h, into a malloc'd RGB buffer
 * *out [*ow][*oh]. A PNG is read row by row down to the region's last row (an interlaced one
 * whole), unscaled. 0 on success, -1 with err. */
int image_decode_region(const uint8_t *data, size_t len, int x, int y, int cw, int ch, int min_w, int min_h,
                        uint8_t **out, int *ow, int *oh, char *err, size_t errlen);
/* Whole image, RGB. */
int image_decode_rgb(const uint8_t *data, size_t len, uint8_t **out, int *w, int *h, char *err, size_t errlen);
/* Encoders for the converter: pixels [h][w][channels] (1 or 3). malloc'd *out, *outlen. */
int image_encode_jpeg(const uint8_t *pixels, int w, int h, int channels, int quality, uint8_t **out,
                      size_t *outlen);
int image_encode_png(const uint8_t *pixels, int w, int h, int channels, uint8_t **out, size_t *outlen);

#endif
