// report/calibrate_report.h: the console reports of `megascale calibrate check`
// (engine run vs simulation, calibrate/check.h; its files are
// calibrate::check_markdown / check_json) and `calibrate import` (a profile from
// nccl-tests output and GEMM sweeps, calibrate/import.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "calibrate/check.h"
#include "calibrate/import.h"

namespace megascale::report {

// One scenario's check: step measured vs predicted, compute / TP / wait per
// rank, the first 8 ops, the files written. `file`: the scenario as given.
std::string check_text(const calibrate::CheckResult& r, const std::string& file);
// "N scenarios: median |error| X%, max Y%" over `abs_errors` (fractions).
std::string check_summary_text(const std::vector<double>& abs_errors);

// `path`: where the profile was written.
base::Json import_json(const calibrate::ImportReport& r, const std::string& path);
std::string import_text(const calibrate::ImportReport& r, const std::string& path);

}  // namespace megascale::report
