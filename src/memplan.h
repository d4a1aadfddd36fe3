/* memplan.h: placing buffers with known lifetimes in one arena so that buffers never live at the
 * same time share memory (the GPU backend's activation gradients).
 */
#ifndef NVCNN_MEMPLAN_H
#define NVCNN_MEMPLAN_H

#include <stddef.h>

typedef struct MemBlock {
    size_t bytes;
    int first, last; /* live over the steps [first, last], inclusive */
    size_t off;      /* out: offset in the arena */
} MemBlock;

/* Gives every block an offset (a multiple of align, a power of two) such that two blocks whose
 * lifetimes overlap do not overlap in memory; returns the arena's size. Largest blocks first,
 * each at the lowest offset that clears the placed blocks it lives alongside. Blocks of 0 bytes
 * get offset 0 and take no room. */
size_t memplan(MemBlock *b, int n, size_t align);

/* The most bytes live at any one step (rounded to align): no placement can be smaller. */
size_t memplan_lower_bound(const MemBlock *b, int n, size_t align);

#endif
