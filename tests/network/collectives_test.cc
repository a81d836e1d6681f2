// Tests of network/collectives.h: the NCCL figures of REFERENCE.md (8 x A100 in
// one server ~230 GB/s busbw, ~24 GB/s per 200G NIC across servers), nccl-tests'
// busbw conversions, latency-bound small messages against NCCL's cost form, ECMP
// collisions at the aggregation tier and the QPs that relieve them, an
// oversubscribed tier, congestion control's effect, NCCL's double binary tree,
// the algorithms against each other, memoisation, and input errors.
#include "network/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

namespace megascale::network {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kA100BusbwGbs = 230.0;  // REFERENCE.md: 8 x A100 NVLink, NCCL
constexpr double kHdrNicBusbwGbs = 24.0; // REFERENCE.md: per 200G NIC (200/8 x 0.96)

CollectiveOptions no_cc() {
  CollectiveOptions o;
  o.congestion_effect = false;
  return o;
}

CollectiveResult run_one(const Topology& t, CollectiveOp op, CollectiveAlgorithm algo, double bytes,
                         std::vector<std::vector<int>> groups, int qps = 1,
                         CollectiveOptions options = {}) {
  EcmpConfig ecmp;
  ecmp.qps_per_connection = qps;
  const Router router(t, ecmp);
  CollectiveSimulator sim(t, router, options);
  CollectiveRequest req;
  req.op = op;
  req.algorithm = algo;
  req.bytes = bytes;
  req.groups = std::move(groups);
  return sim.run(req);
}

// GPU `local` of each of `servers` (rank order = server order).
std::vector<int> one_per_server(const Topology& t, const std::vector<int>& servers, int local = 0) {
  std::vector<int> g;
  for (int s : servers) g.push_back(s * t.spec().gpus_per_server + local);
  return g;
}

std::vector<int> iota_vec(int n, int first = 0) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Servers of ToR sets 0 and 1 interleaved (0, S, 1, S+1, ...), so every ring hop
// crosses from one ToR set to the other: through the aggregation tier.
std::vector<int> cross_group_servers(const Topology& t) {
  const int spg = t.shape().servers_per_group;
  std::vector<int> order;
  for (int i = 0; i < spg; ++i) {
    order.push_back(i);
    order.push_back(spg + i);
  }
  return order;
}

// One ring per rail over `servers` (DP-style: 1 rank per server).
std::vector<std::vector<int>> rings_on_every_rail(const Topology& t, const std::vector<int>& servers) {
  std::vector<std::vector<int>> groups;
  for (int rail = 0; rail < t.spec().gpus_per_server; ++rail) groups.push_back(one_per_server(t, servers, rail));
  return groups;
}

TEST(CollectiveBusbw, FactorsFollowNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and
  // reduce-scatter (n-1)/n, sendrecv 1.
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 8), 2.0 * 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllGather, 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kReduceScatter, 192), 191.0 / 192.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kSendRecv, 16), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 1), 0.0);
  EXPECT_THROW(busbw_factor(CollectiveOp::kAllReduce, 0), std::invalid_argument);

  const Topology t = Topology::build(megascale_clos(64));
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                          CollectiveOp::kSendRecv}) {
    const CollectiveResult r = run_one(t, op, CollectiveAlgorithm::kRing, 256e6, {iota_vec(64)});
    EXPECT_DOUBLE_EQ(r.algbw_gbs, 256e6 / r.time_s / 1e9) << to_string(op);
    EXPECT_DOUBLE_EQ(r.busbw_gbs, r.algbw_gbs * busbw_factor(op, 64)) << to_string(op);
    EXPECT_DOUBLE_EQ(r.time_s, r.latency_s + r.bandwidth_s);
  }
}

