// model/throughput.cc: see throughput.h.
#include "model/throughput.h"

#include <algorithm>

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/op_cost.h"
#include "model/profile.h"

namespace megascale::model {

Throughput throughput(const Scenario& s, double iteration_time_s, double devices, double peak_flops) {
  if (!(iteration_time_s > 0) || !std::isfinite(iteration_time_s) || !(devices > 0) || !(peak_flops > 0)) {
    throw std::invalid_argument("throughput: iteration time, devices and peak must be finite and > 0 (got " +
                                std::to_string(iteration_time_s) + " s, " + std::to_string(devices) + ", " +
                                std::to_string(peak_flops) + " FLOP/s)");
  }
  Throughput t;
  t.model_flops = model_flops_per_iteration(s.model, s.parallel.global_batch);
  t.mfu = t.model_flops / (iteration_time_s * devices * peak_flops);
  t.tokens_per_s = static_cast<double>(s.tokens_per_iteration()) / iteration_time_s;
  return t;
}

double mfu_ceiling(const Scenario& s) {
  return s.optimizations.fp8 ? std::max(1.0, hardware_profile(s).fp8_gemm_speedup()) : 1.0;
}

Throughput throughput(const Scenario& s, double iteration_time_s) {
  const GpuProfile& gpu = hardware_profile(s);
  const Throughput t = throughput(s, iteration_time_s, s.parallel.gpus(), gpu.peak_tflops * 1e12);
  // A prediction above the peak means the profile contradicts itself (measured
  // tables or a fitted scale faster than its peak_tflops): an error, not a figure.
  if (t.mfu > mfu_ceiling(s)) {
    throw std::invalid_argument("hardware profile '" + gpu.name + "'" +
                                (gpu.source_file.empty() ? "" : " (" + gpu.source_file + ")") +
                                ": predicted MFU " + std::to_string(t.mfu) +
                                " exceeds 1; its measured or fitted compute is faster than its peak_tflops (" +
                                std::to_string(gpu.peak_tflops) + ")");
  }
  return t;
}

}  // namespace megascale::model
