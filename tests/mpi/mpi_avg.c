/* mpi_avg.c (run under mpirun by tests/test_dist.c): bucketed averaging of known per-rank
 * values is exact, for several bucket sizes including buckets that cut through a tensor and a
 * single-float bucket, with buckets launched in backward order as gradients become final; then
 * buckets of 64 KiB and more, which go by the ring (dist.c), on an arena of 300007 floats.
 * Prints "avg ranks N errors E buckets B..." on rank 0. */
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"
#include "util.h"

int main(int argc, char **argv) {
    Dist d;
    dist_init(&d, &argc, &argv);
    /* prime sizes: buckets never divide them evenly */
    const size_t sizes[] = {4, 64, 4000, 40000, 1 << 20, 65536, 1 << 18, 1 << 22};
    long errors = 0;
    int nbuckets[8];
    float *g = xmalloc(300007 * sizeof *g);
    for (int s = 0; s < 8; s++) {
        const size_t n = s < 5 ? 10007 : 300007;
        for (size_t i = 0; i < n; i++) g[i] = (float)(d.rank + 1) * (float)((i % 7) + 1) * 0.25f;
        GradSync *gs = gradsync_new(&d, g, n, sizes[s]);
        nbuckets[s] = gradsync_buckets(gs);
        gradsync_begin(gs);
        /* gradients become final from the end of the arena towards its start, in uneven steps */
        for (size_t from = n; from > 0;) {
            size_t step = 1 + (from * 7919u) % 977u;
            from = from > step ? from - step : 0;
            gradsync_ready(gs, from);
        }
        gradsync_finish(gs);
        for (size_t i = 0; i < n; i++) {
            /* mean over ranks of (r+1) * v = v * (size+1) / 2 */
            float want = (float)((i % 7) + 1) * 0.25f * (float)(d.size + 1) / 2.0f;
            if (g[i] != want) errors++;
        }
        gradsync_free(gs);
    }
    /* the value dist.c left in Open MPI's choice of algorithm after the last (ring-sized) bucket:
     * 1 (ring); -1 where the MPI has no such variable */
    int alg = -1, idx, count, provided;
    MPI_T_cvar_handle h;
    if (MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS) {
        if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &idx) == MPI_SUCCESS &&
            MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
            MPI_CHECK(MPI_T_cvar_read(h, &alg));
            MPI_CHECK(MPI_T_cvar_handle_free(&h));
        }
        MPI_CHECK(MPI_T_finalize());
    }
    double e = (double)errors;
    dist_allreduce_sum_d(&d, &e, 1);
    if (d.rank == 0)
        printf("avg ranks %d errors %.0f buckets %d %d %d %d %d %d %d %d algorithm %d\n", d.size, e, nbuckets[0], nbuckets[1],
               nbuckets[2], nbuckets[3], nbuckets[4], nbuckets[5], nbuckets[6], nbuckets[7], alg);
    free(g);
    dist_finalize(&d);
    return 0;
}
