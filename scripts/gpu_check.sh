#!/usr/bin/env bash
# gpu_check.sh: every check a first run on a GPU machine needs, in one command, within GC_TOTAL
# (570 s: one call of at most 10 minutes on a lent machine) on a host with one H100 or H200 and 16
# cores; the stages' own times are below.
#
# Usage: scripts/gpu_check.sh [--only=STAGE[,STAGE...]] [--no-build] OUTDIR
#
# Stages, in order, each with its own time budget (seconds; BUDGET_<stage>=S overrides):
#   build     make -j$JOBS (JOBS: the cores; objects in NVCNN_BUILD, default build), its time 15
#   tests     every GPU test (run_tests gpu: each in its own process) and the parity table    225
#   sanitize  the parity tests under compute-sanitizer --tool memcheck, if the host has it     15
#   models    every model of --help in fp32 and fp16 (and tf32, bf16 for resnet50, resnet18),
#             20 steps: exit code, finite loss, img/s, peak GiB, algorithm-search seconds      50
#   peer      scripts/bench_gpu.sh's table next to the PyTorch peer, each row time-bounded     45
#   design    resnet50 batch 256 in fp16, then bf16, up a ladder that turns each step of the GPU
#             design on in turn (NCHW unfused call by call; --data_format=NHWC; --fuse=on;
#             --cuda_graph=on; DESIGN=full: all 8 combinations), 20 steps each, next to PyTorch
#             eager (channels_last), then torch.compile if it compiles in the time left; a flag
#             this nvcnn rejects skips its rows with nvcnn's message                           75
#   mpi       mpirun -np 2 on the one GPU (the MPI fallback): lenet 20 steps, and the ranks'
#             parameters bitwise identical and within 2e-3 of one CPU process (tests/mpi/mpi_train,
#             buckets of 25 and 0.02 MiB, the small ones three times and once deterministic)  25
#   input     scripts/bench_input.sh's GPU real-data/synthetic ratio (resnet50 fp16 bs256)     35
#   profile   googlenet fp16 batch 64 --profile in NHWC and in NCHW: the layers and types;
#             resnet50 fp16 at the default batch 64 --profile, and PyTorch eager at batch 64  60
#   cpubf16   where the host CPU has AVX-512 (oneDNN's bf16): the CPU bf16 tests (layers and
#             training steps against the fp32 reference, the CLI's bf16 run and resume), then
#             googlenet batch 32 on the CPU, 10 steps, fp32 and bf16 img/s, all cores            25
# (What the stages took on an H200, 2026-11-26: build 4.9-6.1 s, tests 197 (every GPU test, run
# one at a time), sanitize 10-14, models 157 (44 runs), peer 105, design 197 (with torch.compile),
# mpi 4-5 (before its mpi_train rows; 11 with them, 2026-11-27), input 29-47. The models and peer stages are the ones a
# second call gives more time: BUDGET_models=400 --only=models, say.) The whole run stays within GC_TOTAL seconds (570: one
# call of at most 10 minutes on a lent machine): a stage may use what the stages before it
# left of their budgets, never what the stages after it are owed; a stage that ignored its
# deadline is stopped 10 s past it. A stage that runs out of time is reported as such (with what
# it had done) and the script goes on. --only runs the stages named (the others need a build:
# run the build stage first, or keep the build of an earlier call); --no-build skips the build
# and uses the binaries there are. A second call can give one stage more time, e.g.
#   BUDGET_models=400 scripts/gpu_check.sh --only=models OUTDIR2
#
# Writes OUTDIR/summary.md (every table, each stage's status and wall time) and OUTDIR/log.txt
# (everything the stages printed), prints the summary, and exits 0 even when checks fail: the
# summary says which. Without a GPU it builds, says so in one line and exits 0. When NVIDIA's
# driver sees GPUs that the CUDA runtime cannot use (a driver older than the build's CUDA needs),
# it says so, naming the driver version needed, and exits 1. Usage errors exit 2.
set -uo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.." || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LC_ALL=C
B=${NVCNN_BUILD:-build} # the build directory (make's BUILD)
export NVCNN_BUILD=$B

