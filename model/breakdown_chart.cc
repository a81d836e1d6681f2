// model/breakdown_chart.cc: see breakdown_chart.h.
#include "model/breakdown_chart.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <fmt/format.h>

#include "base/number_text.h"
#include "base/svg.h"

namespace megascale::model {
namespace {

using base::fixed;

// Seconds with three significant figures or more (0.0123 s, 1.23 s, 12.3 s).
std::string seconds_text(double s) {
  return fixed(s, s >= 10 ? 1 : s >= 1 ? 2 : s >= 0.1 ? 3 : 4) + " s";
}

// Iteration time beyond the breakdown's total smaller than this fraction of it
// is rounding, not a segment worth drawing.
constexpr double kUnattributedFraction = 1e-3;
constexpr const char* kUnattributedColour = "#d9d9d9";

}  // namespace

const std::vector<BreakdownCategory>& breakdown_categories() {
  // Compute first (the useful work), then what stretches the step; colours
  // from ColorBrewer / Tableau qualitative palettes, related ones similar.
  static const std::vector<BreakdownCategory> categories = {
      {"compute", &TimeBreakdown::compute_s, "#4e79a7"},
      {"recompute", &TimeBreakdown::recompute_s, "#a0cbe8"},
      {"TP exposed", &TimeBreakdown::tp_exposed_s, "#f28e2b"},
      {"pipeline bubble", &TimeBreakdown::bubble_s, "#e15759"},
      {"PP exposed", &TimeBreakdown::pp_exposed_s, "#ff9d9a"},
      {"DP exposed", &TimeBreakdown::dp_exposed_s, "#59a14f"},
      {"embedding sync", &TimeBreakdown::embedding_sync_s, "#8cd17d"},
      {"gradient norm", &TimeBreakdown::grad_norm_s, "#b6992d"},
      {"optimizer", &TimeBreakdown::optimizer_s, "#b07aa1"},
      {"host", &TimeBreakdown::host_s, "#9c755f"},
      {"data loading", &TimeBreakdown::data_s, "#79706e"},
  };
  return categories;
}

std::string breakdown_svg(const std::string& title, const std::vector<BreakdownBar>& bars) {
  if (bars.empty()) throw std::invalid_argument("breakdown_svg: no bars");
  constexpr double kWidth = 900, kLeft = 130, kRight = 90, kTop = 64, kBarPx = 36, kGapPx = 26;
  constexpr double kMinLabelPx = 44;  // a segment narrower than this carries no percentage
  const double axis_y = kTop + bars.size() * (kBarPx + kGapPx);
  const double height = axis_y + 110;
  double longest_s = 0;
  for (const BreakdownBar& b : bars) longest_s = std::max({longest_s, b.iteration_time_s, b.breakdown.total()});
  const base::LinearScale x{0.0, base::nice_ceiling(longest_s, 6), kLeft, kWidth - kRight};

  base::Svg svg(kWidth, height);
  svg.text(kWidth / 2, 24, title, {{"text-anchor", "middle"}, {"font-size", "15"}});
  svg.text(kWidth / 2, 42, "where one iteration's time goes (critical path, seconds)",
           {{"text-anchor", "middle"}, {"font-size", "11"}, {"fill", "#555"}});
  base::draw_axis(svg, x, base::AxisSide::kBottom, axis_y, "time per iteration (s)",
                  [](double v) { return base::svg_number(v); }, 6, kTop - 8);
  std::vector<bool> used(breakdown_categories().size(), false);
  bool unattributed_used = false;
  for (size_t i = 0; i < bars.size(); ++i) {
    const BreakdownBar& bar = bars[i];
    const double y = kTop + i * (kBarPx + kGapPx) + kGapPx / 2;
    const double iteration_s = std::max(bar.iteration_time_s, bar.breakdown.total());
    svg.text(kLeft - 8, y + kBarPx / 2 + 4, bar.label, {{"text-anchor", "end"}, {"font-weight", "bold"}});
    double at_s = 0;
    auto segment = [&](const std::string& name, double s, const std::string& colour) {
      if (!(s > 0)) return;
      const double share = iteration_s > 0 ? s / iteration_s : 0;
      svg.rect(x(at_s), y, x(at_s + s) - x(at_s), kBarPx, colour,
               {{"class", "segment"}, {"data-category", name}, {"data-seconds", fixed(s, 6)}},
               bar.label + ": " + name + " " + seconds_text(s) + " (" + fixed(100 * share, 1) + "% of the iteration)");
      if (x(at_s + s) - x(at_s) >= kMinLabelPx) {
        svg.text((x(at_s) + x(at_s + s)) / 2, y + kBarPx / 2 + 4, fixed(100 * share, 0) + "%",
                 {{"text-anchor", "middle"}, {"font-size", "10"}, {"fill", "white"}});
      }
      at_s += s;
    };
    const std::vector<BreakdownCategory>& cats = breakdown_categories();
    for (size_t c = 0; c < cats.size(); ++c) {
      const double s = bar.breakdown.*(cats[c].seconds);
      used[c] = used[c] || s > 0;
      segment(cats[c].name, s, cats[c].colour);
    }
    const double rest_s = bar.iteration_time_s - bar.breakdown.total();
    if (rest_s > kUnattributedFraction * bar.iteration_time_s) {
      unattributed_used = true;
      segment("unattributed", rest_s, kUnattributedColour);
    }
    svg.text(x(iteration_s) + 6, y + kBarPx / 2 + 4, seconds_text(bar.iteration_time_s));
  }
  std::vector<base::LegendEntry> legend;
  for (size_t c = 0; c < used.size(); ++c)
    if (used[c]) legend.push_back({breakdown_categories()[c].colour, breakdown_categories()[c].name});
  if (unattributed_used) legend.push_back({kUnattributedColour, "unattributed"});
  // Two rows of at most six entries each.
  const size_t half = legend.size() > 6 ? (legend.size() + 1) / 2 : legend.size();
  base::draw_legend(svg, kLeft, axis_y + 52, std::vector<base::LegendEntry>(legend.begin(), legend.begin() + half));
  if (half < legend.size()) {
    base::draw_legend(svg, kLeft, axis_y + 74, std::vector<base::LegendEntry>(legend.begin() + half, legend.end()));
  }
  return svg.str();
}

}  // namespace megascale::model
