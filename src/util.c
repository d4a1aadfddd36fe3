/* util.c: see util.h. */
#include "util.h"

#include <stdatomic.h>
#include <unistd.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *program = "nvcnn";
static void (*die_hook)(void);

void util_set_program(const char *name) { program = name; }
void util_set_die_hook(void (*hook)(void)) { die_hook = hook; }
static int quiet_usage;
void util_set_quiet_usage(int on) { quiet_usage = on; }
static int error_delay_ms;
void util_set_error_delay(int ms) { error_delay_ms = ms; }

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* The whole line is formatted first and written with one call: stderr is unbuffered, and a line
 * written in pieces can be split by another thread's output (a decode worker's error in the middle
 * of the main thread's header). */
static void vmsg(const char *kind, const char *fmt, va_list ap) {
    char line[8192];
    int n = snprintf(line, sizeof line, "%s: %s: ", program, kind);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        n = m < 0 ? n : n + m;
    }
    if ((size_t)n >= sizeof line - 1) n = (int)sizeof line - 2; /* cut: still one line */
    line[n++] = '\n';
    fflush(stdout);
    fwrite(line, 1, (size_t)n, stderr);
    fflush(stderr);
}

void error_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg("error", fmt, ap);
    va_end(ap);
}

/* An error ends the process at once: the first thread to die prints its line, flushes every
 * stream and leaves with _exit(). exit() would run the libraries' destructors (OpenBLAS's buffers,
 * cuBLAS's state) while other threads still use them, for a decode worker can die while the main
 * thread is inside a GEMM; and two threads dying together would run them twice. Any other thread
 * that dies meanwhile waits here until the process is gone. */
static atomic_int dying;

static void begin_dying(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&dying, &expected, 1))
        for (;;) pause();
}

/* While a dying process waits (a quiet rank, or a rank's error delay), the launcher ending the
 * job (SIGTERM, SIGINT, SIGHUP) ends it with its own exit code, not the signal's: srun reports a
 * job's highest code, and 143 would hide the error's 2. */
static volatile sig_atomic_t waiting_code;

static void end_waiting(int sig) {
    (void)sig;
    if (die_hook) die_hook();
    _exit(waiting_code);
}

static void wait_dying(int code, int ms) {
    waiting_code = code;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = end_waiting;
    sigemptyset(&sa.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        sigaction(sigs[i], &sa, NULL);
        sigaddset(&set, sigs[i]);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* (this thread may block them for the signal thread) */
    fflush(NULL);
    sleep_ms(ms);
}

static void vdie(int code, const char *fmt, va_list ap) __attribute__((noreturn));
static void vdie(int code, const char *fmt, va_list ap) {
    begin_dying();
    if (code == EXIT_USAGE && quiet_usage) {
        wait_dying(code, 1000);
        _exit(code);
    }
    if (error_delay_ms > 0) wait_dying(code, error_delay_ms); /* a rank but 0: the job may end first (see util.h) */
    vmsg("error", fmt, ap);
    if (die_hook) die_hook();
    fflush(NULL);
    _exit(code);
}

void die_code(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vdie(code, fmt, ap);
    va_end(ap);
}

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vdie(EXIT_FAILURE_GENERIC, fmt, ap);
    va_end(ap);
}

const char *util_dangling_link(const char *path, int err, char *buf, size_t n) {
    struct stat l;
    if ((err != ENOENT && err != ENOTDIR) || lstat(path, &l) != 0 || !S_ISLNK(l.st_mode)) return NULL;
    char to[4096];
    const ssize_t k = readlink(path, to, sizeof to - 1);
    to[k > 0 ? k : 0] = 0;
    snprintf(buf, n, "is a dangling symbolic link (to %s, which does not exist)", k > 0 ? to : "?");
    return buf;
}

void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning", fmt, ap);
    va_end(ap);
}

static char oom_hint[512]; /* util_set_oom_hint */

void util_set_oom_hint(const char *hint) { snprintf(oom_hint, sizeof oom_hint, "%s", hint ? hint : ""); }

/* An allocation of n bytes failed: exit 3 naming what the run asked for where it is known */
static void out_of_memory(size_t n) __attribute__((noreturn));
static void out_of_memory(size_t n) {
    if (oom_hint[0])
        die_code(EXIT_OOM, "out of host memory: %zu bytes (%.2f GiB) could not be allocated for %s", n, (double)n / 1073741824.0,
                 oom_hint);
    die("out of host memory allocating %zu bytes", n);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(size && count > SIZE_MAX / size ? SIZE_MAX : count * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void *xmalloc_aligned(size_t n) {
    void *p = NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) out_of_memory(n);
    return p;
}

FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    return f;
}

