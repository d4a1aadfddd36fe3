/* lifecycle.c: see lifecycle.h. */
#include "lifecycle.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "optim.h"
#include "signals.h"
#include "util.h"

static void fill_meta(const Run *r, const Net *net, const Trainer *tr, long step, CkptMeta *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->model, sizeof m->model, "%s", r->model->name);
    m->num_classes = r->cfg.num_classes;
    Shape in = net->node[net->input].shape;
    m->in_c = in.c;
    m->in_h = in.h;
    m->in_w = in.w;
    m->precision = (int32_t)r->cfg.precision;
    m->step = step;
    m->epoch = (double)step * r->total_batch / (double)r->nrecord;
    m->seed = r->cfg.seed;
    m->world_size = r->dist.size;
    m->loss_scale = tr->loss_scale;
    m->good_steps = tr->good_steps;
    m->skipped_steps = tr->skipped_steps;
    /* images of --data_dir read so far; 0 for synthetic data, which has none */
    m->data_position = r->cfg.data_dir ? (uint64_t)step * (uint64_t)r->total_batch : 0;
    memcpy(m->rng, net->rng.s, sizeof m->rng);
    m->loss_avg_sum = r->loss_avg[0];
    m->loss_avg_weight = r->loss_avg[1];
    m->target_top1 = r->target_reached;
    m->eval_pending = r->eval_pending; /* 1: an evaluation while training, 2: the validation pass at the end */
    m->train_images = r->cfg.data_dir ? (double)r->nrecord : 0;
    const Config *c = &r->cfg;
    m->opt[CKPT_OPT_SAVED] = 1;
    m->opt[CKPT_OPT_NEXT_LR] = r->sched ? lr_at(r->sched, step) : 0;
    m->opt[CKPT_OPT_MOMENTUM] = c->momentum;
    m->opt[CKPT_OPT_WEIGHT_DECAY] = c->weight_decay;
    m->opt[CKPT_OPT_NESTEROV] = c->nesterov;
    m->opt[CKPT_OPT_LARC_ETA] = c->larc_eta;
    m->opt[CKPT_OPT_LARC_MODE] = (double)c->larc_mode;
}

#define LOCK_NAME ".nvcnn.lock"

void lifecycle_lock_log_dir(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    char who[128];
    const int got = util_lock_file(path, who, sizeof who);
    if (got < 0) die_code(EXIT_USAGE, "--log_dir=%s: cannot create %s: %s", dir, path, strerror(errno));
    if (got == UTIL_LOCK_BUSY)
        die_code(EXIT_USAGE, "--log_dir=%s is in use by another nvcnn run (%s): two runs in one folder would overwrite "
                             "each other's checkpoints; give this one another --log_dir (if that run is gone, as on a lost "
                             "node whose lock a network file system still holds, delete %s)",
                 dir, who, path);
    if (got == UTIL_LOCK_NONE) return; /* a file system without locks: go on unlocked */
    /* held, open, until the process ends. No other run writes here now, so a checkpoint's temporary
     * file (.ckpt-N.nvcnn.tmp.PID) is one a killed run left half written: removed */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, ".ckpt-", 6) != 0 || !strstr(e->d_name, ".nvcnn.tmp.")) continue;
        char stale[4400];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        unlink(stale);
    }
    if (d) closedir(d);
}

int log_dir_owns(const char *dir, const char *path) {
    if (!path_in_folder(path, dir)) return 0;
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    size_t n = strlen(name);
    return (strncmp(name, "ckpt-", 5) == 0 && n > 11 && strcmp(name + n - 6, ".nvcnn") == 0) ||
           strcmp(name, "metrics.csv") == 0 || strncmp(name, "events.out.tfevents.", 20) == 0 || strcmp(name, LOCK_NAME) == 0;
}

int lifecycle_check_output(const Config *c, const char *flag, const char *path, int before_log_dir, const char *what) {
    if (before_log_dir && c->log_dir && path_in_folder(path, c->log_dir)) return 1; /* once --log_dir is made */
    char err[4600];
    if (check_output_path(flag, path, err, sizeof err) != 0) die_code(EXIT_USAGE, "%s", err);
    if (c->log_dir && log_dir_owns(c->log_dir, path))
        die_code(EXIT_USAGE, "--%s=%s: a file of --log_dir=%s's own (checkpoints, metrics.csv, events, the lock): write %s "
                             "elsewhere", flag, path, c->log_dir, what);
    return 0;
}

/* Rank 0 writes a checkpoint of the state after `step` steps. Returns 0 on success, or -1 with the
 * reason in err. */
