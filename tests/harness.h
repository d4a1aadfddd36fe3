/* harness.h: a tiny test harness. Each test file defines tests with TEST(name) { ... } and
 * checks with CHECK(...) / CHECK_NEAR(...) / CHECK_REL(...); a failed check records the file
 * and line and the test goes on. th_skip("reason") marks the current test skipped.
 * The runner (tests/harness.c) runs every registered test, or those whose name contains one of
 * its arguments, and ends with the line "N passed, N failed, N skipped".
 */
#ifndef NVCNN_TEST_HARNESS_H
#define NVCNN_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

typedef void (*th_fn)(void);
void th_register(const char *name, th_fn fn);
void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void th_skip(const char *reason);
/* Directory for temporary files of the current test run (created on demand). */
const char *th_tmpdir(void);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd, may be NULL) and returns
 * its exit status (0-255), or -1 if it could not run / was killed. */
int th_run(const char *cmd, char **out);

#define TEST(name)                                                                      \
    static void name(void);                                                             \
    __attribute__((constructor)) static void th_reg_##name(void) { th_register(#name, name); } \
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
