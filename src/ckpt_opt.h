/* ckpt_opt.h: the optimizer settings a checkpoint records (CkptMeta.opt), by index. */
#ifndef NVCNN_CKPT_OPT_H
#define NVCNN_CKPT_OPT_H

enum {
    CKPT_OPT_SAVED = 0, /* 1 where the header has them (0: an older one) */
    CKPT_OPT_NEXT_LR,   /* the learning rate the saved run had for the step after the checkpoint's */
    CKPT_OPT_MOMENTUM,
    CKPT_OPT_WEIGHT_DECAY,
    CKPT_OPT_NESTEROV,
    CKPT_OPT_LARC_ETA,  /* 0: LARC off */
    CKPT_OPT_LARC_MODE, /* LarcMode */
    CKPT_OPT_FIELDS
};

#endif
