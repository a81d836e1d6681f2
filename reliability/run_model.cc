// reliability/run_model.cc: the Monte Carlo of run_model.h.
#include "reliability/run_model.h"

#include "base/splitmix64.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <fmt/format.h>

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
  rate -= rate_per_s[static_cast<int>(Cause::kLink)] * (1.0 - failures.traffic_drop_fraction) * survive;
  return rate > 0 ? 1.0 / rate : std::numeric_limits<double>::infinity();
}

double RunModel::checkpoint_cycle_stall_s() const {
  return std::max(checkpoint_stall_s, checkpoint_persist_s - recovery.checkpoint_interval_s);
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

namespace {

// One failure and the random numbers that decide what it does (drawn together,
// so every failure consumes the same count whatever it turns out to be).
struct Failure {
  double at_s = std::numeric_limits<double>::infinity();
  Cause cause = Cause::kGpu;
  Kind kind = Kind::kCrash;
  double u_detect = 0.5, u_fn = 1, u_fp = 1, flap_s = 0;
  bool random = true;  // from the Poisson process (false: an explicit fault)
};

constexpr int kNoCause = -1;

// The whole state of one simulated run (run_model.h describes the model).
class RunSim {
 public:
  RunSim(const RunModel& m, uint64_t seed, int run_index)
      : m_(m),
        r_(m.recovery),
        f_(m.failures),
        rng_(seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(run_index) * 0x9E3779B97F4A7C15ull),
        fault_rng_(~seed * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(run_index)),
        H_(m.horizon_s),
        I_(r_.checkpoint_interval_s),
        c_(m.checkpoint_cycle_stall_s()),
        cycle_(I_ + c_),
        restart_s_(m.restart_s()),
        flap_tolerance_s_(link_flap_tolerance_s(f_.nccl_ib_timeout, f_.nccl_ib_retry_cnt)),
        spares_(r_.spare_nodes) {
    for (double x : m.rate_per_s) total_rate_ += x;
    faults_ = f_.faults;
    std::sort(faults_.begin(), faults_.end(),
              [](const model::FaultSpec& a, const model::FaultSpec& b) { return a.at_s < b.at_s; });
    next_random_ = draw_random(0);
  }

  RunOutcome run() {
    while (true) {
      const Failure* next = peek();
      double at = next != nullptr ? std::max(next->at_s, now_) : H_;
      const bool slow_detected = slowed_ && slow_detect_at_ <= at;
      if (slow_detected) at = slow_detect_at_;
      if (at >= H_) {
        finish(H_);
        break;
      }
      if (slow_detected) {
        advance(at);
        slowed_ = false;
        out_.diagnosis_s += slow_detect_s_;  // self-check added in go_down
        if (!go_down(at, slow_failure_, 0.0)) break;
        continue;
      }
      const Failure fail = take(*next);
      out_.failures++;
      const double detect_s = detection_s(fail);
      if (fail.kind == Kind::kLinkFlap && fail.flap_s < flap_tolerance_s_) {
        // NCCL retransmits: training (and the checkpoint cycle) waits the flap out.
        advance(at);
        const double wait = std::min(fail.flap_s, H_ - at);
        out_.lost_s[static_cast<int>(fail.cause)] += wait;
        origin_ += wait;
        slow_mark_ = at + wait;
        now_ = at + wait;
        if (!f_.during_recovery) next_random_.at_s += wait;
        continue;
      }
      if (fail.kind == Kind::kSlowdown) {
        advance(at);
        now_ = at;
        if (!slowed_) {  // the job keeps training, slower, until detected
          slowed_ = true;
          slow_mark_ = at;
          slow_detect_at_ = at + detect_s;
          slow_detect_s_ = detect_s;
          slow_failure_ = fail;
          slow_cause_ = static_cast<int>(fail.cause);
        }
        continue;
      }
      advance(at);
      out_.diagnosis_s += detect_s;
      if (!go_down(at, fail, detect_s)) break;
    }
    out_.ettr = H_ > 0 ? std::clamp(progress_ / H_, 0.0, 1.0) : 0.0;
    return out_;
  }

 private:
  // The next failure (random or explicit), or nullptr when none is left.
  const Failure* peek() {
    if (next_fault_ < faults_.size() && !fault_drawn_) {
      const model::FaultSpec& spec = faults_[next_fault_];
      explicit_ = draw(fault_rng_, spec.at_s);
      explicit_.random = false;
      explicit_.cause = cause_from_string(spec.component).value_or(Cause::kGpu);
      explicit_.kind = kind_from_string(spec.kind).value_or(Kind::kCrash);
      fault_drawn_ = true;
    }
    const Failure* best = nullptr;
    if (fault_drawn_) best = &explicit_;
    if (total_rate_ > 0 && (best == nullptr || next_random_.at_s < best->at_s)) best = &next_random_;
    return best;
  }

  // Consumes `f` (what peek() returned); draws the process's next failure.
  Failure take(const Failure& f) {
    const Failure copy = f;
    if (copy.random) {
      next_random_ = draw_random(copy.at_s);
    } else {
      ++next_fault_;
      fault_drawn_ = false;
    }
    return copy;
  }

  // Every failure draws the same eight numbers, in the same order.
  Failure draw(Rng& rng, double at_s) {
    Failure f;
    f.at_s = at_s;
    const double u_cause = rng.uniform(), u_drop = rng.uniform(), u_kind = rng.uniform();
    f.u_detect = rng.uniform();
    f.u_fn = rng.uniform();
    f.u_fp = rng.uniform();
    f.flap_s = rng.exponential() * f_.link_flap_mean_s;
    double acc = 0;
    const double pick = u_cause * total_rate_;
    int i = 0;
    for (; i < kCauses - 1; ++i) {
      acc += m_.rate_per_s[i];
      if (pick < acc) break;
    }
    f.cause = static_cast<Cause>(i);
    f.kind = failure_kind(f.cause, u_drop, u_kind, f_);
    return f;
  }

  Failure draw_random(double from_s) {
    if (total_rate_ <= 0) return Failure{};
    const double e = rng_.exponential();
    return draw(rng_, from_s + e / total_rate_);
  }

  double detection_s(const Failure& f) const {
    switch (f.kind) {
      case Kind::kCrash:
      case Kind::kLinkFlap: return r_.error_report_s * (0.5 + f.u_detect);
      case Kind::kNodeDown: return r_.heartbeat_period_s * (r_.heartbeat_misses + f.u_detect);
      case Kind::kHang:
        return r_.traffic_anomaly_detection ? r_.anomaly_detect_s * (0.5 + f.u_detect)
                                            : r_.nccl_timeout_s;
      case Kind::kTrafficDrop:
        return r_.traffic_anomaly_detection ? r_.traffic_drop_detect_s * (0.5 + f.u_detect)
                                            : r_.nccl_timeout_s;
      case Kind::kSlowdown: return -std::log(f.u_detect) * r_.slowdown_detect_s;
    }
    return 0;
  }

  // Training time since the epoch's origin (checkpoint cycles from there).
  double trained(double L) const {
    const double k = std::floor(L / cycle_);
    return k * I_ + std::min(L - k * cycle_, I_);
  }
  double stalls(double L) const {
    const double k = std::floor(L / cycle_);
    return k * c_ + std::max(0.0, L - k * cycle_ - I_);
  }
  // Progress on storage at L: the stall after training j*I ends at j*cycle; its
  // last checkpoint_stall_s stages snapshot j (what precedes it is the wait for
  // snapshot j-1), which is on storage checkpoint_persist_s after staging began.
  double checkpointed(double L) const {
    const double k = std::floor(L / cycle_);
    const double snapshots = k + (L - k * cycle_ >= I_ ? 1 : 0);
    const double j = std::min(snapshots, std::floor((L - m_.checkpoint_persist_s + m_.checkpoint_stall_s) / cycle_));
    if (j < 1) return p_origin_;
    return std::max(p_origin_, p_origin_ + j * I_ - slow_loss_);
  }
  double progress_at(double t) const { return p_origin_ + trained(t - origin_) - slow_loss_; }

  // Accrues the straggler's loss up to t.
  void advance(double t) {
    if (slowed_ && t > slow_mark_) {
      slow_loss_ += (t - slow_mark_) * (1.0 - 1.0 / f_.slowdown_factor);
      slow_mark_ = t;
    }
  }

  void close_epoch(double t) {
    out_.lost_s[kCauses] += stalls(t - origin_);
    if (slow_cause_ != kNoCause) out_.lost_s[slow_cause_] += slow_loss_;
    slow_loss_ = 0;
    slowed_ = false;
    slow_cause_ = kNoCause;
  }

  void finish(double t) {
    advance(t);
    progress_ = progress_at(t);
    close_epoch(t);
  }

  // When a recovery that starts at `start` ends: detection left, self-check,
  // manual handling, eviction and replacement, restart.
  double recovery_end(double start, const Failure& f, double detect_s) {
    double now = start + detect_s + r_.self_check_s;
    if (f.u_fn < r_.false_negative) {
      now += r_.manual_handling_s;
      out_.manual_s += r_.manual_handling_s;
    }
    const int evicted = (is_hardware(f.cause) ? 1 : 0) + (f.u_fp < r_.false_positive ? 1 : 0);
    if (evicted > 0) {
      for (int k = 0; k < evicted; ++k) {
        while (!repairs_.empty() && repairs_.top() <= now) {
          repairs_.pop();
          ++spares_;
        }
        if (spares_ == 0 && !repairs_.empty()) {  // wait for the earliest repaired machine
          out_.spare_wait_s += repairs_.top() - now;
          now = repairs_.top();
          repairs_.pop();
          ++spares_;
        }
        if (spares_ > 0) --spares_;
        repairs_.push(now + r_.repair_s);
      }
      now += r_.replacement_s;
    }
    return now + restart_s_;
  }

  // The job goes down at d because of `f`, `detect_s` of detection still to
  // come. Returns false when the run's horizon ends while it is down.
  bool go_down(double d, const Failure& f, double detect_s) {
    const double progress = progress_at(d);
    const double kept = std::min(checkpointed(d - origin_), progress);
    const double lost_work_s = progress - kept;
    close_epoch(d);
    const int ci = static_cast<int>(f.cause);
    out_.lost_s[ci] += lost_work_s;
    out_.restarts++;
    out_.diagnosis_s += r_.self_check_s;
    double end = recovery_end(d, f, detect_s);
    out_.catch_up_s += restart_s_ + lost_work_s;
    out_.lost_s[ci] += std::min(end, H_) - d;

    if (f_.during_recovery) {
      // Failures arriving while the job is down (run_model.h).
      for (const Failure* next = peek(); next != nullptr && next->at_s < std::min(end, H_);
           next = peek()) {
        const Failure g = take(*next);
        if (g.random && g.cause == Cause::kSoftware) continue;  // needs the training code
        out_.failures++;
        out_.recovery_failures++;
        if (g.kind == Kind::kSlowdown ||
            (g.kind == Kind::kLinkFlap && g.flap_s < flap_tolerance_s_)) {
          continue;
        }
        const double restart_began = end - restart_s_;
        const double g_detect_s = detection_s(g);
        const double g_end = recovery_end(g.at_s, g, g_detect_s);
        if (g_end <= end) continue;  // found and fixed within the ongoing recovery
        if (g.at_s >= restart_began) {  // the restart restarts
          out_.restarts++;
          out_.diagnosis_s += g_detect_s + r_.self_check_s;
          out_.catch_up_s += restart_s_;
        }
        out_.lost_s[static_cast<int>(g.cause)] += std::min(g_end, H_) - std::min(end, H_);
        end = g_end;
      }
    } else if (total_rate_ > 0) {
      next_random_.at_s += end - d;  // the failure clock stops while the job is down
    }
    if (end >= H_) {
      progress_ = kept;
      return false;
    }
    origin_ = end;
    now_ = end;
    p_origin_ = kept;
    return true;
  }

  const RunModel& m_;
  const model::RecoveryConfig& r_;
  const model::FailureConfig& f_;
  Rng rng_, fault_rng_;
  const double H_, I_, c_, cycle_, restart_s_, flap_tolerance_s_;
  double total_rate_ = 0;
  std::vector<model::FaultSpec> faults_;
  size_t next_fault_ = 0;
  bool fault_drawn_ = false;
  Failure explicit_, next_random_;

  double now_ = 0;        // events before now_ (while the job was down) happen at now_
  double origin_ = 0;     // training (and its checkpoint cycle) last resumed
  double p_origin_ = 0;   // progress then (what was on storage)
  double progress_ = 0;   // final
  bool slowed_ = false;
  double slow_mark_ = 0, slow_detect_at_ = 0, slow_detect_s_ = 0, slow_loss_ = 0;
  int slow_cause_ = kNoCause;
  Failure slow_failure_;
  int spares_;
  std::priority_queue<double, std::vector<double>, std::greater<double>> repairs_;
  RunOutcome out_;
};

}  // namespace

double expected_failures_per_run(const RunModel& m) {
  double rate_per_s = 0;
  for (double x : m.rate_per_s) rate_per_s += x;
  return rate_per_s > 0 ? rate_per_s * m.horizon_s : 0.0;  // 0 x an endless run: none
}

RunOutcome simulate_run(const RunModel& m, uint64_t seed, int run_index) {
  // Each failure is an event of the loop below: rates or a run length far
  // beyond any cluster's (failures.rate_scale = 1e6, a per-hour rate of 1e308)
  // ran for hours, or forever once the rate was infinite and time stopped.
  const double expected = expected_failures_per_run(m);
  if (!(expected <= kMaxExpectedFailuresPerRun)) {
    throw std::invalid_argument(fmt::format(
        "the failure rates ([failures], {} GPUs) and the run's length ([run] duration, {:.3g} s) "
        "give {:.3g} expected failures per run; the Monte Carlo simulates at most {:.0f} "
        "(check failures.rate_scale and the per-hour rates)",
        m.gpus, m.horizon_s, expected, kMaxExpectedFailuresPerRun));
  }
  return RunSim(m, seed, run_index).run();
}

PlanResult monte_carlo(const RunModel& m, int runs, uint64_t seed) {
  PlanResult p;
  p.runs = runs;
  std::vector<double> ettr(runs);
  std::array<double, kLossKinds> lost{};
  double restarts = 0, diag = 0, manual = 0, catch_up = 0, spare_wait = 0;
  for (int i = 0; i < runs; ++i) {
    const RunOutcome o = simulate_run(m, seed, i);
    ettr[i] = o.ettr;
    p.ettr_mean += o.ettr;
    restarts += o.restarts;
    p.failures_mean += o.failures;
    p.recovery_failures_mean += o.recovery_failures;
    diag += o.diagnosis_s;
    manual += o.manual_s;
    catch_up += o.catch_up_s;
    spare_wait += o.spare_wait_s;
    for (int k = 0; k < kLossKinds; ++k) lost[k] += o.lost_s[k];
  }
  if (runs == 0) return p;
  p.ettr_mean /= runs;
  p.restarts_mean = restarts / runs;
  p.failures_mean /= runs;
  p.recovery_failures_mean /= runs;
  if (restarts > 0) {
    p.diagnosis_mean_s = diag / restarts;
    p.manual_mean_s = manual / restarts;
    p.catch_up_mean_s = catch_up / restarts;
  }
  for (int k = 0; k < kLossKinds; ++k) p.lost_hours_by_cause[loss_name(k)] = lost[k] / runs / 3600.0;
  p.spare_wait_hours = spare_wait / runs / 3600.0;
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
    const PlanResult r = monte_carlo(x, runs, seed);
    out.push_back({interval, r.ettr_mean, r.ettr_p5, r.ettr_p95});
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
