/* harness_cases.c: tests that end every way a test can end, linked with the runner
 * (tests/harness.c) into its own program, which tests/test_harness.c runs to check that each
 * test's end is reported as it should be and that no failure stops the run. Not part of
 * run_tests. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

TEST(case_passes) { CHECK(1 + 1 == 2); }

TEST(case_check_fails) {
    CHECK_MSG(0, "planted check failure");
    CHECK(1);
}

TEST(case_dies) {
    printf("before the die\n");
    die("planted die");
}

TEST(case_aborts) {
    printf("before the abort\n");
    fflush(stdout);
    abort();
}

TEST(case_crashes) {
    printf("before the crash\n");
    fflush(stdout);
    raise(SIGSEGV);
}

TEST(case_hangs) {
    printf("hanging\n");
    fflush(stdout);
    for (;;) pause();
}

/* hangs in a program it launched: the time limit must end that one too */
TEST(case_hangs_in_a_child_program) {
    int rc = system("sleep 60");
    CHECK(rc == 0);
}

/* longer than the run's limit (3 s in test_harness.c), within its own */
TEST_LIMIT(case_slow_within_its_own_limit, 30) {
    sleep(4);
    CHECK(1);
}

TEST(case_skips) { th_skip("planted skip"); }

TEST(case_exits_0_early) { exit(0); }

/* each test has a temporary directory of its own, named after it: both make the same file in
 * theirs, which only one of them could in a directory they shared */
static void tmp_own(void) {
    const char *d = th_tmpdir(), *base = strrchr(d, '/');
    CHECK_MSG(base && strcmp(base + 1, th_current_test()) == 0, "%s", d);
    char path[512];
    snprintf(path, sizeof path, "%s/same-name", d);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK_MSG(fd >= 0, "%s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
}

TEST(case_tmp_own_1) { tmp_own(); }
TEST(case_tmp_own_2) { tmp_own(); }

/* The other tests running now: the runner's other children (from /proc). */
static int siblings(void) {
    DIR *proc = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (proc && (e = readdir(proc))) {
        char path[300], buf[512];
        if (atoi(e->d_name) <= 0 || atoi(e->d_name) == getpid()) continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold spaces: "pid (name) state ppid" */
        char state;
        int ppid;
        if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == getppid()) n++;
    }
    if (proc) closedir(proc);
    return n;
}

/* What a test is given: the cores (NVCNN_TEST_JOBS), OpenMP's threads (the variable and its
 * own), and the other tests running at its start and 0.3 s later (a window in which a runner
 * that started tests beside it would have). test_harness.c reads the lines. */
static void given(const char *what) {
    const char *jobs = getenv("NVCNN_TEST_JOBS"), *omp = getenv("OMP_NUM_THREADS");
    int before = siblings();
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    int after = siblings();
    printf("%s: NVCNN_TEST_JOBS=%s OMP_NUM_THREADS=%s threads=%d others=%d\n", what, jobs ? jobs : "(unset)", omp ? omp : "(unset)",
           omp_get_max_threads(), before > after ? before : after);
}

TEST_SERIAL(case_alone_1) { given("alone 1"); }
TEST_SERIAL(case_alone_2) { given("alone 2"); }
TEST_CORES(case_two_cores, 2) { given("two cores"); }
TEST(case_one_core) { given("one core"); }
TEST_CORES(case_mostly_waits, 0) { given("waits"); }

/* Two tests of one group, each waiting (no core of its own): were they run at once, the second
 * would find the first's mark (a file in the run's temporary directory, made with O_EXCL). */
static void in_group(const char *what) {
    char path[600];
    snprintf(path, sizeof path, "%s/../group-g-running", th_tmpdir());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    const int alone = fd >= 0;
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    printf("%s: %s\n", what, alone ? "alone in its group" : "beside another of its group");
}
TEST_IN_GROUP(case_group_1, 0, 0, "g") { in_group("group 1"); }
TEST_IN_GROUP(case_group_2, 0, 0, "g") { in_group("group 2"); }

TEST(case_last_passes) { CHECK(1); }
