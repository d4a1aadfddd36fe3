/* test_hosts.c: nvcnn across two hosts. tests/hosts/run.sh makes two hosts of this machine
 * (network, hostname and mount namespaces joined by a veth link: tests/hosts/hosts.sh), runs a
 * scenario on them and stops everything it started; these tests check what its runs left behind:
 *   tcp       mpirun over TCP, 1 and 2 ranks per host, against the same runs on one host
 *   slurm     a Slurm cluster of the two hosts: the batch script through srun and mpirun
 *   nodeloss  a host crashes under a running job: requeued, resumed, equal to an uninterrupted run
 *   deadpeer  a host crashes under plain mpirun: rank 0's watchdog ends the run (exit 5)
 *   link      the allreduce over the link shaped by tc, against docs/scaling.md's model
 * Skipped, with the reason, where the machine cannot make the hosts (no root, no namespaces) or
 * has no Slurm. Every run is lenet on the CPU backend, with Fashion-MNIST's training shards but
 * in deadpeer and link (synthetic data). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models.h"
#include "scenario.h"
#include "testutil.h"

/* Why two hosts cannot be made here, or NULL (reason: room for the machine's answer). */
static const char *no_hosts(char *reason, size_t n) {
#ifndef NVCNN_MPI
    (void)reason;
    (void)n;
    return "no MPI in this build";
#else
    if (th_run("command -v mpirun", NULL) != 0) return "no mpirun";
    if (th_run("ls data/fashion-mnist/train-* >/dev/null 2>&1", NULL) != 0) return "no data/fashion-mnist (make data)";
    char *o = NULL;
    int rc = th_run("bash -c 'source tests/hosts/hosts.sh && hosts_can_start'", &o);
    if (rc != 0) {
        snprintf(reason, n, "two hosts cannot be made on this machine: %.*s", (int)strcspn(o ? o : "", "\n"), o ? o : "");
        free(o);
        return reason;
    }
    free(o);
    return NULL;
#endif
}

/* Runs scenario NAME of tests/hosts/run.sh (its folder into dir, its output into *out) and checks
 * that the script ended well; 0 with the test skipped, and nothing run, where the machine cannot
 * make the two hosts (or has no Slurm, when the scenario needs it). */
static int host_scenario(const char *name, int needs_slurm, char *dir, size_t n, char **out) {
    char reason[300];
    const char *why = no_hosts(reason, sizeof reason);
    if (!why && needs_slurm) why = sc_no_slurm();
    if (why) {
        th_skip(why);
        return 0;
    }
    int rc = sc_scenario("tests/hosts/run.sh", "hosts", name, dir, n, out);
    CHECK_MSG(rc == 0, "run.sh exit %d:\n%s", rc, *out);
    return 1;
}

/* The script's line "run NAME: rc=R seconds=S link=B": R (or -1 when missing); S and B into
 * *seconds and *link (may be NULL). */
static int run_rc(const char *o, const char *name, double *seconds, double *link) {
    char key[64];
    snprintf(key, sizeof key, "run %s: rc=", name);
    const char *l = strstr(o, key);
    if (!l) return -1;
    int rc = atoi(l + strlen(key));
    const char *s = strstr(l, "seconds="), *b = strstr(l, "link="), *end = l + strcspn(l, "\n");
    if (seconds) *seconds = s && s < end ? atof(s + 8) : -1;
    if (link) *link = b && b < end ? atof(b + 5) : -1;
    return rc;
}

/* The loss column of the last table row of t, or "" (out: 16 bytes). */
static void last_loss(const char *t, char *out) {
    long steps[256];
    char loss[256][16];
    int n = sc_step_rows(t, steps, loss, 256);
    snprintf(out, 16, "%s", n > 0 ? loss[n - 1] : "");
}

/* dir/a and dir/b load as lenet checkpoints at step `step` with the same parameters, batch-norm
 * statistics, momentum and state, bit for bit. The logged loss average is the ranks' mean, which
 * a resumed run's ranks all go on from (each kept its own before): equal to rounding, so within
 * 1e-12 of it. */