/* Every rank calls it (the logged loss average is averaged over them). */
static int save_checkpoint(Run *r, const Net *net, Trainer *tr, long step, char *path, size_t plen, char *err,
                           size_t errlen) {
    if (!r->cfg.log_dir) return 0;
    /* each rank keeps its own moving average of its loss, and the rows show their mean: the
     * checkpoint keeps the mean, and every rank resumes from it (the rows go on as in a run that
     * did not stop; the weights of the average are the same on every rank) */
    double avg = r->loss_avg[0];
    if (r->dist.size > 1) {
        dist_allreduce_sum_d(&r->dist, &avg, 1);
        avg /= r->dist.size;
    }
    if (r->dist.rank != 0) return 0;
    trainer_sync_host(tr);
    CkptMeta m;
    fill_meta(r, net, tr, step, &m);
    m.loss_avg_sum = avg;
    return ckpt_save(r->cfg.log_dir, net, tr->opt.velocity, &m, path, plen, err, errlen) != 0 ? -1 : 0;
}

long lifecycle_restore(Run *r, Net *net, Trainer *tr) {
    if (!r->cfg.log_dir) return 0;
    char path[4096] = "", err[1024] = "";
    double st[4] = {0, 0, 0, 0}; /* found, ok, step, exit code */
    CkptMeta m;
    memset(&m, 0, sizeof m);
    if (r->dist.rank == 0 && ckpt_latest(r->cfg.log_dir, path, sizeof path)) {
        st[0] = 1;
        const int rc = ckpt_load(path, r->model->name, net, tr->opt.velocity, &m, err, sizeof err);
        long long named = -1;
        if (rc == 0 && ckpt_step_of_name(path, &named) && named != (long long)m.step) {
            /* a copied or renamed file: resuming from it, the run's own checkpoints (named by their
             * steps) would rank below it and be removed as the older ones */
            snprintf(err, sizeof err, "%s holds the checkpoint of step %lld, not %lld (renamed or copied?): name it ckpt-%lld.nvcnn or move it away",
                     path, (long long)m.step, named, (long long)m.step);
            st[3] = EXIT_USAGE;
        } else if (rc == 0) {
            st[1] = 1;
            st[2] = (double)m.step;
        } else {
            st[3] = ckpt_exit_code(rc);
        }
    }
    dist_bcast(&r->dist, st, sizeof st);
    if (st[0] && !st[1])
        die_code((int)st[3], "cannot %s --log_dir=%s: %s", r->cfg.eval ? "evaluate the checkpoint of" : "resume from", r->cfg.log_dir,
                 r->dist.rank == 0 ? err : "see rank 0");
    if (!st[0]) {
        char tf[512];
        if (r->dist.rank == 0 && !r->cfg.eval && !r->cfg.forward_only && lifecycle_foreign_checkpoint(r->cfg.log_dir, tf, sizeof tf))
            warn("--log_dir=%s holds %s, which nvcnn cannot read: this run starts from step 1", r->cfg.log_dir, tf);
        return 0;
    }
    dist_bcast(&r->dist, &m, sizeof m);
    /* a step of another size than the checkpoint's (--batch_size x ranks) would not continue its
     * step count: the images read (the place in the data), the epochs and the learning-rate
     * schedule, all counted in steps of this run's size from the checkpoint's step */
    const uint64_t total = (uint64_t)r->total_batch;
    if (r->cfg.data_dir && !r->cfg.eval && !r->cfg.forward_only && m.step > 0 && m.data_position > 0 &&
        m.data_position != (uint64_t)m.step * total) {
        const uint64_t was = m.data_position / (uint64_t)m.step;
        char how[160];
        if (was % (uint64_t)r->dist.size == 0)
            snprintf(how, sizeof how, "--batch_size=%llu on this run's %d rank%s", (unsigned long long)(was / (uint64_t)r->dist.size),
                     r->dist.size, r->dist.size == 1 ? "" : "s");
        else
            snprintf(how, sizeof how, "%d rank%s x --batch_size=%llu, as it was", m.world_size, m.world_size == 1 ? "" : "s",
                     (unsigned long long)(m.world_size > 0 ? was / (uint64_t)m.world_size : was));
        die_code(EXIT_USAGE,
                 "cannot resume from --log_dir=%s: %s trained %llu images a step (%d rank%s), this run's step is %llu (%d rank%s x "
                 "--batch_size=%d): its steps would not continue the checkpoint's place in the data, epochs and learning-rate "
                 "schedule; resume with %llu images a step (%s), or train into another --log_dir",
                 r->cfg.log_dir, r->dist.rank == 0 ? path : "its checkpoint", (unsigned long long)was, m.world_size,
                 m.world_size == 1 ? "" : "s", (unsigned long long)total, r->dist.size, r->dist.size == 1 ? "" : "s",
                 r->cfg.batch_size, (unsigned long long)was, how);
    }
    dist_bcast(&r->dist, net->params, net->params_total * sizeof(float));
    dist_bcast(&r->dist, net->state, net->state_total * sizeof(float));
    dist_bcast(&r->dist, tr->opt.velocity, net->params_total * sizeof(float));
    /* a dynamic loss scale goes on from the checkpoint's in the same precision; else this run's
     * own (a --loss_scale given, another precision) applies, as its header says */
    if (tr->dynamic && m.precision == (int32_t)r->cfg.precision && m.loss_scale > 0) {
        tr->loss_scale = (double)(float)m.loss_scale;
        if (tr->loss_scale != r->cfg.loss_scale && r->dist.rank == 0) /* the header said where a fresh run starts it */
            printf("(the dynamic loss scale goes on from the checkpoint's %g)\n", tr->loss_scale);
    }
    tr->good_steps = m.good_steps; /* (the counts go on: a resumed run's checkpoint is the uninterrupted run's) */
    memcpy(r->resumed_opt, m.opt, sizeof m.opt);
    r->resumed_precision = m.precision;
    tr->skipped_steps = m.skipped_steps;
    memcpy(net->rng.s, m.rng, sizeof m.rng);
    r->resume_eval = m.eval_pending == 1 && !r->cfg.eval && !r->cfg.forward_only ? (long)m.step : 0;
    if (!r->cfg.forward_only && !r->cfg.eval) { /* the logged average goes on as in a run that did not stop */
        r->loss_avg[0] = m.loss_avg_sum;
        r->loss_avg[1] = m.loss_avg_weight;
    }
    trainer_sync_device(tr);
    printf("Restored from checkpoint %s at step %lld\n", path, (long long)m.step);
    const Shape in = net->node[net->input].shape;
    if (m.in_h != in.h || m.in_w != in.w)
        printf("(saved at %dx%d, now %dx%d: the weights of a fully convolutional model serve any input size)\n", m.in_h,
               m.in_w, in.h, in.w);
    if (m.world_size != r->dist.size && r->cfg.data_dir && !r->cfg.eval && !r->cfg.forward_only)
        printf("(saved with %d rank(s), resumed with %d: the data order continues from image %llu)\n", m.world_size,
               r->dist.size, (unsigned long long)m.data_position);
    if (r->cfg.data_dir && m.train_images > 0 && m.train_images != (double)r->nrecord && !r->cfg.eval && !r->cfg.forward_only &&
        r->dist.rank == 0)
        warn("%s was trained on %.0f training images; --data_dir=%s has %llu: another data set? (this run counts its epochs, "
             "learning-rate schedule and place in the data in this one's)",
             path, m.train_images, r->cfg.data_dir, (unsigned long long)r->nrecord);
    if (m.seed != r->cfg.seed && !r->cfg.eval && !r->cfg.forward_only)
        printf("(saved by a run with --seed=%llu, resumed with --seed=%llu: the data order, augmentation and dropout from here "
               "follow %llu)\n",
               (unsigned long long)m.seed, (unsigned long long)r->cfg.seed, (unsigned long long)r->cfg.seed);
    if (r->cfg.data_dir && m.data_position == 0 && m.step > 0 && !r->cfg.eval && !r->cfg.forward_only && r->dist.rank == 0)
        warn("%s was trained on synthetic data (%lld steps); this run reads --data_dir from image %llu, as after that many steps of "
             "it, and counts its epochs from there",
             path, (long long)m.step, (unsigned long long)m.step * (unsigned long long)r->total_batch);
    if (!r->cfg.data_dir && m.data_position > 0 && r->dist.rank == 0)
        warn("%s was trained on --data_dir images (%llu read); this run has no --data_dir and goes on with synthetic data "
             "(give the --data_dir it trained on to go on with it)",
             path, (unsigned long long)m.data_position);
    return (long)m.step;
}

