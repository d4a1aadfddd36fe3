#!/usr/bin/env bash
# rsh.sh HOST COMMAND...: Open MPI's remote shell between the hosts of tests/hosts/hosts.sh
# (mpirun --mca plm_rsh_agent tests/hosts/rsh.sh): runs COMMAND, one shell line as ssh runs it, in
# HOST's namespaces, and exits with its status. Like an ssh session whose server vanished, it
# brings no news when HOST crashes (hosts_crash): it then stays silent until the test ends it, as
# ssh with its default settings would for hours. Needs HS_DIR (hosts_start exports it).
host=${1:?usage: rsh.sh HOST COMMAND...}
shift
pid=$(cat "${HS_DIR:?rsh.sh: no HS_DIR}/pid.$host" 2>/dev/null) || { echo "rsh.sh: no host $host" >&2; exit 255; }
nsenter -t "$pid" -n -u -m --wd=/ -- sh -c "$*"
rc=$?
[ ! -e "$HS_DIR/down.$host" ] || exec sleep 86400
exit "$rc"