static int same_checkpoint(const char *dir, const char *a, const char *b, long step) {
    char pa[1200], pb[1200];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    Net *na = NULL, *nb = NULL;
    float *va = NULL, *vb = NULL;
    CkptMeta ma, mb;
    int ok = sc_load_lenet(pa, 3, &na, &va, &ma) == 0 && ma.step == step && sc_load_lenet(pb, 3, &nb, &vb, &mb) == 0;
    if (ok) {
        const size_t np = na->params_total * sizeof(float), ns = na->state_total * sizeof(float);
        ok = nb->params_total == na->params_total && nb->state_total == na->state_total && !memcmp(na->params, nb->params, np) &&
             !memcmp(na->state, nb->state, ns) && !memcmp(va, vb, np) && mb.step == ma.step &&
             mb.data_position == ma.data_position && !memcmp(ma.rng, mb.rng, sizeof ma.rng) && ma.loss_scale == mb.loss_scale &&
             ma.good_steps == mb.good_steps && ma.skipped_steps == mb.skipped_steps && ma.loss_avg_weight == mb.loss_avg_weight &&
             fabs(ma.loss_avg_sum - mb.loss_avg_sum) <= 1e-12 * fabs(ma.loss_avg_sum);
        if (!ok)
            printf("    %s vs %s: loss average %.17g and %.17g\n", a, b, ma.loss_avg_sum, mb.loss_avg_sum);
    }
    net_free(na);
    net_free(nb);
    free(va);
    free(vb);
    return ok;
}

/* The bytes of lenet's fp32 gradients (10 classes): what an allreduce must move across the link
 * at least once per step in each direction. */
static double lenet_grad_bytes(void) {
    Net *net = model_build_net(model_find("lenet"), 1, 10);
    double b = 4.0 * (double)net->params_total;
    net_free(net);
    return b;
}

/* Item: mpirun over TCP across the two hosts gives the bits of the same run on one host. */
/* The tests here make the two hosts, and some a Slurm cluster on them: one at a time, and not
 * beside a test of test_slurm.c (the group "cluster": two Slurm clusters on one machine at once
 * once crashed a task in MPI_Init under srun), but beside the other tests (their ranks, up to 4,
 * mostly wait on each other and on the hosts' daemons; nothing here times them but the shaped
 * link's, which runs alone). */
