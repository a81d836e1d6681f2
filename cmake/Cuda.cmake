# The CUDA + NCCL backend of the engine (engine/cuda/), built whenever nvcc is
# found: MEGASCALE_HAVE_CUDA is ON then, OFF otherwise, and every CUDA target
# and define is guarded by it, so a machine without the toolkit builds the
# CPU engine exactly as before.
#
# Architectures: sm_80 (A100) and sm_90 (H100 / H200), the profiles shipped in
# calibrate/profiles/, plus the arch of a GPU visible at configure time
# (nvidia-smi's compute_cap). Set CMAKE_CUDA_ARCHITECTURES to override (e.g.
# scripts/gpu-check.sh builds for 90 alone). Two archs keep the CUDA part of a
# 2-core CI build to a few minutes.
#
# Needs: nvcc (CMAKE_CUDA_COMPILER, CUDACXX, PATH or /usr/local/cuda/bin),
# cudart, cuBLAS and cuBLASLt (CUDAToolkit) and NCCL (nccl.h + libnccl, looked for
# beside the toolkit and in NCCL_ROOT). Without NCCL, or with
# -DMEGASCALE_CUDA=OFF, the backend is not built.
option(MEGASCALE_CUDA "Build the CUDA + NCCL engine backend when nvcc is found" ON)
set(MEGASCALE_HAVE_CUDA OFF)

if(MEGASCALE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(_archs 80 90)
      find_program(_nvidia_smi nvidia-smi)
      if(_nvidia_smi)
        execute_process(COMMAND ${_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                        OUTPUT_VARIABLE _caps RESULT_VARIABLE _smi_rc ERROR_QUIET
                        OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 20)
        if(_smi_rc EQUAL 0 AND _caps)
          string(REPLACE "\n" ";" _caps "${_caps}")
          foreach(_cap IN LISTS _caps)
            string(REPLACE "." "" _cap "${_cap}")
            string(STRIP "${_cap}" _cap)
            if(_cap MATCHES "^[0-9]+$")
              list(APPEND _archs ${_cap})
            endif()
          endforeach()
        endif()
      endif()
      list(REMOVE_DUPLICATES _archs)
      set(CMAKE_CUDA_ARCHITECTURES ${_archs} CACHE STRING "CUDA architectures" FORCE)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_path(NCCL_INCLUDE_DIR nccl.h
              HINTS $ENV{NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_library(NCCL_LIBRARY NAMES nccl
                 HINTS $ENV{NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND TARGET CUDA::cublasLt AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(MEGASCALE_HAVE_CUDA ON)
      add_library(megascale_nccl INTERFACE)
      target_include_directories(megascale_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(megascale_nccl INTERFACE ${NCCL_LIBRARY})
      # Device code: C++17, host warnings through -Xcompiler (nvcc itself has
      # no -Wall), every nvcc warning an error-free but visible diagnostic.
      set(CMAKE_CUDA_STANDARD 17)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      set(MEGASCALE_CUDA_FLAGS -Xcompiler=-Wall,-Wextra --Werror=all-warnings -lineinfo)
      message(STATUS "megascale: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY})")
    else()
      message(STATUS "megascale: nvcc found but cuBLAS, cuBLASLt or NCCL missing: CUDA backend OFF")
    endif()
  else()
    message(STATUS "megascale: nvcc not found: CUDA backend OFF (CPU engine only)")
  endif()
else()
  message(STATUS "megascale: MEGASCALE_CUDA=OFF: CUDA backend OFF (CPU engine only)")
endif()
