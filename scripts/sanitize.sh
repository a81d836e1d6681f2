#!/usr/bin/env bash
# The sanitizer stage of CI (scripts/test.sh runs it after the normal suite):
# configures build-asan/ (or $SANITIZE_BUILD_DIR) with -DMEGASCALE_SANITIZE=ON
# (cmake/Sanitize.cmake: AddressSanitizer + UndefinedBehaviorSanitizer with
# float-cast-overflow), builds
# only the executables of the unit and mpi tests (target unit_mpi_tests,
# tests/CMakeLists.txt), and runs those tests there. Any sanitizer report fails
# its test: ASan and UBSan stop the program (-fno-sanitize-recover=all,
# halt_on_error), LeakSanitizer makes it exit non-zero.
#
# Runtime choices:
# - SimGrid (sim/, network/simgrid_check) runs its actors as threads in this
#   build (base/sanitizer.h): its default contexts switch stacks by hand,
#   which ASan cannot follow ("False positive error reports may follow").
#   Nothing needs suppressing in SimGrid then.
# - Open MPI keeps what MPI_Init allocated past MPI_Finalize: the mpi tests run
#   with the LeakSanitizer suppressions of scripts/sanitizer-suppressions.txt
#   (Open MPI's and libevent's own allocations only; each says why) and
#   fast_unwind_on_malloc=0, which records whole stacks, so that a leak is
#   matched to those libraries by any frame (their plugins are unloaded at
#   exit, and a frame-pointer stack ends in "<unknown module>"). It makes every
#   allocation slower (engine_exactness_np2: 49 s instead of 16 s), so the unit
#   tests, which do not use MPI, run without it.
# - ASan also checks the order of static initialisation across files
#   (check_initialization_order, strict_init_order) and returns of stack
#   addresses (detect_stack_use_after_return).
#
# - The fuzz tests (tests/fuzz/) run a quarter of their cases here
#   (MEGASCALE_FUZZ_SCALE=0.25, the first cases of the same sequences): every
#   kind of input still goes through the sanitizers, and the Release stage runs
#   them all. At full count the six `train` cases of input_fuzz_test alone
#   took 106 s of this stage (2026-12-01, 2-core VM).
#
# Optimisation -O1 (the sanitizers' usual level: readable stacks, tests fast
# enough), -g1 (file:line in reports, small objects), and assertions on (no
# NDEBUG): this build checks, it is not measured.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SANITIZE_BUILD_DIR:-$root/build-asan}"
jobs="${JOBS:-$(nproc)}"

start=$(date +%s)
cmake -S "$root" -B "$build" -DMEGASCALE_SANITIZE=ON -DMEGASCALE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$build" -j "$jobs" --target unit_mpi_tests
built=$(date +%s)

# ASan's options (see the comment above); UBSan prints the stack of a report.
asan="halt_on_error=1:detect_leaks=1:strict_init_order=1:check_initialization_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export MEGASCALE_FUZZ_SCALE="${MEGASCALE_FUZZ_SCALE:-0.25}"
cd "$build"
ASAN_OPTIONS="$asan" ctest --output-on-failure --timeout 900 -j "$jobs" -L unit  # --timeout: scripts/test.sh
ASAN_OPTIONS="$asan:fast_unwind_on_malloc=0" \
  LSAN_OPTIONS="suppressions=$root/scripts/sanitizer-suppressions.txt:print_suppressions=0" \
  ctest --output-on-failure --timeout 900 -L mpi
done_=$(date +%s)
echo "sanitize.sh: build $((built - start)) s, tests $((done_ - built)) s"
