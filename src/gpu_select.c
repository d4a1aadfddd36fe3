/* gpu_select.c: the one place that chooses this process's GPU (see gpu.h), in every build. */
#include <stdio.h>

#include "gpu.h"
#include "util.h"

static int selected = -1;
static int select_count;

void gpu_select(int device) {
    if (device < 0) die("gpu_select: device %d", device);
    if (selected == device) return;
    if (selected >= 0) die("gpu_select(%d): this process already uses GPU %d", device, selected);
    gpu_set_device_backend(device);
    selected = device;
    select_count++;
}

int gpu_selected(void) { return selected; }

int gpu_select_count(void) { return select_count; }

void gpu_require(const char *what) {
    if (selected < 0)
        die("%s before the GPU was selected: a CUDA context would be created on GPU 0 (internal error: "
            "gpu_select() must come first)", what);
}
