// report/validation_report.cc: predicted vs published -> JSON.
#include "report/validation_report.h"

#include <vector>

namespace megascale::report {

base::Json validation_json(const calibrate::ValidationReport& r) {
  using base::Json;
  std::vector<Json> items;
  for (const calibrate::ValidationRow& row : r.rows) {
    Json j;
    j["case"] = row.case_name;
    j["table"] = row.table;
    j["metric"] = row.metric;
    j["published"] = row.published;
    j["predicted"] = row.predicted;
    j["error"] = row.error;
    j["fidelity"] = r.fidelity;
    if (row.has_analytical) {
      j["analytical"] = row.analytical;
    }
    items.push_back(j);
  }
  // One object for CI: versions, the verdict, the summary against the bounds
  // (MFU in fraction units), then the rows.
  const calibrate::ValidationSummary& sm = r.summary;
  const calibrate::AccuracyBounds b;
  Json summary;
  summary["table2_mean_abs_mfu_error"] = sm.table2_mean_abs_mfu_error;
  summary["table2_max_abs_mfu_error"] = sm.table2_max_abs_mfu_error;
  summary["table2_max_abs_speedup_error"] = sm.table2_max_abs_speedup_error;
  summary["table3_mean_abs_mfu_error"] = sm.table3_mean_abs_mfu_error;
  summary["table3_max_abs_mfu_error"] = sm.table3_max_abs_mfu_error;
  summary["table3_max_abs_increment_error"] = sm.table3_max_abs_increment_error;
  summary["table3_wrong_sign_increments"] = sm.table3_wrong_sign_increments;
  summary["fig9_mean_abs_mfu_error"] = sm.fig9_mean_abs_mfu_error;
  summary["fig9_max_abs_mfu_error"] = sm.fig9_max_abs_mfu_error;
  Json bounds;
  bounds["table2_mean"] = b.table2_mean;
  bounds["table2_max"] = b.table2_max;
  bounds["speedup"] = b.speedup;
  bounds["table3_each"] = b.table3_each;
  bounds["table3_increment"] = b.table3_increment;
  bounds["fig9_each"] = b.fig9_each;
  Json top;
  top["report_fidelity"] = r.fidelity;
  top["pass"] = calibrate::meets(r.summary, b);
  top["summary"] = summary;
  top["bounds"] = bounds;
  top["rows"] = items;
  return top;
}

}  // namespace megascale::report