TEST(CollectiveBusbw, EightA100InOneServerReachNcclBusbw) {
  const Topology t = Topology::build(megascale_clos(8));
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    const CollectiveResult r = run_one(t, op, CollectiveAlgorithm::kRing, kGiB, {iota_vec(8)});
    EXPECT_NEAR(r.busbw_gbs, kA100BusbwGbs, 0.05 * kA100BusbwGbs) << to_string(op);
    EXPECT_LE(r.busbw_gbs, kA100BusbwGbs);
    EXPECT_EQ(r.steps, op == CollectiveOp::kAllReduce ? 14 : 7);
    EXPECT_EQ(r.bottleneck.kind, "nvlink-cap") << r.bottleneck.description;
    EXPECT_FALSE(r.cc.applied);
  }
}

TEST(CollectiveBusbw, PerNicApproachesHdrBusbwAcrossServers) {
  const Topology t = Topology::build(megascale_clos(128));
  // 16 servers x 1 GPU on rail 0: all under one ToR.
  const CollectiveResult r =
      run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, kGiB, {one_per_server(t, iota_vec(16))});
  EXPECT_NEAR(r.busbw_gbs, kHdrNicBusbwGbs, 0.03 * kHdrNicBusbwGbs);
  EXPECT_LE(r.busbw_gbs, kHdrNicBusbwGbs);
  EXPECT_EQ(r.servers_per_group, 16);
  EXPECT_EQ(r.ranks_per_server, 1);

  // 16 servers x 8 GPUs: 8 channels, one per NIC; the NICs limit the ring at
  // 8 x 24 = 192 GB/s per GPU (NCCL on DGX A100 with 8 HDR NICs: ~180-190).
  // The latency: NCCL's form, 2 x 112 NVLink hops of 3.4 us and 30 network hops
  // of 14 us (x1.4 plateau), plus a send and a receive post of 6 us (an AMD
  // host, Simple) on each network hop (nccl_network_post_us): ~2 ms, so the
  // bandwidth part alone is compared.
  const CollectiveResult full =
      run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, 4 * kGiB, {iota_vec(128)});
  const double bandwidth_busbw = 4 * kGiB * 2 * 127 / 128 / full.bandwidth_s / 1e9;
  EXPECT_NEAR(bandwidth_busbw, 8 * kHdrNicBusbwGbs, 0.05 * 8 * kHdrNicBusbwGbs);
  EXPECT_NEAR(full.latency_s, (1.4 * (8.4 + 224 * 3.4 + 30 * 14.0) + 30 * 2 * 6.0) * 1e-6, 0.3e-3);
  EXPECT_TRUE(full.bottleneck.kind == "nic-cap" || full.bottleneck.kind == "nic-tor") << full.bottleneck.description;
}

TEST(CollectiveLatency, SmallMessagesAreLatencyBound) {
  const Topology t = Topology::build(megascale_clos(128));
  const std::vector<int> ring = one_per_server(t, iota_vec(16));
  const CollectiveResult small =
      run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, 1024, {ring});
  const CollectiveResult bigger =
      run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, 8192, {ring});
  EXPECT_GT(small.latency_s, 0.95 * small.time_s);
  EXPECT_LT(small.busbw_gbs, 0.1);
  EXPECT_LT(bigger.time_s, 1.02 * small.time_s);  // 8x the bytes, ~the same time
  // NCCL's cost form: base 8.4 us + 2(n-1) network hops of 14 us, plus per hop
  // a send and a receive post of 6 us (nccl_network_post_us: an AMD host,
  // Simple) and the fabric's path latency (NIC -> ToR -> NIC: two cables + one
  // switch).
  const double hop_path_us = 2 * t.spec().link_latency_us + t.spec().switch_latency_us;
  const double nccl_us = 8.4 + 2 * 15 * (14.0 + 2 * 6.0 + hop_path_us);
  EXPECT_NEAR(small.latency_s * 1e6, nccl_us, 0.01 * nccl_us);

  // Inside one server: NVLink hops of 3.4 us.
  const Topology one = Topology::build(megascale_clos(8));
  const CollectiveResult nv =
      run_one(one, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, 1024, {iota_vec(8)});
  EXPECT_NEAR(nv.latency_s * 1e6, 8.4 + 7 * 3.4, 1e-6);
}

