/* core.c: the plan of the oneDNN CPU layers (see onednn.h and internal.h): layouts per node,
 * plan-owned primitives, memories and buffers, the reference layers' NCHW conversions, and the
 * runner that net_forward / net_backward call for every layer. */
#ifdef NVCNN_DNNL
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void dn_check(dnnl_status_t st, const char *what, const char *file, int line) {
    if (st != dnnl_success) die("%s:%d: %s: oneDNN error: %s", file, line, what, dnnl_status2str(st));
}

/* ---- layouts ---- */
Md dn_md_dims_t(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag, dnnl_data_type_t dt) {
    Md md;
    DN_CHECK(dnnl_memory_desc_init_by_tag(&md, nd, dims, dt, tag));
    return md;
}

Md dn_md_dims(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag) { return dn_md_dims_t(nd, dims, tag, dnnl_f32); }

Md dn_md_t(Shape s, dnnl_format_tag_t tag, dnnl_data_type_t dt) {
    dnnl_dims_t d = {s.n, s.c, s.h, s.w};
    return dn_md_dims_t(4, d, tag, dt);
}

Md dn_md(Shape s, dnnl_format_tag_t tag) { return dn_md_t(s, tag, dnnl_f32); }

size_t dn_dt_size(dnnl_data_type_t dt) { return dt == dnnl_bf16 || dt == dnnl_f16 ? 2 : dt == dnnl_s8 || dt == dnnl_u8 ? 1 : 4; }

int dn_md_eq(const Md *a, const Md *b) { return dnnl_memory_desc_equal(a, b); }
size_t dn_md_bytes(const Md *a) { return dnnl_memory_desc_get_size(a); }

int dn_is_nchw(const Md *md, Shape s) {
    Md p = dn_md(s, dnnl_nchw);
    return dn_md_eq(md, &p);
}

Md dn_md_block_t(Shape s, int b, dnnl_data_type_t dt) {
    return dn_md_t(s, b == 16 ? dnnl_nChw16c : b == 8 ? dnnl_nChw8c : dnnl_nchw, dt);
}

Md dn_md_block(Shape s, int b) { return dn_md_block_t(s, b, dnnl_f32); }

int dn_block(const Md *md, Shape s) {
    static const int blocks[3] = {1, 8, 16};
    for (int i = 0; i < 3; i++) {
        Md m = dn_md_block_t(s, blocks[i], md->data_type);
        if (dn_md_eq(md, &m)) return blocks[i];
    }
    return 0;
}

int dn_dense(const Md *md, Shape s) { return dn_md_bytes(md) == shape_count(s) * dn_dt_size(md->data_type); }

const Md *dn_node_layout(Dn *dn, int v, const Md *md) {
    Shape s = dn->net->node[v].shape;
    dn->md[v] = (s.h * s.w > 1 && dn_dense(md, s) && dn_block(md, s) > 0) ? *md : dn_md(s, dnnl_nchw);
    return &dn->md[v];
}

const Md *dn_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* ---- plan-owned objects ---- */
#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? 2 * (cap) : 64;                                                        \
            (arr) = xrealloc((arr), (size_t)(cap) * sizeof *(arr));                                \
        }                                                                                          \
    } while (0)

dnnl_primitive_desc_t dn_pd(Dn *dn, const void *op_desc, const_dnnl_primitive_desc_t hint) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, op_desc, dn->attr, dn->eng, hint);
    if (st == dnnl_unimplemented) return NULL;
    DN_CHECK(st);
    return pd;
}

int dn_pd_is_ref(const_dnnl_primitive_desc_t pd) {
    const char *s = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return 0;
    return strncmp(s, "ref", 3) == 0 || strstr(s, "_ref") != NULL;
}

dnnl_primitive_desc_t dn_pd_relu(Dn *dn, const void *op_desc) {
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    DN_CHECK(dnnl_primitive_attr_create(&attr));
    DN_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    DN_CHECK(dnnl_post_ops_create(&po));
    DN_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    DN_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    DN_CHECK(dnnl_post_ops_destroy(po));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, op_desc, attr, dn->eng, NULL);
    DN_CHECK(dnnl_primitive_attr_destroy(attr));
    if (st == dnnl_unimplemented) return NULL;
    DN_CHECK(st);
    return pd;
}

