// model/throughput.cc: see throughput.h.
#include "model/throughput.h"

#include "model/op_cost.h"
#include "model/profile.h"

namespace megascale::model {

Throughput throughput(const Scenario& s, double iteration_time_s, double devices, double peak_flops) {
  Throughput t;
  t.model_flops = model_flops_per_iteration(s.model, s.parallel.global_batch);
  t.mfu = t.model_flops / (iteration_time_s * devices * peak_flops);
  t.tokens_per_s = static_cast<double>(s.tokens_per_iteration()) / iteration_time_s;
  return t;
}

Throughput throughput(const Scenario& s, double iteration_time_s) {
  return throughput(s, iteration_time_s, s.parallel.gpus(), hardware_profile(s).peak_tflops * 1e12);
}

}  // namespace megascale::model
