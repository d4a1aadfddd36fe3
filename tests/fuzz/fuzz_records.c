/* fuzz_records.c: a libFuzzer target over everything nvcnn parses from files that users bring:
 * TFRecord framing, tf.train.Example (protobuf-c), JPEG and PNG decoding, and the augmentation
 * that crops from the decoded header's dimensions, plus the checkpoint loader.
 * Built and run by tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "io/augment.h"
#include "io/example.h"
#include "io/image.h"
#include "io/tfrecord.h"
#include "net.h"

static void image_paths(const uint8_t *d, size_t n) {
    char err[256];
    uint8_t *img;
    int w, h;
    if (image_decode_rgb(d, n, &img, &w, &h, err, sizeof err) == 0) free(img);
    AugmentParams p = {.out_h = 16, .out_w = 16, .training = 1, .distort_color = 1};
    uint8_t out[16 * 16 * 3];
    Rng r;
    rng_seed(&r, n);
    augment_image(d, n, NULL, 0, &p, &r, out, err, sizeof err);
}

static void example_paths(const uint8_t *d, size_t n) {
    ExampleImage ex;
    char err[256];
    if (example_parse_image(d, n, &ex, err, sizeof err) == 0) {
        image_paths(ex.encoded, ex.encoded_len);
        example_image_free(&ex);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    /* records in memory, as the loader checks them */
    size_t off = 0;
    while (n - off >= 16) {
        uint64_t len;
        memcpy(&len, d + off, 8);
        if (len > n - off - 16) break;
        const char *what;
        if (tfr_check_record(d + off, len, &what) != 0) break;
        example_paths(d + off + 12, (size_t)len);
        off += (size_t)len + 16;
    }
    /* the same bytes as one Example, and as one image */
    example_paths(d, n);
    image_paths(d, n);
    /* as a checkpoint of a tiny net, through the file loader */
    static Net *net;
    if (!net) {
        net = net_new(1, 1, 4, 4);
        nb_softmax_xent(net, nb_fc(net, nb_flatten(net, nb_input(net)), 3, ACT_LINEAR));
        net_finalize(net, 1);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/nvcnn-fuzz-ckpt.%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(d, 1, n, f);
        fclose(f);
        char err[512];
        ckpt_load(path, NULL, net, NULL, NULL, err, sizeof err);
        unlink(path);
    }
    return 0;
}
