/* kernel.cc: grids on the emulated device. A grid's blocks run one after another in a shuffled
 * order; a block's threads run as fibers on this host thread, in a shuffled order, each until it
 * finishes or waits (__syncthreads, a warp intrinsic). A runner fiber takes the block's threads
 * one after another and only leaves a thread behind (keeping the fiber, with its stack) when it
 * waits, so a kernel without barriers costs one function call per thread and no switch at all.
 * When no thread can run, the scheduler releases a barrier that every thread it concerns has
 * reached, in a shuffled order, or reports the kernel: threads at different __syncthreads, a
 * __syncthreads that some threads of the block never reach because they exited, warp lanes named
 * in a mask that exited or wait elsewhere. Fibers switch with a few instructions of our own
 * (x86-64; elsewhere ucontext), never with a system call.
 *
 * Shared memory: the kernels' __shared__ arrays are static locals that the build gathers into the
 * section emu_shared (see the Makefile). Before the first block of every grid the section is
 * filled with the poison pattern (unless it holds nothing else), and refilled before every block
 * that follows one in which a thread passed a __shared__ declaration. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "emu.h"
#include "emu_counts.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

uint3 emu_threadIdx, emu_blockIdx;
dim3 emu_blockDim, emu_gridDim;
int emu_shared_declared;

extern "C" char __start_emu_shared[] __attribute__((weak));
extern "C" char __stop_emu_shared[] __attribute__((weak));

namespace emu {
namespace {

/* ---- fibers ---- */
struct Fiber {
    void *sp = nullptr;
    char *stack = nullptr; /* lowest usable byte (a guard page below it) */
    size_t size = 0;
    struct Thread *t = nullptr; /* the thread it runs or holds */
#if !defined(__x86_64__)
    ucontext_t uc;
#endif
};

#if defined(__x86_64__)
/* emu_fiber_switch(&from_sp, to_sp): saves the callee-saved registers on the current stack,
 * stores its pointer in *from_sp, and resumes the stack to_sp. (The SSE and x87 control words are
 * callee-saved too, but nothing here changes them: every fiber runs with the thread's.) A new
 * fiber's stack is laid out so that its first resume returns into emu_fiber_entry, which calls
 * the function in r13 with the argument in r12. */
extern "C" void emu_fiber_switch(void **from_sp, void *to_sp);
extern "C" void emu_fiber_entry(void);
asm(R"(
    .text
    .globl emu_fiber_switch
    .type emu_fiber_switch, @function
emu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_fiber_switch, .-emu_fiber_switch
    .globl emu_fiber_entry
    .type emu_fiber_entry, @function
emu_fiber_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size emu_fiber_entry, .-emu_fiber_entry
)");
#else
#include <ucontext.h>
#endif

const size_t kStack = EMU_ASAN ? (size_t)512 << 10 : (size_t)128 << 10;

void *sched_sp;              /* the scheduler's saved stack */
#if !defined(__x86_64__)
ucontext_t sched_uc;
#endif
Fiber *cur_fiber;            /* the fiber running now, or NULL (the scheduler) */
std::vector<Fiber *> free_fibers;
#if EMU_ASAN
const void *sched_stack_bottom;
size_t sched_stack_size;
#endif

void runner_main(void *);

Fiber *new_fiber() {
    Fiber *f = new Fiber;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = (char *)mmap(nullptr, kStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fatal("cannot map a %zu-byte fiber stack", kStack);
    mprotect(m, page, PROT_NONE); /* a stack overflow faults instead of corrupting */
    f->stack = m + page;
    f->size = kStack;
#if defined(__x86_64__)
    /* the stacks' tops at different offsets within a page, so that the fibers' hot frames do
     * not all compete for the same cache sets */
    static unsigned color;
    const size_t offset = (size_t)(color++ % 63) * 64;
    uint64_t *top = (uint64_t *)(f->stack + f->size - offset); /* 16-byte aligned */
    uint64_t *sp = top - 7; /* r15 r14 r13 r12 rbx rbp, ret: after the ret, the stack is 16-byte aligned */
    memset(sp, 0, 7 * sizeof *sp);
    sp[2] = (uint64_t)(uintptr_t)runner_main;     /* r13: the function */
    sp[3] = 0;                                    /* r12: its argument */
    sp[6] = (uint64_t)(uintptr_t)emu_fiber_entry; /* where the first resume returns to */
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = f->size;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, (void (*)())runner_main, 1, (void *)nullptr);
#endif
    return f;
}

