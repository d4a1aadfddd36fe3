/* test_build.c: the Makefile rebuilds an object when its compile flags change. What `make` finds
 * installed (MPI, oneDNN, CUDA) becomes flags (-DNVCNN_MPI, ...): a `make` run before the packages
 * were installed built objects without them, and the `make` after installing them kept those
 * objects beside new ones (a binary whose dist.o had no MPI: every rank of an mpirun was rank 0). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* not the jobserver of a `make test` that runs this */
#define ENV "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "

TEST(build_objects_follow_their_flags) {
    char cmd[1200], want[800], *o = NULL;
    const char *t = th_tmpdir();
    snprintf(want, sizeof want, "-c src/util.c -o %s/b/src/util.o", t);
    /* one object of its own build folder, built, then up to date */
    snprintf(cmd, sizeof cmd, ENV "make --no-print-directory BUILD=%s/b %s/b/src/util.o 2>&1", t, t);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, want), "exit %d:\n%s", rc, o);
    free(o);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && !strstr(o, want), "built again with the same flags: exit %d:\n%s", rc, o);
    free(o);
    /* an object with flags of its own (add.o: -ffp-contract=off) leaves the others' stamp alone */
    snprintf(cmd, sizeof cmd, ENV "make --no-print-directory BUILD=%s/b %s/b/src/onednn/add.o %s/b/src/util.o 2>&1", t, t, t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, "-ffp-contract=off") && !strstr(o, want), "exit %d:\n%s", rc, o);
    free(o);
    /* another flag: built again, with it */
    snprintf(cmd, sizeof cmd, ENV "make --no-print-directory BUILD=%s/b CFLAGS=-DNVCNN_FLAGS_PROBE %s/b/src/util.o 2>&1", t, t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, want) && strstr(o, "-DNVCNN_FLAGS_PROBE"), "not rebuilt with the new flag: exit %d:\n%s", rc, o);
    free(o);
    /* and back: built again without it */
    snprintf(cmd, sizeof cmd, ENV "make --no-print-directory BUILD=%s/b %s/b/src/util.o 2>&1", t, t);
    rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0 && o && strstr(o, want) && !strstr(o, "-DNVCNN_FLAGS_PROBE"), "not rebuilt without the flag: exit %d:\n%s", rc, o);
    free(o);
}
