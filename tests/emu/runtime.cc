/* runtime.cc: the CUDA runtime API of the emulated device: devices, memory, streams and events,
 * copies and errors (see emu.h and docs/gpu-emulation.md).
 *
 * Environment:
 *   NVCNN_EMU_GPUS=N       devices on this node (default 2); CUDA_VISIBLE_DEVICES selects among them
 *   NVCNN_EMU_MEM=SIZE     memory of each device (default 8G; K, M, G suffixes)
 *   NVCNN_EMU_DRIVER=V     the driver's CUDA version (default 13000); older than the toolkit's
 *                          runtime makes every call fail with cudaErrorInsufficientDriver
 *   NVCNN_EMU_STREAMS=ORDER the order of the streams' work: random (default), seeded by
 *                          NVCNN_EMU_SEED; a number N: random with seed N; compute-first: streams
 *                          that have run a kernel or a library computation run their work at once,
 *                          the others (copies, NCCL) only when something waits for it; side-first:
 *                          the reverse
 *   NVCNN_EMU_SEED=N       seed of the block and thread orders, and of the streams' random order
 *                          (default 1)
 *
 * Memory: each cudaMalloc is a mapping of its own with a guard page before and after; the block
 * ends as close to the trailing guard page as the 256-byte alignment allows, and the bytes around
 * it are checked when it is freed. Fresh memory holds the poison pattern (0xFF bytes). A freed
 * block becomes inaccessible (address space kept, memory returned), so a later access faults.
 * A fault in a guard page or a freed block is reported with the allocation and the work that was
 * running. Under AddressSanitizer (DEBUG=1) blocks come from malloc instead: ASan's redzones and
 * quarantine do the same work with its own reports. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace emu {

/* ---- diagnostics and configuration ---- */
void fatal(const char *fmt, ...) {
    char msg[1024], thr[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    running_thread(thr, sizeof thr);
    const char *w = running();
    fflush(stdout);
    if (thr[0])
        fprintf(stderr, "nvcnn emulated device: %s (in %s)\n", msg, thr);
    else if (w)
        fprintf(stderr, "nvcnn emulated device: %s (in %s)\n", msg, w);
    else
        fprintf(stderr, "nvcnn emulated device: %s\n", msg);
    fflush(stderr);
    _exit(1);
}

void reject(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "nvcnn emulated device: %s\n", msg);
    fflush(stderr);
}

const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : nullptr;
}

static unsigned long long env_u64(const char *name, unsigned long long def) {
    const char *v = env(name);
    if (!v) return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end) fatal("%s=%s: want a non-negative integer", name, v);
    return x;
}

uint64_t seed() {
    static uint64_t s = env_u64("NVCNN_EMU_SEED", 1);
    return s;
}

/* ---- the lock ---- */
static std::recursive_mutex &api_mutex() {
    static std::recursive_mutex m;
    return m;
}
static void install_fault_handler();
Lock::Lock() {
    api_mutex().lock();
    install_fault_handler();
}
Lock::~Lock() { api_mutex().unlock(); }

/* ---- devices ---- */
/* The order of the streams' work (NVCNN_EMU_STREAMS; see "streams and events" below). */
enum StreamPolicy { STREAMS_RANDOM, STREAMS_COMPUTE_FIRST, STREAMS_SIDE_FIRST };

struct Config {
    int physical = 2;            /* devices on the node */
    std::vector<int> visible;    /* CUDA_VISIBLE_DEVICES: physical index of each visible device */
    size_t mem = (size_t)8 << 30;
    int driver = 13000;
    StreamPolicy streams = STREAMS_RANDOM;
    uint64_t stream_seed = 1; /* STREAMS_RANDOM's */
};

static size_t parse_size(const char *name, const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
    if (errno || end == v || *end || !(x > 0)) fatal("%s=%s: want a size such as 8G, 512M or a number of bytes", name, v);
    return (size_t)(x * mul);
}

/* NVCNN_EMU_STREAMS's value (NULL: unset) into c; false if it means nothing */
static bool parse_streams(Config *c, const char *o) {
    c->streams = STREAMS_RANDOM;
    c->stream_seed = seed();
    if (!o || strcmp(o, "random") == 0) return true;
    if (strcmp(o, "compute-first") == 0) c->streams = STREAMS_COMPUTE_FIRST;
    else if (strcmp(o, "side-first") == 0) c->streams = STREAMS_SIDE_FIRST;
    else {
        char *end;
        errno = 0;
        c->stream_seed = strtoull(o, &end, 10);
        if (*o < '0' || *o > '9' || *end || errno) return false;
    }
    return true;
}

static Config *the_config;
static const Config &config() {
    Config *&c = the_config;
    if (c) return *c;
    c = new Config;
    c->physical = (int)env_u64("NVCNN_EMU_GPUS", 2);
    if (env("NVCNN_EMU_MEM")) c->mem = parse_size("NVCNN_EMU_MEM", env("NVCNN_EMU_MEM"));
    c->driver = (int)env_u64("NVCNN_EMU_DRIVER", 13000);
    if (!parse_streams(c, env("NVCNN_EMU_STREAMS")))
        fatal("NVCNN_EMU_STREAMS=%s: want random, a seed (a non-negative integer), compute-first or side-first",
              env("NVCNN_EMU_STREAMS"));
    /* CUDA_VISIBLE_DEVICES: indexes up to the first invalid one; unset: all; set and empty: none */
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis) {
        for (int i = 0; i < c->physical; i++) c->visible.push_back(i);
    } else {
        std::string s(vis);
        size_t at = 0;
        while (at <= s.size() && !s.empty()) {
            size_t comma = s.find(',', at);
            std::string tok = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            char *end;
            long d = strtol(tok.c_str(), &end, 10);
            if (tok.empty() || *end || d < 0 || d >= c->physical) break;
            c->visible.push_back((int)d);
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
    }
    return *c;
}

