/* bench_gen_images.c: writes ImageNet-like JPEGs (500x375, quality 90) for the input-pipeline
 * benchmark: smooth gradients, hard-edged shapes and noise, into DIR/class_K/img_N.jpg.
 * Usage: bench_gen_images DIR COUNT [CLASSES] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "io/image.h"
#include "util.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR COUNT [CLASSES]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int count = atoi(argv[2]), classes = argc > 3 ? atoi(argv[3]) : 10;
    const int W = 500, H = 375;
    uint8_t *px = xmalloc((size_t)W * H * 3);
    Rng r;
    rng_seed(&r, 42);
    mkdir(dir, 0755);
    for (int i = 0; i < count; i++) {
        double fx = 3 + 10 * rng_uniform(&r), fy = 3 + 10 * rng_uniform(&r), ph = 6.28 * rng_uniform(&r);
        int cx = (int)rng_below(&r, W), cy = (int)rng_below(&r, H), rad = 20 + (int)rng_below(&r, 100);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double v[3] = {128 + 100 * sin(x / fx + ph) * cos(y / fy), 255.0 * x / W, 255.0 * y / H};
                if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < rad * rad) {
                    v[0] = 230;
                    v[1] = 40;
                    v[2] = 60;
                }
                for (int k = 0; k < 3; k++) {
                    double n = v[k] + 12 * (rng_uniform(&r) - 0.5);
                    px[((size_t)y * W + x) * 3 + k] = (uint8_t)(n < 0 ? 0 : n > 255 ? 255 : n);
                }
            }
        uint8_t *jpg;
        size_t len;
        if (image_encode_jpeg(px, W, H, 3, 90, &jpg, &len) != 0) die("encode failed");
        char sub[512], path[600];
        snprintf(sub, sizeof sub, "%s/class_%03d", dir, i % classes);
        mkdir(sub, 0755);
        snprintf(path, sizeof path, "%s/img_%06d.jpg", sub, i);
        FILE *f = xfopen(path, "wb");
        fwrite(jpg, 1, len, f);
        fclose(f);
        free(jpg);
    }
    free(px);
    return 0;
}
