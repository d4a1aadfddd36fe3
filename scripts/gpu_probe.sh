#!/usr/bin/env bash
# gpu_probe.sh: a short second call on a GPU machine, after scripts/gpu_check.sh has shown where to
# look: resnet50 batch 256 up the design ladder in fp16 (NCHW unfused; NHWC; fused; CUDA Graph),
# NCHW unfused with cuDNN's legacy batch norm (NVCNN_GPU_BN=cudnn), PyTorch eager (channels_last),
# the per-layer profile (--profile) of the NCHW and NHWC unfused steps and of NHWC fused, bf16's
# first and last rungs, then the GPU tests named, with what is left of PROBE_TOTAL seconds
# (default 290). Every part is time-bounded; everything goes to OUTDIR/probe.txt.
# Usage: scripts/gpu_probe.sh OUTDIR [TEST...]     (it builds first, through gpu_check.sh)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[ $# -ge 1 ] || { echo "usage: scripts/gpu_probe.sh OUTDIR [TEST...]" >&2; exit 2; }
O=$1; shift
mkdir -p "$O"
start=$(date +%s)
total=${PROBE_TOTAL:-290}
left() { echo $((total - ($(date +%s) - start))); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LC_ALL=C
scripts/gpu_check.sh --only=build "$O/build" >/dev/null 2>&1
tail -n 3 "$O/build/summary.md" 2>/dev/null
[ -d .deps/rt ] && export LD_LIBRARY_PATH=$PWD/.deps/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec > >(tee "$O/probe.txt") 2>&1
run() { # run NAME SECONDS ARGS...: nvcnn resnet50 b256, its rows, Images/sec and profile lines
  local name=$1 lim=$2; shift 2
  [ "$(left)" -gt $((lim + 20)) ] || { echo "== $name: not run (time)"; return; }
  echo "== $name"
  timeout --foreground -k 5 "$lim" ./nvcnn --model=resnet50 --device=gpu --batch_size=256 --display_every=2 "$@" 2>&1 |
    grep -E '^ +[0-9]+ +[0-9]+ |Images/sec|search|Fusion|Profile|^  [a-z_0-9]+ +[a-z_]+ |by type|error' | head -n 60
  echo "rc ${PIPESTATUS[0]} ($(left) s left)"
}
for r in NCHW:off:off NHWC:off:off NHWC:on:off NHWC:on:on; do
  IFS=: read -r df fu cg <<<"$r"
  run "fp16 $df fuse=$fu graph=$cg" 50 --precision=fp16 --num_batches=14 --nstep_burnin=4 --data_format="$df" --fuse="$fu" --cuda_graph="$cg"
done
# batch norm: nvcnn's kernels (the ladder above) against cuDNN's legacy calls, where unfused
NVCNN_GPU_BN=cudnn run "fp16 NCHW fuse=off graph=off, cuDNN's batch norm" 50 --precision=fp16 --num_batches=14 --nstep_burnin=4 --data_format=NCHW --fuse=off --cuda_graph=off
if [ "$(left)" -gt 60 ]; then
  echo "== PyTorch eager fp16 channels_last"
  timeout --foreground -k 5 50 python3 scripts/bench_gpu_peer.py --model resnet50 --batch 256 --precision fp16 --steps 15 --warmup 5 2>&1 | tail -n 2
fi
run "profile fp16 NCHW unfused" 45 --precision=fp16 --num_batches=9 --nstep_burnin=4 --data_format=NCHW --fuse=off --cuda_graph=off --profile="$O/nchw.json"
run "profile fp16 NHWC unfused" 60 --precision=fp16 --num_batches=9 --nstep_burnin=4 --data_format=NHWC --fuse=off --cuda_graph=off --profile="$O/nhwc.json"
run "profile fp16 NHWC fused" 45 --precision=fp16 --num_batches=9 --nstep_burnin=4 --data_format=NHWC --fuse=on --cuda_graph=off --profile="$O/nhwc_fused.json"
run "bf16 NCHW fuse=off graph=off" 40 --precision=bf16 --num_batches=14 --nstep_burnin=4 --data_format=NCHW --fuse=off --cuda_graph=off
run "bf16 NHWC fuse=on graph=on" 40 --precision=bf16 --num_batches=14 --nstep_burnin=4 --data_format=NHWC --fuse=on --cuda_graph=on
if [ $# -gt 0 ] && [ "$(left)" -gt 20 ]; then
  echo "== tests ($(left) s)"
  timeout --foreground -k 3 $(($(left) - 5)) "${NVCNN_BUILD:-build}/run_tests" --jobs=1 --timeout=60 "$@" 2>&1 | grep -E '^(PASS|FAIL|SKIP)|passed|failed|^    [a-z_/]+.c:[0-9]+: ' | tail -n 150
fi
echo "== done ($(left) s left)"
