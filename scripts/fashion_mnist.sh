#!/usr/bin/env bash
# Trains MODEL on Fashion-MNIST (the shards of `make data` in data/fashion-mnist/) for EPOCHS
# epochs with this project's recipe for it, then prints nvcnn's validation lines. The one place
# the recipe lives: `make run` (scripts/run-default.sh) and the end-to-end test use it.
#   scripts/fashion_mnist.sh [MODEL] [EPOCHS] [more nvcnn flags...]     (default: lenet 2)
#   DATA_DIR=dir: shards elsewhere than data/fashion-mnist (a slice of it, in the tests)
#   PRINT_RECIPE=1: print the flags of MODEL's recipe for EPOCHS epochs and exit
# Recipe (nvcnn's augmentation is made for ImageNet's large photos; on 28x28 images crops of at
# least 75% of the area and a linear decay train best in 1-2 epochs; evaluation uses nvcnn's
# central 87.5% crop): batch 64, learning rate 0.05, --lr_poly_power=1, --crop_area_min=0.75.
# The learning rate decays to 0 over EPOCHS, so the length is part of the recipe: lenet reaches
# about 88.5 % in 2 epochs, 90.5 % in 5 and 92.25 % in 15 (`fashion_mnist.sh lenet 15`, the mean
# of seeds 1-3; add --eval_every_epochs=1 to follow it, --target_top1=X to stop at X).
# The ResNets (ImageNet models): the images resized to 64x64, weight decay 5e-4, a linear decay;
# resnet18 reaches 94.19 % in 22 epochs (61 min on 2 cores; `fashion_mnist.sh resnet18 22`),
# 94.47 % in 30 (82 min) and 93.76 % in 18 (47 min).
# A flag given on the command line replaces the recipe's.
# Figures, the seeds and the sweep behind them: docs/performance.md.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
model=${1:-lenet}
epochs=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
case "$model" in
  lenet) recipe=(--batch_size=64 --learning_rate=0.05 --lr_poly_power=1 --crop_area_min=0.75) ;;
  resnet*) recipe=(--batch_size=64 --crop_area_min=0.75 --image_size=64 --weight_decay=5e-4 --lr_poly_power=1) ;;
  *) recipe=(--batch_size=64 --crop_area_min=0.75) ;;
esac
# the flags of the named array that the caller does not give (each flag once: the header's
# "Cmd line args:" lists what was given, and the caller's value is the one that counts)
not_given() {
  local -n flags=$1
  local kept=() f a given
  for f in "${flags[@]}"; do
    given=
    for a in "${args[@]}"; do case "$a" in "${f%%=*}" | "${f%%=*}"=*) given=1 ;; esac; done
    [ -n "$given" ] || kept+=("$f")
  done
  flags=("${kept[@]}")
}
args=("$@")
not_given recipe
# the recipe's --lr_poly_power is the poly policy's (nvcnn refuses it with another): dropped when
# the caller asks for --lr_decay_policy=step
for i in "${!args[@]}"; do
  if [ "${args[$i]}" = --lr_decay_policy=step ] || { [ "${args[$i]}" = --lr_decay_policy ] && [ "${args[$((i + 1))]:-}" = step ]; }; then
    kept=()
    for f in "${recipe[@]}"; do [[ $f == --lr_poly_power=* ]] || kept+=("$f"); done
    recipe=("${kept[@]}")
  fi
done
# the recipe's flags, one a line (scripts/bench_tta.sh gives the same ones to the PyTorch peer)
if [ -n "${PRINT_RECIPE:-}" ]; then
  printf '%s\n' "${recipe[@]}" --num_epochs="$epochs"
  exit 0
fi
data=${DATA_DIR:-data/fashion-mnist}
if ! ls "$data"/train-* >/dev/null 2>&1; then
  echo "fashion_mnist.sh: $data holds no train-* shards: run \`make data\`" >&2
  exit 2
fi
# a row every 100 steps unless the caller says otherwise
rows=(--display_every=100)
not_given rows
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
exec ./nvcnn --model="$model" --data_dir="$data" --num_classes=10 --num_epochs="$epochs" \
  "${recipe[@]}" "${rows[@]}" "$@"
