// reliability/run_model.cc: the Monte Carlo of run_model.h.
#include "reliability/run_model.h"

#include "base/splitmix64.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>

#include "reliability/recovery_model.h"

namespace megascale::reliability {
namespace {

// splitmix64 (base/splitmix64.h): small, fast, good enough for a Monte Carlo
// of this size.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t next() { return gen_.next(); }
  // (0, 1)
  double uniform() { return gen_.uniform(); }
  double exponential() { return -std::log(uniform()); }

 private:
  base::SplitMix64 gen_;
};

bool is_hardware(Cause c) { return c != Cause::kSoftware; }

}  // namespace

double RunModel::mtbf_s() const {
  double rate = 0;
  for (int i = 0; i < kCauses; ++i) rate += rate_per_s[i];
  const double tol = link_flap_tolerance_s(failures.nccl_ib_timeout, failures.nccl_ib_retry_cnt);
  const double survive =
      failures.link_flap_mean_s > 0 ? 1.0 - std::exp(-tol / failures.link_flap_mean_s) : 1.0;
  rate -= rate_per_s[static_cast<int>(Cause::kLink)] * survive;
  return rate > 0 ? 1.0 / rate : std::numeric_limits<double>::infinity();
}

RunModel build_run_model(const model::Scenario& s, double iteration_time_s) {
  RunModel m;
  m.iteration_time_s = iteration_time_s;
  m.tokens_per_iteration = static_cast<double>(s.tokens_per_iteration());
  m.gpus = s.parallel.gpus();
  const std::array<double, kCauses> per_hour =
      cluster_rates_per_hour(m.gpus, s.hardware, s.failures);
  for (int i = 0; i < kCauses; ++i) m.rate_per_s[i] = per_hour[i] / 3600.0;
  m.failures = s.failures;
  m.recovery = s.recovery;
  const CheckpointCosts c = checkpoint_costs(s);
  m.checkpoint_stall_s = c.stall_s;
  m.checkpoint_persist_s = c.persist_s;
  m.load_s = c.load_s;
  m.init_s = comm_init_s(s.recovery.init, m.gpus);
  m.horizon_s = s.run.duration_s;
  m.tokens = s.run.tokens;
  return m;
}

const char* loss_name(int i) {
  return i < kCauses ? to_string(static_cast<Cause>(i)) : "checkpoint";
}

