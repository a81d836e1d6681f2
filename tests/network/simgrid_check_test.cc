// tests/network/simgrid_check_test.cc: network/flow_solver.h against SimGrid
// 3.32's own solver (network/simgrid_check.h) on random and fat-tree fabrics
// of up to 1,024 hosts: completion times must agree within 1% (issue 3).
//
// The fabrics are built by hand here as plain (capacity, path) lists, on
// purpose independent of network/topology.*. Each check forks one SimGrid
// child; the whole suite takes a few seconds.
#include "network/simgrid_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "network/flow_solver.h"

namespace megascale::network {
namespace {

constexpr double kAgreement = 0.01;  // issue 3: "the same completion times within 1%"

struct Fabric {
  std::vector<double> capacity_gbps;
  FlowSet flows;
};

// Runs both solvers, reports and checks the agreement.
double check_against_simgrid(const std::string& name, const Fabric& fab) {
  const auto t0 = std::chrono::steady_clock::now();
  const CompletionResult ours = simulate_completion(fab.capacity_gbps, fab.flows);
  const double ours_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SimGridResult sg = simgrid_completion_times(fab.capacity_gbps, fab.flows);
  EXPECT_EQ(sg.completion_s.size(), fab.flows.size());
  const double err = max_relative_error(ours.completion_s, sg.completion_s);
  std::printf("[ simgrid  ] %-28s flows %6zu  links %6zu  events %6zu  makespan %.6f s  max rel err %.2e  "
              "(wall: ours %.4f s, SimGrid run %.3f s)\n",
              name.c_str(), fab.flows.size(), fab.capacity_gbps.size(), ours.stats.events, ours.makespan_s, err,
              ours_s, sg.run_wall_s);
  ::testing::Test::RecordProperty(name + "_max_rel_err", std::to_string(err));
  EXPECT_LT(err, kAgreement) << name;
  return err;
}

// Random fabric: `hosts` hosts with an up and a down link each, `switches`
// switches joined by random directed links; a flow goes host -> its switch
// -> a random walk of 0..4 switch hops -> the destination's switch -> host.
Fabric random_fabric(int hosts, int switches, int flows, bool staggered, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fabric fab;
  auto add_link = [&](double gbps) {
    fab.capacity_gbps.push_back(gbps);
    return static_cast<LinkId>(fab.capacity_gbps.size() - 1);
  };
  const double nic_gbps[] = {100.0, 200.0, 400.0};
  std::vector<LinkId> up(hosts), down(hosts);
  std::vector<int> sw_of(hosts);
  for (int h = 0; h < hosts; ++h) {
    up[h] = add_link(nic_gbps[rng() % 3]);
    down[h] = add_link(nic_gbps[rng() % 3]);
    sw_of[h] = static_cast<int>(rng() % switches);
  }
  // Switch graph: a ring (connected) plus random chords; adjacency lists of (neighbour, link).
  std::vector<std::vector<std::pair<int, LinkId>>> adj(switches);
  auto connect = [&](int a, int b) {
    adj[a].push_back({b, add_link(100.0 * static_cast<double>(1 + rng() % 8))});
  };
  for (int s = 0; s < switches; ++s) connect(s, (s + 1) % switches);
  for (int e = 0; e < 6 * switches; ++e) {
    const int a = static_cast<int>(rng() % switches), b = static_cast<int>(rng() % switches);
    if (a != b) connect(a, b);
  }
  for (int f = 0; f < flows; ++f) {
    const int src = static_cast<int>(rng() % hosts);
    int dst = static_cast<int>(rng() % hosts);
    if (dst == src) dst = (dst + 1) % hosts;
    std::vector<LinkId> path = {up[src]};
    int at = sw_of[src];
    std::vector<bool> used(fab.capacity_gbps.size(), false);
    const int hops = static_cast<int>(rng() % 5);
    for (int h = 0; h < hops; ++h) {
      const auto& [next, link] = adj[at][rng() % adj[at].size()];
      if (used[link]) break;
      used[link] = true;
      path.push_back(link);
      at = next;
    }
    path.push_back(down[dst]);
    const double bytes = static_cast<double>(1'000'000 + rng() % 99'000'000);
    const double cap = rng() % 5 == 0 ? 10.0 + static_cast<double>(rng() % 90) : kNoRateCap;
    const double start = staggered ? 1e-4 * static_cast<double>(rng() % 200) : 0.0;
    fab.flows.add(path, bytes, cap, start);
  }
  return fab;
}

// Three-tier k-ary fat tree (k^3/4 hosts), every link `gbps` except
// aggregation->core links at `core_gbps` (oversubscription). Directed links:
// host<->edge, edge<->agg, agg<->core, up and down separately.
struct FatTree {
  int k = 0;
  std::vector<double> capacity_gbps;
  int hosts() const { return k * k * k / 4; }
  // Link ids, laid out in blocks.
  LinkId host_up(int h) const { return 2 * h; }
  LinkId host_down(int h) const { return 2 * h + 1; }
  LinkId edge_agg(int pod, int e, int a, bool up) const {
    return base_ea + 2 * ((pod * (k / 2) + e) * (k / 2) + a) + (up ? 0 : 1);
  }
  LinkId agg_core(int pod, int a, int c, bool up) const {
    return base_ac + 2 * ((pod * (k / 2) + a) * (k / 2) + c) + (up ? 0 : 1);
  }
  LinkId base_ea = 0, base_ac = 0;

