// calibrate/trace_compare.cc: see trace_compare.h.
#include "calibrate/trace_compare.h"

#include "calibrate/statistics.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace megascale::calibrate {
namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

// Kind as compared: layer events in backward carry ".bwd" already (the
// engine's and the simulator's naming); TP collectives keep their names.
std::string key(const model::TraceEvent& e) { return e.kind; }

int pp_rank_of(const model::ParallelConfig& p, int world_rank) { return world_rank / (p.tp * p.dp); }

}  // namespace

bool is_ir_kind(const std::string& kind) {
  static const std::set<std::string> kinds = [] {
    std::set<std::string> k;
    for (int i = 0; i <= static_cast<int>(model::OpKind::kOptimizerStep); ++i) {
      k.insert(model::to_string(static_cast<model::OpKind>(i)));
    }
    return k;
  }();
  return kinds.count(kind) > 0;
}

std::vector<StepWindow> split_steps(const std::vector<model::TraceEvent>& events, const model::Schedule& schedule,
                                    const model::ParallelConfig& p) {
  std::map<int, std::vector<const model::TraceEvent*>> ir, other;
  for (const model::TraceEvent& e : events) (is_ir_kind(e.kind) ? ir : other)[e.rank].push_back(&e);
  std::vector<StepWindow> out;
  for (auto& [rank, ops] : ir) {
    const int pp = pp_rank_of(p, rank);
    if (pp < 0 || pp >= static_cast<int>(schedule.ranks.size())) {
      throw std::runtime_error("trace rank " + std::to_string(rank) + " is outside the layout");
    }
    const size_t per_step = schedule.ranks[pp].ops.size();
    std::stable_sort(ops.begin(), ops.end(),
                     [](const model::TraceEvent* a, const model::TraceEvent* b) { return a->start_us < b->start_us; });
    if (per_step == 0 || ops.size() % per_step != 0) {
      throw std::runtime_error("trace rank " + std::to_string(rank) + " has " + std::to_string(ops.size()) +
                               " Schedule IR events, not a whole number of steps of " + std::to_string(per_step));
    }
    std::vector<const model::TraceEvent*>& inner = other[rank];
    std::stable_sort(inner.begin(), inner.end(),
                     [](const model::TraceEvent* a, const model::TraceEvent* b) { return a->start_us < b->start_us; });
    size_t next_inner = 0;
    for (size_t k = 0; k * per_step < ops.size(); ++k) {
      StepWindow w;
      w.rank = rank;
      w.step = static_cast<int>(k);
      w.start_us = ops[k * per_step]->start_us;
      w.end_us = w.start_us;
      for (size_t i = k * per_step; i < (k + 1) * per_step; ++i) {
        w.events.push_back(*ops[i]);
        w.end_us = std::max(w.end_us, ops[i]->end_us);
      }
      // Layer events belong to the step whose window holds their start.
      const double next_start = (k + 1) * per_step < ops.size() ? ops[(k + 1) * per_step]->start_us : 1e300;
      while (next_inner < inner.size() && inner[next_inner]->start_us < next_start) {
        w.events.push_back(*inner[next_inner]);
        ++next_inner;
      }
      out.push_back(std::move(w));
    }
  }
  return out;
}

TimeSplit time_split(const std::vector<model::TraceEvent>& events, double window_us) {
  TimeSplit t;
  for (const model::TraceEvent& e : events) {
    const double d = e.duration_us() * 1e-6;
    if (e.kind == "forward" || e.kind == "backward") t.compute_s += d;
    if (e.stream == model::Stream::kTpComm) t.tp_s += d;
    if (e.kind == "optimizer_step") t.optimizer_s += d;
  }
  t.compute_s -= t.tp_s;  // TP collectives run inside Forward / Backward
  t.window_s = window_us * 1e-6;
  t.wait_s = std::max(0.0, t.window_s - t.compute_s - t.tp_s - t.optimizer_s);
  return t;
}

