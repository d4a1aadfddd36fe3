/* util.h: errors, checked allocation and files, a seeded RNG, a wall clock.
 *
 * Every fatal error goes through die()/die_code(): one line "<program>: error: ..." on stderr
 * (the program is nvcnn unless util_set_program() names another) and a non-zero exit. Exit codes
 * are part of the command-line contract (see EXIT_* below).
 */
#ifndef NVCNN_UTIL_H
#define NVCNN_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes. */
enum {
    EXIT_OK = 0,
    EXIT_FAILURE_GENERIC = 1, /* an I/O error, a library error */
    EXIT_USAGE = 2,           /* bad flag, bad value, unknown model, no GPU for --device=gpu */
    EXIT_OOM = 3,             /* the batch does not fit in device memory */
    EXIT_DATA = 4,            /* corrupt or truncated input records */
    EXIT_STALLED = 5          /* a rank waited --step_timeout seconds in one phase (a lost peer) */
};

/* The name that begins every error and warning line (default "nvcnn"); `name` must outlive the
 * process's messages (a string literal, argv[0]). */
void util_set_program(const char *name);
/* Called by die()/die_code() after the error line and before the process exits (NULL: none):
 * a program's last cleanup, such as removing a half-written file. One hook per process. */
void util_set_die_hook(void (*hook)(void));
/* While on, die_code(EXIT_USAGE, ...) prints nothing and waits a second before it exits: a rank
 * other than 0 parsing the command line, which every rank parses alike, leaves the one error line
 * to rank 0 (which has printed it by then; mpirun ends the job at the first rank that exits). */
void util_set_quiet_usage(int on);
/* A rank other than 0 waits `ms` milliseconds before it says its fatal error (0: at once): where
 * rank 0 met the same error (a missing --data_dir, a checkpoint that cannot be resumed, a usage
 * error every rank finds alike) and said it, mpirun or srun ends the job meanwhile and the line
 * comes once; an error of this rank's own is said all the same, that much later. */
void util_set_error_delay(int ms);
/* Where `path` is a symbolic link to nothing (err, the errno a stat or open of it gave, is ENOENT or
 * ENOTDIR): "is a dangling symbolic link (to TARGET, which does not exist)" in buf, returned; else
 * NULL. */
const char *util_dangling_link(const char *path, int err, char *buf, size_t n);
/* Prints "<program>: error: <fmt>" and exits with `code`. */
void die_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* die_code(EXIT_FAILURE_GENERIC, ...). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints "<program>: error: <fmt>" on stderr and returns: for a failure found at the end of a run,
 * which then finishes its shutdown and exits non-zero. */
void error_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<program>: warning: <fmt>" on stderr. */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* What the run asked for, named when an allocation fails (exit 3, as a batch that does not fit on
 * the GPU): e.g. "--model=vgg16 --batch_size=512 at 224x224 (...)"; NULL or "": a plain failure. */
void util_set_oom_hint(const char *hint);
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* 64-byte aligned allocation (free with free()). */
void *xmalloc_aligned(size_t n);
/* fopen that dies with the file name and strerror on failure. */
FILE *xfopen(const char *path, const char *mode);

/* The temporary name under which a file for path is written before it is renamed into place:
 * beside it, hidden, dir/.name.tmp.PID. 0, or -1 when it does not fit in n bytes. */
int tmp_path_beside(const char *path, char *tmp, size_t n);
/* Whether flag's output file can be written at path: a file name (no trailing slash) that is not
 * a directory or another non-regular file, in a folder that exists and takes new files. 0, or -1
 * with "--<flag>=<path>: <reason>" in err. Leaves nothing behind. */
int check_output_path(const char *flag, const char *path, char *err, size_t errlen);

/* Whether the file path lies directly in folder dir (the same folder once both resolve, else as
 * written). */
int path_in_folder(const char *path, const char *dir);
/* An exclusive lock (flock) on the file `path`, created if missing: one process at a time in a
 * folder. UTIL_LOCKED: held (the descriptor stays open until the process ends), the file now
 * saying "pid N on HOST"; UTIL_LOCK_BUSY: another process holds it, its line (or "pid unknown")
 * in who[n]; UTIL_LOCK_NONE: a file system without locks, nothing held; -1: the file cannot be
 * opened (errno says why). */
enum { UTIL_LOCKED = 0, UTIL_LOCK_BUSY = 1, UTIL_LOCK_NONE = 2 };
int util_lock_file(const char *path, char *who, size_t n);
/* Whether two output paths name one file (the same name in the same folder). */
int same_output_path(const char *a, const char *b);

/* Wall clock in seconds (CLOCK_MONOTONIC). */
double now_seconds(void);

/* The vector instructions nvcnn's own CPU kernels (src/onednn/: Winograd, pooling, weight
 * gradients) may use: the CPU's, capped as oneDNN's kernels are by ONEDNN_MAX_CPU_ISA (or
 * DNNL_MAX_CPU_ISA) where it is set, so that a capped run is all of one instruction set:
 * SSE41 or AVX: neither AVX2 nor AVX-512; AVX2 (and its VNNI variants): no AVX-512. Read once. */
int cpu_avx2_fma(void);
int cpu_avx512f(void);
/* The cap that a value of ONEDNN_MAX_CPU_ISA sets (oneDNN's names, any case): 0 below AVX2, 1 AVX2,
 * 2 none (AVX-512, AMX, ALL, DEFAULT, unset); -1 a name oneDNN does not know. */
int cpu_isa_cap_of(const char *value);
/* ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) set to a name that oneDNN of this version (major * 100 +
 * minor; 0: no oneDNN here, any name it has had) does not know: exit 2 naming it (oneDNN would
 * ignore it silently, and the run would not be capped as asked). Versions after 2.6 are taken to
 * know every name in the table. */
void cpu_isa_check(int onednn_version);
/* Environment variable `name` as the index of one of its n choices (as written), -1 where it is
 * unset or empty; any other value is exit 2 naming the variable, the value and the choices. */
int util_env_choice(const char *name, const char *const *choices, int n);

/* ---- Random numbers: xoshiro256** seeded through splitmix64. Deterministic per seed. ---- */
typedef struct Rng {
    uint64_t s[4];
} Rng;

void rng_seed(Rng *r, uint64_t seed);
/* A generator for stream `stream` of `seed` (e.g. per rank, per worker): independent streams. */
void rng_seed_stream(Rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_u64(Rng *r);
/* Uniform in [0, 1). */
double rng_uniform(Rng *r);
/* Uniform integer in [0, n). n > 0. */
uint32_t rng_below(Rng *r, uint32_t n);
/* Standard normal (Box-Muller). */
double rng_normal(Rng *r);
/* Normal truncated to +/- 2 standard deviations (as TensorFlow's truncated_normal). */
double rng_truncated_normal(Rng *r);

/* Statistics over per-step figures, as nvcnn reports them. */
typedef struct Stats {
    double mean;
    double stderr_; /* std (ddof=1) / sqrt(n); NAN when n <= 2 */
    double jitter;  /* 1.4826 * median absolute deviation */
} Stats;
Stats stats_compute(const double *v, size_t n);

#endif
