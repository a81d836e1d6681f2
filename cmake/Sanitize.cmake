# AddressSanitizer + UndefinedBehaviorSanitizer build (scripts/sanitize.sh,
# README "Tests"): -DMEGASCALE_SANITIZE=ON instruments every target of the
# build directory. CI configures it in its own directory (build-asan/) and runs
# the unit and MPI tests there.
#
#   -fsanitize=address,undefined     heap/stack/global overflows, use after
#                                    free/return/scope, leaks (LeakSanitizer),
#                                    and undefined behaviour (signed overflow,
#                                    bad shifts, misaligned or null access,
#                                    bad enum/bool, ...)
#   -fsanitize=float-cast-overflow   a double out of an integer's range
#                                    converted to it (UB; GCC leaves it out of
#                                    "undefined"): (int)1e308 from a scenario
#   -fno-sanitize-recover=all        a UB report aborts the program, so a test
#                                    fails instead of printing and passing
#   -fno-omit-frame-pointer          complete stacks in the reports
#
# Under the sanitizers jemalloc is not linked (cmake/Dependencies.cmake): ASan
# replaces malloc, and a second allocator would hide heap errors from it. The
# runtime options (suppressions, SimGrid's contexts) are set by
# scripts/sanitize.sh and documented there.
option(MEGASCALE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

if(MEGASCALE_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "megascale: MEGASCALE_SANITIZE needs GCC or Clang")
  endif()
  set(MEGASCALE_SANITIZERS address,undefined,float-cast-overflow)
  add_compile_options(-fsanitize=${MEGASCALE_SANITIZERS} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${MEGASCALE_SANITIZERS})
  message(STATUS "megascale: AddressSanitizer + UndefinedBehaviorSanitizer build")
endif()
