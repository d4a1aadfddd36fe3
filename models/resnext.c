/* resnext.c: ResNeXt (Xie et al. 2016, "Aggregated Residual Transformations for Deep Neural
 * Networks") as nvcnn builds it: ResNet v1's stem and stages (3/4/6/3, 3/4/23/3 and 3/8/36/3
 * blocks of 256, 512, 1024 and 2048 channels; the first block of stages 2-4 halves the size), each
 * block a sum of 32 branches 1x1 -> 3x3 of width 4 plus the shortcut.
 *
 * The 32 branches' first 1x1 convolutions all read the block's input: they are one convolution
 * of 128 outputs (nb_conv_branches); their 3x3 convolutions each read their own branch: one
 * convolution with 32 groups (the paper's form (c), Fig. 3). As nvcnn, and unlike the paper:
 *   - the branch width is 4 in every stage (the paper's 32x4d doubles it with the channels: 4, 8,
 *     16, 32), which is why resnext50 has 8.6 M parameters rather than 25 M;
 *   - the last 1x1 (to the block's channels) and the projection shortcut are followed by batch
 *     norm AND ReLU before the sum (nvcnn's conv() with its default activation), then the sum gets
 *     a ReLU of its own;
 *   - the stride sits on the branches' first 1x1, as in nvcnn's ResNet v1;
 *   - the shortcut is the identity where the channels match and a 1x1 projection where they
 *     change ("type B"); a strided block with matching channels would take a 1x1 max pool. */
#include "models.h"

#define CARDINALITY 32
#define BRANCH_WIDTH 4

static NbT block(Net *nb, NbT x, int depth, int stride) {
    NbT sc = x;
    if (nb_shape(nb, x).c != nb_width(nb, depth))
        sc = nb_conv(nb, x, depth, 1, 1, stride, stride, PAD_SAME);
    else if (stride != 1)
        sc = nb_pool(nb, x, POOL_MAX, 1, 1, stride, stride, PAD_VALID);
    NbT y = nb_conv_branches(nb, x, CARDINALITY, BRANCH_WIDTH, 1, 1, stride, stride, PAD_SAME);
    y = nb_conv_grouped(nb, y, CARDINALITY * BRANCH_WIDTH, 3, 3, 1, 1, PAD_SAME, CARDINALITY);
    y = nb_conv(nb, y, depth, 1, 1, 1, 1, PAD_SAME);
    return nb_activate(nb, nb_add(nb, y, sc), nb->activation);
}

static NbT resnext(Net *nb, NbT x, const int counts[4]) {
    nb->use_batch_norm = 1;
    nb_section(nb, "stem: 7x7/2 conv, 3x3/2 max pool");
    x = nb_conv(nb, x, 64, 7, 7, 2, 2, PAD_SAME_RESNET); /* 112x112 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_SAME);  /* 56x56 */
    for (int s = 0; s < 4; s++) {
        int depth = 256 << s;
        for (int i = 0; i < counts[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            nb_section(nb, "conv%d block %d/%d: %d branches of width %d (1x1%s, 3x3) -> 1x1 %d, + shortcut", s + 2, i + 1,
                       counts[s], CARDINALITY, BRANCH_WIDTH, stride == 2 ? "/2" : "", depth);
            x = block(nb, x, depth, stride);
        }
    }
    nb_section(nb, "global average pool");
    return nb_spatial_avg(nb, x);
}

NbT model_resnext50(Net *nb, NbT x) {
    static const int c[4] = {3, 4, 6, 3};
    return resnext(nb, x, c);
}

NbT model_resnext101(Net *nb, NbT x) {
    static const int c[4] = {3, 4, 23, 3};
    return resnext(nb, x, c);
}

NbT model_resnext152(Net *nb, NbT x) {
    static const int c[4] = {3, 8, 36, 3};
    return resnext(nb, x, c);
}
