/* scenario.h: helpers of the tests that run a scenario script (tests/slurm/run.sh,
 * tests/hosts/run.sh) and check what its runs and jobs left behind: the script's lines, the job
 * outputs, nvcnn's table rows and checkpoints. */
#ifndef NVCNN_TEST_SCENARIO_H
#define NVCNN_TEST_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "net.h"

/* Runs `timeout 600 bash SCRIPT NAME DIR` with DIR = th_tmpdir()/PREFIX-NAME (into dir, n
 * bytes); returns its exit status, with its output in *out (malloc'd, never NULL). */
int sc_scenario(const char *script, const char *prefix, const char *name, char *dir, size_t n, char **out);
/* Why Slurm cannot run here, or NULL. */
const char *sc_no_slurm(void);
/* The file dir/name (malloc'd; empty, never NULL, when it cannot be read). */
char *sc_slurp(const char *dir, const char *name);
/* 1 if the script's line "job NAME: ..." has JobState=state ExitCode=code Restarts=restarts. */
int sc_job_is(const char *out, const char *name, const char *state, const char *code, int restarts);
/* Occurrences of s in t. */
int sc_count(const char *t, const char *s);
/* The step numbers of nvcnn's table rows ("%6ld %5ld %7.1f %7.3f %7.5f"), in order; `loss`
 * (may be NULL) gets each row's loss column as printed (up to max rows, 16 bytes each). */
int sc_step_rows(const char *t, long *steps, char (*loss)[16], int max);
/* The number after the last occurrence of `prefix` in t (e.g. "at step "), or -1. */
long sc_last_number_after(const char *t, const char *prefix);
/* Loads checkpoint `path` of lenet with 10 classes into a new net initialised with `seed` (*net,
 * *velocity: malloc'd, to be freed with net_free and free; nets of different seeds start apart,
 * so that equal parameters after loading mean equal files); 0 on success, else prints why. */
int sc_load_lenet(const char *path, uint64_t seed, Net **net, float **velocity, CkptMeta *m);

#endif
