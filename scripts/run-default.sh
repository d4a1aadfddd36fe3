#!/usr/bin/env bash
# The embedded default job of `make run`: about a minute of training.
# Synthetic data on lenet (the GPU if there is one, otherwise the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
exec ./nvcnn --model=lenet --batch_size=64 --num_batches=600 --display_every=50 --num_classes=10 "$@"