# A GPU host's CUDA image may lack libraries that nvcnn links: scripts/gpu_deps.sh (run on Debian)
# puts Debian's into .deps/usr. Each is used only where the host has no library of that name: the
# linker finds them through LIBRARY_PATH (and OpenBLAS's cblas.h through CPATH), the programs
# through LD_LIBRARY_PATH, which names only the missing ones (.deps/rt), so that other programs
# (the PyTorch peer) keep the host's.
use_deps() {
  local d=$PWD/.deps/usr l s f
  l=$d/lib/x86_64-linux-gnu
  [ -d "$l" ] || return 0
  export LIBRARY_PATH=$l:$l/openblas-openmp${LIBRARY_PATH:+:$LIBRARY_PATH}
  ls /usr/include/cblas.h /usr/include/x86_64-linux-gnu/cblas.h >/dev/null 2>&1 ||
    export CPATH=$d/include/x86_64-linux-gnu/openblas-openmp${CPATH:+:$CPATH}
  mkdir -p .deps/rt
  for s in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libpng16.so.16; do
    ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$s " && continue
    f=$(ls "$l/$s" "$l/openblas-openmp/$s" 2>/dev/null | head -n 1)
    [ -n "$f" ] && ln -sf "$f" ".deps/rt/$s"
  done
  export LD_LIBRARY_PATH=$PWD/.deps/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
use_deps

STAGES="build tests sanitize models peer design mpi input profile cpubf16"
declare -A BUDGET=([build]=15 [tests]=225 [sanitize]=15 [models]=50 [peer]=45 [design]=75 [mpi]=25 [input]=35 [profile]=60 [cpubf16]=25)
declare -A TITLE=([build]="build" [tests]="GPU tests and parity table" [sanitize]="compute-sanitizer memcheck"
                  [models]="every model, 20 steps" [peer]="nvcnn and the PyTorch peer"
                  [design]="resnet50 b256: NCHW/NHWC, fusion, CUDA Graph" [mpi]="two ranks on one GPU (MPI)"
                  [input]="real data / synthetic on the GPU" [profile]="googlenet fp16: where NHWC loses; resnet50 at batch 64"
                  [cpubf16]="CPU bf16 on oneDNN, where the host CPU has AVX-512")

usage() {
  echo "gpu_check.sh: $1 (usage: scripts/gpu_check.sh [--only=STAGE[,STAGE...]] [--no-build] OUTDIR; stages: $STAGES)" >&2
  exit 2
}

now() { date +%s.%N; }
# seconds (1 decimal) from $1 to now
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# whole seconds left until the stage's deadline (GC_DEADLINE, epoch seconds)
left() { awk -v d="$GC_DEADLINE" -v n="$(now)" 'BEGIN { printf "%d", d - n }'; }
# $1 cut to fit a markdown cell: one line, '|' escaped
cell() { printf '%s' "$1" | tr '\n\r' '  ' | sed 's/|/\\|/g' | cut -c1-200; }
# the number after "PREFIX" in the text $2 ("" if none): $1 a sed regex before the number
grab() { sed -n "s/^$1\\([-0-9.eE+naif]*\\).*/\\1/p" <<<"$2" | tail -n 1; }

# ---------------------------------------------------------------------------------------------
# The stages. Each runs in a process of its own (the script calling itself with --stage=NAME)
# under a timeout that ends its whole process group; it appends markdown to $W/NAME.md as it
# goes, a one-line result to $W/NAME.note, and creates $W/NAME.fail when a check failed or
# $W/NAME.skip when it could not run here. Exit 10: it stopped itself at its deadline.

stage_build() {
  local jobs=${JOBS:-$(nproc)} t0 rc
  t0=$(now)
  make -j"$jobs" BUILD="$B" all "$B/run_tests" $(ls tests/mpi/*.c 2>/dev/null | sed "s|^tests/mpi/\(.*\)\.c\$|$B/tests/mpi/\1|")
  rc=$?
  local dt
  dt=$(since "$t0")
  {
    echo "\`make -j$jobs\`: exit $rc, ${dt} s"
    echo
    echo "nvcc: $( (/usr/local/cuda/bin/nvcc --version 2>/dev/null || nvcc --version 2>/dev/null) | tail -n 2 | head -n 1)"
    echo "nvcc flags: $(cat "$B/nvcc.flags" 2>/dev/null || echo '(no CUDA build)')"
  } >>"$W/build.md"
  echo "build ${dt} s, exit $rc" >"$W/build.note"
  [ "$rc" -eq 0 ] || touch "$W/build.fail"
}

stage_tests() {
  local names=() skipped_e2e="" n
  while read -r n; do
    if [[ $n == e2e_* ]] && [ ! -r data/fashion-mnist/train-00000-of-00008 ]; then
      skipped_e2e="$n"
      continue
    fi
    names+=("$n")
  done < <("$B/run_tests" --list gpu 2>/dev/null)
  if [ ${#names[@]} -eq 0 ]; then
    echo "no GPU tests listed: is $B/run_tests built?" >"$W/tests.note"
    touch "$W/tests.fail"
    return
  fi
  # each test within 120 s, one at a time (they share the GPU); the runner stopped 3 s before the
  # deadline (it ends its running test)
  local limit=$(( $(left) - 3 ))
  [ "$limit" -lt 10 ] && limit=10
  timeout --foreground -k 3 "$limit" "$B/run_tests" --jobs=1 --timeout=120 "${names[@]}" | tee "$W/tests.out"
  {
    echo "| test | result | seconds or reason |"
    echo "|---|---|---|"
    sed -n -E 's/^(PASS|FAIL|SKIP) ([A-Za-z0-9_]+):? ?(.*)$/| \2 | \1 | \3 |/p' "$W/tests.out" | sed 's/| (\(.*\)) |$/| \1 |/'
    [ -n "$skipped_e2e" ] && echo "| $skipped_e2e | not run | data/fashion-mnist absent (make data on Debian, or carry it: 55 MB) |"
    echo
    echo "Limits, test by test: every GPU test that ran, its parity rows, and the row nearest its limit (value / limit:"
    echo "above 1 it failed; near 1, the limit is too tight for this GPU; far below 1, it could be tighter). Sorted by that share."
    echo
    echo "| test | result | rows | worst row | precision | value | limit | value / limit |"
    echo "|---|---|---:|---|---|---:|---:|---:|"
    limits_table "$W/tests.out"
    echo
    echo "Parity (GPU against the CPU reference or a double-precision one; max rel: the figure held against the tolerance):"
    echo
    echo "| test | what | precision | max abs | max rel | tolerance | result |"
    echo "|---|---|---|---:|---:|---:|---|"
    sed -n 's/^    parity | \(.*\)$/| \1 |/p' "$W/tests.out"
  } >>"$W/tests.md"
  local summary worst
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$W/tests.out" | tail -n 1)
  worst=$(limits_table "$W/tests.out" | awk -F'|' '$9 ~ /[0-9]/ { gsub(/ /, "", $2); gsub(/ /, "", $9); print $9 " (" $2 ")"; exit }')
  echo "${summary:-no summary line (the runner was stopped)}; parity rows: $(grep -c '^    parity | ' "$W/tests.out"), failed: $(grep -c '^    parity | .*| FAIL$' "$W/tests.out"); nearest a limit: ${worst:-none}" >"$W/tests.note"
  if [ -z "$summary" ] || ! grep -q ' 0 failed' <<<"$summary"; then touch "$W/tests.fail"; fi
}

# The per-test table of stage_tests from a runner's output ($1): each test that passed or failed,
# how many parity rows it printed, its row with the largest value / limit (a limit of 0: an exact
# comparison, whose share is 0 when it held and inf when not; an inf or NaN value: inf), sorted by
# that share, largest first.
# Tests without rows end the table: those with no numeric limit, and any that should have one.
limits_table() {
  awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    /^(PASS|FAIL) [A-Za-z0-9_]+/ { split($0, w, " "); result[w[2]] = w[1]; order[++n] = w[2]; next }
    /^    parity \| / {
      t = trim($2); v = trim($6) + 0; lim = trim($7) + 0
      share = trim($6) ~ /[iI][nN][fF]|[nN][aA][nN]/ ? "inf" : lim > 0 ? v / lim : (v > 0 ? "inf" : 0)
      rows[t]++
      if (!(t in best) || (share == "inf") || (best[t] != "inf" && share + 0 > best[t] + 0)) {
        best[t] = share; what[t] = trim($3); prec[t] = trim($4); val[t] = trim($6); limv[t] = trim($7)
      }
    }
    END {
      for (i = 1; i <= n; i++) {
        t = order[i]
        if (t in rows) {
          s = best[t] == "inf" ? 1e300 : best[t]
          printf "%.6e\t| %s | %s | %d | %s | %s | %s | %s | %s |\n", s, t, result[t], rows[t], what[t], prec[t], val[t], limv[t],
                 best[t] == "inf" ? "inf" : sprintf("%.2f", best[t])
        } else {
          printf "-1\t| %s | %s | 0 | (no parity rows: no numeric limit) | | | | |\n", t, result[t]
        }
      }
    }' "$1" | sort -t "$(printf '\t')" -k1,1 -g -r | cut -f2-
}

stage_sanitize() {
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -z "$cs" ]; then
    echo "compute-sanitizer is not on this host" >"$W/sanitize.note"
    touch "$W/sanitize.skip"
    return
  fi
  {
    echo "\`$cs --tool memcheck\` over each parity test (run in the runner's process: --inline)"
    echo
    echo "| test | memcheck errors | test result | exit | seconds |"
    echo "|---|---:|---|---:|---:|"
  } >>"$W/sanitize.md"
  local t total=0 bad=0
  for t in gpu_conv_matches_cpu gpu_bn_pool_reshape_match_cpu gpu_activations_match_cpu gpu_tf32_fp16_bf16_layers_match_cpu \
           gpu_dropout_mask_law_and_backward gpu_staged_batches_match_host_conversion; do
    local lim=$(( $(left) - 2 ))
    if [ "$lim" -lt 5 ]; then
      echo "| $t | not run (stage budget) | | | |" >>"$W/sanitize.md"
      continue
    fi
    local t0 rc out errs res
    t0=$(now)
    out=$(timeout --foreground -k 5 "$lim" "$cs" --tool memcheck --error-exitcode 99 --print-limit 50 \
          "$B/run_tests" --inline "$t" 2>&1)
    rc=$?
    echo "$out"
    errs=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' <<<"$out" | tail -n 1)
    res=$(grep -E "^(PASS|FAIL|SKIP) $t" <<<"$out" | cut -d' ' -f1)
    [ "$rc" -eq 124 ] && res="timed out after $lim s"
    echo "| $t | ${errs:-?} | ${res:-?} | $rc | $(since "$t0") |" >>"$W/sanitize.md"
    total=$((total + ${errs:-0}))
    if [ "${errs:-1}" != 0 ] || [ "$rc" -ne 0 ]; then bad=$((bad + 1)); fi
    # the first findings, for the summary
    grep -E '^=========     (Invalid|Address|Program hit|Out-of-range|Misaligned)|^=========     at ' <<<"$out" | head -n 6 |
      sed 's/^/    /' >>"$W/sanitize.findings"
  done
  if [ -s "$W/sanitize.findings" ]; then
    { echo; echo "First findings:"; echo; echo '```'; cat "$W/sanitize.findings"; echo '```'; } >>"$W/sanitize.md"
  fi
  echo "$total memcheck error(s); $bad test(s) with errors or a non-zero exit" >"$W/sanitize.note"
  [ "$bad" -eq 0 ] || touch "$W/sanitize.fail"
}

# A batch per model that fits an 80 GB GPU in fp32 with room to spare and keeps 20 steps short
# (the peer stage measures speed at the usual batches).
model_batch() {
  case $1 in
    trivial | lenet | alexnet) echo 128 ;;
    resnet18 | resnet34 | resnet50 | overfeat | googlenet) echo 64 ;;
    *) echo 32 ;;
  esac
}

stage_models() {
  local models m p list=()
  models=$(./nvcnn --help | awk '/^Models:/ { on = 1; next } on && NF >= 2 { print $1 }')
  for p in fp32 tf32 fp16 bf16; do list+=("resnet50:$p"); done
  for p in fp32 tf32 fp16 bf16; do list+=("resnet18:$p"); done
  for m in $models; do
    [ "$m" = resnet50 ] || [ "$m" = resnet18 ] || list+=("$m:fp16" "$m:fp32")
  done
  {
    echo "| model | precision | batch | exit | loss finite | last loss | img/s | nvcnn GiB | search s | wall s |"
    echo "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"
  } >>"$W/models.md"
  local spec ok=0 bad=0 notrun=0
  for spec in "${list[@]}"; do
    m=${spec%%:*}
    p=${spec#*:}
    local batch lim t0 out rc
    batch=$(model_batch "$m")
    while :; do
      lim=$(( $(left) - 2 ))
      [ "$lim" -gt 60 ] && lim=60
      if [ "$lim" -lt 8 ]; then rc=-1; break; fi
      t0=$(now)
      out=$(timeout --foreground -k 5 "$lim" ./nvcnn --model="$m" --precision="$p" --device=gpu --batch_size="$batch" \
            --num_batches=20 --nstep_burnin=5 --display_every=1 2>&1)
      rc=$?
      printf '== %s %s batch %s: exit %s\n%s\n' "$m" "$p" "$batch" "$rc" "$out"
      # exit 3: the batch does not fit; try half of it
      if [ "$rc" -eq 3 ] && [ "$batch" -gt 8 ]; then batch=$((batch / 2)); continue; fi
      break
    done
    if [ "$rc" -eq -1 ]; then
      echo "| $m | $p | $batch | not run (stage budget) | | | | | | |" >>"$W/models.md"
      notrun=$((notrun + 1))
      continue
    fi
    # the training table's rows: step epoch img/s loss lr
    local losses finite last rate peak search
    losses=$(awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { print $4 }' <<<"$out")
    last=$(tail -n 1 <<<"$losses")
    if [ -z "$losses" ]; then finite="-"; elif grep -qiE 'nan|inf' <<<"$losses"; then finite="NO"; else finite="yes"; fi
    rate=$(grab 'Images\/sec: ' "$out")
    peak=$(grab 'GPU memory: ' "$out")
    search=$(grab 'cuDNN algorithm search: ' "$out")
    local code=$rc
    [ "$rc" -eq 124 ] && code="timed out ($lim s)"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && code="$rc: $(cell "$(grep -m1 'error' <<<"$out")")"
    echo "| $m | $p | $batch | $code | $finite | ${last:--} | ${rate:--} | ${peak:--} | ${search:--} | $(since "$t0") |" >>"$W/models.md"
    if [ "$rc" -eq 0 ] && [ "$finite" = yes ]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  done
  echo "$ok run(s) fine, $bad failed or non-finite, $notrun not run (stage budget)" >"$W/models.note"
  [ "$bad" -eq 0 ] || touch "$W/models.fail"
  [ "$notrun" -eq 0 ] || return 10
}

stage_peer() {
  local py=${PYTHON:-python3}
  if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
    echo "PyTorch (torch, torchvision) is not importable with $py" >"$W/peer.note"
    touch "$W/peer.skip"
    return
  fi
  local out
  # rows by importance: resnet50 fp16 first, then googlenet fp16 (its NHWC kernels of 2026-11-27,
  # unmeasured), bf16, fp32; tf32 last (PyTorch's tf32 run outlasted the 26 s left to it on
  # 2026-11-27); 20 timed steps after 5; each run stopped at the deadline
  out=$(ROWS=${PEER_ROWS:-"resnet50:256:fp16 googlenet:256:fp16 resnet50:256:bf16 resnet50:256:fp32 alexnet:512:fp16 resnet152:128:fp16 vgg16:128:fp16 resnet50:256:tf32"} \
        BURNIN=5 ROW_TIMEOUT=60 DEADLINE=$(( $(date +%s) + $(left) - 2 )) PYTHON="$py" scripts/bench_gpu.sh 20 2>&1 |
        tee -a /dev/stderr)
  echo "$out" >>"$W/peer.md"
  local rows failed
  rows=$(grep -c '^| [a-z]' <<<"$out")
  failed=$(grep '^| [a-z]' <<<"$out" | grep -c 'failed\|timed out\|not run')
  echo "$((rows - 1)) row(s), $failed with a failed, timed-out or missing run" >"$W/peer.note"
  [ "$failed" -eq 0 ] || touch "$W/peer.fail"
}

# resnet50 at batch 256, fp16 and bf16, with each step of the GPU design on and off: what each is
# worth. A flag this nvcnn does not know (a build without that step) is left out where its value
# is the "off" one (the build computes that way: noted) and its "on" rows say so; a value nvcnn
# refuses (exit 2, its one line naming the flag) is a row that says so; the rest go on. The
# PyTorch rows: eager (channels_last, as bench_gpu_peer.py does in 16 bits) and torch.compile,
# the compilation untimed and bounded by what the stage has left.
declare -A DESIGN_KNOWN
design_probe() {
  local f
  for f in data_format fuse cuda_graph; do
    if grep -q "unknown flag --$f" <<<"$(./nvcnn --"$f"=x --help 2>&1)"; then DESIGN_KNOWN[$f]=0; else DESIGN_KNOWN[$f]=1; fi
  done
}

design_row() {
  local p=$1 df=$2 fu=$3 cg=$4 lim out rc rate search args=() note="" f v off
  for f in data_format:"$df":NCHW fuse:"$fu":off cuda_graph:"$cg":off; do
    IFS=: read -r f v off <<<"$f"
    if [ "${DESIGN_KNOWN[$f]}" = 1 ]; then
      args+=("--$f=$v")
    elif [ "$v" = "$off" ]; then
      note+="no --$f in this build; "
    else
      echo "| nvcnn | $p | $df | $fu | $cg | skipped: this build has no --$f | |" >>"$W/design.md"
      echo skip
      return 0
    fi
  done
  lim=$(( $(left) - 2 ))
  [ "$lim" -gt 60 ] && lim=60
  if [ "$lim" -lt 8 ]; then
    echo "| nvcnn | $p | $df | $fu | $cg | not run (stage budget) | |" >>"$W/design.md"
    return 10
  fi
  out=$(timeout --foreground -k 5 "$lim" ./nvcnn --model=resnet50 --precision="$p" --device=gpu --batch_size=256 --num_batches=20 \
        --nstep_burnin=5 --display_every=10 "${args[@]}" 2>&1)
  rc=$?
  printf '== resnet50 %s %s: exit %s\n%s\n' "$p" "${args[*]}" "$rc" "$out" >&2
  rate=$(grab 'Images\/sec: ' "$out")
  search=$(grab 'cuDNN algorithm search: ' "$out")
  local err
  err=$(grep -m1 'error' <<<"$out")
  if [ "$rc" -eq 2 ] && grep -qE -- '--(data_format|fuse|cuda_graph)' <<<"$err"; then
    echo "| nvcnn | $p | $df | $fu | $cg | skipped: $(cell "$err") | |" >>"$W/design.md"
    echo skip
    return 0
  fi
  if [ "$rc" -ne 0 ] || [ -z "$rate" ]; then
    local why="exit $rc"
    [ "$rc" -eq 124 ] && why="timed out ($lim s)"
    echo "| nvcnn | $p | $df | $fu | $cg | failed ($why): $(cell "$(grep -m1 -i 'error' <<<"$out")") | $note |" >>"$W/design.md"
    echo fail
    return 0
  fi
  echo "| nvcnn | $p | $df | $fu | $cg | $rate | ${note}${search:--} s search |" >>"$W/design.md"
  echo ok
}

# One PyTorch row of the design stage: precision, "" (eager) or --compile (compiled in the
# untimed warm-up, bounded by what the stage has left).
design_peer_row() {
  local p=$1 compile=$2 py=${PYTHON:-python3} lim out rate note
  lim=$(( $(left) - 2 ))
  [ -z "$compile" ] && [ "$lim" -gt 60 ] && lim=60
  if [ "$lim" -lt 10 ]; then
    echo "| PyTorch ${compile:+torch.compile}${compile:-eager} | $p | channels_last | | | not run (stage budget) | |" >>"$W/design.md"
    return 0
  fi
  out=$(timeout --foreground -k 5 "$lim" "$py" scripts/bench_gpu_peer.py --model resnet50 --batch 256 --precision "$p" --steps 20 \
        --warmup 5 $compile 2>&1)
  echo "$out" >&2
  rate=$(sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1)
  note=$(sed -n 's/.*\(compile_s=[0-9.]*\).*/\1 (untimed)/p' <<<"$out" | tail -n 1)
  [ -n "$rate" ] || rate="failed or timed out ($lim s): $(cell "$(tail -n 1 <<<"$out")")"
  echo "| PyTorch ${compile:+torch.compile}${compile:-eager} | $p | channels_last | | | $rate | $note |" >>"$W/design.md"
}

stage_design() {
  {
    echo "| run | precision | data format | fusion | CUDA Graph | img/s | note |"
    echo "|---|---|---|---|---|---:|---|"
  } >>"$W/design.md"
  local p df fu cg r ok=0 skipped=0 failed=0 notrun=0 rungs
  design_probe
  # the ladder: each rung turns one step of the design on, so that consecutive rows say what that
  # step is worth (DESIGN=full: all 8 combinations instead of the 4 rungs)
  if [ "${DESIGN:-ladder}" = full ]; then
    rungs="NCHW:off:off NCHW:off:on NCHW:on:off NCHW:on:on NHWC:off:off NHWC:off:on NHWC:on:off NHWC:on:on"
  else
    rungs="NCHW:off:off NHWC:off:off NHWC:on:off NHWC:on:on"
  fi
  local py=${PYTHON:-python3} have_torch=1
  "$py" -c 'import torch, torchvision' 2>/dev/null || have_torch=0
  [ $have_torch = 1 ] || echo "| PyTorch | | | | | not run: torch, torchvision not importable with $py | |" >>"$W/design.md"
  # fp16's rungs and PyTorch eager, then bf16's, then torch.compile with what is left
  for p in fp16 bf16; do
    for r in $rungs; do
      IFS=: read -r df fu cg <<<"$r"
      r=$(design_row "$p" "$df" "$fu" "$cg" | tail -n 1)
      case $r in ok) ok=$((ok + 1)) ;; skip) skipped=$((skipped + 1)) ;; fail) failed=$((failed + 1)) ;; *) notrun=$((notrun + 1)) ;; esac
    done
    [ $have_torch = 1 ] && design_peer_row "$p" ""
  done
  if [ $have_torch = 1 ]; then
    for p in fp16 bf16; do design_peer_row "$p" --compile; done
  fi
  echo "nvcnn: $ok run(s), $skipped skipped (flag not in this build), $failed failed, $notrun not run (stage budget)" >"$W/design.note"
  [ "$failed" -eq 0 ] || touch "$W/design.fail"
  [ "$notrun" -eq 0 ] || return 10
}

