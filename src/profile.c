/* profile.c: see profile.h. Spans are kept as (start, end) on the wall clock and written as
 * begin/end pairs once the last profiled step is done: per track, sorted by start (the longer
 * first where two start together), each begin closing the spans that ended before it. */
#include "profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpunet.h"
#include "lifecycle.h"
#include "util.h"

enum { TID_HOST = 1, TID_BUCKETS = 2, TID_GPU = 3 };
enum { K_STEP, K_FORWARD, K_BACKWARD, K_LAYER_FWD, K_LAYER_BWD, K_PHASE, K_BUCKET };

static const char *const phase_name[PROF_NPHASES] = {"input wait",     "weight decay loss", "zero gradients",
                                                      "allreduce launch", "allreduce wait",   "optimizer"};

typedef struct Span {
    double t0, t1;
    long step;
    int kind, idx, tid;
} Span;

struct Profiler {
    Run *r;
    Net *net;
    Trainer *tr;
    long first, last; /* 0-based steps, inclusive */
    int on;           /* inside a profiled step */
    int written;
    int failed;        /* the trace could not be written */
    char why[4400];
    double open_t;    /* the begin of the layer or zeroing now running */
    Span *s;
    size_t n, cap;
    double origin;    /* the first profiled step's start: ts 0 */
    /* the table: sums over the profiled steps */
    double *fwd, *bwd;         /* [nlayer] seconds */
    double phase[PROF_NPHASES];
    double step_total;
    int steps;
    double *gf, *gb;           /* GPU: [2 * nlayer] event times of one step (ms) */
    double *gn;                /* GPU: [2 * buckets] the NCCL buckets' event times (ms) */
};

static void add(Profiler *p, int kind, int idx, int tid, long step, double t0, double t1) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 1024;
        p->s = xrealloc(p->s, p->cap * sizeof *p->s);
    }
    p->s[p->n++] = (Span){t0, t1, step, kind, idx, tid};
}

static void on_layer(void *ctx, int layer, int dir, int end) {
    Profiler *p = ctx;
    const double t = now_seconds();
    if (!end) {
        p->open_t = t;
        return;
    }
    long step = p->first + p->steps;
    if (layer < 0)
        add(p, K_PHASE, layer == -1 ? PROF_ZERO : PROF_LAUNCH, TID_HOST, step, p->open_t, t);
    else
        add(p, dir ? K_LAYER_BWD : K_LAYER_FWD, layer, TID_HOST, step, p->open_t, t);
}

Profiler *profile_open(Run *r, Net *net, Trainer *tr, long step0) {
    const Config *c = &r->cfg;
    if (!c->profile) return NULL;
    long k = c->profile_count, first;
    if (c->profile_first > 0) {
        first = c->profile_first - 1;
        if (first < step0 || first + k > r->nstep)
            die_code(EXIT_USAGE, "--profile_steps=%ld:%ld: steps %ld to %ld are not all in this run (steps %ld to %ld)",
                     c->profile_first, k, c->profile_first, c->profile_first + k - 1, step0 + 1, r->nstep);
    } else { /* after the burn-in, or the run's last steps */
        if (k > r->nstep - step0) k = r->nstep - step0;
        first = step0 + c->nstep_burnin; /* the burn-in: the first steps of this run (as Images/sec) */
        if (first + k > r->nstep) first = r->nstep - k;
    }
    if (k < 1) return NULL;
    Profiler *p = xcalloc(1, sizeof *p);
    p->r = r;
    p->net = net;
    p->tr = tr;
    p->first = first;
    p->last = first + k - 1;
    p->fwd = xcalloc((size_t)net->nlayer, sizeof *p->fwd);
    p->bwd = xcalloc((size_t)net->nlayer, sizeof *p->bwd);
    if (tr->gpu) {
        p->gf = xmalloc(2 * (size_t)net->nlayer * sizeof *p->gf);
        p->gb = xmalloc(2 * (size_t)net->nlayer * sizeof *p->gb);
        p->gn = xmalloc(2 * ((size_t)gpunet_nccl_buckets(tr->gpu) + 1) * sizeof *p->gn);
    }
    tr->prof = p;
    printf("Profile:     steps %ld to %ld into %s%s (--profile)\n", first + 1, first + k, c->profile,
           r->dist.size > 1 ? ".rankN" : "");
    return p;
}

