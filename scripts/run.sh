#!/usr/bin/env bash
# Command 1: install what is missing, build Release, run the main job on the
# built-in default scenario (175B on 12,288 A100s, Megatron-LM vs MegaScale).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" megascale
"${BUILD_DIR:-$root/build}/megascale" compare "$@"
