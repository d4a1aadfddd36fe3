/* gpu.c: gpu.h over the device primitives of gpu_backend.h, in every build: which GPU this
 * process uses (the one place that chooses it), the rule that nothing needing a context comes
 * before that choice. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"
#include "gpu_backend.h"
#include "util.h"

static int selected = -1;
static int select_count;

void gpu_select(int device) {
    if (device < 0) die("gpu_select: device %d", device);
    if (selected == device) return;
    if (selected >= 0) die("gpu_select(%d): this process already uses GPU %d", device, selected);
    gpu_backend_set_device(device);
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

int gpu_built(void) { return gpu_backend_built(); }

int gpu_count(char *why, size_t whylen) { return gpu_backend_count(why, whylen); }

void gpu_describe(int device, char *buf, size_t n) { gpu_backend_describe(device, buf, n); }

void gpu_pci_bus_id(int device, char *buf, size_t n) { gpu_backend_pci_bus_id(device, buf, n); }

size_t gpu_mem_used(int device) {
    gpu_require("gpu_mem_used");
    if (device != selected) die("gpu_mem_used(%d): this process uses GPU %d", device, selected);
    size_t fr = 0, tot = 0;
    gpu_backend_mem_info(&fr, &tot);
    return tot - fr;
}

void *gpu_host_alloc(size_t bytes) {
    gpu_require("gpu_host_alloc"); /* pinned memory belongs to a context */
    return gpu_backend_host_alloc(bytes);
}

void gpu_host_free(void *p) {
    if (p) gpu_backend_host_free(p);
}
