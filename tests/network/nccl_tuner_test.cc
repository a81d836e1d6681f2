// tests/network/nccl_tuner_test.cc: NCCL's cost model (network/nccl_tuner.h)
// against hand computations from NCCL 2.30 src/graph/tuning.cc, its enable
// rules, and the tuner's choice on the fabric (network/collective_tuner.h).
#include "network/nccl_tuner.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "network/routing.h"
#include "network/topology.h"

namespace megascale::network {
namespace {

const NcclSystem kA100 = nccl_system_for(80, /*amd_cpu=*/true, 24, 0.0);      // DGX A100
const NcclSystem kH100 = nccl_system_for(90, /*amd_cpu=*/false, 32, 480.0);   // H100 at NCCL's 32-channel maximum (a DGX H100 node runs 24)

TEST(NcclTuner, LatenciesAreTuningCcs) {
  // One node of 8: ring = base + 2(n-1) NVLink hops; LL 6.6 + 14 x 0.6, Simple 8.4 + 14 x 3.4.
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL, CollectiveOp::kAllReduce, 8, 1, 8, kA100),
              15.0, 1e-9);
  EXPECT_NEAR(
      nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 8, 1, 8, kA100),
      56.0, 1e-9);
  // All-gather: n-1 steps.
  EXPECT_NEAR(
      nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL128, CollectiveOp::kAllGather, 8, 1, 8, kA100),
      14.0 + 7 * 1.9, 1e-9);
  // Tree LL over 2 nodes of 8: 6.8 + 2 x (7 x 0.6 + log2(2) x 5.0).
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kTree, NcclProtocol::kLL, CollectiveOp::kAllReduce, 16, 2, 8, kA100),
              6.8 + 2 * (7 * 0.6 + 5.0), 1e-9);
  // Ring Simple over 2 AMD nodes: intra hop = max(3.4, 3 x 2 us net overhead) = 6;
  // 30 steps, 2 of them network (14 us); large messages: x1.4 plateau.
  const double small = nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kSimple, CollectiveOp::kAllReduce,
                                       16, 2, 1024, kA100);
  EXPECT_NEAR(small, 8.4 + 28 * 6.0 + 2 * 14.0, 1e-9);
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 16, 2,
                              1 << 30, kA100),
              small * 1.4, 1e-9);
  // Intel hosts: 1 us overhead -> 3 us for Simple, below the 3.4 us NVLink hop.
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kRing, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 16, 2,
                              1024, kH100),
              8.4 + 28 * 3.4 + 2 * 14.0, 1e-9);
  // NVLS: 25 us in one node; NVLS tree adds 2 log2(nodes) x 20.9.
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 8, 1, 8,
                              kH100),
              25.0, 1e-9);
  EXPECT_NEAR(nccl_latency_us(CollectiveAlgorithm::kNvlsTree, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 32, 4,
                              8, kH100),
              25.0 + 2 * 2 * 20.9, 1e-9);
}

