/* lifecycle.c: see lifecycle.h. */
#include "lifecycle.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "ckpt.h"
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
    m->data_position = (uint64_t)step * (uint64_t)r->total_batch;
    memcpy(m->rng, net->rng.s, sizeof m->rng);
}

/* Rank 0 writes a checkpoint of the state after `step` steps. Returns 0 on success. */
static int save_checkpoint(const Run *r, const Net *net, Trainer *tr, long step, char *path, size_t plen) {
    if (r->dist.rank != 0 || !r->cfg.log_dir) return 0;
    trainer_sync_host(tr);
    CkptMeta m;
    fill_meta(r, net, tr, step, &m);
    char err[512];
    if (ckpt_save(r->cfg.log_dir, net, tr->opt.velocity, &m, path, plen, err, sizeof err) != 0) {
        warn("%s", err);
        return -1;
    }
    return 0;
}

long lifecycle_restore(Run *r, Net *net, Trainer *tr) {
    if (!r->cfg.log_dir) return 0;
    char path[4096] = "", err[1024] = "";
    double st[3] = {0, 0, 0}; /* found, ok, step */
    CkptMeta m;
    memset(&m, 0, sizeof m);
    if (r->dist.rank == 0 && ckpt_latest(r->cfg.log_dir, path, sizeof path)) {
        st[0] = 1;
        if (ckpt_load(path, r->model->name, net, tr->opt.velocity, &m, err, sizeof err) == 0) {
            st[1] = 1;
            st[2] = (double)m.step;
        }
    }
    dist_bcast(&r->dist, st, sizeof st);
    if (st[0] && !st[1]) die_code(EXIT_USAGE, "cannot resume from --log_dir=%s: %s", r->cfg.log_dir, r->dist.rank == 0 ? err : "see rank 0");
    if (!st[0]) return 0;
    dist_bcast(&r->dist, &m, sizeof m);
    dist_bcast(&r->dist, net->params, net->params_total * sizeof(float));
    dist_bcast(&r->dist, net->state, net->state_total * sizeof(float));
    dist_bcast(&r->dist, tr->opt.velocity, net->params_total * sizeof(float));
    tr->loss_scale = m.loss_scale;
    tr->good_steps = m.good_steps;
    tr->skipped_steps = m.skipped_steps;
    memcpy(net->rng.s, m.rng, sizeof m.rng);
    trainer_sync_device(tr);
    printf("Restored from checkpoint %s at step %lld\n", path, (long long)m.step);
    const Shape in = net->node[net->input].shape;
    if (m.in_h != in.h || m.in_w != in.w)
        printf("(saved at %dx%d, now %dx%d: the weights of a fully convolutional model serve any input size)\n", m.in_h,
               m.in_w, in.h, in.w);
    if (m.world_size != r->dist.size)
        printf("(saved with %d rank(s), resumed with %d: the data order continues from image %llu)\n", m.world_size,
               r->dist.size, (unsigned long long)m.data_position);
    return (long)m.step;
}

long lifecycle_saved_step(Run *r, const Net *net, char *path, size_t plen) {
    double step = -1;
    path[0] = 0;
    CkptMeta m;
    char err[512];
    const Shape in = net->node[net->input].shape;
    if (r->cfg.log_dir && r->dist.rank == 0 && ckpt_latest(r->cfg.log_dir, path, plen)) {
        step = -2;
        if (ckpt_read_meta(path, &m, err, sizeof err) == 0 && strcmp(m.model, r->model->name) == 0 &&
            m.num_classes == r->cfg.num_classes && m.in_c == in.c)
            step = (double)m.step;
    }
    dist_bcast(&r->dist, &step, sizeof step);
    return (long)step;
}

long lifecycle_start(Lifecycle *life, Run *r, Net *net, Trainer *tr) {
    memset(life, 0, sizeof *life);
    life->r = r;
    life->net = net;
    life->tr = tr;
    long step0 = lifecycle_restore(r, net, tr);
    signals_install();
    life->last_save = now_seconds();
    return step0;
}

int lifecycle_poll(Lifecycle *life, long step) {
    Run *r = life->r;
    const Config *c = &r->cfg;
    /* rank 0's clock decides the periodic checkpoint; the signals of any rank count */
    double sig[2] = {0, 0};
    int f = signals_take();
    sig[0] = (f & SIG_STOP) ? 1 : 0;
    sig[1] = ((f & SIG_CHECKPOINT) || (c->log_dir && now_seconds() - life->last_save >= c->save_interval)) ? 1 : 0;
    if (r->dist.size > 1) {
        if (r->dist.rank != 0) sig[1] = (f & SIG_CHECKPOINT) ? 1 : 0;
        dist_allreduce_sum_d(&r->dist, sig, 2);
    }
    if (!(sig[0] || sig[1]) || step + 1 >= r->nstep) return 0; /* the last step: lifecycle_finish() saves */
    if (c->forward_only) { /* nothing was trained: no checkpoint */
        if (!sig[0]) return 0;
        printf("Received a stop signal: stopping after step %ld (forward only: no checkpoint)\n", step + 1);
        life->stopped = 1;
        r->nstep = step + 1;
        return 1;
    }
    char path[4096] = "";
    int ok = save_checkpoint(r, life->net, life->tr, step + 1, path, sizeof path) == 0;
    life->last_save = now_seconds();
    if (!sig[0]) {
        if (ok && c->log_dir) printf("Checkpoint written to %s at step %ld\n", path, step + 1);
        return 0;
    }
    int s = signals_stop_signal();
    const char *name = s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : "a stop signal";
    if (!c->log_dir)
        printf("Received %s: stopping after step %ld (no --log_dir: no checkpoint written)\n", name, step + 1);
    else if (ok)
        printf("Received %s: checkpoint written to %s at step %ld; exiting\n", name, path, step + 1);
    else
        printf("Received %s: stopping after step %ld; the checkpoint could NOT be written\n", name, step + 1);
    life->stopped = 1;
    r->nstep = step + 1;
    return 1;
}

void lifecycle_finish(Lifecycle *life, long step0) {
    Run *r = life->r;
    if (life->stopped || r->nstep <= step0) return;
    char path[4096] = "";
    if (r->cfg.log_dir && save_checkpoint(r, life->net, life->tr, r->nstep, path, sizeof path) == 0 && r->dist.rank == 0)
        printf("Checkpoint written to %s at step %ld\n", path, r->nstep);
}
