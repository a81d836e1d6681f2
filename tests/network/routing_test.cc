// Tests of network/routing.h and network/ecmp_stats.h: hashes against their
// published check values, equal-cost path sets against Boost's BFS, routed paths
// valid and deterministic, QP splitting, down links, polarisation, ToR-local
// placement, and the ECMP balls-into-bins statistics of REFERENCE.md measured by
// Monte Carlo through the router.
#include "network/routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <vector>

#include "network/ecmp_stats.h"

namespace megascale::network {
namespace {

// Number of shortest NIC-to-NIC paths found from Boost's BFS distances alone
// (no routing logic): paths step from hop count h to h-1 through switches.
int64_t count_shortest_paths_by_bfs(const Topology& t, NodeId src, NodeId dst) {
  const std::vector<int> to_dst = t.fabric_hops_from(dst);
  std::unordered_map<NodeId, int64_t> memo;
  const Topology::Graph& g = t.graph();
  auto count = [&](auto&& self, NodeId v) -> int64_t {
    if (v == dst) return 1;
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    int64_t total = 0;
    for (auto [it, end] = boost::out_edges(static_cast<uint32_t>(v), g); it != end; ++it) {
      const auto w = static_cast<NodeId>(boost::target(*it, g));
      const bool transit = t.is_fabric_switch(w) || w == dst;
      if (transit && to_dst[static_cast<size_t>(w)] == to_dst[static_cast<size_t>(v)] - 1) {
        total += self(self, w);
      }
    }
    memo.emplace(v, total);
    return total;
  };
  return count(count, src);
}

// Checks that `path` is a connected, shortest, switch-only path src -> dst.
void expect_valid_path(const Topology& t, NodeId src, NodeId dst, const std::vector<LinkId>& path) {
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(t.link(path.front()).src, src);
  EXPECT_EQ(t.link(path.back()).dst, dst);
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    EXPECT_EQ(t.link(path[i]).dst, t.link(path[i + 1]).src);
    EXPECT_TRUE(t.is_fabric_switch(t.link(path[i]).dst));
  }
  const std::vector<int> hops = t.fabric_hops_from(dst);
  EXPECT_EQ(static_cast<int>(path.size()), hops[static_cast<size_t>(src)]);
}

// Uplink index (0-based among the switch's candidates) chosen at `at` on `path`.
int choice_at(const Router& r, const std::vector<LinkId>& path, size_t hop, NodeId dst) {
  std::vector<LinkId> candidates;
  r.candidate_links(r.topology().link(path[hop]).src, dst, &candidates);
  return static_cast<int>(std::find(candidates.begin(), candidates.end(), path[hop]) -
                          candidates.begin());
}

// ---------------------------------------------------------------------------
// Hashes

TEST(HashTest, PublishedCheckValues) {
  const char* digits = "123456789";
  EXPECT_EQ(crc32c(digits, 9), 0xE3069283u);  // CRC-32C check value (RFC 3720 B.4 family)
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(murmur3_32("", 0, 0), 0u);
  EXPECT_EQ(murmur3_32("", 0, 1), 0x514E28B7u);
  EXPECT_EQ(murmur3_32("hello", 5, 0), 0x248BFA47u);
  const char* fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(murmur3_32(fox, std::strlen(fox), 0), 0x2E4FF723u);
}

TEST(HashTest, TupleBytesAreNetworkOrder) {
  FiveTuple t;
  t.src_ip = 0x0A000001;
  t.dst_ip = 0x0A000002;
  t.src_port = 0xC001;
  uint8_t bytes[13];
  pack_tuple(t, bytes);
  const uint8_t expected[13] = {10, 0, 0, 1, 10, 0, 0, 2, 0xC0, 0x01, 0x12, 0xB7, 17};
  EXPECT_EQ(std::memcmp(bytes, expected, 13), 0);
}

TEST(HashTest, EcmpHashIsPinned) {
  // The same values on every platform and build: a change here changes every
  // routed path of every simulation.
  FiveTuple t;
  t.src_ip = Router::nic_ip(0);
  t.dst_ip = Router::nic_ip(8);
  t.src_port = 50000;
  EXPECT_EQ(ecmp_hash(EcmpHash::kCrc32, t, 0), 0x28F41BA3u);
  EXPECT_EQ(ecmp_hash(EcmpHash::kCrc32, t, 7), 0xEC444BCEu);
  EXPECT_EQ(ecmp_hash(EcmpHash::kMurmur3, t, 7), 0x442F98D4u);
  uint8_t bytes[13];
  pack_tuple(t, bytes);
  EXPECT_EQ(ecmp_hash(EcmpHash::kCrc32, t, 7), fmix32(crc32c(bytes, 13) ^ 7u));
  EXPECT_EQ(ecmp_hash(EcmpHash::kMurmur3, t, 7), murmur3_32(bytes, 13, 7));
  EXPECT_EQ(parse_ecmp_hash("crc32"), EcmpHash::kCrc32);
  EXPECT_EQ(parse_ecmp_hash("murmur3"), EcmpHash::kMurmur3);
  EXPECT_FALSE(parse_ecmp_hash("xor").has_value());
  EXPECT_STREQ(to_string(EcmpHash::kMurmur3), "murmur3");
}

TEST(HashTest, SpreadsSourcePortsEvenlyOverThirtyTwoUplinks) {
  // All 16,384 RoCE source ports between two fixed NICs: chi-square over the 32
  // uplinks of a ToR below the 99.9% quantile of chi2(31) = 61.1.
  const Topology t = Topology::build(megascale_clos(1024));
  for (EcmpHash hash : {EcmpHash::kCrc32, EcmpHash::kMurmur3}) {
    EcmpConfig config;
    config.hash = hash;
    const Router r(t, config);
    const NodeId src = t.nic_node(0);
    const NodeId dst = t.nic_node(64 * 8);  // rail 0 of server 64: same pod, other ToR
    std::vector<int> on(32, 0);
    std::vector<LinkId> path;
    const int flows = kRoceSourcePorts;
    for (int i = 0; i < flows; ++i) {
      path.clear();
      r.route(src, dst, r.tuple(src, dst, Router::qp_source_port(kRoceSourcePortMin, i)), &path);
      ++on[static_cast<size_t>(choice_at(r, path, 1, dst))];
    }
    double chi2 = 0;
    for (int n : on) chi2 += (n - flows / 32.0) * (n - flows / 32.0) / (flows / 32.0);
    std::printf("[ info ] %s: chi-square over 32 uplinks %.1f (df 31)\n", to_string(hash), chi2);
    EXPECT_LT(chi2, 61.1) << to_string(hash);
  }
}

// ---------------------------------------------------------------------------
// Equal-cost paths

TEST(RoutingTest, PathCountsByTierMatchBoostBfs) {
  const Topology t = Topology::build(megascale_clos(12288));
  const Router r(t);
  const NodeId a = t.nic_node(0);            // server 0 rail 0, ToR 0, pod 0
  const NodeId same_tor = t.nic_node(8);     // server 1 rail 0, ToR 0
  const NodeId same_pod = t.nic_node(512);   // server 64 rail 0, ToR 8, pod 0
  const NodeId other_pod = t.nic_node(2048); // server 256 rail 0, ToR 32, pod 1
  EXPECT_EQ(r.count_paths(a, same_tor), 1);
  EXPECT_EQ(r.count_paths(a, same_pod), 32);
  // 32 aggregation switches x (11*11 + 11*10 + 10*11) core up/down pairs.
  EXPECT_EQ(r.count_paths(a, other_pod), 32 * (11 * 11 + 11 * 10 + 10 * 11));
  EXPECT_EQ(r.count_paths(a, a), 1);
  for (NodeId dst : {same_tor, same_pod, other_pod, t.nic_node(12287), t.nic_node(1)}) {
    EXPECT_EQ(r.count_paths(a, dst), count_shortest_paths_by_bfs(t, a, dst));
  }
  std::vector<LinkId> candidates;
  r.candidate_links(t.tor_node(0), other_pod, &candidates);
  EXPECT_EQ(candidates.size(), 32u);  // the ToR's uplinks
  candidates.clear();
  r.candidate_links(a, other_pod, &candidates);
  EXPECT_EQ(candidates, std::vector<LinkId>{t.nic_tor_up(0)});
}

TEST(RoutingTest, EnumeratedPathsAreDistinctValidAndComplete) {
  const Topology t = Topology::build(megascale_clos(4096));
  const Router r(t);
  const NodeId src = t.nic_node(3);
  const NodeId dst = t.nic_node(2048 + 5);  // pod 1, rail 5
  PathSet paths;
  const size_t n = r.enumerate_paths(src, dst, 100000, &paths);
  EXPECT_EQ(static_cast<int64_t>(n), r.count_paths(src, dst));
  // 2 pods x 32 uplinks over ceil(64/64) = 1 core per plane: 32 x 32 x 32 paths.
  EXPECT_EQ(n, 32u * 32u * 32u);
  std::set<std::vector<LinkId>> distinct;
  for (size_t i = 0; i < paths.size(); i += 97) {
    const std::vector<LinkId> p(paths.path(i).begin(), paths.path(i).end());
    expect_valid_path(t, src, dst, p);
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    distinct.emplace(paths.path(i).begin(), paths.path(i).end());
  }
  EXPECT_EQ(distinct.size(), n);
  PathSet few;
  EXPECT_EQ(r.enumerate_paths(src, dst, 10, &few), 10u);
  EXPECT_EQ(few.size(), 10u);
}

TEST(RoutingTest, RoutedPathsAreShortestValidAndDeterministic) {
  const FabricSpec specs[] = {megascale_clos(12288), rail_2tier(4096), fat_tree(4096),
                              megascale_clos(3000)};
  for (const FabricSpec& spec : specs) {
    const Topology t = Topology::build(spec);
    const Router r(t);
    const Router again(t);
    uint32_t x = 12345;
    auto next = [&x] { return x = x * 1664525u + 1013904223u; };
    std::vector<LinkId> path, path2;
    for (int i = 0; i < 40; ++i) {
      const NodeId src = t.nic_node(static_cast<int>(next() % t.shape().nics));
      const NodeId dst = t.nic_node(static_cast<int>(next() % t.shape().nics));
      const auto port = static_cast<uint16_t>(kRoceSourcePortMin + next() % kRoceSourcePorts);
      path.clear();
      path2.clear();
      ASSERT_TRUE(r.route(src, dst, r.tuple(src, dst, port), &path));
      ASSERT_TRUE(again.route(src, dst, again.tuple(src, dst, port), &path2));
      EXPECT_EQ(path, path2);
      if (src == dst) {
        EXPECT_TRUE(path.empty());
      } else {
        expect_valid_path(t, src, dst, path);
      }
    }
  }
}

TEST(RoutingTest, EndpointsMustBeNics) {
  const Topology t = Topology::build(megascale_clos(64));
  const Router r(t);
  std::vector<LinkId> path;
  EXPECT_THROW(r.route(t.gpu_node(0), t.nic_node(1), FiveTuple{}, &path), std::invalid_argument);
  EcmpConfig bad;
  bad.qps_per_connection = 0;
  EXPECT_THROW(Router(t, bad), std::invalid_argument);
  bad.qps_per_connection = kMaxQpsPerConnection + 1;
  EXPECT_THROW(Router(t, bad), std::invalid_argument);
}

TEST(RoutingTest, GpuPathsUseNvlinkInsideAServerAndTheRailNicOutside) {
  const Topology t = Topology::build(megascale_clos(12288));
  const Router r(t);
  std::vector<LinkId> path;
  ASSERT_TRUE(r.route_gpus(0, 5, 50000, &path));
  EXPECT_EQ(path, (std::vector<LinkId>{t.nvlink_up(0), Topology::reverse(t.nvlink_up(5))}));
  EXPECT_DOUBLE_EQ(t.path_capacity_gbps(path), 2400.0);
  path.clear();
  ASSERT_TRUE(r.route_gpus(3, 8 + 3, 50000, &path));  // rail 3 of servers 0 and 1: one ToR
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path.front(), t.pcie_up(3));
  EXPECT_EQ(t.link(path[1]).kind, LinkKind::kNicTor);
  EXPECT_EQ(t.link(path[1]).dst, t.tor_node(3));
  EXPECT_EQ(path.back(), Topology::reverse(t.pcie_up(11)));
  EXPECT_DOUBLE_EQ(t.path_capacity_gbps(path), 200.0);
  // 0.05 (NIC->ToR) + 0.75 (ToR->NIC), PCIe and NVLink latencies 0 by default.
  EXPECT_NEAR(t.path_latency_us(path), 0.8, 1e-12);
  path.clear();
  ASSERT_TRUE(r.route_gpus(0, 2048 * 3 + 1, 50000, &path));  // pod 3, rail 1: 6 fabric hops
  EXPECT_EQ(path.size(), 8u);
  // 6 fabric links, 5 switches crossed.
  EXPECT_NEAR(t.path_latency_us(path), 6 * 0.05 + 5 * 0.7, 1e-12);
  path.clear();
  EXPECT_TRUE(r.route_gpus(7, 7, 50000, &path));
  EXPECT_TRUE(path.empty());
}