TEST(NcclTuner, ProtocolBandwidthRatiosAndCaps) {
  const auto ar = CollectiveOp::kAllReduce;
  // Ring LL: half of Simple, capped by llMaxBw (Ampere, one node: 87.7 GB/s).
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 1, 100.0, kA100), 50.0, 1e-9);
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 1, 230.0, kA100), 87.7, 1e-9);
  // Across 4+ AMD nodes the cap is 19 GB/s; Intel 20.4.
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 4, 230.0, kA100), 19.0, 1e-9);
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 4, 230.0, kH100), 20.4, 1e-9);
  // Ring LL128: 92% (per-channel caps far above on 24 channels).
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kLL128, ar, 1, 230.0, kA100),
              0.92 * 230.0, 1e-9);
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kRing, NcclProtocol::kSimple, ar, 1, 230.0, kA100), 230.0,
              1e-9);
  // Tree: 0.92 for every protocol, then LL / 3.8, LL128 x 120/128 across nodes.
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kTree, NcclProtocol::kSimple, ar, 2, 100.0, kA100), 92.0,
              1e-9);
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kTree, NcclProtocol::kLL, ar, 2, 100.0, kA100),
              std::min(92.0 / 3.8, 22.5), 1e-9);
  EXPECT_NEAR(nccl_protocol_busbw_gbs(CollectiveAlgorithm::kTree, NcclProtocol::kLL128, ar, 2, 100.0, kA100),
              92.0 * 120.0 / 128.0, 1e-9);
  // Tree size correction: 1 at 64 B, 0.4 (LL) at 2^12 x 64 B, 1 past 256 MiB.
  EXPECT_DOUBLE_EQ(nccl_tree_efficiency(NcclProtocol::kLL, 64), 1.0);
  EXPECT_DOUBLE_EQ(nccl_tree_efficiency(NcclProtocol::kLL, 64.0 * 4096), 0.4);
  EXPECT_DOUBLE_EQ(nccl_tree_efficiency(NcclProtocol::kSimple, 1024.0 * 1024 * 1024), 1.0);
}

TEST(NcclTuner, EnableRules) {
  std::string why;
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 1,
                                      8, kA100, &why));
  EXPECT_NE(why.find("NVLink SHARP"), std::string::npos);
  EXPECT_TRUE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 1,
                                     8, kH100));
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvls, NcclProtocol::kLL, CollectiveOp::kAllReduce, 1, 8,
                                      kH100));
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, CollectiveOp::kAllReduce, 2,
                                      8, kH100));
  EXPECT_TRUE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvlsTree, NcclProtocol::kSimple, CollectiveOp::kAllReduce,
                                     2, 8, kH100));
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kNvlsTree, NcclProtocol::kSimple, CollectiveOp::kAllReduce,
                                      1, 8, kH100));
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kTree, NcclProtocol::kSimple, CollectiveOp::kAllGather, 2,
                                      8, kA100));
  EXPECT_FALSE(nccl_algorithm_enabled(CollectiveAlgorithm::kHierarchical, NcclProtocol::kSimple,
                                      CollectiveOp::kAllReduce, 2, 8, kA100));
  EXPECT_EQ(parse_nccl_protocol("ll128"), NcclProtocol::kLL128);
  EXPECT_EQ(parse_nccl_protocol("SIMPLE"), NcclProtocol::kSimple);
  EXPECT_FALSE(parse_nccl_protocol("fast"));
}

struct Fabric {
  Topology topology;
  Router router;
  explicit Fabric(int gpus) : topology(Topology::build(megascale_clos(gpus))), router(topology, EcmpConfig{}) {}
};

