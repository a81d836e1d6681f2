// Tests of network/topology.h: the MegaScale sizing of REFERENCE.md, the other
// presets, partial pods, every error path (parameter + reason), id invariants the
// flow solver relies on, the O(1) distances against Boost's BFS, and the build
// time and memory of the 12,288-GPU fabric.
#include "network/topology.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace megascale::network {
namespace {

void expect_fabric_error(const FabricSpec& spec, const std::string& parameter,
                         const std::string& reason_part) {
  try {
    Topology::build(spec);
    ADD_FAILURE() << "no FabricError; expected " << parameter << ": ..." << reason_part;
  } catch (const FabricError& e) {
    EXPECT_EQ(e.parameter(), parameter) << e.what();
    EXPECT_NE(e.reason().find(reason_part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()), parameter + ": " + e.reason());
  }
}

// Ports a switch uses: a 200G lane of a split port is half a port.
struct PortUse {
  double down = 0;
  double up = 0;
};

std::map<NodeId, PortUse> switch_ports(const Topology& t) {
  std::map<NodeId, PortUse> use;
  const double port_gbps = t.spec().switch_port_gbps;
  const double lane = 1.0 / t.shape().lanes_per_tor_port;
  for (const Link& l : t.links()) {
    if (!t.is_fabric_switch(l.src)) continue;
    const double ports = l.kind == LinkKind::kNicTor ? lane : 1.0;
    (l.up ? use[l.src].up : use[l.src].down) += ports;
    if (l.kind != LinkKind::kNicTor) {
      EXPECT_DOUBLE_EQ(l.capacity_gbps, port_gbps);
    }
  }
  return use;
}

// ---------------------------------------------------------------------------
// Sizing

TEST(FabricPlanTest, MegaScale12288MatchesReference) {
  // REFERENCE.md "MegaScale fabric": ToR 64 x 200G down / 32 x 400G up, 64 servers
  // per set of 8 ToRs, 32 ToRs + 32 aggregation switches per 2,048-GPU pod, 6 pods
  // (192 ToR, 192 aggregation, 96 core) for 12,288 GPUs.
  const FabricShape f = plan_fabric(megascale_clos(12288));
  EXPECT_EQ(f.servers, 1536);
  EXPECT_EQ(f.nics, 12288);
  EXPECT_EQ(f.lanes_per_tor_port, 2);
  EXPECT_EQ(f.tor_down_ports, 32);
  EXPECT_EQ(f.tor_up_ports, 32);
  EXPECT_EQ(f.nic_lanes_per_tor, 64);
  EXPECT_EQ(f.servers_per_group, 64);
  EXPECT_EQ(f.tors_per_group, 8);
  EXPECT_EQ(f.groups, 24);
  EXPECT_EQ(f.tors, 192);
  EXPECT_EQ(f.tors_per_pod, 32);
  EXPECT_EQ(f.pods, 6);
  EXPECT_EQ(f.aggs_per_pod, 32);
  EXPECT_EQ(f.aggs, 192);
  EXPECT_EQ(f.agg_down_ports, 32);
  EXPECT_EQ(f.agg_up_ports, 32);
  EXPECT_EQ(f.cores_per_plane, 3);
  EXPECT_EQ(f.cores, 96);
  EXPECT_EQ(f.max_gpus, 131072);  // 64 pods of 2,048
  EXPECT_EQ(f.nodes, 12288 + 1536 + 12288 + 192 + 192 + 96);
  EXPECT_EQ(f.links, 2 * (2 * 12288 + 12288 + 192 * 32 + 192 * 32));
}

TEST(TopologyTest, MegaScale12288PortsAndCapacities) {
  const Topology t = Topology::build(megascale_clos(12288));
  EXPECT_EQ(t.num_nodes(), 26592);
  EXPECT_EQ(t.num_links(), 98304);
  const std::map<NodeId, PortUse> use = switch_ports(t);
  ASSERT_EQ(use.size(), 192u + 192u + 96u);
  for (const auto& [node, ports] : use) {
    switch (t.kind(node)) {
      case NodeKind::kTor:  // 64 x 200G lanes on 32 ports + 32 x 400G up
        EXPECT_DOUBLE_EQ(ports.down, 32.0);
        EXPECT_DOUBLE_EQ(ports.up, 32.0);
        break;
      case NodeKind::kAgg:
        EXPECT_DOUBLE_EQ(ports.down, 32.0);
        EXPECT_DOUBLE_EQ(ports.up, 32.0);
        break;
      case NodeKind::kCore:  // every core port used
        EXPECT_DOUBLE_EQ(ports.down, 64.0);
        EXPECT_DOUBLE_EQ(ports.up, 0.0);
        break;
      default: ADD_FAILURE() << "not a switch";
    }
  }
  // Capacities by kind.
  for (const Link& l : t.links()) {
    switch (l.kind) {
      case LinkKind::kNvlink: EXPECT_DOUBLE_EQ(l.capacity_gbps, 2400.0); break;
      case LinkKind::kPcie: EXPECT_DOUBLE_EQ(l.capacity_gbps, 252.0); break;
      case LinkKind::kNicTor: EXPECT_DOUBLE_EQ(l.capacity_gbps, 200.0); break;
      case LinkKind::kTorAgg:
      case LinkKind::kAggCore: EXPECT_DOUBLE_EQ(l.capacity_gbps, 400.0); break;
    }
  }
}

TEST(TopologyTest, EveryCoreMeetsEveryPodEvenly) {
  // 6 pods x 32 uplinks over 3 cores per plane: each core meets each pod's
  // aggregation switch of its plane 10 or 11 times.
  const Topology t = Topology::build(megascale_clos(12288));
  std::map<std::pair<int, int>, int> links;  // (core, pod) -> count
  for (const Link& l : t.links()) {
    if (l.kind != LinkKind::kAggCore || !l.up) continue;
    const int agg = t.index_in_kind(l.src);
    const int core = t.index_in_kind(l.dst);
    EXPECT_EQ(core / 3, agg % 32) << "aggregation j connects to plane j only";
    ++links[{core, t.pod_of_agg(agg)}];
  }
  EXPECT_EQ(links.size(), 96u * 6u);
  for (const auto& [key, count] : links) {
    EXPECT_TRUE(count == 10 || count == 11) << "core " << key.first << " pod " << key.second;
  }
}

TEST(TopologyTest, LinkIdsDensePairedAndIndexable) {
  const Topology t = Topology::build(megascale_clos(1024));
  ASSERT_EQ(t.link_capacity_gbps().size(), static_cast<size_t>(t.num_links()));
  for (LinkId id = 0; id < t.num_links(); ++id) {
    const Link& l = t.link(id);
    const Link& r = t.link(Topology::reverse(id));
    EXPECT_EQ(l.src, r.dst);
    EXPECT_EQ(l.dst, r.src);
    EXPECT_EQ(l.kind, r.kind);
    EXPECT_EQ(l.up, id % 2 == 0);
    EXPECT_DOUBLE_EQ(t.link_capacity_gbps()[static_cast<size_t>(id)], l.capacity_gbps);
    EXPECT_LT(l.src, t.num_nodes());
    EXPECT_LT(l.dst, t.num_nodes());
  }
  EXPECT_EQ(t.link(t.nvlink_up(9)).src, t.gpu_node(9));
  EXPECT_EQ(t.link(t.nvlink_up(9)).dst, t.nvswitch_node(1));
  EXPECT_EQ(t.link(t.pcie_up(9)).dst, t.nic_node_of_gpu(9));
  EXPECT_EQ(t.link(t.nic_tor_up(9)).dst, t.tor_node(t.tor_of_nic(9)));
}

TEST(TopologyTest, GraphOutEdgesAreInLinkIdOrder) {
  // Router relies on it: the CSR construction keeps insertion (= id) order.
  const Topology t = Topology::build(megascale_clos(4096));
  const Topology::Graph& g = t.graph();
  EXPECT_EQ(boost::num_vertices(g), static_cast<size_t>(t.num_nodes()));
  EXPECT_EQ(boost::num_edges(g), static_cast<size_t>(t.num_links()));
  for (uint32_t v = 0; v < boost::num_vertices(g); ++v) {
    LinkId previous = -1;
    for (auto [it, end] = boost::out_edges(v, g); it != end; ++it) {
      const LinkId id = g[*it];
      EXPECT_GT(id, previous);
      EXPECT_EQ(t.link(id).src, static_cast<NodeId>(v));
      EXPECT_EQ(t.link(id).dst, static_cast<NodeId>(boost::target(*it, g)));
      previous = id;
    }
  }
}

TEST(TopologyTest, RailOptimisedMapping) {
  const Topology t = Topology::build(megascale_clos(12288));
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(t.rail_of_gpu(g), g);
    EXPECT_EQ(t.nic_of_gpu(g), g);
    EXPECT_EQ(t.tor_of_nic(t.nic_of_gpu(g)), g);
  }
  // Server 63 is the last of group 0; server 64 starts group 1 (ToRs 8..15).
  EXPECT_EQ(t.tor_of_nic(t.nic_of_gpu(63 * 8 + 3)), 3);
  EXPECT_EQ(t.tor_of_nic(t.nic_of_gpu(64 * 8 + 3)), 11);
  EXPECT_TRUE(t.same_tor(0, 63 * 8));       // rail 0 of servers 0 and 63
  EXPECT_FALSE(t.same_tor(0, 1));           // rails 0 and 1 of one server
  EXPECT_FALSE(t.same_tor(0, 64 * 8));      // rail 0, next group
  EXPECT_TRUE(t.same_group(0, 63 * 8 + 5));
  EXPECT_FALSE(t.same_group(0, 64 * 8));
  EXPECT_EQ(t.pod_of_tor(31), 0);
  EXPECT_EQ(t.pod_of_tor(32), 1);
  EXPECT_EQ(t.pod_of_tor(191), 5);
  EXPECT_EQ(t.kind(t.tor_node(5)), NodeKind::kTor);
  EXPECT_EQ(t.index_in_kind(t.core_node(95)), 95);
  EXPECT_EQ(t.switch_tier(t.core_node(0)), 2);
  EXPECT_EQ(t.switch_tier(t.nic_node(0)), -1);
}

