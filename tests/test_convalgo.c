/* test_convalgo.c: the rules by which the GPU backend picks cuDNN's convolution algorithms
 * (src/convalgo.c), on measurement lists written by hand: which math types each precision
 * accepts (and true fp32's refusal of an inaccurate algorithm), the order of the candidates (fastest first, within the workspace limit), the fallback
 * when nothing fits; and the measurement cache's keys against a count of resnet50's distinct
 * convolution shapes made by hand. */
#include <string.h>

#include "config.h"
#include "convalgo.h"
#include "harness.h"
#include "layers/layers.h"
#include "models.h"

enum { FMA = CONVALGO_MATH_FMA, DEF = CONVALGO_MATH_DEFAULT, TOP = CONVALGO_MATH_TENSOR_OP, CONV = CONVALGO_MATH_TENSOR_OP_CONVERT };

static void add(ConvAlgoList *l, int algo, int ok, float ms, size_t memory, int math) {
    ConvAlgoPerf p = {algo, ok, ms, memory, math, 1};
    l->p[l->n++] = p;
}

/* "a,b,c" of the algorithms in idx */
static const char *seq(const ConvAlgoList *l, const int *idx, int k) {
    static char buf[128];
    buf[0] = 0;
    for (int i = 0; i < k; i++) {
        char one[16];
        snprintf(one, sizeof one, "%s%d", i ? "," : "", l->p[idx[i]].algo);
        strcat(buf, one);
    }
    return buf;
}

TEST(convalgo_math_types_per_precision) {
    /* true fp32: FMA only (DEFAULT and TENSOR_OP may use TF32 on Ampere and later) */
    CHECK(convalgo_math_ok(PREC_FP32, FMA) && !convalgo_math_ok(PREC_FP32, DEF) && !convalgo_math_ok(PREC_FP32, TOP) &&
          !convalgo_math_ok(PREC_FP32, CONV));
    /* tf32 and bf16: anything but the conversion to fp16 */
    for (int p = PREC_TF32; p <= PREC_BF16; p += PREC_BF16 - PREC_TF32)
        CHECK(convalgo_math_ok(p, FMA) && convalgo_math_ok(p, DEF) && convalgo_math_ok(p, TOP) && !convalgo_math_ok(p, CONV));
    /* fp16 data is fp16 already */
    CHECK(convalgo_math_ok(PREC_FP16, FMA) && convalgo_math_ok(PREC_FP16, DEF) && convalgo_math_ok(PREC_FP16, TOP) &&
          convalgo_math_ok(PREC_FP16, CONV));
    /* the descriptor: fp32 always FMA; the others what was measured */
    CHECK(convalgo_desc_math(PREC_FP32, DEF) == FMA && convalgo_desc_math(PREC_FP32, FMA) == FMA);
    CHECK(convalgo_desc_math(PREC_TF32, TOP) == TOP && convalgo_desc_math(PREC_FP16, CONV) == CONV &&
          convalgo_desc_math(PREC_BF16, DEF) == DEF);
}

/* cuDNN's Find lists each algorithm once per math type: a fp32 list as long as the algorithm
 * count can be all DEFAULT-math results, none of which fp32 accepts. With room for every math
 * type the FMA results are there; the error message lists what came back. */
TEST(convalgo_fp32_finds_fma_among_default_duplicates) {
    ConvAlgoList l;
    memset(&l, 0, sizeof l);
    /* 8 algorithms, each as DEFAULT (faster: TF32) and as FMA, sorted by time as cuDNN does, the
     * failing ones last */
    for (int a = 0; a < 7; a++) add(&l, a, 1, 0.1f * (float)(a + 1), 0, DEF);
    add(&l, 7, 1, 0.75f, 0, DEF);
    for (int a = 0; a < 6; a++) add(&l, a, 1, 1.0f + 0.2f * (float)a, 0, FMA);
    add(&l, 6, 0, -1, 0, FMA);
    add(&l, 7, 0, -1, 0, FMA);
    int idx[CONVALGO_MAX], over = -1;
    ConvAlgoList cut = l;
    cut.n = 8; /* what a request for CUDNN_CONVOLUTION_FWD_ALGO_COUNT (8) results gets */
    CHECK(convalgo_order(&cut, CONV_FWD, 3, 3, PREC_FP32, 0, (size_t)-1, idx, &over) == 0);
    int k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP32, 0, (size_t)-1, idx, &over);
    CHECK_MSG(k == 6 && l.p[idx[0]].algo == 0 && l.p[idx[0]].math == FMA, "k %d", k);
    CHECK(CONVALGO_MAX >= 4 * 8); /* every forward algorithm in every math type */
    char buf[512];
    convalgo_describe(&cut, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "algo 0 DEFAULT 0.100 ms 0 B") && !strstr(buf, "FMA"), "%s", buf);
    convalgo_describe(&l, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "algo 1 FMA 1.200 ms 0 B, ") && strstr(buf, "algo 7 FMA failed"), "%s", buf);
}