/* the state of the random stream order's choices (draw(), below) */
static uint64_t rng_state;
static bool rng_seeded;

void set_streams(const char *order) {
    Lock lock;
    config();
    if (!parse_streams(the_config, order)) fatal("set_streams(%s): want random, a seed, compute-first or side-first", order);
    rng_seeded = false;
}

static bool driver_ok() { return config().driver >= CUDART_VERSION; }

/* CUDA does not survive fork(): once a process has initialised the driver, every call of a child
 * it forks (without exec) fails with cudaErrorInitializationError, as the real runtime does. The
 * process that made the first call owns the driver. */
static pid_t driver_pid = 0;
static cudaError_t driver_check() {
    if (!driver_ok()) return cudaErrorInsufficientDriver;
    if (driver_pid == 0) driver_pid = getpid();
    else if (driver_pid != getpid()) return cudaErrorInitializationError;
    return cudaSuccess;
}

static int current = -1; /* cudaSetDevice's device; -1: no context yet */
static size_t used[64];  /* bytes allocated per visible device */

static cudaError_t last_error = cudaSuccess;
static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}
void set_launch_error(cudaError_t e, const char *why) {
    reject("%s", why);
    last_error = e;
}

/* The calls that need a context: the device must have been chosen (gpu.h's rule; a real GPU
 * would make one on device 0). */
static cudaError_t need_context(const char *what) {
    if (cudaError_t de = driver_check()) return ret(de);
    if (current < 0)
        fatal("%s before cudaSetDevice: on a GPU this makes a context on device 0 of every process (gpu_select() must come first)",
              what);
    return cudaSuccess;
}

/* a context's own memory, which cudaMemGetInfo counts as used */
static size_t context_bytes() {
    size_t m = config().mem / 16;
    return m < ((size_t)256 << 20) ? m : (size_t)256 << 20;
}

size_t mem_free() {
    if (current < 0) return 0;
    size_t u = used[current] + context_bytes();
    return u < config().mem ? config().mem - u : 0;
}

/* ---- memory ---- */
enum Kind { DEVICE, PINNED };
struct Block {
    char *map = nullptr; /* the mapping (guard pages included); NULL under ASan */
    size_t map_len = 0;
    char *base = nullptr;
    size_t size = 0;
    Kind kind = DEVICE;
    int device = -1;
    uint64_t serial = 0;
    bool freed = false;
};
static std::map<uintptr_t, Block> blocks; /* by base: live and freed ones */
static std::vector<Block *> live_blocks;  /* the live ones (map nodes do not move) */
static uint64_t serials;
static const size_t kPage = 4096;

void poison(void *p, size_t bytes) { memset(p, 0xff, bytes); }

/* the live or freed block holding p (freed ones only if `freed`), or NULL */
static Block *find_block(const void *p, bool freed) {
    uintptr_t a = (uintptr_t)p;
    auto it = blocks.upper_bound(a);
    while (it != blocks.begin()) {
        --it;
        Block &b = it->second;
        uintptr_t lo = (uintptr_t)b.base, hi = lo + b.size;
        if (a >= lo && a < hi && (freed || !b.freed)) return &b;
        if (a >= lo) return nullptr; /* blocks do not nest */
    }
    return nullptr;
}

static bool in_range(const void *p, size_t bytes, bool pinned_ok) {
    if (bytes == 0) return true;
    Block *b = find_block(p, false);
    if (!b || (b->kind == PINNED && !pinned_ok)) return false;
    return (uintptr_t)p + bytes <= (uintptr_t)b->base + b->size;
}
bool is_device_range(const void *p, size_t bytes) { return in_range(p, bytes, false); }
bool is_device_reachable(const void *p, size_t bytes) { return in_range(p, bytes, true); }

void describe_pointer(const void *p, char *buf, size_t n) {
    Block *b = find_block(p, true);
    if (!b) {
        snprintf(buf, n, "%p, which is not device memory (a host pointer?)", p);
        return;
    }
    snprintf(buf, n, "%p, offset %zu of %s%s %zu-byte %s block #%llu", p, (size_t)((const char *)p - b->base), b->freed ? "a FREED" : "a",
             "", b->size, b->kind == DEVICE ? "device" : "pinned host", (unsigned long long)b->serial);
}

static char *map_block(size_t size, Block *b) {
    const size_t rounded = (size + 255) & ~(size_t)255;
#if EMU_ASAN
    void *p = nullptr;
    if (posix_memalign(&p, 256, size ? size : 1)) return nullptr;
    b->base = (char *)p;
    (void)rounded;
#else
    const size_t data = (rounded + kPage - 1) & ~(kPage - 1);
    b->map_len = data + 2 * kPage;
    b->map = (char *)mmap(nullptr, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b->map == MAP_FAILED) return nullptr;
    mprotect(b->map, kPage, PROT_NONE);
    mprotect(b->map + kPage + data, kPage, PROT_NONE);
    b->base = b->map + kPage + data - rounded; /* the end as close to the guard page as alignment allows */
    poison(b->map + kPage, data);               /* block and the bytes around it */
#endif
    b->size = size;
    poison(b->base, size);
    return b->base;
}

/* The bytes between a block's end and the next 256-byte boundary (before its trailing guard page)
 * must keep the poison pattern: checked after every piece of stream work, which is then named as
 * the one that wrote there. */
static void check_tails(const char *after) {
#if !EMU_ASAN
    for (const Block *bp : live_blocks) {
        const Block &b = *bp;
        const char *end = b.base + b.size, *stop = b.base + ((b.size + 255) & ~(size_t)255);
        for (const char *q = end; q < stop; q++)
            if ((unsigned char)*q != 0xff)
                fatal("%s wrote %td bytes past the end of a %zu-byte %s block #%llu (out of bounds: on a GPU this may pass unseen)",
                      after, q - end, b.size, b.kind == DEVICE ? "device" : "pinned host", (unsigned long long)b.serial);
    }
#else
    (void)after;
#endif
}

