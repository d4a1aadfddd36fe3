#!/usr/bin/env bash
# Emulates the CPUs the tests may run on, to choose thresholds with a measured margin: oneDNN's
# kernels capped with ONEDNN_MAX_CPU_ISA (SSE41, AVX2, AVX512_CORE) for the oneDNN CPU layers, and
# OpenBLAS's kernels forced with OPENBLAS_CORETYPE (Haswell: AVX2, SkylakeX: AVX-512, Zen,
# Sandybridge: AVX, Nehalem: SSE4.2 only) for the reference layers, each with 1 and 2 threads
# (OMP_NUM_THREADS).
#   scripts/sweep_cpus.sh e2e  [CORETYPE...]   Fashion-MNIST lenet, 2 epochs, the end-to-end test's
#                                              recipe (scripts/fashion_mnist.sh): validation top-1
#   scripts/sweep_cpus.sh unit [CORETYPE...]   the numeric unit tests: pass/fail and the worst
#                                              errors they print
# Prints a markdown table. Needs `make all build/run_tests` (and `make data` for e2e).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-e2e}
shift || true
cores=("$@")
[ ${#cores[@]} -gt 0 ] || cores=(Haswell SkylakeX Zen Sandybridge Nehalem)
isas=(${ONEDNN_ISAS:-SSE41 AVX2 AVX512_CORE}) # oneDNN's kernels, capped by ONEDNN_MAX_CPU_ISA
build=${NVCNN_BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unit_tests=(conv_ fc_ bn_ pool_ act_ concat_ dropout_ softmax_xent_ add_ spatial_avg flatten train_ core_ dist_two_ranks onednn_ models_reduced)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
case "$mode" in
e2e)
  echo
  echo "| CPU layers | emulated | threads | validation top-1 | wall |"
  echo "| --- | --- | --- | --- | --- |"
  run_e2e() { # impl label threads env...
    local impl=$1 label=$2 t=$3
    shift 3
    local s e out top1
    s=$(date +%s)
    out=$(env "$@" OMP_NUM_THREADS="$t" scripts/fashion_mnist.sh lenet 2 --device=cpu --cpu_impl="$impl" 2>&1)
    e=$(date +%s)
    top1=$(grep -o 'Validation Top-1: [0-9.]*' <<<"$out" | cut -d' ' -f3)
    echo "| $impl | $label | $t | ${top1:-failed} % | $((e - s)) s |"
  }
  if ./nvcnn --model=lenet --cpu_impl=onednn --num_batches=1 >/dev/null 2>&1; then
    for isa in "${isas[@]}"; do
      for t in 1 2; do run_e2e onednn "ONEDNN_MAX_CPU_ISA=$isa" "$t" ONEDNN_MAX_CPU_ISA="$isa" DNNL_MAX_CPU_ISA="$isa"; done
    done
  fi
  for c in "${cores[@]}"; do
    for t in 1 2; do run_e2e reference "OPENBLAS_CORETYPE=$c" "$t" OPENBLAS_CORETYPE="$c"; done
  done
  ;;
unit)
  echo
  echo "| OPENBLAS_CORETYPE | threads | result | worst errors printed |"
  echo "| --- | --- | --- | --- |"
  for c in "${cores[@]}"; do
    for t in 1 2; do
      # one test at a time: a test run beside others would get OMP_NUM_THREADS=1 from the runner
      out=$(NVCNN_PRINT_GRADCHECK=1 OPENBLAS_CORETYPE=$c OMP_NUM_THREADS=$t NVCNN_BUILD=$build "$build/run_tests" --jobs=1 "${unit_tests[@]}" 2>&1)
      summary=$(tail -1 <<<"$out")
      # "    conv backward: max relative error 2.63e-04" -> "conv backward 2.63e-04"
      # the largest per label, e.g. "conv0 (finite differences) 2.6e-04; softmax_xent 1.5e-05"
      worst=$(grep -E '^    [^/]*: max relative (error|difference) ' <<<"$out" |
        sed -E 's/^    ([^:]*): max relative (error|difference) ([0-9.e+-]+).*/\1\t\3/' |
        awk -F'\t' '{ if (!($1 in m) || $2 + 0 > m[$1] + 0) m[$1] = $2 } END { for (k in m) printf "%s %s; ", k, m[k] }')
      fails=$(grep '^FAIL' <<<"$out" | cut -d' ' -f2 | tr '\n' ' ')
      echo "| $c | $t | $summary ${fails:+($fails)} | ${worst:-n/a} |"
    done
  done
  ;;
*)
  echo "usage: $0 e2e|unit [CORETYPE...]" >&2
  exit 2
  ;;
esac
