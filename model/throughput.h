// model/throughput.h: what an iteration time means to a user, in one place for
// the closed form (model/estimator.cc), the event simulation (sim/job_sim.cc)
// and the engine's own step reports (engine/trainer.cc).
//
// defines: Throughput, throughput
//
// model FLOPs = model_flops_per_iteration() (model/op_cost.h: the formula of
//   Narayanan et al. 2021 that MegaScale's MFU uses, no recomputation counted);
// MFU = model FLOPs / (iteration time x devices x peak FLOP/s of one device);
// tokens/s = global batch x sequence length / iteration time.
//
// Thread-safety: pure functions.
#pragma once

#include "model/config.h"

namespace megascale::model {

struct Throughput {
  double model_flops = 0;   // per iteration, whole job
  double mfu = 0;           // fraction of peak, 0..1
  double tokens_per_s = 0;  // whole job
};

// For `devices` devices of `peak_flops` FLOP/s each (the engine: the cores it
// can use, at the cpu profile's per-core peak; a measurement may exceed 1 when
// the measured peak was taken on a slower moment). Throws std::invalid_argument
// unless the time, devices and peak are finite and > 0.
Throughput throughput(const Scenario& s, double iteration_time_s, double devices, double peak_flops);

// The highest MFU the scenario's GPUs can reach: 1, or under FP8 (MFU stays
// against the BF16 peak) the profile's FP8 GEMM speedup. What a prediction or a
// measured time must not exceed.
double mfu_ceiling(const Scenario& s);

// For the scenario's GPUs at its hardware profile's peak_tflops: a prediction.
// Also throws when the MFU would exceed 1 (the profile contradicts its peak),
// naming the profile and its file.
Throughput throughput(const Scenario& s, double iteration_time_s);

}  // namespace megascale::model
