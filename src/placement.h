/* placement.h: one GPU per rank. Every rank of a GPU run names its host and the PCI bus id of the
 * GPU it drives; a host whose ranks outnumber the distinct GPUs they drive is over-subscribed
 * (a Slurm job with --ntasks-per-node above its --gres=gpu:N, mpirun -np 8 on a 4-GPU node,
 * CUDA_VISIBLE_DEVICES=0 for every rank). Comparing bus ids rather than counting visible devices
 * is right whether the ranks see all of the node's GPUs and pick one by local rank, or see only
 * their own (--gpus-per-task=1, --gpu-bind): every rank's device is then device 0.
 *
 * placement_find() is the counting, on plain strings; placement_check() gathers the strings over
 * MPI and applies the rule of the GPU backend. Both are tested on the CPU (bus ids made up).
 */
#ifndef NVCNN_PLACEMENT_H
#define NVCNN_PLACEMENT_H

#include <stddef.h>

#include "dist.h"

/* Bytes of one rank's record: "host|bus id", NUL-terminated and NUL-padded. */
enum { PLACEMENT_KEY = 320 };

typedef struct PlacementFault {
    char host[256];
    int tasks;          /* ranks on that host */
    int gpus;           /* distinct GPUs they drive (fewer than tasks) */
    int rank_a, rank_b; /* the two lowest ranks that share one GPU there */
    char gpu[64];       /* that GPU's bus id */
} PlacementFault;

/* keys: n records of PLACEMENT_KEY bytes in rank order, each "host|bus id" (a record without
 * '|' is a host with an empty bus id). Returns 1 and fills *f for the over-subscribed host that
 * holds the lowest rank, 0 when every host has at least as many GPUs as ranks. */
int placement_find(const char *keys, int n, PlacementFault *f);

/* The GPU backend's rule, on every rank of d, with `bus` the PCI bus id of the rank's GPU: when a
 * host has more ranks than GPUs, every rank exits 2 after rank 0 has printed one line naming the
 * host, the GPU count and the task count, and what to do, unless allow_sharing (an explicit
 * --allreduce=mpi: the ranks share GPUs on purpose and average through the host). Returns 1 when
 * GPUs are shared (allowed), 0 when each rank has its own. Collective: every rank of d calls it. */
int placement_check(Dist *d, const char *bus, int allow_sharing);
/* placement_check() with the bus id of CUDA device `device` (gpu_pci_bus_id). */
int placement_check_gpus(Dist *d, int device, int allow_sharing);

#endif
