// model/profile_tables.cc: see profile_tables.h.
#include "model/profile_tables.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace megascale::model {
namespace {

// Index i such that axis[i] <= x <= axis[i + 1] (axis sorted, size >= 2), with x
// clamped into the axis; `frac` receives the position inside the interval.
size_t bracket(const std::vector<double>& axis, double x, double* frac) {
  if (axis.size() == 1) {
    *frac = 0;
    return 0;
  }
  x = std::clamp(x, axis.front(), axis.back());
  size_t i = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin());
  i = std::min(std::max<size_t>(i, 1), axis.size() - 1) - 1;
  const double span = axis[i + 1] - axis[i];
  *frac = span > 0 ? (x - axis[i]) / span : 0.0;
  return i;
}

std::vector<double> distinct_sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

size_t index_of(const std::vector<double>& axis, double x) {
  return static_cast<size_t>(std::lower_bound(axis.begin(), axis.end(), x) - axis.begin());
}

// The rank count to read among `available` for a job of `ranks` busy
// processes: the largest measured at or below it, else the smallest.
int choose_ranks(const std::vector<int>& available, int ranks) {
  int best = -1;
  for (int r : available) {
    if (r <= ranks && r > best) best = r;
  }
  if (best >= 0) return best;
  return *std::min_element(available.begin(), available.end());
}

// Mean number of keys a query sees over `seq` positions with a causal mask
// and sliding window `window` (0 = none): keys i-W..i (model/config.h).
double mean_keys(int seq, int window) {
  if (window <= 0 || window >= seq - 1) return (seq + 1) / 2.0;
  const double w = window;
  const double n = seq;
  // sum over i of min(i, W) + 1 = (W+1)(W+2)/2 - ... : queries 0..W see i+1 keys,
  // the other n-W-1 queries see W+1.
  const double ramp = (w + 1) * (w + 2) / 2.0;
  return (ramp + (n - w - 1) * (w + 1)) / n;
}

}  // namespace

// ---- GEMM -------------------------------------------------------------------

LogGrid3::LogGrid3(const std::vector<std::pair<std::array<int64_t, 3>, double>>& samples) {
  std::vector<double> lm, ln, lk;
  for (const auto& [shape, v] : samples) {
    lm.push_back(std::log2(static_cast<double>(shape[0])));
    ln.push_back(std::log2(static_cast<double>(shape[1])));
    lk.push_back(std::log2(static_cast<double>(shape[2])));
  }
  lm_ = distinct_sorted(lm);
  ln_ = distinct_sorted(ln);
  lk_ = distinct_sorted(lk);
  const size_t cells = lm_.size() * ln_.size() * lk_.size();
  std::vector<double> sum(cells, 0.0);
  std::vector<int> count(cells, 0);
  auto cell = [&](size_t i, size_t j, size_t l) { return (i * ln_.size() + j) * lk_.size() + l; };
  for (size_t p = 0; p < samples.size(); ++p) {
    const size_t c = cell(index_of(lm_, lm[p]), index_of(ln_, ln[p]), index_of(lk_, lk[p]));
    sum[c] += samples[p].second;
    ++count[c];
  }
  // Given cells keep their mean; the others take the nearest given cell's
  // (distance in log2 sizes).
  std::vector<size_t> given;
  for (size_t c = 0; c < cells; ++c) {
    if (count[c] > 0) given.push_back(c);
  }
  value_.assign(cells, 0.0);
  for (size_t i = 0; i < lm_.size(); ++i) {
    for (size_t j = 0; j < ln_.size(); ++j) {
      for (size_t l = 0; l < lk_.size(); ++l) {
        const size_t c = cell(i, j, l);
        if (count[c] > 0) {
          value_[c] = sum[c] / count[c];
          continue;
        }
        double best = std::numeric_limits<double>::infinity();
        for (size_t gc : given) {
          const size_t gi = gc / (ln_.size() * lk_.size());
          const size_t gj = (gc / lk_.size()) % ln_.size();
          const size_t gl = gc % lk_.size();
          const double d =
              std::pow(lm_[i] - lm_[gi], 2) + std::pow(ln_[j] - ln_[gj], 2) + std::pow(lk_[l] - lk_[gl], 2);
          if (d < best) {
            best = d;
            value_[c] = sum[gc] / count[gc];
          }
        }
      }
    }
  }
}

