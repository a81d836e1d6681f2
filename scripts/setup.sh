#!/usr/bin/env bash
# Installs, from Debian packages, whatever the build and the tests need and the
# machine lacks. Safe to re-run: packages already present are not touched.
# Run as root (or with sudo available) on Debian 12 or newer.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libsimgrid-dev          # SimGrid 3.32: event engine (sim/), flow-solver cross-check
  libtomlplusplus-dev     # TOML++: scenario files
  libeigen3-dev           # Eigen: CPU kernels of the engine
  libboost-graph-dev      # Boost.Graph: fabric topology
  libopenmpi-dev openmpi-bin  # Open MPI: CPU communication backend
  libhiredis-dev redis-server # Redis: rendezvous, heartbeats, monitor stream
  libgtest-dev libgmock-dev   # GoogleTest
  libbenchmark-dev            # Google Benchmark
  nlohmann-json3-dev          # nlohmann-json: JSON read and written by calibrate/
  libjemalloc-dev             # jemalloc: allocator of `megascale` (event simulation speed)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
