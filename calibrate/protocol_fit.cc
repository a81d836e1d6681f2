// calibrate/protocol_fit.cc: see protocol_fit.h (model, fit, refinement,
// evaluation and which is used for what).
#include "calibrate/protocol_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace megascale::calibrate {
namespace {

constexpr double kMB = 1e6;  // internal size unit (bytes / 1e6) for conditioning
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Pt {
  double bytes = 0;
  double time_us = 0;
};

// Points with size > 0 and time > 0 at their undisturbed time (out of place, or
// in place where the out-of-place run was disturbed: calibrate/nccl_tests.h),
// duplicates averaged, sorted.
std::vector<Pt> measured(const std::vector<NcclTestsPoint>& points) {
  std::map<int64_t, std::pair<double, int>> by_size;
  for (const auto& p : points)
    if (p.bytes > 0 && p.time_us > 0) {
      auto& [sum, n] = by_size[p.bytes];
      sum += undisturbed_time_us(p);
      ++n;
    }
  std::vector<Pt> out;
  for (const auto& [b, sn] : by_size) out.push_back({static_cast<double>(b), sn.first / sn.second});
  return out;
}

// More than `max_points` points: quarter-octave bins (geometric-mean size,
// mean time).
std::vector<Pt> binned(const std::vector<Pt>& pts, int max_points) {
  if (static_cast<int>(pts.size()) <= max_points) return pts;
  std::vector<Pt> out;
  size_t i = 0;
  while (i < pts.size()) {
    double key = std::floor(4.0 * std::log2(pts[i].bytes));
    double log_sum = 0, t_sum = 0;
    size_t j = i;
    while (j < pts.size() && std::floor(4.0 * std::log2(pts[j].bytes)) == key) {
      log_sum += std::log(pts[j].bytes);
      t_sum += pts[j].time_us;
      ++j;
    }
    double n = static_cast<double>(j - i);
    out.push_back({std::exp(log_sum / n), t_sum / n});
    i = j;
  }
  return out;
}

// t = a + b * x, x = bytes / 1e6, t in us.
struct Line {
  double a = 0;
  double b = 0;
  double at(double bytes) const { return a + b * bytes / kMB; }
};

struct Cost {
  double max_u = kInf;  // max |error| / tolerance
  double sum_u2 = kInf;
  bool operator<(const Cost& o) const { return max_u != o.max_u ? max_u < o.max_u : sum_u2 < o.sum_u2; }
};

double tolerance(double bytes, const FitOptions& o) {
  return bytes >= o.large_bytes ? o.tolerance_large : o.tolerance_small;
}

// Weighted least squares on relative error, a >= 0, b >= 0.
Line fit_line(const std::vector<Pt>& p, size_t i, size_t j) {
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (size_t k = i; k < j; ++k) {
    double w = 1.0 / (p[k].time_us * p[k].time_us), x = p[k].bytes / kMB, t = p[k].time_us;
    sw += w;
    sx += w * x;
    sxx += w * x * x;
    st += w * t;
    sxt += w * x * t;
  }
  auto objective = [&](const Line& l) {
    double s = 0;
    for (size_t k = i; k < j; ++k) {
      double r = (l.at(p[k].bytes) - p[k].time_us) / p[k].time_us;
      s += r * r;
    }
    return s;
  };
  std::vector<Line> cands;
  double det = sw * sxx - sx * sx;
  if (det > 1e-12 * sw * sxx) {
    Line l{(st * sxx - sx * sxt) / det, (sw * sxt - sx * st) / det};
    if (l.a >= 0 && l.b >= 0) cands.push_back(l);
  }
  if (sxx > 0) cands.push_back({0.0, sxt / sxx});
  cands.push_back({st / sw, 0.0});
  Line best = cands.front();
  double best_obj = objective(best);
  for (const auto& l : cands)
    if (double o = objective(l); o < best_obj) {
      best = l;
      best_obj = o;
    }
  return best;
}

Cost line_cost(const Line& l, const std::vector<Pt>& p, size_t i, size_t j, const FitOptions& o) {
  Cost c{0, 0};
  for (size_t k = i; k < j; ++k) {
    double model = l.at(p[k].bytes);
    double u = model > 0 ? std::abs(p[k].time_us / model - 1.0) / tolerance(p[k].bytes, o) : kInf;
    c.max_u = std::max(c.max_u, u);
    c.sum_u2 += u * u;
  }
  return c;
}

Cost combine(const Cost& x, const Cost& y) { return {std::max(x.max_u, y.max_u), x.sum_u2 + y.sum_u2}; }

struct Seg {
  size_t i = 0, j = 0;  // [i, j)
  Line line;
};

// Best split of p[lo, hi) into exactly k contiguous segments of >= minpts
// points; `ordered`: latency and busbw non-decreasing along the segments
// (a_prev <= a, b_prev >= b). Returns the segments and the cost (max_u = inf
// when no split exists).
std::pair<std::vector<Seg>, Cost> best_split(const std::vector<Pt>& p, size_t lo, size_t hi, int k,
                                             size_t minpts, bool ordered, const FitOptions& o) {
  size_t n = hi - lo;
  if (k < 1 || n < static_cast<size_t>(k) * minpts) return {{}, Cost{}};
  // Lines and costs of every admissible [i, j) (indices relative to lo).
  std::vector<std::vector<Line>> L(n + 1, std::vector<Line>(n + 1));
  std::vector<std::vector<Cost>> C(n + 1, std::vector<Cost>(n + 1));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + minpts; j <= n; ++j) {
      L[i][j] = fit_line(p, lo + i, lo + j);
      C[i][j] = line_cost(L[i][j], p, lo + i, lo + j, o);
    }
  // D[s][i][j]: best cost covering [0, j) with s segments, the last one [i, j).
  std::vector<std::vector<std::vector<Cost>>> D(
      k + 1, std::vector<std::vector<Cost>>(n + 1, std::vector<Cost>(n + 1)));
  std::vector<std::vector<std::vector<size_t>>> back(
      k + 1, std::vector<std::vector<size_t>>(n + 1, std::vector<size_t>(n + 1, 0)));
  for (size_t j = minpts; j <= n; ++j) D[1][0][j] = C[0][j];
  for (int s = 2; s <= k; ++s)
    for (size_t i = minpts; i < n; ++i)
      for (size_t j = i + minpts; j <= n; ++j) {
        Cost best;
        size_t arg = 0;
        for (size_t h = 0; h + minpts <= i; ++h) {
          const Cost& prev = D[s - 1][h][i];
          if (!(prev.max_u < kInf)) continue;
          if (ordered) {
            const Line& a = L[h][i];
            const Line& b = L[i][j];
            if (a.a > b.a * (1 + 1e-12) + 1e-12 || a.b < b.b * (1 - 1e-12) - 1e-15) continue;
          }
          Cost c = combine(prev, C[i][j]);
          if (c < best) {
            best = c;
            arg = h;
          }
        }
        D[s][i][j] = best;
        back[s][i][j] = arg;
      }
  Cost best;
  size_t last = 0;
  for (size_t i = 0; i + minpts <= n; ++i)
    if (D[k][i][n] < best) {
      best = D[k][i][n];
      last = i;
    }
  if (!(best.max_u < kInf)) return {{}, best};
  std::vector<Seg> segs;
  size_t i = last, j = n;
  for (int s = k; s >= 1; --s) {
    segs.push_back({lo + i, lo + j, L[i][j]});
    size_t h = back[s][i][j];
    j = i;
    i = h;
  }
  std::reverse(segs.begin(), segs.end());
  return {segs, best};
}

