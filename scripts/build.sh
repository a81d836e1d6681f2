#!/usr/bin/env bash
# Configures and builds megascale in Release mode into build/ (or $BUILD_DIR).
# Arguments name the targets to build (default: everything).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ $# -gt 0 ]; then
  for target in "$@"; do cmake --build "$build" -j "$jobs" --target "$target"; done
else
  cmake --build "$build" -j "$jobs"
fi
