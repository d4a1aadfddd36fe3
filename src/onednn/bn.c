/* bn.c: batch normalisation on oneDNN, in the layout of its input (blocked or NCHW, 2-D too).
 *
 * Training: the batch statistics (mean and biased variance, as the reference), then the running
 * averages moved here as the reference moves them (the running variance gets the unbiased batch
 * variance). The statistics are computed here (bn_stats) and given to oneDNN's forward as global
 * statistics wherever the input is fp32 NCHW, nChw8c or nChw16c (bf16 data: oneDNN's own, in fp32):
 * oneDNN 2.6 sums in fp32 over the n*h*w values of a channel, which loses the variance where the
 * mean is large against the spread (a convolution of near-constant images, as the synthetic data
 * are: relu(bn) 20 % off at inception3's first layer, 2x149x149 values a channel); bn_stats sums
 * deviations from one of the channel's own values, in fp32 over 32 pixels at a time and in double
 * across them, to about the reference's accuracy. Inference: the running statistics as oneDNN's
 * global statistics. Backward follows the mode of the last forward. gamma, beta, the running
 * statistics and the gradients of gamma and beta are used in place in the arenas (the gradients
 * written, not added, so net_backward does not zero them). A relu that is the output's only
 * consumer is fused (oneDNN's fuse_norm_relu, with the positions of the positive outputs kept in a
 * workspace for backward): this layer writes the relu's output node and reads its gradient. Not
 * where oneDNN has the fused kernel in its reference implementation only and an optimised one
 * without (oneDNN 2.6 on SSE4.1): the relu runs on its own there. */
#ifdef NVCNN_DNNL
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct DnBn {
    DnPrim fwd_train, fwd_infer, bwd_train, bwd_infer;
    int block;        /* the input's channel block (1: NCHW, 8, 16) when bn_stats computes the statistics; 0: oneDNN */
    int n, cb;        /* samples, channel blocks (padded in the blocked layouts) */
    size_t hw;
    dnnl_memory_t src, dst, scale, shift, mean, var, run_mean, run_var;
    dnnl_memory_t ddst, dscale, dshift, ws;
    DnOut dsrc;
    float *mean_buf, *var_buf;
    int c;
    double m;     /* samples per channel: n*h*w */
    int training; /* mode of the last forward */
} DnBn;

/* The forward (training, inference) and backward (training, inference) primitive descriptors of
 * batch norm on data, with the relu fused or not: 1 with all four in pd, 0 (pd[0] NULL) where
 * oneDNN has not all of them. */
static int bn_pds(Dn *dn, const Md *data, int relu, dnnl_primitive_desc_t pd[4]) {
    const unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t d;
    memset(pd, 0, 4 * sizeof *pd);
    DN_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, data, BN_EPSILON, flags));
    pd[0] = dn_pd(dn, &d, NULL);
    DN_CHECK(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, data, BN_EPSILON, flags | dnnl_use_global_stats));
    pd[1] = dn_pd(dn, &d, NULL);
    if (pd[0] && pd[1]) {
        DN_CHECK(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, data, data, BN_EPSILON, flags));
        pd[2] = dn_pd(dn, &d, pd[0]);
        DN_CHECK(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, data, data, BN_EPSILON, flags | dnnl_use_global_stats));
        pd[3] = dn_pd(dn, &d, pd[1]);
    }
    if (pd[0] && pd[1] && pd[2] && pd[3]) return 1;
    for (int i = 0; i < 4; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    pd[0] = NULL;
    return 0;
}

static int bn_pds_ref(dnnl_primitive_desc_t pd[4]) {
    for (int i = 0; i < 4; i++)
        if (dn_pd_is_ref(pd[i])) return 1;
    return 0;
}

/* Pixels summed in fp32 before their sums go into double. */
#define BN_RUN 32

/* The sums of one channel block, cb of cbt in a [n][cbt][hw][B] layout (B 1: NCHW, channel cb),
 * over its n*hw pixels: lane j of s1 gets sum (x - k_j), of s2 sum (x - k_j)^2, k_j the channel's
 * first value; in fp32 over runs of BN_RUN pixels, in double across them. Deviations from one of
 * the channel's own values are exact where values lie within a factor of 2 of it, and small
 * against the mean where the spread is: the case that loses the variance when the values
 * themselves are summed. B is a constant where this is inlined. */
static inline __attribute__((always_inline)) void bn_sums(const float *x, const float *k, int n, int cbt, size_t hw, const int B, int cb,
                                                          double *s1, double *s2) {
    const size_t run = hw * (size_t)B;
    for (int j = 0; j < B; j++) s1[j] = s2[j] = 0;
    for (int i = 0; i < n; i++) {
        const float *p = x + ((size_t)i * cbt + cb) * run;
        for (size_t q0 = 0; q0 < hw; q0 += BN_RUN) {
            const size_t q1 = q0 + BN_RUN < hw ? q0 + BN_RUN : hw;
            if (B == 1) {
                float a = 0, b = 0;
                const float k0 = k[0];
#pragma omp simd reduction(+ : a, b)
                for (size_t q = q0; q < q1; q++) {
                    const float d = p[q] - k0;
                    a += d;
                    b += d * d;
                }
                s1[0] += a;
                s2[0] += b;
            } else {
                float a[16] = {0}, b[16] = {0};
                for (size_t q = q0; q < q1; q++)
                    for (int j = 0; j < B; j++) {
                        const float d = p[q * (size_t)B + j] - k[j];
                        a[j] += d;
                        b[j] += d * d;
                    }
                for (int j = 0; j < B; j++) s1[j] += a[j], s2[j] += b[j];
            }
        }
    }
}

