#!/usr/bin/env bash
# mpirun on one node with N GPUs (default 8), with the flags NVIDIA's labs use for nvcnn_hvd.py:
#   scripts/mpirun-example.sh 8 --model=resnet50 --batch_size=256 --precision=fp16
# Across nodes add a hostfile: -H node1:8,node2:8 (and -np 16).
set -euo pipefail
np=${1:-8}
shift || true
# LD_LIBRARY_PATH is passed on only where it is set (mpirun warns about an unset one)
env_vars=(-x NCCL_DEBUG=INFO -x PATH)
[ -n "${LD_LIBRARY_PATH+set}" ] && env_vars+=(-x LD_LIBRARY_PATH)
exec mpirun -np "$np" \
  -bind-to none -map-by slot \
  "${env_vars[@]}" \
  -mca pml ob1 -mca btl ^openib \
  ./nvcnn "$@"
