/* tensor.h: shapes of activations. The CPU reference backend keeps activations in NCHW
 * float32; a 2-D tensor (after flatten / spatial average / FC) has h = w = 1.
 */
#ifndef NVCNN_TENSOR_H
#define NVCNN_TENSOR_H

#include <stddef.h>

typedef struct Shape {
    int n, c, h, w;
} Shape;

static inline Shape shape4(int n, int c, int h, int w) {
    Shape s = {n, c, h, w};
    return s;
}
static inline size_t shape_count(Shape s) {
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}
/* Elements of one sample (c*h*w). */
static inline size_t shape_sample(Shape s) {
    return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}
static inline int shape_eq(Shape a, Shape b) {
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

#endif
