/* test_dist.c: data-parallel training across processes (CPU backend, Open MPI on this machine).
 * Launches the programs of tests/mpi/ and ./nvcnn under mpirun. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "gpu.h"
#include "harness.h"
#include "io/image.h"
#include "models.h"
#include "testutil.h"
#include "util.h"

/* The tests of two ranks that check what the ranks compute, not how fast, take 1 core: a whole run
 * measured 0.5-0.9 CPU seconds per second of each (mpirun's start and the ranks' waits), so
 * beside another test their 2 ranks share the cores without slowing either much.
 * mpirun(): tu_mpirun (or NULL: skip). */
static const char *mpirun(int np, char *buf, size_t n) { return tu_mpirun(np, buf, n); }

static const char *build_dir(void) {
    const char *b = getenv("NVCNN_BUILD");
    return b && *b ? b : "build";
}

/* alone: up to 4 ranks. The other tests here keep 2 cores busy (2 ranks). */
TEST_SERIAL(dist_bucketed_average_of_known_values_is_exact) {
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

TEST_CORES(dist_two_ranks_stay_identical_and_equal_one_process, 1) {
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

/* Started on its own (no launcher's variables), nvcnn is one rank without MPI: it runs where MPI
 * cannot start (a pml that does not exist makes Open MPI's MPI_Init fail), and the same run with a
 * launcher's variable set (srun's SLURM_PROCID) initialises MPI and fails there, which shows the
 * broken setting is one MPI would have read. */
TEST(dist_nvcnn_on_its_own_runs_without_mpi) {
#ifndef NVCNN_MPI
    th_skip("no MPI in this build");
#else
    const char *run = "./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=2 --nstep_burnin=0 --num_classes=10";
    char cmd[600], *o = NULL;
    snprintf(cmd, sizeof cmd,
             "env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_RANK -u PMI_SIZE -u PMI_FD -u MPI_LOCALNRANKS -u MV2_COMM_WORLD_SIZE "
             "-u SLURM_PROCID OMPI_MCA_pml=no_such_pml %s",
             run);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "Num ranks:   1\n") && strstr(o, "\n     2     1 ") && !strstr(o, "MPI_INIT"), "exit %d:\n%s", rc,
              o);
    free(o);
    snprintf(cmd, sizeof cmd, "SLURM_PROCID=0 OMPI_MCA_pml=no_such_pml %s", run);
    rc = th_run(cmd, &o);
    /* The same command line ran above: failing here, before the header, is MPI_Init failing.
     * What Open MPI prints then varies: its help text naming the pml, or, when its singleton
     * daemon fails to pass that text on (seen in make test runs), an MPI_Init_thread error or
     * only "ORTE_ERROR_LOG: ... show_help.c" lines. */
    CHECK_MSG(rc != 0 && o && (strstr(o, "no_such_pml") || strstr(o, "MPI_Init") || strstr(o, "ORTE_ERROR_LOG")) &&
                  !strstr(o, "Num ranks:"),
              "with SLURM_PROCID set: exit %d:\n%s", rc, o);
    free(o);
#endif
}

