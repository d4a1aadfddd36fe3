/* test_slurm.c: scripts/slurm/nvcnn.sbatch under a real Slurm (slurmctld, slurmd, munged from
 * Debian's packages), each scenario on a fresh one-node cluster on this machine that
 * tests/slurm/run.sh starts and stops (tests/slurm/cluster.sh). The CPU backend stands in for
 * GPUs. Checked here: the jobs' states and exit codes as Slurm reports them, their output files,
 * and for preemption the step rows of both runs and the final checkpoint against an
 * uninterrupted run's, read back with ckpt_load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "harness.h"
#include "models.h"
#include "scenario.h"
#include "testutil.h"

/* Runs tests/slurm/run.sh SCENARIO into th_tmpdir()/slurm-SCENARIO (dir); 0 on success, with its
 * output in *out (malloc'd, never NULL). */
static int scenario(const char *name, char *dir, size_t n, char **out) {
    return sc_scenario("tests/slurm/run.sh", "slurm", name, dir, n, out);
}

/* Each test here starts a cluster's daemons (on ports picked at random) and runs 2 tasks that mostly
 * wait for them: one at a time, and not beside the two-host tests (the group "cluster", as in
 * test_hosts.c), but beside the other tests, without a core of their own (measured: 2.3 CPU
 * seconds in 7 s, 0.9 in 2.7 s and 0.9 in 8.2 s for this one, the next and the GPU refusal). */
TEST_IN_GROUP(slurm_sbatch_two_tasks_run_to_the_end, 0, 0, "cluster") {
    const char *why = sc_no_slurm();
    if (why) {
        th_skip(why);
        return;
    }
    char dir[700], *o = NULL;
    int rc = scenario("sbatch", dir, sizeof dir, &o);
    CHECK_MSG(rc == 0, "run.sh exit %d:\n%s", rc, o);
    const char *launcher[] = {"sbatch", "mpirun"}; /* srun with PMIx, then LAUNCHER=mpirun */
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s.out", launcher[k]);
        char *t = sc_slurp(dir, name);
        CHECK_MSG(sc_job_is(o, launcher[k], "COMPLETED", "0:0", 0), "%s:\n%s\n%s", launcher[k], o, t);
        CHECK_MSG(strstr(t, "nvcnn.sbatch: job ") && strstr(t, "tasks: 2,"), "%s", t);
        /* rank 0 alone prints: one header, one summary */
        CHECK_MSG(sc_count(t, "Num ranks:   2\n") == 1 && sc_count(t, "Num ranks:") == 1, "%s", t);
        CHECK_MSG(sc_count(t, "\nImages/sec: ") == 1, "%s", t);
        CHECK(strstr(t, "allreduce on (mpi)") != NULL);
        free(t);
    }
    free(o);
}

TEST_IN_GROUP(slurm_srun_two_tasks_with_the_scripts_pmi, 0, 0, "cluster") {
    const char *why = sc_no_slurm();
    if (why) {
        th_skip(why);
        return;
    }
    char dir[700], *o = NULL;
    int rc = scenario("srun", dir, sizeof dir, &o);
    char *t = sc_slurp(dir, "srun.out");
    CHECK_MSG(rc == 0 && strstr(o, "job srun: JobState=- ExitCode=0:0 "), "run.sh exit %d:\n%s\n%s", rc, o, t);
    CHECK_MSG(sc_count(t, "Num ranks:   2\n") == 1 && sc_count(t, "\nImages/sec: ") == 1, "%s", t);
    const char *l = strstr(o, "(srun --mpi=");
    if (l) printf("    %.*s\n", (int)strcspn(l, "\n"), l);
    free(t);
    free(o);
}

/* the preempt scenario's --num_batches (tests/slurm/run.sh) */
#define PREEMPT_STEPS 10

/* Loads dir/ckpt-PREEMPT_STEPS.nvcnn (see sc_load_lenet); 0 on success. */
static int load_final(const char *dir, uint64_t seed, Net **net, float **velocity, CkptMeta *m) {
    char p[1400];
    snprintf(p, sizeof p, "%s/ckpt-%d.nvcnn", dir, PREEMPT_STEPS);
    return sc_load_lenet(p, seed, net, velocity, m);
}

/* Waits for Slurm (its requeues) and computes: its jobs train 40 steps of two tasks (0.3-0.7 s a
 * step), about 70 of the CPU seconds it takes in its 65 s on 2 idle cores (with 16 steps a job: 120
 * in 86 s). It runs beside the other tests without a core of its own. */
