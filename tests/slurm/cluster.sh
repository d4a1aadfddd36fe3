# shellcheck shell=bash
# cluster.sh: a Slurm cluster on this machine, for tests: one node, or two nodes on the two hosts of
# tests/hosts/hosts.sh. Source it, then
#   cluster_start      temporary directory, munge key, slurm.conf; munged, slurmctld and a slurmd
#                      per node started in the background; returns when every node is idle
#   cluster_stop       cancels what is left of the jobs, stops the daemons by their pids
#                      (SIGTERM, then SIGKILL after 10 s) and removes the directory
#   cl_cmd CMD...      runs a Slurm command (sbatch, squeue, ...) where the controller is reached
#   cl_slurmd_start K  starts node K's slurmd again (after hosts_crash K and hosts_mend K)
#   cl_wait_node LIMIT STATE [NODE]   waits until the node (each node) is in STATE (sinfo's %T)
# cluster_start sets a trap on EXIT, INT and TERM that calls cluster_stop, so a failed check
# (set -e, exit 1, Ctrl-C) still stops exactly what was started. Everything the cluster writes
# (key, sockets, pid files, state, spool, logs) stays under $CL_DIR, and the system's own Slurm
# and munge configuration (/etc/slurm, /etc/munge, /run/munge) is neither used nor changed:
# munged gets its own key, socket and seed, the Slurm commands find the cluster through
# SLURM_CONF, and the daemons listen on two free ports picked at random, so that clusters of
# several test runs on one machine do not meet.
#
# One node: `hostname -s` at 127.0.0.1 with 2 CPUs. Two nodes (CL_HOSTS=2, after hosts_start):
# the hosts HS_NAME[0] and HS_NAME[1] at their addresses, 2 CPUs each; munged, slurmctld and the
# Slurm commands run in host 0, each slurmd in its own host. A node's slurmd keeps its spool and
# PMIx's client directories in the host's local directory ($HS_DIR/local/NODE, which hosts_crash
# wipes), each slurmd reading a configuration directory of its own whose mpi.conf points PMIx
# there: the hosts share /tmp, where PMIx's default directories of the two nodes would collide.
# SlurmdTimeout is CL_SLURMD_TIMEOUT (Slurm's default 300), KillWait CL_KILL_WAIT (30).
# SlurmUser is whoever runs this (root in CI). Needs munge, slurmctld, slurmd and slurm-client
# (scripts/install-deps.sh installs them).
# Variables after cluster_start: CL_DIR, CL_NODE (the first node), CL_NODES, SLURM_CONF (exported).

CL_DIR=""
CL_PIDS=()   # munged slurmctld slurmd..., in start order
CL_NODE=""
CL_NODES=()
CL_ADDRS=()

# A Slurm command, run where the controller can be reached: in host 0 when the nodes are hosts.
cl_cmd() {
  if [ -n "${CL_HOSTS:-}" ]; then hosts_run 0 "$@"; else "$@"; fi
}

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

# Waits up to $1 seconds in all for node $3 (default: every node) to be in state $2 (sinfo's %T,
# e.g. idle); gives up at once on a node Slurm has refused (inval, drained).
cl_wait_node() {
  local limit=$1 want=$2 i=0 st="" node nodes=("${CL_NODES[@]}")
  [ -z "${3:-}" ] || nodes=("$3")
  for node in "${nodes[@]}"; do
    while [ $i -lt $((limit * 4)) ]; do
      st=$(cl_cmd sinfo -h -n "$node" -o %T 2>/dev/null || true)
      [ "$st" = "$want" ] && break
      case $st in inval* | drain*) break ;; esac
      if ! kill -0 "${CL_PIDS[1]}" 2>/dev/null; then st="unknown: slurmctld has died"; break; fi
      sleep 0.25
      i=$((i + 1))
    done
    if [ "$st" != "$want" ]; then
      cl_log "node $node is '${st:-unknown}', not $want"
      return 1
    fi
  done
}

# Starts the slurmd of node K (0 for the one node): in host K when the nodes are hosts.
cl_slurmd_start() {
  local k=$1 node=${CL_NODES[$1]}
  if [ -n "${CL_HOSTS:-}" ]; then
    mkdir -p "$HS_DIR/local/$node/spool" "$HS_DIR/local/$node/pmix"
    hosts_bg "$k" slurmd -D -f "$CL_DIR/etc/$node/slurm.conf" -N "$node" >>"$CL_DIR/log/slurmd-$node.out" 2>&1
    CL_PIDS+=("$HS_BG")
  else
    slurmd -D -f "$SLURM_CONF" -N "$node" >>"$CL_DIR/log/slurmd.out" 2>&1 &
    CL_PIDS+=($!)
  fi
}