/* scheduler -> fiber f */
void resume(Fiber *f) {
    cur_fiber = f;
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f->stack, f->size);
#endif
#if defined(__x86_64__)
    emu_fiber_switch(&sched_sp, f->sp);
#else
    swapcontext(&sched_uc, &f->uc);
#endif
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    cur_fiber = nullptr;
}

/* fiber -> scheduler */
void yield_to_scheduler() {
    Fiber *f = cur_fiber;
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, sched_stack_bottom, sched_stack_size);
#endif
#if defined(__x86_64__)
    emu_fiber_switch(&f->sp, sched_sp);
#else
    swapcontext(&f->uc, &sched_uc);
#endif
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &sched_stack_bottom, &sched_stack_size);
#endif
}

/* fiber -> fiber, without the scheduler in between */
void fiber_to_fiber(Fiber *from, Fiber *to) {
    cur_fiber = to;
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, to->stack, to->size);
#endif
#if defined(__x86_64__)
    emu_fiber_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

/* ---- one block ---- */
enum State { T_PENDING, T_RUNNING, T_BARRIER, T_WARP, T_DONE };
enum WarpOp { W_SHUFFLE, W_SYNC };

struct Thread {
    uint3 tid;
    int linear;
    State state;
    const void *site;    /* T_BARRIER: the __syncthreads it waits at */
    Fiber *fiber;        /* while it waits */
    unsigned mask;       /* T_WARP: the lanes it meets */
    WarpOp op;
    ShflKind kind;
    int arg, width;
    uint64_t value;      /* T_WARP: its value; on release, the value it receives */
};

struct Grid {
    const char *name;
    dim3 grid, block;
    const LaunchArgs *body;
    std::vector<Thread> th;      /* tid and linear set once for the grid; the rest per block */
    std::vector<int> pending;    /* a shuffled order of the block's threads */
    size_t npending = 0;         /* those not started: pending[0, npending), taken from the back */
    std::vector<Thread *> ready; /* released, taken from the back */
    int done = 0, waiting = 0;
    int at_block = 0;            /* threads at __syncthreads */
    const void *site = nullptr;  /* the first one's call site */
    const Thread *stray = nullptr; /* a thread that waits at another __syncthreads than the first */
    std::vector<int> at_warp;    /* threads at a warp intrinsic, per warp */
    int warps_waiting = 0;       /* of them */
    uint64_t rng = 0;
};
Grid *G; /* the grid running now */

