/* shards.c: see shards.h. */
#include "io/shards.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* 1 to 9 decimal digits at *p: their value, *p moved past them; -1 if there are none or more. */
static long digits(const char **p) {
    const char *s = *p;
    long v = 0;
    int k = 0;
    while (*s >= '0' && *s <= '9') {
        if (++k > 9) return -1;
        v = 10 * v + (*s++ - '0');
    }
    if (k == 0) return -1;
    *p = s;
    return v;
}

int shard_name_parse(const char *name, const char *subset, unsigned long *index, unsigned long *count,
                     const char **set) {
    size_t pl = strlen(subset);
    if (strncmp(name, subset, pl) != 0 || name[pl] != '-') return 0;
    const char *p = name + pl + 1;
    long i = digits(&p);
    if (i < 0 || strncmp(p, "-of-", 4) != 0) return 0;
    const char *s = p;
    p += 4;
    long c = digits(&p);
    if (c < 0) return 0; /* a count of 0 is a shard name: shard_set_check refuses its index */
    if (index) *index = (unsigned long)i;
    if (count) *count = (unsigned long)c;
    if (set) *set = s;
    return 1;
}

/* Appends to a message buffer, truncating quietly at its end. */
typedef struct Msg {
    char *buf;
    size_t cap, len;
} Msg;

static void add(Msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Msg *m, const char *fmt, ...) {
    if (m->len + 1 >= m->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (k > 0) m->len += (size_t)k < m->cap - m->len ? (size_t)k : m->cap - m->len - 1;
}

/* "a", "a and b", "a, b and c", "a, b, c and 4 more" */
static void add_list(Msg *m, char *const *v, int n, int shown) {
    for (int i = 0; i < n && i < shown; i++) {
        if (i > 0) add(m, "%s", i == n - 1 ? " and " : ", ");
        add(m, "%s", v[i]);
    }
    if (n > shown) add(m, " and %d more", n - shown);
}

typedef struct Ent {
    unsigned long index;
    const char *name;
} Ent;

static int cmp_ent(const void *a, const void *b) {
    const Ent *x = a, *y = b;
    if (x->index != y->index) return x->index < y->index ? -1 : 1;
    return strcmp(x->name, y->name);
}

int shard_set_check(char *const *names, int n, const char *subset, char *err, size_t errlen) {
    Msg m = {err, errlen, 0};
    if (errlen) err[0] = 0;
    char **foreign = xmalloc((size_t)(n ? n : 1) * sizeof *foreign);
    const char *first = NULL;
    int nforeign = 0;
    for (int i = 0; i < n; i++) {
        if (!shard_name_parse(names[i], subset, NULL, NULL, NULL))
            foreign[nforeign++] = names[i];
        else if (!first)
            first = names[i];
    }
    if (!first) { /* names chosen freely: nothing to check */
        free(foreign);
        return 0;
    }
    if (nforeign) {
        add_list(&m, foreign, nforeign, 3);
        add(&m, " %s not named as %s (%s-NNNNN-of-NNNNN) but would be read with %s ...: move %s away",
            nforeign == 1 ? "is" : "are", nforeign == 1 ? "a shard" : "shards", subset, first,
            nforeign == 1 ? "it" : "them");
        free(foreign);
        return -1;
    }
    free(foreign);

    /* the sets, in the order of their first file */
    const char **set = xmalloc((size_t)n * sizeof *set);
    int *set_first = xmalloc((size_t)n * sizeof *set_first), *set_files = xcalloc((size_t)n, sizeof *set_files);
    int nset = 0;
    for (int i = 0; i < n; i++) {
        const char *s;
        shard_name_parse(names[i], subset, NULL, NULL, &s);
        int k = 0;
        while (k < nset && strcmp(set[k], s) != 0) k++;
        if (k == nset) {
            set[nset] = s;
            set_first[nset++] = i;
        }
        set_files[k]++;
    }
    if (nset > 1) {
        static const char *words[] = {"", "", "two", "three", "four"};
        if (nset <= 4)
            add(&m, "%s-* holds %s sets of shards: ", subset, words[nset]);
        else
            add(&m, "%s-* holds %d sets of shards: ", subset, nset);
        for (int k = 0; k < nset && k < 4; k++) {
            if (k > 0) add(&m, "%s", k == nset - 1 ? " and " : ", ");
            add(&m, "%s ... (%d file%s)", names[set_first[k]], set_files[k], set_files[k] == 1 ? "" : "s");
        }
        if (nset > 4) add(&m, " and %d more sets", nset - 4);
        add(&m, ": remove %s", nset == 2 ? "one set" : "all sets but one");
        free(set);
        free(set_first);
        free(set_files);
        return -1;
    }
    free(set);
    free(set_first);
    free(set_files);

    /* one set: indexes 0 .. count-1, each once */
    unsigned long count;
    const char *setname;
    shard_name_parse(names[0], subset, NULL, &count, &setname);
    int width = (int)(setname - names[0]) - (int)strlen(subset) - 1;
    Ent *e = xmalloc((size_t)n * sizeof *e);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        e[i].name = names[i];
        shard_name_parse(names[i], subset, &e[i].index, NULL, NULL);
        if (e[i].index >= count) {
            add(&m, "%s: shard index %lu is not below the count %lu of its set", names[i], e[i].index, count);
            rc = -1;
            goto out;
        }
    }
    qsort(e, (size_t)n, sizeof *e, cmp_ent);
    for (int i = 1; i < n; i++)
        if (e[i].index == e[i - 1].index) {
            add(&m, "%s and %s are both shard %lu of %lu: remove one", e[i - 1].name, e[i].name, e[i].index, count);
            rc = -1;
            goto out;
        }
    if ((unsigned long)n < count) {
        unsigned long missing = count - (unsigned long)n, shown = 0, next = 0;
        for (int i = 0; i <= n && shown < 3; i++) {
            unsigned long upto = i < n ? e[i].index : count;
            for (; next < upto && shown < 3; next++, shown++) {
                if (shown > 0) add(&m, "%s", shown == missing - 1 ? " and " : ", ");
                add(&m, "%s-%0*lu%s", subset, width, next, setname);
            }
            next = upto + 1;
        }
        if (missing > shown) add(&m, " and %lu more", missing - shown);
        add(&m, " %s missing (%d of the %lu shards of %s-*%s %s here)", missing == 1 ? "is" : "are", n, count, subset,
            setname, n == 1 ? "is" : "are");
        rc = -1;
    }
out:
    free(e);
    return rc;
}
