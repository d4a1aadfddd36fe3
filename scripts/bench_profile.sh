#!/usr/bin/env bash
# The cost of --profile on the CPU backend. Each row's model trains the same steps without and with
# --profile=FILE (its profiled steps in the middle of the run), the two runs back to back (in turn
# one or the other first), ROUNDS times. From each step's time (the table's rows with --display_every=1: batch / Img/sec) it prints
# the median over the rounds of: the mean time of the profiled steps with --profile against the same
# steps without, and the same for every other step after the first 2 (those outside the profiled
# steps). The trace is written between the last profiled step and the next, in no step's time: its
# seconds are printed too (the run's wall clock with --profile against without).
# Usage: scripts/bench_profile.sh [rounds]     (default 3)
#   ROWS="lenet:64:60:21:3 resnet50:32:12:6:3"   model:batch:steps:first profiled step:steps profiled
#   THREADS=2   OMP_NUM_THREADS of both runs
#   MAXLOAD=0.5 the 1-minute load average above which it does not start (timings on a busy machine
#               say nothing); it prints the load average at the start and the end.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
rounds=${1:-3}
ROWS=${ROWS:-"lenet:64:60:21:3 resnet50:32:12:6:3"}
THREADS=${THREADS:-2}
MAXLOAD=${MAXLOAD:-0.5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x ./nvcnn ] || { echo "bench_profile.sh: ./nvcnn is missing: run make first" >&2; exit 1; }
load() { cut -d' ' -f1 /proc/loadavg; }
if awk -v l="$(load)" -v m="$MAXLOAD" 'BEGIN { exit !(l > m) }'; then
  echo "bench_profile.sh: load average $(load) > $MAXLOAD: the machine is busy, try later (MAXLOAD=... to override)" >&2
  exit 3
fi
echo "load average at the start: $(cat /proc/loadavg)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one run: its wall seconds on the first line, then "step seconds" per table row
run() { # model batch steps [profile flags...]
  local m=$1 b=$2 n=$3 t0 t1
  shift 3
  t0=$(date +%s.%N)
  OMP_NUM_THREADS=$THREADS ./nvcnn --model="$m" --device=cpu --batch_size="$b" --num_batches="$n" --nstep_burnin=2 \
    --display_every=1 "$@" >"$tmp/out" 2>&1 || { echo "failed"; cat "$tmp/out" >&2; return 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
  awk -v b="$b" '$1 ~ /^[0-9]+$/ && NF == 5 && $3 > 0 { printf "%d %.6f\n", $1, b / $3 }' "$tmp/out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-10s %6s %12s %12s %12s %12s %10s\n' model batch "step ms" "in profiled" "outside" "run +s" rounds
for row in $ROWS; do
  IFS=: read -r m b n first k <<<"$row"
  : >"$tmp/in"; : >"$tmp/out_r"; : >"$tmp/wall"; : >"$tmp/step"
  for ((r = 1; r <= rounds; r++)); do
    # odd rounds without first, even rounds with first: neither order favours one side
    if ((r % 2)); then
      run "$m" "$b" "$n" >"$tmp/a" || exit 1
      run "$m" "$b" "$n" --profile="$tmp/trace.json" --profile_steps="$first:$k" >"$tmp/p" || exit 1
    else
      run "$m" "$b" "$n" --profile="$tmp/trace.json" --profile_steps="$first:$k" >"$tmp/p" || exit 1
      run "$m" "$b" "$n" >"$tmp/a" || exit 1
    fi
    # per step: without, with; the ratio of the means over the profiled steps and over the others
    join <(tail -n +2 "$tmp/a" | sort -k1,1) <(tail -n +2 "$tmp/p" | sort -k1,1) >"$tmp/j"
    awk -v f="$first" -v k="$k" '$1 > 2 { if ($1 >= f && $1 < f + k) { ia += $2; ip += $3 } else { oa += $2; op += $3; n++ } }
      END { printf "%.6f %.6f %.6f\n", ip / ia, op / oa, oa / n }' "$tmp/j" >"$tmp/r"
    read -r rin rout step <"$tmp/r"
    echo "$rin" >>"$tmp/in"
    echo "$rout" >>"$tmp/out_r"
    echo "$step" >>"$tmp/step"
    echo "$(head -1 "$tmp/a") $(head -1 "$tmp/p")" | awk '{ print $2 - $1 }' >>"$tmp/wall"
    echo "  round $r: $m without $(head -1 "$tmp/a") s, with $(head -1 "$tmp/p") s; profiled steps x$rin, the others x$rout" >&2
  done
  printf '%-10s %6s %12.2f %+11.2f%% %+11.2f%% %12.2f %10d\n' "$m" "$b" "$(median <"$tmp/step" | awk '{ print $1 * 1e3 }')" \
    "$(median <"$tmp/in" | awk '{ print ($1 - 1) * 100 }')" "$(median <"$tmp/out_r" | awk '{ print ($1 - 1) * 100 }')" \
    "$(median <"$tmp/wall")" "$rounds"
done
echo "load average at the end: $(cat /proc/loadavg)"
