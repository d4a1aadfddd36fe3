#!/usr/bin/env bash
# Fashion-MNIST's validation top-1 of a lenet trained as `make run` trains it, two ways: nvcnn
# --eval of its checkpoint, and ONNX Runtime on the model that --export_onnx writes from that
# checkpoint (scripts/onnx_fashion_mnist.py, on the same images, preprocessed as nvcnn does).
#   scripts/onnx_fashion_mnist.sh [LOG_DIR]     (default log_dir/fashion-lenet)
# A LOG_DIR without a checkpoint is first trained into: `make run`'s recipe (scripts/fashion_mnist.sh
# lenet 1) with --log_dir. Needs `make data` and scripts/install-deps.sh's .deps/venv.
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-log_dir/fashion-lenet}
src=${SRC:-/usr/share/datasets/fashion-mnist}
py=${NVCNN_PYTHON:-.deps/venv/bin/python3}
# checked first: the training below may take minutes
if ! "$py" -c 'import onnxruntime, numpy' 2>/dev/null; then
  echo "onnx_fashion_mnist.sh: $py cannot import onnxruntime and numpy: run scripts/install-deps.sh python (or set NVCNN_PYTHON)" >&2
  exit 2
fi
[ -x ./nvcnn ] || { echo "onnx_fashion_mnist.sh: no ./nvcnn: run make first" >&2; exit 2; }
if ! ls "$log"/ckpt-*.nvcnn >/dev/null 2>&1; then
  echo "onnx_fashion_mnist.sh: training lenet as make run does, into $log"
  scripts/fashion_mnist.sh lenet 1 --log_dir="$log" | tail -3
fi
nv=$(./nvcnn --model=lenet --num_classes=10 --data_dir=data/fashion-mnist --eval --log_dir="$log" | grep '^Validation Top-1')
./nvcnn --model=lenet --log_dir="$log" --export_onnx="$log/lenet.onnx" | grep '^Exported'
ort=$("$py" scripts/onnx_fashion_mnist.py "$log/lenet.onnx" "$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz")
echo "nvcnn --eval:  $nv"
echo "$ort"
