/* dist.c: see dist.h. */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "watchdog.h"

/* One rank, without MPI. */
static void one_rank(Dist *d) {
    d->rank = 0;
    d->size = 1;
    d->local_rank = 0;
    d->local_size = 1;
    d->mpi = 0;
}

/* the launchers' variables of a task's rank (Open MPI's, PMIx's, PMI's, MVAPICH's) */
static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"};

int dist_launcher_rank(void) {
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars; i++)
        if (getenv(rank_vars[i])) return atoi(getenv(rank_vars[i]));
    const char *slurm = getenv("SLURM_PROCID");
    return slurm ? atoi(slurm) : -1;
}

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

/* Whether an MPI launcher started this process: one of the variables that mpirun (Open MPI's,
 * MPICH's Hydra, MVAPICH's) or srun (with PMI or PMIx) gives each process it starts. */
static int launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD",
                                       "MPI_LOCALNRANKS",      "MV2_COMM_WORLD_SIZE", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

/* One rank where the launcher says it started several tasks, or this one as a task but the first:
 * each task became an MPI world of its own (srun without the PMI this MPI needs, an nvcnn built
 * with another MPI than the launcher's) and would train alone, unaware of the others. */
static void warn_lone_task(void) {
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars; i++) {
        const char *v = getenv(size_vars[i]);
        if (v && atoi(v) > 1) {
            warn("%s=%s says the launcher started %d tasks, but MPI sees one rank: each task trains alone (srun needs the PMI of "
                 "this MPI, e.g. --mpi=pmix; or nvcnn was built with another MPI than the launcher's)",
                 size_vars[i], v, atoi(v));
            return;
        }
    }
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars; i++) {
        const char *v = getenv(rank_vars[i]);
        if (v && atoi(v) > 0) {
            warn("%s=%s says this is not the launcher's first task, but MPI sees one rank: it trains alone", rank_vars[i], v);
            return;
        }
    }
}

/* A process that ends by exit() before dist_finalize() (--help: exit 0) finalizes MPI there:
 * mpirun takes a rank that leaves without MPI_Finalize for a failure of the job. */
static void finalize_at_exit(void) {
    int fin = 1;
    if (MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Finalize();
}

void dist_init(Dist *d, int *argc, char ***argv) {
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited && !launched_by_mpi()) {
        /* started on its own: one rank, without MPI. An MPI singleton would be the same one rank
         * after about 0.4 s (0.15 s of CPU) of MPI_Init at every start, and where MPI cannot start
         * its runtime (a container without its network or shared memory) no run at all. */
        one_rank(d);
        return;
    }
    if (!inited) {
        int provided;
        MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        d->mpi = 1;
        atexit(finalize_at_exit);
    }
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &d->size));
    if (d->size == 1) warn_lone_task();
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local));
    MPI_CHECK(MPI_Comm_rank(local, &d->local_rank));
    MPI_CHECK(MPI_Comm_size(local, &d->local_size));
    MPI_CHECK(MPI_Comm_free(&local));
}

void dist_finalize(Dist *d) {
    if (d->mpi) {
        watchdog_enter(WD_FINALIZE, 0, 0);
        MPI_Finalize();
        watchdog_leave();
        d->mpi = 0;
    }
}

