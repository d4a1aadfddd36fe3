/* harness.h: a tiny test harness. Each test file defines tests with TEST(name) { ... } and
 * checks with CHECK(...) / CHECK_NEAR(...) / CHECK_REL(...); a failed check records the file
 * and line and the test goes on. th_skip("reason") marks the current test skipped.
 * The runner (tests/harness.c) runs every registered test, or those whose name contains one of
 * its arguments, each in a child process of its own with a time limit (a test that dies,
 * crashes or hangs fails alone), several side by side, and ends with the line
 * "N passed, N failed, N skipped".
 */
#ifndef NVCNN_TEST_HARNESS_H
#define NVCNN_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

typedef void (*th_fn)(void);
/* cores: how many cores the test keeps busy (its threads, or the processes it launches: mpirun
 * -np 2 keeps two), so that the runner, which runs tests side by side (--jobs), never runs more
 * than the machine's cores' worth at once; 0 for a test that mostly waits (for daemons' timers)
 * and runs beside the others without a core of its own; TH_ALONE: no other test runs beside it
 * (it uses every core, or measures time). limit: its time limit in seconds; 0: the runner's
 * default. */
#define TH_ALONE (-1)
/* group: tests that share something of the machine that only one of them may use at a time (a
 * Slurm cluster's daemons, the two-host namespaces) name the same group: two of them never run
 * at once, while each runs beside the tests of other groups and of none (NULL). */
void th_register_in(const char *name, th_fn fn, double limit, int cores, const char *group);
void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void th_skip(const char *reason);
/* The name of the running test. */
const char *th_current_test(void);
/* Directory for temporary files of the current test (created on demand; one directory per test,
 * named after it, under one directory for the whole run, removed by the runner at its end). */
const char *th_tmpdir(void);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd, may be NULL) and returns
 * its exit status (0-255), or -1 if it could not run / was killed. */
int th_run(const char *cmd, char **out);

/* A test of a group (th_register_in; NULL: none), with its own time limit (seconds; 0: the
 * runner's default) and cores (above). */
#define TEST_IN_GROUP(name, limit, cores, group)                                        \
    static void name(void);                                                             \
    __attribute__((constructor)) static void th_reg_##name(void) { th_register_in(#name, name, limit, cores, group); } \
    static void name(void)

/* A test with its own time limit and cores, of no group. */
#define TEST_WITH(name, limit, cores) TEST_IN_GROUP(name, limit, cores, NULL)

#define TEST(name) TEST_WITH(name, 0, 1)
/* TEST with its own time limit in seconds (instead of the runner's default), for the long ones. */
#define TEST_LIMIT(name, seconds) TEST_WITH(name, seconds, 1)
/* A test that runs with no other beside it. */
#define TEST_SERIAL(name) TEST_WITH(name, 0, TH_ALONE)
/* A test that keeps n cores busy. */
#define TEST_CORES(name, n) TEST_WITH(name, 0, n)

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (!(cond)) th_fail(__FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)

/* |a - b| <= tol */
#define CHECK_NEAR(a, b, tol)                                                           \
    do {                                                                                \
        double th_a = (double)(a), th_b = (double)(b), th_t = (double)(tol);            \
        if (!(fabs(th_a - th_b) <= th_t))                                               \
            th_fail(__FILE__, __LINE__, "%s = %.9g, %s = %.9g, |diff| %.3g > %.3g", #a, th_a, \
                    #b, th_b, fabs(th_a - th_b), th_t);                                 \
    } while (0)

/* |a - b| <= rtol * max(|a|, |b|) + atol */
#define CHECK_REL(a, b, rtol, atol)                                                     \
    do {                                                                                \
        double th_a = (double)(a), th_b = (double)(b);                                  \
        double th_m = fabs(th_a) > fabs(th_b) ? fabs(th_a) : fabs(th_b);                 \
        if (!(fabs(th_a - th_b) <= (rtol) * th_m + (atol)))                             \
            th_fail(__FILE__, __LINE__, "%s = %.9g, %s = %.9g (rtol %g, atol %g)", #a, th_a, #b, \
                    th_b, (double)(rtol), (double)(atol));                              \
    } while (0)

#endif
