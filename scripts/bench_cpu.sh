#!/usr/bin/env bash
# CPU training images/sec of nvcnn (--cpu_impl=onednn in fp32 and, where it trains, bf16; the
# reference layers) next to the PyTorch peer at its best (scripts/bench_gpu_peer.py --device cpu:
# the torchvision model, SGD with Nesterov momentum 0.9 and weight decay 1e-4, synthetic data made
# once) in three configurations: NCHW fp32, channels_last fp32, and channels_last under
# torch.autocast("cpu", bfloat16) where the CPU has bf16 arithmetic (avx512_bf16 or amx_bf16), in one run.
# Usage: scripts/bench_cpu.sh [rounds]     (default 3)
#   ROWS="lenet:64:60 resnet50:8:6"   model:batch:steps (default: lenet, alexnet, googlenet, resnet50)
#   THREADS=2        compute threads of both sides (nvcnn: OMP_NUM_THREADS; PyTorch: set_num_threads)
#   ISA=avx2         caps both sides' instruction set, to show an older CPU (sse41, avx, avx2,
#                    avx512_core): ONEDNN_MAX_CPU_ISA for nvcnn's and PyTorch's oneDNN and nvcnn's
#                    own kernels, ATEN_CPU_CAPABILITY for PyTorch's own kernels,
#                    MKL_ENABLE_INSTRUCTIONS for PyTorch's MKL, OPENBLAS_CORETYPE for nvcnn's OpenBLAS
#   PYTHON=python3   an interpreter with torch + torchvision. Default: the venv VENV
#                    (~/.cache/nvcnn-bench-venv), created and filled from PyPI (pip install torch
#                    torchvision, a few GB) the first time the script runs; never by make test.
#   PEER=0           leaves the peer out; REFERENCE=0 leaves nvcnn's reference layers out.
# Every round runs each row's configurations back to back, so that other load on a shared machine
# hits them alike; the table shows the median over the rounds and the range, and the instruction set
# each side's kernels used. Run `make` first. The first 2 steps of every run are burn-in.
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
if [ -n "${ISA:-}" ]; then
  # nvcnn's own kernels follow ONEDNN_MAX_CPU_ISA too; PyTorch's GEMMs (MKL, im2col convolutions
  # where its oneDNN has no kernel at the cap) and nvcnn's OpenBLAS (reference layers) each choose
  # their kernels by their own setting: capped alike, so that both sides run one instruction set
  export ONEDNN_MAX_CPU_ISA=${ISA^^} ATEN_CPU_CAPABILITY=${ISA,,}
  case ${ISA,,} in
    sse41) export MKL_ENABLE_INSTRUCTIONS=SSE4_2 OPENBLAS_CORETYPE=Nehalem ;;
    avx) export MKL_ENABLE_INSTRUCTIONS=AVX OPENBLAS_CORETYPE=Sandybridge ;;
    avx2) export MKL_ENABLE_INSTRUCTIONS=AVX2 OPENBLAS_CORETYPE=Haswell ;;
    avx512_core) export MKL_ENABLE_INSTRUCTIONS=AVX512 OPENBLAS_CORETYPE=SkylakeX ;;
  esac
fi
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

# nvcnn's Images/sec for model batch steps impl [precision], "refused" (exit 2: e.g. bf16 on a CPU
# without it), or "failed"
nvcnn_rate() {
  local out rc
  out=$(OMP_NUM_THREADS=$THREADS ./nvcnn --model="$1" --device=cpu --batch_size="$2" --num_batches="$3" \
        --nstep_burnin=$burnin --display_every=100000 --cpu_impl="$4" --precision="${5:-fp32}" 2>&1)
  rc=$?
  [ $rc = 2 ] && { echo refused; return; }
  [ $rc = 0 ] || { echo failed; return; }
  sed -n 's/^Images\/sec: \([0-9.]*\) .*/\1/p' <<<"$out" | tail -n 1
}
# PyTorch's images/sec for model batch steps precision memory_format, or "failed"
peer_rate() {
  local out
  out=$("$PYTHON" scripts/bench_gpu_peer.py --model "$1" --batch "$2" --steps $(($3 - burnin)) --warmup $burnin \
        --device cpu --threads "$THREADS" --precision "$4" --memory_format "$5" 2>&1) || { echo failed; return; }
  sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1
}
# "median (min-max)" of the numbers given (or "-" / "failed")
summary() {
  python3 -c '
import sys
v = [float(x) for x in sys.argv[1:] if x not in ("failed", "refused", "", "-")]
if not v:
    print("failed" if "failed" in sys.argv[1:] else "refused" if "refused" in sys.argv[1:] else "-"); sys.exit()
v.sort(); m = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
print("%.1f (%.1f-%.1f)" % (m, v[0], v[-1]) if len(v) > 1 else "%.1f" % m)' "$@"
}
median() { summary "$@" | cut -d' ' -f1; }