void profile_step_begin(Profiler *p, long step) {
    if (!p || step < p->first || step > p->last) return;
    p->on = 1;
    if (p->tr->gpu) {
        gpunet_profile(p->tr->gpu, 1);
    } else {
        p->net->on_layer = on_layer;
        p->net->on_layer_ctx = p;
    }
}

void profile_span(Profiler *p, ProfPhase phase, double t0, double t1) {
    if (!p || !p->on) return;
    add(p, K_PHASE, (int)phase, TID_HOST, p->first + p->steps, t0, t1);
}

/* The enclosing span of the step's spans of `kind` on `tid` (from index from), as a span of
 * kind `as`; also from the zeroing (PROF_ZERO) for backward. */
static void enclose(Profiler *p, size_t from, int kind, int tid, int as, long step) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = from; i < p->n; i++) {
        const Span *s = &p->s[i];
        if (s->tid != tid || !(s->kind == kind || (as == K_BACKWARD && s->kind == K_PHASE && s->idx == PROF_ZERO))) continue;
        if (s->t0 < lo) lo = s->t0;
        if (s->t1 > hi) hi = s->t1;
    }
    if (lo <= hi) add(p, as, 0, tid, step, lo, hi);
}

static void write_trace(Profiler *p);

int profile_waits(const Profiler *p, long step) { return p && p->tr->gpu && step >= p->first - 1 && step <= p->last; }

void profile_step_end(Profiler *p, long step, double t0, double t1) {
    if (!p || !p->on || step != p->first + p->steps) return;
    p->on = 0;
    p->net->on_layer = NULL;
    p->net->on_layer_ctx = NULL;
    const int nl = p->net->nlayer;
    size_t from = p->n;
    while (from > 0 && p->s[from - 1].step == step) from--;
    if (p->steps == 0) p->origin = t0;
    if (p->tr->gpu) { /* the layers' CUDA events, on the host's clock at the step's first event */
        double host0;
        gpunet_profile(p->tr->gpu, 0);
        if (gpunet_profile_times(p->tr->gpu, &host0, p->gf, p->gb)) {
            for (int i = 0; i < nl; i++) {
                const double *f = p->gf + 2 * i, *b = p->gb + 2 * i;
                if (isfinite(f[0])) add(p, K_LAYER_FWD, i, TID_GPU, step, host0 + f[0] * 1e-3, host0 + f[1] * 1e-3);
                if (isfinite(b[0])) add(p, K_LAYER_BWD, i, TID_GPU, step, host0 + b[0] * 1e-3, host0 + b[1] * 1e-3);
            }
            const int nb = gpunet_profile_buckets(p->tr->gpu, p->gn);
            for (int i = 0; i < nb; i++) add(p, K_BUCKET, i, TID_BUCKETS, step, host0 + p->gn[2 * i] * 1e-3, host0 + p->gn[2 * i + 1] * 1e-3);
        }
    }
    /* the gradient buckets' allreduces (CPU backend, several ranks) */
    double b0, b1;
    for (int i = 0; p->tr->sync && gradsync_bucket_times(p->tr->sync, i, &b0, &b1); i++) add(p, K_BUCKET, i, TID_BUCKETS, step, b0, b1);
    const int tids[2] = {TID_HOST, TID_GPU};
    for (int k = 0; k < 2; k++) {
        enclose(p, from, K_LAYER_FWD, tids[k], K_FORWARD, step);
        enclose(p, from, K_LAYER_BWD, tids[k], K_BACKWARD, step);
    }
    if (p->tr->gpu) { /* the step on the GPU's track: its first to its last event */
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = from; i < p->n; i++)
            if (p->s[i].tid == TID_GPU) lo = fmin(lo, p->s[i].t0), hi = fmax(hi, p->s[i].t1);
        if (lo <= hi) add(p, K_STEP, 0, TID_GPU, step, lo, hi);
    }
    add(p, K_STEP, 0, TID_HOST, step, t0, t1);
    /* the table's sums: the layers on the track they ran on */
    const int lt = p->tr->gpu ? TID_GPU : TID_HOST;
    for (size_t i = from; i < p->n; i++) {
        const Span *s = &p->s[i];
        const double d = s->t1 - s->t0;
        if (s->kind == K_LAYER_FWD && s->tid == lt) p->fwd[s->idx] += d;
        if (s->kind == K_LAYER_BWD && s->tid == lt) p->bwd[s->idx] += d;
        if (s->kind == K_PHASE) p->phase[s->idx] += d;
    }
    p->step_total += t1 - t0;
    p->steps++;
    if (step == p->last) write_trace(p);
}

