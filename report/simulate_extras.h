// report/simulate_extras.h: what `megascale simulate` adds after its estimate,
// at either fidelity: a head-balanced split where the closed form has it
// faster (model/head_balance.h), the SimGrid cross-check of the network model
// (event level, --simgrid-check) and the sensitivity to each hardware input
// (--sensitivity), as JSON members and as text, in one order for both.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "base/json.h"
#include "model/estimator.h"
#include "model/search.h"
#include "model/sensitivity.h"
#include "sim/network_crosscheck.h"

namespace megascale::report {

struct SimulateExtras {
  model::Estimate closed_form;                        // the job's own closed form (head_balanced compares with it)
  std::optional<model::Candidate> head_balanced;
  std::optional<sim::NetworkCrossCheck> simgrid_check;
  std::optional<model::Sensitivity> sensitivity;
};

// Adds "head_balanced", "simgrid_check" and "sensitivity" to `j` where present.
void add_simulate_extras(base::Json& j, const model::Scenario& s, const SimulateExtras& x, const std::string& fidelity);
// The same as text, in that order.
std::string simulate_extras_text(const model::Scenario& s, const SimulateExtras& x, const std::string& fidelity);

}  // namespace megascale::report
