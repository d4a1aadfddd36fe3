#!/usr/bin/env bash
# The embedded default job of `make run`: lenet on Fashion-MNIST (converted by `make data` into
# data/fashion-mnist/), one epoch with scripts/fashion_mnist.sh's recipe, then the validation
# accuracy, on nvcnn's default device (the CPU backend: see the README's "Devices" section).
# Extra arguments are passed on (e.g. --device=gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/fashion_mnist.sh lenet 1 "$@"