TEST(TopologyTest, NotRailOptimisedPutsAServerOnOneToR) {
  const Topology t = Topology::build(fat_tree(1024));
  EXPECT_EQ(t.shape().nic_lanes_per_tor, 32);  // no split: one NIC per 400G port
  EXPECT_EQ(t.shape().servers_per_group, 4);
  for (int nic = 0; nic < 32; ++nic) EXPECT_EQ(t.tor_of_nic(nic), 0);
  EXPECT_EQ(t.tor_of_nic(32), 1);
  EXPECT_TRUE(t.same_tor(0, 7));
  EXPECT_TRUE(t.same_tor(0, 31));
  EXPECT_FALSE(t.same_tor(0, 32));
}

TEST(TopologyTest, SeveralGpusShareANic) {
  FabricSpec s = megascale_clos(64);
  s.nics_per_server = 4;
  const Topology t = Topology::build(s);
  EXPECT_EQ(t.rail_of_gpu(0), 0);
  EXPECT_EQ(t.rail_of_gpu(1), 0);
  EXPECT_EQ(t.rail_of_gpu(6), 3);
  EXPECT_EQ(t.nic_of_gpu(8 + 7), 4 + 3);
  EXPECT_EQ(t.shape().tors_per_group, 4);
  EXPECT_EQ(t.link(t.pcie_up(7)).dst, t.nic_node(3));
}

