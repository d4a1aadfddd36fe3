/* inception.c: Inception v3 (Szegedy et al. 2015) as nvcnn builds it: batch norm after every
 * convolution, 299x299 input, no auxiliary head. Module names follow nvcnn (A, B, C, D, E). */
#include "models.h"

/* Shorthands: a stride-1 SAME conv, and a conv with explicit stride and padding. */
static NbT cv(Net *nb, NbT x, int cout, int kh, int kw) { return nb_conv(nb, x, cout, kh, kw, 1, 1, PAD_SAME); }
static NbT cvs(Net *nb, NbT x, int cout, int kh, int kw, int s, Padding pad) {
    return nb_conv(nb, x, cout, kh, kw, s, s, pad);
}

/* 35x35: 1x1 | 1x1 -> 5x5 | 1x1 -> 3x3 -> 3x3 | avgpool -> 1x1 (n). */
static NbT incept_a(Net *nb, NbT x, int n) {
    NbT c[4];
    c[0] = cv(nb, x, 64, 1, 1);
    c[1] = cv(nb, cv(nb, x, 48, 1, 1), 64, 5, 5);
    c[2] = cv(nb, cv(nb, cv(nb, x, 64, 1, 1), 96, 3, 3), 96, 3, 3);
    c[3] = cv(nb, nb_pool(nb, x, POOL_AVG, 3, 3, 1, 1, PAD_SAME), n, 1, 1);
    return nb_concat(nb, c, 4);
}

/* 35x35 -> 17x17 reduction. */
static NbT incept_b(Net *nb, NbT x) {
    NbT c[3];
    c[0] = cvs(nb, cv(nb, cv(nb, x, 64, 1, 1), 96, 3, 3), 96, 3, 3, 2, PAD_VALID);
    c[1] = cvs(nb, x, 384, 3, 3, 2, PAD_VALID);
    c[2] = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID);
    return nb_concat(nb, c, 3);
}

/* 17x17 with factorised 7x7 convolutions of width n. */
static NbT incept_c(Net *nb, NbT x, int n) {
    NbT c[4], t;
    c[0] = cv(nb, x, 192, 1, 1);
    t = cv(nb, x, n, 1, 1);
    t = cv(nb, t, n, 1, 7);
    c[1] = cv(nb, t, 192, 7, 1);
    t = cv(nb, x, n, 1, 1);
    t = cv(nb, t, n, 7, 1);
    t = cv(nb, t, n, 1, 7);
    t = cv(nb, t, n, 7, 1);
    c[2] = cv(nb, t, 192, 1, 7);
    c[3] = cv(nb, nb_pool(nb, x, POOL_AVG, 3, 3, 1, 1, PAD_SAME), 192, 1, 1);
    return nb_concat(nb, c, 4);
}

/* 17x17 -> 8x8 reduction. */
static NbT incept_d(Net *nb, NbT x) {
    NbT c[3], t;
    c[0] = cvs(nb, cv(nb, x, 192, 1, 1), 320, 3, 3, 2, PAD_VALID);
    t = cv(nb, x, 192, 1, 1);
    t = cv(nb, t, 192, 1, 7);
    t = cv(nb, t, 192, 7, 1);
    c[1] = cvs(nb, t, 192, 3, 3, 2, PAD_VALID);
    c[2] = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID);
    return nb_concat(nb, c, 3);
}

/* 8x8 with expanded filter banks: the 1x3 and 3x1 convs of a column both read the same tensor
 * (t, resp. u) and become separate outputs. */
static NbT incept_e(Net *nb, NbT x, PoolKind pool) {
    NbT c[6], t, u;
    c[0] = cv(nb, x, 320, 1, 1);
    t = cv(nb, x, 384, 1, 1);
    c[1] = cv(nb, t, 384, 1, 3);
    c[2] = cv(nb, t, 384, 3, 1);
    u = cv(nb, cv(nb, x, 448, 1, 1), 384, 3, 3);
    c[3] = cv(nb, u, 384, 1, 3);
    c[4] = cv(nb, u, 384, 3, 1);
    c[5] = cv(nb, nb_pool(nb, x, pool, 3, 3, 1, 1, PAD_SAME), 192, 1, 1);
    return nb_concat(nb, c, 6);
}

NbT model_inception3(Net *nb, NbT x) {
    nb->use_batch_norm = 1;
    nb_section(nb, "stem: 3x3/2 V 32, 3x3 V 32, 3x3 64, 3x3/2 max pool, 1x1 80, 3x3 V 192, 3x3/2 max pool");
    x = cvs(nb, x, 32, 3, 3, 2, PAD_VALID);              /* 149x149 */
    x = cvs(nb, x, 32, 3, 3, 1, PAD_VALID);              /* 147x147 */
    x = cv(nb, x, 64, 3, 3);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); /* 73x73 */
    x = cvs(nb, x, 80, 1, 1, 1, PAD_VALID);
    x = cvs(nb, x, 192, 3, 3, 1, PAD_VALID);             /* 71x71 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); /* 35x35 */
    static const int a_pool[3] = {32, 64, 64}, c_width[4] = {128, 160, 160, 192};
    for (int i = 0; i < 3; i++) {
        nb_section(nb, "A %d/3 (35x35): pool branch 1x1 %d", i + 1, a_pool[i]);
        x = incept_a(nb, x, a_pool[i]);                  /* 256, 288, 288 */
    }
    nb_section(nb, "B: 35x35 -> 17x17 reduction");
    x = incept_b(nb, x);                                 /* 768 x 17x17 */
    for (int i = 0; i < 4; i++) {
        nb_section(nb, "C %d/4 (17x17): 7x7 factorised, width %d", i + 1, c_width[i]);
        x = incept_c(nb, x, c_width[i]);
    }
    nb_section(nb, "D: 17x17 -> 8x8 reduction");
    x = incept_d(nb, x);                                 /* 1280 x 8x8 */
    nb_section(nb, "E 1/2 (8x8): average pool branch");
    x = incept_e(nb, x, POOL_AVG);                       /* 2048 */
    nb_section(nb, "E 2/2 (8x8): max pool branch");
    x = incept_e(nb, x, POOL_MAX);
    nb_section(nb, "average pool");
    return nb_spatial_avg(nb, x);
}
