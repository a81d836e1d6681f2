// engine/cuda/event_timer.h: OpTimer (engine/op_timer.h) on CUDA events.
//
// defines: CudaEventTimer.
//
// stamp() records a pooled event (cudaEventDefault: timing on) on the
// device's stream; resolve() synchronises on the last one and converts each
// to host microseconds as ref_host_us + cudaEventElapsedTime(ref, event): the
// reference event is recorded once, at construction, after a stream
// synchronisation, with TraceRecorder::now_us() read right after it completes
// (an offset error of the order of the synchronisation's wake-up, a few us;
// event resolution is about 0.5 us per the CUDA programming guide).
//
// Thread-safety: one per rank thread (that of its CudaDevice).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "engine/op_timer.h"

namespace megascale::engine {

class CudaEventTimer final : public OpTimer {
 public:
  // REQUIRES: `stream` belongs to the current CUDA device and outlives this.
  explicit CudaEventTimer(cudaStream_t stream);
  ~CudaEventTimer() override;
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  int stamp() override;
  std::vector<double> resolve() override;

 private:
  cudaStream_t stream_;
  cudaEvent_t ref_ = nullptr;
  double ref_host_us_ = 0;
  std::vector<cudaEvent_t> pool_;
  int used_ = 0;
};

}  // namespace megascale::engine
