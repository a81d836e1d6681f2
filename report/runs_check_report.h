// report/runs_check_report.h: `megascale calibrate runs-check`
// (calibrate/runs_check.h) as markdown (results/ and the console) and JSON: the
// event and analytical errors against issue 12's bounds, then every run.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/json.h"
#include "calibrate/runs_check.h"

namespace megascale::report {

// `command`: the command line that generated it ("megascale calibrate runs-check ...").
std::string runs_check_markdown(const calibrate::RunsCheck& check, const std::string& command);
base::Json runs_check_json(const calibrate::RunsCheck& check);

}  // namespace megascale::report
