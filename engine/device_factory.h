// engine/device_factory.h: picks the engine's backend by name — the Device
// ("cpu": CpuDevice, "cuda": CudaDevice) and, for a GPU device, the Comm that
// moves its memory (NcclComm over an existing communicator).
//
// defines: DeviceOptions, make_device, device_model_name, cuda_compiled, cuda_unavailable_reason,
// make_device_comm.
//
// The CUDA backend (engine/cuda/) is compiled only when CMake found nvcc
// (cmake/Cuda.cmake); this file is the one place the rest of the engine asks
// about it, so every other file builds the same with or without CUDA.
// make_device("cuda") refuses with std::invalid_argument and a reason a user
// can act on: not compiled in, no driver, no device, or a bad precision.
//
// Thread-safety: the functions are free of shared state.
#pragma once

#include <memory>
#include <string>

#include "engine/comm.h"
#include "engine/device.h"

namespace megascale::engine {

struct DeviceOptions {
  std::string name = "cpu";        // "cpu" | "cuda"
  // CUDA GEMM precision: "fp32" (exact fp32 products, for the comparisons with
  // the CPU device) or "bf16" (bf16 inputs, fp32 accumulation and outputs,
  // fp32 master weights and gradients: Megatron-LM's mixed precision).
  // Ignored on the CPU.
  std::string precision = "fp32";
  int ordinal = -1;                // CUDA device index; -1: local rank modulo the GPU count
  // CUDA attention path ([train] attention): "auto" (cuBLAS in bf16, the
  // flash-style kernel in fp32) | "flash" | "cublas" | "flash-tc" (tensor-core
  // flash kernel; needs precision "bf16"). Ignored on the CPU.
  std::string attention = "auto";
};

// True when this build contains the CUDA backend.
bool cuda_compiled();
// "" when make_device({"cuda"}) can succeed; otherwise why not (not compiled,
// no driver, no device), naming the CUDA error string.
std::string cuda_unavailable_reason();

// What the hardware calls `device`: the GPU's name (cudaDeviceProp::name,
// e.g. "NVIDIA H200") for a CUDA device, else its Device::name().
std::string device_model_name(Device& device);

// A new device. Throws std::invalid_argument for an unknown name or precision
// and for "cuda" when cuda_unavailable_reason() is not empty (its text).
std::unique_ptr<Device> make_device(const DeviceOptions& options);

// For a CUDA device: an NcclComm spanning the ranks of `over` (collective over
// it: the NCCL unique id is broadcast through it), running on the device's
// stream. For a CPU device: nullptr (use `over` itself).
std::unique_ptr<Comm> make_device_comm(Device& device, Comm& over);

}  // namespace megascale::engine
