// network/ecmp_stats.h: how evenly ECMP spreads a few elephant flows.
//
// k equal flows hashed onto n equal-cost paths behave like balls thrown into
// bins (REFERENCE.md "Congestion control and link faults" -> ECMP): on average
// they use 1 - (1 - 1/n)^k of the paths, and a synchronous collective, gated by
// its most loaded link, runs at about (k/n) / E[max load] of the bandwidth an
// even spread would give (k = n = 8: ~0.39). With Q QPs per connection each flow
// is Q sub-flows of 1/Q of the bytes (routing.h), i.e. kQ balls of weight 1/Q:
// ~0.57 for Q = 4 and ~0.73 for Q = 16.
//
// ecmp_statistics() measures this by Monte Carlo through the real router: it
// builds a two-tier fabric whose ToRs have n uplinks, one to each of n spines
// (switch radix 2n, 1:1, 2n ToRs of n single-NIC servers), sends k flows from
// the NICs of ToR 0 to those of ToR 1 with random base source ports, routes
// every QP's 5-tuple with Router::route, and counts the sub-flows on each of
// ToR 0's n uplinks. The theory functions give the exact balls-into-bins values
// to compare with.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>

#include "network/routing.h"

namespace megascale::network {

struct EcmpStatistics {
  int paths = 0;
  int flows = 0;
  int qps = 0;
  int trials = 0;
  // Measured (Monte Carlo mean over trials).
  double mean_paths_used_fraction = 0;  // paths carrying >= 1 sub-flow, / n
  double mean_max_load_flows = 0;       // E[max over paths of load], in flows
  double collective_efficiency = 0;     // (k/n) / mean_max_load_flows
  // Exact balls-into-bins values for kQ balls of weight 1/Q in n bins; the
  // efficiency is NaN when kQ > kMaxExactBalls on more than one path (too slow
  // to compute exactly; reports print "n/a" and JSON null).
  double theory_paths_used_fraction = 0;
  double theory_collective_efficiency = 0;
};

constexpr int kMaxExactBalls = 2048;

// REQUIRES: 1 <= paths <= 256, flows >= 1, 1 <= qps <= kMaxQpsPerConnection,
// trials >= 1, flows * qps <= 1 << 20; otherwise std::invalid_argument.
// Deterministic for a given seed.
EcmpStatistics ecmp_statistics(int paths, int flows, int qps, int trials, uint64_t seed,
                               EcmpHash hash = EcmpHash::kCrc32);

// 1 - (1 - 1/paths)^subflows.
double expected_paths_used_fraction(int paths, int subflows);
// E[max bin count] for `balls` balls thrown uniformly into `bins` bins, exact up
// to rounding (dynamic programme over the bins). Costs about
// bins * balls * sqrt(balls / bins) steps per distinct maximum considered.
double expected_max_bin_load(int balls, int bins);
// (flows/paths) / (E[max balls] / qps) for flows*qps balls in `paths` bins.
double expected_collective_efficiency(int paths, int flows, int qps);

}  // namespace megascale::network