/* bn_sums for B 1, 8 and 16, and the same compiled for AVX2 */
#define BN_SUMS(B)                                                                                                             \
    static void bn_sums_##B(const float *x, const float *k, int n, int cbt, size_t hw, int cb, double *s1, double *s2) {       \
        bn_sums(x, k, n, cbt, hw, B, cb, s1, s2);                                                                              \
    }                                                                                                                          \
    __attribute__((target("avx2,fma"))) static void bn_sums_avx2_##B(const float *x, const float *k, int n, int cbt, size_t hw, \
                                                                     int cb, double *s1, double *s2) {                         \
        bn_sums(x, k, n, cbt, hw, B, cb, s1, s2);                                                                              \
    }
BN_SUMS(1)
BN_SUMS(8)
BN_SUMS(16)

/* The batch statistics of every channel of b's input x into b->mean_buf and b->var_buf, the sums
 * compiled for AVX2 where the CPU and ONEDNN_MAX_CPU_ISA allow it. */
static void bn_stats(const DnBn *b, const float *x) {
    const int B = b->block, v = cpu_avx2_fma();
    void (*sums)(const float *, const float *, int, int, size_t, int, double *, double *) =
        B == 1 ? (v ? bn_sums_avx2_1 : bn_sums_1) : B == 8 ? (v ? bn_sums_avx2_8 : bn_sums_8) : (v ? bn_sums_avx2_16 : bn_sums_16);
#pragma omp parallel for schedule(static) if (b->m * b->c > 65536)
    for (int cb = 0; cb < b->cb; cb++) {
        float k[16];
        double s1[16], s2[16];
        for (int j = 0; j < B; j++) k[j] = x[(size_t)cb * b->hw * B + (size_t)j]; /* sample 0, pixel 0 */
        sums(x, k, b->n, b->cb, b->hw, cb, s1, s2);
        for (int j = 0; j < B && cb * B + j < b->c; j++) {
            const double d = s1[j] / b->m, var = s2[j] / b->m - d * d;
            b->mean_buf[cb * B + j] = (float)((double)k[j] + d);
            b->var_buf[cb * B + j] = (float)(var > 0 ? var : 0);
        }
    }
}

static void *bn_plan(Dn *dn, Layer *l, int li) {
    Net *net = dn->net;
    Node *in = &net->node[l->in[0]], *out = &net->node[l->out];
    const int C = in->shape.c;
    if (!in->grad) return NULL; /* bn on the network input: the reference's (oneDNN always writes diff_src) */
    Md data = dn->md[l->in[0]];
    int relu_li = dn_relu_after(dn, l->out);
    dnnl_primitive_desc_t pd[4];
    if (!bn_pds(dn, &data, relu_li >= 0, pd)) return NULL;
    if (relu_li >= 0 && bn_pds_ref(pd)) {
        /* oneDNN 2.6 on SSE4.1 has fuse_norm_relu in its reference kernels only (bnorm_ref:any, about
         * 10 times slower than bnorm_jit:sse41 at resnet50's shapes): the relu on its own there */
        dnnl_primitive_desc_t alone[4];
        if (bn_pds(dn, &data, 0, alone) && !bn_pds_ref(alone)) {
            for (int i = 0; i < 4; i++) dnnl_primitive_desc_destroy(pd[i]);
            memcpy(pd, alone, sizeof pd);
            relu_li = -1;
        } else if (alone[0]) {
            for (int i = 0; i < 4; i++) dnnl_primitive_desc_destroy(alone[i]);
        }
    }
    dnnl_primitive_desc_t ft = pd[0], fi = pd[1], bt = pd[2], bi = pd[3];
    DnBn *b = xcalloc(1, sizeof *b);
    b->c = C;
    b->m = (double)in->shape.n * in->shape.h * in->shape.w;
    b->training = 1;
    /* the statistics by bn_stats where the layout is one it walks and the forward with global
     * statistics leaves the relu's workspace as the training forward does (the backward reads it) */
    b->block = dn_env(DN_ENV_BN_STATS) == 0 || !dn_is_f32(&data) ? 0 : dn_block(&data, in->shape); /* onednn: oneDNN's (to compare) */
    if (relu_li >= 0 && !dn_md_eq(dn_query(ft, dnnl_query_workspace_md), dn_query(fi, dnnl_query_workspace_md))) b->block = 0;
    b->n = in->shape.n;
    b->hw = (size_t)in->shape.h * in->shape.w;
    b->cb = b->block ? (C + b->block - 1) / b->block : 0;
    dn->md[l->out] = data;
    if (relu_li >= 0) { /* write the relu's output instead */
        out = &net->node[net->layer[relu_li].out];
        dn->md[net->layer[relu_li].out] = data;
        const Md *ws = dn_query(ft, dnnl_query_workspace_md);
        b->ws = dn_mem(dn, ws, dn_buf(dn, dn_md_bytes(ws)));
        dn_fuse(dn, relu_li);
    }
    dnnl_dims_t cd = {C};
    Md cmd = dn_md_dims(1, cd, dnnl_x);
    b->mean_buf = dn_buf(dn, (size_t)C * sizeof(float));
    b->var_buf = dn_buf(dn, (size_t)C * sizeof(float));
    b->src = dn_mem(dn, &data, in->data);
    b->dst = dn_mem(dn, &data, out->data);
    b->scale = dn_mem(dn, &cmd, net_param(net, l->param0));
    b->shift = dn_mem(dn, &cmd, net_param(net, l->param0 + 1));
    b->mean = dn_mem(dn, &cmd, b->mean_buf);
    b->var = dn_mem(dn, &cmd, b->var_buf);
    b->run_mean = dn_mem(dn, &cmd, net_buffer(net, l->buf0));
    b->run_var = dn_mem(dn, &cmd, net_buffer(net, l->buf0 + 1));
    b->ddst = dn_mem(dn, &data, out->grad);
    b->dscale = dn_mem(dn, &cmd, net_grad(net, l->param0));
    b->dshift = dn_mem(dn, &cmd, net_grad(net, l->param0 + 1));
    b->dsrc = dn_out(dn, &data, &data, in->grad, dn_acc(dn, li, 0));

    b->fwd_train = dn_prim(dn, ft);
    b->fwd_infer = dn_prim(dn, fi);
    b->bwd_train = dn_prim(dn, bt);
    b->bwd_infer = dn_prim(dn, bi);
    return b;
}

