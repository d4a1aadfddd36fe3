#!/usr/bin/env bash
# GPU images/sec and peak memory of nvcnn next to a PyTorch peer (scripts/bench_gpu_peer.py: the
# same torchvision model, batch and precision, eager mode) on synthetic data, in one run.
# Usage: scripts/bench_gpu.sh [steps]     (default 50 timed steps, after 10 burn-in steps)
#   ROWS="resnet50:256:fp16 alexnet:512:fp16"   restricts the table to these model:batch:precision
#   PYTHON=/path/to/python                       the interpreter with torch + torchvision (python3)
#   BURNIN=N                                     burn-in steps (default 10)
#   ROW_TIMEOUT=S                                each run (nvcnn, or the peer) is stopped after S s
#   DEADLINE=T                                   no row starts after the epoch second T (rows left
#                                                say 'not run'); runs are cut to end by then
# Run `make` first, on an otherwise idle GPU. Prints a markdown table; a row whose run fails shows
# `failed (exit N)` and the last line of its stderr in that cell, and the table goes on.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
steps=${1:-50}
case $steps in '' | *[!0-9]* | 0) echo "bench_gpu.sh: steps must be a positive integer, got '$steps'" >&2; exit 2 ;; esac
burnin=${BURNIN:-10}
case $burnin in '' | *[!0-9]*) echo "bench_gpu.sh: BURNIN must be a number of steps, got '$burnin'" >&2; exit 2 ;; esac
row_timeout=${ROW_TIMEOUT:-0}
deadline=${DEADLINE:-0}
case $row_timeout$deadline in *[!0-9]*) echo "bench_gpu.sh: ROW_TIMEOUT and DEADLINE must be whole seconds" >&2; exit 2 ;; esac
PYTHON=${PYTHON:-python3}
ROWS=${ROWS:-"resnet50:256:fp32 resnet50:256:tf32 resnet50:256:fp16 resnet50:256:bf16 alexnet:512:fp16 googlenet:256:fp16 resnet152:128:fp16 vgg16:128:fp16"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT

# "failed (exit N): last stderr line" for a markdown cell ('|' escaped); "timed out" for a run
# that ROW_TIMEOUT or DEADLINE stopped.
failed_cell() {
  local msg
  if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "timed out after $2 s"; return; fi
  msg=$(grep -v '^[[:space:]]*$' "$err" | tail -n 1 | tr -d '\r')
  msg=${msg//|/\\|}
  if [ -n "$msg" ]; then echo "failed (exit $1): $msg"; else echo "failed (exit $1)"; fi
}

# The seconds a run may take (0: no limit): ROW_TIMEOUT, and no later than DEADLINE.
run_limit() {
  local t=$row_timeout
  if [ "$deadline" -gt 0 ]; then
    local left=$((deadline - $(date +%s)))
    if [ "$t" -eq 0 ] || [ "$left" -lt "$t" ]; then t=$left; fi
    [ "$t" -lt 1 ] && t=1
  fi
  echo "$t"
}

# Runs "$@" within $1 seconds (0: no limit); the rest of the arguments are the command.
limited() {
  local t=$1
  shift
  if [ "$t" -gt 0 ]; then timeout --foreground -k 5 "$t" "$@"; else "$@"; fi
}

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | paste -sd ';' -)"
else
  echo "gpu: no nvidia-smi"
fi
echo "torch: $("$PYTHON" -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)' 2>/dev/null || echo "not importable with $PYTHON")"
echo "steps: $steps timed after $burnin burn-in, synthetic data"
echo
echo "| model | batch | precision | nvcnn img/s | PyTorch img/s | nvcnn/PyTorch | nvcnn GiB allocated | PyTorch peak GiB allocated |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
for spec in $ROWS; do
  IFS=: read -r model batch prec extra <<<"$spec"
  if [ -z "$model" ] || [ -z "$batch" ] || [ -z "$prec" ] || [ -n "$extra" ]; then
    echo "| $spec | | | bad row (want model:batch:precision) | | | | |"
    continue
  fi

  if [ "$deadline" -gt 0 ] && [ $((deadline - $(date +%s))) -lt 20 ]; then
    echo "| $model | $batch | $prec | not run (time budget) | | | | |"
    continue
  fi
  t=$(run_limit)
  out=$(limited "$t" ./nvcnn --model="$model" --batch_size="$batch" --precision="$prec" --device=gpu \
        --num_batches="$((steps + burnin))" --nstep_burnin="$burnin" --display_every=1000 2>"$err")
  rc=$?
  n_rate=- n_peak=-
  if [ "$rc" -ne 0 ]; then
    n_rate=$(failed_cell "$rc" "$t")
  else
    n_rate=$(sed -n 's/^Images\/sec: \([0-9.eE+-]*\) +\/- .*/\1/p' <<<"$out" | tail -n 1)
    [ -n "$n_rate" ] || n_rate="no Images/sec line"
    n_peak=$(sed -n 's/^GPU memory: \([0-9.]*\) GiB allocated by nvcnn.*/\1/p' <<<"$out" | tail -n 1)
    [ -n "$n_peak" ] || n_peak=-
  fi

  t=$(run_limit)
  out=$(limited "$t" "$PYTHON" scripts/bench_gpu_peer.py --model "$model" --batch "$batch" --precision "$prec" \
        --steps "$steps" --warmup "$burnin" --device cuda 2>"$err")
  rc=$?
  p_rate=- p_peak=-
  if [ "$rc" -ne 0 ]; then
    p_rate=$(failed_cell "$rc" "$t")
  else
    line=$(grep '^peer: ' <<<"$out" | tail -n 1)
    p_rate=$(sed -n 's/.* images_per_sec=\([^ ]*\).*/\1/p' <<<"$line")
    p_peak=$(sed -n 's/.* peak_mem_gib=\([^ ]*\).*/\1/p' <<<"$line")
    [ -n "$p_rate" ] || p_rate="no peer: line"
    [ -n "$p_peak" ] || p_peak=-
  fi

  ratio=$(awk -v a="$n_rate" -v b="$p_rate" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
  echo "| $model | $batch | $prec | $n_rate | $p_rate | $ratio | $n_peak | $p_peak |"
done