// With congestion control on (the default), a tree all-reduce across 8 servers
// grows with its bytes: its bandwidth time for 4 B is below a microsecond, not
// the 103 us a whole fluid step per flow made of it (above 64 KiB's 11 us).
TEST(CollectiveLatency, TinyTreeAllReduceAcrossServersIsLatencyBound) {
  const Topology t = Topology::build(megascale_clos(64));
  double last_s = 0;
  for (double bytes : {4.0, 1024.0, 65536.0, 1048576.0}) {
    const CollectiveResult r = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kTree, bytes, {iota_vec(64)});
    EXPECT_GT(r.time_s, last_s) << bytes;
    last_s = r.time_s;
    if (bytes == 4.0) {
      EXPECT_LT(r.time_s - r.latency_s, 1e-6) << "bandwidth time " << (r.time_s - r.latency_s);
    }
  }
}

TEST(CollectiveEcmp, CollisionsAtAggregationTierLowerBusbwAndQpsHelp) {
  const Topology t = Topology::build(megascale_clos(1024));  // 2 ToR sets of 64 servers
  ASSERT_EQ(t.shape().servers_per_group, 64);
  // Ideal: 64 servers under one ToR set, ToR-local hops: the bandwidth part is
  // the NIC's (63 network steps of ~26 us of latency come on top).
  const CollectiveResult local = run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, kGiB,
                                         rings_on_every_rail(t, iota_vec(64)), 1, no_cc());
  EXPECT_NEAR(kGiB * 63 / 64 / local.bandwidth_s / 1e9, kHdrNicBusbwGbs, 0.03 * kHdrNicBusbwGbs);
  EXPECT_NEAR(local.busbw_gbs, kHdrNicBusbwGbs, 0.06 * kHdrNicBusbwGbs);

  // Every hop crosses the aggregation tier: 64 flows per ToR onto 32 x 400G
  // uplinks by hash. Enough capacity on average, but collisions of 3+ flows
  // slow the ring to the most loaded uplink.
  const std::vector<int> cross = cross_group_servers(t);
  double busbw[3];
  const int qps[3] = {1, 4, 16};
  for (int i = 0; i < 3; ++i) {
    const CollectiveResult r = run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, kGiB,
                                       rings_on_every_rail(t, cross), qps[i], no_cc());
    busbw[i] = r.busbw_gbs;
    EXPECT_EQ(r.bottleneck.kind, "tor-agg") << r.bottleneck.description;
    EXPECT_GE(r.bottleneck.flows, 3 * qps[i]) << r.bottleneck.description;
    EXPECT_EQ(r.phases.at(0).step.subflows, static_cast<size_t>(8 * 128 * qps[i]));
  }
  EXPECT_LT(busbw[0], 0.7 * local.busbw_gbs);
  EXPECT_GT(busbw[1], 1.1 * busbw[0]);
  EXPECT_GT(busbw[2], 1.1 * busbw[1]);
  EXPECT_LT(busbw[2], local.busbw_gbs);
}

TEST(CollectiveEcmp, OversubscribedTierIsSlower) {
  FabricSpec one_to_one = megascale_clos(2048);
  FabricSpec three_to_one = megascale_clos(2048);
  three_to_one.oversubscription = {3.0, 1.0};
  const Topology a = Topology::build(one_to_one);
  const Topology b = Topology::build(three_to_one);
  const CollectiveResult ra = run_one(a, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, kGiB,
                                      rings_on_every_rail(a, cross_group_servers(a)), 16, no_cc());
  const CollectiveResult rb = run_one(b, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, kGiB,
                                      rings_on_every_rail(b, cross_group_servers(b)), 16, no_cc());
  // 3:1 ToR: 96 NICs share 16 x 400G uplinks, at most 66.7 Gb/s = 8.3 GB/s each.
  const double uplink_share_gbs = 16 * 400.0 / b.shape().nic_lanes_per_tor / 8.0;
  EXPECT_LE(rb.busbw_gbs, uplink_share_gbs * 1.0001);
  EXPECT_LT(rb.busbw_gbs, 0.75 * ra.busbw_gbs);
  EXPECT_EQ(rb.bottleneck.kind, "tor-agg");
}

