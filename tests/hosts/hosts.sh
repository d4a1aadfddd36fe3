# shellcheck shell=bash
# hosts.sh: two hosts on this machine, for tests. Each host is a network, hostname (UTS) and mount
# namespace of its own, held open by one process; the two are joined by a veth link on a private
# /24 that exists only inside them. Open MPI and Slurm see two nodes: each host has its own name,
# its own address and loopback, and /etc/hosts (bind-mounted in its mount namespace) names both.
# Files (/sys and /tmp included), CPUs and processes are the machine's (no pid namespace), so a
# process in one host can see and enter the other. Source it, then
#   hosts_start         the two hosts; sets HS_DIR, HS_NAME[0..1], HS_ADDR[0..1], HS_NET, HS_IF[0..1]
#   hosts_run K CMD...  runs CMD in host K (0 or 1) in the current directory
#   hosts_bg K CMD...   the same in the background; HS_BG is then CMD's own pid (nsenter execs it)
#   hosts_mpirun N ARGS...  Open MPI's mpirun in host 0 with N ranks on each host (ARGS: more of
#                       mpirun's options, then the program): the hostfile of the two, rsh.sh as
#                       the remote shell, TCP on the link's subnet for its daemons and the ranks;
#                       its command line is in HS_MPIRUN after hs_mpirun_cmd N (for hosts_bg)
#   hosts_procs K       the pids of every process in host K but its holder
#   hosts_cut K / hosts_mend K      link of host K down / up
#   hosts_crash K       host K dies: its link goes down, every process in it is killed (SIGKILL),
#                       its node-local state ($HS_DIR/local/NAME) is wiped; hosts_mend K brings it
#                       back (the caller restarts its daemons)
#   hosts_shape RATE [DELAY]   both ends of the link shaped to RATE (tc tbf: 10gbit, 25gbit...;
#                       "" for none) and, with DELAY (5ms), delayed (tc netem, which some kernels
#                       lack); no RATE and no DELAY: the bare link
#   hosts_link_bytes K  bytes host K has sent over the link
#   hosts_stop          kills every process in both hosts (SIGTERM, then SIGKILL after 5 s), then
#                       the holders, which deletes the namespaces and the link; removes HS_DIR
# hosts_start sets a trap on EXIT, INT and TERM that calls hosts_stop (tests/slurm/cluster.sh's
# cluster_stop calls it too). The namespaces have no names in /run/netns: they live exactly as long
# as their processes, so even a test killed with SIGKILL leaves none behind once its processes are
# gone. Names, subnet and paths are new for every run: hosts nNNNNa and nNNNNb, veth nvNNNNa/b,
# 10.X.Y.0/24, HS_DIR from mktemp. Needs root, unshare, nsenter (util-linux) and ip (iproute2).
# hosts_can_start says why not, when it cannot.

HS_DIR=""
HS_NAME=()
HS_ADDR=()
HS_IF=()
HS_PID=()   # the holder of each host
HS_NET=""
HS_BG=""
HS_MPIRUN=()
HS_RSH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rsh.sh"

hs_log() { echo "hosts: $*" >&2; }

# Prints why two hosts cannot be made here (and returns 1), or nothing.
hosts_can_start() {
  local t
  if [ "$(id -u)" -ne 0 ]; then echo "network namespaces need root"; return 1; fi
  for t in unshare nsenter ip; do
    command -v "$t" >/dev/null || { echo "no $t (util-linux, iproute2: scripts/install-deps.sh)"; return 1; }
  done
  if ! t=$(unshare --net --uts --mount true 2>&1); then echo "unshare --net --uts --mount: ${t:-refused}"; return 1; fi
  local v="nvt$$"
  if ! t=$(unshare --net sh -c "ip link add ${v}a type veth peer name ${v}b" 2>&1); then
    echo "veth links: ${t:-refused}"
    return 1
  fi
}

# The namespace id (net) of host K's holder.
hs_netns() { readlink "/proc/${HS_PID[$1]}/ns/net" 2>/dev/null; }