TEST(RoutingTest, ConnectionSplitsIntoQpSubflows) {
  const Topology t = Topology::build(megascale_clos(4096));
  EcmpConfig config;
  config.qps_per_connection = 4;
  const Router r(t, config);
  const NodeId src = t.nic_node(0);
  const NodeId dst = t.nic_node(2048);
  PathSet flows;
  ASSERT_TRUE(r.route_connection(src, dst, 65534, 1e6, &flows));
  ASSERT_EQ(flows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(flows.bytes[i], 0.25e6);
    std::vector<LinkId> expected;
    const uint16_t port = Router::qp_source_port(65534, static_cast<int>(i));
    r.route(src, dst, r.tuple(src, dst, port), &expected);
    EXPECT_EQ(std::vector<LinkId>(flows.path(i).begin(), flows.path(i).end()), expected);
  }
  // Consecutive ports, wrapping inside 49152..65535.
  EXPECT_EQ(Router::qp_source_port(65534, 0), 65534);
  EXPECT_EQ(Router::qp_source_port(65534, 1), 65535);
  EXPECT_EQ(Router::qp_source_port(65534, 2), 49152);
  EXPECT_EQ(Router::qp_source_port(100, 0), 49152 + (100 - 49152 + 16384 * 3) % 16384);
  const uint16_t base = r.connection_base_port(src, dst, 7);
  EXPECT_GE(base, kRoceSourcePortMin);
  EXPECT_EQ(base, r.connection_base_port(src, dst, 7));
  EXPECT_NE(base, r.connection_base_port(src, dst, 8));
  flows.clear();
  EXPECT_EQ(flows.size(), 0u);
  EXPECT_TRUE(flows.links.empty());
}

