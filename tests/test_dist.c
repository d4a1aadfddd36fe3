/* test_dist.c: data-parallel training across processes (CPU backend, Open MPI on this machine).
 * Launches the programs of tests/mpi/ and ./nvcnn under mpirun. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "harness.h"
#include "testutil.h"

/* "timeout 180 mpirun -np N [--oversubscribe] [--allow-run-as-root] " or NULL (skip). */
static const char *mpirun(int np, char *buf, size_t n) {
#ifndef NVCNN_MPI
    (void)np;
    (void)buf;
    (void)n;
    return NULL;
#else
    if (th_run("command -v mpirun", NULL) != 0) return NULL;
    snprintf(buf, n, "timeout 180 mpirun -np %d --oversubscribe %s", np, geteuid() == 0 ? "--allow-run-as-root" : "");
    return buf;
#endif
}

static const char *build_dir(void) {
    const char *b = getenv("NVCNN_BUILD");
    return b && *b ? b : "build";
}

TEST(dist_bucketed_average_of_known_values_is_exact) {
    for (int np = 2; np <= 4; np++) {
        char mr[200], cmd[600], *o = NULL;
        if (!mpirun(np, mr, sizeof mr)) {
            th_skip("no MPI in this build or no mpirun");
            return;
        }
        snprintf(cmd, sizeof cmd, "%s %s/tests/mpi/mpi_avg", mr, build_dir());
        int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0, "np %d: exit %d\n%s", np, rc, o);
        int ranks = 0, b[8];
        double errors = -1;
        const char *l = o ? strstr(o, "avg ranks") : NULL;
        CHECK_MSG(l && sscanf(l, "avg ranks %d errors %lf buckets %d %d %d %d %d %d %d %d", &ranks, &errors, &b[0], &b[1],
                              &b[2], &b[3], &b[4], &b[5], &b[6], &b[7]) == 10,
                  "np %d: output:\n%s", np, o);
        CHECK(ranks == np && errors == 0);
        /* 10007 floats: buckets of 1, 16, 1000, 10000 floats and one bucket; 300007 floats (by the
         * ring): buckets of 16384 and 65536 floats, and one */
        CHECK(b[0] == 10007 && b[1] == 626 && b[2] == 11 && b[3] == 2 && b[4] == 1);
        CHECK(b[5] == 19 && b[6] == 5 && b[7] == 1);
        /* Open MPI: the large buckets went by the ring (coll_libnbc_iallreduce_algorithm 1) */
        const char *a = strstr(l ? l : "", " algorithm ");
        CHECK_MSG(a && (atoi(a + 11) == 1 || atoi(a + 11) == -1), "np %d: %s", np, l ? l : "");
        free(o);
    }
}

TEST(dist_two_ranks_stay_identical_and_equal_one_process) {
    const char *bucket[] = {"0.02", "25"};
    for (int k = 0; k < 2; k++) {
        char mr[200], cmd[600], *o = NULL;
        if (!mpirun(2, mr, sizeof mr)) {
            th_skip("no MPI in this build or no mpirun");
            return;
        }
        snprintf(cmd, sizeof cmd, "%s %s/tests/mpi/mpi_train %s 6", mr, build_dir(), bucket[k]);
        int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0, "exit %d\n%s", rc, o);
        int ranks = 0, identical = 0;
        double maxrel = 1;
        const char *l = o ? strstr(o, "train ranks") : NULL;
        CHECK_MSG(l && sscanf(l, "train ranks %d identical %d maxrel %lf", &ranks, &identical, &maxrel) == 3, "output:\n%s", o);
        CHECK(ranks == 2);
        CHECK_MSG(identical == 1, "parameters differ between ranks (bucket %s MiB)", bucket[k]);
        printf("    2 ranks vs 1 process with twice the batch (bucket %s MiB): max relative difference %.2e\n", bucket[k], maxrel);
        /* rounding only (a wrong average is off by tens of percent): 1.5e-6 to 4.6e-6 measured
         * under OpenBLAS's SkylakeX ... Nehalem kernels (scripts/sweep_cpus.sh unit) */
        CHECK_MSG(maxrel <= 3e-5, "max relative difference %g > 3e-5", maxrel);
        free(o);
    }
}

TEST(dist_nvcnn_under_mpirun_prints_once) {
    char mr[200], cmd[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=3 --nstep_burnin=0 --num_classes=10", mr);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d\n%s", rc, o);
    CHECK(o && strstr(o, "Num ranks:   2\n"));
    CHECK(o && strstr(o, "             8 total\n"));
    /* only rank 0 prints: one header, one summary */
    const char *p = o ? strstr(o, "Num ranks:") : NULL;
    CHECK(p && !strstr(p + 1, "Num ranks:"));
    CHECK(o && strstr(o, "Images/sec: ") && !strstr(strstr(o, "Images/sec: ") + 1, "Images/sec: "));
    free(o);
    /* --verbose: every rank prints */
    snprintf(cmd, sizeof cmd, "%s ./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --verbose", mr);
    rc = th_run(cmd, &o);
    CHECK(rc == 0);
    p = o ? strstr(o, "Num ranks:") : NULL;
    CHECK(p && strstr(p + 1, "Num ranks:"));
    free(o);
}

