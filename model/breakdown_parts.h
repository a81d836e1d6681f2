// model/breakdown_parts.h: the components of an iteration's time breakdown
// (model/estimator.h TimeBreakdown) as (key, member) pairs, in report order.
//
// The one list of breakdown keys: the reports' "breakdown_s" object and text
// table (report/estimate_report.h) and the golden files of `megascale check`
// (calibrate/golden.h) all walk it, so a new component appears in each.
//
// defines: BreakdownPart, kBreakdownParts
#pragma once

#include <array>

#include "model/estimator.h"

namespace megascale::model {

struct BreakdownPart {
  const char* key;                  // JSON key and text label, e.g. "tp_exposed"
  double TimeBreakdown::*seconds;  // the component, seconds per iteration
};

inline constexpr std::array<BreakdownPart, 11> kBreakdownParts = {{
    {"data", &TimeBreakdown::data_s},
    {"compute", &TimeBreakdown::compute_s},
    {"recompute", &TimeBreakdown::recompute_s},
    {"tp_exposed", &TimeBreakdown::tp_exposed_s},
    {"bubble", &TimeBreakdown::bubble_s},
    {"pp_exposed", &TimeBreakdown::pp_exposed_s},
    {"dp_exposed", &TimeBreakdown::dp_exposed_s},
    {"embedding_sync", &TimeBreakdown::embedding_sync_s},
    {"grad_norm", &TimeBreakdown::grad_norm_s},
    {"optimizer", &TimeBreakdown::optimizer_s},
    {"host", &TimeBreakdown::host_s},
}};

}  // namespace megascale::model
