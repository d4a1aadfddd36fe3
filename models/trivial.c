/* trivial.c: nvcnn's "trivial" model, one fully connected unit on the flattened image. It does
 * almost no arithmetic, so its throughput measures the input pipeline. */
#include "models.h"

NbT model_trivial(Net *nb, NbT x) {
    nb->use_batch_norm = 0;
    x = nb_flatten(nb, x);
    return nb_fc(nb, x, 1, nb->activation);
}
