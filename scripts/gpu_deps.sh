#!/usr/bin/env bash
# gpu_deps.sh: run on a Debian 12 machine, in the repository. Puts into .deps/ (ignored by git)
# the Debian libraries that nvcnn links and that a GPU host's CUDA image may lack: protobuf-c
# (headers and static library), OpenBLAS (OpenMP build) with libgfortran and libquadmath, and
# libpng. Copied to the GPU host with the tree (about 40 MB), they are used there by
# scripts/gpu_check.sh where the host has no library of that name (see its use_deps); the
# Makefile links .deps' static protobuf-c whenever it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >>.git/info/exclude
pkgs=(libprotobuf-c-dev libprotobuf-c1 libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0 libpng-dev libpng16-16)
mkdir -p .deps/debs
cd .deps/debs
missing=()
for p in "${pkgs[@]}"; do ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get download "${missing[@]}" 2>/dev/null || { apt-get update -qq && apt-get download "${missing[@]}"; }
fi
for d in *.deb; do dpkg -x "$d" ..; done
cd ..
# what nvcnn does not need: documentation, static OpenBLAS/LAPACK/libpng (35 MB), cmake files
rm -rf usr/share usr/bin usr/lib/x86_64-linux-gnu/cmake usr/lib/x86_64-linux-gnu/openblas-openmp/cmake \
  usr/lib/x86_64-linux-gnu/openblas-openmp/*.a usr/lib/x86_64-linux-gnu/openblas-openmp/liblapack* \
  usr/lib/x86_64-linux-gnu/openblas-openmp/libblas* usr/lib/x86_64-linux-gnu/libpng*.a \
  usr/lib/x86_64-linux-gnu/libprotobuf-c.so*
echo "gpu_deps: .deps/usr holds $(du -sh usr | cut -f1): copy it with the tree (the device tool: carry .deps/usr)"
