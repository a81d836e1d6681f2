# The vector ISA the whole build targets (the engine's Eigen GEMMs and loops run
# at the speed this sets: on this project's 2-core AMD EPYC VM Eigen's SGEMM
# reaches ~35 GFLOP/s per core with the x86-64 baseline (SSE2) and about twice
# that with AVX2 + FMA; README "Measured figures").
#
#   -DMEGASCALE_CPU_ISA=auto       (default) the highest of x86-64-v4 (AVX-512
#                                  F/BW/CD/DQ/VL) and x86-64-v3 (AVX2, FMA,
#                                  BMI1/2, F16C, LZCNT, MOVBE) that the
#                                  configuring machine's CPU has, else the
#                                  compiler's baseline
#   -DMEGASCALE_CPU_ISA=baseline   the compiler's default target (portable)
#   -DMEGASCALE_CPU_ISA=native     -march=native
#   -DMEGASCALE_CPU_ISA=x86-64-v3 | x86-64-v4 | any other -march value
#
# The flag applies to every target: Eigen is header-only, and two objects that
# instantiate the same Eigen template for different ISAs would break the
# one-definition rule. A binary built with auto runs on CPUs that have the
# configuring machine's level (CI builds and runs on the same machine). The
# choice is printed and stored in MEGASCALE_CPU_ISA_FLAG (the engine reports it).
set(MEGASCALE_CPU_ISA "auto" CACHE STRING
    "Vector ISA: auto | baseline | native | an -march value such as x86-64-v3")

set(MEGASCALE_CPU_ISA_FLAG "")
if(MEGASCALE_CPU_ISA STREQUAL "auto")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    # GCC >= 12 and Clang >= 14 know the x86-64-vN names in __builtin_cpu_supports.
    set(_probe "${CMAKE_BINARY_DIR}/CMakeFiles/megascale_isa_probe.cc")
    # Exit status: 4 = v4, 3 = v3, 0 = neither.
    file(WRITE "${_probe}"
         "int main() { __builtin_cpu_init();\n"
         "  if (__builtin_cpu_supports(\"x86-64-v4\")) return 4;\n"
         "  if (__builtin_cpu_supports(\"x86-64-v3\")) return 3;\n"
         "  return 0; }\n")
    try_run(_isa_run _isa_compile "${CMAKE_BINARY_DIR}/CMakeFiles/megascale_isa_probe" "${_probe}")
    if(_isa_compile AND _isa_run EQUAL 4)
      set(MEGASCALE_CPU_ISA_FLAG "-march=x86-64-v4")
    elseif(_isa_compile AND _isa_run EQUAL 3)
      set(MEGASCALE_CPU_ISA_FLAG "-march=x86-64-v3")
    endif()
  endif()
elseif(MEGASCALE_CPU_ISA STREQUAL "native")
  set(MEGASCALE_CPU_ISA_FLAG "-march=native")
elseif(NOT MEGASCALE_CPU_ISA STREQUAL "baseline")
  set(MEGASCALE_CPU_ISA_FLAG "-march=${MEGASCALE_CPU_ISA}")
endif()

if(MEGASCALE_CPU_ISA_FLAG)
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag("${MEGASCALE_CPU_ISA_FLAG}" _megascale_isa_ok)
  if(NOT _megascale_isa_ok)
    message(FATAL_ERROR "megascale: MEGASCALE_CPU_ISA=${MEGASCALE_CPU_ISA}: the compiler rejects ${MEGASCALE_CPU_ISA_FLAG}")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${MEGASCALE_CPU_ISA_FLAG}>)
  # With FMA available, g++ contracts a*b+c into one fused multiply-add wherever
  # it likes in C++ (-ffp-contract=fast is its default outside ISO C): the same
  # expression could round differently in two places, and the engine's
  # exactness tests (rank-ordered sums reproduced bit for bit) and the
  # simulator's golden outputs would depend on inlining. Off: our own arithmetic
  # rounds as in a baseline build; Eigen's kernels still use FMA through
  # explicit intrinsics.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
  message(STATUS "megascale: CPU ISA ${MEGASCALE_CPU_ISA} -> ${MEGASCALE_CPU_ISA_FLAG}")
else()
  message(STATUS "megascale: CPU ISA ${MEGASCALE_CPU_ISA} -> compiler baseline (no -march)")
endif()
add_compile_definitions(MEGASCALE_CPU_ISA_FLAG="${MEGASCALE_CPU_ISA_FLAG}")

# GCC 12 warns -Wmaybe-uninitialized inside its own avx512fintrin.h when Eigen's
# AVX-512 packet code inlines _mm512_undefined_ps (GCC bug 105593, fixed in GCC
# 13): a false positive. Targets that compile Eigen code add this flag
# (engine/CMakeLists.txt), nothing else loses the warning.
set(MEGASCALE_EIGEN_WARNING_FLAGS "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13
   AND MEGASCALE_CPU_ISA_FLAG MATCHES "v4|native")
  set(MEGASCALE_EIGEN_WARNING_FLAGS "-Wno-maybe-uninitialized")
  # In the sanitizer build (-O1, cmake/Sanitize.cmake) GCC 12 reports the same
  # false positive as -Wuninitialized ('__Y' in `__m512 __Y = __Y;`).
  if(MEGASCALE_SANITIZE)
    list(APPEND MEGASCALE_EIGEN_WARNING_FLAGS "-Wno-uninitialized")
  endif()
endif()
