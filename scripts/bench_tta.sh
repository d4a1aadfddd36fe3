#!/usr/bin/env bash
# Time to accuracy on Fashion-MNIST: nvcnn (scripts/fashion_mnist.sh MODEL EPOCHS: its recipe, the
# TFRecord shards of `make data`, PNG decode and augmentation while training) and its PyTorch peer
# (scripts/fashion_mnist_torch.py: the same network, initialisation, recipe and augmentation, the
# IDX files held in memory) each train until an evaluation on the 10,000 validation images (after
# every epoch) reaches TARGET top-1 %. Prints, per round, each one's wall time to the target (from
# starting the process to the end of the evaluation that reached it: start-up, data loading,
# decoding and every evaluation included), the epochs it took and the top-1 reached, and the
# ratio PyTorch / nvcnn; then the medians. The runs alternate (nvcnn, PyTorch, nvcnn, ...) so that
# other load on a shared machine hits both alike; the load average is printed with each run.
#   scripts/bench_tta.sh [ROUNDS]      (default 3; round k uses --seed=k on both sides)
#   FIRST=K          start at round (seed) K instead of 1: FIRST=3 scripts/bench_tta.sh 1 runs seed 3
#   MODEL=lenet      (the peer has lenet only)
#   TARGET=91.6      validation top-1 to reach, %
#   EPOCHS=15        the recipe's length: the learning rate decays to 0 over EPOCHS epochs; a run
#                    that ends without reaching TARGET is reported as such
#   THREADS=2        compute threads of both sides (nvcnn: OMP_NUM_THREADS; PyTorch: set_num_threads)
#   PYTHON=python3   an interpreter with torch and numpy (not needed by make test)
#   PEER_FORMAT=channels_last   the peer's memory format: channels_last (the default: PyTorch's
#                    fastest fp32 on the CPU, about 1.2x NCHW there) or nchw
#   PRECISION=fp32   or bf16: nvcnn --precision=bf16 against the peer under torch.autocast bf16 (needs
#                    a CPU whose oneDNN has bf16: avx512_core or later; nvcnn exits 2 naming it otherwise)
# Needs `make` and `make data` first.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
rounds=${1:-3}
case $rounds in '' | *[!0-9]* | 0) echo "bench_tta.sh: rounds must be a positive integer, got '$rounds'" >&2; exit 2 ;; esac
FIRST=${FIRST:-1}
case $FIRST in '' | *[!0-9]* | 0) echo "bench_tta.sh: FIRST must be a positive integer, got '$FIRST'" >&2; exit 2 ;; esac
MODEL=${MODEL:-lenet}
TARGET=${TARGET:-91.6}
EPOCHS=${EPOCHS:-15}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-python3}
PEER_FORMAT=${PEER_FORMAT:-channels_last}
case $PEER_FORMAT in channels_last) peer_fmt=(--channels_last) ;; nchw) peer_fmt=() ;;
  *) echo "bench_tta.sh: PEER_FORMAT must be channels_last or nchw, got '$PEER_FORMAT'" >&2; exit 2 ;; esac
PRECISION=${PRECISION:-fp32}
case $PRECISION in fp32) nv_prec=() peer_prec=() ;; bf16) nv_prec=(--precision=bf16) peer_prec=(--bf16) ;;
  *) echo "bench_tta.sh: PRECISION must be fp32 or bf16, got '$PRECISION'" >&2; exit 2 ;; esac
