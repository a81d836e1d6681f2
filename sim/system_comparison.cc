// sim/system_comparison.cc: fidelity dispatch and the Megatron-LM / MegaScale pair.
#include "sim/system_comparison.h"

#include "model/scenario.h"
#include "model/system_preset.h"
#include "sim/event_run.h"

namespace megascale::sim {

model::Estimate estimate_at(const model::Scenario& s, const std::string& fidelity) {
  return fidelity == "event" ? event_estimate(s) : model::estimate(s);
}

SystemComparison compare_systems(const std::optional<model::Scenario>& job, const std::string& fidelity) {
  SystemComparison c;
  c.megatron = job ? model::as_system(*job, "megatron") : model::default_scenario("megatron");
  c.megascale = job ? model::as_system(*job, "megascale") : model::default_scenario("megascale");
  c.megatron_estimate = estimate_at(c.megatron, fidelity);
  c.megascale_estimate = estimate_at(c.megascale, fidelity);
  return c;
}

}  // namespace megascale::sim
