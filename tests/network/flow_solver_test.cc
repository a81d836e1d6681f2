// tests/network/flow_solver_test.cc: max-min rates, completion times and
// memoisation of network/flow_solver.h against hand-computed answers, a
// naive reference solver and the max-min optimality condition.
#include "network/flow_solver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace megascale::network {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTol = 1e-9;  // relative, for closed-form answers

// Seconds to move `bytes` at `gbps`.
double secs(double bytes, double gbps) { return bytes * 8.0 / (gbps * 1e9); }

// Naive progressive filling: raise every unfrozen flow's rate together until
// a link saturates or a cap is reached; O(F * L) per step. The reference the
// fast solver is checked against.
std::vector<double> naive_max_min(const std::vector<double>& cap, const FlowSet& flows) {
  const std::size_t F = flows.size(), L = cap.size();
  std::vector<double> rate(F, 0.0);
  std::vector<bool> frozen(F, false);
  std::vector<double> rem = cap;
  for (;;) {
    std::vector<int> n(L, 0);
    bool any = false;
    for (std::size_t f = 0; f < F; ++f)
      if (!frozen[f]) {
        any = true;
        for (LinkId l : flows.path(f)) ++n[l];
      }
    if (!any) break;
    double inc = kInf;
    for (std::size_t l = 0; l < L; ++l)
      if (n[l] > 0) inc = std::min(inc, rem[l] / n[l]);
    for (std::size_t f = 0; f < F; ++f)
      if (!frozen[f]) inc = std::min(inc, flows.rate_cap_gbps(f) - rate[f]);
    inc = std::max(inc, 0.0);
    for (std::size_t f = 0; f < F; ++f)
      if (!frozen[f]) {
        rate[f] += inc;
        for (LinkId l : flows.path(f)) rem[l] -= inc;
      }
    for (std::size_t f = 0; f < F; ++f) {
      if (frozen[f]) continue;
      bool stop = rate[f] >= flows.rate_cap_gbps(f) * (1 - 1e-12);
      for (LinkId l : flows.path(f)) stop = stop || rem[l] <= 1e-12 * cap[l];
      if (stop) frozen[f] = true;
    }
  }
  return rate;
}

// Max-min optimality: every flow is at its cap, or crosses a saturated link
// on which no flow has a larger rate. And no link is over capacity.
void expect_max_min_optimal(const std::vector<double>& cap, const FlowSet& flows, const RateSolution& s) {
  const double eps = 1e-9;
  std::vector<double> load(cap.size(), 0.0), max_rate(cap.size(), 0.0);
  for (std::size_t f = 0; f < flows.size(); ++f)
    for (LinkId l : flows.path(f)) {
      load[l] += s.rate_gbps[f];
      max_rate[l] = std::max(max_rate[l], s.rate_gbps[f]);
    }
  for (std::size_t l = 0; l < cap.size(); ++l) EXPECT_LE(load[l], cap[l] * (1 + eps) + eps) << "link " << l;
  for (std::size_t f = 0; f < flows.size(); ++f) {
    const double r = s.rate_gbps[f];
    if (r >= flows.rate_cap_gbps(f) * (1 - eps)) {
      EXPECT_EQ(s.bottleneck_link[f], kLimitedByRateCap) << "flow " << f;
      continue;
    }
    const LinkId b = s.bottleneck_link[f];
    ASSERT_GE(b, 0) << "flow " << f;
    EXPECT_NE(std::find(flows.path(f).begin(), flows.path(f).end(), b), flows.path(f).end());
    EXPECT_GE(load[b], cap[b] * (1 - eps) - eps) << "bottleneck of flow " << f << " not saturated";
    EXPECT_GE(r, max_rate[b] * (1 - eps)) << "flow " << f << " is not the largest on its bottleneck";
  }
}

TEST(FlowSolver, OneLinkSharedEqually) {
  const std::vector<double> cap = {100.0};
  FlowSet flows;
  for (int i = 0; i < 4; ++i) flows.add({0}, 1e6);
  const RateSolution s = solve_rates(cap, flows);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(s.rate_gbps[i], 25.0, kTol);
    EXPECT_EQ(s.bottleneck_link[i], 0);
  }
  EXPECT_NEAR(s.link_load_gbps[0], 100.0, kTol);
  EXPECT_NEAR(s.link_utilisation[0], 1.0, kTol);
}