hosts_procs() {
  local ns
  ns=$(hs_netns "$1") || return 0
  [ -n "$ns" ] || return 0
  # the links read "net:[4026532301]": brackets escaped for -lname's pattern
  find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -lname "$(printf '%s' "$ns" | sed 's/[][*?\\]/\\&/g')" \
       2>/dev/null | cut -d/ -f3 | grep -vx "${HS_PID[$1]}" || true
}

hosts_run() {
  local k=$1
  shift
  nsenter -t "${HS_PID[$k]}" -n -u -m --wd="$PWD" -- "$@"
}

# Not hosts_run ... &: that would put a subshell between $! and the command.
hosts_bg() {
  local k=$1
  shift
  nsenter -t "${HS_PID[$k]}" -n -u -m --wd="$PWD" -- "$@" &
  # shellcheck disable=SC2034 # for the caller
  HS_BG=$!
}

hosts_start() {
  local tmp=${TMPDIR:-/tmp} id k
  HS_DIR=$(mktemp -d "$tmp/nvcnn-hosts.XXXXXX")
  chmod 755 "$HS_DIR"
  trap 'hosts_stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  id=$(printf '%04x' $(((RANDOM << 1 ^ $$) & 0xffff)))
  HS_NAME=("n${id}a" "n${id}b")
  HS_IF=("nv${id}a" "nv${id}b")
  HS_NET="10.$((100 + RANDOM % 150)).$((RANDOM % 256))"
  HS_ADDR=("$HS_NET.1" "$HS_NET.2")
  mkdir -p "$HS_DIR/local/${HS_NAME[0]}" "$HS_DIR/local/${HS_NAME[1]}"
  printf '127.0.0.1 localhost\n::1 localhost\n%s %s\n%s %s\n' "${HS_ADDR[0]}" "${HS_NAME[0]}" \
         "${HS_ADDR[1]}" "${HS_NAME[1]}" >"$HS_DIR/hosts"
  for k in 0 1; do
    # the holder: its own network, hostname and mount namespaces; an /etc/hosts of its own
    unshare --net --uts --mount --propagation slave sh -c "
      mount --bind '$HS_DIR/hosts' /etc/hosts && hostname '${HS_NAME[$k]}' &&
      ip link set lo up && : >'$HS_DIR/ready.$k' && exec sleep infinity" </dev/null >"$HS_DIR/holder.$k.log" 2>&1 &
    HS_PID[k]=$!
    echo "${HS_PID[$k]}" >"$HS_DIR/pid.${HS_NAME[$k]}"
  done
  local i=0
  while [ ! -e "$HS_DIR/ready.0" ] || [ ! -e "$HS_DIR/ready.1" ]; do
    sleep 0.05
    i=$((i + 1))
    if [ $i -gt 200 ]; then
      hs_log "the hosts did not start: $(cat "$HS_DIR"/holder.*.log)"
      return 1
    fi
  done
  ip link add "${HS_IF[0]}" type veth peer name "${HS_IF[1]}" || return 1
  for k in 0 1; do
    ip link set "${HS_IF[$k]}" netns "${HS_PID[$k]}" || return 1
    hosts_run "$k" ip addr add "${HS_ADDR[$k]}/24" dev "${HS_IF[$k]}" || return 1
    hosts_run "$k" ip link set "${HS_IF[$k]}" up || return 1
  done
  printf '%s slots=2\n%s slots=2\n' "${HS_NAME[0]}" "${HS_NAME[1]}" >"$HS_DIR/hostfile"
  # the rsh agent (tests/hosts/rsh.sh) finds the holders here
  export HS_DIR
  hs_log "${HS_NAME[0]} ${HS_ADDR[0]} and ${HS_NAME[1]} ${HS_ADDR[1]} on ${HS_IF[0]}/${HS_IF[1]} ($HS_DIR)"
}