/* ---- the file ---- */
static const char *shape_text(const Net *net, int li, char *buf, size_t n) {
    const Shape s = net->node[net->layer[li].out].shape;
    if (s.h == 1 && s.w == 1)
        snprintf(buf, n, "%dx%d", s.n, s.c);
    else
        snprintf(buf, n, "%dx%dx%dx%d", s.n, s.c, s.h, s.w);
    return buf;
}

static int by_track_then_start(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->tid != y->tid) return x->tid - y->tid;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) return x->t1 > y->t1 ? -1 : 1; /* the enclosing one first */
    return x->kind - y->kind;
}

static void event(FILE *f, const Profiler *p, const Span *s, char ph, double t, int *first) {
    char name[96], args[160] = "";
    const Net *net = p->net;
    switch (s->kind) {
    case K_STEP: snprintf(name, sizeof name, "step %ld", s->step + 1); break;
    case K_FORWARD: snprintf(name, sizeof name, "forward"); break;
    case K_BACKWARD: snprintf(name, sizeof name, "backward"); break;
    case K_PHASE: snprintf(name, sizeof name, "%s", phase_name[s->idx]); break;
    case K_BUCKET:
        snprintf(name, sizeof name, "allreduce bucket %d", s->idx + 1);
        break;
    default: {
        char shape[64];
        const Layer *l = &net->layer[s->idx];
        snprintf(name, sizeof name, "%s", l->name);
        snprintf(args, sizeof args, ",\"args\":{\"type\":\"%s\",\"shape\":\"%s\",\"layer\":%d,\"direction\":\"%s\"}", l->ops->type,
                 shape_text(net, s->idx, shape, sizeof shape), s->idx, s->kind == K_LAYER_FWD ? "forward" : "backward");
    }
    }
    static const char *const cat[] = {"step", "phase", "phase", "forward", "backward", "phase", "allreduce"};
    fprintf(f, "%s\n{\"ph\":\"%c\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}", *first ? "" : ",", ph, name,
            cat[s->kind], p->r->dist.rank, s->tid, (t - p->origin) * 1e6, ph == 'B' ? args : "");
    *first = 0;
}

/* This rank's trace file: FILE, or FILE.rankN with several ranks. */
static void trace_path(const Run *r, char *path, size_t n) {
    if (r->dist.size > 1)
        snprintf(path, n, "%s.rank%d", r->cfg.profile, r->dist.rank);
    else
        snprintf(path, n, "%s", r->cfg.profile);
}

