/* resnet.c: ResNet v1 (He et al. 2015) with batch norm and bias-free convolutions.
 * ResNet-50/101/152 use nvcnn's bottleneck block (the stride sits on the first 1x1 conv);
 * ResNet-18/34 use the paper's basic block of two 3x3 convs with widths 64, 128, 256, 512.
 * The first block of stages 2-4 halves the spatial size. */
#include "models.h"

/* The identity when shapes match; a strided 1x1 max pool (subsampling) when only the stride
 * differs; otherwise a 1x1 projection conv with batch norm and no activation. */
static NbT shortcut(Net *nb, NbT x, int depth, int stride) {
    if (nb_shape(nb, x).c == nb_width(nb, depth)) {
        if (stride == 1) return x;
        return nb_pool(nb, x, POOL_MAX, 1, 1, stride, stride, PAD_VALID);
    }
    return nb_conv_ex(nb, x, depth, 1, 1, stride, stride, PAD_SAME, ACT_LINEAR, 1);
}

static NbT bottleneck_v1(Net *nb, NbT x, int depth, int bottleneck, int stride) {
    NbT sc = shortcut(nb, x, depth, stride);
    NbT y = nb_conv(nb, x, bottleneck, 1, 1, stride, stride, PAD_SAME);
    y = nb_conv(nb, y, bottleneck, 3, 3, 1, 1, PAD_SAME);
    y = nb_conv_ex(nb, y, depth, 1, 1, 1, 1, PAD_SAME, ACT_LINEAR, -1);
    return nb_activate(nb, nb_add(nb, y, sc), nb->activation);
}

static NbT basic_v1(Net *nb, NbT x, int width, int stride) {
    NbT sc = shortcut(nb, x, width, stride);
    NbT y = nb_conv(nb, x, width, 3, 3, stride, stride, PAD_SAME_RESNET);
    y = nb_conv_ex(nb, y, width, 3, 3, 1, 1, PAD_SAME, ACT_LINEAR, -1);
    return nb_activate(nb, nb_add(nb, y, sc), nb->activation);
}

/* The stem shared by every depth: 7x7/2 conv and 3x3/2 max pool (224 -> 56). */
static NbT stem(Net *nb, NbT x) {
    nb->use_batch_norm = 1;
    nb_section(nb, "stem: 7x7/2 conv, 3x3/2 max pool");
    x = nb_conv(nb, x, 64, 7, 7, 2, 2, PAD_SAME_RESNET);
    return nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);
}

static NbT resnet_bottleneck(Net *nb, NbT x, const int counts[4]) {
    x = stem(nb, x);
    for (int s = 0; s < 4; s++) {
        int bottleneck = 64 << s, depth = 4 * bottleneck;
        for (int i = 0; i < counts[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            nb_section(nb, "conv%d block %d/%d: 1x1%s %d, 3x3 %d, 1x1 %d, + shortcut", s + 2, i + 1, counts[s],
                       stride == 2 ? "/2" : "", bottleneck, bottleneck, depth);
            x = bottleneck_v1(nb, x, depth, bottleneck, stride);
        }
    }
    nb_section(nb, "average pool");
    return nb_spatial_avg(nb, x);
}

static NbT resnet_basic(Net *nb, NbT x, const int counts[4]) {
    x = stem(nb, x);
    for (int s = 0; s < 4; s++) {
        int width = 64 << s;
        for (int i = 0; i < counts[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            nb_section(nb, "conv%d block %d/%d: 3x3%s %d, 3x3 %d, + shortcut", s + 2, i + 1, counts[s],
                       stride == 2 ? "/2" : "", width, width);
            x = basic_v1(nb, x, width, stride);
        }
    }
    nb_section(nb, "average pool");
    return nb_spatial_avg(nb, x);
}

NbT model_resnet18(Net *nb, NbT x) {
    static const int c[4] = {2, 2, 2, 2};
    return resnet_basic(nb, x, c);
}

NbT model_resnet34(Net *nb, NbT x) {
    static const int c[4] = {3, 4, 6, 3};
    return resnet_basic(nb, x, c);
}

NbT model_resnet50(Net *nb, NbT x) {
    static const int c[4] = {3, 4, 6, 3};
    return resnet_bottleneck(nb, x, c);
}

NbT model_resnet101(Net *nb, NbT x) {
    static const int c[4] = {3, 4, 23, 3};
    return resnet_bottleneck(nb, x, c);
}

NbT model_resnet152(Net *nb, NbT x) {
    static const int c[4] = {3, 8, 36, 3};
    return resnet_bottleneck(nb, x, c);
}
