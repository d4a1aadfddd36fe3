/* harness.c: the test runner. See harness.h.
 *
 * Each test runs in a child process of its own (fork), so that a die(), an abort, a crash or a
 * hang ends that test only: the runner reports it as failed, with the last lines the test
 * printed, and goes on. The child's stdout and stderr come back through one pipe and are echoed
 * as they arrive; its verdict (failed checks, or the skip reason) comes through a second pipe
 * just before it exits, so a child that ends any other way is known to have died. A test still
 * running after its time limit is killed with its whole process group (the programs it launched
 * included) and counted failed. The summary line "N passed, N failed, N skipped" always ends the
 * run.
 *
 * Tests that need a GPU skip with a reason that starts with "no GPU" where there is none. When
 * NVCNN_EMU names the folder of an emulated build (make GPU_EMU=1: build-emu), the runner then
 * runs such a test again with that build's runner, in that build's view of the repository
 * ($NVCNN_EMU/root, whose ./nvcnn is the emulated one), and the emulated run's verdict is the
 * test's: "PASS name (emulated device, 1.23s)". A test that still skips there says why.
 *
 * Usage: run_tests [--list] [--inline] [--timeout=SECONDS] [NAME_SUBSTRING ...]
 *   --list      prints the names of the selected tests and runs nothing
 *   --inline    runs the tests in the runner's own process, one after another, as a debugger or
 *               compute-sanitizer wants them (a crash then ends the run; no time limit)
 *   --timeout   the time limit of each test that has none of its own (TEST_LIMIT); default 600 s,
 *               or NVCNN_TEST_TIMEOUT
 *   --verdict-fd=N NAME   runs the one test NAME in this process and writes its verdict to file
 *               descriptor N, printing nothing of its own (how a runner hands a test to another)
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TH_MAX_TESTS 1024
#define TH_TAIL_LINES 12 /* lines of a dead test's output repeated under its FAIL line */
#define TH_TAIL_BYTES 4096

static struct {
    const char *name;
    th_fn fn;
    double limit; /* seconds; 0: the runner's default */
} th_tests[TH_MAX_TESTS];
static int th_ntests;
static int th_cur_failed, th_cur_skipped;
static const char *th_cur_name = "";
static char th_skip_reason[256];
/* One temporary directory per run, named by the runner before any test starts and removed by it
 * at the end: every test's child process creates it on demand under that same name. */
static char th_tmp[256];
static volatile pid_t th_child_pgid; /* the running test's process group (0: none) */

void th_register_limit(const char *name, th_fn fn, double limit) {
    if (th_ntests == TH_MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        exit(1);
    }
    th_tests[th_ntests].name = name;
    th_tests[th_ntests].fn = fn;
    th_tests[th_ntests].limit = limit;
    th_ntests++;
}

void th_register(const char *name, th_fn fn) { th_register_limit(name, fn, 0); }

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

const char *th_current_test(void) { return th_cur_name; }