uint64_t next_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* a uniform index below n (Lemire's multiply-shift; n fits 32 bits) */
size_t below(uint64_t *s, size_t n) { return (size_t)(((next_rand(s) >> 32) * (uint64_t)n) >> 32); }

/* Fisher-Yates over v[0, n): each draw of the generator gives two indices (32 bits each,
 * Lemire's multiply-shift), half the draws of one a swap; the emulator shuffles every block's
 * threads and every barrier's release, which made the generator a tenth of its time. */
template <typename T> void shuffle_n(T *v, size_t n, uint64_t *s) {
    size_t i = n;
    for (; i > 2; i -= 2) {
        const uint64_t r = next_rand(s);
        std::swap(v[i - 1], v[(size_t)(((r >> 32) * (uint64_t)i) >> 32)]);
        std::swap(v[i - 2], v[(size_t)(((r & 0xffffffffu) * (uint64_t)(i - 1)) >> 32)]);
    }
    if (i == 2) std::swap(v[1], v[below(s, 2)]);
}
template <typename T> void shuffle(std::vector<T> &v, uint64_t *s) { shuffle_n(v.data(), v.size(), s); }

void set_thread(const Thread *t) { emu_threadIdx = t->tid; }

Fiber *new_fiber();

/* The running thread waits (at a barrier): the next thread that can run goes on at once, on its
 * own fiber (a released one, else a runner for the threads not started), without a round trip
 * through the scheduler; only when none can is the scheduler asked to release a barrier. */
void wait_here() {
    Fiber *self_fiber = cur_fiber;
    Fiber *to = nullptr;
    if (!G->ready.empty()) {
        Thread *t = G->ready.back();
        G->ready.pop_back();
        set_thread(t);
        to = t->fiber;
    } else if (G->npending > 0) {
        if (!free_fibers.empty()) {
            to = free_fibers.back();
            free_fibers.pop_back();
        } else {
            to = new_fiber();
        }
    }
    if (to)
        fiber_to_fiber(self_fiber, to);
    else
        yield_to_scheduler();
}

void runner_main(void *) {
#if EMU_ASAN
    /* a new fiber ends the switch that started it (and learns the scheduler's stack) */
    __sanitizer_finish_switch_fiber(nullptr, &sched_stack_bottom, &sched_stack_size);
#endif
    for (;;) {
        while (G->npending > 0) {
            Thread *t = &G->th[(size_t)G->pending[--G->npending]];
            t->state = T_RUNNING;
            t->fiber = cur_fiber;
            cur_fiber->t = t;
            set_thread(t);
            G->body->call(G->body);
            t->state = T_DONE;
            G->done++;
        }
        cur_fiber->t = nullptr;
        free_fibers.push_back(cur_fiber);
        yield_to_scheduler();
    }
}

/* the running thread, from inside a kernel */
Thread *self(const char *what) {
    if (!G || !cur_fiber || !cur_fiber->t) fatal("%s called outside a kernel", what);
    return cur_fiber->t;
}

char where_buf[160];
const char *block_where(const Grid *g) {
    snprintf(where_buf, sizeof where_buf, "kernel %s, block (%u,%u,%u) of a grid of (%u,%u,%u) blocks of (%u,%u,%u) threads", g->name,
             emu_blockIdx.x, emu_blockIdx.y, emu_blockIdx.z, g->grid.x, g->grid.y, g->grid.z, g->block.x, g->block.y, g->block.z);
    return where_buf;
}

/* Warp w's lanes waiting at a warp intrinsic: released when every lane named by their masks has
 * arrived at the same kind of intrinsic. Returns 1 if it released them. */
int try_release_warp(Grid *g, int w) {
    const int n = (int)g->th.size(), lo = w * 32, hi = std::min(n, lo + 32);
    unsigned arrived = 0, wanted = 0;
    int first = -1;
    for (int i = lo; i < hi; i++)
        if (g->th[(size_t)i].state == T_WARP) {
            arrived |= 1u << (i - lo);
            wanted |= g->th[(size_t)i].mask;
            if (first < 0) first = i;
        }
    if (!arrived) return 0;
    const Thread &f = g->th[(size_t)first];
    for (int l = 0; l < 32; l++) {
        if (!(wanted >> l & 1)) continue;
        if (lo + l >= hi)
            fatal("%s: a warp intrinsic's mask 0x%08x names lane %d of warp %d, which does not exist in a block of %d threads",
                  block_where(g), wanted, l, w, n);
        const Thread &t = g->th[(size_t)(lo + l)];
        if (t.state == T_DONE)
            fatal("%s: warp %d: lane %d is named in the mask 0x%08x of a warp intrinsic but has exited", block_where(g), w, l, wanted);
        if (t.state != T_WARP) return 0; /* not there yet */
        if (t.op != f.op || t.mask != f.mask || (t.op == W_SHUFFLE && (t.kind != f.kind || t.width != f.width)))
            fatal("%s: warp %d: lanes %d and %d meet at different warp intrinsics or masks (0x%08x, 0x%08x)", block_where(g), w,
                  first - lo, l, f.mask, t.mask);
    }
    if (arrived != wanted)
        fatal("%s: warp %d: lanes 0x%08x wait at a warp intrinsic with the mask 0x%08x", block_where(g), w, arrived, wanted);
    /* every lane gets its value from its source, computed before any of them changes */
    uint64_t out[32];
    for (int l = 0; l < 32; l++) {
        if (!(wanted >> l & 1)) continue;
        const Thread &t = g->th[(size_t)(lo + l)];
        if (t.op != W_SHUFFLE) continue;
        const int width = t.width, seg = l - l % width;
        int src = l;
        switch (t.kind) {
        case SHFL_IDX: src = seg + ((t.arg % width) + width) % width; break;
        case SHFL_UP: src = l - t.arg >= seg ? l - t.arg : l; break;
        case SHFL_DOWN: src = l + t.arg < seg + width ? l + t.arg : l; break;
        case SHFL_XOR: src = l ^ t.arg; if (src < seg || src >= seg + width) src = l; break;
        }
        /* a source lane that takes no part: undefined on the GPU, the poison pattern here */
        out[l] = (src >= 0 && src < 32 && (wanted >> src & 1)) ? g->th[(size_t)(lo + src)].value : ~(uint64_t)0;
    }
    Thread *rel[32];
    int nrel = 0;
    for (int l = 0; l < 32; l++)
        if (wanted >> l & 1) {
            Thread *t = &g->th[(size_t)(lo + l)];
            if (t->op == W_SHUFFLE) t->value = out[l];
            t->state = T_RUNNING;
            rel[nrel++] = t;
        }
    shuffle_n(rel, (size_t)nrel, &g->rng);
    g->ready.insert(g->ready.end(), rel, rel + nrel);
    g->waiting -= nrel;
    g->at_warp[(size_t)w] -= nrel;
    g->warps_waiting -= nrel;
    return 1;
}

/* Nothing can run: release a barrier, or report why none can be. */
void release(Grid *g) {
    const int n = (int)g->th.size();
    if (g->warps_waiting > 0)
        for (int w = 0; w * 32 < n; w++)
            if (g->at_warp[(size_t)w] > 0 && try_release_warp(g, w)) return;
    if (g->stray)
        fatal("%s: threads wait at different __syncthreads (thread (%u,%u,%u) at %p, others at %p): a barrier in divergent code",
              block_where(g), g->stray->tid.x, g->stray->tid.y, g->stray->tid.z, g->stray->site, g->site);
    if (g->at_block == n) {
        g->ready.clear();
        for (Thread &t : g->th) {
            t.state = T_RUNNING;
            g->ready.push_back(&t);
        }
        shuffle(g->ready, &g->rng);
        g->waiting = g->at_block = 0;
        g->site = nullptr;
        return;
    }
    if (g->at_block > 0 && g->at_block + g->done == n)
        fatal("%s: %d of its %d threads wait at __syncthreads and the other %d have exited: a barrier in divergent code", block_where(g),
              g->at_block, n, g->done);
    fatal("%s: no thread can go on (%d at __syncthreads, %d at warp intrinsics, %d exited): threads wait at different barriers",
          block_where(g), g->at_block, g->warps_waiting, g->done);
}

/* Shared memory: its size; whether anything but the poison pattern is in it (after a grid that
 * declared no __shared__ array, which must not have written it). The section is the __shared__
 * arrays of every kernel (128 KiB or so): read 64 bytes at a time. */
size_t shared_bytes() { return __start_emu_shared ? (size_t)(__stop_emu_shared - __start_emu_shared) : 0; }
bool shared_dirty() {
    const size_t n = shared_bytes();
    const unsigned char *p = (const unsigned char *)__start_emu_shared;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8];
        memcpy(w, p + i, sizeof w);
        if ((w[0] & w[1] & w[2] & w[3] & w[4] & w[5] & w[6] & w[7]) != ~(uint64_t)0) return true;
    }
    for (; i < n; i++)
        if (p[i] != 0xff) return true;
    return false;
}
/* whether the section holds nothing but the poison pattern (as after a grid that wrote none of it) */
bool shared_clean;

