/* test_events.c: TensorBoard event files. The encoding of scalar events is compared byte for byte
 * with records written by TensorBoard's own writer (data/fixtures/tb-scalars.*, made once by
 * scripts/make_fixtures_events.py, which also recorded what TensorBoard's EventAccumulator reads
 * back: every scalar, zeros included); runs of ./nvcnn must log every scalar under nvcnn.py's tags
 * at the steps --summary_interval asks for, zeros included. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "events.h"
#include "harness.h"
#include "io/proto/event.pb-c.h"
#include "io/tfrecord.h"
#include "testutil.h"

enum { MAXV = 16, MAXE = 64 };
typedef struct Ev {
    double wall;
    long step;
    int n;
    char tag[MAXV][64];
    double val[MAXV];
    int present[MAXV]; /* value_case set */
} Ev;

/* The summaries of an event file (the file_version record skipped). Returns the count. */
static int read_events(const char *path, Ev *ev, int max) {
    char e[256];
    TfrReader *r = tfr_open(path, 0, e, sizeof e);
    CHECK_MSG(r != NULL, "%s: %s", path, e);
    if (!r) return 0;
    int n = 0;
    TfrRecord rec;
    while (tfr_next(r, &rec) == 1 && n < max) {
        Tensorboard__Event *m = tensorboard__event__unpack(NULL, rec.len, rec.data);
        CHECK(m != NULL);
        if (!m) break;
        if (m->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY) {
            Ev *x = &ev[n++];
            memset(x, 0, sizeof *x);
            x->wall = m->wall_time;
            x->step = (long)m->step;
            for (size_t i = 0; i < m->summary->n_value && x->n < MAXV; i++, x->n++) {
                snprintf(x->tag[x->n], sizeof x->tag[0], "%s", m->summary->value[i]->tag);
                x->present[x->n] = m->summary->value[i]->value_case == TENSORBOARD__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
                x->val[x->n] = m->summary->value[i]->simple_value;
            }
        }
        tensorboard__event__free_unpacked(m, NULL);
    }
    tfr_close(r);
    return n;
}

static const Ev *at_step(const Ev *ev, int n, long step) {
    for (int i = 0; i < n; i++)
        if (ev[i].step == step) return &ev[i];
    return NULL;
}

static int find_tag(const Ev *e, const char *tag) {
    for (int i = 0; e && i < e->n; i++)
        if (strcmp(e->tag[i], tag) == 0) return i;
    return -1;
}

TEST(events_encoding_matches_tensorboards_writer) {
    size_t flen = 0;
    uint8_t *file = tu_read_file("data/fixtures/tb-scalars.tfevents", &flen);
    char *exp = (char *)tu_read_file("data/fixtures/tb-scalars.expected", NULL);
    CHECK_MSG(file && exp, "data/fixtures/tb-scalars.* missing");
    if (!file || !exp) return;
    size_t off = 0;
    int events = 0, zeros = 0;
    char *save = NULL;
    for (char *line = strtok_r(exp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        double wall;
        long step;
        int n;
        CHECK(sscanf(line, "%lf %ld %d", &wall, &step, &n) == 3 && n > 0 && n <= MAXV);
        const char *tags[MAXV];
        double vals[MAXV];
        for (int i = 0; i < n; i++) {
            char *v = strtok_r(NULL, "\n", &save);
            CHECK(v && strchr(v, '\t'));
            if (!v || !strchr(v, '\t')) return;
            vals[i] = atof(v);
            tags[i] = strchr(v, '\t') + 1;
            zeros += vals[i] == 0;
        }
        uint8_t *rec;
        size_t len = events_encode(wall, step, tags, vals, n, &rec);
        CHECK_MSG(off + len <= flen && memcmp(file + off, rec, len) == 0, "event at step %ld differs from TensorBoard's bytes",
                  step);
        free(rec);
        off += len;
        events++;
    }
    CHECK_MSG(off == flen, "%zu of %zu bytes compared", off, flen);
    CHECK(events == 3 && zeros >= 4);
    /* and read back here, every scalar is present */
    Ev ev[4];
    int n = read_events("data/fixtures/tb-scalars.tfevents", ev, 4);
    CHECK(n == 3);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ev[i].n; j++) CHECK_MSG(ev[i].present[j], "step %ld: %s absent", ev[i].step, ev[i].tag[j]);
    free(file);
    free(exp);
}

