// report/golden_report.h: `megascale check` (calibrate/golden.h) as JSON and
// text: every metric that moved, regressions marked, new / removed scenarios.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/json.h"
#include "calibrate/golden.h"

namespace megascale::report {

base::Json gate_json(const calibrate::GateResult& r, const std::string& golden_path, const std::string& fidelity,
                     double tolerance);
std::string gate_text(const calibrate::GateResult& r, const std::string& golden_path, const std::string& fidelity,
                      double tolerance);

}  // namespace megascale::report