ProtocolCurve to_curve(const Seg& s, const std::vector<Pt>& p, const std::string& name, double f) {
  ProtocolCurve c;
  c.protocol = name;
  c.latency_us = s.line.a;
  // bytes * f / (busbw * 1e3) us = b * bytes / 1e6  =>  busbw = f * 1e3 / b
  c.busbw_gbs = s.line.b > 0 ? f * 1e3 / s.line.b : kInf;
  c.min_bytes = p[s.i].bytes;
  c.max_bytes = p[s.j - 1].bytes;
  return c;
}

double curve_time(const ProtocolCurve& c, double f, double bytes) {
  double bw_term = std::isinf(c.busbw_gbs) ? 0.0 : bytes * f / (c.busbw_gbs * 1e3);
  return c.latency_us + bw_term;
}

int factor_ranks(const NcclTestsRun& run) { return run.ranks > 0 ? run.ranks : 1; }

FitErrors errors_on(const std::vector<ProtocolCurve>& curves, const std::string& op, int ranks,
                    const std::vector<Pt>& pts, const FitOptions& o) {
  FitErrors e;
  double f = nccl_busbw_factor(op, ranks);
  std::vector<double> abs_err;
  for (const auto& p : pts) {
    FitPointError pe;
    pe.bytes = static_cast<int64_t>(std::llround(p.bytes));
    pe.measured_time_us = p.time_us;
    pe.model_time_us = envelope_time_us(curves, op, ranks, p.bytes);
    pe.measured_busbw_gbs = p.bytes * f / (p.time_us * 1e3);
    pe.model_busbw_gbs = p.bytes * f / (pe.model_time_us * 1e3);
    pe.rel_error = p.time_us / pe.model_time_us - 1.0;
    pe.tolerance = tolerance(p.bytes, o);
    double a = std::abs(pe.rel_error);
    if (p.bytes >= o.large_bytes) {
      e.max_rel_error_large = std::max(e.max_rel_error_large, a);
      ++e.large_points;
    } else {
      e.max_rel_error_small = std::max(e.max_rel_error_small, a);
      ++e.small_points;
    }
    if (a > pe.tolerance) e.within_tolerance = false;
    abs_err.push_back(a);
    e.points.push_back(pe);
  }
  if (!abs_err.empty()) {
    std::sort(abs_err.begin(), abs_err.end());
    size_t m = abs_err.size();
    e.median_rel_error = m % 2 ? abs_err[m / 2] : 0.5 * (abs_err[m / 2 - 1] + abs_err[m / 2]);
  }
  return e;
}

}  // namespace

