/* events.c: see events.h. */
#define _GNU_SOURCE
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "io/proto/event.pb-c.h"
#include "io/tfrecord.h"
#include "util.h"

/* One of the two files, appended to whole records at a time: a write that fails part-way (a full
 * disk) is cut back to the last whole record, so that what is written later (once there is room)
 * follows whole rows and records, and the records lost are counted and said. */
typedef struct LogFile {
    int fd;
    off_t good;       /* the length of the whole records written */
    long lost;        /* records that could not be written */
    long lost_from;   /* the step of the first of them (-1: none) */
    int failing;      /* the last write failed (its warning said) */
    char err[128];    /* why the first one failed */
    const char *what; /* "rows", "events" */
    char path[4300];
} LogFile;

struct EventLog {
    LogFile ev, csv;
    char path[4096];
};

/* Opens path for appending; refuses what is not a regular file (opening a FIFO would block the
 * run). -1 with errno set on failure (EISDIR for a folder, EINVAL for another special file). */
static int log_open(LogFile *f, const char *path, const char *what) {
    snprintf(f->path, sizeof f->path, "%s", path);
    f->what = what;
    f->lost_from = -1;
    f->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (f->fd < 0) return -1;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        close(f->fd);
        f->fd = -1;
        errno = e;
        return -1;
    }
    f->good = st.st_size;
    return 0;
}

static void log_append(LogFile *f, const void *buf, size_t n, int64_t step) {
    const char *p = buf;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(f->fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (done == n) {
        f->good += (off_t)n;
        if (f->failing) printf("%s: written again from step %lld\n", f->path, (long long)step);
        f->failing = 0;
        return;
    }
    const int e = done < n && errno ? errno : ENOSPC;
    if (ftruncate(f->fd, f->good) != 0) { /* not even that: whatever it holds past here is torn */
    }
    if (!f->lost) snprintf(f->err, sizeof f->err, "%s", strerror(e));
    if (f->lost_from < 0) f->lost_from = step;
    f->lost++;
    if (!f->failing)
        warn("cannot write %s: %s (its %s from step %lld on are lost until it can be written again)", f->path, strerror(e), f->what,
             (long long)step);
    f->failing = 1;
}

static void log_close(LogFile *f) {
    if (f->fd < 0) return;
    if (f->lost)
        warn("%s lacks %ld of this run's %s, from step %ld on (%s)", f->path, f->lost, f->what, f->lost_from, f->err);
    close(f->fd);
}

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
    log_append(&e->ev, rec, n, ev->step);
    free(rec);
}

/* metrics.csv's rows past step0, which a run that ended without a checkpoint there wrote before
 * this one resumed from an earlier checkpoint: removed, so the history reads on from step0 as
 * TensorBoard shows it. Where they are the file's tail (rows are appended in step order), the file
 * is cut there (truncate: no room needed, as on the full disk that may have ended that run); else it
 * is rewritten under a temporary name and renamed over it. The number of rows removed, or -1 where
 * the file could not be changed (it is left as it was). */