RunOutcome simulate_run(const RunModel& m, uint64_t seed, int run_index) {
  Rng rng(seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(run_index) * 0x9E3779B97F4A7C15ull);
  const model::RecoveryConfig& r = m.recovery;
  const model::FailureConfig& f = m.failures;
  const double H = m.horizon_s;
  const double I = r.checkpoint_interval_s;
  const double c = m.checkpoint_stall_s;
  const double cycle = I + c;
  double total_rate = 0;
  for (double x : m.rate_per_s) total_rate += x;
  const double flap_tolerance_s = link_flap_tolerance_s(f.nccl_ib_timeout, f.nccl_ib_retry_cnt);

  std::vector<model::FaultSpec> faults = f.faults;
  std::sort(faults.begin(), faults.end(),
            [](const model::FaultSpec& a, const model::FaultSpec& b) { return a.at_s < b.at_s; });
  size_t next_fault = 0;

  RunOutcome out;
  double t = 0, progress = 0, checkpointed = 0;
  int spares = r.spare_nodes;
  std::priority_queue<double, std::vector<double>, std::greater<double>> repairs;

  // Training from t with progress p0 until `end`: progress reached, checkpoint
  // stall time spent, and the progress of the last checkpoint on storage by `end`.
  struct Segment {
    double progress, stall_s, checkpointed;
  };
  auto train = [&](double start, double end, double p0, double ckpt0) {
    const double L = std::max(0.0, end - start);
    const double k = std::floor(L / cycle);
    const double rem = L - k * cycle;
    Segment s{p0 + k * I + std::min(rem, I), k * c + std::max(0.0, rem - I), ckpt0};
    const double snapshots = k + (rem >= I ? 1 : 0);
    // Snapshot j is taken at start + j*I + (j-1)*c and is on storage persist_s later.
    const double j = std::min(snapshots, std::floor((L - m.checkpoint_persist_s + c) / cycle));
    if (j >= 1) s.checkpointed = p0 + j * I;
    return s;
  };

  while (t < H) {
    // The next failure: the Poisson process or an explicit fault.
    const double e = rng.exponential();
    const double u_cause = rng.uniform(), u_kind = rng.uniform(), u_detect = rng.uniform();
    const double u_fn = rng.uniform(), u_fp = rng.uniform(), u_flap = rng.exponential();
    double tf = total_rate > 0 ? t + e / total_rate : std::numeric_limits<double>::infinity();
    Cause cause = Cause::kGpu;
    std::optional<Kind> kind;
    if (next_fault < faults.size() && std::max(faults[next_fault].at_s, t) <= tf) {
      tf = std::max(faults[next_fault].at_s, t);
      cause = cause_from_string(faults[next_fault].component).value_or(Cause::kGpu);
      kind = kind_from_string(faults[next_fault].kind).value_or(Kind::kCrash);
      ++next_fault;
    } else if (total_rate > 0) {
      double acc = 0;
      const double pick = u_cause * total_rate;
      int i = 0;
      for (; i < kCauses - 1; ++i) {
        acc += m.rate_per_s[i];
        if (pick < acc) break;
      }
      cause = static_cast<Cause>(i);
    }
    if (!kind) {
      if (cause == Cause::kLink) kind = Kind::kLinkFlap;
      else if (cause == Cause::kNode) kind = Kind::kNodeDown;
      else if (u_kind < f.hang_fraction) kind = Kind::kHang;
      else if (u_kind < f.hang_fraction + f.slowdown_fraction) kind = Kind::kSlowdown;
      else kind = Kind::kCrash;
    }
    const int ci = static_cast<int>(cause);

    if (tf >= H) {  // the run ends first: everything trained so far counts
      const Segment s = train(t, H, progress, checkpointed);
      progress = s.progress;
      out.lost_s[kCauses] += s.stall_s;
      break;
    }
    out.failures++;
    if (*kind == Kind::kLinkFlap) {
      const double flap_s = u_flap * f.link_flap_mean_s;
      if (flap_s < flap_tolerance_s) {  // NCCL retransmits: training waits it out
        const Segment s = train(t, tf, progress, checkpointed);
        progress = s.progress;
        checkpointed = s.checkpointed;
        out.lost_s[kCauses] += s.stall_s;
        const double wait = std::min(flap_s, H - tf);
        out.lost_s[ci] += wait;
        t = tf + wait;
        continue;
      }
    }
    // Detection.
    double detect_s = 0;
    switch (*kind) {
      case Kind::kCrash:
      case Kind::kLinkFlap: detect_s = r.error_report_s * (0.5 + u_detect); break;
      case Kind::kNodeDown:
        detect_s = r.heartbeat_period_s * (r.heartbeat_misses + u_detect);
        break;
      case Kind::kHang:
        detect_s = r.traffic_anomaly_detection ? r.anomaly_detect_s * (0.5 + u_detect)
                                               : r.nccl_timeout_s;
        break;
      case Kind::kSlowdown: detect_s = -std::log(u_detect) * r.slowdown_detect_s; break;
    }
    double down_from = tf;
    double lost_now = 0;
    Segment s{};
    if (*kind == Kind::kSlowdown) {  // keeps training, slower, until detected
      down_from = std::min(tf + detect_s, H);
      s = train(t, down_from, progress, checkpointed);
      const double slow_loss = (down_from - tf) * (1.0 - 1.0 / f.slowdown_factor);
      s.progress -= slow_loss;
      s.checkpointed = std::min(s.checkpointed, s.progress);
      lost_now += slow_loss;
    } else {
      s = train(t, tf, progress, checkpointed);
    }
    out.lost_s[kCauses] += s.stall_s;
    if (down_from >= H) {
      progress = s.progress;
      out.lost_s[ci] += lost_now;
      break;
    }
    out.restarts++;
    const double lost_work_s = s.progress - s.checkpointed;
    progress = checkpointed = s.checkpointed;
    // Diagnosis, eviction, replacement.
    double down_s = (*kind == Kind::kSlowdown ? 0.0 : detect_s) + r.self_check_s;
    out.diagnosis_s += detect_s + r.self_check_s;
    if (u_fn < r.false_negative) {
      down_s += r.manual_handling_s;
      out.manual_s += r.manual_handling_s;
    }
    const int evicted = (is_hardware(cause) ? 1 : 0) + (u_fp < r.false_positive ? 1 : 0);
    if (evicted > 0) {
      double now = down_from + down_s;
      for (int k = 0; k < evicted; ++k) {
        while (!repairs.empty() && repairs.top() <= now) {
          repairs.pop();
          ++spares;
        }
        if (spares == 0 && !repairs.empty()) {  // wait for the earliest repaired machine
          now = repairs.top();
          repairs.pop();
          ++spares;
        }
        if (spares > 0) --spares;
        repairs.push(now + r.repair_s);
      }
      down_s = now - down_from + r.replacement_s;
    }
    const double restart_s = r.process_start_s + m.init_s + m.load_s;
    down_s += restart_s;
    out.catch_up_s += restart_s + lost_work_s;
    const double down_in_run = std::min(down_s, H - down_from);
    out.lost_s[ci] += lost_now + down_in_run + std::min(lost_work_s, H - down_from - down_in_run);
    t = down_from + down_s;
  }
  out.ettr = H > 0 ? std::clamp(progress / H, 0.0, 1.0) : 0.0;
  return out;
}

