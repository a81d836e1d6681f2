// sim/heatmap.cc: see heatmap.h.
#include "sim/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "base/xml_text.h"

namespace megascale::sim {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}


double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Scale {
  double up = 0.05, down = 0.05;  // ratio spans above / below 1
};

Scale scale_of(const std::vector<std::vector<HeatmapCell>>& m) {
  Scale s;
  for (const auto& col : m) {
    for (const HeatmapCell& c : col) {
      s.up = std::max(s.up, c.ratio - 1);
      s.down = std::max(s.down, 1 - c.ratio);
    }
  }
  s.down = std::min(s.down, 1.0);
  return s;
}

// White at ratio 1, dark red at 1 + up, blue at 1 - down.
std::string colour(double ratio, const Scale& s) {
  int r = 255, g = 255, b = 255;
  if (ratio >= 1) {
    const double t = std::min(1.0, (ratio - 1) / s.up);
    r = static_cast<int>(std::lround(255 - t * (255 - 165)));
    g = static_cast<int>(std::lround(255 - t * 255));
    b = static_cast<int>(std::lround(255 - t * 255));
  } else {
    const double t = std::min(1.0, (1 - ratio) / s.down);
    r = static_cast<int>(std::lround(255 - t * (255 - 40)));
    g = static_cast<int>(std::lround(255 - t * (255 - 90)));
    b = static_cast<int>(std::lround(255 - t * (255 - 200)));
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

}  // namespace

HeatmapInput heatmap_input(const JobResult& r) {
  const model::ParallelConfig& p = r.scenario.parallel;
  HeatmapInput in;
  in.title = r.scenario.name + ": forward / backward time per rank and step (" +
             std::to_string(r.steps.size()) + " steps)";
  // Groups in global-rank order: pipeline rank major, then replica.
  std::vector<int> order;
  for (int pr = 0; pr < p.pp; ++pr)
    for (int d = 0; d < p.dp; ++d) order.push_back(d * p.pp + pr);
  const int groups = static_cast<int>(order.size());
  const int row_merge = (groups + kMaxHeatmapRows - 1) / kMaxHeatmapRows;
  const int steps = static_cast<int>(r.steps.size());
  const int col_merge = (steps + kMaxHeatmapColumns - 1) / kMaxHeatmapColumns;
  auto rank_of = [&](int g) { return group_rank(p, g / p.pp, g % p.pp); };
  for (int i = 0; i < groups; i += row_merge) {
    const int last = std::min(groups, i + row_merge) - 1;
    const int g = order[i];
    if (row_merge == 1) {
      in.rows.push_back("rank " + std::to_string(rank_of(g)) + " (dp " + std::to_string(g / p.pp) +
                        ", pp " + std::to_string(g % p.pp) + ")");
    } else {
      in.rows.push_back("ranks " + std::to_string(rank_of(g)) + "-" + std::to_string(rank_of(order[last])) +
                        " (max)");
    }
  }
  // Median per pipeline rank over replicas and steps, forward and backward.
  std::vector<double> fwd_median(p.pp), bwd_median(p.pp);
  for (int pr = 0; pr < p.pp; ++pr) {
    std::vector<double> f, b;
    for (int k = 0; k < steps; ++k) {
      for (int d = 0; d < p.dp; ++d) {
        f.push_back(r.forward_s[k][d * p.pp + pr]);
        b.push_back(r.backward_s[k][d * p.pp + pr]);
      }
    }
    fwd_median[pr] = median(std::move(f));
    bwd_median[pr] = median(std::move(b));
  }
  // The slowest (by ratio) of the groups and steps merged into one cell.
  auto cell = [&](const std::vector<std::vector<double>>& v, const std::vector<double>& med, int i0, int k0) {
    HeatmapCell c{0, -1};
    for (int k = k0; k < std::min(steps, k0 + col_merge); ++k) {
      for (int j = i0; j < std::min(groups, i0 + row_merge); ++j) {
        const int g = order[j];
        const double ref = med[g % p.pp] > 0 ? med[g % p.pp] : 1.0;
        const double ratio = v[k][g] / ref;
        if (ratio > c.ratio) c = HeatmapCell{v[k][g], ratio};
      }
    }
    return c;
  };
  for (int k = 0; k < steps; k += col_merge) {
    std::vector<HeatmapCell> fwd, bwd;
    for (int i = 0; i < groups; i += row_merge) {
      fwd.push_back(cell(r.forward_s, fwd_median, i, k));
      bwd.push_back(cell(r.backward_s, bwd_median, i, k));
    }
    in.forward.push_back(std::move(fwd));
    in.backward.push_back(std::move(bwd));
    double t = 0;
    for (int kk = k; kk < std::min(steps, k + col_merge); ++kk) t = std::max(t, r.steps[kk].time_s);
    in.step_time_s.push_back(t);
  }
  return in;
}

std::string heatmap_svg(const HeatmapInput& in) {
  const int cols = static_cast<int>(in.forward.size());
  const int rows = static_cast<int>(in.rows.size());
  if (cols == 0 || rows == 0) throw std::invalid_argument("heatmap_svg: no data");
  const double cw = std::clamp(360.0 / cols, 3.0, 24.0);
  const double ch = std::clamp(480.0 / rows, 2.0, 14.0);
  const double left = 190, top = 64, gap = 40;
  const double pw = cw * cols, ph = ch * rows;
  const double chart_h = 90, chart_top = top + ph + 36;
  const double legend_x = left + 2 * pw + gap + 30;
  const double width = legend_x + 150, height = chart_top + chart_h + 40;
  const bool titles = static_cast<int64_t>(rows) * cols <= 20000;
  const int label_every = std::max(1, static_cast<int>(std::ceil(9.0 / ch)));

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) + "\" height=\"" +
       fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + base::xml_escape(in.title) + "</text>\n";
  o += "<text x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", top - 28) +
       "\" font-size=\"11\">each cell: time vs its pipeline rank's median (red = slower)</text>\n";
  for (int i = 0; i < rows; i += label_every) {
    o += "<text x=\"" + fmt("%.1f", left - 6) + "\" y=\"" + fmt("%.1f", top + (i + 0.5) * ch + 4) +
         "\" text-anchor=\"end\" font-size=\"" + fmt("%.0f", std::min(11.0, std::max(7.0, ch))) + "\">" +
         base::xml_escape(in.rows[i]) + "</text>\n";
  }
  const char* names[2] = {"forward", "backward"};
  const std::vector<std::vector<HeatmapCell>>* data[2] = {&in.forward, &in.backward};
  for (int panel = 0; panel < 2; ++panel) {
    const double x0 = left + panel * (pw + gap);
    const Scale sc = scale_of(*data[panel]);
    o += "<text x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", top - 10) + "\" font-weight=\"bold\">" +
         names[panel] + "</text>\n";
    for (int c = 0; c < cols; ++c) {
      for (int i = 0; i < rows; ++i) {
        const HeatmapCell& v = (*data[panel])[c][i];
        o += "<rect x=\"" + fmt("%.2f", x0 + c * cw) + "\" y=\"" + fmt("%.2f", top + i * ch) + "\" width=\"" +
             fmt("%.2f", cw) + "\" height=\"" + fmt("%.2f", ch) + "\" fill=\"" + colour(v.ratio, sc) + "\"";
        if (titles) {
          o += "><title>" + base::xml_escape(in.rows[i]) + ", step " + std::to_string(c) + ": " +
               fmt("%.3f", v.seconds * 1e3) + " ms (" + fmt("%+.1f", 100 * (v.ratio - 1)) + "%)</title></rect>\n";
        } else {
          o += "/>\n";
        }
      }
    }
    o += "<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", top) + "\" width=\"" + fmt("%.1f", pw) +
         "\" height=\"" + fmt("%.1f", ph) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    o += "<text x=\"" + fmt("%.1f", x0 + pw / 2) + "\" y=\"" + fmt("%.1f", top + ph + 14) +
         "\" text-anchor=\"middle\">step</text>\n";
    // Legend of this panel's scale.
    const double ly = top + panel * 150;
    o += "<text x=\"" + fmt("%.1f", legend_x) + "\" y=\"" + fmt("%.1f", ly) + "\">" + names[panel] + "</text>\n";
    const double ratios[5] = {1 - sc.down, 1 - sc.down / 2, 1, 1 + sc.up / 2, 1 + sc.up};
    for (int k = 4; k >= 0; --k) {
      const double y = ly + 8 + (4 - k) * 20;
      o += "<rect x=\"" + fmt("%.1f", legend_x) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"16\" height=\"16\" fill=\"" +
           colour(ratios[k], sc) + "\" stroke=\"#999\"/>";
      o += "<text x=\"" + fmt("%.1f", legend_x + 22) + "\" y=\"" + fmt("%.1f", y + 12) + "\">" +
           fmt("%+.1f%%", 100 * (ratios[k] - 1)) + "</text>\n";
    }
  }
  // Step-time series under the forward panel; bars start a little below the
  // fastest step so that differences of a few percent are visible.
  const auto [tmin_it, tmax_it] = std::minmax_element(in.step_time_s.begin(), in.step_time_s.end());
  const double tmax = *tmax_it > 0 ? *tmax_it : 1.0;
  const double base = *tmax_it > *tmin_it ? std::max(0.0, *tmin_it - 0.25 * (*tmax_it - *tmin_it)) : 0.0;
  o += "<text x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", chart_top - 6) +
       "\" font-weight=\"bold\">step time: " + fmt("%.4f", *tmin_it) + " .. " + fmt("%.4f", tmax) +
       " s (bars from " + fmt("%.4f", base) + " s)</text>\n";
  for (int c = 0; c < cols; ++c) {
    const double h = chart_h * (in.step_time_s[c] - base) / (tmax - base);
    o += "<rect x=\"" + fmt("%.2f", left + c * cw) + "\" y=\"" + fmt("%.2f", chart_top + chart_h - h) +
         "\" width=\"" + fmt("%.2f", std::max(1.0, cw - 1)) + "\" height=\"" + fmt("%.2f", h) +
         "\" fill=\"#4a6fa5\"><title>step " + std::to_string(c) + ": " + fmt("%.4f", in.step_time_s[c]) +
         " s</title></rect>\n";
  }
  o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", chart_top + chart_h) + "\" x2=\"" +
       fmt("%.1f", left + pw) + "\" y2=\"" + fmt("%.1f", chart_top + chart_h) + "\" stroke=\"#444\"/>\n";
  o += "</svg>\n";
  return o;
}

void write_heatmap_svg(const std::string& path, const JobResult& r) {
  const std::string svg = heatmap_svg(heatmap_input(r));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out << svg;
  out.flush();
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace megascale::sim