stage_mpi() {
  if ! command -v mpirun >/dev/null; then
    echo "no mpirun on this host" >"$W/mpi.note"
    touch "$W/mpi.skip"
    return
  fi
  local mr="mpirun -np 2 --oversubscribe --allow-run-as-root -x CUDA_VISIBLE_DEVICES=0" out rc lim
  lim=$(( $(left) / 2 ))
  out=$(timeout --foreground -k 5 "$lim" $mr ./nvcnn --model=lenet --device=gpu --allreduce=mpi --num_classes=10 --batch_size=64 \
        --num_batches=20 --display_every=5 --nstep_burnin=5 2>&1)
  rc=$?
  echo "$out"
  local line ok1=no
  line=$(grep -m1 '^Backward: ' <<<"$out")
  [ "$rc" -eq 0 ] && grep -q 'allreduce on (mpi)' <<<"$out" && ok1=yes
  {
    echo "| run | exit | result |"
    echo "|---|---:|---|"
    echo "| nvcnn lenet, 2 ranks on GPU 0, --allreduce=mpi, 20 steps | $rc | $ok1: $(cell "${line:-no Backward line}") |"
  } >>"$W/mpi.md"
  # mpi_train: the ranks' parameters bitwise identical and within 2e-3 of one CPU process (as
  # dist_gpu_ranks_stay_identical_mpi_and_nccl); buckets of 25 MiB (lenet in one) and of 0.02 MiB
  # (13 buckets) three times, since the H200 of 2026-11-26 failed the small buckets in 3 of 5 runs
  # (0.80) with identical ranks; det: cuDNN's deterministic algorithms (a Find-dependent fault
  # passes there)
  local ranks identical maxrel ok2=yes args skipped where
  for args in "25 20 gpu-mpi" "0.02 6 gpu-mpi" "0.02 6 gpu-mpi" "0.02 6 gpu-mpi" "0.02 6 gpu-mpi det"; do
    lim=$(( $(left) - 2 ))
    [ "$lim" -gt 5 ] || { echo "| mpi_train $args | | not run (stage budget) |" >>"$W/mpi.md"; continue; }
    out=$(timeout --foreground -k 5 "$lim" $mr "$B/tests/mpi/mpi_train" $args 2>&1)
    rc=$?
    echo "$out"
    ranks='' identical='' maxrel=''
    line=$(grep -m1 '^train ranks ' <<<"$out")
    read -r _ _ ranks _ identical _ maxrel <<<"$line"
    skipped=$(grep -m1 "^losses $(cut -d' ' -f3 <<<"$args")" <<<"$out" | sed -n 's/.*(\([0-9]*\) skipped).*/\1/p')
    where=$(grep -m1 '^largest difference' <<<"$out")
    local ok=no
    [ "$rc" -eq 0 ] && [ "${identical:-0}" = 1 ] && awk -v m="${maxrel:-1}" 'BEGIN { exit !(m <= 2e-3) }' && ok=yes
    [ "$ok" = yes ] || ok2=no
    echo "| mpi_train $args (bucket MiB, steps, mode), 2 ranks on GPU 0 | $rc | $ok: ranks ${ranks:-?}, bitwise identical: ${identical:-?}, max relative difference to one CPU process: ${maxrel:-?} (limit 2e-3); GPU steps skipped: ${skipped:-?}; $(cell "${where:-}") |" >>"$W/mpi.md"
  done
  echo "nvcnn: $ok1; mpi_train ranks identical and within 2e-3 of one process: $ok2" >"$W/mpi.note"
  [ "$ok1" = yes ] && [ "$ok2" = yes ] || touch "$W/mpi.fail"
}