static void scratch_of(Dn *dn, const_dnnl_primitive_desc_t pd, DnPrim *p) {
    const Md *smd = dn_query(pd, dnnl_query_scratchpad_md);
    size_t bytes = smd ? dn_md_bytes(smd) : 0;
    p->scratch = NULL;
    if (!bytes) return;
    DN_CHECK(dnnl_memory_create(&p->scratch, smd, dn->eng, DNNL_MEMORY_NONE));
    GROW(dn->scr, dn->nscr, dn->cap_scr);
    dn->scr[dn->nscr++] = p->scratch;
    if (bytes > dn->scratch_bytes) dn->scratch_bytes = bytes;
}

DnPrim dn_prim(Dn *dn, dnnl_primitive_desc_t pd) {
    DnPrim p;
    DN_CHECK(dnnl_primitive_create(&p.p, pd));
    dn->nref += dn_pd_is_ref(pd);
    GROW(dn->prims, dn->nprims, dn->cap_prims);
    dn->prims[dn->nprims++] = p.p;
    scratch_of(dn, pd, &p);
    DN_CHECK(dnnl_primitive_desc_destroy(pd));
    return p;
}

dnnl_memory_t dn_mem(Dn *dn, const Md *md, void *ptr) {
    dnnl_memory_t m;
    DN_CHECK(dnnl_memory_create(&m, md, dn->eng, ptr ? ptr : DNNL_MEMORY_NONE));
    GROW(dn->mems, dn->nmems, dn->cap_mems);
    dn->mems[dn->nmems++] = m;
    return m;
}

float *dn_buf(Dn *dn, size_t bytes) {
    float *b = xmalloc_aligned(bytes ? bytes : 64);
    memset(b, 0, bytes);
    GROW(dn->bufs, dn->nbufs, dn->cap_bufs);
    dn->bufs[dn->nbufs++] = b;
    return b;
}

DnReorder *dn_reorder(Dn *dn, const Md *from, void *src, const Md *to, void *dst, int add) {
    dnnl_primitive_attr_t attr;
    DN_CHECK(dnnl_primitive_attr_create(&attr));
    DN_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (add) {
        dnnl_post_ops_t po;
        DN_CHECK(dnnl_post_ops_create(&po));
        DN_CHECK(dnnl_post_ops_append_sum(po, 1.0f));
        DN_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        DN_CHECK(dnnl_post_ops_destroy(po));
    }
    dnnl_primitive_desc_t pd;
    DN_CHECK(dnnl_reorder_primitive_desc_create(&pd, from, dn->eng, to, dn->eng, attr));
    DN_CHECK(dnnl_primitive_attr_destroy(attr));
    DnReorder *r = (DnReorder *)dn_buf(dn, sizeof *r);
    r->prim = dn_prim(dn, pd);
    r->src = dn_mem(dn, from, src);
    r->dst = dn_mem(dn, to, dst);
    return r;
}

void dn_exec(Dn *dn, DnPrim *p, int nargs, const dnnl_exec_arg_t *args) {
    dnnl_exec_arg_t a[16];
    if (nargs > 15) die("dn_exec: %d arguments", nargs);
    memcpy(a, args, (size_t)nargs * sizeof *a);
    if (p->scratch) a[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    DN_CHECK(dnnl_primitive_execute(p->p, dn->strm, nargs, a));
}

void dn_reorder_run(Dn *dn, DnReorder *r) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, r->src}, {DNNL_ARG_TO, r->dst}};
    dn_exec(dn, &r->prim, 2, a);
}

DnIn dn_in(Dn *dn, const Md *want, const Md *have, void *user) {
    DnIn in = {NULL, NULL, NULL};
    if (dn_md_eq(want, have)) {
        in.mem = dn_mem(dn, have, user);
        return in;
    }
    in.buf = dn_buf(dn, dn_md_bytes(want));
    in.mem = dn_mem(dn, want, in.buf);
    in.conv = dn_reorder(dn, have, user, want, in.buf, 0);
    return in;
}

void dn_in_run(Dn *dn, DnIn *in) {
    if (in->conv) dn_reorder_run(dn, in->conv);
}

DnOut dn_out(Dn *dn, const Md *prim, const Md *have, void *user, int add) {
    DnOut o = {NULL, NULL, NULL, NULL, 0};
    int same = dn_md_eq(prim, have);
    if (same && !add) {
        o.mem = dn_mem(dn, have, user);
        return o;
    }
    float *tmp = dn_buf(dn, dn_md_bytes(prim));
    o.mem = dn_mem(dn, prim, tmp);
    if (same && dn_is_f32(prim)) {
        o.tmp = tmp;
        o.user = user;
        o.n = dn_md_bytes(prim) / sizeof(float);
    } else {
        o.conv = dn_reorder(dn, prim, tmp, have, user, add);
    }
    return o;
}

