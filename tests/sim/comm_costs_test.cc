// tests/sim/comm_costs_test.cc: pipeline sends timed per stage boundary on the
// fabric (sim/comm_costs.h), and the event simulation's sends using them.
#include "sim/comm_costs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/estimator.h"
#include "model/scenario.h"
#include "sim/op_costs.h"
#include "tests/sim/scenarios.h"

namespace megascale::sim {
namespace {

// Megatron-LM preset, 2 x P micro-batches per replica.
model::Scenario gpt175b(int pp, int vpp, int dp) { return testing::gpt175b("megatron", pp, vpp, dp, 2 * pp); }

CommTimes network_times(const model::Scenario& s) {
  const FabricInputs f = testing::megascale_fabric(s);
  return comm_times(s, model::estimate(s), CommModel::kNetwork, &f);
}

// TP 8, DP 32: a stage fills 32 servers, so stages 0-1 share the first set of
// 64 servers behind one set of ToRs and stage 1 -> 2 crosses to the next set
// through the aggregation tier: that boundary is slower (longer path at least,
// ECMP collisions at most). Sends to the previous stage are timed on their own.
TEST(CommCosts, PipelineSendsAreTimedPerBoundary) {
  const model::Scenario s = gpt175b(4, 2, 32);
  const CommTimes t = network_times(s);
  ASSERT_EQ(t.p2p_next_s.size(), 4u);
  ASSERT_EQ(t.p2p_prev_s.size(), 4u);
  EXPECT_LT(t.p2p_next_s[0], t.p2p_next_s[1]);
  EXPECT_LT(t.p2p_prev_s[1], t.p2p_prev_s[2]);
  const double slowest = std::max(*std::max_element(t.p2p_next_s.begin(), t.p2p_next_s.end()),
                                  *std::max_element(t.p2p_prev_s.begin(), t.p2p_prev_s.end()));
  EXPECT_DOUBLE_EQ(t.p2p_s, slowest);
  // Interleaved (V = 2): the last stage feeds the first stage's next chunk.
  EXPECT_GT(t.p2p_next_s[3], 0.0);
  EXPECT_GT(t.p2p_prev_s[0], 0.0);
  EXPECT_DOUBLE_EQ(t.p2p(0, 1), t.p2p_next_s[0]);
  EXPECT_DOUBLE_EQ(t.p2p(2, 1), t.p2p_prev_s[2]);
  EXPECT_DOUBLE_EQ(t.p2p(3, 0), t.p2p_next_s[3]);

  // The event simulation's send op takes its boundary's time.
  const model::Estimate e = model::estimate(s);
  const OpCosts costs(s, e, t);
  model::Op send;
  send.kind = model::OpKind::kSendActivation;
  send.peer = 1;
  EXPECT_DOUBLE_EQ(costs.parts(0, send).pp, t.p2p_next_s[0]);
  send.peer = 2;
  EXPECT_DOUBLE_EQ(costs.parts(1, send).pp, t.p2p_next_s[1]);
}

// The rank order moves the traffic (model/config.h RankOrder): under
// tp-cp-pp-dp the stages of a pipeline are neighbouring servers (one rail hop)
// and the DP peers far apart, so the sends get faster and the DP ring spans
// more of the fabric than under Megatron's default order.
TEST(CommCosts, RankOrderMovesPipelineAndDataParallelTraffic) {
  model::Scenario megatron = gpt175b(4, 2, 32);
  model::Scenario meta = megatron;
  meta.parallel.rank_order = model::RankOrder::kTpCpPpDp;
  const CommTimes a = network_times(megatron), b = network_times(meta);
  EXPECT_LT(b.p2p_s, a.p2p_s);
  for (size_t i = 0; i + 1 < b.p2p_next_s.size(); ++i) EXPECT_LT(b.p2p_next_s[i], a.p2p_s) << i;
  EXPECT_GE(b.dp_reduce(0, 0), a.dp_reduce(0, 0));
}

// Plain 1F1B (V = 1): no wrap-around between the last and the first stage.
TEST(CommCosts, NoWrapAroundWithoutInterleaving) {
  const CommTimes t = network_times(gpt175b(4, 1, 32));
  EXPECT_EQ(t.p2p_next_s[3], 0.0);
  EXPECT_EQ(t.p2p_prev_s[0], 0.0);
  EXPECT_GT(t.p2p_next_s[0], 0.0);
  EXPECT_GT(t.p2p_prev_s[3], 0.0);
}

// The analytical and zero models have one value for every boundary.
TEST(CommCosts, OtherModelsHaveOneValue) {
  const model::Scenario s = gpt175b(4, 2, 32);
  const CommTimes a = comm_times(s, model::estimate(s), CommModel::kAnalytical, nullptr);
  EXPECT_TRUE(a.p2p_next_s.empty());
  EXPECT_GT(a.p2p_s, 0.0);
  EXPECT_DOUBLE_EQ(a.p2p(1, 2), a.p2p_s);
}

}  // namespace
}  // namespace megascale::sim