void dist_allreduce_mean(Dist *d, float *buf, size_t n) {
    if (d->size == 1) return;
    watchdog_enter(WD_ALLREDUCE, (long)n, 0);
    for (size_t off = 0; off < n; off += (size_t)INT_MAX / 2) {
        size_t k = n - off < (size_t)INT_MAX / 2 ? n - off : (size_t)INT_MAX / 2;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
    watchdog_leave();
    const float inv = 1.0f / (float)d->size;
    for (size_t i = 0; i < n; i++) buf[i] *= inv;
}

void dist_allreduce_sum_d(Dist *d, double *buf, size_t n) {
    if (d->size == 1) return;
    watchdog_enter(WD_ALLREDUCE, (long)n, 0);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    watchdog_leave();
}

void dist_bcast(Dist *d, void *buf, size_t bytes) {
    if (d->size == 1) return;
    char *p = buf;
    watchdog_enter(WD_BCAST, (long)bytes, 0);
    for (size_t off = 0; off < bytes; off += (size_t)INT_MAX / 2) {
        size_t k = bytes - off < (size_t)INT_MAX / 2 ? bytes - off : (size_t)INT_MAX / 2;
        MPI_CHECK(MPI_Bcast(p + off, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    watchdog_leave();
}

void dist_barrier(Dist *d) {
    if (d->size == 1) return;
    watchdog_enter(WD_BARRIER, 0, 0);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    watchdog_leave();
}

void dist_allgather(Dist *d, const void *mine, void *all, size_t bytes) {
    if (bytes > (size_t)INT_MAX) die("dist_allgather: %zu bytes per rank is more than MPI can send at once", bytes);
    if (d->size == 1) {
        memmove(all, mine, bytes);
        return;
    }
    watchdog_enter(WD_ALLGATHER, (long)bytes, 0);
    MPI_CHECK(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
    watchdog_leave();
}
#endif

/* ---- bucketed allreduce ---- */

#ifdef NVCNN_MPI
/* Open MPI's non-blocking allreduce (coll/libnbc) takes a binomial tree, a reduce to rank 0 then a
 * broadcast, for in-place buffers (the buckets are) and for fewer than 4 ranks: over a network
 * that is twice the ring's time at 2 ranks, and it grows with log2 of the ranks, where the ring's
 * stays at 2 (N-1)/N of a bucket per link (measured in docs/scaling.md). Its control variable
 * coll_libnbc_iallreduce_algorithm, written through MPI_T before each launch, sends buckets of at
 * least 64 KiB (libnbc's own bound for small messages) by the ring and leaves smaller ones to
 * libnbc. Not where the MPI has no such variable, nor where the user set it (mpirun --mca). */
enum { NBC_AUTO = 0, NBC_RING = 1 };
static struct {
    int ready;          /* the variable is ours to set */
    int value;          /* its value now */
    MPI_T_cvar_handle h;
} nbc;

static void nbc_open(void) {
    int provided, idx, count, v = -1;
    if (nbc.ready || MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
    /* not found: another MPI, or an Open MPI without libnbc; the library's choice stands */
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &idx) != MPI_SUCCESS ||
        MPI_T_cvar_handle_alloc(idx, NULL, &nbc.h, &count) != MPI_SUCCESS) {
        MPI_CHECK(MPI_T_finalize());
        return;
    }
    if (count != 1 || MPI_T_cvar_read(nbc.h, &v) != MPI_SUCCESS || v != NBC_AUTO) { /* the user's choice */
        MPI_CHECK(MPI_T_cvar_handle_free(&nbc.h));
        MPI_CHECK(MPI_T_finalize());
        return;
    }
    nbc.ready = 1;
    nbc.value = NBC_AUTO;
}

static void nbc_choose(size_t bytes) {
    int want = bytes >= 65536 ? NBC_RING : NBC_AUTO;
    if (!nbc.ready || want == nbc.value) return;
    MPI_CHECK(MPI_T_cvar_write(nbc.h, &want));
    nbc.value = want;
}
#endif

struct GradSync {
    Dist *d;
    float *buf;
    size_t n;
    int nb;          /* buckets; bucket i covers [lo[i], hi[i]), i = 0 is the arena's end */
    size_t *lo, *hi;
    int next;        /* next bucket to launch */
    double *t_launch, *t_done; /* this step's wall clock of each bucket's launch and of the wait that returned it */
#ifdef NVCNN_MPI
    MPI_Comm comm;   /* a private communicator: no interference with other collectives */
    MPI_Request *req;
#endif
};

GradSync *gradsync_new(Dist *d, float *buf, size_t n, size_t bucket_bytes) {
    GradSync *g = xcalloc(1, sizeof *g);
    g->d = d;
    g->buf = buf;
    g->n = n;
    size_t per = bucket_bytes / sizeof(float);
    if (per < 1) per = 1;
    if (per > (size_t)INT_MAX / 2) per = (size_t)INT_MAX / 2;
    g->nb = n ? (int)((n + per - 1) / per) : 0;
    g->lo = xmalloc((size_t)(g->nb ? g->nb : 1) * sizeof *g->lo);
    g->hi = xmalloc((size_t)(g->nb ? g->nb : 1) * sizeof *g->hi);
    for (int i = 0; i < g->nb; i++) {
        g->hi[i] = n - (size_t)i * per;
        g->lo[i] = g->hi[i] > per ? g->hi[i] - per : 0;
    }
    g->t_launch = xcalloc((size_t)(g->nb ? g->nb : 1), sizeof *g->t_launch);
    g->t_done = xcalloc((size_t)(g->nb ? g->nb : 1), sizeof *g->t_done);
#ifdef NVCNN_MPI
    g->req = xmalloc((size_t)(g->nb ? g->nb : 1) * sizeof *g->req);
    for (int i = 0; i < g->nb; i++) g->req[i] = MPI_REQUEST_NULL;
    if (d->size > 1) {
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g->comm));
        nbc_open();
    }
#endif
    return g;
}

int gradsync_buckets(const GradSync *g) { return g->nb; }

int gradsync_bucket_times(const GradSync *g, int i, double *launched, double *done) {
    if (!g || g->d->size == 1 || i < 0 || i >= g->nb || g->t_done[i] < g->t_launch[i]) return 0;
    *launched = g->t_launch[i];
    *done = g->t_done[i];
    return 1;
}

void gradsync_begin(GradSync *g) { g->next = 0; }

static void launch(GradSync *g, int i) {
    g->t_launch[i] = now_seconds();
#ifdef NVCNN_MPI
    nbc_choose((g->hi[i] - g->lo[i]) * sizeof(float));
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, g->buf + g->lo[i], (int)(g->hi[i] - g->lo[i]), MPI_FLOAT, MPI_SUM, g->comm,
                             &g->req[i]));
#else
    (void)g;
    (void)i;
#endif
}