void dn_out_run(Dn *dn, DnOut *o) {
    if (o->conv) dn_reorder_run(dn, o->conv);
    if (o->tmp) dn_add(o->user, o->tmp, o->n);
}

void dn_add(float *y, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- fused relu ---- */
int dn_relu_after(const Dn *dn, int v) {
    const Net *net = dn->net;
    if (v == net->input || dn->ncons[v] != 1) return -1;
    const Layer *r = &net->layer[dn->cons[v]];
    if (!act_is(r) || ((const ActPriv *)r->priv)->act != ACT_RELU) return -1;
    return dn->cons[v];
}

void dn_fuse(Dn *dn, int relu_li) {
    dn->noop[relu_li] = 1;
    dn->nlayers++;
}

/* ---- reference layers: inputs converted to NCHW ---- */
typedef struct RefConv {
    int n;           /* distinct inputs that need a conversion */
    int node[8];
    float *data[8], *grad[8]; /* NCHW copies */
    DnReorder *to[8], *back[8];
} RefConv;

/* Layer types whose reference code works on any layout, element by element, as long as all
 * inputs share it and nothing is padded; concat also when every input fills whole blocks. */
static int layout_free(const Layer *l) {
    const char *t = l->ops->type;
    return act_is(l) || !strcmp(t, "add") || !strcmp(t, "dropout") || !strcmp(t, "concat");
}

static void plan_reference(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    Shape so = net->node[l->out].shape;
    if (layout_free(l)) {
        int b = -1, ok = 1;
        for (int k = 0; k < l->nin && ok; k++) {
            const Node *nd = &net->node[l->in[k]];
            int bk = dn_block(&dn->md[l->in[k]], nd->shape);
            if (bk == 0 || (b >= 0 && bk != b) || !dn_dense(&dn->md[l->in[k]], nd->shape) || !dn_is_f32(&dn->md[l->in[k]])) ok = 0;
            b = bk;
        }
        if (ok && b > 1 && so.h * so.w > 1) {
            dn->md[l->out] = dn_md_block(so, b);
            return;
        }
    }
    dn->md[l->out] = dn_md(so, dnnl_nchw);
    RefConv *rc = NULL;
    for (int k = 0; k < l->nin; k++) {
        int v = l->in[k];
        Node *nd = &net->node[v];
        if (dn_is_nchw(&dn->md[v], nd->shape)) continue;
        if (!rc) rc = xcalloc(1, sizeof *rc);
        int seen = 0;
        for (int j = 0; j < rc->n; j++) seen |= rc->node[j] == v;
        if (seen) continue;
        if (rc->n == 8) die("oneDNN plan: layer %s has more than 8 inputs to convert", l->name);
        Md plain = dn_md(nd->shape, dnnl_nchw);
        size_t bytes = shape_count(nd->shape) * sizeof(float);
        int j = rc->n++;
        rc->node[j] = v;
        rc->data[j] = dn_buf(dn, bytes);
        rc->to[j] = dn_reorder(dn, &dn->md[v], nd->data, &plain, rc->data[j], 0);
        if (nd->grad) {
            rc->grad[j] = dn_buf(dn, bytes);
            rc->back[j] = dn_reorder(dn, &plain, rc->grad[j], &dn->md[v], nd->grad, 1);
        }
    }
    dn->st[li] = rc;
}

/* swaps the converted inputs' buffers into the nodes (and back: the same call again) */
static void swap_in(Net *net, RefConv *rc, int grads) {
    for (int j = 0; j < rc->n; j++) {
        Node *nd = &net->node[rc->node[j]];
        float *t = nd->data;
        nd->data = rc->data[j];
        rc->data[j] = t;
        if (grads && rc->grad[j]) {
            t = nd->grad;
            nd->grad = rc->grad[j];
            rc->grad[j] = t;
        }
    }
}

static void run_forward(Net *net, int li, void *ctx) {
    Dn *dn = ctx;
    Layer *l = &net->layer[li];
    if (dn->noop[li]) return;
    if (dn->impl[li]) {
        dn->impl[li]->forward(dn, l, li, dn->st[li]);
        return;
    }
    RefConv *rc = dn->st[li];
    if (!rc) {
        l->ops->forward(l, net);
        return;
    }
    for (int j = 0; j < rc->n; j++) dn_reorder_run(dn, rc->to[j]);
    swap_in(net, rc, 0);
    l->ops->forward(l, net);
    swap_in(net, rc, 0);
}

static void run_backward(Net *net, int li, void *ctx) {
    Dn *dn = ctx;
    Layer *l = &net->layer[li];
    if (dn->noop[li]) return;
    if (dn->impl[li]) {
        dn->impl[li]->backward(dn, l, li, dn->st[li]);
        return;
    }
    RefConv *rc = dn->st[li];
    if (!rc) {
        l->ops->backward(l, net);
        return;
    }
    for (int j = 0; j < rc->n; j++)
        if (rc->grad[j]) memset(rc->grad[j], 0, shape_count(net->node[rc->node[j]].shape) * sizeof(float));
    swap_in(net, rc, 1);
    l->ops->backward(l, net);
    swap_in(net, rc, 1);
    for (int j = 0; j < rc->n; j++)
        if (rc->back[j]) dn_reorder_run(dn, rc->back[j]);
}

/* Only the gradients whose first writer adds: a reference layer (or one that nothing consumes);
 * the oneDNN layers overwrite where they write first. */
static void run_zero_grads(Net *net, void *ctx) {
    Dn *dn = ctx;
    for (int v = 0; v < net->nnode; v++)
        if (dn->zero[v] && net->node[v].grad) memset(net->node[v].grad, 0, shape_count(net->node[v].shape) * sizeof(float));
}

static void dn_destroy(void *ctx) {
    Dn *dn = ctx;
    for (int i = 0; i < dn->net->nlayer; i++) {
        if (dn->impl[i] && dn->impl[i]->destroy)
            dn->impl[i]->destroy(dn->st[i]);
        else
            free(dn->st[i]);
    }
    for (int i = 0; i < dn->nprims; i++) dnnl_primitive_destroy(dn->prims[i]);
    for (int i = 0; i < dn->nmems; i++) dnnl_memory_destroy(dn->mems[i]);
    for (int i = 0; i < dn->nscr; i++) dnnl_memory_destroy(dn->scr[i]);
    for (int i = 0; i < dn->nbufs; i++) free(dn->bufs[i]);
    free(dn->prims);
    free(dn->mems);
    free(dn->scr);
    free(dn->bufs);
    free(dn->scratch);
    free(dn->md);
    free(dn->impl);
    free(dn->st);
    free(dn->acc);
    free(dn->slot0);
    free(dn->ncons);
    free(dn->cons);
    free(dn->noop);
    free(dn->writes);
    free(dn->zero);
    dnnl_primitive_attr_destroy(dn->attr);
    dnnl_stream_destroy(dn->strm);
    dnnl_engine_destroy(dn->eng);
    free(dn);
}

static const DnImpl *impl_of(const char *type) {
    static const DnImpl *const all[] = {&dn_conv_impl, &dn_bn_impl,      &dn_maxpool_impl, &dn_avgpool_impl, &dn_avg_impl,
                                        &dn_fc_impl,   &dn_flatten_impl, &dn_add_impl,     &dn_concat_impl};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->type, type) == 0) return all[i];
    return NULL;
}

