/* onednn_none.c: onednn.h in a build without oneDNN: no plan, nodes stay NCHW. */
#ifndef NVCNN_DNNL
#include <stdio.h>
#include <string.h>

#include "onednn.h"

int onednn_built(void) { return 0; }
void onednn_check_env(void) {}
int onednn_version(void) { return 0; }

int onednn_bf16_capable(char *isa, size_t n) {
    snprintf(isa, n, "none (built without oneDNN)");
    return 0;
}

void onednn_describe(char *buf, size_t n) {
    snprintf(buf, n, "not built (oneDNN 2.x was not found at build time, or DNNL=0)");
}

int onednn_plan(Net *net, char *err, size_t errlen) {
    (void)net;
    snprintf(err, errlen, "this nvcnn was built without oneDNN (install libdnnl-dev 2.x and rebuild)");
    return -1;
}

int onednn_plan_bf16(Net *net, char *err, size_t errlen) { return onednn_plan(net, err, errlen); }

int onednn_is_bf16(const Net *net) {
    (void)net;
    return 0;
}

int onednn_layers(const Net *net) {
    (void)net;
    return 0;
}

int onednn_blkconv_layers(const Net *net) {
    (void)net;
    return 0;
}

int onednn_ref_primitives(const Net *net) {
    (void)net;
    return 0;
}

int onednn_winograd_layers(const Net *net) {
    (void)net;
    return 0;
}

void onednn_node_nchw(const Net *net, int id, int grad, float *out) {
    const Node *nd = &net->node[id];
    memcpy(out, grad ? nd->grad : nd->data, shape_count(nd->shape) * sizeof(float));
}
#endif
