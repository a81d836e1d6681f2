// report/sensitivity_report.h: model/sensitivity.h's result as text (people)
// and JSON (machine), what `megascale simulate FILE --sensitivity PCT` adds.
//
// JSON: {"step", "fidelity", "base_iteration_time_s", "inputs": [{"input",
// "value", "changed_value", "source", "iteration_time_s", "change",
// "elasticity"}], "at_zero": [names], "measured_tables": [names],
// "refused": [{"input", "reason"}]}.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/json.h"
#include "model/sensitivity.h"

namespace megascale::report {

base::Json sensitivity_json(const model::Sensitivity& r, const std::string& fidelity);
std::string sensitivity_text(const model::Sensitivity& r, const std::string& fidelity);

}  // namespace megascale::report