TEST(dist_checkpoint_resumes_with_a_different_number_of_ranks) {
    char mr[200], cmd[1200], dir[600], path[700], want[800], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(dir, sizeof dir, "%s/ranks", th_tmpdir());
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=8 --display_every=1";
    /* 2 ranks write step 4, 1 process goes on to 8, then 2 ranks again to 12 */
    snprintf(cmd, sizeof cmd, "%s %s --num_batches=4 --log_dir=%s", mr, common, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d\n%s", rc, o);
    free(o);
    snprintf(path, sizeof path, "%s/ckpt-4.nvcnn", dir);
    CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
    snprintf(cmd, sizeof cmd, "%s --num_batches=8 --log_dir=%s", common, dir);
    rc = th_run(cmd, &o);
    snprintf(want, sizeof want, "Restored from checkpoint %s at step 4\n", path);
    CHECK_MSG(rc == 0 && o && strstr(o, want), "exit %d, want '%s' in:\n%s", rc, want, o);
    CHECK_MSG(o && strstr(o, "\n     8 ") && !strstr(o, "\n     4 "), "steps 5-8 only:\n%s", o);
    free(o);
    snprintf(path, sizeof path, "%s/ckpt-8.nvcnn", dir);
    CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
    snprintf(cmd, sizeof cmd, "%s %s --num_batches=12 --log_dir=%s", mr, common, dir);
    rc = th_run(cmd, &o);
    snprintf(want, sizeof want, "Restored from checkpoint %s at step 8\n", path);
    CHECK_MSG(rc == 0 && o && strstr(o, want), "exit %d, want '%s' in:\n%s", rc, want, o);
    CHECK(o && strstr(o, "Num ranks:   2\n"));
    free(o);
    snprintf(path, sizeof path, "%s/ckpt-12.nvcnn", dir);
    CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
}

/* The GPU backend across ranks: MPI through the host (two ranks may share one GPU), and NCCL inside
 * backward when there are two GPUs. Parameters must stay bitwise identical on every rank and
 * follow the one-process CPU run within fp32's cross-backend tolerance. */
TEST(dist_gpu_ranks_stay_identical_mpi_and_nccl) {
    int ngpu = tu_gpus();
    if (ngpu == 0) return;
    char mr[200], cmd[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    const char *mode[] = {"gpu-mpi", "gpu-nccl"};
    for (int k = 0; k < 2; k++) {
        if (k == 1 && ngpu < 2) {
            printf("    gpu-nccl: not run (one GPU: NCCL needs one GPU per rank)\n");
            break;
        }
        snprintf(cmd, sizeof cmd, "%s %s/tests/mpi/mpi_train 0.02 6 %s", mr, build_dir(), mode[k]);
        int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0, "%s: exit %d\n%s", mode[k], rc, o);
        int ranks = 0, identical = 0;
        double maxrel = 1;
        const char *l = o ? strstr(o, "train ranks") : NULL;
        CHECK_MSG(l && sscanf(l, "train ranks %d identical %d maxrel %lf", &ranks, &identical, &maxrel) == 3, "output:\n%s", o);
        CHECK(ranks == 2);
        CHECK_MSG(identical == 1, "%s: parameters differ between ranks", mode[k]);
        printf("    %s: 2 GPU ranks vs 1 CPU process with twice the batch: max relative difference %.2e\n", mode[k], maxrel);
        CHECK_MSG(maxrel <= 2e-3, "%s: max relative difference %g > 2e-3", mode[k], maxrel);
        free(o);
        o = NULL;
    }
}

/* Two ranks on one GPU: refused with exit 2 and one line naming the node, the GPU count and the
 * task count, by default and with --allreduce=nccl; an explicit --allreduce=mpi shares the GPU on
 * purpose and averages through the host. */
TEST(dist_ranks_sharing_a_gpu_need_allreduce_mpi) {
    if (tu_gpus() == 0) return;
    char mr[200], cmd[800], want[512], host[256] = "", *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "nvcnn: error: node %s: 2 tasks but 1 GPU for them (ranks 0 and 1 would share the GPU ", host);
    const char *common = "./nvcnn --model=lenet --device=gpu --num_classes=10 --batch_size=8 --num_batches=4";
    const char *refused[] = {"", " --allreduce=nccl"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s -x CUDA_VISIBLE_DEVICES=0 %s%s", mr, common, refused[k]);
        int rc = th_run(cmd, &o);
        const char *l = o ? strstr(o, want) : NULL;
        CHECK_MSG(rc == 2 && l && strstr(l, "--allreduce=mpi"), "'%s': exit %d, want '%s' in:\n%s", refused[k], rc, want,
                  o ? o : "");
        CHECK_MSG(l && !strstr(l + 1, "nvcnn: error:"), "more than one error line:\n%s", o ? o : "");
        free(o);
        o = NULL;
    }
    snprintf(cmd, sizeof cmd, "%s -x CUDA_VISIBLE_DEVICES=0 %s --allreduce=mpi", mr, common);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Num ranks:   2\n") && strstr(o, "allreduce on (mpi)"), "exit %d:\n%s", rc, o ? o : "");
    free(o);
}

/* scripts/mpirun-example.sh where LD_LIBRARY_PATH is not set: no warning from mpirun about it */
TEST(dist_mpirun_example_script_runs_without_warnings) {
    char mr[200], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    int rc = th_run("env -u LD_LIBRARY_PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 "
                    "scripts/mpirun-example.sh 2 --model=trivial --device=cpu --batch_size=2 --num_batches=2 --nstep_burnin=0",
                    &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Num ranks:   2\n") && !strstr(o, "could not find environment variable") &&
                  !strstr(o, "WARNING"),
              "exit %d:\n%s", rc, o);
    free(o);
}