TEST(RoutingTest, DownLinksAreLeftOutOfTheEcmpGroup) {
  const Topology t = Topology::build(megascale_clos(4096));
  const Router r(t);
  const NodeId src = t.nic_node(0);
  const NodeId dst = t.nic_node(512);  // same pod, ToR 8
  std::vector<LinkId> uplinks;
  r.candidate_links(t.tor_node(0), dst, &uplinks);
  ASSERT_EQ(uplinks.size(), 32u);
  LinkDownMask down(static_cast<size_t>(t.num_links()), 0);
  down[static_cast<size_t>(uplinks[5])] = 1;
  std::vector<LinkId> candidates;
  r.candidate_links(t.tor_node(0), dst, &candidates, &down);
  EXPECT_EQ(candidates.size(), 31u);
  std::vector<LinkId> path;
  int moved = 0;
  for (int i = 0; i < 2000; ++i) {
    const FiveTuple tuple = r.tuple(src, dst, Router::qp_source_port(50000, i));
    path.clear();
    ASSERT_TRUE(r.route(src, dst, tuple, &path, &down));
    EXPECT_NE(path[1], uplinks[5]);
    std::vector<LinkId> healthy;
    r.route(src, dst, tuple, &healthy);
    moved += healthy != path ? 1 : 0;
  }
  EXPECT_GT(moved, 0);
  for (LinkId id : uplinks) down[static_cast<size_t>(id)] = 1;
  path.clear();
  EXPECT_FALSE(r.route(src, dst, r.tuple(src, dst, 50000), &path, &down));
  EXPECT_EQ(path.size(), 1u);  // got as far as the ToR
  const LinkDownMask none;
  path.clear();
  EXPECT_TRUE(r.route(src, dst, r.tuple(src, dst, 50000), &path, &none));
}

