#!/usr/bin/env bash
# mpirun on one node with N GPUs (default 8), with the flags NVIDIA's labs use for nvcnn_hvd.py,
# one process per GPU on the GPU backend (--device=gpu is added unless the flags give --device):
#   scripts/mpirun-example.sh 8 --model=resnet50 --batch_size=256 --precision=fp16
#   scripts/mpirun-example.sh --model=resnet50           (8 processes)
# Across nodes add a hostfile: -H node1:8,node2:8 (and -np 16).
set -euo pipefail
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") echo "mpirun-example.sh: give nvcnn's flags, at least --model (usage: scripts/mpirun-example.sh [N] --model=NAME [flags])" >&2
      exit 2 ;;
esac
np=8
if [[ $1 =~ ^[0-9]+$ ]]; then
  np=$1
  shift
  [ "$np" -ge 1 ] || { echo "mpirun-example.sh: N=$np: at least 1 process" >&2; exit 2; }
elif [[ $1 != -* ]]; then
  echo "mpirun-example.sh: '$1': N must be a number of processes (usage: scripts/mpirun-example.sh [N] --model=NAME [flags])" >&2
  exit 2
fi
device=(--device=gpu)
for a in "$@"; do [[ $a == --device=* || $a == --device ]] && device=(); done
# LD_LIBRARY_PATH is passed on only where it is set (mpirun warns about an unset one)
env_vars=(-x NCCL_DEBUG=INFO -x PATH)
[ -n "${LD_LIBRARY_PATH+set}" ] && env_vars+=(-x LD_LIBRARY_PATH)
exec mpirun -np "$np" \
  -bind-to none -map-by slot \
  "${env_vars[@]}" \
  -mca pml ob1 -mca btl ^openib \
  ./nvcnn "${device[@]}" "$@"
