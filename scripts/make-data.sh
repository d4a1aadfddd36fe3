#!/usr/bin/env bash
# Converts Debian's dataset-fashion-mnist into TFRecord shards of tf.train.Example:
#   data/fashion-mnist/train-0000k-of-00008       from train-{images-idx3,labels-idx1}-ubyte.gz
#   data/fashion-mnist/validation-0000k-of-00002  from t10k-{images-idx3,labels-idx1}-ubyte.gz
# Images are stored as 28x28 grayscale PNG (lossless), labels 1..10 with image/class/text set to
# the class names. Idempotent: does nothing when every shard is already there; a subset that is
# incomplete (or holds other files named like its shards) is converted again with --overwrite.
# Environment: SRC (default /usr/share/datasets/fashion-mnist), OUT (default data/fashion-mnist),
# MKRECORDS (default ./nvcnn-mkrecords).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${SRC:-/usr/share/datasets/fashion-mnist}
out=${OUT:-data/fashion-mnist}
tool=${MKRECORDS:-./nvcnn-mkrecords}
train_shards=8
val_shards=2
names="T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"

complete() { # subset shards: every shard there, and no other <subset>-* file
  local i files
  for ((i = 0; i < $2; i++)); do
    [ -s "$(printf '%s/%s-%05d-of-%05d' "$out" "$1" "$i" "$2")" ] || return 1
  done
  files=("$out/$1"-*)
  [ "${#files[@]}" -eq "$2" ]
}

if complete train $train_shards && complete validation $val_shards; then
  echo "make-data: $out is complete"
  exit 0
fi
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  if [ ! -r "$src/$f" ]; then
    echo "make-data: error: $src/$f is missing (install the Debian package dataset-fashion-mnist)" >&2
    exit 2
  fi
done
if [ ! -x "$tool" ]; then
  echo "make-data: error: $tool is missing (run make first)" >&2
  exit 2
fi
if ! complete train $train_shards; then
  "$tool" --idx_images="$src/train-images-idx3-ubyte.gz" --idx_labels="$src/train-labels-idx1-ubyte.gz" \
    --output_dir="$out" --subset=train --shards=$train_shards --format=png --class_names="$names" --overwrite
fi
if ! complete validation $val_shards; then
  "$tool" --idx_images="$src/t10k-images-idx3-ubyte.gz" --idx_labels="$src/t10k-labels-idx1-ubyte.gz" \
    --output_dir="$out" --subset=validation --shards=$val_shards --format=png --class_names="$names" --overwrite
fi
echo "make-data: wrote $out"