TEST(RoutingTest, PolarisationCorrelatesChoicesAcrossTiers) {
  // Flows from a ToR of pod 0 to a ToR of pod 1: the ToR picks one of 32
  // aggregation switches, which picks one of its 32 uplinks. With the same seed
  // at both tiers the two picks coincide, so at most 32 of the 1,024 (ToR,
  // aggregation) uplink pairs are used; with per-tier seeds, ~40% of them.
  const Topology t = Topology::build(megascale_clos(4096));
  const NodeId src = t.nic_node(0);
  const NodeId dst = t.nic_node(2048);
  std::map<bool, size_t> pairs_used, paths_used;
  for (bool polarized : {true, false}) {
    EcmpConfig config;
    config.polarized = polarized;
    const Router r(t, config);
    EXPECT_EQ(r.seed_at(t.tor_node(0)) == r.seed_at(t.agg_node(0)), polarized);
    std::set<std::pair<int, int>> pairs;
    std::set<std::vector<LinkId>> paths;
    std::vector<LinkId> path;
    for (int i = 0; i < 512; ++i) {
      path.clear();
      r.route(src, dst, r.tuple(src, dst, Router::qp_source_port(49152 + 977 * i, 0)), &path);
      ASSERT_EQ(path.size(), 6u);
      const int tor_choice = choice_at(r, path, 1, dst);
      const int agg_choice = choice_at(r, path, 2, dst);
      if (polarized) {
        EXPECT_EQ(tor_choice, agg_choice);
      }
      pairs.emplace(tor_choice, agg_choice);
      paths.insert(path);
    }
    pairs_used[polarized] = pairs.size();
    paths_used[polarized] = paths.size();
  }
  std::printf("[ info ] 512 flows pod 0 -> pod 1: (ToR, agg) uplink pairs used: polarised %zu, "
              "per-tier seeds %zu; distinct paths: %zu vs %zu\n",
              pairs_used[true], pairs_used[false], paths_used[true], paths_used[false]);
  EXPECT_LE(pairs_used[true], 32u);
  EXPECT_GT(pairs_used[false], 300u);  // 1024 * (1 - exp(-0.5)) ~ 403 expected
  EXPECT_LT(paths_used[true], paths_used[false]);
}