std::vector<int> first_gpus(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(CollectiveTuner, PicksLowLatencyProtocolsForSmallAndSimpleForLarge) {
  Fabric f(8);
  CollectiveOptions o;
  o.nccl = kA100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.groups = {first_gpus(8)};
  req.bytes = 8;
  const TunedCollective small = tune_collective(sim, req);
  EXPECT_EQ(small.best.protocol, NcclProtocol::kLL);
  req.bytes = 4.0 * (1 << 30);
  const TunedCollective large = tune_collective(sim, req);
  EXPECT_EQ(large.best.protocol, NcclProtocol::kSimple);
  // The choice is the enabled candidate with the lowest NCCL estimate.
  double lowest = 1e300;
  for (const TunerCandidate& c : large.candidates) {
    if (c.enabled) lowest = std::min(lowest, c.estimate_s);
  }
  for (const TunerCandidate& c : large.candidates) {
    if (c.enabled && c.algorithm == large.best.algorithm && c.protocol == large.best.protocol) {
      EXPECT_DOUBLE_EQ(c.estimate_s, lowest);
      EXPECT_DOUBLE_EQ(c.time_s, large.best.time_s);
    }
  }
  // LL on 8 B beats Simple's 56 us by the latency difference (15 us vs 56 us).
  EXPECT_LT(small.best.time_s * 1e6, 20.0);
  // Restricting the protocol (NCCL_PROTO=Simple) is obeyed.
  req.bytes = 8;
  const TunedCollective forced = tune_collective(sim, req, std::nullopt, NcclProtocol::kSimple);
  EXPECT_EQ(forced.best.protocol, NcclProtocol::kSimple);
  EXPECT_GT(forced.best.time_s, small.best.time_s);
  // No NVLS on A100: asking for it names the reason.
  try {
    tune_collective(sim, req, CollectiveAlgorithm::kNvls);
    FAIL() << "NVLS on A100 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("NVLink SHARP"), std::string::npos);
  }
}

// Two nodes of 8 A100: NCCL estimates the tree from its graph's intra-node
// speed, which its search raises to up to twice the network speed
// (nccl_tree_graph_busbw_gbs), so a large all-reduce runs the tree (0.92 x
// 0.5 x min(2 x ring, NVLink) against 16/30 x ring); a tiny one runs the tree
// with LL (2 log2(2) network hops instead of 2 x 1 ring network steps plus 28
// overheads). Four nodes estimate from the network speed: the ring.
TEST(CollectiveTuner, TwoNodesFollowNcclsEstimate) {
  Fabric f(32);
  CollectiveOptions o;
  o.nccl = kA100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.groups = {first_gpus(16)};
  req.bytes = 8.0 * (1 << 30);
  const TunedCollective large = tune_collective(sim, req);
  EXPECT_EQ(large.best.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(large.best.protocol, NcclProtocol::kSimple);
  req.bytes = 8;
  const TunedCollective small = tune_collective(sim, req);
  EXPECT_EQ(small.best.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(small.best.protocol, NcclProtocol::kLL);
  req.groups = {first_gpus(32)};
  req.bytes = 8.0 * (1 << 30);
  EXPECT_EQ(tune_collective(sim, req).best.algorithm, CollectiveAlgorithm::kRing);
}

// search.cc lets a two-node tree's intra-node speed reach twice the network's,
// bounded by NVLink; other node counts keep the ring's graph bandwidth.
TEST(NcclTuner, TwoNodeTreeGraphBandwidth) {
  EXPECT_DOUBLE_EQ(nccl_tree_graph_busbw_gbs(96.0, 2, 230.0), 192.0);
  EXPECT_DOUBLE_EQ(nccl_tree_graph_busbw_gbs(192.0, 2, 230.0), 230.0);
  EXPECT_DOUBLE_EQ(nccl_tree_graph_busbw_gbs(250.0, 2, 230.0), 250.0);  // never below the ring's
  EXPECT_DOUBLE_EQ(nccl_tree_graph_busbw_gbs(192.0, 1, 230.0), 192.0);
  EXPECT_DOUBLE_EQ(nccl_tree_graph_busbw_gbs(192.0, 4, 230.0), 192.0);
}

TEST(CollectiveTuner, HopperUsesNvlsForLargeAllReduceInANode) {
  Fabric f(8);
  CollectiveOptions o;
  o.nvlink_busbw_gbs = 370.0;  // REFERENCE.md: 8 x H100 ring
  o.nic_busbw_gbs = 48.0;
  o.nccl = kH100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.groups = {first_gpus(8)};
  req.bytes = 8.0 * (1 << 30);
  const TunedCollective t = tune_collective(sim, req);
  EXPECT_EQ(t.best.algorithm, CollectiveAlgorithm::kNvls);
  // Its busbw is the NVLS figure (480), above the ring's 370.
  EXPECT_NEAR(t.best.busbw_gbs, 480.0, 5.0);
  // All-gather: NVLS moves (n-1)/(2n) of it; the ring wins.
  req.op = CollectiveOp::kAllGather;
  EXPECT_EQ(tune_collective(sim, req).best.algorithm, CollectiveAlgorithm::kRing);
}

// getNetOverhead (2 us AMD, 1 us Intel, x3 Simple) per network post; a tree
// all-reduce over 2 nodes posts 2 hops x (send + receive); 4 nodes: 4 hops.
TEST(NcclTuner, NetworkPostsOnTheTreesCriticalPath) {
  const auto ar = CollectiveOp::kAllReduce;
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kTree, NcclProtocol::kLL, ar, 16, 2, 8, kA100), 8.0);
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kTree, NcclProtocol::kLL, ar, 16, 2, 8, kH100), 4.0);
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kTree, NcclProtocol::kSimple, ar, 32, 4, 8, kA100), 48.0);
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kNvlsTree, NcclProtocol::kSimple, ar, 16, 2, 8, kH100), 12.0);
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL, CollectiveOp::kSendRecv, 2, 2,
                                        8, kA100),
                   4.0);
  // A ring all-reduce of 16 ranks on 2 AMD nodes: 2 posts on each of its 2
  // network steps (8 us), less the 28 NVLink steps NCCL's estimate charges
  // max(0.6, 2) instead of 0.6 (28 x 1.4 = 39.2 us). Intel hosts (kH100): 2 x 2 x 1
  // less 28 x 0.4.
  EXPECT_NEAR(nccl_network_post_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 16, 2, 8, kA100), 8.0 - 39.2,
              1e-9);
  EXPECT_NEAR(nccl_network_post_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 16, 2, 8, kH100), 4.0 - 11.2,
              1e-9);
  // One node posts nothing.
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kTree, NcclProtocol::kLL, ar, 8, 1, 8, kA100), 0.0);
  EXPECT_DOUBLE_EQ(nccl_network_post_us(CollectiveAlgorithm::kRing, NcclProtocol::kLL, ar, 8, 1, 8, kA100), 0.0);
}