stage_input() {
  local out ratio
  out=$(GPU_RATIO_ONLY=1 MODEL=resnet50 BATCH=256 PRECISION=fp16 RATIO_STEPS=40 BENCH_DIR="$W/input" scripts/bench_input.sh 2000 2>&1 |
        tee -a /dev/stderr)
  local line
  line=$(grep -m1 '^GPU \|^no GPU backend run' <<<"$out")
  ratio=$(sed -n 's/.*ratio \([0-9.]*\).*/\1/p' <<<"$line")
  { echo "$(grep -m1 '^input pipeline:' <<<"$out")"; echo; echo "${line:-no ratio line: see log.txt}"; } >>"$W/input.md"
  echo "ratio ${ratio:-not measured} (target >= 0.95)" >"$W/input.note"
  [ -n "$ratio" ] || touch "$W/input.fail"
}

# googlenet fp16 batch 64 ran at 1,858 img/s in NHWC (the 16-bit default) against 2,380 in fp32 NCHW
# on the H200 of 2026-11-27, where 16 bits should be the faster: --profile of both layouts (layers
# and types, wall clock per layer) says which layers NHWC loses in.
# One nvcnn --profile run into the log and profile.md: title, exit code, the profile's first N lines, output
profile_report() {
  local title=$1 rc=$2 lines=$3 out=$4
  printf '== %s: exit %s\n%s\n' "$title" "$rc" "$out"
  {
    echo "$title: exit $rc, $(grep -m1 '^Images/sec' <<<"$out" || echo 'no Images/sec line')"
    echo
    echo '```'
    awk -v m="$lines" '/^Profile of steps/ { on = 1 } on && n < m { print; n++ } /^  by type:/ { print } /^  not in any layer/ { print }' <<<"$out" |
      awk '!seen[$0]++'
    echo '```'
    echo
  } >>"$W/profile.md"
  [ "$rc" -eq 0 ] || touch "$W/profile.fail"
}