// Adaptive routing (InfiniBand AR): 32 flows that leave one ToR for another
// pod share its 32 uplinks one each, and the aggregation switches' uplinks too,
// where ECMP's hash puts several on some and none on others; every path stays
// a valid shortest path and the load counts each flow's bytes on each link.
TEST(RoutingTest, AdaptiveRoutingBalancesTheStepsFlowsOverTheUplinks) {
  const Topology t = Topology::build(megascale_clos(4096));
  EcmpConfig adaptive_config;
  adaptive_config.routing = RoutingMode::kAdaptive;
  const Router ecmp(t);
  const Router adaptive(t, adaptive_config);
  std::vector<LinkId> uplinks;
  ecmp.candidate_links(t.tor_node(0), t.nic_node(2048), &uplinks);
  ASSERT_EQ(uplinks.size(), 32u);
  auto most_on_one_uplink = [&](const Router& r, LinkLoad* load) {
    std::map<LinkId, int> flows_on;
    std::vector<LinkId> path;
    for (int i = 0; i < 32; ++i) {  // NICs 0, 8, 16, ...: rail 0 of 32 servers under ToR 0
      const NodeId src = t.nic_node(8 * i);
      const NodeId dst = t.nic_node(2048 + 8 * i);
      path.clear();
      EXPECT_TRUE(r.route(src, dst, r.tuple(src, dst, kRoceSourcePortMin), &path, nullptr, load, 1e6));
      expect_valid_path(t, src, dst, path);
      ++flows_on[path[1]];
    }
    int most = 0;
    for (const auto& [link, n] : flows_on) most = std::max(most, n);
    return most;
  };
  LinkLoad load(static_cast<size_t>(t.num_links()), 0.0);
  EXPECT_EQ(most_on_one_uplink(adaptive, &load), 1);
  EXPECT_GT(most_on_one_uplink(ecmp, nullptr), 1);  // 32 balls into 32 bins
  double on_uplinks = 0, most_bytes = 0;
  for (LinkId id : uplinks) on_uplinks += load[static_cast<size_t>(id)];
  for (double b : load) most_bytes = std::max(most_bytes, b);
  EXPECT_DOUBLE_EQ(on_uplinks, 32e6);
  EXPECT_DOUBLE_EQ(most_bytes, 1e6);  // no link of the fabric carries two
  LinkLoad wrong(3, 0.0);
  std::vector<LinkId> path;
  EXPECT_THROW(adaptive.route(t.nic_node(0), t.nic_node(8), adaptive.tuple(t.nic_node(0), t.nic_node(8), 50000),
                              &path, nullptr, &wrong, 1.0),
               std::invalid_argument);
  EXPECT_EQ(parse_routing_mode("adaptive"), RoutingMode::kAdaptive);
  EXPECT_EQ(parse_routing_mode("ecmp"), RoutingMode::kEcmp);
  EXPECT_FALSE(parse_routing_mode("spray").has_value());
  EXPECT_STREQ(to_string(RoutingMode::kAdaptive), "adaptive");
}

