/* test_harness.c: the runner isolates tests. tests/selftest/harness_cases.c holds tests that
 * pass, fail a check, die, abort, crash, hang (themselves, or in a program they launched), skip,
 * exit early and take longer than the run's limit but not their own; its program must report each as such, with a dead test's last output lines,
 * run every test to the end, remove the run's temporary directory and print the summary. Run one
 * test at a time and several side by side, it must report the same, each test's output in one
 * block with its verdict, run the tests that ask for it alone, and give each test its share of
 * the cores. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

static const char *build_dir(void) {
    const char *b = getenv("NVCNN_BUILD");
    return b && *b ? b : "build";
}

/* harness_cases with `args` and OpenMP's threads set to 5 (so that a test given other threads
 * shows it), TMPDIR a folder of this test's own, which it must leave empty: its output (malloc'd)
 * and exit status, and the seconds it took. */
static char *run_cases(const char *args, int *rc, double *dt) {
    char tmp[512], cmd[1200], *o = NULL;
    snprintf(tmp, sizeof tmp, "%s/harness", th_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && OMP_NUM_THREADS=5 TMPDIR=%s %s/tests/selftest/harness_cases %s", tmp, tmp, build_dir(), args);
    double t0 = now_seconds();
    *rc = th_run(cmd, &o);
    *dt = now_seconds() - t0;
    /* the run's temporary directory is gone */
    snprintf(cmd, sizeof cmd, "ls -A %s", tmp);
    char *ls = NULL;
    CHECK_MSG(th_run(cmd, &ls) == 0 && ls && ls[0] == 0, "%s %s left: %s", build_dir(), args, ls);
    free(ls);
    CHECK_MSG(*rc == 1 && o, "%s: exit %d (want 1: tests failed):\n%s", args, *rc, o);
    return o;
}

/* the verdicts, in the order the cases are registered */
static const char *const verdicts[] = {
    "PASS case_passes",
    "planted check failure",
    "FAIL case_check_fails (1 failed checks",
    "FAIL case_dies (died: exit status 1",
    "    | before the die\n    | nvcnn: error: planted die\n",
    "FAIL case_aborts (crashed: signal 6",
    "    | before the abort\n",
    "FAIL case_crashes (crashed: signal 11",
    "    | before the crash\n",
    "FAIL case_hangs (killed after its time limit of 3 s",
    "    | hanging\n",
    "FAIL case_hangs_in_a_child_program (killed after its time limit of 3 s",
    "PASS case_slow_within_its_own_limit",
    "SKIP case_skips: skipped: planted skip",
    "FAIL case_exits_0_early (died: exit status 0",
    "PASS case_tmp_own_1",
    "PASS case_tmp_own_2",
    "PASS case_alone_1",
    "PASS case_alone_2",
    "PASS case_two_cores",
    "PASS case_one_core",
    "PASS case_mostly_waits",
    "PASS case_group_1",
    "PASS case_group_2",
    "PASS case_last_passes",
    "12 passed, 7 failed, 1 skipped\n",
};

/* `line` in o, up to "others=", and the number after it at most `most` */
static void check_given(const char *o, const char *line, int most) {
    const char *p = strstr(o, line);
    CHECK_MSG(p && atoi(p + strlen(line)) <= most, "want '%s%d' or fewer in:\n%s", line, most, o);
}

/* The cases mostly wait (their time limits, a 4 s sleep): beside the other tests, without a core
 * of their own, like the next. */
TEST_CORES(harness_reports_every_end_and_runs_every_test, 0) {
    int rc;
    double dt;
    char *o = run_cases("--jobs=1 --timeout=3", &rc, &dt);
    if (!o) return;
    const char *p = o;
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
        const char *q = strstr(p, verdicts[i]);
        CHECK_MSG(q != NULL, "missing (in order) '%s' in:\n%s", verdicts[i], o);
        if (q) p = q + strlen(verdicts[i]);
    }
    /* one test at a time: each has the runner's environment, and no other test beside it */
    const char *given[] = {"alone 1", "alone 2", "two cores", "one core", "waits"};
    for (int k = 0; k < 5; k++) {
        char line[200];
        snprintf(line, sizeof line, "%s: NVCNN_TEST_JOBS=1 OMP_NUM_THREADS=5 threads=5 others=", given[k]);
        check_given(o, line, 0);
    }
    /* two time limits of 3 s and a 4 s test, not the minute the hanging program would take */
    CHECK_MSG(dt < 30, "the run took %.1f s", dt);
    free(o);
    /* --list names the selected tests and runs none */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s/tests/selftest/harness_cases --list tmp", build_dir());
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strcmp(o, "case_tmp_own_1\ncase_tmp_own_2\n") == 0, "exit %d: %s", rc, o);
    free(o);
}