/* Checks the bytes around a block (they must still hold the poison pattern) and retires it. */
static void unmap_block(Block *b) {
#if EMU_ASAN
    free(b->base);
#else
    const char *lo = b->map + kPage, *hi = b->map + b->map_len - kPage;
    for (const char *q = lo; q < hi; q++) {
        if (q == b->base) q += b->size;
        if (q < hi && (unsigned char)*q != 0xff)
            fatal("%s block #%llu of %zu bytes: byte %td %s it was changed (a write out of bounds)",
                  b->kind == DEVICE ? "device" : "pinned host", (unsigned long long)b->serial, b->size,
                  q < b->base ? b->base - q : q - (b->base + b->size), q < b->base ? "before it" : "after its end");
    }
    /* keep the addresses, return the memory: any later access faults */
    mmap(b->map, b->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
#endif
    b->freed = true;
    live_blocks.erase(std::find(live_blocks.begin(), live_blocks.end(), b));
}

/* ---- faults ---- */
#if !EMU_ASAN
static void on_fault(int sig, siginfo_t *si, void *ctx) {
    const uintptr_t a = (uintptr_t)si->si_addr;
    const Block *hit = nullptr;
    for (auto &kv : blocks) { /* the block whose mapping holds the address */
        const Block &b = kv.second;
        if (b.map && a >= (uintptr_t)b.map && a < (uintptr_t)b.map + b.map_len) {
            hit = &b;
            break;
        }
    }
    if (!hit) { /* not ours: the default action */
        signal(sig, SIG_DFL);
        return;
    }
    int write = 0;
#if defined(__x86_64__)
    write = (int)((((ucontext_t *)ctx)->uc_mcontext.gregs[REG_ERR] >> 1) & 1);
#else
    (void)ctx;
#endif
    const uintptr_t lo = (uintptr_t)hit->base, hi = lo + hit->size;
    char where[200];
    if (hit->freed)
        snprintf(where, sizeof where, "inside a FREED %zu-byte %s block #%llu (offset %zu)", hit->size,
                 hit->kind == DEVICE ? "device" : "pinned host", (unsigned long long)hit->serial, (size_t)(a - lo));
    else if (a >= hi)
        snprintf(where, sizeof where, "%zu bytes past the end of a %zu-byte %s block #%llu", (size_t)(a - hi), hit->size,
                 hit->kind == DEVICE ? "device" : "pinned host", (unsigned long long)hit->serial);
    else
        snprintf(where, sizeof where, "%zu bytes before the start of a %zu-byte %s block #%llu", (size_t)(lo - a), hit->size,
                 hit->kind == DEVICE ? "device" : "pinned host", (unsigned long long)hit->serial);
    if (!running())
        fatal("illegal address: host code %s %p, %s", write ? "wrote" : "read", si->si_addr, where);
    fatal("illegal address: %s %p, %s", write ? "write to" : "read of", si->si_addr, where);
}
#endif

static void install_fault_handler() {
#if !EMU_ASAN
    static thread_local bool have_stack;
    if (!have_stack) { /* faults on a fiber's exhausted stack need a stack of their own */
        have_stack = true;
        stack_t ss;
        ss.ss_size = 64 * 1024;
        ss.ss_sp = malloc(ss.ss_size);
        ss.ss_flags = 0;
        sigaltstack(&ss, nullptr);
    }
    static bool installed;
    if (installed) return;
    installed = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
#endif
}

/* ---- streams and events ---- */
/* Each stream is a queue of ops; an op runs when the scheduler decides, in stream order, once the
 * op it waits for (cudaStreamWaitEvent) has run. The scheduler runs ops at two kinds of point:
 *   - when the host needs a stream's work done (a synchronisation, a synchronous copy, a query),
 *     the ops that work depends on must run: under the random policy, every time one op is to
 *     run, it is drawn among that next needed op and the first op of every other stream that
 *     could run now (so unrelated streams advance, or not, at random);
 *   - after every op queued, under the random policy, the scheduler may run ops of the streams
 *     that could run one now, drawn at random, before the host goes on (wander(), below).
 * So wherever several streams have work ready, which one runs first is a seeded random choice
 * (NVCNN_EMU_STREAMS: a seed, or NVCNN_EMU_SEED's), and a stream's work may run at once, late,
 * or only when waited for. compute-first and side-first are the two fixed orders of before:
 * a compute stream (one that has run a kernel or a library computation) runs its work at once,
 * the others only when something waits for them, or the reverse.
 * A collective op (NCCL's exchange with the other ranks, which blocks until they reach the same
 * call) runs only when something waits for it: run any earlier, this process would block on
 * ranks that may themselves be waiting for this one's host (a GPU runs it whatever its host does). */
struct Op {
    std::function<void()> run;
    const char *what;
    ::CUstream_st *wait_on = nullptr; /* runs only once that stream has run wait_pos ops */
    uint64_t wait_pos = 0;
    bool collective = false; /* runs only when something waits for it (above) */
};

} // namespace emu

namespace emu {
struct Capture;
}
struct CUstream_st {
    std::deque<emu::Op> q;
    uint64_t enq = 0, done = 0; /* positions: ops enqueued and run */
    bool compute = false;       /* has run kernels or library computations */
    bool nonblocking = false, destroyed = false, legacy = false;
    int id = 0;
    emu::Capture *cap = nullptr; /* the capture sequence this stream belongs to (stream capture) */
    uint64_t cap_ops = 0;        /* ops it added to it */
    bool cap_pending = false;    /* a fork with ops the origin stream has not joined back yet */
};
struct CUevent_st {
    CUstream_st *s = nullptr; /* the stream and position of the last record */
    uint64_t pos = 0;
    uint64_t record = 0;      /* records so far */
    bool timing = true, destroyed = false;
    double t = 0;             /* when the last record ran */
    uint64_t t_record = 0;    /* which record set t */
    /* last recorded in a capturing stream: the capture, that stream and its ops then */
    emu::Capture *cap = nullptr;
    bool captured = false;
    CUstream_st *cap_stream = nullptr;
    uint64_t cap_ops = 0;
};
/* A graph made by stream capture, and its executable form: the captured work in the order it was
 * queued (a topological order of the captured dependencies: each stream's order, and every event
 * wait after its record), which cudaGraphLaunch queues on the launch stream, one op after another. */
