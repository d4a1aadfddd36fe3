/* test_emu.c: the emulated CUDA device (tests/emu/, make GPU_EMU=1) runs what it must run and
 * catches what it must catch: block reductions by shuffles and shared memory; a missing
 * __syncthreads (a wrong result), a barrier in divergent code, a write past the end of an
 * allocation, a use after free, a host pointer handed to a kernel (the run ends naming it); fresh
 * memory holding NaN; a missing cudaStreamWaitEvent, in either direction and in the random order
 * of the streams' work (a wrong result); a misaligned vector access (the run ends naming it);
 * pinned memory read when the copy runs; refused launches and allocations; NCCL's average across
 * two processes, the same bits in both. In a build without the emulator these tests skip, and the test runner hands them to
 * the emulated build (tests/harness.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef NVCNN_GPU_EMU
#define EMU_ONLY()                                                                                                         \
    do {                                                                                                                   \
        th_skip("no GPU: a test of the emulated device, which make test builds");                                          \
        return;                                                                                                            \
    } while (0)
#else
#include "emu/emu_selftest.h"
#include "layer_death.h"
#define EMU_ONLY() ((void)0)

static void fn_divergent(void *a) { (void)a, emu_st_divergent_barrier(); }
static void fn_two_barriers(void *a) { (void)a, emu_st_two_barriers(); }
static void fn_past_end(void *a) { emu_st_write_past_end(*(int *)a); }
static void fn_after_free(void *a) { (void)a, emu_st_use_after_free(); }
static void fn_host_pointer(void *a) { (void)a, emu_st_host_pointer(); }
static void fn_misaligned_load(void *a) { (void)a, emu_st_misaligned_load(); }
static void fn_misaligned_store(void *a) { (void)a, emu_st_misaligned_store(); }

/* fn must end its process with exit 1 and the emulator's report holding `want`. */
static void dies_with(void (*fn)(void *), void *arg, const char *what, const char *want) {
    char msg[2048];
    int rc = ld_run_child(fn, arg, msg, sizeof msg);
    CHECK_MSG(rc == 1 && strstr(msg, "nvcnn emulated device: ") && strstr(msg, want), "%s: exit %d, want '%s' in: %s", what, rc, want, msg);
    printf("    %s: %s", what, strstr(msg, "nvcnn emulated device: ") ? strstr(msg, "nvcnn emulated device: ") : msg);
}
#endif

TEST(emu_kernels_reduce_by_shuffles_and_shared_memory) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    double err = -1;
    int blocks = emu_st_reduce(&err);
    CHECK_MSG(blocks == 16 && err >= 0 && err < 1e-3, "%d blocks, max error %g", blocks, err);
    CHECK_MSG(emu_st_neighbour(1) == 0, "with __syncthreads: %d wrong", emu_st_neighbour(1));
#endif
}

/* Shared memory holds the poison pattern at the start of every block: a read of what the block
 * did not write gives NaN, whatever earlier blocks of the grid (in a shuffled order) or earlier
 * grids wrote there. */
TEST(emu_shared_memory_is_poison_at_every_block) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    int stale = -1, wrong = emu_st_shared_stale(0, 1, 16, &stale);
    CHECK_MSG(wrong == 0 && stale == 0, "every block writing: %d wrong", wrong);
    wrong = emu_st_shared_stale(0, 0, 16, &stale);
    CHECK_MSG(wrong == 0 && stale == 0, "after a grid that wrote it, a grid that does not reads %d values that are not NaN", stale);
    /* odd blocks write, even ones only read: in every launch, whichever block runs first */
    for (int launch = 0; launch < 8; launch++) {
        wrong = emu_st_shared_stale(1, 0, 64, &stale);
        CHECK_MSG(wrong == 0 && stale == 0, "launch %d: the writing blocks read %d wrong, the others %d values that are not NaN", launch,
                  wrong, stale);
    }
#endif
}

/* A kernel that reads other threads' shared-memory writes without a barrier gets wrong values:
 * threads run in a shuffled order, one at a time. */
TEST(emu_catches_a_missing_syncthreads) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    int wrong = emu_st_neighbour(0);
    printf("    without __syncthreads: %d of 256 reads wrong\n", wrong);
    CHECK_MSG(wrong > 0, "the race went unnoticed");
#endif
}

TEST(emu_catches_barriers_and_bad_addresses) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    /* 1000 floats end 96 bytes before the guard page: a write there is found after the kernel, one
     * further faults at once */
    int near = 990, far = 1000;
    dies_with(fn_divergent, NULL, "divergent barrier", "59 of its 64 threads wait at __syncthreads and the other 5 have exited");
    dies_with(fn_two_barriers, NULL, "two barriers", "threads wait at different __syncthreads");
    dies_with(fn_past_end, &near, "write just past the end", "k_st_write wrote ");
    dies_with(fn_past_end, &near, "write just past the end", "bytes past the end of a 4000-byte device block");
    dies_with(fn_past_end, &far, "write far past the end", "illegal address: write to ");
    dies_with(fn_after_free, NULL, "use after free", "FREED 4096-byte device block");
    dies_with(fn_host_pointer, NULL, "host pointer", "kernel k_st_double: argument 1 is ");
#endif
}