/* The event file of a log directory (the first). */
static char *event_file(const char *dir) {
    char cmd[800], *name = NULL;
    snprintf(cmd, sizeof cmd, "ls %s/events.out.tfevents.* 2>/dev/null | head -1", dir);
    th_run(cmd, &name);
    if (name) name[strcspn(name, "\n")] = 0;
    return name;
}

static const char *const TAGS[] = {"total loss raw", "total loss avg", "learning rate", "train accuracy top-1 %",
                                   "train accuracy top-5 %", "images/sec"};

/* --summary_interval=0: a summary every step, with every scalar, zeros included; the displayed
 * steps agree with metrics.csv (one rank: the same values). */
TEST(events_every_scalar_of_every_summary_zeros_included) {
    char d[600], cmd[1400], *o = NULL;
    snprintf(d, sizeof d, "%s/ev-every", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=8 --num_batches=30 --display_every=5 "
             "--summary_interval=0 --log_dir=%s",
             d);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, o);
    free(o);
    char *name = event_file(d);
    Ev *ev = calloc(MAXE, sizeof *ev);
    int n = name ? read_events(name, ev, MAXE) : 0;
    CHECK_MSG(n == 30, "%d summaries", n);
    int zeros = 0;
    for (long s = 1; s <= 30; s++) {
        const Ev *e = at_step(ev, n, s);
        CHECK_MSG(e != NULL, "no summary at step %ld", s);
        for (size_t t = 0; e && t < sizeof TAGS / sizeof TAGS[0]; t++) {
            int k = find_tag(e, TAGS[t]);
            CHECK_MSG(k >= 0 && e->present[k], "step %ld: no '%s'", s, TAGS[t]);
            if (k >= 0) zeros += e->val[k] == 0;
        }
    }
    CHECK_MSG(zeros > 0, "no zero-valued scalar in the run (the test needs one)");
    /* metrics.csv rows (steps 1, 5, ..., 30): top-1 and learning rate as in the events */
    char csv[700];
    snprintf(csv, sizeof csv, "%s/metrics.csv", d);
    char *t = (char *)tu_read_file(csv, NULL);
    CHECK(t != NULL);
    int rows = 0;
    for (char *p = t ? strchr(t, '\n') : NULL; p && p[1]; p = strchr(p + 1, '\n')) {
        long step;
        double loss, lr, ips, top1;
        /* epochs_done empty: synthetic data has no epochs */
        if (sscanf(p + 1, "%ld,,%lf,%lf,%lf,%lf", &step, &loss, &lr, &ips, &top1) != 5) continue;
        const Ev *e = at_step(ev, n, step);
        int k1 = find_tag(e, "train accuracy top-1 %"), kl = find_tag(e, "learning rate");
        CHECK_MSG(e && k1 >= 0 && kl >= 0 && fabs(e->val[k1] - top1) < 1e-3 && fabs(e->val[kl] - lr) < 1e-6 * (1 + lr),
                  "step %ld: csv top-1 %g lr %g", step, top1, lr);
        rows++;
    }
    CHECK_MSG(rows == 7, "%d csv rows", rows);
    free(t);
    free(ev);
    free(name);
}

/* nvcnn.py's default: summaries at the first and the last step (and every 3600 s); metrics.csv
 * has the displayed rows (steps 1, 2, 4 and the last). */
