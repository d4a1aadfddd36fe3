/* test_watchdog.c: the watchdog (src/watchdog.c) in a child process: a phase longer than the
 * timeout ends the process with exit 5 and one line naming the rank, the host, the phase and the
 * step; phases shorter than the timeout, idle time and a timeout of 0 end nothing. Then nvcnn
 * itself under mpirun on this host, with rank 1 stopped (SIGSTOP) mid-run: rank 0 must end the
 * run, not wait for it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "scenario.h"
#include "util.h"
#include "watchdog.h"

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs fn in a child with its stderr into *err (malloc'd); returns the child's exit status (or
 * 128 + the signal) and the seconds it took. */
static int in_child(void (*fn)(void), char **err, double *seconds) {
    int p[2];
    if (pipe(p) != 0) return -1;
    double t0 = now_seconds();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(p[0], buf + n, cap - n - 1)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    *seconds = now_seconds() - t0;
    *err = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void stalls_in_a_bucket(void) {
    watchdog_start(0.4, 7);
    watchdog_step(41);
    watchdog_enter(WD_INPUT, 0, 0); /* a phase that ends in time */
    nap(0.2);
    watchdog_leave();
    watchdog_enter(WD_BUCKET, 2, 5);
    nap(10); /* never returns: the watchdog ends the process */
    _exit(0);
}

/* alone, as the next one: phases timed against the wall clock to tenths of a second */
TEST_SERIAL(watchdog_a_stalled_phase_ends_the_process_with_exit_5_naming_it) {
    char *err = NULL, host[64] = "", want[400];
    double s = 0;
    int rc = in_child(stalls_in_a_bucket, &err, &s);
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = 0;
    snprintf(want, sizeof want, "nvcnn: error: rank 7 on %s: no progress for ", host);
    CHECK_MSG(rc == EXIT_STALLED && rc == 5, "exit %d, stderr:\n%s", rc, err);
    CHECK_MSG(strncmp(err, want, strlen(want)) == 0 && sc_count(err, "\n") == 1, "stderr:\n%s", err);
    CHECK_MSG(strstr(err, " s in the allreduce of gradient bucket 2 of 5 at step 42 (--step_timeout=0.4): a peer rank is "
                          "lost or stalled; exiting with code 5\n"),
              "stderr:\n%s", err);
    double waited = atof(err + strlen(want));
    CHECK_MSG(waited >= 0.4 && waited < 1.5, "waited %.2f s", waited);
    /* 0.2 s in the input phase, 0.4 s in the bucket, a check every 0.05 s */
    CHECK_MSG(s >= 0.6 && s < 3, "the child took %.2f s", s);
    free(err);
}

static void short_phases_and_idle(void) {
    watchdog_start(0.3, 0);
    for (int i = 0; i < 8; i++) { /* 8 phases of 0.15 s: 1.2 s in all, none past 0.3 s */
        watchdog_step(i);
        watchdog_enter(i % 2 ? WD_ALLREDUCE : WD_BCAST, 3, 0);
        nap(0.15);
        watchdog_leave();
    }
    nap(0.8); /* idle: not watched */
    _exit(0);
}

static void no_timeout(void) {
    watchdog_start(0, 0);
    watchdog_enter(WD_BARRIER, 0, 0);
    nap(0.5);
    _exit(0);
}

TEST_SERIAL(watchdog_short_phases_idle_time_and_timeout_0_end_nothing) {
    char *err = NULL;
    double s = 0;
    int rc = in_child(short_phases_and_idle, &err, &s);
    CHECK_MSG(rc == 0 && !*err, "exit %d, stderr:\n%s", rc, err);
    free(err);
    rc = in_child(no_timeout, &err, &s);
    CHECK_MSG(rc == 0 && !*err, "--step_timeout=0: exit %d, stderr:\n%s", rc, err);
    free(err);
}

/* nvcnn under mpirun on this host, rank 1 stopped after the first step rows: rank 0's watchdog
 * ends the run (exit 5 through mpirun), naming the phase and the rank. */
/* 2 cores: 2 ranks */
TEST_CORES(watchdog_nvcnn_rank_0_ends_the_run_when_rank_1_stops, 2) {
#ifndef NVCNN_MPI
    th_skip("no MPI in this build");
#else
    if (th_run("command -v mpirun", NULL) != 0) {
        th_skip("no mpirun");
        return;
    }
    char cmd[2000], *o = NULL;
    const char *d = th_tmpdir();
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
             "timeout 120 mpirun -np 2 --oversubscribe --bind-to none ./nvcnn --model=lenet --num_classes=10 --batch_size=64 "
             "--num_batches=100000 --display_every=1 --step_timeout=5 >%s/stall.out 2>&1 & mr=$!; "
             "until grep -q '^ *3 ' %s/stall.out 2>/dev/null; do kill -0 $mr || break; sleep 0.1; done; "
             /* rank 1: the child of mpirun (itself the child of timeout) whose environment says so */
             "for p in $(pgrep -P \"$(pgrep -P $mr)\"); do grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ && kill -STOP $p; done; "
             "wait $mr; echo \"mpirun exit $?\"; cat %s/stall.out",
             d, d, d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && strstr(o, "mpirun exit 5\n"), "%s", o);
    /* rank 0's line alone: rank 1, continued by mpirun to be ended, does not count the time it was
     * stopped (it used to blame a peer for its own stop) */
    const char *e = strstr(o, "nvcnn: error: rank 0 on ");
    CHECK_MSG(e && sc_count(o, "nvcnn: error: rank 0 on ") == 1 &&
                  strstr(e, "(--step_timeout=5): a peer rank is lost or stalled; exiting with code 5\n"),
              "%s", o);
    CHECK_MSG(sc_count(o, "nvcnn: error: ") == 1, "%s", o);
    if (e) printf("    %.*s\n", (int)strcspn(e, "\n"), e);
    free(o);
#endif
}

/* A process stopped (SIGSTOP) inside a phase for longer than the timeout, then continued: the time
 * it was not running is nobody's stall, and the phase that ends soon after ends nothing (the
 * watchdog used to end it at once with exit 5, blaming a peer for its own stop). */
TEST(watchdog_time_stopped_is_not_a_stall) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        watchdog_start(1.0, 1);
        nap(0.3); /* its thread at its watch, as in a run */
        watchdog_enter(WD_ALLREDUCE, 2, 0);
        kill(getpid(), SIGSTOP); /* continued by the parent 3.5 s later */
        nap(0.3);
        watchdog_leave();
        _exit(0);
    }
    int st = 0;
    for (int i = 0; i < 200 && waitpid(pid, &st, WUNTRACED) != pid; i++) nap(0.01);
    CHECK_MSG(WIFSTOPPED(st), "the child did not stop");
    nap(3.5);
    kill(pid, SIGCONT);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status %d", st);
}