struct CapturedOp {
    emu::Op op;
    bool compute;
};
struct CUgraph_st {
    std::vector<CapturedOp> ops;
};
struct CUgraphExec_st {
    std::vector<CapturedOp> ops;
};

namespace emu {
static CUstream_st legacy_stream;
static std::vector<CUstream_st *> all_streams;
static const char *running_what;

const char *running() { return running_what; }

static double now_s() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static CUstream_st *stream_of(cudaStream_t s) {
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) {
        legacy_stream.legacy = true;
        return &legacy_stream;
    }
    if (s->destroyed) fatal("use of a destroyed stream");
    return s;
}

/* NVCNN_EMU_PROFILE=1: host seconds spent on each kind of stream work, printed at exit (where the
 * emulation's time goes: a tool for keeping the tests fast, not a measure of a GPU). */
static std::map<std::string, std::pair<double, long>> *profile;
static void print_profile() {
    std::vector<std::pair<double, std::string>> v;
    double total = 0;
    for (auto &kv : *profile) {
        v.push_back({kv.second.first, kv.first});
        total += kv.second.first;
    }
    std::sort(v.rbegin(), v.rend());
    fprintf(stderr, "nvcnn emulated device: time per kind of work (host seconds, %.3f s in all)\n", total);
    for (size_t i = 0; i < v.size() && i < 25; i++)
        fprintf(stderr, "  %8.3f s %6ld x  %s\n", v[i].first, (*profile)[v[i].second].second, v[i].second.c_str());
}

/* the random policy's choices: splitmix64 from the seed */
static size_t draw(size_t n) {
    if (!rng_seeded) {
        rng_seeded = true;
        rng_state = config().stream_seed * 0x9e3779b97f4a7c15ULL + 0x5851f42d4c957f2dULL;
    }
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (size_t)(z % n);
}

/* s's first op may run now: its wait, if any, is over */
static bool ready(const CUstream_st *s) {
    if (s->q.empty()) return false;
    const Op &op = s->q.front();
    return !op.wait_on || op.wait_on->done >= op.wait_pos;
}

/* Runs s's first op (ready). Ops never queue work themselves: none runs inside another. */
static void run_first(CUstream_st *s) {
    if (running_what) fatal("internal: %s queued work while it ran", running_what);
    Op op = std::move(s->q.front());
    s->q.pop_front();
    running_what = op.what;
    static const bool want_profile = env("NVCNN_EMU_PROFILE") != nullptr;
    const double t0 = want_profile ? now_s() : 0;
    if (op.run) op.run();
    if (want_profile) {
        if (!profile) {
            profile = new std::map<std::string, std::pair<double, long>>;
            atexit(print_profile);
        }
        auto &e = (*profile)[op.what];
        e.first += now_s() - t0;
        e.second++;
    }
    check_tails(op.what);
    running_what = nullptr;
    s->done++;
}

/* The streams other than `but` whose first op could run at once, unasked (collectives excluded). */
static void runnable(std::vector<CUstream_st *> *out, const CUstream_st *but) {
    out->clear();
    for (CUstream_st *o : all_streams)
        if (o != but && ready(o) && !o->q.front().collective) out->push_back(o);
}

/* Runs s's work up to position pos (the host, or another stream, waits for it). */
static void run_until(CUstream_st *s, uint64_t pos) {
    std::vector<CUstream_st *> others;
    while (s->done < pos) {
        /* the op that must run next: s's first, or the one it waits for, and so on */
        CUstream_st *need = s;
        for (size_t hops = 0; !ready(need); hops++) {
            if (need->q.empty() || hops > all_streams.size()) fatal("stream %d waits for itself (a cycle of events)", s->id);
            need = need->q.front().wait_on;
        }
        if (config().streams == STREAMS_RANDOM) {
            runnable(&others, need);
            const size_t k = draw(others.size() + 1);
            run_first(k < others.size() ? others[k] : need);
        } else {
            run_first(need);
        }
    }
}

/* The random policy's turn after the host queued work: with probability 1/4 one of the streams
 * that can run an op now (each as likely) runs it, and the scheduler draws again; else the host
 * goes on. Work waits more often than it runs: two racing pieces of work are then both still
 * queued, in either order, when something waits for them (emu_streams_interleave_at_random: each
 * race of its two showed under 19 and 23 of 64 seeds this way, under 8 and 1 of 64 when every
 * stream and "stop" were as likely). */
static void wander() {
    std::vector<CUstream_st *> c;
    for (;;) {
        runnable(&c, nullptr);
        if (c.empty()) return;
        if (draw(4) != 0) return;
        run_first(c[draw(c.size())]);
    }
}

/* compute-first and side-first: does s run its work when it is queued? */
static bool eager(const CUstream_st *s) {
    if (s->legacy) return true;
    return config().streams == STREAMS_SIDE_FIRST ? !s->compute : s->compute;
}

/* what the host asked of the device, for emu_counts.h: the times it waited for the device (a
 * synchronising call: cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, cudaFree,
 * cudaMemcpy, cudaMemset, and a cudaMemcpyAsync into pageable host memory, which CUDA's "API
 * synchronization behavior" documents as synchronous), and the stream work queued, by name (kernels,
 * library calls, copies, memsets, event records and waits) */
static long host_syncs;
static std::map<std::string, long> *ops_of;
static void host_sync() { host_syncs++; }