TEST(events_default_interval_first_and_last_step) {
    char d[600], cmd[1400], *o = NULL;
    snprintf(d, sizeof d, "%s/logs/nested", th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=8 --num_batches=5 --display_every=2 --log_dir=%s", d);
    CHECK(th_run(cmd, &o) == 0);
    free(o);
    char csv[700];
    snprintf(csv, sizeof csv, "%s/metrics.csv", d);
    char *t = (char *)tu_read_file(csv, NULL);
    CHECK_MSG(t && strncmp(t, "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n", 81) == 0, "%s",
              t ? t : "(no metrics.csv)");
    CHECK(t && strstr(t, "\n1,") && strstr(t, "\n2,") && strstr(t, "\n4,") && strstr(t, "\n5,") && !strstr(t, "\n3,"));
    free(t);
    char *name = event_file(d);
    Ev ev[8];
    int n = name ? read_events(name, ev, 8) : 0;
    CHECK_MSG(n == 2 && ev[0].step == 1 && ev[1].step == 5, "%d summaries", n);
    for (int i = 0; i < n; i++) {
        int k = find_tag(&ev[i], "total loss raw");
        CHECK(ev[i].n == 6 && k >= 0 && ev[i].val[k] > 1 && ev[i].val[k] < 4);
    }
    free(name);
}

/* The validation scalars of a run with --eval_every_epochs (a fraction of an epoch): in the event
 * file at the steps of the console's "Validation at step N" lines and the end-of-run pass, with
 * the values those lines print. 200 images in steps of 20: 10 steps an epoch, an evaluation each
 * 0.25 epoch: after steps 3, 5 and 8 (step 10 ends the run: the usual pass). */
TEST(events_validation_scalars_of_a_run_with_eval_every_epochs) {
    char dir[600], cmd[1600], *o = NULL;
    CHECK(tu_band_set(dir, sizeof dir, "events-eval", 200, 40, 30) == 0);
    snprintf(cmd, sizeof cmd,
             "./nvcnn --model=lenet --device=cpu --num_classes=10 --batch_size=20 --num_epochs=1 --learning_rate=0.05 "
             "--crop_area_min=1 --eval_every_epochs=0.25 --data_dir=%s --log_dir=%s/logs",
             dir, dir);
    int rc = th_run(cmd, &o);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, o);
    snprintf(cmd, sizeof cmd, "%s/logs", dir);
    char *name = event_file(cmd);
    Ev *ev = calloc(MAXE, sizeof *ev);
    int n = name ? read_events(name, ev, MAXE) : 0;
    const long steps[] = {3, 5, 8, 10};
    const char *epochs[] = {"0.30", "0.50", "0.80", ""}; /* "": the end-of-run pass */
    int found = 0;
    for (int s = 0; s < 4; s++) {
        double t1 = -1, t5 = -1;
        char line[128];
        if (epochs[s][0]) {
            snprintf(line, sizeof line, "\nValidation at step %ld (epoch %s): top-1 ", steps[s], epochs[s]);
            const char *l = o ? strstr(o, line) : NULL;
            CHECK_MSG(l && sscanf(l + strlen(line), "%lf %%, top-5 %lf", &t1, &t5) == 2, "no '%s' in\n%s", line + 1, o);
        } else {
            const char *a = o ? strstr(o, "\nValidation Top-1: ") : NULL, *b = o ? strstr(o, "\nValidation Top-5: ") : NULL;
            CHECK_MSG(a && b, "%s", o ? o : "(no output)");
            if (a && b) t1 = atof(a + 18), t5 = atof(b + 18);
        }
        for (int i = 0; i < n; i++) {
            const int k1 = find_tag(&ev[i], "validation accuracy top-1 %"), k5 = find_tag(&ev[i], "validation accuracy top-5 %");
            if (k1 < 0) continue;
            CHECK_MSG(k5 >= 0 && ev[i].present[k1] && ev[i].present[k5], "step %ld", ev[i].step);
            if (ev[i].step != steps[s]) continue;
            found++;
            CHECK_MSG(fabs(ev[i].val[k1] - t1) < 1e-3 && fabs(ev[i].val[k5] - t5) < 1e-3, "step %ld: events %g, %g; console %g, %g",
                      steps[s], ev[i].val[k1], ev[i].val[k5], t1, t5);
        }
    }
    /* one validation summary at each of the four steps, and none elsewhere */
    int all = 0;
    for (int i = 0; i < n; i++) all += find_tag(&ev[i], "validation accuracy top-1 %") >= 0;
    CHECK_MSG(found == 4 && all == 4, "%d of 4 validation summaries at their steps, %d in all (%d summaries)", found, all, n);
    CHECK_MSG(!strstr(o ? o : "", "Validation at step 10"), "%s", o);
    free(ev);
    free(name);
    free(o);
}

