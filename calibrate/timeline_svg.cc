// calibrate/timeline_svg.cc: see timeline_svg.h.
#include "calibrate/timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/svg.h"

namespace megascale::calibrate {
namespace {

const char* colour(const std::string& kind, bool predicted) {
  if (kind == "forward") return predicted ? "#9ecae1" : "#3182bd";
  if (kind == "backward") return predicted ? "#a1d99b" : "#31a354";
  if (kind == "optimizer_step") return predicted ? "#fdd0a2" : "#e6550d";
  if (kind.rfind("dp_", 0) == 0) return predicted ? "#dadaeb" : "#756bb1";
  if (kind.rfind("recv_", 0) == 0) return predicted ? "#e0e0e0" : "#969696";
  return nullptr;  // sends (posted, not waited), data load: not drawn
}

}  // namespace

std::string timeline_svg(const std::string& title, const std::vector<TimelineLane>& lanes) {
  constexpr double kLeft = 150, kRight = 20, kTop = 40, kLane = 26, kGap = 10, kWidth = 960;
  double span_ms = 0;
  std::vector<double> origin(lanes.size(), 0);
  for (size_t i = 0; i < lanes.size(); ++i) {
    double lo = 1e300, hi = -1e300;
    for (const model::TraceEvent& e : lanes[i].events) {
      lo = std::min(lo, e.start_us);
      hi = std::max(hi, e.end_us);
    }
    if (hi > lo) {
      origin[i] = lo;
      span_ms = std::max(span_ms, (hi - lo) / 1e3);
    }
  }
  if (span_ms <= 0) span_ms = 1;
  const base::LinearScale x{0.0, span_ms, kLeft, kWidth - kRight};
  const double height = kTop + lanes.size() * (kLane + kGap) + 88;
  base::Svg svg(kWidth, height, 11);
  svg.text(kLeft, 20, title, {{"font-size", "14"}});
  for (size_t i = 0; i < lanes.size(); ++i) {
    const double y = kTop + i * (kLane + kGap);
    svg.text(kLeft - 6, y + kLane * 0.65, lanes[i].label, {{"text-anchor", "end"}});
    for (const model::TraceEvent& e : lanes[i].events) {
      const char* fill = colour(e.kind, lanes[i].predicted);
      if (fill == nullptr) continue;
      const double x0 = x((e.start_us - origin[i]) / 1e3), x1 = x((e.end_us - origin[i]) / 1e3);
      const double w = std::max(0.5, x1 - x0);
      const std::string ms = fmt::format("{:.1f}", e.duration_us() / 1e3);
      svg.rect(x0, y, w, kLane, fill, {{"stroke", "white"}, {"stroke-width", "0.5"}},
               e.kind + " mb " + std::to_string(e.microbatch) + " chunk " + std::to_string(e.chunk) + ": " + ms +
                   " ms");
      if ((e.kind == "forward" || e.kind == "backward") && w > 22) {
        svg.text(x0 + w / 2, y + kLane * 0.65, std::to_string(e.microbatch) + "." + std::to_string(e.chunk),
                 {{"text-anchor", "middle"}, {"fill", "black"}, {"font-size", "9"}});
      }
    }
  }
  // Axis from zero.
  const double axis_y = kTop + lanes.size() * (kLane + kGap) + 4;
  base::draw_axis(svg, x, base::AxisSide::kBottom, axis_y, "ms from the lane's first op",
                  [](double v) { return base::svg_number(v); }, 8);
  // Legend: each kind's measured (dark) and predicted (light) colour.
  double lx = kLeft;
  const double ly = axis_y + 56;  // under the axis label
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"forward", "forward"}, {"backward", "backward"}, {"optimizer_step", "optimizer"},
           {"dp_reduce_scatter", "DP collective"}, {"recv_activation", "blocking receive"}}) {
    svg.rect(lx, ly - 9, 10, 10, colour(kind, false));
    svg.rect(lx + 11, ly - 9, 10, 10, colour(kind, true));
    svg.text(lx + 25, ly, name);
    lx += 118;
  }
  svg.text(kLeft, ly + 16, "dark: measured, light: predicted");
  return svg.str();
}

}  // namespace megascale::calibrate
