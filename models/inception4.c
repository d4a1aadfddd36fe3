/* inception4.c: Inception-v4 and Inception-ResNet-v2 (Szegedy, Ioffe, Vanhoucke, Alemi 2016,
 * "Inception-v4, Inception-ResNet and the Impact of Residual Connections on Learning") as nvcnn
 * builds them: 299x299 input, batch norm after every convolution, global average pool, dropout
 * keeping 0.8 before the classifier, no auxiliary head. Both share the stem and Reduction-A.
 * Module names and Reduction-A's k, l, m, n follow the paper. As nvcnn, and unlike the paper's
 * Inception-ResNet-v2: Reduction-B's widths follow Facebook's Torch implementation (256 -> 384,
 * 256 -> 256, 256 -> 256 -> 256), the residual branches end in 384, 1152 and 2048 channels,
 * and a ReLU follows every residual sum, the last block's included. */
#include "models.h"

/* Shorthands: a stride-1 SAME conv, and a 3x3/2 VALID conv (every grid reduction's). */
static NbT cv(Net *nb, NbT x, int cout, int kh, int kw) { return nb_conv(nb, x, cout, kh, kw, 1, 1, PAD_SAME); }
static NbT cv2(Net *nb, NbT x, int cout) { return nb_conv(nb, x, cout, 3, 3, 2, 2, PAD_VALID); }
static NbT maxpool2(Net *nb, NbT x) { return nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); }
static NbT avgpool1(Net *nb, NbT x) { return nb_pool(nb, x, POOL_AVG, 3, 3, 1, 1, PAD_SAME); }

/* 299x299x3 -> 35x35x384 */
static NbT stem(Net *nb, NbT x) {
    NbT c[2], t;
    nb->use_batch_norm = 1;
    nb_section(nb, "stem: 3x3/2 V 32, 3x3 V 32, 3x3 64");
    x = nb_conv(nb, x, 32, 3, 3, 2, 2, PAD_VALID); /* 149x149 */
    x = nb_conv(nb, x, 32, 3, 3, 1, 1, PAD_VALID); /* 147x147 */
    x = cv(nb, x, 64, 3, 3);
    nb_section(nb, "stem: 3x3/2 max pool | 3x3/2 V 96 -> 73x73x160");
    c[0] = maxpool2(nb, x);
    c[1] = cv2(nb, x, 96);
    x = nb_concat(nb, c, 2);
    nb_section(nb, "stem: 1x1 64, 3x3 V 96 | 1x1 64, 7x1 64, 1x7 64, 3x3 V 96 -> 71x71x192");
    c[0] = nb_conv(nb, cv(nb, x, 64, 1, 1), 96, 3, 3, 1, 1, PAD_VALID);
    t = cv(nb, x, 64, 1, 1);
    t = cv(nb, t, 64, 7, 1);
    t = cv(nb, t, 64, 1, 7);
    c[1] = nb_conv(nb, t, 96, 3, 3, 1, 1, PAD_VALID);
    x = nb_concat(nb, c, 2);
    nb_section(nb, "stem: 3x3/2 V 192 | 3x3/2 max pool -> 35x35x384");
    c[0] = cv2(nb, x, 192);
    c[1] = maxpool2(nb, x);
    return nb_concat(nb, c, 2);
}

/* 35x35 -> 17x17: max pool | 3x3/2 n | 1x1 k, 3x3 l, 3x3/2 m */
static NbT reduction_a(Net *nb, NbT x, int k, int l, int m, int n) {
    NbT c[3];
    nb_section(nb, "Reduction-A (k=%d, l=%d, m=%d, n=%d)", k, l, m, n);
    c[0] = maxpool2(nb, x);
    c[1] = cv2(nb, x, n);
    c[2] = cv2(nb, cv(nb, cv(nb, x, k, 1, 1), l, 3, 3), m);
    return nb_concat(nb, c, 3);
}

/* ---- Inception-v4 ---- */

