#!/usr/bin/env bash
# Installs the Debian packages nvcnn needs, if any is missing, and the tests' Python packages.
# Idempotent: does nothing when all are present. Needs root (or sudo) only when a Debian package
# must be installed.
# Usage: scripts/install-deps.sh [system | python]   (default both; `make test` runs the two
#        halves as make targets of their own, so that pip's download overlaps the builds)
set -euo pipefail
what=${1:-all}
case $what in all | system | python) ;; *) echo "install-deps: unknown part '$what' (system, python or none for both)" >&2; exit 2 ;; esac
# slurmctld, slurmd, slurm-client and munge: the tests run scripts/slurm/nvcnn.sbatch on a
# one-node cluster of their own (tests/slurm/cluster.sh). iproute2 (ip, tc) and procps (pgrep,
# sysctl): the tests' two hosts on this machine (tests/hosts/hosts.sh) and their link.
pkgs=(build-essential libopenblas-dev libopenblas-openmp-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
      libprotobuf-c-dev protobuf-c-compiler libopenmpi-dev openmpi-bin dataset-fashion-mnist
      clang libclang-rt-14-dev libdnnl-dev slurmctld slurmd slurm-client munge iproute2 procps python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The tests' Python packages, from PyPI: onnx and onnxruntime check the models of --export_onnx
# (tests/test_onnx.c). They go into a virtual environment of the repository, .deps/venv (Debian's
# own python3 refuses pip installs outside one), once; the tests run .deps/venv/bin/python3. If
# they cannot be installed the ONNX tests fail, naming this script: nothing else needs them.
python_deps() {
  local venv pkgs=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6)
  venv="$(cd "$(dirname "$0")/.." && pwd)/.deps/venv"
  if "$venv/bin/python3" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then return 0; fi
  echo "install-deps: installing ${pkgs[*]} into .deps/venv (pip)"
  if ! { python3 -m venv "$venv" && "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${pkgs[@]}"; }; then
    echo "install-deps: warning: could not install ${pkgs[*]} into $venv: the ONNX tests will fail" >&2
  fi
}
if [ "$what" = python ]; then
  python_deps
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
  [ "$what" = system ] || python_deps
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "install-deps: error: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Debian starts a daemon when its package is installed (munged, slurmctld, slurmd here). The
# tests start their own and nothing else should run: while installing, a policy-rc.d denies
# every start, unless the machine has one already (containers usually do). Ours is marked and
# only ours is removed, also when apt fails.
policy=/usr/sbin/policy-rc.d
mark="# nvcnn install-deps $$"
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n%s\nexit 101\n' "$mark" | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap 'if grep -qx "$mark" "$policy" 2>/dev/null; then $sudo rm -f "$policy"; fi' EXIT
fi
# Someone else's apt may hold the locks: apt-get waits for dpkg's (DPkg::Lock::Timeout); update
# is retried.
for try in 1 2 3 4 5 6; do
  $sudo apt-get -o DPkg::Lock::Timeout=300 update -qq && break
  [ "$try" -lt 6 ] || exit 1
  echo "install-deps: apt-get update failed (another apt running?); retrying in 20 s" >&2
  sleep 20
done
$sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ "$what" = system ] || python_deps
echo "install-deps: done"
