/* events.c: see events.h. */
#define _GNU_SOURCE
#include "events.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "io/proto/event.pb-c.h"
#include "io/tfrecord.h"
#include "util.h"

struct EventLog {
    FILE *ev, *csv;
    char path[4096];
};

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* The framed record of an Event, in *out (free()). */
static size_t frame_event(const Tensorboard__Event *ev, uint8_t **out) {
    size_t n = tensorboard__event__get_packed_size(ev);
    uint8_t *msg = xmalloc(n ? n : 1);
    *out = xmalloc(n + 16);
    tensorboard__event__pack(ev, msg);
    tfr_frame(msg, n, *out);
    free(msg);
    return n + 16;
}

static void write_event(EventLog *e, const Tensorboard__Event *ev) {
    uint8_t *rec;
    size_t n = frame_event(ev, &rec);
    if (fwrite(rec, 1, n, e->ev) != n || fflush(e->ev) != 0) warn("cannot write %s: %s", e->path, strerror(errno));
    free(rec);
}

/* metrics.csv's rows past step0, which a run that ended without a checkpoint there wrote before
 * this one resumed from an earlier checkpoint: removed (the file rewritten under a temporary name
 * and renamed over it), so the history reads on from step0 as TensorBoard shows it. The number of
 * rows removed, or -1 where the file could not be rewritten (it is left as it was). */
static long trim_csv(const char *csv, long step0) {
    FILE *f = fopen(csv, "r");
    if (!f) return 0;
    char *line = NULL, *keep = NULL;
    size_t cap = 0, nkeep = 0, cap_keep = 0;
    long removed = 0;
    ssize_t n;
    for (int first = 1; (n = getline(&line, &cap, f)) > 0; first = 0) {
        char *end;
        const long step = strtol(line, &end, 10);
        if (!first && end != line && *end == ',' && step > step0) {
            removed++;
            continue;
        }
        if (nkeep + (size_t)n + 1 > cap_keep) {
            cap_keep = 2 * (nkeep + (size_t)n + 1);
            keep = xrealloc(keep, cap_keep);
        }
        memcpy(keep + nkeep, line, (size_t)n);
        nkeep += (size_t)n;
    }
    free(line);
    fclose(f);
    if (removed) {
        char tmp[4300];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", csv, (int)getpid());
        FILE *o = fopen(tmp, "w");
        int ok = o && fwrite(keep, 1, nkeep, o) == nkeep;
        if (o && fclose(o) != 0) ok = 0;
        if (!ok || rename(tmp, csv) != 0) {
            unlink(tmp);
            removed = -1;
        }
    }
    free(keep);
    return removed;
}

EventLog *events_open(const char *dir, long step0, char *err, size_t errlen) {
    EventLog *e = xcalloc(1, sizeof *e);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(e->path, sizeof e->path, "%s/events.out.tfevents.%ld.%s", dir, (long)time(NULL), host);
    e->ev = fopen(e->path, "ab");
    char csv[4200];
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    int fresh = access(csv, F_OK) != 0;
    const long trimmed = fresh || !e->ev || step0 < 0 ? 0 : trim_csv(csv, step0);
    if (trimmed > 0)
        printf("%s: %ld row%s past step %ld removed (written by a run that ended without a checkpoint there)\n", csv,
               trimmed, trimmed == 1 ? "" : "s", step0);
    else if (trimmed < 0)
        warn("%s: cannot remove its rows past step %ld (a run that ended without a checkpoint there): %s", csv, step0,
             strerror(errno));
    e->csv = e->ev ? fopen(csv, "a") : NULL;
    if (!e->ev || !e->csv) {
        snprintf(err, errlen, "cannot write logs in %s: %s", dir, strerror(errno));
        if (e->ev) fclose(e->ev);
        free(e);
        return NULL;
    }
    if (fresh) fprintf(e->csv, "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n");
    fflush(e->csv);
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    write_event(e, &ev);
    /* this run's start, at its first step: TensorBoard drops what earlier runs wrote from there on */
    if (step0 < 0) return e;
    uint8_t *rec;
    size_t n = events_encode_start(wall_time(), step0 + 1, &rec);
    if (fwrite(rec, 1, n, e->ev) != n || fflush(e->ev) != 0) warn("cannot write %s: %s", e->path, strerror(errno));
    free(rec);
    return e;
}

const char *events_path(const EventLog *e) { return e->path; }

size_t events_encode_start(double wall, int64_t step, uint8_t **out) {
    Tensorboard__SessionLog start = TENSORBOARD__SESSION_LOG__INIT;
    start.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
    ev.session_log = &start;
    return frame_event(&ev, out);
}

/* Builds the Event of the scalars (NAN left out): written to `e`, or framed into *out. */
static size_t with_scalar_event(double wall, int64_t step, const char *const *tags, const double *vals, int n,
                                EventLog *e, uint8_t **out) {
    Tensorboard__SummaryValue *v = xcalloc((size_t)(n > 0 ? n : 1), sizeof *v);
    Tensorboard__SummaryValue **vp = xcalloc((size_t)(n > 0 ? n : 1), sizeof *vp);
    size_t nv = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(vals[i])) continue;
        tensorboard__summary_value__init(&v[nv]);
        v[nv].tag = (char *)tags[i];
        v[nv].value_case = TENSORBOARD__SUMMARY_VALUE__VALUE_SIMPLE_VALUE; /* present even when 0 */
        v[nv].simple_value = (float)vals[i];
        vp[nv] = &v[nv];
        nv++;
    }
    Tensorboard__Summary s = TENSORBOARD__SUMMARY__INIT;
    s.n_value = nv;
    s.value = vp;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &s;
    size_t len = 0;
    if (e)
        write_event(e, &ev);
    else
        len = frame_event(&ev, out);
    free(vp);
    free(v);
    return len;
}

void events_scalars(EventLog *e, int64_t step, const char *const *tags, const double *vals, int n) {
    if (e) with_scalar_event(wall_time(), step, tags, vals, n, e, NULL);
}

size_t events_encode(double wall, int64_t step, const char *const *tags, const double *vals, int n, uint8_t **out) {
    return with_scalar_event(wall, step, tags, vals, n, NULL, out);
}

void events_csv(EventLog *e, int64_t step, double epoch, double loss, double lr, double img_per_sec, double top1,
                double top5, double eval_top1, double eval_top5) {
    if (!e) return;
    const double vals[] = {loss, lr, img_per_sec, top1, top5, eval_top1, eval_top5};
    fprintf(e->csv, "%" PRId64 ",", step);
    if (!isnan(epoch)) fprintf(e->csv, "%.6f", epoch);
    for (int i = 0; i < 7; i++) {
        if (isnan(vals[i]))
            fputs(",", e->csv);
        else
            fprintf(e->csv, ",%.6g", vals[i]);
    }
    fputc('\n', e->csv);
    fflush(e->csv);
}

void events_close(EventLog *e) {
    if (!e) return;
    fclose(e->ev);
    fclose(e->csv);
    free(e);
}