/* ---- onednn.h ---- */
/* NVCNN_ONEDNN_WGRAD=onednn: every weight gradient by oneDNN's primitives; NVCNN_ONEDNN_WINOGRAD=off:
 * no Winograd; NVCNN_ONEDNN_BLOCK=16: nChw16c on any CPU; NVCNN_ONEDNN_BN_STATS=onednn: oneDNN's
 * batch-norm statistics; NVCNN_WINO_FUSED=off: Winograd's passes one by one; NVCNN_WINO_AVX512=off:
 * AVX2's Winograd kernels on AVX-512 (each to compare) */
int dn_env(int which) {
    static const char *const onoff[] = {"on", "off"}, *const own[] = {"onednn", "own"}, *const block[] = {"16", "auto"};
    static const struct {
        const char *name;
        const char *const *choices;
    } env[DN_NENV] = {{"NVCNN_ONEDNN_WGRAD", own},  {"NVCNN_ONEDNN_WINOGRAD", onoff}, {"NVCNN_ONEDNN_BLOCK", block},
                      {"NVCNN_ONEDNN_BN_STATS", own}, {"NVCNN_WINO_FUSED", onoff},    {"NVCNN_WINO_AVX512", onoff}};
    return util_env_choice(env[which].name, env[which].choices, 2);
}

int onednn_version(void) { return (int)(dnnl_version()->major * 100 + dnnl_version()->minor); }

