// tests/model/rank_order_test.cc: where each rank sits (model/config.h
// RankOrder, gpu_of, grid_coord_of), the links the closed form takes from it
// (model/estimator.h parallel_links) and the scenario key that chooses it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/config.h"
#include "model/estimator.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "tests/model/valid_scenario.h"

namespace megascale::model {
namespace {

ParallelConfig grid(int tp, int cp, int pp, int dp, RankOrder order) {
  ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  p.pp = pp;
  p.dp = dp * cp;  // folded (model/config.h)
  p.rank_order = order;
  return p;
}

// Every (tp, gradient rank, pipeline rank) lands on its own GPU, and
// grid_coord_of finds it again, in both orders and with CP.
TEST(RankOrder, GpuOfIsABijectionAndGridCoordOfItsInverse) {
  for (RankOrder order : {RankOrder::kTpCpDpPp, RankOrder::kTpCpPpDp}) {
    for (const ParallelConfig& p : {grid(2, 1, 3, 4, order), grid(4, 2, 2, 3, order), grid(1, 4, 2, 2, order)}) {
      std::set<int> seen;
      for (int r = 0; r < p.pp; ++r) {
        for (int d = 0; d < p.dp; ++d) {
          for (int t = 0; t < p.tp; ++t) {
            const int g = gpu_of(p, t, d, r);
            ASSERT_GE(g, 0);
            ASSERT_LT(g, p.gpus());
            EXPECT_TRUE(seen.insert(g).second) << to_string(order) << " gpu " << g << " twice";
            const GridCoord c = grid_coord_of(p, g);
            EXPECT_EQ(c.tp, t);
            EXPECT_EQ(c.dp, d);
            EXPECT_EQ(c.pp, r);
          }
        }
      }
      EXPECT_EQ(static_cast<int>(seen.size()), p.gpus());
    }
  }
}

// Megatron's default puts the replicas next to each other and the stages far
// apart; tp-cp-pp-dp the other way round. CP ranks follow TP in both.
TEST(RankOrder, NeighboursByOrder) {
  const ParallelConfig megatron = grid(2, 2, 4, 3, RankOrder::kTpCpDpPp);
  const ParallelConfig meta = grid(2, 2, 4, 3, RankOrder::kTpCpPpDp);
  for (const ParallelConfig& p : {megatron, meta}) EXPECT_EQ(gpu_of(p, 0, 1, 0), 2);  // CP rank 1
  EXPECT_EQ(gpu_of(megatron, 0, 0, 1), 2 * 6);      // next stage: past all tp x cp x dp
  EXPECT_EQ(gpu_of(megatron, 0, 2, 0), 2 * 2);      // next replica: past tp x cp
  EXPECT_EQ(gpu_of(meta, 0, 0, 1), 2 * 2);          // next stage: past tp x cp
  EXPECT_EQ(gpu_of(meta, 0, 2, 0), 2 * 2 * 4);      // next replica: past tp x cp x pp
}

// The closed form's links follow the order: TP 2 x PP 4 fills an 8-GPU
// server with one pipeline under tp-cp-pp-dp (stages over NVLink, every DP peer
// on another server), while Megatron's order puts four DP peers on a server.
TEST(RankOrder, ParallelLinksFollowTheOrder) {
  Scenario s = default_scenario("megatron");
  s.parallel = grid(2, 1, 4, 8, RankOrder::kTpCpDpPp);
  s.cluster.gpus = 64;
  const GpuProfile& gpu = hardware_profile(s);
  const ParallelLinks megatron = parallel_links(s, gpu);
  EXPECT_FALSE(megatron.pp_inside_node);
  s.parallel.rank_order = RankOrder::kTpCpPpDp;
  const ParallelLinks meta = parallel_links(s, gpu);
  EXPECT_TRUE(meta.pp_inside_node);
  EXPECT_GT(meta.pp.busbw_gbs, megatron.pp.busbw_gbs);  // NVLink against a NIC
  // Megatron: 4 DP ranks per server leave on 4 NICs; tp-cp-pp-dp: 1.
  EXPECT_DOUBLE_EQ(megatron.dp.busbw_gbs, 4 * meta.dp.busbw_gbs);
  // A whole job on one server: both orders keep everything on NVLink.
  s.parallel = grid(2, 1, 2, 2, RankOrder::kTpCpPpDp);
  s.cluster.gpus = 8;
  const ParallelLinks small = parallel_links(s, gpu);
  EXPECT_TRUE(small.pp_inside_node);
  s.parallel.rank_order = RankOrder::kTpCpDpPp;
  EXPECT_DOUBLE_EQ(parallel_links(s, gpu).dp.busbw_gbs, small.dp.busbw_gbs);
}

TEST(RankOrder, ScenarioKeyChoosesItAndNamesBadValues) {
  const std::string text = testing::kValidScenario;
  EXPECT_EQ(parse_scenario(text, "t.toml").parallel.rank_order, RankOrder::kTpCpDpPp);
  EXPECT_EQ(parse_scenario(text, "t.toml", {"parallel.rank_order=\"tp-cp-pp-dp\""}).parallel.rank_order,
            RankOrder::kTpCpPpDp);
  try {
    parse_scenario(text, "t.toml", {"parallel.rank_order=\"pp-dp-tp\""});
    ADD_FAILURE() << "an unknown order was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "parallel.rank_order");
    EXPECT_NE(e.reason().find("tp-cp-pp-dp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megascale::model
