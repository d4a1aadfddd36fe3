#!/usr/bin/env bash
# The embedded default job of `make run`: lenet on Fashion-MNIST (converted by `make data` into
# data/fashion-mnist/), one epoch, then the validation accuracy. About a minute on 2 CPU cores;
# on the GPU if there is one (and this build has the GPU backend), otherwise on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
exec ./nvcnn --model=lenet --data_dir=data/fashion-mnist --num_classes=10 --num_epochs=1 \
  --batch_size=64 --learning_rate=0.05 --display_every=100 "$@"