// Adaptive routing leaves down links out as ECMP does: with one of the ToR's 32
// uplinks down, the 32 flows still all arrive, none on the down link, and the
// other 31 uplinks carry them (one of them two); with every uplink down the
// route fails at the ToR, as ECMP's does.
TEST(RoutingTest, AdaptiveRoutingLeavesDownLinksOut) {
  const Topology t = Topology::build(megascale_clos(4096));
  EcmpConfig config;
  config.routing = RoutingMode::kAdaptive;
  const Router r(t, config);
  std::vector<LinkId> uplinks;
  r.candidate_links(t.tor_node(0), t.nic_node(2048), &uplinks);
  ASSERT_EQ(uplinks.size(), 32u);
  LinkDownMask down(static_cast<size_t>(t.num_links()), 0);
  down[static_cast<size_t>(uplinks[7])] = 1;
  LinkLoad load(static_cast<size_t>(t.num_links()), 0.0);
  std::map<LinkId, int> flows_on;
  std::vector<LinkId> path;
  for (int i = 0; i < 32; ++i) {
    const NodeId src = t.nic_node(8 * i);
    const NodeId dst = t.nic_node(2048 + 8 * i);
    path.clear();
    ASSERT_TRUE(r.route(src, dst, r.tuple(src, dst, kRoceSourcePortMin), &path, &down, &load, 1.0));
    expect_valid_path(t, src, dst, path);
    EXPECT_NE(path[1], uplinks[7]);
    ++flows_on[path[1]];
  }
  EXPECT_EQ(flows_on.size(), 31u);
  EXPECT_EQ(load[static_cast<size_t>(uplinks[7])], 0.0);
  for (LinkId id : uplinks) down[static_cast<size_t>(id)] = 1;
  path.clear();
  EXPECT_FALSE(r.route(t.nic_node(0), t.nic_node(2048), r.tuple(t.nic_node(0), t.nic_node(2048), 50000), &path,
                       &down, &load, 1.0));
  EXPECT_EQ(path.size(), 1u);  // got as far as the ToR
}

// ---------------------------------------------------------------------------
// ECMP statistics (REFERENCE.md "Congestion control and link faults" -> ECMP)

TEST(EcmpTheoryTest, ExpectedMaxMatchesEnumeration) {
  EXPECT_DOUBLE_EQ(expected_max_bin_load(1, 5), 1.0);
  EXPECT_DOUBLE_EQ(expected_max_bin_load(7, 1), 7.0);
  EXPECT_NEAR(expected_max_bin_load(2, 2), 1.5, 1e-12);
  EXPECT_NEAR(expected_max_bin_load(3, 3), 51.0 / 27.0, 1e-12);
  // Exhaustive enumeration of every assignment for small cases.
  for (int bins = 2; bins <= 4; ++bins) {
    for (int balls = 1; balls <= 6; ++balls) {
      int64_t outcomes = 1;
      for (int i = 0; i < balls; ++i) outcomes *= bins;
      double sum = 0;
      for (int64_t code = 0; code < outcomes; ++code) {
        std::vector<int> count(static_cast<size_t>(bins), 0);
        int64_t c = code;
        for (int i = 0; i < balls; ++i, c /= bins) ++count[static_cast<size_t>(c % bins)];
        sum += *std::max_element(count.begin(), count.end());
      }
      EXPECT_NEAR(expected_max_bin_load(balls, bins), sum / outcomes, 1e-12)
          << balls << " balls, " << bins << " bins";
    }
  }
  EXPECT_NEAR(expected_paths_used_fraction(8, 8), 1 - std::pow(7.0 / 8, 8), 1e-15);
}

TEST(EcmpTheoryTest, ReproducesReferenceFigures) {
  // REFERENCE.md: k = n = 8: ~0.39; 4 QPs per flow: ~0.57; 16: ~0.73.
  EXPECT_NEAR(expected_collective_efficiency(8, 8, 1), 0.39, 0.01);
  EXPECT_NEAR(expected_collective_efficiency(8, 8, 4), 0.57, 0.01);
  EXPECT_NEAR(expected_collective_efficiency(8, 8, 16), 0.73, 0.01);
}

