// base/svg.h: the one writer behind every SVG picture the project draws (the
// ETTR sweep of `plan --plot`, the `simulate --heatmap`, the breakdown chart of
// `simulate` / `compare --chart`, the `search --plot` scatter, the calibration
// timeline, the incast plot of `net incast --plot`).
//
// defines: Attr, Attrs, svg_number, Svg, LinearScale, nice_step, nice_ticks,
//          nice_ceiling, AxisSide, draw_axis, LegendEntry, draw_legend
//
// Svg builds one document element by element. Every text and every attribute
// value goes through xml_escape (a scenario named "A & B </text><script>" stays
// text); numbers are written by svg_number (two decimals at most). The chart
// pieces serve pictures read at a glance: an axis with round ticks whose label
// names the unit, and a legend.
//
// Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: an Svg is used by one thread; the free functions are pure
// (draw_* write into the Svg they are given).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include <fmt/format.h>

#include "base/xml_text.h"

namespace megascale::base {

struct Attr {
  std::string name, value;  // value: plain text, escaped when written
};
using Attrs = std::vector<Attr>;

// At most two decimals, trailing zeros dropped: 12 -> "12", 3.14159 -> "3.14";
// "-0" is written "0".
inline std::string svg_number(double v) {
  std::string s = fmt::format("{:.2f}", v);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

class Svg {
 public:
  using Points = std::vector<std::pair<double, double>>;

  // A `width_px` x `height_px` picture on a white background, sans-serif text
  // of `font_size_px`.
  Svg(double width_px, double height_px, double font_size_px = 12)
      : width_px_(width_px), height_px_(height_px), font_size_px_(font_size_px) {}

  double width_px() const { return width_px_; }
  double height_px() const { return height_px_; }

  // <name a="v" ...>text<title>tooltip</title></name>, or <name .../> when both
  // are empty. The tooltip is what a browser shows on hover.
  Svg& element(const std::string& name, const Attrs& attrs, const std::string& text = "",
               const std::string& tooltip = "") {
    body_ += "<" + name;
    for (const Attr& a : attrs) body_ += " " + a.name + "=\"" + xml_escape(a.value) + "\"";
    if (text.empty() && tooltip.empty()) {
      body_ += "/>\n";
      return *this;
    }
    body_ += ">" + xml_escape(text);
    if (!tooltip.empty()) body_ += "<title>" + xml_escape(tooltip) + "</title>";
    body_ += "</" + name + ">\n";
    return *this;
  }

  Svg& rect(double x, double y, double w, double h, const std::string& fill, Attrs extra = {},
            const std::string& tooltip = "") {
    Attrs a = {{"x", svg_number(x)}, {"y", svg_number(y)}, {"width", svg_number(std::max(0.0, w))},
               {"height", svg_number(std::max(0.0, h))}, {"fill", fill}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("rect", a, "", tooltip);
  }

  Svg& line(double x1, double y1, double x2, double y2, const std::string& stroke, Attrs extra = {}) {
    Attrs a = {{"x1", svg_number(x1)}, {"y1", svg_number(y1)}, {"x2", svg_number(x2)},
               {"y2", svg_number(y2)},  {"stroke", stroke}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("line", a);
  }

  // `extra`: e.g. {{"text-anchor", "end"}, {"font-size", "14"}}.
  Svg& text(double x, double y, const std::string& s, Attrs extra = {}) {
    Attrs a = {{"x", svg_number(x)}, {"y", svg_number(y)}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("text", a, s);
  }

  Svg& polyline(const Points& points, const std::string& stroke, Attrs extra = {}) {
    Attrs a = {{"points", points_text(points)}, {"fill", "none"}, {"stroke", stroke}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("polyline", a);
  }

  Svg& polygon(const Points& points, const std::string& fill, Attrs extra = {}) {
    Attrs a = {{"points", points_text(points)}, {"fill", fill}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("polygon", a);
  }

  Svg& circle(double cx, double cy, double r, const std::string& fill, Attrs extra = {},
              const std::string& tooltip = "") {
    Attrs a = {{"cx", svg_number(cx)}, {"cy", svg_number(cy)}, {"r", svg_number(r)}, {"fill", fill}};
    a.insert(a.end(), extra.begin(), extra.end());
    return element("circle", a, "", tooltip);
  }

  // The whole document.
  std::string str() const {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_number(width_px_) + "\" height=\"" +
           svg_number(height_px_) + "\" font-family=\"sans-serif\" font-size=\"" + svg_number(font_size_px_) +
           "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body_ + "</svg>\n";
  }

 private:
  static std::string points_text(const Points& points) {
    std::string s;
    for (const auto& [x, y] : points) {
      if (!s.empty()) s += ' ';
      s += svg_number(x);
      s += ',';
      s += svg_number(y);
    }
    return s;
  }

  double width_px_, height_px_, font_size_px_;
  std::string body_;
};

// Data value -> pixel: [lo, hi] onto [px_lo, px_hi] (px_hi < px_lo for a y axis,
// whose pixels grow downwards). A zero span maps everything to the middle.
struct LinearScale {
  double lo = 0, hi = 1;
  double px_lo = 0, px_hi = 1;
  double operator()(double v) const {
    if (hi == lo) return (px_lo + px_hi) / 2;
    return px_lo + (v - lo) / (hi - lo) * (px_hi - px_lo);
  }
};

// A round step (1, 2 or 5 x 10^k) that cuts `span` into about `target` parts.
inline double nice_step(double span, int target) {
  if (!(span > 0) || target < 1) return 1;
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p * (1 + 1e-9)) return m * p;
  }
  return 10 * p;
}

// The multiples of nice_step(hi - lo, target) in [lo, hi].
inline std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  const double step = nice_step(hi - lo, target);
  if (!(hi > lo)) return {lo};
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step; k += 1) {
    out.push_back(std::abs(k * step) < 1e-12 * step ? 0.0 : k * step);
  }
  return out;
}

// The end of an axis from zero that holds `v`: the smallest multiple of a
// round step at or above v (1 for v <= 0).
inline double nice_ceiling(double v, int target) {
  if (!(v > 0)) return 1;
  const double step = nice_step(v, target);
  return std::ceil(v / step - 1e-9) * step;
}

enum class AxisSide { kLeft, kBottom };

// An axis along `scale` at `at_px` (the x of a left axis, the y of a bottom
// one): its line, a tick and label at each nice_ticks() value (`tick_text`
// writes the value), `label` (name and unit; "" for none) beside it, and, when
// `grid_to_px` is not NaN, a light grid line from each tick across to it.
inline void draw_axis(Svg& svg, const LinearScale& scale, AxisSide side, double at_px, const std::string& label,
                      const std::function<std::string(double)>& tick_text, int target_ticks = 5,
                      double grid_to_px = std::nan("")) {
  const bool left = side == AxisSide::kLeft;
  if (left) {
    svg.line(at_px, scale.px_lo, at_px, scale.px_hi, "black");
  } else {
    svg.line(scale.px_lo, at_px, scale.px_hi, at_px, "black");
  }
  for (double v : nice_ticks(scale.lo, scale.hi, target_ticks)) {
    const double p = scale(v);
    if (left) {
      if (!std::isnan(grid_to_px)) svg.line(at_px, p, grid_to_px, p, "#e4e4e4");
      svg.line(at_px - 4, p, at_px, p, "black");
      svg.text(at_px - 7, p + 4, tick_text(v), {{"text-anchor", "end"}});
    } else {
      if (!std::isnan(grid_to_px)) svg.line(p, at_px, p, grid_to_px, "#e4e4e4");
      svg.line(p, at_px, p, at_px + 4, "black");
      svg.text(p, at_px + 17, tick_text(v), {{"text-anchor", "middle"}});
    }
  }
  if (label.empty()) return;
  const double mid = (scale.px_lo + scale.px_hi) / 2;
  if (left) {
    const double x = std::max(14.0, at_px - 52);
    svg.text(x, mid, label,
             {{"text-anchor", "middle"}, {"transform", "rotate(-90 " + svg_number(x) + " " + svg_number(mid) + ")"}});
  } else {
    svg.text(mid, at_px + 36, label, {{"text-anchor", "middle"}});
  }
}

struct LegendEntry {
  std::string colour, label;
};

// Swatches and their labels from (x, y) (the top left), in a row or a column;
// returns the coordinate after the last entry (x of a row, y of a column).
inline double draw_legend(Svg& svg, double x, double y, const std::vector<LegendEntry>& entries,
                          bool row = true) {
  constexpr double kSwatchPx = 12, kLinePx = 18;
  constexpr double kCharPx = 6.5;  // mean width of a character of 11-12 px sans-serif text, for spacing
  for (const LegendEntry& e : entries) {
    svg.rect(x, y, kSwatchPx, kSwatchPx, e.colour, {{"stroke", "#666"}, {"stroke-width", "0.5"}});
    svg.text(x + kSwatchPx + 5, y + kSwatchPx - 2, e.label);
    if (row) {
      x += kSwatchPx + 5 + kCharPx * static_cast<double>(e.label.size()) + 14;
    } else {
      y += kLinePx;
    }
  }
  return row ? x : y;
}

}  // namespace megascale::base