TEST_IN_GROUP(slurm_preempted_job_requeues_resumes_and_equals_an_uninterrupted_run, 0, 0, "cluster") {
    const char *why = sc_no_slurm();
    if (why) {
        th_skip(why);
        return;
    }
    const int N = PREEMPT_STEPS;
    char dir[700], *o = NULL;
    int rc = scenario("preempt", dir, sizeof dir, &o);
    CHECK_MSG(rc == 0, "run.sh exit %d:\n%s", rc, o);
    long rows[64];
    char *t = sc_slurp(dir, "ref.out");
    CHECK_MSG(sc_job_is(o, "ref", "COMPLETED", "0:0", 0), "%s\n%s", o, t);
    int n = sc_step_rows(t, rows, NULL, 64);
    CHECK_MSG(n == N && rows[0] == 1 && rows[N - 1] == N, "uninterrupted run: %d rows\n%s", n, t);
    free(t);

    Net *ref = NULL;
    float *ref_v = NULL;
    CkptMeta ref_m;
    char sub[800];
    snprintf(sub, sizeof sub, "%s/ref", dir);
    if (load_final(sub, 1, &ref, &ref_v, &ref_m) != 0 || ref_m.step != N) {
        CHECK_MSG(0, "the uninterrupted run has no final checkpoint at step %d", N);
        net_free(ref);
        free(ref_v);
        free(o);
        return;
    }

    /* scancel --signal=TERM, scontrol requeue, preemption by a job of a higher partition */
    const char *how[] = {"scancel", "requeue", "preempt"};
    CHECK_MSG(sc_job_is(o, "high", "COMPLETED", "0:0", 0), "the preempting job:\n%s", o);
    for (int k = 0; k < 3; k++) {
        char name[32], want[1200];
        snprintf(name, sizeof name, "%s.out", how[k]);
        t = sc_slurp(dir, name);
        /* Slurm ran the job twice: the second time it ended with exit 0 */
        CHECK_MSG(sc_job_is(o, how[k], "COMPLETED", "0:0", 1), "%s: %s\n%s", how[k], o, t);
        CHECK_MSG(strstr(t, ", restart 0,") && strstr(t, ", restart 1,"), "%s", t);
        /* the first run stopped on SIGTERM with a checkpoint at step s, the second resumed from it */
        snprintf(want, sizeof want, "Received SIGTERM: checkpoint written to %s/%s/ckpt-", dir, how[k]);
        const char *stop = strstr(t, want);
        long s = stop ? atol(stop + strlen(want)) : 0;
        CHECK_MSG(s >= 1 && s < N, "%s: no stop with a checkpoint before step %d:\n%s", how[k], N, t);
        snprintf(want, sizeof want, "Restored from checkpoint %s/%s/ckpt-%ld.nvcnn at step %ld\n", dir, how[k], s, s);
        const char *resume = strstr(t, want);
        CHECK_MSG(resume && resume > stop, "%s: want '%s' after the stop:\n%s", how[k], want, t);
        /* together the two runs trained steps 1..N, each once, in order */
        n = sc_step_rows(t, rows, NULL, 64);
        int in_order = n == N;
        for (int i = 0; i < n && in_order; i++) in_order = rows[i] == i + 1;
        CHECK_MSG(in_order, "%s: %d step rows, not 1..%d once each:\n%s", how[k], n, N, t);
        printf("    %s: stopped after step %ld of %d, requeued, resumed at step %ld: %d steps in all\n", how[k], s, N, s + 1,
               n);
        free(t);

        /* the final checkpoint: the parameters, the momentum and the data position of the
         * uninterrupted run, bit for bit */
        Net *net = NULL;
        float *v = NULL;
        CkptMeta m;
        snprintf(sub, sizeof sub, "%s/%s", dir, how[k]);
        if (load_final(sub, 2, &net, &v, &m) == 0) {
            CHECK(m.step == N && m.data_position == ref_m.data_position);
            CHECK_MSG(memcmp(net->params, ref->params, ref->params_total * sizeof(float)) == 0,
                      "%s: final parameters differ from the uninterrupted run's", how[k]);
            CHECK_MSG(memcmp(v, ref_v, ref->params_total * sizeof(float)) == 0,
                      "%s: final momentum differs from the uninterrupted run's", how[k]);
            CHECK(memcmp(m.rng, ref_m.rng, sizeof m.rng) == 0);
        } else {
            CHECK_MSG(0, "%s: no final checkpoint", how[k]);
        }
        free(v);
        net_free(net);
    }
    free(ref_v);
    net_free(ref);
    free(o);
}

TEST_IN_GROUP(slurm_gpu_job_with_more_tasks_than_gpus_is_refused, 0, 0, "cluster") {
    const char *why = sc_no_slurm();
    if (why) {
        th_skip(why);
        return;
    }
    char dir[700], host[256] = "", want[512], *o = NULL;
    int rc = scenario("gpus", dir, sizeof dir, &o);
    char *t = sc_slurp(dir, "gpus.out");
    CHECK_MSG(rc == 0 && sc_job_is(o, "gpus", "FAILED", "2:0", 0), "run.sh exit %d:\n%s\n%s", rc, o, t);
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = 0; /* hostname -s: the node's name */
    snprintf(want, sizeof want, "nvcnn.sbatch: error: node %s: 2 tasks but 1 GPU(s) for them: start one task per GPU "
             "(--ntasks-per-node=1 with --gres=gpu:1), or pass --allreduce=mpi", host);
    CHECK_MSG(strstr(t, want), "want '%s' in:\n%s", want, t);
    CHECK_MSG(sc_count(t, "error") == 1 && !strstr(t, "Num ranks"), "launched anyway:\n%s", t);
    free(t);
    /* --allreduce=mpi: sharing on purpose, so the script launches nvcnn, which runs (a GPU here)
     * or finds none (no GPU: exit 2 with its own line) */
    t = sc_slurp(dir, "shared.out");
    CHECK_MSG(!strstr(t, "nvcnn.sbatch: error") &&
                  ((sc_job_is(o, "shared", "FAILED", "2:0", 0) && strstr(t, "nvcnn: error: --device=gpu: no usable GPU")) ||
                   (sc_job_is(o, "shared", "COMPLETED", "0:0", 0) && strstr(t, "Num ranks:   2\n"))),
              "--allreduce=mpi:\n%s\n%s", o, t);
    free(t);
    free(o);
}
