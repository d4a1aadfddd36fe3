#!/usr/bin/env bash
# CPU training images/sec of nvcnn (--cpu_impl=onednn, and the reference layers) next to the
# PyTorch peer (scripts/bench_gpu_peer.py --device cpu: the torchvision model, SGD with Nesterov
# momentum 0.9 and weight decay 1e-4, synthetic data made once, fp32), in one run.
# Usage: scripts/bench_cpu.sh [rounds]     (default 3)
#   ROWS="lenet:64:60 resnet50:8:6"   model:batch:steps (default: lenet, alexnet, googlenet, resnet50)
#   THREADS=2        compute threads of both sides (nvcnn: OMP_NUM_THREADS; PyTorch: set_num_threads)
#   PYTHON=python3   an interpreter with torch + torchvision. Default: the venv VENV
#                    (~/.cache/nvcnn-bench-venv), created and filled from PyPI (pip install torch
#                    torchvision, a few GB) the first time the script runs; never by make test.
#   PEER=0           leaves the peer out; REFERENCE=0 leaves nvcnn's reference layers out.
# Every round runs each row's nvcnn and PyTorch back to back, so that other load on a shared
# machine hits both alike; the table shows the median over the rounds and the range. Run `make`
# first. The first 2 steps of every run are burn-in.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
rounds=${1:-3}
case $rounds in '' | *[!0-9]* | 0) echo "bench_cpu.sh: rounds must be a positive integer, got '$rounds'" >&2; exit 2 ;; esac
ROWS=${ROWS:-"lenet:64:60 alexnet:8:12 googlenet:8:10 resnet50:8:6"}
THREADS=${THREADS:-2}
PEER=${PEER:-1}
REFERENCE=${REFERENCE:-1}
VENV=${VENV:-$HOME/.cache/nvcnn-bench-venv}
burnin=2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x ./nvcnn ] || { echo "bench_cpu.sh: ./nvcnn is missing: run make first" >&2; exit 1; }

if [ "$PEER" != 0 ] && [ -z "${PYTHON:-}" ]; then
  PYTHON=$VENV/bin/python
  if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
    echo "bench_cpu.sh: installing torch and torchvision from PyPI into $VENV (once)" >&2
    python3 -m venv "$VENV" && "$VENV/bin/pip" install -q torch torchvision >&2 ||
      { echo "bench_cpu.sh: could not install the PyTorch peer (PEER=0 skips it)" >&2; exit 1; }
  fi
fi

# nvcnn's Images/sec for model batch steps impl, or "failed"
nvcnn_rate() {
  local out
  out=$(OMP_NUM_THREADS=$THREADS ./nvcnn --model="$1" --device=cpu --batch_size="$2" --num_batches="$3" \
        --nstep_burnin=$burnin --display_every=100000 --cpu_impl="$4" 2>&1) || { echo failed; return; }
  sed -n 's/^Images\/sec: \([0-9.]*\) .*/\1/p' <<<"$out" | tail -n 1
}
peer_rate() {
  local out
  out=$("$PYTHON" scripts/bench_gpu_peer.py --model "$1" --batch "$2" --steps $(($3 - burnin)) --warmup $burnin \
        --device cpu --threads "$THREADS" 2>&1) || { echo failed; return; }
  sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1
}
# "median (min-max)" of the numbers given (or "-" / "failed")
summary() {
  python3 -c '
import sys
v = [float(x) for x in sys.argv[1:] if x not in ("failed", "", "-")]
if not v: print("failed" if any(x == "failed" for x in sys.argv[1:]) else "-"); sys.exit()
v.sort(); m = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
print("%.1f (%.1f-%.1f)" % (m, v[0], v[-1]) if len(v) > 1 else "%.1f" % m)' "$@"
}
median() { summary "$@" | cut -d' ' -f1; }

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; threads: $THREADS"
echo "nvcnn: $(OMP_NUM_THREADS=$THREADS ./nvcnn --model=lenet --device=cpu --num_batches=1 --display_every=100 2>&1 | sed -n 's/^CPU layers: *//p')"
[ "$PEER" != 0 ] && echo "torch: $("$PYTHON" -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)' 2>&1 | tail -n 1)"
echo "rounds: $rounds (nvcnn onednn, nvcnn reference and PyTorch interleaved); training img/s, synthetic data"
declare -A R
for ((r = 1; r <= rounds; r++)); do
  for spec in $ROWS; do
    IFS=: read -r model batch steps <<<"$spec"
    R[$spec,o]+=" $(nvcnn_rate "$model" "$batch" "$steps" onednn)"
    [ "$PEER" != 0 ] && R[$spec,p]+=" $(peer_rate "$model" "$batch" "$steps")"
    [ "$REFERENCE" != 0 ] && R[$spec,r]+=" $(nvcnn_rate "$model" "$batch" "$steps" reference)"
    echo "round $r $spec: onednn ${R[$spec,o]##* } reference ${R[$spec,r]:+${R[$spec,r]##* }} PyTorch ${R[$spec,p]:+${R[$spec,p]##* }}" >&2
  done
done
echo
echo "| model | batch | nvcnn onednn | nvcnn reference | PyTorch | onednn / PyTorch | onednn / reference |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for spec in $ROWS; do
  IFS=: read -r model batch steps <<<"$spec"
  o=$(median ${R[$spec,o]}) p=$(median ${R[$spec,p]:--}) r=$(median ${R[$spec,r]:--})
  ratio() { python3 -c 'import sys
try: print("%.2fx" % (float(sys.argv[1]) / float(sys.argv[2])))
except (ValueError, ZeroDivisionError): print("-")' "$1" "$2"; }
  echo "| $model | $batch | $(summary ${R[$spec,o]}) | $(summary ${R[$spec,r]:--}) | $(summary ${R[$spec,p]:--}) | $(ratio "$o" "$p") | $(ratio "$o" "$r") |"
done
