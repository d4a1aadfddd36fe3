/* onnx.c: see onnx.h. The graph is built in memory from the net's layers (every message and
 * string from one list of allocations, freed together), the weights pointing into the net's
 * arenas, then packed straight into the file through protobuf-c. */
#define _GNU_SOURCE
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/proto/onnx.pb-c.h"
#include "layers/layers.h"
#include "layers/priv.h"
#include "util.h"

typedef struct G {
    const Net *net;
    void **mem; /* every allocation of the graph */
    size_t nmem, capmem;
    Onnx__NodeProto **node;
    size_t nnode, capnode;
    Onnx__TensorProto **init;
    size_t ninit, capinit;
    const char **value; /* [net->nnode] the ONNX name of each node's value */
    int *rank;    /* [net->nnode] 4 (NCHW) or 2 ([N, C]) */
    char *err;
    size_t errlen;
} G;

static void *gal(G *g, size_t n) {
    if (g->nmem == g->capmem) {
        g->capmem = g->capmem ? 2 * g->capmem : 256;
        g->mem = xrealloc(g->mem, g->capmem * sizeof *g->mem);
    }
    return g->mem[g->nmem++] = xcalloc(1, n ? n : 1);
}

static char *gstr(G *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *gstr(G *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = gal(g, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void push(G *g, void ***arr, size_t *n, size_t *cap, void *item) {
    (void)g;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *arr = xrealloc(*arr, *cap * sizeof **arr);
    }
    (*arr)[(*n)++] = item;
}

/* A node of op type `op` named `name`, reading `nin` values, writing one value `out`. */
static Onnx__NodeProto *node(G *g, const char *op, const char *name, const char *const *in, int nin, const char *out) {
    Onnx__NodeProto *nd = gal(g, sizeof *nd);
    onnx__node_proto__init(nd);
    nd->op_type = (char *)op;
    nd->name = (char *)name;
    nd->n_input = (size_t)nin;
    nd->input = gal(g, (size_t)nin * sizeof *nd->input);
    for (int i = 0; i < nin; i++) nd->input[i] = (char *)in[i];
    nd->n_output = 1;
    nd->output = gal(g, sizeof *nd->output);
    nd->output[0] = (char *)out;
    push(g, (void ***)&g->node, &g->nnode, &g->capnode, nd);
    return nd;
}

static Onnx__AttributeProto *attr(G *g, Onnx__NodeProto *nd, const char *name, Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = gal(g, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    Onnx__AttributeProto **arr = gal(g, (nd->n_attribute + 1) * sizeof *arr);
    if (nd->n_attribute) memcpy(arr, nd->attribute, nd->n_attribute * sizeof *arr);
    arr[nd->n_attribute++] = a;
    nd->attribute = arr;
    return a;
}

static void attr_int(G *g, Onnx__NodeProto *nd, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(g, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_float(G *g, Onnx__NodeProto *nd, const char *name, float v) {
    Onnx__AttributeProto *a = attr(g, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void attr_ints(G *g, Onnx__NodeProto *nd, const char *name, int n, const int64_t *v) {
    Onnx__AttributeProto *a = attr(g, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)n;
    a->ints = gal(g, (size_t)n * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)n * sizeof *v);
}

/* A float32 initializer over `data` (not copied: it must outlive the export). */
static void initializer(G *g, const char *name, const float *data, int ndims, const int64_t *dims) {
    Onnx__TensorProto *t = gal(g, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)ndims;
    t->dims = gal(g, (size_t)(ndims ? ndims : 1) * sizeof *t->dims);
    size_t count = 1;
    for (int i = 0; i < ndims; i++) {
        t->dims[i] = dims[i];
        count *= (size_t)dims[i];
    }
    t->has_raw_data = 1;
    t->raw_data.len = count * sizeof(float);
    t->raw_data.data = (uint8_t *)data;
    push(g, (void ***)&g->init, &g->ninit, &g->capinit, t);
}

/* A scalar constant as an initializer named name (its value kept in the graph's memory). */
static const char *scalar(G *g, const char *name, float v) {
    float *p = gal(g, sizeof *p);
    *p = v;
    initializer(g, name, p, 0, NULL);
    return name;
}

static int fail(G *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(G *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, g->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ONNX's explicit padding for nvcnn's window: the padding before is nvcnn's, the padding after
 * the least that gives nvcnn's output size; checked against ONNX's output size,
 * floor((in + before + after - k) / s) + 1. */
static int window_pads(G *g, const Layer *l, int in, int out, int k, int s, int before, int64_t *after) {
    int a = (out - 1) * s + k - in - before;
    if (a < 0) a = 0;
    if ((in + before + a - k) / s + 1 != out || before >= k || a >= k)
        return fail(g, "layer %s (%s): its padding (%d before, a window of %d, stride %d, %d -> %d) has no ONNX form", l->name,
                    l->ops->type, before, k, s, in, out);
    *after = a;
    return 0;
}

/* kernel_shape, strides and pads of a 2-D window (Conv, MaxPool, AveragePool). */
static int window_attrs(G *g, Onnx__NodeProto *nd, const Layer *l, Shape in, Shape out, int kh, int kw, int sh, int sw, int pt,
                        int pl) {
    int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, p[4] = {pt, pl, 0, 0};
    if (window_pads(g, l, in.h, out.h, kh, sh, pt, &p[2]) || window_pads(g, l, in.w, out.w, kw, sw, pl, &p[3])) return -1;
    attr_ints(g, nd, "kernel_shape", 2, k);
    attr_ints(g, nd, "strides", 2, s);
    attr_ints(g, nd, "pads", 4, p);
    return 0;
}

static const char *param_name(G *g, int p) { return gstr(g, "%s", g->net->param[p].name); }

/* The parameter p as an initializer of the given dims; its name. */
static const char *param_init(G *g, int p, int ndims, const int64_t *dims) {
    const char *name = param_name(g, p);
    initializer(g, name, g->net->params + g->net->param[p].off, ndims, dims);
    return name;
}

static const char *buffer_init(G *g, int b, int64_t c) {
    const char *name = gstr(g, "%s", g->net->buf[b].name);
    initializer(g, name, g->net->state + g->net->buf[b].off, 1, &c);
    return name;
}

/* One layer's nodes; its output value named `out`. */
static int layer_nodes(G *g, int li, const char *out) {
    const Net *net = g->net;
    const Layer *l = &net->layer[li];
    const char *type = l->ops->type;
    const char *x = g->value[l->in[0]];
    const Shape si = net->node[l->in[0]].shape, so = net->node[l->out].shape;
    int *rank = g->rank;
    rank[l->out] = rank[l->in[0]];
    if (strcmp(type, "conv") == 0) {
        const Conv *c = l->priv;
        int64_t wd[4] = {c->cout, c->cin / c->groups, c->kh, c->kw}, bd = c->cout;
        const char *in[3] = {x, param_init(g, c->pw, 4, wd), c->pb >= 0 ? param_init(g, c->pb, 1, &bd) : NULL};
        Onnx__NodeProto *nd = node(g, "Conv", l->name, in, c->pb >= 0 ? 3 : 2, out);
        attr_int(g, nd, "group", c->groups);
        return window_attrs(g, nd, l, si, so, c->kh, c->kw, c->sh, c->sw, c->pt, c->pl);
    }
    if (strcmp(type, "maxpool") == 0 || strcmp(type, "avgpool") == 0) {
        const Pool *p = l->priv;
        Onnx__NodeProto *nd = node(g, p->kind == POOL_MAX ? "MaxPool" : "AveragePool", l->name, &x, 1, out);
        /* AveragePool's count_include_pad defaults to 0: the mean over the window's in-bounds
         * elements, as nvcnn's (TensorFlow's SAME) average */
        return window_attrs(g, nd, l, si, so, p->kh, p->kw, p->sh, p->sw, p->pt, p->pl);
    }
    if (strcmp(type, "bn") == 0) {
        int64_t c = si.c;
        const char *in[5] = {x, param_init(g, l->param0, 1, &c), param_init(g, l->param0 + 1, 1, &c), buffer_init(g, l->buf0, c),
                             buffer_init(g, l->buf0 + 1, c)};
        Onnx__NodeProto *nd = node(g, "BatchNormalization", l->name, in, 5, out);
        attr_float(g, nd, "epsilon", BN_EPSILON);
        attr_float(g, nd, "momentum", BN_DECAY);
        return 0;
    }
    if (act_is(l)) {
        const ActPriv *a = l->priv;
        switch (a->act) {
        case ACT_RELU: node(g, "Relu", l->name, &x, 1, out); return 0;
        case ACT_SIGMOID: node(g, "Sigmoid", l->name, &x, 1, out); return 0;
        case ACT_TANH: node(g, "Tanh", l->name, &x, 1, out); return 0;
        case ACT_LINEAR: node(g, "Identity", l->name, &x, 1, out); return 0;
        case ACT_ELU: attr_float(g, node(g, "Elu", l->name, &x, 1, out), "alpha", 1.0f); return 0;
        case ACT_LRELU: attr_float(g, node(g, "LeakyRelu", l->name, &x, 1, out), "alpha", a->alpha); return 0;
        case ACT_RELU6: {
            const char *in[3] = {x, scalar(g, gstr(g, "%s/min", l->name), 0.0f), scalar(g, gstr(g, "%s/max", l->name), 6.0f)};
            node(g, "Clip", l->name, in, 3, out);
            return 0;
        }
        }
    }
    if (strcmp(type, "fc") == 0 && rank[l->in[0]] == 2) {
        const Fc *f = l->priv;
        int64_t wd[2] = {f->nout, f->nin}, bd = f->nout;
        const char *in[3] = {x, param_init(g, l->param0, 2, wd), f->bias ? param_init(g, l->param0 + 1, 1, &bd) : NULL};
        attr_int(g, node(g, "Gemm", l->name, in, f->bias ? 3 : 2, out), "transB", 1); /* x W^T + b */
        return 0;
    }
    if (strcmp(type, "flatten") == 0 && rank[l->in[0]] == 4) {
        /* nvcnn flattens in NHWC element order: channels last, then Flatten */
        const char *t = gstr(g, "%s/nhwc", l->name);
        int64_t perm[4] = {0, 2, 3, 1};
        attr_ints(g, node(g, "Transpose", gstr(g, "%s/transpose", l->name), &x, 1, t), "perm", 4, perm);
        attr_int(g, node(g, "Flatten", l->name, &t, 1, out), "axis", 1);
        rank[l->out] = 2;
        return 0;
    }
    if (strcmp(type, "avg") == 0 && rank[l->in[0]] == 4) {
        const char *t = gstr(g, "%s/pool", l->name);
        node(g, "GlobalAveragePool", gstr(g, "%s/pool", l->name), &x, 1, t);
        attr_int(g, node(g, "Flatten", l->name, &t, 1, out), "axis", 1);
        rank[l->out] = 2;
        return 0;
    }
    if (strcmp(type, "concat") == 0) {
        const char **in = gal(g, (size_t)l->nin * sizeof *in);
        for (int k = 0; k < l->nin; k++) {
            in[k] = g->value[l->in[k]];
            if (rank[l->in[k]] != rank[l->in[0]]) return fail(g, "layer %s (concat): inputs of different ranks", l->name);
        }
        attr_int(g, node(g, "Concat", l->name, in, l->nin, out), "axis", 1);
        return 0;
    }
    if (strcmp(type, "add") == 0 && rank[l->in[0]] == rank[l->in[1]]) {
        const AddPriv *p = l->priv;
        const char *in[2] = {x, g->value[l->in[1]]};
        const float coef[2] = {p->ca, p->cb};
        for (int k = 0; k < 2; k++) /* ca * a + cb * b: a Mul for a coefficient other than 1 */
            if (coef[k] != 1.0f) {
                const char *m[2] = {in[k], scalar(g, gstr(g, "%s/c%c", l->name, "ab"[k]), coef[k])};
                const char *t = gstr(g, "%s/scaled_%c", l->name, "ab"[k]);
                node(g, "Mul", t, m, 2, t);
                in[k] = t;
            }
        node(g, "Add", l->name, in, 2, out);
        return 0;
    }
    return fail(g, "layer %s (type %s) has no ONNX form in this exporter", l->name, type);
}

static Onnx__ValueInfoProto *value_info(G *g, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = gal(g, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = (char *)name;
    Onnx__TypeProto *t = gal(g, sizeof *t);
    onnx__type_proto__init(t);
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = gal(g, sizeof *t->tensor_type);
    onnx__type_proto__tensor__init(t->tensor_type);
    t->tensor_type->has_elem_type = 1;
    t->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    Onnx__TensorShapeProto *s = gal(g, sizeof *s);
    onnx__tensor_shape_proto__init(s);
    s->n_dim = (size_t)rank;
    s->dim = gal(g, (size_t)rank * sizeof *s->dim);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = gal(g, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (i == 0) { /* the batch: any size */
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)"N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        s->dim[i] = d;
    }
    t->tensor_type->shape = s;
    v->type = t;
    return v;
}

/* ---- writing: protobuf-c packs into the file through this buffer ---- */
typedef struct FileBuf {
    ProtobufCBuffer base;
    FILE *f;
    int bad;
} FileBuf;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    FileBuf *fb = (FileBuf *)b;
    if (!fb->bad && len && fwrite(data, 1, len, fb->f) != len) fb->bad = errno ? errno : EIO;
}

/* 0, -1 (the path is unusable), or -2 (writing failed: an I/O error) */
static int write_model(const Onnx__ModelProto *m, const char *path, char *err, size_t errlen) {
    char tmp[4200];
    if (tmp_path_beside(path, tmp, sizeof tmp) != 0) {
        snprintf(err, errlen, "--export_onnx=%s: the path is too long", path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        snprintf(err, errlen, "--export_onnx=%s: cannot write there: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -2;
    }
    FileBuf fb = {{file_append}, f, 0};
    errno = 0;
    protobuf_c_message_pack_to_buffer(&m->base, &fb.base);
    int e = fb.bad;
    if (!e && fflush(f) != 0) e = errno;
    if (!e && fsync(fileno(f)) != 0) e = errno;
    if (fclose(f) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        snprintf(err, errlen, "--export_onnx=%s: cannot write it: %s", path, strerror(e));
        return -2;
    }
    return 0;
}

static Onnx__StringStringEntryProto *meta(G *g, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = gal(g, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = (char *)key;
    e->value = (char *)value;
    return e;
}

int onnx_export(const Net *net, const OnnxInfo *info, const char *path, char *err, size_t errlen) {
    G g;
    memset(&g, 0, sizeof g);
    g.net = net;
    g.err = err;
    g.errlen = errlen;
    g.value = gal(&g, (size_t)net->nnode * sizeof *g.value);
    g.rank = gal(&g, (size_t)net->nnode * sizeof *g.rank);
    const Shape in = net->node[net->input].shape;
    g.value[net->input] = "images";
    g.rank[net->input] = 4;
    int rc = 0, classes = 0;
    const char *softmax = NULL;
    if (net->logits < 0) rc = fail(&g, "the net has no logits (no softmax cross-entropy layer)");
    for (int i = 0; i < net->nlayer && rc == 0; i++) {
        const Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "dropout") == 0) { /* identity at inference */
            g.value[l->out] = g.value[l->in[0]];
            g.rank[l->out] = g.rank[l->in[0]];
            continue;
        }
        if (strcmp(l->ops->type, "softmax_xent") == 0) { /* the loss becomes the softmax */
            if (l->in[0] != net->logits || g.rank[net->logits] != 2 || i != net->nlayer - 1) {
                rc = fail(&g, "layer %s (softmax_xent): not the net's last layer on 2-D logits", l->name);
                break;
            }
            softmax = "softmax";
            attr_int(&g, node(&g, "Softmax", "softmax", &g.value[net->logits], 1, softmax), "axis", 1);
            classes = net->node[net->logits].shape.c;
            continue;
        }
        g.value[l->out] = l->out == net->logits ? "logits" : l->name;
        rc = layer_nodes(&g, i, g.value[l->out]);
    }
    if (rc == 0 && !softmax) rc = fail(&g, "the net has no softmax cross-entropy layer");
    if (rc == 0) {
        Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
        graph.name = gstr(&g, "nvcnn %s", info->model);
        graph.doc_string = gstr(&g, "%s in inference form: batch norm on its running statistics, no dropout", info->model);
        graph.n_node = g.nnode;
        graph.node = g.node;
        graph.n_initializer = g.ninit;
        graph.initializer = g.init;
        const int64_t din[4] = {0, in.c, in.h, in.w}, dout[2] = {0, classes};
        Onnx__ValueInfoProto *gin = value_info(&g, "images", 4, din);
        gin->doc_string = (char *)"RGB pixels x as x / 127.5 - 1 (values in [-1, 1]), NCHW, float32";
        Onnx__ValueInfoProto *gout[2] = {value_info(&g, "logits", 2, dout), value_info(&g, softmax, 2, dout)};
        gout[0]->doc_string = (char *)"the last fully connected layer's output";
        gout[1]->doc_string = (char *)"class probabilities: class k is the TFRecords' label k + 1";
        graph.n_input = 1;
        graph.input = &gin;
        graph.n_output = 2;
        graph.output = gout;

        Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets = &opset;
        opset.domain = (char *)"";
        opset.has_version = 1;
        opset.version = ONNX_OPSET;
        Onnx__StringStringEntryProto *md[] = {
            meta(&g, "model", info->model),
            meta(&g, "image_size", gstr(&g, "%dx%d", in.h, in.w)),
            meta(&g, "num_classes", gstr(&g, "%d", classes)),
            meta(&g, "input", gstr(&g, "images: float32 [N, 3, %d, %d], NCHW, RGB", in.h, in.w)),
            meta(&g, "preprocessing",
                 "x / 127.5 - 1 for each RGB byte x (nvcnn's input layer); nvcnn evaluates a central crop of 87.5 % of the image, "
                 "resized bilinearly to the input size"),
            meta(&g, "outputs", "logits [N, classes]; softmax [N, classes], class k = label k + 1 of the TFRecords"),
            meta(&g, "training_steps", gstr(&g, "%ld", info->step)),
            meta(&g, "source", info->source ? info->source : "nvcnn"),
        };
        Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
        m.has_ir_version = 1;
        m.ir_version = ONNX_IR_VERSION;
        m.producer_name = (char *)"nvcnn";
        m.doc_string = gstr(&g, "nvcnn's %s at %dx%d, %d classes, after %ld training steps", info->model, in.h, in.w, classes, info->step);
        m.graph = &graph;
        m.n_opset_import = 1;
        m.opset_import = &opsets;
        m.n_metadata_props = sizeof md / sizeof md[0];
        m.metadata_props = md;
        rc = write_model(&m, path, err, errlen);
    }
    for (size_t i = 0; i < g.nmem; i++) free(g.mem[i]);
    free(g.mem);
    free(g.node);
    free(g.init);
    return rc;
}
