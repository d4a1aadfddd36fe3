/* example.h: tf.train.Example records as TensorFlow's build_imagenet_data.py writes them.
 *
 * Features read:
 *   image/encoded                      bytes   JPEG or PNG (required, one value)
 *   image/class/label                  int64   1-based class (required by example_parse_image, one value)
 *   image/class/text                   bytes   class name (optional)
 *   image/filename                     bytes   the source image's name (optional; named in errors)
 *   image/object/bbox/{xmin,ymin,xmax,ymax}  float lists of equal length (optional)
 * Repeated floats and int64s are accepted packed (the proto3 default) and unpacked.
 */
#ifndef NVCNN_IO_EXAMPLE_H
#define NVCNN_IO_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ExampleImage {
    const uint8_t *encoded; /* points into the parsed message */
    size_t encoded_len;
    int64_t label;          /* as stored (1-based) */
    const uint8_t *text;    /* NULL if absent; not NUL terminated */
    size_t text_len;
    const uint8_t *filename; /* image/filename (the source image's name), as text; NULL if absent */
    size_t filename_len;
    int nbox;
    const float *xmin, *ymin, *xmax, *ymax; /* [nbox] each; NULL when nbox == 0 */
    void *msg_;             /* the unpacked message, freed by example_image_free */
} ExampleImage;

/* Parses a serialized Example. 0 on success; -1 with a reason in err ("no image/encoded
 * feature", "image/class/label is a float_list, expected int64_list", "image/class/label holds
 * 2 values, expected 1", ...). */
int example_parse_image(const uint8_t *buf, size_t len, ExampleImage *out, char *err, size_t errlen);
void example_image_free(ExampleImage *e);

/* Generic access to one parsed Example, for tests and tools. */
typedef struct ExampleMsg ExampleMsg;
ExampleMsg *example_unpack(const uint8_t *buf, size_t len);
void example_msg_free(ExampleMsg *m);
/* Kind of feature `key`: 0 absent (or no kind set), 1 bytes, 2 float, 3 int64; *n gets the count. */
int example_feature(const ExampleMsg *m, const char *key, size_t *n);
/* The i-th value; the feature must exist with that kind and i < n. */
const uint8_t *example_bytes(const ExampleMsg *m, const char *key, size_t i, size_t *len);
float example_float(const ExampleMsg *m, const char *key, size_t i);
int64_t example_int64(const ExampleMsg *m, const char *key, size_t i);

/* An Example being built, for the converter. Keys and values are copied. */
typedef struct ExampleBuilder ExampleBuilder;
ExampleBuilder *example_builder_new(void);
void example_add_bytes(ExampleBuilder *b, const char *key, const void *data, size_t len);
/* A bytes feature of n values (data[i], len[i] bytes). */
void example_add_bytes_list(ExampleBuilder *b, const char *key, const void *const *data, const size_t *len, size_t n);
void example_add_string(ExampleBuilder *b, const char *key, const char *s);
void example_add_int64s(ExampleBuilder *b, const char *key, const int64_t *v, size_t n);
void example_add_floats(ExampleBuilder *b, const char *key, const float *v, size_t n);
/* Serializes (features sorted by key, lists packed) into a malloc'd buffer. */
uint8_t *example_serialize(const ExampleBuilder *b, size_t *len);
void example_builder_free(ExampleBuilder *b);

#endif