TEST(CollectiveCongestion, EffectAppliedAtSharedSwitchQueues) {
  const Topology t = Topology::build(megascale_clos(1024));
  const auto groups = rings_on_every_rail(t, cross_group_servers(t));
  const CollectiveResult off =
      run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, 256e6, groups, 1, no_cc());
  const CollectiveResult on = run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, 256e6, groups, 1);
  EXPECT_TRUE(on.cc.applied);
  EXPECT_GE(on.cc.senders, 3);
  EXPECT_EQ(on.cc.algorithm, CcAlgorithm::kHybrid);
  EXPECT_GT(on.cc.achieved_bandwidth_fraction, 0.0);
  EXPECT_LE(on.cc.achieved_bandwidth_fraction, 1.0);
  EXPECT_GT(on.phases[0].step.cc_limited_subflows, 0u);
  EXPECT_GE(on.time_s, off.time_s);
  EXPECT_FALSE(off.cc.applied);

  // No shared switch queue (ToR-local ring, NIC-capped): no effect.
  const CollectiveResult local = run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kRing, 256e6,
                                         rings_on_every_rail(t, iota_vec(64)));
  EXPECT_FALSE(local.cc.applied);
  EXPECT_EQ(local.phases[0].step.cc_limited_subflows, 0u);
}

TEST(CollectiveTree, NcclDoubleBinaryTree) {
  // ncclGetBtree: 0 <- 2 <- {1, 3} for 4 ranks; 0 <- 4 <- 2 <- {1, 3} for 5.
  EXPECT_EQ(btree_parent(0, 4), -1);
  EXPECT_EQ(btree_parent(1, 4), 2);
  EXPECT_EQ(btree_parent(2, 4), 0);
  EXPECT_EQ(btree_parent(3, 4), 2);
  EXPECT_EQ(btree_parent(4, 5), 0);
  EXPECT_EQ(btree_parent(2, 5), 4);
  EXPECT_EQ(btree_parent(6, 8), 4);
  EXPECT_EQ(btree_parent(4, 8), 0);
  for (int k : {2, 3, 4, 5, 7, 8, 16, 31, 64, 192}) {
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      std::vector<int> children(static_cast<size_t>(k), 0);
      for (int r = 0; r < k; ++r) {
        const int p = dtree_parent(tree, r, k);
        if (p < 0) {
          ++roots;
          continue;
        }
        ASSERT_LT(p, k);
        ++children[static_cast<size_t>(p)];
        int steps = 0;  // reaches the root
        for (int x = r; dtree_parent(tree, x, k) >= 0; x = dtree_parent(tree, x, k)) ASSERT_LE(++steps, k);
      }
      EXPECT_EQ(roots, 1) << k;
      EXPECT_LE(*std::max_element(children.begin(), children.end()), 2) << k;
    }
    if (k % 2 == 0) {  // mirrored: no rank is interior in both trees
      std::vector<int> interior(static_cast<size_t>(k), 0);
      for (int tree = 0; tree < 2; ++tree) {
        for (int r = 0; r < k; ++r) {
          const int p = dtree_parent(tree, r, k);
          if (p >= 0) interior[static_cast<size_t>(p)] |= 1 << tree;
        }
      }
      for (int r = 0; r < k; ++r) EXPECT_NE(interior[static_cast<size_t>(r)], 3) << k << " rank " << r;
    }
  }
}

