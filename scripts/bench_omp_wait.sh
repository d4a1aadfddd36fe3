#!/usr/bin/env bash
# How OpenMP's wait policy treats nvcnn on an idle and on a shared machine: lenet on Fashion-MNIST
# (real data: the decode workers compete for the cores too) for STEPS steps under each setting,
# alone and beside LOAD busy processes (one core's worth each), REPEAT times interleaved.
#   scripts/bench_omp_wait.sh [STEPS] [REPEAT] [LOAD]            (default: 400 3 1)
#   MODEL=resnet18 EXTRA="--image_size=32 --batch_size=32" scripts/bench_omp_wait.sh ...
# Settings: nvcnn's default (no variable set), OMP_WAIT_POLICY=ACTIVE, =PASSIVE, and
# GOMP_SPINCOUNT=1000, 10000, 100000 (libgomp spins that many times before it sleeps; its own
# default without OMP_WAIT_POLICY is 300000). Prints the median img/s of each.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-400}
repeat=${2:-3}
load=${3:-1}
model=${MODEL:-lenet}
extra=${EXTRA:-}
data=${DATA_DIR:-data/fashion-mnist}
[ -x ./nvcnn ] || { echo "bench_omp_wait.sh: build ./nvcnn first (make)" >&2; exit 1; }
ls "$data"/train-* >/dev/null 2>&1 || { echo "bench_omp_wait.sh: $data has no shards: make data" >&2; exit 1; }

settings=("default" "OMP_WAIT_POLICY=ACTIVE" "OMP_WAIT_POLICY=PASSIVE" "GOMP_SPINCOUNT=1000" "GOMP_SPINCOUNT=10000" "GOMP_SPINCOUNT=100000")

# one run: prints its Images/sec figure
run_one() {
  local setting=$1 out
  local -a env_args=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
  [ "$setting" != default ] && env_args+=("$setting")
  # shellcheck disable=SC2086
  out=$("${env_args[@]}" ./nvcnn --model="$model" --device=cpu --data_dir="$data" --num_classes=10 \
        --num_batches="$steps" --nstep_burnin=$((steps / 5)) --display_every=100000 $extra 2>&1) || { echo "failed"; return; }
  sed -n 's/^Images\/sec: \([0-9.]*\).*/\1/p' <<<"$out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

hogs=()
start_load() { for _ in $(seq 1 "$load"); do (while :; do :; done) & hogs+=($!); done; }
stop_load() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; hogs=(); }
trap stop_load EXIT

declare -A idle busy
for ((r = 0; r < repeat; r++)); do
  for s in "${settings[@]}"; do idle[$s]+="$(run_one "$s") "; done
  start_load
  for s in "${settings[@]}"; do busy[$s]+="$(run_one "$s") "; done
  stop_load
done

echo "$model, $steps steps, $(nproc) cores, $(./nvcnn --model="$model" --device=cpu --num_batches=1 2>&1 | sed -n 's/^CPU layers: *//p')"
echo "| setting | idle img/s (median of $repeat) | beside $load busy process(es) | runs idle | runs loaded |"
echo "| --- | --- | --- | --- | --- |"
for s in "${settings[@]}"; do
  printf '| %s | %s | %s | %s | %s |\n' "$s" "$(tr ' ' '\n' <<<"${idle[$s]}" | grep . | median)" \
    "$(tr ' ' '\n' <<<"${busy[$s]}" | grep . | median)" "${idle[$s]% }" "${busy[$s]% }"
done