Comparison compare_traces(const std::vector<model::TraceEvent>& measured,
                          const std::vector<model::TraceEvent>& predicted, const model::Schedule& schedule,
                          const model::ParallelConfig& p, int warmup) {
  Comparison c;
  const std::vector<StepWindow> windows = split_steps(measured, schedule, p);
  std::set<int> ranks, steps;
  for (const StepWindow& w : windows) {
    ranks.insert(w.rank);
    if (w.step >= warmup) steps.insert(w.step);
  }
  if (steps.empty()) throw std::runtime_error("the measured trace has no step after the warm-up");
  c.steps_used = static_cast<int>(steps.size());
  // Per kind: per-step totals (over ranks, then per rank).
  std::map<std::string, std::map<int, double>> per_step;
  std::map<std::string, model::Stream> stream_of;
  std::vector<TimeSplit> splits;
  for (const StepWindow& w : windows) {
    if (w.step < warmup) continue;
    for (const model::TraceEvent& e : w.events) {
      per_step[key(e)][w.step] += e.duration_us() * 1e-6 / ranks.size();
      stream_of[key(e)] = e.stream;
    }
    splits.push_back(time_split(w.events, w.end_us - w.start_us));
  }
  for (const TimeSplit& s : splits) {
    const double n = static_cast<double>(splits.size());
    c.measured.compute_s += s.compute_s / n;
    c.measured.tp_s += s.tp_s / n;
    c.measured.optimizer_s += s.optimizer_s / n;
    c.measured.wait_s += s.wait_s / n;
    c.measured.window_s += s.window_s / n;
  }
  // Predicted: one step; per rank averages over the simulated ranks.
  std::map<int, std::vector<model::TraceEvent>> by_rank;
  for (const model::TraceEvent& e : predicted) by_rank[e.rank].push_back(e);
  std::map<std::string, double> pred;
  for (const auto& [rank, evs] : by_rank) {
    double lo = 1e300, hi = -1e300;
    for (const model::TraceEvent& e : evs) {
      pred[key(e)] += e.duration_us() * 1e-6 / by_rank.size();
      stream_of.emplace(key(e), e.stream);
      if (is_ir_kind(e.kind)) {
        lo = std::min(lo, e.start_us);
        hi = std::max(hi, e.end_us);
      }
    }
    const TimeSplit s = time_split(evs, hi > lo ? hi - lo : 0.0);
    const double n = static_cast<double>(by_rank.size());
    c.predicted.compute_s += s.compute_s / n;
    c.predicted.tp_s += s.tp_s / n;
    c.predicted.optimizer_s += s.optimizer_s / n;
    c.predicted.wait_s += s.wait_s / n;
    c.predicted.window_s += s.window_s / n;
  }
  std::set<std::string> kinds;
  for (const auto& [k, v] : per_step) kinds.insert(k);
  for (const auto& [k, v] : pred) kinds.insert(k);
  for (const std::string& k : kinds) {
    OpRow row;
    row.kind = k;
    row.stream = model::to_string(stream_of.count(k) ? stream_of.at(k) : model::Stream::kCompute);
    std::vector<double> totals;
    for (int s : steps) {
      const auto it = per_step.find(k);
      totals.push_back(it != per_step.end() && it->second.count(s) ? it->second.at(s) : 0.0);
    }
    row.measured_s = median(totals);
    row.measured_spread = row.measured_s > 0 ? (quantile(totals, 0.9) - quantile(totals, 0.1)) / row.measured_s : 0;
    row.predicted_s = pred.count(k) ? pred.at(k) : 0.0;
    row.error = row.measured_s > 0 ? row.predicted_s / row.measured_s - 1.0 : 0.0;
    c.ops.push_back(row);
  }
  std::sort(c.ops.begin(), c.ops.end(), [](const OpRow& a, const OpRow& b) { return a.measured_s > b.measured_s; });
  return c;
}

}  // namespace megascale::calibrate
