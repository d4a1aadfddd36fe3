/* internal.h: what the oneDNN halves of the layers share with the plan (core.c).
 *
 * The plan (Dn) walks the layers in order. A layer type with a oneDNN half (DnImpl) plans its
 * primitives for the layouts its inputs already have (dn->md[node]) and sets its output node's
 * layout; any other layer runs its reference code, on inputs converted to NCHW where needed.
 * Every layout conversion is a oneDNN reorder planned here. Primitives use one scratchpad owned
 * by the plan (user scratchpad mode), allocated once after every primitive is known.
 */
#ifndef NVCNN_ONEDNN_INTERNAL_H
#define NVCNN_ONEDNN_INTERNAL_H

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "layers/layers.h"
#include "layers/priv.h"
#include "net.h"
#include "onednn.h"
#include "util.h"

#if DNNL_VERSION_MAJOR != 2
#error "src/onednn/ is written for the oneDNN 2.x C API (build with DNNL=0 for the reference layers only)"
#endif

typedef dnnl_memory_desc_t Md;

/* Every oneDNN call goes through this: on failure, one line naming the call, file, line and
 * oneDNN's status, and exit 1. */
#define DN_CHECK(call) dn_check((call), #call, __FILE__, __LINE__)
void dn_check(dnnl_status_t st, const char *what, const char *file, int line);

typedef struct Dn Dn;

/* One primitive with the scratchpad memory it is executed with (NULL: it needs none). */
typedef struct DnPrim {
    dnnl_primitive_t p;
    dnnl_memory_t scratch;
} DnPrim;

/* A layout conversion from one buffer to another; add: the destination accumulates (+=). */
typedef struct DnReorder {
    DnPrim prim;
    dnnl_memory_t src, dst;
} DnReorder;

/* An operand a primitive reads: the caller's buffer in the caller's layout, or a converted copy
 * in the layout the primitive wants. dn_in_run() refreshes the copy. */
typedef struct DnIn {
    dnnl_memory_t mem;  /* what the primitive is given */
    DnReorder *conv;    /* NULL: mem is the caller's buffer */
    float *buf;         /* the copy (NULL without one) */
} DnIn;

/* An operand a primitive writes: the caller's buffer when the layouts agree and nothing is added
 * to it, else a temporary that dn_out_run() converts into the caller's buffer (adding to it when
 * asked: by a loop in fp32, by a reorder with a sum in other element types). */
typedef struct DnOut {
    dnnl_memory_t mem;  /* what the primitive is given */
    DnReorder *conv;    /* temporary -> caller, layouts differ */
    float *tmp, *user;  /* same fp32 layouts, adding: user += tmp over n floats */
    size_t n;
} DnOut;

/* The oneDNN half of one layer type. plan() returns the layer's state, or NULL when oneDNN cannot
 * run this layer (it then keeps its reference code); it sets dn->md[l->out]. */
typedef struct DnImpl {
    const char *type;
    void *(*plan)(Dn *dn, Layer *l, int li);
    void (*forward)(Dn *dn, Layer *l, int li, void *st);
    void (*backward)(Dn *dn, Layer *l, int li, void *st);
    void (*destroy)(void *st); /* frees what st holds besides plan-owned objects; NULL: free(st) */
} DnImpl;

struct Dn {
    Net *net;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_attr_t attr;     /* user scratchpad; for every primitive but adding reorders */
    Md *md;                         /* [nnode] layout of each node's data and gradient */
    const DnImpl **impl;            /* [nlayer] NULL: reference code */
    void **st;                      /* [nlayer] impl state, or the reference layer's conversions */
    char *acc;                      /* backward: 1 where layer li adds into its input k's gradient */
    int *slot0;                     /* [nlayer] layer li's first entry of acc */
    int *ncons, *cons;              /* [nnode] number of consumers, the last one */
    char *noop;                     /* [nlayer] 1: a relu that the layer before it does (fused) */
    char *zero;                     /* [nnode] 1: zero the gradient before backward */
    char *writes;                   /* [nlayer] 1: backward writes the layer's parameter gradients */
    int nlayers;                    /* layers on oneDNN */
    int blk_dw;                     /* 1: convolutions' weight gradients by blkconv.c, firstconv.c where they can */
    int nblk_dw;                    /* convolutions whose weight gradient blkconv.c or firstconv.c computes */
    int wino;                       /* 1: 3x3 convolutions' forward and backward data by wino.c where it can */
    int nwino;                      /* convolutions that wino.c computes */
    int nref;                       /* primitives that are oneDNN's reference kernels */
    int force16;                    /* 1: convolutions' activations in nChw16c (NVCNN_ONEDNN_BLOCK=16, tests) */
    dnnl_data_type_t dt;            /* the activations' and their gradients' element type on oneDNN's layers:
                                     * dnnl_f32, or dnnl_bf16 (--precision=bf16; own kernels are fp32 only) */
    /* what the plan owns, released by dn_destroy */
    dnnl_primitive_t *prims;
    int nprims, cap_prims;
    dnnl_memory_t *mems;
    int nmems, cap_mems;
    dnnl_memory_t *scr;             /* scratchpad memories, bound once the pad is allocated */
    int nscr, cap_scr;
    void **bufs;
    int nbufs, cap_bufs;
    size_t scratch_bytes;
    void *scratch;
};

static inline int dn_acc(const Dn *dn, int li, int k) { return dn->acc[dn->slot0[li] + k]; }

/* The relu layer that may be fused into the producer of node v: v's only consumer, an ACT_RELU
 * layer; -1 when there is none. dn_fuse marks it as done by its producer: the producer writes
 * the relu's output node and reads its gradient, the relu layer does nothing, and the gradient of
 * v is the producer's own business (it is never zeroed by the plan). */
