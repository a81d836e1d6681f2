// report/failure_report.h: `megascale simulate --fail-gpu G --fail-at T` as JSON
// and text: which ranks stop, when, on what, and where the wait chains lead
// (sim/failure_sim.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "model/config.h"
#include "sim/failure_sim.h"

namespace megascale::report {

// `files`: the trace written (if any); `wall_s`: the simulation's wall time.
base::Json failure_json(const model::Scenario& s, const sim::FailureResult& f, double wall_s,
                        const std::vector<std::string>& files);
// The text shows the first 12 stopped ranks (the failed one first).
std::string failure_text(const model::Scenario& s, const sim::FailureResult& f, double wall_s,
                         const std::vector<std::string>& files);

}  // namespace megascale::report
