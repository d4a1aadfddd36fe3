/* googlenet.c: GoogLeNet / Inception v1 (Szegedy et al. 2014) as nvcnn builds it: biases
 * instead of batch norm, no local response normalisation, no auxiliary classifiers. The modules'
 * names and widths are the paper's Table 1. */
#include "models.h"

/* Four columns concatenated along channels: 1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | pool -> 1x1. */
static NbT inception_v1(Net *nb, NbT x, const char *name, int k, int l, int m, int n, int p, int q) {
    NbT col[4];
    nb_section(nb, "inception (%s): 1x1 %d | 1x1 %d, 3x3 %d | 1x1 %d, 5x5 %d | 3x3 max pool, 1x1 %d", name, k, l, m, n,
               p, q);
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
    nb_section(nb, "stem: 7x7/2 conv, 3x3/2 max pool, 1x1 and 3x3 convs, 3x3/2 max pool");
    x = nb_conv(nb, x, 64, 7, 7, 2, 2, PAD_SAME);           /* 112x112 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 56x56 */
    x = nb_conv(nb, x, 64, 1, 1, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 192, 3, 3, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 28x28 */
    x = inception_v1(nb, x, "3a", 64, 96, 128, 16, 32, 32);       /* 3a: 256 */
    x = inception_v1(nb, x, "3b", 128, 128, 192, 32, 96, 64);     /* 3b: 480 */
    nb_section(nb, "3x3/2 max pool");
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 14x14 */
    x = inception_v1(nb, x, "4a", 192, 96, 208, 16, 48, 64);      /* 4a: 512 */
    x = inception_v1(nb, x, "4b", 160, 112, 224, 24, 64, 64);     /* 4b: 512 */
    x = inception_v1(nb, x, "4c", 128, 128, 256, 24, 64, 64);     /* 4c: 512 */
    x = inception_v1(nb, x, "4d", 112, 144, 288, 32, 64, 64);     /* 4d: 528 */
    x = inception_v1(nb, x, "4e", 256, 160, 320, 32, 128, 128);   /* 4e: 832 */
    nb_section(nb, "3x3/2 max pool");
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);     /* 7x7 */
    x = inception_v1(nb, x, "5a", 256, 160, 320, 32, 128, 128);   /* 5a: 832 */
    x = inception_v1(nb, x, "5b", 384, 192, 384, 48, 128, 128);   /* 5b: 1024 */
    nb_section(nb, "average pool");
    return nb_spatial_avg(nb, x);
}
