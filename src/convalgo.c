/* convalgo.c: see convalgo.h. */
#include "convalgo.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

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

int convalgo_accurate(int precision, int dir, int algo, int kh, int kw) {
    if (precision != PREC_FP32 || (kh <= 3 && kw <= 3)) return 1;
    const int nonfused = dir == CONV_FWD        ? CONVALGO_FWD_WINOGRAD_NONFUSED
                         : dir == CONV_BWD_DATA ? CONVALGO_BWD_DATA_WINOGRAD_NONFUSED
                                                : CONVALGO_BWD_FILTER_WINOGRAD_NONFUSED;
    return algo != nonfused;
}

int convalgo_order(const ConvAlgoList *l, int dir, int kh, int kw, int precision, int deterministic, size_t limit, int *idx, int *over) {
    int k = 0, smallest = -1;
    *over = 0;
    for (int i = 0; i < l->n && i < CONVALGO_MAX; i++) {
        const ConvAlgoPerf *p = &l->p[i];
        if (!p->ok || !convalgo_math_ok(precision, p->math) || !convalgo_accurate(precision, dir, p->algo, kh, kw) ||
            (deterministic && !p->deterministic))
            continue;
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

void convalgo_describe(const ConvAlgoList *l, char *buf, size_t n) {
    static const char *const math[] = {"DEFAULT", "TENSOR_OP", "TENSOR_OP_CONVERT", "FMA"};
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n && i < CONVALGO_MAX && at + 1 < n; i++) {
        const ConvAlgoPerf *p = &l->p[i];
        const char *m = p->math >= 0 && p->math < 4 ? math[p->math] : "math?";
        int w = p->ok ? snprintf(buf + at, n - at, "%salgo %d %s %.3f ms %zu B%s", i ? ", " : "", p->algo, m, p->ms, p->memory,
                                 p->deterministic ? "" : " non-deterministic")
                      : snprintf(buf + at, n - at, "%salgo %d %s failed", i ? ", " : "", p->algo, m);
        if (w < 0) break;
        at += (size_t)w;
    }
    if (l->n == 0) snprintf(buf, n, "(none)");
}

int convalgo_explicit_pad(const Conv *c, int *hp, int *wp) {
    /* cuDNN's output size with symmetric padding p: 1 + (h + 2p - k) / s */
    int oh = 1 + (c->h + 2 * c->pt - c->kh) / c->sh, ow = 1 + (c->w + 2 * c->pl - c->kw) / c->sw;
    *hp = c->h;
    *wp = c->w;
    if (oh == c->oh && ow == c->ow) return 0;
    *hp = (c->oh - 1) * c->sh + c->kh;
    *wp = (c->ow - 1) * c->sw + c->kw;
    return 1;
}

void convalgo_key(const Conv *c, int n, int dir, int precision, ConvKey *k) {
    memset(k, 0, sizeof *k);
    int hp, wp, padded = convalgo_explicit_pad(c, &hp, &wp);
    k->dir = dir;
    k->precision = precision;
    k->n = n;
    k->cin = c->cin;
    k->h = hp;
    k->w = wp;
    k->cout = c->cout;
    k->kh = c->kh;
    k->kw = c->kw;
    k->pad_h = padded ? 0 : c->pt;
    k->pad_w = padded ? 0 : c->pl;
    k->stride_h = c->sh;
    k->stride_w = c->sw;
    k->dil_h = k->dil_w = 1;
    k->groups = c->groups;
}

struct ConvAlgoCache {
    ConvKey *key;
    ConvAlgoList *list;
    int n, cap;
};

ConvAlgoCache *convalgo_cache_new(void) { return xcalloc(1, sizeof(ConvAlgoCache)); }

void convalgo_cache_free(ConvAlgoCache *c) {
    if (!c) return;
    free(c->key);
    free(c->list);
    free(c);
}

static int find(const ConvAlgoCache *c, const ConvKey *key) {
    for (int i = 0; i < c->n; i++)
        if (memcmp(&c->key[i], key, sizeof *key) == 0) return i;
    return -1;
}

const ConvAlgoList *convalgo_cache_get(const ConvAlgoCache *c, const ConvKey *key) {
    int i = find(c, key);
    return i < 0 ? NULL : &c->list[i];
}

void convalgo_cache_put(ConvAlgoCache *c, const ConvKey *key, const ConvAlgoList *l) {
    int i = find(c, key);
    if (i < 0) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 32;
            c->key = xrealloc(c->key, (size_t)c->cap * sizeof *c->key);
            c->list = xrealloc(c->list, (size_t)c->cap * sizeof *c->list);
        }
        i = c->n++;
        c->key[i] = *key;
    }
    c->list[i] = *l;
}

int convalgo_cache_size(const ConvAlgoCache *c) { return c->n; }
