/* lenet.c: the two-convolution network of TensorFlow's MNIST tutorial, as nvcnn builds it
 * (28x28 input -> 64x7x7 features -> fc 512). */
#include "models.h"

NbT model_lenet(Net *nb, NbT x) {
    nb->use_batch_norm = 0;
    x = nb_conv(nb, x, 32, 5, 5, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID);
    x = nb_conv(nb, x, 64, 5, 5, 1, 1, PAD_SAME);
    x = nb_pool(nb, x, POOL_MAX, 2, 2, 2, 2, PAD_VALID);
    x = nb_flatten(nb, x);
    return nb_fc(nb, x, 512, nb->activation);
}
