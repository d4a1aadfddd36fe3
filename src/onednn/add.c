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
    int avx512;     /* bf16: the AVX-512 build of the loops */
    float ca, cb;
    long n;
} DnAdd;

static int add_avx512(void);

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
    k->avx512 = k->bf16 && add_avx512();
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

/* The same on bf16 tensors, built twice: for any x86-64 CPU, and with AVX-512 (64-byte vectors,
 * no FMA: the same roundings) for the CPUs that run bf16 plans (oneDNN 2.6 needs avx512_core). */
#define ADD_BF16_KERNELS(SUF, ATTR)                                                                                  \
    ATTR static void add_forward_bf16_##SUF(const DnAdd *k) {                                                      \
        const uint16_t *a = (const uint16_t *)k->a, *b = (const uint16_t *)k->b;                                  \
        uint16_t *y = (uint16_t *)k->y;                                                                            \
        const float ca = k->ca, cb = k->cb;                                                                        \
        const int relu = k->relu;                                                                                  \
        _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)") for (long i = 0; i < k->n; i++) \
            y[i] = dn_f_bf16(add_value(dn_bf16_f(a[i]), dn_bf16_f(b[i]), ca, cb, relu));                          \
    }                                                                                                              \
    /* dx (= or +=) c g, g = add_grad, rounded once; both inputs in one pass where both are written */           \
    ATTR static void add_backward_bf16_##SUF(const DnAdd *k) {                                                     \
        const uint16_t *dy = (const uint16_t *)k->dy, *y = (const uint16_t *)k->y;                                \
        const float ca = k->ca, cb = k->cb;                                                                        \
        const int relu = k->relu;                                                                                  \
        uint16_t *da = (uint16_t *)k->da, *db = (uint16_t *)k->db;                                                 \
        if (da && db && da != db && !k->acc_a && !k->acc_b) {                                                      \
            _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)") for (long i = 0; i < k->n; i++) { \
                const float g = add_grad(dn_bf16_f(dy[i]), dn_bf16_f(y[i]), relu);                                 \
                da[i] = dn_f_bf16(ca * g);                                                                         \
                db[i] = dn_f_bf16(cb * g);                                                                         \
            }                                                                                                      \
            return;                                                                                                \
        }                                                                                                          \
        for (int s = 0; s < 2; s++) {                                                                              \
            uint16_t *dx = s ? db : da;                                                                            \
            const float c = s ? cb : ca;                                                                           \
            if (!dx) continue;                                                                                     \
            if (s ? k->acc_b : k->acc_a) { /* (the same node on both sides: acc_b) */                             \
                _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)") for (long i = 0; i < k->n; i++) \
                    dx[i] = dn_f_bf16(dn_bf16_f(dx[i]) + c * add_grad(dn_bf16_f(dy[i]), dn_bf16_f(y[i]), relu));  \
            } else {                                                                                               \
                _Pragma("omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)") for (long i = 0; i < k->n; i++) \
                    dx[i] = dn_f_bf16(c * add_grad(dn_bf16_f(dy[i]), dn_bf16_f(y[i]), relu));                     \
            }                                                                                                      \
        }                                                                                                          \
    }
ADD_BF16_KERNELS(any, )
#if defined(__x86_64__) && defined(__GNUC__)
ADD_BF16_KERNELS(avx512, __attribute__((target("avx512f,avx512bw"))))
static int add_avx512(void) { return cpu_avx512f() && __builtin_cpu_supports("avx512bw"); }
#else
#define add_forward_bf16_avx512 add_forward_bf16_any
#define add_backward_bf16_avx512 add_backward_bf16_any
static int add_avx512(void) { return 0; }
#endif

static void add_forward_bf16(const DnAdd *k) {
    if (k->avx512)
        add_forward_bf16_avx512(k);
    else
        add_forward_bf16_any(k);
}

static void add_backward_bf16(const DnAdd *k) {
    if (k->avx512)
        add_backward_bf16_avx512(k);
    else
        add_backward_bf16_any(k);
}

static void add_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)dn;
    (void)l;
    (void)li;
    const DnAdd *k = st;
    if (k->bf16) {
        add_forward_bf16(k);
        return;
    }
    const float *a = k->a, *b = k->b, ca = k->ca, cb = k->cb;
    const int relu = k->relu;
    float *y = k->y;
#pragma omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)
    for (long i = 0; i < k->n; i++) y[i] = add_value(a[i], b[i], ca, cb, relu);
}

/* dx (= or +=) c g, g = add_grad */
static void add_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)dn;
    (void)l;
    (void)li;
    const DnAdd *k = st;
    if (k->bf16) {
        add_backward_bf16(k);
        return;
    }
    const float *dy = k->dy, *y = k->y, ca = k->ca, cb = k->cb;
    const int relu = k->relu;
    float *da = k->da, *db = k->db;
    if (da && db && da != db && !k->acc_a && !k->acc_b) {
        /* the common case (a block's two branches): both written in one pass */
#pragma omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)
        for (long i = 0; i < k->n; i++) {
            const float g = add_grad(dy[i], y[i], relu);
            da[i] = ca * g;
            db[i] = cb * g;
        }
        return;
    }
    for (int s = 0; s < 2; s++) {
        float *dx = s ? db : da;
        const float c = s ? cb : ca;
        if (!dx) continue;
        if (s ? k->acc_b : k->acc_a) {
#pragma omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)
            for (long i = 0; i < k->n; i++) dx[i] += c * add_grad(dy[i], y[i], relu);
        } else {
#pragma omp parallel for simd schedule(static) if (k->n > ADD_PAR_MIN)
            for (long i = 0; i < k->n; i++) dx[i] = c * add_grad(dy[i], y[i], relu);
        }
    }
}

const DnImpl dn_add_impl = {"add", add_plan, add_forward, add_backward, NULL};
#endif
