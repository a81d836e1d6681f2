// tests/sim/failure_sim_test.cc: a host failure injected into the event-level
// step (sim/event_engine.h HostFailure), the hang it causes rank by rank and the
// wait chains that lead back to it (sim/hang_analysis.h), and the job-level
// `simulate --fail-gpu` path (sim/failure_sim.h).
#include "sim/failure_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/scenario.h"
#include "model/schedule.h"
#include "sim/hang_analysis.h"
#include "tests/sim/scenarios.h"
#include "tests/sim/schedule_options.h"

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;

model::Schedule schedule(int pp, int vpp, int microbatches, int dp, bool overlap) {
  return model::build_schedule(testing::options(pp, vpp, microbatches, dp, overlap));
}

double duration(int, int rank, const Op& op) {
  switch (op.kind) {
    case OpKind::kForward: return 0.010 * (1.0 + 0.01 * rank);
    case OpKind::kBackward: return 0.020 * (1.0 + 0.01 * rank);
    case OpKind::kSendActivation:
    case OpKind::kSendGradient: return 0.0007;
    case OpKind::kRecvActivation:
    case OpKind::kRecvGradient: return 0.0;
    case OpKind::kDpAllGather: return 0.003;
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllReduce: return 0.006;
    default: return 0.002;
  }
}

TEST(HostFailure, TheStepHangsAndEveryWaitChainLeadsToTheFailedHost) {
  for (bool overlap : {false, true}) {
    const model::Schedule s = schedule(4, 2, 8, 2, overlap);
    const EventTimeline ok = run_events(s, 3, duration, EventOptions{true, std::nullopt});
    const double healthy = ok.iteration_s;
    for (int rank = 0; rank < 4; ++rank) {
      double rank_done_s = 0;  // when the rank ends its last op, healthy
      for (const model::OpTiming& x : ok.timing[1][rank]) rank_done_s = std::max(rank_done_s, x.end_s);
      for (double fraction : {0.05, 0.5, 0.9}) {
        SCOPED_TRACE("overlap " + std::to_string(overlap) + " rank " + std::to_string(rank) + " at " +
                     std::to_string(fraction));
        const HostFailure failure{1, rank, fraction * healthy};
        const EventTimeline t = run_events(s, 3, duration, EventOptions{true, failure});
        if (failure.at_s >= rank_done_s) {
          // The rank had done its part of the step (the last stage finishes its
          // cool-down early): the step ends; the next one would hang.
          EXPECT_TRUE(t.complete);
          EXPECT_NEAR(t.iteration_s, healthy, 1e-9);  // clock-offset rounding (event_engine.h)
          continue;
        }
        EXPECT_FALSE(t.complete);
        EXPECT_DOUBLE_EQ(t.failed_at_s, failure.at_s);
        // Nothing on the failed host ends after it went down.
        for (size_t k = 0; k < s.ranks[rank].ops.size(); ++k) {
          if (t.state[1][rank][k] == OpState::kEnded) {
            EXPECT_LE(t.timing[1][rank][k].end_s, failure.at_s + 1e-12);
          }
        }

        const HangReport h = analyse_hang(s, t, failure);
        EXPECT_TRUE(h.hung);
        ASSERT_EQ(h.roots.size(), 1u);
        EXPECT_EQ(h.roots[0], std::make_pair(1, rank));
        EXPECT_EQ(h.ranks[1 * 4 + rank].state, RankWait::State::kDead);
        // Every other rank of every replica is stuck: in a p2p receive or a DP
        // collective that needs the failed host, or, having finished its ops,
        // at the end-of-step all-reduce: 3 x 4 - 1.
        EXPECT_EQ(h.blocked + h.waiting_at_step_end, 11);
        if (fraction < 0.5) {
          EXPECT_GT(h.blocked, 0);
        }
        EXPECT_LE(h.last_progress_s, healthy + 1e-9);
      }
    }
  }
}