TEST_IN_GROUP(hosts_mpirun_over_tcp_equals_one_host, 300, 1, "cluster") {
    char dir[700], *o = NULL;
    if (!host_scenario("tcp", 0, dir, sizeof dir, &o)) return;
    const double grads = lenet_grad_bytes(), steps = 10;
    const char *two[] = {"tcp2", "tcp4"}, *one[] = {"one2", "one4"};
    const int ranks[] = {2, 4};
    /* each rank counts its own node's cores (2) and the ranks on it: alone on a host 2 threads;
     * two on a host, or the one-host runs at 2 and 4 ranks: 1 (one2 is given 2, for equal sums) */
    const char *threads[] = {"Devices:     2 x cpu (2 threads each", "Devices:     4 x cpu (1 thread each"};
    for (int k = 0; k < 2; k++) {
        double s2, s1, link2, link1;
        int rc2 = run_rc(o, two[k], &s2, &link2), rc1 = run_rc(o, one[k], &s1, &link1);
        char n2[32], n1[32];
        snprintf(n2, sizeof n2, "%s.out", two[k]);
        snprintf(n1, sizeof n1, "%s.out", one[k]);
        char *t2 = sc_slurp(dir, n2), *t1 = sc_slurp(dir, n1);
        char head[48];
        snprintf(head, sizeof head, "Num ranks:   %d\n", ranks[k]);
        CHECK_MSG(rc2 == 0 && sc_count(t2, head) == ranks[k], "%s: exit %d\n%s\n%s", two[k], rc2, o, t2);
        CHECK_MSG(rc1 == 0 && sc_count(t1, head) == ranks[k], "%s: exit %d\n%s\n%s", one[k], rc1, o, t1);
        /* the gradients crossed the link: every step at least once from host 0 to host 1 */
        CHECK_MSG(link2 >= steps * grads, "%s: %.0f bytes over the link, want >= %.0f", two[k], link2, steps * grads);
        CHECK_MSG(link1 >= 0 && link1 < grads, "%s (one host): %.0f bytes over the link", one[k], link1);
        CHECK_MSG(sc_count(t2, threads[k]) == ranks[k], "%s: want %d x '%s' (--verbose):\n%s", two[k], ranks[k], threads[k], t2);
        /* the same losses and the same checkpoint, byte for byte */
        char l2[16], l1[16];
        last_loss(t2, l2);
        last_loss(t1, l1);
        CHECK_MSG(l2[0] && strcmp(l1, l2) == 0, "%s: final loss '%s', %s: '%s'", two[k], l2, one[k], l1);
        char a[64], b[64];
        snprintf(a, sizeof a, "%s/ckpt-10.nvcnn", two[k]);
        snprintf(b, sizeof b, "%s/ckpt-10.nvcnn", one[k]);
        CHECK_MSG(same_checkpoint(dir, a, b, 10), "%s and %s: the final checkpoints differ", a, b);
        printf("    %d ranks: two hosts %.1f s (%.0f MB over the link), one host %.1f s; final loss %s both\n", ranks[k], s2,
               link2 / 1e6, s1, l2);
        free(t1);
        free(t2);
    }
    free(o);
}

/* Item: a two-node Slurm job, through srun (PMIx) and through mpirun, equals the one-host run;
 * the threads per rank follow --cpus-per-task. */
TEST_IN_GROUP(hosts_slurm_two_node_jobs_equal_one_host, 300, 1, "cluster") {
    char dir[700], *o = NULL;
    if (!host_scenario("slurm", 1, dir, sizeof dir, &o)) return;
    char *ref = sc_slurp(dir, "one2.out"), lref[16];
    CHECK_MSG(run_rc(o, "one2", NULL, NULL) == 0, "%s\n%s", o, ref);
    last_loss(ref, lref);
    const char *jobs[] = {"srun", "mpirun"};
    for (int k = 0; k < 2; k++) {
        char name[32], l[16], a[64];
        snprintf(name, sizeof name, "%s.out", jobs[k]);
        char *t = sc_slurp(dir, name);
        CHECK_MSG(sc_job_is(o, jobs[k], "COMPLETED", "0:0", 0), "%s:\n%s\n%s", jobs[k], o, t);
        CHECK_MSG(strstr(t, "nodes: 2, tasks: 2, tasks per node: 1(x2),"), "%s", t);
        CHECK_MSG(sc_count(t, "Num ranks:   2\n") == 2, "%s: want 2 headers (--verbose):\n%s", jobs[k], t);
        CHECK_MSG(sc_count(t, "Devices:     2 x cpu (2 threads each") == 2, "%s:\n%s", jobs[k], t);
        last_loss(t, l);
        CHECK_MSG(l[0] && strcmp(l, lref) == 0, "%s: final loss '%s', one host: '%s'", jobs[k], l, lref);
        snprintf(a, sizeof a, "%s/ckpt-10.nvcnn", jobs[k]);
        CHECK_MSG(same_checkpoint(dir, a, "one2/ckpt-10.nvcnn", 10), "%s: its final checkpoint differs from one host's", jobs[k]);
        free(t);
    }
    /* --cpus-per-task=1 on nodes of 2 CPUs, which this cluster does not bind: 1 thread per rank */
    char *t = sc_slurp(dir, "cpt1.out");
    CHECK_MSG(sc_job_is(o, "cpt1", "COMPLETED", "0:0", 0) && sc_count(t, "Devices:     2 x cpu (1 thread each") == 2,
              "--cpus-per-task=1:\n%s\n%s", o, t);
    const char *ts = strstr(o, "time srun: "), *tm = strstr(o, "time mpirun: ");
    double one = -1;
    run_rc(o, "one2", &one, NULL);
    printf("    srun and mpirun across the two nodes: final loss %s, checkpoint equal to one host's\n"
           "    one host (mpirun) %.1f s; %.*s; %.*s\n",
           lref, one, ts ? (int)strcspn(ts, "\n") : 0, ts ? ts : "", tm ? (int)strcspn(tm, "\n") : 0, tm ? tm : "");
    free(t);
    free(ref);
    free(o);
}

