#!/usr/bin/env bash
# CPU images/sec of the reference backend for a few models at a small batch (synthetic data).
# Usage: scripts/bench_cpu.sh [batch]   (default 8). Prints a table; run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf "%-10s %6s %8s %14s\n" model batch steps "images/sec"
for spec in lenet:64:60 alexnet:$batch:12 resnet50:$batch:8; do
  IFS=: read -r model b steps <<<"$spec"
  out=$(./nvcnn --model="$model" --device=cpu --batch_size="$b" --num_batches="$steps" --nstep_burnin=2 --display_every=1000)
  line=$(grep '^Images/sec:' <<<"$out" | sed 's/^Images\/sec: //')
  printf "%-10s %6s %8s %s\n" "$model" "$b" "$steps" "$line"
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