// NCCL (2.19.3 / 2.30.7 src/graph/search.cc, connect.cc): across nodes each
// tree channel's intra-node chain starts at the GPU of its own NIC, so the
// chains' ends rotate over the GPUs and each GPU sends 2 (m-1)/m x S over NVLink
// (up and down), not the 2 S of one fixed chain's middle GPUs; in one node every
// channel replays the same chain.
TEST(CollectiveAlgorithms, TreeChainRotatesAcrossNodes) {
  const Topology t = Topology::build(megascale_clos(128));
  auto nvlink_egress = [&](const std::vector<int>& group) {
    std::vector<StepFlow> flows;
    const std::vector<std::vector<int>> groups = {group};
    tree_step_flows(t, groups, kGiB, &flows);
    std::vector<double> out(static_cast<size_t>(t.spec().gpus), 0.0);
    for (const StepFlow& f : flows) {
      if (t.server_of_gpu(f.src_gpu) == t.server_of_gpu(f.dst_gpu)) out[static_cast<size_t>(f.src_gpu)] += f.bytes;
    }
    return out;
  };
  const std::vector<double> two = nvlink_egress(iota_vec(16));  // 2 servers x 8
  for (int g = 0; g < 16; ++g) EXPECT_NEAR(two[static_cast<size_t>(g)], 2.0 * 7.0 / 8.0 * kGiB, 1.0) << g;
  const std::vector<double> one = nvlink_egress(iota_vec(8));  // 1 server: one fixed chain
  EXPECT_NEAR(one[0], kGiB, 1.0);
  EXPECT_NEAR(one[3], 2.0 * kGiB, 1.0);
  EXPECT_NEAR(one[7], kGiB, 1.0);
  // Two nodes of 8 A100s: the chain (NVLink), not the NICs, bounds the tree.
  const auto tree = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kTree, kGiB, {iota_vec(16)}, 1, no_cc());
  ASSERT_EQ(tree.phases.size(), 1u);
  EXPECT_EQ(tree.phases[0].step.bottleneck.kind.rfind("nvlink", 0), 0u) << tree.phases[0].step.bottleneck.kind;
}

TEST(CollectiveAlgorithms, TreeRingHierarchicalCompare) {
  const Topology t = Topology::build(megascale_clos(128));
  const std::vector<int> all = iota_vec(128);
  const auto ring = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, kGiB, {all});
  const auto tree = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kTree, kGiB, {all});
  const auto hier = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kHierarchical, kGiB, {all});
  // Large messages: the pipelined double tree moves as many bytes per NIC as the
  // ring (2S per node), so similar bandwidth.
  EXPECT_NEAR(tree.busbw_gbs, ring.busbw_gbs, 0.15 * ring.busbw_gbs);
  // Hierarchical: three sequential phases (intra RS, per-rail AR, intra AG).
  ASSERT_EQ(hier.phases.size(), 3u);
  EXPECT_EQ(hier.phases[0].steps, 7);
  EXPECT_EQ(hier.phases[1].steps, 2 * 15);
  EXPECT_EQ(hier.phases[2].steps, 7);
  EXPECT_TRUE(hier.phases[2].memo_hit);  // same pattern as the reduce-scatter
  EXPECT_LT(hier.busbw_gbs, ring.busbw_gbs);
  EXPECT_GT(hier.busbw_gbs, 0.3 * ring.busbw_gbs);

  // Small messages: log-depth tree beats the ring's 2(n-1) hops.
  const auto ring_small = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kRing, 4096, {all});
  const auto tree_small = run_one(t, CollectiveOp::kAllReduce, CollectiveAlgorithm::kTree, 4096, {all});
  EXPECT_LT(tree_small.time_s, 0.5 * ring_small.time_s);

  // Hierarchical all-gather and reduce-scatter: two phases each.
  const auto hag = run_one(t, CollectiveOp::kAllGather, CollectiveAlgorithm::kHierarchical, kGiB, {all});
  ASSERT_EQ(hag.phases.size(), 2u);
  EXPECT_EQ(hag.phases[0].steps, 15);
  EXPECT_EQ(hag.phases[1].steps, 7);
  const auto hrs = run_one(t, CollectiveOp::kReduceScatter, CollectiveAlgorithm::kHierarchical, kGiB, {all});
  ASSERT_EQ(hrs.phases.size(), 2u);
  EXPECT_NEAR(hrs.time_s, hag.time_s, 1e-9 * hag.time_s);
}