/* The CSV's step column, in order (metrics.csv: step,epoch,...). */
static int csv_steps(const char *t, long *steps, int max) {
    int n = 0;
    for (const char *l = strchr(t, '\n'); l && l[1] && n < max; l = strchr(l + 1, '\n')) steps[n++] = atol(l + 1);
    return n;
}

/* 1 when directory `path` exists and holds no file. */
static int empty_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

/* Item: a node lost mid-run: Slurm (or, with --step_timeout, the batch script) requeues the job,
 * which resumes from the last checkpoint and ends with the uninterrupted run's checkpoint; what
 * the first run wrote is still there, and nothing is left in the job's TMPDIR. */
/* This one mostly waits for Slurm to find the node lost (SlurmdTimeout=10, then the requeue: of
 * its 75-90 s, its jobs compute for about 70 steps of 0.2 s on 2 ranks), checks no time, and runs
 * beside the other tests without a core of its own (its steps, slower there, stay far within
 * --step_timeout=5). */
TEST_IN_GROUP(hosts_slurm_node_lost_job_resumes_and_equals_an_uninterrupted_run, 400, 0, "cluster") {
    const long N = 16;
    char dir[700], *o = NULL;
    if (!host_scenario("nodeloss", 1, dir, sizeof dir, &o)) return;
    CHECK_MSG(run_rc(o, "ref", NULL, NULL) == 0, "the uninterrupted run:\n%s", o);
    const char *jobs[] = {"lost", "lostwd"};
    for (int k = 0; k < 2; k++) {
        char name[64], want[1200], sub[800];
        snprintf(name, sizeof name, "%s.out", jobs[k]);
        char *t = sc_slurp(dir, name);
        /* the harness requeues once more a restarted run that died inside MPI_Init (Open MPI's
         * TCP transport, tests/hosts/run.sh): that run printed no line of nvcnn's */
        char crash[160];
        snprintf(crash, sizeof crash, "lost %s: a task of the restarted run died inside MPI_Init", jobs[k]);
        const int init_crash = strstr(o, crash) != NULL;
        CHECK_MSG(sc_job_is(o, jobs[k], "COMPLETED", "0:0", 1 + init_crash), "%s: %s\n%s", jobs[k], o, t);
        const char *second = strstr(t, ", restart 1,");
        CHECK_MSG(strstr(t, ", restart 0,") && second, "%s", t);
        if (!second) {
            free(t);
            continue;
        }
        /* the first run's last checkpoint, and the second run resuming from it */
        char *first = strndup(t, (size_t)(second - t));
        snprintf(want, sizeof want, "Checkpoint written to %s/%s/ckpt-", dir, jobs[k]);
        long s = sc_last_number_after(first, want);
        CHECK_MSG(s >= 1 && s < N, "%s: no checkpoint before the crash:\n%s", jobs[k], first);
        snprintf(want, sizeof want, "Restored from checkpoint %s/%s/ckpt-%ld.nvcnn at step %ld\n", dir, jobs[k], s, s);
        CHECK_MSG(strstr(second, want), "%s: want '%s' in the second run:\n%s", jobs[k], want, second);
        /* the second run trained steps s+1..N once each, in order */
        long rows[64];
        int n = sc_step_rows(second, rows, NULL, 64), in_order = n == N - s;
        for (int i = 0; i < n && in_order; i++) in_order = rows[i] == s + 1 + i;
        CHECK_MSG(in_order, "%s: the second run's rows are not %ld..%ld:\n%s", jobs[k], s + 1, N, second);
        if (k == 1) /* --step_timeout=5: rank 0 ended itself, naming the phase */
            CHECK_MSG(strstr(first, "(--step_timeout=5): a peer rank is lost or stalled; exiting with code 5\n"),
                      "%s: no watchdog line:\n%s", jobs[k], first);
        /* what the first run wrote is there: metrics.csv holds its rows 1..k (k >= s: the steps
         * after the checkpoint, trained again), then the second run's s+1..N; its event file */
        snprintf(sub, sizeof sub, "%s/%s", dir, jobs[k]);
        char *csv = sc_slurp(sub, "metrics.csv");
        long cs[128];
        int nc = csv_steps(csv, cs, 128), split = nc - (int)(N - s), rows_ok = split >= s;
        for (int i = 0; i < nc && rows_ok; i++) rows_ok = cs[i] == (i < split ? i + 1 : s + 1 + (i - split));
        CHECK_MSG(rows_ok, "%s: metrics.csv steps are not 1..(>= %ld), then %ld..%ld:\n%s", jobs[k], s, s + 1, N, csv);
        free(csv);
        snprintf(want, sizeof want, "ls %s/events.out.tfevents.* | wc -l", sub);
        char *nev = NULL;
        th_run(want, &nev);
        CHECK_MSG(nev && atoi(nev) == 2, "%s: want the event files of both runs, found %s", jobs[k], nev ? nev : "?");
        free(nev);
        /* the final checkpoint is the uninterrupted run's, byte for byte */
        snprintf(want, sizeof want, "%s/ckpt-%ld.nvcnn", jobs[k], N);
        char refck[64];
        snprintf(refck, sizeof refck, "ref/ckpt-%ld.nvcnn", N);
        CHECK_MSG(same_checkpoint(dir, want, refck, N), "%s: its final checkpoint differs from the uninterrupted run's", jobs[k]);
        /* the batch script left nothing in the job's TMPDIR, though the first run was killed */
        snprintf(sub, sizeof sub, "%s/%s.tmp", dir, jobs[k]);
        CHECK_MSG(empty_dir(sub), "%s: files left in the job's TMPDIR %s", jobs[k], sub);
        snprintf(want, sizeof want, "lost %s: ", jobs[k]);
        const char *l = strstr(o, want);
        printf("    %s: crashed after the checkpoint at step %ld; %.*s\n", jobs[k], s, l ? (int)strcspn(l, "\n") : 0, l ? l : "");
        free(first);
        free(t);
    }
    free(o);
}