TEST(FabricPlanTest, PartialGroupsAndPods) {
  // 3,000 GPUs = 375 servers: 5 full ToR sets and one of 55 servers; 48 ToRs in
  // 2 pods (32 + 16); one core per plane.
  const Topology t = Topology::build(megascale_clos(3000));
  const FabricShape& f = t.shape();
  EXPECT_EQ(f.groups, 6);
  EXPECT_EQ(f.tors, 48);
  EXPECT_EQ(f.pods, 2);
  EXPECT_EQ(f.aggs, 64);
  EXPECT_EQ(f.cores_per_plane, 1);
  EXPECT_EQ(f.cores, 32);
  const std::map<NodeId, PortUse> use = switch_ports(t);
  for (const auto& [node, ports] : use) {
    EXPECT_LE(ports.down + ports.up, 64.0) << to_string(t.kind(node));
  }
  EXPECT_DOUBLE_EQ(use.at(t.tor_node(47)).down, 55 / 2.0);  // last ToR set: 55 NICs
  EXPECT_DOUBLE_EQ(use.at(t.tor_node(0)).down, 32.0);
  EXPECT_DOUBLE_EQ(use.at(t.agg_node(63)).down, 16.0);  // pod 1 has 16 ToRs
}

TEST(FabricPlanTest, Rail2TierHoldsSixtyFourToRs) {
  const FabricShape f = plan_fabric(rail_2tier(4096));
  EXPECT_EQ(f.tors, 64);
  EXPECT_EQ(f.aggs, 32);  // spines
  EXPECT_EQ(f.cores, 0);
  EXPECT_EQ(f.max_gpus, 4096);
  const Topology t = Topology::build(rail_2tier(4096));
  for (const auto& [node, ports] : switch_ports(t)) {
    EXPECT_DOUBLE_EQ(ports.down + ports.up, 64.0) << to_string(t.kind(node));
  }
  expect_fabric_error(rail_2tier(4104), "gpus",
                      "4104 GPUs need 72 ToRs, more than a 2-tier fabric of radix-64 switches "
                      "connects (64 ToRs, at most 4096 GPUs); use tiers = 3");
}

