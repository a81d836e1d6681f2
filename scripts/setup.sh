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
  libcli11-dev                # CLI11: command-line options of the subcommands (cli/args.cc)
  libfmt-dev                  # {fmt}: formatted text of reports and tables (cli/)
)

# The CUDA backend (cmake/Cuda.cmake) is optional and not installed from here:
# say what this machine has (nvcc, cuBLASLt, NCCL) and carry on either way.
cuda_report() {
  local nvcc
  nvcc="$(command -v nvcc || true)"
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  if [ -z "$nvcc" ]; then
    echo "setup: CUDA: nvcc not found: the engine builds for CPU only (GPU tests reported as skipped)"
    return 0
  fi
  local cuda_root
  cuda_root="$(cd "$(dirname "$nvcc")/.." && pwd)"
  echo "setup: CUDA: $("$nvcc" --version | grep -o 'release [0-9.]*' || echo 'nvcc (version unknown)') at $nvcc"
  local found
  found="$(ls "$cuda_root"/lib64/libcublasLt.so* /usr/lib/x86_64-linux-gnu/libcublasLt.so* 2>/dev/null | head -1)"
  echo "setup: CUDA: cuBLASLt ${found:-not found (the CUDA backend needs it)}"
  local nccl_h
  nccl_h="$(ls "$cuda_root"/include/nccl.h /usr/include/nccl.h 2>/dev/null | head -1)"
  if [ -n "$nccl_h" ]; then
    echo "setup: CUDA: NCCL $(awk '/define NCCL_MAJOR/{a=$3}/define NCCL_MINOR/{b=$3}/define NCCL_PATCH/{c=$3}END{print a"."b"."c}' "$nccl_h") ($nccl_h)"
  else
    echo "setup: CUDA: NCCL not found (the CUDA backend needs it)"
  fi
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    echo "setup: CUDA: GPU $(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | head -1)"
  else
    echo "setup: CUDA: no GPU visible (GPU tests will be skipped)"
  fi
}
cuda_report || true

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
