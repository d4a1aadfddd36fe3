/* test_fuzz.c: runs the libFuzzer target over the record, Example, image and checkpoint parsers
 * for a bounded time (tests/fuzz/run.sh). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST(fuzz_parsers_for_20_seconds) {
    const char *b = getenv("NVCNN_BUILD");
    char cmd[512], *o = NULL;
    snprintf(cmd, sizeof cmd, "bash tests/fuzz/run.sh 20 %s", b && *b ? b : "build");
    int rc = th_run(cmd, &o);
    if (rc == 77) {
        th_skip("clang is not installed");
    } else {
        CHECK_MSG(rc == 0, "the fuzzer found a problem:\n%s", o);
        const char *runs = o ? strstr(o, "Done ") : NULL;
        if (runs) printf("    %.*s", (int)strcspn(runs, "\n") + 1, runs);
    }
    free(o);
}
