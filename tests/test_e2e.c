/* test_e2e.c: end to end on real data: lenet trained on Fashion-MNIST (converted by `make data`
 * into data/fashion-mnist/) for 2 epochs on the CPU reaches >= 89% validation top-1.
 * Fashion-MNIST's benchmark table lists the TensorFlow tutorial's 2-conv model, which lenet
 * reproduces, at 91.6% after longer training. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TEST(e2e_fashion_mnist_lenet_two_epochs) {
    if (access("data/fashion-mnist/train-00000-of-00008", R_OK) != 0) {
        th_fail(__FILE__, __LINE__, "data/fashion-mnist is missing: run `make data`");
        return;
    }
    char *o = NULL;
    int rc = th_run("./nvcnn --model=lenet --device=cpu --data_dir=data/fashion-mnist --num_classes=10 --num_epochs=2 "
                    "--batch_size=64 --learning_rate=0.05 --display_every=500",
                    &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    const char *v = o ? strstr(o, "Validation Top-1: ") : NULL;
    CHECK_MSG(v != NULL, "no validation line in:\n%s", o);
    if (v) {
        double top1 = atof(v + strlen("Validation Top-1: "));
        printf("    Fashion-MNIST lenet, 2 epochs: validation top-1 %.2f %%\n", top1);
        CHECK_MSG(top1 >= 89.0, "validation top-1 %.2f %% < 89 %%", top1);
    }
    CHECK(o && strstr(o, "Num images:  60000\n") != NULL);
    CHECK(o && strstr(o, "Validation Top-5: ") != NULL);
    free(o);
}
