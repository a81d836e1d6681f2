// sim/variability.cc: see variability.h.
#include "sim/variability.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "base/splitmix64.h"

namespace megascale::sim {
namespace {


// A uniform double in (0, 1) from a 64-bit hash.
double unit(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53; }

uint64_t key(uint64_t seed, uint64_t a, uint64_t b, uint64_t salt) {
  return base::splitmix64(base::splitmix64(base::splitmix64(seed ^ salt) ^ a) ^ b);
}

// z ~ N(0, 1) for (seed, step, machine), Box-Muller.
double normal(uint64_t seed, int step, int machine, uint64_t salt = 1) {
  const double u1 = unit(key(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(machine), salt));
  const double u2 = unit(key(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(machine), salt + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

Variability::Variability(const model::Scenario& s, const VariabilityOptions& o)
    : p_(s.parallel), gpus_per_node_(s.hardware.gpus_per_node), o_(o) {
  const int gpus = p_.gpus();
  if (gpus_per_node_ < 1) throw std::invalid_argument("stragglers: gpus_per_node must be >= 1");
  machines_ = (gpus + gpus_per_node_ - 1) / gpus_per_node_;
  const StragglerSpec& st = o.stragglers;
  if (!(st.factor >= 1.0) || !std::isfinite(st.factor))
    throw std::invalid_argument(fmt::format("stragglers: factor must be >= 1 and finite, got {:g}", st.factor));
  if (!(st.machine_fraction >= 0.0 && st.machine_fraction <= 1.0))
    throw std::invalid_argument(
        fmt::format("stragglers: machine fraction must be in [0, 1], got {:g}", st.machine_fraction));
  for (int g : st.gpus)
    if (g < 0 || g >= gpus)
      throw std::invalid_argument(fmt::format("stragglers: GPU rank {} outside 0..{}", g, gpus - 1));
  if (!(o.jitter_sigma >= 0.0) || !std::isfinite(o.jitter_sigma))
    throw std::invalid_argument("jitter sigma must be >= 0 and finite");
  if (!(o.gpu_sigma >= 0.0) || !std::isfinite(o.gpu_sigma))
    throw std::invalid_argument("GPU speed sigma must be >= 0 and finite");
  if (!st.per_step) fixed_random_ = random_machines(0);
  if (o.gpu_sigma > 0) {
    gpu_speed_.resize(static_cast<size_t>(gpus));
    // Salt 4/5: independent of the per-step jitter (1/2) and straggler draws (3).
    for (int g = 0; g < gpus; ++g) gpu_speed_[g] = std::exp(o.gpu_sigma * normal(o.seed, 0, g, 4));
  }
}

// round(fraction x machines) distinct machines, partial Fisher-Yates.
std::vector<int> Variability::random_machines(int step) const {
  const int count = static_cast<int>(std::lround(o_.stragglers.machine_fraction * machines_));
  std::vector<int> all(machines_);
  for (int i = 0; i < machines_; ++i) all[i] = i;
  for (int i = 0; i < count; ++i) {
    const uint64_t h = key(o_.seed, static_cast<uint64_t>(step), static_cast<uint64_t>(i), 3);
    const int j = i + static_cast<int>(h % static_cast<uint64_t>(machines_ - i));
    std::swap(all[i], all[j]);
  }
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

bool Variability::uniform() const {
  const StragglerSpec& st = o_.stragglers;
  const bool any_straggler =
      st.factor > 1.0 && (!st.gpus.empty() || std::lround(st.machine_fraction * machines_) > 0);
  return !any_straggler && o_.jitter_sigma == 0.0 && o_.gpu_sigma == 0.0;
}

StepFactors Variability::step(int step) const {
  StepFactors f;
  f.dp = p_.dp;
  f.pp = p_.pp;
  f.group.assign(static_cast<size_t>(p_.dp) * p_.pp, 1.0);
  const StragglerSpec& st = o_.stragglers;
  f.straggler_machines = st.per_step ? random_machines(step) : fixed_random_;

  std::vector<double> machine(machines_, 1.0);
  if (o_.jitter_sigma > 0)
    for (int m = 0; m < machines_; ++m) machine[m] = std::exp(o_.jitter_sigma * normal(o_.seed, step, m));
  std::vector<uint8_t> slow_machine(machines_, 0);
  for (int m : f.straggler_machines) slow_machine[m] = 1;
  std::vector<uint8_t> slow_gpu(static_cast<size_t>(p_.gpus()), 0);
  for (int g : st.gpus) slow_gpu[g] = 1;

  // Megatron-LM rank order: gpu = t + d*TP + r*TP*DP (REFERENCE.md).
  for (int r = 0; r < p_.pp; ++r) {
    for (int d = 0; d < p_.dp; ++d) {
      double worst = 0;
      for (int t = 0; t < p_.tp; ++t) {
        const int g = t + d * p_.tp + r * p_.tp * p_.dp;
        const int m = g / gpus_per_node_;
        const double slow = (slow_gpu[g] || slow_machine[m]) ? st.factor : 1.0;
        const double speed = gpu_speed_.empty() ? 1.0 : gpu_speed_[g];
        worst = std::max(worst, slow * machine[m] * speed);
      }
      f.group[static_cast<size_t>(d) * p_.pp + r] = worst;
    }
  }
  return f;
}

ReplicaChoice choose_replicas(const StepFactors& f, const std::vector<double>& busy_s,
                              int max_replicas) {
  if (max_replicas < 1) throw std::invalid_argument("choose_replicas: max_replicas must be >= 1");
  if (static_cast<int>(busy_s.size()) != f.pp)
    throw std::invalid_argument("choose_replicas: busy_s needs one value per pipeline rank");
  // Distinct factor vectors, each with its first replica.
  std::map<std::vector<double>, int> first_of;
  std::vector<int> twin(f.dp, -1);  // replica -> representative
  for (int d = 0; d < f.dp; ++d) {
    std::vector<double> v(f.group.begin() + static_cast<ptrdiff_t>(d) * f.pp,
                          f.group.begin() + static_cast<ptrdiff_t>(d + 1) * f.pp);
    auto [it, inserted] = first_of.emplace(std::move(v), d);
    twin[d] = it->second;
  }
  std::vector<int> reps;
  for (const auto& [v, d] : first_of) reps.push_back(d);
  auto score = [&](int d) {
    double worst = 0, sum = 0;
    for (int r = 0; r < f.pp; ++r) {
      worst = std::max(worst, f.factor(d, r) * busy_s[r]);
      sum += f.factor(d, r) * busy_s[r];
    }
    return std::pair<double, double>(worst, sum);
  };
  std::stable_sort(reps.begin(), reps.end(), [&](int a, int b) {
    const auto sa = score(a), sb = score(b);
    if (sa != sb) return sa > sb;
    return a < b;
  });
  ReplicaChoice c;
  c.distinct = static_cast<int>(reps.size());
  // A replica left out is harmless when a simulated one is at least as slow on
  // every pipeline rank (it then reaches every DP collective no later).
  auto dominated = [&](int u, int by) {
    for (int r = 0; r < f.pp; ++r)
      if (f.factor(u, r) > f.factor(by, r)) return false;
    return true;
  };
  const size_t kept = std::min(reps.size(), static_cast<size_t>(max_replicas));
  for (size_t i = kept; i < reps.size() && c.exact; ++i) {
    bool covered = false;
    for (size_t j = 0; j < kept && !covered; ++j) covered = dominated(reps[i], reps[j]);
    c.exact = covered;
  }
  reps.resize(kept);
  c.replicas = reps;
  c.replica_of.assign(f.dp, -1);
  for (int d = 0; d < f.dp; ++d) {
    for (size_t i = 0; i < reps.size(); ++i)
      if (reps[i] == twin[d]) c.replica_of[d] = static_cast<int>(i);
  }
  return c;
}

}  // namespace megascale::sim