/* A run resumed from a checkpoint at step 52 after a run that reached step 60 without one there:
 * its event file starts with TensorBoard's SessionLog START at step 53 (byte for byte what
 * TensorBoard's writer makes: data/fixtures/tb-session-start.tfevents), after which TensorBoard
 * keeps the earlier run's steps below 53 only (data/fixtures/tb-resume.expected, read back by its
 * EventAccumulator from the same two runs); metrics.csv loses the earlier run's rows past 52. */
TEST(events_resumed_run_supersedes_the_steps_after_its_checkpoint) {
    size_t flen, len;
    uint8_t *fix = tu_read_file("data/fixtures/tb-session-start.tfevents", &flen), *mine;
    len = events_encode_start(1700000003.5, 53, &mine);
    CHECK_MSG(fix && flen == len && memcmp(fix, mine, len) == 0, "SessionLog START: %zu bytes, TensorBoard's %zu", len, flen);
    free(fix);
    free(mine);

    char dir[600], csv[700], err[256];
    snprintf(dir, sizeof dir, "%s/resume-log", th_tmpdir());
    mkdir(dir, 0755);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    static const char *const tag[] = {"total loss avg"};
    /* the first run: steps 1 to 60, an evaluation at 40; killed after 60 */
    EventLog *a = events_open(dir, 0, err, sizeof err);
    CHECK_MSG(a != NULL, "%s", err);
    if (!a) return;
    char first[4096];
    snprintf(first, sizeof first, "%s", events_path(a));
    const long sa[] = {1, 20, 40, 53, 60};
    for (int i = 0; i < 5; i++) {
        double v = 10.0 - sa[i] / 10.0;
        events_scalars(a, sa[i], tag, &v, 1);
        events_csv(a, sa[i], NAN, v, 0.1, 100, 10, 50, NAN, NAN);
        if (sa[i] == 40) events_csv(a, 40, NAN, NAN, NAN, NAN, NAN, NAN, 55.5, 90.25);
    }
    events_close(a);
    /* the second: from the checkpoint at 52, in a file of its own (another second's name) */
    char second[4200];
    EventLog *b = events_open(dir, 52, err, sizeof err);
    CHECK_MSG(b != NULL, "%s", err);
    if (!b) return;
    snprintf(second, sizeof second, "%s", events_path(b));
    const long sb[] = {53, 70};
    for (int i = 0; i < 2; i++) {
        double v = 5.0 - sb[i] / 100.0;
        events_scalars(b, sb[i], tag, &v, 1);
        events_csv(b, sb[i], NAN, v, 0.1, 100, 10, 50, NAN, NAN);
    }
    events_close(b);
    size_t clen;
    char *c = (char *)tu_read_file(csv, &clen);
    const char *want = "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n"
                       "1,,9.9,0.1,100,10,50,,\n20,,8,0.1,100,10,50,,\n40,,6,0.1,100,10,50,,\n40,,,,,,,55.5,90.25\n"
                       "53,,4.47,0.1,100,10,50,,\n70,,4.3,0.1,100,10,50,,\n";
    CHECK_MSG(c && clen == strlen(want) && !memcmp(c, want, clen), "metrics.csv:\n%.*s", (int)clen, c ? c : "");
    free(c);

    /* TensorBoard's rule over the files in order: a START at step s drops what was kept at s or later */
    const int same_file = strcmp(first, second) == 0; /* two opens in one second share the name */
    long kept_step[32];
    double kept_val[32];
    int nk = 0, starts = 0;
    for (int f = 0; f < (same_file ? 1 : 2); f++) {
        TfrReader *r = tfr_open(f ? second : first, 0, err, sizeof err);
        CHECK_MSG(r != NULL, "%s", err);
        if (!r) return;
        TfrRecord rec;
        for (int prev = 0; tfr_next(r, &rec) == 1;) {
            Tensorboard__Event *m = tensorboard__event__unpack(NULL, rec.len, rec.data);
            if (!m) break;
            const int was = prev;
            prev = (int)m->what_case;
            if (m->what_case == TENSORBOARD__EVENT__WHAT_SESSION_LOG) { /* right after a run's file_version */
                CHECK_MSG(was == TENSORBOARD__EVENT__WHAT_FILE_VERSION &&
                              m->session_log->status == TENSORBOARD__SESSION_LOG__SESSION_STATUS__START,
                          "a session log after a record of kind %d, status %d", was, (int)m->session_log->status);
                starts++;
                int w = 0;
                for (int i = 0; i < nk; i++)
                    if (kept_step[i] < m->step) {
                        kept_step[w] = kept_step[i];
                        kept_val[w++] = kept_val[i];
                    }
                nk = w;
            } else if (m->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY && nk < 32) {
                kept_step[nk] = (long)m->step;
                kept_val[nk++] = m->summary->value[0]->simple_value;
            }
            tensorboard__event__free_unpacked(m, NULL);
        }
        tfr_close(r);
    }
    CHECK_MSG(starts == 2, "%d SessionLog START records in the two runs' files", starts);
    char got[512] = "";
    for (int i = 0; i < nk; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%ld:%.9g", i ? " " : "", kept_step[i], (double)(float)kept_val[i]);
    strcat(got, "\n");
    char *tb = (char *)tu_read_file("data/fixtures/tb-resume.expected", &clen);
    CHECK_MSG(tb && !strncmp(got, tb, clen) && strlen(got) == clen, "kept %s TensorBoard's %.*s", got, (int)clen, tb ? tb : "");
    free(tb);
}

/* A write that fails part-way (a full disk; here a file size limit, which fails the same way with
 * EFBIG) is cut back to the last whole row or record, counted and said: the rows and events
 * written once there is room again follow whole ones, metrics.csv has no torn row and TensorBoard
 * reads the event file to its end. It used to append behind the partial row or record: one merged
 * 14-field row in metrics.csv, and an event file unreadable from there on (DataLossError). */
TEST(events_a_full_disk_loses_whole_rows_and_records_only) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/events-full", th_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    char out[700];
    snprintf(out, sizeof out, "%s/stderr", dir);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) { /* the child writes the logs under a file size limit for steps 40-59 */
        if (!freopen(out, "a", stderr) || !freopen(out, "a", stdout)) _exit(9);
        setvbuf(stdout, NULL, _IONBF, 0);
        signal(SIGXFSZ, SIG_IGN);
        char err[256];
        EventLog *e = events_open(dir, 0, err, sizeof err);
        if (!e) _exit(8);
        const char *tags[] = {"total loss raw", "learning rate"};
        struct rlimit lim;
        getrlimit(RLIMIT_FSIZE, &lim);
        const struct rlimit was = lim;
        for (int step = 1; step <= 80; step++) {
            if (step == 40 || step == 50) {
                /* steps 40-49: metrics.csv stops growing 7 bytes into a row (the event file, longer,
                 * at once); 50-59: the event file stops 7 bytes into a record */
                struct stat st;
                char csv[700];
                snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
                stat(step == 40 ? csv : events_path(e), &st);
                lim.rlim_cur = (rlim_t)st.st_size + 7;
                setrlimit(RLIMIT_FSIZE, &lim);
            }
            if (step == 60) setrlimit(RLIMIT_FSIZE, &was);
            const double v[] = {1.0 / step, 0.1};
            events_scalars(e, step, tags, v, 2);
            events_csv(e, step, step / 10.0, 1.0 / step, 0.1, 100.0, 50, 90, NAN, NAN);
        }
        events_close(e);
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *said = (char *)tu_read_file(out, NULL);
    CHECK_MSG(said && strstr(said, "metrics.csv: File too large (its rows from step 40 on are lost until it can be written again)\n") &&
                  strstr(said, "/metrics.csv: written again from step 50\n") && strstr(said, ": written again from step 60\n") &&
                  strstr(said, "metrics.csv lacks 10 of this run's rows, from step 40 on (File too large)\n") &&
                  strstr(said, " lacks 20 of this run's events, from step 40 on (File too large)\n"),
              "%s", said ? said : "");
    free(said);
    /* metrics.csv: the header and whole rows, steps 1 to 80 in order with one gap, 60 to 80 there */
    char csv[700];
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    char *m = (char *)tu_read_file(csv, NULL);
    CHECK(m != NULL);
    int rows = 0, gaps = 0, torn = 0;
    long last = 0;
    for (char *line = m ? strchr(m, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) {
        int commas = 0;
        for (const char *c = line + 1; *c && *c != '\n'; c++) commas += *c == ',';
        const long step = atol(line + 1);
        torn += commas != 8;
        gaps += step != last + 1;
        last = step;
        rows++;
    }
    CHECK_MSG(torn == 0 && gaps == 1 && last == 80 && rows == 70, "%d rows, %d torn, %d gaps, last step %ld:\n%s", rows, torn,
              gaps, last, m ? m : "");
    free(m);
    /* the event file: every record whole (read to its end), the last step's there */
    Ev ev[128];
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[1400] = "";
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0) snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (d) closedir(d);
    const int n = path[0] ? read_events(path, ev, 128) : 0;
    int order = n == 60;
    for (int i = 0; i < n && order; i++) order = ev[i].step == (i < 39 ? i + 1 : i + 21);
    CHECK_MSG(order, "%d events, the last at step %ld", n, n ? ev[n - 1].step : -1L);
}