  FatTree(int k_, double gbps, double core_gbps) : k(k_) {
    const int h = hosts(), half = k / 2;
    capacity_gbps.assign(2 * h, gbps);
    base_ea = static_cast<LinkId>(capacity_gbps.size());
    capacity_gbps.resize(capacity_gbps.size() + 2 * k * half * half, gbps);
    base_ac = static_cast<LinkId>(capacity_gbps.size());
    capacity_gbps.resize(capacity_gbps.size() + 2 * k * half * half, core_gbps);
  }
  // ECMP path from host s to host d: a random aggregation switch, and a random
  // core switch among those the aggregation switch reaches.
  std::vector<LinkId> path(int s, int d, std::mt19937_64& rng) const {
    const int half = k / 2, per_edge = half, per_pod = half * half;
    const int sp = s / per_pod, se = (s % per_pod) / per_edge;
    const int dp = d / per_pod, de = (d % per_pod) / per_edge;
    std::vector<LinkId> p = {host_up(s)};
    if (sp == dp && se == de) {
      // same edge switch
    } else if (sp == dp) {
      const int a = static_cast<int>(rng() % half);
      p.push_back(edge_agg(sp, se, a, true));
      p.push_back(edge_agg(dp, de, a, false));
    } else {
      const int a = static_cast<int>(rng() % half), c = static_cast<int>(rng() % half);
      p.push_back(edge_agg(sp, se, a, true));
      p.push_back(agg_core(sp, a, c, true));
      p.push_back(agg_core(dp, a, c, false));
      p.push_back(edge_agg(dp, de, a, false));
    }
    p.push_back(host_down(d));
    return p;
  }
};

// A 2-rule check that the SimGrid platform is set up apples-to-apples: plain
// max-min with caps and no bandwidth factor (LV08 would give 0.97x rates and
// RTT-weighted sharing), and caps honoured.
TEST(SimGridCheck, ClosedFormTinyCase) {
  const std::vector<double> cap = {8.0, 8.0};  // 1 GB/s each
  FlowSet flows;
  flows.add({0}, 1e9);                        // shares link 0: 0.5 GB/s -> 2 s
  flows.add({0, 1}, 1e9);                     // bottleneck link 0: 0.5 GB/s -> 2 s
  flows.add({1}, 1e9, 2.0);                   // capped at 0.25 GB/s -> 4 s
  flows.add({1}, 5e8, kNoRateCap, 3.0);       // starts at 3 s, 0.75 GB/s -> 3.667 s
  const SimGridResult sg = simgrid_completion_times(cap, flows);
  ASSERT_EQ(sg.completion_s.size(), 4u);
  EXPECT_NEAR(sg.completion_s[0], 2.0, 1e-6);
  EXPECT_NEAR(sg.completion_s[1], 2.0, 1e-6);
  EXPECT_NEAR(sg.completion_s[2], 4.0, 1e-6);
  EXPECT_NEAR(sg.completion_s[3], 3.0 + 0.5 / 0.75, 1e-6);
  EXPECT_EQ(sg.hosts, 5u);
  EXPECT_EQ(sg.links, 3u);  // two fabric links + one cap limiter
  const CompletionResult ours = simulate_completion(cap, flows);
  EXPECT_LT(max_relative_error(ours.completion_s, sg.completion_s), 1e-6);
}

TEST(SimGridCheck, RejectsWhatSimGridCannotRun) {
  FlowSet empty_path;
  empty_path.add({}, 1e6);
  EXPECT_THROW(simgrid_completion_times(std::vector<double>{1.0}, empty_path), std::invalid_argument);
  FlowSet zero_cap;
  zero_cap.add({0}, 1e6, 0.0);
  EXPECT_THROW(simgrid_completion_times(std::vector<double>{1.0}, zero_cap), std::invalid_argument);
  FlowSet ok;
  ok.add({0}, 1e6);
  EXPECT_THROW(simgrid_completion_times(std::vector<double>{0.0}, ok), std::invalid_argument);
}

TEST(SimGridCheck, RandomFabricAllStartTogether) {
  check_against_simgrid("random 1000h x 40sw", random_fabric(1000, 40, 1500, false, 1));
}

TEST(SimGridCheck, RandomFabricStaggeredStartsAndCaps) {
  check_against_simgrid("random 600h staggered", random_fabric(600, 24, 1200, true, 2));
  check_against_simgrid("random 200h dense", random_fabric(200, 8, 800, true, 3));
}

// k = 16 fat tree: 1,024 hosts, 320 switches, 2:1 oversubscribed core; a
// random permutation with ECMP and varied sizes (rates change at every
// completion).
TEST(SimGridCheck, FatTreePermutation) {
  const FatTree ft(16, 100.0, 50.0);
  std::mt19937_64 rng(5);
  std::vector<int> perm(ft.hosts());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Fabric fab{ft.capacity_gbps, {}};
  for (int h = 0; h < ft.hosts(); ++h) {
    const int d = perm[h] == h ? (h + 1) % ft.hosts() : perm[h];
    fab.flows.add(ft.path(h, d, rng), static_cast<double>(8'000'000 + rng() % 56'000'000));
  }
  check_against_simgrid("fat-tree k16 permutation", fab);
}

// One ring step of an all-gather over the 1,024 hosts of the fat tree, hosts
// in a shuffled ring order (neighbours mostly in other pods), equal sizes,
// two rings per host so that links are shared.
TEST(SimGridCheck, FatTreeRingStep) {
  const FatTree ft(16, 200.0, 200.0);
  std::mt19937_64 rng(6);
  Fabric fab{ft.capacity_gbps, {}};
  for (int ring = 0; ring < 2; ++ring) {
    std::vector<int> order(ft.hosts());
    std::iota(order.begin(), order.end(), 0);
    if (ring == 1) std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < ft.hosts(); ++i)
      fab.flows.add(ft.path(order[i], order[(i + 1) % ft.hosts()], rng), 64e6);
  }
  check_against_simgrid("fat-tree k16 ring step x2", fab);
}

// Fat tree k = 12 (432 hosts) with staggered incast-like traffic and NIC caps.
TEST(SimGridCheck, FatTreeStaggeredWithCaps) {
  const FatTree ft(12, 100.0, 100.0);
  std::mt19937_64 rng(8);
  Fabric fab{ft.capacity_gbps, {}};
  for (int f = 0; f < 1500; ++f) {
    const int s = static_cast<int>(rng() % ft.hosts());
    const int d = rng() % 4 == 0 ? static_cast<int>(rng() % 8) : static_cast<int>(rng() % ft.hosts());
    if (s == d) continue;
    const double cap = rng() % 3 == 0 ? 25.0 : kNoRateCap;
    fab.flows.add(ft.path(s, d, rng), static_cast<double>(1'000'000 + rng() % 20'000'000), cap,
                  1e-3 * static_cast<double>(rng() % 20));
  }
  check_against_simgrid("fat-tree k12 staggered+caps", fab);
}

TEST(SimGridCheck, MaxRelativeError) {
  const std::vector<double> a = {1.0, 2.0, 3.03}, b = {1.0, 2.02, 3.0};
  EXPECT_NEAR(max_relative_error(a, b), 0.01, 1e-12);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(max_relative_error(std::vector<double>{inf}, std::vector<double>{inf}), 0.0);
  EXPECT_EQ(max_relative_error(std::vector<double>{1.0}, std::vector<double>{inf}), inf);
  EXPECT_THROW(max_relative_error(std::vector<double>{1.0}, std::vector<double>{}), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::network