double LogGrid3::at(int64_t m, int64_t n, int64_t k) const {
  double fm = 0, fn = 0, fk = 0;
  const size_t i = bracket(lm_, std::log2(static_cast<double>(m)), &fm);
  const size_t j = bracket(ln_, std::log2(static_cast<double>(n)), &fn);
  const size_t l = bracket(lk_, std::log2(static_cast<double>(k)), &fk);
  auto v = [&](size_t a, size_t b, size_t c) {
    a = std::min(a, lm_.size() - 1);
    b = std::min(b, ln_.size() - 1);
    c = std::min(c, lk_.size() - 1);
    return value_[(a * ln_.size() + b) * lk_.size() + c];
  };
  double out = 0;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        const double w = (a ? fm : 1 - fm) * (b ? fn : 1 - fn) * (c ? fk : 1 - fk);
        if (w > 0) out += w * v(i + a, j + b, l + c);
      }
    }
  }
  return out;
}

GemmTable::GemmTable(std::vector<GemmPoint> points) : points_(std::move(points)) {
  using Shape = std::array<int64_t, 3>;
  std::map<std::pair<std::string, int>, std::vector<std::pair<Shape, double>>> rates;
  std::map<std::pair<std::string, int>, std::map<Shape, double>> cold_s, warm_s;
  for (const GemmPoint& p : points_) {
    if (p.m <= 0 || p.n <= 0 || p.k <= 0 || !(p.seconds > 0)) {
      throw std::invalid_argument("GemmTable: sizes and seconds must be > 0");
    }
    const Shape shape{p.m, p.n, p.k};
    if (p.warm) {
      warm_s[{p.layout, p.ranks}][shape] = p.seconds;
    } else {
      rates[{p.layout, p.ranks}].push_back({shape, std::log(2.0 * p.m * p.n * p.k / p.seconds)});
      cold_s[{p.layout, p.ranks}][shape] = p.seconds;
    }
  }
  // A caller that knows no layout (the GPU model's GEMMs, model/hardware.h)
  // asks for "any". A table measured per layout (calibrate micro, or an
  // imported sweep with a layout column) then answers from every layout's
  // points pooled, so each measured shape is read back as measured (the mean
  // log rate where several layouts measured it), not from one layout's grid.
  bool has_any = false;
  for (const auto& [key, samples] : rates) has_any = has_any || key.first == "any";
  std::map<int, std::vector<std::pair<Shape, double>>> pooled_rates, pooled_ratios;
  for (const auto& [key, samples] : rates) {
    pooled_rates[key.second].insert(pooled_rates[key.second].end(), samples.begin(), samples.end());
  }
  for (const auto& [key, samples] : rates) {
    Grids g;
    g.log_rate = LogGrid3(samples);
    std::vector<std::pair<Shape, double>> ratios;
    for (const auto& [shape, w] : warm_s[key]) {
      const auto it = cold_s[key].find(shape);
      if (it != cold_s[key].end()) ratios.push_back({shape, std::log(it->second / w)});
    }
    if (!ratios.empty()) g.log_ratio = LogGrid3(ratios);
    pooled_ratios[key.second].insert(pooled_ratios[key.second].end(), ratios.begin(), ratios.end());
    grids_.emplace(key, std::move(g));
  }
  if (!has_any) {
    for (const auto& [ranks, samples] : pooled_rates) {
      Grids g;
      g.log_rate = LogGrid3(samples);
      if (!pooled_ratios[ranks].empty()) g.log_ratio = LogGrid3(pooled_ratios[ranks]);
      grids_.emplace(std::make_pair(std::string("any"), ranks), std::move(g));
    }
  }
  if (grids_.empty() && !points_.empty()) throw std::invalid_argument("GemmTable: warm points without cold ones");
}

const GemmTable::Grids& GemmTable::grids(const std::string& layout, int ranks) const {
  // Prefer the layout asked for, then "any" (every layout pooled when none
  // was measured as "any"), then whatever was measured.
  for (const std::string& want : {layout, std::string("any")}) {
    std::vector<int> available;
    for (const auto& [key, g] : grids_) {
      if (key.first == want) available.push_back(key.second);
    }
    if (!available.empty()) return grids_.at({want, choose_ranks(available, ranks)});
  }
  std::vector<int> available;
  for (const auto& [key, g] : grids_) available.push_back(key.second);
  const int r = choose_ranks(available, ranks);
  for (const auto& [key, g] : grids_) {
    if (key.second == r) return g;
  }
  throw std::logic_error("GemmTable: empty");
}

double GemmTable::time_s(int64_t m, int64_t n, int64_t k, const std::string& layout, int ranks, double cold) const {
  if (grids_.empty()) throw std::logic_error("GemmTable::time_s on an empty table");
  const Grids& g = grids(layout, ranks);
  const double cold_s = 2.0 * static_cast<double>(m) * n * k / std::exp(g.log_rate.at(m, n, k));
  if (!g.log_ratio || cold >= 1.0) return cold_s;
  const double warm_s = cold_s / std::exp(std::max(0.0, g.log_ratio->at(m, n, k)));
  return warm_s + std::clamp(cold, 0.0, 1.0) * (cold_s - warm_s);
}

