/* memplan.c: see memplan.h. */
#include "memplan.h"

#include <stdlib.h>

#include "util.h"

static size_t round_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

static const MemBlock *sort_base;

static int by_size_desc(const void *pa, const void *pb) {
    const MemBlock *a = &sort_base[*(const int *)pa], *b = &sort_base[*(const int *)pb];
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return *(const int *)pa - *(const int *)pb; /* stable: the same plan on every run */
}

static int by_off(const void *pa, const void *pb) {
    const MemBlock *a = &sort_base[*(const int *)pa], *b = &sort_base[*(const int *)pb];
    if (a->off != b->off) return a->off < b->off ? -1 : 1;
    return *(const int *)pa - *(const int *)pb;
}

size_t memplan(MemBlock *b, int n, size_t align) {
    if (align == 0 || (align & (align - 1))) die("memplan: alignment %zu is not a power of two", align);
    int *order = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *order), *near = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *near);
    char *placed = xcalloc((size_t)(n > 0 ? n : 1), 1);
    for (int i = 0; i < n; i++) order[i] = i;
    sort_base = b;
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        MemBlock *m = &b[order[k]];
        size_t need = round_up(m->bytes, align);
        m->off = 0;
        if (need == 0) continue;
        /* the placed blocks alive at the same time, by offset */
        int nn = 0;
        for (int j = 0; j < n; j++)
            if (placed[j] && b[j].first <= m->last && m->first <= b[j].last) near[nn++] = j;
        qsort(near, (size_t)nn, sizeof *near, by_off);
        size_t at = 0;
        for (int j = 0; j < nn; j++) {
            const MemBlock *o = &b[near[j]];
            if (o->off >= at + need) break; /* the gap before o fits */
            size_t end = o->off + round_up(o->bytes, align);
            if (end > at) at = end;
        }
        m->off = at;
        placed[order[k]] = 1;
        if (at + need > total) total = at + need;
    }
    free(order);
    free(near);
    free(placed);
    return total;
}

size_t memplan_lower_bound(const MemBlock *b, int n, size_t align) {
    size_t best = 0;
    for (int i = 0; i < n; i++) {
        /* the live set is largest at some block's first step */
        size_t live = 0;
        for (int j = 0; j < n; j++)
            if (b[j].first <= b[i].first && b[i].first <= b[j].last) live += round_up(b[j].bytes, align);
        if (live > best) best = live;
    }
    return best;
}
