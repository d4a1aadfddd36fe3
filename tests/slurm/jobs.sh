# shellcheck shell=bash
# jobs.sh: jobs of scripts/slurm/nvcnn.sbatch on a cluster of tests/slurm/cluster.sh, for the
# scenario scripts of the tests (tests/slurm/run.sh, tests/hosts/run.sh). Source it after
# cluster_start, with $out the directory for the jobs' output files.
#   submit NAME [FLAGS...]  the batch script as job NAME (sbatch's shape: the array JOB_SHAPE,
#                           default one node and two tasks; output $out/NAME.out) with nvcnn's
#                           FLAGS; prints the job id
#   job_wait JID NAME       waits (up to 300 s) until the job has left the queue, through any
#                           requeue, then prints "job NAME: JobState=... ExitCode=... Restarts=..."
#   wait_line FILE REGEX    waits (up to 120 s) until FILE has a line matching REGEX

JOB_SHAPE=(--nodes=1 --ntasks=2)

job_wait() {
  local jid=$1 name=$2 i=0 st
  while :; do
    # an answer with no line: the job has left the queue (a failed squeue is asked again)
    if st=$(cl_cmd squeue -h -j "$jid" -o %T 2>/dev/null) && [ -z "$st" ]; then break; fi
    i=$((i + 1))
    if [ $i -gt 1500 ]; then
      echo "${0##*/}: job $name ($jid) still in the queue after 300 s" >&2
      cl_cmd scontrol show job "$jid" >&2 || true
      cluster_logs
      return 1
    fi
    sleep 0.2
  done
  echo "job $name: $(cl_cmd scontrol show job "$jid" | grep -oE '(JobState|ExitCode|Restarts)=[^ ]+' | tr '\n' ' ')"
}

submit() {
  local name=$1
  shift
  : "${out:?jobs.sh: out must name the directory of the job outputs}"
  cl_cmd sbatch --parsable "${JOB_SHAPE[@]}" --job-name="$name" --output="$out/$name.out" scripts/slurm/nvcnn.sbatch "$@"
}

wait_line() {
  local i=0
  until grep -Eq "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    [ $i -le 600 ] || { echo "${0##*/}: no line '$2' in $1 after 120 s" >&2; return 1; }
    sleep 0.2
  done
}
