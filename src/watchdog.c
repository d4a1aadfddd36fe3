/* watchdog.c: see watchdog.h. */
#define _GNU_SOURCE
#include "watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static struct {
    int on;               /* set once by watchdog_start, before the thread runs */
    double timeout;
    int rank;
    char host[64];
    pthread_mutex_t mu;   /* guards what follows */
    WatchdogPhase phase;
    long a, b;
    long step;            /* -1: before the first step */
    double since;         /* when the phase began (now_seconds) */
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .step = -1};

static void describe(char *out, size_t len, WatchdogPhase p, long a, long b) {
    switch (p) {
    case WD_INPUT: snprintf(out, len, "waiting for the next batch of the input pipeline"); break;
    case WD_BUCKET: snprintf(out, len, "the allreduce of gradient bucket %ld of %ld", a, b); break;
    case WD_NCCL: snprintf(out, len, "the NCCL allreduce of the gradients (waiting for the GPU)"); break;
    case WD_ALLREDUCE: snprintf(out, len, "a blocking allreduce of %ld value(s)", a); break;
    case WD_BCAST: snprintf(out, len, "a broadcast of %ld bytes from rank 0", a); break;
    case WD_BARRIER: snprintf(out, len, "a barrier"); break;
    case WD_ALLGATHER: snprintf(out, len, "an allgather of %ld bytes per rank", a); break;
    case WD_FINALIZE: snprintf(out, len, "MPI_Finalize"); break;
    default: snprintf(out, len, "an unnamed phase"); break;
    }
}

/* Checks the phase every `period` seconds; ends the process when it has lasted too long. */
static void *watch(void *arg) {
    (void)arg;
    const double period = wd.timeout / 8 < 1 ? (wd.timeout / 8 > 0.01 ? wd.timeout / 8 : 0.01) : 1;
    const struct timespec ts = {(time_t)period, (long)((period - (double)(time_t)period) * 1e9)};
    double last = now_seconds();
    for (;;) {
        nanosleep(&ts, NULL);
        /* a wake-up seconds late: this process was not running (SIGSTOP, a suspended job or VM),
         * which is no peer's stall: that time does not count (else, once continued, this rank
         * would blame a peer for its own stop) */
        const double now = now_seconds(), late = now - last - period;
        last = now;
        pthread_mutex_lock(&wd.mu);
        if (late > 2.0 + period && wd.since <= now - late) wd.since += late; /* (a phase begun before the stop) */
        const WatchdogPhase p = wd.phase;
        const double waited = now_seconds() - wd.since;
        const long a = wd.a, b = wd.b, step = wd.step;
        pthread_mutex_unlock(&wd.mu);
        if (p == WD_IDLE || waited < wd.timeout) continue;
        char what[160], when[48];
        describe(what, sizeof what, p, a, b);
        if (step >= 0)
            snprintf(when, sizeof when, "at step %ld", step + 1);
        else
            snprintf(when, sizeof when, "before the first step");
        const char *why = p == WD_INPUT ? "the input pipeline delivers nothing (its files unreachable?)"
                          : p == WD_NCCL ? "a peer rank is lost or stalled, or the GPU hangs"
                                         : "a peer rank is lost or stalled";
        fprintf(stderr, "nvcnn: error: rank %d on %s: no progress for %.1f s in %s %s (--step_timeout=%g): %s; exiting with code %d\n",
                wd.rank, wd.host, waited, what, when, wd.timeout, why, EXIT_STALLED);
        fflush(stderr);
        fflush(stdout);
        /* at once: the main thread is blocked inside MPI, NCCL or the loader, and atexit handlers
         * or MPI_Finalize would wait for the same peer */
        _exit(EXIT_STALLED);
    }
    return NULL;
}

void watchdog_start(double timeout, int rank) {
    if (!(timeout > 0) || wd.on) return;
    wd.timeout = timeout;
    wd.rank = rank;
    if (gethostname(wd.host, sizeof wd.host - 1) != 0) snprintf(wd.host, sizeof wd.host, "?");
    wd.host[strcspn(wd.host, ".")] = 0;
    wd.on = 1;
    /* the thread takes no signal: they are for the signal thread (signals.c) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    int err = pthread_create(&t, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) die("watchdog: cannot start its thread: %s", strerror(err));
    pthread_detach(t);
}

void watchdog_step(long step) {
    if (!wd.on) return;
    pthread_mutex_lock(&wd.mu);
    wd.step = step;
    pthread_mutex_unlock(&wd.mu);
}

void watchdog_enter(WatchdogPhase phase, long a, long b) {
    if (!wd.on) return;
    pthread_mutex_lock(&wd.mu);
    wd.phase = phase;
    wd.a = a;
    wd.b = b;
    wd.since = now_seconds();
    pthread_mutex_unlock(&wd.mu);
}

void watchdog_leave(void) {
    if (!wd.on) return;
    pthread_mutex_lock(&wd.mu);
    wd.phase = WD_IDLE;
    pthread_mutex_unlock(&wd.mu);
}
