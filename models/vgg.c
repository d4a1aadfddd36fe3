/* vgg.c: VGG 11/13/16/19 (Simonyan & Zisserman 2014, configurations A, B, D, E): five groups of
 * 3x3 convolutions, each group closed by a 2x2 max pool, then two FC 4096 layers. As in nvcnn
 * there is no dropout and no batch norm. */
#include "models.h"

static NbT vgg(Net *nb, NbT x, const int counts[5]) {
    static const int widths[5] = {64, 128, 256, 512, 512};
    nb->use_batch_norm = 0;
    for (int g = 0; g < 5; g++) {
        for (int i = 0; i < counts[g]; i++) x = nb_conv(nb, x, widths[g], 3, 3, 1, 1, PAD_SAME);
        x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID);
    }
    x = nb_flatten(nb, x);
    x = nb_fc(nb, x, 4096, nb->activation);
    return nb_fc(nb, x, 4096, nb->activation);
}

NbT model_vgg11(Net *nb, NbT x) {
    static const int c[5] = {1, 1, 2, 2, 2};
    return vgg(nb, x, c);
}

NbT model_vgg13(Net *nb, NbT x) {
    static const int c[5] = {2, 2, 2, 2, 2};
    return vgg(nb, x, c);
}

NbT model_vgg16(Net *nb, NbT x) {
    static const int c[5] = {2, 2, 3, 3, 3};
    return vgg(nb, x, c);
}

NbT model_vgg19(Net *nb, NbT x) {
    static const int c[5] = {2, 2, 4, 4, 4};
    return vgg(nb, x, c);
}
