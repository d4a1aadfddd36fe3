/* add.c: the weighted sum y = ca a + cb b of two tensors (the residual add) on the oneDNN plan, in
 * the layout its inputs share, with a relu that is the sum's only consumer fused into it (what
 * every ResNet block ends with): forward writes relu(ca a + cb b) into the relu's output node in
 * one pass; backward takes the relu's output gradient, keeps it where the output is positive, and
 * hands ck times that to input k in the same pass, written where input k's gradient starts there
 * and added where another consumer wrote it first (the plan's schedule: dn_acc). So no input
 * gradient of an add is zeroed first, and the relu has no passes of its own. The sums are the
 * reference's (layers/add.c, layers/act.c), element for element. Not planned (the reference add
 * runs, on NCHW copies where needed) when the inputs' layouts differ. In a bf16 plan the tensors are
 * bf16: each element is converted to fp32, summed as above and rounded back (and an added gradient
 * is rounded once, after its addition). */
#ifdef NVCNN_DNNL
#include <stdlib.h>

#include "internal.h"

#define ADD_PAR_MIN 32768

typedef struct DnAdd {
    const float *a, *b;
    float *y;       /* the add's output, or the fused relu's */
    const float *dy; /* the gradient of y */
    float *da, *db; /* NULL: that input has no gradient */
    int acc_a, acc_b, relu;
    int bf16;       /* the tensors hold bf16 (uint16_t) */
    void (*fwd)(const struct DnAdd *), (*bwd)(const struct DnAdd *); /* add_choose's passes */
    float ca, cb;
    long n;
} DnAdd;

static void add_choose(DnAdd *k);

static void *add_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    const AddPriv *p = l->priv;
    const int a = l->in[0], b = l->in[1];
    const Node *out = &net->node[l->out];
    if (!dn_md_eq(&dn->md[a], &dn->md[b]) || !dn_dense(&dn->md[a], out->shape)) return NULL;
    const Md in_md = dn->md[a];
    const Md *node_out = dn_node_layout(dn, l->out, &in_md);
    if (!dn_md_eq(node_out, &in_md)) return NULL;
    DnAdd *k = xcalloc(1, sizeof *k);
    k->a = net->node[a].data;
    k->b = net->node[b].data;
    k->ca = p->ca;
    k->cb = p->cb;
    k->n = (long)shape_count(out->shape);
    k->bf16 = in_md.data_type == dnnl_bf16;
    if (!k->bf16 && !dn_is_f32(&in_md)) {
        free(k);
        return NULL;
    }
    const int relu_li = dn_relu_after(dn, l->out);
    if (relu_li >= 0) {
        const Node *ro = &net->node[net->layer[relu_li].out];
        dn->md[net->layer[relu_li].out] = *node_out;
        k->relu = 1;
        k->y = ro->data;
        k->dy = ro->grad;
        dn_fuse(dn, relu_li);
    } else {
        k->y = out->data;
        k->dy = out->grad;
    }
    k->da = net->node[a].grad;
    k->db = net->node[b].grad;
    k->acc_a = dn_acc(dn, li, 0);
    k->acc_b = dn_acc(dn, li, 1);
    add_choose(k);
    return k;
}

/* the reference's sum (layers/add.c: 1 a + 1 b is a + b exactly) and its relu (layers/act.c),
 * element for element */
static inline float add_value(float a, float b, float ca, float cb, int relu) {
    const float v = ca * a + cb * b;
    return relu ? (v > 0 ? v : 0.0f) : v;
}

/* the gradient that reaches the sum: dy where the relu's output is positive, or dy without one */
static inline float add_grad(float dy, float y, int relu) { return relu ? (y > 0 ? dy : 0.0f) : dy; }

/* The passes, one set per element type (fp32; bf16: each element converted to fp32, summed and
 * rounded back once): y = relu?(ca a + cb b); dx (= or +=) c g, g = add_grad, both inputs in one
 * pass where both are written. bf16's are also built for AVX-512, the CPUs that run bf16 plans
 * (oneDNN 2.6 needs avx512_core): its conversions made them compute-bound with 16-byte vectors
 * (resnet50 batch 8: the adds 32 -> 12 ms a step); fp32's are memory-bound (AVX2 and AVX-512
 * builds measured no faster). The file is built without fused multiply-adds, so that every build
 * rounds alike and as the reference. */