/* A metrics.csv that is not a file: a FIFO (opening it for the rows used to block the run for
 * good, deaf to SIGTERM) or a folder: one line naming it, exit 2, and no empty event file left. */
TEST(events_a_special_metrics_csv_is_refused) {
    char dir[600], cmd[3000], *o = NULL;
    const char *make[] = {"mkfifo", "mkdir"}, *why[] = {"not a regular file", "Is a directory"};
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/special-csv-%d", th_tmpdir(), k);
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && %s %s/metrics.csv && timeout -k 5 60 ./nvcnn --model=lenet --device=cpu --batch_size=2 --num_batches=2 "
                 "--log_dir=%s 2>&1; rc=$?; echo events files: $(ls %s | grep -c events.out); exit $rc",
                 dir, make[k], dir, dir, dir);
        const int rc = th_run(cmd, &o);
        char want[1600];
        snprintf(want, sizeof want, "nvcnn: error: --log_dir=%s: cannot write %s/metrics.csv: %s\n", dir, dir, why[k]);
        CHECK_MSG(rc == 2 && o && strstr(o, want) && strstr(o, "events files: 0"), "%s: exit %d, want '%s':\n%s",
                  make[k], rc, want, o);
        free(o);
    }
}

/* A resumed run removes metrics.csv's rows past its checkpoint by cutting the file where they
 * begin: no room needed, as on the full disk that may have ended the run before it (here a file
 * size limit below the rows kept, under which rewriting the file fails). It used to rewrite the
 * file only, and on a full disk appended its rows after the stale ones: steps ..., 50, 21, 22. */
