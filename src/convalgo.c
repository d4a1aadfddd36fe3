/* convalgo.c: see convalgo.h. */
#include "convalgo.h"

#include "config.h"

int convalgo_math_ok(int precision, int math) {
    switch (precision) {
    case PREC_FP32:
        return math == CONVALGO_MATH_FMA; /* DEFAULT and TENSOR_OP may use TF32 on Ampere and later */
    case PREC_FP16:
        return 1; /* the data is fp16 already: converting to fp16 changes nothing */
    case PREC_TF32:
    case PREC_BF16:
        /* TENSOR_OP_CONVERT converts to fp16: fp32's and bf16's range would be lost */
        return math == CONVALGO_MATH_FMA || math == CONVALGO_MATH_DEFAULT || math == CONVALGO_MATH_TENSOR_OP;
    default:
        return 0;
    }
}

int convalgo_desc_math(int precision, int math) { return precision == PREC_FP32 ? CONVALGO_MATH_FMA : math; }

int convalgo_order(const ConvAlgoList *l, int precision, size_t limit, int *idx, int *over) {
    int k = 0, smallest = -1;
    *over = 0;
    for (int i = 0; i < l->n && i < CONVALGO_MAX; i++) {
        const ConvAlgoPerf *p = &l->p[i];
        if (!p->ok || !convalgo_math_ok(precision, p->math)) continue;
        if (smallest < 0 || p->memory < l->p[smallest].memory ||
            (p->memory == l->p[smallest].memory && p->ms < l->p[smallest].ms))
            smallest = i;
        if (p->memory > limit) continue;
        /* insertion by time (stable: equal times keep cuDNN's order) */
        int j = k++;
        while (j > 0 && l->p[idx[j - 1]].ms > p->ms) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    if (k == 0 && smallest >= 0) {
        idx[k++] = smallest;
        *over = 1;
    }
    return k;
}