// ---- attention ----------------------------------------------------------------

AttentionTable::AttentionTable(std::vector<AttentionPoint> points) : points_(std::move(points)) {
  for (const AttentionPoint& p : points_) {
    if (p.seq <= 0 || p.head_dim <= 0 || p.window < 0 || !(p.seconds > 0)) {
      throw std::invalid_argument("AttentionTable: seq, head_dim, seconds must be > 0, window >= 0");
    }
  }
}

// Bilinear in (log2 seq, log2 head dim) of log(seconds) over the points with
// this pass, rank count and window (0: full causal); cells not measured take
// the nearest measured point.
double AttentionTable::full_time_s(int seq, int head_dim, bool backward, int ranks,
                                   int window, bool warm) const {
  std::vector<int> available;
  for (const AttentionPoint& p : points_) {
    if (p.backward == backward && p.window == window && p.warm == warm) available.push_back(p.ranks);
  }
  if (available.empty()) return -1;
  const int r = choose_ranks(available, ranks);
  std::vector<const AttentionPoint*> pts;
  std::vector<double> ls, lh;
  for (const AttentionPoint& p : points_) {
    if (p.backward == backward && p.window == window && p.warm == warm && p.ranks == r) {
      pts.push_back(&p);
      ls.push_back(std::log2(static_cast<double>(p.seq)));
      lh.push_back(std::log2(static_cast<double>(p.head_dim)));
    }
  }
  const std::vector<double> as = distinct_sorted(ls), ah = distinct_sorted(lh);
  auto value = [&](size_t i, size_t j) {
    i = std::min(i, as.size() - 1);
    j = std::min(j, ah.size() - 1);
    double best = std::numeric_limits<double>::infinity(), v = 0;
    for (size_t p = 0; p < pts.size(); ++p) {
      const double d = std::pow(ls[p] - as[i], 2) + std::pow(lh[p] - ah[j], 2);
      if (d < best) {
        best = d;
        v = std::log(pts[p]->seconds);
      }
    }
    return v;
  };
  double fs = 0, fh = 0;
  const double qs = std::log2(static_cast<double>(seq)), qh = std::log2(static_cast<double>(head_dim));
  const size_t i = bracket(as, qs, &fs);
  const size_t j = bracket(ah, qh, &fh);
  double log_t = 0;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      const double w = (a ? fs : 1 - fs) * (b ? fh : 1 - fh);
      if (w > 0) log_t += w * value(i + a, j + b);
    }
  }
  double t = std::exp(log_t);
  // Beyond the measured lengths the work scales like seq^2 (scores and
  // context over seq x seq) and linearly in head dim.
  if (qs > as.back()) t *= std::pow(2.0, 2.0 * (qs - as.back()));
  if (qh > ah.back()) t *= std::pow(2.0, qh - ah.back());
  return t;
}

double AttentionTable::time_s(int seq, int head_dim, int window, bool backward, int ranks, double cold) const {
  const double cold_s = one_time_s(seq, head_dim, window, backward, ranks, false);
  if (cold >= 1.0 || full_time_s(seq, head_dim, backward, ranks, 0, true) < 0) return cold_s;
  const double warm_s = one_time_s(seq, head_dim, window, backward, ranks, true);
  return warm_s + std::clamp(cold, 0.0, 1.0) * (cold_s - warm_s);
}

double AttentionTable::one_time_s(int seq, int head_dim, int window, bool backward, int ranks, bool warm) const {
  const double full = full_time_s(seq, head_dim, backward, ranks, 0, warm);
  if (full < 0) throw std::logic_error("AttentionTable: no full-causal points for this pass");
  if (window <= 0 || window >= seq - 1) return full;
  // Seconds per (query x key) the window saves, from the windowed measurements
  // nearest in length: (t_full - t_window) / (seq x (keys_full - keys_window)).
  double best = std::numeric_limits<double>::infinity(), per_key_s = 0;
  for (const AttentionPoint& p : points_) {
    if (p.backward != backward || p.warm != warm || p.window == 0 || p.window >= p.seq - 1) continue;
    const double d = std::pow(std::log2(p.seq / static_cast<double>(seq)), 2) +
                     std::pow(std::log2(p.head_dim / static_cast<double>(head_dim)), 2);
    if (d >= best) continue;
    const double at_full = full_time_s(p.seq, p.head_dim, backward, ranks, 0, warm);
    const double saved_keys = p.seq * (mean_keys(p.seq, 0) - mean_keys(p.seq, p.window));
    if (saved_keys <= 0) continue;
    best = d;
    per_key_s = std::max(0.0, (at_full - p.seconds) / saved_keys);
  }
  const double saved = per_key_s * seq * (mean_keys(seq, 0) - mean_keys(seq, window));
  return std::max(full - saved, 0.1 * full);
}