int tmp_path_beside(const char *path, char *tmp, size_t n) {
    const char *slash = strrchr(path, '/');
    const int len = slash ? (int)(slash - path + 1) : 0;
    return snprintf(tmp, n, "%.*s.%s.tmp.%d", len, path, slash ? slash + 1 : path, (int)getpid()) >= (int)n ? -1 : 0;
}

int check_output_path(const char *flag, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (!path[0] || path[strlen(path) - 1] == '/') {
        snprintf(err, errlen, "--%s=%s: not a file name", flag, path);
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--%s=%s: %s", flag, path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        return -1;
    }
    /* a new file beside it, removed at once: the folder exists and takes files */
    char tmp[4200];
    if (tmp_path_beside(path, tmp, sizeof tmp) != 0) {
        snprintf(err, errlen, "--%s=%s: the path is too long", flag, path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "--%s=%s: cannot write there: %s", flag, path, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

int util_lock_file(const char *path, char *who, size_t n) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int busy = errno == EWOULDBLOCK;
        if (busy && n) {
            ssize_t k = pread(fd, who, n - 1, 0);
            who[k > 0 ? k : 0] = 0;
            who[strcspn(who, "\n")] = 0;
            if (!who[0]) snprintf(who, n, "pid unknown");
        }
        close(fd);
        return busy ? UTIL_LOCK_BUSY : UTIL_LOCK_NONE;
    }
    char host[64] = "", line[160];
    gethostname(host, sizeof host - 1);
    int len = snprintf(line, sizeof line, "pid %d on %s\n", (int)getpid(), host);
    if (ftruncate(fd, 0) == 0) { /* the holder's name is a courtesy: a failed write changes nothing */
        const ssize_t wrote = pwrite(fd, line, (size_t)len, 0);
        (void)wrote;
    }
    return UTIL_LOCKED; /* fd stays open: the lock lasts as long as the process */
}

int path_in_folder(const char *path, const char *dir) {
    const char *slash = strrchr(path, '/');
    char pd[4096], rp[PATH_MAX], rd[PATH_MAX];
    snprintf(pd, sizeof pd, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    if (realpath(pd, rp) && realpath(dir, rd)) return strcmp(rp, rd) == 0;
    /* a folder not made yet: as written, trailing slashes aside */
    size_t n = slash ? (size_t)(slash - path) : 0, d = strlen(dir);
    while (d > 1 && dir[d - 1] == '/') d--;
    return n == d && strncmp(path, dir, n) == 0;
}

int same_output_path(const char *a, const char *b) {
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) != 0) return 0;
    char da[4096];
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + (sa == a) : 1, sa ? a : ".");
    return path_in_folder(b, da);
}

/* oneDNN's names of instruction sets for ONEDNN_MAX_CPU_ISA, the cap each sets on nvcnn's own
 * kernels, and whether oneDNN 2.6 knows it (its dnnl_cpu_isa_t; the others are later versions') */
static const struct {
    const char *name;
    int cap, in26;
} isa_names[] = {
    {"SSE41", 0, 1},           {"AVX", 0, 1},
    {"AVX2", 1, 1},            {"AVX2_VNNI", 1, 1},           {"AVX2_VNNI_2", 1, 0},
    {"AVX512_MIC", 2, 1},      {"AVX512_MIC_4OPS", 2, 1},     {"AVX512_CORE", 2, 1},
    {"AVX512_CORE_VNNI", 2, 1}, {"AVX512_CORE_BF16", 2, 1},   {"AVX512_CORE_FP16", 2, 0},
    {"AVX512_CORE_AMX", 2, 1}, {"AVX512_CORE_AMX_FP16", 2, 0}, {"AVX10_1_512", 2, 0},
    {"AVX10_1_512_AMX", 2, 0}, {"AVX10_1_512_AMX_FP16", 2, 0}, {"ALL", 2, 1},
    {"DEFAULT", 2, 0},
};