// Bertsekas & Gallager's classic example: links A (cap 1) and B (cap 2); flow
// 0 on A, flow 1 on A+B, flows 2 and 3 on B. A gives flows 0 and 1 0.5 each;
// B's remaining 1.5 is split by flows 2 and 3 (0.75 each).
TEST(FlowSolver, TextbookTwoLinks) {
  const std::vector<double> cap = {1.0, 2.0};
  FlowSet flows;
  flows.add({0}, 1);
  flows.add({0, 1}, 1);
  flows.add({1}, 1);
  flows.add({1}, 1);
  const RateSolution s = solve_rates(cap, flows);
  EXPECT_NEAR(s.rate_gbps[0], 0.5, kTol);
  EXPECT_NEAR(s.rate_gbps[1], 0.5, kTol);
  EXPECT_NEAR(s.rate_gbps[2], 0.75, kTol);
  EXPECT_NEAR(s.rate_gbps[3], 0.75, kTol);
  EXPECT_EQ(s.bottleneck_link[1], 0);
  EXPECT_EQ(s.bottleneck_link[2], 1);
  expect_max_min_optimal(cap, flows, s);
}

TEST(FlowSolver, CapsFreeCapacityForOthers) {
  const std::vector<double> cap = {100.0};
  FlowSet flows;
  flows.add({0}, 1, 10.0);  // NIC-limited
  flows.add({0}, 1);
  flows.add({0}, 1, 60.0);  // cap above its fair share (45): not binding
  const RateSolution s = solve_rates(cap, flows);
  EXPECT_NEAR(s.rate_gbps[0], 10.0, kTol);
  EXPECT_EQ(s.bottleneck_link[0], kLimitedByRateCap);
  EXPECT_NEAR(s.rate_gbps[1], 45.0, kTol);
  EXPECT_NEAR(s.rate_gbps[2], 45.0, kTol);
  EXPECT_EQ(s.bottleneck_link[2], 0);
}

TEST(FlowSolver, EdgeCases) {
  const std::vector<double> cap = {0.0, 10.0};
  FlowSet flows;
  flows.add({0, 1}, 1000);             // zero-capacity link: rate 0, never completes
  flows.add({1}, 1000);                // takes all of link 1
  flows.add({}, 1000);                 // no link, no cap: unbounded, completes at start
  flows.add({}, 1000, 8e-6, 1.0);      // no link, capped: 1 ms
  flows.add({1}, 0, kNoRateCap, 2.0);  // zero bytes: completes at its start
  const RateSolution s = solve_rates(cap, flows);
  EXPECT_EQ(s.rate_gbps[0], 0.0);
  EXPECT_EQ(s.bottleneck_link[0], 0);
  EXPECT_NEAR(s.rate_gbps[1], 5.0, kTol);  // shares with the zero-byte flow when concurrent
  EXPECT_EQ(s.rate_gbps[2], kInf);
  EXPECT_EQ(s.bottleneck_link[2], kUnlimited);
  EXPECT_EQ(s.bottleneck_link[3], kLimitedByRateCap);

  const CompletionResult c = simulate_completion(cap, flows);
  EXPECT_EQ(c.completion_s[0], kInf);
  EXPECT_NEAR(c.completion_s[1], secs(1000, 10.0), kTol);
  EXPECT_EQ(c.completion_s[2], 0.0);
  EXPECT_NEAR(c.completion_s[3], 1.0 + secs(1000, 8e-6), kTol);
  EXPECT_EQ(c.completion_s[4], 2.0);
  EXPECT_EQ(c.bottleneck_link[0], 0);
  EXPECT_NEAR(c.makespan_s, 2.0, kTol);  // the zero-byte flow "completes" at 2 s
}

TEST(FlowSolver, RejectsBadInput) {
  FlowSet flows;
  flows.add({3}, 1);
  EXPECT_THROW(solve_rates(std::vector<double>{1.0}, flows), std::invalid_argument);
  FlowSet ok;
  ok.add({0}, 1);
  EXPECT_THROW(solve_rates(std::vector<double>{-1.0}, ok), std::invalid_argument);
  EXPECT_THROW(solve_rates(std::vector<double>{kInf}, ok), std::invalid_argument);
  EXPECT_THROW(ok.add({0}, -1.0), std::invalid_argument);
  EXPECT_THROW(ok.add({0}, 1.0, -2.0), std::invalid_argument);
  EXPECT_THROW(ok.add({0}, 1.0, kNoRateCap, std::nan("")), std::invalid_argument);
}