const char *th_tmpdir(void) {
    mkdir(th_tmp, 0755); /* on demand; EEXIST when an earlier test made it */
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

static int th_selected(const char *name, int nsel, char **sel) {
    if (nsel == 0) return 1;
    for (int i = 0; i < nsel; i++)
        if (strstr(name, sel[i])) return 1;
    return 0;
}

static double th_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { TH_PASS, TH_FAIL, TH_SKIP };

/* Runs test i in this process: its verdict. */
static int th_run_here(int i) {
    th_cur_failed = 0;
    th_cur_skipped = 0;
    th_cur_name = th_tests[i].name;
    th_tests[i].fn();
    return th_cur_failed ? TH_FAIL : th_cur_skipped ? TH_SKIP : TH_PASS;
}

/* The runner's end on SIGINT/SIGTERM: the running test's processes go with it. */
static void th_on_signal(int sig) {
    if (th_child_pgid > 0) kill(-th_child_pgid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The last TH_TAIL_BYTES bytes a test printed (a ring). */
typedef struct Tail {
    char b[TH_TAIL_BYTES];
    size_t n; /* bytes written in all */
} Tail;

static void tail_add(Tail *t, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) t->b[(t->n + i) % TH_TAIL_BYTES] = s[i];
    t->n += n;
}

/* Prints the last TH_TAIL_LINES lines of t, each behind "    | ". */
static void tail_print(const Tail *t) {
    size_t have = t->n < TH_TAIL_BYTES ? t->n : TH_TAIL_BYTES, start = t->n - have;
    char *s = malloc(have + 1);
    for (size_t i = 0; i < have; i++) s[i] = t->b[(start + i) % TH_TAIL_BYTES];
    while (have > 0 && s[have - 1] == '\n') have--;
    s[have] = 0;
    size_t from = 0;
    int lines = 0;
    for (size_t i = have; i > 0; i--)
        if (s[i - 1] == '\n' && ++lines == TH_TAIL_LINES) {
            from = i;
            break;
        }
    if (have == 0) {
        printf("    | (no output)\n");
    } else {
        for (char *line = s + from, *nl; line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl) *nl = 0;
            printf("    | %s\n", line);
        }
    }
    free(s);
}

/* Runs test i here and writes its verdict to fd (failed checks, or the skip reason), as a child
 * hands it to the runner. 0, or 1 if it could not be written. */
static int th_run_and_send(int i, int fd) {
    int verdict = th_run_here(i);
    fflush(stdout);
    fflush(stderr);
    char msg[300];
    int len = verdict == TH_SKIP ? snprintf(msg, sizeof msg, "S%s", th_skip_reason)
                                 : snprintf(msg, sizeof msg, "%c%d", verdict == TH_FAIL ? 'F' : 'P', th_cur_failed);
    return len > 0 && write(fd, msg, (size_t)len) != len;
}

/* The emulated build's folder (NVCNN_EMU, made absolute), or NULL. */
static const char *th_emu_dir(void) {
    static char dir[4096];
    static int done;
    if (!done) {
        done = 1;
        const char *e = getenv("NVCNN_EMU");
        if (e && *e && !realpath(e, dir)) {
            fprintf(stderr, "run_tests: NVCNN_EMU=%s: %s\n", e, strerror(errno));
            exit(2);
        }
    }
    return dir[0] ? dir : NULL;
}

/* In a child: becomes the emulated build's runner for test `name`, its verdict on fd `fd`. */
static void th_exec_emulated(const char *name, int fd) {
    const char *dir = th_emu_dir();
    char root[4200], runner[4200], fdarg[32];
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(runner, sizeof runner, "%s/run_tests", dir);
    snprintf(fdarg, sizeof fdarg, "--verdict-fd=%d", fd);
    if (chdir(root) != 0) {
        fprintf(stderr, "run_tests: %s: %s\n", root, strerror(errno));
        _exit(1);
    }
    setenv("NVCNN_BUILD", dir, 1);
    execl(runner, runner, fdarg, name, (char *)NULL);
    fprintf(stderr, "run_tests: %s: %s\n", runner, strerror(errno));
    _exit(1);
}

/* Runs test i in a child process with a time limit of `limit` seconds (on the emulated device's
 * runner when `emulated`). Returns its verdict; `why` receives how a child that gave none ended. */
static int th_run_child(int i, double limit, char *why, size_t whylen, Tail *tail, int emulated) {
    int out[2], res[2];
    if (pipe(out) != 0 || pipe(res) != 0) {
        snprintf(why, whylen, "could not create a pipe: %s", strerror(errno));
        return TH_FAIL;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "could not fork: %s", strerror(errno));
        close(out[0]), close(out[1]), close(res[0]), close(res[1]);
        return TH_FAIL;
    }
    if (pid == 0) {
        /* its own process group, so that a timeout also ends what the test launched */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        close(out[0]);
        close(res[0]);
        dup2(out[1], 1);
        dup2(out[1], 2);
        close(out[1]);
        if (emulated) th_exec_emulated(th_tests[i].name, res[1]);
        _exit(th_run_and_send(i, res[1]));
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    th_child_pgid = pid;
    close(out[1]);
    close(res[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    const double t0 = th_now();
    int status = 0, exited = 0, timed_out = 0;
    for (;;) {
        struct pollfd p = {out[0], POLLIN, 0};
        poll(&p, 1, exited ? 0 : 100);
        char buf[4096];
        ssize_t r;
        int eof = 0;
        while ((r = read(out[0], buf, sizeof buf)) > 0) {
            fwrite(buf, 1, (size_t)r, stdout);
            tail_add(tail, buf, (size_t)r);
        }
        if (r == 0) eof = 1;
        fflush(stdout);
        if (exited) break;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            exited = 1; /* one more pass collects what is left in the pipe */
            continue;
        }
        if (eof && w == 0) { /* the output closed early: only the exit is left to wait for */
            double left = limit - (th_now() - t0);
            while (left > 0 && waitpid(pid, &status, WNOHANG) == 0) {
                usleep(20000);
                left = limit - (th_now() - t0);
            }
            if (left > 0) {
                exited = 1;
                break;
            }
        }
        if (th_now() - t0 > limit) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = 1;
            break;
        }
    }
    kill(-pid, SIGKILL); /* anything the test left running */
    th_child_pgid = 0;
    close(out[0]);
    char msg[sizeof th_skip_reason];
    ssize_t m = read(res[0], msg, sizeof msg - 1);
    close(res[0]);
    msg[m > 0 ? m : 0] = 0;
    if (timed_out) {
        snprintf(why, whylen, "killed after its time limit of %.0f s", limit);
        return TH_FAIL;
    }
    if (WIFSIGNALED(status)) {
        snprintf(why, whylen, "crashed: signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return TH_FAIL;
    }
    if (m <= 0 || WEXITSTATUS(status) != 0) {
        snprintf(why, whylen, "died: exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return TH_FAIL;
    }
    if (msg[0] == 'S') {
        memcpy(th_skip_reason, msg + 1, (size_t)m); /* m - 1 bytes and the NUL */
        return TH_SKIP;
    }
    th_cur_failed = atoi(msg + 1);
    return msg[0] == 'F' ? TH_FAIL : TH_PASS;
}

/* --verdict-fd: the one test `name` in this process, its verdict to fd (as a child would send it). */
static int th_verdict_to_fd(const char *name, int fd) {
    int i = 0;
    while (name && i < th_ntests && strcmp(th_tests[i].name, name) != 0) i++;
    if (!name || i == th_ntests) {
        fprintf(stderr, "run_tests: --verdict-fd needs the name of one test (%s: no such test)\n", name ? name : "none given");
        return 2;
    }
    if (th_run_and_send(i, fd)) return 1;
    struct stat st;
    if (stat(th_tmp, &st) == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_tmp);
        if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", th_tmp);
    }
    return 0;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0, list = 0, inline_ = 0, nsel = 0, verdict_fd = -1;
    double limit = 600;
    const char *env = getenv("NVCNN_TEST_TIMEOUT");
    if (env && *env) limit = atof(env);
    char **sel = calloc((size_t)argc + 1, sizeof *sel);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "--inline") == 0)
            inline_ = 1;
        else if (strncmp(argv[i], "--timeout=", 10) == 0)
            limit = atof(argv[i] + 10);
        else if (strncmp(argv[i], "--verdict-fd=", 13) == 0)
            verdict_fd = atoi(argv[i] + 13);
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "run_tests: unknown option %s (--list, --inline, --timeout=SECONDS)\n", argv[i]);
            return 2;
        } else
            sel[nsel++] = argv[i];
    }
    if (!(limit > 0)) {
        fprintf(stderr, "run_tests: the time limit must be a positive number of seconds\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (list) {
        for (int i = 0; i < th_ntests; i++)
            if (th_selected(th_tests[i].name, nsel, sel)) printf("%s\n", th_tests[i].name);
        free(sel);
        return 0;
    }
    snprintf(th_tmp, sizeof th_tmp, "%s/nvcnn-test-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    if (verdict_fd >= 0) return th_verdict_to_fd(nsel == 1 ? sel[0] : NULL, verdict_fd);
    signal(SIGINT, th_on_signal);
    signal(SIGTERM, th_on_signal);
    for (int i = 0; i < th_ntests; i++) {
        if (!th_selected(th_tests[i].name, nsel, sel)) continue;
        char why[256] = "";
        Tail *tail = calloc(1, sizeof *tail);
        double t0 = th_now();
        double lim = th_tests[i].limit > 0 ? th_tests[i].limit : limit;
        int v = inline_ ? th_run_here(i) : th_run_child(i, lim, why, sizeof why, tail, 0);
        const char *dev = "";
        if (v == TH_SKIP && !inline_ && th_emu_dir() && strncmp(th_skip_reason, "no GPU", 6) == 0) {
            /* no GPU here: the test runs on the emulated device */
            memset(tail, 0, sizeof *tail);
            why[0] = 0;
            v = th_run_child(i, lim, why, sizeof why, tail, 1);
            dev = "emulated device, ";
        }
        double dt = th_now() - t0;
        if (v == TH_FAIL && why[0]) {
            printf("FAIL %s (%s%s, %.2fs); last output:\n", th_tests[i].name, dev, why, dt);
            tail_print(tail);
            failed++;
        } else if (v == TH_FAIL) {
            printf("FAIL %s (%s%d failed checks, %.2fs)\n", th_tests[i].name, dev, th_cur_failed, dt);
            failed++;
        } else if (v == TH_SKIP) {
            printf("SKIP %s: skipped%s: %s\n", th_tests[i].name, dev[0] ? " on the emulated device" : "", th_skip_reason);
            skipped++;
        } else {
            printf("PASS %s (%s%.2fs)\n", th_tests[i].name, dev, dt);
            passed++;
        }
        free(tail);
    }
    struct stat st;
    if (stat(th_tmp, &st) == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_tmp);
        if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", th_tmp);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(sel);
    return failed ? 1 : 0;
}