long lifecycle_saved_step(Run *r, const Net *net, char *path, size_t plen, double *target_top1) {
    double step = -1, reached = 0, other = 0, final_pending = 0;
    path[0] = 0;
    CkptMeta m;
    memset(&m, 0, sizeof m);
    char err[512];
    const Shape in = net->node[net->input].shape;
    if (r->cfg.log_dir && r->dist.rank == 0 && ckpt_latest(r->cfg.log_dir, path, plen)) {
        step = -2;
        /* (a header whose model name a flipped byte changed is a corrupt file: lifecycle_restore says so) */
        other = ckpt_read_meta(path, &m, err, sizeof err) == 0 && strcmp(m.model, r->model->name) != 0 &&
                ckpt_verify(path, err, sizeof err) == 0;
        /* a checkpoint of this net; one that says the run is finished must be whole too, for
         * nothing else reads it then (a corrupt one is refused by lifecycle_restore) */
        if (ckpt_read_meta(path, &m, err, sizeof err) == 0 && strcmp(m.model, r->model->name) == 0 &&
            m.num_classes == r->cfg.num_classes && m.in_c == in.c &&
            (m.step < r->nstep || ckpt_verify(path, err, sizeof err) == 0)) {
            step = (double)m.step;
            reached = m.target_top1;
            final_pending = m.eval_pending == 2;
        }
    }
    dist_bcast(&r->dist, &other, sizeof other);
    if (other) { /* said before the net is planned (minutes on a GPU), by rank 0, as lifecycle_restore() would */
        util_set_quiet_usage(r->dist.rank != 0);
        die_code(EXIT_USAGE, "cannot %s --log_dir=%s: %s is a checkpoint of model %s, not %s",
                 r->cfg.eval ? "evaluate the checkpoint of" : "resume from", r->cfg.log_dir, path, m.model, r->model->name);
    }
    dist_bcast(&r->dist, &step, sizeof step);
    dist_bcast(&r->dist, &reached, sizeof reached);
    dist_bcast(&r->dist, &final_pending, sizeof final_pending);
    r->final_eval_pending = final_pending != 0;
    if (target_top1) *target_top1 = reached;
    return (long)step;
}