/* Item: no hang on a dead peer under plain mpirun: host 1 crashes mid-run; rank 0's watchdog
 * ends the run with one line naming the phase and the rank, mpirun exits 5, and the last
 * checkpoint is whole. Mostly waits (for the watchdog and TCP: 10 CPU seconds in 25 s), so it
 * runs beside the other tests without a core of its own; its one time limit (mpirun's end within
 * 60 s of the crash, about 13 s here) leaves room for a busy machine. */
TEST_IN_GROUP(hosts_mpirun_dead_peer_ends_rank_0_with_exit_5, 300, 0, "cluster") {
    char dir[700], *o = NULL;
    if (!host_scenario("deadpeer", 0, dir, sizeof dir, &o)) return;
    double seconds = -1;
    int mrc = run_rc(o, "deadpeer", &seconds, NULL);
    char *t = sc_slurp(dir, "deadpeer.out");
    CHECK_MSG(mrc == 5, "mpirun exit %d (want 5, the watchdog's):\n%s\n%s", mrc, o, t);
    CHECK_MSG(seconds > 0 && seconds < 60, "mpirun ended %.1f s after the crash", seconds);
    /* one error line: rank 0, the phase, the step, the timeout, the exit code */
    const char *e = strstr(t, "nvcnn: error: ");
    CHECK_MSG(e && sc_count(t, "nvcnn: error: ") == 1, "want one error line:\n%s", t);
    char line[512] = "";
    if (e) snprintf(line, sizeof line, "%.*s", (int)strcspn(e, "\n"), e);
    long stalled = sc_last_number_after(line, "of gradient bucket 1 of 1 at step ");
    CHECK_MSG(strncmp(line, "nvcnn: error: rank 0 on ", 24) == 0 && strstr(line, ": no progress for ") && stalled > 0 &&
                  strstr(line, " s in the allreduce of gradient bucket 1 of 1 at step ") &&
                  strstr(line, " (--step_timeout=5): a peer rank is lost or stalled; exiting with code 5"),
              "the watchdog's line: '%s'", line);
    /* the last checkpoint written is whole (its CRC holds) and precedes the stalled step */
    char want[900], path[1200];
    snprintf(want, sizeof want, "Checkpoint written to %s/deadpeer/ckpt-", dir);
    long s = sc_last_number_after(t, want);
    snprintf(path, sizeof path, "%s/deadpeer/ckpt-%ld.nvcnn", dir, s);
    Net *net = NULL;
    float *v = NULL;
    CkptMeta m;
    CHECK_MSG(s >= 1 && sc_load_lenet(path, 3, &net, &v, &m) == 0 && m.step == s, "the last checkpoint (step %ld)", s);
    CHECK_MSG(stalled > s, "stalled at step %ld, last checkpoint at step %ld", stalled, s);
    net_free(net);
    free(v);
    char cmd[1200], *ls = NULL;
    snprintf(cmd, sizeof cmd, "ls -A %s/deadpeer | grep -c tmp", dir);
    th_run(cmd, &ls);
    CHECK_MSG(ls && atoi(ls) == 0, "a temporary checkpoint was left in %s/deadpeer", dir);
    free(ls);
    printf("    %s\n    mpirun exit %d, %.1f s after the crash; last checkpoint (step %ld) whole\n", line, mrc, seconds, s);
    free(t);
    free(o);
}