TEST_CORES(dist_nvcnn_under_mpirun_prints_once, 1) {
    char mr[200], cmd[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    /* (a flag given twice: its warning once, from rank 0) */
    snprintf(cmd, sizeof cmd,
             "%s ./nvcnn --model=lenet --device=cpu --batch_size=4 --num_batches=3 --nstep_burnin=0 --num_classes=10 --seed=1 "
             "--seed=2",
             mr);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d\n%s", rc, o);
    const char *w = o ? strstr(o, "nvcnn: warning: --seed given twice (1, then 2): using 2\n") : NULL;
    CHECK_MSG(w && !strstr(strstr(w, "given twice") + 1, "given twice"), "%s", o);
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

TEST_CORES(dist_checkpoint_resumes_with_a_different_number_of_ranks, 1) {
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
 * backward, which needs two GPUs: with one, the MPI half runs and the test is skipped, saying so.
 * Parameters must stay bitwise identical on every rank and follow the one-process CPU run within
 * fp32's cross-backend tolerance. */
TEST_CORES(dist_gpu_ranks_stay_identical_mpi_and_nccl, 1) {
    int ngpu = tu_gpus();
    if (ngpu == 0) return;
    char mr[200], cmd[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    const char *mode[] = {"gpu-mpi", "gpu-nccl"};
    for (int k = 0; k < 2; k++) {
        if (k == 1 && !tu_need_gpus(2, "gpu-mpi passed; gpu-nccl not run: NCCL needs one GPU per rank")) break;
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
        CHECK_MSG(maxrel <= 2e-3, "%s: max relative difference %g > 2e-3:\n%s", mode[k], maxrel, o);
        tu_parity_row(k ? "lenet, 2 ranks (NCCL) vs 1 CPU process, 6 steps: parameters" : "lenet, 2 ranks (MPI) vs 1 CPU process, 6 steps: parameters",
                      "fp32", maxrel, maxrel, 2e-3);
        free(o);
        o = NULL;
    }
}

/* Two ranks on one GPU: refused with exit 2 and one line naming the node, the GPU count and the
 * task count, by default and with --allreduce=nccl; an explicit --allreduce=mpi shares the GPU on
 * purpose and averages through the host. */
TEST_CORES(dist_ranks_sharing_a_gpu_need_allreduce_mpi, 1) {
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
TEST_CORES(dist_mpirun_example_script_runs_without_warnings, 1) {
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
    /* its arguments: a usage, N a number when given (it used to hand "--model=..." to -np) */
    rc = th_run("scripts/mpirun-example.sh --help", &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "mpirun on one node with N GPUs (default 8)"), "exit %d:\n%s", rc, o);
    free(o);
    rc = th_run("scripts/mpirun-example.sh eight --model=lenet", &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "'eight': N must be a number of processes"), "exit %d:\n%s", rc, o);
    free(o);
    rc = th_run("scripts/mpirun-example.sh", &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "give nvcnn's flags, at least --model"), "exit %d:\n%s", rc, o);
    free(o);
}

/* A folder tree of two classes, 8 images each, every image one colour (32x32 PNG): any crop,
 * flip or resize of it is the same image, so the training batches do not depend on which rank
 * drew which augmentation. dir/img -> dir/rec (one shard). 0 on success. */
static int constant_colour_records(const char *dir) {
    char p[900], cmd[2200];
    snprintf(p, sizeof p, "%s/img", dir);
    mkdir(dir, 0755);
    mkdir(p, 0755);
    for (int c = 0; c < 2; c++) {
        snprintf(p, sizeof p, "%s/img/%c", dir, 'a' + c);
        mkdir(p, 0755);
        for (int i = 0; i < 8; i++) {
            uint8_t px[32 * 32 * 3], *enc;
            size_t len;
            for (int k = 0; k < 32 * 32; k++)
                for (int ch = 0; ch < 3; ch++) px[3 * k + ch] = (uint8_t)(c ? 150 + 12 * i + 30 * ch : 10 + 9 * i + 17 * ch);
            if (image_encode_png(px, 32, 32, 3, &enc, &len) != 0) return -1;
            snprintf(p, sizeof p, "%s/img/%c/%d.png", dir, 'a' + c, i);
            FILE *f = xfopen(p, "wb");
            fwrite(enc, 1, len, f);
            fclose(f);
            free(enc);
        }
    }
    snprintf(cmd, sizeof cmd, "./nvcnn-mkrecords --input_dir=%s/img --output_dir=%s/rec --shards=1", dir, dir);
    return th_run(cmd, NULL);
}

/* The parameters of checkpoint `path` of lenet (2 classes), or NULL with a failed check. */
static Net *lenet_from(const char *path) {
    Net *net = model_build_net(model_find("lenet"), 1, 2);
    net_finalize(net, 1);
    char err[512];
    CkptMeta meta;
    int rc = ckpt_load(path, "lenet", net, NULL, &meta, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", path, err);
    if (rc != 0) {
        net_free(net);
        return NULL;
    }
    return net;
}

static int count_of(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s ? strstr(s, what) : NULL; p; p = strstr(p + 1, what)) n++;
    return n;
}

/* The real program on two GPUs with NCCL: two ranks of ./nvcnn --device=gpu --allreduce=nccl,
 * each on a GPU of its own, train lenet on real data (shards read by rank, pinned batches). Both
 * ranks train (--verbose: each prints its summary), the summary names NCCL, and the checkpoint
 * equals bit for bit the one of the same run averaged through the host (--allreduce=mpi: for two
 * ranks the average is a + b halved, exact whichever order), and, within rounding, the one of a single process with the
 * total batch of 8 (ranks r of 2 read records r, r + 2, ...: the same 8 images per step). Buckets
 * of 1 MiB: lenet's 6.4 MiB of gradients go in 7 NCCL calls, launched as backward reaches them.
 * Equal bits from two runs need --deterministic: each run chooses its own algorithms, and cuDNN's
 * non-deterministic ones (atomics) change the bits from call to call; on the emulated device the
 * runs have seeds of their own (NVCNN_EMU_SEED: Find's timings, the atomics' orders), as two runs
 * on a GPU do. */
TEST_CORES(dist_gpu_nvcnn_nccl_equals_mpi_and_one_process, 1) {
    if (!tu_need_gpus(2, "NCCL needs one GPU per rank")) return;
    char mr[200], cmd[2600], dir[600], common[1000], path[3][800], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(dir, sizeof dir, "%s/nccl-e2e", th_tmpdir());
    int rc = constant_colour_records(dir);
    CHECK_MSG(rc == 0, "making the records: exit %d", rc);
    if (rc != 0) return;
    snprintf(common, sizeof common,
             "./nvcnn --model=lenet --device=gpu --data_dir=%s/rec --num_classes=2 --num_batches=4 --shuffle_buffer=0 "
             "--display_every=1 --nstep_burnin=0 --noeval --bucket_mb=1 --deterministic",
             dir);
    static const char *const name[3] = {"nccl", "mpi", "one"};
    for (int k = 0; k < 3; k++) {
        if (k < 2)
            snprintf(cmd, sizeof cmd, "%s -x NVCNN_EMU_SEED=%d %s --batch_size=4 --allreduce=%s --verbose --log_dir=%s/%s", mr, 31 + k, common,
                     name[k], dir, name[k]);
        else
            snprintf(cmd, sizeof cmd, "NVCNN_EMU_SEED=33 %s --batch_size=8 --log_dir=%s/%s", common, dir, name[k]);
        rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0, "%s: exit %d\n%s", name[k], rc, o ? o : "");
        if (k < 2) {
            char want[64];
            snprintf(want, sizeof want, "allreduce on (%s)", name[k]);
            CHECK_MSG(o && strstr(o, "Num ranks:   2\n") && strstr(o, want), "%s: want 2 ranks and '%s' in:\n%s", name[k], want,
                      o ? o : "");
            /* --verbose: every rank prints its own header and summary */
            CHECK_MSG(count_of(o, "Images/sec: ") == 2 && count_of(o, want) == 2, "%s: not both ranks trained:\n%s", name[k],
                      o ? o : "");
            /* NCCL's steps run as a CUDA Graph, inside which backward is not timed: the line says so
             * (it once counted the first, uncaptured step's backward for every step); MPI averages
             * through the host, without the graph, and is timed */
            const char *timing = k == 0 ? "Backward: not timed (the steps ran as one CUDA Graph" : " ms/step; allreduce on (mpi): ";
            CHECK_MSG(o && strstr(o, timing), "%s: want '%s' in:\n%s", name[k], timing, o ? o : "");
        }
        free(o);
        o = NULL;
        snprintf(path[k], sizeof path[k], "%s/%s/ckpt-4.nvcnn", dir, name[k]);
    }
    size_t la = 0, lb = 0;
    uint8_t *a = tu_read_file(path[0], &la), *b = tu_read_file(path[1], &lb);
    CHECK_MSG(a && b && la == lb && memcmp(a, b, la) == 0, "the checkpoints of --allreduce=nccl and --allreduce=mpi differ (%zu and %zu bytes)",
              la, lb);
    free(a), free(b);
    Net *two = lenet_from(path[0]), *one = lenet_from(path[2]);
    if (two && one) {
        double maxrel = 0;
        for (size_t i = 0; i < one->params_total; i++) {
            double x = two->params[i], y = one->params[i];
            maxrel = tu_worse(maxrel, fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), 1e-2));
        }
        printf("    2 ranks (NCCL) vs 1 process with the total batch: max relative difference %.2e\n", maxrel);
        CHECK_MSG(maxrel <= 1e-5, "max relative difference %g > 1e-5", maxrel);
        tu_parity_row("./nvcnn lenet, 2 ranks (NCCL) vs 1 process, 4 steps: parameters", "fp32", maxrel, maxrel, 1e-5);
    }
    net_free(two), net_free(one);
}

