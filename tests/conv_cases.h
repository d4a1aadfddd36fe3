/* conv_cases.h: the convolution shapes every convolution test covers: TensorFlow's SAME/VALID
 * and nvcnn's SAME_RESNET padding, uneven padding, strides, 1xk and kx1, 11x11/4. */
#ifndef NVCNN_TESTS_CONV_CASES_H
#define NVCNN_TESTS_CONV_CASES_H

#include "layers/layers.h"

typedef struct ConvCase {
    int n, cin, h, w, cout, kh, kw, sh, sw;
    Padding pad;
    int bias;
    int groups; /* 0 or 1: a plain convolution */
} ConvCase;

/* The first entries of a test's case table: `{CONV_CASES_COMMON, its own cases...}`. */
#define CONV_CASES_COMMON                                                                                            \
    {2, 3, 9, 9, 4, 1, 1, 1, 1, PAD_SAME, 1, 0}, {2, 5, 8, 7, 6, 3, 3, 1, 1, PAD_SAME, 0, 0},                        \
        {3, 4, 9, 10, 5, 3, 3, 2, 2, PAD_SAME, 1, 0}, {2, 3, 10, 10, 4, 3, 3, 2, 2, PAD_VALID, 1, 0},                \
        {2, 3, 11, 12, 7, 5, 5, 1, 1, PAD_SAME, 1, 0}, {1, 3, 16, 16, 5, 7, 7, 2, 2, PAD_SAME_RESNET, 0, 0},         \
        {1, 3, 16, 15, 5, 7, 7, 2, 2, PAD_SAME, 0, 0}, {2, 6, 9, 9, 3, 1, 7, 1, 1, PAD_SAME, 1, 0},                  \
        {2, 6, 9, 9, 3, 7, 1, 1, 1, PAD_SAME, 1, 0}, {1, 3, 27, 27, 4, 11, 11, 4, 4, PAD_VALID, 1, 0},               \
        {2, 7, 13, 13, 9, 3, 3, 1, 1, PAD_SAME_RESNET, 0, 0}, {2, 4, 8, 8, 8, 1, 1, 2, 2, PAD_SAME, 0, 0},           \
        {2, 4, 7, 7, 3, 3, 3, 2, 2, PAD_SAME_RESNET, 1, 0}, {1, 2, 5, 6, 3, 2, 2, 2, 2, PAD_SAME, 1, 0}

#endif
