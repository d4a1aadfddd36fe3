/* blkpool.h: max pooling of a blocked input (blkpool.c). */
#ifndef NVCNN_ONEDNN_BLKPOOL_H
#define NVCNN_ONEDNN_BLKPOOL_H

#include <stdint.h>

/* The blocked max pooling's geometry: [n][c / b][h][w][b] in, [n][c / b][oh][ow][b] out. */
typedef struct DnBlkPool {
    int n, cb, b, h, w, oh, ow, kh, kw, sh, sw, pt, pl;
    uint8_t *pos; /* [n][c / b][oh][ow][b] the maximum's place in its window: row * kw + column */
} DnBlkPool;

/* y = max pooling of x; fills g->pos. */
void dn_blkpool_forward(const DnBlkPool *g, const float *x, float *y);
/* dx = (or +=, add) the gradient of the input from dy and g->pos of the last forward. */
void dn_blkpool_backward(const DnBlkPool *g, const float *dy, float *dx, int add);

/* Which kernels run: 1, AVX2's where the CPU has it; 0, SSE4.1's (or plain C); -1, the default
 * (AVX2's where the CPU has it). Returns whether AVX2's run. For tests: not thread-safe. */
int dn_blkpool_avx2(int on);

#endif
