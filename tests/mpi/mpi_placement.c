/* mpi_placement.c (run under mpirun by tests/test_placement.c): placement_check() across real
 * ranks, with made-up bus ids. argv[1]: "own" (every rank its own GPU), "shared" (all on one GPU)
 * or "shared-allowed" (all on one GPU, as with --allreduce=mpi). Rank 0 prints
 * "placement shared S" when the check returns; "shared" must instead end every rank with exit 2
 * and one error line. */
#include <stdio.h>
#include <string.h>

#include "dist.h"
#include "placement.h"

int main(int argc, char **argv) {
    Dist d;
    dist_init(&d, &argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "own";
    char bus[64];
    snprintf(bus, sizeof bus, "0000:%02x:00.0", strcmp(mode, "own") == 0 ? 0x10 + d.rank : 0x10);
    int shared = placement_check(&d, bus, strcmp(mode, "shared-allowed") == 0);
    if (d.rank == 0) printf("placement shared %d\n", shared);
    dist_finalize(&d);
    return 0;
}
