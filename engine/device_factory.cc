// engine/device_factory.cc: "cpu" / "cuda" -> a Device (and its Comm).
// MEGASCALE_HAVE_CUDA is defined for this file alone when the CUDA backend is
// built (engine/CMakeLists.txt).
#include "engine/device_factory.h"

#include <stdexcept>

#include "engine/device_cpu.h"

#ifdef MEGASCALE_HAVE_CUDA
#include "engine/cuda/comm_nccl.h"
#include "engine/cuda/device_cuda.h"
#endif

namespace megascale::engine {

bool cuda_compiled() {
#ifdef MEGASCALE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef MEGASCALE_HAVE_CUDA
  return cuda_device_unavailable_reason();
#else
  return "this build has no CUDA backend (nvcc was not found when CMake configured it; "
         "see scripts/setup.sh and cmake/Cuda.cmake)";
#endif
}

std::string device_model_name(Device& device) {
#ifdef MEGASCALE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) return cuda->device_name();
#endif
  return device.name();
}

std::unique_ptr<Device> make_device(const DeviceOptions& options) {
  if (options.precision != "fp32" && options.precision != "bf16") {
    throw std::invalid_argument("device precision must be \"fp32\" or \"bf16\", got \"" + options.precision + "\"");
  }
  if (options.attention != "auto" && options.attention != "flash" && options.attention != "cublas" &&
      options.attention != "flash-tc") {
    throw std::invalid_argument("device attention must be \"auto\", \"flash\", \"cublas\" or \"flash-tc\", got \"" +
                                options.attention + "\"");
  }
  if (options.attention == "flash-tc" && options.precision != "bf16") {
    throw std::invalid_argument("device attention \"flash-tc\" runs on bf16 tensor cores: it needs precision "
                                "\"bf16\", got \"" + options.precision + "\"");
  }
  if (options.name == "cpu") return std::make_unique<CpuDevice>();
  if (options.name != "cuda") {
    throw std::invalid_argument("device must be \"cpu\" or \"cuda\", got \"" + options.name + "\"");
  }
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw std::invalid_argument("device \"cuda\" refused: " + why);
#ifdef MEGASCALE_HAVE_CUDA
  CudaDeviceOptions o;
  o.ordinal = options.ordinal;
  o.precision = options.precision == "bf16" ? GemmPrecision::kBf16 : GemmPrecision::kFp32;
  o.attention = options.attention == "flash"    ? AttentionPath::kFlash
                : options.attention == "cublas"   ? AttentionPath::kCublas
                : options.attention == "flash-tc" ? AttentionPath::kFlashTc
                                                  : AttentionPath::kAuto;
  return std::make_unique<CudaDevice>(o);
#else
  return nullptr;  // unreachable: cuda_unavailable_reason() is never empty here
#endif
}

std::unique_ptr<Comm> make_device_comm(Device& device, Comm& over) {
#ifdef MEGASCALE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) return NcclComm::create(*cuda, over);
#else
  (void)device;
  (void)over;
#endif
  return nullptr;
}

}  // namespace megascale::engine