[ "$MODEL" = lenet ] || { echo "bench_tta.sh: the PyTorch peer trains lenet only" >&2; exit 2; }
[ -x ./nvcnn ] || { echo "bench_tta.sh: ./nvcnn is missing: run make first" >&2; exit 1; }
"$PYTHON" -c 'import torch, numpy' 2>/dev/null || { echo "bench_tta.sh: $PYTHON has no torch/numpy" >&2; exit 1; }
# the recipe, as fashion_mnist.sh gives it to nvcnn: the peer takes the same flags
mapfile -t recipe < <(PRINT_RECIPE=1 scripts/fashion_mnist.sh "$MODEL" "$EPOCHS")
[ ${#recipe[@]} -gt 0 ] || { echo "bench_tta.sh: no recipe from scripts/fashion_mnist.sh" >&2; exit 1; }
log=$(mktemp -d "${TMPDIR:-/tmp}/bench_tta.XXXXXX")

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $THREADS threads each"
echo "nvcnn: scripts/fashion_mnist.sh $MODEL $EPOCHS ${nv_prec[*]} --target_top1=$TARGET --seed=K"
echo "PyTorch: $PYTHON scripts/fashion_mnist_torch.py ${recipe[*]} ${peer_fmt[*]} ${peer_prec[*]} --target_top1=$TARGET --seed=K --threads=$THREADS"
echo "(logs in $log)"
echo
echo "| round | nvcnn: epochs | wall to $TARGET % | top-1 | load | PyTorch: epochs | wall to $TARGET % | top-1 | load | PyTorch / nvcnn |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
ratios=() nv_walls=() pt_walls=()
for k in $(seq "$FIRST" $((FIRST + rounds - 1))); do
  l0=$(load)
  s=$(now)
  OMP_NUM_THREADS=$THREADS scripts/fashion_mnist.sh "$MODEL" "$EPOCHS" "${nv_prec[@]}" --target_top1="$TARGET" --seed="$k" \
    >"$log/nvcnn-$k.txt" 2>&1
  rc=$?
  e=$(now)
  nv_wall=$(echo "$e - $s" | bc)
  # "Reached --target_top1=91.6 at step 13125 (epoch 14.00): validation top-1 91.640 %"
  reached=$(grep -m1 '^Reached --target_top1' "$log/nvcnn-$k.txt")
  if [ $rc -ne 0 ]; then
    nv_ep=failed nv_top1="exit $rc"
  elif [ -n "$reached" ]; then
    nv_ep=$(sed -n 's/.*(epoch \([0-9.]*\)).*/\1/p' <<<"$reached")
    nv_top1=$(sed -n 's/.*validation top-1 \([0-9.]*\) %.*/\1/p' <<<"$reached")
  else
    nv_ep="not reached in $EPOCHS"
    nv_top1=$(grep -o 'Validation Top-1: [0-9.]*' "$log/nvcnn-$k.txt" | cut -d' ' -f3)
  fi
  nv_load="$l0-$(load)"

  l0=$(load)
  s=$(now)
  "$PYTHON" scripts/fashion_mnist_torch.py "${recipe[@]}" "${peer_fmt[@]}" "${peer_prec[@]}" --target_top1="$TARGET" --seed="$k" --threads="$THREADS" \
    >"$log/pytorch-$k.txt" 2>&1
  rc=$?
  e=$(now)
  pt_wall=$(echo "$e - $s" | bc)
  # "peer: epochs=14.00 top1=91.640 reached=1 wall_s=..."
  last=$(grep '^peer: epochs=' "$log/pytorch-$k.txt" | tail -1)
  if [ $rc -ne 0 ] || [ -z "$last" ]; then
    pt_ep=failed pt_top1="exit $rc"
  else
    pt_top1=$(sed -n 's/.* top1=\([0-9.]*\).*/\1/p' <<<"$last")
    if grep -q 'reached=1' <<<"$last"; then
      pt_ep=$(sed -n 's/^peer: epochs=\([0-9.]*\).*/\1/p' <<<"$last")
    else
      pt_ep="not reached in $EPOCHS"
    fi
  fi
  pt_load="$l0-$(load)"

  ratio=-
  if [ -n "$reached" ] && [ "${pt_ep#not}" = "$pt_ep" ] && [ "$pt_ep" != failed ]; then
    ratio=$(echo "scale=2; $pt_wall / $nv_wall" | bc)
    ratios+=("$ratio")
    nv_walls+=("$nv_wall")
    pt_walls+=("$pt_wall")
  fi
  [ "$ratio" = - ] || ratio="${ratio}x"
  printf '| %d | %s | %.1f s | %s %% | %s | %s | %.1f s | %s %% | %s | %s |\n' "$k" "$nv_ep" "$nv_wall" "$nv_top1" "$nv_load" \
    "$pt_ep" "$pt_wall" "$pt_top1" "$pt_load" "$ratio"
done
if [ ${#ratios[@]} -gt 0 ]; then
  # median DECIMALS VALUE...
  median() { local d=$1; shift; printf '%s\n' "$@" | sort -g | awk -v d="$d" '{ v[NR] = $1 } END { printf "%.*f\n", d, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  echo
  echo "Median over the ${#ratios[@]} rounds where both reached $TARGET %: nvcnn $(median 1 "${nv_walls[@]}") s," \
    "PyTorch $(median 1 "${pt_walls[@]}") s; ratio PyTorch / nvcnn $(median 2 "${ratios[@]}")x"
fi