/* nvcnn's end-of-run line "Backward: B ms/step; allreduce on (mpi): E ms/step exposed ...": B and
 * E into *bwd and *exposed; 0 when t has no such line. */
static int allreduce_line(const char *t, double *bwd, double *exposed) {
    const char *l = strstr(t, "Backward: ");
    return l && sscanf(l, "Backward: %lf ms/step; allreduce on (mpi): %lf ms/step exposed", bwd, exposed) == 2;
}

/* docs/scaling.md's model (scripts/scaling_model.sh) for 2 ranks, one per host: the whole
 * allreduce of grad_mb MB in buckets of 25 MB over gbps GB/s, and the time it leaves exposed
 * after a backward of bwd ms, with the CPU backend's contention (0.35); 0 when it cannot run. */
static int model(double bwd, double grad_mb, double gbps, double *whole, double *exposed) {
    char cmd[300], *o = NULL;
    snprintf(cmd, sizeof cmd, "bash scripts/scaling_model.sh %.3f %.3f %.4f 25 370 %.6f 1 10 0.35 2 | tail -1", bwd, bwd,
             grad_mb, gbps);
    int n = th_run(cmd, &o) == 0 && o && sscanf(o, "%*d %*f GB/s %lf %*f %lf ms", whole, exposed) == 2;
    free(o);
    return n;
}

/* Item: the allreduce over a real link, measured against the model. The link between the hosts
 * is shaped by tc's token bucket (tbf) to 100 and 50 Mbit/s: far below what the hosts move on
 * the bare link, so the link sets the pace. lenet's gradients are one bucket, sent when backward
 * ends, so the exposed time per step is the whole allreduce. The model's bandwidth is the
 * link's payload: tbf counts each frame whole, 1514 bytes for 1448 of TCP payload (MTU 1500, TCP
 * timestamps). No latency point: a delay needs netem, which this machine's kernel lacks (tbf's
 * own latency only bounds its queue); the test prints what tc says. Skipped where the kernel has
 * no tbf. Bounds from 12 runs at load averages of 2 to 7 (other builds, and in some 4 busy loops
 * besides): measured/model 0.98 to 1.26 (1.49 at 200 Mbit/s under the heaviest load), where
 * tbf's burst lets at most 4% through early and a loaded host stalls the link now and then; the
 * 50 Mbit/s time 1.76 to 2.26 times 100's. */
