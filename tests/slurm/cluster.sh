# shellcheck shell=bash
# cluster.sh: a one-node Slurm cluster on this machine, for tests. Source it, then
#   cluster_start      temporary directory, munge key, slurm.conf; munged, slurmctld and slurmd
#                      started in the background; returns when the node is idle
#   cluster_stop       cancels what is left of the jobs, stops the three daemons by their pids
#                      (SIGTERM, then SIGKILL after 10 s) and removes the directory
# cluster_start sets a trap on EXIT, INT and TERM that calls cluster_stop, so a failed check
# (set -e, exit 1, Ctrl-C) still stops exactly what was started. Everything the cluster writes
# (key, sockets, pid files, state, spool, logs) stays under $CL_DIR, and the system's own Slurm
# and munge configuration (/etc/slurm, /etc/munge, /run/munge) is neither used nor changed:
# munged gets its own key, socket and seed, the Slurm commands find the cluster through
# SLURM_CONF, and the daemons listen on two free ports picked at random, so that clusters of
# several test runs on one machine do not meet.
#
# The node is `hostname -s` at 127.0.0.1 with 2 CPUs; SlurmUser is whoever runs this (root in
# CI). Needs munge, slurmctld, slurmd and slurm-client (scripts/install-deps.sh installs them).
# Variables after cluster_start: CL_DIR, CL_NODE, SLURM_CONF (exported).

CL_DIR=""
CL_PIDS=()   # munged slurmctld slurmd, in start order
CL_NODE=""

cl_log() { echo "cluster: $*" >&2; }

# A TCP port on 127.0.0.1 that nothing listens on (checked by connecting; bash's /dev/tcp),
# below Linux's ephemeral range (32768 and up) so that no outgoing connection takes it meanwhile.
cl_free_port() {
  local p tries=0
  while [ $tries -lt 50 ]; do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
    tries=$((tries + 1))
  done
  return 1
}

# Prints the last lines of the daemons' logs (after a failure).
cluster_logs() {
  local f
  for f in "$CL_DIR"/log/*.log; do
    [ -f "$f" ] || continue
    echo "---- ${f##*/} (last 20 lines)" >&2
    tail -n 20 "$f" >&2
  done
}

# Waits up to $1 seconds for the node to be in state $2 (sinfo's %T, e.g. idle); gives up at
# once on a node Slurm has refused (inval, drained).
cl_wait_node() {
  local limit=$1 want=$2 i=0 st=""
  while [ $i -lt $((limit * 4)) ]; do
    st=$(sinfo -h -n "$CL_NODE" -o %T 2>/dev/null || true)
    [ "$st" = "$want" ] && return 0
    case $st in inval* | drain*) break ;; esac
    sleep 0.25
    i=$((i + 1))
  done
  cl_log "node $CL_NODE is '${st:-unknown}', not $want"
  return 1
}

cluster_start() {
  local tmp=${TMPDIR:-/tmp}
  CL_DIR=$(mktemp -d "$tmp/nvcnn-slurm.XXXXXX")
  trap 'cluster_stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # munged insists that every directory above its socket is searchable by all, and that the key
  # is readable by its owner only.
  chmod 755 "$CL_DIR"
  mkdir -p "$CL_DIR"/{munge,run,state,spool,log,jobs}
  chmod 700 "$CL_DIR/munge"
  head -c 1024 /dev/urandom >"$CL_DIR/munge/munge.key"
  chmod 400 "$CL_DIR/munge/munge.key"
  CL_NODE=$(hostname -s)
  mkdir -p "$CL_DIR/spool/$CL_NODE"
  local user ctld_port slurmd_port
  user=$(id -un)
  if ! ctld_port=$(cl_free_port) || ! slurmd_port=$(cl_free_port); then
    cl_log "no free TCP port"
    return 1
  fi
  [ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))
  export SLURM_CONF="$CL_DIR/slurm.conf"
  : >"$CL_DIR/plugstack.conf"
  cat >"$SLURM_CONF" <<EOF
