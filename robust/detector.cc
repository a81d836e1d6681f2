// robust/detector.cc: see detector.h.
#include "robust/detector.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

namespace megascale::robust {
namespace {

std::string field(const std::map<std::string, std::string>& h, const std::string& k) {
  const auto it = h.find(k);
  return it == h.end() ? std::string() : it->second;
}

long long as_int(const std::map<std::string, std::string>& h, const std::string& k) {
  return std::atoll(field(h, k).c_str());
}

double as_double(const std::map<std::string, std::string>& h, const std::string& k) {
  return std::atof(field(h, k).c_str());
}

// A rank is slow only when it also needs this much more time than the median:
// below it, a millisecond-scale CPU step on a shared machine is scheduling
// noise (assumption, from this project's 2-core CI machine).
constexpr double kMinSlowExcess_s = 0.002;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

RankStatus parse_rank_status(int rank, const std::map<std::string, std::string>& h) {
  RankStatus s;
  s.rank = rank;
  s.present = !h.empty();
  s.pid = static_cast<int>(as_int(h, "pid"));
  s.node = h.count("node") ? static_cast<int>(as_int(h, "node")) : -1;
  s.attempt = static_cast<int>(as_int(h, "attempt"));
  s.phase = field(h, "phase");
  s.step = as_int(h, "step");
  s.start_step = as_int(h, "start_step");
  s.time_s = as_double(h, "time_s");
  s.ready_at_s = as_double(h, "ready_at_s");
  s.load_s = as_double(h, "load_s");
  s.storage_wait_since_s = as_double(h, "storage_wait_since_s");
  s.coll_op = field(h, "coll_op");
  s.coll_group = field(h, "coll_group");
  s.coll_state = field(h, "coll_state");
  s.coll_seq = as_int(h, "coll_seq");
  s.coll_peer = h.count("coll_peer") ? static_cast<int>(as_int(h, "coll_peer")) : -1;
  for (const auto& [k, v] : h) {
    if (k.rfind("seq:", 0) == 0) s.seq_by_group[k.substr(4)] = std::atoll(v.c_str());
  }
  s.bytes_sent = static_cast<uint64_t>(as_int(h, "bytes_sent"));
  s.bytes_recv = static_cast<uint64_t>(as_int(h, "bytes_recv"));
  std::istringstream in(field(h, "compute_hist"));
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) continue;
    s.compute_hist.emplace_back(std::atoll(item.substr(0, colon).c_str()), std::atof(item.substr(colon + 1).c_str()));
  }
  s.ckpt_count = as_int(h, "ckpt_count");
  s.ckpt_snapshot_total_s = as_double(h, "ckpt_snapshot_total_s");
  s.ckpt_persist_total_s = as_double(h, "ckpt_persist_total_s");
  s.ckpt_bytes = static_cast<uint64_t>(as_int(h, "ckpt_bytes"));
  return s;
}

bool finished_training(const RankStatus& status, int64_t steps) {
  return status.present && (status.phase == "done" || status.step >= steps);
}

