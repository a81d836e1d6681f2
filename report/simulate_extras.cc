// report/simulate_extras.cc: see simulate_extras.h.
#include "report/simulate_extras.h"

#include "report/estimate_report.h"
#include "report/event_report.h"
#include "report/sensitivity_report.h"

namespace megascale::report {

void add_simulate_extras(base::Json& j, const model::Scenario& s, const SimulateExtras& x, const std::string& fidelity) {
  if (x.head_balanced) j["head_balanced"] = head_balanced_json(s, x.closed_form, *x.head_balanced);
  if (x.simgrid_check) j["simgrid_check"] = crosscheck_json(*x.simgrid_check);
  if (x.sensitivity) j["sensitivity"] = sensitivity_json(*x.sensitivity, fidelity);
}

std::string simulate_extras_text(const model::Scenario& s, const SimulateExtras& x, const std::string& fidelity) {
  std::string text;
  if (x.head_balanced) text += head_balanced_text(s, x.closed_form, *x.head_balanced);
  if (x.simgrid_check) text += crosscheck_text(*x.simgrid_check);
  if (x.sensitivity) text += sensitivity_text(*x.sensitivity, fidelity);
  return text;
}

}  // namespace megascale::report
