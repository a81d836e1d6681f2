// model/search_plot.cc: see search_plot.h.
#include "model/search_plot.h"

#include <algorithm>
#include <cstdio>
#include <vector>
#include <fmt/format.h>

#include "base/number_text.h"
#include "base/svg.h"

namespace megascale::model {
namespace {

using base::fixed;

// "#3" for index 2 (appended, not "#" + string: GCC 12 warns -Wrestrict on that).
std::string rank_text(size_t index) {
  std::string s = "#";
  s += std::to_string(index + 1);
  return s;
}

constexpr double kGB = 1e9;  // bytes, as memory_per_gpu reports them
constexpr const char* kFitColour = "#4e79a7";
constexpr const char* kNoFitColour = "#bab0ac";
constexpr const char* kRankedColour = "#f28e2b";
constexpr const char* kCapacityColour = "#d62728";

}  // namespace

std::string search_scatter_svg(const std::string& title, const SearchResult& r, double memory_headroom,
                               int labelled) {
  constexpr double kWidth = 820, kLeft = 80, kRight = 40, kTop = 70, kPlotH = 400;
  const int listed = std::min<int>(labelled, static_cast<int>(r.top.size()));
  const double axis_y = kTop + kPlotH;
  const double height = axis_y + 100 + 16 * listed;
  const double capacity_gb = r.memory_capacity_bytes / kGB;

  // What to draw: every recorded layout, or a sample of them beside the ranked ones.
  std::vector<LayoutPoint> all = r.points;
  if (all.empty()) {
    for (const Candidate& c : r.top)
      all.push_back({c.parallel, c.estimate.mfu, c.estimate.iteration_time_s, c.estimate.memory.total_bytes, true});
  }
  const size_t budget = static_cast<size_t>(std::max<int>(1, kMaxScatterPoints - static_cast<int>(r.top.size())));
  const size_t stride = all.size() > budget ? (all.size() + budget - 1) / budget : 1;
  std::vector<const LayoutPoint*> drawn;
  for (size_t i = 0; i < all.size(); i += stride) drawn.push_back(&all[i]);

  double max_mfu = 0, max_gb = capacity_gb;
  for (const LayoutPoint& q : all) {
    max_mfu = std::max(max_mfu, q.mfu);
    max_gb = std::max(max_gb, q.memory_per_gpu_bytes / kGB);
  }
  const double x_end_gb = base::nice_ceiling(std::min(max_gb, kScatterMemorySpan * capacity_gb) * 1.05, 8);
  const double y_end = std::min(1.0, base::nice_ceiling(max_mfu * 1.05, 5));
  const base::LinearScale x{0.0, x_end_gb, kLeft, kWidth - kRight};
  const base::LinearScale y{0.0, y_end, axis_y, kTop};

  base::Svg svg(kWidth, height);
  svg.text(kWidth / 2, 24, title, {{"text-anchor", "middle"}, {"font-size", "15"}});
  std::string caption = "predicted MFU (analytical) against memory per GPU, " + std::to_string(all.size()) +
                        " valid layouts";
  if (stride > 1) {
    caption += "; drawn: 1 in " + std::to_string(stride) + " (" + std::to_string(drawn.size()) + ") and the " +
               std::to_string(r.top.size()) + " ranked";
  }
  svg.text(kWidth / 2, 42, caption, {{"text-anchor", "middle"}, {"font-size", "11"}, {"fill", "#555"}});
  base::draw_axis(svg, y, base::AxisSide::kLeft, kLeft, "MFU (% of peak)",
                  [](double v) { return fixed(100 * v, 0) + "%"; }, 5, kWidth - kRight);
  base::draw_axis(svg, x, base::AxisSide::kBottom, axis_y, "memory per GPU (GB), most loaded stage",
                  [](double v) { return base::svg_number(v); }, 8);

  int off_edge = 0;
  auto dot = [&](const LayoutPoint& q, double radius, const char* fill, base::Attrs extra, const std::string& tip) {
    const double gb = q.memory_per_gpu_bytes / kGB;
    off_edge += gb > x_end_gb;
    svg.circle(x(std::min(gb, x_end_gb)), y(q.mfu), radius, fill, extra,
               tip + layout_text(q.parallel) + ": MFU " + fixed(100 * q.mfu, 2) + "%, " + fixed(gb, 1) + " GB" +
                   (q.fits ? "" : " (does not fit)"));
  };
  for (const LayoutPoint* q : drawn) {
    dot(*q, q->fits ? 2.5 : 2, q->fits ? kFitColour : kNoFitColour,
        {{"fill-opacity", "0.55"}, {"class", q->fits ? "fits" : "does-not-fit"}}, "");
  }
  // The memory the layouts may use: the capacity, and the limit the headroom leaves.
  svg.line(x(capacity_gb), kTop, x(capacity_gb), axis_y, kCapacityColour,
           {{"stroke-width", "1.5"}, {"class", "capacity"}});
  // Labels on a white halo, at the foot of the lines (the best layouts sit high).
  const base::Attrs halo = {{"fill", kCapacityColour}, {"stroke", "white"}, {"stroke-width", "3"},
                            {"paint-order", "stroke"}};
  svg.text(x(capacity_gb) + 4, axis_y - 8, "memory capacity " + fixed(capacity_gb, 1) + " GB", halo);
  if (memory_headroom > 0) {
    const double limit_gb = (1 - memory_headroom) * capacity_gb;
    svg.line(x(limit_gb), kTop, x(limit_gb), axis_y, kCapacityColour,
             {{"stroke-dasharray", "5,4"}, {"class", "headroom-limit"}});
    base::Attrs left = halo;
    left.push_back({"text-anchor", "end"});
    svg.text(x(limit_gb) - 4, axis_y - 22,
             "limit with " + fixed(100 * memory_headroom, 0) + "% headroom: " + fixed(limit_gb, 1) + " GB", left);
  }
  // The ranked layouts, the best drawn last (on top); the best `listed`
  // numbered in a column left of them, a thin line to each dot, 13 px apart.
  struct Label {
    double dot_x, dot_y;
    size_t rank;
  };
  std::vector<Label> labels;
  for (size_t i = r.top.size(); i-- > 0;) {
    const Candidate& c = r.top[i];
    const LayoutPoint q{c.parallel, c.estimate.mfu, c.estimate.iteration_time_s, c.estimate.memory.total_bytes, true};
    dot(q, 5, kRankedColour, {{"stroke", "black"}, {"stroke-width", "0.8"}, {"class", "ranked"}}, rank_text(i) + " ");
    if (static_cast<int>(i) < listed) labels.push_back({x(std::min(q.memory_per_gpu_bytes / kGB, x_end_gb)), y(q.mfu), i});
  }
  std::sort(labels.begin(), labels.end(), [](const Label& a, const Label& b) { return a.dot_y < b.dot_y; });
  double column_x = kWidth;
  for (const Label& l : labels) column_x = std::min(column_x, l.dot_x - 16);
  column_x = std::max(column_x, kLeft + 24);
  double last_y = kTop - 4;
  for (const Label& l : labels) {
    const double label_y = std::max(l.dot_y + 4, last_y + 13);
    last_y = label_y;
    svg.line(column_x + 2, label_y - 4, l.dot_x - 5, l.dot_y, "#555", {{"stroke-width", "0.6"}});
    svg.text(column_x, label_y, rank_text(l.rank),
             {{"font-size", "11"}, {"font-weight", "bold"}, {"text-anchor", "end"}, {"stroke", "white"},
              {"stroke-width", "3"}, {"paint-order", "stroke"}});
  }
  double ly = axis_y + 50;
  base::draw_legend(svg, kLeft, ly,
                    {{kFitColour, "fits"}, {kNoFitColour, "does not fit"}, {kRankedColour, "ranked"},
                     {kCapacityColour, "memory capacity"}});
  if (off_edge > 0) {
    svg.text(kWidth - kRight, ly + 10,
             std::to_string(off_edge) + " drawn at the right edge need more than " + fixed(x_end_gb, 0) + " GB",
             {{"text-anchor", "end"}, {"font-size", "10"}, {"fill", "#555"}});
  }
  ly += 32;
  for (int i = 0; i < listed; ++i) {
    const Candidate& c = r.top[i];
    svg.text(kLeft, ly + 16 * i,
             rank_text(i) + "  " + layout_text(c.parallel) + ": MFU " + fixed(100 * c.estimate.mfu, 2) + "%, " +
                 fixed(c.estimate.memory.total_bytes / kGB, 1) + " GB",
             {{"font-size", "11"}});
  }
  return svg.str();
}

}  // namespace megascale::model
