/* harness.c: the test runner. See harness.h. */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TH_MAX_TESTS 1024

static struct {
    const char *name;
    th_fn fn;
} th_tests[TH_MAX_TESTS];
static int th_ntests;
static int th_cur_failed, th_cur_skipped;
static char th_skip_reason[256];
static char th_tmp[256];

void th_register(const char *name, th_fn fn) {
    if (th_ntests == TH_MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        exit(1);
    }
    th_tests[th_ntests].name = name;
    th_tests[th_ntests].fn = fn;
    th_ntests++;
}

void th_fail(const char *file, int line, const char *fmt, ...) {
    if (th_cur_failed < 5) {
        va_list ap;
        fprintf(stdout, "    %s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    }
    th_cur_failed++;
}

void th_skip(const char *reason) {
    th_cur_skipped = 1;
    snprintf(th_skip_reason, sizeof th_skip_reason, "%s", reason);
}

const char *th_tmpdir(void) {
    if (!th_tmp[0]) {
        snprintf(th_tmp, sizeof th_tmp, "%s/nvcnn-test-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid());
        mkdir(th_tmp, 0755);
    }
    return th_tmp;
}

int th_run(const char *cmd, char **out) {
    size_t len = strlen(cmd) + 16;
    char *full = malloc(len);
    snprintf(full, len, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p) return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static int th_selected(const char *name, int argc, char **argv) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < th_ntests; i++) {
        if (!th_selected(th_tests[i].name, argc, argv)) continue;
        th_cur_failed = 0;
        th_cur_skipped = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        th_tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (th_cur_failed) {
            printf("FAIL %s (%d failed checks, %.2fs)\n", th_tests[i].name, th_cur_failed, dt);
            failed++;
        } else if (th_cur_skipped) {
            printf("SKIP %s: skipped: %s\n", th_tests[i].name, th_skip_reason);
            skipped++;
        } else {
            printf("PASS %s (%.2fs)\n", th_tests[i].name, dt);
            passed++;
        }
    }
    if (th_tmp[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_tmp);
        if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", th_tmp);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
