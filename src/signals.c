/* signals.c: see signals.h. */
#define _GNU_SOURCE
#include "signals.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_sig, ckpt_req;
static volatile sig_atomic_t starting = 1; /* no step trained yet (signals_training()) */

static void on_stop(int sig) { stop_sig = sig; }
static void on_usr1(int sig) {
    (void)sig;
    ckpt_req = 1;
}

/* The thread that takes the signals: the main and OpenMP threads block them. A SIGTERM delivered
 * to a compute thread while it ran oneDNN's JIT kernels corrupted the heap in about 1 of 10 runs
 * stopped during a step (never with the reference layers, 0 of 60); why was not traced (data kept
 * below the stack pointer, where the signal frame goes, would do it). With this thread: 0 of 250. */
static void *signal_thread(void *arg) {
    const sigset_t *set = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(set, &sig) != 0) continue;
        if (sig == SIGUSR1)
            ckpt_req = 1;
        else if (sig == SIGINT && starting) { /* Ctrl-C before anything is trained: at once, nothing to save */
            static const char line[] = "Received SIGINT before the first step: exiting (nothing trained)\n";
            if (write(2, line, sizeof line - 1) < 0) {
            }
            _exit(130);
        } else
            stop_sig = sig;
    }
    return NULL;
}

void signals_training(void) { starting = 0; }

void signals_install(void) {
    static int installed;
    if (installed) return;
    installed = 1;
    static sigset_t set;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* SIGHUP (the terminal or the ssh session gone) as SIGTERM, unless nohup started the run */
    struct sigaction hup;
    const int hup_on = sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN;
    if (hup_on) sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    /* the handlers stay for threads that do not block the signals (the loader's, started
     * earlier); the main thread and the OpenMP threads block them, one thread waits for them */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    if (hup_on) sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
#pragma omp parallel
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, signal_thread, &set) == 0) pthread_detach(t);
}

int signals_take(void) {
    int f = 0;
    if (stop_sig) f |= SIG_STOP;
    if (ckpt_req) {
        f |= SIG_CHECKPOINT;
        ckpt_req = 0;
    }
    return f;
}

int signals_stop_signal(void) { return (int)stop_sig; }

void signals_stop_counts(double v[SIGNALS_NCOUNTS]) {
    const int s = (int)stop_sig;
    v[0] = s == SIGTERM ? 1 : 0;
    v[1] = s == SIGINT ? 1 : 0;
    v[2] = s == SIGHUP ? 1 : 0;
}

const char *signals_stop_name(const double summed[SIGNALS_NCOUNTS]) {
    return summed[0] > 0 ? "SIGTERM" : summed[1] > 0 ? "SIGINT" : summed[2] > 0 ? "SIGHUP" : "a stop signal";
}
