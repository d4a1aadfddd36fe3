/* test_placement.c: the one-GPU-per-rank rule's counting (placement.c) on the CPU: hand-made
 * layouts of Slurm and mpirun jobs, and random layouts against a brute-force count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "placement.h"
#include "util.h"

/* n records "host|bus" from a list of "host|bus" strings */
static char *keys_of(const char *const *s, int n) {
    char *k = calloc((size_t)n, PLACEMENT_KEY);
    for (int i = 0; i < n; i++) snprintf(k + (size_t)i * PLACEMENT_KEY, PLACEMENT_KEY, "%s", s[i]);
    return k;
}

static int find(const char *const *s, int n, PlacementFault *f) {
    char *k = keys_of(s, n);
    memset(f, 0, sizeof *f);
    int r = placement_find(k, n, f);
    free(k);
    return r;
}

TEST(placement_one_gpu_per_rank_passes) {
    PlacementFault f;
    /* two nodes of 4 GPUs, 4 tasks each, ranks in blocks (Slurm's default distribution) */
    const char *blocks[] = {"n1|0000:1b:00.0", "n1|0000:1c:00.0", "n1|0000:3d:00.0", "n1|0000:3e:00.0",
                            "n2|0000:1b:00.0", "n2|0000:1c:00.0", "n2|0000:3d:00.0", "n2|0000:3e:00.0"};
    CHECK(find(blocks, 8, &f) == 0); /* the same bus ids on two hosts are two GPUs */
    /* cyclic distribution, and fewer tasks than GPUs */
    const char *cyclic[] = {"n1|0000:1b:00.0", "n2|0000:1b:00.0", "n1|0000:1c:00.0", "n2|0000:1c:00.0"};
    CHECK(find(cyclic, 4, &f) == 0);
    /* one rank: nothing to share */
    const char *one[] = {"n1|0000:1b:00.0"};
    CHECK(find(one, 1, &f) == 0);
}

TEST(placement_more_tasks_than_gpus_names_node_gpus_and_tasks) {
    PlacementFault f;
    /* --ntasks-per-node=2 --gres=gpu:1: both tasks see the one GPU */
    const char *two_on_one[] = {"vm|0000:1b:00.0", "vm|0000:1b:00.0"};
    CHECK(find(two_on_one, 2, &f) == 1);
    CHECK(strcmp(f.host, "vm") == 0 && f.tasks == 2 && f.gpus == 1);
    CHECK(f.rank_a == 0 && f.rank_b == 1 && strcmp(f.gpu, "0000:1b:00.0") == 0);
    /* mpirun -np 6 on a 4-GPU node: local ranks 4 and 5 wrap onto GPUs 0 and 1 */
    const char *six_on_four[] = {"g|0:a", "g|0:b", "g|0:c", "g|0:d", "g|0:a", "g|0:b"};
    CHECK(find(six_on_four, 6, &f) == 1);
    CHECK(strcmp(f.host, "g") == 0 && f.tasks == 6 && f.gpus == 4 && f.rank_a == 0 && f.rank_b == 4);
    CHECK(strcmp(f.gpu, "0:a") == 0);
    /* only the second node is over-subscribed; ranks interleaved across nodes */
    const char *second[] = {"node1|x", "node10|y", "node1|y", "node10|y", "node10|z"};
    CHECK(find(second, 5, &f) == 1);
    CHECK(strcmp(f.host, "node10") == 0 && f.tasks == 3 && f.gpus == 2 && f.rank_a == 1 && f.rank_b == 3);
    CHECK(strcmp(f.gpu, "y") == 0);
    /* a host name that is a prefix of another is another host */
    const char *prefix[] = {"node1|x", "node10|x", "node1|y", "node10|y"};
    CHECK(find(prefix, 4, &f) == 0);
}

TEST(placement_two_faulty_nodes_report_the_lowest_rank) {
    PlacementFault f;
    const char *both[] = {"b|1", "a|1", "b|2", "a|1", "b|1"};
    CHECK(find(both, 5, &f) == 1);
    /* b has ranks 0, 2, 4 on GPUs 1, 2, 1 (0 and 4 share); a has ranks 1 and 3 on GPU 1 */
    CHECK(strcmp(f.host, "b") == 0 && f.tasks == 3 && f.gpus == 2 && f.rank_a == 0 && f.rank_b == 4);
    /* a record without a bus id counts as a GPU with an empty id */
    const char *bare[] = {"h", "h|"};
    CHECK(find(bare, 2, &f) == 1);
    CHECK(strcmp(f.host, "h") == 0 && f.tasks == 2 && f.gpus == 1 && f.gpu[0] == 0);
}