/* ---- stream capture (CUDA Graphs) ----
 * As the CUDA Runtime API documents cudaStreamBeginCapture: "When a stream is in capture mode,
 * all operations pushed into the stream will not be executed, but will instead be captured into a
 * graph, which will be returned via cudaStreamEndCapture"; capture "may not be initiated if stream
 * is cudaStreamLegacy", "must be ended on the same stream in which it was initiated" and "may only
 * be initiated if the stream is not already in capture mode". A stream that waits on an event
 * recorded in a capturing stream joins the capture (the Programming Guide's cross-stream
 * dependencies); every such fork must be joined back into the origin stream before the capture
 * ends (else cudaErrorStreamCaptureUnjoined). In the default global mode, calls that are unsafe
 * during capture fail and invalidate it: synchronising with or querying a capturing stream or an
 * event recorded in it (cudaErrorStreamCaptureUnsupported, cudaErrorCapturedEvent), cudaMalloc
 * ("not enqueued asynchronously to a stream, and not observed by stream capture"), synchronous
 * work on the legacy stream such as cudaMemcpy while a blocking stream is captured
 * (cudaErrorStreamCaptureImplicit), a synchronising call on the device, a wait on an
 * event recorded outside the capture (a dependency across its boundary:
 * cudaErrorStreamCaptureIsolation). The emulator keeps one capture sequence at a time. */
struct Capture {
    CUstream_st *origin;
    std::vector<CapturedOp> ops;
    cudaError_t error = cudaSuccess; /* what invalidated it */
    char why[200] = "";
};
static Capture *capture;
static long graph_launches, graph_ops;

/* Invalidates the capture with error e (the call's return value). */
static cudaError_t capture_fails(cudaError_t e, const char *call) {
    if (capture && !capture->error) {
        capture->error = e;
        snprintf(capture->why, sizeof capture->why, "%s during stream capture", call);
        reject("%s while stream %d is being captured: %s (the capture is invalidated)", call, capture->origin->id, cudaGetErrorString(e));
    }
    return e;
}

/* The Programming Guide: "When any stream in the same context is being captured, and it was not
 * created with cudaStreamNonBlocking, any attempted use of the legacy stream is invalid", and
 * synchronous APIs such as cudaMemcpy() "enqueue work to the legacy stream and synchronize it". */
static bool capture_blocks_legacy() {
    if (!capture) return false;
    for (CUstream_st *o : all_streams)
        if (o->cap && !o->nonblocking) return true;
    return false;
}

bool capture_refuses(const char *call) {
    Lock lock;
    if (!capture) return false;
    capture_fails(cudaErrorStreamCaptureUnsupported, call);
    return true;
}

static void push(CUstream_st *s, Op op, bool compute) {
    if (s->cap) { /* captured, not run */
        if (!s->cap->error) s->cap->ops.push_back({std::move(op), compute});
        s->cap_ops++;
        if (s != s->cap->origin) s->cap_pending = true;
        return;
    }
    if (!ops_of) ops_of = new std::map<std::string, long>;
    (*ops_of)[op.what]++;
    if (s->legacy) /* the legacy default stream waits for every blocking stream's work */
        for (CUstream_st *o : all_streams)
            if (!o->nonblocking && !o->destroyed) run_until(o, o->enq);
    if (compute) s->compute = true;
    s->q.push_back(std::move(op));
    s->enq++;
    if (s->legacy || (config().streams != STREAMS_RANDOM && eager(s))) run_until(s, s->enq);
    else if (config().streams == STREAMS_RANDOM) wander();
}

void enqueue(cudaStream_t st, const char *what, std::function<void()> work, bool compute, bool collective) {
    Lock lock;
    Op op;
    op.run = std::move(work);
    op.what = what;
    op.collective = collective;
    push(stream_of(st), std::move(op), compute);
}

void sync_stream(cudaStream_t st) {
    Lock lock;
    CUstream_st *s = stream_of(st);
    run_until(s, s->enq);
}

static void sync_all() {
    for (CUstream_st *o : all_streams)
        if (!o->destroyed) run_until(o, o->enq);
    run_until(&legacy_stream, legacy_stream.enq);
}

} // namespace emu

using namespace emu;

