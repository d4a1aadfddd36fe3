/* harness_cases.c: tests that end every way a test can end, linked with the runner
 * (tests/harness.c) into its own program, which tests/test_harness.c runs to check that each
 * test's end is reported as it should be and that no failure stops the run. Not part of
 * run_tests. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* the run's temporary directory is shared by every test of the run */
TEST(case_tmp_write) {
    char path[512];
    snprintf(path, sizeof path, "%s/shared", th_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
}

TEST(case_tmp_read) {
    char path[512];
    snprintf(path, sizeof path, "%s/shared", th_tmpdir());
    CHECK_MSG(access(path, R_OK) == 0, "%s missing", path);
    CHECK(strcmp(th_current_test(), "case_tmp_read") == 0);
}

TEST(case_last_passes) { CHECK(1); }