long lifecycle_start(Lifecycle *life, Run *r, Net *net, Trainer *tr) {
    memset(life, 0, sizeof *life);
    life->r = r;
    life->net = net;
    life->tr = tr;
    long step0 = lifecycle_restore(r, net, tr);
    life->saved = step0;
    if (r->cfg.forward_only && step0 > 0) { /* an inference benchmark of the trained weights: its own steps */
        printf("(--forward_only: the checkpoint's weights, %ld inference steps from step 1; nothing is written to --log_dir)\n", r->nstep);
        step0 = 0;
    }
    signals_install();
    life->last_save = now_seconds();
    return step0;
}

int lifecycle_poll(Lifecycle *life, long step) {
    Run *r = life->r;
    const Config *c = &r->cfg;
    /* rank 0's clock decides the periodic checkpoint; the signals of any rank count */
    double sig[2 + SIGNALS_NCOUNTS] = {0}; /* stop, checkpoint, the stop signal's counts */
    int f = signals_take();
    sig[0] = (f & SIG_STOP) ? 1 : 0;
    sig[1] = ((f & SIG_CHECKPOINT) || (c->log_dir && now_seconds() - life->last_save >= c->save_interval)) ? 1 : 0;
    signals_stop_counts(sig + 2);
    if (r->dist.size > 1) {
        if (r->dist.rank != 0) sig[1] = (f & SIG_CHECKPOINT) ? 1 : 0;
        dist_allreduce_sum_d(&r->dist, sig, 2 + SIGNALS_NCOUNTS);
    }
    if (life->save_deferred) sig[1] = 1; /* the same on every rank */
    if (!(sig[0] || sig[1]) || step + 1 >= r->nstep) return 0; /* the last step: lifecycle_finish() saves */
    if (!sig[0] && r->eval_pending && !c->forward_only) {
        /* an evaluation follows this step: its checkpoint after it (written now it would say the
         * evaluation is pending, and a run killed after the evaluation would do it twice) */
        life->save_deferred = 1;
        return 0;
    }
    life->save_deferred = 0;
    if (life->flush) life->flush(life->flush_ctx); /* before the last row and the checkpoint */
    if (sig[0] && life->before_stop) life->before_stop(life->flush_ctx, step);
    if (!sig[0] && !c->log_dir) { /* SIGUSR1 (a periodic checkpoint needs --log_dir) */
        printf("Received SIGUSR1: no --log_dir: no checkpoint written after step %ld (%s goes on)\n", step + 1,
               c->forward_only ? "the run" : "training");
        return 0;
    }
    if (c->forward_only) { /* nothing was trained: no checkpoint */
        if (!sig[0]) return 0;
        printf("Received %s: stopping after step %ld (forward only: no checkpoint)\n", signals_stop_name(sig + 2), step + 1);
        life->stopped = 1;
        r->nstep = step + 1;
        return 1;
    }
    char path[4096] = "";
    int ok = save_checkpoint(r, life->net, life->tr, step + 1, path, sizeof path, life->save_err, sizeof life->save_err) == 0;
    life->last_save = now_seconds();
    if (ok && c->log_dir) life->saved = step + 1;
    if (!sig[0]) { /* a periodic checkpoint: a failure is a warning, the next one may succeed */
        if (ok && c->log_dir) printf("Checkpoint written to %s at step %ld\n", path, step + 1);
        if (!ok) warn("%s (training goes on; the next checkpoint is tried in --save_interval)", life->save_err);
        return 0;
    }
    const char *name = signals_stop_name(sig + 2);
    if (!c->log_dir)
        printf("Received %s: stopping after step %ld (no --log_dir: no checkpoint written)\n", name, step + 1);
    else if (ok)
        printf("Received %s: checkpoint written to %s at step %ld; exiting\n", name, path, step + 1);
    else {
        printf("Received %s: stopping after step %ld; the checkpoint could NOT be written\n", name, step + 1);
        life->unsaved = step + 1;
    }
    life->stopped = 1;
    r->nstep = step + 1;
    return 1;
}