TEST(EcmpStatisticsTest, MonteCarloThroughTheRouterMatchesBallsIntoBins) {
  // 8 flows between two ToRs with 8 equal uplinks, 20,000 trials. Tolerances:
  // at this trial count the standard error of the efficiency and of the fraction
  // of paths used is about 0.0008 each, so 0.01 (efficiency) and 0.005 (paths
  // used) are > 6 standard errors: no failure by chance, little room for a
  // biased hash. The REFERENCE.md figures are rounded to 0.01, hence 0.015.
  struct Case {
    int qps;
    double reference;  // REFERENCE.md, rounded
  };
  for (const Case c : {Case{1, 0.39}, Case{4, 0.57}, Case{16, 0.73}}) {
    for (EcmpHash hash : {EcmpHash::kCrc32, EcmpHash::kMurmur3}) {
      const EcmpStatistics s = ecmp_statistics(8, 8, c.qps, 20000, 2024, hash);
      std::printf("[ info ] ECMP n=8 k=8 Q=%-2d %-7s: paths used %.4f (theory %.4f), "
                  "efficiency %.4f (theory %.4f, REFERENCE ~%.2f)\n",
                  c.qps, to_string(hash), s.mean_paths_used_fraction,
                  s.theory_paths_used_fraction, s.collective_efficiency,
                  s.theory_collective_efficiency, c.reference);
      EXPECT_NEAR(s.collective_efficiency, s.theory_collective_efficiency, 0.01);
      EXPECT_NEAR(s.collective_efficiency, c.reference, 0.015);
      EXPECT_NEAR(s.mean_paths_used_fraction, s.theory_paths_used_fraction, 0.005);
      EXPECT_EQ(s.trials, 20000);
    }
  }
  // Deterministic for a seed.
  const EcmpStatistics a = ecmp_statistics(8, 8, 4, 500, 7);
  const EcmpStatistics b = ecmp_statistics(8, 8, 4, 500, 7);
  EXPECT_EQ(a.collective_efficiency, b.collective_efficiency);
  EXPECT_EQ(a.mean_paths_used_fraction, b.mean_paths_used_fraction);
}

TEST(EcmpStatisticsTest, MegaScaleToRUplinks) {
  // On the MegaScale fabric itself: 32 flows from rail 0 of servers 0..31 (ToR 0)
  // to rail 0 of servers 64..95 (ToR 8, same pod) over ToR 0's 32 uplinks.
  const Topology t = Topology::build(megascale_clos(2048));
  const Router r(t);
  const int flows = 32;
  const int trials = 3000;
  uint64_t x = 99;
  double sum_max = 0;
  std::vector<LinkId> path;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<int> on(32, 0);
    for (int f = 0; f < flows; ++f) {
      const NodeId src = t.nic_node(8 * f);
      const NodeId dst = t.nic_node(8 * (64 + f));
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const auto port = static_cast<uint16_t>(kRoceSourcePortMin + (x >> 33) % kRoceSourcePorts);
      path.clear();
      r.route(src, dst, r.tuple(src, dst, port), &path);
      ++on[static_cast<size_t>(choice_at(r, path, 1, dst))];
    }
    sum_max += *std::max_element(on.begin(), on.end());
  }
  const double efficiency = 1.0 / (sum_max / trials);
  const double theory = expected_collective_efficiency(32, 32, 1);
  std::printf("[ info ] MegaScale ToR, 32 flows on 32 uplinks: efficiency %.4f (theory %.4f)\n",
              efficiency, theory);
  EXPECT_NEAR(efficiency, theory, 0.01);
}

