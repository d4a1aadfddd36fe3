/* dist.h: ranks and collectives. MPI when built with it and started by a launcher (mpirun, srun),
 * or when the program initialised MPI itself; otherwise one rank, without MPI. */
#ifndef NVCNN_DIST_H
#define NVCNN_DIST_H

#include <stddef.h>

typedef struct Dist {
    int rank, size;             /* world */
    int local_rank, local_size; /* on this node (MPI_Comm_split_type shared) */
    int mpi;                    /* MPI initialised by us */
} Dist;

#ifdef NVCNN_MPI
#include <mpi.h>
/* Checks an MPI call; on failure prints file, line and MPI's error string and aborts. */
#define MPI_CHECK(call) mpi_check((call), #call, __FILE__, __LINE__)
void mpi_check(int err, const char *what, const char *file, int line);
#endif

/* The rank a launcher's variables give this process before MPI starts (mpirun's, PMIx's, PMI's,
 * MVAPICH's, Slurm's), -1 where none is set. */
int dist_launcher_rank(void);
void dist_init(Dist *d, int *argc, char ***argv);
void dist_finalize(Dist *d);
/* In place: buf = mean over ranks of buf. */
void dist_allreduce_mean(Dist *d, float *buf, size_t n);
/* In place: buf = sum over ranks (doubles, for statistics). */
void dist_allreduce_sum_d(Dist *d, double *buf, size_t n);
/* Rank 0's bytes to every rank. */
void dist_bcast(Dist *d, void *buf, size_t bytes);
void dist_barrier(Dist *d);
/* Every rank's `bytes` bytes, in rank order, into all (size * bytes). */
void dist_allgather(Dist *d, const void *mine, void *all, size_t bytes);

/* Bucketed gradient averaging over one contiguous arena (Horovod's tensor fusion, PyTorch DDP's
 * buckets). The arena is cut into buckets of `bucket_bytes` from its END, because backward
 * produces the last layers' gradients first. gradsync_ready(final_from) is called during backward
 * with the offset from which every gradient is final: each bucket lying wholly at or above it is
 * launched at once as a non-blocking allreduce, so communication overlaps the rest of backward.
 * gradsync_finish() launches what is left, waits for all, and divides by the number of ranks. */
typedef struct GradSync GradSync;
GradSync *gradsync_new(Dist *d, float *buf, size_t n, size_t bucket_bytes);
void gradsync_begin(GradSync *g); /* a new step: no bucket launched yet */
void gradsync_ready(GradSync *g, size_t final_from);
void gradsync_finish(GradSync *g);
/* Every bucket in turn, each launched only when the one before has completed (one request
 * outstanding at a time), then the division: for gradients that are all final at once (the GPU
 * backend's, downloaded after backward), where launching them all together overlaps nothing. */
void gradsync_all_in_turn(GradSync *g);
int gradsync_buckets(const GradSync *g);
/* Bucket i of the last step (--profile): the wall clock of its launch and of the return of the
 * wait for it (MPI progresses it in between, during backward: it ended at or before that); 0 when
 * it has no such times (one rank, not launched). */
int gradsync_bucket_times(const GradSync *g, int i, double *launched, double *done);
void gradsync_free(GradSync *g);

#endif