TEST(CollectiveSendRecv, NvlinkAndNetwork) {
  const Topology t = Topology::build(megascale_clos(16));
  const auto nv = run_one(t, CollectiveOp::kSendRecv, CollectiveAlgorithm::kRing, kGiB, {{0, 1}});
  EXPECT_NEAR(nv.busbw_gbs, kA100BusbwGbs, 0.01 * kA100BusbwGbs);
  EXPECT_DOUBLE_EQ(nv.busbw_gbs, nv.algbw_gbs);
  const auto net = run_one(t, CollectiveOp::kSendRecv, CollectiveAlgorithm::kRing, kGiB, {{0, 8}});
  EXPECT_NEAR(net.busbw_gbs, kHdrNicBusbwGbs, 0.01 * kHdrNicBusbwGbs);
  EXPECT_EQ(net.steps, 1);
}

// Per-transfer times (pipeline sends do not wait for each other): two sends into
// one NIC share its downlink and take twice as long as a lone send elsewhere; an
// NVLink send is ~10x faster; the step's time is the slowest transfer's.
TEST(CollectiveSendRecv, PerTransferTimesSeeTheirOwnBottleneck) {
  const Topology t = Topology::build(megascale_clos(64));
  const Router router(t);
  CollectiveSimulator sim(t, router, no_cc());
  const std::vector<StepFlow> flows = {
      {8, 16, 0, kGiB}, {24, 16, 0, kGiB}, {40, 48, 0, kGiB}, {0, 1, 0, kGiB}};
  const StepOutcome o = sim.solve_step(flows);
  ASSERT_EQ(o.transfer_bandwidth_s.size(), flows.size());
  const double lone_s = kGiB / (kHdrNicBusbwGbs * 1e9);
  EXPECT_NEAR(o.transfer_bandwidth_s[2], lone_s, 0.01 * lone_s);
  EXPECT_NEAR(o.transfer_bandwidth_s[0], 2 * lone_s, 0.01 * lone_s);
  EXPECT_NEAR(o.transfer_bandwidth_s[1], 2 * lone_s, 0.01 * lone_s);
  EXPECT_NEAR(o.transfer_bandwidth_s[3], kGiB / (kA100BusbwGbs * 1e9), 0.01 * lone_s);
  EXPECT_DOUBLE_EQ(o.bandwidth_s, *std::max_element(o.transfer_bandwidth_s.begin(), o.transfer_bandwidth_s.end()));
  // From the memo: the same answer.
  bool hit = false;
  EXPECT_EQ(sim.solve_step(flows, &hit).transfer_bandwidth_s, o.transfer_bandwidth_s);
  EXPECT_TRUE(hit);
}

TEST(CollectiveMemo, IdenticalStepsSolvedOnce) {
  const Topology t = Topology::build(megascale_clos(1024));
  const Router router(t);
  CollectiveSimulator sim(t, router);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.bytes = 64e6;
  req.groups = rings_on_every_rail(t, cross_group_servers(t));
  const CollectiveResult first = sim.run(req);
  EXPECT_EQ(first.steps, 2 * 127);
  EXPECT_EQ(first.step_solves, 1u);
  EXPECT_EQ(first.step_memo_hits, 0u);
  EXPECT_NEAR(first.bandwidth_s, first.steps * first.phases[0].step.bandwidth_s, 1e-12);
  const CollectiveResult again = sim.run(req);
  EXPECT_EQ(again.step_solves, 0u);
  EXPECT_EQ(again.step_memo_hits, 1u);
  EXPECT_DOUBLE_EQ(again.time_s, first.time_s);
  EXPECT_EQ(again.bottleneck.description, first.bottleneck.description);
  // An all-gather of the same tensor has the same step pattern.
  req.op = CollectiveOp::kAllGather;
  const CollectiveResult ag = sim.run(req);
  EXPECT_EQ(ag.step_memo_hits, 1u);
  EXPECT_EQ(sim.cache_entries(), 1u);
  // A fresh simulator (cold) gives the same answer: memoisation changes nothing.
  CollectiveSimulator cold(t, router);
  req.op = CollectiveOp::kAllReduce;
  EXPECT_DOUBLE_EQ(cold.run(req).time_s, first.time_s);
}

