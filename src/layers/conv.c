/* conv.c: 2-D convolution, CPU reference backend.
 *
 * Samples are processed in chunks: im2col of a chunk into col [K][cols] (K = cin*kh*kw,
 * cols = samples*oh*ow), one GEMM per chunk through OpenBLAS, then a transpose of the result
 * [cout][cols] into NCHW. Backward gathers dY the same way, dW += dY col^T, dcol = W^T dY, and
 * col2im accumulates dcol into dX.
 *
 * Grouped (groups g > 1): col's rows are ordered by input channel, so group k's rows are the
 * contiguous block [k*Kg, (k+1)*Kg) with Kg = (cin/g)*kh*kw, and its weights the block
 * [k*cout/g, (k+1)*cout/g) of W [cout][Kg]: one GEMM per group and chunk, on those blocks.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "priv.h"

/* Largest col buffer of one chunk, in floats (64 MiB). */
#define CONV_CHUNK_FLOATS (16u << 20)

static void conv_destroy(Layer *l) {
    Conv *c = l->priv;
    free(c->col);
    free(c->tmp);
    free(c);
}

static void conv_scratch(Conv *c) {
    if (c->col) return;
    size_t K = (size_t)c->cin * c->kh * c->kw, cols = (size_t)c->chunk * c->oh * c->ow;
    c->col = xmalloc_aligned(K * cols * sizeof(float));
    c->tmp = xmalloc_aligned((size_t)c->cout * cols * sizeof(float));
}

/* col[(ci*kh + i)*kw + j][s*ohw + oy*ow + ox] = x[n0+s][ci][oy*sh - pt + i][ox*sw - pl + j] */
static void im2col(const Conv *c, const float *x, int n0, int ns, float *col) {
    const int K = c->cin * c->kh * c->kw, ohw = c->oh * c->ow;
    const size_t cols = (size_t)ns * ohw;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < K; r++) {
        int ci = r / (c->kh * c->kw), i = (r / c->kw) % c->kh, j = r % c->kw;
        float *dst = col + (size_t)r * cols;
        for (int s = 0; s < ns; s++) {
            const float *plane = x + ((size_t)(n0 + s) * c->cin + ci) * c->h * c->w;
            float *d = dst + (size_t)s * ohw;
            for (int oy = 0; oy < c->oh; oy++) {
                int y = oy * c->sh - c->pt + i;
                float *drow = d + (size_t)oy * c->ow;
                if (y < 0 || y >= c->h) {
                    memset(drow, 0, (size_t)c->ow * sizeof(float));
                    continue;
                }
                const float *srow = plane + (size_t)y * c->w;
                if (c->sw == 1) {
                    int x0 = -c->pl + j; /* input column of ox = 0 */
                    int lo = x0 < 0 ? -x0 : 0;
                    int hi = c->w - x0;
                    if (hi > c->ow) hi = c->ow;
                    if (lo > c->ow) lo = c->ow;
                    for (int ox = 0; ox < lo; ox++) drow[ox] = 0;
                    if (hi > lo) memcpy(drow + lo, srow + x0 + lo, (size_t)(hi - lo) * sizeof(float));
                    for (int ox = hi > lo ? hi : lo; ox < c->ow; ox++) drow[ox] = 0;
                } else {
                    for (int ox = 0; ox < c->ow; ox++) {
                        int xx = ox * c->sw - c->pl + j;
                        drow[ox] = (xx >= 0 && xx < c->w) ? srow[xx] : 0.0f;
                    }
                }
            }
        }
    }
}

/* dx[n0+s][ci][y][x] += col[...] (the transpose of im2col). Each (sample, channel) plane is
 * written by one thread. */
