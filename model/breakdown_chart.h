// model/breakdown_chart.h: where the iteration time goes, as a picture
// (`megascale simulate --chart FILE.svg`, `megascale compare --chart
// FILE.svg`).
//
// defines: BreakdownCategory, breakdown_categories, BreakdownBar, breakdown_svg
//
// One horizontal stacked bar per estimate (simulate: one; compare:
// Megatron-LM and MegaScale), every bar on one time axis from zero seconds, a
// segment per TimeBreakdown category in a fixed order and colour (compute
// first, then what is added to it), its share of the iteration written inside
// when it fits and in its tooltip always, the iteration time at the bar's end,
// and a legend of the categories present. Time the breakdown does not account
// for (iteration_time_s above its total) is drawn as "unattributed". Drawn
// through base/svg.h: labels and titles are escaped.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/estimator.h"

namespace megascale::model {

struct BreakdownCategory {
  const char* name;                  // as the legend writes it
  double TimeBreakdown::*seconds;    // the field it draws
  const char* colour;                // fill, "#rrggbb"
};

// Every category of TimeBreakdown, in drawing order.
const std::vector<BreakdownCategory>& breakdown_categories();

struct BreakdownBar {
  std::string label;              // e.g. "Megatron-LM", "MegaScale"
  TimeBreakdown breakdown;        // seconds per category
  double iteration_time_s = 0;    // the estimate's iteration time
};

// REQUIRES: at least one bar.
std::string breakdown_svg(const std::string& title, const std::vector<BreakdownBar>& bars);

}  // namespace megascale::model
