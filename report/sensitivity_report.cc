// report/sensitivity_report.cc: see sensitivity_report.h.
#include "report/sensitivity_report.h"

#include <fmt/format.h>

namespace megascale::report {

base::Json sensitivity_json(const model::Sensitivity& r, const std::string& fidelity) {
  base::Json j = {{"step", r.step},
                  {"fidelity", fidelity},
                  {"base_iteration_time_s", r.base_iteration_s},
                  {"inputs", base::Json::array()},
                  {"at_zero", r.at_zero},
                  {"measured_tables", r.measured_tables},
                  {"refused", base::Json::array()}};
  for (const model::Sensitivity::Refused& x : r.refused)
    j["refused"].push_back({{"input", x.input}, {"reason", x.reason}});
  for (const model::InputSensitivity& i : r.inputs) {
    j["inputs"].push_back({{"input", i.input},
                           {"value", i.value},
                           {"changed_value", i.changed_value},
                           {"source", i.source},
                           {"iteration_time_s", i.iteration_s},
                           {"change", i.change},
                           {"elasticity", i.elasticity}});
  }
  return j;
}

std::string sensitivity_text(const model::Sensitivity& r, const std::string& fidelity) {
  std::string out = fmt::format(
      "  sensitivity ({} fidelity; each input changed by {:g}% on its own, efficiencies that would pass 1 "
      "lowered instead):\n"
      "    {:<32} {:>12} {:>12} {:<11} {:>10} {:>10}\n",
      fidelity, 100 * r.step, "input", "value", "timed at", "source", "iteration", "elasticity");
  for (const model::InputSensitivity& i : r.inputs) {
    out += fmt::format("    {:<32} {:>12.6g} {:>12.6g} {:<11} {:>+9.2f}% {:>10.3f}\n", i.input, i.value,
                       i.changed_value, i.source, 100 * i.change + 0.0, i.elasticity + 0.0);  // + 0.0: no "-0"
  }
  if (!r.at_zero.empty()) {
    out += "    at 0, so not changed:";
    for (const std::string& name : r.at_zero) out += " " + name;
    out += "\n";
  }
  for (const model::Sensitivity::Refused& x : r.refused)
    out += "    " + x.input + ": not timed, the scenario refuses both changed values (" + x.reason + ")\n";
  if (!r.measured_tables.empty()) {
    out += "    profile tables, not changed (a measured table times its kernels in place of the values it "
           "replaces; an in-situ table scales every kernel time):";
    for (const std::string& name : r.measured_tables) out += " " + name;
    out += "\n";
  }
  out += "    elasticity: ln(new time / time) / ln(new value / value) (-1: the time is inversely\n"
         "    proportional to the input, 0: this job does not use it)\n";
  return out;
}

}  // namespace megascale::report
