#!/usr/bin/env bash
# Scaling-efficiency model for data-parallel training with bucketed, overlapped ring allreduce.
# Usage: scripts/scaling_model.sh [step_ms] [backward_ms] [grad_MB] [bucket_MB] [intra_GBps] [inter_GBps] [gpus_per_node] [latency_us] [contention] [GPU counts]
# Defaults: resnet50 fp16 batch 256 per H100 (the PyTorch peer's 4,622 img/s -> 55.4 ms/step,
# backward 2/3 of it), fp32 gradients of 25,557,032 parameters (102.2 MB), 25 MB buckets, NCCL
# bus bandwidth 370 GB/s inside a node (NVLink/NVSwitch) and 45 GB/s per GPU across nodes
# (8 x 400 Gb/s InfiniBand NDR per node), 8 GPUs per node, 10 us per allreduce hop.
# Model: ring allreduce of S bytes takes 2(N-1)/N * S / busbw + hops * latency (hops = 2 log2 N,
# NCCL's tree for the latency term). Buckets launched during backward overlap with it; what is
# left exposed after backward is what the buckets before the last take beyond backward,
# max(0, T_all - last - backward), plus the last bucket (the first layers' gradients, ready only
# when backward ends, sent after the others), plus a contention cost for the overlapped part: the
# NCCL kernels share the SMs and memory with backward, taken as `contention` (default 0.1) of the
# overlapped time. Efficiency = step / (step + exposed). The last argument lists the GPU counts
# (default "8 64 512").
case "${1:-}" in -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
for a in "${@:1:9}"; do
  [[ $a =~ ^[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$ || $a =~ ^[.][0-9]+$ ]] ||
    { echo "scaling_model.sh: '$a' is not a number (see scripts/scaling_model.sh --help)" >&2; exit 2; }
done
for a in ${10:-}; do
  [[ $a =~ ^[1-9][0-9]*$ ]] || { echo "scaling_model.sh: GPU count '$a' is not a whole number (see --help)" >&2; exit 2; }
done
step=${1:-55.4}; bwd=${2:-36.9}; grad=${3:-102.2}; bucket=${4:-25}; intra=${5:-370}; inter=${6:-45}
per_node=${7:-8}; lat=${8:-10}; cont=${9:-0.1}; counts=${10:-8 64 512}
printf "%6s %10s %12s %12s %12s %10s\n" GPUs "busbw" "T_all (ms)" "last (ms)" "exposed" efficiency
for n in $counts; do
  awk -v n="$n" -v step="$step" -v bwd="$bwd" -v grad="$grad" -v bucket="$bucket" -v intra="$intra" \
      -v inter="$inter" -v pn="$per_node" -v lat="$lat" -v cont="$cont" 'BEGIN {
    bw = (n <= pn) ? intra : inter
    hops = 2 * log(n) / log(2)
    nb = int((grad + bucket - 1) / bucket)
    f = 2 * (n - 1) / n
    tall = f * grad / bw + nb * hops * lat / 1000          # MB / (GB/s) = ms
    last = f * (grad - (nb - 1) * bucket) / bw + hops * lat / 1000
    over = tall - last - bwd; if (over < 0) over = 0
    hidden = tall - last - over; if (hidden < 0) hidden = 0
    exposed = over + last + cont * hidden
    printf "%6d %7g GB/s %12.2f %12.2f %9.2f ms %9.1f%%\n", n, bw, tall, last, exposed, 100 * step / (step + exposed)
  }'
done