void lifecycle_finish(Lifecycle *life, long step0) {
    Run *r = life->r;
    /* nothing trained: no checkpoint, but for the one whose pending evaluation, done first,
     * reached --target_top1 (it says so now) */
    if (life->stopped || r->nstep < step0 || (r->nstep == step0 && !(r->target_reached > 0))) return;
    char path[4096] = "";
    if (!r->cfg.log_dir) return;
    if (save_checkpoint(r, life->net, life->tr, r->nstep, path, sizeof path, life->save_err, sizeof life->save_err) != 0)
        life->unsaved = r->nstep;
    else if (r->dist.rank == 0)
        printf("Checkpoint written to %s at step %ld\n", path, r->nstep);
}

int lifecycle_exit_code(const Lifecycle *life) {
    if (!life->unsaved) return 0;
    const Run *r = life->r;
    if (life->saved > 0 && r->cfg.log_dir)
        error_line("the checkpoint of step %ld was not written (%s): the newest one is %s/ckpt-%ld.nvcnn; the steps after %ld are not saved",
                   life->unsaved, life->save_err, r->cfg.log_dir, life->saved, life->saved);
    else
        error_line("the checkpoint of step %ld was not written (%s): the model trained in this run is not saved", life->unsaved,
                   life->save_err);
    return EXIT_FAILURE_GENERIC;
}

const char *lifecycle_log_dir_missing(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) { /* (no search permission, a loop of links, ...) */
            static char why[160];
            snprintf(why, sizeof why, "cannot be reached: %s", strerror(errno));
            return why;
        }
        static char link[4200];
        return util_dangling_link(dir, ENOENT, link, sizeof link) ? link : "does not exist";
    }
    return S_ISDIR(st.st_mode) ? NULL : "is not a directory";
}

int lifecycle_foreign_checkpoint(const char *dir, char *what, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        /* TensorFlow's: "checkpoint" (the index of them), and each one's NAME.index */
        if (strcmp(e->d_name, "checkpoint") == 0 || (len > 6 && strcmp(e->d_name + len - 6, ".index") == 0)) {
            snprintf(what, n, "TensorFlow checkpoints (%s)", e->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

void lifecycle_final_eval(Lifecycle *life, int pending) {
    Run *r = life->r;
    if (!r->cfg.log_dir || r->cfg.forward_only) return;
    r->eval_pending = pending ? 2 : 0;
    char path[4096] = "";
    const int ok = save_checkpoint(r, life->net, life->tr, r->nstep, path, sizeof path, life->save_err, sizeof life->save_err) == 0;
    r->eval_pending = 0;
    double sig[SIGNALS_NCOUNTS];
    signals_stop_counts(sig);
    dist_allreduce_sum_d(&r->dist, sig, SIGNALS_NCOUNTS); /* the signal's name, as every rank says it */
    if (r->dist.rank != 0) return;
    if (!ok) {
        warn("%s (the checkpoint of step %ld does not say so)", life->save_err, r->nstep);
        return;
    }
    if (pending) /* the line a batch script requeues on: the requeued run does the pass */
        printf("Received %s: checkpoint written to %s at step %ld; exiting\n(the validation pass is left to the run resumed from it)\n",
               signals_stop_name(sig), path, r->nstep);
}
