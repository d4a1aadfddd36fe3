/* builder.c: see builder.h. */
#include "builder.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"

NbT nb_input(Net *nb) {
    NbT t = {nb->input};
    return t;
}

Shape nb_shape(Net *nb, NbT x) { return nb->node[x.id].shape; }

static NbT mk(int id) {
    NbT t = {id};
    return t;
}

NbT nb_activate(Net *nb, NbT x, Act act) {
    if (act == ACT_LINEAR) return x;
    return mk(act_create(nb, x.id, act, nb->lrelu_alpha));
}

int nb_width(Net *nb, int c) {
    int d = nb->width_div > 1 ? nb->width_div : 1;
    return (c + d - 1) / d;
}

/* groups as a reduced variant has them: shrunk with the widths, at least 1 */
static int reduced_groups(Net *nb, int groups) {
    int d = nb->width_div > 1 ? nb->width_div : 1;
    return groups / d > 1 ? groups / d : 1;
}

/* conv (+ BN or bias) + activation, cout already through nb_width; *conv: the conv layer's index */
static NbT conv_block(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad, Act act, int use_bn,
                      int groups, int *conv) {
    if (use_bn < 0) use_bn = nb->use_batch_norm;
    int y = conv_create_grouped(nb, x.id, cout, kh, kw, sh, sw, pad, !use_bn, groups);
    if (conv) *conv = nb->node[y].producer;
    if (use_bn) y = bn_create(nb, y);
    return nb_activate(nb, mk(y), act);
}

NbT nb_conv_ex(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad, Act act, int use_bn) {
    return conv_block(nb, x, nb_width(nb, cout), kh, kw, sh, sw, pad, act, use_bn, 1, NULL);
}

NbT nb_conv_grouped(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad, int groups) {
    if (groups < 1 || cout % groups != 0) die("nb_conv_grouped: %d groups do not divide %d channels", groups, cout);
    int g = reduced_groups(nb, groups);
    return conv_block(nb, x, g * (cout / groups), kh, kw, sh, sw, pad, nb->activation, -1, g, NULL);
}

NbT nb_conv_branches(Net *nb, NbT x, int branches, int width, int kh, int kw, int sh, int sw, Padding pad) {
    if (branches < 1 || width < 1) die("nb_conv_branches: %d branches of width %d", branches, width);
    int conv;
    NbT y = conv_block(nb, x, reduced_groups(nb, branches) * width, kh, kw, sh, sw, pad, nb->activation, -1, 1, &conv);
    nb->param[nb->layer[conv].param0].fan_out = width * kh * kw; /* the weights: one branch's Glorot fans */
    return y;
}

NbT nb_conv(Net *nb, NbT x, int cout, int kh, int kw, int sh, int sw, Padding pad) {
    return nb_conv_ex(nb, x, cout, kh, kw, sh, sw, pad, nb->activation, -1);
}

NbT nb_pool(Net *nb, NbT x, PoolKind kind, int kh, int kw, int sh, int sw, Padding pad) {
    return mk(pool_create(nb, x.id, kind, kh, kw, sh, sw, pad));
}

NbT nb_fc(Net *nb, NbT x, int nout, Act act) {
    int y = fc_create(nb, x.id, nb_width(nb, nout), 1);
    return nb_activate(nb, mk(y), act);
}

NbT nb_dropout(Net *nb, NbT x, float keep_prob) { return mk(dropout_create(nb, x.id, keep_prob)); }
NbT nb_flatten(Net *nb, NbT x) { return mk(flatten_create(nb, x.id)); }
NbT nb_spatial_avg(Net *nb, NbT x) { return mk(spatial_avg_create(nb, x.id)); }

NbT nb_concat(Net *nb, const NbT *xs, int n) {
    int ids[64];
    if (n < 1 || n > 64) die("nb_concat: %d inputs (1..64)", n);
    for (int i = 0; i < n; i++) ids[i] = xs[i].id;
    return mk(concat_create(nb, ids, n));
}

NbT nb_add(Net *nb, NbT a, NbT b) { return mk(add_create(nb, a.id, b.id)); }
NbT nb_add_scaled(Net *nb, NbT a, NbT b, float scale) { return mk(add_create_scaled(nb, a.id, b.id, 1.0f, scale)); }

void nb_section(Net *nb, const char *fmt, ...) {
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(nb->pending_section);
    nb->pending_section = xstrdup(buf);
}

void nb_softmax_xent(Net *nb, NbT logits) { softmax_xent_create(nb, logits.id); }