static void bn_forward(Dn *dn, Layer *l, int li, void *st) {
    (void)li;
    DnBn *b = st;
    Net *net = dn->net;
    b->training = net->training != 0;
    if (!b->training) {
        dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, b->src},       {DNNL_ARG_DST, b->dst},
                                {DNNL_ARG_SCALE, b->scale},   {DNNL_ARG_SHIFT, b->shift},
                                {DNNL_ARG_MEAN, b->run_mean}, {DNNL_ARG_VARIANCE, b->run_var},
                                {DNNL_ARG_WORKSPACE, b->ws}};
        dn_exec(dn, &b->fwd_infer, b->ws ? 7 : 6, a);
        return;
    }
    dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, b->src},     {DNNL_ARG_DST, b->dst},   {DNNL_ARG_SCALE, b->scale},
                            {DNNL_ARG_SHIFT, b->shift}, {DNNL_ARG_MEAN, b->mean}, {DNNL_ARG_VARIANCE, b->var},
                            {DNNL_ARG_WORKSPACE, b->ws}};
    if (b->block) {
        bn_stats(b, net->node[l->in[0]].data);
        dn_exec(dn, &b->fwd_infer, b->ws ? 7 : 6, a); /* the same arguments: mean and var are inputs there */
    } else {
        dn_exec(dn, &b->fwd_train, b->ws ? 7 : 6, a);
    }
    float *mm = net_buffer(net, l->buf0), *mv = net_buffer(net, l->buf0 + 1);
    const double unbias = b->m > 1 ? b->m / (b->m - 1) : 1.0;
    for (int ch = 0; ch < b->c; ch++) {
        mm[ch] = (float)(BN_DECAY * (double)mm[ch] + (1.0 - BN_DECAY) * (double)b->mean_buf[ch]);
        mv[ch] = (float)(BN_DECAY * (double)mv[ch] + (1.0 - BN_DECAY) * (double)b->var_buf[ch] * unbias);
    }
}

static void bn_backward(Dn *dn, Layer *l, int li, void *st) {
    (void)l;
    (void)li;
    DnBn *b = st;

    dnnl_exec_arg_t a[10] = {{DNNL_ARG_SRC, b->src},
                            {DNNL_ARG_DIFF_DST, b->ddst},
                            {DNNL_ARG_SCALE, b->scale},
                            {DNNL_ARG_SHIFT, b->shift},
                            {DNNL_ARG_MEAN, b->training ? b->mean : b->run_mean},
                            {DNNL_ARG_VARIANCE, b->training ? b->var : b->run_var},
                            {DNNL_ARG_DIFF_SCALE, b->dscale},
                            {DNNL_ARG_DIFF_SHIFT, b->dshift},
                            {DNNL_ARG_DIFF_SRC, b->dsrc.mem},
                            {DNNL_ARG_WORKSPACE, b->ws}};
    dn_exec(dn, b->training ? &b->bwd_train : &b->bwd_infer, b->ws ? 10 : 9, a);
    dn_out_run(dn, &b->dsrc);
}

const DnImpl dn_bn_impl = {"bn", bn_plan, bn_forward, bn_backward, NULL};
#endif
