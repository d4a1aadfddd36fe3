/* alexnet.c: AlexNet in the single-tower "one weird trick" form (Krizhevsky 2014), 227x227
 * input, no local response normalisation, dropout 0.5 after both hidden FC layers. */
#include "models.h"

NbT model_alexnet(Net *nb, NbT x) {
    nb->use_batch_norm = 0;
    x = nb_conv(nb, x, 64, 11, 11, 4, 4, PAD_VALID); /* 55x55 */
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); /* 27x27 */
    x = nb_conv(nb, x, 192, 5, 5, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); /* 13x13 */
    x = nb_conv(nb, x, 384, 3, 3, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 256, 3, 3, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 256, 3, 3, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 3, 3, 2, 2, PAD_VALID); /* 6x6 */
    x = nb_flatten(nb, x);
    x = nb_fc(nb, x, 4096, nb->activation);
    x = nb_dropout(nb, x, 0.5f);
    x = nb_fc(nb, x, 4096, nb->activation);
    return nb_dropout(nb, x, 0.5f);
}
