/* test_convalgo.c: the rules by which the GPU backend picks cuDNN's convolution algorithms
 * (src/convalgo.c), on measurement lists written by hand: which math types each precision
 * accepts, the order of the candidates (fastest first, within the workspace limit), and the
 * fallback when nothing fits. */
#include <string.h>

#include "config.h"
#include "convalgo.h"
#include "harness.h"

enum { FMA = CONVALGO_MATH_FMA, DEF = CONVALGO_MATH_DEFAULT, TOP = CONVALGO_MATH_TENSOR_OP, CONV = CONVALGO_MATH_TENSOR_OP_CONVERT };

static void add(ConvAlgoList *l, int algo, int ok, float ms, size_t memory, int math) {
    ConvAlgoPerf p = {algo, ok, ms, memory, math};
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
    k = convalgo_order(&l, PREC_FP32, (size_t)-1, idx, &over);
    CHECK_MSG(k == 2 && !over && strcmp(seq(&l, idx, k), "3,0") == 0, "fp32: %s", seq(&l, idx, k));
    k = convalgo_order(&l, PREC_TF32, (size_t)-1, idx, &over);
    CHECK_MSG(k == 4 && !over && strcmp(seq(&l, idx, k), "1,5,3,0") == 0, "tf32: %s", seq(&l, idx, k));
    k = convalgo_order(&l, PREC_FP16, (size_t)-1, idx, &over);
    CHECK_MSG(k == 5 && strcmp(seq(&l, idx, k), "4,1,5,3,0") == 0, "fp16: %s", seq(&l, idx, k));
    /* a limit leaves out what needs more */
    k = convalgo_order(&l, PREC_TF32, 200 * MB, idx, &over);
    CHECK_MSG(k == 2 && !over && strcmp(seq(&l, idx, k), "3,0") == 0, "tf32, 200 MiB: %s", seq(&l, idx, k));
    k = convalgo_order(&l, PREC_BF16, 0, idx, &over);
    CHECK_MSG(k == 1 && !over && strcmp(seq(&l, idx, k), "0") == 0, "bf16, no workspace: %s", seq(&l, idx, k));
    /* nothing fits: the smallest workspace, flagged */
    ConvAlgoList m;
    memset(&m, 0, sizeof m);
    add(&m, 7, 1, 0.3f, 900 * MB, DEF);
    add(&m, 8, 1, 0.9f, 400 * MB, FMA);
    add(&m, 9, 1, 0.1f, 100 * MB, CONV); /* smaller, but not for tf32 */
    k = convalgo_order(&m, PREC_TF32, 50 * MB, idx, &over);
    CHECK_MSG(k == 1 && over == 1 && m.p[idx[0]].algo == 8, "tf32 over the limit: k %d over %d algo %d", k, over,
              k ? m.p[idx[0]].algo : -1);
    /* nothing serves the precision */
    ConvAlgoList t;
    memset(&t, 0, sizeof t);
    add(&t, 1, 1, 0.1f, 0, TOP);
    add(&t, 2, 0, 0.1f, 0, FMA);
    CHECK(convalgo_order(&t, PREC_FP32, (size_t)-1, idx, &over) == 0);
}