TEST(EcmpStatisticsTest, RejectsBadArguments) {
  EXPECT_THROW(ecmp_statistics(0, 8, 1, 10, 1), std::invalid_argument);
  EXPECT_THROW(ecmp_statistics(257, 8, 1, 10, 1), std::invalid_argument);
  EXPECT_THROW(ecmp_statistics(8, 0, 1, 10, 1), std::invalid_argument);
  EXPECT_THROW(ecmp_statistics(8, 8, 0, 10, 1), std::invalid_argument);
  EXPECT_THROW(ecmp_statistics(8, 8, 1, 0, 1), std::invalid_argument);
  const EcmpStatistics one_path = ecmp_statistics(1, 3, 2, 10, 1);
  EXPECT_DOUBLE_EQ(one_path.collective_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(one_path.mean_paths_used_fraction, 1.0);
  // One path: the theory is exact at any size (it was NaN above
  // kMaxExactBalls QPs, and `net ecmp` printed "nan"; found by the fuzz test).
  const EcmpStatistics one_path_many = ecmp_statistics(1, 1024, 8, 2, 1);
  EXPECT_DOUBLE_EQ(one_path_many.theory_collective_efficiency, 1.0);
  // Above the exact limit on several paths: no theory, said as NaN.
  EXPECT_TRUE(std::isnan(ecmp_statistics(16, 64, 64, 2, 1).theory_collective_efficiency));
}

// ---------------------------------------------------------------------------
// ToR-local placement

std::vector<int> all_servers(const Topology& t) {
  std::vector<int> servers(static_cast<size_t>(t.shape().servers));
  std::iota(servers.begin(), servers.end(), 0);
  return servers;
}

TEST(PlacementTest, OneRankPerServerStaysUnderOneToR) {
  const Topology t = Topology::build(megascale_clos(12288));
  // A 64-rank DP group of local GPU 2 fits one ToR set: all its NICs on one ToR.
  const std::vector<int> gpus = place_ranks(t, 64, 1, all_servers(t), 2);
  ASSERT_EQ(gpus.size(), 64u);
  const PlacementSpread spread = placement_spread(t, gpus);
  EXPECT_EQ(spread.tors, 1);
  EXPECT_EQ(spread.groups, 1);
  EXPECT_EQ(spread.pods, 1);
  for (int g : gpus) EXPECT_EQ(g % 8, 2);
  for (size_t i = 1; i < gpus.size(); ++i) EXPECT_TRUE(t.same_tor(gpus[0], gpus[i]));
}

TEST(PlacementTest, BestFitLeavesLargeToRSetsWhole) {
  const Topology t = Topology::build(megascale_clos(12288));
  std::vector<int> free_servers;
  for (int s : all_servers(t)) {
    if (s >= 10) free_servers.push_back(s);  // group 0 has 54 free servers
  }
  // 50 ranks fit group 0's 54: the smallest set that fits.
  std::vector<int> gpus = place_ranks(t, 50, 1, free_servers);
  EXPECT_EQ(placement_spread(t, gpus).groups, 1);
  EXPECT_EQ(t.group_of_server(t.server_of_gpu(gpus[0])), 0);
  // 64 ranks do not: group 1, whole.
  gpus = place_ranks(t, 64, 1, free_servers);
  EXPECT_EQ(placement_spread(t, gpus).groups, 1);
  EXPECT_EQ(t.group_of_server(t.server_of_gpu(gpus[0])), 1);
}

TEST(PlacementTest, LargeGroupsSpanFewestToRSetsAndOnePod) {
  const Topology t = Topology::build(megascale_clos(12288));
  // 192 ranks (the 175B run's DP group): 3 ToR sets of one pod.
  std::vector<int> gpus = place_ranks(t, 192, 1, all_servers(t));
  PlacementSpread spread = placement_spread(t, gpus);
  EXPECT_EQ(spread.groups, 3);
  EXPECT_EQ(spread.pods, 1);
  EXPECT_EQ(spread.tors, 3);
  // Servers of one ToR set are consecutive in rank order.
  for (size_t i = 1; i < gpus.size(); ++i) {
    const bool same = t.same_group(gpus[i - 1], gpus[i]);
    EXPECT_TRUE(same || i % 64 == 0) << i;
  }
  // More than a pod (256 servers): the fewest pods.
  gpus = place_ranks(t, 300, 1, all_servers(t));
  spread = placement_spread(t, gpus);
  EXPECT_EQ(spread.pods, 2);
  EXPECT_EQ(spread.groups, 5);
  // A TP-8 group: one whole server.
  gpus = place_ranks(t, 8, 8, all_servers(t));
  EXPECT_EQ(gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PlacementTest, RejectsImpossibleRequests) {
  const Topology t = Topology::build(megascale_clos(64));
  const std::vector<int> servers = all_servers(t);  // 8 servers
  EXPECT_THROW(place_ranks(t, 9, 1, servers), std::invalid_argument);
  EXPECT_THROW(place_ranks(t, 0, 1, servers), std::invalid_argument);
  EXPECT_THROW(place_ranks(t, 4, 2, servers, 7), std::invalid_argument);
  EXPECT_THROW(place_ranks(t, 4, 1, std::vector<int>{0, 99}), std::invalid_argument);
  EXPECT_EQ(place_ranks(t, 16, 2, servers, 6).back(), 7 * 8 + 7);
}

}  // namespace
}  // namespace megascale::network