hs_mpirun_cmd() {
  HS_MPIRUN=(mpirun -np $((2 * $1)) --hostfile "$HS_DIR/hostfile" --map-by "ppr:$1:node" --mca plm_rsh_agent "$HS_RSH"
             --mca btl_tcp_if_include "$HS_NET.0/24" --mca oob_tcp_if_include "$HS_NET.0/24")
}

hosts_mpirun() {
  hs_mpirun_cmd "$1"
  shift
  hosts_run 0 "${HS_MPIRUN[@]}" "$@"
}

hosts_cut() {
  : >"$HS_DIR/down.${HS_NAME[$1]}"
  hosts_run "$1" ip link set "${HS_IF[$1]}" down
}

hosts_mend() {
  hosts_run "$1" ip link set "${HS_IF[$1]}" up
  rm -f "$HS_DIR/down.${HS_NAME[$1]}"
}

# Kills every process of host K with SIGKILL until none is left (daemons fork as they die).
hs_kill_all() {
  local k=$1 pids
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(hosts_procs "$k")
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  hs_log "processes left in ${HS_NAME[$k]}: $(hosts_procs "$k" | tr '\n' ' ')"
}

hosts_crash() {
  local k=$1
  hosts_cut "$k"
  hs_kill_all "$k"
  rm -rf "${HS_DIR:?}/local/${HS_NAME[$k]}"
  mkdir -p "$HS_DIR/local/${HS_NAME[$k]}"
  hs_log "${HS_NAME[$k]} crashed: link down, its processes killed, its local state wiped"
}

hosts_shape() {
  local rate=$1 delay=${2:-} k bps burst
  for k in 0 1; do
    hosts_run "$k" tc qdisc del dev "${HS_IF[$k]}" root 2>/dev/null || true
    if [ -n "$delay" ]; then
      hosts_run "$k" tc qdisc add dev "${HS_IF[$k]}" root netem delay "$delay" ${rate:+rate "$rate"} || return 1
    elif [ -n "$rate" ]; then
      # tbf: a burst of 10 ms at the rate (at least 256 KiB: a GSO packet must fit)
      bps=$(tc_rate_bytes "$rate") || return 1
      burst=$((bps / 100 > 262144 ? bps / 100 : 262144))
      hosts_run "$k" tc qdisc add dev "${HS_IF[$k]}" root tbf rate "$rate" burst "$burst" latency 100ms || return 1
    fi
  done
}

# Bytes per second of a tc rate: 10gbit, 25gbit, 800mbit.
tc_rate_bytes() {
  case $1 in
    *gbit) echo $((${1%gbit} * 125000000)) ;;
    *mbit) echo $((${1%mbit} * 125000)) ;;
    *) hs_log "rate $1: want Ngbit or Nmbit"; return 1 ;;
  esac
}

hosts_link_bytes() {
  # /proc/net/dev is the reader's network namespace's: "IF: rx_bytes ... (8 fields) tx_bytes ..."
  hosts_run "$1" cat /proc/net/dev | awk -v i="${HS_IF[$1]}:" '$1 == i { print $10 }'
}

hosts_stop() {
  local rc=$?
  trap - EXIT INT TERM
  local k i pids
  if [ ${#HS_PID[@]} -gt 0 ]; then
    for k in 0 1; do
      [ -n "${HS_PID[$k]:-}" ] || continue
      pids=$(hosts_procs "$k")
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -TERM $pids 2>/dev/null || true
    done
    for i in $(seq 1 50); do
      [ -n "$(hosts_procs 0)$(hosts_procs 1)" ] || break
      sleep 0.1
    done
    for k in 0 1; do
      [ -n "${HS_PID[$k]:-}" ] || continue
      hs_kill_all "$k"
      kill -KILL "${HS_PID[$k]}" 2>/dev/null || true
      wait "${HS_PID[$k]}" 2>/dev/null || true
    done
  fi
  HS_PID=()
  if [ -n "$HS_DIR" ]; then
    if [ -n "${HS_KEEP:-}" ]; then hs_log "kept $HS_DIR"; else rm -rf "$HS_DIR"; fi
  fi
  HS_DIR=""
  return "$rc"
}
