/* gpu_debug.c: the GPU backend's checking mode (NVCNN_SYNC_CHECK) and the wording of where a
 * failure happened (see gpu.h); plain C, in every build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "util.h"

int gpu_sync_check_parse(const char *value, char *err, size_t errlen) {
    if (!value || !*value || strcmp(value, "0") == 0) return 0;
    if (strcmp(value, "1") == 0) return 1;
    snprintf(err, errlen, "NVCNN_SYNC_CHECK=%s: want 1 (synchronise after every layer) or 0", value);
    return -1;
}

int gpu_sync_check(void) {
    static int mode = -1;
    if (mode < 0) {
        char err[256];
        mode = gpu_sync_check_parse(getenv("NVCNN_SYNC_CHECK"), err, sizeof err);
        if (mode < 0) die_code(EXIT_USAGE, "%s", err);
    }
    return mode;
}

void gpu_layer_where(char *buf, size_t n, const char *phase, const char *layer, const char *type, int index, int count,
                     const char *model) {
    snprintf(buf, n, "the %s of layer %s (%s, layer %d of %d) of %s%s", phase, layer, type, index + 1, count, model ? model : "a net",
             model ? "" : " built by hand");
}