/* ======================================================================================== */
/* The CUDA runtime API                                                                      */
/* ======================================================================================== */
extern "C" {

cudaError_t cudaDriverGetVersion(int *v) {
    Lock lock;
    if (!v) return ret(cudaErrorInvalidValue);
    *v = config().driver;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
    Lock lock;
    if (!count) return ret(cudaErrorInvalidValue);
    *count = 0;
    if (cudaError_t de = driver_check()) return ret(de);
    *count = (int)config().visible.size();
    return *count ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    Lock lock;
    if (cudaError_t de = driver_check()) return ret(de);
    if (!p) return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)config().visible.size()) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "NVCNN emulated GPU %d", config().visible[(size_t)device]);
    p->totalGlobalMem = config().mem;
    p->sharedMemPerBlock = 48 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->canMapHostMemory = 1;
    p->unifiedAddressing = 1;
    p->pciBusID = 0x10 + config().visible[(size_t)device];
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int device) {
    Lock lock;
    if (cudaError_t de = driver_check()) return ret(de);
    if (!buf || len <= 0) return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)config().visible.size()) return ret(cudaErrorInvalidDevice);
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x10 + config().visible[(size_t)device]);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    Lock lock;
    if (cudaError_t de = driver_check()) return ret(de);
    if (config().visible.empty()) return ret(cudaErrorNoDevice);
    if (device < 0 || device >= (int)config().visible.size()) return ret(cudaErrorInvalidDevice);
    current = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    Lock lock;
    if (!device) return ret(cudaErrorInvalidValue);
    cudaError_t e = need_context("cudaGetDevice");
    if (e) return e;
    *device = current;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *fr, size_t *total) {
    Lock lock;
    cudaError_t e = need_context("cudaMemGetInfo");
    if (e) return e;
    if (fr) *fr = mem_free();
    if (total) *total = config().mem;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size) {
    Lock lock;
    cudaError_t e = need_context("cudaMalloc");
    if (e) return e;
    if (capture) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "cudaMalloc"));
    if (!p) return ret(cudaErrorInvalidValue);
    *p = nullptr;
    const size_t acct = (size + 511) & ~(size_t)511;
    if (acct > mem_free()) return ret(cudaErrorMemoryAllocation);
    Block b;
    b.kind = DEVICE;
    b.device = current;
    b.serial = ++serials;
    if (!map_block(size, &b)) return ret(cudaErrorMemoryAllocation);
    used[current] += acct;
    live_blocks.push_back(&(blocks[(uintptr_t)b.base] = b));
    *p = b.base;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    Lock lock;
    if (!p) return cudaSuccess;
    cudaError_t e = need_context("cudaFree");
    if (e) return e;
    host_sync();
    sync_all(); /* cudaFree waits for the device */
    auto it = blocks.find((uintptr_t)p);
    if (it == blocks.end() || it->second.kind != DEVICE) {
        char d[200];
        describe_pointer(p, d, sizeof d);
        reject("cudaFree(%s): not the start of a device allocation", d);
        return ret(cudaErrorInvalidValue);
    }
    if (it->second.freed) fatal("cudaFree of device block #%llu, already freed", (unsigned long long)it->second.serial);
    used[it->second.device] -= (it->second.size + 511) & ~(size_t)511;
    unmap_block(&it->second);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
    Lock lock;
    (void)flags;
    cudaError_t e = need_context("cudaHostAlloc");
    if (e) return e;
    if (!p) return ret(cudaErrorInvalidValue);
    Block b;
    b.kind = PINNED;
    b.serial = ++serials;
    if (!map_block(size, &b)) return ret(cudaErrorMemoryAllocation);
    live_blocks.push_back(&(blocks[(uintptr_t)b.base] = b));
    *p = b.base;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t size) { return cudaHostAlloc(p, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void *p) {
    Lock lock;
    if (!p) return cudaSuccess;
    sync_all();
    auto it = blocks.find((uintptr_t)p);
    if (it == blocks.end() || it->second.kind != PINNED || it->second.freed) {
        reject("cudaFreeHost(%p): not a live pinned host allocation", p);
        return ret(cudaErrorInvalidValue);
    }
    unmap_block(&it->second);
    return cudaSuccess;
}

/* ---- copies ---- */
static const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
    }
}

/* Validates one side of a copy: device memory where `device`, else host memory (which must not
 * be device memory). *pinned: a pinned host block. */
static bool copy_side(const char *call, const char *side, const void *p, size_t n, bool device, bool *pinned) {
    char d[200];
    *pinned = false;
    if (device) {
        if (is_device_range(p, n)) return true;
        describe_pointer(p, d, sizeof d);
        reject("%s: the %s %s (%zu bytes) is not inside one device allocation", call, side, d, n);
        return false;
    }
    if (is_device_range(p, 1)) {
        describe_pointer(p, d, sizeof d);
        reject("%s: the %s should be host memory but is %s", call, side, d);
        return false;
    }
    *pinned = is_device_reachable(p, n);
    return true;
}

static cudaError_t memcpy_async(const char *call, void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t st,
                                bool sync) {
    cudaError_t e = need_context(call);
    if (e) return e;
    if (n == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault) {
        bool dd = is_device_range(dst, 1), sd = is_device_range(src, 1);
        kind = sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost) : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    }
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice) return ret(cudaErrorInvalidMemcpyDirection);
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    char what[64];
    snprintf(what, sizeof what, "%s", call);
    bool dst_pinned, src_pinned;
    if (!copy_side(kind_name(kind), "destination", dst, n, dst_dev, &dst_pinned) ||
        !copy_side(kind_name(kind), "source", src, n, src_dev, &src_pinned))
        return ret(cudaErrorInvalidValue);
    CUstream_st *s = stream_of(st);
    if (sync && capture_blocks_legacy()) return ret(capture_fails(cudaErrorStreamCaptureImplicit, call));
    if (s->cap && !dst_dev && !dst_pinned) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "a copy into pageable memory"));
    Op op;
    op.what = kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync (host to device)"
              : kind == cudaMemcpyDeviceToHost ? "cudaMemcpyAsync (device to host)"
                                               : "cudaMemcpyAsync";
    if (!src_dev && !src_pinned) {
        /* pageable host memory is staged at the call: the caller may reuse it at once. CUDA's "API
         * synchronization behavior": "for transfers from pageable host memory to device memory, a
         * stream sync is performed before the copy is initiated": counted as the host's wait */
        if (!sync) host_sync();
        std::shared_ptr<std::vector<char>> copy = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        op.run = [dst, copy]() { memcpy(dst, copy->data(), copy->size()); };
    } else {
        /* device or pinned memory is read when the copy runs */
        op.run = [dst, src, n]() { memmove(dst, src, n); };
    }
    push(s, std::move(op), false);
    /* a copy into pageable host memory, and every cudaMemcpy, returns once it is done */
    if (sync || (!dst_dev && !dst_pinned)) {
        host_sync();
        run_until(s, s->enq);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    Lock lock;
    return memcpy_async("cudaMemcpyAsync", dst, src, n, kind, s, false);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    Lock lock;
    return memcpy_async("cudaMemcpy", dst, src, n, kind, 0, true);
}

