/* optim.h: momentum SGD (Nesterov as nvcnn), L2 weight decay, LARC, learning-rate policies. */
#ifndef NVCNN_OPTIM_H
#define NVCNN_OPTIM_H

#include <stddef.h>

#include "net.h"

typedef struct OptimConfig {
    double momentum;
    int nesterov;        /* TensorFlow's use_nesterov: v = m v + g; w -= lr (g + m v) */
    double weight_decay; /* gradient of wd/2 ||w||^2, over every trainable tensor (as nvcnn) */
    double larc_eta;     /* 0: off */
    int larc_scale;      /* 0: clip mode, 1: scale mode */
} OptimConfig;

typedef struct Optimizer {
    OptimConfig c;
    float *velocity; /* [net->params_total], same layout as the params arena */
    size_t n;
} Optimizer;

void optim_init(Optimizer *o, const OptimConfig *c, size_t nparams);
void optim_free(Optimizer *o);
/* 0.5 * sum of squares of every trainable parameter. */
double optim_l2(const Net *net);
/* Adds weight decay to net->grads, applies LARC per parameter tensor, then the momentum update. */
void optim_step(Optimizer *o, Net *net, double lr);
/* optim_step, and where l2 is not NULL, optim_l2 of the weights before the update into *l2 (the
 * same bits; without LARC taken in the update's pass). */
void optim_step_l2(Optimizer *o, Net *net, double lr, double *l2);

typedef enum { SCHED_POLY = 0, SCHED_STEP } SchedPolicy;
typedef struct LrSchedule {
    double base;
    SchedPolicy policy;
    double poly_power;
    long total_steps;     /* poly decays to 0 at this step */
    long steps_per_epoch;
    double decay_epochs;  /* step policy */
    double decay_rate;
    long warmup_steps;    /* linear warmup from base/warmup_steps to base */
} LrSchedule;

/* The learning rate for 0-based `step`. */
double lr_at(const LrSchedule *s, long step);

#endif
