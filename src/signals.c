/* signals.c: see signals.h. */
#define _GNU_SOURCE
#include "signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_sig, ckpt_req;

static void on_stop(int sig) { stop_sig = sig; }
static void on_usr1(int sig) {
    (void)sig;
    ckpt_req = 1;
}

void signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
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
