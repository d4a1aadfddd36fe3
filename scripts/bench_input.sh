#!/usr/bin/env bash
# Input-pipeline throughput: nvcnn --model=trivial (one FC layer: the step costs almost nothing)
# on ImageNet-like JPEGs (500x375, quality 90) converted by nvcnn-mkrecords, training decode +
# augment to 224x224, for 1, 2, 4, ... decode threads up to the number of cores.
# Usage: scripts/bench_input.sh [images] [steps]     (default 2000 images, 40 steps of 64)
# Run `make` first. Prints a table: threads, images/sec, images/sec per thread.
#   GPU_RATIO_ONLY=1   only the GPU real-data/synthetic ratio below (no thread table)
set -euo pipefail
cd "$(dirname "$0")/.."
images=${1:-2000}
steps=${2:-40}
work=${BENCH_DIR:-/tmp/nvcnn-bench-input}
cores=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The trivial model's step runs on the CPU backend's OpenMP threads; left spinning between steps
# (libgomp's default), they take the cores the decoders are measured on. Override to compare.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$work"
# protobuf-c: the system's, or the copy the GPU host gets in .deps/ (as the Makefile does)
protobuf=-lprotobuf-c
[ -f .deps/usr/lib/x86_64-linux-gnu/libprotobuf-c.a ] && protobuf=.deps/usr/lib/x86_64-linux-gnu/libprotobuf-c.a
if [ ! -s "$work/records/train-00000-of-00004" ]; then
  cc -O2 -std=gnu11 -Isrc scripts/bench_gen_images.c build/libnvcnn.a -o "$work/gen" \
    -lopenblas -ljpeg -lpng16 "$protobuf" -lz -lm -fopenmp -lpthread
  rm -rf "$work/images" && "$work/gen" "$work/images" "$images" 10
  ./nvcnn-mkrecords --input_dir="$work/images" --output_dir="$work/records" --shards=4 --overwrite >/dev/null
fi
echo "input pipeline: $images JPEGs 500x375 q90 -> 224x224 training crops, batch 64, $cores cores, OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
[ "${GPU_RATIO_ONLY:-0}" = 1 ] || printf "%8s %12s %18s\n" threads images/sec "per thread"
t=1
while [ "${GPU_RATIO_ONLY:-0}" != 1 ]; do
  out=$(./nvcnn --model=trivial --device=cpu --data_dir="$work/records" --num_classes=10 --batch_size=64 \
        --num_batches="$steps" --nstep_burnin=5 --display_every=100000 --input_threads=$t 2>&1)
  rate=$(sed -n 's/^Images\/sec: \([0-9.]*\).*/\1/p' <<<"$out")
  printf "%8d %12s %18s\n" "$t" "$rate" "$(awk -v r="$rate" -v t="$t" 'BEGIN{printf "%.1f", r/t}')"
  [ "$t" -ge "$cores" ] && break
  t=$((t * 2)); [ "$t" -gt "$cores" ] && t=$cores
done

# On a machine with a GPU: the real-data/synthetic ratio of GPU training (target: at least 0.95),
# resnet50 fp16 batch 256 by default (MODEL, BATCH, PRECISION, RATIO_STEPS override). Both runs
# use 10 classes, so that they build the same net.
if ./nvcnn --model=trivial --device=gpu --num_batches=2 --batch_size=8 >/dev/null 2>&1; then
  model=${MODEL:-resnet50}; batch=${BATCH:-256}; prec=${PRECISION:-fp16}; rsteps=${RATIO_STEPS:-60}
  common="--model=$model --batch_size=$batch --precision=$prec --device=gpu --num_classes=10 --num_batches=$rsteps --nstep_burnin=10 --display_every=100000"
  # a failed run leaves its figure empty ('failed' below) instead of ending the script
  syn=$(./nvcnn $common 2>&1 | sed -n 's/^Images\/sec: \([0-9.]*\).*/\1/p' || true)
  real=$(./nvcnn $common --data_dir="$work/records" 2>&1 | sed -n 's/^Images\/sec: \([0-9.]*\).*/\1/p' || true)
  echo "GPU $model $prec batch $batch: synthetic ${syn:-failed} img/s, real data ${real:-failed} img/s ($cores cores of decode)," \
       "ratio $(awk -v a="${real:-0}" -v b="${syn:-0}" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "n/a" }')"
else
  echo "no GPU backend run possible here: the real-data/synthetic GPU ratio is not measured"
fi
