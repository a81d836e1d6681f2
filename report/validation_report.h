// report/validation_report.h: `megascale validate --json`: the verdict, the
// summary against the accuracy bounds (MFU in fraction units) and every row
// (calibrate/validation.h; its markdown is calibrate::validation_markdown).
//
// Thread-safety: pure function.
#pragma once

#include "base/json.h"
#include "calibrate/validation.h"

namespace megascale::report {

base::Json validation_json(const calibrate::ValidationReport& r);

}  // namespace megascale::report
