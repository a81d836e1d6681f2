// network/ecmp_stats.cc: Monte Carlo of ECMP over a real fabric, and the exact
// balls-into-bins values it is checked against.
#include "network/ecmp_stats.h"

#include "base/splitmix64.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::network {

namespace {

// splitmix64 (base/splitmix64.h): a small deterministic generator, the same
// on every platform (std:: distributions are not).
using SplitMix64 = base::SplitMix64;

// P(no bin holds more than `cap` of `balls` balls thrown into `bins` bins):
// assign bins one by one; given r balls left for nb bins, the next bin gets
// Binomial(r, 1/nb) of them.
double probability_max_at_most(int balls, int bins, int cap, const std::vector<double>& log_fact) {
  std::vector<double> left(static_cast<size_t>(balls) + 1, 0.0);  // P(r balls still to place)
  std::vector<double> next(left.size());
  left[static_cast<size_t>(balls)] = 1.0;
  for (int bin = 0; bin < bins; ++bin) {
    const int bins_left = bins - bin;
    std::fill(next.begin(), next.end(), 0.0);
    const double p = 1.0 / bins_left;
    const double log_p = std::log(p);
    const double log_q = bins_left > 1 ? std::log1p(-p) : 0.0;
    for (int r = 0; r <= balls; ++r) {
      const double pr = left[static_cast<size_t>(r)];
      if (pr == 0.0) continue;
      if (bins_left == 1) {
        if (r <= cap) next[0] += pr;
        continue;
      }
      // This bin takes c <= cap; the rest must fit the remaining bins.
      const int c_min = std::max(0, r - (bins_left - 1) * cap);
      const int c_max = std::min(r, cap);
      for (int c = c_min; c <= c_max; ++c) {
        const double log_pmf = log_fact[static_cast<size_t>(r)] - log_fact[static_cast<size_t>(c)] -
                               log_fact[static_cast<size_t>(r - c)] + c * log_p + (r - c) * log_q;
        next[static_cast<size_t>(r - c)] += pr * std::exp(log_pmf);
      }
    }
    left.swap(next);
  }
  return left[0];
}

}  // namespace

double expected_paths_used_fraction(int paths, int subflows) {
  return 1.0 - std::pow(1.0 - 1.0 / paths, subflows);
}

double expected_max_bin_load(int balls, int bins) {
  if (balls <= 0 || bins <= 0) return 0.0;
  if (bins == 1) return balls;
  std::vector<double> log_fact(static_cast<size_t>(balls) + 1, 0.0);
  for (int i = 1; i <= balls; ++i) log_fact[static_cast<size_t>(i)] = std::lgamma(i + 1.0);
  // E[max] = sum over m >= 0 of P(max > m); P(max > m) = 1 below ceil(balls/bins).
  const int first = (balls + bins - 1) / bins;
  double expected = first;
  for (int m = first; m < balls; ++m) {
    const double tail = 1.0 - probability_max_at_most(balls, bins, m, log_fact);
    if (tail < 1e-13) break;
    expected += tail;
  }
  return expected;
}

double expected_collective_efficiency(int paths, int flows, int qps) {
  const double balls = static_cast<double>(flows) * qps;
  return balls / (paths * expected_max_bin_load(flows * qps, paths));
}

EcmpStatistics ecmp_statistics(int paths, int flows, int qps, int trials, uint64_t seed,
                               EcmpHash hash) {
  if (paths < 1 || paths > 256) {
    throw std::invalid_argument("ecmp_statistics: paths must be in 1..256, got " +
                                std::to_string(paths));
  }
  if (flows < 1) throw std::invalid_argument("ecmp_statistics: flows must be >= 1");
  if (qps < 1 || qps > kMaxQpsPerConnection) {
    throw std::invalid_argument("ecmp_statistics: qps must be in 1.." +
                                std::to_string(kMaxQpsPerConnection));
  }
  if (trials < 1) throw std::invalid_argument("ecmp_statistics: trials must be >= 1");
  if (static_cast<int64_t>(flows) * qps > (1 << 20)) {
    throw std::invalid_argument("ecmp_statistics: flows * qps must be <= 1048576");
  }

  // A 2-tier fabric whose ToRs each have `paths` uplinks to `paths` spines.
  FabricSpec spec;
  spec.preset = "ecmp-statistics";
  spec.tiers = 2;
  spec.switch_radix = 2 * paths;
  spec.oversubscription = {1.0};
  spec.split_ports = false;
  spec.rail_optimized = false;
  spec.gpus_per_server = 1;
  spec.nics_per_server = 1;
  spec.gpus = 2 * paths * paths;  // 2n ToRs of n servers: n spines
  const Topology topo = Topology::build(spec);

  SplitMix64 rng{seed};
  EcmpConfig config;
  config.hash = hash;
  config.seed = static_cast<uint32_t>(rng.next());
  config.qps_per_connection = qps;
  const Router router(topo, config);

  const NodeId src_tor = topo.tor_node(0);
  std::vector<int> subflows_on(static_cast<size_t>(paths));
  std::vector<LinkId> path;
  double sum_max = 0;
  double sum_used = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::fill(subflows_on.begin(), subflows_on.end(), 0);
    for (int f = 0; f < flows; ++f) {
      const NodeId src = topo.nic_node(f % paths);          // under ToR 0
      const NodeId dst = topo.nic_node(paths + f % paths);  // under ToR 1
      const auto base =
          static_cast<uint16_t>(kRoceSourcePortMin + rng.next() % kRoceSourcePorts);
      for (int q = 0; q < qps; ++q) {
        path.clear();
        router.route(src, dst, router.tuple(src, dst, Router::qp_source_port(base, q)), &path);
        for (LinkId id : path) {
          const Link& l = topo.link(id);
          if (l.src == src_tor && l.kind == LinkKind::kTorAgg) {
            ++subflows_on[static_cast<size_t>(topo.index_in_kind(l.dst))];
          }
        }
      }
    }
    sum_max += *std::max_element(subflows_on.begin(), subflows_on.end());
    sum_used += static_cast<double>(
        std::count_if(subflows_on.begin(), subflows_on.end(), [](int n) { return n > 0; }));
  }

  EcmpStatistics s;
  s.paths = paths;
  s.flows = flows;
  s.qps = qps;
  s.trials = trials;
  s.mean_paths_used_fraction = sum_used / trials / paths;
  s.mean_max_load_flows = sum_max / trials / qps;
  s.collective_efficiency = (static_cast<double>(flows) / paths) / s.mean_max_load_flows;
  s.theory_paths_used_fraction = expected_paths_used_fraction(paths, flows * qps);
  // One path carries every flow: its efficiency is 1 exactly, however many
  // flows there are.
  s.theory_collective_efficiency = paths == 1                     ? 1.0
                                   : flows * qps <= kMaxExactBalls ? expected_collective_efficiency(paths, flows, qps)
                                                                   : std::nan("");
  return s;
}

}  // namespace megascale::network