TEST_WITH(hosts_shaped_link_allreduce_time_matches_the_model, 300, TH_ALONE) {
    char dir[700], *o = NULL;
    if (!host_scenario("link", 0, dir, sizeof dir, &o)) return;
    const char *notbf = strstr(o, "tbf: no: ");
    if (notbf) {
        char why[300];
        snprintf(why, sizeof why, "no tc tbf in this kernel: %.*s", (int)strcspn(notbf + 9, "\n"), notbf + 9);
        th_skip(why);
        free(o);
        return;
    }
    const double grad_mb = lenet_grad_bytes() / 1e6, steps = 6, payload = 1448.0 / 1514.0;
    const char *names[] = {"bare", "link100", "link50"};
    const double mbit[] = {0, 100, 50};
    double bwd[3] = {0}, exp_[3] = {0};
    for (int k = 0; k < 3; k++) {
        double s, link;
        int rc = run_rc(o, names[k], &s, &link);
        char f[32];
        snprintf(f, sizeof f, "%s.out", names[k]);
        char *t = sc_slurp(dir, f);
        CHECK_MSG(rc == 0 && allreduce_line(t, &bwd[k], &exp_[k]) && strstr(t, " exposed (after backward), 1 bucket(s) of "),
                  "%s: exit %d, want the allreduce line of one bucket:\n%s\n%s", names[k], rc, o, t);
        /* the gradients crossed the link, every step */
        CHECK_MSG(link >= steps * grad_mb * 1e6, "%s: %.0f bytes over the link, want >= %.0f", names[k], link, steps * grad_mb * 1e6);
        free(t);
    }
    /* the hosts' own ceiling (the bare link) is far above the shaped link's */
    const double host_gbps = grad_mb / exp_[0];
    CHECK_MSG(exp_[0] < 0.5 * exp_[1], "the bare link's allreduce (%.1f ms) is not well below 100 Mbit/s's (%.1f ms)", exp_[0], exp_[1]);
    printf("    bare link: %.1f ms/step exposed (%.2f GB/s: the hosts' ceiling); backward %.1f ms\n", exp_[0], host_gbps, bwd[0]);
    for (int k = 1; k < 3; k++) {
        double gbps = mbit[k] * 1e6 / 8 * payload / 1e9, whole = 0, mexp = 0;
        if (gbps > host_gbps) gbps = host_gbps;
        CHECK_MSG(model(bwd[k], grad_mb, gbps, &whole, &mexp), "scripts/scaling_model.sh did not run");
        const double r = exp_[k] / mexp;
        printf("    %g Mbit/s: exposed %.1f ms/step (backward %.1f); model: whole %.1f, exposed %.1f ms (measured/model %.2f)\n",
               mbit[k], exp_[k], bwd[k], whole, mexp, r);
        CHECK_MSG(r > 0.85 && r < 1.6, "%g Mbit/s: measured %.1f ms, the model %.1f ms (ratio %.2f, want 0.85 to 1.6)", mbit[k],
                  exp_[k], mexp, r);
    }
    /* the shaping is real: half the rate, twice the time */
    const double twice = exp_[2] / exp_[1];
    printf("    50 vs 100 Mbit/s: %.2f times the time\n", twice);
    CHECK_MSG(twice > 1.5 && twice < 2.7, "50 Mbit/s took %.2f times 100 Mbit/s's time (want about 2)", twice);
    const char *ne = strstr(o, "netem: ");
    printf("    no latency point (%.*s)\n", ne ? (int)strcspn(ne, "\n") : 0, ne ? ne : "no netem line");
    free(o);
}
