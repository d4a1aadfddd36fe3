/* harness.h: a tiny test harness. Each test file defines tests with TEST(name) { ... } and
 * checks with CHECK(...) / CHECK_NEAR(...) / CHECK_REL(...); a failed check records the file
 * and line and the test goes on. th_skip("reason") marks the current test skipped.
 * The runner (tests/harness.c) runs every registered test, or those whose name contains one of
 * its arguments, each in a child process of its own with a time limit (a test that dies,
 * crashes or hangs fails alone), and ends with the line "N passed, N failed, N skipped".
 */
#ifndef NVCNN_TEST_HARNESS_H
#define NVCNN_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

typedef void (*th_fn)(void);
void th_register(const char *name, th_fn fn);
/* A test with a time limit of its own (seconds), for the long ones (end-to-end training). */
void th_register_limit(const char *name, th_fn fn, double limit);
void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void th_skip(const char *reason);
/* The name of the running test. */
const char *th_current_test(void);
/* Directory for temporary files of the current test run (created on demand; one directory for
 * the whole run, removed by the runner at its end). */
const char *th_tmpdir(void);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd, may be NULL) and returns
 * its exit status (0-255), or -1 if it could not run / was killed. */
int th_run(const char *cmd, char **out);

#define TEST(name)                                                                      \
    static void name(void);                                                             \
    __attribute__((constructor)) static void th_reg_##name(void) { th_register(#name, name); } \
    static void name(void)

/* TEST with its own time limit in seconds (instead of the runner's default). */
#define TEST_LIMIT(name, seconds)                                                       \
    static void name(void);                                                             \
    __attribute__((constructor)) static void th_reg_##name(void) { th_register_limit(#name, name, seconds); } \
    static void name(void)

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
