/* harness.c: the test runner. See harness.h.
 *
 * Each test runs in a child process of its own (fork), so that a die(), an abort, a crash or a
 * hang ends that test only: the runner reports it as failed, with the last lines the test
 * printed, and goes on. The child's stdout and stderr come back through one pipe; its verdict
 * (failed checks, or the skip reason) comes through a second pipe just before it exits, so a
 * child that ends any other way is known to have died. A test still running after its time limit
 * is killed with its whole process group (the programs it launched included) and counted failed.
 * The summary line "N passed, N failed, N skipped" always ends the run.
 *
 * Side by side: tests run at once as long as the cores they keep busy (harness.h: TEST_CORES,
 * TEST_SERIAL) add up to no more than --jobs (default: the online CPUs), and never two of one
 * group (TEST_IN_GROUP) at once. Each test's
 * output is held until it ends and printed then in one block, its verdict line last, so that the
 * outputs of tests run together never mix (with --jobs=1 it is echoed as it arrives). The tests
 * that must run alone start first, then the others (th_order_cmp), each group the longest first
 * (tests/durations: the seconds each took in a whole run), so that the run does not end on one
 * long test alone. A test
 * run beside others is given its share of the cores: OMP_NUM_THREADS and its own OpenMP threads
 * set to it (a test that runs alone keeps the environment it was given), and NVCNN_TEST_JOBS set
 * to it for the runners it starts itself.
 *
 * Tests that need a GPU skip with a reason that starts with "no GPU" where there is none. When
 * NVCNN_EMU names the folder of an emulated build (make GPU_EMU=1: build-emu), the runner then
 * runs such a test again with that build's runner, in that build's view of the repository
 * ($NVCNN_EMU/root, whose ./nvcnn is the emulated one), and the emulated run's verdict is the
 * test's: "PASS name (emulated device, 1.23s)". A test that still skips there says why.
 *
 * Usage: run_tests [--list] [--inline] [--jobs=N] [--timeout=SECONDS] [NAME_SUBSTRING ...]
 *   --list      prints the names of the selected tests and runs nothing
 *   --inline    runs the tests in the runner's own process, one after another, as a debugger or
 *               compute-sanitizer wants them (a crash then ends the run; no time limit)
 *   --jobs=N    runs up to N tests at once; default NVCNN_TEST_JOBS, or the online CPUs (1 where
 *               there is an NVIDIA GPU: /dev/nvidiactl)
 *   --timeout   the time limit of each test that has none of its own (TEST_LIMIT); default 600 s,
 *               or NVCNN_TEST_TIMEOUT
 *   --verdict-fd=N NAME   runs the one test NAME in this process and writes its verdict to file
 *               descriptor N, printing nothing of its own (how a runner hands a test to another)
 * NVCNN_TEST_TIMES=FILE appends a line per test to FILE: "START END CPU CORES NAME", the seconds
 * from the run's start, the CPU seconds of its processes and of the programs they waited for
 * (daemons, such as Slurm's, not counted), the cores it was given, its name ("@emu" added for the
 * emulated device's run). Runners that tests start write there too, with their own START.
 */
#define _GNU_SOURCE /* pipe2 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    int cores;    /* TH_ALONE, or the cores it keeps busy */
    const char *group; /* tests of one group never run at once; NULL: none */
} th_tests[TH_MAX_TESTS];
static int th_ntests;
static int th_cur_failed, th_cur_skipped;
static const char *th_cur_name = "";
static char th_skip_reason[256];
/* One temporary directory per run, named by the runner before any test starts and removed by it
 * at the end; each test's child process creates it and its own directory in it on demand. */
static char th_tmp[256];