// The simulated tree time carries the posts; NCCL's estimate (the ranking) does not.
TEST(CollectiveTuner, TreeTimeCarriesNetworkPostsButNcclsEstimateDoesNot) {
  Fabric f(16);
  CollectiveOptions o;
  o.nccl = kA100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.groups = {first_gpus(16)};
  req.bytes = 8;
  const TunedCollective t = tune_collective(sim, req, CollectiveAlgorithm::kTree, NcclProtocol::kLL);
  const double nccl_us = nccl_latency_us(CollectiveAlgorithm::kTree, NcclProtocol::kLL, req.op, 16, 2, 8, kA100);
  EXPECT_GT(t.best.latency_s * 1e6, nccl_us + 8.0);  // + the fabric's path latencies
  for (const TunerCandidate& c : t.candidates) {
    if (c.enabled) {
      EXPECT_NEAR(c.time_s - c.estimate_s, 8e-6, 5e-8);
    }
  }
}

// NCCL 2.29 enqueue.cc addP2pToPlan on 8 GPUs of one node with 32 channels:
// nChannelsMin = 4 (4 x 8 <= 32), doubling while a part exceeds 16 MiB, at most 32.
TEST(NcclTuner, P2pChannelsGrowWithTheSize) {
  const double mib = 1 << 20;
  EXPECT_EQ(nccl_p2p_channels(8, 8, kH100), 1);              // one 64 KiB part
  EXPECT_EQ(nccl_p2p_channels(200 * 1024, 8, kH100), 4);     // 4 parts of 64 KiB+
  EXPECT_EQ(nccl_p2p_channels(32 * mib, 8, kH100), 4);
  EXPECT_EQ(nccl_p2p_channels(64 * mib, 8, kH100), 4);       // 16 MiB parts: not above
  EXPECT_EQ(nccl_p2p_channels(128 * mib, 8, kH100), 8);
  EXPECT_EQ(nccl_p2p_channels(256 * mib, 8, kH100), 16);
  EXPECT_EQ(nccl_p2p_channels(512 * mib, 8, kH100), 32);
  EXPECT_EQ(nccl_p2p_channels(16384 * mib, 8, kH100), 32);   // capped at p2pnChannels
  // Two ranks: nChannelsMin = 16; A100's 24 channels round up to 32.
  EXPECT_EQ(nccl_p2p_channels(64 * mib, 2, kA100), 16);
  EXPECT_DOUBLE_EQ(nccl_p2p_channel_nvlink_gbs(kH100), 20.6);
  // LL up to nChannels x 16 KiB.
  EXPECT_EQ(nccl_p2p_protocol(16384, 8, 1, kH100), NcclProtocol::kLL);
  EXPECT_EQ(nccl_p2p_protocol(200 * 1024, 8, 1, kH100), NcclProtocol::kSimple);  // 4 ch x 16 KiB < 200 KiB
  EXPECT_EQ(nccl_p2p_protocol(64 * 1024, 8, 1, kH100), NcclProtocol::kSimple);   // one 64 KiB part: 16 KiB max
  EXPECT_EQ(nccl_p2p_protocol(12288, 16, 2, kA100), NcclProtocol::kLL);
  EXPECT_EQ(nccl_p2p_protocol(98304, 16, 2, kA100), NcclProtocol::kSimple);      // 2 parts: 32 KiB max

  EXPECT_DOUBLE_EQ(nccl_p2p_channel_nvlink_gbs(kA100), 20.0);
}