/* The grid's threads (their indices, the same in every block) and an order of them (run_block
 * shuffles it again for every block). */
void init_threads(Grid *g) {
    const size_t n = (size_t)g->block.x * g->block.y * g->block.z;
    g->th.resize(n);
    size_t i = 0;
    for (unsigned z = 0; z < g->block.z; z++)
        for (unsigned y = 0; y < g->block.y; y++)
            for (unsigned x = 0; x < g->block.x; x++, i++) {
                g->th[i].tid = make_uint3(x, y, z);
                g->th[i].linear = (int)i;
            }
    g->pending.resize(n);
    for (size_t k = 0; k < n; k++) g->pending[k] = (int)k;
    g->at_warp.assign((n + 31) / 32, 0);
}

/* A block ends with every thread done and no warp or barrier waiting (anything else is fatal):
 * the next one starts from the grid's state as init_threads left it, but the threads' states. */
void run_block(Grid *g) {
    const int n = (int)g->th.size();
    for (Thread &t : g->th) t.state = T_PENDING;
    shuffle(g->pending, &g->rng);
    g->npending = (size_t)n;
    g->ready.clear();
    g->done = 0;
    g->waiting = 0;
    g->at_block = 0;
    g->site = nullptr;
    g->stray = nullptr;
    g->warps_waiting = 0;
    for (;;) {
        if (!g->ready.empty()) {
            Thread *t = g->ready.back();
            g->ready.pop_back();
            set_thread(t);
            resume(t->fiber);
            continue;
        }
        if (g->npending > 0) {
            Fiber *f;
            if (!free_fibers.empty()) {
                f = free_fibers.back();
                free_fibers.pop_back();
            } else {
                f = new_fiber();
            }
            resume(f);
            continue;
        }
        if (g->done == n) return;
        release(g);
    }
}

} // namespace