/* Brute force, pair by pair: the first rank i that shares (host and bus equal) with a later
 * rank j, the first such j, and the task and distinct-GPU counts of i's host. */
static int brute(const int *host, const int *bus, int n, PlacementFault *f) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (host[i] == host[j] && bus[i] == bus[j]) {
                int tasks = 0, gpus = 0;
                for (int k = 0; k < n; k++) {
                    if (host[k] != host[i]) continue;
                    tasks++;
                    int seen = 0;
                    for (int m = 0; m < k; m++) seen |= host[m] == host[k] && bus[m] == bus[k];
                    gpus += !seen;
                }
                snprintf(f->host, sizeof f->host, "node%d", host[i]);
                f->tasks = tasks, f->gpus = gpus, f->rank_a = i, f->rank_b = j;
                return 1;
            }
    return 0;
}

TEST(placement_random_layouts_match_brute_force) {
    Rng rng;
    rng_seed(&rng, 16);
    int checked = 0, faults = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int n = 1 + (int)rng_below(&rng, 24), hosts = 1 + (int)rng_below(&rng, 6), gpus = 1 + (int)rng_below(&rng, 200);
        int host[24], bus[24];
        char *k = calloc((size_t)n, PLACEMENT_KEY);
        for (int i = 0; i < n; i++) {
            host[i] = (int)rng_below(&rng, (uint32_t)hosts);
            bus[i] = (int)rng_below(&rng, (uint32_t)gpus);
            snprintf(k + (size_t)i * PLACEMENT_KEY, PLACEMENT_KEY, "node%d|0000:%02x:00.0", host[i], bus[i]);
        }
        PlacementFault got, want;
        memset(&got, 0, sizeof got);
        memset(&want, 0, sizeof want);
        int g = placement_find(k, n, &got), w = brute(host, bus, n, &want);
        CHECK_MSG(g == w, "trial %d: found %d, brute force %d", trial, g, w);
        if (g && w) {
            CHECK_MSG(strcmp(got.host, want.host) == 0 && got.tasks == want.tasks && got.gpus == want.gpus &&
                          got.rank_a == want.rank_a && got.rank_b == want.rank_b,
                      "trial %d: %s %d tasks %d GPUs ranks %d %d; brute force %s %d %d %d %d", trial, got.host, got.tasks,
                      got.gpus, got.rank_a, got.rank_b, want.host, want.tasks, want.gpus, want.rank_a, want.rank_b);
            faults++;
        }
        free(k);
        checked++;
    }
    printf("    %d random layouts, %d with a shared GPU\n", checked, faults);
    CHECK(faults > 100 && faults < checked);
}

/* placement_check() across two real ranks (mpirun): each with its own GPU it returns 0; on one
 * GPU every rank exits 2 and rank 0 alone prints the line; allowed sharing returns 1. */
/* 1 core: its 2 ranks start, check and exit (0.5 CPU seconds in 2.2 s) */
TEST_CORES(placement_check_across_ranks_exits_2_with_one_line, 1) {
#ifndef NVCNN_MPI
    th_skip("no MPI in this build");
#else
    if (th_run("command -v mpirun", NULL) != 0) {
        th_skip("no mpirun");
        return;
    }
    const char *b = getenv("NVCNN_BUILD");
    char host[256] = "", cmd[800], want[600], *o = NULL;
    gethostname(host, sizeof host - 1);
    const char *mode[] = {"own", "shared", "shared-allowed"};
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "timeout 120 mpirun -np 2 --oversubscribe %s %s/tests/mpi/mpi_placement %s",
                 geteuid() == 0 ? "--allow-run-as-root" : "", b && *b ? b : "build", mode[k]);
        int rc = th_run(cmd, &o);
        if (!o) o = calloc(1, 1);
        if (k == 1) {
            snprintf(want, sizeof want, "nvcnn: error: node %s: 2 tasks but 1 GPU for them (ranks 0 and 1 would share the GPU 0000:10:00.0): "
                     "start one task per GPU (Slurm: --ntasks-per-node=1 with --gres=gpu:1), or pass --allreduce=mpi", host);
            const char *l = strstr(o, want);
            CHECK_MSG(rc == 2 && l, "%s: exit %d, want '%s' in:\n%s", mode[k], rc, want, o);
            CHECK_MSG(l && !strstr(l + 1, "nvcnn: error:"), "more than one error line:\n%s", o);
            CHECK(!strstr(o, "placement shared"));
        } else {
            CHECK_MSG(rc == 0 && strstr(o, k == 0 ? "placement shared 0\n" : "placement shared 1\n"), "%s: exit %d:\n%s",
                      mode[k], rc, o);
            CHECK(!strstr(o, "error"));
        }
        free(o);
        o = NULL;
    }
#endif
}
