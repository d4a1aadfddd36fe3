/* wino.h: the forward, backward-data and weight-gradient passes of a 3x3 or 5x5 stride-1
 * convolution by Winograd's minimal filtering F(4x4, 3x3) or F(2x2, 5x5) on blocked tensors
 * (wino.c). */
#ifndef NVCNN_ONEDNN_WINO_H
#define NVCNN_ONEDNN_WINO_H

#include <stddef.h>

/* The geometry: input x [n][cin / blk][h][w][blk], output y [n][cout / blk][oh][ow][blk] with blk
 * 8 (oneDNN's nChw8c, its layout on AVX2) or 16 (nChw16c, its layout on AVX-512), weights
 * [cout][cin][k][k] with k 3 (F(4x4, 3x3)) or 5 (F(2x2, 5x5)), stride 1, padding pt (top) and pl
 * (left) with zeros, the padding after whatever oh and ow leave; no groups, no dilation. */
typedef struct DnWino {
    int n, cin, cout, h, w, oh, ow, pt, pl, k, blk;
} DnWino;

/* Whether wino.c computes this geometry on this CPU (AVX2 and FMA; blk 8 or 16, blk | cin,
 * blk | cout; k 3 or 5; padding 0 to k - 1 on each side that has one). */
int dn_wino_ok(const DnWino *g);

/* The floats of scratch that dn_wino_fwd, dn_wino_bwd_data and dn_wino_dw need to run on `threads`
 * OpenMP threads (the largest of the three). */
size_t dn_wino_scratch_floats(const DnWino *g, int threads);

/* y = x (*) w + bias (NULL: none), then max(0, .) when relu: written, not added. scratch holds
 * scratch_floats (they decide how many threads run: at most OpenMP's). */
void dn_wino_fwd(const DnWino *g, const float *x, const float *w, const float *bias, int relu, float *y,
                 float *scratch, size_t scratch_floats);

/* dx [n][cin / blk][h][w][blk] = the input gradient of the output gradient dy [n][cout / blk][oh][ow][blk]:
 * written, not added. */
void dn_wino_bwd_data(const DnWino *g, const float *dy, const float *w, float *dx, float *scratch,
                      size_t scratch_floats);

/* Whether dn_wino_dw computes this geometry: dn_wino_ok, and 36 cout cin floats of sums within
 * 16 MiB (beyond that the direct kernel of blkconv.c is as fast). */
int dn_wino_dw_ok(const DnWino *g);

/* dw [cout][cin][k][k] = the weight gradient of x and the output gradient dy, and db [cout] (NULL:
 * none) = the bias gradient: both written, not added. */
void dn_wino_dw(const DnWino *g, const float *x, const float *dy, float *dw, float *db, float *scratch,
                size_t scratch_floats);

/* The products' kernels (the multiply-adds): DN_WINO_AUTO, AVX-512's where the CPU has it, else
 * AVX2's; DN_WINO_YMM, AVX2's; DN_WINO_WIDE, AVX-512's source (16 floats a vector), compiled for
 * AVX-512 where the CPU has it, else for AVX2 (for tests). Not thread-safe: set before the passes
 * run. Returns what runs, in words. */
enum { DN_WINO_AUTO, DN_WINO_YMM, DN_WINO_WIDE };
const char *dn_wino_kernels(int which);

/* 1: the forward and backward data always by passes over many tiles, never 6 tiles at a time
 * through all three passes (where the transformed filters are small enough for it): for tests,
 * which compare the two; 0: the default. Not thread-safe. */
int dn_wino_unfused(int on);

#endif
