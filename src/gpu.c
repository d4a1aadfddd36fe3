/* gpu.c: gpu.h over the device primitives of gpu_backend.h, in every build: which GPU this
 * process uses (the one place that chooses it), the rule that nothing needing a context comes
 * before that choice, and why a machine whose driver sees GPUs gives the CUDA runtime none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The oldest Linux driver of each CUDA major version (NVIDIA's CUDA Toolkit release notes). */
static const char *driver_for(int cuda_version) {
    if (cuda_version >= 13000) return "580.65.06";
    if (cuda_version >= 12000) return "525.60.13";
    return NULL;
}

int gpu_driver_problem_of(const char *smi_output, int cuda_version, char *msg, size_t n) {
    int gpus = 0;
    char driver[64] = "";
    for (const char *l = smi_output; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        while (len > 0 && (l[len - 1] == ' ' || l[len - 1] == '\r')) len--;
        if (len > 0) {
            if (gpus++ == 0) snprintf(driver, sizeof driver, "%.*s", (int)(len < 60 ? len : 60), l);
        }
        l = e ? e + 1 : NULL;
    }
    if (gpus == 0) return 0;
    const char *need = driver_for(cuda_version);
    if (need)
        snprintf(msg, n,
                 "nvidia-smi lists %d GPU%s (driver %s) but the CUDA runtime finds none: this nvcnn is built with CUDA %d.%d, "
                 "which needs NVIDIA driver %s or newer",
                 gpus, gpus == 1 ? "" : "s", driver, cuda_version / 1000, cuda_version % 1000 / 10, need);
    else
        snprintf(msg, n, "nvidia-smi lists %d GPU%s (driver %s) but the CUDA runtime finds none", gpus, gpus == 1 ? "" : "s", driver);
    return 1;
}

int gpu_driver_problem(char *msg, size_t n) {
    if (!gpu_backend_built() || gpu_backend_count(NULL, 0) > 0) return 0;
    FILE *p = popen("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", "r");
    if (!p) return 0;
    char out[4096];
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    if (pclose(p) != 0) return 0; /* no nvidia-smi, or it sees no driver: nothing to reconcile */
    return gpu_driver_problem_of(out, gpu_backend_cuda_version(), msg, n);
}