TEST(CollectiveLayout, StridedGroupsAreMegatronDpGroups) {
  const auto groups = strided_groups(8, 64, 192, 1);
  ASSERT_EQ(groups.size(), 64u);
  std::set<int> all;
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 192u);
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(all.size(), 12288u);
  EXPECT_EQ(*all.rbegin(), 12287);
  EXPECT_EQ(groups[9][0], 192 * 8 + 1);  // rail 1 of the second slice of servers
  EXPECT_EQ(groups[9][1], 193 * 8 + 1);
  EXPECT_EQ(strided_groups_gpus(8, 64, 192, 1), 12288);
  EXPECT_EQ(strided_groups_gpus(8, 1, 16, 1), 128);
  EXPECT_EQ(strided_groups(8, 2, 16, 8)[1][0], 16);  // group 1 on servers 2..3
  EXPECT_THROW(strided_groups(8, 1, 12, 8), std::invalid_argument);
  EXPECT_THROW(strided_groups(8, 1, 12, 3), std::invalid_argument);
}

TEST(CollectiveLayout, ScatterServersIsADeterministicServerPermutation) {
  auto groups = strided_groups(8, 16, 64, 1);  // 1,024 GPUs, 128 servers
  const auto before = groups;
  scatter_servers(&groups, 8, 128, 7);
  auto again = before;
  scatter_servers(&again, 8, 128, 7);
  EXPECT_EQ(groups, again);
  std::set<int> gpus, servers_moved;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t r = 0; r < groups[g].size(); ++r) {
      gpus.insert(groups[g][r]);
      EXPECT_EQ(groups[g][r] % 8, before[g][r] % 8);  // the local GPU (rail) is kept
      if (groups[g][r] / 8 != before[g][r] / 8) servers_moved.insert(before[g][r] / 8);
    }
  }
  EXPECT_EQ(gpus.size(), 1024u);
  EXPECT_GT(servers_moved.size(), 100u);
  EXPECT_THROW(scatter_servers(&groups, 8, 64, 1), std::invalid_argument);
}

TEST(CollectiveErrors, BadRequestsAreNamed) {
  const Topology t = Topology::build(megascale_clos(64));
  const Router router(t);
  CollectiveSimulator sim(t, router);
  CollectiveRequest req;
  req.bytes = 1e6;
  auto message = [&]() -> std::string {
    try {
      sim.run(req);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message().find("no groups"), std::string::npos);
  req.groups = {{3}};
  EXPECT_NE(message().find("at least 2 ranks"), std::string::npos);
  req.groups = {{0, 1}, {2, 3, 4}};
  EXPECT_NE(message().find("differ in size"), std::string::npos);
  req.groups = {{0, 64}};
  EXPECT_NE(message().find("outside the fabric"), std::string::npos);
  req.groups = {{0, 1}, {1, 2}};
  EXPECT_NE(message().find("appears twice"), std::string::npos);
  req.groups = {{0, 8}};
  req.algorithm = CollectiveAlgorithm::kTree;
  req.op = CollectiveOp::kAllGather;
  EXPECT_NE(message().find("all-reduce only"), std::string::npos);
  req.algorithm = CollectiveAlgorithm::kHierarchical;
  req.groups = {{0, 1, 8}};
  EXPECT_NE(message().find("same number of ranks"), std::string::npos);
  req.algorithm = CollectiveAlgorithm::kRing;
  req.bytes = -1;
  EXPECT_NE(message().find("bytes"), std::string::npos);
}

TEST(CollectiveNames, ParseAndPrint) {
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                          CollectiveOp::kSendRecv}) {
    EXPECT_EQ(parse_collective_op(to_string(op)), op);
  }
  EXPECT_EQ(parse_collective_op("all-reduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(parse_collective_op("reduce_scatter"), CollectiveOp::kReduceScatter);
  EXPECT_FALSE(parse_collective_op("broadcast"));
  for (CollectiveAlgorithm a :
       {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree, CollectiveAlgorithm::kHierarchical,
        CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree}) {
    EXPECT_EQ(parse_collective_algorithm(to_string(a)), a);
  }
  EXPECT_FALSE(parse_collective_algorithm("collnet"));  // not modelled (no SHARP switches)
}

}  // namespace
}  // namespace megascale::network