/* A run on --data_dir resumes with the checkpoint's images a step (--batch_size x ranks), on any
 * number of ranks: another size would count the place in the data, the epochs and the learning
 * rate in steps of another size from the checkpoint's step (it used to go on silently, its
 * --num_epochs no longer honoured): refused, saying what would work. */
TEST_CORES(dist_resume_keeps_the_checkpoints_images_a_step, 1) {
    char mr[200], cmd[1600], dir[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    CHECK(tu_band_set(dir, sizeof dir, "resume-batch", 80, 10, 10) == 0);
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --display_every=1 --noeval";
    snprintf(cmd, sizeof cmd, "%s --batch_size=10 --num_batches=3 --data_dir=%s --log_dir=%s/log", common, dir, dir);
    CHECK(th_run(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "%s --batch_size=20 --num_batches=6 --data_dir=%s --log_dir=%s/log", common, dir, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o &&
                  strstr(o, "ckpt-3.nvcnn trained 10 images a step (1 rank), this run's step is 20 (1 rank x --batch_size=20)") &&
                  strstr(o, "resume with 10 images a step (--batch_size=10 on this run's 1 rank)"),
              "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s %s --batch_size=20 --num_batches=6 --data_dir=%s --log_dir=%s/log", mr, common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "resume with 10 images a step (--batch_size=5 on this run's 2 ranks)"), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "%s %s --batch_size=5 --num_batches=6 --data_dir=%s --log_dir=%s/log", mr, common, dir, dir);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "at step 3\n") && strstr(o, "the data order continues from image 30)"), "exit %d:\n%s", rc, o);
    free(o);
}