static void col2im_add(const Conv *c, const float *col, int n0, int ns, float *dx) {
    const int ohw = c->oh * c->ow;
    const size_t cols = (size_t)ns * ohw;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < ns; s++)
        for (int ci = 0; ci < c->cin; ci++) {
            float *plane = dx + ((size_t)(n0 + s) * c->cin + ci) * c->h * c->w;
            for (int i = 0; i < c->kh; i++)
                for (int j = 0; j < c->kw; j++) {
                    const float *src = col + ((size_t)(ci * c->kh + i) * c->kw + j) * cols + (size_t)s * ohw;
                    for (int oy = 0; oy < c->oh; oy++) {
                        int y = oy * c->sh - c->pt + i;
                        if (y < 0 || y >= c->h) continue;
                        float *drow = plane + (size_t)y * c->w;
                        const float *srow = src + (size_t)oy * c->ow;
                        for (int ox = 0; ox < c->ow; ox++) {
                            int xx = ox * c->sw - c->pl + j;
                            if (xx >= 0 && xx < c->w) drow[xx] += srow[ox];
                        }
                    }
                }
        }
}

static void conv_forward(Layer *l, Net *net) {
    Conv *c = l->priv;
    conv_scratch(c);
    const float *x = net_node(net, l->in[0])->data;
    float *y = net_node(net, l->out)->data;
    const float *W = net_param(net, c->pw);
    const float *b = c->pb >= 0 ? net_param(net, c->pb) : NULL;
    const int N = net_node(net, l->out)->shape.n, ohw = c->oh * c->ow;
    const int G = c->groups, Kg = c->cin / G * c->kh * c->kw, Mg = c->cout / G;
    for (int n0 = 0; n0 < N; n0 += c->chunk) {
        int ns = N - n0 < c->chunk ? N - n0 : c->chunk;
        int cols = ns * ohw;
        im2col(c, x, n0, ns, c->col);
        /* per group k: tmp[k*Mg..][cols] = W[k*Mg..][Kg] col[k*Kg..][cols] */
        for (int k = 0; k < G; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Mg, cols, Kg, 1.0f, W + (size_t)k * Mg * Kg, Kg,
                        c->col + (size_t)k * Kg * cols, cols, 0.0f, c->tmp + (size_t)k * Mg * cols, cols);
#pragma omp parallel for collapse(2) schedule(static)
        for (int s = 0; s < ns; s++)
            for (int co = 0; co < c->cout; co++) {
                const float *src = c->tmp + (size_t)co * cols + (size_t)s * ohw;
                float *dst = y + ((size_t)(n0 + s) * c->cout + co) * ohw;
                float bias = b ? b[co] : 0.0f;
                for (int p = 0; p < ohw; p++) dst[p] = src[p] + bias;
            }
    }
}

static void conv_backward(Layer *l, Net *net) {
    Conv *c = l->priv;
    conv_scratch(c);
    const float *x = net_node(net, l->in[0])->data;
    float *dx = net_node(net, l->in[0])->grad;
    const float *dy = net_node(net, l->out)->grad;
    const float *W = net_param(net, c->pw);
    float *dW = net_grad(net, c->pw);
    float *db = c->pb >= 0 ? net_grad(net, c->pb) : NULL;
    const int N = net_node(net, l->out)->shape.n, ohw = c->oh * c->ow;
    const int G = c->groups, Kg = c->cin / G * c->kh * c->kw, Mg = c->cout / G;
    for (int n0 = 0; n0 < N; n0 += c->chunk) {
        int ns = N - n0 < c->chunk ? N - n0 : c->chunk;
        int cols = ns * ohw;
        /* gather dY of the chunk into tmp[cout][cols] */
#pragma omp parallel for collapse(2) schedule(static)
        for (int s = 0; s < ns; s++)
            for (int co = 0; co < c->cout; co++)
                memcpy(c->tmp + (size_t)co * cols + (size_t)s * ohw, dy + ((size_t)(n0 + s) * c->cout + co) * ohw,
                       (size_t)ohw * sizeof(float));
        if (db) {
#pragma omp parallel for schedule(static)
            for (int co = 0; co < c->cout; co++) {
                const float *g = c->tmp + (size_t)co * cols;
                double s = 0;
                for (int p = 0; p < cols; p++) s += g[p];
                db[co] += (float)s;
            }
        }
        im2col(c, x, n0, ns, c->col);
        /* per group k: dW[k*Mg..][Kg] += tmp[k*Mg..][cols] col[k*Kg..][cols]^T */
        for (int k = 0; k < G; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Mg, Kg, cols, 1.0f, c->tmp + (size_t)k * Mg * cols, cols,
                        c->col + (size_t)k * Kg * cols, cols, 1.0f, dW + (size_t)k * Mg * Kg, Kg);
        if (dx) {
            /* per group k: col[k*Kg..][cols] = W[k*Mg..][Kg]^T tmp[k*Mg..][cols] */
            for (int k = 0; k < G; k++)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kg, cols, Mg, 1.0f, W + (size_t)k * Mg * Kg, Kg,
                            c->tmp + (size_t)k * Mg * cols, cols, 0.0f, c->col + (size_t)k * Kg * cols, cols);
            col2im_add(c, c->col, n0, ns, dx);
        }
    }
}