// ---- kernels --------------------------------------------------------------------

double interpolate_size_time_s(const std::vector<std::pair<double, double>>& points, double size) {
  if (points.empty()) throw std::logic_error("interpolate_size_time_s: no points");
  if (size <= points.front().first) return points.front().second;
  if (size >= points.back().first) return points.back().second * size / points.back().first;
  const auto hi = std::upper_bound(points.begin(), points.end(), size,
                                   [](double s, const std::pair<double, double>& p) { return s < p.first; });
  const auto lo = hi - 1;
  const double f = std::log(size / lo->first) / std::log(hi->first / lo->first);
  return std::exp(std::log(lo->second) + f * (std::log(hi->second) - std::log(lo->second)));
}

KernelTable::KernelTable(std::vector<KernelPoint> points) : points_(std::move(points)) {
  for (const KernelPoint& p : points_) {
    if (p.kernel.empty() || !(p.elements > 0) || !(p.seconds > 0)) {
      throw std::invalid_argument("KernelTable: kernel named, elements and seconds > 0");
    }
  }
}

bool KernelTable::has(const std::string& kernel) const {
  return std::any_of(points_.begin(), points_.end(),
                     [&](const KernelPoint& p) { return p.kernel == kernel; });
}

std::optional<double> KernelTable::time_s(const std::string& kernel, bool backward,
                                          double elements, int ranks) const {
  if (elements <= 0) return 0.0;
  std::vector<int> available;
  for (const KernelPoint& p : points_) {
    if (p.kernel == kernel && p.backward == backward) available.push_back(p.ranks);
  }
  if (available.empty()) return std::nullopt;
  const int r = choose_ranks(available, ranks);
  std::map<double, std::pair<double, int>> by_size;  // mean of repeated sizes
  for (const KernelPoint& p : points_) {
    if (p.kernel == kernel && p.backward == backward && p.ranks == r) {
      by_size[p.elements].first += p.seconds;
      ++by_size[p.elements].second;
    }
  }
  std::vector<std::pair<double, double>> pts;
  for (const auto& [size, acc] : by_size) pts.emplace_back(size, acc.first / acc.second);
  return interpolate_size_time_s(pts, elements);
}

// ---- collectives ----------------------------------------------------------------

double busbw_factor(const std::string& op, int ranks) {
  const double n = ranks;
  if (op == "all_reduce") return n > 1 ? 2.0 * (n - 1) / n : 0.0;
  if (op == "all_gather" || op == "reduce_scatter" || op == "alltoall") return n > 1 ? (n - 1) / n : 0.0;
  return 1.0;  // sendrecv, broadcast
}

CollectiveTable::CollectiveTable(std::vector<CollectivePoint> points, std::vector<ProtocolCurve> curves)
    : points_(std::move(points)), curves_(std::move(curves)) {
  for (const CollectivePoint& p : points_) {
    if (p.ranks < 2 || !(p.bytes > 0) || !(p.seconds > 0)) {
      throw std::invalid_argument("CollectiveTable: ranks >= 2, bytes and seconds > 0");
    }
  }
}

