/* bench_wino.c: the Winograd convolutions of src/onednn/wino.c alone, on resnet50's four 3x3
 * stride-1 shapes (batch 8) and lenet's 5x5 one (batch 64): forward, backward data and weight
 * gradient, best of R rounds, in each tensor layout (nChw8c: oneDNN's on AVX2; nChw16c: on
 * AVX-512) and with each variant of the products' kernels (8 floats a vector; 16, which is AVX-512's
 * where the CPU has it), the four settings taken in turn within each round.
 *
 *   make && gcc -O2 -fopenmp -Isrc scripts/bench_wino.c build/src/onednn/wino.o build/src/util.o \
 *       -lm -lpthread -o build/bench_wino && OMP_NUM_THREADS=2 build/bench_wino 5
 *
 * (a second argument, 0 to 4, measures that shape alone) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "onednn/wino.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *filled(size_t n, int mod, float scale, float off) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_wino: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % (size_t)mod) * scale - off;
    return p;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 5, only = argc > 2 ? atoi(argv[2]) : -1; /* [ROUNDS [SHAPE]] */
    static const int shapes[][6] = {{8, 64, 64, 56, 56, 3},   {8, 128, 128, 28, 28, 3}, {8, 256, 256, 14, 14, 3},
                                    {8, 512, 512, 7, 7, 3},    {64, 32, 64, 14, 14, 5}};
    printf("threads %d; products: %s", omp_get_max_threads(), dn_wino_kernels(DN_WINO_YMM));
    printf(" or %s\n", dn_wino_kernels(DN_WINO_WIDE));
    printf("shape (n cin->cout hxw kxk) | pass | nChw8c, 8-float | nChw8c, 16-float | nChw16c, 8-float | nChw16c, 16-float (ms)\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only >= 0 && (size_t)only != s) continue;
        const int *q = shapes[s], k = q[5], p = k / 2;
        DnWino g = {q[0], q[1], q[2], q[3], q[4], q[3], q[4], p, p, k, 8};
        if (!dn_wino_ok(&g)) {
            printf("this CPU has no AVX2 and FMA: nothing to measure\n");
            return 0;
        }
        const size_t nx = (size_t)g.n * g.cin * g.h * g.w, ny = (size_t)g.n * g.cout * g.oh * g.ow,
                     nw = (size_t)g.cout * g.cin * k * k, sf = dn_wino_scratch_floats(&g, omp_get_max_threads());
        float *x = filled(nx, 17, 0.1f, 0.8f), *dy = filled(ny, 13, 0.1f, 0.6f), *w = filled(nw, 7, 0.01f, 0.0f);
        float *y = filled(ny, 1, 0, 0), *dx = filled(nx, 1, 0, 0), *dw = filled(nw, 1, 0, 0), *sc = filled(sf, 1, 0, 0);
        double best[4][3];
        for (int v = 0; v < 4; v++)
            for (int d = 0; d < 3; d++) best[v][d] = 1e30;
        for (int r = 0; r < rounds; r++)
            for (int v = 0; v < 4; v++) {
                g.blk = v < 2 ? 8 : 16;
                dn_wino_kernels(v % 2 ? DN_WINO_WIDE : DN_WINO_YMM);
                const double t0 = now();
                dn_wino_fwd(&g, x, w, NULL, 1, y, sc, sf);
                const double t1 = now();
                dn_wino_bwd_data(&g, dy, w, dx, sc, sf);
                const double t2 = now();
                if (dn_wino_dw_ok(&g)) dn_wino_dw(&g, x, dy, dw, NULL, sc, sf);
                const double t3 = now(), t[3] = {t1 - t0, t2 - t1, t3 - t2};
                for (int d = 0; d < 3; d++)
                    if (t[d] < best[v][d]) best[v][d] = t[d];
            }
        static const char *pass[3] = {"forward", "backward data", "weight gradient"};
        for (int d = 0; d < 3; d++) {
            if (d == 2 && !dn_wino_dw_ok(&g)) continue; /* (blkconv.c's) */
            printf("%d %d->%d %dx%d %dx%d | %s", q[0], q[1], q[2], q[3], q[4], k, k, pass[d]);
            for (int v = 0; v < 4; v++) printf(" | %.2f", best[v][d] * 1e3);
            printf("\n");
        }
        free(x), free(dy), free(w), free(y), free(dx), free(dw), free(sc);
    }
    dn_wino_kernels(DN_WINO_AUTO);
    return 0;
}
