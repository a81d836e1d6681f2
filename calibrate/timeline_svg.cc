// calibrate/timeline_svg.cc: see timeline_svg.h.
#include "calibrate/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/xml_text.h"

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

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A round tick step covering `span` in about 8 ticks.
double tick_step(double span) {
  const double raw = span / 8;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
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
  const double plot_w = kWidth - kLeft - kRight;
  auto x = [&](double ms) { return kLeft + ms / span_ms * plot_w; };
  const double height = kTop + lanes.size() * (kLane + kGap) + 76;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << num(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\">" << base::xml_escape(title) << "</text>\n";
  for (size_t i = 0; i < lanes.size(); ++i) {
    const double y = kTop + i * (kLane + kGap);
    o << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(y + kLane * 0.65) << "\" text-anchor=\"end\">"
      << base::xml_escape(lanes[i].label) << "</text>\n";
    for (const model::TraceEvent& e : lanes[i].events) {
      const char* fill = colour(e.kind, lanes[i].predicted);
      if (fill == nullptr) continue;
      const double x0 = x((e.start_us - origin[i]) / 1e3), x1 = x((e.end_us - origin[i]) / 1e3);
      const double w = std::max(0.5, x1 - x0);
      o << "<rect x=\"" << num(x0) << "\" y=\"" << num(y) << "\" width=\"" << num(w) << "\" height=\"" << kLane
        << "\" fill=\"" << fill << "\" stroke=\"white\" stroke-width=\"0.5\"><title>"
        << base::xml_escape(e.kind + " mb " + std::to_string(e.microbatch) + " chunk " + std::to_string(e.chunk) + ": " +
                  num(e.duration_us() / 1e3) + " ms")
        << "</title></rect>\n";
      if ((e.kind == "forward" || e.kind == "backward") && w > 22) {
        o << "<text x=\"" << num(x0 + w / 2) << "\" y=\"" << num(y + kLane * 0.65)
          << "\" text-anchor=\"middle\" fill=\"black\" font-size=\"9\">" << e.microbatch << "." << e.chunk
          << "</text>\n";
      }
    }
  }
  // Axis from zero.
  const double axis_y = kTop + lanes.size() * (kLane + kGap) + 4;
  o << "<line x1=\"" << kLeft << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(x(span_ms)) << "\" y2=\""
    << num(axis_y) << "\" stroke=\"black\"/>\n";
  const double step = tick_step(span_ms);
  for (double t = 0; t <= span_ms + 1e-9; t += step) {
    o << "<line x1=\"" << num(x(t)) << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(x(t)) << "\" y2=\""
      << num(axis_y + 4) << "\" stroke=\"black\"/><text x=\"" << num(x(t)) << "\" y=\"" << num(axis_y + 16)
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  }
  o << "<text x=\"" << num(x(span_ms / 2)) << "\" y=\"" << num(axis_y + 30)
    << "\" text-anchor=\"middle\">ms from the lane's first op</text>\n";
  // Legend.
  double lx = kLeft;
  const double ly = axis_y + 44;
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"forward", "forward"}, {"backward", "backward"}, {"optimizer_step", "optimizer"},
           {"dp_reduce_scatter", "DP collective"}, {"recv_activation", "blocking receive"}}) {
    o << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly - 9) << "\" width=\"10\" height=\"10\" fill=\""
      << colour(kind, false) << "\"/><rect x=\"" << num(lx + 11) << "\" y=\"" << num(ly - 9)
      << "\" width=\"10\" height=\"10\" fill=\"" << colour(kind, true) << "\"/><text x=\"" << num(lx + 25)
      << "\" y=\"" << num(ly) << "\">" << name << "</text>\n";
    lx += 118;
  }
  o << "<text x=\"" << num(kLeft) << "\" y=\"" << num(ly + 16) << "\">dark: measured, light: predicted</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace megascale::calibrate
