// report/net_check_report.h: `megascale calibrate net-check` (calibrate/net_check.h)
// as markdown (results/ and the console) and JSON: the scored classes against
// their bounds, each run's errors, and with `points` every size.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "calibrate/net_check.h"

namespace megascale::report {

// `command`: the command line that generated it ("megascale calibrate net-check ...").
std::string net_check_markdown(const std::vector<calibrate::NetRun>& runs,
                               const std::vector<calibrate::NetClassStats>& classes, const std::string& command,
                               bool points);
base::Json net_check_json(const std::vector<calibrate::NetRun>& runs,
                          const std::vector<calibrate::NetClassStats>& classes);

}  // namespace megascale::report
