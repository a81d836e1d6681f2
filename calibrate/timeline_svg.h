// calibrate/timeline_svg.h: one step of a measured engine run drawn over the
// simulated step of the same Schedule IR (an SVG picture for
// results/calibration/<scenario>.md).
//
// defines: TimelineLane, timeline_svg
//
// One pair of lanes per pipeline stage, measured above predicted, on one time
// axis (milliseconds from each lane's first op): Forward (blue) and Backward
// (green) of every (micro-batch, chunk) labelled "m.c", the optimizer step
// (orange), DP collectives (purple), blocking receives (grey); gaps are time
// spent waiting. Drawn through base/svg.h (text escaped); the picture has a
// title, an axis from zero, and a legend.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "model/trace_schema.h"

namespace megascale::calibrate {

struct TimelineLane {
  std::string label;                      // e.g. "stage 0 measured"
  bool predicted = false;
  std::vector<model::TraceEvent> events;  // Schedule IR ops of one step
};

std::string timeline_svg(const std::string& title, const std::vector<TimelineLane>& lanes);

}  // namespace megascale::calibrate