static long trim_csv(const char *csv, long step0) {
    FILE *f = fopen(csv, "r");
    if (!f) return 0;
    char *line = NULL, *keep = NULL;
    size_t cap = 0, nkeep = 0, cap_keep = 0;
    long removed = 0;
    off_t at = 0, cut = -1; /* the offset of the first row removed */
    int tail = 1;           /* every row after it is removed too */
    ssize_t n;
    for (int first = 1; (n = getline(&line, &cap, f)) > 0; first = 0, at += n) {
        char *end;
        const long step = strtol(line, &end, 10);
        if (!first && end != line && *end == ',' && step > step0) {
            if (cut < 0) cut = at;
            removed++;
            continue;
        }
        if (cut >= 0) tail = 0;
        if (nkeep + (size_t)n + 1 > cap_keep) {
            cap_keep = 2 * (nkeep + (size_t)n + 1);
            keep = xrealloc(keep, cap_keep);
        }
        memcpy(keep + nkeep, line, (size_t)n);
        nkeep += (size_t)n;
    }
    free(line);
    fclose(f);
    if (removed && tail) {
        if (truncate(csv, cut) != 0) removed = -1;
    } else if (removed) {
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

/* A last line without its newline (a row torn by a full disk before writes were whole, a copy cut
 * short): removed, so that the rows written next do not run on from it. The bytes removed. */
static long cut_torn_tail(const char *csv) {
    FILE *f = fopen(csv, "r");
    if (!f) return 0;
    long keep = 0, size = 0;
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        size++;
        if (c == '\n') keep = size;
        last = c;
    }
    fclose(f);
    if (last == '\n' || truncate(csv, keep) != 0) return 0;
    return size - keep;
}

EventLog *events_open(const char *dir, long step0, char *err, size_t errlen) {
    EventLog *e = xcalloc(1, sizeof *e);
    e->ev.fd = e->csv.fd = -1;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(e->path, sizeof e->path, "%s/events.out.tfevents.%ld.%s", dir, (long)time(NULL), host);
    char csv[4200];
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    struct stat st;
    const int fresh = stat(csv, &st) != 0;
    const char *bad = NULL;
    if (!fresh && !S_ISREG(st.st_mode)) { /* read for its rows below: a FIFO would block the run */
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        bad = csv;
    } else if (log_open(&e->ev, e->path, "events") != 0) {
        bad = e->path;
    } else {
        const long torn = fresh ? 0 : cut_torn_tail(csv);
        if (torn > 0) warn("%s: its last line was cut short (%ld bytes without a newline): removed", csv, torn);
        const long trimmed = fresh ? 0 : trim_csv(csv, step0);
        if (trimmed > 0)
            printf("%s: %ld row%s past step %ld removed (written by a run that ended without a checkpoint there)\n", csv, trimmed,
                   trimmed == 1 ? "" : "s", step0);
        else if (trimmed < 0)
            warn("%s: cannot remove its rows past step %ld (a run that ended without a checkpoint there): %s", csv, step0,
                 strerror(errno));
        if (log_open(&e->csv, csv, "rows") != 0) bad = csv;
    }
    if (bad) {
        const int code = errno;
        snprintf(err, errlen, "cannot write %s: %s", bad, code == EINVAL ? "not a regular file" : strerror(code));
        if (e->ev.fd >= 0) {
            close(e->ev.fd);
            if (e->ev.good == 0) unlink(e->path); /* made just now, empty */
        }
        free(e);
        errno = code;
        return NULL;
    }
    if (e->csv.good == 0) { /* new, or left empty (a header that a full disk did not let through) */
        static const char head[] = "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n";
        log_append(&e->csv, head, sizeof head - 1, step0 + 1);
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    uint8_t *version;
    const size_t nv = frame_event(&ev, &version);
    log_append(&e->ev, version, nv, step0 + 1); /* (said as the run's first step, should it fail) */
    free(version);
    /* this run's start, at its first step: TensorBoard drops what earlier runs wrote from there on */
    uint8_t *rec;
    size_t n = events_encode_start(wall_time(), step0 + 1, &rec);
    log_append(&e->ev, rec, n, step0 + 1);
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
    char row[512];
    size_t n = (size_t)snprintf(row, sizeof row, "%" PRId64 ",", step);
    if (!isnan(epoch)) n += (size_t)snprintf(row + n, sizeof row - n, "%.6f", epoch);
    for (int i = 0; i < 7; i++)
        n += (size_t)(isnan(vals[i]) ? snprintf(row + n, sizeof row - n, ",") : snprintf(row + n, sizeof row - n, ",%.6g", vals[i]));
    n += (size_t)snprintf(row + n, sizeof row - n, "\n");
    log_append(&e->csv, row, n, step); /* one write: a row is whole or absent */
}

void events_close(EventLog *e) {
    if (!e) return;
    const int empty = e->ev.good == 0; /* not even its first record written (a full disk): no file left */
    log_close(&e->ev);
    if (empty) unlink(e->path);
    log_close(&e->csv);
    free(e);
}