TEST(FabricPlanTest, FatTreeIsKAry) {
  // k = 4: k^3/4 = 16 hosts, k^2/2 = 8 edge and 8 aggregation switches, (k/2)^2 = 4 cores.
  FabricSpec s = fat_tree(16);
  s.switch_radix = 4;
  s.gpus_per_server = 1;
  s.nics_per_server = 1;
  const Topology t = Topology::build(s);
  EXPECT_EQ(t.shape().tors, 8);
  EXPECT_EQ(t.shape().aggs, 8);
  EXPECT_EQ(t.shape().cores, 4);
  EXPECT_EQ(t.shape().pods, 4);
  std::map<std::pair<int, int>, int> core_pod;
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kAggCore && l.up) {
      ++core_pod[{t.index_in_kind(l.dst), t.pod_of_agg(t.index_in_kind(l.src))}];
    }
  }
  EXPECT_EQ(core_pod.size(), 16u);
  for (const auto& [key, count] : core_pod) EXPECT_EQ(count, 1);  // one link per pod
  // k = 64: 65,536 hosts, 1,024 cores.
  const FabricShape big = plan_fabric(fat_tree(65536));
  EXPECT_EQ(big.pods, 64);
  EXPECT_EQ(big.cores, 1024);
  EXPECT_EQ(big.max_gpus, 65536);
  expect_fabric_error(fat_tree(65544), "gpus", "more than radix-64 core switches connect");
}

TEST(FabricPlanTest, OversubscribedToR) {
  FabricSpec s = megascale_clos(12288);
  s.oversubscription = {3.0, 1.0};
  const FabricShape f = plan_fabric(s);
  EXPECT_EQ(f.tor_down_ports, 48);
  EXPECT_EQ(f.tor_up_ports, 16);
  EXPECT_EQ(f.nic_lanes_per_tor, 96);
  EXPECT_EQ(f.aggs_per_pod, 16);
  EXPECT_EQ(f.tors_per_pod, 32);
  s.oversubscription = {3.0};  // one ratio for both tiers
  const FabricShape g = plan_fabric(s);
  EXPECT_EQ(g.agg_down_ports, 48);
  EXPECT_EQ(g.agg_up_ports, 16);
  EXPECT_EQ(g.tors_per_pod, 48);
}

