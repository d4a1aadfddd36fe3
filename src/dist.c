/* dist.c: see dist.h. */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

#ifdef NVCNN_MPI
void mpi_check(int err, const char *what, const char *file, int line) {
    if (err == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "nvcnn: error: MPI: %s failed at %s:%d: %s\n", what, file, line, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void dist_init(Dist *d, int *argc, char ***argv) {
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        int provided;
        MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        d->mpi = 1;
    }
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &d->size));
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local));
    MPI_CHECK(MPI_Comm_rank(local, &d->local_rank));
    MPI_CHECK(MPI_Comm_size(local, &d->local_size));
    MPI_CHECK(MPI_Comm_free(&local));
}

void dist_finalize(Dist *d) {
    if (d->mpi) {
        MPI_Finalize();
        d->mpi = 0;
    }
}

void dist_allreduce_mean(Dist *d, float *buf, size_t n) {
    if (d->size == 1) return;
    for (size_t off = 0; off < n; off += (size_t)INT_MAX / 2) {
        size_t k = n - off < (size_t)INT_MAX / 2 ? n - off : (size_t)INT_MAX / 2;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
    const float inv = 1.0f / (float)d->size;
    for (size_t i = 0; i < n; i++) buf[i] *= inv;
}

void dist_allreduce_sum_d(Dist *d, double *buf, size_t n) {
    if (d->size == 1) return;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

void dist_bcast(Dist *d, void *buf, size_t bytes) {
    if (d->size == 1) return;
    char *p = buf;
    for (size_t off = 0; off < bytes; off += (size_t)INT_MAX / 2) {
        size_t k = bytes - off < (size_t)INT_MAX / 2 ? bytes - off : (size_t)INT_MAX / 2;
        MPI_CHECK(MPI_Bcast(p + off, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
}

void dist_barrier(Dist *d) {
    if (d->size > 1) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}
#else
void dist_init(Dist *d, int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    d->rank = 0;
    d->size = 1;
    d->local_rank = 0;
    d->local_size = 1;
    d->mpi = 0;
}
void dist_finalize(Dist *d) { (void)d; }
void dist_allreduce_mean(Dist *d, float *buf, size_t n) {
    (void)d;
    (void)buf;
    (void)n;
}
void dist_allreduce_sum_d(Dist *d, double *buf, size_t n) {
    (void)d;
    (void)buf;
    (void)n;
}
void dist_bcast(Dist *d, void *buf, size_t bytes) {
    (void)d;
    (void)buf;
    (void)bytes;
}
void dist_barrier(Dist *d) { (void)d; }
#endif