TEST(convalgo_order_fastest_first_within_the_limit) {
    const size_t MB = 1 << 20;
    ConvAlgoList l;
    memset(&l, 0, sizeof l);
    add(&l, 0, 1, 1.00f, 0, FMA);
    add(&l, 1, 1, 0.50f, 1024 * MB, TOP);
    add(&l, 2, 0, 0.10f, 0, FMA); /* failed to run */
    add(&l, 3, 1, 0.70f, 100 * MB, FMA);
    add(&l, 4, 1, 0.20f, 10 * MB, CONV);
    add(&l, 5, 1, 0.60f, 300 * MB, DEF);
    int idx[CONVALGO_MAX], over = -1, k;
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP32, 0, (size_t)-1, idx, &over);
    CHECK_MSG(k == 2 && !over && strcmp(seq(&l, idx, k), "3,0") == 0, "fp32: %s", seq(&l, idx, k));
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_TF32, 0, (size_t)-1, idx, &over);
    CHECK_MSG(k == 4 && !over && strcmp(seq(&l, idx, k), "1,5,3,0") == 0, "tf32: %s", seq(&l, idx, k));
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP16, 0, (size_t)-1, idx, &over);
    CHECK_MSG(k == 5 && strcmp(seq(&l, idx, k), "4,1,5,3,0") == 0, "fp16: %s", seq(&l, idx, k));
    /* a limit leaves out what needs more */
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_TF32, 0, 200 * MB, idx, &over);
    CHECK_MSG(k == 2 && !over && strcmp(seq(&l, idx, k), "3,0") == 0, "tf32, 200 MiB: %s", seq(&l, idx, k));
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_BF16, 0, 0, idx, &over);
    CHECK_MSG(k == 1 && !over && strcmp(seq(&l, idx, k), "0") == 0, "bf16, no workspace: %s", seq(&l, idx, k));
    /* nothing fits: the smallest workspace, flagged */
    ConvAlgoList m;
    memset(&m, 0, sizeof m);
    add(&m, 7, 1, 0.3f, 900 * MB, DEF);
    add(&m, 8, 1, 0.9f, 400 * MB, FMA);
    add(&m, 9, 1, 0.1f, 100 * MB, CONV); /* smaller, but not for tf32 */
    k = convalgo_order(&m, CONV_FWD, 3, 3, PREC_TF32, 0, 50 * MB, idx, &over);
    CHECK_MSG(k == 1 && over == 1 && m.p[idx[0]].algo == 8, "tf32 over the limit: k %d over %d algo %d", k, over,
              k ? m.p[idx[0]].algo : -1);
    /* nothing serves the precision */
    ConvAlgoList t;
    memset(&t, 0, sizeof t);
    add(&t, 1, 1, 0.1f, 0, TOP);
    add(&t, 2, 0, 0.1f, 0, FMA);
    CHECK(convalgo_order(&t, CONV_FWD, 3, 3, PREC_FP32, 0, (size_t)-1, idx, &over) == 0);
}

/* True fp32 takes no WINOGRAD_NONFUSED on a filter above 3x3 (its operands in TF32 whatever the
 * math type, measured on an H200: convalgo.h), in any direction; on 3x3 it does; and every other
 * precision takes it everywhere. Lists as cuDNN returns them (FMA results, the Winograd fastest). */