ProtocolFit fit_protocol_model(const NcclTestsRun& run, const FitOptions& o) {
  std::vector<Pt> pts = binned(measured(run.points), std::max(8, o.max_points));
  if (pts.empty())
    throw ImportError(run.source + ":" + std::to_string(run.first_line) +
                      ": no measured point with size > 0 and time > 0 to fit");
  ProtocolFit fit;
  fit.op = run.op;
  fit.ranks = run.ranks;
  int ranks = factor_ranks(run);
  double f = nccl_busbw_factor(run.op, ranks);
  size_t minpts = static_cast<size_t>(std::max(1, o.min_points_per_curve));
  size_t n = pts.size();

  // Protocol level: 1..3 ordered segments, the fewest that meet the tolerance.
  std::vector<Seg> chosen;
  Cost chosen_cost;
  for (int k = 1; k <= 3; ++k) {
    auto [segs, cost] = best_split(pts, 0, n, k, std::min(minpts, n), /*ordered=*/true, o);
    if (segs.empty()) continue;
    if (chosen.empty() || cost < chosen_cost) {
      chosen = segs;
      chosen_cost = cost;
    }
    if (cost.max_u <= 1.0) {
      chosen = segs;
      chosen_cost = cost;
      break;
    }
  }
  // No split at all: the points give no line (e.g. sizes or times so extreme
  // that every fit is degenerate; found by the input fuzz test under ASan, where
  // indexing names3 with chosen.size() - 1 read out of bounds).
  if (chosen.empty())
    throw ImportError(run.source + ":" + std::to_string(run.first_line) +
                      ": the measured points admit no protocol line (are the sizes and times of ordinary magnitude?)");
  static const std::vector<std::vector<std::string>> names3 = {{"Simple"}, {"LL", "Simple"}, {"LL", "LL128", "Simple"}};
  std::vector<std::string> names = names3[chosen.size() - 1];
  if (chosen.size() == 2 && pts[chosen[0].i].bytes >= 1024.0 * 1024) names[0] = "LL128";
  for (size_t s = 0; s < chosen.size(); ++s) fit.protocols.push_back(to_curve(chosen[s], pts, names[s], f));
  fit.protocol_errors = errors_on(fit.protocols, run.op, ranks, pts, o);

  // Refinement: split a protocol's own range where its line misses.
  for (size_t s = 0; s < chosen.size(); ++s) {
    const Seg& seg = chosen[s];
    Cost own = line_cost(seg.line, pts, seg.i, seg.j, o);
    if (own.max_u <= 1.0) {
      fit.segments.push_back(fit.protocols[s]);
      continue;
    }
    std::vector<Seg> best_parts = {seg};
    Cost best_cost = own;
    for (int k = 2; k <= std::max(2, o.max_parts_per_protocol); ++k) {
      auto [parts, cost] = best_split(pts, seg.i, seg.j, k, std::min(minpts, seg.j - seg.i), /*ordered=*/false, o);
      if (parts.empty()) break;
      if (cost < best_cost) {
        best_parts = parts;
        best_cost = cost;
      }
      if (cost.max_u <= 1.0) break;
    }
    if (best_parts.size() > 1) fit.refined = true;
    for (const auto& part : best_parts) fit.segments.push_back(to_curve(part, pts, names[s], f));
  }
  fit.segment_errors = errors_on(fit.segments, run.op, ranks, pts, o);
  return fit;
}