int dn_relu_after(const Dn *dn, int v);
void dn_fuse(Dn *dn, int relu_li);

/* ---- layouts ---- */
/* The 4-D descriptor [n][c][h][w] of shape s in layout tag (dnnl_nchw, dnnl_nChw16c, ...), fp32. */
Md dn_md(Shape s, dnnl_format_tag_t tag);
/* A descriptor of the given dims in layout tag, fp32. */
Md dn_md_dims(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag);
/* The same of element type dt. */
Md dn_md_t(Shape s, dnnl_format_tag_t tag, dnnl_data_type_t dt);
Md dn_md_dims_t(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag, dnnl_data_type_t dt);
/* Bytes of one element of type dt (f32 4, bf16 2). */
size_t dn_dt_size(dnnl_data_type_t dt);
static inline int dn_is_f32(const Md *md) { return md->data_type == dnnl_f32; }
int dn_md_eq(const Md *a, const Md *b);
size_t dn_md_bytes(const Md *a);
/* 1 when md, of shape s, is plain fp32 NCHW (what the reference layers read) */
int dn_is_nchw(const Md *md, Shape s);
/* The channel block of md (shape s) when it is nChw8c or nChw16c, 1 when NCHW, 0 otherwise
 * (whatever its element type). */
int dn_block(const Md *md, Shape s);
/* The layout of block b (1: NCHW) for shape s, fp32 or of element type dt. */
Md dn_md_block(Shape s, int b);
Md dn_md_block_t(Shape s, int b, dnnl_data_type_t dt);
/* 1 when md holds exactly shape_count(s) elements (no padded channels). */
int dn_dense(const Md *md, Shape s);
/* Gives node v the layout md when a node may hold it (4-D with h*w > 1, no padded channels), else
 * fp32 NCHW; returns the node's layout. A node's buffers hold shape_count floats, so a bf16 layout
 * uses the first half of them. */
const Md *dn_node_layout(Dn *dn, int v, const Md *md);
/* A primitive descriptor's memory descriptor (dnnl_query_src_md, ...). */
const Md *dn_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what);

/* ---- plan-owned objects ---- */
/* A primitive of pd (pd is destroyed). Its scratchpad comes from the plan's. */
DnPrim dn_prim(Dn *dn, dnnl_primitive_desc_t pd);
/* A primitive descriptor of op_desc with the plan's attributes (hint: the forward's, or NULL).
 * Returns NULL when oneDNN has no implementation for it; dies on other errors. */
dnnl_primitive_desc_t dn_pd(Dn *dn, const void *op_desc, const_dnnl_primitive_desc_t hint);
/* 1 if pd is one of oneDNN's reference implementations (its name "ref..." or "..._ref...") */
int dn_pd_is_ref(const_dnnl_primitive_desc_t pd);
/* The same with a relu after the operation (an eltwise post-op). */
dnnl_primitive_desc_t dn_pd_relu(Dn *dn, const void *op_desc);
dnnl_memory_t dn_mem(Dn *dn, const Md *md, void *ptr);
/* A 64-byte aligned buffer of `bytes`, zeroed, freed with the plan. */
float *dn_buf(Dn *dn, size_t bytes);
/* A conversion from src (layout from) into dst (layout to); add: dst += converted src. */
DnReorder *dn_reorder(Dn *dn, const Md *from, void *src, const Md *to, void *dst, int add);
void dn_reorder_run(Dn *dn, DnReorder *r);
DnIn dn_in(Dn *dn, const Md *want, const Md *have, void *user);
void dn_in_run(Dn *dn, DnIn *in);
/* The primitive writes layout `prim`; the caller's buffer has layout `have`; add: accumulate. */
DnOut dn_out(Dn *dn, const Md *prim, const Md *have, void *user, int add);
void dn_out_run(Dn *dn, DnOut *o);

/* bf16 <-> fp32: the upper half of the fp32 bits; rounded to nearest even (a NaN stays a NaN) */
static inline float dn_bf16_f(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}
static inline uint16_t dn_f_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* Executes p with the arguments (the scratchpad is added). */
void dn_exec(Dn *dn, DnPrim *p, int nargs, const dnnl_exec_arg_t *args);
/* y[i] += x[i] (OpenMP) */
void dn_add(float *y, const float *x, size_t n);

/* ---- the oneDNN halves (one file per layer type) ---- */
extern const DnImpl dn_conv_impl;    /* conv.c */
extern const DnImpl dn_bn_impl;      /* bn.c */
extern const DnImpl dn_maxpool_impl; /* pool.c */
extern const DnImpl dn_avgpool_impl;
extern const DnImpl dn_avg_impl;     /* pool.c: the spatial average */
extern const DnImpl dn_fc_impl;      /* fc.c */
extern const DnImpl dn_flatten_impl; /* reshape.c */
extern const DnImpl dn_add_impl;     /* add.c */
extern const DnImpl dn_concat_impl;  /* concat.c: bf16 plans only */

/* Groups of a convolution: the weights are oneDNN's goihw, which is the reference layer's
 * [cout][cin / groups][kh][kw] in memory. */
static inline int dn_conv_groups(const Conv *c) { return c->groups; }

/* The comparison switches of the environment, each its value's index (-1 unset); a value that
 * is none of the choices is exit 2 naming it (util_env_choice) */
enum { DN_ENV_WGRAD, DN_ENV_WINOGRAD, DN_ENV_BLOCK, DN_ENV_BN_STATS, DN_ENV_WINO_FUSED, DN_ENV_WINO_AVX512, DN_NENV };
int dn_env(int which);

#endif