PlanResult monte_carlo(const RunModel& m, int runs, uint64_t seed) {
  PlanResult p;
  p.runs = runs;
  std::vector<double> ettr(runs);
  std::array<double, kLossKinds> lost{};
  double restarts = 0, diag = 0, manual = 0, catch_up = 0;
  for (int i = 0; i < runs; ++i) {
    const RunOutcome o = simulate_run(m, seed, i);
    ettr[i] = o.ettr;
    p.ettr_mean += o.ettr;
    restarts += o.restarts;
    p.failures_mean += o.failures;
    diag += o.diagnosis_s;
    manual += o.manual_s;
    catch_up += o.catch_up_s;
    for (int k = 0; k < kLossKinds; ++k) lost[k] += o.lost_s[k];
  }
  if (runs == 0) return p;
  p.ettr_mean /= runs;
  p.restarts_mean = restarts / runs;
  p.failures_mean /= runs;
  if (restarts > 0) {
    p.diagnosis_mean_s = diag / restarts;
    p.manual_mean_s = manual / restarts;
    p.catch_up_mean_s = catch_up / restarts;
  }
  for (int k = 0; k < kLossKinds; ++k) p.lost_hours_by_cause[loss_name(k)] = lost[k] / runs / 3600.0;
  std::sort(ettr.begin(), ettr.end());
  auto quantile = [&](double q) {
    const double pos = q * (runs - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, ettr.size() - 1);
    return ettr[lo] + (ettr[hi] - ettr[lo]) * (pos - lo);
  };
  p.ettr_p5 = quantile(0.05);
  p.ettr_p95 = quantile(0.95);
  // Days to train `tokens` (or the run's own length of failure-free work).
  const double ideal_s = m.tokens > 0 && m.tokens_per_iteration > 0
                             ? m.tokens / m.tokens_per_iteration * m.iteration_time_s
                             : m.horizon_s;
  p.days_to_finish = p.ettr_mean > 0 ? ideal_s / p.ettr_mean / 86400.0
                                     : std::numeric_limits<double>::infinity();
  return p;
}

double young_daly_interval_s(double checkpoint_cost_s, double mtbf_s) {
  return std::sqrt(2.0 * checkpoint_cost_s * mtbf_s);
}

std::vector<SweepPoint> sweep_checkpoint_interval(const RunModel& m,
                                                  const std::vector<double>& intervals_s,
                                                  int runs, uint64_t seed) {
  std::vector<SweepPoint> out;
  for (double interval : intervals_s) {
    RunModel x = m;
    x.recovery.checkpoint_interval_s = interval;
    out.push_back({interval, monte_carlo(x, runs, seed).ettr_mean});
  }
  return out;
}

std::vector<double> geometric_grid(double lo_s, double hi_s, int points) {
  std::vector<double> g;
  if (points <= 1) return {lo_s};
  for (int i = 0; i < points; ++i) g.push_back(lo_s * std::pow(hi_s / lo_s, i / double(points - 1)));
  return g;
}

}  // namespace megascale::reliability