/* 35x35x384: avg pool, 1x1 96 | 1x1 96 | 1x1 64, 3x3 96 | 1x1 64, 3x3 96, 3x3 96 */
static NbT inception_a(Net *nb, NbT x) {
    NbT c[4];
    c[0] = cv(nb, avgpool1(nb, x), 96, 1, 1);
    c[1] = cv(nb, x, 96, 1, 1);
    c[2] = cv(nb, cv(nb, x, 64, 1, 1), 96, 3, 3);
    c[3] = cv(nb, cv(nb, cv(nb, x, 64, 1, 1), 96, 3, 3), 96, 3, 3);
    return nb_concat(nb, c, 4);
}

/* 17x17x1024: avg pool, 1x1 128 | 1x1 384 | 1x1 192, 1x7 224, 7x1 256 |
 * 1x1 192, 1x7 192, 7x1 224, 1x7 224, 7x1 256 */
static NbT inception_b(Net *nb, NbT x) {
    NbT c[4], t;
    c[0] = cv(nb, avgpool1(nb, x), 128, 1, 1);
    c[1] = cv(nb, x, 384, 1, 1);
    c[2] = cv(nb, cv(nb, cv(nb, x, 192, 1, 1), 224, 1, 7), 256, 7, 1);
    t = cv(nb, x, 192, 1, 1);
    t = cv(nb, t, 192, 1, 7);
    t = cv(nb, t, 224, 7, 1);
    t = cv(nb, t, 224, 1, 7);
    c[3] = cv(nb, t, 256, 7, 1);
    return nb_concat(nb, c, 4);
}

/* 17x17x1024 -> 8x8x1536: max pool | 1x1 192, 3x3/2 192 | 1x1 256, 1x7 256, 7x1 320, 3x3/2 320 */
static NbT reduction_b(Net *nb, NbT x) {
    NbT c[3], t;
    nb_section(nb, "Reduction-B");
    c[0] = maxpool2(nb, x);
    c[1] = cv2(nb, cv(nb, x, 192, 1, 1), 192);
    t = cv(nb, x, 256, 1, 1);
    t = cv(nb, t, 256, 1, 7);
    t = cv(nb, t, 320, 7, 1);
    c[2] = cv2(nb, t, 320);
    return nb_concat(nb, c, 3);
}

/* 8x8x1536: avg pool, 1x1 256 | 1x1 256 | 1x1 384 -> (1x3 256 | 3x1 256) |
 * 1x1 384, 1x3 448, 3x1 512 -> (3x1 256 | 1x3 256): the split columns read the same tensor */
static NbT inception_c(Net *nb, NbT x) {
    NbT c[6], t;
    c[0] = cv(nb, avgpool1(nb, x), 256, 1, 1);
    c[1] = cv(nb, x, 256, 1, 1);
    t = cv(nb, x, 384, 1, 1);
    c[2] = cv(nb, t, 256, 1, 3);
    c[3] = cv(nb, t, 256, 3, 1);
    t = cv(nb, cv(nb, cv(nb, x, 384, 1, 1), 448, 1, 3), 512, 3, 1);
    c[4] = cv(nb, t, 256, 3, 1);
    c[5] = cv(nb, t, 256, 1, 3);
    return nb_concat(nb, c, 6);
}

NbT model_inception4(Net *nb, NbT x) {
    x = stem(nb, x);
    for (int i = 0; i < 4; i++) {
        nb_section(nb, "Inception-A %d/4 (35x35x384)", i + 1);
        x = inception_a(nb, x);
    }
    x = reduction_a(nb, x, 192, 224, 256, 384); /* 17x17x1024 */
    for (int i = 0; i < 7; i++) {
        nb_section(nb, "Inception-B %d/7 (17x17x1024)", i + 1);
        x = inception_b(nb, x);
    }
    x = reduction_b(nb, x); /* 8x8x1536 */
    for (int i = 0; i < 3; i++) {
        nb_section(nb, "Inception-C %d/3 (8x8x1536)", i + 1);
        x = inception_c(nb, x);
    }
    nb_section(nb, "average pool, dropout (keep 0.8)");
    x = nb_spatial_avg(nb, x);
    return nb_dropout(nb, x, 0.8f);
}

/* ---- Inception-ResNet-v2 ---- */

#define RESIDUAL_SCALE 0.2f

/* relu(x + 0.2 * branch), nvcnn's residual(). Its 1x1 projection for a branch whose shape differs
 * from x is never needed here: every branch ends in x's channels at x's size. */