static cudaError_t memset_async(const char *call, void *p, int value, size_t n, cudaStream_t st, bool sync) {
    cudaError_t e = need_context(call);
    if (e) return e;
    if (n == 0) return cudaSuccess;
    if (!is_device_range(p, n)) {
        char d[200];
        describe_pointer(p, d, sizeof d);
        reject("%s: %s (%zu bytes) is not inside one device allocation", call, d, n);
        return ret(cudaErrorInvalidValue);
    }
    CUstream_st *s = stream_of(st);
    if (sync && capture_blocks_legacy()) return ret(capture_fails(cudaErrorStreamCaptureImplicit, call));
    Op op;
    op.what = "cudaMemsetAsync";
    op.run = [p, value, n]() { memset(p, value, n); };
    push(s, std::move(op), false);
    if (sync) {
        host_sync();
        run_until(s, s->enq);
    }
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    Lock lock;
    return memset_async("cudaMemsetAsync", p, value, n, s, false);
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
    Lock lock;
    return memset_async("cudaMemset", p, value, n, 0, true);
}

/* ---- streams ---- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ps, unsigned int flags) {
    Lock lock;
    cudaError_t e = need_context("cudaStreamCreateWithFlags");
    if (e) return e;
    if (!ps || (flags & ~(unsigned)cudaStreamNonBlocking)) return ret(cudaErrorInvalidValue);
    CUstream_st *s = new CUstream_st;
    s->nonblocking = (flags & cudaStreamNonBlocking) != 0;
    s->id = (int)all_streams.size() + 1;
    all_streams.push_back(s);
    *ps = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *ps) { return cudaStreamCreateWithFlags(ps, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t st) {
    Lock lock;
    if (!st) return ret(cudaErrorInvalidResourceHandle);
    CUstream_st *s = stream_of(st);
    run_until(s, s->enq); /* its work completes, as on the GPU */
    s->destroyed = true;  /* kept: events may still name it */
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st) {
    Lock lock;
    cudaError_t e = need_context("cudaStreamSynchronize");
    if (e) return e;
    CUstream_st *s = stream_of(st);
    if (s->cap) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize"));
    host_sync();
    run_until(s, s->enq);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t st) {
    Lock lock;
    CUstream_st *s = stream_of(st);
    if (s->cap) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery"));
    if (s->done >= s->enq) return cudaSuccess;
    run_until(s, s->done + 1); /* the device makes progress while the host asks */
    return s->done >= s->enq ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void) {
    Lock lock;
    cudaError_t e = need_context("cudaDeviceSynchronize");
    if (e) return e;
    if (capture) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "cudaDeviceSynchronize"));
    host_sync();
    sync_all();
    return cudaSuccess;
}