TEST(events_a_resume_trims_metrics_csv_without_room) {
    char dir[600], csv[700];
    snprintf(dir, sizeof dir, "%s/events-trim", th_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    FILE *f = fopen(csv, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n", f);
    for (int s = 1; s <= 50; s++) fprintf(f, "%d,%.6f,2.3,0.1,100,10,50,,\n", s, s / 10.0);
    fclose(f);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit lim = {500, RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &lim);
        char err[256];
        EventLog *e = events_open(dir, 20, err, sizeof err);
        if (!e) _exit(8);
        events_close(e);
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *m = (char *)tu_read_file(csv, NULL);
    int rows = 0;
    long last = 0;
    for (char *l = m ? strchr(m, '\n') : NULL; l && l[1]; l = strchr(l + 1, '\n')) {
        rows++;
        last = atol(l + 1);
    }
    CHECK_MSG(rows == 20 && last == 20, "%d rows, the last of step %ld:\n%s", rows, last, m ? m : "");
    free(m);
}

/* An empty metrics.csv (its header lost to a full disk when it was made) gets the header before
 * the rows that follow (they came without one, and so did every later run's). */
TEST(events_an_empty_metrics_csv_gets_its_header) {
    char dir[600], csv[700];
    snprintf(dir, sizeof dir, "%s/events-empty-csv", th_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    FILE *f = fopen(csv, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    char err[256];
    EventLog *e = events_open(dir, 5, err, sizeof err);
    CHECK_MSG(e != NULL, "%s", err);
    if (!e) return;
    events_csv(e, 6, NAN, 2.0, 0.1, 10, 0, 0, NAN, NAN);
    events_close(e);
    char *m = (char *)tu_read_file(csv, NULL);
    CHECK_MSG(m && strncmp(m, "step,epochs_done,", 17) == 0 && strstr(m, "\n6,,2,0.1,10,0,0,,\n"), "%s", m ? m : "");
    free(m);
}

/* A metrics.csv whose last line has no newline (a row torn by a full disk before rows were written
 * whole, a copy cut short; a torn header): the torn line is removed, said, and the next rows start
 * on lines of their own (the first one ran on from it: "20,0.0053,...,,21,0.0056,..."). */
TEST(events_a_torn_last_line_of_metrics_csv_is_removed) {
    const char *before[] = {"step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n1,,2,0.1,10,0,0,,\n2,,2",
                            "step,epochs"};
    for (int k = 0; k < 2; k++) {
        char dir[600], csv[700];
        snprintf(dir, sizeof dir, "%s/events-torn-%d", th_tmpdir(), k);
        CHECK(mkdir(dir, 0755) == 0);
        snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
        FILE *f = fopen(csv, "w");
        CHECK(f != NULL);
        if (!f) return;
        fputs(before[k], f);
        fclose(f);
        char err[256];
        EventLog *e = events_open(dir, 1, err, sizeof err);
        CHECK_MSG(e != NULL, "%s", err);
        if (!e) return;
        events_csv(e, 2, NAN, 2.5, 0.1, 10, 0, 0, NAN, NAN);
        events_close(e);
        char *m = (char *)tu_read_file(csv, NULL);
        const char *want = k ? "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n2,,2.5,0.1,10,0,0,,\n"
                             : "step,epochs_done,loss,learning_rate,images_per_sec,top1,top5,eval_top1,eval_top5\n1,,2,0.1,10,0,0,,\n"
                               "2,,2.5,0.1,10,0,0,,\n";
        CHECK_MSG(m && strcmp(m, want) == 0, "case %d:\n%s", k, m ? m : "");
        free(m);
    }
}

/* A resumed run (from step 60) that cannot write even the event file's first record: its warning
 * names the run's first step (it said "from step 0"), and no empty event file is left behind. */
TEST(events_an_event_file_never_written_is_not_left) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/events-never", th_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    int p[2]; /* (stderr to a pipe: a file would be held to the limit too) */
    CHECK(pipe(p) == 0);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit lim = {0, RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &lim);
        char err[256];
        EventLog *e = events_open(dir, 60, err, sizeof err);
        if (!e) _exit(8);
        events_close(e);
        _exit(0);
    }
    close(p[1]);
    char *said = calloc(1, 8192);
    size_t got = 0;
    ssize_t r;
    while (got < 8191 && (r = read(p[0], said + got, 8191 - got)) > 0) got += (size_t)r;
    close(p[0]);
    int st = 0;
    CHECK_MSG(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    CHECK_MSG(said && strstr(said, "(its events from step 61 on are lost until it can be written again)") && !strstr(said, "from step 0"),
              "%s", said ? said : "");
    free(said);
    char cmd[800], *o = NULL;
    snprintf(cmd, sizeof cmd, "ls %s | grep -c events.out", dir);
    th_run(cmd, &o);
    CHECK_MSG(o && atoi(o) == 0, "an event file is left: %s", o ? o : "");
    free(o);
}
