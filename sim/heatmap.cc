// sim/heatmap.cc: see heatmap.h.
#include "sim/heatmap.h"

#include "base/text_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <fmt/format.h>

#include "base/svg.h"

namespace megascale::sim {
namespace {


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
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

std::string range(const char* one, const char* many, int first, int last) {
  return first == last ? std::string(one) + " " + std::to_string(first)
                       : std::string(many) + " " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

HeatmapInput heatmap_input(const JobResult& r) {
  const model::ParallelConfig& p = r.scenario.parallel;
  HeatmapInput in;
  in.title = r.scenario.name + ": forward / backward time per TP group and step (" +
             std::to_string(r.steps.size()) + " steps)";
  // Rows: stages in order, the replicas of each in order; neighbouring replicas
  // of a stage share a row when there are more groups than rows.
  const int stages_per_row = (p.pp + kMaxHeatmapRows - 1) / kMaxHeatmapRows;
  const int rows_per_stage = std::max(1, kMaxHeatmapRows / p.pp);
  const int replicas_per_row = stages_per_row > 1 ? p.dp : (p.dp + rows_per_stage - 1) / rows_per_stage;
  std::vector<std::vector<int>> row_groups;  // group index d * pp + stage
  for (int s0 = 0; s0 < p.pp; s0 += stages_per_row) {
    const int s1 = std::min(p.pp, s0 + stages_per_row) - 1;
    for (int d0 = 0; d0 < p.dp; d0 += replicas_per_row) {
      const int d1 = std::min(p.dp, d0 + replicas_per_row) - 1;
      std::vector<int> groups;
      for (int pr = s0; pr <= s1; ++pr)
        for (int d = d0; d <= d1; ++d) groups.push_back(d * p.pp + pr);
      row_groups.push_back(groups);
      std::string label = range("stage", "stages", s0, s1) + ", " + range("DP replica", "DP replicas", d0, d1);
      if (groups.size() == 1) {
        const int first = group_rank(p, d0, s0);
        label += p.tp == 1 ? " (GPU " + std::to_string(first) + ")"
                           : " (GPUs " + std::to_string(first) + "-" + std::to_string(first + p.tp - 1) + ")";
      } else {
        label += " (slowest)";
      }
      in.rows.push_back(label);
    }
  }
  in.rows_note = "row: one TP group (" + std::to_string(p.tp) + (p.tp == 1 ? " GPU" : " GPUs") +
                 "), one pipeline stage of one DP replica";
  if (replicas_per_row > 1 || stages_per_row > 1) {
    in.rows_note += "; " + std::to_string(p.pp * p.dp) + " groups in " + std::to_string(row_groups.size()) +
                    " rows, each showing its slowest group";
  }
  const int steps = static_cast<int>(r.steps.size());
  const int col_merge = (steps + kMaxHeatmapColumns - 1) / kMaxHeatmapColumns;
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
  auto cell = [&](const std::vector<std::vector<double>>& v, const std::vector<double>& med,
                  const std::vector<int>& groups, int k0) {
    HeatmapCell c{0, -1};
    for (int k = k0; k < std::min(steps, k0 + col_merge); ++k) {
      for (int g : groups) {
        const double ref = med[g % p.pp] > 0 ? med[g % p.pp] : 1.0;
        const double ratio = v[k][g] / ref;
        if (ratio > c.ratio) c = HeatmapCell{v[k][g], ratio};
      }
    }
    return c;
  };
  for (int k = 0; k < steps; k += col_merge) {
    std::vector<HeatmapCell> fwd, bwd;
    for (const std::vector<int>& groups : row_groups) {
      fwd.push_back(cell(r.forward_s, fwd_median, groups, k));
      bwd.push_back(cell(r.backward_s, bwd_median, groups, k));
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
  const double left = 250, top = 80, gap = 40;
  const double pw = cw * cols, ph = ch * rows;
  const double chart_h = 120, chart_top = top + ph + 60;
  const double legend_x = left + 2 * pw + gap + 30;
  const double width = legend_x + 190, height = std::max(chart_top + chart_h + 60, top + 330);
  const bool titles = static_cast<int64_t>(rows) * cols <= 20000;
  const int label_every = std::max(1, static_cast<int>(std::ceil(9.0 / ch)));

  base::Svg svg(width, height, 11);
  svg.text(10, 20, in.title, {{"font-size", "14"}, {"font-weight", "bold"}});
  svg.text(10, 38, in.rows_note);
  svg.text(left, top - 28, "each cell: the step's time vs the median of its stage (red = slower)");
  const std::string label_size = fmt::format("{:.0f}", std::min(11.0, std::max(7.0, ch)));
  for (int i = 0; i < rows; i += label_every) {
    svg.text(left - 6, top + (i + 0.5) * ch + 4, in.rows[i], {{"text-anchor", "end"}, {"font-size", label_size}});
  }
  const char* names[2] = {"forward", "backward"};
  const std::vector<std::vector<HeatmapCell>>* data[2] = {&in.forward, &in.backward};
  for (int panel = 0; panel < 2; ++panel) {
    const double x0 = left + panel * (pw + gap);
    const Scale sc = scale_of(*data[panel]);
    svg.text(x0, top - 10, names[panel], {{"font-weight", "bold"}});
    for (int c = 0; c < cols; ++c) {
      for (int i = 0; i < rows; ++i) {
        const HeatmapCell& v = (*data[panel])[c][i];
        const std::string tip = titles ? in.rows[i] + ", step " + std::to_string(c) + ": " +
                                             fmt::format("{:.3f}", v.seconds * 1e3) + " ms (" +
                                             fmt::format("{:+.1f}", 100 * (v.ratio - 1)) + "% vs the stage median)"
                                       : "";
        svg.rect(x0 + c * cw, top + i * ch, cw, ch, colour(v.ratio, sc), {}, tip);
      }
    }
    svg.rect(x0, top, pw, ph, "none", {{"stroke", "#444"}});
    svg.text(x0 + pw / 2, top + ph + 14, "step", {{"text-anchor", "middle"}});
    // This panel's colour scale, in percent of the stage median.
    const double ly = top + panel * 150;
    svg.text(legend_x, ly, std::string(names[panel]) + " time,", {{"font-weight", "bold"}});
    svg.text(legend_x, ly + 13, "% vs its stage's median");
    const double ratios[5] = {1 - sc.down, 1 - sc.down / 2, 1, 1 + sc.up / 2, 1 + sc.up};
    for (int k = 4; k >= 0; --k) {
      const double y = ly + 20 + (4 - k) * 20;
      svg.rect(legend_x, y, 16, 16, colour(ratios[k], sc), {{"stroke", "#999"}});
      svg.text(legend_x + 22, y + 12, fmt::format("{:+.1f}%", 100 * (ratios[k] - 1)));
    }
  }
  // Step times under the forward panel: bars on an axis from 0 s.
  const auto [tmin_it, tmax_it] = std::minmax_element(in.step_time_s.begin(), in.step_time_s.end());
  const double axis_top_s = base::nice_ceiling(*tmax_it, 4);
  const base::LinearScale y{0.0, axis_top_s, chart_top + chart_h, chart_top};
  svg.text(left, chart_top - 14,
           "step time: " + fmt::format("{:.4f}", *tmin_it) + " .. " + fmt::format("{:.4f}", *tmax_it) + " s (max - min " +
               fmt::format("{:.2f}", *tmin_it > 0 ? 100 * (*tmax_it / *tmin_it - 1) : 0.0) + "% of min)",
           {{"font-weight", "bold"}});
  base::draw_axis(svg, y, base::AxisSide::kLeft, left, "step time (s)",
                  [](double v) { return base::svg_number(v); }, 4, left + pw);
  for (int c = 0; c < cols; ++c) {
    const double t = in.step_time_s[c];
    svg.rect(left + c * cw, y(t), std::max(1.0, cw - 1), y(0.0) - y(t), "#4a6fa5", {{"class", "step-time"}},
             "step " + std::to_string(c) + ": " + fmt::format("{:.4f}", t) + " s");
  }
  svg.line(left, y(0.0), left + pw, y(0.0), "#444");
  svg.text(left + pw / 2, y(0.0) + 16, "step", {{"text-anchor", "middle"}});
  return svg.str();
}

void write_heatmap_svg(const std::string& path, const JobResult& r) {
  const std::string svg = heatmap_svg(heatmap_input(r));
  // Whole or not at all, and no link at a predictable name followed (base/text_file.h).
  base::write_text_or_throw(path, svg);
}

}  // namespace megascale::sim