# one node, this machine; written by tests/slurm/cluster.sh
ClusterName=nvcnntest
SlurmctldHost=$CL_NODE(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$CL_DIR/run/munge.socket,cred_expire=5
StateSaveLocation=$CL_DIR/state
SlurmdSpoolDir=$CL_DIR/spool/%n
SlurmctldPidFile=$CL_DIR/run/slurmctld.pid
SlurmdPidFile=$CL_DIR/run/slurmd.pid
SlurmctldLogFile=$CL_DIR/log/slurmctld.log
SlurmdLogFile=$CL_DIR/log/slurmd.log
PlugStackConfig=$CL_DIR/plugstack.conf
# no cgroups: processes tracked by their parent ids, no task binding, no accounting
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=30
MinJobAge=600
# a job in partition high preempts one in test: Slurm sends SIGTERM to its steps, waits up to
# GraceTime, then requeues it
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$CL_NODE NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN${CL_GPUS:+ Gres=gpu:$CL_GPUS}
PartitionName=test Nodes=$CL_NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=30
PartitionName=high Nodes=$CL_NODE MaxTime=INFINITE State=UP PriorityTier=2
EOF
  if [ -n "${CL_GPUS:-}" ]; then
    # CL_GPUS (1 to 4) GPUs that Slurm counts and hands out, with harmless character devices in
    # place of /dev/nvidiaN: enough to test how jobs are placed on them
    local devs=(/dev/null /dev/zero /dev/full /dev/urandom)
    echo "GresTypes=gpu" >>"$SLURM_CONF"
    echo "Name=gpu File=$(IFS=,; echo "${devs[*]:0:$CL_GPUS}")" >"$CL_DIR/gres.conf"
  fi
  munged -F --key-file="$CL_DIR/munge/munge.key" --socket="$CL_DIR/run/munge.socket" \
         --pid-file="$CL_DIR/run/munged.pid" --seed-file="$CL_DIR/munge/munged.seed" \
         >"$CL_DIR/log/munged.log" 2>&1 &
  CL_PIDS+=($!)
  local i=0
  while [ ! -S "$CL_DIR/run/munge.socket" ]; do
    sleep 0.1
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "${CL_PIDS[0]}" 2>/dev/null; then
      cl_log "munged did not start"
      cluster_logs
      return 1
    fi
  done
  slurmctld -D -c -i -f "$SLURM_CONF" >"$CL_DIR/log/slurmctld.out" 2>&1 &
  CL_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" -N "$CL_NODE" >"$CL_DIR/log/slurmd.out" 2>&1 &
  CL_PIDS+=($!)
  if ! cl_wait_node 60 idle; then
    cluster_logs
    return 1
  fi
  cl_log "node $CL_NODE idle (slurmctld port $ctld_port, slurmd port $slurmd_port, $CL_DIR)"
}

cluster_stop() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CL_DIR" ] && [ ${#CL_PIDS[@]} -ge 2 ] && kill -0 "${CL_PIDS[1]}" 2>/dev/null; then
    # the jobs first, so that slurmd's step daemons end with them
    local ids i=0
    ids=$(squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || scancel --full --signal=KILL --quiet $ids 2>/dev/null || true
    while [ $i -lt 40 ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
      sleep 0.25
      i=$((i + 1))
    done
  fi
  local k pid
  for ((k = ${#CL_PIDS[@]} - 1; k >= 0; k--)); do
    pid=${CL_PIDS[$k]}
    kill -TERM "$pid" 2>/dev/null || continue
    for i in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  CL_PIDS=()
  if [ -n "$CL_DIR" ]; then
    if [ -n "${CL_KEEP:-}" ]; then cl_log "kept $CL_DIR"; else rm -rf "$CL_DIR"; fi
  fi
  CL_DIR=""
  return "$rc"
}
