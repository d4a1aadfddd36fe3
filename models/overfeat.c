/* overfeat.c: the "fast" OverFeat model (Sermanet et al. 2013), 231x231 input. */
#include "models.h"

NbT model_overfeat(Net *nb, NbT x) {
    nb->use_batch_norm = 0;
    x = nb_conv(nb, x, 96, 11, 11, 4, 4, PAD_VALID); /* 56x56 */
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID); /* 28x28 */
    x = nb_conv(nb, x, 256, 5, 5, 1, 1, PAD_VALID); /* 24x24 */
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID); /* 12x12 */
    x = nb_conv(nb, x, 512, 3, 3, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 1024, 3, 3, 1, 1, PAD_SAME);
    x = nb_conv(nb, x, 1024, 3, 3, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID); /* 6x6 */
    x = nb_flatten(nb, x);
    x = nb_fc(nb, x, 3072, nb->activation);
    return nb_fc(nb, x, 4096, nb->activation);
}
