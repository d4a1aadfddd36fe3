#!/usr/bin/env bash
# link_allreduce.sh: the gradient allreduce over a real link, measured, next to the model of
# scripts/scaling_model.sh. Two hosts on this machine (tests/hosts/hosts.sh: network namespaces
# joined by a veth link), one rank on each, the CPU backend; the link shaped by tc (tbf) to each
# RATE in turn. For each rate five runs of the same steps:
#   --allreduce=none          backward alone (the replicas drift: for timing only)
#   --bucket_mb=B             the default buckets, launched during backward: the exposed time
#   --bucket_mb=1000          one bucket, launched when backward ends: nothing overlaps, so the
#                             exposed time is the whole allreduce
# the last two with nvcnn's choice of algorithm (the ring for buckets of 64 KiB and more: see
# src/dist.c) and with Open MPI's own (binomial: a reduce to rank 0, then a broadcast). nvcnn's
# last line gives backward's ms/step and the exposed allreduce ms/step. The model's figures for 2
# ranks are printed beside: docs/scaling.md's model (scaling_model.sh with the measured backward,
# the link's bandwidth and its contention of 0.1), and the model corrected for a CPU host: the
# bandwidth the link's payload (1448 bytes of TCP in each 1514-byte frame that tbf counts), and
# no more than what the host itself moves (HOST_GBPS; by default measured by the ring's whole
# allreduce on the bare link, "unshaped", which must then come first), and a contention of
# CPU_CONTENTION (0.35: the allreduce's copies and sums take the cores backward runs on).
# A latency needs tc's netem, which some kernels lack: LATENCY=5ms asks for it, and the script
# says when it cannot have it.
# Usage: sudo scripts/link_allreduce.sh [MODEL] [BATCH] [STEPS] [RATE...]
#        (default: resnet50 4 8 unshaped 25gbit 10gbit 1gbit); prints a markdown table.
# Needs root, make, and what tests/hosts/hosts.sh needs. resnet50 takes about a minute per rate
# on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-resnet50}
batch=${2:-4}
steps=${3:-8}
shift $(($# < 3 ? $# : 3))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(unshaped 25gbit 10gbit 1gbit)
bucket=${BUCKET_MB:-25}
[ -x ./nvcnn ] || { echo "link_allreduce.sh: ./nvcnn is missing: run make" >&2; exit 1; }
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=tests/hosts/hosts.sh
source tests/hosts/hosts.sh
why=$(hosts_can_start) || { echo "link_allreduce.sh: $why" >&2; exit 1; }
hosts_start 2>/dev/null

# The gradient bytes: 4 per parameter (nvcnn's header line).
params=$(./nvcnn --model="$model" --batch_size=1 --num_batches=1 --nstep_burnin=0 --device=cpu 2>/dev/null |
         sed -n 's/^Parameters: *//p')
grad_mb=$(awk -v p="$params" 'BEGIN { printf "%.1f", 4 * p / 1e6 }')

# run ARGS...: one run across the hosts; prints "backward exposed" (ms/step). NBC: the value of
# coll_libnbc_iallreduce_algorithm to give mpirun (2: binomial), or none (nvcnn's choice).
run() {
  local line nbc=()
  [ -z "${NBC:-}" ] || nbc=(--mca coll_libnbc_iallreduce_algorithm "$NBC")
  line=$(hosts_mpirun 1 --bind-to none --mca btl tcp,self "${nbc[@]}" -x OMP_NUM_THREADS=1 ./nvcnn --model="$model" --device=cpu \
           --batch_size="$batch" --num_batches="$steps" --nstep_burnin=1 --display_every=1000 "$@" 2>&1 | grep '^Backward: ') ||
    { echo "link_allreduce.sh: no Backward line from nvcnn $*" >&2; return 1; }
  echo "$line" | sed -E 's/^Backward: ([0-9.]+) ms\/step; allreduce [a-z ()]+: ([0-9.]+) ms\/step.*/\1 \2/'
}

echo "link_allreduce.sh: $model, batch $batch per rank, $steps steps, $grad_mb MB of gradients, buckets of $bucket MiB;" \
     "2 ranks, one per host, 1 thread each; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ -n "${LATENCY:-}" ]; then
  if hosts_shape "" "$LATENCY" 2>/dev/null; then
    hosts_shape ""
  else
    echo "link_allreduce.sh: LATENCY=$LATENCY: this kernel has no netem (tc qdisc netem: unknown); the latency is the veth's own" >&2
    LATENCY=""
  fi
fi
cpu_cont=${CPU_CONTENTION:-0.35}
host_gbps=${HOST_GBPS:-}
echo "| link | backward ms/step | whole allreduce: binomial / ring / model / corrected | exposed (${bucket} MiB buckets): binomial / ring / model / corrected |"
echo "| --- | --- | --- | --- |"
for rate in "${rates[@]}"; do
  [ "$rate" != unshaped ] || rate=""
  hosts_shape "$rate" "${LATENCY:-}"
  read -r bwd0 _ < <(run --allreduce=none)
  read -r _ exposed < <(run --bucket_mb="$bucket")
  read -r _ whole < <(run --bucket_mb=1000)
  read -r _ exposed_b < <(NBC=2 run --bucket_mb="$bucket")
  read -r _ whole_b < <(NBC=2 run --bucket_mb=1000)
  # model ARGS: "T_all exposed" of scaling_model.sh for 2 ranks (ARGS: bandwidth GB/s, contention)
  model() { bash scripts/scaling_model.sh "$bwd0" "$bwd0" "$grad_mb" "$bucket" 370 "$1" 1 10 "$2" 2 | tail -1 | awk '{ print $4, $6 }'; }
  if [ -z "$rate" ]; then
    [ -n "$host_gbps" ] || host_gbps=$(awk -v g="$grad_mb" -v t="$whole" 'BEGIN { printf "%.3g", g / t }')
    m=("-" "-")
    read -r -a c < <(model "$host_gbps" "$cpu_cont")
  else
    gbps=$(awk -v b="$(tc_rate_bytes "$rate")" 'BEGIN { printf "%g", b / 1e9 }')
    read -r -a m < <(model "$gbps" 0.1)
    c=("-" "-")
    [ -z "$host_gbps" ] || read -r -a c < <(model "$(awk -v a="$gbps" -v b="$host_gbps" 'BEGIN { a *= 1448 / 1514; print (a < b ? a : b) }')" "$cpu_cont")
  fi
  echo "| ${rate:-unshaped}${LATENCY:+ + $LATENCY} | $bwd0 | $whole_b / $whole / ${m[0]} / ${c[0]} | $exposed_b / $exposed / ${m[1]} / ${c[1]} |"
done
echo "link_allreduce.sh: the host's own ceiling: ${host_gbps:-?} GB/s; load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
