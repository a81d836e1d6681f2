// tests/engine/process_groups_test.cc: Megatron-LM rank layout and the groups
// built from it, 8 ranks as threads (TP=2, PP=2, DP=2) and other shapes.
#include "engine/process_groups.h"

#include <gtest/gtest.h>

#include <mutex>

#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

TEST(RankLayout, TpFastestThenDpThenPp) {
  const GridShape g{2, 2, 2};  // tp, pp, dp
  // rank = tp + dp*TP + pp*TP*DP
  EXPECT_EQ(world_rank_of(g, {1, 0, 0}), 1);
  EXPECT_EQ(world_rank_of(g, {0, 0, 1}), 2);
  EXPECT_EQ(world_rank_of(g, {0, 1, 0}), 4);
  EXPECT_EQ(world_rank_of(g, {1, 1, 1}), 7);
  const GridShape h{4, 3, 2};
  for (int r = 0; r < h.world(); ++r) {
    const RankCoord c = coord_of(h, r);
    EXPECT_EQ(r, c.tp + c.dp * 4 + c.pp * 8);
    EXPECT_EQ(world_rank_of(h, c), r);
  }
  EXPECT_THROW(coord_of(g, 8), std::invalid_argument);
  EXPECT_THROW(world_rank_of(g, {2, 0, 0}), std::invalid_argument);
}

// Megatron-Core's --use-tp-pp-dp-mapping: rank = tp + pp*TP + dp*TP*PP.
TEST(RankLayout, TpFastestThenPpThenDpWhenAsked) {
  const GridShape g{2, 2, 2, true};
  EXPECT_EQ(world_rank_of(g, {1, 0, 0}), 1);
  EXPECT_EQ(world_rank_of(g, {0, 1, 0}), 2);  // the next stage is the next TP group
  EXPECT_EQ(world_rank_of(g, {0, 0, 1}), 4);
  EXPECT_EQ(world_rank_of(g, {1, 1, 1}), 7);
  const GridShape h{4, 3, 2, true};
  for (int r = 0; r < h.world(); ++r) {
    const RankCoord c = coord_of(h, r);
    EXPECT_EQ(r, c.tp + c.pp * 4 + c.dp * 12);
    EXPECT_EQ(world_rank_of(h, c), r);
  }
}

// Each group's all_gather of world ranks must list exactly the expected peers in
// group-rank order, which also proves the split keys.
void check_groups(int tp, int pp, int dp, bool pp_before_dp = false) {
  const int n = tp * pp * dp;
  std::mutex mu;
  int checked = 0;
  run_on_threads(n, [&](Comm& world) {
    ProcessGroups g(world, tp, pp, dp, pp_before_dp);
    const RankCoord c = coord_of({tp, pp, dp, pp_before_dp}, world.rank());
    EXPECT_EQ(g.coord(), c);
    EXPECT_EQ(g.tp_rank(), world.rank() % tp);
    EXPECT_EQ(g.tp().rank(), g.tp_rank());
    EXPECT_EQ(g.pp().rank(), g.pp_rank());
    EXPECT_EQ(g.dp().rank(), g.dp_rank());
    auto members = [&](Comm& group) {
      const float me = static_cast<float>(world.rank());
      std::vector<float> all(group.size());
      group.all_gather(&me, 1, all.data());
      return std::vector<int>(all.begin(), all.end());
    };
    EXPECT_EQ(members(g.tp()), g.tp_peers());
    EXPECT_EQ(members(g.pp()), g.pp_peers());
    EXPECT_EQ(members(g.dp()), g.dp_peers());
    EXPECT_EQ(static_cast<int>(g.tp_peers().size()), tp);
    EXPECT_EQ(static_cast<int>(g.pp_peers().size()), pp);
    EXPECT_EQ(static_cast<int>(g.dp_peers().size()), dp);
    EXPECT_EQ(g.next_pp_world_rank(), g.pp_peers()[(c.pp + 1) % pp]);
    EXPECT_EQ(g.prev_pp_world_rank(), g.pp_peers()[(c.pp + pp - 1) % pp]);
    const std::vector<int> emb = members(g.embedding());
    if (pp > 1 && (g.is_first_stage() || g.is_last_stage())) {
      EXPECT_EQ(emb, (std::vector<int>{g.pp_peers().front(), g.pp_peers().back()}));
    } else {
      EXPECT_EQ(emb, std::vector<int>{world.rank()});
    }
    std::lock_guard<std::mutex> lock(mu);
    ++checked;
  });
  EXPECT_EQ(checked, n);
}

TEST(ProcessGroups, Tp2Pp2Dp2) { check_groups(2, 2, 2); }
TEST(ProcessGroups, Tp4Pp1Dp2) { check_groups(4, 1, 2); }
TEST(ProcessGroups, Tp1Pp3Dp2) { check_groups(1, 3, 2); }
TEST(ProcessGroups, SingleRank) { check_groups(1, 1, 1); }
TEST(ProcessGroups, Tp2Pp2Dp2PipelineBeforeData) { check_groups(2, 2, 2, true); }
TEST(ProcessGroups, Tp1Pp3Dp2PipelineBeforeData) { check_groups(1, 3, 2, true); }

TEST(ProcessGroups, ExplicitPeersForTp2Pp2Dp2) {
  std::vector<std::vector<int>> tp(8), pp(8), dp(8);
  run_on_threads(8, [&](Comm& world) {
    ProcessGroups g(world, 2, 2, 2);
    tp[world.rank()] = g.tp_peers();
    pp[world.rank()] = g.pp_peers();
    dp[world.rank()] = g.dp_peers();
  });
  EXPECT_EQ(tp[5], (std::vector<int>{4, 5}));
  EXPECT_EQ(dp[5], (std::vector<int>{5, 7}));
  EXPECT_EQ(pp[5], (std::vector<int>{1, 5}));
  EXPECT_EQ(pp[2], (std::vector<int>{2, 6}));
}

TEST(ProcessGroups, WrongWorldSizeThrowsOnEveryRank) {
  EXPECT_THROW(run_on_threads(4, [](Comm& world) { ProcessGroups g(world, 2, 2, 2); }),
               std::invalid_argument);
}

}  // namespace
}  // namespace megascale::engine