static void write_trace(Profiler *p) {
    const Run *r = p->r;
    const Config *c = &r->cfg;
    char path[4200], tmp[4300];
    trace_path(r, path, sizeof path);
    /* written beside it under a temporary name and renamed into place: a write that fails (a full
     * disk, a file size limit) leaves an earlier file of that name as it was, and a symbolic link
     * of that name is replaced, not written through */
    FILE *f = tmp_path_beside(path, tmp, sizeof tmp) == 0 ? fopen(tmp, "w") : NULL;
    if (!f) {
        snprintf(p->why, sizeof p->why, "cannot write %s: %s", path, strerror(errno));
        p->written = p->failed = 1;
        return;
    }
    qsort(p->s, p->n, sizeof *p->s, by_track_then_start);
    const int emu = r->gpu && gpunet_emulated();
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"program\":\"nvcnn\",\"model\":\"%s\",\"batch_size\":%d,\"image_size\":%d,"
               "\"rank\":%d,\"ranks\":%d,\"steps\":\"%ld-%ld\",\"device\":\"%s\",\"cpu_layers\":\"%s\",\"clock\":\"%s\"},\n"
               "\"traceEvents\":[",
            r->model->name, c->batch_size, r->image_size, r->dist.rank, r->dist.size, p->first + 1, p->last + 1,
            r->gpu ? (emu ? "gpu (emulated)" : "gpu") : "cpu", r->gpu ? "" : r->cpu_layers,
            !r->gpu ? "host wall clock (CLOCK_MONOTONIC) around each layer"
            : emu   ? "host wall clock; the GPU track's layers by CUDA events of the EMULATED device: their times are the "
                      "emulator's, not a GPU's"
                    : "host wall clock; the GPU track's layers by CUDA events on the compute stream, placed at the step's first event");
    int first = 1;
    const char *tname[4] = {"", "host", r->gpu ? (emu ? "allreduce (NCCL buckets, emulated)" : "allreduce (NCCL buckets)") : "allreduce (MPI buckets)",
                            emu ? "GPU compute stream (emulated)" : "GPU compute stream"};
    for (int t = 1; t <= 3; t++) {
        size_t i = 0;
        while (i < p->n && p->s[i].tid != t) i++;
        if (i == p->n) continue; /* a track without events */
        fprintf(f, "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", first ? "" : ",",
                r->dist.rank, t, tname[t]);
        first = 0;
    }
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"nvcnn rank %d\"}}", r->dist.rank,
            r->dist.rank);
    /* begin/end pairs: a stack of the spans open on the current track */
    const Span **open = xmalloc((p->n + 1) * sizeof *open);
    int depth = 0;
    for (size_t i = 0; i <= p->n; i++) {
        const Span *s = i < p->n ? &p->s[i] : NULL;
        while (depth > 0 && (!s || s->tid != open[depth - 1]->tid || open[depth - 1]->t1 <= s->t0)) {
            const Span *e = open[--depth];
            event(f, p, e, 'E', e->t1, &first);
        }
        if (!s) break;
        /* a span that overlaps the one open without ending inside it would break the nesting:
         * clip it to its parent (clock granularity; the host's spans nest by construction) */
        Span *m = &p->s[i];
        if (depth > 0 && m->t1 > open[depth - 1]->t1) m->t1 = open[depth - 1]->t1;
        event(f, p, m, 'B', m->t0, &first);
        open[depth++] = m;
    }
    free(open);
    fprintf(f, "\n]}\n");
    const int bad = ferror(f);
    errno = 0;
    if ((fclose(f) != 0 || bad) && !p->failed) {
        snprintf(p->why, sizeof p->why, "writing %s failed: %s", path, errno ? strerror(errno) : "an I/O error");
        p->failed = 1;
    }
    if (p->failed)
        unlink(tmp);
    else if (rename(tmp, path) != 0) {
        snprintf(p->why, sizeof p->why, "cannot write %s: %s", path, strerror(errno));
        p->failed = 1;
        unlink(tmp);
    }
    p->written = 1;
}

/* ---- the table ---- */
static const double *sort_time; /* qsort's key: layers by time, the longest first */
static int by_time_desc(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return sort_time[y] > sort_time[x] ? 1 : sort_time[y] < sort_time[x] ? -1 : x - y;
}