# Starts a daemon (the command line): in host 0 when the nodes are hosts; its pid into CL_PIDS.
cl_daemon() {
  if [ -n "${CL_HOSTS:-}" ]; then
    hosts_bg 0 "$@"
    CL_PIDS+=("$HS_BG")
  else
    "$@" &
    CL_PIDS+=($!)
  fi
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
  local spool="$CL_DIR/spool/%n" k all_nodes
  if [ -n "${CL_HOSTS:-}" ]; then
    CL_NODES=("${HS_NAME[@]}")
    CL_ADDRS=("${HS_ADDR[@]}")
    spool="$HS_DIR/local/%n/spool"
  else
    CL_NODES=("$(hostname -s)")
    CL_ADDRS=(127.0.0.1)
    mkdir -p "$CL_DIR/spool/${CL_NODES[0]}"
  fi
  CL_NODE=${CL_NODES[0]}
  all_nodes=$(IFS=,; echo "${CL_NODES[*]}")
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
SlurmctldHost=$CL_NODE(${CL_ADDRS[0]})
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$CL_DIR/run/munge.socket,cred_expire=5
StateSaveLocation=$CL_DIR/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$CL_DIR/run/slurmctld.pid
SlurmdPidFile=$CL_DIR/run/slurmd-%n.pid
SlurmctldLogFile=$CL_DIR/log/slurmctld.log
SlurmdLogFile=$CL_DIR/log/slurmd-%n.log
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
KillWait=${CL_KILL_WAIT:-30}
SlurmdTimeout=${CL_SLURMD_TIMEOUT:-300}
MinJobAge=600
# a job in partition high preempts one in test: Slurm sends SIGTERM to its steps, waits up to
# GraceTime, then requeues it
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=test Nodes=$all_nodes Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=30
PartitionName=high Nodes=$all_nodes MaxTime=INFINITE State=UP PriorityTier=2
EOF
  for k in "${!CL_NODES[@]}"; do
    echo "NodeName=${CL_NODES[$k]} NodeAddr=${CL_ADDRS[$k]} CPUs=2 State=UNKNOWN${CL_GPUS:+ Gres=gpu:$CL_GPUS}" >>"$SLURM_CONF"
  done
  if [ -n "${CL_GPUS:-}" ]; then
    # CL_GPUS (1 to 4) GPUs that Slurm counts and hands out, with harmless character devices in
    # place of /dev/nvidiaN: enough to test how jobs are placed on them
    local devs=(/dev/null /dev/zero /dev/full /dev/urandom)
    echo "GresTypes=gpu" >>"$SLURM_CONF"
    echo "Name=gpu File=$(IFS=,; echo "${devs[*]:0:$CL_GPUS}")" >"$CL_DIR/gres.conf"
  fi
  cl_daemon munged -F --key-file="$CL_DIR/munge/munge.key" --socket="$CL_DIR/run/munge.socket" \
         --pid-file="$CL_DIR/run/munged.pid" --seed-file="$CL_DIR/munge/munged.seed" \
         >"$CL_DIR/log/munged.log" 2>&1
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
  cl_daemon slurmctld -D -c -i -f "$SLURM_CONF" >"$CL_DIR/log/slurmctld.out" 2>&1
  if [ -n "${CL_HOSTS:-}" ]; then
    # each slurmd its own configuration directory: the same slurm.conf (and gres.conf), and an
    # mpi.conf that gives PMIx's client directories a place in the node's local directory
    for k in "${!CL_NODES[@]}"; do
      mkdir -p "$CL_DIR/etc/${CL_NODES[$k]}"
      cp "$SLURM_CONF" "$CL_DIR/etc/${CL_NODES[$k]}/"
      [ ! -f "$CL_DIR/gres.conf" ] || cp "$CL_DIR/gres.conf" "$CL_DIR/etc/${CL_NODES[$k]}/"
      echo "PMIxCliTmpDirBase=$HS_DIR/local/${CL_NODES[$k]}/pmix" >"$CL_DIR/etc/${CL_NODES[$k]}/mpi.conf"
    done
  fi
  for k in "${!CL_NODES[@]}"; do cl_slurmd_start "$k"; done
  if ! cl_wait_node 60 idle; then
    cluster_logs
    return 1
  fi
  cl_log "node(s) ${CL_NODES[*]} idle (slurmctld port $ctld_port, slurmd port $slurmd_port, $CL_DIR)"
}

cluster_stop() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CL_DIR" ] && [ ${#CL_PIDS[@]} -ge 2 ] && kill -0 "${CL_PIDS[1]}" 2>/dev/null; then
    # the jobs first, so that slurmd's step daemons end with them
    local ids i=0
    ids=$(cl_cmd squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || cl_cmd scancel --full --signal=KILL --quiet $ids 2>/dev/null || true
    while [ $i -lt 40 ] && [ -n "$(cl_cmd squeue -h -o %i 2>/dev/null)" ]; do
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
  # then the hosts: whatever is left in them (the jobs' processes) ends with them
  if [ -n "${CL_HOSTS:-}" ]; then hosts_stop || true; fi
  return "$rc"
}
