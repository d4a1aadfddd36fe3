/* nccl.cc: NCCL's communicator and AllReduce on the emulated device, across real processes. The
 * unique id names a POSIX shared-memory object; ncclCommInitRank maps it in every rank and waits
 * for all of them. An AllReduce runs in stream order like any stream work, in two pieces: the
 * first reads the input (whenever the stream order lets it run), the second copies it chunk by
 * chunk into the rank's slot, the ranks meet at a barrier, each one reduces every rank's slot in
 * rank order (so every rank computes the same bits) into the output, and they meet again before
 * the slots are reused. A rank that waits longer than NVCNN_EMU_NCCL_TIMEOUT seconds (default 300) for the
 * others ends the run with a line naming the call. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <vector>

#include "emu.h"

namespace {

const char kMagic[] = "nvcnn-emulated-nccl";
const size_t kChunk = (size_t)4 << 20; /* bytes per rank and round */

struct Shared {
    std::atomic<int> joined;
    std::atomic<int> arrived;
    std::atomic<unsigned> generation;
    int nranks;
    /* then nranks slots of kChunk bytes */
};

double now_s() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double timeout_s() {
    const char *v = emu::env("NVCNN_EMU_NCCL_TIMEOUT");
    return v ? atof(v) : 300.0;
}

} // namespace

struct ncclComm {
    int rank, nranks;
    char name[160];
    Shared *sh;
    size_t bytes;
    bool destroyed;
};

namespace {

char *slot(ncclComm *c, int r) { return (char *)(c->sh + 1) + (size_t)r * kChunk; }

/* A sense-reversing barrier of the communicator's ranks. */
void barrier(ncclComm *c, const char *what) {
    Shared *s = c->sh;
    const unsigned gen = s->generation.load();
    if (s->arrived.fetch_add(1) + 1 == c->nranks) {
        s->arrived.store(0);
        s->generation.fetch_add(1);
        return;
    }
    const double t0 = now_s(), limit = timeout_s();
    for (long spins = 0; s->generation.load() == gen; spins++) {
        if (spins > 1000) sched_yield();
        if ((spins & 1023) == 0 && now_s() - t0 > limit)
            emu::fatal("emulated NCCL: rank %d of %d waited %.0f s for the other ranks in %s (a rank died, or the ranks called "
                       "different collectives)",
                       c->rank, c->nranks, limit, what);
    }
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

template <typename T> double get(const char *p, size_t i) { return (double)((const T *)p)[i]; }
template <> double get<__half>(const char *p, size_t i) { return (double)__half2float(((const __half *)p)[i]); }
template <> double get<__nv_bfloat16>(const char *p, size_t i) { return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]); }
template <typename T> void put(char *p, size_t i, double v) { ((T *)p)[i] = (T)v; }
template <> void put<float>(char *p, size_t i, double v) { ((float *)p)[i] = (float)v; }
template <> void put<__half>(char *p, size_t i, double v) { ((__half *)p)[i] = __float2half_rn((float)v); }
template <> void put<__nv_bfloat16>(char *p, size_t i, double v) { ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); }

/* out[i] = op over ranks (in rank order) of slot r [i], for n elements of type T. Floating types
 * reduce as NCCL's kernels do, one addition at a time in the type (fp32 for fp16/bf16 data). */
template <typename T> void reduce(ncclComm *c, char *out, size_t n, ncclRedOp_t op) {
    for (size_t i = 0; i < n; i++) {
        double acc = get<T>(slot(c, 0), i);
        for (int r = 1; r < c->nranks; r++) {
            double v = get<T>(slot(c, r), i);
            switch (op) {
            case ncclSum: case ncclAvg: acc = std::is_floating_point<T>::value && sizeof(T) == 4 ? (double)((float)acc + (float)v) : acc + v; break;
            case ncclProd: acc *= v; break;
            case ncclMax: acc = v > acc ? v : acc; break;
            case ncclMin: acc = v < acc ? v : acc; break;
            default: break;
            }
        }
        if (op == ncclAvg) acc = std::is_floating_point<T>::value && sizeof(T) == 4 ? (double)((float)acc / (float)c->nranks) : acc / c->nranks;
        put<T>(out, i, acc);
    }
}

void reduce_any(ncclComm *c, ncclDataType_t t, char *out, size_t n, ncclRedOp_t op) {
    switch (t) {
    case ncclFloat32: reduce<float>(c, out, n, op); break;
    case ncclFloat64: reduce<double>(c, out, n, op); break;
    case ncclFloat16: reduce<__half>(c, out, n, op); break;
    case ncclBfloat16: reduce<__nv_bfloat16>(c, out, n, op); break;
    case ncclInt32: reduce<int32_t>(c, out, n, op); break;
    case ncclUint32: reduce<uint32_t>(c, out, n, op); break;
    case ncclInt64: reduce<int64_t>(c, out, n, op); break;
    case ncclUint64: reduce<uint64_t>(c, out, n, op); break;
    case ncclInt8: reduce<int8_t>(c, out, n, op); break;
    case ncclUint8: reduce<uint8_t>(c, out, n, op); break;
    default: break;
    }
}

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
    }
}