stage_profile() {
  local f out rc lim
  for f in NHWC NCHW; do
    lim=$(( $(left) - 2 ))
    [ "$lim" -gt 40 ] && lim=40
    if [ "$lim" -lt 8 ]; then echo "googlenet fp16 $f: not run (stage budget)" >>"$W/profile.md"; echo >>"$W/profile.md"; continue; fi
    out=$(timeout --foreground -k 5 "$lim" ./nvcnn --model=googlenet --precision=fp16 --device=gpu --data_format="$f" --batch_size=64 \
          --num_batches=10 --nstep_burnin=3 --profile="$W/googlenet-$f.json" --profile_steps=5:3 2>&1)
    profile_report "googlenet fp16 batch 64, --data_format=$f" $? 16 "$out"
  done
  # resnet50 fp16 at the default batch (64): 3,494 img/s on the H200 of 2026-11-27 against 6,169 at
  # batch 256, a fixed cost of several ms a step; its profile ("not in any layer" and the layers) and
  # PyTorch at the same batch say whether that is nvcnn's or the GPU's at that size
  lim=$(( $(left) - 2 )); [ "$lim" -gt 30 ] && lim=30
  if [ "$lim" -ge 10 ]; then
    out=$(timeout --foreground -k 5 "$lim" ./nvcnn --model=resnet50 --precision=fp16 --device=gpu --batch_size=64 \
          --num_batches=12 --nstep_burnin=4 --profile="$W/resnet50-b64.json" --profile_steps=6:4 2>&1)
    profile_report "resnet50 fp16 batch 64 (NHWC, fused, CUDA Graph off under --profile)" $? 12 "$out"
  else
    echo "resnet50 fp16 batch 64: not run (stage budget)" >>"$W/profile.md"
  fi
  lim=$(( $(left) - 2 )); [ "$lim" -gt 45 ] && lim=45
  if [ "$lim" -ge 15 ]; then
    out=$(timeout --foreground -k 5 "$lim" "${PYTHON:-python3}" scripts/bench_gpu_peer.py --model resnet50 --batch 64 --precision fp16 \
          --steps 30 --warmup 5 2>&1)
    echo "$out" >&2
    echo "PyTorch eager resnet50 fp16 batch 64 channels_last: $(sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1 | grep . ||
      echo "failed or timed out ($lim s): $(cell "$(tail -n 1 <<<"$out")")")" >>"$W/profile.md"
  else
    echo "PyTorch resnet50 fp16 batch 64: not run (stage budget)" >>"$W/profile.md"
  fi
  echo "googlenet fp16 --profile, NHWC and NCHW; resnet50 fp16 batch 64 and its peer: $(grep -c '^googlenet\|^resnet50' "$W/profile.md") nvcnn run(s)" >"$W/profile.note"
}