TEST(convalgo_fp32_refuses_winograd_nonfused_above_3x3) {
    const int nonfused[CONV_NDIR] = {CONVALGO_FWD_WINOGRAD_NONFUSED, CONVALGO_BWD_DATA_WINOGRAD_NONFUSED,
                                     CONVALGO_BWD_FILTER_WINOGRAD_NONFUSED};
    CHECK(nonfused[0] == 7 && nonfused[1] == 5 && nonfused[2] == 5); /* cuDNN 9's cudnn_cnn.h */
    for (int dir = 0; dir < CONV_NDIR; dir++) {
        ConvAlgoList l;
        memset(&l, 0, sizeof l);
        add(&l, nonfused[dir], 1, 0.05f, 0, FMA);
        add(&l, 1, 1, 0.10f, 0, FMA);
        add(&l, 0, 1, 0.20f, 0, FMA);
        int idx[CONVALGO_MAX], over = -1, k;
        const struct {
            int kh, kw, prec;
            const char *want;
        } cases[] = {{5, 5, PREC_FP32, "1,0"}, {3, 5, PREC_FP32, "1,0"}, {5, 3, PREC_FP32, "1,0"}, {7, 7, PREC_FP32, "1,0"},
                     {3, 3, PREC_FP32, "x,1,0"}, {1, 1, PREC_FP32, "x,1,0"}, {5, 5, PREC_TF32, "x,1,0"},
                     {5, 5, PREC_FP16, "x,1,0"}, {5, 5, PREC_BF16, "x,1,0"}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            char want[32];
            if (cases[c].want[0] == 'x')
                snprintf(want, sizeof want, "%d%s", nonfused[dir], cases[c].want + 1);
            else
                snprintf(want, sizeof want, "%s", cases[c].want);
            k = convalgo_order(&l, dir, cases[c].kh, cases[c].kw, cases[c].prec, 0, (size_t)-1, idx, &over);
            CHECK_MSG(strcmp(seq(&l, idx, k), want) == 0, "direction %d, %dx%d, precision %d: %s, want %s", dir, cases[c].kh, cases[c].kw,
                      cases[c].prec, seq(&l, idx, k), want);
            CHECK(convalgo_accurate(cases[c].prec, dir, nonfused[dir], cases[c].kh, cases[c].kw) == (cases[c].want[0] == 'x'));
        }
        /* the rule is about that algorithm only */
        CHECK(convalgo_accurate(PREC_FP32, dir, nonfused[dir] == 5 ? 4 : 6, 5, 5));
    }
    /* nothing else on a 5x5 filter in fp32: nothing to take */
    ConvAlgoList w;
    memset(&w, 0, sizeof w);
    add(&w, CONVALGO_FWD_WINOGRAD_NONFUSED, 1, 0.05f, 0, FMA);
    int idx[CONVALGO_MAX], over = -1;
    CHECK(convalgo_order(&w, CONV_FWD, 5, 5, PREC_FP32, 0, (size_t)-1, idx, &over) == 0);
}

/* A deterministic run takes only what cuDNN reports CUDNN_DETERMINISTIC, in the list's order
 * where the times are equal (the heuristics' list: conv.cu gives each result its rank as its
 * time), and falls back to the smallest deterministic workspace; with no deterministic result it
 * takes nothing. */
TEST(convalgo_deterministic_takes_only_deterministic_results) {
    const size_t MB = 1 << 20;
    ConvAlgoList l;
    memset(&l, 0, sizeof l);
    add(&l, 0, 1, 0.0f, 0, FMA); /* the heuristics' first: non-deterministic (atomics) */
    l.p[0].deterministic = 0;
    add(&l, 1, 1, 1.0f, 0, FMA);
    add(&l, 3, 1, 2.0f, 8, FMA);
    l.p[2].deterministic = 0;
    add(&l, 5, 1, 3.0f, 300 * MB, FMA);
    int idx[CONVALGO_MAX], over = -1, k;
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP32, 1, (size_t)-1, idx, &over);
    CHECK_MSG(k == 2 && !over && strcmp(seq(&l, idx, k), "1,5") == 0, "deterministic: %s", seq(&l, idx, k));
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP32, 0, (size_t)-1, idx, &over);
    CHECK_MSG(k == 4 && strcmp(seq(&l, idx, k), "0,1,3,5") == 0, "any: %s", seq(&l, idx, k));
    /* nothing deterministic fits 100 MiB but algorithm 1 (0 B) */
    k = convalgo_order(&l, CONV_FWD, 3, 3, PREC_FP32, 1, 100 * MB, idx, &over);
    CHECK_MSG(k == 1 && !over && l.p[idx[0]].algo == 1, "deterministic, 100 MiB: %s", seq(&l, idx, k));
    ConvAlgoList m;
    memset(&m, 0, sizeof m);
    add(&m, 0, 1, 0.1f, 0, FMA);
    m.p[0].deterministic = 0;
    CHECK(convalgo_order(&m, CONV_FWD, 3, 3, PREC_FP32, 1, (size_t)-1, idx, &over) == 0);
    char text[256];
    convalgo_describe(&m, text, sizeof text);
    CHECK_MSG(strstr(text, "non-deterministic") != NULL, "%s", text);
}

