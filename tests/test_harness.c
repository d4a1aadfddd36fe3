/* test_harness.c: the runner isolates tests. tests/selftest/harness_cases.c holds tests that
 * pass, fail a check, die, abort, crash, hang (themselves, or in a program they launched), skip,
 * exit early and take longer than the run's limit but not their own; its program must report each as such, with a dead test's last output lines,
 * run every test to the end, remove the run's temporary directory and print the summary. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

static const char *build_dir(void) {
    const char *b = getenv("NVCNN_BUILD");
    return b && *b ? b : "build";
}

TEST(harness_reports_every_end_and_runs_every_test) {
    char tmp[512], cmd[1200], *o = NULL;
    snprintf(tmp, sizeof tmp, "%s/harness", th_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && TMPDIR=%s %s/tests/selftest/harness_cases --timeout=3", tmp, tmp, build_dir());
    double t0 = now_seconds();
    int rc = th_run(cmd, &o);
    double dt = now_seconds() - t0;
    CHECK_MSG(rc == 1 && o, "exit %d (want 1: tests failed):\n%s", rc, o);
    if (!o) return;
    const char *want[] = {
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
        "PASS case_tmp_write",
        "PASS case_tmp_read",
        "PASS case_last_passes",
        "5 passed, 7 failed, 1 skipped\n",
    };
    const char *p = o;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *q = strstr(p, want[i]);
        CHECK_MSG(q != NULL, "missing (in order) '%s' in:\n%s", want[i], o);
        if (q) p = q + strlen(want[i]);
    }
    /* two time limits of 3 s and a 4 s test, not the minute the hanging program would take */
    CHECK_MSG(dt < 30, "the run took %.1f s", dt);
    /* the run's temporary directory is gone */
    snprintf(cmd, sizeof cmd, "ls -A %s", tmp);
    char *ls = NULL;
    CHECK(th_run(cmd, &ls) == 0 && ls && ls[0] == 0);
    free(ls);
    free(o);
    /* --list names the selected tests and runs none */
    snprintf(cmd, sizeof cmd, "%s/tests/selftest/harness_cases --list tmp", build_dir());
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strcmp(o, "case_tmp_write\ncase_tmp_read\n") == 0, "exit %d: %s", rc, o);
    free(o);
}
