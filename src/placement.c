/* placement.c: see placement.h. */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "util.h"

typedef struct Rec {
    const char *key; /* "host|bus id" */
    int rank;
} Rec;

/* Length of the host part of a key (up to '|' or the end). */
static size_t host_len(const char *key) {
    size_t n = strnlen(key, PLACEMENT_KEY);
    const char *bar = memchr(key, '|', n);
    return bar ? (size_t)(bar - key) : n;
}

static int same_host(const char *a, const char *b) {
    size_t la = host_len(a), lb = host_len(b);
    return la == lb && memcmp(a, b, la) == 0;
}

/* The bus id part of a key ("" when it has none). */
static const char *bus_of(const char *key) {
    size_t h = host_len(key);
    return key[h] == '|' ? key + h + 1 : key + h;
}

/* By host, then bus id, then rank: the ranks of one host are contiguous, and within a host those
 * of one GPU are contiguous and in rank order. */
static int rec_cmp(const void *pa, const void *pb) {
    const Rec *a = pa, *b = pb;
    size_t la = host_len(a->key), lb = host_len(b->key);
    int c = memcmp(a->key, b->key, la < lb ? la : lb);
    if (!c) c = (la > lb) - (la < lb);
    if (!c) c = strncmp(bus_of(a->key), bus_of(b->key), PLACEMENT_KEY);
    return c ? c : (a->rank > b->rank) - (a->rank < b->rank);
}

static int same_gpu(const char *a, const char *b) {
    return same_host(a, b) && strncmp(bus_of(a), bus_of(b), PLACEMENT_KEY) == 0;
}

int placement_find(const char *keys, int n, PlacementFault *f) {
    if (n < 2) return 0;
    Rec *r = xmalloc((size_t)n * sizeof *r);
    for (int i = 0; i < n; i++) r[i] = (Rec){keys + (size_t)i * PLACEMENT_KEY, i};
    qsort(r, (size_t)n, sizeof *r, rec_cmp);
    /* one pass over the hosts; within each, over its GPUs (runs of one bus id) */
    int found = 0;
    for (int h = 0; h < n;) {
        int e = h, gpus = 0, a = -1, b = -1;
        while (e < n && same_host(r[h].key, r[e].key)) e++;
        for (int g = h; g < e;) {
            int ge = g + 1;
            while (ge < e && same_gpu(r[g].key, r[ge].key)) ge++;
            gpus++;
            /* a run of two or more ranks shares this GPU; its first two are its lowest ranks */
            if (ge - g >= 2 && (a < 0 || r[g].rank < a)) a = r[g].rank, b = r[g + 1].rank;
            g = ge;
        }
        if (a >= 0 && (!found || a < f->rank_a)) {
            const char *key = keys + (size_t)a * PLACEMENT_KEY, *bus = bus_of(key);
            snprintf(f->host, sizeof f->host, "%.*s", (int)host_len(key), key);
            snprintf(f->gpu, sizeof f->gpu, "%.*s", (int)strnlen(bus, (size_t)(key + PLACEMENT_KEY - bus)), bus);
            f->tasks = e - h;
            f->gpus = gpus;
            f->rank_a = a;
            f->rank_b = b;
            found = 1;
        }
        h = e;
    }
    free(r);
    return found;
}

int placement_check(Dist *d, const char *bus, int allow_sharing) {
    char mine[PLACEMENT_KEY];
    memset(mine, 0, sizeof mine);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    snprintf(mine, sizeof mine, "%s|%s", host, bus);
    char *all = xmalloc((size_t)d->size * PLACEMENT_KEY);
    dist_allgather(d, mine, all, PLACEMENT_KEY);
    PlacementFault f;
    int shared = placement_find(all, d->size, &f);
    free(all);
    if (!shared || allow_sharing) return shared;
    /* One line, from rank 0, printed before any rank leaves: a launcher that sees a rank exit
     * may kill the others at once. The format is die_code's. */
    if (d->rank == 0) {
        fflush(stdout);
        fprintf(stderr,
                "nvcnn: error: node %s: %d tasks but %d GPU%s for them (ranks %d and %d would share the GPU %s): "
                "start one task per GPU (Slurm: --ntasks-per-node=%d with --gres=gpu:%d), or pass --allreduce=mpi "
                "to let tasks share GPUs\n",
                f.host, f.tasks, f.gpus, f.gpus == 1 ? "" : "s", f.rank_a, f.rank_b, f.gpu, f.gpus, f.gpus);
        fflush(stderr);
    }
    dist_barrier(d);
    fflush(NULL);
    _exit(EXIT_USAGE);
}

int placement_check_gpus(Dist *d, int device, int allow_sharing) {
    char bus[64] = "";
    gpu_pci_bus_id(device, bus, sizeof bus);
    return placement_check(d, bus, allow_sharing);
}