# CPU bf16 (--precision=bf16 --device=cpu) needs oneDNN's avx512_core: the GPU host's CPU may have
# it where the development machines have AVX2 only (there the tests ran on an emulated CPU,
# scripts/avx512_guest.sh, which proves behaviour, not speed)
stage_cpubf16() {
  if ! grep -qw avx512f /proc/cpuinfo; then
    echo "the host CPU has no AVX-512: no bf16 in oneDNN here (make test checks the refusal)" >"$W/cpubf16.note"
    touch "$W/cpubf16.skip"
    return
  fi
  local lim out p line
  lim=$(( $(left) - 10 )); [ "$lim" -lt 5 ] && lim=5
  out=$(timeout --foreground -k 3 "$lim" "$B/run_tests" --jobs=2 onednn_bf16_layers_match_fp32_reference \
        onednn_bf16_training_steps_match_fp32_reference cli_bf16_on_cpu_names_the_instruction_set 2>&1)
  echo "$out" >&2
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
  { echo "CPU bf16 tests: ${line:-did not finish in $lim s}"; echo; } >>"$W/cpubf16.md"
  grep -q ', 0 failed' <<<"$line" || touch "$W/cpubf16.fail"
  for p in fp32 bf16; do
    lim=$(( $(left) - 1 ))
    if [ "$lim" -lt 5 ]; then echo "googlenet CPU $p: not run (stage budget)" >>"$W/cpubf16.md"; continue; fi
    out=$(OMP_NUM_THREADS=$(nproc) timeout --foreground -k 2 "$lim" ./nvcnn --model=googlenet --device=cpu --precision=$p \
          --batch_size=32 --num_batches=10 --nstep_burnin=3 2>&1)
    echo "$out" >&2
    echo "googlenet CPU $p batch 32, $(nproc) threads: $(grep -m1 '^Images/sec' <<<"$out" || echo "no Images/sec line: $(cell "$(tail -n 1 <<<"$out")")")" >>"$W/cpubf16.md"
  done
  head -n 1 "$W/cpubf16.md" >"$W/cpubf16.note"
}