TEST_CORES(harness_runs_tests_side_by_side_in_blocks, 0) {
    int rc;
    double dt;
    char *o = run_cases("--jobs=3 --timeout=3", &rc, &dt);
    if (!o) return;
    /* every verdict, in whatever order the tests ended; the summary last */
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) CHECK_MSG(strstr(o, verdicts[i]), "missing '%s' in:\n%s", verdicts[i], o);
    const size_t len = strlen(o), slen = strlen(verdicts[sizeof verdicts / sizeof verdicts[0] - 1]);
    CHECK_MSG(len > slen && strcmp(o + len - slen, verdicts[sizeof verdicts / sizeof verdicts[0] - 1]) == 0, "%s", o);
    /* each test's block whole: its output right above its verdict line, a dead test's last lines
     * right below it */
    const char *blocks[][2] = {
        {"before the die\nnvcnn: error: planted die\nFAIL case_dies (", "\n    | before the die\n    | nvcnn: error: planted die\n"},
        {"planted check failure\nFAIL case_check_fails (1 failed checks", NULL},
        {"hanging\nFAIL case_hangs (killed", "\n    | hanging\n"},
        {"before the crash\nFAIL case_crashes (", "\n    | before the crash\n"},
    };
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
        const char *b = strstr(o, blocks[k][0]);
        CHECK_MSG(b, "missing '%s' in:\n%s", blocks[k][0], o);
        if (b && blocks[k][1]) {
            const char *eol = strchr(b + strlen(blocks[k][0]), '\n');
            CHECK_MSG(eol && strncmp(eol, blocks[k][1], strlen(blocks[k][1])) == 0, "'%s' not right below '%s' in:\n%s", blocks[k][1],
                      blocks[k][0], o);
        }
    }
    /* the tests that ask for it alone, with the runner's environment and its 3 jobs; the others
     * beside at most the rest of the 3 cores (and the two that mostly wait: the one of no group,
     * one of the two of group g), with OpenMP's
     * threads and the jobs of the nested runners they would start set to their share (one for
     * the one that mostly waits) */
    check_given(o, "alone 1: NVCNN_TEST_JOBS=3 OMP_NUM_THREADS=5 threads=5 others=", 0);
    check_given(o, "alone 2: NVCNN_TEST_JOBS=3 OMP_NUM_THREADS=5 threads=5 others=", 0);
    check_given(o, "two cores: NVCNN_TEST_JOBS=2 OMP_NUM_THREADS=2 threads=2 others=", 1);
    check_given(o, "one core: NVCNN_TEST_JOBS=1 OMP_NUM_THREADS=1 threads=1 others=", 4);
    check_given(o, "waits: NVCNN_TEST_JOBS=1 OMP_NUM_THREADS=1 threads=1 others=", 4);
    /* two tests of one group, both waiting (no core of their own): one after the other */
    CHECK_MSG(strstr(o, "group 1: alone in its group\n") && strstr(o, "group 2: alone in its group\n"), "%s", o);
    /* side by side: the two 3-second hangs and the 4-second test together, not one after another
     * (11 s at least, with the two 0.3 s alone); measured 4.9 s */
    CHECK_MSG(dt < 9, "the run took %.1f s", dt);
    free(o);
}

/* --jobs and NVCNN_TEST_JOBS: a whole number from 1 up, or one line naming the bad value */
TEST(harness_rejects_bad_job_counts) {
    const char *bad[][2] = {{"--jobs=0", "--jobs=0: "}, {"--jobs=2x", "--jobs=2x: "}, {"--jobs=", "--jobs=: "}};
    for (int k = 0; k < 3; k++) {
        char cmd[600], *o = NULL;
        snprintf(cmd, sizeof cmd, "%s/tests/selftest/harness_cases %s case_passes", build_dir(), bad[k][0]);
        int rc = th_run(cmd, &o);
        CHECK_MSG(rc == 2 && o && strstr(o, bad[k][1]) && !strstr(o, "PASS"), "%s: exit %d: %s", bad[k][0], rc, o);
        free(o);
    }
    char cmd[600], *o = NULL;
    snprintf(cmd, sizeof cmd, "NVCNN_TEST_JOBS=two %s/tests/selftest/harness_cases case_passes", build_dir());
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "NVCNN_TEST_JOBS=two: "), "exit %d: %s", rc, o);
    free(o);
}
