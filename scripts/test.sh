#!/usr/bin/env bash
# Command 2: install what is missing, build Release, run the whole test suite,
# then the sanitizer stage (scripts/sanitize.sh: the unit and mpi tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/).
# MEGASCALE_SKIP_SANITIZE=1 stops after the Release suite (a quicker local run;
# CI runs both).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "$build"
# --timeout: a test that hangs fails after 15 min instead of holding the run
# until CI's limit (a stuck mpirun once held one test 15 min; the slowest test
# here takes ~95 s: ScenarioFuzz, calibrate_micro_quick).
ctest --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}"
if [ "${MEGASCALE_SKIP_SANITIZE:-0}" != "1" ]; then
  "$root/scripts/sanitize.sh"
fi