/* ---- what the kernels call (device.h) ---- */
uint64_t warp_shuffle(unsigned mask, uint64_t value, ShflKind kind, int arg, int width) {
    Thread *t = self("__shfl_*_sync");
    const int lane = t->linear % 32;
    if (!(mask >> lane & 1))
        fatal("%s: thread (%u,%u,%u) calls a __shfl_*_sync whose mask 0x%08x leaves out its own lane %d", block_where(G), t->tid.x,
              t->tid.y, t->tid.z, mask, lane);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        fatal("%s: __shfl_*_sync width %d: a power of 2 up to 32", block_where(G), width);
    t->state = T_WARP;
    t->op = W_SHUFFLE;
    t->mask = mask;
    t->kind = kind;
    t->arg = arg;
    t->width = width;
    t->value = value;
    G->waiting++;
    G->at_warp[(size_t)(t->linear / 32)]++;
    G->warps_waiting++;
    wait_here();
    return t->value;
}

void warp_sync(unsigned mask) {
    Thread *t = self("__syncwarp");
    const int lane = t->linear % 32;
    if (!(mask >> lane & 1))
        fatal("%s: thread (%u,%u,%u) calls __syncwarp with a mask 0x%08x that leaves out its own lane %d", block_where(G), t->tid.x,
              t->tid.y, t->tid.z, mask, lane);
    t->state = T_WARP;
    t->op = W_SYNC;
    t->mask = mask;
    G->waiting++;
    G->at_warp[(size_t)(t->linear / 32)]++;
    G->warps_waiting++;
    wait_here();
}

} // namespace emu

extern "C" __attribute__((noinline)) void emu_syncthreads_at(const void *site) {
    emu::Thread *t = emu::self("__syncthreads");
    emu::Grid *g = emu::G;
    t->state = emu::T_BARRIER;
    t->site = site;
    if (g->at_block++ == 0)
        g->site = t->site;
    else if (t->site != g->site && !g->stray)
        g->stray = t;
    g->waiting++;
    emu::wait_here();
}

