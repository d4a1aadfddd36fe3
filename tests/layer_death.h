/* layer_death.h: runs a function that must die in a forked child and reports how it ended.
 * Used by the layer tests for their fatal-error paths. */
#ifndef NVCNN_TEST_LAYER_DEATH_H
#define NVCNN_TEST_LAYER_DEATH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(arg) in a child process with stderr captured. Returns the child's exit status (0-255),
 * or -1 if it was killed or could not run; copies up to cap-1 bytes of its stderr into msg. */
static inline int ld_run_child(void (*fn)(void *), void *arg, char *msg, size_t cap) {
    int fd[2];
    if (cap) msg[0] = 0;
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        close(fd[1]);
        fn(arg);
        _exit(0); /* survived: status 0 tells the parent the error path was not taken */
    }
    close(fd[1]);
    size_t len = 0;
    for (;;) {
        char buf[256];
        ssize_t r = read(fd[0], buf, sizeof buf);
        if (r <= 0) break;
        for (ssize_t i = 0; i < r; i++)
            if (len + 1 < cap) msg[len++] = buf[i];
    }
    if (cap) msg[len] = 0;
    close(fd[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