int profile_close(Profiler *p) {
    if (!p) return 0;
    p->tr->prof = NULL;
    p->net->on_layer = NULL;
    if (p->steps > 0 && !p->written) write_trace(p);
    if (p->steps == 0 && p->r->dist.rank == 0) /* a stop signal before them */
        warn("--profile=%s%s: the run stopped before step %ld, the first of --profile_steps: no profile written", p->r->cfg.profile,
             p->r->dist.size > 1 ? ".rankN" : "",
             p->first + 1);
    const Net *net = p->net;
    const int nl = net->nlayer;
    if (p->steps > 0 && p->r->dist.rank == 0) {
        const double per = 1e3 / p->steps, step = p->step_total * per; /* ms per step */
        double *tot = xmalloc((size_t)nl * sizeof *tot), layers = 0;
        int *order = xmalloc((size_t)nl * sizeof *order);
        for (int i = 0; i < nl; i++) {
            tot[i] = (p->fwd[i] + p->bwd[i]) * per;
            order[i] = i;
            layers += tot[i];
        }
        sort_time = tot;
        qsort(order, (size_t)nl, sizeof *order, by_time_desc);
        printf("Profile of steps %ld to %ld (%s, %.1f ms a step%s): %s%s%s\n", p->first + 1, p->first + p->steps,
               p->r->gpu ? (gpunet_emulated() ? "GPU layers by the emulated device's events" : "GPU layers by CUDA events")
                         : "wall clock per layer",
               step, p->r->gpu ? " on the host" : "", p->failed ? "its trace not written (below): " : "", p->r->cfg.profile,
               p->r->dist.size > 1 ? ".rankN" : "");
        printf("  %-18s %-12s %-18s %10s %10s %7s\n", "layer", "type", "output", "fwd ms", "bwd ms", "step %");
        for (int k = 0; k < nl && k < 10; k++) {
            const int i = order[k];
            char shape[64];
            printf("  %-18s %-12s %-18s %10.3f %10.3f %6.1f%%\n", net->layer[i].name, net->layer[i].ops->type,
                   shape_text(net, i, shape, sizeof shape), p->fwd[i] * per, p->bwd[i] * per, step > 0 ? 100 * tot[i] / step : 0);
        }
        /* by type, the longest first: each type's total on its first layer (in the order above) */
        double *ttot = xcalloc((size_t)nl, sizeof *ttot);
        int *types = xmalloc((size_t)nl * sizeof *types), nt = 0;
        for (int i = 0; i < nl; i++) {
            int j = 0;
            while (j < i && strcmp(net->layer[j].ops->type, net->layer[i].ops->type) != 0) j++;
            if (j == i) types[nt++] = i;
            ttot[j] += tot[i];
        }
        sort_time = ttot;
        qsort(types, (size_t)nt, sizeof *types, by_time_desc);
        char line[1024];
        int off = snprintf(line, sizeof line, "  by type:");
        for (int k = 0; k < nt && off < (int)sizeof line; k++)
            off += snprintf(line + off, sizeof line - (size_t)off, "%s %s %.1f%%", k ? "," : "", net->layer[types[k]].ops->type,
                            step > 0 ? 100 * ttot[types[k]] / step : 0);
        free(ttot);
        free(types);
        printf("%s\n", line);
        double other = step - layers;
        off = snprintf(line, sizeof line, "  not in any layer: %.3f ms a step (%.1f%%)", other, step > 0 ? 100 * other / step : 0);
        if (!p->r->gpu) {
            const char *sep = ":";
            for (int k = 0; k < PROF_NPHASES; k++) {
                const double t = p->phase[k] * per;
                if (t <= 0 || off >= (int)sizeof line) continue;
                off += snprintf(line + off, sizeof line - (size_t)off, "%s %s %.3f", sep, phase_name[k], t);
                sep = ",";
                other -= t;
            }
            if (off < (int)sizeof line) snprintf(line + off, sizeof line - (size_t)off, ", the rest %.3f", other);
        }
        printf("%s\n", line);
        free(tot);
        free(order);
    }
    free(p->s);
    free(p->fwd);
    free(p->bwd);
    free(p->gf);
    free(p->gb);
    free(p->gn);
    int rc = 0;
    if (p->failed) {
        error_line("--profile=%s: %s: the profile is lost", p->r->cfg.profile, p->why);
        rc = EXIT_FAILURE_GENERIC;
    }
    free(p);
    return rc;
}

void profile_check_path(const Run *r, int before_log_dir) {
    if (!r->cfg.profile) return;
    char path[4200];
    trace_path(r, path, sizeof path);
    lifecycle_check_output(&r->cfg, "profile", path, before_log_dir, "the trace");
}
