/* blkconv.h: the weight gradient of a stride-1 convolution with 3 filter columns on blocked
 * tensors (blkconv.c), and of one with few input channels from a plain input and a blocked output
 * gradient (firstconv.c). */
#ifndef NVCNN_ONEDNN_BLKCONV_H
#define NVCNN_ONEDNN_BLKCONV_H

/* The geometry: input x [n][cin / 8][h][w][8] (firstconv.c: [n][cin][h][w]), output gradient dy
 * [n][cout / 8][oh][ow][8] (oneDNN's nChw8c), stride 1, padding pt (top) and pl (left), no groups, no dilation. */
typedef struct DnBlkConv {
    int n, cin, cout, h, w, oh, ow, kh, kw, pt, pl;
} DnBlkConv;

/* Whether dn_blkconv_dw computes this geometry on this CPU (AVX2 and FMA; 8 | cin, 8 | cout;
 * kw 3; kh 1 to 7). */
int dn_blkconv_dw_ok(const DnBlkConv *g);

/* dw [cout][cin][kh][kw] = the weight gradient, and db [cout] (NULL: none) = the bias gradient:
 * both written, not added. */
void dn_blkconv_dw(const DnBlkConv *g, const float *x, const float *dy, float *dw, float *db);

/* Whether dn_firstconv_dw computes this geometry on this CPU (AVX2 and FMA; cin 1 to 4; 8 | cout;
 * kh, kw 1 to 7; padding pt < kh, pl < kw). */
int dn_firstconv_ok(const DnBlkConv *g);

/* dw [cout][cin][kh][kw] and db [cout] (NULL: none) from the plain input x [n][cin][h][w] and dy
 * [n][cout / 8][oh][ow][8]: both written, not added. */
void dn_firstconv_dw(const DnBlkConv *g, const float *x, const float *dy, float *dw, float *db);

#endif