std::vector<ProtocolCurve> fit_protocol_curves(const NcclTestsRun& run) {
  return fit_protocol_model(run).protocols;
}

double envelope_time_us(const std::vector<ProtocolCurve>& curves, const std::string& op, int ranks,
                        double bytes) {
  if (curves.empty()) throw std::invalid_argument("envelope_time_us: no curves");
  double f = nccl_busbw_factor(op, ranks);
  std::vector<const ProtocolCurve*> c;
  for (const auto& x : curves) c.push_back(&x);
  std::stable_sort(c.begin(), c.end(), [](auto* x, auto* y) { return x->min_bytes < y->min_bytes; });
  if (bytes <= c.front()->max_bytes) return curve_time(*c.front(), f, bytes);
  for (size_t k = 1; k < c.size(); ++k) {
    if (bytes > c[k]->max_bytes) continue;
    if (bytes >= c[k]->min_bytes) return curve_time(*c[k], f, bytes);
    // Between the previous curve's range and this one's: log-log.
    double x0 = c[k - 1]->max_bytes, x1 = c[k]->min_bytes;
    double t0 = curve_time(*c[k - 1], f, x0), t1 = curve_time(*c[k], f, x1);
    if (!(x0 > 0 && x1 > x0 && t0 > 0 && t1 > 0)) return curve_time(*c[k], f, bytes);
    double w = std::log(bytes / x0) / std::log(x1 / x0);
    return std::exp(std::log(t0) + w * (std::log(t1) - std::log(t0)));
  }
  return curve_time(*c.back(), f, bytes);
}

FitErrors curve_errors(const std::vector<ProtocolCurve>& curves, const NcclTestsRun& run,
                       const FitOptions& options) {
  return errors_on(curves, run.op, factor_ranks(run), measured(run.points), options);
}

double interpolate_time_us(const std::vector<NcclTestsPoint>& points, double bytes) {
  std::vector<Pt> p = measured(points);
  if (p.empty()) throw std::invalid_argument("interpolate_time_us: no point with size > 0 and time > 0");
  if (bytes <= p.front().bytes) return p.front().time_us;
  if (bytes >= p.back().bytes) return p.back().time_us * bytes / p.back().bytes;
  size_t k = 1;
  while (p[k].bytes < bytes) ++k;
  if (p[k].bytes == bytes) return p[k].time_us;
  double w = std::log(bytes / p[k - 1].bytes) / std::log(p[k].bytes / p[k - 1].bytes);
  return std::exp(std::log(p[k - 1].time_us) + w * (std::log(p[k].time_us) - std::log(p[k - 1].time_us)));
}

}  // namespace megascale::calibrate