// Random instances: the fast solver equals the naive one and is max-min
// optimal; splitting into components and memoisation change nothing.
TEST(FlowSolver, MatchesNaiveReferenceOnRandomInstances) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 30);
    const int F = 1 + static_cast<int>(rng() % 60);
    std::vector<double> cap(L);
    for (double& c : cap) c = 1.0 + static_cast<double>(rng() % 400);
    FlowSet flows;
    for (int f = 0; f < F; ++f) {
      std::vector<LinkId> path;
      const int len = 1 + static_cast<int>(rng() % 5);
      for (int j = 0; j < len; ++j) {
        const auto l = static_cast<LinkId>(rng() % L);
        if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
      }
      const double c = rng() % 4 == 0 ? 1.0 + static_cast<double>(rng() % 100) : kNoRateCap;
      flows.add(path, 1e6, c);
    }
    const std::vector<double> ref = naive_max_min(cap, flows);
    FlowSolver split;
    FlowSolver whole(FlowSolverOptions{.split_components = false, .memoise = false});
    const RateSolution a = split.solve_rates(cap, flows);
    const RateSolution b = whole.solve_rates(cap, flows);
    const RateSolution again = split.solve_rates(cap, flows);
    for (int f = 0; f < F; ++f) {
      EXPECT_NEAR(a.rate_gbps[f], ref[f], 1e-9 * std::max(1.0, ref[f])) << "trial " << trial << " flow " << f;
      EXPECT_NEAR(b.rate_gbps[f], ref[f], 1e-9 * std::max(1.0, ref[f])) << "trial " << trial << " flow " << f;
      EXPECT_EQ(again.rate_gbps[f], a.rate_gbps[f]);
      EXPECT_EQ(again.bottleneck_link[f], a.bottleneck_link[f]);
    }
    EXPECT_EQ(again.stats.components_solved, 0u);
    EXPECT_EQ(again.stats.cache_hits, a.stats.components);
    expect_max_min_optimal(cap, flows, a);
  }
}

// Two flows share a link; the short one finishes, the long one speeds up.
TEST(FlowSolver, CompletionRecomputesRatesWhenAFlowFinishes) {
  const std::vector<double> cap = {80.0};  // 10 GB/s
  FlowSet flows;
  flows.add({0}, 1e9);  // 1 GB
  flows.add({0}, 3e9);  // 3 GB
  const CompletionResult c = simulate_completion(cap, flows);
  // Both at 5 GB/s until 0.2 s (1 GB each), then 2 GB alone at 10 GB/s.
  EXPECT_NEAR(c.completion_s[0], 0.2, kTol);
  EXPECT_NEAR(c.completion_s[1], 0.4, kTol);
  EXPECT_EQ(c.stats.events, 2u);
  EXPECT_NEAR(c.link_bytes[0], 4e9, 1e-3);
  EXPECT_NEAR(c.link_mean_utilisation[0], 1.0, kTol);
  EXPECT_NEAR(c.link_peak_utilisation[0], 1.0, kTol);
}

// A later start slows an earlier flow down; a link that is never shared with
// the late flow is not re-solved.
TEST(FlowSolver, CompletionWithStaggeredStarts) {
  const std::vector<double> cap = {80.0, 80.0};
  FlowSet flows;
  flows.add({0}, 2e9);                  // alone 0..0.1 s (1 GB), shared after
  flows.add({0}, 1e9, kNoRateCap, 0.1);  // 1 GB at 5 GB/s: 0.1..0.3 s
  flows.add({1}, 1e9);                  // independent: 0.1 s
  const CompletionResult c = simulate_completion(cap, flows);
  EXPECT_NEAR(c.completion_s[1], 0.3, kTol);
  EXPECT_NEAR(c.completion_s[0], 0.3, kTol);
  EXPECT_NEAR(c.completion_s[2], 0.1, kTol);
  EXPECT_EQ(c.stats.components, 2u);
  EXPECT_NEAR(c.first_start_s, 0.0, kTol);
  EXPECT_NEAR(c.makespan_s, 0.3, kTol);
  EXPECT_EQ(c.bottleneck_link[0], 0);
}

// The bottleneck reported for completion is the limit under which the flow
// moved the most bytes: first its cap, later the link.
TEST(FlowSolver, CompletionBottleneckIsTheDominantLimit) {
  const std::vector<double> cap = {80.0};
  FlowSet flows;
  flows.add({0}, 0.5e9, 16.0);                // capped at 2 GB/s: 0.25 s
  flows.add({0}, 10e9, kNoRateCap, 0.0);      // link-limited: most bytes under link 0
  const CompletionResult c = simulate_completion(cap, flows);
  EXPECT_NEAR(c.completion_s[0], 0.25, kTol);
  EXPECT_EQ(c.bottleneck_link[0], kLimitedByRateCap);
  // 0.25 s at 8 GB/s = 2 GB, then 8 GB at 10 GB/s = 0.8 s.
  EXPECT_NEAR(c.completion_s[1], 1.05, kTol);
  EXPECT_EQ(c.bottleneck_link[1], 0);
}

