// Tests for model/p2p_contention.h: the closed form's ECMP collisions between
// pipeline transfers, and model/fabric_tiers.h, the fabric sizes they use.
#include "model/p2p_contention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/estimator.h"
#include "model/fabric_tiers.h"
#include "model/scenario.h"

namespace megascale::model {
namespace {

// REFERENCE.md "Congestion control and link faults": k = n = 8 equal flows
// hashed onto 8 paths run at about 1 / E[max load] = 0.39 of their rate; with 4
// QPs per flow 0.57, with 16 QPs 0.73.
TEST(P2pContention, ReproducesTheBallsIntoBinsEfficiencies) {
  const std::vector<HashedTier> eight_on_eight = {{1.0, 8.0, 1.0}};
  EXPECT_NEAR(1.0 / expected_ecmp_slowdown(eight_on_eight, 1), 0.39, 0.01);
  EXPECT_NEAR(1.0 / expected_ecmp_slowdown(eight_on_eight, 4), 0.57, 0.01);
  EXPECT_NEAR(1.0 / expected_ecmp_slowdown(eight_on_eight, 16), 0.73, 0.01);
}

// One link: E[max(1, L / c)] with L ~ Poisson(mu), summed term by term here.
TEST(P2pContention, OneLinkIsTheExpectedOverload) {
  for (const double mu : {0.5, 2.0, 6.0}) {
    for (const double c : {1.0, 2.0}) {
      double expected = 0, term = std::exp(-mu);
      for (int k = 0; k < 200; ++k) {
        expected += term * std::max(1.0, k / c);
        term *= mu / (k + 1);
      }
      const std::vector<HashedTier> tier = {{mu, 1.0, c}};
      EXPECT_NEAR(expected_ecmp_slowdown(tier, 1), expected, 1e-6) << mu << " " << c;
    }
  }
}

std::vector<HashedTier> eight_on_eight_uncut() { return {{1.0, 8.0, 1.0}}; }

TEST(P2pContention, GrowsWithLinksAndLoadAndShrinksWithQueuePairs) {
  const std::vector<HashedTier> none;
  EXPECT_DOUBLE_EQ(expected_ecmp_slowdown(none, 1), 1.0);
  const std::vector<HashedTier> idle = {{0.0, 1000.0, 2.0}};
  EXPECT_DOUBLE_EQ(expected_ecmp_slowdown(idle, 1), 1.0);
  double last = 1.0;
  for (const double links : {1.0, 32.0, 1024.0, 32768.0}) {
    const std::vector<HashedTier> t = {{2.0, links, 2.0}};
    const double s = expected_ecmp_slowdown(t, 1);
    EXPECT_GT(s, last) << links;
    last = s;
  }
  const std::vector<HashedTier> light = {{0.5, 512.0, 2.0}}, heavy = {{2.0, 512.0, 2.0}};
  EXPECT_LT(expected_ecmp_slowdown(light, 1), expected_ecmp_slowdown(heavy, 1));
  EXPECT_LT(expected_ecmp_slowdown(heavy, 8), expected_ecmp_slowdown(heavy, 1));
  // Two tiers: at least either alone.
  const std::vector<HashedTier> both = {{2.0, 512.0, 2.0}, {1.5, 512.0, 2.0}};
  EXPECT_GT(expected_ecmp_slowdown(both, 1), expected_ecmp_slowdown(heavy, 1));
  // A link never carries more than the transfers hashed onto its set: one
  // ToR's 2 leaving transfers never overload a 2-transfer uplink, however many
  // links there are; 8 on 8 cut at 3 run faster than uncut.
  const std::vector<HashedTier> two = {{2.0 / 32, 1e6, 2.0, 2.0}};
  EXPECT_DOUBLE_EQ(expected_ecmp_slowdown(two, 1), 1.0);
  const std::vector<HashedTier> cut = {{1.0, 8.0, 1.0, 3.0}};
  EXPECT_LT(expected_ecmp_slowdown(cut, 1), expected_ecmp_slowdown(eight_on_eight_uncut(), 1));
  EXPECT_LE(expected_ecmp_slowdown(cut, 1), 3.0);
  const std::vector<HashedTier> bad = {{1.0, 8.0, 0.0}};
  EXPECT_THROW(expected_ecmp_slowdown(bad, 1), std::invalid_argument);
  EXPECT_THROW(expected_ecmp_slowdown(heavy, 0), std::invalid_argument);
}

// The 175B model on TP 8 x PP 8 x `dp` on the MegaScale fabric (megatron preset).
Scenario gpt175b(int dp) {
  Scenario s = default_scenario("megatron");
  s.parallel.tp = 8;
  s.parallel.pp = 8;
  s.parallel.vpp = 6;
  s.parallel.dp = dp;
  s.parallel.micro_batch = 1;
  s.parallel.global_batch = 8 * dp;
  s.cluster.gpus = s.parallel.gpus();
  return s;
}

// MegaScale's fabric (REFERENCE.md): 64 servers per set of 8 ToRs, 32 x 400G
// ToR uplinks, 32 ToRs and 32 aggregation switches per 2,048-GPU pod.
TEST(FabricTiers, SizesTheMegaScaleFabric) {
  const Scenario s = gpt175b(192);
  const FabricTiersOrFault f = fabric_tiers(s.network, s.hardware, 12288);
  ASSERT_TRUE(f.tiers.has_value());
  EXPECT_EQ(f.tiers->servers_per_group, 64);
  EXPECT_EQ(f.tiers->tors_per_group, 8);
  EXPECT_EQ(f.tiers->tor_uplinks, 32);
  EXPECT_EQ(f.tiers->agg_uplinks, 32);
  EXPECT_EQ(f.tiers->servers_per_pod, 256);
  EXPECT_EQ(f.tiers->pods, 6);
  EXPECT_EQ(f.tiers->tors, 192);
  NetworkConfig two = NetworkConfig::for_preset("rail-2tier");
  const FabricTiersOrFault too_big = fabric_tiers(two, s.hardware, 12288);
  ASSERT_TRUE(too_big.fault.has_value());
  EXPECT_EQ(too_big.fault->key, "cluster.gpus");
  NetworkConfig odd = s.network;
  odd.oversubscription = {2.5};
  const FabricTiersOrFault bad = fabric_tiers(odd, s.hardware, 12288);
  ASSERT_TRUE(bad.fault.has_value());
  EXPECT_EQ(bad.fault->key, "network.oversubscription");
  EXPECT_NE(bad.fault->reason.find("not whole ports"), std::string::npos) << bad.fault->reason;
}

TEST(P2pContention, OnlyTransfersThatLeaveTheirToRsCollide) {
  // 256 GPUs = 32 servers: one set of ToRs, nothing goes up.
  EXPECT_DOUBLE_EQ(pp_p2p_slowdown(gpt175b(4)), 1.0);
  Scenario one_stage = gpt175b(192);
  one_stage.parallel.pp = 1;
  EXPECT_DOUBLE_EQ(pp_p2p_slowdown(one_stage), 1.0);
  // 12,288 GPUs: a stage is 192 servers, every transfer leaves its ToRs and
  // most their pod; sim/'s flow solve puts the boundaries at 3.3-4.2x.
  const double big = pp_p2p_slowdown(gpt175b(192));
  EXPECT_GT(big, 3.0);
  EXPECT_LT(big, 5.0);
  // 1,024 GPUs: one boundary in four crosses to the next set of ToRs.
  const double mid = pp_p2p_slowdown(gpt175b(16));
  EXPECT_GT(mid, 1.0);
  EXPECT_LT(mid, big);
  // More queue pairs per connection spread the load; adaptive routing on a 1:1
  // fabric removes the collisions.
  Scenario qps = gpt175b(192);
  qps.network.qps_per_connection = 4;
  EXPECT_LT(pp_p2p_slowdown(qps), big);
  Scenario adaptive = gpt175b(192);
  adaptive.network.routing = "adaptive";
  EXPECT_DOUBLE_EQ(pp_p2p_slowdown(adaptive), 1.0);
  // 3:1 at every tier: 48 ports down (96 x 200G NICs: 96 servers per set of
  // ToRs), 16 x 400G up. A stage of 1,536 GPUs fills two sets, so each ToR
  // sends its 96 servers' transfers up 16 links that carry 2 at full rate:
  // 3x even when spread evenly (and the same at the aggregation tier).
  adaptive.network.oversubscription = {3.0};
  EXPECT_NEAR(pp_p2p_slowdown(adaptive), 3.0, 1e-9);
}

// The estimator's p2p time carries the slowdown on its bandwidth term; a
// blocking (Megatron) pipeline exposes it on every exchange.
TEST(P2pContention, StretchesTheEstimatorsPipelineTransfers) {
  Scenario ecmp = gpt175b(192);
  Scenario adaptive = ecmp;
  adaptive.network.routing = "adaptive";
  const Estimate a = estimate(adaptive), e = estimate(ecmp);
  const double slowdown = pp_p2p_slowdown(ecmp);
  EXPECT_GT(e.p2p_s, 2.5 * a.p2p_s);
  EXPECT_LT(e.p2p_s, slowdown * a.p2p_s);
  EXPECT_GT(e.breakdown.pp_exposed_s, 2.5 * a.breakdown.pp_exposed_s);
  EXPECT_DOUBLE_EQ(e.breakdown.compute_s, a.breakdown.compute_s);
  // The tied embedding's gradient crosses from the first stage to the last,
  // 7 x 192 servers away: the same collisions stretch it.
  EXPECT_GT(embedding_sync_slowdown(ecmp), 2.0);
  EXPECT_DOUBLE_EQ(embedding_sync_slowdown(adaptive), 1.0);
  EXPECT_GT(e.breakdown.embedding_sync_s, 2.0 * a.breakdown.embedding_sync_s);
  // Inside one set of ToRs nothing changes.
  EXPECT_DOUBLE_EQ(embedding_sync_slowdown(gpt175b(4)), 1.0);
}

}  // namespace
}  // namespace megascale::model
