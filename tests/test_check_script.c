/* test_check_script.c: scripts/gpu_check.sh where no GPU can be used (CUDA_VISIBLE_DEVICES empty
 * hides any there is): it builds (make finds the tree built by `make test` up to date), says in
 * one line that there is no GPU, writes its summary and log and exits 0; usage errors exit 2. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* the script's environment: no GPU, and not the jobserver of a `make test` that runs this */
#define ENV "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL CUDA_VISIBLE_DEVICES= JOBS=2 "

TEST(check_script_without_a_device_says_so_and_exits_0) {
    char cmd[1200], path[700], *o = NULL;
    const char *t = th_tmpdir();
    /* the build stage runs make over the tree the other tests are running: where sources changed
     * since the build (edited during a run of the tests), it would relink ./nvcnn under them */
    snprintf(cmd, sizeof cmd, "test -z \"$(find src models tests Makefile -newer nvcnn \\( -name '*.[ch]' -o -name '*.cu' -o -name Makefile \\) | head -n 1)\"");
    if (th_run(cmd, NULL) != 0) {
        th_skip("the build is older than the sources (changed while the tests run?): its build stage would relink ./nvcnn under "
                "the other tests; make, then run this test");
        return;
    }
    /* and where the tree was built with other flags than the script's plain make gives (make test
     * CFLAGS=...): the same, every object (the Makefile's flags stamp) */
    const char *b = getenv("NVCNN_BUILD") && *getenv("NVCNN_BUILD") ? getenv("NVCNN_BUILD") : "build";
    snprintf(cmd, sizeof cmd, ENV "make -s --no-print-directory BUILD='%s' cc-flags | cmp -s - '%s/cc.flags'", b, b);
    if (th_run(cmd, NULL) != 0) {
        th_skip("the build's compile flags (its cc.flags) are not those of a plain make: the script's build stage would rebuild "
                "and relink ./nvcnn under the other tests");
        return;
    }
    snprintf(cmd, sizeof cmd, ENV "scripts/gpu_check.sh %s/gc", t);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    CHECK_MSG(o && strstr(o, "gpu_check: build: ok"), "the build stage:\n%s", o);
    CHECK_MSG(o && count(o, "no GPU") == 1 && strstr(o, "gpu_check: no GPU: ") && strstr(o, "the GPU stages were not run"),
              "one line saying there is no GPU:\n%s", o);
    free(o);
    snprintf(path, sizeof path, "%s/gc/summary.md", t);
    char *s = NULL;
    snprintf(cmd, sizeof cmd, "cat %s", path);
    CHECK(th_run(cmd, &s) == 0 && s);
    CHECK_MSG(s && strstr(s, "| build | ok |") && strstr(s, "| tests | not run (no GPU) |") && strstr(s, "| input | not run (no GPU) |"),
              "%s", s);
    /* the host's CPU, with its AVX-512/bf16 flags and the CPU layers nvcnn runs there */
    CHECK_MSG(s && strstr(s, "- host CPU: ") && strstr(s, "AVX-512/bf16 flags: ") && strstr(s, "nvcnn's CPU layers: ") && !strstr(s, "nvcnn's CPU layers: ?"),
              "%s", s);
    free(s);
    snprintf(path, sizeof path, "%s/gc/log.txt", t);
    CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
    /* --no-build: the binaries there are */
    snprintf(cmd, sizeof cmd, ENV "scripts/gpu_check.sh --no-build %s/gc2", t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && !strstr(o, "gpu_check: build") && count(o, "no GPU") == 1, "exit %d:\n%s", rc, o);
    free(o);
    /* usage errors: one line, exit 2 */
    const char *bad[][2] = {{"", "OUTDIR is missing"}, {"--only=bogus /tmp/x", "unknown stage 'bogus'"}, {"--fast /tmp/x", "unknown option --fast"}};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "scripts/gpu_check.sh %s", bad[i][0]);
        rc = th_run(cmd, &o);
        CHECK_MSG(rc == 2 && o && strstr(o, bad[i][1]) && count(o, "\n") == 1, "'%s': exit %d: %s", bad[i][0], rc, o);
        free(o);
    }
}

/* A driver that sees a GPU which the CUDA runtime cannot use (here: a stand-in nvidia-smi listing
 * one GPU with driver 550, on a machine whose CUDA runtime finds none) is not "no GPU": the script
 * fails, naming the driver version the build needs, and so does `nvcnn --device=gpu`. */
TEST(check_script_fails_loudly_when_the_driver_is_too_old) {
    char cmd[1600], *o = NULL;
    const char *t = th_tmpdir();
    snprintf(cmd, sizeof cmd, "mkdir -p %s/oldsmi && printf '#!/bin/sh\\necho 550.54.15\\n' > %s/oldsmi/nvidia-smi && chmod +x %s/oldsmi/nvidia-smi",
             t, t, t);
    CHECK(th_run(cmd, NULL) == 0);
    const char *want = "nvidia-smi lists 1 GPU (driver 550.54.15) but the CUDA runtime finds none: this nvcnn is built with CUDA 13.0, "
                       "which needs NVIDIA driver 580.65.06 or newer";
    snprintf(cmd, sizeof cmd, ENV "PATH=%s/oldsmi:$PATH scripts/gpu_check.sh --no-build %s/gc3", t, t);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 1 && o && strstr(o, "gpu_check: FAILED: ") && strstr(o, want), "exit %d:\n%s", rc, o);
    free(o);
    snprintf(cmd, sizeof cmd, "PATH=%s/oldsmi:$PATH ./nvcnn --model=trivial --device=gpu --num_batches=1", t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 2 && o && strstr(o, "nvcnn: error: --device=gpu: no usable GPU: ") && strstr(o, want), "exit %d:\n%s", rc, o);
    free(o);
}
