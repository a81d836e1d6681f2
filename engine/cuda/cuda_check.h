// engine/cuda/cuda_check.h: error checks for CUDA, cuBLAS(Lt) and NCCL calls
// that name the failing call, file, line and the library's own error string
// (llm.c's cudaCheck / cublasCheck / ncclCheck), thrown as std::runtime_error
// like ENGINE_CHECK (engine/device.h).
//
// defines: CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, CUDA_CHECK_LAUNCH.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace megascale::engine::cuda_detail {

[[noreturn]] inline void throw_error(const char* what, const char* call, const char* file, int line,
                                     const std::string& detail) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + " error: " +
                           detail + " (in " + call + ")");
}

}  // namespace megascale::engine::cuda_detail

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    const cudaError_t cuda_check_err_ = (call);                                                   \
    if (cuda_check_err_ != cudaSuccess) {                                                         \
      ::megascale::engine::cuda_detail::throw_error(                                              \
          "CUDA", #call, __FILE__, __LINE__,                                                      \
          std::string(cudaGetErrorName(cuda_check_err_)) + ": " + cudaGetErrorString(cuda_check_err_)); \
    }                                                                                             \
  } while (0)

// After a kernel launch: the launch's own error (bad configuration), not the
// kernel's outcome (that surfaces at the next synchronising call).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// cublasStatus_t (cuBLASLt calls): cublasLtGetStatusString.
#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    const cublasStatus_t cublas_check_st_ = (call);                                               \
    if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS) {                                              \
      ::megascale::engine::cuda_detail::throw_error("cuBLAS", #call, __FILE__, __LINE__,           \
                                                    cublasLtGetStatusString(cublas_check_st_));     \
    }                                                                                             \
  } while (0)

// ncclResult_t: ncclGetErrorString, plus ncclGetLastError's detail when given.
#define NCCL_CHECK(comm, call)                                                                    \
  do {                                                                                            \
    const ncclResult_t nccl_check_res_ = (call);                                                  \
    if (nccl_check_res_ != ncclSuccess && nccl_check_res_ != ncclInProgress) {                    \
      const char* nccl_last_ = ncclGetLastError(comm);                                            \
      ::megascale::engine::cuda_detail::throw_error(                                              \
          "NCCL", #call, __FILE__, __LINE__,                                                      \
          std::string(ncclGetErrorString(nccl_check_res_)) +                                      \
              (nccl_last_ != nullptr && *nccl_last_ != '\0' ? std::string(": ") + nccl_last_ : "")); \
    }                                                                                             \
  } while (0)