// A 64 MiB send/recv ring over 8 H100s runs on 4 channels: ~82 GB/s, far below
// NVLink; from 512 MiB on, 32 channels and NVLink is the limit again.
TEST(CollectiveTuner, NvlinkSendRecvIsChannelBoundBelow512MiB) {
  Fabric f(8);
  CollectiveOptions o;
  o.nvlink_busbw_gbs = 370.0;
  o.nccl = kH100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kSendRecv;
  req.groups = {first_gpus(8)};
  req.bytes = 64.0 * (1 << 20);
  const CollectiveResult mid = tune_collective(sim, req).best;
  EXPECT_NEAR(mid.bandwidth_s, req.bytes / (4 * 20.6e9), 1e-9);
  req.bytes = 8.0 * (1 << 30);
  const CollectiveResult large = tune_collective(sim, req).best;
  // The fabric's NVLink bound (~300 GB/s here), not 32 x 20.6 = 659.
  EXPECT_GT(large.busbw_gbs, 250.0);
  EXPECT_LT(large.busbw_gbs, 371.0);
  // NCCL's p2p protocol is by size: LL for 8 B, Simple for 64 MiB.
  EXPECT_EQ(mid.protocol, NcclProtocol::kSimple);
  req.bytes = 8;
  EXPECT_EQ(tune_collective(sim, req).best.protocol, NcclProtocol::kLL);
}

// NCCL enqueue.cc topoGetAlgoInfo: a ring or tree collective keeps at least
// threads x threadThreshold bytes per channel (LL 512 x 8, x ranks for the
// ring; LL128 640 x 8; Simple 512 x 64), between 1 and all channels.
TEST(NcclTuner, SmallCollectivesRunOnFewerChannels) {
  const auto ar = CollectiveOp::kAllReduce;
  const auto ring = CollectiveAlgorithm::kRing;
  const auto tree = CollectiveAlgorithm::kTree;
  const double kib = 1024;
  // Ring LL, 16 ranks: 64 KiB a channel.
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 8, kA100), 1);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 8 * kib, kA100), 1);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 64 * kib, kA100), 1);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 128 * kib, kA100), 2);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 1024 * kib, kA100), 16);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 16, 1536 * kib, kA100), 24);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, ar, 8, 64 * kib, kA100), 2);  // 32 KiB a channel
  // Tree LL: 4 KiB a channel, whatever the ranks.
  EXPECT_EQ(nccl_collective_channels(tree, NcclProtocol::kLL, ar, 16, 8 * kib, kA100), 2);
  EXPECT_EQ(nccl_collective_channels(tree, NcclProtocol::kLL, ar, 16, 64 * kib, kA100), 16);
  EXPECT_EQ(nccl_collective_channels(tree, NcclProtocol::kLL, ar, 16, 96 * kib, kA100), 24);
  // LL128: 5 KiB; Simple: 32 KiB (all-gather: its whole output, nccl-tests' size).
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL128, ar, 16, 50 * kib, kA100), 10);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kSimple, ar, 16, 256 * kib, kA100), 8);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kSimple, CollectiveOp::kAllGather, 16, 767 * kib, kA100),
            23);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kSimple, ar, 16, 768 * kib, kA100), 24);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kSimple, ar, 8, 1024 * kib, kH100), 32);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kSimple, ar, 8, 256.0 * kib * kib, kH100), 32);
  // NVLS keeps its channels; send/recv has its own rule (nccl_p2p_channels).
  EXPECT_EQ(nccl_collective_channels(CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, ar, 8, 8, kH100), 32);
  EXPECT_EQ(nccl_collective_channels(ring, NcclProtocol::kLL, CollectiveOp::kSendRecv, 2, 8, kA100), 24);
}

