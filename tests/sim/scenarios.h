// tests/sim/scenarios.h: the 175B job and the fabric the sim/ tests run on.
#pragma once

#include <string>

#include "model/scenario.h"
#include "network/topology.h"
#include "sim/job_sim.h"

namespace megascale::sim::testing {

// The 175B model of MegaScale Table 1 with the `preset`'s switches on TP 8 x pp
// x dp GPUs, micro-batch 1, `microbatches` per data-parallel replica, identical
// GPUs.
inline model::Scenario gpt175b(const std::string& preset, int pp, int vpp, int dp, int microbatches) {
  model::Scenario s = model::default_scenario(preset);
  s.parallel.tp = 8;
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.dp = dp;
  s.parallel.micro_batch = 1;
  s.parallel.global_batch = dp * microbatches;
  s.cluster.gpus = s.parallel.gpus();
  // network_options() draws no GPU speed spread for the event fidelity, so the
  // closed form (model/speed_spread.h) gets none either.
  s.hardware.gpu_speed_sigma = 0;
  return s;
}

// The MegaScale CLOS sized to the scenario (A100, 8 x 200G NICs per server).
inline FabricInputs megascale_fabric(const model::Scenario& s) {
  FabricInputs f;
  f.spec = network::megascale_clos(s.cluster.gpus);
  return f;
}

// Event-level options with the network communication model on that fabric.
inline SimOptions network_options(const model::Scenario& s) {
  SimOptions o;
  o.comm = CommModel::kNetwork;
  o.fabric = megascale_fabric(s);
  return o;
}

}  // namespace megascale::sim::testing
