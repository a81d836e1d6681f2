// engine/engine_tables.h: the measured tables that let the simulator predict
// a scenario's run on a given Device call by call (`megascale calibrate micro
// --device cuda --engine-profile FILE SCENARIO...`).
//
// defines: EngineTables, measure_engine_tables, engine_device_profile
//
// The simulator predicts the engine from the calls it makes inside each trace
// event (model/engine_ops.h) and a profile's tables: GEMMs by (layout, m, n,
// k), attention per (sequence x query head) by (seq, head dim, window), the
// other kernels by element count. On the CPU those tables come from a broad
// sweep (engine/microbench.h). Here they are measured for the exact calls a
// scenario's step makes, on any Device: on a GPU that is the CudaDevice its
// [train] section asks for (precision, attention path), so the bf16 GEMMs
// include the engine's casts and the attention is the path the run takes.
//   GEMMs      every shape of the step's linear layers in the three layouts
//              the engine calls (nt beta 0, tn beta 1, nn beta 0).
//   attention  forward and backward at the scenario's micro-batch, local
//              heads, head dim and window; seconds per (sequence x head).
//   kernels    each (kernel, pass, element count) the step's calls name, as
//              the layers call it (rows of the hidden size; cross-entropy
//              rows of the local vocabulary; the optimizer's norm + scale and
//              update over the shard), plus every other kernel of
//              model::kCpuKernels once at 2^22 elements so the profile is
//              complete.
// Each point: two warm-up calls, then `repeats` calls each between two of the
// device's queue markers (Device::make_op_timer: CUDA events; the host clock
// on the CPU), no host synchronisation between them; the median is kept. The
// operands are filled with a fixed pseudo-random pattern (never zeros).
//
// Thread-safety: uses the device given; call from one thread.
#pragma once

#include <string>
#include <vector>

#include "engine/device.h"
#include "model/hardware.h"
#include "model/profile_tables.h"
#include "model/scenario.h"

namespace megascale::engine {

struct EngineTables {
  std::vector<model::GemmPoint> gemm;
  std::vector<model::AttentionPoint> attention;
  std::vector<model::KernelPoint> kernels;
  double seconds = 0;  // wall time of the measurement
  bool fused_bias = false;  // Device::fuses_bias() of the device measured
};

// REQUIRES: every scenario is trainable (model::check_trainable).
EngineTables measure_engine_tables(Device& device, const std::vector<model::Scenario>& scenarios,
                                   int repeats = 10);

// `base` (the shipped profile of the device, e.g. H200-SXM-141GB) with these
// tables, engine_calls = 1 (jobs on it are timed by the engine's calls),
// fused_bias as the device measured does it,
// activation_bytes and param_gather_bytes 4 (the engine keeps fp32
// activations and gathers fp32 parameters), named `name`; every table's
// provenance is "measured" on `device_name`, `host`, `date`, naming the
// scenario files.
model::GpuProfile engine_device_profile(const EngineTables& t, const model::GpuProfile& base, const std::string& name,
                                        const std::string& device_name, const std::vector<std::string>& scenario_files,
                                        const std::string& host, const std::string& date);

}  // namespace megascale::engine