TEST(FabricPlanTest, LargestMegaScaleFabric) {
  EXPECT_EQ(plan_fabric(megascale_clos(131072)).pods, 64);
  expect_fabric_error(megascale_clos(131072 + 8), "gpus",
                      "131080 GPUs need 65 pods of 32 ToRs, more than radix-64 core switches "
                      "connect (64 pods, at most 131072 GPUs)");
}

// ---------------------------------------------------------------------------
// Errors

TEST(FabricErrorTest, NamesParameterAndReason) {
  expect_fabric_error(megascale_clos(12290), "gpus",
                      "12290 GPUs is not a multiple of gpus_per_server (8)");
  FabricSpec s = megascale_clos(1024);
  s.nics_per_server = 3;
  expect_fabric_error(s, "nics_per_server", "must divide gpus_per_server (8), got 3");
  s = megascale_clos(1024);
  s.tiers = 4;
  expect_fabric_error(s, "tiers", "must be 2 or 3, got 4");
  s = megascale_clos(1024);
  s.oversubscription = {2.0};
  expect_fabric_error(s, "oversubscription",
                      "ToR ratio 2:1 splits 64 ports into 42.6667 down : 21.3333 up, not whole "
                      "ports");
  s.oversubscription = {1.0, 1.0, 1.0};
  expect_fabric_error(s, "oversubscription", "3 ratios given for 3 tiers");
  s.oversubscription = {1.0, -1.0};
  expect_fabric_error(s, "oversubscription", "aggregation ratio must be a finite number > 0");
  s = megascale_clos(1024);
  s.nic_gbps = 800;
  expect_fabric_error(s, "nic_gbps", "a 800 Gb/s NIC does not fit a 400 Gb/s switch port");
  s = megascale_clos(1024);
  s.switch_latency_us = -1;
  expect_fabric_error(s, "switch_latency_us", "must be a finite number >= 0");
  s = megascale_clos(1024);
  s.nvlink_gbps = 0;
  expect_fabric_error(s, "nvlink_gbps", "must be a finite number > 0");
  s = megascale_clos(0);
  expect_fabric_error(s, "gpus", "must be >= 1, got 0");
  s = fat_tree(64);
  s.switch_radix = 8;
  s.nics_per_server = 8;  // 4 NIC ports per ToR, 8 NICs per server
  expect_fabric_error(s, "nics_per_server", "a server's 8 NICs do not fit one ToR's 4 NIC ports");
  try {
    fabric_preset("torus", 8);
    ADD_FAILURE() << "no error";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.parameter(), "preset");
    EXPECT_STREQ(e.what(),
                 "preset: unknown preset 'torus' (allowed: megascale-clos, rail-2tier, fat-tree)");
  }
}

TEST(FabricPresetTest, ByName) {
  EXPECT_EQ(fabric_preset("rail-2tier", 512).tiers, 2);
  EXPECT_FALSE(fabric_preset("fat-tree", 512).rail_optimized);
  EXPECT_FALSE(fabric_preset("fat-tree", 512).split_ports);
  EXPECT_EQ(fabric_preset("megascale-clos", 512).tiers, 3);
  EXPECT_EQ(fabric_preset_names().size(), 3u);
  for (std::string_view name : fabric_preset_names()) {
    EXPECT_EQ(fabric_preset(name, 8).preset, name);
  }
}

// ---------------------------------------------------------------------------
// Distances, latency, describe, cost

