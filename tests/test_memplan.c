/* test_memplan.c: the arena planner (memplan.c) and backward's gradient schedule
 * (net_grad_schedule), which together let the GPU backend's activation gradients share memory.
 * Checked against brute force: no two buffers alive at the same step overlap, and every read and
 * write of backward falls inside its buffer's lifetime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/layers.h"
#include "memplan.h"
#include "models.h"
#include "net.h"
#include "util.h"

static size_t up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* 0 if no two blocks alive together overlap in memory and every block lies inside total */
static int conflicts(const MemBlock *b, int n, size_t total, size_t align) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].bytes == 0) continue;
        if (b[i].off % align || b[i].off + b[i].bytes > total) bad++;
        for (int j = i + 1; j < n; j++) {
            if (b[j].bytes == 0) continue;
            int together = b[i].first <= b[j].last && b[j].first <= b[i].last;
            int overlap = b[i].off < b[j].off + b[j].bytes && b[j].off < b[i].off + b[i].bytes;
            if (together && overlap) bad++;
        }
    }
    return bad;
}

TEST(memplan_random_lifetimes_never_share_live_memory) {
    Rng r;
    rng_seed(&r, 17);
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)rng_below(&r, 60);
        MemBlock *b = xcalloc((size_t)n, sizeof *b);
        size_t sum = 0;
        for (int i = 0; i < n; i++) {
            b[i].bytes = rng_below(&r, 8) == 0 ? 0 : 1 + rng_below(&r, 5000);
            b[i].first = (int)rng_below(&r, 40);
            b[i].last = b[i].first + (int)rng_below(&r, 10);
            sum += up(b[i].bytes, 256);
        }
        size_t total = memplan(b, n, 256);
        size_t lb = memplan_lower_bound(b, n, 256);
        CHECK_MSG(conflicts(b, n, total, 256) == 0, "trial %d: live blocks overlap", trial);
        CHECK_MSG(total >= lb && total <= sum, "trial %d: total %zu outside [%zu, %zu]", trial, total, lb, sum);
        free(b);
    }
    /* disjoint lifetimes share everything; one common step shares nothing */
    MemBlock d[3] = {{1000, 0, 1, 0}, {3000, 2, 3, 0}, {2000, 4, 9, 0}};
    CHECK(memplan(d, 3, 256) == up(3000, 256));
    MemBlock c[3] = {{1000, 0, 5, 0}, {3000, 5, 6, 0}, {2000, 5, 9, 0}};
    CHECK(memplan(c, 3, 256) == up(1000, 256) + up(2000, 256) + up(3000, 256));
}

/* Replays backward on the schedule: at layer i's step its output's gradient is alive (read) and
 * so is each input's (written or added to); exactly one consumer writes each consumed gradient,
 * and it is the first one backward reaches. */
static void check_schedule(const char *model) {
    Net *net = model_build_net(model_find(model), 2, 10);
    int *first = xmalloc((size_t)net->nnode * sizeof *first), *last = xmalloc((size_t)net->nnode * sizeof *last);
    char *zero = xmalloc((size_t)net->nnode), *acc = xmalloc((size_t)net_input_slots(net) + 1);
    net_grad_schedule(net, first, last, zero, acc);
    int *writers = xcalloc((size_t)net->nnode, sizeof *writers), bad = 0, nzero = 0;
    char *seen = xcalloc((size_t)net->nnode, 1);
    for (int i = net->nlayer - 1; i >= 0; i--) {
        const Layer *l = &net->layer[i];
        int t = net->nlayer - 1 - i, slot = net_input_slot(net, i);
        if (!(first[l->out] <= t && t == last[l->out])) bad++;
        for (int k = 0; k < l->nin; k++) {
            int v = l->in[k];
            if (acc[slot + k] != seen[v]) bad++; /* writes iff nobody wrote before */
            seen[v] = 1;
            if (!acc[slot + k]) writers[v]++;
            if (v != net->input && !(first[v] <= t && t <= last[v])) bad++;
            if (v != net->input && acc[slot + k] == 0 && first[v] != t) bad++;
        }
    }
    for (int v = 0; v < net->nnode; v++) {
        if (v == net->input) continue;
        nzero += zero[v];
        if (zero[v] ? writers[v] != 0 : writers[v] != 1) bad++;
    }
    CHECK_MSG(bad == 0, "%s: %d violations of the gradient schedule", model, bad);
    CHECK_MSG(nzero == 1, "%s: %d unconsumed nodes (want the loss output only)", model, nzero);
    free(first), free(last), free(zero), free(acc), free(writers), free(seen);
    net_free(net);
}