std::optional<double> CollectiveTable::time_s(const std::string& op, const std::string& scope,
                                              int ranks, double bytes, bool cold) const {
  if (bytes <= 0 || (ranks < 2 && op != "sendrecv")) return 0.0;
  // Cold points when asked for and measured, else the warm (or unlabelled) ones.
  const bool use_cold = cold && std::any_of(points_.begin(), points_.end(), [&](const CollectivePoint& p) {
                          return p.op == op && p.scope == scope && p.cold;
                        });
  // Measured points: the same rank count if measured, else the closest one,
  // its bandwidth term rescaled by the op's busbw factor.
  std::vector<int> point_ranks;
  for (const CollectivePoint& p : points_) {
    if (p.op == op && p.scope == scope && p.cold == use_cold) point_ranks.push_back(p.ranks);
  }
  const bool exact_points = std::find(point_ranks.begin(), point_ranks.end(), ranks) != point_ranks.end();
  std::vector<const ProtocolCurve*> curves;
  int curve_ranks = -1;
  for (const ProtocolCurve& c : curves_) {
    if (c.op != op || c.scope != scope) continue;
    if (curve_ranks < 0 || std::abs(c.ranks - ranks) < std::abs(curve_ranks - ranks)) curve_ranks = c.ranks;
  }
  for (const ProtocolCurve& c : curves_) {
    if (c.op == op && c.scope == scope && c.ranks == curve_ranks) curves.push_back(&c);
  }
  if (!point_ranks.empty() && (exact_points || curves.empty())) {
    int r = point_ranks.front();
    for (int pr : point_ranks) {
      if (std::abs(pr - ranks) < std::abs(r - ranks)) r = pr;
    }
    std::map<double, std::pair<double, int>> by_size;
    for (const CollectivePoint& p : points_) {
      if (p.op == op && p.scope == scope && p.ranks == r && p.cold == use_cold) {
        by_size[p.bytes].first += p.seconds;
        ++by_size[p.bytes].second;
      }
    }
    std::vector<std::pair<double, double>> pts;
    for (const auto& [size, acc] : by_size) pts.emplace_back(size, acc.first / acc.second);
    const double t = interpolate_size_time_s(pts, bytes);
    const double at = busbw_factor(op, r);
    return at > 0 ? t * busbw_factor(op, ranks) / at : t;
  }
  if (!curves.empty()) {
    // A ring's latency grows with its steps: n-1 (AG, RS), 2(n-1) (AR).
    const double steps_fit = op == "sendrecv" ? 1.0 : std::max(1, curve_ranks - 1);
    const double steps = op == "sendrecv" ? 1.0 : std::max(1, ranks - 1);
    auto curve_s = [&](const ProtocolCurve* c, double b) {
      return c->latency_us * 1e-6 * steps / steps_fit + b * busbw_factor(op, ranks) / (c->busbw_gbs * 1e9);
    };
    const bool ranged = std::any_of(curves.begin(), curves.end(), [](const ProtocolCurve* c) { return c->max_bytes > 0; });
    if (!ranged) {
      double best = std::numeric_limits<double>::infinity();
      for (const ProtocolCurve* c : curves) best = std::min(best, curve_s(c, bytes));
      return best;
    }
    std::vector<const ProtocolCurve*> by_range = curves;
    std::sort(by_range.begin(), by_range.end(),
              [](const ProtocolCurve* a, const ProtocolCurve* b) { return a->min_bytes < b->min_bytes; });
    if (bytes <= by_range.front()->max_bytes || by_range.size() == 1) return curve_s(by_range.front(), bytes);
    for (size_t i = 0; i < by_range.size(); ++i) {
      const ProtocolCurve* c = by_range[i];
      if (bytes >= c->min_bytes && bytes <= c->max_bytes) return curve_s(c, bytes);
      if (i + 1 < by_range.size() && bytes > c->max_bytes && bytes < by_range[i + 1]->min_bytes) {
        // Between two ranges: log-log from this one's end to the next one's start.
        const double a = c->max_bytes, b = by_range[i + 1]->min_bytes;
        const double ta = curve_s(c, a), tb = curve_s(by_range[i + 1], b);
        const double f = std::log(bytes / a) / std::log(b / a);
        return std::exp(std::log(ta) + f * (std::log(tb) - std::log(ta)));
      }
    }
    return curve_s(by_range.back(), bytes);
  }
  // An all-reduce is a reduce-scatter then an all-gather (NCCL's ring).
  if (op == "all_reduce") {
    const std::optional<double> rs = time_s("reduce_scatter", scope, ranks, bytes, cold);
    const std::optional<double> ag = time_s("all_gather", scope, ranks, bytes, cold);
    if (rs && ag) return *rs + *ag;
  }
  return std::nullopt;
}

// ---- in situ ---------------------------------------------------------------------

InsituTable::InsituTable(std::vector<InsituPoint> points) : points_(std::move(points)) {
  for (const InsituPoint& p : points_) {
    if (p.ranks < 1 || !(p.value >= 0) || !std::isfinite(p.value)) {
      throw std::invalid_argument("InsituTable: ranks >= 1 and finite values >= 0");
    }
  }
}

std::optional<double> InsituTable::value(const std::string& cls, int ranks) const {
  std::vector<int> available;
  for (const InsituPoint& p : points_) {
    if (p.cls == cls) available.push_back(p.ranks);
  }
  if (available.empty()) return std::nullopt;
  const int r = choose_ranks(available, ranks);
  for (const InsituPoint& p : points_) {
    if (p.cls == cls && p.ranks == r) return p.value;
  }
  return std::nullopt;
}

}  // namespace megascale::model
