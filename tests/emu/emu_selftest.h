/* emu_selftest.h: the emulated device's self-tests (selftest.cu), called by tests/test_emu.c. */
#ifndef NVCNN_EMU_SELFTEST_H
#define NVCNN_EMU_SELFTEST_H

#include <stddef.h>

/* Block sums by warp shuffles and shared memory: the blocks summed, the largest error in *max_err. */
int emu_st_reduce(double *max_err);
/* Threads read their neighbour's shared-memory write, after a __syncthreads when `sync`: the
 * number of wrong elements. */
int emu_st_neighbour(int sync);
/* A grid of `blocks` (at most 64) blocks of 64 threads whose blocks with (index & writers_mask)
 * set, or all of them when `all`, write their shared array before every thread reads it back:
 * the writers' wrong reads (returned), and in *stale the other blocks' reads that are not NaN
 * (the poison pattern). */
int emu_st_shared_stale(int writers_mask, int all, int blocks, int *stale);
/* These must end the process with the emulator's report. */
void emu_st_divergent_barrier(void);
void emu_st_two_barriers(void);
void emu_st_write_past_end(int at); /* 32 threads write elements at .. at + 31 of 1000 floats */
void emu_st_use_after_free(void);
void emu_st_host_pointer(void);
/* Elements of fresh device memory that are NaN (of 64). */
int emu_st_fresh_memory_nan(void);
/* cudaGetLastError() after a launch of 2048 threads per block. */
int emu_st_bad_launch(void);
/* 1 if an allocation of more than is free fails and one of half of it succeeds. */
int emu_st_oom(size_t *free_bytes);
/* A copy stream and a compute stream, with or without the cudaStreamWaitEvent between them: how
 * many of 1024 elements come out right. */
int emu_st_stream_order(int wait);
/* The compute stream reads a buffer, then a copy stream overwrites it, after cudaStreamWaitEvent
 * when `wait`: how many of 1024 elements the kernel computed from the old values. */
int emu_st_copy_overwrite(int wait);
/* The order of the streams' work from now on (NVCNN_EMU_STREAMS's values). */
void emu_st_set_streams(const char *order);
/* float4 loads and __half2 stores at aligned addresses: how many of 32 threads got them right. */
int emu_st_vectors_aligned(void);
/* These must end the process with the emulator's report: a float4 load from 4 bytes past a
 * 16-byte boundary, a __half2 store 2 bytes past a 4-byte one. */
void emu_st_misaligned_load(void);
void emu_st_misaligned_store(void);
/* The value a device copy of pinned memory holds when the host changed it after queuing the copy. */
int emu_st_pinned_read_when_run(void);
/* NCCL: a unique id, and one rank's average of (rank + 1) / 10 + i / 1000 over nranks ranks. */
void emu_st_nccl_id(void *id);
int emu_st_nccl_average(const void *id, int rank, int nranks, float *out, int n);

#endif