void th_register_in(const char *name, th_fn fn, double limit, int cores, const char *group) {
    if (th_ntests == TH_MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        exit(1);
    }
    th_tests[th_ntests].name = name;
    th_tests[th_ntests].fn = fn;
    th_tests[th_ntests].limit = limit;
    th_tests[th_ntests].cores = cores;
    th_tests[th_ntests].group = group;
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

const char *th_current_test(void) { return th_cur_name; }

const char *th_tmpdir(void) {
    static char dir[sizeof th_tmp + 256];
    snprintf(dir, sizeof dir, "%s/%s", th_tmp, th_cur_name);
    mkdir(th_tmp, 0755); /* on demand; EEXIST when an earlier test made them */
    mkdir(dir, 0755);
    return dir;
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

/* ---- running tests side by side ---------------------------------------------------------- */

static int th_jobs = 1;
/* A byte on this pipe for every SIGCHLD: the scheduler's poll wakes when a test's process ends. */
static int th_wake[2] = {-1, -1};

/* A running test: one slot per test running at once. */
typedef struct Slot {
    int test;            /* index in th_tests; -1: free */
    int share;           /* the cores it was given */
    int emulated;        /* this run is the emulated device's */
    volatile pid_t pid;  /* its process (and process group); 0: none */
    int out, res;        /* read ends of its output and verdict pipes */
    int eof, exited, status;
    double t0, run_t0;   /* when the test started; when this run of it started */
    double cpu;          /* CPU seconds of its processes (and the programs they waited for) */
    double limit;
    char *buf;           /* its output so far (held until it ends) */
    size_t len, cap;
    Tail tail;           /* this run's last output */
} Slot;

static Slot *th_slots;
static double th_run_t0; /* when th_run_all began */
static int th_nslots;

/* The runner's end on SIGINT/SIGTERM: the running tests' processes go with it. */
static void th_on_signal(int sig) {
    for (int k = 0; k < th_nslots; k++)
        if (th_slots[k].pid > 0) kill(-th_slots[k].pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void th_on_child(int sig) {
    (void)sig;
    int e = errno;
    if (write(th_wake[1], "c", 1) < 0) {
        /* the pipe is full: poll wakes anyway */
    }
    errno = e;
}

/* The cores test i counts for when the run has `jobs` of them. */
static int th_share(int i, int jobs) {
    int c = th_tests[i].cores;
    return c == TH_ALONE || c > jobs ? jobs : c;
}

/* The seconds each test took in a whole run (tests/durations, "SECONDS NAME" a line), for the
 * order of the run; 0 for a test it does not list, or where there is no such file. */
static void th_read_durations(double *secs) {
    FILE *f = fopen("tests/durations", "r");
    if (!f) return;
    char line[512], name[400];
    double s;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && sscanf(line, "%lf %399s", &s, name) == 2)
            for (int i = 0; i < th_ntests; i++)
                if (strcmp(th_tests[i].name, name) == 0) secs[i] = s;
    fclose(f);
}

/* The order in which the selected tests start: with one job, as registered; else those that run
 * alone first (one after another, with nothing beside them), then those that mostly wait (so that
 * they wait beside the next), the other tests of a group (TEST_IN_GROUP: they run one after
 * another, a chain that ended a run on an idle core when its tests came last by their times),
 * those that take every core, the others; each of these classes the longest first. */
static double *th_order_secs;
static int th_group(int i) {
    if (th_tests[i].cores == TH_ALONE) return 0;
    if (th_tests[i].cores == 0) return 1;
    if (th_tests[i].group) return 2;
    return th_share(i, th_jobs) < th_jobs ? 4 : 3;
}
static int th_order_cmp(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    int ai = th_group(i), aj = th_group(j);
    if (ai != aj) return ai - aj;
    if (th_order_secs[i] != th_order_secs[j]) return th_order_secs[i] < th_order_secs[j] ? 1 : -1;
    return i - j;
}

/* Starts test i in slot s, in a child process (on the emulated device's runner when `emulated`).
 * 0, or -1 with the reason in `why`. */
static int th_start(Slot *s, int emulated, char *why, size_t whylen) {
    int out[2], res[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe(res) != 0) {
        snprintf(why, whylen, "could not create a pipe: %s", strerror(errno));
        return -1;
    }
    fcntl(res[0], F_SETFD, FD_CLOEXEC);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "could not fork: %s", strerror(errno));
        close(out[0]), close(out[1]), close(res[0]), close(res[1]);
        return -1;
    }
    if (pid == 0) {
        /* its own process group, so that a timeout also ends what the test launched */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        close(th_wake[0]);
        close(th_wake[1]);
        dup2(out[1], 1);
        dup2(out[1], 2);
        /* beside other tests: its share of the cores (one for a test that mostly waits) */
        const int cores = s->share > 0 ? s->share : 1;
        char share[16];
        snprintf(share, sizeof share, "%d", cores);
        setenv("NVCNN_TEST_JOBS", share, 1);
        if (cores < th_jobs) {
            setenv("OMP_NUM_THREADS", share, 1);
            omp_set_num_threads(cores);
        }
        if (emulated) th_exec_emulated(th_tests[s->test].name, res[1]);
        _exit(th_run_and_send(s->test, res[1]));
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    close(out[1]);
    close(res[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(res[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->out = out[0];
    s->res = res[0];
    s->eof = s->exited = s->status = 0;
    s->emulated = emulated;
    s->run_t0 = th_now();
    memset(&s->tail, 0, sizeof s->tail);
    return 0;
}

/* Reads what slot s's test has printed so far: echoed at once with one job, else held. */
static void th_collect(Slot *s) {
    char b[4096];
    while (!s->eof) {
        ssize_t r = read(s->out, b, sizeof b);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s->eof = r == 0 || errno != EAGAIN;
            return;
        }
        tail_add(&s->tail, b, (size_t)r);
        if (th_jobs == 1) {
            fwrite(b, 1, (size_t)r, stdout);
            fflush(stdout);
            continue;
        }
        if (s->len + (size_t)r > s->cap) {
            s->cap = 2 * (s->len + (size_t)r);
            s->buf = realloc(s->buf, s->cap);
        }
        memcpy(s->buf + s->len, b, (size_t)r);
        s->len += (size_t)r;
    }
}

/* Waits (flags: WNOHANG or 0) for slot s's process; 1 when it has ended: its status kept, its CPU
 * time (with that of the programs it waited for) added to the slot's. */
static int th_reap(Slot *s, int flags) {
    struct rusage ru;
    if (wait4(s->pid, &s->status, flags, &ru) != s->pid) return 0;
    s->cpu += (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return 1;
}

/* Ends slot s's run (its process has exited, or is killed here when `timed_out`): its verdict,
 * with how a child that gave none ended in `why`. */
static int th_finish_run(Slot *s, int timed_out, char *why, size_t whylen) {
    if (timed_out) {
        kill(-s->pid, SIGKILL);
        th_reap(s, 0);
    }
    th_collect(s);
    kill(-s->pid, SIGKILL); /* anything the test left running */
    s->pid = 0;
    close(s->out);
    char msg[sizeof th_skip_reason];
    ssize_t m = read(s->res, msg, sizeof msg - 1);
    close(s->res);
    msg[m > 0 ? m : 0] = 0;
    const int status = s->status;
    if (timed_out) {
        snprintf(why, whylen, "killed after its time limit of %.0f s", s->limit);
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

/* Prints test i's block: the output it held, then the verdict line; counts the verdict. */
static void th_report(Slot *s, int v, const char *why, int *counts) {
    const char *name = th_tests[s->test].name, *dev = s->emulated ? "emulated device, " : "";
    const double dt = th_now() - s->t0;
    if (s->len) fwrite(s->buf, 1, s->len, stdout);
    if (v == TH_FAIL && why[0]) {
        printf("FAIL %s (%s%s, %.2fs); last output:\n", name, dev, why, dt);
        tail_print(&s->tail);
    } else if (v == TH_FAIL) {
        printf("FAIL %s (%s%d failed checks, %.2fs)\n", name, dev, th_cur_failed, dt);
    } else if (v == TH_SKIP) {
        printf("SKIP %s: skipped%s: %s\n", name, dev[0] ? " on the emulated device" : "", th_skip_reason);
    } else {
        printf("PASS %s (%s%.2fs)\n", name, dev, dt);
    }
    fflush(stdout);
    counts[v]++;
    /* NVCNN_TEST_TIMES (the usage above) */
    const char *tf = getenv("NVCNN_TEST_TIMES");
    FILE *f = tf && *tf ? fopen(tf, "a") : NULL;
    if (f) {
        fprintf(f, "%.2f %.2f %.2f %d %s%s\n", s->t0 - th_run_t0, th_now() - th_run_t0, s->cpu, s->share, name, s->emulated ? "@emu" : "");
        fclose(f);
    }
}

/* Whether a test of test i's group is running. */
static int th_group_running(int i) {
    const char *g = th_tests[i].group;
    if (!g) return 0;
    for (int k = 0; k < th_nslots; k++)
        if (th_slots[k].test >= 0 && th_tests[th_slots[k].test].group && strcmp(th_tests[th_slots[k].test].group, g) == 0) return 1;
    return 0;
}

/* Runs the selected tests (order[0..n-1]), up to th_jobs at once; counts[TH_PASS...] their verdicts. */
static void th_run_all(const int *order, int n, double limit, int *counts) {
    th_run_t0 = th_now();
    th_nslots = n; /* at most th_jobs tests that keep a core busy, and those that mostly wait */
    th_slots = calloc((size_t)th_nslots + 1, sizeof *th_slots);
    for (int k = 0; k < th_nslots; k++) th_slots[k].test = -1;
    if (pipe2(th_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "run_tests: pipe: %s\n", strerror(errno));
        exit(2);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = th_on_child;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGINT, th_on_signal);
    signal(SIGTERM, th_on_signal);
    struct pollfd *pf = calloc((size_t)th_nslots + 1, sizeof *pf);
    char *started = calloc((size_t)n + 1, 1);
    int next = 0, running = 0, used = 0, alone = 0; /* alone: a test that runs alone is running */
    while (next < n || running > 0) {
        /* start the next tests in their order while their cores are free: a test that runs alone
         * when nothing runs, another while the cores of those running leave it room (one always
         * starts on an idle runner). A test whose group has one running waits, and the tests after
         * it may start before it. */
        for (int k = next; k < n; k++) {
            if (started[k]) continue;
            const int i = order[k], share = th_share(i, th_jobs);
            if (running > 0 && (th_jobs == 1 || alone || th_tests[i].cores == TH_ALONE || used + share > th_jobs)) break;
            if (th_group_running(i)) continue;
            started[k] = 1;
            while (next < n && started[next]) next++;
            Slot *s = &th_slots[0];
            while (s->test >= 0) s++;
            s->test = i;
            s->share = share;
            s->t0 = th_now();
            s->cpu = 0;
            s->limit = th_tests[i].limit > 0 ? th_tests[i].limit : limit;
            s->len = 0;
            s->emulated = 0;
            memset(&s->tail, 0, sizeof s->tail);
            char why[256] = "";
            if (th_start(s, 0, why, sizeof why) != 0) {
                th_report(s, TH_FAIL, why, counts);
                s->test = -1;
                continue;
            }
            running++;
            used += share;
            alone = th_tests[i].cores == TH_ALONE;
        }
        /* wait for output, an end, or the nearest time limit */
        int np = 0;
        double wait = 1.0;
        for (int k = 0; k < th_nslots; k++) {
            Slot *s = &th_slots[k];
            if (s->test < 0) continue;
            double left = s->limit - (th_now() - s->run_t0);
            if (left < wait) wait = left > 0 ? left : 0;
            if (!s->eof) pf[np++] = (struct pollfd){s->out, POLLIN, 0};
        }
        pf[np++] = (struct pollfd){th_wake[0], POLLIN, 0};
        if (poll(pf, (nfds_t)np, (int)(wait * 1000) + 1) < 0 && errno != EINTR) {
            fprintf(stderr, "run_tests: poll: %s\n", strerror(errno));
            exit(2);
        }
        char drain[64];
        while (read(th_wake[0], drain, sizeof drain) > 0) {
        }
        for (int k = 0; k < th_nslots; k++) {
            Slot *s = &th_slots[k];
            if (s->test < 0) continue;
            th_collect(s);
            int timed_out = 0;
            if (th_reap(s, WNOHANG))
                s->exited = 1;
            else if (th_now() - s->run_t0 > s->limit)
                timed_out = 1;
            else
                continue;
            char why[256] = "";
            int v = th_finish_run(s, timed_out, why, sizeof why);
            if (v == TH_SKIP && th_emu_dir() && strncmp(th_skip_reason, "no GPU", 6) == 0) {
                /* no GPU here: the test runs on the emulated device */
                if (th_start(s, 1, why, sizeof why) == 0) continue;
                s->emulated = 1;
                v = TH_FAIL;
            }
            th_report(s, v, why, counts);
            if (th_tests[s->test].cores == TH_ALONE) alone = 0;
            s->test = -1;
            running--;
            used -= s->share;
        }
    }
    free(pf);
    free(started);
    for (int k = 0; k < th_nslots; k++) free(th_slots[k].buf);
    signal(SIGCHLD, SIG_DFL);
}

/* The run's temporary directory, removed */
static void th_remove_tmp(void) {
    struct stat st;
    if (stat(th_tmp, &st) == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_tmp);
        if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", th_tmp);
    }
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
    th_remove_tmp();
    return 0;
}

/* A number of jobs (what: the flag or variable it came from, for the message); exits 2 if bad. */
static int th_parse_jobs(const char *what, const char *v) {
    char *end;
    errno = 0;
    long j = strtol(v, &end, 10);
    if (end == v || *end || errno || j < 1 || j > TH_MAX_TESTS) {
        fprintf(stderr, "run_tests: %s%s: the number of jobs must be a whole number from 1 to %d\n", what, v, TH_MAX_TESTS);
        exit(2);
    }
    return (int)j;
}

int main(int argc, char **argv) {
    int list = 0, inline_ = 0, nsel = 0, verdict_fd = -1;
    double limit = 600;
    const char *env = getenv("NVCNN_TEST_TIMEOUT");
    if (env && *env) limit = atof(env);
    /* the online CPUs; one where there is an NVIDIA GPU, which the GPU tests would share (and
     * some time it) */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    th_jobs = online > 1 && access("/dev/nvidiactl", F_OK) != 0 ? (online < TH_MAX_TESTS ? (int)online : TH_MAX_TESTS) : 1;
    env = getenv("NVCNN_TEST_JOBS");
    if (env && *env) th_jobs = th_parse_jobs("NVCNN_TEST_JOBS=", env);
    char **sel = calloc((size_t)argc + 1, sizeof *sel);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "--inline") == 0)
            inline_ = 1;
        else if (strncmp(argv[i], "--timeout=", 10) == 0)
            limit = atof(argv[i] + 10);
        else if (strncmp(argv[i], "--jobs=", 7) == 0)
            th_jobs = th_parse_jobs("--jobs=", argv[i] + 7);
        else if (strncmp(argv[i], "--verdict-fd=", 13) == 0)
            verdict_fd = atoi(argv[i] + 13);
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "run_tests: unknown option %s (--list, --inline, --jobs=N, --timeout=SECONDS)\n", argv[i]);
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
    int counts[3] = {0, 0, 0}, n = 0;
    int *order = malloc((size_t)th_ntests * sizeof *order);
    for (int i = 0; i < th_ntests; i++)
        if (th_selected(th_tests[i].name, nsel, sel)) order[n++] = i;
    if (inline_) {
        for (int k = 0; k < n; k++) {
            Slot s = {.test = order[k], .t0 = th_now()};
            th_report(&s, th_run_here(order[k]), "", counts);
        }
    } else {
        if (th_jobs > 1) {
            th_order_secs = calloc((size_t)th_ntests, sizeof *th_order_secs);
            th_read_durations(th_order_secs);
            qsort(order, (size_t)n, sizeof *order, th_order_cmp);
            free(th_order_secs);
        }
        th_run_all(order, n, limit, counts);
    }
    th_remove_tmp();
    printf("%d passed, %d failed, %d skipped\n", counts[TH_PASS], counts[TH_FAIL], counts[TH_SKIP]);
    free(order);
    free(sel);
    return counts[TH_FAIL] ? 1 : 0;
}
