#!/usr/bin/env bash
# run.sh SCENARIO OUTDIR: runs one scenario of scripts/slurm/nvcnn.sbatch on a fresh one-node
# Slurm cluster (tests/slurm/cluster.sh) and leaves the job outputs and nvcnn's --log_dir in
# OUTDIR for tests/test_slurm.c to check. Prints one line per job, "job NAME: JobState=...
# ExitCode=... Restarts=...", and the job's output file is OUTDIR/NAME.out.
#   sbatch    two tasks through the batch script with srun (PMIx), then with LAUNCHER=mpirun
#   srun      srun -n 2 straight, with the PMI the batch script uses
#   preempt   an uninterrupted run (ref), then the same run stopped mid-way by
#             `scancel --signal=TERM` (scancel), by `scontrol requeue` (requeue) and by a job of
#             a higher-priority partition that preempts it (preempt; the job "high")
#   gpus      a node with 1 GPU (no device behind it) and jobs of 2 tasks per node on it: one
#             plain (gpus), one with --allreduce=mpi (shared)
# Run from anywhere; uses ./nvcnn of the repository. Exit status: 0 when every job could be
# run and waited for (what the jobs did is for the caller to check), 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
scenario=${1:?usage: run.sh SCENARIO OUTDIR}
out=${2:?usage: run.sh SCENARIO OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x ./nvcnn ] || { echo "run.sh: ./nvcnn is missing: run make" >&2; exit 1; }

[ "$scenario" = gpus ] && CL_GPUS=1
# mpirun (LAUNCHER=mpirun) refuses root unless told; the jobs inherit this environment
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=tests/slurm/cluster.sh
source tests/slurm/cluster.sh
cluster_start

NV=(--model=lenet --device=cpu --num_classes=10)

# shellcheck source=tests/slurm/jobs.sh
source tests/slurm/jobs.sh

case $scenario in
  sbatch)
    jid=$(submit sbatch "${NV[@]}" --batch_size=8 --num_batches=4 --nstep_burnin=1)
    job_wait "$jid" sbatch
    jid=$(LAUNCHER=mpirun submit mpirun "${NV[@]}" --batch_size=8 --num_batches=4 --nstep_burnin=1)
    job_wait "$jid" mpirun
    ;;
  srun)
    # the PMI the batch script picks, the way it picks it
    # shellcheck disable=SC2016
    mpi=$(sed -n 's/^SRUN_MPI=\${SRUN_MPI:-\(.*\)}$/\1/p' scripts/slurm/nvcnn.sbatch)
    set +e
    srun --nodes=1 --ntasks=2 --mpi="$mpi" --kill-on-bad-exit=1 ./nvcnn "${NV[@]}" --batch_size=8 --num_batches=4 --nstep_burnin=1 \
      >"$out/srun.out" 2>&1
    echo "job srun: JobState=- ExitCode=$?:0 Restarts=0 (srun --mpi=$mpi)"
    set -e
    ;;
  preempt)
    # 0.5 s a step, nearly all of it a pause (NVCNN_TEST_STEP_PAUSE_MS: lenet at batch 8 computes
    # for a few ms): the signal, sent once step 2's row is out, has come within step 3 in every run
    # so far, 7 steps before the end (tests/test_slurm.c: PREEMPT_STEPS). With steps of the
    # reference layers at batch 256 for that pace the scenario took about 70 CPU seconds.
    export NVCNN_TEST_STEP_PAUSE_MS=500
    common=("${NV[@]}" --batch_size=8 --num_batches=10 --display_every=1)
    jid=$(submit ref "${common[@]}" --log_dir="$out/ref")
    job_wait "$jid" ref
    for how in scancel requeue preempt; do
      jid=$(submit "$how" "${common[@]}" --log_dir="$out/$how")
      wait_line "$out/$how.out" '^ +2 +1 '
      case $how in
        scancel) scancel --signal=TERM "$jid" ;;
        requeue) scontrol requeue "$jid" ;;
        preempt) # a job of the higher partition that needs the whole node
          # shellcheck disable=SC2016
          hid=$(sbatch --parsable --partition=high --nodes=1 --ntasks=2 --job-name=high --output="$out/high.out" \
                       --wrap 'echo "high: ran on $SLURM_JOB_NODELIST"') ;;
      esac
      job_wait "$jid" "$how"
    done
    job_wait "$hid" high
    ;;
  gpus)
    # 2 tasks for 1 GPU: refused by the script; with --allreduce=mpi (here as two words) launched
    for name in gpus shared; do
      extra=()
      [ "$name" = gpus ] || extra=(--allreduce mpi)
      jid=$(sbatch --parsable --nodes=1 --ntasks-per-node=2 --gres=gpu:1 --job-name="$name" --output="$out/$name.out" \
                   scripts/slurm/nvcnn.sbatch --model=lenet --device gpu --num_classes=10 --num_batches=4 "${extra[@]}")
      job_wait "$jid" "$name"
    done
    ;;
  *)
    echo "run.sh: unknown scenario '$scenario'" >&2
    exit 1
    ;;
esac
