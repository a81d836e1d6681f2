// engine/cuda/event_timer.cc: CUDA-event markers -> host-clock microseconds.
#include "engine/cuda/event_timer.h"

#include <cuda_runtime.h>

#include "engine/cuda/cuda_check.h"
#include "engine/trace.h"

namespace megascale::engine {

CudaEventTimer::CudaEventTimer(cudaStream_t stream) : stream_(stream) {
  CUDA_CHECK(cudaEventCreate(&ref_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  CUDA_CHECK(cudaEventRecord(ref_, stream_));
  CUDA_CHECK(cudaEventSynchronize(ref_));
  ref_host_us_ = TraceRecorder::now_us();
}

CudaEventTimer::~CudaEventTimer() {
  for (cudaEvent_t e : pool_) (void)cudaEventDestroy(e);
  if (ref_ != nullptr) (void)cudaEventDestroy(ref_);
}

int CudaEventTimer::stamp() {
  if (used_ == static_cast<int>(pool_.size())) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(pool_[used_], stream_));
  return used_++;
}

std::vector<double> CudaEventTimer::resolve() {
  std::vector<double> out(static_cast<size_t>(used_));
  if (used_ > 0) CUDA_CHECK(cudaEventSynchronize(pool_[used_ - 1]));
  for (int i = 0; i < used_; ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ref_, pool_[i]));
    out[i] = ref_host_us_ + 1000.0 * static_cast<double>(ms);
  }
  used_ = 0;
  return out;
}

}  // namespace megascale::engine