/* "3x3/2 SAME g32 +bias": window, groups when grouped, biases when not batch-normalised */
static void conv_describe(const Layer *l, char *buf, size_t n) {
    const Conv *c = l->priv;
    size_t off = (size_t)net_window_text(buf, n, c->kh, c->kw, c->sh, c->sw, c->pad);
    if (c->groups > 1 && off < n) off += (size_t)snprintf(buf + off, n - off, " g%d", c->groups);
    if (c->pb >= 0 && off < n) snprintf(buf + off, n - off, " +bias");
}

static const LayerOps conv_ops = {"conv", conv_forward, conv_backward, conv_destroy, conv_describe, NULL};

int conv_create(Net *net, int in, int cout, int kh, int kw, int sh, int sw, Padding pad, int bias) {
    return conv_create_grouped(net, in, cout, kh, kw, sh, sw, pad, bias, 1);
}

int conv_create_grouped(Net *net, int in, int cout, int kh, int kw, int sh, int sw, Padding pad, int bias, int groups) {
    Shape s = net_node(net, in)->shape;
    if (cout <= 0) die("conv: %d output channels", cout);
    if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0) die("conv: bad kernel %dx%d / stride %dx%d", kh, kw, sh, sw);
    if (groups <= 0 || s.c % groups != 0 || cout % groups != 0)
        die("conv: %d groups must divide both the input channels (%d) and the output channels (%d)", groups, s.c, cout);
    Conv *c = xcalloc(1, sizeof *c);
    c->groups = groups;
    c->pad = pad;
    c->cin = s.c;
    c->h = s.h;
    c->w = s.w;
    c->cout = cout;
    c->kh = kh;
    c->kw = kw;
    c->sh = sh;
    c->sw = sw;
    c->oh = net_window_out(net, "conv", s.h, kh, sh, pad, &c->pt);
    c->ow = net_window_out(net, "conv", s.w, kw, sw, pad, &c->pl);
    /* col holds every group's rows: K = cin*kh*kw; each output sums over Kg = K / groups */
    size_t K = (size_t)c->cin * kh * kw, Kg = K / (size_t)groups, per = K * (size_t)c->oh * c->ow;
    size_t chunk = per ? CONV_CHUNK_FLOATS / per : 1;
    if (chunk < 1) chunk = 1;
    if (chunk > (size_t)s.n) chunk = (size_t)s.n;
    c->chunk = (int)chunk;
    Layer *l = net_add_layer(net, &conv_ops, &in, 1, shape4(s.n, cout, c->oh, c->ow), c);
    l->flops = 2.0 * s.n * cout * c->oh * c->ow * (double)Kg;
    /* Glorot fans of one group's kernel: as if each group were a convolution of its own */
    c->pw = net_add_param(net, "weights", (size_t)cout * Kg, INIT_GLOROT_UNIFORM, (int)Kg, cout / groups * kh * kw);
    c->pb = bias ? net_add_param(net, "biases", (size_t)cout, INIT_ZERO, 0, 0) : -1;
    return l->out;
}