/* ---- events ---- */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned int flags) {
    Lock lock;
    cudaError_t e = need_context("cudaEventCreateWithFlags");
    if (e) return e;
    if (!pe) return ret(cudaErrorInvalidValue);
    CUevent_st *ev = new CUevent_st;
    ev->timing = !(flags & cudaEventDisableTiming);
    *pe = ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *pe) { return cudaEventCreateWithFlags(pe, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    Lock lock;
    if (!ev || ev->destroyed) return ret(cudaErrorInvalidResourceHandle);
    ev->destroyed = true; /* kept: queued work may still refer to it */
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st) {
    Lock lock;
    cudaError_t e = need_context("cudaEventRecord");
    if (e) return e;
    if (!ev || ev->destroyed) return ret(cudaErrorInvalidResourceHandle);
    CUstream_st *s = stream_of(st);
    if (s->cap) { /* a captured event: a point in the capture that other streams may fork from or join */
        ev->cap = s->cap;
        ev->captured = true;
        ev->cap_stream = s;
        ev->cap_ops = s->cap_ops;
        return s->cap->error ? ret(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
    }
    ev->cap = nullptr;
    ev->captured = false;
    const uint64_t rec = ++ev->record;
    Op op;
    op.what = "cudaEventRecord";
    op.run = [ev, rec]() {
        if (ev->record == rec) {
            ev->t = now_s();
            ev->t_record = rec;
        }
    };
    ev->s = s;
    ev->pos = s->enq + 1;
    push(s, std::move(op), false);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned int flags) {
    Lock lock;
    cudaError_t e = need_context("cudaStreamWaitEvent");
    if (e) return e;
    if (!ev || ev->destroyed) return ret(cudaErrorInvalidResourceHandle);
    if (flags) return ret(cudaErrorInvalidValue);
    CUstream_st *s = stream_of(st);
    if (ev->captured) {
        if (ev->cap != capture) return ret(cudaErrorStreamCaptureInvalidated); /* that capture has ended */
        if (s->cap && s->cap != ev->cap) return ret(capture_fails(cudaErrorStreamCaptureMerge, "cudaStreamWaitEvent"));
        if (!s->cap) { /* a fork: s joins the capture */
            s->cap = ev->cap;
            s->cap_ops = 0;
            s->cap_pending = false;
        } else if (s == s->cap->origin && ev->cap_stream != s && ev->cap_ops == ev->cap_stream->cap_ops) {
            ev->cap_stream->cap_pending = false; /* joined back after its last op */
        }
        return s->cap->error ? ret(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
    }
    if (s->cap && ev->s) return ret(capture_fails(cudaErrorStreamCaptureIsolation, "cudaStreamWaitEvent on an event recorded outside it"));
    if (!ev->s) return cudaSuccess; /* never recorded: nothing to wait for */
    Op op;
    op.what = "cudaStreamWaitEvent";
    op.wait_on = ev->s;
    op.wait_pos = ev->pos;
    push(s, std::move(op), false);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    Lock lock;
    if (!ev || ev->destroyed) return ret(cudaErrorInvalidResourceHandle);
    if (ev->captured) return ret(capture_fails(cudaErrorCapturedEvent, "cudaEventSynchronize"));
    host_sync();
    if (ev->s) run_until(ev->s, ev->pos);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev) {
    Lock lock;
    if (!ev || ev->destroyed) return ret(cudaErrorInvalidResourceHandle);
    if (ev->captured) return ret(capture_fails(cudaErrorCapturedEvent, "cudaEventQuery"));
    if (!ev->s || ev->s->done >= ev->pos) return cudaSuccess;
    run_until(ev->s, ev->s->done + 1); /* the device makes progress while the host asks */
    return ev->s->done >= ev->pos ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    Lock lock;
    if (!ms) return ret(cudaErrorInvalidValue);
    if ((a && a->captured) || (b && b->captured)) return ret(cudaErrorCapturedEvent);
    if (!a || !b || a->destroyed || b->destroyed || !a->s || !b->s) return ret(cudaErrorInvalidResourceHandle);
    if (!a->timing || !b->timing) return ret(cudaErrorInvalidResourceHandle);
    if (a->s->done < a->pos || b->s->done < b->pos || a->t_record != a->record || b->t_record != b->record)
        return ret(cudaErrorNotReady);
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

/* ---- stream capture and graphs (see "stream capture" above) ---- */
/* Every stream of capture c leaves it (its end, or its failure). */
static void capture_end(Capture *c) {
    for (CUstream_st *o : all_streams)
        if (o->cap == c) o->cap = nullptr, o->cap_pending = false;
    if (capture == c) capture = nullptr;
    delete c;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode) {
    Lock lock;
    cudaError_t e = need_context("cudaStreamBeginCapture");
    if (e) return e;
    if (!st || st == cudaStreamLegacy || st == cudaStreamPerThread) return ret(cudaErrorStreamCaptureUnsupported);
    if (mode != cudaStreamCaptureModeGlobal) fatal("cudaStreamBeginCapture: only the global capture mode is emulated");
    CUstream_st *s = stream_of(st);
    if (s->cap) return ret(cudaErrorIllegalState);
    if (capture) fatal("cudaStreamBeginCapture on stream %d: the emulator keeps one capture at a time (stream %d's is open)", s->id,
                       capture->origin->id);
    capture = new Capture;
    capture->origin = s;
    s->cap = capture;
    s->cap_ops = 0;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *graph) {
    Lock lock;
    if (!graph) return ret(cudaErrorInvalidValue);
    *graph = nullptr;
    CUstream_st *s = stream_of(st);
    if (!s->cap) return ret(cudaErrorIllegalState);
    Capture *c = s->cap;
    if (s != c->origin) {
        capture_fails(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture on a stream other than the capture's origin");
        return ret(cudaErrorStreamCaptureUnmatched);
    }
    cudaError_t e = c->error ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    for (CUstream_st *o : all_streams)
        if (o->cap == c && o->cap_pending && !e) {
            reject("cudaStreamEndCapture: stream %d forked from the capture and was not joined back into stream %d", o->id, s->id);
            e = cudaErrorStreamCaptureUnjoined;
        }
    if (!e) {
        *graph = new CUgraph_st;
        (*graph)->ops = std::move(c->ops);
    }
    capture_end(c);
    return e ? ret(e) : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status) {
    Lock lock;
    if (!status) return ret(cudaErrorInvalidValue);
    CUstream_st *s = stream_of(st);
    *status = !s->cap ? cudaStreamCaptureStatusNone : s->cap->error ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    Lock lock;
    if (!exec || !graph || flags) return ret(cudaErrorInvalidValue);
    if (capture) return ret(capture_fails(cudaErrorStreamCaptureUnsupported, "cudaGraphInstantiate"));
    *exec = new CUgraphExec_st;
    (*exec)->ops = graph->ops;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t st) {
    Lock lock;
    cudaError_t e = need_context("cudaGraphLaunch");
    if (e) return e;
    if (!exec) return ret(cudaErrorInvalidValue);
    CUstream_st *s = stream_of(st);
    if (s->cap) fatal("cudaGraphLaunch into a capture (a child graph) is not emulated");
    graph_launches++;
    for (const CapturedOp &c : exec->ops) { /* the recorded work with its recorded arguments */
        graph_ops++;
        push(s, c.op, c.compute);
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    Lock lock;
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    Lock lock;
    delete graph;
    return cudaSuccess;
}

/* ---- errors ---- */
cudaError_t cudaGetLastError(void) {
    Lock lock;
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    Lock lock;
    return last_error;
}

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    default: return "unknown error";
    }
}

} /* extern "C" */

/* ---- kernels' pointer arguments and lifetimes (device.h) ---- */
namespace emu {
void poison_async(void *p, size_t bytes, cudaStream_t st) {
    Lock lock;
    if (bytes == 0) return;
    if (!is_device_range(p, bytes)) {
        char d[200];
        describe_pointer(p, d, sizeof d);
        fatal("a lifetime of %zu bytes at %s: not inside one device allocation", bytes, d);
    }
    Op op;
    op.what = "the poison pattern where a tensor's lifetime starts";
    op.run = [p, bytes]() { poison(p, bytes); };
    push(stream_of(st), std::move(op), false);
}

void check_kernel_pointer(const char *kernel, int index, const void *p) {
    if (!p) return;
    Lock lock;
    if (is_device_reachable(p, 1)) return;
    /* one past the end of a block: a legal pointer value (an empty range) */
    if (is_device_reachable((const char *)p - 1, 1)) return;
    char d[200];
    describe_pointer(p, d, sizeof d);
    fatal("kernel %s: argument %d is %s: the device cannot reach it", kernel, index, d);
}
} // namespace emu

extern "C" long emu_host_syncs(void) {
    emu::Lock lock;
    return emu::host_syncs;
}

extern "C" long emu_stream_ops(const char *prefix) {
    emu::Lock lock;
    long n = 0;
    if (emu::ops_of)
        for (const auto &kv : *emu::ops_of)
            if (kv.first.compare(0, strlen(prefix), prefix) == 0) n += kv.second;
    return n;
}

extern "C" long emu_cudnn_calls(void) { return emu_stream_ops("cudnn"); }

extern "C" long emu_graph_launches(void) {
    emu::Lock lock;
    return emu::graph_launches;
}

extern "C" long emu_graph_ops(void) {
    emu::Lock lock;
    return emu::graph_ops;
}