# ---------------------------------------------------------------------------------------------
# One stage, run by the script itself under its timeout.
case ${1:-} in
  --stage=*)
    name=${1#--stage=}
    W=$2
    "stage_$name"
    exit $?
    ;;
esac

only="" build=1 out=""
for a in "$@"; do
  case $a in
    --only=*) only=$(tr ',' ' ' <<<"${a#--only=}") ;;
    --no-build) build=0 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$self"; exit 0 ;;
    -*) usage "unknown option $a" ;;
    *) [ -z "$out" ] || usage "one OUTDIR, got '$out' and '$a'"; out=$a ;;
  esac
done
[ -n "$out" ] || usage "OUTDIR is missing"
for s in $only; do [[ " $STAGES " == *" $s "* ]] || usage "unknown stage '$s'"; done
selected=""
for s in $STAGES; do
  if [ -n "$only" ]; then [[ " $only " == *" $s "* ]] && selected+="$s "; else selected+="$s "; fi
done
if [ "$build" = 0 ]; then selected=${selected/build /}; fi
mkdir -p "$out" || usage "cannot create $out"
out=$(cd "$out" && pwd)
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT
log=$out/log.txt
: >"$log"
total=${GC_TOTAL:-570}
run_start=$(now)
run_deadline=$(awk -v a="$run_start" -v t="$total" 'BEGIN { printf "%.0f", a + t }')
declare -A STATUS WALL
for s in $STAGES; do STATUS[$s]="not run"; WALL[$s]=""; done
[ "$build" = 1 ] || STATUS[build]="not run (--no-build)"