namespace emu {

/* Runs a whole grid (stream work). */
static void run_grid(const char *name, dim3 grid, dim3 block, const LaunchArgs *body, uint64_t launch_no) {
    Grid g;
    g.name = name;
    g.grid = grid;
    g.block = block;
    g.body = body;
    init_threads(&g);
    g.rng = seed() * 0x2545f4914f6cdd1dULL + launch_no;
    Grid *outer = G;
    if (outer) fatal("kernel %s launched from inside kernel %s", name, outer->name);
    G = &g;
    emu_blockDim = block;
    emu_gridDim = grid;
    const size_t nb = (size_t)grid.x * grid.y * grid.z;
    std::vector<uint32_t> order(nb);
    for (size_t i = 0; i < nb; i++) order[i] = (uint32_t)i;
    shuffle(order, &g.rng);
    const size_t sh = shared_bytes();
    /* the section is refilled before every block once a thread of the grid has passed a
     * __shared__ declaration (device.h notes it); a grid that declared none must leave it as it
     * found it */
    bool uses_shared = false;
    if (sh && !shared_clean) memset(__start_emu_shared, 0xff, sh);
    emu_shared_declared = 0;
    for (size_t k = 0; k < nb; k++) {
        size_t b = order[k];
        emu_blockIdx = make_uint3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y), (unsigned)(b / ((size_t)grid.x * grid.y)));
        if (uses_shared) memset(__start_emu_shared, 0xff, sh);
        run_block(&g);
        uses_shared = uses_shared || emu_shared_declared;
    }
    if (sh && !uses_shared && shared_dirty()) fatal("kernel %s wrote shared memory without a __shared__ declaration", name);
    shared_clean = sh && !uses_shared;
    G = nullptr;
}

static uint64_t launches;
/* accepted launches per kernel name (emu_launches, emu_counts.h) */
static std::map<std::string, long> *launches_of;

void launch(const char *kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t s, LaunchArgs *args) {
    /* the arguments live as long as the closure queued on the stream (a captured graph replays it) */
    std::shared_ptr<LaunchArgs> body(args, [](LaunchArgs *a) { a->drop(a); });
    Lock lock;
    extern void set_launch_error(cudaError_t e, const char *why);
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    char why[200];
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 || threads > 1024 || block.z > 64 ||
        grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(why, sizeof why, "kernel %s: grid (%u,%u,%u) of blocks (%u,%u,%u): outside the device's limits", kernel, grid.x, grid.y,
                 grid.z, block.x, block.y, block.z);
        set_launch_error(cudaErrorInvalidConfiguration, why);
        return;
    }
    if (shared_bytes > 0) fatal("kernel %s: dynamic shared memory (%zu bytes) is not emulated", kernel, shared_bytes);
    const uint64_t no = ++launches;
    if (!launches_of) launches_of = new std::map<std::string, long>;
    (*launches_of)[kernel]++;
    enqueue(s, kernel, [kernel, grid, block, body = std::move(body), no]() { run_grid(kernel, grid, block, body.get(), no); }, true);
}

/* The thread that was running when a fault happened, for the fault's report (runtime.cc). */
void misaligned(const char *type, size_t bytes, const void *p, bool write) {
    char d[200];
    {
        Lock lock;
        if (is_device_reachable(p, 1))
            describe_pointer(p, d, sizeof d);
        else
            snprintf(d, sizeof d, "%p (the kernel's shared or local memory)", p);
    }
    fatal("misaligned address: a %zu-byte %s %s %s (on a GPU a %zu-byte access must be %zu-byte aligned)", bytes, type,
          write ? "store to" : "load from", d, bytes, bytes);
}

void running_thread(char *buf, size_t n) {
    if (!G || !cur_fiber || !cur_fiber->t) {
        buf[0] = 0;
        return;
    }
    snprintf(buf, n, "%s, thread (%u,%u,%u)", block_where(G), emu_threadIdx.x, emu_threadIdx.y, emu_threadIdx.z);
}

} // namespace emu

extern "C" long emu_launches(const char *kernel) {
    emu::Lock lock;
    if (!emu::launches_of) return 0;
    auto it = emu::launches_of->find(kernel);
    return it == emu::launches_of->end() ? 0 : it->second;
}

extern "C" int emu_launch_table(const char **names, long *counts, int max) {
    emu::Lock lock;
    int k = 0;
    if (emu::launches_of)
        for (const auto &kv : *emu::launches_of) {
            if (k < max) {
                names[k] = kv.first.c_str(); /* the map's keys live as long as the process */
                counts[k] = kv.second;
            }
            k++;
        }
    return k;
}
