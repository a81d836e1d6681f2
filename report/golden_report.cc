// report/golden_report.cc: golden-file gate -> JSON / text.
#include "report/golden_report.h"

#include <iterator>

#include <fmt/format.h>

namespace megascale::report {

base::Json gate_json(const calibrate::GateResult& r, const std::string& golden_path, const std::string& fidelity,
                     double tolerance) {
  base::Json j;
  j["pass"] = r.pass();
  j["golden"] = golden_path;
  j["fidelity"] = fidelity;
  j["tolerance"] = tolerance;
  j["checked"] = r.checked;
  base::Json changes = base::Json::array();
  for (const calibrate::MetricChange& c : r.changes) {
    changes.push_back({{"scenario", c.scenario}, {"metric", c.metric}, {"golden", c.golden}, {"now", c.now},
                       {"change", c.change}, {"regression", c.regression}});
  }
  j["changes"] = changes;
  j["new"] = r.new_scenarios;
  j["removed"] = r.removed;
  j["not_checked"] = r.not_checked;
  return j;
}

std::string gate_text(const calibrate::GateResult& r, const std::string& golden_path, const std::string& fidelity,
                      double tolerance) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "check: {} scenario(s) against {} ({} fidelity, tolerance {:.2f}%)\n", r.checked, golden_path,
                 fidelity, 100 * tolerance);
  for (const calibrate::MetricChange& c : r.changes) {
    const std::string change =
        c.golden.is_number() && c.now.is_number() ? fmt::format("{:+.2f}%", 100 * c.change) : "changed";
    fmt::format_to(o, "  {:<10} {}  {}: {} -> {} ({}{})\n", c.regression ? "REGRESSION" : "moved", c.scenario,
                   c.metric, c.golden.dump(), c.now.dump(), change,
                   c.metric.rfind("breakdown_s.", 0) == 0 || c.metric == "bubble_fraction" ? " of the step" : "");
  }
  for (const std::string& n : r.new_scenarios)
    fmt::format_to(o, "  NEW        {}: not in the golden file (store it with --update)\n", n);
  for (const std::string& n : r.removed)
    fmt::format_to(o, "  REMOVED    {}: stored, but the file is gone (drop it with --update)\n", n);
  for (const std::string& n : r.not_checked) fmt::format_to(o, "  not run    {}\n", n);
  out += r.pass() ? "check: pass\n" : "check: FAIL (review, then record intended changes with --update)\n";
  return out;
}

}  // namespace megascale::report