// NCCL's busBw is channels x per-channel bandwidth, its caps on the channels in use.
TEST(NcclTuner, ProtocolBandwidthOnFewerChannels) {
  const auto ar = CollectiveOp::kAllReduce;
  const auto ring = CollectiveAlgorithm::kRing;
  // Simple: the channels' share. 1 of 24 channels of 240 GB/s: 10.
  EXPECT_NEAR(nccl_channels_busbw_gbs(ring, NcclProtocol::kSimple, ar, 2, 240.0, 1, kA100), 10.0, 1e-9);
  // LL on 2 AMD nodes: llMaxBw (22.5) caps the total on all channels, not one
  // channel's half of its share.
  EXPECT_NEAR(nccl_channels_busbw_gbs(ring, NcclProtocol::kLL, ar, 2, 240.0, 24, kA100), 22.5, 1e-9);
  EXPECT_NEAR(nccl_channels_busbw_gbs(ring, NcclProtocol::kLL, ar, 2, 240.0, 1, kA100), 5.0, 1e-9);
  EXPECT_NEAR(nccl_channels_busbw_gbs(ring, NcclProtocol::kLL, ar, 2, 240.0, 6, kA100), 22.5, 1e-9);
  // LL128's per-channel cap (20 GB/s on Ampere) on the channels in use: 92% of 10.
  EXPECT_NEAR(nccl_channels_busbw_gbs(ring, NcclProtocol::kLL128, ar, 2, 240.0, 1, kA100), 9.2, 1e-9);
  // All channels (or more): nccl_protocol_busbw_gbs itself.
  for (NcclProtocol p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
    for (CollectiveAlgorithm a : {ring, CollectiveAlgorithm::kTree}) {
      EXPECT_DOUBLE_EQ(nccl_channels_busbw_gbs(a, p, ar, 2, 180.0, 24, kA100),
                       nccl_protocol_busbw_gbs(a, p, ar, 2, 180.0, kA100));
    }
  }
}

