// sim/system_comparison.h: an estimate at a named fidelity, and the same job as
// Megatron-LM and as MegaScale (`megascale compare`; model/system_preset.h
// makes the two systems of one job).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "model/config.h"
#include "model/estimator.h"

namespace megascale::sim {

// "event": one healthy iteration at event level (sim/event_run.h); otherwise
// the closed form (model::estimate).
model::Estimate estimate_at(const model::Scenario& s, const std::string& fidelity);

struct SystemComparison {
  model::Scenario megatron, megascale;
  model::Estimate megatron_estimate, megascale_estimate;
  double speedup() const { return megatron_estimate.iteration_time_s / megascale_estimate.iteration_time_s; }
};

// `job` as both systems (nullopt: the built-in 175B job on 12,288 A100s).
SystemComparison compare_systems(const std::optional<model::Scenario>& job, const std::string& fidelity);

}  // namespace megascale::sim