TEST(HostFailure, APipelineNeighbourWaitsForTheFailedRank) {
  const model::Schedule s = schedule(4, 1, 8, 2, false);
  const double healthy = run_events(s, 2, duration).iteration_s;
  const HostFailure failure{0, 2, 0.3 * healthy};
  const EventTimeline t = run_events(s, 2, duration, EventOptions{false, failure});
  const HangReport h = analyse_hang(s, t, failure);
  // In steady state stage 3 waits for activations from stage 2, stage 1 for
  // gradients from stage 2, both in replica 0.
  const RankWait& next = h.ranks[3];
  ASSERT_EQ(next.state, RankWait::State::kBlocked);
  EXPECT_EQ(next.waits_for, (std::vector<std::pair<int, int>>{{0, 2}})) << next.blocked_on;
  EXPECT_NE(next.blocked_on.find("from pp rank 2"), std::string::npos) << next.blocked_on;
  const RankWait& prev = h.ranks[1];
  EXPECT_EQ(prev.waits_for, (std::vector<std::pair<int, int>>{{0, 2}})) << prev.blocked_on;
  // Replica 1 runs on until it needs replica 0 in a DP collective.
  for (int r = 0; r < 4; ++r) {
    const RankWait& w = h.ranks[4 + r];
    ASSERT_EQ(w.state, RankWait::State::kBlocked);
    EXPECT_NE(w.blocked_on.find("never arrived"), std::string::npos) << w.blocked_on;
    EXPECT_GT(w.last_progress_s, failure.at_s);
  }
}

TEST(HostFailure, AfterTheEndOfTheStepNothingHappens) {
  const model::Schedule s = schedule(4, 2, 8, 2, true);
  const EventTimeline healthy = run_events(s, 2, duration, EventOptions{true, std::nullopt});
  const EventTimeline t =
      run_events(s, 2, duration, EventOptions{true, HostFailure{0, 1, healthy.iteration_s + 1.0}});
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(t.failed_at_s, -1.0);
  EXPECT_NEAR(t.iteration_s, healthy.iteration_s, 1e-9);
  EXPECT_TRUE(analyse_hang(s, t, HostFailure{0, 1, 0}).roots.empty());
}

TEST(HostFailure, BadFailuresAreErrors) {
  const model::Schedule s = schedule(2, 1, 4, 2, false);
  EXPECT_THROW(run_events(s, 2, duration, EventOptions{false, HostFailure{2, 0, 0.1}}), std::invalid_argument);
  EXPECT_THROW(run_events(s, 2, duration, EventOptions{false, HostFailure{0, 2, 0.1}}), std::invalid_argument);
  EXPECT_THROW(run_events(s, 2, duration, EventOptions{false, HostFailure{0, 0, -1.0}}), std::invalid_argument);
}

// The job-level path: GPU -> (DP replica, pipeline rank) in Megatron-LM's order,
// that replica simulated, the hang localised to it.
TEST(FailureSim, AGpuOfTheJobFailsPartWayThroughTheStep) {
  const model::Scenario s = testing::gpt175b("megascale", 4, 2, 4, 8);  // 128 GPUs
  SimOptions o;
  o.comm = CommModel::kAnalytical;
  o.max_replicas = 2;
  const int gpu = 8 * 3 + 8 * 4 * 2 + 5;  // TP 5 of replica 3, stage 2
  const FailureResult r = simulate_failure(s, o, gpu, 1.0);
  EXPECT_EQ(r.tp_rank, 5);
  EXPECT_EQ(r.dp_replica, 3);
  EXPECT_EQ(r.pp_rank, 2);
  ASSERT_LT(r.failed_sim_replica, static_cast<int>(r.replicas.size()));
  EXPECT_EQ(r.replicas[r.failed_sim_replica], 3);
  EXPECT_GE(r.replicas.size(), 2u);
  EXPECT_GT(r.healthy_step_s, 1.0);
  EXPECT_TRUE(r.hang.hung);
  ASSERT_EQ(r.hang.roots.size(), 1u);
  EXPECT_EQ(r.hang.roots[0], std::make_pair(r.failed_sim_replica, 2));
  // The trace has only ops that ended, none on the failed host after 1 s.
  for (const TraceEvent& e : r.trace_events) {
    if (e.rank == 8 * 3 + 8 * 4 * 2) {
      EXPECT_LE(e.end_us, 1e6 + 1e-3);
    }
  }

  EXPECT_THROW(simulate_failure(s, o, 128, 1.0), std::invalid_argument);
  EXPECT_THROW(simulate_failure(s, o, -1, 1.0), std::invalid_argument);
  EXPECT_THROW(simulate_failure(s, o, 0, -0.5), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::sim
