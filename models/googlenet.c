/* googlenet.c: GoogLeNet / Inception v1 (Szegedy et al. 2014) as nvcnn builds it: biases
 * instead of batch norm, no local response normalisation, no auxiliary classifiers. */
#include "models.h"

/* Four columns concatenated along channels: 1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | pool -> 1x1. */
static NbT inception_v1(Net *nb, NbT x, int k, int l, int m, int n, int p, int q) {
    NbT col[4];
    col[0] = nb_conv(nb, x, k, 1, 1, 1, 1, PAD_SAME);
    col[1] = nb_conv(nb, x, l, 1, 1, 1, 1, PAD_SAME);
    col[1] = nb_conv(nb, col[1], m, 3, 3, 1, 1, PAD_SAME);
    col[2] = nb_conv(nb, x, n, 1, 1, 1, 1, PAD_SAME);
    col[2] = nb_conv(nb, col[2], p, 5, 5, 1, 1, PAD_SAME);
    col[3] = nb_pool(nb, x, POOL_MAX, 3, 3, 1, 1, PAD_SAME);
    col[3] = nb_conv(nb, col[3], q, 1, 1, 1, 1, PAD_SAME);
    return nb_concat(nb, col, 4);
}

NbT model_googlenet(Net *nb, NbT x) {
    nb->use_batch_norm = 0;
    x = nb_conv(nb, x, 64, 7, 7, 2, 2, PAD_SAME);           /* 112x112 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 56x56 */
    x = nb_conv(nb, x, 64, 1, 1, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 192, 3, 3, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 28x28 */
    x = inception_v1(nb, x, 64, 96, 128, 16, 32, 32);       /* 3a: 256 */
    x = inception_v1(nb, x, 128, 128, 192, 32, 96, 64);     /* 3b: 480 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 14x14 */
    x = inception_v1(nb, x, 192, 96, 208, 16, 48, 64);      /* 4a: 512 */
    x = inception_v1(nb, x, 160, 112, 224, 24, 64, 64);     /* 4b: 512 */
    x = inception_v1(nb, x, 128, 128, 256, 24, 64, 64);     /* 4c: 512 */
    x = inception_v1(nb, x, 112, 144, 288, 32, 64, 64);     /* 4d: 528 */
    x = inception_v1(nb, x, 256, 160, 320, 32, 128, 128);   /* 4e: 832 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 7x7 */
    x = inception_v1(nb, x, 256, 160, 320, 32, 128, 128);   /* 5a: 832 */
    x = inception_v1(nb, x, 384, 192, 384, 48, 128, 128);   /* 5b: 1024 */
    return nb_spatial_avg(nb, x);
}
