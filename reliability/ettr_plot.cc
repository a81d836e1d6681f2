// reliability/ettr_plot.cc: see ettr_plot.h.
#include "reliability/ettr_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <fmt/format.h>

#include "base/svg.h"

namespace megascale::reliability {
namespace {

std::string percent(double fraction, int decimals) {
  return fmt::format("{:.{}f}%", 100 * fraction, decimals);
}

}  // namespace

std::string ettr_sweep_svg(const EttrPlot& plot) {
  if (plot.points.empty()) throw std::invalid_argument("ettr_sweep_svg: no points");
  std::vector<EttrPlotPoint> pts = plot.points;
  std::sort(pts.begin(), pts.end(), [](const EttrPlotPoint& a, const EttrPlotPoint& b) { return a.x < b.x; });
  for (const EttrPlotPoint& p : pts) {
    if (!(p.x > 0)) throw std::invalid_argument("ettr_sweep_svg: swept values must be > 0");
  }
  constexpr double kWidth = 720, kHeight = 460, kLeft = 90, kRight = 30, kTop = 56, kBottom = 100;
  constexpr double kInset = 30;  // the end points stay clear of the axes
  const std::string kLineColour = "#1f77b4";
  base::Svg svg(kWidth, kHeight);
  svg.text(kWidth / 2, 24, plot.title, {{"text-anchor", "middle"}, {"font-size", "15"}});
  svg.text(kWidth / 2, 42, "mean ETTR and the p5-p95 spread of " + std::to_string(plot.runs) + " simulated runs",
           {{"text-anchor", "middle"}, {"font-size", "11"}, {"fill", "#555"}});

  // ETTR from 0% to 100%.
  const base::LinearScale y{0.0, 1.0, kHeight - kBottom, kTop};
  const double xmin = pts.front().x, xmax = pts.back().x;
  const bool log_x = xmax / xmin > 1.0001;
  auto X = [&](double v) {
    const double a = kLeft + kInset, b = kWidth - kRight - kInset;
    if (!log_x) return (a + b) / 2;
    return a + (b - a) * std::log(v / xmin) / std::log(xmax / xmin);
  };
  base::draw_axis(svg, y, base::AxisSide::kLeft, kLeft, "ETTR (% of wall time spent training)",
                  [](double v) { return percent(v, 0); }, 5, kWidth - kRight);
  const double axis_y = y(0.0);
  svg.line(kLeft, axis_y, kWidth - kRight, axis_y, "black");
  for (const EttrPlotPoint& p : pts) {
    svg.line(X(p.x), axis_y, X(p.x), axis_y + 4, "black");
    svg.text(X(p.x), axis_y + 17, p.label, {{"text-anchor", "middle"}});
  }
  svg.text((kLeft + kWidth - kRight) / 2, axis_y + 36, plot.x_label + (log_x ? " (log scale)" : ""),
           {{"text-anchor", "middle"}});

  // The p5-p95 band: along p95 left to right, back along p5 (a single point
  // gets a band 16 px wide).
  base::Svg::Points band;
  const double widen = pts.size() == 1 ? 8 : 0;
  for (const EttrPlotPoint& p : pts) {
    band.emplace_back(X(p.x) - widen, y(p.ettr_p95));
    if (widen > 0) band.emplace_back(X(p.x) + widen, y(p.ettr_p95));
  }
  for (auto it = pts.rbegin(); it != pts.rend(); ++it) {
    band.emplace_back(X(it->x) + widen, y(it->ettr_p5));
    if (widen > 0) band.emplace_back(X(it->x) - widen, y(it->ettr_p5));
  }
  svg.polygon(band, kLineColour, {{"fill-opacity", "0.22"}, {"class", "p5-p95"}});

  base::Svg::Points mean;
  for (const EttrPlotPoint& p : pts) mean.emplace_back(X(p.x), y(p.ettr_mean));
  svg.polyline(mean, kLineColour, {{"stroke-width", "2"}, {"class", "mean"}});
  for (const EttrPlotPoint& p : pts) {
    svg.circle(X(p.x), y(p.ettr_mean), 3.5, kLineColour, {},
               p.label + ": ETTR " + percent(p.ettr_mean, 1) + " (p5 " + percent(p.ettr_p5, 1) + ", p95 " +
                   percent(p.ettr_p95, 1) + ")");
    svg.text(X(p.x), y(p.ettr_p95) - 6, percent(p.ettr_mean, 1),
             {{"text-anchor", "middle"}, {"font-size", "10"}});
  }
  base::draw_legend(svg, kLeft, kHeight - 36,
                    {{kLineColour, "mean ETTR"}, {"#cde1ee", "p5-p95 of the runs"}});
  return svg.str();
}

}  // namespace megascale::reliability