void onednn_check_env(void) {
    for (int k = 0; k < DN_NENV; k++) dn_env(k);
}

int onednn_built(void) { return 1; }

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "no JIT";
    }
}

int onednn_bf16_capable(char *isa, size_t n) {
    dnnl_cpu_isa_t got = dnnl_get_effective_cpu_isa();
    snprintf(isa, n, "%s", isa_name(got));
    /* the ISA values are bit sets: a later one holds every bit of the earlier ones it extends */
    int capable = ((unsigned)got & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core;
#if DNNL_VERSION_MAJOR >= 3
    capable |= ((unsigned)got & (unsigned)dnnl_cpu_isa_avx2_vnni_2) == (unsigned)dnnl_cpu_isa_avx2_vnni_2;
#endif
    return capable;
}

void onednn_describe(char *buf, size_t n) {
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, n, "oneDNN %d.%d.%d, %s", v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()));
}

static int plan(Net *net, int bf16, char *err, size_t errlen) {
    if (bf16) {
        char isa[64];
        if (!onednn_bf16_capable(isa, sizeof isa)) {
            snprintf(err, errlen, "bf16 needs avx512_core or later and this CPU gives oneDNN %s", isa);
            return -1;
        }
    }
    if (!net->finalized) die("onednn_plan before net_finalize");
    if (net->runner) die("onednn_plan: the net already has a runner");
    for (int v = 0; v < net->nnode; v++)
        if (!net->node[v].data) die("onednn_plan: node %d has no host data (a device net?)", v);
    Dn *dn = xcalloc(1, sizeof *dn);
    dn->net = net;
    /* NVCNN_ONEDNN_WGRAD=onednn: every weight gradient by oneDNN's primitives (to compare) */
    dn->blk_dw = dn_env(DN_ENV_WGRAD) != 0;
    /* NVCNN_ONEDNN_WINOGRAD=off: every 3x3 and 5x5 convolution by oneDNN's direct kernels (to compare) */
    dn->wino = dn_env(DN_ENV_WINOGRAD) != 1;
    /* NVCNN_ONEDNN_BLOCK=16: the convolutions' activations in nChw16c, oneDNN's layout on AVX-512,
     * on any CPU (on others its primitives for that layout are slow reference ones: for tests);
     * auto: the CPU's */
    dn->force16 = dn_env(DN_ENV_BLOCK) == 0;
    /* bf16: oneDNN's primitives throughout (the own kernels are fp32 only) */
    dn->dt = bf16 ? dnnl_bf16 : dnnl_f32;
    if (bf16) dn->blk_dw = dn->wino = 0;
    DN_CHECK(dnnl_engine_create(&dn->eng, dnnl_cpu, 0));
    DN_CHECK(dnnl_stream_create(&dn->strm, dn->eng, dnnl_stream_default_flags));
    DN_CHECK(dnnl_primitive_attr_create(&dn->attr));
    DN_CHECK(dnnl_primitive_attr_set_scratchpad_mode(dn->attr, dnnl_scratchpad_mode_user));
    dn->md = xcalloc((size_t)net->nnode, sizeof *dn->md);
    dn->impl = xcalloc((size_t)net->nlayer, sizeof *dn->impl);
    dn->st = xcalloc((size_t)net->nlayer, sizeof *dn->st);
    int nslots = net_input_slots(net);
    dn->acc = xcalloc((size_t)(nslots > 0 ? nslots : 1), 1);
    dn->slot0 = xcalloc((size_t)net->nlayer, sizeof *dn->slot0);
    int *first = xmalloc((size_t)net->nnode * sizeof *first), *last = xmalloc((size_t)net->nnode * sizeof *last);
    char *zero = xmalloc((size_t)net->nnode);
    net_grad_schedule(net, first, last, zero, dn->acc);
    free(first);
    free(last);
    free(zero);
    for (int i = 0; i < net->nlayer; i++) dn->slot0[i] = net_input_slot(net, i);
    dn->ncons = xcalloc((size_t)net->nnode, sizeof *dn->ncons);
    dn->cons = xcalloc((size_t)net->nnode, sizeof *dn->cons);
    dn->noop = xcalloc((size_t)net->nlayer, 1);
    dn->zero = xcalloc((size_t)net->nnode, 1);
    for (int i = 0; i < net->nlayer; i++)
        for (int k = 0; k < net->layer[i].nin; k++) {
            dn->ncons[net->layer[i].in[k]]++;
            dn->cons[net->layer[i].in[k]] = i;
        }
    dn->md[net->input] = dn_md(net->node[net->input].shape, dnnl_nchw);
    for (int i = 0; i < net->nlayer; i++) {
        Layer *l = &net->layer[i];
        if (dn->noop[i]) continue; /* fused into the layer before: that one set its output's layout */
        const DnImpl *im = impl_of(l->ops->type);
        void *st = im ? im->plan(dn, l, i) : NULL;
        if (st) {
            dn->impl[i] = im;
            dn->st[i] = st;
            dn->nlayers++;
        } else {
            plan_reference(dn, l, i);
        }
    }
    /* which gradients must start at zero: those whose first writer adds into them */
    for (int v = 0; v < net->nnode; v++) dn->zero[v] = dn->ncons[v] == 0;
    for (int i = 0; i < net->nlayer; i++)
        for (int k = 0; k < net->layer[i].nin; k++) {
            int v = net->layer[i].in[k];
            if (!dn_acc(dn, i, k) && !dn->impl[i] && !dn->noop[i]) dn->zero[v] = 1;
        }
    for (int v = 0; v < net->nnode; v++)
        if (dn->ncons[v] == 1 && dn->noop[dn->cons[v]]) dn->zero[v] = 0;
    if (dn->scratch_bytes) {
        dn->scratch = xmalloc_aligned(dn->scratch_bytes);
        for (int i = 0; i < dn->nscr; i++) DN_CHECK(dnnl_memory_set_data_handle(dn->scr[i], dn->scratch));
    }
    /* every oneDNN half writes its parameters' gradients (conv.c, bn.c, fc.c); the reference
     * layers add into them */
    dn->writes = xcalloc((size_t)net->nlayer, 1);
    for (int i = 0; i < net->nlayer; i++) dn->writes[i] = dn->impl[i] != NULL;
    NetRunner *r = xcalloc(1, sizeof *r);
    r->writes_param_grads = dn->writes;
    r->forward = run_forward;
    r->backward = run_backward;
    r->zero_grads = run_zero_grads;
    r->destroy = dn_destroy;
    r->ctx = dn;
    net->runner = r;
    return 0;
}