// Identical DP groups on disjoint links (one per rail) are one canonical
// pattern: solved once, the others answered from the cache.
TEST(FlowSolver, IdenticalIndependentGroupsAreSolvedOnce) {
  constexpr int kRails = 8, kRanks = 16;
  std::vector<double> cap;
  FlowSet flows;
  for (int rail = 0; rail < kRails; ++rail) {
    const int base = static_cast<int>(cap.size());
    for (int i = 0; i < 2 * kRanks; ++i) cap.push_back(200.0);
    cap.push_back(400.0);  // a shared spine link per rail
    for (int r = 0; r < kRanks; ++r) {
      const int next = (r + 1) % kRanks;
      flows.add({base + 2 * r, base + 2 * kRanks, base + 2 * next + 1}, 64e6);
    }
  }
  FlowSolver solver;
  const RateSolution s = solver.solve_rates(cap, flows);
  EXPECT_EQ(s.stats.components, static_cast<std::size_t>(kRails));
  EXPECT_EQ(s.stats.components_solved, 1u);
  EXPECT_EQ(s.stats.cache_hits, static_cast<std::size_t>(kRails - 1));
  for (std::size_t f = 0; f < flows.size(); ++f) {
    EXPECT_NEAR(s.rate_gbps[f], 400.0 / kRanks, kTol);
    // Mapped back to this rail's own spine link.
    EXPECT_EQ(s.bottleneck_link[f], static_cast<LinkId>((f / kRanks) * (2 * kRanks + 1) + 2 * kRanks));
  }
  const CompletionResult c = solver.simulate_completion(cap, flows);
  EXPECT_EQ(c.stats.components_solved, 1u);
  for (double t : c.completion_s) EXPECT_NEAR(t, secs(64e6, 400.0 / kRanks), kTol);

  // A different capacity is a different pattern.
  cap[0] = 100.0;
  const RateSolution t = solver.solve_rates(cap, flows);
  EXPECT_EQ(t.stats.components_solved, 1u);  // rail 0 only; rails 1..7 still cached
  EXPECT_EQ(t.stats.cache_hits, static_cast<std::size_t>(kRails - 1));
}

// The same ring step repeated (one FlowSet solved again) is a cache hit with
// identical results; a time-shifted step hits the completion cache too.
TEST(FlowSolver, RepeatedRingStepIsMemoised) {
  std::vector<double> cap(64, 100.0);
  FlowSet step0, step1;
  for (int i = 0; i < 32; ++i) {
    step0.add({2 * i, 2 * ((i + 1) % 32) + 1}, 1e8);
    step1.add({2 * i, 2 * ((i + 1) % 32) + 1}, 1e8, kNoRateCap, 5.0);
  }
  FlowSolver solver;
  const CompletionResult a = solver.simulate_completion(cap, step0);
  const CompletionResult b = solver.simulate_completion(cap, step1);
  EXPECT_GT(a.stats.components_solved, 0u);
  EXPECT_EQ(b.stats.components_solved, 0u);
  for (std::size_t f = 0; f < step0.size(); ++f) EXPECT_NEAR(b.completion_s[f], a.completion_s[f] + 5.0, 1e-12);
  solver.clear_cache();
  EXPECT_EQ(solver.cache_entries(), 0u);
}

// Naive completion times: advance to the next start or finish and re-solve
// every active flow with naive_max_min.
std::vector<double> naive_completion(const std::vector<double>& cap, const FlowSet& flows) {
  const std::size_t F = flows.size();
  std::vector<double> remaining(F), done(F, kInf);
  for (std::size_t f = 0; f < F; ++f) remaining[f] = flows.bytes(f);
  double t = 0.0;
  for (;;) {
    FlowSet active;
    std::vector<std::size_t> idx;
    double next_start = kInf;
    for (std::size_t f = 0; f < F; ++f) {
      if (done[f] < kInf) continue;
      if (flows.start_s(f) <= t + 1e-15) {
        active.add(flows.path(f), remaining[f], flows.rate_cap_gbps(f));
        idx.push_back(f);
      } else {
        next_start = std::min(next_start, flows.start_s(f));
      }
    }
    if (idx.empty() && next_start == kInf) break;
    const std::vector<double> r = naive_max_min(cap, active);
    double dt = next_start - t;
    for (std::size_t i = 0; i < idx.size(); ++i) dt = std::min(dt, secs(remaining[idx[i]], r[i]));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      remaining[idx[i]] -= r[i] * 1e9 / 8 * dt;
      if (remaining[idx[i]] <= 1e-6 * flows.bytes(idx[i])) done[idx[i]] = t + dt;
    }
    t += dt;
  }
  return done;
}