/* ResNet-50 v1 (models/resnet.c, stride on the first 1x1 of a stage's first block) has 53
 * convolutions: the 7x7 stem and 3 + 4 + 6 + 3 bottleneck blocks of three, plus one projection
 * per stage. Counted by hand, they have 20 distinct shapes: the stem; in the first stage 1x1
 * 64->64, 3x3 64->64, 1x1 64->256 (the projection has this shape too) and 1x1 256->64; in each
 * later stage the strided projection, the strided 1x1 reduction, the 3x3, the 1x1 expansion and
 * the next blocks' 1x1 reduction. So of 53 x 3 = 159 searches the plan measures 20 x 3 = 60 less
 * the stem's backward data (its input is the image, whose gradient is never used): 59, and
 * takes 99 from the cache; the stem's 7x7/2 on 224 needs no explicit padding. conv.cu's plan
 * is mirrored here. */
TEST(convalgo_resnet50_measures_each_shape_once) {
    Net *net = model_build_net(model_find("resnet50"), 8, 1000);
    ConvAlgoCache *cache = convalgo_cache_new();
    ConvAlgoList empty;
    memset(&empty, 0, sizeof empty);
    int convs = 0, measured = 0, cached = 0, skipped = 0, padded = 0;
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "conv") != 0) continue;
        const Conv *c = (const Conv *)l->priv;
        int hp, wp;
        padded += convalgo_explicit_pad(c, &hp, &wp);
        convs++;
        for (int d = 0; d < CONV_NDIR; d++) {
            if (d == CONV_BWD_DATA && l->in[0] == net->input) {
                skipped++;
                continue;
            }
            ConvKey k;
            convalgo_key(c, 8, d, PREC_FP16, &k);
            if (convalgo_cache_get(cache, &k)) {
                cached++;
            } else {
                measured++;
                convalgo_cache_put(cache, &k, &empty);
            }
        }
    }
    printf("    resnet50: %d convolutions, %d searches measured, %d from the cache, %d not needed\n", convs, measured, cached, skipped);
    CHECK(convs == 53 && padded == 0);
    CHECK(measured == 59 && cached == 99 && skipped == 1);
    CHECK(convalgo_cache_size(cache) == 59);
    /* the key tells directions and precisions apart */
    const Conv *c0 = (const Conv *)net->layer[0].priv;
    ConvKey a, b;
    convalgo_key(c0, 8, CONV_FWD, PREC_FP16, &a);
    convalgo_key(c0, 8, CONV_FWD, PREC_BF16, &b);
    CHECK(convalgo_cache_get(cache, &a) != NULL && convalgo_cache_get(cache, &b) == NULL);
    /* put replaces */
    ConvAlgoList one;
    memset(&one, 0, sizeof one);
    add(&one, 6, 1, 0.5f, 0, FMA);
    convalgo_cache_put(cache, &a, &one);
    CHECK(convalgo_cache_size(cache) == 59 && convalgo_cache_get(cache, &a)->n == 1 && convalgo_cache_get(cache, &a)->p[0].algo == 6);
    convalgo_cache_free(cache);
    net_free(net);
}

/* TensorFlow's SAME padding of a 3x3/2 conv on an even size is uneven (0 before, 1 after):
 * cuDNN's symmetric padding cannot give it, so the input is padded explicitly. */
TEST(convalgo_uneven_same_padding_is_explicit) {
    Net *net = net_new(2, 4, 10, 10);
    conv_create(net, net->input, 6, 3, 3, 2, 2, PAD_SAME, 0); /* 10 -> 5: pad 0 top, 1 bottom */
    conv_create(net, net->input, 6, 3, 3, 1, 1, PAD_SAME, 0); /* 10 -> 10: pad 1 each side */
    int hp, wp;
    CHECK(convalgo_explicit_pad((const Conv *)net->layer[0].priv, &hp, &wp) == 1 && hp == 11 && wp == 11);
    CHECK(convalgo_explicit_pad((const Conv *)net->layer[1].priv, &hp, &wp) == 0 && hp == 10 && wp == 10);
    ConvKey k;
    convalgo_key((const Conv *)net->layer[0].priv, 2, CONV_FWD, PREC_FP32, &k);
    CHECK(k.h == 11 && k.w == 11 && k.pad_h == 0 && k.pad_w == 0 && k.stride_h == 2);
    convalgo_key((const Conv *)net->layer[1].priv, 2, CONV_FWD, PREC_FP32, &k);
    CHECK(k.h == 10 && k.pad_h == 1 && k.pad_w == 1);
    net_free(net);
}