void gradsync_ready(GradSync *g, size_t final_from) {
    if (g->d->size == 1) return;
    while (g->next < g->nb && g->lo[g->next] >= final_from) launch(g, g->next++);
#ifdef NVCNN_MPI
    /* let MPI progress the buckets in flight while backward goes on */
    if (g->next > 0) {
        int done;
        MPI_CHECK(MPI_Testall(g->next, g->req, &done, MPI_STATUSES_IGNORE));
    }
#endif
}

/* a division, not a multiplication by 1/size: exact whenever the mean is representable */
static void divide_by_ranks(GradSync *g) {
    const float size = (float)g->d->size;
    float *b = g->buf;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < g->n; i++) b[i] /= size;
}

void gradsync_finish(GradSync *g) {
    if (g->d->size == 1) return;
    while (g->next < g->nb) launch(g, g->next++);
#ifdef NVCNN_MPI
    /* in the order they were launched, each a phase of its own for the watchdog */
    for (int i = 0; i < g->nb; i++) {
        watchdog_enter(WD_BUCKET, i + 1, g->nb);
        MPI_CHECK(MPI_Wait(&g->req[i], MPI_STATUS_IGNORE));
        g->t_done[i] = now_seconds();
    }
    watchdog_leave();
#endif
    divide_by_ranks(g);
}

void gradsync_all_in_turn(GradSync *g) {
    if (g->d->size == 1) return;
    for (int i = 0; i < g->nb; i++) {
        launch(g, i);
#ifdef NVCNN_MPI
        watchdog_enter(WD_BUCKET, i + 1, g->nb);
        MPI_CHECK(MPI_Wait(&g->req[i], MPI_STATUS_IGNORE));
        watchdog_leave();
#endif
        g->t_done[i] = now_seconds();
    }
    g->next = g->nb;
    divide_by_ranks(g);
}

void gradsync_free(GradSync *g) {
    if (!g) return;
#ifdef NVCNN_MPI
    if (g->d->size > 1) MPI_Comm_free(&g->comm);
    free(g->req);
#endif
    free(g->lo);
    free(g->hi);
    free(g->t_launch);
    free(g->t_done);
    free(g);
}

#ifndef NVCNN_MPI
void dist_init(Dist *d, int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    one_rank(d);
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
void dist_allgather(Dist *d, const void *mine, void *all, size_t bytes) {
    (void)d;
    memmove(all, mine, bytes);
}
#endif
