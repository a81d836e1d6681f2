#!/usr/bin/env bash
# scripts/gpu-bundle.sh [BUILD_DIR] [BUNDLE_DIR]: the GPU check's programs,
# built here, with the shared libraries they need that a CUDA machine may
# lack, copied into BUNDLE_DIR (default .gpu-bundle/, git-ignored).
#
# For a GPU machine that has a driver and CUDA's libraries but none of the
# project's Debian packages and no network (so scripts/gpu-check.sh cannot
# install and build there): copy the tree and this folder over, then
#
#   GPU_CHECK_PREBUILT=.gpu-bundle scripts/gpu-check.sh [OUT_DIR]
#
# What is copied: engine_gpu_tests, megascale-train and megascale-micro
# (BUILD_DIR must be configured with the CUDA backend; its
# CMAKE_CUDA_ARCHITECTURES must include the GPU's, e.g. 90 for H100 / H200),
# and every library `ldd` resolves for them except the C runtime (glibc,
# libgcc_s), libstdc++ (kept in lib/fallback/, used only where the machine's
# is missing or older) and CUDA's own: cuBLAS / cuBLASLt (600 MB) and NCCL
# (220 MB) are too large to carry, and they must match the machine's driver,
# so gpu-check.sh finds the machine's copies (CUDA's lib64, or the nvidia-*
# wheels of a PyTorch install). libcudart (0.7 MB) is carried: it is the
# version the programs were compiled against. The `megascale` CLI itself is
# not carried (SimGrid, ns-3, Boost): gpu-check's "predict" step then says
# how to run it anywhere on the run's files.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bundle="${2:-$root/.gpu-bundle}"
if ! grep -q "^CMAKE_CUDA_ARCHITECTURES" "$build/CMakeCache.txt" 2>/dev/null; then
  echo "gpu-bundle: $build is not a build directory with the CUDA backend (configure it where nvcc is found)" >&2
  exit 2
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target engine_gpu_tests megascale-train megascale-micro
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/fallback"
cp "$build/tests/engine_gpu_tests" "$build/megascale-train" "$build/megascale-micro" "$bundle/bin/"
for b in "$bundle"/bin/*; do ldd "$b" | awk '/=> \// {print $3}'; done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so*) ;;
    libcublas* | libnccl* | libcuda.so*) ;;
    libstdc++.so*) cp -L "$lib" "$bundle/lib/fallback/" ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) from commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  grep "^CMAKE_CUDA_ARCHITECTURES\|^CMAKE_BUILD_TYPE" "$build/CMakeCache.txt"
  (ldd --version | head -1)
} > "$bundle/BUILD-INFO"
du -sh "$bundle"
ls "$bundle/lib"
