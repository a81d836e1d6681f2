# Finds every dependency from its Debian package (scripts/setup.sh installs them).
# Each found library is exposed as an imported target named megascale::<name>.

find_package(PkgConfig REQUIRED)

# TOML++ (libtomlplusplus-dev): scenario files.
find_package(tomlplusplus REQUIRED)

# Eigen (libeigen3-dev): CPU tensors and GEMMs of the engine.
find_package(Eigen3 3.3 REQUIRED NO_MODULE)

# Boost.Graph (libboost-graph-dev): the fabric topology of network/.
find_package(Boost 1.74 REQUIRED COMPONENTS graph)

# SimGrid (libsimgrid-dev) ships no CMake config; pkg-config finds it.
pkg_check_modules(SIMGRID REQUIRED IMPORTED_TARGET simgrid>=3.32)

# jemalloc (libjemalloc-dev): the allocator of the `megascale` executable. The
# event simulation creates and frees one SimGrid activity per op (millions for a
# 12,288-GPU step); glibc's malloc spent ~15% of that run consolidating free
# chunks, jemalloc runs it ~17% faster (README, "Measured").
# Under MEGASCALE_SANITIZE (cmake/Sanitize.cmake) ASan must own malloc: the
# target PkgConfig::JEMALLOC is then an empty stand-in, so the targets that
# link it need no change and get the sanitizer's allocator.
if(MEGASCALE_SANITIZE)
  add_library(PkgConfig::JEMALLOC INTERFACE IMPORTED)
else()
  pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
endif()

# hiredis (libhiredis-dev): Redis client for rendezvous / heartbeats.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)

# Open MPI (libopenmpi-dev): CPU communication backend of the engine.
find_package(MPI REQUIRED COMPONENTS CXX)

# nlohmann-json (nlohmann-json3-dev): JSON of calibrate/ (profiles' companions,
# reports).
find_package(nlohmann_json 3.10 REQUIRED)

# CLI11 (libcli11-dev, header-only): the options of each program and subcommand (base/options.cc).
find_package(CLI11 2.1 CONFIG REQUIRED)

# {fmt} (libfmt-dev): formatted text everywhere (reports, notes, errors, CSV and
# SVG numbers); megascale_base links it for every layer.
find_package(fmt 9 REQUIRED)

# GoogleTest and Google Benchmark.
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)

# CUDA Toolkit, cuBLASLt and NCCL: optional, detected in cmake/Cuda.cmake
# (MEGASCALE_HAVE_CUDA), which builds the engine's GPU backend when they exist.