ncclResult_t ncclGetVersion(int *v) {
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    emu::Lock lock;
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &r, sizeof r) != (ssize_t)sizeof r) r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
    if (fd >= 0) close(fd);
    snprintf(id->internal, sizeof id->internal, "%s %016llx", kMagic, (unsigned long long)r);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    emu::Lock lock;
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks) {
        emu::reject("ncclCommInitRank: rank %d of %d", rank, nranks);
        return ncclInvalidArgument;
    }
    if (strncmp(id.internal, kMagic, sizeof kMagic - 1) != 0) {
        emu::reject("ncclCommInitRank: the unique id was not made by ncclGetUniqueId (was it broadcast to every rank?)");
        return ncclInvalidArgument;
    }
    ncclComm *c = new ncclComm();
    c->rank = rank;
    c->nranks = nranks;
    snprintf(c->name, sizeof c->name, "/nvcnn-emu-nccl-%s", id.internal + sizeof kMagic);
    c->bytes = sizeof(Shared) + (size_t)nranks * kChunk;
    int fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->bytes) != 0) {
        emu::reject("ncclCommInitRank: shared memory %s: %s", c->name, strerror(errno));
        if (fd >= 0) close(fd);
        delete c;
        return ncclSystemError;
    }
    c->sh = (Shared *)mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->sh == MAP_FAILED) {
        emu::reject("ncclCommInitRank: mapping %s: %s", c->name, strerror(errno));
        delete c;
        return ncclSystemError;
    }
    /* every rank waits for all: the object starts zeroed (ftruncate of a new object) */
    c->sh->joined.fetch_add(1);
    const double t0 = now_s(), limit = timeout_s();
    while (c->sh->joined.load() < nranks) {
        sched_yield();
        if (now_s() - t0 > limit)
            emu::fatal("emulated NCCL: ncclCommInitRank: rank %d waited %.0f s for %d ranks, %d joined", rank, limit, nranks,
                       c->sh->joined.load());
    }
    c->sh->nranks = nranks;
    barrier(c, "ncclCommInitRank");
    if (rank == 0) shm_unlink(c->name); /* everyone has it mapped: the name is no longer needed */
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    emu::Lock lock;
    if (!c || c->destroyed) return ncclInvalidArgument;
    munmap(c->sh, c->bytes);
    c->destroyed = true; /* kept: queued work may still name it */
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *count) {
    if (!c || !count) return ncclInvalidArgument;
    *count = c->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank) {
    if (!c || !rank) return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    emu::Lock lock;
    const size_t es = type_size(t);
    if (!c || c->destroyed) {
        emu::reject("ncclAllReduce: not a live communicator");
        return ncclInvalidArgument;
    }
    if (!es || (int)op < 0 || op >= ncclNumOps) {
        emu::reject("ncclAllReduce: data type %d, operation %d", (int)t, (int)op);
        return ncclInvalidArgument;
    }
    if (count == 0) return ncclSuccess;
    const size_t bytes = count * es;
    if (!emu::is_device_range(send, bytes) || !emu::is_device_range(recv, bytes)) {
        char a[200], b[200];
        emu::describe_pointer(send, a, sizeof a);
        emu::describe_pointer(recv, b, sizeof b);
        emu::reject("ncclAllReduce of %zu elements (%zu bytes): send %s, receive %s: not inside device allocations", count, bytes, a, b);
        return ncclInvalidArgument;
    }
    /* Two pieces of stream work: the input is read when the first runs (as soon as the stream
     * order allows, at random), the ranks meet and the output is written when the second runs
     * (only when something waits for it: emu.h). A GPU may do either at any time in between. */
    auto input = std::make_shared<std::vector<char>>();
    emu::enqueue(
        s, "ncclAllReduce (reads its input)", [=]() { input->assign((const char *)send, (const char *)send + bytes); }, false);
    emu::enqueue(
        s, "ncclAllReduce",
        [=]() {
            const size_t per = kChunk / es;
            for (size_t at = 0; at < count; at += per) {
                const size_t n = count - at < per ? count - at : per;
                memcpy(slot(c, c->rank), input->data() + at * es, n * es);
                barrier(c, "ncclAllReduce");
                reduce_any(c, t, (char *)recv + at * es, n, op);
                barrier(c, "ncclAllReduce");
            }
            std::vector<char>().swap(*input);
        },
        false, true);
    return ncclSuccess;
}

} /* extern "C" */