# The budget of stage $1: what is left of the run less what the selected stages after it are owed.
budget_of() {
  local later=0 seen=0 s
  for s in $selected; do
    if [ "$seen" = 1 ]; then later=$((later + ${BUDGET[$s]})); fi
    [ "$s" = "$1" ] && seen=1
  done
  local own_override
  own_override=$(printenv "BUDGET_$1" || true)
  local b
  b=$(awk -v d="$run_deadline" -v n="$(now)" -v l="$later" 'BEGIN { printf "%d", d - n - l }')
  if [ -n "$own_override" ]; then b=$own_override; fi
  echo "$b"
}

run_stage() {
  local s=$1 b t0 rc
  b=$(budget_of "$s")
  if [ "$b" -lt 5 ]; then
    STATUS[$s]="not run (no time left)"
    return
  fi
  echo "gpu_check: $s (${TITLE[$s]}), budget $b s" | tee -a "$log"
  t0=$(now)
  GC_DEADLINE=$(awk -v n="$t0" -v b="$b" 'BEGIN { printf "%.0f", n + b }') \
    timeout -k 5 $((b + 10)) "$self" --stage="$s" "$W" >>"$log" 2>&1
  rc=$?
  WALL[$s]=$(since "$t0")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$rc" -eq 10 ]; then
    STATUS[$s]="OUT OF BUDGET ($b s)"
  elif [ -e "$W/$s.skip" ]; then
    STATUS[$s]="skipped"
  elif [ -e "$W/$s.fail" ]; then
    STATUS[$s]="FAILED"
  elif [ "$rc" -ne 0 ]; then
    STATUS[$s]="ERROR (exit $rc)"
  else
    STATUS[$s]="ok"
  fi
  echo "gpu_check: $s: ${STATUS[$s]} (${WALL[$s]} s) $(cat "$W/$s.note" 2>/dev/null)" | tee -a "$log"
}

write_summary() {
  local f=$out/summary.md s
  {
    echo "# GPU check"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname), $(nproc) cores"
    if git rev-parse --short HEAD >/dev/null 2>&1; then
      echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    else
      echo "- commit: (not a git checkout)"
    fi
    echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | paste -sd ';' - | grep . || echo '(no nvidia-smi)')"
    echo "- device: ${gpu_line:-?}"
    echo "- host CPU: ${cpu_line:-?}"
    echo "- total: $(since "$run_start") s of $total s"
    echo
    echo "| stage | status | wall s | result |"
    echo "|---|---|---:|---|"
    for s in $STAGES; do
      echo "| $s | ${STATUS[$s]} | ${WALL[$s]} | $(cell "$(cat "$W/$s.note" 2>/dev/null)") |"
    done
    for s in $STAGES; do
      [ -s "$W/$s.md" ] || continue
      echo
      echo "## $s: ${TITLE[$s]} (${STATUS[$s]})"
      echo
      cat "$W/$s.md"
    done
  } >"$f"
}

# The build comes first; then whether this machine has a GPU that nvcnn can use.
if [[ " $selected " == *" build "* ]]; then run_stage build; fi
gpu_line="" has_gpu=0
if [ -x ./nvcnn ]; then
  probe=$(timeout -k 5 120 ./nvcnn --model=trivial --device=gpu --batch_size=2 --num_batches=1 --nstep_burnin=0 2>&1)
  prc=$?
  if [ "$prc" -eq 2 ] && grep -q 'no usable GPU' <<<"$probe"; then
    gpu_line="no GPU: $(sed -n 's/.*no usable GPU: //p' <<<"$probe" | head -n 1)"
  else
    has_gpu=1
    gpu_line="$(grep -m1 '^Devices:' <<<"$probe" | sed 's/^Devices: *//') (probe run: exit $prc)"
  fi
else
  gpu_line="no ./nvcnn (build it first: the build stage)"
fi
echo "$gpu_line" >>"$log"
# The host's CPU: where its flags have bf16 arithmetic (avx512_bf16, amx_bf16), the CPU backend's
# bf16 (which oneDNN runs from avx512_core) can be developed and measured there
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
cpu_bf16=$(grep -o -w -E 'avx512_core|avx512f|avx512_bf16|amx_bf16|amx_tile' <<<"$cpu_flags" | sort -u | paste -sd ' ' -)
cpu_layers=$( [ -x ./nvcnn ] && timeout -k 5 60 ./nvcnn --model=lenet --device=cpu --num_batches=1 --nstep_burnin=0 2>&1 | sed -n 's/^CPU layers: *//p' | head -n 1)
cpu_line="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1); AVX-512/bf16 flags: ${cpu_bf16:-none}; nvcnn's CPU layers: ${cpu_layers:-?}"
echo "host CPU: $cpu_line" >>"$log"
if [ "$has_gpu" = 0 ] && grep -q 'nvidia-smi lists' <<<"$gpu_line"; then
  # the driver sees GPUs that the CUDA runtime cannot use (a driver older than the build's CUDA
  # needs): not a machine without a GPU, a machine that must be fixed
  for s in $selected; do [ "$s" = build ] || STATUS[$s]="not run (the driver is too old for this build)"; done
  write_summary
  echo "gpu_check: FAILED: $(sed 's/^no GPU: //' <<<"$gpu_line") ($out/summary.md)" >&2
  exit 1
fi
if [ "$has_gpu" = 0 ]; then
  for s in $selected; do [ "$s" = build ] || STATUS[$s]="not run (no GPU)"; done
  write_summary
  echo "gpu_check: $gpu_line: the GPU stages were not run ($out/summary.md)"
  exit 0
fi
for s in $selected; do
  [ "$s" = build ] || run_stage "$s"
done
write_summary
echo
cat "$out/summary.md"
exit 0