int onednn_plan(Net *net, char *err, size_t errlen) { return plan(net, 0, err, errlen); }
int onednn_plan_bf16(Net *net, char *err, size_t errlen) { return plan(net, 1, err, errlen); }

static Dn *dn_of(const Net *net) {
    return net->runner && net->runner->forward == run_forward ? (Dn *)net->runner->ctx : NULL;
}

int onednn_is_bf16(const Net *net) {
    Dn *dn = dn_of(net);
    return dn && dn->dt == dnnl_bf16;
}

int onednn_layers(const Net *net) {
    Dn *dn = dn_of(net);
    return dn ? dn->nlayers : 0;
}

int onednn_blkconv_layers(const Net *net) {
    Dn *dn = dn_of(net);
    return dn ? dn->nblk_dw : 0;
}

int onednn_ref_primitives(const Net *net) {
    Dn *dn = dn_of(net);
    return dn ? dn->nref : 0;
}

int onednn_winograd_layers(const Net *net) {
    Dn *dn = dn_of(net);
    return dn ? dn->nwino : 0;
}

void onednn_node_nchw(const Net *net, int id, int grad, float *out) {
    const Node *nd = &net->node[id];
    float *src = grad ? nd->grad : nd->data;
    Dn *dn = dn_of(net);
    if (!dn || dn_is_nchw(&dn->md[id], nd->shape)) {
        memcpy(out, src, shape_count(nd->shape) * sizeof(float));
        return;
    }
    Md plain = dn_md(nd->shape, dnnl_nchw);
    dnnl_primitive_desc_t pd;
    DN_CHECK(dnnl_reorder_primitive_desc_create(&pd, &dn->md[id], dn->eng, &plain, dn->eng, NULL));
    dnnl_primitive_t p;
    DN_CHECK(dnnl_primitive_create(&p, pd));
    DN_CHECK(dnnl_primitive_desc_destroy(pd));
    dnnl_memory_t a, b;
    DN_CHECK(dnnl_memory_create(&a, &dn->md[id], dn->eng, src));
    DN_CHECK(dnnl_memory_create(&b, &plain, dn->eng, out));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    DN_CHECK(dnnl_primitive_execute(p, dn->strm, 2, args));
    dnnl_memory_destroy(a);
    dnnl_memory_destroy(b);
    dnnl_primitive_destroy(p);
}
#endif