std::vector<int> gone_ranks(const std::map<std::string, std::string>& report, int node, int attempt,
                            const std::vector<int>& host_of_rank, const std::vector<RankStatus>& statuses,
                            int64_t steps) {
  std::vector<int> out;
  const auto a = report.find("attempt");
  if (a == report.end() || a->second != std::to_string(attempt)) return out;
  for (const auto& [k, v] : report) {
    if (k.rfind("alive:", 0) != 0 || v != "0") continue;
    const int r = std::atoi(k.c_str() + 6);
    if (r < 0 || static_cast<size_t>(r) >= statuses.size() || static_cast<size_t>(r) >= host_of_rank.size()) continue;
    const RankStatus& s = statuses[static_cast<size_t>(r)];
    const auto pid = report.find("pid:" + std::to_string(r));
    if (host_of_rank[static_cast<size_t>(r)] != node || pid == report.end() || !s.present || s.attempt != attempt ||
        std::atoi(pid->second.c_str()) != s.pid || finished_training(s, steps)) {
      continue;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<int> group_members(const std::string& group) {
  std::vector<int> out;
  const size_t open = group.find('['), close = group.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  std::istringstream in(group.substr(open + 1, close - open - 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  return out;
}

SlowDetector::SlowDetector(double factor, int consecutive_steps, int ranks)
    : factor_(factor), steps_(consecutive_steps), ranks_(ranks) {}

void SlowDetector::add(int rank, const std::vector<std::pair<int64_t, double>>& compute_hist) {
  for (const auto& [step, compute] : compute_hist) by_step_[step].emplace(rank, compute);
}

std::optional<std::pair<int, std::string>> SlowDetector::slow_rank() const {
  if (ranks_ < 2) return std::nullopt;  // nobody to compare with
  std::vector<int> run(static_cast<size_t>(ranks_), 0);
  for (const auto& [step, per_rank] : by_step_) {
    if (static_cast<int>(per_rank.size()) < ranks_) continue;  // not every rank reported it yet
    for (const auto& [rank, compute] : per_rank) {
      std::vector<double> others;
      for (const auto& [r, c] : per_rank) {
        if (r != rank) others.push_back(c);
      }
      const double m = median(others);
      if (m > 0 && compute > factor_ * m && compute - m > kMinSlowExcess_s) {
        if (++run[static_cast<size_t>(rank)] >= steps_) {
          return std::make_pair(rank, fmt::format("rank {}: compute {:.4f} s at step {} is {:.2f}x the median of the other "
                                                  "ranks ({:.4f} s), above {:.2f}x for {} steps in a row",
                                                  rank, compute, step, compute / m, m, factor_, steps_));
        }
      } else {
        run[static_cast<size_t>(rank)] = 0;
      }
    }
  }
  return std::nullopt;
}

std::optional<double> SlowDetector::baseline_s() const {
  std::vector<double> medians;
  bool first = true;
  for (const auto& [step, per_rank] : by_step_) {
    if (static_cast<int>(per_rank.size()) < ranks_) continue;
    if (first) {  // the attempt's first step: warm-up
      first = false;
      continue;
    }
    std::vector<double> v;
    for (const auto& [r, c] : per_rank) v.push_back(c);
    medians.push_back(median(v));
    if (static_cast<int>(medians.size()) == kBaselineSteps) return median(medians);
  }
  return std::nullopt;
}

std::optional<std::string> SlowDetector::uniform_slowdown() const {
  const std::optional<double> base = baseline_s();
  if (!base || *base <= 0) return std::nullopt;
  int seen = 0, run = 0;
  for (const auto& [step, per_rank] : by_step_) {
    if (static_cast<int>(per_rank.size()) < ranks_) continue;
    if (++seen <= kBaselineSteps + 1) continue;  // warm-up and the baseline's steps
    double fastest = per_rank.begin()->second;
    for (const auto& [r, c] : per_rank) fastest = std::min(fastest, c);
    if (fastest > factor_ * *base && fastest - *base > kMinSlowExcess_s) {
      if (++run >= kUniformStepsFactor * steps_) {
        return fmt::format(
            "every rank slowed alike: the fastest of {} rank(s) computed {:.4f} s at step {}, {:.2f}x the job's "
            "baseline ({:.4f} s, its first {} healthy steps), above {:.2f}x for {} steps in a row",
            ranks_, fastest, step, fastest / *base, *base, kBaselineSteps, factor_, kUniformStepsFactor * steps_);
      }
    } else {
      run = 0;
    }
  }
  return std::nullopt;
}

void StallDetector::observe(double now_s, int64_t max_step, uint64_t traffic_bytes) {
  if (max_step != step_ || traffic_bytes != traffic_) {
    step_ = max_step;
    traffic_ = traffic_bytes;
    last_move_s_ = now_s;
  }
}

std::optional<double> StallDetector::stalled(double now_s) const {
  if (step_ < 0) return std::nullopt;
  const double idle = now_s - last_move_s_;
  if (idle > stall_s_) return idle;
  return std::nullopt;
}

void StallDetector::reset(double now_s) {
  step_ = -1;
  traffic_ = 0;
  last_move_s_ = now_s;
}

}  // namespace megascale::robust