TEST(memplan_gradient_schedule_matches_backward) {
    const char *models[] = {"lenet", "alexnet", "googlenet", "resnet50", "inception3", "vgg11"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_schedule(models[i]);
}

/* The point of it: resnet50's activation gradients for a batch of 256 in fp32 take 34.5 GiB one
 * buffer per node; planned, a small fraction of that. */
TEST(memplan_resnet50_gradients_fit_in_a_fraction) {
    const int B = 256;
    /* built for one sample (no host memory for 256): every node's size is linear in the batch */
    Net *net = model_build_net(model_find("resnet50"), 1, 1000);
    int n = net->nnode;
    int *first = xmalloc((size_t)n * sizeof *first), *last = xmalloc((size_t)n * sizeof *last);
    char *zero = xmalloc((size_t)n), *acc = xmalloc((size_t)net_input_slots(net) + 1);
    net_grad_schedule(net, first, last, zero, acc);
    MemBlock *b = xcalloc((size_t)n, sizeof *b);
    size_t sum = 0;
    for (int v = 0; v < n; v++) {
        b[v].bytes = v == net->input ? 0 : (size_t)B * shape_count(net->node[v].shape) * sizeof(float);
        b[v].first = first[v];
        b[v].last = last[v];
        sum += up(b[v].bytes, 256);
    }
    size_t total = memplan(b, n, 256), lb = memplan_lower_bound(b, n, 256);
    CHECK(conflicts(b, n, total, 256) == 0);
    printf("    resnet50 bs%d fp32 activation gradients: %.2f GiB planned (lower bound %.2f) vs %.2f GiB one per node\n", B,
           (double)total / 1073741824.0, (double)lb / 1073741824.0, (double)sum / 1073741824.0);
    CHECK_MSG(total * 10 <= sum, "planned %zu bytes is more than a tenth of %zu", total, sum);
    CHECK_MSG(total <= lb + lb / 4, "planned %zu bytes is more than 1.25 x the lower bound %zu", total, lb);
    free(first), free(last), free(zero), free(acc), free(b);
    net_free(net);
}

/* In-place activations: every alias obeys the rules (one consumer, producer not an activation),
 * and resnet50's device footprint for a batch of 256 in fp32 (activations with in-place
 * activations, plus planned gradients) is reported and bounded. */
TEST(memplan_in_place_activations_and_resnet50_footprint) {
    const char *models[] = {"resnet50", "googlenet", "vgg16", "alexnet", "inception3"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const int B = 256;
        Net *net = model_build_net(model_find(models[m]), 1, 1000);
        int n = net->nnode;
        int *alias = xmalloc((size_t)n * sizeof *alias), *cons = xcalloc((size_t)n, sizeof *cons), *prod = xmalloc((size_t)n * sizeof *prod);
        net_act_in_place(net, alias);
        for (int v = 0; v < n; v++) prod[v] = -1;
        for (int i = 0; i < net->nlayer; i++) {
            prod[net->layer[i].out] = i;
            for (int k = 0; k < net->layer[i].nin; k++) cons[net->layer[i].in[k]]++;
        }
        int bad = 0, nal = 0;
        size_t all = 0, kept = 0;
        for (int v = 0; v < n; v++) {
            size_t bytes = (size_t)B * shape_count(net->node[v].shape) * sizeof(float);
            all += bytes;
            if (alias[v] < 0) {
                kept += bytes;
                continue;
            }
            nal++;
            int u = alias[v];
            const Layer *l = &net->layer[prod[v]];
            if (!act_is(l) || l->in[0] != u || cons[u] != 1 || u == net->input || act_is(&net->layer[prod[u]]) ||
                alias[u] >= 0 || shape_count(net->node[u].shape) != shape_count(net->node[v].shape))
                bad++;
        }
        CHECK_MSG(bad == 0, "%s: %d in-place activations break the rules", models[m], bad);
        CHECK_MSG(nal > 0, "%s: no activation runs in place", models[m]);
        /* gradients, planned */
        int *first = xmalloc((size_t)n * sizeof *first), *last = xmalloc((size_t)n * sizeof *last);
        char *zero = xmalloc((size_t)n), *acc = xmalloc((size_t)net_input_slots(net) + 1);
        net_grad_schedule(net, first, last, zero, acc);
        MemBlock *b = xcalloc((size_t)n, sizeof *b);
        for (int v = 0; v < n; v++) {
            b[v].bytes = v == net->input ? 0 : (size_t)B * shape_count(net->node[v].shape) * sizeof(float);
            b[v].first = first[v];
            b[v].last = last[v];
        }
        size_t grads = memplan(b, n, 256);
        printf("    %-10s bs%d fp32: activations %.2f GiB (%d in place; %.2f GiB one per node), gradients %.2f GiB\n", models[m], B,
               (double)kept / 1073741824.0, nal, (double)all / 1073741824.0, (double)grads / 1073741824.0);
        if (strcmp(models[m], "resnet50") == 0) /* every relu (49) runs in place: a quarter of the bytes go */
            CHECK_MSG(nal == 49 && kept * 100 <= all * 76, "resnet50: %d in place, %zu of %zu bytes kept", nal, kept, all);
        free(alias), free(cons), free(prod), free(first), free(last), free(zero), free(acc), free(b);
        net_free(net);
    }
}