TEST(TopologyTest, HopsAndNextHopsMatchBoostBreadthFirstSearch) {
  FabricSpec oversubscribed = megascale_clos(3072);
  oversubscribed.oversubscription = {3.0, 1.0};
  FabricSpec small_fat_tree = fat_tree(16);
  small_fat_tree.switch_radix = 4;
  small_fat_tree.gpus_per_server = 1;
  small_fat_tree.nics_per_server = 1;
  const FabricSpec specs[] = {megascale_clos(3000), megascale_clos(12288), rail_2tier(1000),
                              rail_2tier(8),        fat_tree(2048),        oversubscribed,
                              small_fat_tree,       megascale_clos(8)};
  for (const FabricSpec& spec : specs) {
    const Topology t = Topology::build(spec);
    const int nics = t.shape().nics;
    for (int nic : {0, 1, nics / 3, nics / 2 + 5, nics - 1}) {
      if (nic < 0 || nic >= nics) continue;
      const NodeId dst = t.nic_node(nic);
      const std::vector<int> bfs = t.fabric_hops_from(dst);
      for (NodeId v = 0; v < t.num_nodes(); ++v) {
        if (t.is_fabric_switch(v) || v == dst) {
          ASSERT_EQ(t.hops_to_nic(v, dst), bfs[static_cast<size_t>(v)])
              << t.describe() << " node " << v << " (" << to_string(t.kind(v)) << ") to nic "
              << nic;
        } else {
          EXPECT_EQ(t.hops_to_nic(v, dst), Topology::kUnreachable);
        }
        // next_hops: exactly the out-links one BFS hop closer, through switches.
        std::vector<LinkId> expected;
        if (v != dst && t.kind(v) != NodeKind::kGpu && t.kind(v) != NodeKind::kNvSwitch) {
          for (auto [it, end] = boost::out_edges(static_cast<uint32_t>(v), t.graph()); it != end;
               ++it) {
            const auto w = static_cast<NodeId>(boost::target(*it, t.graph()));
            if ((t.is_fabric_switch(w) || w == dst) &&
                bfs[static_cast<size_t>(w)] == bfs[static_cast<size_t>(v)] - 1) {
              expected.push_back(t.graph()[*it]);
            }
          }
        }
        const LinkRange range = t.next_hops(v, dst);
        std::vector<LinkId> got;
        for (int32_t i = 0; i < range.count; ++i) got.push_back(range[i]);
        ASSERT_EQ(got, expected) << t.describe() << " node " << v << " ("
                                 << to_string(t.kind(v)) << ") to nic " << nic;
      }
    }
  }
}

TEST(TopologyTest, PathLatencyCountsEachSwitchOnce) {
  const Topology t = Topology::build(megascale_clos(1024));
  // NIC 0 (server 0, rail 0) -> ToR 0 -> NIC 8 (server 1, rail 0).
  const LinkId path[] = {t.nic_tor_up(0), Topology::reverse(t.nic_tor_up(8))};
  EXPECT_DOUBLE_EQ(t.path_latency_us(path), 0.05 + (0.7 + 0.05));
  EXPECT_DOUBLE_EQ(t.path_capacity_gbps(path), 200.0);
  const LinkId nvlink[] = {t.nvlink_up(0), Topology::reverse(t.nvlink_up(1))};
  EXPECT_DOUBLE_EQ(t.path_latency_us(nvlink), 0.0);
  EXPECT_DOUBLE_EQ(t.path_capacity_gbps(nvlink), 2400.0);
}

TEST(TopologyTest, Describe) {
  EXPECT_EQ(Topology::build(megascale_clos(12288)).describe(),
            "megascale-clos: 12288 GPUs, 1536 servers, 192 ToR / 192 agg / 96 core, 6 pods, "
            "26592 nodes, 98304 links");
  EXPECT_EQ(Topology::build(rail_2tier(512)).describe(),
            "rail-2tier: 512 GPUs, 64 servers, 8 ToR / 4 spine, 1 pod, 1100 nodes, 3584 links");
}

// Memory is asserted; build time is only printed (speed belongs to benchmarks,
// not to timed unit tests on a noisy machine).
TEST(TopologyTest, BuildsTheMegaScaleFabricSmall) {
  const auto start = std::chrono::steady_clock::now();
  const Topology t = Topology::build(megascale_clos(12288));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double megabytes = t.memory_bytes() / 1e6;
  std::printf("[ info ] 12,288-GPU MegaScale fabric: %d nodes, %d links, built in %.1f ms, %.2f MB\n",
              t.num_nodes(), t.num_links(), seconds * 1e3, megabytes);
  EXPECT_LT(megabytes, 16.0);
}

}  // namespace
}  // namespace megascale::network