TEST(emu_memory_launches_and_streams) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    setenv("NVCNN_EMU_MEM", "256M", 1); /* read at the emulator's first call: a device small enough to fill */
    setenv("NVCNN_EMU_STREAMS", "compute-first", 1); /* the order the stream test below expects */
    CHECK_MSG(emu_st_fresh_memory_nan() == 64, "fresh device memory: %d of 64 NaN", emu_st_fresh_memory_nan());
    CHECK_MSG(emu_st_bad_launch() == 9 /* cudaErrorInvalidConfiguration */, "launch of 2048 threads: error %d", emu_st_bad_launch());
    size_t fr = 0;
    CHECK_MSG(emu_st_oom(&fr) == 1, "allocating more than the %zu bytes free", fr);
    int with = emu_st_stream_order(1), without = emu_st_stream_order(0);
    printf("    copy stream then compute stream: %d of 1024 right with cudaStreamWaitEvent, %d without\n", with, without);
    CHECK(with == 1024 && without == 0);
    CHECK_MSG(emu_st_pinned_read_when_run() == 7, "pinned memory read when the copy runs: %d", emu_st_pinned_read_when_run());
#endif
}

/* Two streams, each order a program might get on a GPU: a copy and the kernel that reads its
 * result, a kernel and the copy that overwrites what it reads. Without the cudaStreamWaitEvent
 * between them, compute-first finds only the first race (the kernel runs at once, before the copy
 * it did not wait for), side-first only the second (the copy runs at once, before the kernel);
 * the random order finds both over a few seeds, and with the waits every order is right. */
TEST(emu_streams_interleave_at_random) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    emu_st_set_streams("compute-first");
    CHECK_MSG(emu_st_stream_order(0) == 0 && emu_st_copy_overwrite(0) == 1024, "compute-first: %d, %d", emu_st_stream_order(0),
              emu_st_copy_overwrite(0));
    emu_st_set_streams("side-first");
    CHECK_MSG(emu_st_stream_order(0) == 1024 && emu_st_copy_overwrite(0) == 0, "side-first: %d, %d", emu_st_stream_order(0),
              emu_st_copy_overwrite(0));
    int read_early = 0, overwritten = 0, right = 0;
    for (int seed = 1; seed <= 16; seed++) {
        char order[16];
        snprintf(order, sizeof order, "%d", seed);
        emu_st_set_streams(order);
        /* each race is all or nothing: the copy is one piece of work, the kernel another */
        int a = emu_st_stream_order(0), b = emu_st_copy_overwrite(0);
        CHECK_MSG((a == 0 || a == 1024) && (b == 0 || b == 1024), "seed %d: %d, %d of 1024", seed, a, b);
        read_early += a == 0;
        overwritten += b == 0;
        right += emu_st_stream_order(1) == 1024 && emu_st_copy_overwrite(1) == 1024;
    }
    printf("    random order, 16 seeds: the kernel read before the copy in %d, the copy overwrote before the kernel read in %d; "
           "with the waits, %d of 16 right\n",
           read_early, overwritten, right);
    CHECK(read_early > 0 && read_early < 16 && overwritten > 0 && overwritten < 16 && right == 16);
#endif
}

/* float4 and __half2 accesses: right where aligned; a misaligned one ends the run naming the
 * kernel and the address, as a GPU's "misaligned address" fault does. */
TEST(emu_catches_a_misaligned_vector_access) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    dies_with(fn_misaligned_load, NULL, "float4 load", "misaligned address: a 16-byte float4 load from ");
    dies_with(fn_misaligned_load, NULL, "float4 load", "offset 4 of a 528-byte device block");
    dies_with(fn_misaligned_load, NULL, "float4 load", "(in kernel k_st_vec_load");
    dies_with(fn_misaligned_store, NULL, "__half2 store", "misaligned address: a 4-byte __half2 store to ");
    dies_with(fn_misaligned_store, NULL, "__half2 store", "offset 2 of a 132-byte device block");
    /* last: a child forked after this process initialised CUDA could not use it */
    CHECK_MSG(emu_st_vectors_aligned() == 32, "aligned: %d of 32 right", emu_st_vectors_aligned());
#endif
}

/* NCCL across two processes: each rank's average is the mean of both ranks' data, bit for bit the
 * same on both. */
TEST(emu_nccl_average_across_two_processes) {
    EMU_ONLY();
#ifdef NVCNN_GPU_EMU
    enum { N = 3000 };
    char id[128];
    emu_st_nccl_id(id);
    const char *t = th_tmpdir();
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        pid[r] = fork();
        if (pid[r] == 0) {
            static float out[N];
            emu_st_nccl_average(id, r, 2, out, N);
            char path[512];
            snprintf(path, sizeof path, "%s/nccl-%d", t, r);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(out, sizeof out, 1, f) != 1) _exit(3);
            fclose(f);
            _exit(0);
        }
    }
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        int st;
        ok &= waitpid(pid[r], &st, 0) == pid[r] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CHECK_MSG(ok, "a rank failed");
    static float a[N], b[N];
    char path[512];
    snprintf(path, sizeof path, "%s/nccl-0", t);
    FILE *f = fopen(path, "rb");
    ok = f && fread(a, sizeof a, 1, f) == 1;
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/nccl-1", t);
    f = fopen(path, "rb");
    ok = ok && f && fread(b, sizeof b, 1, f) == 1;
    if (f) fclose(f);
    CHECK(ok);
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(a[i] - (0.15 + i * 1e-3)));
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "the ranks' averages differ");
    CHECK_MSG(worst < 1e-5, "average off by %g", worst);
#endif
}