// Two DGX A100 nodes, ring LL forced (as in nccl-tests' deepops k8s run): up to
// 64 KiB NCCL runs it on 1 channel, so the bandwidth time grows linearly with
// the size at one channel's LL rate; 128 KiB runs on 2 channels (same time as
// 64 KiB on 1); from 1.5 MiB on all 24. The choice stays NCCL's all-channel
// estimate; large sizes are unchanged.
TEST(CollectiveTuner, SmallRingAndTreeTimesAreOnTheChannelsNcclRuns) {
  Fabric f(16);
  CollectiveOptions o;
  o.nccl = kA100;
  CollectiveSimulator sim(f.topology, f.router, o);
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.groups = {first_gpus(16)};
  auto ring_ll = [&](double bytes) {
    req.bytes = bytes;
    return tune_collective(sim, req, CollectiveAlgorithm::kRing, NcclProtocol::kLL).best;
  };
  const double kib = 1024;
  const CollectiveResult k32 = ring_ll(32 * kib), k64 = ring_ll(64 * kib), k128 = ring_ll(128 * kib);
  EXPECT_EQ(ring_ll(8 * kib).channels, 1);
  EXPECT_EQ(k64.channels, 1);
  EXPECT_EQ(k128.channels, 2);
  EXPECT_EQ(ring_ll(2048 * kib).channels, 24);
  EXPECT_NEAR(k64.bandwidth_s, 2.0 * k32.bandwidth_s, 1e-3 * k64.bandwidth_s);
  EXPECT_NEAR(k128.bandwidth_s, k64.bandwidth_s, 1e-3 * k64.bandwidth_s);
  // One channel's LL rate: half its 1/24 share of the fabric's Simple busbw
  // (~188 GB/s here), far below all channels' (llMaxBw 22.5 GB/s).
  const double one_channel_busbw = 64 * kib * busbw_factor(req.op, 16) / k64.bandwidth_s / 1e9;
  EXPECT_GT(one_channel_busbw, 3.0);
  EXPECT_LT(one_channel_busbw, 5.0);
  EXPECT_GT(k64.time_s, k64.all_channels_time_s + 20e-6);
  // Monotonic in the size, forced and tuned, and unchanged where all channels run.
  double forced_prev = 0, tuned_prev = 0;
  for (double bytes = 8; bytes <= 1024.0 * 1024 * 1024; bytes *= 2) {
    const CollectiveResult forced = ring_ll(bytes);
    EXPECT_GE(forced.time_s, forced_prev) << bytes;
    forced_prev = forced.time_s;
    const CollectiveResult tuned = tune_collective(sim, req).best;
    EXPECT_GE(tuned.time_s, tuned_prev) << bytes;
    tuned_prev = tuned.time_s;
    if (bytes >= 2.0 * 1024 * 1024) {
      EXPECT_EQ(tuned.channels, 24) << bytes;
      EXPECT_DOUBLE_EQ(tuned.time_s, tuned.all_channels_time_s) << bytes;
    }
  }
  // The ranking is on all channels: a ring candidate's estimate is its
  // all-channel time less the posts the time adds (nccl_network_post_us).
  req.bytes = 64 * kib;
  for (const TunerCandidate& c : tune_collective(sim, req).candidates) {
    if (!c.enabled || c.algorithm != CollectiveAlgorithm::kRing) continue;
    const double posts_s = nccl_network_post_us(c.algorithm, c.protocol, req.op, 16, 2, req.bytes, kA100) * 1e-6;
    CollectiveRequest one = req;
    one.algorithm = c.algorithm;
    one.protocol = c.protocol;
    const CollectiveResult r = sim.run(one);
    EXPECT_DOUBLE_EQ(c.estimate_s, r.all_channels_time_s - posts_s);
    EXPECT_EQ(c.channels, r.channels);
  }
  // The tree: LL keeps 4 KiB a channel, so 8 and 16 KiB (2 and 4 channels)
  // take the same bandwidth time before NCCL's size correction.
  req.bytes = 8 * kib;
  const CollectiveResult t8 = tune_collective(sim, req, CollectiveAlgorithm::kTree, NcclProtocol::kLL).best;
  req.bytes = 16 * kib;
  const CollectiveResult t16 = tune_collective(sim, req, CollectiveAlgorithm::kTree, NcclProtocol::kLL).best;
  EXPECT_EQ(t8.channels, 2);
  EXPECT_EQ(t16.channels, 4);
  EXPECT_NEAR(t16.bandwidth_s * nccl_tree_efficiency(NcclProtocol::kLL, 16 * kib),
              t8.bandwidth_s * nccl_tree_efficiency(NcclProtocol::kLL, 8 * kib), 1e-3 * t8.bandwidth_s);
}

}  // namespace
}  // namespace megascale::network
