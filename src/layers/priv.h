/* priv.h: the private state of each layer type (l->priv), shared by the CPU reference half in
 * src/layers/X.c and the GPU half in src/cuda/X.cu. Host scratch pointers belong to the CPU half. */
#ifndef NVCNN_LAYERS_PRIV_H
#define NVCNN_LAYERS_PRIV_H

#include <stdint.h>

#include "../net.h"

/* conv.c */
typedef struct Conv {
    int cin, h, w;       /* input */
    int cout, oh, ow;    /* output */
    int kh, kw, sh, sw;
    int groups;          /* channel groups: output channel o reads input channels of group o / (cout/groups) */
    Padding pad;         /* the padding mode (pt, pl follow from it) */
    int pt, pl;          /* padding before (top, left) */
    int pw, pb;          /* param indices: weights, biases (-1: none) */
    int chunk;           /* samples per chunk */
    float *col;          /* [K][chunk*oh*ow] */
    float *tmp;          /* [cout][chunk*oh*ow] */
} Conv;

/* add.c */
typedef struct AddPriv {
    float ca, cb; /* y = ca * a + cb * b */
} AddPriv;

/* bn.c */
typedef struct Bn {
    int c;
    size_t hw;
    float *mean;   /* [c] mean used by the last forward */
    float *invstd; /* [c] 1 / sqrt(var + eps) used by the last forward */
    int training;  /* mode of the last forward */
} Bn;

/* pool.c */
typedef struct Pool {
    PoolKind kind;
    int c, h, w, oh, ow;
    int kh, kw, sh, sw, pt, pl;
    Padding pad;
    int32_t *argmax; /* max: [n][c][oh][ow] index into the input plane */
} Pool;

/* fc.c */
typedef struct Fc {
    int nin, nout, bias;
} Fc;

/* dropout.c */
typedef struct Dropout {
    float keep;
    uint8_t *mask;  /* [count] 1: kept, from the last training forward */
    int training;   /* mode of the last forward */
} Dropout;

/* act.c */
typedef struct ActPriv {
    Act act;
    float alpha; /* LRELU slope */
} ActPriv;

/* softmax_xent.c */
typedef struct Xent {
    int classes;
    float *prob;    /* [n][classes] softmax of the last forward */
    int32_t *label; /* [n] labels of the last forward */
    double *e;      /* [n][classes] exp(z - max z) of the last forward, in double */
    double *li;     /* [n] each sample's loss, added in order afterwards */
} Xent;

#endif