/* Each rank keeps a moving average of its loss and the rows show their mean: a run of 2 ranks
 * stopped at step 6 and resumed gives the rows of one that did not stop (the checkpoint keeps
 * the ranks' mean; it used to keep rank 0's own, which every rank then resumed from). A constant
 * learning rate (--lr_poly_power=0) makes runs of 6 and of 12 steps train alike. */
TEST_CORES(dist_two_ranks_resume_their_logged_loss_average, 1) {
    char mr[200], cmd[1600], dir[600];
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(dir, sizeof dir, "%s/resume-avg", th_tmpdir());
    const char *common = "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=8 --display_every=1 --lr_poly_power=0 "
                         "--learning_rate=0.05";
    snprintf(cmd, sizeof cmd, "%s %s --num_batches=12 --log_dir=%s/straight", mr, common, dir);
    CHECK(th_run(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "%s %s --num_batches=6 --log_dir=%s/stopped", mr, common, dir);
    CHECK(th_run(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "%s %s --num_batches=12 --log_dir=%s/stopped", mr, common, dir);
    CHECK(th_run(cmd, NULL) == 0);
    double loss[2][13];
    for (int k = 0; k < 2; k++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s/metrics.csv", dir, k ? "stopped" : "straight");
        char *m = (char *)tu_read_file(p, NULL);
        for (int s = 1; s <= 12; s++) {
            char row[32];
            snprintf(row, sizeof row, "\n%d,,", s);
            const char *at = m ? strstr(m, row) : NULL;
            loss[k][s] = at ? atof(at + strlen(row)) : NAN;
        }
        free(m);
    }
    for (int s = 7; s <= 12; s++)
        CHECK_MSG(fabs(loss[0][s] - loss[1][s]) <= 1e-5 * fabs(loss[0][s]), "step %d: loss average %.6g uninterrupted, %.6g resumed", s,
                  loss[0][s], loss[1][s]);
}

/* SIGTERM that reaches one rank other than 0 (Slurm signals the tasks of different nodes with
 * some skew): every rank stops after the same step with the checkpoint, and rank 0's line names
 * the signal that the other rank got. It used to say "Received a stop signal", which the batch
 * script's requeue pattern (scripts/slurm/nvcnn.sbatch: "Received SIG...") does not match: the
 * job ended unfinished, not requeued. */
TEST_CORES(dist_a_stop_signal_on_one_rank_is_named_by_rank_0, 1) {
    char mr[200], cmd[2000], dir[600], *o = NULL;
    if (!mpirun(2, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    snprintf(dir, sizeof dir, "%s/one-rank-signal", th_tmpdir());
    const char *sig[] = {"TERM", "INT"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "d=%s; rm -rf $d; mkdir -p $d; %s sh -c 'echo $$ > '$d'/pid.$OMPI_COMM_WORLD_RANK; exec ./nvcnn --model=lenet "
                 "--device=cpu --num_classes=10 --batch_size=2 --num_batches=100000 --display_every=1 --nstep_burnin=0 "
                 "--log_dir='$d'/log' > $d/out 2>&1 & p=$!; for i in $(seq 1200); do grep -q '^     3 ' $d/out && break; sleep 0.05; "
                 "done; kill -%s $(cat $d/pid.1); wait $p; rc=$?; cat $d/out; exit $rc",
                 dir, mr, sig[k]);
        const int rc = th_run(cmd, &o);
        char want[800];
        snprintf(want, sizeof want, "\nReceived SIG%s: checkpoint written to %s/log/ckpt-", sig[k], dir);
        const char *said = o ? strstr(o, want) : NULL;
        CHECK_MSG(rc == 0 && said && strstr(said, "; exiting\n") && !strstr(o, "a stop signal"), "SIG%s to rank 1: exit %d:\n%s",
                  sig[k], rc, o);
        free(o);
    }
}

/* Ranks given different flags (a per-node script, a node-local copy of other data) used to hang
 * until --step_timeout in a collective that never matched (another --num_batches, another data
 * set), abort inside MPI (another --num_classes: MPI_ERR_TRUNCATE), or train on wrong figures
 * (another --batch_size: the header's total was rank 0's times the ranks). Now: one line from the
 * lowest rank that differs, naming the flag and both values, and exit 2 before anything runs; the
 * flags that may differ (a node's own paths and resources) still may. */
TEST_CORES(dist_ranks_given_different_flags_are_refused, 1) {
    char mr[200], cmd[2400], a[600], b[600], *o = NULL;
    if (!mpirun(3, mr, sizeof mr)) {
        th_skip("no MPI in this build or no mpirun");
        return;
    }
    CHECK(tu_band_set(a, sizeof a, "ranks-data-a", 40, 10, 10) == 0);
    CHECK(tu_band_set(b, sizeof b, "ranks-data-b", 30, 10, 10) == 0);
    /* rank 2's extra flags, and what rank 2's line must say (NULL: the run goes on) */
    const char *cases[][2] = {
        {"--batch_size=8", "nvcnn: error: the ranks were given different flags: rank 2 has --batch_size=8, rank 0 --batch_size=4; "},
        {"--num_classes=20", "rank 2 has --num_classes=20, rank 0 --num_classes=10; every rank needs the same flags (only "},
        {"--noeval", "rank 2 has --noeval given, rank 0 --noeval left out; "},
        {"--display_every=10", "rank 2 has --display_every=10, rank 0 --display_every=(left out: 10); "}, /* (its rows' pace: collectives) */
        {"--learning_rate=0.001", "rank 2 has --learning_rate=0.001, rank 0 --learning_rate=(left out: model default); "},
        {"--data_dir=B", "nvcnn: error: rank 2's --data_dir=B holds 30 training records, rank 0's 40: every rank needs the same data set"},
        {"--bogus-flag", "nvcnn: error: unknown flag --bogus-flag (see --help)"}, /* rank 2's own: said (it was silent) */
        {"--input_threads=1 --shuffle_buffer=7 --step_timeout=300", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char extra[700], want[900];
        snprintf(extra, sizeof extra, "%s", cases[k][0]);
        char *p = strstr(extra, "=B");
        if (p) snprintf(p, sizeof extra - (size_t)(p - extra), "=%s", b);
        snprintf(cmd, sizeof cmd,
                 "%s sh -c 'x=; [ $OMPI_COMM_WORLD_RANK = 2 ] && x=\"%s\"; exec ./nvcnn --model=lenet --device=cpu --num_classes=10 "
                 "--batch_size=4 --num_batches=2 --data_dir=%s $x'",
                 mr, extra, a);
        const int rc = th_run(cmd, &o);
        if (!cases[k][1]) {
            CHECK_MSG(rc == 0 && o && strstr(o, "Validation Top-1: "), "'%s' on rank 2: exit %d:\n%s", extra, rc, o);
        } else {
            snprintf(want, sizeof want, "%s", cases[k][1]);
            p = strstr(want, "=B ");
            if (p) {
                char rest[900];
                snprintf(rest, sizeof rest, "%s", p + 2);
                snprintf(p, sizeof want - (size_t)(p - want), "=%s%s", b, rest);
            }
            const char *e = o ? strstr(o, "nvcnn: error: ") : NULL;
            CHECK_MSG(rc == 2 && o && strstr(o, want) && e && !strstr(e + 1, "nvcnn: error: ") && !strstr(o, "Model:"),
                      "'%s' on rank 2: exit %d, want one line with '%s':\n%s", extra, rc, want, o);
        }
        free(o);
    }
}

/* A task that a launcher started as one of several, that MPI nonetheless sees alone (srun without
 * the PMI this MPI needs: each task an MPI world of its own, training alone and unaware of the
 * others): said (it ran without a word). One process with no such variables says nothing. */
TEST(dist_a_lone_task_of_several_is_said) {
#ifndef NVCNN_MPI
    th_skip("no MPI in this build");
#else
    const char *cases[][2] = {
        {"SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=3", "nvcnn: warning: SLURM_STEP_NUM_TASKS=3 says the launcher started 3 tasks, but MPI sees one rank"},
        {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1", "nvcnn: warning: OMPI_COMM_WORLD_SIZE=2 says the launcher started 2 tasks"},
        {"", NULL},
    };
    for (int k = 0; k < 3; k++) {
        char cmd[800], *o = NULL;
        snprintf(cmd, sizeof cmd, "env %s ./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=1 2>&1", cases[k][0]);
        const int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 0 && o && (cases[k][1] ? strstr(o, cases[k][1]) != NULL : !strstr(o, "warning")), "'%s': exit %d:\n%s", cases[k][0], rc, o);
        free(o);
    }
#endif
}