static NbT residual(Net *nb, NbT x, NbT branch) {
    return nb_activate(nb, nb_add_scaled(nb, x, branch, RESIDUAL_SCALE), nb->activation);
}

/* 35x35x384: (1x1 32 | 1x1 32, 3x3 32 | 1x1 32, 3x3 48, 3x3 64) -> 1x1 384 linear */
static NbT inception_resnet_a(Net *nb, NbT x) {
    NbT c[3];
    c[0] = cv(nb, x, 32, 1, 1);
    c[1] = cv(nb, cv(nb, x, 32, 1, 1), 32, 3, 3);
    c[2] = cv(nb, cv(nb, cv(nb, x, 32, 1, 1), 48, 3, 3), 64, 3, 3);
    NbT y = nb_conv_ex(nb, nb_concat(nb, c, 3), 384, 1, 1, 1, 1, PAD_SAME, ACT_LINEAR, -1);
    return residual(nb, x, y);
}

/* 17x17x1152: (1x1 192 | 1x1 128, 1x7 160, 7x1 192) -> 1x1 1152 linear */
static NbT inception_resnet_b(Net *nb, NbT x) {
    NbT c[2];
    c[0] = cv(nb, x, 192, 1, 1);
    c[1] = cv(nb, cv(nb, cv(nb, x, 128, 1, 1), 160, 1, 7), 192, 7, 1);
    NbT y = nb_conv_ex(nb, nb_concat(nb, c, 2), 1152, 1, 1, 1, 1, PAD_SAME, ACT_LINEAR, -1);
    return residual(nb, x, y);
}

/* 17x17x1152 -> 8x8x2048: max pool | 1x1 256, 3x3/2 384 | 1x1 256, 3x3/2 256 |
 * 1x1 256, 3x3 256, 3x3/2 256 */
static NbT reduction_b_resnet(Net *nb, NbT x) {
    NbT c[4];
    nb_section(nb, "Reduction-B (Inception-ResNet-v2; widths of Facebook's Torch implementation)");
    c[0] = maxpool2(nb, x);
    c[1] = cv2(nb, cv(nb, x, 256, 1, 1), 384);
    c[2] = cv2(nb, cv(nb, x, 256, 1, 1), 256);
    c[3] = cv2(nb, cv(nb, cv(nb, x, 256, 1, 1), 256, 3, 3), 256);
    return nb_concat(nb, c, 4);
}

/* 8x8x2048: (1x1 192 | 1x1 192, 1x3 224, 3x1 256) -> 1x1 2048 linear */
static NbT inception_resnet_c(Net *nb, NbT x) {
    NbT c[2];
    c[0] = cv(nb, x, 192, 1, 1);
    c[1] = cv(nb, cv(nb, cv(nb, x, 192, 1, 1), 224, 1, 3), 256, 3, 1);
    NbT y = nb_conv_ex(nb, nb_concat(nb, c, 2), 2048, 1, 1, 1, 1, PAD_SAME, ACT_LINEAR, -1);
    return residual(nb, x, y);
}

NbT model_inception_resnet2(Net *nb, NbT x) {
    x = stem(nb, x);
    for (int i = 0; i < 5; i++) {
        nb_section(nb, "Inception-ResNet-A %d/5 (35x35x384, residual scale 0.2)", i + 1);
        x = inception_resnet_a(nb, x);
    }
    x = reduction_a(nb, x, 256, 256, 384, 384); /* 17x17x1152 */
    for (int i = 0; i < 10; i++) {
        nb_section(nb, "Inception-ResNet-B %d/10 (17x17x1152, residual scale 0.2)", i + 1);
        x = inception_resnet_b(nb, x);
    }
    x = reduction_b_resnet(nb, x); /* 8x8x2048 */
    for (int i = 0; i < 5; i++) {
        nb_section(nb, "Inception-ResNet-C %d/5 (8x8x2048, residual scale 0.2)", i + 1);
        x = inception_resnet_c(nb, x);
    }
    nb_section(nb, "average pool, dropout (keep 0.8)");
    x = nb_spatial_avg(nb, x);
    return nb_dropout(nb, x, 0.8f);
}