// Random instance; `coarse` draws capacities, caps and sizes from a few round
// values so that many rates and finish times tie exactly.
FlowSet random_flows(std::mt19937_64& rng, int L, int F, bool coarse, std::vector<double>& cap) {
  cap.resize(L);
  for (double& c : cap) c = coarse ? 10.0 * static_cast<double>(1 + rng() % 4) : 10.0 + static_cast<double>(rng() % 90);
  FlowSet flows;
  for (int f = 0; f < F; ++f) {
    std::vector<LinkId> path;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < len; ++j) {
      const auto l = static_cast<LinkId>(rng() % L);
      if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
    }
    double c = kNoRateCap;
    if (rng() % 3 == 0) c = coarse ? 5.0 * static_cast<double>(1 + rng() % 4) : 5.0 + static_cast<double>(rng() % 50);
    const double start = rng() % 2 == 0 ? 0.0 : 1e-3 * static_cast<double>(rng() % (coarse ? 4 : 100));
    const double bytes = coarse ? 1e6 * static_cast<double>(1 + rng() % 4) : 1e6 * (1 + static_cast<double>(rng() % 100));
    flows.add(path, bytes, c, start);
  }
  return flows;
}

// Completion times against the naive event loop, with caps, staggered
// starts and (coarse) exact ties -- the partial re-solve at a completion
// (only flows at or above the finishing flows' rate) must change nothing.
TEST(FlowSolver, CompletionMatchesNaiveEventLoop) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 80; ++trial) {
    const bool coarse = trial % 2 == 1;
    const bool big = trial % 8 >= 6;
    const int L = big ? 30 : 2 + static_cast<int>(rng() % 12);
    const int F = big ? 120 : 1 + static_cast<int>(rng() % 25);
    std::vector<double> cap;
    const FlowSet flows = random_flows(rng, L, F, coarse, cap);
    const std::vector<double> done = naive_completion(cap, flows);
    const CompletionResult c = simulate_completion(cap, flows);
    for (int f = 0; f < F; ++f)
      EXPECT_NEAR(c.completion_s[f], done[f], 1e-6 * done[f]) << "trial " << trial << " flow " << f;
  }
}

// Hundreds of thousands of flows: 200k flows on 8 independent planes of a
// random two-level fabric solve without trouble (the speed is measured in
// bench/flow_solver_benchmark.cc).
TEST(FlowSolver, HandlesHundredsOfThousandsOfFlows) {
  constexpr int kPlanes = 8, kHostsPerPlane = 4096, kSpines = 64, kFlowsPerPlane = 25000;
  std::mt19937_64 rng(3);
  std::vector<double> cap;
  FlowSet flows;
  flows.reserve(kPlanes * kFlowsPerPlane, kPlanes * kFlowsPerPlane * 4);
  for (int p = 0; p < kPlanes; ++p) {
    const int base = static_cast<int>(cap.size());
    // host up/down (2 per host), then spine up/down per leaf (64 leaves x 64 spines x 2)
    for (int h = 0; h < kHostsPerPlane; ++h) cap.insert(cap.end(), {200.0, 200.0});
    const int spine_base = base + 2 * kHostsPerPlane;
    for (int i = 0; i < 64 * kSpines * 2; ++i) cap.push_back(400.0);
    for (int f = 0; f < kFlowsPerPlane; ++f) {
      const int src = static_cast<int>(rng() % kHostsPerPlane), dst = static_cast<int>(rng() % kHostsPerPlane);
      const int sl = src / 64, dl = dst / 64, s = static_cast<int>(rng() % kSpines);
      if (sl == dl) {
        flows.add({base + 2 * src, base + 2 * dst + 1}, 1e8);
      } else {
        flows.add({base + 2 * src, spine_base + 2 * (sl * kSpines + s), spine_base + 2 * (dl * kSpines + s) + 1,
                   base + 2 * dst + 1},
                  1e8);
      }
    }
  }
  FlowSolver solver;
  const RateSolution s = solver.solve_rates(cap, flows);
  ASSERT_EQ(s.rate_gbps.size(), flows.size());
  EXPECT_EQ(s.stats.components, static_cast<std::size_t>(kPlanes));
  for (double r : s.rate_gbps) {
    EXPECT_GT(r, 0.0);
    EXPECT_LE(r, 200.0 + 1e-9);
  }
  for (std::size_t l = 0; l < cap.size(); ++l) EXPECT_LE(s.link_utilisation[l], 1.0 + 1e-9);
}

}  // namespace
}  // namespace megascale::network