static inline float f32_ld(float v) { return v; }
static inline float f32_st(float v) { return v; }
#define ADD_KERNELS(SUF, T, LD, ST, ATTR)                                                                         \
    ATTR static void add_fwd_##SUF(const DnAdd *k) {                                                             \
        const T *a = (const T *)k->a, *b = (const T *)k->b;                                                      \
        T *y = (T *)k->y;                                                                                        \
        const float ca = k->ca, cb = k->cb;                                                                      \
        const int relu = k->relu;                                                                                \
        _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)")                                \
        for (long i = 0; i < k->n; i++) y[i] = ST(add_value(LD(a[i]), LD(b[i]), ca, cb, relu));                  \
    }                                                                                                            \
    ATTR static void add_bwd_##SUF(const DnAdd *k) {                                                             \
        const T *dy = (const T *)k->dy, *y = (const T *)k->y;                                                    \
        const float ca = k->ca, cb = k->cb;                                                                      \
        const int relu = k->relu;                                                                                \
        T *da = (T *)k->da, *db = (T *)k->db;                                                                    \
        if (da && db && da != db && !k->acc_a && !k->acc_b) { /* a block's two branches */                       \
            _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)")                            \
            for (long i = 0; i < k->n; i++) {                                                                    \
                const float g = add_grad(LD(dy[i]), LD(y[i]), relu);                                             \
                da[i] = ST(ca * g);                                                                              \
                db[i] = ST(cb * g);                                                                              \
            }                                                                                                    \
            return;                                                                                              \
        }                                                                                                        \
        for (int s = 0; s < 2; s++) {                                                                            \
            T *dx = s ? db : da;                                                                                 \
            const float c = s ? cb : ca;                                                                         \
            if (!dx) continue;                                                                                   \
            if (s ? k->acc_b : k->acc_a) { /* (the same node on both sides: acc_b) */                           \
                _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)")                        \
                for (long i = 0; i < k->n; i++) dx[i] = ST(LD(dx[i]) + c * add_grad(LD(dy[i]), LD(y[i]), relu)); \
            } else {                                                                                             \
                _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)")                        \
                for (long i = 0; i < k->n; i++) dx[i] = ST(c * add_grad(LD(dy[i]), LD(y[i]), relu));             \
            }                                                                                                    \
        }                                                                                                        \
    }
ADD_KERNELS(f32, float, f32_ld, f32_st, )
ADD_KERNELS(bf16, uint16_t, dn_bf16_f, dn_f_bf16, )
#if defined(__x86_64__) && defined(__GNUC__)
ADD_KERNELS(bf16_avx512, uint16_t, dn_bf16_f, dn_f_bf16, __attribute__((target("avx512f,avx512bw"))))
#endif

/* the passes for this CPU (within ONEDNN_MAX_CPU_ISA's cap, as nvcnn's other own kernels) */
static void add_choose(DnAdd *k) {
    k->fwd = k->bf16 ? add_fwd_bf16 : add_fwd_f32;
    k->bwd = k->bf16 ? add_bwd_bf16 : add_bwd_f32;
#if defined(__x86_64__) && defined(__GNUC__)
    if (k->bf16 && cpu_avx512f() && __builtin_cpu_supports("avx512bw")) {
        k->fwd = add_fwd_bf16_avx512;
        k->bwd = add_bwd_bf16_avx512;
    }
#endif
}

static void add_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)dn;
    (void)l;
    (void)li;
    const DnAdd *k = st;
    k->fwd(k);
}

static void add_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)dn;
    (void)l;
    (void)li;
    const DnAdd *k = st;
    k->bwd(k);
}

const DnImpl dn_add_impl = {"add", add_plan, add_forward, add_backward, NULL};
#endif
