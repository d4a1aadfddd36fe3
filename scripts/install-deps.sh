#!/usr/bin/env bash
# Installs the Debian packages nvcnn needs, if any is missing. Idempotent: does nothing when all
# are present. Needs root (or sudo) only when something must be installed.
set -euo pipefail
pkgs=(build-essential libopenblas-dev libopenblas-openmp-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
      libprotobuf-c-dev protobuf-c-compiler libopenmpi-dev openmpi-bin dataset-fashion-mnist
      clang libclang-rt-14-dev libdnnl-dev)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
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
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