/* the entry of isa_names that v names (any case), -1: none */
static int isa_index(const char *v) {
    char u[32];
    size_t n = 0;
    for (; v[n] && n + 1 < sizeof u; n++) u[n] = (char)(v[n] >= 'a' && v[n] <= 'z' ? v[n] - 'a' + 'A' : v[n]);
    u[n] = 0;
    if (v[n]) return -1;
    for (int k = 0; k < (int)(sizeof isa_names / sizeof *isa_names); k++)
        if (strcmp(u, isa_names[k].name) == 0) return k;
    return -1;
}

int cpu_isa_cap_of(const char *v) {
    if (!v || !*v) return 2;
    const int k = isa_index(v);
    return k < 0 ? -1 : isa_names[k].cap;
}

/* the variable that sets the cap (ONEDNN_MAX_CPU_ISA, else oneDNN's older DNNL_MAX_CPU_ISA), or NULL */
static const char *isa_variable(void) {
    const char *v = getenv("ONEDNN_MAX_CPU_ISA");
    if (v && *v) return "ONEDNN_MAX_CPU_ISA";
    v = getenv("DNNL_MAX_CPU_ISA");
    return v && *v ? "DNNL_MAX_CPU_ISA" : NULL;
}

void cpu_isa_check(int onednn_version) {
    const char *name = isa_variable();
    if (!name) return;
    const int old = onednn_version > 0 && onednn_version <= 206, k = isa_index(getenv(name)); /* 2.6 or older: its names */
    if (k >= 0 && (!old || isa_names[k].in26)) return;
    char list[400] = "";
    size_t len = 0;
    for (int i = 0; i < (int)(sizeof isa_names / sizeof *isa_names); i++)
        if (!old || isa_names[i].in26)
            len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s", len ? ", " : "", isa_names[i].name);
    if (onednn_version > 0)
        die_code(EXIT_USAGE, "%s=%s: not an instruction set oneDNN %d.%d knows (%s); it would ignore it and cap nothing", name, getenv(name),
                 onednn_version / 100, onednn_version % 100, list);
    die_code(EXIT_USAGE, "%s=%s: not an instruction set oneDNN knows (%s)", name, getenv(name), list);
}

int util_env_choice(const char *name, const char *const *choices, int n) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(v, choices[i]) == 0) return i;
        len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s", i == 0 ? "" : i + 1 < n ? ", " : " or ",
                                choices[i]);
    }
    die_code(EXIT_USAGE, "%s=%s: expected %s", name, v, list);
}

static int cpu_cap(void) {
    static int cap = -1;
    if (cap < 0) {
        const char *name = isa_variable();
        cap = name ? cpu_isa_cap_of(getenv(name)) : 2;
        if (cap < 0) cap = 2; /* unknown: oneDNN caps nothing (cpu_isa_check refuses it first) */
    }
    return cap;
}

#if defined(__x86_64__) || defined(__i386__)
#define CPU_HAS(feature) __builtin_cpu_supports(feature)
#else
#define CPU_HAS(feature) 0
#endif
int cpu_avx2_fma(void) { return cpu_cap() >= 1 && CPU_HAS("avx2") && CPU_HAS("fma"); }
int cpu_avx512f(void) { return cpu_cap() >= 2 && CPU_HAS("avx512f") && CPU_HAS("fma"); }

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- RNG ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

void rng_seed_stream(Rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (0xd1b54a32d192ed03ULL * (stream + 1));
    uint64_t mixed = splitmix64(&x);
    rng_seed(r, mixed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(Rng *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

uint32_t rng_below(Rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (lo < t) {
            m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double rng_normal(Rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rng_truncated_normal(Rng *r) {
    for (;;) {
        double z = rng_normal(r);
        if (z > -2.0 && z < 2.0) return z;
    }
}

/* ---- Stats ---- */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_sorted(const double *v, size_t n) {
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Stats stats_compute(const double *v, size_t n) {
    Stats s = {NAN, NAN, NAN};
    if (n == 0) return s;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.mean = sum / (double)n;
    if (n > 2) {
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += (v[i] - s.mean) * (v[i] - s.mean);
        s.stderr_ = sqrt(ss / (double)(n - 1)) / sqrt((double)n);
    }
    double *t = xmalloc(n * sizeof *t);
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    double med = median_sorted(t, n);
    for (size_t i = 0; i < n; i++) t[i] = fabs(v[i] - med);
    qsort(t, n, sizeof *t, cmp_double);
    s.jitter = 1.4826 * median_sorted(t, n);
    free(t);
    return s;
}