# the CPU's bf16 arithmetic, as the kernel reports its flags
cpu_bf16=0
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && cpu_bf16=1
nv_isa=$(OMP_NUM_THREADS=$THREADS ./nvcnn --model=lenet --device=cpu --num_batches=1 --display_every=100 2>&1 | sed -n 's/^CPU layers: *//p')
nv_bf16=$(OMP_NUM_THREADS=$THREADS ./nvcnn --model=lenet --device=cpu --precision=bf16 --num_batches=1 --batch_size=2 2>&1 | tail -n 1)
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; threads: $THREADS; bf16 in the CPU flags: $([ $cpu_bf16 = 1 ] && echo yes || echo no)${ISA:+; capped at ISA=$ISA}"
echo "nvcnn: $nv_isa"
case $nv_bf16 in *error*) echo "nvcnn bf16: ${nv_bf16#nvcnn: error: }" ;; esac
if [ "$PEER" != 0 ]; then
  echo "torch: $("$PYTHON" -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)' 2>&1 | tail -n 1)"
  # the instruction sets PyTorch's kernels use: ATen's dispatch, and its oneDNN's (from oneDNN's verbose line)
  echo "torch ISA: ATen $("$PYTHON" -c 'import torch; print(torch.backends.cpu.get_cpu_capability())' 2>&1 | tail -n 1), oneDNN $(
    "$PYTHON" -c 'import torch
with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
    torch.nn.Conv2d(64, 64, 3, padding=1)(torch.randn(2, 64, 28, 28))' 2>&1 |
      sed -n 's/.*info,cpu,isa:\(.*\)$/\1/p' | head -n 1)"
fi
echo "rounds: $rounds (every configuration of a row back to back); training img/s, synthetic data"
declare -A R
for ((r = 1; r <= rounds; r++)); do
  for spec in $ROWS; do
    IFS=: read -r model batch steps <<<"$spec"
    R[$spec,o]+=" $(nvcnn_rate "$model" "$batch" "$steps" onednn)"
    R[$spec,ob]+=" $(nvcnn_rate "$model" "$batch" "$steps" onednn bf16)"
    if [ "$PEER" != 0 ]; then
      R[$spec,p]+=" $(peer_rate "$model" "$batch" "$steps" fp32 nchw)"
      R[$spec,pc]+=" $(peer_rate "$model" "$batch" "$steps" fp32 channels_last)"
      [ $cpu_bf16 = 1 ] && R[$spec,pb]+=" $(peer_rate "$model" "$batch" "$steps" bf16 channels_last)"
    fi
    [ "$REFERENCE" != 0 ] && R[$spec,r]+=" $(nvcnn_rate "$model" "$batch" "$steps" reference)"
    echo "round $r $spec: nvcnn fp32 ${R[$spec,o]##* } bf16 ${R[$spec,ob]##* } reference ${R[$spec,r]:+${R[$spec,r]##* }}" \
      "PyTorch NCHW ${R[$spec,p]:+${R[$spec,p]##* }} channels_last ${R[$spec,pc]:+${R[$spec,pc]##* }} bf16 ${R[$spec,pb]:+${R[$spec,pb]##* }}" >&2
  done
done
ratio() { python3 -c 'import sys
try: print("%.2fx" % (float(sys.argv[1]) / float(sys.argv[2])))
except (ValueError, ZeroDivisionError): print("-")' "$1" "$2"; }
best() { python3 -c 'import sys
v = [float(x) for x in sys.argv[1:] if x.replace(".", "", 1).isdigit()]
print(max(v) if v else "-")' "$@"; }
echo
echo "| model | batch | nvcnn fp32 | nvcnn bf16 | nvcnn reference | PyTorch fp32 NCHW | PyTorch fp32 channels_last | PyTorch bf16 autocast, channels_last | nvcnn fp32 / PyTorch best fp32 | nvcnn best / PyTorch best |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for spec in $ROWS; do
  IFS=: read -r model batch steps <<<"$spec"
  o=$(median ${R[$spec,o]}) ob=$(median ${R[$spec,ob]}) p=$(median ${R[$spec,p]:--}) pc=$(median ${R[$spec,pc]:--}) pb=$(median ${R[$spec,pb]:--})
  pf=$(best "$p" "$pc")
  echo "| $model | $batch | $(summary ${R[$spec,o]}) | $(summary ${R[$spec,ob]}) | $(summary ${R[$spec,r]:--}) | $(summary ${R[$spec,p]:--}) |" \
    "$(summary ${R[$spec,pc]:--}) | $(summary ${R[$spec,pb]:--}) | $(ratio "$o" "$pf") | $(ratio "$(best "$o" "$ob")" "$(best "$pf" "$pb")") |"
done
